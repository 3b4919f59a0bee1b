//! The GPU bundle's tests: its run.sh (and the scripts beside it) parse,
//! count skips as failures, sanitize as configured, and report the ranks.

use super::*;

fn script() -> String {
    let bin = |n: &str| (n.to_string(), PathBuf::from(n));
    run_script(&[bin("anneal__anneal"), bin("apps"), bin("xtask")])
}

#[test]
fn a_gpu_bundle_from_before_markers_is_adopted_with_its_files_only() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("bin")).unwrap();
    std::fs::write(dir.path().join("run.sh"), script()).unwrap();
    std::fs::write(dir.path().join("bin/apps"), "").unwrap();
    std::fs::write(dir.path().join("nccl-suppressions.xml"), "").unwrap();
    let files = unmarked_gpu_bundle(dir.path()).unwrap();
    assert_eq!(files, ["run.sh", "bin/apps", "nccl-suppressions.xml"]);
    // A crate bundle's run.sh is not a gpu-bundle's.
    let other = cargo_kiln::bundle::crate_script("k", &["k__t"]);
    std::fs::write(dir.path().join("run.sh"), other).unwrap();
    assert_eq!(unmarked_gpu_bundle(dir.path()), None);
}

#[test]
fn run_script_is_valid_bash() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("run.sh");
    std::fs::write(&path, script()).unwrap();
    let out = Command::new("bash").arg("-n").arg(&path).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// ranks.sh and two-hosts.sh parse, and ranks.sh, run on a stand-in
/// apps, prints each run's launch-to-result and iterations' times and
/// both speedups.
#[test]
fn ranks_step_reports_the_whole_run_beside_the_iterations() {
    let dir = tempfile::tempdir().unwrap();
    for (name, text) in RANKS_SCRIPTS {
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        let out = Command::new("bash").arg("-n").arg(&path).output().unwrap();
        assert!(
            out.status.success(),
            "{name}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    std::fs::create_dir(dir.path().join("bin")).unwrap();
    let apps = "#!/usr/bin/env bash\n\
        if [[ -n ${KILN_FAULT_EXIT_RANK:-} ]]; then echo 'launch: rank 1 exited with status 3'; exit 1; fi\n\
        if [[ $1 == launch ]]; then echo '[rank 0] rank 0: whole run 500.0 ms (setup 300.0 ms, iterations 200.0 ms)'; \
        else echo 'whole run 1000.0 ms (setup 100.0 ms, iterations 800.0 ms)'; fi\n";
    std::fs::write(dir.path().join("bin/apps"), apps).unwrap();
    std::fs::write(
        dir.path().join("two-hosts.sh"),
        "echo two-hosts ran \"$@\"\n",
    )
    .unwrap();
    let driver = "set -uo pipefail; chmod +x bin/apps; gpus=2; \
        step() { local name=$1; shift; if \"$@\"; then echo \"pass: $name\"; else echo \"FAIL: $name\"; fi; }; \
        source ./ranks.sh";
    let out = Command::new("bash")
        .args(["-c", driver])
        .current_dir(dir.path())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(!text.contains("FAIL"), "{text}");
    assert!(text.contains("one gpu: launch to result"), "{text}");
    assert!(text.contains("iterations 800.0 ms"), "{text}");
    assert!(text.contains("2 ranks: launch to result"), "{text}");
    assert!(
        text.contains("iterations 4.00x (200.0 ms vs 800.0 ms)"),
        "{text}"
    );
    assert!(
        text.contains("two-hosts ran --apps bin/apps --backend cuda"),
        "{text}"
    );
}

#[test]
fn bench_step_runs_xtask_bench_with_pytorch_only_when_its_script_is_there() {
    let script = script();
    assert!(script.contains(
        r#"./bin/xtask bench --apps bin/apps ${torch[@]+"${torch[@]}"} --out "${OUT:-.}/bench""#
    ));
    assert!(
        script.contains("if [[ -f torch_anchor.py ]]; then torch=(--torch-script torch_anchor.py)")
    );
    // Only test binaries run as tests.
    assert!(script.contains("for t in anneal__anneal; do"));
}

/// The bench step run for real with a fake xtask that prints its
/// arguments: each anchor script is passed exactly when it sits beside
/// run.sh, and a missing flash-kmeans/ is one line.
#[test]
fn bench_step_passes_each_anchor_script_only_when_it_is_beside_run_sh() {
    use std::os::unix::fs::PermissionsExt as _;
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("bin")).unwrap();
    let xtask = dir.path().join("bin/xtask");
    std::fs::write(&xtask, "#!/bin/sh\necho \"xtask $*\"\n").unwrap();
    std::fs::set_permissions(&xtask, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::write(dir.path().join("run.sh"), script()).unwrap();
    let bench = || {
        let out = Command::new("bash")
            .args(["run.sh", "bench"])
            .current_dir(dir.path())
            .env("OUT", "o")
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let text = bench();
    assert!(
        text.contains("xtask bench --apps bin/apps --out o/bench"),
        "{text}"
    );
    assert!(
        text.contains("kmeans_anchors.py is not beside run.sh"),
        "{text}"
    );
    std::fs::write(dir.path().join("kmeans_anchors.py"), "").unwrap();
    let text = bench();
    assert!(
        text.contains(
            "xtask bench --apps bin/apps --kmeans-anchors kmeans_anchors.py --out o/bench"
        ),
        "{text}"
    );
    assert!(
        text.contains("flash-kmeans/ is not beside run.sh"),
        "{text}"
    );
    std::fs::create_dir(dir.path().join("flash-kmeans")).unwrap();
    std::fs::write(dir.path().join("torch_anchor.py"), "").unwrap();
    let text = bench();
    assert!(
        text.contains("--torch-script torch_anchor.py --kmeans-anchors kmeans_anchors.py"),
        "{text}"
    );
    assert!(!text.contains("not beside"), "{text}");
}

/// The tests step run for real on fake binaries: a binary that prints
/// `skipped:` and exits 0 is a failure, and the tests see
/// `KILN_REQUIRE_GPU=1`.
#[test]
fn run_sh_counts_a_skip_as_a_failure_and_requires_the_gpu() {
    use std::os::unix::fs::PermissionsExt as _;
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    let fake = |name: &str, body: &str| {
        let path = bin.join(name);
        std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        (name.to_string(), path)
    };
    let binaries = [
        fake(
            "gpu-core__gpu",
            "echo 'test launch ... ok'; [ \"$KILN_REQUIRE_GPU\" = 1 ] || exit 7",
        ),
        fake(
            "anneal__anneal",
            "echo 'skipped: no CUDA device (none)'; exit 0",
        ),
        fake("apps", "exit 0"),
    ];
    std::fs::write(dir.path().join("run.sh"), run_script(&binaries)).unwrap();
    let out = Command::new("bash")
        .args(["run.sh", "tests"])
        .current_dir(dir.path())
        .env_remove("KILN_REQUIRE_GPU")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(!out.status.success(), "{stdout}");
    assert!(stdout.contains("<== gpu-core__gpu: pass"), "{stdout}");
    assert!(stdout.contains("<== anneal__anneal: FAIL"), "{stdout}");
    assert_eq!(
        stdout.lines().last(),
        Some("gpu-bundle: 2 passed, 1 failed"),
        "{stdout}"
    );
}

/// The sanitize step run on a fake binary and a fake compute-sanitizer
/// that logs its arguments: the NCCL test is skipped in the binary's
/// main steps and sanitized alone, with NCCL's suppressions and nothing
/// excluded.
#[test]
fn nccl_tests_are_sanitized_apart_with_nccls_suppressions() {
    use std::os::unix::fs::PermissionsExt as _;
    let dir = tempfile::tempdir().unwrap();
    let (bin, tools) = (dir.path().join("bin"), dir.path().join("tools"));
    std::fs::create_dir(&bin).unwrap();
    std::fs::create_dir(&tools).unwrap();
    let executable = |path: &Path, body: &str| {
        std::fs::write(path, format!("#!/bin/sh\n{body}\n")).unwrap();
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
    };
    let log = dir.path().join("san.log");
    executable(
        &tools.join("compute-sanitizer"),
        &format!("echo \"$*\" >> {}; exit 0", log.display()),
    );
    executable(&bin.join("anneal__anneal"), "exit 0");
    executable(&bin.join("gpu-core__memcheck_control"), "exit 0");
    let binaries = [("anneal__anneal".to_string(), bin.join("anneal__anneal"))];
    std::fs::write(dir.path().join("run.sh"), run_script(&binaries)).unwrap();
    let path = format!("{}:{}", tools.display(), std::env::var("PATH").unwrap());
    Command::new("bash")
        .args(["run.sh", "sanitize"])
        .current_dir(dir.path())
        .env("PATH", path)
        .output()
        .unwrap();
    let log = std::fs::read_to_string(&log).unwrap();
    let lines: Vec<&str> = log.lines().collect();
    let main: Vec<&&str> = lines
        .iter()
        .filter(|l| !l.contains("--suppressions"))
        .collect();
    let apart: Vec<&&str> = lines
        .iter()
        .filter(|l| l.contains("--suppressions"))
        .collect();
    // memcheck, racecheck, initcheck, synccheck, and the control.
    assert_eq!(main.len(), 5, "{log}");
    for line in &main[..4] {
        assert!(line.ends_with("--skip sharded_over_gpus"), "{line}");
    }
    assert_eq!(apart.len(), 4, "{log}");
    for line in &apart {
        assert!(
            line.contains("--suppressions nccl-suppressions.xml")
                && line.ends_with("--test-threads=1 sharded_over_gpus")
                && !line.contains("--kernel-name-exclude"),
            "{line}"
        );
    }
    // API reports are off in memcheck's step alone.
    assert!(apart[0].contains("--tool memcheck --report-api-errors no --suppressions"));
    assert!(apart[1..]
        .iter()
        .all(|l| !l.contains("--report-api-errors")));
}

/// Every suppression is scoped to NCCL's kernels and has its reason
/// written beside it.
#[test]
fn nccl_suppressions_are_scoped_to_nccl_and_give_their_reasons() {
    let records: Vec<&str> = NCCL_SUPPRESSIONS.split("<record>").skip(1).collect();
    assert_eq!(records.len(), 2);
    let before: Vec<&str> = NCCL_SUPPRESSIONS.split("<record>").collect();
    for (i, record) in records.iter().enumerate() {
        assert!(
            record.contains("<func>ncclDevKernel_.*</func>"),
            "record {i} is not scoped to NCCL's kernels: {record}"
        );
        // The text before each record ends with its reason (a comment),
        // or follows the previous record of the same reason.
        let prior = before[i].trim_end();
        assert!(
            prior.ends_with("-->") || prior.ends_with("</record>"),
            "record {i} has no reason beside it"
        );
    }
    assert!(!NCCL_SUPPRESSIONS.contains("<kind>Memcheck</kind>"));
}

/// The by-name tests' memcheck step keeps API reports on: their
/// parameter tables come from the images, with no failing driver call.
#[test]
fn launches_by_name_run_under_memcheck_with_api_reports_on() {
    let script = run_script(&[("gpu-core__gpu".into(), PathBuf::from("bin/gpu-core__gpu"))]);
    let step = script.lines().find(|l| l.contains("(launches by name)"));
    let step = step.expect("a by-name memcheck step");
    assert!(step.contains("--tool memcheck --leak-check full"), "{step}");
    assert!(!step.contains("--report-api-errors"), "{step}");
}

/// A binary of typed and by-name launches (candle-patterns' `by_name`,
/// kernel-trees' `byname`) runs both under memcheck: it is in the sanitize
/// loop and the by-name list (a step of its by-name tests, the main step
/// skipping them), and no binary's main memcheck step is gated off (the
/// typed tests ran under no memcheck while the binary counted as by-name
/// only).
#[test]
fn typed_and_by_name_launches_both_run_under_memcheck() {
    for name in ["candle-patterns__by_name", "kernel-trees__byname"] {
        let script = run_script(&[(name.into(), PathBuf::from(format!("bin/{name}")))]);
        let lists: Vec<&str> = script
            .lines()
            .filter(|l| l.trim_start().starts_with("for ") && l.contains(name))
            .collect();
        assert!(
            lists.iter().any(|l| l.contains("for t in"))
                && lists.iter().any(|l| l.contains("--skip by_name")),
            "{name}: {lists:?}"
        );
        let main = script
            .lines()
            .position(|l| l.contains(r#"step "memcheck $t" "#))
            .expect("a main memcheck step");
        let before = script.lines().nth(main - 1).unwrap();
        assert!(!before.trim_start().starts_with("if "), "{before}");
    }
}

/// trybuild's tests run cargo, which a GPU host does not have: every
/// `tests/compile_fail.rs` of a bundled crate is left out of the bundle (the
/// candle-patterns one reached a GPU host and failed there before this).
#[test]
fn every_trybuild_test_of_a_bundled_crate_is_left_out() {
    let root = crate::workspace::root();
    let mut checked = 0;
    let dirs = GPU_CRATES
        .iter()
        .map(|(folder, _)| (folder.to_string(), root.join("crates").join(folder)))
        .chain(OUTSIDE_CRATES.iter().map(|c| {
            let dir = root.join(c.manifest).parent().unwrap().to_path_buf();
            (c.name.to_string(), dir)
        }));
    for (name, dir) in dirs {
        let Ok(entries) = std::fs::read_dir(dir.join("tests")) else {
            continue;
        };
        for entry in entries {
            let path = entry.unwrap().path();
            let Ok(text) = std::fs::read_to_string(&path) else {
                continue;
            };
            if !text.contains("trybuild::TestCases") {
                continue;
            }
            let stem = path.file_stem().unwrap().to_str().unwrap();
            let binary = format!("{name}__{stem}");
            assert!(
                NOT_BUNDLED.contains(&binary.as_str()),
                "{binary} uses trybuild; add it to NOT_BUNDLED"
            );
            checked += 1;
        }
    }
    assert!(
        checked >= 3,
        "found {checked} trybuild tests: the scan lost them"
    );
}
