//! `cargo kiln new` as users run it: one-line errors that leave nothing
//! behind, and (ignored by default: it builds a crate, minutes) a new crate
//! outside the repository that passes fmt, clippy and its tests CPU-only and
//! with the project-local CUDA toolkit, its bindings as `cargo kiln codegen`
//! writes them and a header edited without regenerating a build error.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Command;

use assert_cmd::Command as Bin;

/// `cargo-kiln kiln new ARGS...`, as cargo runs it for `cargo kiln new`.
fn kiln_new<I: IntoIterator<Item = S>, S: AsRef<OsStr>>(args: I) -> assert_cmd::assert::Assert {
    Bin::cargo_bin("cargo-kiln")
        .unwrap()
        .args(["kiln", "new"])
        .args(args)
        .assert()
}

/// The one line a failed `cargo kiln new` prints.
fn one_line_error(assert: assert_cmd::assert::Assert) -> String {
    let output = assert.failure().get_output().clone();
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.starts_with("error: "), "{stderr}");
    stderr.trim_end().to_owned()
}

/// The kiln checkout this test runs in.
fn kiln_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

#[test]
fn a_bad_name_is_one_line_and_creates_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let error = one_line_error(kiln_new([
        OsStr::new("My Kernels"),
        OsStr::new("--path"),
        tmp.path().join("x").as_os_str(),
    ]));
    assert_eq!(
        error,
        "error: the crate name `My Kernels` must start with a lowercase letter (a-z)"
    );
    assert_eq!(std::fs::read_dir(tmp.path()).unwrap().count(), 0);
}

#[test]
fn a_folder_with_files_is_refused_and_left_as_it_was() {
    let tmp = tempfile::tempdir().unwrap();
    let dest = tmp.path().join("taken");
    std::fs::create_dir(&dest).unwrap();
    std::fs::write(dest.join("notes.txt"), "mine").unwrap();
    let error = one_line_error(kiln_new([
        OsStr::new("taken"),
        OsStr::new("--path"),
        dest.as_os_str(),
    ]));
    assert_eq!(
        error,
        format!(
            "error: {} already exists and is not empty; choose another name or --path",
            dest.display()
        )
    );
    let left: Vec<_> = std::fs::read_dir(tmp.path()).unwrap().collect();
    assert_eq!(left.len(), 1, "no staging dir left beside it");
    assert_eq!(
        std::fs::read_to_string(dest.join("notes.txt")).unwrap(),
        "mine"
    );
}

#[test]
fn a_folder_that_is_not_a_kiln_checkout_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let error = one_line_error(kiln_new([
        OsStr::new("saxpy-lab"),
        OsStr::new("--path"),
        tmp.path().join("saxpy-lab").as_os_str(),
        OsStr::new("--kiln-path"),
        tmp.path().as_os_str(),
    ]));
    assert!(error.contains("is not a kiln checkout"), "{error}");
    assert_eq!(std::fs::read_dir(tmp.path()).unwrap().count(), 0);
}

#[test]
fn an_empty_folder_is_filled_and_the_default_is_the_name() {
    let tmp = tempfile::tempdir().unwrap();
    let empty = tmp.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    kiln_new([
        OsStr::new("saxpy-lab"),
        OsStr::new("--path"),
        empty.as_os_str(),
    ])
    .success();
    assert!(empty.join("src/bindings.rs").is_file());

    Bin::cargo_bin("cargo-kiln")
        .unwrap()
        .current_dir(tmp.path())
        .args(["kiln", "new", "by-name"])
        .assert()
        .success();
    let manifest = std::fs::read_to_string(tmp.path().join("by-name/Cargo.toml")).unwrap();
    assert!(manifest.contains("name = \"by-name\""), "{manifest}");
    let names: Vec<String> = std::fs::read_dir(tmp.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names.len(), 2, "no staging dir left: {names:?}");
}

/// The `[workspace.dependencies]` line of `gpu-core` in a made crate.
fn gpu_core_line(dir: &Path) -> String {
    let manifest = std::fs::read_to_string(dir.join("Cargo.toml")).unwrap();
    manifest
        .lines()
        .find(|l| l.starts_with("gpu-core = { package"))
        .unwrap_or_else(|| panic!("{manifest}"))
        .to_owned()
}

/// Run from the build tree (no install record), the new crate points at the
/// checkout this cargo-kiln was built from: never at a made-up URL.
#[test]
fn with_no_flag_a_new_crate_depends_on_the_checkout_cargo_kiln_came_from() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("k");
    kiln_new([OsStr::new("k"), OsStr::new("--path"), dir.as_os_str()]).success();
    let line = gpu_core_line(&dir);
    let expected = kiln_root().join("crates/gpu-core");
    assert!(
        line.contains(&format!("path = \"{}\"", expected.display())),
        "{line}"
    );
}

/// Installed by `cargo install --git`, the new crate depends on that
/// repository at the commit Cargo recorded in `$CARGO_HOME/.crates2.json`;
/// a record for another version, or a damaged one, is not used.
#[test]
fn an_installed_cargo_kiln_points_new_crates_at_its_git_source_and_commit() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("cargo-home");
    std::fs::create_dir_all(home.join("bin")).unwrap();
    let exe = home.join("bin/cargo-kiln");
    std::fs::copy(assert_cmd::cargo::cargo_bin("cargo-kiln"), &exe).unwrap();
    let version = env!("CARGO_PKG_VERSION");
    let record = |id: &str| {
        let json = format!(r#"{{"installs":{{"{id}":{{"bins":["cargo-kiln"]}}}}}}"#);
        std::fs::write(home.join(".crates2.json"), json).unwrap();
    };
    let new = |name: &str| {
        let dir = tmp.path().join(name);
        Bin::new(&exe)
            .env("CARGO_HOME", &home)
            .env_remove("CARGO_INSTALL_ROOT")
            .args(["kiln", "new", name, "--path"])
            .arg(&dir)
            .assert()
            .success();
        gpu_core_line(&dir)
    };
    record(&format!(
        "cargo-kiln {version} (git+https://h.example/kiln?branch=main#0123abc)"
    ));
    let line = new("from-git");
    assert!(
        line.contains(r#"git = "https://h.example/kiln", rev = "0123abc""#),
        "{line}"
    );
    // Another version's record, and a damaged file: the build checkout.
    for damaged in [
        "cargo-kiln 0.0.1 (git+https://h.example/kiln#0123abc)".to_owned(),
        "{".to_owned(),
    ] {
        if damaged == "{" {
            std::fs::write(home.join(".crates2.json"), "{").unwrap();
        } else {
            record(&damaged);
        }
        let line = new(&format!("fallback-{}", damaged.len()));
        assert!(line.contains("path = "), "{damaged}: {line}");
    }
    // --kiln-git wins over the record; an empty one is one line.
    let dir = tmp.path().join("flag");
    Bin::new(&exe)
        .env("CARGO_HOME", &home)
        .args([
            "kiln",
            "new",
            "flag",
            "--kiln-git",
            "https://other.example/k",
            "--path",
        ])
        .arg(&dir)
        .assert()
        .success();
    assert!(gpu_core_line(&dir).contains(r#"git = "https://other.example/k" }"#));
    let err = one_line_error(
        Bin::new(&exe)
            .args(["kiln", "new", "empty", "--kiln-git", " "])
            .current_dir(tmp.path())
            .assert(),
    );
    assert!(err.contains("--kiln-git is empty"), "{err}");
    assert!(!tmp.path().join("empty").exists());
}

/// `cargo ARGS` in `dir` with `env` added and the `unset` variables removed.
fn cargo_command(dir: &Path, args: &[&str], env: &[(&str, &OsStr)], unset: &[&str]) -> Command {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut command = Command::new(cargo);
    command
        .current_dir(dir)
        .args(args)
        .envs(env.iter().copied());
    for name in unset {
        command.env_remove(name);
    }
    command
}

/// A step of the heavy test, which must succeed (its output goes to the
/// terminal: the build is the progress).
fn cargo(dir: &Path, args: &[&str], env: &[(&str, &OsStr)], unset: &[&str]) {
    eprintln!("kiln-new: cargo {}", args.join(" "));
    let status = cargo_command(dir, args, env, unset)
        .status()
        .expect("cargo runs");
    let line = args.join(" ");
    assert!(
        status.success(),
        "`cargo {line}` failed in {}",
        dir.display()
    );
}

/// A step that must fail: its output.
fn cargo_fails(dir: &Path, args: &[&str], env: &[(&str, &OsStr)]) -> String {
    let output = cargo_command(dir, args, env, &[])
        .output()
        .expect("cargo runs");
    let text = String::from_utf8_lossy(&output.stdout) + String::from_utf8_lossy(&output.stderr);
    assert!(
        !output.status.success(),
        "`cargo {}` passed: {text}",
        args.join(" ")
    );
    text.into_owned()
}

/// Set by the CI cell: the toolkit half must run (no skip).
const REQUIRE_TOOLKIT_ENV: &str = "KILN_REQUIRE_TOOLKIT";

#[test]
#[ignore = "builds a new crate and its dependencies (minutes): the ci cell `kiln-new` runs it"]
fn a_new_crate_passes_fmt_clippy_and_tests_cpu_only_and_with_the_toolkit_and_every_subcommand() {
    let root = kiln_root();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().canonicalize().unwrap().join("saxpy-lab");
    assert!(
        !dir.starts_with(&root),
        "{} must be outside the repository",
        dir.display()
    );
    // No --kiln-path: the crate depends on the checkout this cargo-kiln was
    // built from, as a user's `cargo kiln new` does after `cargo install --path`.
    kiln_new([
        OsStr::new("saxpy-lab"),
        OsStr::new("--path"),
        dir.as_os_str(),
    ])
    .success();
    // The workspace's versions: resolves as kiln's own build did, no index update.
    std::fs::copy(root.join("Cargo.lock"), dir.join("Cargo.lock")).unwrap();
    // Outside the new crate and kept between runs, so dependencies build once.
    let target = Path::new(env!("CARGO_TARGET_TMPDIR")).join("kiln-new");
    let target = ("CARGO_TARGET_DIR", target.as_os_str());

    cargo(&dir, &["fmt", "--check"], &[], &[]);
    let off = ("SAXPY_LAB_CUDA", OsStr::new("off"));
    let clippy = [
        "clippy",
        "--workspace",
        "--all-targets",
        "--",
        "-D",
        "warnings",
    ];
    // CPU-only: no GPU code, so a GPU requirement of the caller's does not apply.
    let cpu_unset = ["KILN_REQUIRE_GPU", "SAXPY_LAB_REQUIRE_CUDA"];
    cargo(&dir, &clippy, &[target, off], &cpu_unset);
    cargo(&dir, &["test", "--workspace"], &[target, off], &cpu_unset);
    // The negative control: with no GPU code, a required GPU fails the test.
    let required = ("KILN_REQUIRE_GPU", OsStr::new("1"));
    let failed = cargo_fails(&dir, &["test", "--test", "saxpy"], &[target, off, required]);
    let line = "KILN_REQUIRE_GPU=1 but no usable GPU: no gpu code (built without a cuda toolkit)";
    assert!(failed.contains(line), "{failed}");

    let toolkit = root.join("target/cuda-toolkit");
    if !toolkit.join("cuda").is_dir() {
        assert!(
            std::env::var_os(REQUIRE_TOOLKIT_ENV).is_none(),
            "{REQUIRE_TOOLKIT_ENV} is set but {} has no toolkit; run `cargo xtask toolkit install`",
            toolkit.display()
        );
        println!(
            "skipped: the toolkit half (no {}/cuda; run `cargo xtask toolkit install`)",
            toolkit.display()
        );
        return;
    }
    // The kernel compiled for real: no CPU-only fallback.
    let cuda_path = toolkit.join("cuda");
    let with_toolkit = [
        target,
        ("CUDA_PATH", cuda_path.as_os_str()),
        ("SAXPY_LAB_REQUIRE_CUDA", OsStr::new("1")),
    ];
    cargo(&dir, &clippy, &with_toolkit, &["SAXPY_LAB_CUDA"]);
    cargo(
        &dir,
        &["test", "--workspace"],
        &with_toolkit,
        &["SAXPY_LAB_CUDA"],
    );

    // The committed bindings are what `cargo kiln codegen` writes, and a
    // struct added to the header without regenerating fails `cargo build`
    // in one line naming the command, which then fixes it.
    let libclang = toolkit.join("libclang");
    let codegen = |extra: &[&str]| {
        let mut args = vec!["kiln", "codegen"];
        args.extend_from_slice(extra);
        Bin::cargo_bin("cargo-kiln")
            .unwrap()
            .current_dir(&dir)
            .args(&args)
            .env("CUDA_PATH", &cuda_path)
            .env("LIBCLANG_PATH", &libclang)
            .assert()
            .success();
    };
    codegen(&["--check"]);
    let header = dir.join("kernels/include/saxpy.h");
    let text = std::fs::read_to_string(&header).unwrap();
    let drifted = text.replace(
        "#endif",
        "typedef struct Extra {\n    float z;\n} Extra;\n\n#endif",
    );
    std::fs::write(&header, drifted).unwrap();
    let failed = cargo_fails(&dir, &["build"], &[target, off]);
    let stale = failed
        .lines()
        .find(|l| l.contains("is stale"))
        .unwrap_or_else(|| panic!("no stale-bindings line in:\n{failed}"));
    assert!(
        stale.contains("src/bindings.rs") && stale.contains("run `cargo kiln codegen`"),
        "{stale}"
    );
    codegen(&[]);
    assert!(std::fs::read_to_string(dir.join("src/bindings.rs"))
        .unwrap()
        .contains("pub struct Extra"));
    cargo(&dir, &["build"], &[target, off], &[]);

    // Every other subcommand on the new crate, as its user runs them there.
    let kiln = |args: &[&str]| -> String {
        eprintln!("kiln-new: cargo kiln {}", args.join(" "));
        let out = Bin::cargo_bin("cargo-kiln")
            .unwrap()
            .current_dir(&dir)
            .arg("kiln")
            .args(args)
            .env(target.0, target.1)
            .env("CUDA_PATH", &cuda_path)
            .env_remove("NVCC")
            .env_remove("SAXPY_LAB_CUDA")
            .env_remove("SAXPY_LAB_CUDA_ARCHS")
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            out.status.success(),
            "cargo kiln {} failed: {stdout}{}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr)
        );
        stdout
    };
    let built: serde_json::Value =
        serde_json::from_str(&kiln(&["build", "--arch", "sm_80,sm_90", "--json"])).unwrap();
    let saxpy = &built["modules"][0];
    assert_eq!(saxpy["name"], "saxpy", "{built}");
    assert_eq!(
        saxpy["sass_inside"],
        serde_json::json!(["sm_80", "sm_90"]),
        "{built}"
    );
    assert_eq!(
        saxpy["ptx_inside"],
        serde_json::json!(["compute_90"]),
        "{built}"
    );
    let audit: serde_json::Value = serde_json::from_str(&kiln(&["audit", "--json"])).unwrap();
    assert_eq!(audit["violations"], serde_json::json!([]), "{audit}");
    let doctor: serde_json::Value = serde_json::from_str(&kiln(&["doctor", "--json"])).unwrap();
    assert_eq!(doctor["problems"], serde_json::json!([]), "{doctor}");
    let bundle = tmp.path().join("bundle");
    kiln(&[
        "bundle",
        "--arch",
        "sm_90",
        "--out",
        bundle.to_str().unwrap(),
    ]);
    let mut bins: Vec<String> = std::fs::read_dir(bundle.join("bin"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    bins.sort();
    assert_eq!(
        bins,
        [
            "kiln-memcheck-control",
            "saxpy-lab__saxpy",
            "saxpy-lab__saxpy_lab"
        ],
        "the bindings check, which reads the source tree, is left out"
    );
    let syntax = Command::new("bash")
        .arg("-n")
        .arg(bundle.join("run.sh"))
        .output()
        .unwrap();
    assert!(syntax.status.success(), "{syntax:?}");

    // The user's toolkit store, filled by `cargo kiln toolkit install` as a
    // user runs it (pip's cache, warm from CI's own install, serves the
    // wheels): a plain `cargo build` with no variable naming a toolkit finds
    // it, `cargo kiln build` then leaves nothing to rebuild, since both run
    // the build script with the same variables, and after `cargo clean` the
    // store is still there (nothing to download again).
    let store = tmp.path().join("store");
    Bin::cargo_bin("cargo-kiln")
        .unwrap()
        .current_dir(&dir)
        .args(["kiln", "toolkit", "install"])
        .env("KILN_TOOLKIT_HOME", &store)
        .env(target.0, target.1)
        .assert()
        .success();
    assert!(store.join("default/cuda/bin/nvcc").is_file());
    let store_env = [
        target,
        ("KILN_TOOLKIT_HOME", store.as_os_str()),
        ("SAXPY_LAB_REQUIRE_CUDA", OsStr::new("1")),
    ];
    let no_toolkit_vars = [
        "CUDA_PATH",
        "CUDA_HOME",
        "CUDA_ROOT",
        "NVCC",
        "SAXPY_LAB_CUDA",
        "SAXPY_LAB_CUDA_ARCHS",
    ];
    cargo(&dir, &["build"], &store_env, &no_toolkit_vars);
    let mut kiln_build = Bin::cargo_bin("cargo-kiln").unwrap();
    kiln_build
        .current_dir(&dir)
        .args(["kiln", "build"])
        .envs(store_env.iter().copied());
    for name in no_toolkit_vars {
        kiln_build.env_remove(name);
    }
    kiln_build.assert().success();
    let again = cargo_command(&dir, &["build"], &store_env, &no_toolkit_vars)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&again.stderr);
    assert!(again.status.success(), "{stderr}");
    assert!(
        !stderr.contains("Compiling saxpy-lab"),
        "cargo kiln build and cargo build rebuild each other:\n{stderr}"
    );
    // What was embedded is SASS for the archs asked, read back by cuobjdump.
    let mut report = Bin::cargo_bin("cargo-kiln").unwrap();
    report
        .current_dir(&dir)
        .args(["kiln", "build", "--json"])
        .envs(store_env.iter().copied());
    for name in no_toolkit_vars {
        report.env_remove(name);
    }
    let out = report.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let built: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        built["modules"][0]["sass_inside"],
        serde_json::json!(["sm_80", "sm_90"]),
        "{built}"
    );
    cargo(&dir, &["clean", "-p", "saxpy-lab"], &[target], &[]);
    cargo(&dir, &["build"], &store_env, &no_toolkit_vars);
    assert!(
        store.join("default/cuda/bin/nvcc").is_file(),
        "cargo clean left the store"
    );
}

/// The regression: `new half` and `new kiln-abi` made crates that could not
/// build (a crate of the graph has the name); the graph is read from the
/// template and kiln's manifests.
#[test]
fn a_name_in_the_new_crates_graph_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    for (name, by) in [
        ("half", "`half` (the template)"),
        ("kiln-abi", "`kiln-abi` (a dependency of kiln-gpu-core)"),
        ("kiln_gpu_core", "`kiln-gpu-core` (the template)"),
    ] {
        let error = one_line_error(kiln_new([
            OsStr::new(name),
            OsStr::new("--path"),
            tmp.path().join("x").as_os_str(),
            OsStr::new("--kiln-path"),
            kiln_root().as_os_str(),
        ]));
        assert_eq!(
            error,
            format!("error: the crate name `{name}` is taken by {by} in the new crate's dependency graph, so it would not build; choose another")
        );
    }
    assert_eq!(std::fs::read_dir(tmp.path()).unwrap().count(), 0);
}

/// The regression: a folder with files at the right paths but not kiln's
/// manifests was taken for a checkout.
#[test]
fn a_kiln_path_whose_manifests_are_not_kilns_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let fake = tmp.path().join("fake");
    for dir in ["gpu-core", "cuda-build"] {
        std::fs::create_dir_all(fake.join("crates").join(dir)).unwrap();
        std::fs::write(
            fake.join("crates").join(dir).join("Cargo.toml"),
            "garbage [",
        )
        .unwrap();
    }
    let error = one_line_error(kiln_new([
        OsStr::new("saxpy-lab"),
        OsStr::new("--path"),
        tmp.path().join("saxpy-lab").as_os_str(),
        OsStr::new("--kiln-path"),
        fake.as_os_str(),
    ]));
    assert!(error.contains("is not a kiln checkout"), "{error}");
    assert!(!tmp.path().join("saxpy-lab").exists());
}

/// The regression: `--kiln-git` with a newline was written into Cargo.toml.
#[test]
fn a_git_url_with_a_newline_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let error = one_line_error(kiln_new([
        "saxpy-lab",
        "--path",
        tmp.path().join("saxpy-lab").to_str().unwrap(),
        "--kiln-git",
        "https://h.example/kiln\n[patch]",
    ]));
    assert_eq!(
        error,
        "error: --kiln-git \"https://h.example/kiln\\n[patch]\" holds '\\n'; pass a URL (or rev) without whitespace or control characters"
    );
    assert_eq!(std::fs::read_dir(tmp.path()).unwrap().count(), 0);
}

/// The regression: `new --path /proc/x` printed the OS error twice.
#[cfg(target_os = "linux")]
#[test]
fn an_os_error_is_printed_once() {
    let error = one_line_error(kiln_new([
        OsStr::new("saxpy-lab"),
        OsStr::new("--path"),
        OsStr::new("/proc/kiln-new-test/x"),
        OsStr::new("--kiln-path"),
        kiln_root().as_os_str(),
    ]));
    assert_eq!(error.matches("(os error").count(), 1, "{error}");
}

/// The regression: an empty 0700 folder came back 0755 (and a shared
/// setgid folder lost its bits).
#[cfg(unix)]
#[test]
fn an_empty_private_folder_keeps_its_mode() {
    use std::os::unix::fs::PermissionsExt as _;
    let tmp = tempfile::tempdir().unwrap();
    for (name, mode) in [("private", 0o700), ("shared", 0o2770)] {
        let folder = tmp.path().join(name);
        std::fs::create_dir(&folder).unwrap();
        std::fs::set_permissions(&folder, std::fs::Permissions::from_mode(mode)).unwrap();
        kiln_new([
            OsStr::new("saxpy-lab"),
            OsStr::new("--path"),
            folder.as_os_str(),
            OsStr::new("--kiln-path"),
            kiln_root().as_os_str(),
        ])
        .success();
        let kept = std::fs::metadata(&folder).unwrap().permissions().mode() & 0o7777;
        assert_eq!(kept, mode, "{name}");
        assert!(folder.join("src/bindings.rs").is_file());
    }
}
