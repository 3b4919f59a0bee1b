//! NCCL across processes: the unique id (`ncclGetUniqueId`), one
//! communicator per process (`ncclCommInitRank`), in-place all-reduce and
//! broadcast, point-to-point send and receive, alone or several in one NCCL
//! group, and the calls that end a run whose peer died
//! (`ncclCommGetAsyncError`, `ncclCommAbort`). The functions are looked up
//! in the loaded libnccl on first use, so the one-process path keeps
//! working with a library that lacks them.

use std::ffi::{c_char, c_int, c_void};
use std::sync::{Arc, Mutex, OnceLock};

use cudarc::driver::sys::CUdeviceptr;
use cudarc::driver::{
    CudaContext, CudaStream, CudaView, CudaViewMut, DevicePtr, DevicePtrMut, DeviceSlice,
    SyncOnDrop,
};
use cudarc::nccl::sys::{cudaStream_t, ncclComm_t, ncclDataType_t, ncclRedOp_t};

use super::{nccl, nccl_type_size, symbol, AllReduceError, Nccl, NcclCallFailed, NcclResult};
use super::{NcclError, NcclUnavailable, NCCL_LIBRARIES};

/// Bytes of an NCCL unique id (`NCCL_UNIQUE_ID_BYTES`).
pub(crate) const UNIQUE_ID_BYTES: usize = 128;

/// `ncclUniqueId`: 128 opaque bytes, passed by value.
#[repr(C)]
#[derive(Clone, Copy)]
struct UniqueId {
    internal: [c_char; UNIQUE_ID_BYTES],
}

/// `ncclResult_t`'s `ncclInProgress`: an operation (or init) still running.
const IN_PROGRESS: NcclResult = 7;

/// The multi-process functions, with nccl.h's signatures.
#[derive(Debug)]
pub(crate) struct RankFns {
    get_unique_id: unsafe extern "C" fn(*mut UniqueId) -> NcclResult,
    comm_init_rank: unsafe extern "C" fn(*mut ncclComm_t, c_int, UniqueId, c_int) -> NcclResult,
    broadcast: unsafe extern "C" fn(
        *const c_void,
        *mut c_void,
        usize,
        ncclDataType_t,
        c_int,
        ncclComm_t,
        cudaStream_t,
    ) -> NcclResult,
    send: unsafe extern "C" fn(
        *const c_void,
        usize,
        ncclDataType_t,
        c_int,
        ncclComm_t,
        cudaStream_t,
    ) -> NcclResult,
    recv: unsafe extern "C" fn(
        *mut c_void,
        usize,
        ncclDataType_t,
        c_int,
        ncclComm_t,
        cudaStream_t,
    ) -> NcclResult,
    comm_abort: unsafe extern "C" fn(ncclComm_t) -> NcclResult,
    comm_get_async_error: unsafe extern "C" fn(ncclComm_t, *mut NcclResult) -> NcclResult,
}

impl std::fmt::Debug for UniqueId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("UniqueId(..)")
    }
}

/// libnccl and its multi-process functions, resolved once.
fn rank_fns() -> Result<(&'static Nccl, &'static RankFns), NcclUnavailable> {
    static FNS: OnceLock<Result<RankFns, NcclUnavailable>> = OnceLock::new();
    let nccl = nccl()?;
    let fns = FNS
        .get_or_init(|| {
            let library = &nccl._library;
            let name = NCCL_LIBRARIES[0];
            Ok(RankFns {
                // SAFETY: each type is the function's nccl.h declaration
                // (NCCL 2.7 and newer, for ncclSend/ncclRecv; ncclUniqueId
                // is 128 bytes passed by value).
                get_unique_id: unsafe { symbol(library, name, "ncclGetUniqueId") }?,
                // SAFETY: as above.
                comm_init_rank: unsafe { symbol(library, name, "ncclCommInitRank") }?,
                // SAFETY: as above.
                broadcast: unsafe { symbol(library, name, "ncclBroadcast") }?,
                // SAFETY: as above.
                send: unsafe { symbol(library, name, "ncclSend") }?,
                // SAFETY: as above.
                recv: unsafe { symbol(library, name, "ncclRecv") }?,
                // SAFETY: as above.
                comm_abort: unsafe { symbol(library, name, "ncclCommAbort") }?,
                // SAFETY: as above.
                comm_get_async_error: unsafe { symbol(library, name, "ncclCommGetAsyncError") }?,
            })
        })
        .as_ref()
        .map_err(Clone::clone)?;
    Ok((nccl, fns))
}

/// Why a multi-process NCCL call could not be made.
#[derive(Debug)]
pub(crate) enum RankError {
    /// libnccl, or one of its functions, is missing.
    Unavailable(NcclUnavailable),
    /// The call failed (or the communicator was aborted).
    Call(AllReduceError),
}

impl From<NcclUnavailable> for RankError {
    fn from(e: NcclUnavailable) -> Self {
        RankError::Unavailable(e)
    }
}

fn failed(nccl: &Nccl, op: &'static str, code: NcclResult) -> Result<(), RankError> {
    nccl.check(op, code)
        .map_err(|e| RankError::Call(AllReduceError::Nccl(e)))
}

/// A new unique id, made by the process that will be rank 0.
pub(crate) fn unique_id() -> Result<[u8; UNIQUE_ID_BYTES], RankError> {
    let (nccl, fns) = rank_fns()?;
    let mut id = UniqueId {
        internal: [0; UNIQUE_ID_BYTES],
    };
    // SAFETY: `id` is a valid, writable ncclUniqueId.
    failed(nccl, "ncclGetUniqueId", unsafe {
        (fns.get_unique_id)(&mut id)
    })?;
    Ok(id.internal.map(|c| c as u8))
}

/// What one NCCL call does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RankOp {
    /// `ncclAllReduce`, sum, in place.
    AllReduce,
    /// `ncclBroadcast` from `root`, in place.
    Broadcast {
        /// The rank whose buffer every rank gets.
        root: usize,
    },
    /// `ncclSend` to `peer`.
    Send {
        /// The receiving rank.
        peer: usize,
    },
    /// `ncclRecv` from `peer`.
    Recv {
        /// The sending rank.
        peer: usize,
    },
}

impl RankOp {
    fn name(self) -> &'static str {
        match self {
            RankOp::AllReduce => "ncclAllReduce",
            RankOp::Broadcast { .. } => "ncclBroadcast",
            RankOp::Send { .. } => "ncclSend",
            RankOp::Recv { .. } => "ncclRecv",
        }
    }
}

/// One call of [`RankComm::enqueue`]: `count` elements of `datatype` at
/// the device address `ptr`, made only by [`RankComm::send_call`] or
/// [`RankComm::call_mut`] from a checked buffer that stays borrowed for
/// `'a`. Its access record, dropped after the enqueue, marks the call as
/// the buffer's last user.
pub(crate) struct Call<'a> {
    ptr: CUdeviceptr,
    count: usize,
    datatype: ncclDataType_t,
    op: RankOp,
    stream: &'a Arc<CudaStream>,
    _record: SyncOnDrop<'a>,
}

impl<'a> Call<'a> {
    fn new(
        (ptr, record): (CUdeviceptr, SyncOnDrop<'a>),
        count: usize,
        datatype: ncclDataType_t,
        op: RankOp,
        stream: &'a Arc<CudaStream>,
    ) -> Self {
        Self {
            ptr,
            count,
            datatype,
            op,
            stream,
            _record: record,
        }
    }
}

impl std::fmt::Debug for Call<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Call")
            .field("count", &self.count)
            .field("op", &self.op)
            .finish_non_exhaustive()
    }
}

/// One process's communicator. `None` once destroyed or aborted.
#[derive(Debug)]
pub(crate) struct RankComm {
    raw: Mutex<Option<CommPtr>>,
    ordinal: usize,
    nccl: &'static Nccl,
    fns: &'static RankFns,
}

#[derive(Debug, Clone, Copy)]
struct CommPtr(ncclComm_t);

// SAFETY: an NCCL communicator may be used from any thread; every call on
// it is made under `RankComm::raw`'s lock, and ncclCommAbort (the one call
// another thread makes, to end a blocked run) takes the pointer out, so no
// call follows it.
unsafe impl Send for CommPtr {}

impl RankComm {
    /// `ncclCommInitRank` on the device of `stream` (its context is bound to
    /// this thread first): rank `rank` of `world`, all with rank 0's `id`.
    /// Blocks until every rank has called it.
    pub(crate) fn init(
        stream: &Arc<CudaStream>,
        id: &[u8; UNIQUE_ID_BYTES],
        rank: usize,
        world: usize,
    ) -> Result<Arc<Self>, RankError> {
        let (nccl, fns) = rank_fns()?;
        let invalid = |what| Err(RankError::Call(AllReduceError::Invalid(what)));
        let (Ok(rank32), Ok(world32)) = (c_int::try_from(rank), c_int::try_from(world)) else {
            return invalid("more ranks than an int holds");
        };
        if rank >= world {
            return invalid("a rank outside 0..world");
        }
        stream
            .context()
            .bind_to_thread()
            .map_err(|e| RankError::Call(AllReduceError::Driver(e)))?;
        let id = UniqueId {
            internal: id.map(|b| b as c_char),
        };
        let mut raw: ncclComm_t = std::ptr::null_mut();
        // SAFETY: `raw` is writable; `id` is a unique id by value; the
        // device is the bound context's.
        let code = unsafe { (fns.comm_init_rank)(&mut raw, world32, id, rank32) };
        failed(nccl, "ncclCommInitRank", code)?;
        Ok(Arc::new(Self {
            raw: Mutex::new(Some(CommPtr(raw))),
            ordinal: stream.context().ordinal(),
            nccl,
            fns,
        }))
    }

    /// The communicator, or the error of a call after an abort.
    fn live(
        &self,
        op: &'static str,
    ) -> Result<std::sync::MutexGuard<'_, Option<CommPtr>>, RankError> {
        let guard = self.raw.lock().unwrap_or_else(|p| p.into_inner());
        if guard.is_none() {
            return Err(RankError::Call(AllReduceError::Nccl(NcclCallFailed {
                op,
                source: NcclError {
                    code: 3,
                    message: "the communicator was aborted (a peer failed)".into(),
                },
            })));
        }
        Ok(guard)
    }

    /// `Ok` when `stream` and a buffer of `bytes` bytes on `context` can
    /// take `count` elements of `datatype` with this communicator: the
    /// buffer is long enough and on the communicator's device.
    fn check_buffer(
        &self,
        stream: &Arc<CudaStream>,
        context: &Arc<CudaContext>,
        bytes: usize,
        count: usize,
        datatype: ncclDataType_t,
    ) -> Result<(), RankError> {
        let invalid = |what| Err(RankError::Call(AllReduceError::Invalid(what)));
        let Some(needed) = nccl_type_size(datatype).and_then(|s| s.checked_mul(count)) else {
            return invalid("an element type nccl does not reduce here");
        };
        if bytes < needed {
            return invalid("a buffer shorter than the element count");
        }
        if stream.context().ordinal() != self.ordinal || !Arc::ptr_eq(context, stream.context()) {
            return invalid("a buffer or stream on another device than the communicator");
        }
        Ok(())
    }

    /// A send to `peer` of `count` elements of `datatype` from `view`, on
    /// `stream` (checked: long enough, on the communicator's device);
    /// `None` for no elements. Only a send reads its buffer without
    /// writing it.
    pub(crate) fn send_call<'a>(
        &self,
        (stream, view): (&'a Arc<CudaStream>, &'a CudaView<'_, u8>),
        (count, datatype): (usize, ncclDataType_t),
        peer: usize,
    ) -> Result<Option<Call<'a>>, RankError> {
        let context = view.stream().context();
        self.check_buffer(stream, context, view.len(), count, datatype)?;
        let op = RankOp::Send { peer };
        Ok((count > 0).then(|| Call::new(view.device_ptr(stream), count, datatype, op, stream)))
    }

    /// Any operation on `view` (checked as for [`RankComm::send_call`]).
    pub(crate) fn call_mut<'a>(
        &self,
        stream: &'a Arc<CudaStream>,
        view: &'a mut CudaViewMut<'_, u8>,
        count: usize,
        datatype: ncclDataType_t,
        op: RankOp,
    ) -> Result<Option<Call<'a>>, RankError> {
        let context = view.stream().context();
        self.check_buffer(stream, context, view.len(), count, datatype)?;
        Ok(
            (count > 0)
                .then(|| Call::new(view.device_ptr_mut(stream), count, datatype, op, stream)),
        )
    }

    /// Enqueues `calls` on their stream (the same for all), inside one
    /// NCCL group when there are several (NCCL then runs them as one
    /// operation: one launch, and sends and receives that do not wait on
    /// each other's order). Every buffer stays borrowed by its call, so
    /// alive and untouched by the host, until the calls are dropped after
    /// this returns.
    pub(crate) fn enqueue(&self, calls: &[Call<'_>]) -> Result<(), RankError> {
        let invalid = |what| Err(RankError::Call(AllReduceError::Invalid(what)));
        for call in calls {
            let peer = match call.op {
                RankOp::AllReduce => 0,
                RankOp::Broadcast { root } => root,
                RankOp::Send { peer } | RankOp::Recv { peer } => peer,
            };
            if c_int::try_from(peer).is_err() {
                return invalid("a peer rank over int");
            }
        }
        let Some(first) = calls.first() else {
            return Ok(());
        };
        let stream = first.stream;
        if calls.iter().any(|c| !Arc::ptr_eq(c.stream, stream)) {
            return invalid("calls of one group on several streams");
        }
        let guard = self.live(first.op.name())?;
        let comm = guard.expect("live checked it").0;
        stream
            .context()
            .bind_to_thread()
            .map_err(|e| RankError::Call(AllReduceError::Driver(e)))?;
        let s = stream.cu_stream() as cudaStream_t;
        let grouped = calls.len() > 1;
        if grouped {
            // SAFETY: no precondition; matched by the ncclGroupEnd below on
            // every path.
            failed(self.nccl, "ncclGroupStart", unsafe {
                (self.nccl.group_start)()
            })?;
        }
        let mut enqueued = Ok(());
        for call in calls {
            let buffer = call.ptr as *mut c_void;
            let (count, datatype) = (call.count, call.datatype);
            // Checked above: every peer fits an int.
            let int = |r: usize| r as c_int;
            // What every call below relies on: `buffer` holds `count`
            // elements of `datatype` on the communicator's device (checked
            // when the call was made), borrowed by the call (mutably unless
            // a send), in place for the collectives; `comm` is live (under
            // the lock); `s` is the stream's driver handle, alive with
            // `stream`.
            let code = match call.op {
                // SAFETY: as said above.
                RankOp::AllReduce => unsafe {
                    (super::all_reduce_fn(self.nccl))(
                        buffer,
                        buffer,
                        count,
                        datatype,
                        ncclRedOp_t::ncclSum,
                        comm,
                        s,
                    )
                },
                // SAFETY: as said above.
                RankOp::Broadcast { root } => unsafe {
                    (self.fns.broadcast)(buffer, buffer, count, datatype, int(root), comm, s)
                },
                // SAFETY: as said above.
                RankOp::Send { peer } => unsafe {
                    (self.fns.send)(buffer, count, datatype, int(peer), comm, s)
                },
                // SAFETY: as said above.
                RankOp::Recv { peer } => unsafe {
                    (self.fns.recv)(buffer, count, datatype, int(peer), comm, s)
                },
            };
            enqueued = failed(self.nccl, call.op.name(), code);
            if enqueued.is_err() {
                break;
            }
        }
        if grouped {
            // SAFETY: closes the group opened above.
            let ended = failed(self.nccl, "ncclGroupEnd", unsafe {
                (self.nccl.group_end)()
            });
            enqueued?;
            return ended;
        }
        enqueued
    }

    /// `ncclCommGetAsyncError`: `Ok` while nothing failed (or an operation
    /// is still in progress), else the error (a peer's failure among them).
    pub(crate) fn async_error(&self) -> Result<(), RankError> {
        let guard = self.live("ncclCommGetAsyncError")?;
        let comm = guard.expect("live checked it").0;
        let mut state: NcclResult = 0;
        // SAFETY: `comm` is live (under the lock); `state` is writable.
        let code = unsafe { (self.fns.comm_get_async_error)(comm, &mut state) };
        failed(self.nccl, "ncclCommGetAsyncError", code)?;
        if state == IN_PROGRESS {
            return Ok(());
        }
        failed(self.nccl, "an nccl operation", state)
    }

    /// `ncclCommAbort`: ends every operation in flight on the communicator
    /// (kernels blocked waiting for a dead peer return) and frees it; later
    /// calls fail. Safe to call from another thread, and more than once.
    pub(crate) fn abort(&self) {
        let taken = self.raw.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(CommPtr(comm)) = taken {
            // SAFETY: `comm` was live and is taken out, so no later call
            // uses it. Its error cannot be acted on: the run is ending.
            let _ = unsafe { (self.fns.comm_abort)(comm) };
        }
    }
}

impl Drop for RankComm {
    fn drop(&mut self) {
        let taken = self.raw.get_mut().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(CommPtr(comm)) = taken {
            // SAFETY: live and taken out; destroyed once. An error cannot be
            // returned from drop, and no call follows.
            let _ = unsafe { (super::comm_destroy_fn(self.nccl))(comm) };
        }
    }
}
