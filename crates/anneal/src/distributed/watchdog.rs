//! The watchdog of a GPU rank: NCCL's kernels wait forever for a peer that
//! died, so a thread per peer connection peeks at it, and when it closes
//! (the peer's process ended), records the rank and runs the abort
//! (`ncclCommAbort`), which makes the waiting kernels return. The engine
//! then reports the rank instead of NCCL's error.

use std::io::ErrorKind;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::{DistError, TcpComm};

/// A peer that went: its rank and its end of the connection, where known.
type Gone = (usize, Option<SocketAddr>);

/// Watches the peers of one rank until dropped.
#[derive(Debug)]
pub struct Watchdog {
    /// The first peer that went, and its end of the connection.
    gone: Arc<Mutex<Option<Gone>>>,
    done: Arc<AtomicBool>,
}

impl Watchdog {
    /// Starts watching `comm`'s connections; `abort` runs once, on the
    /// watching thread, with the rank of the first peer that goes.
    pub fn start(
        comm: &TcpComm,
        abort: impl Fn(usize) + Send + Sync + 'static,
    ) -> Result<Self, DistError> {
        let gone = Arc::new(Mutex::new(None));
        let done = Arc::new(AtomicBool::new(false));
        let abort = Arc::new(abort);
        for (rank, stream) in comm.watch_handles()? {
            let (gone, done, abort) = (Arc::clone(&gone), Arc::clone(&done), Arc::clone(&abort));
            let addr = stream.peer_addr().ok();
            std::thread::spawn(move || {
                let mut byte = [0u8; 1];
                while !done.load(Ordering::Relaxed) {
                    let closed = match stream.peek(&mut byte) {
                        Ok(0) => true,
                        // Data the main thread has not read yet.
                        Ok(_) => {
                            std::thread::sleep(Duration::from_millis(20));
                            false
                        }
                        Err(e) => !matches!(
                            e.kind(),
                            ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted
                        ),
                    };
                    if closed {
                        let mut first = gone.lock().unwrap_or_else(|p| p.into_inner());
                        if first.is_none() && !done.load(Ordering::Relaxed) {
                            *first = Some((rank, addr));
                            drop(first);
                            abort(rank);
                        }
                        return;
                    }
                }
            });
        }
        Ok(Self { gone, done })
    }

    /// The first peer whose connection closed while the run was on.
    pub fn gone(&self) -> Option<usize> {
        self.gone_at().map(|(rank, _)| rank)
    }

    /// [`Watchdog::gone`] with that peer's end of the connection, where
    /// known (its host).
    pub fn gone_at(&self) -> Option<(usize, Option<SocketAddr>)> {
        *self.gone.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The run is over: peers that leave now are not failures.
    pub fn finish(&self) {
        self.done.store(true, Ordering::Relaxed);
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        self.finish();
    }
}
