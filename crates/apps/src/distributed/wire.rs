//! Frames on the ranks' TCP connections: a little-endian `u64` length, then
//! that many bytes. Every read has the run's timeout; a closed connection
//! and a timeout become errors naming the peer.

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use super::DistError;

/// The largest frame accepted (16 GiB): a length beyond is a corrupt or
/// foreign stream, refused before anything is allocated.
const MAX_FRAME: u64 = 1 << 34;

/// A connection to rank `peer`.
#[derive(Debug)]
pub(super) struct Peer {
    pub(super) rank: usize,
    stream: TcpStream,
    timeout: Duration,
}

impl Peer {
    /// `stream` to rank `rank`, with `timeout` on every read.
    pub(super) fn new(
        rank: usize,
        stream: TcpStream,
        timeout: Duration,
    ) -> Result<Self, DistError> {
        let io = |what: &str| {
            let what = what.to_string();
            move |source| DistError::Io { rank, what, source }
        };
        stream
            .set_read_timeout(Some(timeout))
            .map_err(io("setting the read timeout"))?;
        stream
            .set_write_timeout(Some(timeout))
            .map_err(io("setting the write timeout"))?;
        stream
            .set_nodelay(true)
            .map_err(io("setting TCP_NODELAY"))?;
        Ok(Self {
            rank,
            stream,
            timeout,
        })
    }

    /// The error of a failed read or write during `during`.
    fn error(&self, during: &str, source: std::io::Error) -> DistError {
        match source.kind() {
            ErrorKind::UnexpectedEof
            | ErrorKind::ConnectionReset
            | ErrorKind::ConnectionAborted
            | ErrorKind::BrokenPipe => DistError::PeerGone {
                rank: self.rank,
                during: during.to_string(),
            },
            ErrorKind::WouldBlock | ErrorKind::TimedOut => DistError::Timeout {
                rank: self.rank,
                during: during.to_string(),
                seconds: self.timeout.as_secs(),
            },
            _ => DistError::Io {
                rank: self.rank,
                what: during.to_string(),
                source,
            },
        }
    }

    /// Sends one frame.
    pub(super) fn send(&mut self, bytes: &[u8], during: &str) -> Result<(), DistError> {
        let len = (bytes.len() as u64).to_le_bytes();
        self.stream
            .write_all(&len)
            .and_then(|()| self.stream.write_all(bytes))
            .and_then(|()| self.stream.flush())
            .map_err(|e| self.error(during, e))
    }

    /// Receives one frame.
    pub(super) fn recv(&mut self, during: &str) -> Result<Vec<u8>, DistError> {
        let mut len = [0u8; 8];
        self.stream
            .read_exact(&mut len)
            .map_err(|e| self.error(during, e))?;
        let len = u64::from_le_bytes(len);
        if len > MAX_FRAME {
            return Err(DistError::Protocol {
                rank: self.rank,
                what: format!("a frame of {len} bytes"),
            });
        }
        let mut bytes = vec![0u8; len as usize];
        self.stream
            .read_exact(&mut bytes)
            .map_err(|e| self.error(during, e))?;
        Ok(bytes)
    }

    /// Receives one frame straight into the start of `out`, which must
    /// have room for it; returns its length.
    pub(super) fn recv_into(&mut self, out: &mut [u8], during: &str) -> Result<usize, DistError> {
        let mut len = [0u8; 8];
        self.stream
            .read_exact(&mut len)
            .map_err(|e| self.error(during, e))?;
        let len = u64::from_le_bytes(len);
        if len > out.len() as u64 {
            return Err(DistError::Protocol {
                rank: self.rank,
                what: format!(
                    "{len} bytes where {} at most were due during {during}",
                    out.len()
                ),
            });
        }
        let len = len as usize;
        self.stream
            .read_exact(&mut out[..len])
            .map_err(|e| self.error(during, e))?;
        Ok(len)
    }

    /// Receives one frame of exactly `len` bytes.
    pub(super) fn recv_exact(&mut self, len: usize, during: &str) -> Result<Vec<u8>, DistError> {
        let bytes = self.recv(during)?;
        if bytes.len() != len {
            return Err(DistError::Protocol {
                rank: self.rank,
                what: format!("{} bytes where {len} were due during {during}", bytes.len()),
            });
        }
        Ok(bytes)
    }

    /// A second handle on the connection, for a watchdog that peeks.
    pub(super) fn watch_handle(&self) -> std::io::Result<TcpStream> {
        self.stream.try_clone()
    }

    /// Ends the connection for every handle on it (the watchdog's too).
    pub(super) fn shutdown(&self) {
        let _ = self.stream.shutdown(std::net::Shutdown::Both);
    }
}
