//! `cargo kiln toolkit install` stopped by SIGTERM (`timeout`, a job
//! scheduler, `kill`) while pip runs: pip is stopped too, and the partial
//! install removed, with python3 and pip faked by shell scripts on `PATH`.

use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;
use std::process::{Command, Stdio};

/// Writes an executable shell script.
fn script(path: &Path, body: &str) {
    std::fs::write(path, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// Issue 41: a killed install's pip kept running. SIGTERM to the install
/// now reaches pip (the fake pip records that it got it), the install
/// fails, and no `.DIR.partial` is left.
#[test]
fn a_terminated_install_stops_pip_and_leaves_no_partial() {
    let tmp = tempfile::tempdir().unwrap();
    let bin = tmp.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    // The venv's python: as pip, says it started, then waits; on SIGTERM
    // it records it and exits.
    let venv_python = tmp.path().join("venv-python");
    script(
        &venv_python,
        "trap 'echo term > \"$KILN_TEST_DIR/pip-got-term\"; exit 143' TERM\n\
         echo $$ > \"$KILN_TEST_DIR/pip-started\"\n\
         sleep 20 &\n\
         wait $!",
    );
    script(
        &bin.join("python3"),
        &format!(
            "case \"$1\" in\n\
             -c) echo 3.11.7 ;;\n\
             -m) mkdir -p \"$3/bin\" && cp {} \"$3/bin/python\" ;;\n\
             esac",
            venv_python.display()
        ),
    );
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap());
    // A crate of its own to run in (the command finds one first).
    let krate = tmp.path().join("crate");
    std::fs::create_dir_all(krate.join("src")).unwrap();
    std::fs::write(
        krate.join("Cargo.toml"),
        "[package]\nname = \"x\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
    )
    .unwrap();
    std::fs::write(krate.join("src/lib.rs"), "").unwrap();
    let dir = tmp.path().join("tk");
    let mut install = Command::new(assert_cmd::cargo::cargo_bin("cargo-kiln"))
        .args(["kiln", "toolkit", "install", "--dir"])
        .arg(&dir)
        .current_dir(&krate)
        .env("PATH", path)
        .env("KILN_TEST_DIR", tmp.path())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let started = tmp.path().join("pip-started");
    // Until pip runs (or the install ended without it: a failure below).
    while !started.exists() && install.try_wait().unwrap().is_none() {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert!(started.exists(), "pip never started");
    let status = Command::new("kill")
        .args(["-TERM", &install.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let status = install.wait().unwrap();
    assert!(!status.success());
    assert!(
        tmp.path().join("pip-got-term").exists(),
        "pip was stopped with the install"
    );
    assert!(!tmp.path().join(".tk.partial").exists(), "no partial left");
    assert!(!dir.exists());
}
