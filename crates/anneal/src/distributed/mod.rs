//! One process per GPU (or per CPU rank): the anneal run by several
//! processes, on one host or many, started by a launcher (torchrun, MPI,
//! Slurm, `apps launch`). Each process reads its rank from the environment
//! ([`RankEnv`]), meets the others at rank 0's address ([`rendezvous`]:
//! every rank runs the same problem, rank 0 hands out the NCCL unique id,
//! and a handshake under the job's secret, [`SECRET_ENV`], keeps out the
//! ranks of other jobs), holds only its rows of the input ([`rows_of`]),
//! and combines its statistics with the others' through a [`Communicator`]
//! each iteration.
//!
//! The TCP communicator ([`TcpComm`]) is the rendezvous's connections: a
//! star around rank 0, which adds the ranks' vectors in rank order, so every
//! rank gets the same bits. A rank that dies closes its connection; the
//! others' next receive fails naming it, and a silent rank fails them after
//! [`RankEnv::timeout`]: never a hang.

mod comm;
mod engine;
mod env;
mod gpu_engine;
mod handshake;
mod rendezvous;
mod secret;
#[cfg(test)]
mod tests;
mod watchdog;
mod wire;

pub use comm::{Communicator, TcpComm};
pub use engine::{gather_assignments, RankEngine};
pub use env::{rows_of, RankEnv, HANDSHAKE_TIMEOUT_ENV, PORT_ENV, TIMEOUT_ENV};
pub use gpu_engine::GpuRankEngine;
pub use handshake::{Refusal, RefusalReason};
pub use rendezvous::{rendezvous, Link};
pub use secret::{JobSecret, SecretSource, SECRET_ENV};
pub use watchdog::Watchdog;
pub use wire::NCCL_ID_BYTES;

/// Why a multi-process run could not start or went on no further.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DistError {
    /// A launcher variable is missing.
    #[error("{var} is not set; start each process with a launcher (torchrun, srun, mpirun, apps launch) or set RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT")]
    MissingVar {
        /// The variable.
        var: &'static str,
    },
    /// A launcher variable has a value that cannot be used.
    #[error("{var}={value:?}: {why}")]
    BadVar {
        /// The variable.
        var: &'static str,
        /// Its value.
        value: String,
        /// What is wrong with it.
        why: String,
    },
    /// A socket operation failed.
    #[error("rank {rank}: {what} failed: {source}")]
    Io {
        /// The rank at the other end (this process's own for a listen).
        rank: usize,
        /// What was being done.
        what: String,
        /// The socket's error.
        source: std::io::Error,
    },
    /// A peer's connection closed: the process exited or crashed.
    #[error("rank {rank} closed its connection during {during}: that process exited or was killed; see its output")]
    PeerGone {
        /// The rank that went away.
        rank: usize,
        /// What the run was doing.
        during: String,
    },
    /// A peer sent nothing for too long.
    #[error("no word from rank {rank} for {seconds} s during {during}: it hangs, has not started, or its host is unreachable (raise {var} if it is only slow)", var = TIMEOUT_ENV)]
    Timeout {
        /// The silent rank.
        rank: usize,
        /// What the run was doing.
        during: String,
        /// The limit.
        seconds: u64,
    },
    /// A rank runs another problem than rank 0.
    #[error("rank {rank} runs another problem than rank 0: {what}; start every rank with the same arguments and input")]
    Mismatch {
        /// The rank that differs.
        rank: usize,
        /// What differs.
        what: String,
    },
    /// A peer sent something that is not the protocol.
    #[error("rank {rank} sent {what}; are both ends the same kiln version?")]
    Protocol {
        /// The rank.
        rank: usize,
        /// What was wrong.
        what: String,
    },
    /// Rank 0 refused this rank (it says why).
    #[error("rank 0 refused this rank: {0}")]
    Refused(String),
    /// What listens at the rendezvous's address is not this job's rank 0.
    #[error("the rank 0 at {addr} is not of this job (it does not hold this job's {var}): another job uses this port, or this job's ranks were given different secrets; give each job its own port (MASTER_PORT, {port}) and every rank of one job the same {var}", var = SECRET_ENV, port = PORT_ENV)]
    OtherJob {
        /// The rendezvous's address.
        addr: String,
    },
    /// The OS's random generator failed (the rendezvous's nonces).
    #[error("the operating system's random generator failed: {0}")]
    Random(String),
}
