//! What an output path holds now, decided without following a symlink:
//! nothing, an empty folder, kiln's own output of the same kind (every
//! entry listed by its marker), or something that is refused.

use std::collections::BTreeSet;
use std::fs;
use std::io;
use std::path::Path;

use crate::error::{io_error, Error};
use crate::marker::{self, MARKER, REMOVING};
use crate::Spec;

/// What an output path holds.
#[derive(Debug)]
pub(crate) enum State {
    /// Nothing.
    Absent,
    /// An empty folder.
    Empty,
    /// kiln's output of the spec's kind: the files it lists.
    Owned(Vec<String>),
}

/// Whether the folder `dir` is a mount point: the kernel says so (statx's
/// mount root), else, where it cannot, it is on another device than its
/// parent (a bind mount of the same device is then not seen).
fn is_mount_point(dir: &Path, meta: &fs::Metadata) -> bool {
    use std::os::unix::fs::MetadataExt as _;
    #[cfg(any(target_os = "linux", target_os = "android"))]
    {
        use rustix::fs::{AtFlags, StatxAttributes, StatxFlags, CWD};
        let flags = AtFlags::NO_AUTOMOUNT | AtFlags::SYMLINK_NOFOLLOW;
        if let Ok(st) = rustix::fs::statx(CWD, dir, flags, StatxFlags::empty()) {
            if st.stx_attributes_mask.contains(StatxAttributes::MOUNT_ROOT) {
                return st.stx_attributes.contains(StatxAttributes::MOUNT_ROOT);
            }
        }
    }
    dir.parent()
        .and_then(|parent| fs::metadata(parent).ok())
        .is_some_and(|parent| parent.dev() != meta.dev())
}

/// What `dir` holds, or why it may not be written.
pub(crate) fn state(dir: &Path, spec: &Spec) -> Result<State, Error> {
    let meta = match fs::symlink_metadata(dir) {
        Ok(meta) => meta,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(State::Absent),
        Err(e) => return Err(io_error("checking the output folder", dir)(e)),
    };
    let not_a_folder = |what| Error::NotAFolder {
        dir: dir.to_path_buf(),
        what,
    };
    if meta.file_type().is_symlink() {
        return Err(not_a_folder("a symlink"));
    }
    if !meta.is_dir() {
        return Err(not_a_folder("a file"));
    }
    if is_mount_point(dir, &meta) {
        return Err(Error::MountPoint {
            dir: dir.to_path_buf(),
        });
    }
    let names = entries(dir)?;
    if names.is_empty() {
        return Ok(State::Empty);
    }
    let files = match marker::read(dir)? {
        Some(found) if found.kind == spec.kind => found.files,
        Some(found) => {
            return Err(Error::OtherKind {
                dir: dir.to_path_buf(),
                tool: found.tool,
                kind: found.kind,
                wanted: spec.kind,
            })
        }
        None => match spec.legacy.and_then(|adopt| adopt(dir)) {
            Some(files) if files.iter().all(|f| marker::valid_path(f)) => files,
            _ => {
                let mut shown: Vec<String> =
                    names.iter().take(3).map(|n| format!("`{n}`")).collect();
                if names.len() > 3 {
                    shown.push(format!("{} more", names.len() - 3));
                }
                return Err(Error::Foreign {
                    dir: dir.to_path_buf(),
                    shown: shown.join(", "),
                });
            }
        },
    };
    if let Some(entry) = first_unlisted(dir, &files)? {
        return Err(Error::Unlisted {
            dir: dir.to_path_buf(),
            entry,
        });
    }
    Ok(State::Owned(files))
}

/// The names in `dir`, sorted.
fn entries(dir: &Path) -> Result<Vec<String>, Error> {
    let mut names = Vec::new();
    for entry in fs::read_dir(dir).map_err(io_error("listing", dir))? {
        let entry = entry.map_err(io_error("listing", dir))?;
        names.push(entry.file_name().to_string_lossy().into_owned());
    }
    names.sort();
    Ok(names)
}

/// The first entry under `dir` (walked without following symlinks) that is
/// neither the marker, a listed file (of any type but a folder), nor a
/// folder on the way to one.
pub(crate) fn first_unlisted(dir: &Path, files: &[String]) -> Result<Option<String>, Error> {
    let listed: BTreeSet<&str> = files.iter().map(String::as_str).collect();
    let folders = marker::implied_dirs(files);
    let mut stack = vec![String::new()];
    while let Some(rel) = stack.pop() {
        let here = if rel.is_empty() {
            dir.to_path_buf()
        } else {
            dir.join(&rel)
        };
        let mut found = Vec::new();
        for entry in fs::read_dir(&here).map_err(io_error("listing", &here))? {
            let entry = entry.map_err(io_error("listing", &here))?;
            let kind = entry.file_type().map_err(io_error("listing", &here))?;
            found.push((entry.file_name(), kind));
        }
        found.sort_by(|a, b| a.0.cmp(&b.0));
        for (name, kind) in found {
            let Some(name) = name.to_str() else {
                let shown = format!("{rel}/{}", name.to_string_lossy());
                return Ok(Some(shown.trim_start_matches('/').to_string()));
            };
            let path = if rel.is_empty() {
                name.to_string()
            } else {
                format!("{rel}/{name}")
            };
            if kind.is_dir() {
                if folders.contains(&path) {
                    stack.push(path);
                    continue;
                }
            } else if listed.contains(path.as_str()) || path == MARKER || path == REMOVING {
                continue;
            }
            return Ok(Some(path));
        }
    }
    Ok(None)
}

/// Checks that every folder of an old output (`dir` and the folders its
/// files imply) takes changes, so that its files can be removed after the
/// swap.
pub(crate) fn check_removable(dir: &Path, files: &[String]) -> Result<(), Error> {
    let folders = marker::implied_dirs(files);
    for folder in std::iter::once(dir.to_path_buf()).chain(folders.iter().map(|f| dir.join(f))) {
        match rustix::fs::access(&folder, rustix::fs::Access::WRITE_OK) {
            Ok(()) => {}
            // A folder a listed file implies may be gone: nothing to remove.
            Err(e) if e == rustix::io::Errno::NOENT => {}
            Err(e) => {
                return Err(Error::Unwritable {
                    dir: folder,
                    error: e.into(),
                })
            }
        }
    }
    Ok(())
}
