//! `cargo kiln bundle --out DIR` writes only into what kiln owns (issue
//! 26): a folder kiln did not write (a crate, `--out .`, a web app's
//! folder, a checkout with `.git`, a file, a symlink, another kind of
//! kiln output, kiln's bundle with a file of the user's in it) is refused
//! before the build, exit 2, one line, nothing touched. The crate is a
//! throwaway one made here, so a regression costs a temp folder, never a
//! real crate. Replacing kiln's own bundle is `downstream.rs`'s (it needs
//! the toolkit) and `bundle.rs`'s unit tests.

use std::fs;
use std::os::unix::fs::symlink;
use std::path::Path;
use std::process::{Command, Output};

use kiln_output::testing::snapshot;

/// `cargo-kiln kiln bundle --manifest-path CRATE --out OUT` run in `cwd`.
fn bundle(cwd: &Path, krate: &Path, out: &str) -> Output {
    Command::new(env!("CARGO_BIN_EXE_cargo-kiln"))
        .current_dir(cwd)
        .args(["kiln", "bundle", "--manifest-path"])
        .arg(krate.join("Cargo.toml"))
        .args(["--out", out])
        .output()
        .expect("cargo-kiln runs")
}

#[test]
fn folders_kiln_did_not_write_are_refused_before_the_build_untouched() {
    let root = tempfile::tempdir().unwrap();
    let krate = root.path().join("tiny");
    fs::create_dir_all(krate.join("src")).unwrap();
    fs::create_dir_all(krate.join(".git")).unwrap();
    fs::write(
        krate.join("Cargo.toml"),
        "[package]\nname = \"tiny\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[workspace]\n",
    )
    .unwrap();
    fs::write(krate.join("src/lib.rs"), "// uncommitted work\n").unwrap();
    let web = root.path().join("web");
    fs::create_dir(&web).unwrap();
    fs::write(web.join("index.json"), "{\"app\": true}").unwrap();
    let repo = root.path().join("repo");
    fs::create_dir_all(repo.join(".git")).unwrap();
    fs::write(root.path().join("file"), "x").unwrap();
    symlink(&web, root.path().join("link")).unwrap();
    let idx = root.path().join("idx");
    fs::create_dir(&idx).unwrap();
    let marker = |kind: &str, files: &str| {
        format!("format = 1\ntool = \"t\"\nkind = \"{kind}\"\nfiles = [{files}]\n")
    };
    fs::write(
        idx.join(kiln_output::MARKER),
        marker("anneal-index", "\"index.json\""),
    )
    .unwrap();
    fs::write(idx.join("index.json"), "{}").unwrap();
    let own = root.path().join("own");
    fs::create_dir(&own).unwrap();
    fs::write(
        own.join(kiln_output::MARKER),
        marker("kiln-bundle", "\"run.sh\""),
    )
    .unwrap();
    fs::write(own.join("run.sh"), "").unwrap();
    fs::write(own.join("notes.txt"), "mine").unwrap();
    let cases: [(&Path, &str, &str); 10] = [
        (&krate, ".", "tiny: contains /"),
        (root.path(), "tiny", "tiny: contains /"),
        (&krate.join("src"), "..", "tiny: contains /"),
        (&web, "../tiny", "contains"),
        (&web, ".", "contains the current folder"),
        (
            root.path(),
            "repo",
            "holds `.git`, which kiln did not write",
        ),
        (root.path(), "file", "is a file, not a folder"),
        (root.path(), "link", "is a symlink, not a folder"),
        (
            root.path(),
            "idx",
            "holds the output of `t` (anneal-index), not a kiln-bundle",
        ),
        (
            root.path(),
            "own",
            "holds `notes.txt`, which kiln did not write; move it out",
        ),
    ];
    let before = snapshot(root.path());
    for (cwd, out, says) in cases {
        let result = bundle(cwd, &krate, out);
        let stderr = String::from_utf8_lossy(&result.stderr);
        assert_eq!(result.status.code(), Some(2), "--out {out}: {stderr}");
        assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
        assert!(stderr.contains(says), "--out {out}: {stderr}");
        assert!(stderr.contains("--out: "), "{stderr}");
        assert_eq!(
            snapshot(root.path()),
            before,
            "--out {out} touched something"
        );
    }
    // The crate dir itself, named from elsewhere: it contains the crate.
    let result = bundle(root.path(), &krate, krate.to_str().unwrap());
    assert_eq!(result.status.code(), Some(2));
    assert_eq!(snapshot(root.path()), before);
}
