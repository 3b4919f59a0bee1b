//! One connection's handshake at the rendezvous. Rank 0 speaks first with
//! a fresh nonce; the connecting rank answers with its rank, world size and
//! problem, its own nonce, and an HMAC of all of them under the job's
//! secret ([`JobSecret`]); rank 0 checks it in constant time and, at the end
//! of the rendezvous, answers with the NCCL id and its own HMAC, which the
//! rank checks in turn. So neither end sends the secret, a stranger learns
//! nothing but that it was refused, and a replayed answer fails on the
//! nonces. Every frame of the handshake is small and bounded, and every
//! read has the handshake's timeout, so a stranger can neither hold rank 0
//! nor make it allocate.

use std::fmt;
use std::net::{SocketAddr, TcpStream};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::secret::{nonce, JobSecret, NONCE_BYTES};
use super::wire::Peer;
use super::{DistError, RankEnv, NCCL_ID_BYTES};

/// The handshake's version, in rank 0's first frame.
const PROTOCOL: &str = "kiln.rendezvous/2";

/// The largest frame of a handshake: the problem travels as its hash and
/// the first [`SHOWN_PROBLEM`] bytes of its text (for the messages).
const MAX_HANDSHAKE_FRAME: u64 = 64 << 10;

/// Bytes of the problem's text a hello carries, to name what differs.
const SHOWN_PROBLEM: usize = 4096;

/// Rank 0's first frame.
#[derive(Debug, Serialize, Deserialize)]
pub(super) struct Challenge {
    protocol: String,
    nonce: Vec<u8>,
}

/// What a connecting rank says, proven by `proof`.
#[derive(Debug, Serialize, Deserialize)]
pub(super) struct Hello {
    pub(super) rank: usize,
    pub(super) world_size: usize,
    /// SHA-256 of the problem's text, in hex: what is compared.
    pub(super) problem_hash: String,
    /// The start of the problem's text: what a refusal shows.
    pub(super) problem: String,
    nonce: Vec<u8>,
    proof: Vec<u8>,
}

/// Rank 0's last frame to a connecting rank.
#[derive(Debug, Serialize, Deserialize)]
enum Answer {
    /// The rank's proof failed: it is not of this job.
    Stranger,
    /// It is of this job, but it (or the run) is refused.
    Refused { why: String },
    /// The run goes on with this id; `proof` is rank 0's.
    Go { nccl_id: Vec<u8>, proof: Vec<u8> },
}

/// A connection rank 0 turned away while it waited for its ranks: logged,
/// and the rendezvous goes on.
#[derive(Debug, Clone, PartialEq)]
pub struct Refusal {
    /// Where it came from.
    pub from: SocketAddr,
    /// Why.
    pub reason: RefusalReason,
}

/// Why rank 0 turned a connection away.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum RefusalReason {
    /// Its proof does not hold this job's secret.
    Stranger,
    /// A rank of this job, but of a run of another size.
    WorldSize {
        /// Its `WORLD_SIZE`.
        theirs: usize,
        /// Rank 0's.
        ours: usize,
    },
    /// It said nothing within the handshake's timeout.
    Silent {
        /// The timeout, in seconds.
        seconds: f64,
    },
    /// It closed the connection before it said who it is.
    Closed,
    /// It sent something that is not the handshake.
    Malformed(String),
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "refused a connection from {}: ", self.from)?;
        match &self.reason {
            RefusalReason::Stranger => write!(
                f,
                "it does not hold this job's secret (a rank of another job on this port, or one \
                 started without this job's {})",
                super::SECRET_ENV
            ),
            RefusalReason::WorldSize { theirs, ours } => write!(
                f,
                "a rank of a run of {theirs} processes, this one has {ours} (WORLD_SIZE)"
            ),
            RefusalReason::Silent { seconds } => write!(
                f,
                "it said nothing for {seconds} s (raise {} if ranks are that slow to connect)",
                super::HANDSHAKE_TIMEOUT_ENV
            ),
            RefusalReason::Closed => write!(f, "it closed the connection before saying who it is"),
            RefusalReason::Malformed(what) => write!(f, "it sent {what}"),
        }
    }
}

/// SHA-256 of `problem`, in hex.
fn problem_hash(problem: &str) -> String {
    Sha256::digest(problem.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The first [`SHOWN_PROBLEM`] bytes of `problem`, cut at a character.
fn shown(problem: &str) -> String {
    let mut end = problem.len().min(SHOWN_PROBLEM);
    while !problem.is_char_boundary(end) {
        end -= 1;
    }
    problem[..end].to_string()
}

/// What both proofs cover: the nonces, then who the rank says it is.
fn covered<'a>(
    nonces: &'a [[u8; NONCE_BYTES]; 2],
    who: &'a [[u8; 8]; 2],
    problem_hash: &'a str,
) -> [&'a [u8]; 5] {
    [
        &nonces[0],
        &nonces[1],
        &who[0],
        &who[1],
        problem_hash.as_bytes(),
    ]
}

fn who(rank: usize, world_size: usize) -> [[u8; 8]; 2] {
    [
        (rank as u64).to_le_bytes(),
        (world_size as u64).to_le_bytes(),
    ]
}

fn parse<T: for<'de> Deserialize<'de>>(bytes: &[u8], what: &str) -> Result<T, String> {
    serde_json::from_slice(bytes).map_err(|e| format!("{what} that does not parse ({e})"))
}

fn send<T: Serialize>(peer: &mut Peer, message: &T) -> Result<(), DistError> {
    let bytes = serde_json::to_vec(message).expect("a handshake message serializes");
    peer.send(&bytes, "the rendezvous's handshake")
}

/// A connecting rank that proved it is of this job, as rank 0 holds it
/// until the rendezvous ends.
#[derive(Debug)]
pub(super) struct Arrival {
    pub(super) peer: Peer,
    pub(super) hello: Hello,
    nonces: [[u8; NONCE_BYTES]; 2],
}

impl Arrival {
    /// Tells the rank the run goes on with `id`, with rank 0's proof.
    pub(super) fn go(&mut self, secret: &JobSecret, id: &[u8]) -> Result<(), DistError> {
        let who = who(self.hello.rank, self.hello.world_size);
        let mut parts = covered(&self.nonces, &who, &self.hello.problem_hash).to_vec();
        parts.push(id);
        let proof = secret.prove("root", &parts).to_vec();
        let answer = Answer::Go {
            nccl_id: id.to_vec(),
            proof,
        };
        send(&mut self.peer, &answer)
    }

    /// Tells the rank why it (or the run) is refused.
    pub(super) fn refuse(&mut self, why: String) {
        // It may be gone already; it is refused either way.
        let _ = send(&mut self.peer, &Answer::Refused { why });
    }
}

/// Rank 0's side of one connection: the challenge, the rank's hello and
/// its proof, within `env.handshake_timeout`. On success the connection's
/// timeout becomes the run's.
pub(super) fn greet(stream: TcpStream, env: &RankEnv) -> Result<Arrival, RefusalReason> {
    let malformed = |e: DistError| RefusalReason::Malformed(e.to_string());
    stream
        .set_nonblocking(false)
        .map_err(|e| RefusalReason::Malformed(format!("nothing usable ({e})")))?;
    // Unknown until it says; 0 stands for "a connecting rank".
    let mut peer = Peer::new(0, stream, env.handshake_timeout).map_err(malformed)?;
    let ours = nonce().map_err(malformed)?;
    let challenge = Challenge {
        protocol: PROTOCOL.into(),
        nonce: ours.to_vec(),
    };
    send(&mut peer, &challenge).map_err(|e| reason_of(e, env))?;
    let bytes = peer
        .recv_limited(MAX_HANDSHAKE_FRAME, "the rendezvous's handshake")
        .map_err(|e| reason_of(e, env))?;
    let hello: Hello = parse(&bytes, "a hello").map_err(RefusalReason::Malformed)?;
    let theirs: [u8; NONCE_BYTES] =
        hello.nonce.as_slice().try_into().map_err(|_| {
            RefusalReason::Malformed(format!("a nonce of {} bytes", hello.nonce.len()))
        })?;
    let nonces = [ours, theirs];
    let who = who(hello.rank, hello.world_size);
    let parts = covered(&nonces, &who, &hello.problem_hash);
    if !env.secret.verify(&hello.proof, "rank", &parts) {
        let _ = send(&mut peer, &Answer::Stranger);
        return Err(RefusalReason::Stranger);
    }
    if hello.world_size != env.world_size {
        let why = format!(
            "WORLD_SIZE {} where rank 0 has {}",
            hello.world_size, env.world_size
        );
        let _ = send(&mut peer, &Answer::Refused { why });
        return Err(RefusalReason::WorldSize {
            theirs: hello.world_size,
            ours: env.world_size,
        });
    }
    peer.rank = hello.rank;
    peer.set_timeout(env.timeout).map_err(malformed)?;
    Ok(Arrival {
        peer,
        hello,
        nonces,
    })
}

/// The refusal of a connection whose handshake failed with `error`.
fn reason_of(error: DistError, env: &RankEnv) -> RefusalReason {
    match error {
        DistError::Timeout { .. } => RefusalReason::Silent {
            seconds: env.handshake_timeout.as_secs_f64(),
        },
        DistError::PeerGone { .. } => RefusalReason::Closed,
        DistError::Protocol { what, .. } => RefusalReason::Malformed(what),
        other => RefusalReason::Malformed(other.to_string()),
    }
}

/// A connecting rank's first step: rank 0's challenge, within the
/// handshake's timeout. A timeout or a closed connection here is worth
/// another try (rank 0 may be busy with other connections).
pub(super) fn challenge(stream: TcpStream, env: &RankEnv) -> Result<(Peer, Challenge), DistError> {
    let mut root = Peer::new(0, stream, env.handshake_timeout)?;
    let bytes = root.recv_limited(MAX_HANDSHAKE_FRAME, "the rendezvous's handshake")?;
    let challenge =
        parse(&bytes, "a challenge").map_err(|what| DistError::Protocol { rank: 0, what })?;
    Ok((root, challenge))
}

/// A connecting rank's side after [`challenge`]: answers it with its hello
/// and proof, waits for the answer (with the run's timeout: rank 0 answers
/// when every rank is there) and checks rank 0's proof. Returns the
/// connection and the NCCL id.
pub(super) fn join(
    mut root: Peer,
    challenge: Challenge,
    env: &RankEnv,
    problem: &str,
    addr: SocketAddr,
) -> Result<(Peer, [u8; NCCL_ID_BYTES]), DistError> {
    let protocol = |what: String| DistError::Protocol { rank: 0, what };
    if challenge.protocol != PROTOCOL {
        return Err(protocol(format!(
            "handshake {:?} where this rank speaks {PROTOCOL:?}",
            challenge.protocol
        )));
    }
    let theirs: [u8; NONCE_BYTES] = challenge
        .nonce
        .as_slice()
        .try_into()
        .map_err(|_| protocol(format!("a nonce of {} bytes", challenge.nonce.len())))?;
    let nonces = [theirs, nonce()?];
    let hash = problem_hash(problem);
    let who = who(env.rank, env.world_size);
    let parts = covered(&nonces, &who, &hash);
    let hello = Hello {
        rank: env.rank,
        world_size: env.world_size,
        problem_hash: hash.clone(),
        problem: shown(problem),
        nonce: nonces[1].to_vec(),
        proof: env.secret.prove("rank", &parts).to_vec(),
    };
    send(&mut root, &hello)?;
    root.set_timeout(env.timeout)?;
    let bytes = root.recv_limited(MAX_HANDSHAKE_FRAME, "the rendezvous")?;
    let stranger = || DistError::OtherJob {
        addr: addr.to_string(),
    };
    match parse(&bytes, "an answer").map_err(protocol)? {
        Answer::Stranger => Err(stranger()),
        Answer::Refused { why } => Err(DistError::Refused(why)),
        Answer::Go { nccl_id, proof } => {
            let mut parts = parts.to_vec();
            parts.push(&nccl_id);
            if !env.secret.verify(&proof, "root", &parts) {
                return Err(stranger());
            }
            let id = nccl_id
                .try_into()
                .map_err(|v: Vec<u8>| protocol(format!("an NCCL id of {} bytes", v.len())))?;
            Ok((root, id))
        }
    }
}

/// Whether `hello`'s problem is `problem` (by hash); when not, what to say.
pub(super) fn problem_differs(hello: &Hello, problem: &str) -> Option<String> {
    if hello.problem_hash == problem_hash(problem) {
        return None;
    }
    let ours = shown(problem);
    let cut = if ours.len() < problem.len() {
        "..."
    } else {
        ""
    };
    Some(format!(
        "`{}{cut}` where rank 0 runs `{ours}{cut}`",
        hello.problem
    ))
}
