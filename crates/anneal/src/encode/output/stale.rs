//! A killed encode's temporary file, removed by the next encode into the
//! same folder: only a file that proves it is one, by its name (`.` and
//! [`super::TEMP_SUFFIX`]), its kind (a regular file, not a link, owned by
//! this user), its first bytes (the header of a 1-D uint32 `.npy` array,
//! which an encode writes and flushes first) and its lock (a live encode
//! holds one on its file; a killed one's went with it). Anything else of
//! that name is left as it is; nothing here fails a run.

use std::fs::File;
use std::io::Read;
use std::path::Path;

use super::TEMP_SUFFIX;

/// Removes the killed encodes' temporary files in `dir`.
pub(super) fn remove(dir: &Path) {
    #[cfg(unix)]
    unix::remove(dir);
    #[cfg(not(unix))]
    let _ = dir;
}

/// Whether `file`'s first bytes are an encode's header
/// (`npy::write_u32_header`'s): its preamble, then its dictionary up to the
/// shape's value (the header's length, bytes 8 and 9, and the value differ
/// with the rows).
fn has_header(file: &mut File) -> bool {
    let mut header = Vec::new();
    // Writing to a Vec does not fail.
    let _ = crate::npy::write_u32_header(&mut header, 0);
    let Some(shape) = header.iter().position(|&b| b == b'(') else {
        return false;
    };
    let mut start = vec![0u8; shape + 1];
    file.read_exact(&mut start).is_ok()
        && start[..8] == header[..8]
        && start[10..] == header[10..=shape]
}

/// Whether `name` is a temporary file's.
fn is_temp_name(name: &[u8]) -> bool {
    name.len() > 1 + TEMP_SUFFIX.len()
        && name.starts_with(b".")
        && name.ends_with(TEMP_SUFFIX.as_bytes())
}

#[cfg(unix)]
mod unix {
    use std::fs::File;
    use std::os::fd::AsFd;
    use std::path::Path;

    use rustix::fs::{AtFlags, Dir, Mode, OFlags};

    /// Opens `dir` (the output's folder), reads its entries through that
    /// one descriptor and opens each candidate in it by name without
    /// following a link; removes those that prove they are a killed
    /// encode's.
    pub(super) fn remove(dir: &Path) {
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
        let Ok(dir_fd) = rustix::fs::open(dir, flags, Mode::empty()) else {
            return;
        };
        let Ok(entries) = Dir::read_from(&dir_fd) else {
            return;
        };
        for entry in entries.flatten() {
            let name = entry.file_name();
            if super::is_temp_name(name.to_bytes()) {
                remove_if_stale(&dir_fd, name);
            }
        }
    }

    /// Removes `name` in `dir` if it proves it is a killed encode's file.
    fn remove_if_stale(dir: &impl AsFd, name: &std::ffi::CStr) {
        // O_NOFOLLOW: a link is refused, never followed; O_NONBLOCK: a FIFO
        // is not waited on (and refused below).
        let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
        let Ok(fd) = rustix::fs::openat(dir, name, flags, Mode::empty()) else {
            return;
        };
        let mut file = File::from(fd);
        let Ok(opened) = rustix::fs::fstat(&file) else {
            return;
        };
        let regular = rustix::fs::FileType::from_raw_mode(opened.st_mode).is_file();
        if !regular || opened.st_uid != rustix::process::geteuid().as_raw() {
            return;
        }
        // A live encode holds its file's lock until it renames or
        // removes it.
        if !super::has_header(&mut file) || file.try_lock().is_err() {
            return;
        }
        // The name still names the file checked (nothing swapped in).
        let same = rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW)
            .is_ok_and(|now| (now.st_dev, now.st_ino) == (opened.st_dev, opened.st_ino));
        if same {
            let _ = rustix::fs::unlinkat(dir, name, AtFlags::empty());
        }
    }
}
