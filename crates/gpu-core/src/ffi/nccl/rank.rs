//! NCCL across processes: the unique id (`ncclGetUniqueId`), one
//! communicator per process (`ncclCommInitRank`), in-place all-reduce and
//! broadcast on it, and the calls that end a run whose peer died
//! (`ncclCommGetAsyncError`, `ncclCommAbort`). The functions are looked up
//! in the loaded libnccl on first use, so the one-process path keeps
//! working with a library that lacks them.

use std::ffi::{c_char, c_int, c_void};
use std::sync::{Arc, Mutex, OnceLock};

use cudarc::driver::{CudaStream, CudaViewMut, DevicePtrMut, DeviceSlice};
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
                // (NCCL 2.4 and newer; ncclUniqueId is 128 bytes passed by
                // value).
                get_unique_id: unsafe { symbol(library, name, "ncclGetUniqueId") }?,
                // SAFETY: as above.
                comm_init_rank: unsafe { symbol(library, name, "ncclCommInitRank") }?,
                // SAFETY: as above.
                broadcast: unsafe { symbol(library, name, "ncclBroadcast") }?,
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

    /// `ncclAllReduce` (sum, in place, `root < 0`) or `ncclBroadcast` (from
    /// `root`, in place) of `count` elements of `datatype` in `view`, on
    /// `stream`. Checked first: the view holds `count` elements and lives
    /// on the communicator's device.
    pub(crate) fn collective(
        &self,
        stream: &Arc<CudaStream>,
        view: &mut CudaViewMut<'_, u8>,
        count: usize,
        datatype: ncclDataType_t,
        root: Option<usize>,
    ) -> Result<(), RankError> {
        let invalid = |what| Err(RankError::Call(AllReduceError::Invalid(what)));
        let Some(bytes) = nccl_type_size(datatype).and_then(|s| s.checked_mul(count)) else {
            return invalid("an element type nccl does not reduce here");
        };
        if view.len() < bytes {
            return invalid("a buffer shorter than the element count");
        }
        if stream.context().ordinal() != self.ordinal
            || !Arc::ptr_eq(view.stream().context(), stream.context())
        {
            return invalid("a buffer or stream on another device than the communicator");
        }
        let op = if root.is_some() {
            "ncclBroadcast"
        } else {
            "ncclAllReduce"
        };
        let guard = self.live(op)?;
        let comm = guard.expect("live checked it").0;
        stream
            .context()
            .bind_to_thread()
            .map_err(|e| RankError::Call(AllReduceError::Driver(e)))?;
        let (ptr, record) = view.device_ptr_mut(stream);
        let buffer = ptr as *mut c_void;
        let s = stream.cu_stream() as cudaStream_t;
        let code = match root {
            Some(root) => {
                let Ok(root) = c_int::try_from(root) else {
                    return invalid("a root rank over int");
                };
                // SAFETY: `buffer` is a live device allocation of at least
                // `count` elements on the communicator's device (checked),
                // in place; `comm` is live (under the lock); `s` is the
                // stream's driver handle, alive with `stream`.
                unsafe { (self.fns.broadcast)(buffer, buffer, count, datatype, root, comm, s) }
            }
            // SAFETY: as for the broadcast.
            None => unsafe {
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
        };
        drop(record);
        failed(self.nccl, op, code)
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
