//! Files the commands write: their paths checked for writability before a
//! long run (so a typo in `--json` does not cost the whole audit), and their
//! contents written whole (a temp file beside the target, then a rename).

use std::io::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use crate::error::usage_error;

/// Checks that `path` (given as `flag PATH`) can be written: its folder
/// exists and takes a new file, and it is not a folder itself.
pub fn check_file(path: &Path, flag: &str) -> Result<()> {
    let shown = path.display();
    if path.is_dir() {
        return Err(usage_error!(
            "`{flag} {shown}` is a folder; give the path of a file"
        ));
    }
    let folder = folder_of(path);
    if !folder.is_dir() {
        return Err(usage_error!(
            "`{flag} {shown}`: the folder {} does not exist; create it or give another path",
            folder.display()
        ));
    }
    probe(&folder).map_err(|e| {
        usage_error!(
            "`{flag} {shown}`: cannot write in {} ({e}); give another path",
            folder.display()
        )
    })
}

/// Creates `dir` (given as `flag DIR`) when missing and checks it takes a
/// new file.
pub fn check_dir(dir: &Path, flag: &str) -> Result<()> {
    let shown = dir.display();
    if dir.exists() && !dir.is_dir() {
        return Err(usage_error!(
            "`{flag} {shown}` is a file; give the path of a folder"
        ));
    }
    std::fs::create_dir_all(dir)
        .map_err(|e| usage_error!("`{flag} {shown}`: cannot create it ({e}); give another path"))?;
    probe(dir)
        .map_err(|e| usage_error!("`{flag} {shown}`: cannot write in it ({e}); give another path"))
}

/// Writes `contents` to `path` through a temp file in the same folder and a
/// rename, so a reader (or an interrupted run) never leaves half a file.
pub fn write_atomic(path: &Path, contents: &[u8]) -> Result<()> {
    let folder = folder_of(path);
    let write = || -> std::io::Result<()> {
        let mut file = tempfile::Builder::new()
            .prefix(".kiln-")
            .suffix(".partial")
            .tempfile_in(&folder)?;
        file.write_all(contents)?;
        file.as_file().sync_all()?;
        file.persist(path).map_err(|e| e.error)?;
        Ok(())
    };
    write().with_context(|| format!("cannot write {}", path.display()))
}

/// The folder a relative or absolute file path lands in.
fn folder_of(path: &Path) -> PathBuf {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// Creates (and removes at once) a file in `dir`.
fn probe(dir: &Path) -> std::io::Result<()> {
    tempfile::Builder::new()
        .prefix(".kiln-probe-")
        .tempfile_in(dir)
        .map(drop)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::UsageError;

    fn message(e: &anyhow::Error) -> String {
        assert!(e.is::<UsageError>(), "{e}");
        e.to_string()
    }

    #[test]
    fn a_file_in_a_missing_folder_is_refused_naming_the_flag() {
        let err = check_file(Path::new("/nonexistent/dir/x.json"), "--json").unwrap_err();
        assert_eq!(
            message(&err),
            "`--json /nonexistent/dir/x.json`: the folder /nonexistent/dir does not exist; create it or give another path"
        );
    }

    #[test]
    fn a_folder_given_as_a_file_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let err = check_file(dir.path(), "--json").unwrap_err();
        assert!(message(&err).ends_with("is a folder; give the path of a file"));
    }

    #[test]
    fn a_read_only_folder_is_refused_unless_root() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().unwrap();
        let locked = dir.path().join("locked");
        std::fs::create_dir(&locked).unwrap();
        std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o555)).unwrap();
        // root writes anywhere; the check must agree with what a write would do.
        let writable = tempfile::tempfile_in(&locked).is_ok();
        let checked = check_file(&locked.join("r.json"), "--json");
        assert_eq!(checked.is_ok(), writable, "{checked:?}");
        if let Err(e) = checked {
            assert!(message(&e).contains("cannot write in"), "{e}");
        }
        std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o755)).unwrap();
    }

    #[test]
    fn a_relative_file_checks_the_current_folder() {
        assert_eq!(folder_of(Path::new("r.json")), Path::new("."));
        assert_eq!(folder_of(Path::new("a/r.json")), Path::new("a"));
    }

    #[test]
    fn check_dir_creates_it_and_refuses_a_file() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("a/b");
        check_dir(&out, "--out").unwrap();
        assert!(out.is_dir());
        let file = dir.path().join("f");
        std::fs::write(&file, "").unwrap();
        let err = check_dir(&file, "--out").unwrap_err();
        assert!(message(&err).ends_with("is a file; give the path of a folder"));
        let err = check_dir(&file.join("sub"), "--out").unwrap_err();
        assert!(message(&err).contains("cannot create it"), "{err}");
    }

    #[test]
    fn write_atomic_replaces_whole_and_leaves_no_temp_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.json");
        std::fs::write(&path, "old").unwrap();
        write_atomic(&path, b"new").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "new");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
        let err = write_atomic(&dir.path().join("missing/r.json"), b"x").unwrap_err();
        assert!(err.to_string().starts_with("cannot write "), "{err}");
    }
}
