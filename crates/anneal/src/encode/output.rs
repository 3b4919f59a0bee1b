//! The file an encode writes: checked before the run ([`EncodeOutput::prepare`]:
//! its folder exists, it is no input and not inside the index, and an
//! existing file is replaced only when asked), streamed into a hidden
//! temporary file beside it, flushed to disk and renamed into place at the
//! end ([`EncodeOutput::commit`]), so that a reader sees the old file or the
//! whole new one, never a part. A failed or interrupted run's temporary file
//! is removed when it is dropped; a killed run's, by the next encode into
//! the same folder (`stale.rs`: only a file that proves it is one).

use std::fs;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

use tempfile::NamedTempFile;

use super::EncodeError;

/// The temporary file's suffix: a leftover of a killed run is recognisable.
/// Its name is `.` then 6 random characters then this: short, so that any
/// output name the folder takes has a temporary file beside it.
pub const TEMP_SUFFIX: &str = ".kiln-encode.tmp";

mod stale;

/// An encode's output file, being written.
#[derive(Debug)]
pub struct EncodeOutput {
    path: PathBuf,
    replace: bool,
    file: BufWriter<NamedTempFile>,
}

impl EncodeOutput {
    /// Checks, before a run, that `path` can take the output, and opens
    /// the temporary file beside it. Refused, touching nothing: a `path`
    /// whose folder does not exist; one that exists and is not a regular
    /// file (a symlink, a folder); an existing file unless `replace` (a
    /// lone `.npy` carries no mark of who wrote it, so no file is taken to
    /// be kiln's); one of `inputs`; a file inside the index folder `index`
    /// (kiln's, where an unknown file would block its replacement).
    pub fn prepare(
        path: &Path,
        replace: bool,
        inputs: &[&Path],
        index: &Path,
    ) -> Result<Self, EncodeError> {
        let io_error = |what, error| EncodeError::Io {
            what,
            path: path.to_path_buf(),
            error,
        };
        // `new.npy/` names a folder (its file name is `new.npy` to `Path`,
        // but the rename at the end would fail).
        if path.file_name().is_none() || names_a_folder(path) {
            return Err(EncodeError::NotAFile(path.to_path_buf()));
        }
        let parent = match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        if !parent.is_dir() {
            return Err(EncodeError::NoParent(parent));
        }
        match fs::symlink_metadata(path) {
            Ok(meta) if !meta.is_file() => return Err(EncodeError::NotAFile(path.to_path_buf())),
            Ok(_) if inputs.iter().any(|input| same_file(path, input)) => {
                return Err(EncodeError::IsInput(path.to_path_buf()))
            }
            Ok(_) if !replace => return Err(EncodeError::Exists(path.to_path_buf())),
            Ok(meta) if is_mount_point(path, &meta, &parent) => {
                return Err(EncodeError::MountPoint(path.to_path_buf()))
            }
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(io_error("reading its metadata", e)),
        }
        let folder = fs::canonicalize(&parent).map_err(|e| io_error("resolving its folder", e))?;
        if fs::canonicalize(index).is_ok_and(|index| folder.starts_with(index)) {
            return Err(EncodeError::InIndex {
                path: path.to_path_buf(),
                index: index.to_path_buf(),
            });
        }
        stale::remove(&parent);
        let mut builder = tempfile::Builder::new();
        builder.prefix(".").rand_bytes(6).suffix(TEMP_SUFFIX);
        // The file a user gets has the mode any new file of theirs has (0666
        // less their umask), not a temporary file's 0600.
        #[cfg(unix)]
        builder.permissions(std::os::unix::fs::PermissionsExt::from_mode(0o666));
        let temp = builder
            .tempfile_in(&parent)
            .map_err(|e| io_error("creating a temporary file beside it", e))?;
        // Held until the file is renamed or removed: a live encode's file
        // is never taken for a killed one's (`stale.rs`). Where the
        // filesystem has no locks, none is held, and no file there is
        // removed as stale either (its lock cannot be taken).
        let _ = temp.as_file().try_lock();
        Ok(Self {
            path: path.to_path_buf(),
            replace,
            file: BufWriter::with_capacity(1 << 20, temp),
        })
    }

    /// The file it will be.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Where the data goes until [`EncodeOutput::commit`].
    pub(super) fn writer(&mut self) -> &mut impl Write {
        &mut self.file
    }

    /// The error of a write to the temporary file.
    pub(super) fn write_error(&self, error: io::Error) -> EncodeError {
        EncodeError::Io {
            what: "writing",
            path: self.path.clone(),
            error,
        }
    }

    /// Flushes the data to disk and renames it into place: over an
    /// existing file only when replacing was asked for (a file that
    /// appeared during the run, another encode's, is then kept and this
    /// one refused).
    pub fn commit(self) -> Result<(), EncodeError> {
        let path = self.path;
        let io_error = |what, error| EncodeError::Io {
            what,
            path: path.clone(),
            error,
        };
        let temp = self
            .file
            .into_inner()
            .map_err(|e| io_error("writing", e.into_error()))?;
        if self.replace {
            crate::access::keep(temp.as_file(), &path)
                .map_err(|e| io_error("keeping its mode", e))?;
        }
        temp.as_file()
            .sync_all()
            .map_err(|e| io_error("flushing to disk", e))?;
        let persisted = if self.replace {
            temp.persist(&path)
        } else {
            temp.persist_noclobber(&path)
        };
        match persisted {
            Ok(_) => Ok(()),
            Err(e) if e.error.kind() == io::ErrorKind::AlreadyExists => {
                Err(EncodeError::Exists(path))
            }
            Err(e) => Err(io_error("renaming into place", e.error)),
        }
    }
}

/// Whether the file at `path` (of `meta`, in `parent`) is mounted over its
/// name: a rename cannot replace it, so the run would fail at its end.
/// Linux says so (`statx`'s `STATX_ATTR_MOUNT_ROOT`, which sees a bind
/// mount from the same filesystem too); elsewhere, and on kernels before
/// 5.8, a device other than the folder's says so.
fn is_mount_point(path: &Path, meta: &fs::Metadata, parent: &Path) -> bool {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    {
        use rustix::fs::{statx, AtFlags, StatxAttributes, StatxFlags, CWD};
        if let Ok(x) = statx(
            CWD,
            path,
            AtFlags::SYMLINK_NOFOLLOW,
            StatxFlags::BASIC_STATS,
        ) {
            if x.stx_attributes_mask.contains(StatxAttributes::MOUNT_ROOT) {
                return x.stx_attributes.contains(StatxAttributes::MOUNT_ROOT);
            }
        }
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        let _ = path;
        fs::metadata(parent).is_ok_and(|folder| folder.dev() != meta.dev())
    }
    #[cfg(not(unix))]
    {
        let _ = (path, meta, parent);
        false
    }
}

/// Whether `path` as written ends in a separator or `/.`: a folder's name.
fn names_a_folder(path: &Path) -> bool {
    let text = path.as_os_str().as_encoded_bytes();
    text.ends_with(b"/")
        || text.ends_with(b"/.")
        || (cfg!(windows) && (text.ends_with(b"\\") || text.ends_with(b"\\.")))
}

/// Whether `a` and `b` are the same file (both exist).
fn same_file(a: &Path, b: &Path) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        match (fs::metadata(a), fs::metadata(b)) {
            (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
            _ => false,
        }
    }
    #[cfg(not(unix))]
    {
        matches!((fs::canonicalize(a), fs::canonicalize(b)), (Ok(a), Ok(b)) if a == b)
    }
}
