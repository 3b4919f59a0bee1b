//! The runner's decisions (skip, fail, environment), the matrix's checks
//! and the summary, tested apart from spawning the commands.
use super::*;
use std::path::PathBuf;

fn cell(name: &str) -> Cell {
    Cell {
        name: name.into(),
        command: vec!["true".into()],
        env: BTreeMap::new(),
        needs: None,
        hide_toolkit: false,
    }
}

fn cx(toolkit: bool, require_toolkit: bool) -> Context {
    Context {
        toolkit: toolkit.then(|| Found {
            nvcc: PathBuf::from("/tk/bin/nvcc"),
        }),
        require_toolkit,
        vulkan: true,
        require_vulkan: false,
    }
}

#[test]
fn vulkan_cell_without_a_driver_skips_or_fails_when_required() {
    let mut c = cell("wgpu-agreement");
    c.needs = Some(Needs::Vulkan);
    let mut cx = cx(true, false);
    assert_eq!(plan(&c, &cx, NOTHING_SET), Plan::Run { env: env(&[]) });
    cx.vulkan = false;
    assert_eq!(plan(&c, &cx, NOTHING_SET), Plan::Skip(NO_VULKAN.into()));
    cx.require_vulkan = true;
    let Plan::Fail(why) = plan(&c, &cx, NOTHING_SET) else {
        panic!("a required driver that is missing fails the cell")
    };
    assert!(why.contains("--require-vulkan"), "{why}");
    // Other cells do not care.
    assert_eq!(
        plan(&cell("fmt"), &cx, NOTHING_SET),
        Plan::Run { env: env(&[]) }
    );
}

#[test]
fn the_matrix_marks_the_wgpu_agreement_cell_as_needing_vulkan() {
    let matrix = Matrix::load().unwrap();
    let cell = matrix
        .cells
        .iter()
        .find(|c| c.name == "wgpu-agreement")
        .unwrap();
    assert_eq!(cell.needs, Some(Needs::Vulkan));
}

fn env(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

const NOTHING_SET: fn(&str) -> bool = |_| false;

#[test]
fn the_committed_matrix_parses() {
    let text = std::fs::read_to_string(workspace::ci_matrix_file()).unwrap();
    let matrix = Matrix::parse(&text).unwrap();
    let names: Vec<&str> = matrix.cells.iter().map(|c| c.name.as_str()).collect();
    assert!(
        names.contains(&"fmt") && names.contains(&"cuda-build"),
        "{names:?}"
    );
    let hidden = matrix.cells.iter().find(|c| c.hide_toolkit).unwrap();
    assert_eq!(hidden.name, "cpu-only-build");
}

#[test]
fn matrix_fields_parse() {
    let m = Matrix::parse(
        r#"
        [[cell]]
        name = "doc"
        command = ["cargo", "doc"]
        env = { RUSTDOCFLAGS = "-D warnings" }
        [[cell]]
        name = "gpu"
        command = ["x"]
        needs = "toolkit"
        [[cell]]
        name = "cpu"
        command = ["y"]
        hide_toolkit = true
        "#,
    )
    .unwrap();
    assert_eq!(m.cells[0].env, env(&[("RUSTDOCFLAGS", "-D warnings")]));
    assert_eq!(m.cells[1].needs, Some(Needs::Toolkit));
    assert!(m.cells[2].hide_toolkit && m.cells[2].needs.is_none());
}

#[test]
fn malformed_matrix_is_a_one_line_error() {
    let check = |text: &str, want: &str| {
        let err = Matrix::parse(text).unwrap_err();
        assert!(err.contains(want), "{err}");
        assert!(!err.contains('\n'), "{err}");
    };
    check(
        "[[cell]]\nname = \"a\"\ncommand = \"cargo\"\n",
        "matrix.toml:3:11: invalid type",
    );
    check(
        "[[cell]]\nname = \"a\"\ncommand = [\"x\"]\nneeds = \"gpu\"\n",
        "unknown variant `gpu`",
    );
    check(
        "[[cell]]\nname = \"a\"\ncomand = [\"x\"]\n",
        "unknown field `comand`",
    );
    check(
        "[[cell]]\nname = \"a\"\ncommand = []\n",
        "cell `a` has an empty `command`",
    );
    check(
        "[[cell]]\nname = \"a\"\ncommand = [\"x\"]\n[[cell]]\nname = \"a\"\ncommand = [\"y\"]\n",
        "cell `a` is defined twice",
    );
    check(
        "[[cell]]\nname = \"a\"\ncommand = [\"x\"]\nneeds = \"toolkit\"\nhide_toolkit = true\n",
        "both needs and hides",
    );
    check("", "no `[[cell]]`");
}

#[test]
fn only_keeps_matrix_order_and_rejects_unknown_names() {
    let m = Matrix {
        cells: vec![cell("fmt"), cell("clippy"), cell("test")],
    };
    let picked = m.select(&["test".into(), "fmt".into()]).unwrap();
    let names: Vec<&str> = picked.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["fmt", "test"]);
    assert_eq!(m.select(&[]).unwrap().len(), 3);
    let err = m.select(&["clipy".into()]).unwrap_err();
    assert!(err.is::<crate::cli::UsageError>());
    assert_eq!(
        err.to_string(),
        "unknown cell `clipy` in --only; cells: fmt, clippy, test"
    );
}

#[test]
fn toolkit_cell_without_toolkit_skips_or_fails_when_required() {
    let mut c = cell("cuda-build");
    c.needs = Some(Needs::Toolkit);
    assert_eq!(
        plan(&c, &cx(false, false), NOTHING_SET),
        Plan::Skip(NO_TOOLKIT.into())
    );
    let Plan::Fail(why) = plan(&c, &cx(false, true), NOTHING_SET) else {
        panic!("expected a failure under --require-toolkit");
    };
    assert!(why.starts_with(NO_TOOLKIT), "{why}");
}

#[test]
fn toolkit_cell_with_toolkit_runs_with_only_the_require_switch_injected() {
    let mut c = cell("cuda-build");
    c.needs = Some(Needs::Toolkit);
    assert_eq!(
        plan(&c, &cx(true, true), NOTHING_SET),
        Plan::Run {
            env: env(&[(REQUIRE_TOOLKIT_VAR, "1")])
        }
    );
    assert_eq!(
        plan(&c, &cx(true, false), NOTHING_SET),
        Plan::Run { env: env(&[]) }
    );
    c.env = env(&[("NVCC", "/mine/nvcc")]);
    assert_eq!(
        plan(&c, &cx(true, false), NOTHING_SET),
        Plan::Run {
            env: env(&[("NVCC", "/mine/nvcc")])
        }
    );
}

#[test]
fn hide_toolkit_sets_every_kernel_crates_switch_off() {
    let mut c = cell("cpu-only-build");
    c.hide_toolkit = true;
    assert_eq!(
        plan(&c, &cx(true, true), NOTHING_SET),
        Plan::Run {
            env: env(&[("KILN_ANNEAL_CUDA", "off"), ("KILN_CUDA", "off")])
        }
    );
}

#[test]
fn plain_cell_runs_without_toolkit_even_when_required() {
    let c = cell("fmt");
    let cx = Context {
        toolkit: None,
        require_toolkit: true,
        vulkan: false,
        require_vulkan: true,
    };
    // It runs, told that a test's real-toolkit half may not skip.
    assert_eq!(
        plan(&c, &cx, NOTHING_SET),
        Plan::Run {
            env: env(&[(REQUIRE_TOOLKIT_VAR, "1")])
        }
    );
}

#[test]
fn relative_toolkit_paths_are_made_absolute_against_the_root() {
    let env = absolute_tool_paths(
        env(&[
            ("CUDA_PATH", "target/cuda-toolkit/cuda"),
            ("NVCC", "/opt/cuda/bin/nvcc"),
            ("CARGO_TARGET_DIR", "target/downstream"),
        ]),
        Path::new("/ws"),
    );
    assert_eq!(env["CUDA_PATH"], "/ws/target/cuda-toolkit/cuda");
    assert_eq!(env["NVCC"], "/opt/cuda/bin/nvcc");
    // cargo resolves its own target dir against its working dir, the root.
    assert_eq!(env["CARGO_TARGET_DIR"], "target/downstream");
}

#[test]
fn header_shows_added_variables() {
    let mut c = cell("doc");
    c.command = vec!["cargo".into(), "doc".into()];
    c.env = env(&[("A", "1")]);
    let all = env(&[("A", "1"), ("KILN_CUDA", "off"), ("NVCC", "/tk/bin/nvcc")]);
    assert_eq!(command_line(&c, &all), "A=1 KILN_CUDA=off cargo doc");
    c.env = env(&[("RUSTDOCFLAGS", "-D warnings")]);
    c.command.push("it's".into());
    let all = env(&[("RUSTDOCFLAGS", "-D warnings")]);
    assert_eq!(
        command_line(&c, &all),
        r#"RUSTDOCFLAGS='-D warnings' cargo doc "it's""#
    );
}

fn results() -> Vec<CellResult> {
    let r = |name: &str, outcome, ms| CellResult {
        name: name.into(),
        outcome,
        time: Duration::from_millis(ms),
    };
    vec![
        r("fmt", Outcome::Pass, 412),
        r("clippy", Outcome::Fail("exit status 101".into()), 83_250),
        r("doc", Outcome::Pass, 12_345),
        r("cuda-build", Outcome::Skip(NO_TOOLKIT.into()), 0),
        r(
            "ptx-audit",
            Outcome::Fail(format!("{NO_TOOLKIT}; --require-toolkit")),
            0,
        ),
    ]
}

#[test]
fn table_snapshot() {
    insta::assert_snapshot!(render_table(&results()));
}

#[test]
fn summary_line_has_the_form_ci_reads() {
    let summary = Summary::of(&results());
    assert_eq!(summary.to_string(), "ci-cpu: 2 passed, 2 failed, 1 skipped");
}

#[test]
fn times_format_short() {
    assert_eq!(format_time(Duration::from_millis(412)), "0.4s");
    assert_eq!(format_time(Duration::from_secs(245)), "4m05s");
}

#[test]
fn failed_cells_last_lines_come_before_the_table_under_their_names() {
    let text = render_failed_tails(&[
        (
            "package".into(),
            vec!["error: one".into(), "error: two".into()],
        ),
        ("test".into(), vec![]),
    ]);
    assert_eq!(
        text,
        "--- package: its last 2 lines ---\nerror: one\nerror: two\n--- test: its last 0 lines ---\n"
    );
    assert_eq!(render_failed_tails(&[]), "");
}
