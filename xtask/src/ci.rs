//! `cargo xtask ci-cpu [--require-toolkit] [--only CELL]...`: runs the
//! CPU-only CI matrix of `ci/matrix.toml`, one cell after another, and
//! prints a summary table and the `N passed, N failed, N skipped` line.
//!
//! Deciding what runs (skip, fail, environment) is pure and tested apart from
//! spawning the commands.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::Result;
use serde::Deserialize;

use crate::cli::{usage_error, CiArgs};
use crate::discovery::{self, Found};
use crate::{config, workspace};

/// Why a toolkit cell does not run when there is no toolkit.
const NO_TOOLKIT: &str = "no CUDA toolkit found (run `cargo xtask toolkit install`)";

/// Entry point for `cargo xtask ci-cpu ...`.
pub(crate) fn run(args: &CiArgs) -> Result<()> {
    let require_toolkit = args.require_toolkit;
    let matrix = Matrix::load()?;
    let cells = matrix.select(&args.only)?;
    // The cells find the toolkit (and xtask codegen the libclang) the same
    // way on their own; nothing is injected, so no cell's environment differs
    // from a plain `cargo` run and nothing rebuilds for it.
    let found = discovery::toolkit_present();
    match &found {
        Some(f) => println!("ci-cpu: CUDA toolkit: {}", f.nvcc.display()),
        None => println!("ci-cpu: {NO_TOOLKIT}"),
    }
    let context = Context {
        toolkit: found,
        require_toolkit,
    };
    let is_set = |k: &str| std::env::var_os(k).is_some();

    let root = workspace::root();
    let total = cells.len();
    let mut results = Vec::with_capacity(total);
    for (i, cell) in cells.iter().enumerate() {
        let plan = plan(cell, &context, is_set);
        let outcome = match plan {
            Plan::Run { env } => {
                println!(
                    "==> [{}/{total}] {}: {}",
                    i + 1,
                    cell.name,
                    command_line(cell, &env)
                );
                let started = Instant::now();
                let outcome = run_cell(&root, cell, &absolute_tool_paths(env, &root));
                let time = started.elapsed();
                if let Outcome::Fail(why) = &outcome {
                    println!("==> [{}/{total}] {}: FAIL: {why}", i + 1, cell.name);
                }
                results.push(CellResult {
                    name: cell.name.clone(),
                    outcome,
                    time,
                });
                continue;
            }
            Plan::Skip(why) => {
                println!("==> [{}/{total}] {}: skip: {why}", i + 1, cell.name);
                Outcome::Skip(why)
            }
            Plan::Fail(why) => {
                println!("==> [{}/{total}] {}: FAIL: {why}", i + 1, cell.name);
                Outcome::Fail(why)
            }
        };
        results.push(CellResult {
            name: cell.name.clone(),
            outcome,
            time: Duration::ZERO,
        });
    }

    println!();
    print!("{}", render_table(&results));
    let summary = Summary::of(&results);
    println!("{summary}");
    if summary.failed > 0 {
        std::process::exit(1);
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// ci/matrix.toml

/// The whole `ci/matrix.toml`: cells in the order they run.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Matrix {
    // Defaulted so an empty file gets `check`'s message, not serde's.
    #[serde(rename = "cell", default)]
    pub(crate) cells: Vec<Cell>,
}

/// One `[[cell]]`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Cell {
    pub(crate) name: String,
    /// argv, run from the workspace root.
    pub(crate) command: Vec<String>,
    #[serde(default)]
    pub(crate) env: BTreeMap<String, String>,
    #[serde(default)]
    pub(crate) needs: Option<Needs>,
    /// Run with `KILN_CUDA=off`: the build behaves as if there were no toolkit.
    #[serde(default)]
    pub(crate) hide_toolkit: bool,
}

/// What a cell needs besides Rust.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Needs {
    Toolkit,
}

impl Matrix {
    fn load() -> Result<Self> {
        let path = workspace::ci_matrix_file();
        let matrix: Matrix = config::load(&path, &workspace::display(&path))?;
        matrix
            .check()
            .map_err(|e| usage_error!("{}: {e}", workspace::display(&path)))?;
        Ok(matrix)
    }

    #[cfg(test)]
    fn parse(text: &str) -> Result<Self, String> {
        let matrix: Matrix = config::parse("matrix.toml", text)?;
        matrix.check()?;
        Ok(matrix)
    }

    fn check(&self) -> Result<(), String> {
        if self.cells.is_empty() {
            return Err("no `[[cell]]`; add at least one".into());
        }
        for (i, cell) in self.cells.iter().enumerate() {
            if cell.name.is_empty() || cell.name.contains(char::is_whitespace) {
                return Err(format!(
                    "cell {} has an empty or spaced name `{}`",
                    i + 1,
                    cell.name
                ));
            }
            if self.cells[..i].iter().any(|c| c.name == cell.name) {
                return Err(format!("cell `{}` is defined twice; rename one", cell.name));
            }
            if cell.command.first().is_none_or(String::is_empty) {
                return Err(format!("cell `{}` has an empty `command`", cell.name));
            }
            if cell.hide_toolkit && cell.needs == Some(Needs::Toolkit) {
                return Err(format!(
                    "cell `{}` both needs and hides the toolkit; drop one",
                    cell.name
                ));
            }
        }
        Ok(())
    }

    /// The cells named by `--only` (in matrix order), or all of them.
    fn select(&self, only: &[String]) -> Result<Vec<&Cell>> {
        if let Some(unknown) = only
            .iter()
            .find(|o| !self.cells.iter().any(|c| &c.name == *o))
        {
            let names: Vec<&str> = self.cells.iter().map(|c| c.name.as_str()).collect();
            return Err(usage_error!(
                "unknown cell `{unknown}` in --only; cells: {}",
                names.join(", ")
            ));
        }
        Ok(self
            .cells
            .iter()
            .filter(|c| only.is_empty() || only.contains(&c.name))
            .collect())
    }
}

// ---------------------------------------------------------------------------
// deciding what runs

/// What the runner knows that decides the plan of each cell.
#[derive(Debug)]
pub(crate) struct Context {
    pub(crate) toolkit: Option<Found>,
    pub(crate) require_toolkit: bool,
}

/// What to do with one cell.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Plan {
    /// Run it with these variables added to the inherited environment.
    Run {
        env: BTreeMap<String, String>,
    },
    Skip(String),
    /// Fail without running (a required toolkit is missing).
    Fail(String),
}

/// Decides whether `cell` runs and with what environment. `is_set` says
/// whether a variable is already in the environment xtask was started with.
pub(crate) fn plan(cell: &Cell, cx: &Context, is_set: impl Fn(&str) -> bool) -> Plan {
    if cell.needs == Some(Needs::Toolkit) && cx.toolkit.is_none() {
        return if cx.require_toolkit {
            Plan::Fail(format!("{NO_TOOLKIT}; --require-toolkit"))
        } else {
            Plan::Skip(NO_TOOLKIT.to_string())
        };
    }
    let mut env = BTreeMap::new();
    if cell.hide_toolkit && !is_set("KILN_CUDA") {
        env.insert("KILN_CUDA".to_string(), "off".to_string());
    }
    // The cell's own settings win.
    env.extend(cell.env.clone());
    Plan::Run { env }
}

/// Variables naming a toolkit or libclang path. Build scripts read them from
/// their package's dir, not the workspace root, and nvcc runs from OUT_DIR,
/// so a relative value in a cell (`CUDA_PATH = "target/cuda-toolkit/cuda"`)
/// is made absolute against the root.
const TOOL_PATH_VARS: &[&str] = &[
    "NVCC",
    "CUDA_PATH",
    "CUDA_HOME",
    "CUDA_ROOT",
    "LIBCLANG_PATH",
];

/// `env` with every relative [`TOOL_PATH_VARS`] value joined onto `root`.
fn absolute_tool_paths(mut env: BTreeMap<String, String>, root: &Path) -> BTreeMap<String, String> {
    for (key, value) in &mut env {
        if TOOL_PATH_VARS.contains(&key.as_str()) && Path::new(value.as_str()).is_relative() {
            *value = root.join(&*value).display().to_string();
        }
    }
    env
}

/// The header's rendering of a cell: `KEY=V ... argv`, showing the cell's
/// own variables and `KILN_CUDA`, not the toolkit paths announced at the start.
fn command_line(cell: &Cell, env: &BTreeMap<String, String>) -> String {
    env.iter()
        .filter(|(k, _)| cell.env.contains_key(*k) || *k == "KILN_CUDA")
        .map(|(k, v)| format!("{k}={}", shell_word(v)))
        .chain(cell.command.iter().map(|a| shell_word(a)))
        .collect::<Vec<_>>()
        .join(" ")
}

/// `word` quoted for a POSIX shell when it needs it, so headers can be
/// pasted into a terminal.
fn shell_word(word: &str) -> String {
    // With NULs allowed the quoter cannot fail; a NUL cannot reach a shell
    // anyway, and the header is for reading.
    shlex::Quoter::new()
        .allow_nul(true)
        .quote(word)
        .map_or_else(|_| word.to_string(), std::borrow::Cow::into_owned)
}

/// Runs the cell's command with inherited stdout/stderr (live output).
fn run_cell(root: &Path, cell: &Cell, env: &BTreeMap<String, String>) -> Outcome {
    let status = Command::new(&cell.command[0])
        .args(&cell.command[1..])
        .current_dir(root)
        .envs(env)
        .status();
    match status {
        Ok(s) if s.success() => Outcome::Pass,
        Ok(s) => Outcome::Fail(match s.code() {
            Some(code) => format!("exit status {code}"),
            None => s.to_string(),
        }),
        Err(e) => Outcome::Fail(format!("cannot run `{}`: {e}", cell.command[0])),
    }
}

// ---------------------------------------------------------------------------
// results

/// How a cell ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Outcome {
    Pass,
    Fail(String),
    Skip(String),
}

/// One row of the summary table.
#[derive(Debug, Clone)]
pub(crate) struct CellResult {
    pub(crate) name: String,
    pub(crate) outcome: Outcome,
    pub(crate) time: Duration,
}

/// Counts for the final line, which the CI system reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Summary {
    pub(crate) passed: usize,
    pub(crate) failed: usize,
    pub(crate) skipped: usize,
}

impl Summary {
    pub(crate) fn of(results: &[CellResult]) -> Self {
        let count = |f: fn(&Outcome) -> bool| results.iter().filter(|r| f(&r.outcome)).count();
        Summary {
            passed: count(|o| matches!(o, Outcome::Pass)),
            failed: count(|o| matches!(o, Outcome::Fail(_))),
            skipped: count(|o| matches!(o, Outcome::Skip(_))),
        }
    }
}

impl std::fmt::Display for Summary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "ci-cpu: {} passed, {} failed, {} skipped",
            self.passed, self.failed, self.skipped
        )
    }
}

/// The summary table: cell, result, time, and why for skips and failures.
pub(crate) fn render_table(results: &[CellResult]) -> String {
    let rows: Vec<[String; 4]> = results
        .iter()
        .map(|r| {
            let (result, why) = match &r.outcome {
                Outcome::Pass => ("pass", ""),
                Outcome::Fail(why) => ("FAIL", why.as_str()),
                Outcome::Skip(why) => ("skip", why.as_str()),
            };
            let time = match r.outcome {
                Outcome::Pass | Outcome::Fail(_) if !r.time.is_zero() => format_time(r.time),
                _ => "-".to_string(),
            };
            [r.name.clone(), result.to_string(), time, why.to_string()]
        })
        .collect();
    let header = ["cell", "result", "time", "note"].map(String::from);
    let width = |col: usize| {
        std::iter::once(&header)
            .chain(&rows)
            .map(|r| r[col].chars().count())
            .max()
            .unwrap_or(0)
    };
    let (w0, w1, w2) = (width(0), width(1), width(2));
    let mut out = String::new();
    for row in std::iter::once(&header).chain(&rows) {
        let line = format!(
            "{:w0$}  {:w1$}  {:>w2$}  {}",
            row[0], row[1], row[2], row[3]
        );
        let _ = writeln!(out, "{}", line.trim_end());
    }
    out
}

/// `0.4s`, `12.3s`, `4m05s`.
fn format_time(d: Duration) -> String {
    let secs = d.as_secs_f64();
    if secs < 60.0 {
        format!("{secs:.1}s")
    } else {
        let whole = d.as_secs();
        format!("{}m{:02}s", whole / 60, whole % 60)
    }
}

#[cfg(test)]
mod tests {
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
        }
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
    fn toolkit_cell_with_toolkit_runs_with_nothing_injected() {
        let mut c = cell("cuda-build");
        c.needs = Some(Needs::Toolkit);
        assert_eq!(
            plan(&c, &cx(true, true), NOTHING_SET),
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
    fn hide_toolkit_sets_kiln_cuda_off() {
        let mut c = cell("cpu-only-build");
        c.hide_toolkit = true;
        assert_eq!(
            plan(&c, &cx(true, true), NOTHING_SET),
            Plan::Run {
                env: env(&[("KILN_CUDA", "off")])
            }
        );
    }

    #[test]
    fn plain_cell_runs_without_toolkit_even_when_required() {
        let c = cell("fmt");
        let cx = Context {
            toolkit: None,
            require_toolkit: true,
        };
        assert_eq!(plan(&c, &cx, NOTHING_SET), Plan::Run { env: env(&[]) });
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
}
