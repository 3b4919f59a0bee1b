//! Opening a file that must be a regular file (an index's arrays and
//! metadata): without blocking, so that a FIFO is refused at once rather
//! than waited on, and checked by `fstat` on the descriptor then read.

use std::fs::File;
use std::io;
use std::path::Path;

use super::NpyError;

/// Why [`open_regular`] refused.
#[derive(Debug)]
pub(crate) enum Irregular {
    /// It is this kind of file ("a FIFO", "a directory").
    Kind(&'static str),
    /// Opening or `fstat` failed.
    Io(io::Error),
}

impl From<Irregular> for NpyError {
    fn from(e: Irregular) -> Self {
        match e {
            Irregular::Kind(DIRECTORY) => NpyError::IsDirectory,
            Irregular::Kind(kind) => NpyError::NotRegular(kind),
            Irregular::Io(e) => NpyError::Io(e),
        }
    }
}

/// [`Irregular::Kind`] of a directory.
const DIRECTORY: &str = "a directory";

/// Opens `path` for reading if it is a regular file, with its length:
/// opened without blocking (a FIFO with no writer would wait forever in
/// `open`) and checked by `fstat` on what was opened, so that nothing is
/// swapped in between the check and the read.
pub(crate) fn open_regular(path: &Path) -> Result<(File, u64), Irregular> {
    #[cfg(unix)]
    let file = {
        use rustix::fs::{Mode, OFlags};
        let flags = OFlags::RDONLY | OFlags::NONBLOCK | OFlags::CLOEXEC;
        File::from(
            rustix::fs::open(path, flags, Mode::empty()).map_err(|e| Irregular::Io(e.into()))?,
        )
    };
    #[cfg(not(unix))]
    let file = File::open(path).map_err(Irregular::Io)?;
    let meta = file.metadata().map_err(Irregular::Io)?;
    if meta.is_file() {
        return Ok((file, meta.len()));
    }
    Err(Irregular::Kind(file_kind(&meta.file_type())))
}

/// A file type that is not a regular file, in words.
fn file_kind(kind: &std::fs::FileType) -> &'static str {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if kind.is_fifo() {
            return "a FIFO";
        }
        if kind.is_char_device() || kind.is_block_device() {
            return "a device";
        }
        if kind.is_socket() {
            return "a socket";
        }
    }
    if kind.is_dir() {
        DIRECTORY
    } else {
        "not a regular file"
    }
}
