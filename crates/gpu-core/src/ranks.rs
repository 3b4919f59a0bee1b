//! NCCL across processes: one [`RankCollective`] per process, made from a
//! unique id that rank 0 creates ([`nccl_unique_id`]) and hands to the
//! others by any channel the caller has (a TCP rendezvous, MPI), then
//! in-place all-reduce and broadcast, and point-to-point send and receive,
//! on that process's stream, one at a time or several as one NCCL group
//! ([`RankCollective::group`]). A peer that
//! dies leaves NCCL's kernels waiting on it: [`AbortHandle::abort`]
//! (`ncclCommAbort`, from any thread) ends them, and
//! [`RankCollective::check`] reports NCCL's own asynchronous errors.

use std::sync::{Arc, Weak};

use cudarc::driver::CudaStream;

use crate::error::{driver, nccl_failed, CollectiveMismatch, Error};
use crate::ffi::nccl::rank::{self, Call, RankComm, RankError, RankOp};
use crate::ffi::nccl::AllReduceError;
use crate::memory::{ViewMutRef, ViewRef};
use crate::multi::CollectiveElem;
use crate::stream::Stream;
use crate::{DeviceView, DeviceViewMut};

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
        self.group().all_reduce_sum(buf)?.enqueue()
    }

    /// Rank `root`'s `buf` into every rank's, in place, on this rank's
    /// stream; does not synchronize.
    pub fn broadcast<T: CollectiveElem>(
        &self,
        buf: &mut DeviceViewMut<'_, T>,
        root: usize,
    ) -> Result<(), Error> {
        self.group().broadcast(buf, root)?.enqueue()
    }

    /// `buf` to rank `peer`, whose [`RankCollective::recv`] of as many
    /// elements from this rank takes it (`ncclSend`); enqueued on this
    /// rank's stream, does not synchronize.
    pub fn send<T: CollectiveElem>(
        &self,
        buf: &DeviceView<'_, T>,
        peer: usize,
    ) -> Result<(), Error> {
        self.group().send(buf, peer)?.enqueue()
    }

    /// Rank `peer`'s [`RankCollective::send`] into `buf` (`ncclRecv`);
    /// enqueued on this rank's stream, does not synchronize.
    pub fn recv<T: CollectiveElem>(
        &self,
        buf: &mut DeviceViewMut<'_, T>,
        peer: usize,
    ) -> Result<(), Error> {
        self.group().recv(buf, peer)?.enqueue()
    }

    /// Several operations enqueued as one NCCL group
    /// (`ncclGroupStart`/`End`): one launch for several reductions of
    /// different buffers and types, or a send and a receive that would
    /// otherwise wait on each other. Every rank groups the same
    /// collectives in the same order.
    pub fn group(&self) -> RankGroup<'_> {
        RankGroup {
            ranks: self,
            calls: Vec::new(),
        }
    }

    fn cuda(&self) -> Result<&Arc<CudaStream>, Error> {
        self.stream
            .cuda_stream()
            .ok_or(Error::InvalidCollective(CollectiveMismatch::CpuStream {
                rank: self.rank,
            }))
    }

    fn host_buffer(&self) -> Error {
        Error::InvalidCollective(CollectiveMismatch::HostBuffer { rank: self.rank })
    }

    fn peer(&self, peer: usize, what: &'static str) -> Result<(), Error> {
        if peer >= self.world_size {
            return Err(Error::InvalidCollective(CollectiveMismatch::Other { what }));
        }
        Ok(())
    }
}

/// Operations of one NCCL group on one rank ([`RankCollective::group`]),
/// enqueued together by [`RankGroup::enqueue`]. Each buffer stays borrowed
/// until then; one that cannot take part (host memory, another device, a
/// bad peer) is an error at once, and the group is dropped unenqueued.
#[must_use = "nothing is enqueued until `enqueue`"]
pub struct RankGroup<'a> {
    ranks: &'a RankCollective,
    /// Each holds its buffer's access record: it waited for the buffer's
    /// earlier users when made, and records the group as its last user
    /// when dropped, after the group is enqueued.
    calls: Vec<Call<'a>>,
}

impl std::fmt::Debug for RankGroup<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RankGroup")
            .field("rank", &self.ranks.rank)
            .field("calls", &self.calls)
            .finish()
    }
}

impl<'a> RankGroup<'a> {
    /// In-place sum over the ranks of `buf`.
    pub fn all_reduce_sum<T: CollectiveElem>(
        self,
        buf: &'a mut DeviceViewMut<'_, T>,
    ) -> Result<Self, Error> {
        self.writes(buf, RankOp::AllReduce)
    }

    /// Rank `root`'s `buf` into every rank's, in place.
    pub fn broadcast<T: CollectiveElem>(
        self,
        buf: &'a mut DeviceViewMut<'_, T>,
        root: usize,
    ) -> Result<Self, Error> {
        self.ranks
            .peer(root, "a broadcast root outside the ranks")?;
        self.writes(buf, RankOp::Broadcast { root })
    }

    /// `buf` to rank `peer`.
    pub fn send<T: CollectiveElem>(
        mut self,
        buf: &'a DeviceView<'_, T>,
        peer: usize,
    ) -> Result<Self, Error> {
        self.ranks
            .peer(peer, "a send to a rank outside the ranks")?;
        let (ranks, count) = (self.ranks, buf.len());
        let ViewRef::Cuda(view, local) = &buf.inner else {
            return Err(ranks.host_buffer());
        };
        crate::memory::check_local(*local, ranks.cuda()?)?;
        let call = ranks
            .comm
            .send_call((ranks.cuda()?, view), (count, T::NCCL_TYPE), peer);
        self.calls.extend(call.map_err(rank_error)?);
        Ok(self)
    }

    /// Rank `peer`'s send into `buf`.
    pub fn recv<T: CollectiveElem>(
        self,
        buf: &'a mut DeviceViewMut<'_, T>,
        peer: usize,
    ) -> Result<Self, Error> {
        self.ranks
            .peer(peer, "a receive from a rank outside the ranks")?;
        self.writes(buf, RankOp::Recv { peer })
    }

    fn writes<T: CollectiveElem>(
        mut self,
        buf: &'a mut DeviceViewMut<'_, T>,
        op: RankOp,
    ) -> Result<Self, Error> {
        let (ranks, count) = (self.ranks, buf.len());
        let ViewMutRef::Cuda(view, local) = &mut buf.inner else {
            return Err(ranks.host_buffer());
        };
        crate::memory::check_local(*local, ranks.cuda()?)?;
        let call = ranks
            .comm
            .call_mut(ranks.cuda()?, view, count, T::NCCL_TYPE, op);
        self.calls.extend(call.map_err(rank_error)?);
        Ok(self)
    }

    /// Enqueues the group on the rank's stream; does not synchronize.
    pub fn enqueue(self) -> Result<(), Error> {
        self.ranks.comm.enqueue(&self.calls).map_err(rank_error)
    }
}

impl Drop for RankCollective {
    /// Waits for the stream before the communicator goes, so that no
    /// collective is in flight (an aborted one has returned).
    fn drop(&mut self) {
        let _ = self.stream.synchronize();
    }
}
