//! Reading a file the build does not trust: a regular file only, never
//! through a symlink (where asked), never waiting on a FIFO, never past a
//! size bound; looked at before it is opened and again once open, in case
//! it was swapped. The kernel cache (where any refusal is a miss), prebuilt
//! folders (where a refusal names why), the kernels' `kiln.toml`, codegen's
//! inputs and outputs, and cargo-kiln's config files read through it
//! ([`read`], or [`read_text`] for a text file that may be absent).

use std::fs::File;
use std::io::Read as _;
use std::path::Path;

/// Whether a read may go through a symlink.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Links {
    /// Never: the cache store's files, a prebuilt folder's.
    Refuse,
    /// A compile's inputs may be links (a header linked into the tree).
    Follow,
}

/// Why a file was not read.
#[derive(Debug)]
pub enum Refusal {
    /// Nothing at the path.
    Missing,
    /// A symlink (with [`Links::Refuse`]), dir, FIFO, socket or device.
    NotRegular(&'static str),
    /// More bytes than the bound.
    TooLarge,
    /// The OS refused to open or read it.
    Io(std::io::Error),
}

/// The file at `path` and its bytes, when it is a regular file of at most
/// `bound` bytes.
pub fn read(path: &Path, bound: u64, links: Links) -> Result<(File, Vec<u8>), Refusal> {
    let meta = match links {
        Links::Refuse => std::fs::symlink_metadata(path),
        Links::Follow => std::fs::metadata(path),
    };
    let meta = match meta {
        Ok(meta) => meta,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(Refusal::Missing),
        Err(e) => return Err(Refusal::Io(e)),
    };
    check(&meta, bound)?;
    let file = open(path, links).map_err(Refusal::Io)?;
    check(&file.metadata().map_err(Refusal::Io)?, bound)?;
    let mut bytes = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
    (&file)
        .take(bound.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(Refusal::Io)?;
    if bytes.len() as u64 > bound {
        return Err(Refusal::TooLarge);
    }
    Ok((file, bytes))
}

/// The bytes of the file at `path` (at most `bound`), `None` when nothing
/// is there; a symlink (with [`Links::Refuse`]), a dir, a FIFO, a socket
/// or a device is [`Error::NotRegular`](crate::Error::NotRegular), never
/// waited on.
pub fn read_bytes(path: &Path, bound: u64, links: Links) -> Result<Option<Vec<u8>>, crate::Error> {
    Ok(read_opened(path, bound, links)?.map(|(_, bytes)| bytes))
}

/// [`read`] with its refusals as errors, as [`read_bytes`] says; the open
/// file too, for its metadata.
pub(crate) fn read_opened(
    path: &Path,
    bound: u64,
    links: Links,
) -> Result<Option<(File, Vec<u8>)>, crate::Error> {
    let io = |source| crate::Error::Io {
        path: path.to_path_buf(),
        source,
    };
    match read(path, bound, links) {
        Ok(read) => Ok(Some(read)),
        Err(Refusal::Missing) => Ok(None),
        Err(Refusal::NotRegular(kind)) => Err(crate::Error::NotRegular {
            path: path.to_path_buf(),
            kind,
        }),
        Err(Refusal::TooLarge) => Err(io(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("larger than {bound} bytes"),
        ))),
        Err(Refusal::Io(source)) => Err(io(source)),
    }
}

/// [`read_bytes`] of a UTF-8 text.
pub fn read_text(path: &Path, bound: u64, links: Links) -> Result<Option<String>, crate::Error> {
    let Some(bytes) = read_bytes(path, bound, links)? else {
        return Ok(None);
    };
    String::from_utf8(bytes)
        .map(Some)
        .map_err(|e| crate::Error::Io {
            path: path.to_path_buf(),
            source: std::io::Error::new(std::io::ErrorKind::InvalidData, e.utf8_error()),
        })
}

fn check(meta: &std::fs::Metadata, bound: u64) -> Result<(), Refusal> {
    if let Some(kind) = irregular(&meta.file_type()) {
        return Err(Refusal::NotRegular(kind));
    }
    if meta.len() > bound {
        return Err(Refusal::TooLarge);
    }
    Ok(())
}

/// Opened without blocking on a FIFO, and without following a symlink
/// with [`Links::Refuse`] (one swapped in after the look is refused).
#[cfg(unix)]
fn open(path: &Path, links: Links) -> std::io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt as _;
    let nofollow = match links {
        Links::Refuse => libc::O_NOFOLLOW,
        Links::Follow => 0,
    };
    File::options()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | nofollow)
        .open(path)
}

#[cfg(not(unix))]
fn open(path: &Path, _links: Links) -> std::io::Result<File> {
    File::open(path)
}

/// What a file that is not a regular one is, for a message.
fn irregular(kind: &std::fs::FileType) -> Option<&'static str> {
    if kind.is_file() {
        return None;
    }
    if kind.is_symlink() {
        return Some("a symlink");
    }
    if kind.is_dir() {
        return Some("a dir");
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt as _;
        if kind.is_fifo() {
            return Some("a FIFO");
        }
        if kind.is_socket() {
            return Some("a socket");
        }
        if kind.is_block_device() || kind.is_char_device() {
            return Some("a device");
        }
    }
    Some("a special file")
}

/// Makes a FIFO at `path`: what the tests of every reader of untrusted
/// files plant.
#[cfg(all(test, unix))]
pub(crate) fn mkfifo(path: &Path) {
    let status = std::process::Command::new("mkfifo").arg(path).status();
    assert!(
        status.is_ok_and(|s| s.success()),
        "mkfifo {}: a FIFO is what this test plants",
        path.display()
    );
}
