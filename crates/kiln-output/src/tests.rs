//! The output folder's rules as tests: foreign folders refused untouched,
//! kiln's own replaced file by file, symlinks never followed, a kill
//! between any two steps of the swap (the steps run as functions and
//! stopped) leaving a whole output, and concurrent runs never mixing.

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::{symlink, PermissionsExt as _};
use std::path::Path;

use super::*;

const KIND: &str = "test-output";

fn spec(replace: bool) -> Spec {
    Spec {
        tool: "kiln test",
        kind: KIND,
        replace,
        legacy: None,
    }
}

/// Every entry under `root` (symlinks not followed): a file's contents, a
/// symlink's `-> target`, a folder's `/`.
fn tree(root: &Path) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let rel = path.strip_prefix(root).unwrap().display().to_string();
            let meta = fs::symlink_metadata(&path).unwrap();
            let value = if meta.file_type().is_symlink() {
                format!("-> {}", fs::read_link(&path).unwrap().display())
            } else if meta.is_dir() {
                stack.push(path.clone());
                "/".into()
            } else {
                fs::read_to_string(&path).unwrap_or_else(|_| "<binary>".into())
            };
            out.insert(rel, value);
        }
    }
    out
}

/// `files` written into an [`Output`] for `dir`, committed.
fn write(dir: &Path, spec: Spec, files: &[(&str, &str)]) -> Result<Vec<String>, Error> {
    let out = Output::prepare(dir, spec, &[])?;
    fill(&out, files);
    out.commit()
}

fn fill(out: &Output, files: &[(&str, &str)]) {
    for (name, text) in files {
        let path = out.path().join(name);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, text).unwrap();
    }
}

/// What `dir` holds less its marker; the marker must list exactly that.
fn content(dir: &Path) -> BTreeMap<String, String> {
    let mut found = tree(dir);
    let marker = marker::read(dir).unwrap().expect("a marker");
    found.remove(MARKER);
    let files: Vec<&String> = found
        .iter()
        .filter(|(_, v)| *v != "/")
        .map(|(k, _)| k)
        .collect();
    assert_eq!(files, marker.files.iter().collect::<Vec<_>>());
    found
}

fn expected(files: &[(&str, &str)]) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for (name, text) in files {
        let mut at = 0;
        while let Some(i) = name[at..].find('/') {
            out.insert(name[..at + i].to_string(), "/".to_string());
            at += i + 1;
        }
        out.insert(name.to_string(), text.to_string());
    }
    out
}

const A: &[(&str, &str)] = &[("run.sh", "a"), ("bin/x", "ax"), ("bin/deep/y", "ay")];
const B: &[(&str, &str)] = &[("run.sh", "b"), ("other", "bo")];
const C: &[(&str, &str)] = &[("c", "c")];

/// The names beside `dir` in its parent, `dir`'s own included.
fn beside(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

fn one_line(e: &Error) -> String {
    let text = e.to_string();
    assert!(!text.contains('\n'), "{text}");
    text
}

#[test]
fn a_new_and_an_empty_folder_are_written_with_a_marker_and_nothing_beside() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("out");
    assert_eq!(write(&dir, spec(false), A).unwrap(), Vec::<String>::new());
    assert_eq!(content(&dir), expected(A));
    let empty = root.path().join("empty");
    fs::create_dir(&empty).unwrap();
    write(&empty, spec(false), B).unwrap();
    assert_eq!(content(&empty), expected(B));
    assert_eq!(beside(&dir), ["empty", "out"]);
}

#[test]
fn folders_kiln_did_not_write_are_refused_untouched() {
    let root = tempfile::tempdir().unwrap();
    let outside = root.path().join("outside");
    fs::create_dir(&outside).unwrap();
    fs::write(outside.join("precious"), "mine").unwrap();
    type Make = Box<dyn Fn(&Path)>;
    let cases: Vec<(&str, Make, &str)> = vec![
        (
            "web app's index.json",
            Box::new(|d| {
                fs::create_dir(d).unwrap();
                fs::write(d.join("index.json"), "{\"app\": 1}").unwrap();
                fs::write(d.join("main.js"), "x").unwrap();
            }),
            "holds `index.json`, `main.js`, which kiln did not write",
        ),
        (
            "a crate with .git",
            Box::new(|d| {
                fs::create_dir_all(d.join(".git")).unwrap();
                fs::write(d.join("Cargo.toml"), "[package]").unwrap();
            }),
            "holds `.git`, `Cargo.toml`",
        ),
        (
            "a file",
            Box::new(|d| fs::write(d, "x").unwrap()),
            "is a file, not a folder",
        ),
        (
            "a symlink to a folder",
            Box::new(|d| symlink("outside", d).unwrap()),
            "is a symlink",
        ),
        (
            "another kind's output",
            Box::new(|d| {
                fs::create_dir(d).unwrap();
                marker::write(d, &marker::Marker::new("other tool", "other-kind", vec![])).unwrap();
            }),
            "holds the output of `other tool` (other-kind), not a test-output",
        ),
        (
            "a damaged marker",
            Box::new(|d| {
                fs::create_dir(d).unwrap();
                fs::write(d.join(MARKER), "files = 3").unwrap();
            }),
            "not a kiln output marker",
        ),
        (
            "a marker listing a path outside",
            Box::new(|d| {
                fs::create_dir(d).unwrap();
                let m = "format = 1\ntool = \"kiln test\"\nkind = \"test-output\"\nfiles = [\"../outside/precious\"]\n";
                fs::write(d.join(MARKER), m).unwrap();
            }),
            "which is not a path inside the folder",
        ),
        (
            "kiln's output with a user's file in it",
            Box::new(|d| {
                write(d, spec(true), A).unwrap();
                fs::write(d.join("bin/notes.txt"), "mine").unwrap();
            }),
            "holds `bin/notes.txt`, which kiln did not write; move it out",
        ),
        (
            "kiln's output with a folder where a file was",
            Box::new(|d| {
                write(d, spec(true), A).unwrap();
                fs::remove_file(d.join("run.sh")).unwrap();
                fs::create_dir(d.join("run.sh")).unwrap();
            }),
            "holds `run.sh`",
        ),
        (
            "kiln's output whose folder is now a symlink out",
            Box::new(|d| {
                write(d, spec(true), A).unwrap();
                fs::remove_dir_all(d.join("bin")).unwrap();
                symlink("../outside", d.join("bin")).unwrap();
            }),
            "holds `bin`, which kiln did not write",
        ),
    ];
    for (what, make, message) in cases {
        let dir = root.path().join("out");
        make(&dir);
        let (before, names) = (tree(root.path()), beside(&dir));
        let err = Output::prepare(&dir, spec(true), &[]).unwrap_err();
        assert!(one_line(&err).contains(message), "{what}: {err}");
        assert_eq!(tree(root.path()), before, "{what}: touched");
        assert_eq!(beside(&dir), names, "{what}");
        let _ = fs::remove_file(&dir).or_else(|_| fs::remove_dir_all(&dir));
    }
    assert_eq!(
        fs::read_to_string(outside.join("precious")).unwrap(),
        "mine"
    );
}

#[test]
fn a_folder_containing_a_protected_path_is_refused() {
    let root = tempfile::tempdir().unwrap();
    let krate = root.path().join("crate");
    fs::create_dir_all(krate.join("src")).unwrap();
    for dir in [krate.clone(), root.path().to_path_buf(), krate.join(".")] {
        let err = Output::prepare(&dir, spec(true), &[&krate.join("src")]).unwrap_err();
        assert!(
            one_line(&err).contains("give an output folder of its own"),
            "{err}"
        );
    }
    // The current folder is always protected.
    let err = Output::prepare(Path::new("."), spec(true), &[]).unwrap_err();
    assert!(matches!(err, Error::Contains { .. }), "{err}");
    assert_eq!(tree(root.path()).len(), 2);
}

#[test]
fn a_rerun_removes_only_the_files_kiln_listed() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("out");
    write(&dir, spec(true), A).unwrap();
    write(&dir, spec(true), B).unwrap();
    assert_eq!(content(&dir), expected(B));
    assert_eq!(beside(&dir), ["out"]);
    // Without replacing allowed, an earlier output is refused untouched.
    let err = write(&dir, spec(false), C).unwrap_err();
    assert!(
        one_line(&err).contains("holds an earlier test-output"),
        "{err}"
    );
    assert_eq!(content(&dir), expected(B));
    assert_eq!(beside(&dir), ["out"]);
}

#[test]
fn a_symlink_in_an_old_output_is_removed_as_a_link_never_followed() {
    let root = tempfile::tempdir().unwrap();
    let outside = root.path().join("outside");
    fs::create_dir_all(outside.join("deep")).unwrap();
    for f in ["x", "deep/y", "run.sh"] {
        fs::write(outside.join(f), "precious").unwrap();
    }
    let dir = root.path().join("out");
    write(&dir, spec(true), A).unwrap();
    // A listed file replaced by a link out: replaced, the target kept.
    fs::remove_file(dir.join("run.sh")).unwrap();
    symlink(outside.join("run.sh"), dir.join("run.sh")).unwrap();
    write(&dir, spec(true), B).unwrap();
    assert_eq!(content(&dir), expected(B));
    // Removal itself refuses a folder that became a link between the check
    // and the removal: `bin/x` and `bin/deep/y` are not reached through it.
    let old = root.path().join("old");
    fs::create_dir(&old).unwrap();
    symlink(&outside, old.join("bin")).unwrap();
    let files: Vec<String> = A.iter().map(|(f, _)| f.to_string()).collect();
    let left = fsops::remove_listed(&old, &files).unwrap();
    assert_eq!(left.as_deref(), Some("bin"));
    for f in ["x", "deep/y", "run.sh"] {
        assert_eq!(
            fs::read_to_string(outside.join(f)).unwrap(),
            "precious",
            "{f}"
        );
    }
}

#[test]
fn a_run_dropped_before_its_commit_leaves_the_folder_as_it_was() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("out");
    write(&dir, spec(true), A).unwrap();
    let out = Output::prepare(&dir, spec(true), &[]).unwrap();
    fill(&out, B);
    drop(out);
    assert_eq!(content(&dir), expected(A));
    assert_eq!(beside(&dir), ["out"]);
}

/// Runs a commit of `B` over `A` at `dir` stopped after `step`, as a kill
/// there would leave it; `exchange` false takes the two-rename path.
fn killed_after(root: &Path, step: Step, exchange: bool) -> std::path::PathBuf {
    let dir = root.join("out");
    write(&dir, spec(true), A).unwrap();
    let mut out = Output::prepare(&dir, spec(true), &[]).unwrap();
    fill(&out, B);
    out.stop = Some(step);
    out.exchange = exchange;
    out.commit().unwrap();
    dir
}

#[test]
fn a_kill_between_any_two_steps_leaves_a_whole_output_found_by_the_next_run() {
    let cases = [
        (Step::Marked, true, A, "removed "),
        (Step::Exchanged, true, B, "removed "),
        (Step::OldAside, true, B, "removed "),
        (Step::Marked, false, A, "removed "),
        (Step::OldAside, false, B, "removed "),
    ];
    for (step, exchange, whole, note) in cases {
        let root = tempfile::tempdir().unwrap();
        let dir = killed_after(root.path(), step, exchange);
        assert_eq!(content(&dir), expected(whole), "{step:?}");
        assert_eq!(beside(&dir).len(), 2, "{step:?}: one leftover beside");
        let next = Output::prepare(&dir, spec(true), &[]).unwrap();
        assert_eq!(next.notes().len(), 1, "{step:?}");
        assert!(
            next.notes()[0].starts_with(note),
            "{step:?}: {:?}",
            next.notes()
        );
        fill(&next, C);
        next.commit().unwrap();
        assert_eq!(content(&dir), expected(C));
        assert_eq!(beside(&dir), ["out"], "{step:?}");
    }
}

#[test]
fn a_kill_between_two_renames_is_restored_by_the_next_run() {
    // Where the filesystem cannot exchange, DIR is absent between the two
    // renames; the complete new output beside it is moved into place.
    let root = tempfile::tempdir().unwrap();
    let dir = killed_after(root.path(), Step::MovedAside, false);
    assert!(fs::symlink_metadata(&dir).is_err());
    let next = Output::prepare(&dir, spec(true), &[]).unwrap();
    let notes = next.notes().join("\n");
    assert!(
        notes
            .contains("was missing after an interrupted run: moved the complete output it left at"),
        "{notes}"
    );
    assert!(notes.contains("removed "), "{notes}");
    drop(next);
    assert_eq!(content(&dir), expected(B));
    assert_eq!(beside(&dir), ["out"]);
    // Without replacing allowed, the restored output stands, and the
    // refusal says what was done first.
    let root = tempfile::tempdir().unwrap();
    let dir = killed_after(root.path(), Step::MovedAside, false);
    let err = Output::prepare(&dir, spec(false), &[]).unwrap_err();
    let text = one_line(&err);
    assert!(
        text.contains("moved the complete output") && text.contains("holds an earlier"),
        "{text}"
    );
    assert_eq!(content(&dir), expected(B));
}

#[test]
fn a_kill_while_an_old_output_is_removed_is_finished_and_never_put_back() {
    for dir_missing in [false, true] {
        let root = tempfile::tempdir().unwrap();
        let dir = killed_after(root.path(), Step::OldAside, true);
        let old = root
            .path()
            .join(beside(&dir).into_iter().find(|n| n != "out").unwrap());
        // Killed during the removal: marker renamed, one file gone.
        fs::rename(old.join(MARKER), old.join(marker::REMOVING)).unwrap();
        fs::remove_file(old.join("run.sh")).unwrap();
        if dir_missing {
            fs::remove_dir_all(&dir).unwrap();
        }
        let next = Output::prepare(&dir, spec(true), &[]).unwrap();
        let notes = next.notes().join("\n");
        assert!(
            notes.starts_with("removed ") && !notes.contains("back into place"),
            "{notes}"
        );
        assert!(!old.exists());
        assert_eq!(fs::symlink_metadata(&dir).is_err(), dir_missing);
        fill(&next, C);
        next.commit().unwrap();
        assert_eq!(content(&dir), expected(C));
        assert_eq!(beside(&dir), ["out"]);
    }
}

#[test]
fn a_whole_old_output_is_put_back_when_no_new_one_is_left() {
    let root = tempfile::tempdir().unwrap();
    let dir = killed_after(root.path(), Step::MovedAside, false);
    // The new one gone too (a swap that failed halfway and was cleaned).
    let new = beside(&dir)
        .into_iter()
        .find(|n| n.contains("kiln-new"))
        .unwrap();
    fs::remove_dir_all(root.path().join(new)).unwrap();
    let next = Output::prepare(&dir, spec(true), &[]).unwrap();
    assert!(
        next.notes()[0].contains("back into place"),
        "{:?}",
        next.notes()
    );
    drop(next);
    assert_eq!(content(&dir), expected(A));
    assert_eq!(beside(&dir), ["out"]);
}

#[test]
fn a_partial_leftover_is_removed_and_reported_unless_its_run_lives() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("out");
    write(&dir, spec(true), A).unwrap();
    // A run still filling its staging folder (its lock held: forgotten,
    // the lock's file stays open) is not a leftover.
    let running = Output::prepare(&dir, spec(true), &[]).unwrap();
    fill(&running, B);
    let staging = running.path().to_path_buf();
    std::mem::forget(running);
    let next = Output::prepare(&dir, spec(true), &[]).unwrap();
    assert!(next.notes().is_empty(), "{:?}", next.notes());
    assert!(staging.is_dir());
    drop(next);
    // A run killed while filling its staging folder left no lock.
    let killed = Output::prepare(&dir, spec(true), &[]).unwrap();
    fill(&killed, &[("bin/half", "x")]);
    symlink(root.path().join("precious"), killed.path().join("link")).unwrap();
    let other = killed.killed();
    fs::write(root.path().join("precious"), "mine").unwrap();
    let out = Output::prepare(&dir, spec(true), &[]).unwrap();
    let notes = out.notes().join("\n");
    assert!(
        notes.starts_with("removed ") && notes.contains("a partial output of"),
        "{notes}"
    );
    assert!(!other.exists());
    assert_eq!(
        fs::read_to_string(root.path().join("precious")).unwrap(),
        "mine"
    );
    fill(&out, C);
    out.commit().unwrap();
    assert_eq!(content(&dir), expected(C));
}

/// Issue 41: a user's folder named as a staging folder would be
/// (`.out.kiln-new-notes`) is not taken for a killed run's: only a folder
/// carrying the staging mark kiln writes first is removed; this one is
/// kept, byte-identical, with a note.
#[test]
fn a_users_folder_named_like_a_staging_folder_is_kept() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("out");
    write(&dir, spec(true), A).unwrap();
    let notes_dir = root.path().join(".out.kiln-new-notes");
    fs::create_dir(&notes_dir).unwrap();
    fs::write(notes_dir.join("todo.md"), "mine").unwrap();
    // A staging mark that is a link to a real one is no mark.
    let real = Output::prepare(&root.path().join("other"), spec(true), &[]).unwrap();
    symlink(real.path().join(STAGING), notes_dir.join(STAGING)).unwrap();
    let before = tree(&notes_dir);
    let notes = write(&dir, spec(true), B);
    let out = Output::prepare(&dir, spec(true), &[]).unwrap();
    let text = out.notes().join("\n");
    assert!(text.contains("kept, remove it yourself"), "{text}");
    drop(out);
    drop(real);
    assert_eq!(tree(&notes_dir), before, "{notes:?}");
    assert_eq!(content(&dir), expected(B));
}

#[test]
fn concurrent_runs_into_one_folder_leave_one_whole_output() {
    for replace in [true, false] {
        for _ in 0..10 {
            let root = tempfile::tempdir().unwrap();
            let dir = root.path().join("out");
            let barrier = std::sync::Barrier::new(2);
            let results: Vec<Result<Vec<String>, Error>> = std::thread::scope(|s| {
                let runs = [A, B].map(|files| {
                    let (dir, barrier) = (&dir, &barrier);
                    s.spawn(move || {
                        let out = Output::prepare(dir, spec(replace), &[])?;
                        fill(&out, files);
                        barrier.wait();
                        out.commit()
                    })
                });
                runs.map(|r| r.join().unwrap()).into()
            });
            let won = content(&dir);
            assert!(won == expected(A) || won == expected(B), "{won:?}");
            let failed: Vec<&Error> = results.iter().filter_map(|r| r.as_ref().err()).collect();
            if replace {
                assert!(failed.is_empty(), "{failed:?}");
            } else {
                assert_eq!(failed.len(), 1, "one wins");
                assert!(
                    one_line(failed[0]).contains("holds an earlier"),
                    "{}",
                    failed[0]
                );
            }
            assert_eq!(beside(&dir), ["out"]);
        }
    }
}

#[test]
fn an_unwritable_place_is_refused_before_the_run() {
    let root = tempfile::tempdir().unwrap();
    let file = root.path().join("somefile");
    fs::write(&file, "x").unwrap();
    let err = Output::prepare(&file.join("out"), spec(true), &[]).unwrap_err();
    assert!(
        one_line(&err).ends_with("folder does not exist; create it first"),
        "{err}"
    );
    let err = Output::prepare(&root.path().join("no/such/out"), spec(true), &[]).unwrap_err();
    assert!(matches!(err, Error::NoParent(_)), "{err}");
    // Permissions bind only where this test does not run as root.
    let locked = root.path().join("locked");
    fs::create_dir(&locked).unwrap();
    fs::set_permissions(&locked, fs::Permissions::from_mode(0o555)).unwrap();
    let binds = tempfile::tempdir_in(&locked).is_err();
    let result = Output::prepare(&locked.join("out"), spec(true), &[]);
    assert_eq!(result.is_err(), binds, "{result:?}");
    if let Err(e) = result {
        assert!(one_line(&e).contains("cannot write in it"), "{e}");
    }
    // An old output whose files cannot be removed is refused before the run.
    let dir = root.path().join("out");
    write(&dir, spec(true), A).unwrap();
    fs::set_permissions(dir.join("bin"), fs::Permissions::from_mode(0o555)).unwrap();
    let result = Output::prepare(&dir, spec(true), &[]);
    assert_eq!(result.is_err(), binds, "{result:?}");
    fs::set_permissions(dir.join("bin"), fs::Permissions::from_mode(0o755)).unwrap();
    fs::set_permissions(&locked, fs::Permissions::from_mode(0o755)).unwrap();
    assert_eq!(content(&dir), expected(A));
}

#[test]
fn an_output_written_before_markers_is_adopted_by_its_kind() {
    fn adopt(dir: &Path) -> Option<Vec<String>> {
        (fs::read_to_string(dir.join("run.sh")).ok()? == "a").then(|| vec!["run.sh".to_string()])
    }
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("out");
    fs::create_dir(&dir).unwrap();
    fs::write(dir.join("run.sh"), "a").unwrap();
    let legacy = Spec {
        legacy: Some(adopt),
        ..spec(true)
    };
    write(&dir, legacy, B).unwrap();
    assert_eq!(content(&dir), expected(B));
    // The recognizer lists its files; anything else is still refused.
    fs::remove_dir_all(&dir).unwrap();
    fs::create_dir(&dir).unwrap();
    fs::write(dir.join("run.sh"), "a").unwrap();
    fs::write(dir.join("mine"), "m").unwrap();
    let err = write(&dir, legacy, B).unwrap_err();
    assert!(one_line(&err).contains("holds `mine`"), "{err}");
}

/// Issue 41: an output name of the longest a folder may have (255 bytes)
/// is written, replaced, and its killed run's staging folder found, though
/// `.NAME.kiln-new-*` would be too long a name: the names beside it are
/// shortened, and stay the same for the same name.
#[test]
fn an_output_name_of_the_longest_length_is_written_and_its_leftovers_found() {
    let root = tempfile::tempdir().unwrap();
    let name = "é".repeat(100) + &"a".repeat(55);
    assert_eq!(name.len(), 255);
    let dir = root.path().join(&name);
    write(&dir, spec(true), A).unwrap();
    write(&dir, spec(true), B).unwrap();
    assert_eq!(content(&dir), expected(B));
    assert_eq!(beside(&dir), std::slice::from_ref(&name));
    let killed = Output::prepare(&dir, spec(true), &[]).unwrap();
    fill(&killed, C);
    let staging = killed.killed();
    let out = Output::prepare(&dir, spec(true), &[]).unwrap();
    assert!(
        out.notes().join("\n").starts_with("removed "),
        "{:?}",
        out.notes()
    );
    assert!(!staging.exists());
    fill(&out, C);
    out.commit().unwrap();
    assert_eq!(content(&dir), expected(C));
    assert_eq!(beside(&dir), [name]);
}

/// Issue 41: a mount point (here `/proc`) is refused before the run, in
/// one line saying why, instead of failing at the swap after the whole run
/// (a mount point cannot be renamed).
#[test]
fn a_mount_point_is_refused_before_the_run() {
    let err = Output::prepare(Path::new("/proc"), spec(true), &[]).unwrap_err();
    let text = one_line(&err);
    assert!(
        text.starts_with("/proc: is a mount point") && text.contains("a folder inside it"),
        "{text}"
    );
}

mod modes;
