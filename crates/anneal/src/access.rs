//! The permission bits and group of a file kiln writes over or beside
//! one of the user's: a file it replaces gives its own, so that a replaced
//! output is read by whom the old one was and no one more; a new file in a
//! folder of the user's takes a new file's mode (0666 less the umask) less
//! what the folder withholds (an 0700 folder's files are 0600).

use std::fs::{self, File};
use std::io;
use std::path::Path;

/// Gives `new`, about to replace the regular file at `old`, that file's
/// permission bits and group: where the group cannot be kept (not one of
/// the user's), the group's bits are dropped rather than given to another
/// group. Nothing to keep when `old` is gone or not a file.
pub(crate) fn keep(new: &File, old: &Path) -> io::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::{MetadataExt, PermissionsExt};
        let old = match fs::symlink_metadata(old) {
            Ok(meta) if meta.is_file() => meta,
            _ => return Ok(()),
        };
        let mut mode = old.mode() & 0o777;
        if new.metadata()?.gid() != old.gid()
            && std::os::unix::fs::fchown(new, None, Some(old.gid())).is_err()
        {
            mode &= !0o070;
        }
        new.set_permissions(fs::Permissions::from_mode(mode))?;
    }
    #[cfg(not(unix))]
    let _ = (new, old);
    Ok(())
}

/// [`keep`] of `dir/name` where it is a file; else, where `dir` is a
/// folder, `new`'s mode less the read and write bits `dir` withholds.
pub(crate) fn keep_or_like_folder(new: &File, dir: &Path, name: &str) -> io::Result<()> {
    let old = dir.join(name);
    if fs::symlink_metadata(&old).is_ok_and(|m| m.is_file()) {
        return keep(new, &old);
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::{MetadataExt, PermissionsExt};
        let Ok(folder) = fs::symlink_metadata(dir) else {
            return Ok(());
        };
        if folder.is_dir() {
            let mode = new.metadata()?.mode() & 0o777 & (folder.mode() & 0o666);
            new.set_permissions(fs::Permissions::from_mode(mode))?;
        }
    }
    Ok(())
}
