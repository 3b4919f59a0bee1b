//! The output's permissions as tests: the mode and group of the folder it
//! fills or replaces, a replaced file's mode, the umask and a setgid
//! parent for a new one.

use std::fs;
use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;

use super::*;

fn mode(path: &Path) -> u32 {
    fs::symlink_metadata(path).unwrap().permissions().mode() & 0o7777
}

fn gid(path: &Path) -> u32 {
    std::os::unix::fs::MetadataExt::gid(&fs::symlink_metadata(path).unwrap())
}

/// A group other than the process's where the test may give one (root),
/// else the process's own.
fn another_group(root: &Path) -> u32 {
    let meta = fs::metadata(root).unwrap();
    if std::os::unix::fs::MetadataExt::uid(&meta) == 0 {
        4242
    } else {
        std::os::unix::fs::MetadataExt::gid(&meta)
    }
}

/// Issue 41: an output takes the mode and group of the folder it fills or
/// replaces (an empty 0700 folder stays 0700 with private files; a 2770
/// folder of a group keeps its group, its setgid bit, and closes its
/// files to others), and a file it replaces keeps its mode.
#[test]
fn an_output_keeps_the_mode_and_group_of_what_it_fills_or_replaces() {
    let root = tempfile::tempdir().unwrap();
    let private = root.path().join("private");
    fs::create_dir(&private).unwrap();
    fs::set_permissions(&private, fs::Permissions::from_mode(0o700)).unwrap();
    write(&private, spec(true), A).unwrap();
    assert_eq!(mode(&private), 0o700);
    assert_eq!(mode(&private.join("bin")), 0o700);
    assert_eq!(mode(&private.join("run.sh")), 0o600);
    assert_eq!(mode(&private.join(MARKER)), 0o600);

    let group = another_group(root.path());
    let shared = root.path().join("shared");
    fs::create_dir(&shared).unwrap();
    std::os::unix::fs::chown(&shared, None, Some(group)).unwrap();
    fs::set_permissions(&shared, fs::Permissions::from_mode(0o2770)).unwrap();
    write(&shared, spec(true), A).unwrap();
    assert_eq!((mode(&shared), gid(&shared)), (0o2770, group));
    for file in ["run.sh", "bin", "bin/x"] {
        let path = shared.join(file);
        assert_eq!(gid(&path), group, "{file}");
        assert_eq!(mode(&path) & 0o007, 0, "{file} closed to others");
    }

    // Replaced: the folder's mode and a file's are kept.
    let out = root.path().join("out");
    write(&out, spec(true), A).unwrap();
    fs::set_permissions(&out, fs::Permissions::from_mode(0o750)).unwrap();
    fs::set_permissions(out.join("run.sh"), fs::Permissions::from_mode(0o600)).unwrap();
    write(&out, spec(true), &[("run.sh", "new"), ("c.txt", "c")]).unwrap();
    assert_eq!(mode(&out), 0o750);
    assert_eq!(mode(&out.join("run.sh")), 0o600);
    assert_eq!(mode(&out.join("c.txt")), 0o640);
}

/// Issue 41: a new output takes the umask (077 gives 0700 and 0600) and
/// its parent's setgid group. The umask is the process's, so the body runs
/// in a child of this test binary started under `umask 077`.
#[test]
fn a_new_output_takes_the_umask_and_the_parents_setgid_group() {
    const CHILD: &str = "KILN_OUTPUT_TEST_UMASK_CHILD";
    const NAME: &str = "tests::modes::a_new_output_takes_the_umask_and_the_parents_setgid_group";
    if std::env::var_os(CHILD).is_none() {
        let out = std::process::Command::new("sh")
            .args(["-c", "umask 077 && exec \"$0\" \"$@\""])
            .arg(std::env::current_exe().unwrap())
            .args(["--exact", NAME, "--test-threads=1"])
            .env(CHILD, "1")
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{text}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(text.contains("1 passed"), "the child ran the test: {text}");
        return;
    }
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("out");
    write(&dir, spec(true), A).unwrap();
    assert_eq!(mode(&dir), 0o700);
    assert_eq!(mode(&dir.join("run.sh")), 0o600);

    let group = another_group(root.path());
    let parent = root.path().join("team");
    fs::create_dir(&parent).unwrap();
    std::os::unix::fs::chown(&parent, None, Some(group)).unwrap();
    fs::set_permissions(&parent, fs::Permissions::from_mode(0o2770)).unwrap();
    let dir = parent.join("out");
    write(&dir, spec(true), A).unwrap();
    assert_eq!((mode(&dir), gid(&dir)), (0o2700, group));
    assert_eq!(gid(&dir.join("run.sh")), group);
}
