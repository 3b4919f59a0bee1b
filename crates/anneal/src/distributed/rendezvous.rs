//! The rendezvous: rank 0 listens on `MASTER_ADDR:MASTER_PORT`, every other
//! rank connects (retrying until the timeout: rank 0 may start last) and
//! proves in a handshake ([`super::handshake`]) that it is a rank of this
//! job (the job's secret) of a run of this size, and says who it is and
//! what problem it runs. A connection that fails the handshake (a stranger,
//! another world size, silence past the handshake's timeout, garbage) is
//! closed and reported through `on_refused`, and rank 0 goes on waiting;
//! the handshakes run on threads of their own, so none holds up another.
//! When every rank is there rank 0 checks that they agree and answers each
//! with the NCCL unique id (or with why the run is refused). The
//! connections stay open: they carry the TCP collectives, and a rank that
//! dies closes its own.

use std::collections::HashMap;
use std::net::{SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use super::handshake::{self, Arrival, Refusal, RefusalReason};
use super::wire::{Peer, NCCL_ID_BYTES};
use super::{DistError, RankEnv};

/// Connections rank 0 lets be mid-handshake at once (a flood costs it no
/// more threads or memory than this).
const MAX_PENDING: usize = 32;

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
/// without NCCL). `on_refused` is called on rank 0, once for each
/// connection it turned away while it waited (a rank of another job, of a
/// run of another size, a silent or garbled connection). Returns the
/// connections and the id.
pub fn rendezvous(
    env: &RankEnv,
    problem: &str,
    nccl_id: impl FnOnce() -> Result<[u8; NCCL_ID_BYTES], DistError>,
    on_refused: impl FnMut(&Refusal),
) -> Result<(Link, [u8; NCCL_ID_BYTES]), DistError> {
    if env.rank == 0 {
        root(env, problem, nccl_id, on_refused)
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
    on_refused: impl FnMut(&Refusal),
) -> Result<(Link, [u8; NCCL_ID_BYTES]), DistError> {
    let addr = address(env)?;
    let listener = listen(addr)?;
    let mut arrivals = gather(env, problem, &listener, addr, on_refused)?;
    // Late connections are refused by the closed port, not left waiting.
    drop(listener);
    let id = nccl_id()?;
    for arrival in &mut arrivals {
        arrival.go(&env.secret, &id)?;
    }
    let peers = arrivals.into_iter().map(|a| a.peer).collect();
    Ok((Link(Inner::Root(peers)), id))
}

/// Rank 0's listener on `addr`, non-blocking.
fn listen(addr: SocketAddr) -> Result<TcpListener, DistError> {
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
                "listening on {addr} (the port is taken: another job's rank 0, another \
                 program, or under torchrun its own store on MASTER_PORT; give this job \
                 another port, or set {} to a free one on every rank)",
                super::PORT_ENV
            )
        } else {
            format!("listening on {addr}")
        })(source)
    })?;
    listener
        .set_nonblocking(true)
        .map_err(io("setting the listener non-blocking".into()))?;
    Ok(listener)
}

/// One handshake's end: its connection's number and how it went.
type Outcome = (u64, SocketAddr, Result<Arrival, RefusalReason>);

/// Accepts connections until every other rank of the run has passed its
/// handshake, each handshake on a thread of its own; returns them in rank
/// order.
fn gather(
    env: &RankEnv,
    problem: &str,
    listener: &TcpListener,
    addr: SocketAddr,
    mut on_refused: impl FnMut(&Refusal),
) -> Result<Vec<Arrival>, DistError> {
    let deadline = deadline(env.timeout);
    let (done, outcomes) = mpsc::channel::<Outcome>();
    // Second handles on the connections mid-handshake, shut down when the
    // rendezvous ends so that no handshake thread outlives it.
    let mut pending: HashMap<u64, TcpStream> = HashMap::new();
    let mut arrived: Vec<Option<Arrival>> = (1..env.world_size).map(|_| None).collect();
    let mut next = 0u64;
    let result = std::thread::scope(|scope| {
        let result = 'wait: loop {
            while let Ok((number, from, outcome)) = outcomes.try_recv() {
                pending.remove(&number);
                match outcome {
                    Ok(arrival) => {
                        if let Err(e) = admit(&mut arrived, arrival, env, problem) {
                            break 'wait Err(e);
                        }
                    }
                    Err(reason) => on_refused(&Refusal { from, reason }),
                }
            }
            if arrived.iter().all(Option::is_some) {
                break Ok(());
            }
            // At the limit, new connections wait in the kernel's queue
            // until a handshake ends (they time out within the handshake's
            // timeout): a flood delays a rank, never turns it away.
            let accepted = if pending.len() < MAX_PENDING {
                listener.accept()
            } else {
                Err(std::io::ErrorKind::WouldBlock.into())
            };
            match accepted {
                Ok((stream, from)) => {
                    let second = match stream.try_clone() {
                        Ok(second) => second,
                        Err(e) => {
                            let reason = RefusalReason::Malformed(format!("nothing usable ({e})"));
                            on_refused(&Refusal { from, reason });
                            continue;
                        }
                    };
                    next += 1;
                    pending.insert(next, second);
                    let (number, done) = (next, done.clone());
                    scope.spawn(move || {
                        let _ = done.send((number, from, handshake::greet(stream, env)));
                    });
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    if passed(deadline) {
                        let missing = arrived.iter().position(Option::is_none).unwrap_or(0) + 1;
                        break Err(DistError::Timeout {
                            rank: missing,
                            during: format!("the rendezvous at {addr}"),
                            seconds: env.timeout.as_secs(),
                        });
                    }
                    std::thread::sleep(Duration::from_millis(10));
                }
                Err(source) => {
                    break Err(DistError::Io {
                        rank: 0,
                        what: "accepting a rank".into(),
                        source,
                    })
                }
            }
        };
        for stream in pending.values() {
            let _ = stream.shutdown(std::net::Shutdown::Both);
        }
        result
    });
    // Handshakes that ended as the rendezvous did: a stranger or another
    // world size is still worth its line; a closed or silent one may be
    // this shutdown's doing.
    for (_, from, outcome) in outcomes.try_iter() {
        if let Err(reason @ (RefusalReason::Stranger | RefusalReason::WorldSize { .. })) = outcome {
            on_refused(&Refusal { from, reason });
        }
    }
    result?;
    Ok(arrived.into_iter().flatten().collect())
}

/// Takes `arrival` (a rank of this job and size) into its rank's place,
/// unless it disagrees with rank 0: a rank out of range, one that arrived
/// already, or another problem refuses the run, and every rank there is
/// told, so that none waits for a run that will not happen.
fn admit(
    arrived: &mut [Option<Arrival>],
    mut arrival: Arrival,
    env: &RankEnv,
    problem: &str,
) -> Result<(), DistError> {
    let rank = arrival.hello.rank;
    let why = if rank == 0 || rank >= env.world_size {
        Some(format!("RANK {rank} is not one of 1..{}", env.world_size))
    } else if arrived[rank - 1].is_some() {
        Some(format!("RANK {rank} arrived twice"))
    } else {
        handshake::problem_differs(&arrival.hello, problem)
    };
    let Some(what) = why else {
        arrived[rank - 1] = Some(arrival);
        return Ok(());
    };
    arrival.refuse(what.clone());
    let refusal = DistError::Mismatch { rank, what };
    let why = format!("the run was refused: {refusal}");
    for other in arrived.iter_mut().flatten() {
        other.refuse(why.clone());
    }
    Err(refusal)
}

/// When a wait of `timeout` from now ends; `None` (no end) for a
/// timeout past what `Instant` holds (a `RankEnv` made in code: the
/// environment's are at most `MAX_TIMEOUT_SECS`).
pub(super) fn deadline(timeout: Duration) -> Option<Instant> {
    Instant::now().checked_add(timeout)
}

/// Whether `deadline` ([`deadline`]) has passed.
pub(super) fn passed(deadline: Option<Instant>) -> bool {
    deadline.is_some_and(|d| Instant::now() >= d)
}

fn leaf(env: &RankEnv, problem: &str) -> Result<(Link, [u8; NCCL_ID_BYTES]), DistError> {
    let addr = address(env)?;
    let deadline = deadline(env.timeout);
    let (root, challenge) = loop {
        let retry = match TcpStream::connect_timeout(&addr, Duration::from_secs(5)) {
            // Rank 0 not listening yet, or not answering yet (busy with
            // other connections): both worth another try.
            Ok(stream) => match handshake::challenge(stream, env) {
                Ok(both) => break both,
                Err(e @ (DistError::Timeout { .. } | DistError::PeerGone { .. })) => e,
                Err(e) => return Err(e),
            },
            Err(_) => DistError::Timeout {
                rank: 0,
                during: format!("the rendezvous (connecting to {addr})"),
                seconds: env.timeout.as_secs(),
            },
        };
        if passed(deadline) {
            return Err(retry);
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let (root, id) = handshake::join(root, challenge, env, problem, addr)?;
    Ok((Link(Inner::Leaf(root)), id))
}
