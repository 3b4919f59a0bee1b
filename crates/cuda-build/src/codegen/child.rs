//! A trial parse in a forked child, bounded in memory and time: libclang
//! has no bound of its own, and a macro that expands without end (or an
//! include the walk of [`inputs`](super::inputs) could not resolve) takes
//! the host's memory, or blocks for ever. The child parses once under
//! `RLIMIT_DATA` and reports clang's first error (or none) through a pipe;
//! the parent kills it at the deadline. Only after a clean trial does the
//! real parse (bindgen, the walks) run in this process, on the same input.
//!
//! A fork copies only the calling thread: every libclang call of codegen
//! holds [`LIBCLANG`], so no other thread of ours is inside libclang (with
//! its locks held) when the child starts. The child writes to the pipe and
//! leaves with `_exit`, running nothing of the parent's at exit.

use std::io::Read as _;
use std::os::fd::{AsRawFd as _, FromRawFd as _, OwnedFd};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

/// The memory a trial parse may take (4 GiB): CUDA's headers take a few
/// hundred MiB.
pub(super) const MEMORY: u64 = 4 << 30;

/// How long a trial parse may take: CUDA's headers take seconds.
pub(super) const TIMEOUT: Duration = Duration::from_secs(300);

/// The most bytes of a child's report read.
const REPORT: u64 = 64 << 10;

/// Held by `generate` around all its libclang calls.
static LIBCLANG: Mutex<()> = Mutex::new(());

/// The lock every use of libclang holds.
pub(super) fn libclang() -> MutexGuard<'static, ()> {
    LIBCLANG.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Runs `parse` in a child bounded by [`MEMORY`] and [`TIMEOUT`]; its
/// `Err` comes back as it is, a child killed or crashed as one line naming
/// `what`. The caller holds [`libclang`].
pub(super) fn trial(what: &str, parse: impl FnOnce() -> Result<(), String>) -> Result<(), String> {
    let (read_end, write_end) = pipe()?;
    // SAFETY: the child runs only `parse` (libclang, which no other thread
    // of ours is inside: the caller holds the lock), writes to the pipe and
    // calls `_exit`; glibc's fork leaves malloc usable in the child.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(format!(
            "cannot start a child to parse {what}: {}",
            std::io::Error::last_os_error()
        ));
    }
    if pid == 0 {
        drop(read_end);
        child(write_end, parse);
    }
    drop(write_end);
    let report = read_until(read_end, Instant::now() + TIMEOUT);
    if report.is_none() {
        // SAFETY: `pid` is our child, not yet waited for.
        unsafe { libc::kill(pid, libc::SIGKILL) };
    }
    let mut status = 0;
    // SAFETY: `pid` is our child; `status` is written.
    while unsafe { libc::waitpid(pid, &mut status, 0) } < 0 {
        if std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
            break;
        }
    }
    let Some(report) = report else {
        return Err(format!(
            "libclang did not finish parsing {what} in {} s; an include of something that never ends (a FIFO, a device) through a macro?",
            TIMEOUT.as_secs()
        ));
    };
    match (libc::WIFEXITED(status), libc::WEXITSTATUS(status)) {
        (true, 0) => Ok(()),
        (true, 1) => Err(report),
        _ => Err(crashed(what)),
    }
}

/// The line for a parse of `what` that ran out of memory or crashed: the
/// child killed, or libclang's crash recovery (on once any parse of this
/// process enabled it) saying so.
pub(super) fn crashed(what: &str) -> String {
    format!(
        "libclang ran out of its {} GiB memory bound (or crashed) parsing {what}; a macro that expands without end, or an include of a huge file?",
        MEMORY >> 30
    )
}

/// The child's side: bounded, silent on stderr (LLVM's crash text), it
/// reports and exits 0 (parsed), 1 (an error, written) or 2 (a panic).
fn child(report: OwnedFd, parse: impl FnOnce() -> Result<(), String>) -> ! {
    let limit = libc::rlimit {
        rlim_cur: MEMORY,
        rlim_max: MEMORY,
    };
    // SAFETY: a valid rlimit; /dev/null's path is a C string; dup2 onto
    // stderr, which this child owns.
    unsafe {
        libc::setrlimit(libc::RLIMIT_DATA, &limit);
        let null = libc::open(c"/dev/null".as_ptr(), libc::O_WRONLY);
        if null >= 0 {
            libc::dup2(null, 2);
        }
    }
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(parse));
    let (code, text) = match outcome {
        Ok(Ok(())) => (0, String::new()),
        Ok(Err(e)) => (1, e),
        Err(_) => (2, String::new()),
    };
    let mut bytes = text.as_bytes();
    while !bytes.is_empty() {
        // SAFETY: the pointer and length are those of `bytes`.
        let n = unsafe { libc::write(report.as_raw_fd(), bytes.as_ptr().cast(), bytes.len()) };
        if n <= 0 {
            break;
        }
        bytes = &bytes[n.unsigned_abs()..];
    }
    // SAFETY: leaves without running the parent's exit handlers.
    unsafe { libc::_exit(code) }
}

fn pipe() -> Result<(OwnedFd, OwnedFd), String> {
    let mut fds = [0; 2];
    // SAFETY: `fds` has room for the two descriptors.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(format!(
            "cannot make a pipe to a child parse: {}",
            std::io::Error::last_os_error()
        ));
    }
    // SAFETY: both were just opened and are owned by nothing else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// What the child wrote, once it closed the pipe (by exiting), or `None`
/// at the deadline.
fn read_until(fd: OwnedFd, deadline: Instant) -> Option<String> {
    let mut poll = libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    let mut file = std::fs::File::from(fd);
    let mut report = Vec::new();
    loop {
        let left = deadline.checked_duration_since(Instant::now())?;
        let ms = i32::try_from(left.as_millis()).unwrap_or(i32::MAX).max(1);
        // SAFETY: one valid pollfd.
        let ready = unsafe { libc::poll(&mut poll, 1, ms) };
        if ready <= 0 {
            continue; // timed out (the deadline check ends it) or EINTR
        }
        let mut chunk = [0u8; 4096];
        match file.read(&mut chunk) {
            Ok(0) => return Some(String::from_utf8_lossy(&report).into_owned()),
            Ok(n) => {
                if (report.len() as u64) < REPORT {
                    report.extend_from_slice(&chunk[..n]);
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return Some(String::from_utf8_lossy(&report).into_owned()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_child_reports_its_error_and_a_child_past_the_memory_bound_is_named() {
        let _lock = libclang();
        assert_eq!(trial("x.h", || Ok(())), Ok(()));
        assert_eq!(
            trial("x.h", || Err("x.h:3: unknown type name 'foo'".into())),
            Err("x.h:3: unknown type name 'foo'".into())
        );
        let err = trial("bomb.h", || {
            let mut hog: Vec<Vec<u8>> = Vec::new();
            loop {
                hog.push(vec![0; 64 << 20]);
            }
        })
        .unwrap_err();
        assert_eq!(
            err,
            "libclang ran out of its 4 GiB memory bound (or crashed) parsing bomb.h; a macro that expands without end, or an include of a huge file?"
        );
    }
}
