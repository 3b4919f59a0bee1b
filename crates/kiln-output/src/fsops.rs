//! The filesystem steps of a swap, each one system call or one walk:
//! renames that never replace (`RENAME_NOREPLACE`) or that exchange two
//! folders (`RENAME_EXCHANGE`), falling back where the filesystem lacks
//! them; listing and flushing what a run wrote; removing the files a
//! marker lists through `openat(O_NOFOLLOW)`, so no symlink is followed.

use std::ffi::OsString;
use std::fs;
use std::io;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use rustix::fs::{AtFlags, Mode, OFlags, RenameFlags, CWD};
use rustix::io::Errno;

use crate::error::{io_error, Error};
use crate::marker::{self, MARKER, REMOVING};
use crate::names;

/// Whether `e` says the filesystem (or kernel) lacks a `renameat2` flag.
fn unsupported(e: Errno) -> bool {
    e == Errno::INVAL || e == Errno::NOSYS || e == Errno::OPNOTSUPP
}

/// Renames `from` to `to`, failing (`AlreadyExists`) where `to` exists.
pub(crate) fn rename_noreplace(from: &Path, to: &Path) -> io::Result<()> {
    match rustix::fs::renameat_with(CWD, from, CWD, to, RenameFlags::NOREPLACE) {
        Ok(()) => Ok(()),
        Err(e) if unsupported(e) => {
            // Racy, where the filesystem has no NOREPLACE: a plain rename
            // replaces an empty folder, never one with files in it.
            if fs::symlink_metadata(to).is_ok() {
                return Err(io::ErrorKind::AlreadyExists.into());
            }
            fs::rename(from, to)
        }
        Err(e) => Err(e.into()),
    }
}

/// Swaps the folders `a` and `b` in one step; `Ok(false)` where the
/// filesystem cannot (the caller then uses two renames).
pub(crate) fn exchange(a: &Path, b: &Path) -> io::Result<bool> {
    match rustix::fs::renameat_with(CWD, a, CWD, b, RenameFlags::EXCHANGE) {
        Ok(()) => Ok(true),
        Err(e) if unsupported(e) => Ok(false),
        Err(e) => Err(e.into()),
    }
}

/// A new name beside `dir` for an old output, `.<name>.kiln-old-<random>`,
/// that does not exist yet.
pub(crate) fn old_name(parent: &Path, name: &std::ffi::OsStr) -> PathBuf {
    use std::hash::{BuildHasher as _, Hasher as _};
    loop {
        let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
        hasher.write_u32(std::process::id());
        let mut file = OsString::from(names::old_prefix(name));
        file.push(format!("{:012x}", hasher.finish() & 0xffff_ffff_ffff));
        let path = parent.join(file);
        if fs::symlink_metadata(&path).is_err() {
            return path;
        }
    }
}

/// Every file under `root` (any type but a folder; symlinks not followed),
/// relative and sorted; regular files are flushed to disk on the way, so
/// that what is swapped into place is whole even after a power cut.
pub(crate) fn list_and_sync(root: &Path) -> Result<Vec<String>, Error> {
    let mut files = Vec::new();
    let mut stack = vec![String::new()];
    while let Some(rel) = stack.pop() {
        let here = root.join(&rel);
        for entry in fs::read_dir(&here).map_err(io_error("listing", &here))? {
            let entry = entry.map_err(io_error("listing", &here))?;
            let kind = entry.file_type().map_err(io_error("listing", &here))?;
            let name = entry.file_name();
            let Some(name) = name.to_str() else {
                return Err(Error::Io {
                    what: "listing the new output (a file name is not UTF-8)",
                    path: entry.path(),
                    error: io::ErrorKind::InvalidData.into(),
                });
            };
            let path = if rel.is_empty() {
                name.to_string()
            } else {
                format!("{rel}/{name}")
            };
            if kind.is_dir() {
                stack.push(path);
            } else {
                if kind.is_file() {
                    let full = entry.path();
                    fs::File::open(&full)
                        .and_then(|f| f.sync_all())
                        .map_err(io_error("flushing", &full))?;
                }
                files.push(path);
            }
        }
    }
    files.sort();
    Ok(files)
}

/// Flushes a folder's entries (a rename in it) to disk.
pub(crate) fn sync_dir(dir: &Path) -> Result<(), Error> {
    fs::File::open(dir)
        .and_then(|f| f.sync_all())
        .map_err(io_error("flushing", dir))
}

/// Opens the folder `rel` (`/`-separated, may be empty) under `root`, one
/// part at a time, refusing a symlink at any part.
fn open_below(root: &OwnedFd, rel: &str) -> io::Result<OwnedFd> {
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let mut here = rustix::io::dup(root)?;
    for part in rel.split('/').filter(|p| !p.is_empty()) {
        here = rustix::fs::openat(&here, part, flags, Mode::empty())?;
    }
    Ok(here)
}

/// `(folder, name)` of a `/`-separated relative path.
fn split(path: &str) -> (&str, &str) {
    path.rsplit_once('/').unwrap_or(("", path))
}

/// Removes an old output at `root`: its marker renamed to the removing
/// marker first (from then on the folder is never put back in place), the
/// `files` it lists, the marker, the folders that became empty, then
/// `root`. A listed path
/// under a symlink is skipped and a symlink is removed as a link, so
/// nothing outside `root` is touched. Returns the first entry left behind
/// when `root` could not be removed (it held something unlisted).
pub(crate) fn remove_listed(root: &Path, files: &[String]) -> Result<Option<String>, Error> {
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let fd = rustix::fs::openat(CWD, root, flags, Mode::empty())
        .map_err(|e| io_error("opening the old output", root)(e.into()))?;
    let skip = |e: Errno| e == Errno::NOENT || e == Errno::NOTDIR || e == Errno::LOOP;
    let remove = |rel: &str, at: AtFlags, what| -> Result<(), Error> {
        let (folder, name) = split(rel);
        let result =
            open_below(&fd, folder).and_then(|dir| Ok(rustix::fs::unlinkat(&dir, name, at)?));
        match result {
            Ok(()) => Ok(()),
            Err(e) => match Errno::from_io_error(&e) {
                Some(errno) if skip(errno) => Ok(()),
                // A folder where a file was, or a folder not empty: left.
                Some(errno)
                    if errno == Errno::ISDIR
                        || errno == Errno::NOTEMPTY
                        || errno == Errno::PERM =>
                {
                    Ok(())
                }
                _ => Err(io_error(what, &root.join(rel))(e)),
            },
        }
    };
    match rustix::fs::renameat(&fd, MARKER, &fd, REMOVING) {
        Ok(()) => {}
        Err(e) if e == Errno::NOENT => {}
        Err(e) => {
            return Err(io_error("marking an old output as being removed", root)(
                e.into(),
            ))
        }
    }
    for file in files.iter().filter(|f| marker::valid_path(f)) {
        remove(file, AtFlags::empty(), "removing an old output's file")?;
    }
    remove(
        REMOVING,
        AtFlags::empty(),
        "removing an old output's marker",
    )?;
    let mut folders: Vec<String> = marker::implied_dirs(files).into_iter().collect();
    folders.sort_by_key(|f| std::cmp::Reverse(f.matches('/').count()));
    for folder in &folders {
        remove(
            folder,
            AtFlags::REMOVEDIR,
            "removing an old output's folder",
        )?;
    }
    drop(fd);
    match fs::remove_dir(root) {
        Ok(()) => Ok(None),
        Err(e) if e.kind() == io::ErrorKind::DirectoryNotEmpty => {
            let left = fs::read_dir(root)
                .ok()
                .and_then(|mut d| d.next())
                .and_then(Result::ok)
                .map_or_else(String::new, |e| {
                    e.file_name().to_string_lossy().into_owned()
                });
            Ok(Some(left))
        }
        Err(e) => Err(io_error("removing the old output's folder", root)(e)),
    }
}
