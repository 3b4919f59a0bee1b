//! `examples/downstream` (a crate outside the workspace) through every
//! subcommand of the built `cargo-kiln` binary, with the pinned toolkit:
//! `build` and `audit` reports pinned by snapshots (timings and paths
//! normalised), `doctor --json`, and `bundle`'s tree and `run.sh` syntax,
//! and a re-bundle into kiln's own folder (only kiln's files replaced).
//! Without a toolkit the toolkit tests print `skipped:`, and fail instead
//! under `KILN_REQUIRE_TOOLKIT=1` (CI's `cargo-kiln` cell). Bad input
//! needs no toolkit: one line, exit 2.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use kiln_output::testing::names;

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn downstream() -> PathBuf {
    workspace().join("examples/downstream/Cargo.toml")
}

/// The toolkit root the workspace's build would use (its project-local
/// install, or the discovery variables), or `None`, printing `skipped:`;
/// a panic under `KILN_REQUIRE_TOOLKIT=1`.
fn toolkit() -> Option<PathBuf> {
    let local = workspace().join("target/cuda-toolkit");
    let found = cargo_kiln::project::discovery_with_local(&local).toolkit;
    match found {
        Some(tk) => Some(tk.root),
        None if std::env::var_os("KILN_REQUIRE_TOOLKIT").is_some() => {
            panic!("KILN_REQUIRE_TOOLKIT is set but no CUDA toolkit was found (cargo xtask toolkit install)")
        }
        None => {
            eprintln!("skipped: no CUDA toolkit (cargo xtask toolkit install)");
            None
        }
    }
}

/// `cargo-kiln kiln ARGS` on examples/downstream, with a target dir of the
/// tests' own (kept between runs: later runs rebuild only what changed) and
/// the toolkit handed over as `CUDA_PATH`.
fn kiln(args: &[&str], toolkit: Option<&Path>) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_cargo-kiln"));
    cmd.arg("kiln")
        .args(args)
        .arg("--manifest-path")
        .arg(downstream())
        .env(
            "CARGO_TARGET_DIR",
            workspace().join("target/cargo-kiln-tests"),
        )
        .env_remove("DOWNSTREAM_CUDA_ARCHS");
    if let Some(root) = toolkit {
        for var in ["NVCC", "CUDA_HOME", "CUDA_ROOT"] {
            cmd.env_remove(var);
        }
        cmd.env("CUDA_PATH", root);
    }
    cmd.output().expect("cargo-kiln runs")
}

fn stdout_of(out: &Output) -> String {
    assert!(
        out.status.success(),
        "cargo-kiln failed ({}):\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout.clone()).unwrap()
}

#[test]
fn build_reports_what_each_fat_binary_holds() {
    let Some(tk) = toolkit() else { return };
    let out = kiln(&["build", "--arch", "sm_80,sm_90", "--json"], Some(&tk));
    let mut report: serde_json::Value = serde_json::from_str(&stdout_of(&out)).unwrap();
    // What changes from run to run (timings, whether the cache or nvcc
    // served a module, the cache's place) is normalised; the archs read
    // back from the fat binary are not.
    report["cache"] = serde_json::Value::Null;
    report["toolkit"] = "CUDA (normalised)".into();
    for module in report["modules"].as_array_mut().unwrap() {
        module["compile_ms"] = serde_json::Value::Null;
        module["cache_hits"] = 0.into();
        module["status"] = "(normalised)".into();
        module["size_bytes"] = 0.into();
    }
    insta::assert_snapshot!(serde_json::to_string_pretty(&report).unwrap());
}

#[test]
fn audit_passes_and_checks_the_abi_from_the_bindings() {
    let Some(tk) = toolkit() else { return };
    let out = kiln(&["audit", "--arch", "sm_80,sm_90"], Some(&tk));
    let text = stdout_of(&out);
    assert!(!text.contains("not audited"), "{text}");
    insta::assert_snapshot!(text);
    let json: serde_json::Value = serde_json::from_str(&stdout_of(&kiln(
        &["audit", "--arch", "sm_80,sm_90", "--json"],
        Some(&tk),
    )))
    .unwrap();
    assert_eq!(json["violations"], serde_json::json!([]));
}

#[test]
fn audit_release_audits_the_release_build() {
    let Some(tk) = toolkit() else { return };
    let release = workspace().join("target/cargo-kiln-tests/release/build");
    let json: serde_json::Value = serde_json::from_str(&stdout_of(&kiln(
        &["audit", "--release", "--arch", "sm_80,sm_90", "--json"],
        Some(&tk),
    )))
    .unwrap();
    assert_eq!(json["violations"], serde_json::json!([]));
    // The release profile's build script wrote the manifest audited.
    let manifests: Vec<PathBuf> = std::fs::read_dir(&release)
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("downstream-"))
        .map(|e| e.path().join("out/downstream-manifest.toml"))
        .filter(|p| p.is_file())
        .collect();
    assert_eq!(manifests.len(), 1, "{manifests:?} in {}", release.display());
    // `--release` with `--prebuilt` (which builds nothing) is refused.
    let out = kiln(&["audit", "--release", "--prebuilt", "x"], None);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--release"));
}

#[test]
fn doctor_finds_the_toolkit_and_the_crates_module() {
    let Some(tk) = toolkit() else { return };
    let json: serde_json::Value =
        serde_json::from_str(&stdout_of(&kiln(&["doctor", "--json"], Some(&tk)))).unwrap();
    assert_eq!(json["found_by"], "CUDA_PATH");
    assert_eq!(json["modules"], serde_json::json!([["saxpy", "fatbin"]]));
    assert_eq!(json["arch_spec"], "sm_80,sm_90");
    assert_eq!(json["problems"], serde_json::json!([]));
}

#[test]
fn bundle_holds_the_tests_the_control_and_a_valid_run_sh() {
    let Some(tk) = toolkit() else { return };
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("bundle");
    let out = kiln(
        &[
            "bundle",
            "--arch",
            "sm_90",
            "--out",
            out_dir.to_str().unwrap(),
        ],
        Some(&tk),
    );
    stdout_of(&out);
    let bins = names(&out_dir.join("bin"));
    // The bindings check reads the source tree: left out by default.
    assert_eq!(
        bins,
        [
            "downstream__downstream",
            "downstream__saxpy",
            "kiln-memcheck-control"
        ]
    );
    let control = std::fs::read(out_dir.join("bin/kiln-memcheck-control")).unwrap();
    assert_eq!(&control[..4], b"\x7fELF", "the control is an executable");
    let run = out_dir.join("run.sh");
    let syntax = Command::new("bash").arg("-n").arg(&run).output().unwrap();
    assert!(
        syntax.status.success(),
        "{}",
        String::from_utf8_lossy(&syntax.stderr)
    );
    let script = std::fs::read_to_string(&run).unwrap();
    assert!(script.contains("for t in downstream__downstream downstream__saxpy; do"));
    assert!(script.contains("./bin/kiln-memcheck-control; [[ $? == 99 ]]"));
    rebundle_replaces_only_kilns_files(&tk, &out_dir);
}

/// Re-runs over the bundle at `out_dir`: a file of the user's in it is
/// refused before the build, naming it, nothing touched; a listed file
/// turned into a symlink out is removed as a link, its target kept; a
/// re-run leaves exactly the new bundle's files (issue 26).
fn rebundle_replaces_only_kilns_files(tk: &Path, out_dir: &Path) {
    let arg = out_dir.to_str().unwrap();
    let bundle = |exclude: &str| {
        kiln(
            &[
                "bundle",
                "--arch",
                "sm_90",
                "--exclude",
                exclude,
                "--out",
                arg,
            ],
            Some(tk),
        )
    };
    std::fs::write(out_dir.join("bin/notes.txt"), "mine").unwrap();
    assert_usage_error(
        &bundle("bindings"),
        "holds `bin/notes.txt`, which kiln did not write",
    );
    assert_eq!(
        std::fs::read_to_string(out_dir.join("bin/notes.txt")).unwrap(),
        "mine"
    );
    std::fs::remove_file(out_dir.join("bin/notes.txt")).unwrap();
    let outside = out_dir.with_file_name("precious.sh");
    std::fs::write(&outside, "mine").unwrap();
    std::fs::remove_file(out_dir.join("run.sh")).unwrap();
    std::os::unix::fs::symlink(&outside, out_dir.join("run.sh")).unwrap();
    stdout_of(&bundle("saxpy"));
    assert_eq!(std::fs::read_to_string(&outside).unwrap(), "mine");
    let bins = names(&out_dir.join("bin"));
    // `--exclude saxpy` in place of the default: the old saxpy binary went.
    assert_eq!(
        bins,
        [
            "downstream__bindings",
            "downstream__downstream",
            "kiln-memcheck-control"
        ]
    );
    assert_eq!(names(out_dir.parent().unwrap()), ["bundle", "precious.sh"]);
}

/// One line on stderr, exit status 2.
fn assert_usage_error(out: &Output, says: &str) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
    assert!(stderr.contains(says), "{stderr}");
}

#[test]
fn bad_input_is_one_line_and_exit_2() {
    let bin = env!("CARGO_BIN_EXE_cargo-kiln");
    let out = Command::new(bin)
        .args([
            "kiln",
            "audit",
            "--manifest-path",
            "/nonexistent/Cargo.toml",
        ])
        .output()
        .unwrap();
    assert_usage_error(&out, "no such file; give the path of a crate's Cargo.toml");
    let out = kiln(&["build", "--arch", "sm_5"], None);
    assert_usage_error(&out, "--arch");
    let tmp = tempfile::tempdir().unwrap();
    let out = Command::new(bin)
        .args(["kiln", "doctor"])
        .current_dir(tmp.path())
        .output()
        .unwrap();
    assert_usage_error(&out, "no Cargo.toml in");
}

/// Issue 42: `cargo kiln toolkit [install]` serves the user's store, which
/// every crate shares, so it runs outside any crate.
#[test]
fn toolkit_runs_outside_a_crate() {
    let bin = env!("CARGO_BIN_EXE_cargo-kiln");
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("store");
    let out = Command::new(bin)
        .args(["kiln", "toolkit"])
        .current_dir(tmp.path())
        .env("KILN_TOOLKIT_HOME", &store)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains(&store.display().to_string()), "{stdout}");
}
