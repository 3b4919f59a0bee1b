//! `.kiln-output.toml`, the marker that makes a folder kiln's: the tool and
//! the kind of output that wrote it, and every file it wrote there (the
//! only files a later run removes). Read with bounds: a regular file, at
//! most [`MAX_BYTES`], each listed path relative and inside the folder.

use std::fs;
use std::io::Write as _;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::error::{io_error, Error};

/// The marker's file name, in the output folder's top level.
pub const MARKER: &str = ".kiln-output.toml";
/// The marker's name while its folder is being removed: a folder with it
/// is never put back in place, only its removal finished.
pub(crate) const REMOVING: &str = ".kiln-output.removing.toml";
/// The mark of a staging folder kiln made, written into it first and
/// removed just before its marker is written: a folder named as a staging
/// folder without it is not kiln's to remove.
pub(crate) const STAGING: &str = ".kiln-output.staging";
/// The staging mark's whole content.
pub(crate) const STAGING_TEXT: &str =
    "kiln made this folder for a new output; a later run removes it if its run died\n";
/// The marker's `format`.
const FORMAT: u32 = 1;
/// The largest marker read (a million listed files fit).
const MAX_BYTES: u64 = 64 << 20;

/// The marker's contents.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Marker {
    /// [`FORMAT`].
    pub(crate) format: u32,
    /// The command that wrote the folder (`cargo kiln bundle`).
    pub(crate) tool: String,
    /// The kind of output (`kiln-bundle`); a folder is replaced only by a
    /// run writing the same kind.
    pub(crate) kind: String,
    /// The files written, relative, `/`-separated, sorted.
    pub(crate) files: Vec<String>,
}

impl Marker {
    /// A marker of this format.
    pub(crate) fn new(tool: &str, kind: &str, files: Vec<String>) -> Self {
        Self {
            format: FORMAT,
            tool: tool.to_string(),
            kind: kind.to_string(),
            files,
        }
    }
}

/// The marker of `dir`, or `None` where it has none.
pub(crate) fn read(dir: &Path) -> Result<Option<Marker>, Error> {
    read_named(dir, MARKER)
}

/// The marker of `dir` under the file name `name`.
pub(crate) fn read_named(dir: &Path, name: &str) -> Result<Option<Marker>, Error> {
    let path = dir.join(name);
    let bad = |message: String| Error::BadMarker {
        path: path.clone(),
        message,
    };
    let meta = match fs::symlink_metadata(&path) {
        Ok(meta) => meta,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io_error("reading", &path)(e)),
    };
    if !meta.is_file() {
        return Err(bad("is not a regular file".into()));
    }
    if meta.len() > MAX_BYTES {
        return Err(bad(format!(
            "is {} bytes, more than a marker holds",
            meta.len()
        )));
    }
    let text = fs::read_to_string(&path).map_err(io_error("reading", &path))?;
    let marker: Marker = toml::from_str(&text)
        .map_err(|e| bad(format!("not a kiln output marker ({})", e.message())))?;
    if marker.format != FORMAT {
        return Err(bad(format!(
            "marker format {} (this kiln reads format {FORMAT})",
            marker.format
        )));
    }
    if let Some(file) = marker.files.iter().find(|f| !valid_path(f)) {
        return Err(bad(format!(
            "lists {file:?}, which is not a path inside the folder"
        )));
    }
    Ok(Some(marker))
}

/// Writes `marker` into `dir` (a new file, flushed to disk).
pub(crate) fn write(dir: &Path, marker: &Marker) -> Result<(), Error> {
    let path = dir.join(MARKER);
    let text = format!(
        "# kiln wrote this folder ({} by `{}`). A later run replaces it, removing\n\
         # only the files listed here; a folder holding anything else is refused.\n{}",
        marker.kind,
        marker.tool,
        toml::to_string(marker).expect("a marker always serializes")
    );
    let write = || -> std::io::Result<()> {
        let mut file = fs::File::create_new(&path)?;
        file.write_all(text.as_bytes())?;
        file.sync_all()
    };
    write().map_err(io_error("writing the output marker", &path))
}

/// Marks `dir`, a staging folder kiln just made, as kiln's.
pub(crate) fn write_staging(dir: &Path) -> Result<(), Error> {
    let path = dir.join(STAGING);
    fs::File::create_new(&path)
        .and_then(|mut file| file.write_all(STAGING_TEXT.as_bytes()))
        .map_err(io_error("marking the staging folder", &path))
}

/// Removes the staging mark of `dir` before its marker is written.
pub(crate) fn remove_staging(dir: &Path) -> Result<(), Error> {
    let path = dir.join(STAGING);
    match fs::remove_file(&path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            Err(io_error("unmarking the staging folder", &path)(e))
        }
        _ => Ok(()),
    }
}

/// Whether `dir` carries kiln's staging mark: a regular file (opened
/// without following a symlink or waiting on a FIFO) of exactly its text.
pub(crate) fn has_staging(dir: &Path) -> bool {
    use rustix::fs::{Mode, OFlags};
    use std::io::Read as _;
    let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
    let Ok(fd) = rustix::fs::openat(rustix::fs::CWD, dir.join(STAGING), flags, Mode::empty())
    else {
        return false;
    };
    let file = fs::File::from(fd);
    if !file.metadata().is_ok_and(|m| m.is_file()) {
        return false;
    }
    let mut text = String::new();
    let bound = STAGING_TEXT.len() as u64 + 1;
    file.take(bound).read_to_string(&mut text).is_ok() && text == STAGING_TEXT
}

/// Whether `path` names a file inside a folder: relative, `/`-separated
/// plain names (no `.`, `..`, empty part or NUL), and not the marker.
pub(crate) fn valid_path(path: &str) -> bool {
    !path.is_empty()
        && path != MARKER
        && path != REMOVING
        && path != STAGING
        && path
            .split('/')
            .all(|part| !part.is_empty() && part != "." && part != ".." && !part.contains('\0'))
}

/// The folders `files` imply (every proper prefix), sorted.
pub(crate) fn implied_dirs(files: &[String]) -> std::collections::BTreeSet<String> {
    let mut dirs = std::collections::BTreeSet::new();
    for file in files {
        let mut end = 0;
        while let Some(slash) = file[end..].find('/') {
            end += slash;
            dirs.insert(file[..end].to_string());
            end += 1;
        }
    }
    dirs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_plain_relative_paths_are_valid() {
        for good in ["run.sh", "bin/a", "a/b/c.npy", ".hidden"] {
            assert!(valid_path(good), "{good}");
        }
        for bad in [
            "",
            "/etc/passwd",
            "../x",
            "a/../b",
            "a//b",
            "./a",
            "a/",
            MARKER,
            "a\0b",
        ] {
            assert!(!valid_path(bad), "{bad:?}");
        }
    }

    #[test]
    fn implied_dirs_are_every_prefix() {
        let files = ["a/b/c".to_string(), "a/d".to_string(), "e".to_string()];
        let dirs: Vec<String> = implied_dirs(&files).into_iter().collect();
        assert_eq!(dirs, ["a", "a/b"]);
    }

    #[test]
    fn a_marker_round_trips_and_damaged_ones_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(read(dir.path()).unwrap(), None);
        let marker = Marker::new("cargo kiln bundle", "kiln-bundle", vec!["run.sh".into()]);
        write(dir.path(), &marker).unwrap();
        assert_eq!(read(dir.path()).unwrap(), Some(marker));
        let path = dir.path().join(MARKER);
        for (text, expected) in [
            (
                "format = 1\ntool = \"t\"\nkind = \"k\"\nfiles = [\"../x\"]\n",
                "not a path inside",
            ),
            (
                "format = 1\ntool = \"t\"\nkind = \"k\"\nfiles = [\"/etc/passwd\"]\n",
                "not a path inside",
            ),
            (
                "format = 2\ntool = \"t\"\nkind = \"k\"\nfiles = []\n",
                "marker format 2",
            ),
            (
                "format = 1\ntool = \"t\"\nkind = \"k\"\nfiles = []\nmore = 1\n",
                "not a kiln output marker",
            ),
            ("\u{0}garbage", "not a kiln output marker"),
        ] {
            fs::write(&path, text).unwrap();
            let err = read(dir.path()).unwrap_err().to_string();
            assert!(err.contains(expected), "{text:?}: {err}");
        }
        fs::remove_file(&path).unwrap();
        std::os::unix::fs::symlink("/etc/hostname", &path).unwrap();
        let err = read(dir.path()).unwrap_err().to_string();
        assert!(err.contains("is not a regular file"), "{err}");
    }
}
