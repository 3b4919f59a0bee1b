//! `apps anneal --out DIR [--force]` writes only into what kiln owns
//! (issue 26): a folder of something else is refused before the run with
//! nothing touched, `--force` replaces an earlier index removing only the
//! files kiln listed, a symlink in it is not followed, an unwritable place
//! fails before the run, an interrupted replacement is restored by the next
//! run, and two runs into one DIR leave one whole index. On the CPU.

use std::fs;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::process::Output;

use kiln_anneal::index::{Index, ANCHORS_FILE, META_FILE};

mod cli_support;

use cli_support::{apps, npy};
use kiln_output::testing::{names, snapshot};

/// A 200 x 3 float32 input in `dir`.
fn input(dir: &Path) -> PathBuf {
    let values = kiln_anneal::synthetic_points(200, 3, 4, 0.3, 1);
    let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
    let path = dir.join("p.npy");
    fs::write(&path, npy("<f4", 200, 3, &bytes)).unwrap();
    path
}

/// `apps anneal --backend cpu --npy INPUT --m M --out OUT [extra]` in `cwd`.
fn anneal(cwd: &Path, input: &Path, m: u32, out: &str, extra: &[&str]) -> Output {
    let mut cmd = apps();
    cmd.current_dir(cwd)
        .args(["anneal", "--backend", "cpu", "--npy"])
        .arg(input)
        .args(["--m", &m.to_string(), "--out", out])
        .args(extra);
    cmd.output().unwrap()
}

/// Checks a refusal made before the run: exit 1, one line on stderr
/// saying `says`, and no line of the run on stdout.
#[track_caller]
fn refused_before_the_run(out: &Output, says: &str) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
    assert!(stderr.contains(says), "{stderr:?} does not say {says:?}");
    assert!(
        out.stdout.is_empty(),
        "the run started: {}",
        String::from_utf8_lossy(&out.stdout)
    );
}

#[track_caller]
fn succeeded(out: &Output) -> String {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn folders_kiln_did_not_write_are_refused_before_the_run_untouched() {
    let root = tempfile::tempdir().unwrap();
    let p = input(root.path());
    let web = root.path().join("web");
    fs::create_dir(&web).unwrap();
    fs::write(web.join(META_FILE), r#"{"name": "app", "version": "1.0"}"#).unwrap();
    fs::write(web.join("main.js"), "app()").unwrap();
    let krate = root.path().join("crate");
    fs::create_dir_all(krate.join(".git")).unwrap();
    fs::write(krate.join("Cargo.toml"), "[package]").unwrap();
    fs::write(krate.join("uncommitted.rs"), "fn main() {}").unwrap();
    let bundle = root.path().join("bundle");
    fs::create_dir(&bundle).unwrap();
    let marker = "format = 1\ntool = \"cargo kiln bundle\"\nkind = \"kiln-bundle\"\nfiles = []\n";
    fs::write(bundle.join(kiln_output::MARKER), marker).unwrap();
    let holds_input = root.path().join("data");
    fs::create_dir(&holds_input).unwrap();
    let inside = holds_input.join("p.npy");
    fs::copy(&p, &inside).unwrap();
    fs::write(root.path().join("file"), "x").unwrap();
    symlink(&web, root.path().join("link")).unwrap();
    let cases: [(&Path, &Path, &str, &str); 9] = [
        (
            root.path(),
            &p,
            "web",
            "holds `index.json`, `main.js`, which kiln did not write",
        ),
        (
            root.path(),
            &p,
            "crate",
            "holds `.git`, `Cargo.toml`, `uncommitted.rs`, which kiln did not write",
        ),
        (&krate, &p, ".", "contains"),
        (&krate.join(".git"), &p, "..", "contains"),
        (
            root.path(),
            &p,
            "bundle",
            "holds the output of `cargo kiln bundle` (kiln-bundle), not a anneal-index",
        ),
        (root.path(), &inside, "data", "contains"),
        (root.path(), &p, "file", "is a file, not a folder"),
        (root.path(), &p, "link", "is a symlink, not a folder"),
        (root.path(), &p, "web/", "holds `index.json`"),
    ];
    let before = snapshot(root.path());
    for (cwd, npy, out, says) in cases {
        for force in [&[][..], &["--force"]] {
            refused_before_the_run(&anneal(cwd, npy, 5, out, force), says);
            assert_eq!(snapshot(root.path()), before, "--out {out} {force:?}");
        }
    }
}

#[test]
fn an_empty_folder_is_taken_and_force_replaces_only_the_files_kiln_wrote() {
    let root = tempfile::tempdir().unwrap();
    let p = input(root.path());
    let idx = root.path().join("idx");
    fs::create_dir(&idx).unwrap();
    succeeded(&anneal(root.path(), &p, 5, "idx", &[]));
    let first = Index::read(&idx).unwrap();
    refused_before_the_run(
        &anneal(root.path(), &p, 6, "idx", &[]),
        "already exists; pass --force to replace it",
    );
    assert_eq!(Index::read(&idx).unwrap(), first);
    succeeded(&anneal(root.path(), &p, 6, "idx", &["--force"]));
    assert_eq!(Index::read(&idx).unwrap().meta.m, 6);
    assert_eq!(names(root.path()), ["idx", "p.npy"]);

    // A file of the user's dropped in: refused naming it, nothing touched.
    fs::write(idx.join("notes.txt"), "mine").unwrap();
    let before = snapshot(root.path());
    refused_before_the_run(
        &anneal(root.path(), &p, 7, "idx", &["--force"]),
        "holds `notes.txt`, which kiln did not write; move it out",
    );
    assert_eq!(snapshot(root.path()), before);
    fs::remove_file(idx.join("notes.txt")).unwrap();

    // A listed file replaced by a symlink out: the link goes, its target stays.
    let precious = root.path().join("precious.npy");
    fs::write(&precious, "mine").unwrap();
    fs::remove_file(idx.join(ANCHORS_FILE)).unwrap();
    symlink(&precious, idx.join(ANCHORS_FILE)).unwrap();
    succeeded(&anneal(root.path(), &p, 7, "idx", &["--force"]));
    assert_eq!(fs::read_to_string(&precious).unwrap(), "mine");
    assert_eq!(Index::read(&idx).unwrap().meta.m, 7);
    assert_eq!(names(root.path()), ["idx", "p.npy", "precious.npy"]);
}

#[test]
fn an_unwritable_place_fails_before_the_run() {
    let root = tempfile::tempdir().unwrap();
    let p = input(root.path());
    fs::write(root.path().join("somefile"), "x").unwrap();
    refused_before_the_run(
        &anneal(root.path(), &p, 5, "somefile/out", &[]),
        "somefile: directory does not exist; create it first",
    );
    use std::os::unix::fs::PermissionsExt as _;
    let locked = root.path().join("locked");
    fs::create_dir(&locked).unwrap();
    fs::set_permissions(&locked, fs::Permissions::from_mode(0o555)).unwrap();
    // Permissions do not bind root: there the run writes the index.
    if tempfile::tempdir_in(&locked).is_err() {
        refused_before_the_run(
            &anneal(root.path(), &p, 5, "locked/out", &[]),
            "cannot write in it (Permission denied",
        );
        assert!(names(&locked).is_empty());
    } else {
        succeeded(&anneal(root.path(), &p, 5, "locked/out", &[]));
    }
    fs::set_permissions(&locked, fs::Permissions::from_mode(0o755)).unwrap();
}

#[test]
fn a_replacement_killed_between_its_renames_is_restored_by_the_next_run() {
    // Where a filesystem cannot exchange two folders, `--force` moves the
    // old index aside and then the new one in; killed between the two,
    // DIR is missing, the old index is at .idx.kiln-old-* and the new,
    // complete, at .idx.kiln-new-*.
    let root = tempfile::tempdir().unwrap();
    let p = input(root.path());
    succeeded(&anneal(root.path(), &p, 5, "idx", &[]));
    succeeded(&anneal(root.path(), &p, 6, "new", &[]));
    let (old, new) = (
        root.path().join(".idx.kiln-old-1"),
        root.path().join(".idx.kiln-new-2"),
    );
    fs::rename(root.path().join("idx"), &old).unwrap();
    fs::rename(root.path().join("new"), &new).unwrap();
    // Without --force, the next run puts the new index back, says so, and
    // refuses to replace it.
    let out = anneal(root.path(), &p, 7, "idx", &[]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!(
            "moved the complete output it left at {}",
            new.display()
        )),
        "{stderr}"
    );
    assert!(
        stderr.contains(&format!("removed {}", old.display())),
        "{stderr}"
    );
    assert!(stderr.contains("already exists"), "{stderr}");
    let idx = root.path().join("idx");
    assert_eq!(Index::read(&idx).unwrap().meta.m, 6);
    assert_eq!(names(root.path()), ["idx", "p.npy"]);
    // With --force, the same state ends in the new run's index.
    fs::rename(&idx, &new).unwrap();
    let notes = succeeded(&anneal(root.path(), &p, 7, "idx", &["--force"]));
    assert!(
        notes.contains("was missing after an interrupted run"),
        "{notes}"
    );
    assert_eq!(Index::read(&idx).unwrap().meta.m, 7);
    assert_eq!(names(root.path()), ["idx", "p.npy"]);
}

#[test]
fn two_runs_into_one_folder_leave_one_whole_index() {
    let root = tempfile::tempdir().unwrap();
    let p = input(root.path());
    for force in [true, false] {
        for _ in 0..4 {
            let idx = root.path().join("idx");
            let _ = fs::remove_dir_all(&idx);
            let start = |m: u32| {
                let mut cmd = std::process::Command::new(assert_cmd::cargo::cargo_bin("apps"));
                cmd.current_dir(root.path())
                    .env_remove("KILN_BACKEND")
                    .args(["anneal", "--backend", "cpu", "--npy"])
                    .arg(&p)
                    .args(["--m", &m.to_string(), "--out", "idx"])
                    .args(if force { &["--force"][..] } else { &[] })
                    .stdout(std::process::Stdio::null())
                    .stderr(std::process::Stdio::piped())
                    .spawn()
                    .unwrap()
            };
            let runs = [start(5), start(8)].map(|c| c.wait_with_output().unwrap());
            let failed: Vec<String> = runs
                .iter()
                .filter(|o| !o.status.success())
                .map(|o| String::from_utf8_lossy(&o.stderr).into_owned())
                .collect();
            for stderr in &failed {
                assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
            }
            if !force {
                assert_eq!(failed.len(), 1, "one wins: {failed:?}");
                assert!(failed[0].contains("already exists"), "{failed:?}");
            } else {
                assert!(failed.is_empty(), "{failed:?}");
            }
            // Whole: the reader checks the arrays against index.json.
            let m = Index::read(&idx).unwrap().meta.m;
            assert!(m == 5 || m == 8, "{m}");
            assert_eq!(names(root.path()), ["idx", "p.npy"]);
        }
    }
}
