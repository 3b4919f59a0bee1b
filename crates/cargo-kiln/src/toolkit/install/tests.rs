//! The install's tests: pip's failures in one line, what DIR and the
//! folders beside it may be, the lock, and the store's default link.

use super::*;

#[test]
fn pip_failure_names_the_pinned_package() {
    let reqs = ["nvidia-cuda-nvcc==13.0.88", "nvidia-nvvm==13.0.88"];
    let stderr = "WARNING: Retrying (Retry(total=0)) after connection broken\n\
        ERROR: Could not find a version that satisfies the requirement nvidia_nvvm==13.0.88 (from versions: 13.0.48, 13.5.37)\n\
        ERROR: No matching distribution found for nvidia_nvvm==13.0.88\n";
    let (package, reason) = pip_failure(stderr, &reqs).unwrap();
    assert_eq!(package, "nvidia-nvvm==13.0.88");
    assert_eq!(
        reason,
        "Could not find a version that satisfies the requirement nvidia_nvvm==13.0.88"
    );
    assert_eq!(pip_failure("ERROR: disk full\n", &reqs), None);
}

#[test]
fn a_wheel_whose_hash_differs_from_the_pin_is_one_line() {
    use std::os::unix::fs::PermissionsExt as _;
    let tmp = tempfile::tempdir().unwrap();
    let python = tmp.path().join("bin/python");
    std::fs::create_dir_all(python.parent().unwrap()).unwrap();
    let script = "#!/bin/sh\necho 'ERROR: THESE PACKAGES DO NOT MATCH THE HASHES FROM THE REQUIREMENTS FILE.' >&2\nexit 1\n";
    std::fs::write(&python, script).unwrap();
    std::fs::set_permissions(&python, std::fs::Permissions::from_mode(0o755)).unwrap();
    let err = pip_install_with(tmp.path(), &["--require-hashes"], &["-r", "req.txt"]);
    let err = format!("{:#}", err.unwrap_err());
    assert!(
        err.starts_with("pip refused a wheel whose SHA-256"),
        "{err}"
    );
    assert!(!err.contains('\n'), "{err}");
}

#[test]
fn install_refuses_to_replace_a_foreign_dir() {
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path();
    assert!(check_replaceable(&base.join("absent")).is_ok());
    assert!(check_replaceable(base).is_ok(), "empty dir");
    std::fs::write(base.join("precious.txt"), "").unwrap();
    let err = check_replaceable(base).unwrap_err().to_string();
    assert!(err.contains("is not a toolkit install"), "{err}");
    std::fs::write(base.join(RECORD_FILE), "").unwrap();
    assert!(
        check_replaceable(base).is_err(),
        "an empty record is no install's"
    );
    mark(base).unwrap();
    assert!(check_replaceable(base).is_ok(), "earlier install");
    // A link to a marked folder, or a mark that is a link or a FIFO, is
    // not kiln's mark (and a FIFO never blocks the check).
    let link = tmp.path().join("link");
    std::os::unix::fs::symlink(base, &link).unwrap();
    let other = tempfile::tempdir().unwrap();
    std::fs::write(other.path().join("x"), "").unwrap();
    let mark_path = other.path().join(super::super::MARK_FILE);
    std::os::unix::fs::symlink(base.join(super::super::MARK_FILE), &mark_path).unwrap();
    assert!(check_replaceable(other.path()).is_err(), "a linked mark");
    std::fs::remove_file(&mark_path).unwrap();
    let status = Command::new("mkfifo").arg(&mark_path).status().unwrap();
    assert!(status.success());
    assert!(check_replaceable(other.path()).is_err(), "a FIFO mark");
    assert!(check_replaceable(&link).is_err(), "a link to an install");
}

#[test]
fn the_store_default_points_at_the_latest_install_and_never_replaces_a_folder() {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path();
    let place = |name: &str| Place {
        dir: store.join(name),
        is_default: true,
        touch: Vec::new(),
        default_link: Some(store.join("default")),
    };
    make_default(&place("cuda-13.0")).unwrap();
    let link = store.join("default");
    assert_eq!(std::fs::read_link(&link).unwrap(), Path::new("cuda-13.0"));
    make_default(&place("cuda-13.1")).unwrap();
    assert_eq!(std::fs::read_link(&link).unwrap(), Path::new("cuda-13.1"));
    let names: Vec<_> = std::fs::read_dir(store).unwrap().flatten().collect();
    assert_eq!(names.len(), 1, "no staged link left: {names:?}");
    // A `default` the user made as a folder is not replaced.
    std::fs::remove_file(&link).unwrap();
    std::fs::create_dir(&link).unwrap();
    std::fs::write(link.join("mine"), "x").unwrap();
    let err = make_default(&place("cuda-13.0")).unwrap_err();
    assert!(format!("{err:#}").contains("cannot make"), "{err:#}");
    assert!(link.join("mine").is_file());
    let names: Vec<_> = std::fs::read_dir(store).unwrap().flatten().collect();
    assert_eq!(names.len(), 1, "no staged link left: {names:?}");
    // --dir installs touch no default.
    let mut given = place("elsewhere");
    given.default_link = None;
    make_default(&given).unwrap();
}

#[test]
fn a_stale_partial_and_old_are_removed() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("cuda-toolkit");
    let partial = tmp.path().join(".cuda-toolkit.partial");
    let old = tmp.path().join(".cuda-toolkit.old");
    // What an interrupted install leaves: folders kiln marked.
    let staged = StagingDir::create(partial.clone()).unwrap();
    std::fs::create_dir_all(partial.join("venv/lib")).unwrap();
    std::fs::write(partial.join("venv/lib/big.so"), "x").unwrap();
    std::mem::forget(staged);
    std::mem::forget(StagingDir::create(old.clone()).unwrap());
    remove_stale(&dir).unwrap();
    assert!(!partial.exists() && !old.exists());
    // Nothing to remove is fine too.
    remove_stale(&dir).unwrap();
}

/// A place for `dir`, as `--dir DIR` makes it.
fn given(dir: &Path) -> Place {
    Place {
        dir: dir.to_path_buf(),
        is_default: false,
        touch: Vec::new(),
        default_link: None,
    }
}

/// Issue 41: a folder that merely looks like an install (a `venv/` and
/// a `cuda` link, a file named `kiln-toolkit.toml`) is refused in one
/// line, before anything beside it is removed, and every file in it
/// and beside it is byte-identical after.
#[test]
fn a_look_alike_install_is_refused_and_nothing_is_removed() {
    use kiln_output::testing::snapshot;
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("work");
    std::fs::create_dir_all(dir.join("venv")).unwrap();
    std::os::unix::fs::symlink("venv", dir.join(CUDA_LINK)).unwrap();
    std::fs::write(dir.join("train.py"), "print('mine')\n").unwrap();
    // The user's own folders named as an install's leftovers.
    for sibling in [".work.old", ".work.partial"] {
        std::fs::create_dir(tmp.path().join(sibling)).unwrap();
        std::fs::write(tmp.path().join(sibling).join("notes.md"), sibling).unwrap();
    }
    let before = snapshot(tmp.path());
    let err = format!("{:#}", install(&given(&dir)).unwrap_err());
    assert!(err.contains("not a toolkit install"), "{err}");
    assert!(!err.contains('\n'), "{err}");
    std::fs::write(dir.join(RECORD_FILE), "name = 'my own config'\n").unwrap();
    let with_record = snapshot(tmp.path());
    let err = format!("{:#}", install(&given(&dir)).unwrap_err());
    assert!(err.contains("not a toolkit install"), "{err}");
    let lock = (".work.lock".to_string(), Vec::new());
    let mut after = snapshot(tmp.path());
    after.retain(|e| *e != lock);
    let mut expected = with_record;
    expected.retain(|e| *e != lock);
    assert_eq!(after, expected, "every file byte-identical");
    assert!(before.iter().all(|e| expected.contains(e) || *e == lock));
}

/// Issue 41: a user's `.NAME.old` or `.NAME.partial` beside an absent
/// DIR is not taken for an interrupted install's: the install stops
/// before it runs anything, naming it, and it is left as it was.
#[test]
fn a_users_old_and_partial_beside_dir_survive() {
    use kiln_output::testing::snapshot;
    for sibling in [".cuda.old", ".cuda.partial"] {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join(sibling);
        std::fs::create_dir(&path).unwrap();
        std::fs::write(path.join("data.bin"), "user data").unwrap();
        let before = snapshot(&path);
        let err = format!(
            "{:#}",
            install(&given(&tmp.path().join("cuda"))).unwrap_err()
        );
        assert!(
            err.contains(sibling) && err.contains("not written by kiln"),
            "{err}"
        );
        assert_eq!(snapshot(&path), before, "{sibling} left as it was");
    }
}

#[test]
fn a_failed_install_leaves_no_partial() {
    let tmp = tempfile::tempdir().unwrap();
    let partial = tmp.path().join(".cuda-toolkit.partial");
    {
        let staging = StagingDir::create(partial.clone()).unwrap();
        std::fs::write(staging.path().join("half"), "x").unwrap();
        // Dropped without commit: what an error return does.
    }
    assert!(!partial.exists());
}

/// Issue 41: a FIFO or a symlink planted as `.NAME.lock` never blocks
/// the install nor leads it to create or open a file elsewhere: one
/// line naming the lock file, and what the link points at stays absent.
#[test]
fn a_fifo_or_link_as_the_lock_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let fifo = tmp.path().join(".cuda.lock");
    let status = Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(status.success());
    let err = format!("{:#}", InstallLock::acquire(&fifo).unwrap_err());
    assert!(err.contains(".cuda.lock") && !err.contains('\n'), "{err}");
    let link = tmp.path().join(".other.lock");
    let elsewhere = tmp.path().join("elsewhere");
    std::os::unix::fs::symlink(&elsewhere, &link).unwrap();
    let err = format!("{:#}", InstallLock::acquire(&link).unwrap_err());
    assert!(err.contains(".other.lock") && !err.contains('\n'), "{err}");
    assert!(!elsewhere.exists(), "nothing created through the link");
}

#[test]
fn a_second_install_waits_for_the_lock() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join(".cuda-toolkit.lock");
    let held = InstallLock::acquire(&path).unwrap();
    // An OS file lock excludes another open of the same file, even in
    // this process: what a second `toolkit install` would meet.
    let other = std::fs::File::options().write(true).open(&path).unwrap();
    assert!(matches!(
        other.try_lock(),
        Err(std::fs::TryLockError::WouldBlock)
    ));
    drop(held);
    other.try_lock().unwrap();
}
