//! One process per GPU (or per CPU rank): the anneal run by several
//! processes, on one host or many, started by a launcher (torchrun, Slurm's
//! srun, or any launcher setting torchrun's variables). Each process reads its rank from the environment
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
mod nodelist;
mod rendezvous;
mod secret;
mod session;
#[cfg(test)]
mod tests;
mod watchdog;
mod wire;

pub use crate::gpu::JoinTimes;
pub use comm::{Communicator, TcpComm};
pub use engine::{gather_assignments, RankEngine};
pub use env::{
    gpu_ordinal, rows_of, RankEnv, HANDSHAKE_TIMEOUT_ENV, MAX_TIMEOUT_SECS, PORT_ENV, SLURM_PORTS,
    SLURM_PORT_BASE, TIMEOUT_ENV,
};
pub use gpu_engine::{GpuRankEngine, UploadedRank};
pub use handshake::{Refusal, RefusalReason};
pub use rendezvous::{rendezvous, Link};
pub use secret::{JobSecret, SecretSource, SECRET_ENV};
pub use session::{meet, Meeting, RankSession, SessionTimes};
pub use watchdog::Watchdog;
pub use wire::NCCL_ID_BYTES;

// The error type lives with the crate's other errors (`crate::error`), a
// module that names no other: the engines and the distributed runtime both
// reach it.
pub use crate::error::DistError;
