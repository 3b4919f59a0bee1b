//! NCCL across processes: one [`RankCollective`] per process, made from a
//! unique id that rank 0 creates ([`nccl_unique_id`]) and hands to the
//! others by any channel the caller has (a TCP rendezvous, MPI), then
//! in-place all-reduce and broadcast on that process's stream. A peer that
//! dies leaves NCCL's kernels waiting on it: [`AbortHandle::abort`]
//! (`ncclCommAbort`, from any thread) ends them, and
//! [`RankCollective::check`] reports NCCL's own asynchronous errors.

use std::sync::{Arc, Weak};

use crate::error::{driver, nccl_failed, CollectiveMismatch, Error};
use crate::ffi::nccl::rank::{self, RankComm, RankError};
use crate::ffi::nccl::AllReduceError;
use crate::memory::ViewMutRef;
use crate::multi::{sealed::Sealed, CollectiveElem};
use crate::stream::Stream;
use crate::DeviceViewMut;

/// Bytes of an NCCL unique id.
pub const NCCL_ID_BYTES: usize = rank::UNIQUE_ID_BYTES;

fn rank_error(e: RankError) -> Error {
    match e {
        RankError::Unavailable(e) => Error::NcclUnavailable(e),
        RankError::Call(AllReduceError::Invalid(what)) => {
            Error::InvalidCollective(CollectiveMismatch::Other { what })
        }
        RankError::Call(AllReduceError::Driver(source)) => driver("bind context")(source),
        RankError::Call(AllReduceError::Nccl(failed)) => nccl_failed(failed),
    }
}

/// A new NCCL unique id (`ncclGetUniqueId`), made once, by rank 0, and given
/// to every rank's [`RankCollective::new`].
pub fn nccl_unique_id() -> Result<[u8; NCCL_ID_BYTES], Error> {
    rank::unique_id().map_err(rank_error)
}

/// This process's rank of an NCCL communicator over several processes (one
/// GPU each, on one host or many).
#[derive(Debug)]
pub struct RankCollective {
    /// Destroyed (or aborted) before `stream`'s context goes.
    comm: Arc<RankComm>,
    stream: Stream,
    rank: usize,
    world_size: usize,
}

/// Ends a [`RankCollective`]'s operations from another thread (a watchdog
/// that saw a peer die). It does not keep the communicator alive: a handle
/// left in a thread that outlives the run (a watchdog blocked on a socket)
/// must not keep NCCL's communicator, and its proxy threads, alive until
/// the process exits, where they crashed the 2-GPU host's ranks (SIGSEGV
/// after the run) once the CUDA context was gone.
#[derive(Debug, Clone)]
pub struct AbortHandle(Weak<RankComm>);

impl AbortHandle {
    /// `ncclCommAbort`: every NCCL operation in flight returns, the
    /// communicator is freed, and its later calls fail. Idempotent; nothing
    /// once the [`RankCollective`] is dropped (its communicator destroyed).
    pub fn abort(&self) {
        if let Some(comm) = self.0.upgrade() {
            comm.abort();
        }
    }
}

impl RankCollective {
    /// `ncclCommInitRank` on `stream`'s device: rank `rank` of
    /// `world_size`, every rank with rank 0's `id`. Blocks until all ranks
    /// have called it. [`Error::InvalidCollective`] for a CPU stream or a
    /// rank outside `0..world_size`, [`Error::NcclUnavailable`] when libnccl
    /// (or one of its multi-process functions) is missing.
    pub fn new(
        stream: &Stream,
        id: &[u8; NCCL_ID_BYTES],
        rank: usize,
        world_size: usize,
    ) -> Result<Self, Error> {
        let cuda = stream.cuda_stream().ok_or(Error::InvalidCollective(
            CollectiveMismatch::CpuStream { rank },
        ))?;
        let comm = RankComm::init(cuda, id, rank, world_size).map_err(rank_error)?;
        Ok(Self {
            comm,
            stream: stream.clone(),
            rank,
            world_size,
        })
    }

    /// This process's rank.
    pub fn rank(&self) -> usize {
        self.rank
    }

    /// Ranks in the communicator.
    pub fn world_size(&self) -> usize {
        self.world_size
    }

    /// A handle that aborts this communicator from any thread.
    pub fn abort_handle(&self) -> AbortHandle {
        AbortHandle(Arc::downgrade(&self.comm))
    }

    /// NCCL's asynchronous error, if one happened (`ncclCommGetAsyncError`;
    /// also an error after an abort).
    pub fn check(&self) -> Result<(), Error> {
        self.comm.async_error().map_err(rank_error)
    }

    /// In-place sum over the ranks of `buf` (every rank passes the same
    /// length), enqueued on this rank's stream; does not synchronize.
    pub fn all_reduce_sum<T: CollectiveElem>(
        &self,
        buf: &mut DeviceViewMut<'_, T>,
    ) -> Result<(), Error> {
        self.enqueue(buf, None)
    }

    /// Rank `root`'s `buf` into every rank's, in place, on this rank's
    /// stream; does not synchronize.
    pub fn broadcast<T: CollectiveElem>(
        &self,
        buf: &mut DeviceViewMut<'_, T>,
        root: usize,
    ) -> Result<(), Error> {
        if root >= self.world_size {
            return Err(Error::InvalidCollective(CollectiveMismatch::Other {
                what: "a broadcast root outside the ranks",
            }));
        }
        self.enqueue(buf, Some(root))
    }

    fn enqueue<T: CollectiveElem>(
        &self,
        buf: &mut DeviceViewMut<'_, T>,
        root: Option<usize>,
    ) -> Result<(), Error> {
        let rank = self.rank;
        let count = buf.len();
        let cuda = self.stream.cuda_stream().ok_or(Error::InvalidCollective(
            CollectiveMismatch::CpuStream { rank },
        ))?;
        let ViewMutRef::Cuda(view) = &mut buf.inner else {
            return Err(Error::InvalidCollective(CollectiveMismatch::HostBuffer {
                rank,
            }));
        };
        if count == 0 {
            return Ok(());
        }
        self.comm
            .collective(cuda, view, count, <T as Sealed>::NCCL_TYPE, root)
            .map_err(rank_error)
    }
}

impl Drop for RankCollective {
    /// Waits for the stream before the communicator goes, so that no
    /// collective is in flight (an aborted one has returned).
    fn drop(&mut self) {
        let _ = self.stream.synchronize();
    }
}
