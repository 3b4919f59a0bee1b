//! The rendezvous: rank 0 listens on `MASTER_ADDR:MASTER_PORT`, every other
//! rank connects (retrying until the timeout: rank 0 may start last) and
//! says who it is and what problem it runs; rank 0 waits for all of them,
//! checks that they agree, and answers each with the NCCL unique id (or
//! with why it is refused). The connections stay open: they carry the TCP
//! collectives, and a rank that dies closes its own.

use std::net::{TcpListener, TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::wire::Peer;
use super::{DistError, RankEnv};

/// Bytes of an NCCL unique id (`NCCL_UNIQUE_ID_BYTES`).
pub const NCCL_ID_BYTES: usize = 128;

/// What a rank says when it arrives.
#[derive(Debug, Serialize, Deserialize)]
struct Hello {
    rank: usize,
    world_size: usize,
    problem: String,
}

/// Rank 0's answer.
#[derive(Debug, Serialize, Deserialize)]
struct Welcome {
    /// Why this rank (or the run) is refused; `None`: go.
    refused: Option<String>,
    nccl_id: Vec<u8>,
}

/// This rank's connections after the rendezvous (what [`super::TcpComm`]
/// runs over).
#[derive(Debug)]
pub struct Link(Inner);

#[derive(Debug)]
enum Inner {
    /// Rank 0: one connection per other rank, rank `r` at `r - 1`.
    Root(Vec<Peer>),
    /// Any other rank: its connection to rank 0.
    Leaf(Peer),
}

impl Link {
    /// The connections: rank 0's to the others, or this rank's to rank 0.
    pub(super) fn into_parts(self) -> (Vec<Peer>, Option<Peer>) {
        match self.0 {
            Inner::Root(peers) => (peers, None),
            Inner::Leaf(root) => (Vec::new(), Some(root)),
        }
    }
}

/// Meets the other ranks of `env`'s run. `problem` describes what this rank
/// runs (sizes, parameters, input files): every rank must give rank 0's, or
/// the run is refused naming the first that differs. `nccl_id` is called on
/// rank 0 only (it makes the id everyone gets; any 128 bytes for a run
/// without NCCL). Returns the connections and the id.
pub fn rendezvous(
    env: &RankEnv,
    problem: &str,
    nccl_id: impl FnOnce() -> Result<[u8; NCCL_ID_BYTES], DistError>,
) -> Result<(Link, [u8; NCCL_ID_BYTES]), DistError> {
    if env.rank == 0 {
        root(env, problem, nccl_id)
    } else {
        leaf(env, problem)
    }
}

fn address(env: &RankEnv) -> Result<std::net::SocketAddr, DistError> {
    let bad = |why: String| DistError::BadVar {
        var: "MASTER_ADDR",
        value: env.master_addr.clone(),
        why,
    };
    (env.master_addr.as_str(), env.master_port)
        .to_socket_addrs()
        .map_err(|e| bad(format!("cannot be resolved ({e})")))?
        .next()
        .ok_or_else(|| bad("resolves to no address".into()))
}

fn root(
    env: &RankEnv,
    problem: &str,
    nccl_id: impl FnOnce() -> Result<[u8; NCCL_ID_BYTES], DistError>,
) -> Result<(Link, [u8; NCCL_ID_BYTES]), DistError> {
    let addr = address(env)?;
    let io = |what: String| {
        move |source| DistError::Io {
            rank: 0,
            what,
            source,
        }
    };
    let listener = TcpListener::bind(addr).map_err(|source| {
        let taken = source.kind() == std::io::ErrorKind::AddrInUse;
        io(if taken {
            format!(
                "listening on {addr} (the port is taken: under torchrun its own store holds \
                 MASTER_PORT; set {} to a free port on every rank)",
                super::PORT_ENV
            )
        } else {
            format!("listening on {addr}")
        })(source)
    })?;
    listener
        .set_nonblocking(true)
        .map_err(io("setting the listener non-blocking".into()))?;
    let deadline = Instant::now() + env.timeout;
    let mut arrived: Vec<Option<Peer>> = (1..env.world_size).map(|_| None).collect();
    let mut refusal: Option<DistError> = None;
    while arrived.iter().any(Option::is_none) && refusal.is_none() {
        match listener.accept() {
            Ok((stream, _)) => {
                stream
                    .set_nonblocking(false)
                    .map_err(io("accepting a rank".into()))?;
                // Unknown until it says; 0 stands for "a connecting rank".
                let mut peer = Peer::new(0, stream, env.timeout)?;
                let hello: Hello = decode(0, &peer.recv("the rendezvous")?)?;
                peer.rank = hello.rank;
                let why = if hello.world_size != env.world_size {
                    Some(format!(
                        "WORLD_SIZE {} where rank 0 has {}",
                        hello.world_size, env.world_size
                    ))
                } else if hello.rank == 0 || hello.rank >= env.world_size {
                    Some(format!(
                        "RANK {} is not one of 1..{}",
                        hello.rank, env.world_size
                    ))
                } else if arrived[hello.rank - 1].is_some() {
                    Some(format!("RANK {} arrived twice", hello.rank))
                } else if hello.problem != problem {
                    Some(format!("`{}` where rank 0 runs `{problem}`", hello.problem))
                } else {
                    None
                };
                match why {
                    None => arrived[hello.rank - 1] = Some(peer),
                    Some(what) => {
                        let _ = send(&mut peer, Some(what.clone()), &[0; NCCL_ID_BYTES]);
                        refusal = Some(DistError::Mismatch {
                            rank: hello.rank,
                            what,
                        });
                    }
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                if Instant::now() >= deadline {
                    let missing = arrived.iter().position(Option::is_none).unwrap_or(0) + 1;
                    return Err(DistError::Timeout {
                        rank: missing,
                        during: format!("the rendezvous at {addr}"),
                        seconds: env.timeout.as_secs(),
                    });
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(e) => return Err(io("accepting a rank".into())(e)),
        }
    }
    let mut peers: Vec<Peer> = arrived.into_iter().flatten().collect();
    if let Some(refusal) = refusal {
        // The others are told too, so that none waits for a run that will
        // not happen.
        let why = format!("the run was refused: {refusal}");
        for peer in &mut peers {
            let _ = send(peer, Some(why.clone()), &[0; NCCL_ID_BYTES]);
        }
        return Err(refusal);
    }
    let id = nccl_id()?;
    for peer in &mut peers {
        send(peer, None, &id)?;
    }
    Ok((Link(Inner::Root(peers)), id))
}

fn send(peer: &mut Peer, refused: Option<String>, id: &[u8]) -> Result<(), DistError> {
    let welcome = Welcome {
        refused,
        nccl_id: id.to_vec(),
    };
    let bytes = serde_json::to_vec(&welcome).expect("a welcome serializes");
    peer.send(&bytes, "the rendezvous")
}

fn decode<T: for<'de> Deserialize<'de>>(rank: usize, bytes: &[u8]) -> Result<T, DistError> {
    serde_json::from_slice(bytes).map_err(|e| DistError::Protocol {
        rank,
        what: format!("a rendezvous message that does not parse ({e})"),
    })
}

fn leaf(env: &RankEnv, problem: &str) -> Result<(Link, [u8; NCCL_ID_BYTES]), DistError> {
    let addr = address(env)?;
    let deadline = Instant::now() + env.timeout;
    let stream = loop {
        match TcpStream::connect_timeout(&addr, Duration::from_secs(5)) {
            Ok(stream) => break stream,
            Err(_) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(50)),
            Err(_) => {
                return Err(DistError::Timeout {
                    rank: 0,
                    during: format!("the rendezvous (connecting to {addr})"),
                    seconds: env.timeout.as_secs(),
                })
            }
        }
    };
    let mut root = Peer::new(0, stream, env.timeout)?;
    let hello = Hello {
        rank: env.rank,
        world_size: env.world_size,
        problem: problem.to_string(),
    };
    let bytes = serde_json::to_vec(&hello).expect("a hello serializes");
    root.send(&bytes, "the rendezvous")?;
    let welcome: Welcome = decode(0, &root.recv("the rendezvous")?)?;
    if let Some(why) = welcome.refused {
        return Err(DistError::Refused(why));
    }
    let id: [u8; NCCL_ID_BYTES] =
        welcome
            .nccl_id
            .try_into()
            .map_err(|v: Vec<u8>| DistError::Protocol {
                rank: 0,
                what: format!("an NCCL id of {} bytes", v.len()),
            })?;
    Ok((Link(Inner::Leaf(root)), id))
}
