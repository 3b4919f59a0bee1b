//! The collectives a multi-process anneal needs ([`Communicator`]) and
//! their TCP implementation over the rendezvous's connections
//! ([`TcpComm`]): rank 0 receives every rank's part in rank order, adds or
//! joins them, and sends the result back, so that every rank holds the same
//! bits and the sums have one fixed order.

use super::rendezvous::Link;
use super::wire::Peer;
use super::DistError;

/// Collectives over the ranks of one run; every rank calls the same ones in
/// the same order.
pub trait Communicator {
    /// This process's rank.
    fn rank(&self) -> usize;
    /// Ranks in the run.
    fn world_size(&self) -> usize;
    /// Element-wise sum over the ranks, in place, added in rank order
    /// (`((v0 + v1) + v2) + ...`): every rank gets the same bits.
    fn all_reduce_sum(&mut self, values: &mut [f64], during: &str) -> Result<(), DistError>;
    /// Rank 0's `bytes` to every rank (the others' are replaced).
    fn broadcast(&mut self, bytes: &mut Vec<u8>, during: &str) -> Result<(), DistError>;
    /// Every rank's `bytes` on rank 0, in rank order; empty elsewhere.
    fn gather(&mut self, bytes: &[u8], during: &str) -> Result<Vec<Vec<u8>>, DistError>;
    /// A gather with no copies, and in pieces: each other rank sends its
    /// part as one or more frames of `send_part`, in order, and rank 0
    /// receives ([`Communicator::recv_parts`]) rank `r`'s frames straight
    /// into `slots[r - 1]`, which they must fill exactly. Rank 0's own
    /// part is the caller's to place (its `send_part` sends nothing). So a
    /// rank can send what it has read while it reads the rest.
    fn send_part(&mut self, bytes: &[u8], during: &str) -> Result<(), DistError>;
    /// Rank 0's side of [`Communicator::send_part`].
    fn recv_parts(&mut self, slots: &mut [&mut [u8]], during: &str) -> Result<(), DistError>;
}

/// [`Communicator`] over TCP: a star around rank 0.
#[derive(Debug)]
pub struct TcpComm {
    rank: usize,
    world_size: usize,
    /// Rank 0: the other ranks, rank `r` at `r - 1`.
    peers: Vec<Peer>,
    /// Other ranks: rank 0.
    root: Option<Peer>,
}

impl TcpComm {
    /// The collectives of rank `rank` of `world_size`, over `link` (from
    /// [`super::rendezvous`] of the same run).
    pub fn new(rank: usize, world_size: usize, link: Link) -> Self {
        let (peers, root) = link.into_parts();
        Self {
            rank,
            world_size,
            peers,
            root,
        }
    }
}

impl Drop for TcpComm {
    /// Leaving ends the connections, even where a watchdog holds a second
    /// handle on them: the peers see this rank go.
    fn drop(&mut self) {
        for peer in self.peers.iter().chain(&self.root) {
            peer.shutdown();
        }
    }
}

impl TcpComm {
    /// Each peer's rank and a second handle on its connection.
    pub(super) fn watch_handles(&self) -> Result<Vec<(usize, std::net::TcpStream)>, DistError> {
        self.peers
            .iter()
            .chain(&self.root)
            .map(|peer| {
                peer.watch_handle()
                    .map(|s| (peer.rank, s))
                    .map_err(|source| DistError::Io {
                        rank: peer.rank,
                        what: "duplicating the connection for the watchdog".into(),
                        source,
                    })
            })
            .collect()
    }
}

fn to_bytes(values: &[f64]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_le_bytes()).collect()
}

fn from_bytes(bytes: &[u8], out: &mut [f64]) {
    for (v, b) in out.iter_mut().zip(bytes.chunks_exact(8)) {
        *v = f64::from_le_bytes(b.try_into().expect("chunks of 8"));
    }
}

impl Communicator for TcpComm {
    fn rank(&self) -> usize {
        self.rank
    }

    fn world_size(&self) -> usize {
        self.world_size
    }

    fn all_reduce_sum(&mut self, values: &mut [f64], during: &str) -> Result<(), DistError> {
        let len = values.len() * 8;
        if let Some(root) = &mut self.root {
            root.send(&to_bytes(values), during)?;
            from_bytes(&root.recv_exact(len, during)?, values);
            return Ok(());
        }
        let mut part = vec![0.0f64; values.len()];
        for peer in &mut self.peers {
            from_bytes(&peer.recv_exact(len, during)?, &mut part);
            for (v, p) in values.iter_mut().zip(&part) {
                *v += p;
            }
        }
        let bytes = to_bytes(values);
        for peer in &mut self.peers {
            peer.send(&bytes, during)?;
        }
        Ok(())
    }

    fn broadcast(&mut self, bytes: &mut Vec<u8>, during: &str) -> Result<(), DistError> {
        if let Some(root) = &mut self.root {
            *bytes = root.recv(during)?;
            return Ok(());
        }
        for peer in &mut self.peers {
            peer.send(bytes, during)?;
        }
        Ok(())
    }

    fn gather(&mut self, bytes: &[u8], during: &str) -> Result<Vec<Vec<u8>>, DistError> {
        if let Some(root) = &mut self.root {
            root.send(bytes, during)?;
            return Ok(Vec::new());
        }
        let mut all = Vec::with_capacity(self.world_size);
        all.push(bytes.to_vec());
        for peer in &mut self.peers {
            all.push(peer.recv(during)?);
        }
        Ok(all)
    }

    fn send_part(&mut self, bytes: &[u8], during: &str) -> Result<(), DistError> {
        match &mut self.root {
            Some(root) => root.send(bytes, during),
            // Rank 0 places its own part.
            None => Ok(()),
        }
    }

    fn recv_parts(&mut self, slots: &mut [&mut [u8]], during: &str) -> Result<(), DistError> {
        for (i, peer) in self.peers.iter_mut().enumerate() {
            // A missing slot has room for nothing: its rank's part is refused.
            let slot: &mut [u8] = slots.get_mut(i).map_or(&mut [], |s| &mut **s);
            let mut at = 0;
            while at < slot.len() {
                let got = peer.recv_into(&mut slot[at..], during)?;
                if got == 0 {
                    return Err(DistError::Protocol {
                        rank: peer.rank,
                        what: format!("an empty frame during {during}"),
                    });
                }
                at += got;
            }
        }
        Ok(())
    }
}
