//! Frames on the ranks' TCP connections: a little-endian `u64` length, then
//! that many bytes. Every read has a timeout (the handshake's, then the
//! run's) and a bound on the length; a closed connection and a timeout
//! become errors naming the peer.

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use super::DistError;

/// Bytes of an NCCL unique id (`NCCL_UNIQUE_ID_BYTES`), as rank 0 sends it
/// to every rank in the handshake. Here, below both the handshake and the
/// rendezvous that use it, so that neither imports the other for it.
pub const NCCL_ID_BYTES: usize = 128;

/// The largest frame accepted (16 GiB): a length beyond is a corrupt or
/// foreign stream, refused before anything is allocated.
const MAX_FRAME: u64 = 1 << 34;

/// Bytes reserved for a frame before any arrive: a larger one grows as its
/// bytes come, so a length alone allocates no more than this.
const FIRST_CHUNK: u64 = 64 << 20;

/// A connection to rank `peer`.
#[derive(Debug)]
pub(super) struct Peer {
    pub(super) rank: usize,
    /// Its end of the connection (its host), for the messages.
    addr: Option<std::net::SocketAddr>,
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
        stream.set_nodelay(true).map_err(|source| DistError::Io {
            rank,
            what: "setting TCP_NODELAY".into(),
            source,
        })?;
        let mut peer = Self {
            rank,
            addr: stream.peer_addr().ok(),
            stream,
            timeout,
        };
        peer.set_timeout(timeout)?;
        Ok(peer)
    }

    /// The error of a failed read or write during `during`.
    fn error(&self, during: &str, source: std::io::Error) -> DistError {
        match source.kind() {
            ErrorKind::UnexpectedEof
            | ErrorKind::ConnectionReset
            | ErrorKind::ConnectionAborted
            | ErrorKind::BrokenPipe => DistError::PeerGone {
                rank: self.rank,
                addr: self.addr,
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
        self.recv_limited(MAX_FRAME, during)
    }

    /// Receives one frame of at most `max` bytes; a longer one is refused
    /// before its bytes are read. Memory grows with the bytes that arrive,
    /// not with the length the peer claims.
    pub(super) fn recv_limited(&mut self, max: u64, during: &str) -> Result<Vec<u8>, DistError> {
        let mut len = [0u8; 8];
        self.stream
            .read_exact(&mut len)
            .map_err(|e| self.error(during, e))?;
        let len = u64::from_le_bytes(len);
        if len > max {
            return Err(DistError::Protocol {
                rank: self.rank,
                what: format!("a frame of {len} bytes (at most {max} are due during {during})"),
            });
        }
        let mut bytes = Vec::with_capacity(len.min(FIRST_CHUNK) as usize);
        let got = (&mut self.stream)
            .take(len)
            .read_to_end(&mut bytes)
            .map_err(|e| self.error(during, e))?;
        if got as u64 != len {
            let eof = std::io::Error::from(ErrorKind::UnexpectedEof);
            return Err(self.error(during, eof));
        }
        Ok(bytes)
    }

    /// Sets the limit of every later read and write.
    pub(super) fn set_timeout(&mut self, timeout: Duration) -> Result<(), DistError> {
        let io = |what: &str| {
            let (rank, what) = (self.rank, what.to_string());
            move |source| DistError::Io { rank, what, source }
        };
        self.stream
            .set_read_timeout(Some(timeout))
            .map_err(io("setting the read timeout"))?;
        self.stream
            .set_write_timeout(Some(timeout))
            .map_err(io("setting the write timeout"))?;
        self.timeout = timeout;
        Ok(())
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
