//! An output's permissions: never wider than what it fills or replaces.
//! The staging folder is made as `mkdir` with the umask makes a folder (and
//! the kernel gives it a setgid parent's group and bit); where DIR exists,
//! it takes DIR's mode and group instead. At commit every folder and file
//! kiln wrote is fitted to the folder: no more for the group or others than
//! the folder gives them, the folder's group, and a file that replaces one
//! of the old output keeps that file's mode.

use std::fs;
use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
use std::path::Path;

use crate::error::{io_error, Error};
use crate::marker;

/// The mode a new staging folder asks for: the umask takes from it.
pub(crate) fn new_folder() -> fs::Permissions {
    fs::Permissions::from_mode(0o777)
}

/// Gives `staging` the group and mode of the folder `existing` (DIR, empty
/// or kiln's, which the new output replaces). The group is best effort:
/// only a member of it may give it.
pub(crate) fn take_folder(staging: &Path, existing: &fs::Metadata) -> Result<(), Error> {
    let _ = std::os::unix::fs::chown(staging, None, Some(existing.gid()));
    // After chown, which may clear the setgid bit.
    fs::set_permissions(
        staging,
        fs::Permissions::from_mode(existing.mode() & 0o3777),
    )
    .map_err(io_error("setting the output folder's mode", staging))
}

/// Fits what was written in `staging` (its `files`, and the folders they
/// imply) to `staging`'s own mode and group; a file that replaces a
/// regular file of the old output at `old` keeps that file's mode.
pub(crate) fn fit(staging: &Path, files: &[String], old: Option<&Path>) -> Result<(), Error> {
    let folder = fs::symlink_metadata(staging)
        .map_err(io_error("reading the output folder's mode", staging))?;
    // Owner bits as written; group and others no more than the folder's.
    let allowed = 0o7700 | (folder.mode() & 0o077);
    let dirs = marker::implied_dirs(files);
    for (rel, is_dir) in dirs
        .iter()
        .map(|d| (d, true))
        .chain(files.iter().map(|f| (f, false)))
    {
        let path = staging.join(rel);
        let meta = fs::symlink_metadata(&path).map_err(io_error("reading a mode", &path))?;
        if !(meta.is_dir() || meta.is_file()) {
            continue;
        }
        if meta.gid() != folder.gid() {
            let _ = std::os::unix::fs::lchown(&path, None, Some(folder.gid()));
        }
        let replaced = (!is_dir)
            .then(|| old.and_then(|old| replaced_mode(old, rel)))
            .flatten();
        let mode = replaced.unwrap_or(meta.mode() & allowed) & 0o7777;
        // Read again: a chown may have cleared a setgid bit.
        let now = fs::symlink_metadata(&path).map_err(io_error("reading a mode", &path))?;
        if now.mode() & 0o7777 != mode {
            fs::set_permissions(&path, fs::Permissions::from_mode(mode))
                .map_err(io_error("setting a mode", &path))?;
        }
    }
    Ok(())
}

/// The mode of the regular file `rel` of the old output at `old`, where
/// every folder on the way is a folder (never read through a symlink).
fn replaced_mode(old: &Path, rel: &str) -> Option<u32> {
    let mut here = old.to_path_buf();
    let parts: Vec<&str> = rel.split('/').collect();
    for (i, part) in parts.iter().enumerate() {
        here.push(part);
        let meta = fs::symlink_metadata(&here).ok()?;
        let last = i + 1 == parts.len();
        if (last && !meta.is_file()) || (!last && !meta.is_dir()) {
            return None;
        }
        if last {
            return Some(meta.mode() & 0o777);
        }
    }
    None
}
