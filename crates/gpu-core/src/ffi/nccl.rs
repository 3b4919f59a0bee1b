//! libnccl, loaded at run time, and the calls gpu-core makes: one
//! communicator per device (`ncclCommInitAll`) and an in-place sum
//! all-reduce over every rank inside one NCCL group.
//!
//! NCCL is loaded by gpu-core itself (see [`NCCL_LIBRARIES`]) and its result
//! codes are read as integers; the errors are the public [`NcclUnavailable`]
//! and [`NcclError`], re-exported at the crate root.

use std::ffi::{c_char, c_int, c_void};
use std::sync::Arc;

use cudarc::driver::{CudaStream, CudaViewMut, DevicePtrMut, DeviceSlice, DriverError};
use cudarc::nccl::sys::{cudaStream_t, ncclComm_t, ncclDataType_t, ncclRedOp_t};

pub(crate) mod rank;

/// Why libnccl could not be used; NCCL is loaded at run time, so a missing
/// library is an error of `Collective::new`, not of the build.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum NcclUnavailable {
    /// No library of these names could be loaded.
    #[error(
        "cannot load {} ({}); install NCCL 2 or put its lib dir on LD_LIBRARY_PATH, or use one gpu",
        tried.join(" or "),
        loader.replace('\n', " ")
    )]
    NotFound {
        /// The names tried, in order (sonames, looked up on the loader path).
        tried: &'static [&'static str],
        /// What the loader said about the first name.
        loader: String,
    },
    /// The library lacks a function gpu-core calls.
    #[error("{library} has no `{symbol}`; install a current NCCL 2, or use one gpu")]
    MissingSymbol {
        /// The library loaded.
        library: &'static str,
        /// The function it lacks.
        symbol: &'static str,
    },
}

/// An NCCL call's failure: its `ncclResult_t` and NCCL's description of it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("nccl error {code} ({message})")]
#[non_exhaustive]
pub struct NcclError {
    /// The `ncclResult_t` value.
    pub code: i32,
    /// `ncclGetErrorString` of it.
    pub message: String,
}

/// A failed NCCL call and which one it was.
#[derive(Debug)]
pub(crate) struct NcclCallFailed {
    /// The call (`"ncclCommInitAll"`).
    pub(crate) op: &'static str,
    /// NCCL's error.
    pub(crate) source: NcclError,
}

/// Why an all-reduce was not (fully) enqueued.
#[derive(Debug)]
pub(crate) enum AllReduceError {
    /// The arguments would hand NCCL a bad pointer; nothing was enqueued.
    Invalid(&'static str),
    /// Binding a rank's context failed.
    Driver(DriverError),
    /// An NCCL call failed.
    Nccl(NcclCallFailed),
}

/// The names libnccl is loaded by, in order: the soname the runtime packages
/// install (`libnccl2`, the `nvidia-nccl` wheels), then the development
/// symlink. cudarc's own loader tries neither of them first and panics when it
/// finds nothing, so gpu-core loads NCCL itself and never calls cudarc's
/// `nccl::sys` functions.
pub(crate) const NCCL_LIBRARIES: &[&str] = &["libnccl.so.2", "libnccl.so"];

/// `ncclResult_t` as returned: an integer, not cudarc's enum, since a newer
/// NCCL may return a code the enum lacks (undefined behaviour for a Rust enum).
type NcclResult = c_int;

/// `ncclAllReduce`'s signature.
type AllReduceFn = unsafe extern "C" fn(
    *const c_void,
    *mut c_void,
    usize,
    ncclDataType_t,
    ncclRedOp_t,
    ncclComm_t,
    cudaStream_t,
) -> NcclResult;

/// `nccl`'s `ncclAllReduce`, for the multi-process communicator.
fn all_reduce_fn(nccl: &Nccl) -> AllReduceFn {
    nccl.all_reduce
}

/// `nccl`'s `ncclCommDestroy`, for the multi-process communicator.
fn comm_destroy_fn(nccl: &Nccl) -> unsafe extern "C" fn(ncclComm_t) -> NcclResult {
    nccl.comm_destroy
}

/// libnccl, loaded once, with the functions gpu-core calls. Signatures are
/// those of `nccl.h` (NCCL 2.x), with cudarc's types for the arguments.
#[derive(Debug)]
pub(crate) struct Nccl {
    version: c_int,
    get_error_string: unsafe extern "C" fn(NcclResult) -> *const c_char,
    comm_init_all: unsafe extern "C" fn(*mut ncclComm_t, c_int, *const c_int) -> NcclResult,
    comm_destroy: unsafe extern "C" fn(ncclComm_t) -> NcclResult,
    all_reduce: AllReduceFn,
    group_start: unsafe extern "C" fn() -> NcclResult,
    group_end: unsafe extern "C" fn() -> NcclResult,
    /// Keeps the function pointers above valid; never unloaded (it lives in a
    /// `static`).
    _library: libloading::Library,
}

/// NCCL 2.22+ connects peers lazily, inside the first collective call
/// (`NCCL_RUNTIME_CONNECT`, default 1), and that call then blocks on the
/// host until every peer makes it. A rank whose peer died would block inside
/// `ncclAllReduce` holding its communicator's lock, where the watchdog's
/// `ncclCommAbort` cannot reach it (seen on the 2-GPU host: the abort test
/// hung). With 0, every connection is made in `ncclCommInitRank`, which
/// every rank calls together, and a collective only enqueues work that
/// `ncclCommAbort` stops. A value the user set wins. NCCL reads it once, on
/// first use, so it is set before the library is loaded.
fn eager_connections() {
    if std::env::var_os("NCCL_RUNTIME_CONNECT").is_none() {
        std::env::set_var("NCCL_RUNTIME_CONNECT", "0");
    }
}

/// libnccl, loaded on first use; the error says why it cannot be.
pub(crate) fn nccl() -> Result<&'static Nccl, NcclUnavailable> {
    static NCCL: std::sync::OnceLock<Result<Nccl, NcclUnavailable>> = std::sync::OnceLock::new();
    NCCL.get_or_init(load_nccl).as_ref().map_err(Clone::clone)
}

fn load_nccl() -> Result<Nccl, NcclUnavailable> {
    eager_connections();
    let mut first_error = None;
    for &name in NCCL_LIBRARIES {
        // SAFETY: opening the library runs its initializers, which for NCCL
        // only set up its own static state; no NCCL function is called here.
        match unsafe { libloading::Library::new(name) } {
            Ok(library) => return Nccl::resolve(library, name),
            Err(e) => {
                // libloading's own text is "dlopen failed"; dlerror's is in
                // the source ("libnccl.so.2: cannot open shared object file").
                let detail =
                    std::error::Error::source(&e).map_or(e.to_string(), ToString::to_string);
                first_error.get_or_insert(detail);
            }
        }
    }
    Err(NcclUnavailable::NotFound {
        tried: NCCL_LIBRARIES,
        loader: first_error.unwrap_or_default(),
    })
}

/// The function `symbol` of `library`, as a `T`.
///
/// # Safety
/// `T` must be the function pointer type of `symbol`'s C declaration.
unsafe fn symbol<T: Copy>(
    library: &libloading::Library,
    name: &'static str,
    symbol: &'static str,
) -> Result<T, NcclUnavailable> {
    // SAFETY: the caller guarantees that `T` is the symbol's type; the
    // pointer is copied out and used only while `library` stays loaded
    // (`Nccl` owns it).
    unsafe { library.get::<T>(symbol.as_bytes()) }
        .map(|s| *s)
        .map_err(|_| NcclUnavailable::MissingSymbol {
            library: name,
            symbol,
        })
}

impl Nccl {
    fn resolve(library: libloading::Library, name: &'static str) -> Result<Self, NcclUnavailable> {
        type GetVersion = unsafe extern "C" fn(*mut c_int) -> NcclResult;
        // SAFETY: here and in every `symbol` call below, the type is the
        // function's declaration in nccl.h, unchanged since NCCL 2.0.
        let get_version: GetVersion = unsafe { symbol(&library, name, "ncclGetVersion") }?;
        let mut version: c_int = 0;
        // SAFETY: `version` is a valid, writable `int`; ncclGetVersion needs
        // no initialization.
        if unsafe { get_version(&mut version) } != 0 {
            version = 0;
        }
        Ok(Self {
            version,
            // SAFETY: the type is the function's nccl.h declaration (above).
            get_error_string: unsafe { symbol(&library, name, "ncclGetErrorString") }?,
            // SAFETY: the type is the function's nccl.h declaration (above).
            comm_init_all: unsafe { symbol(&library, name, "ncclCommInitAll") }?,
            // SAFETY: the type is the function's nccl.h declaration (above).
            comm_destroy: unsafe { symbol(&library, name, "ncclCommDestroy") }?,
            // SAFETY: the type is the function's nccl.h declaration (above).
            all_reduce: unsafe { symbol(&library, name, "ncclAllReduce") }?,
            // SAFETY: the type is the function's nccl.h declaration (above).
            group_start: unsafe { symbol(&library, name, "ncclGroupStart") }?,
            // SAFETY: the type is the function's nccl.h declaration (above).
            group_end: unsafe { symbol(&library, name, "ncclGroupEnd") }?,
            _library: library,
        })
    }

    /// `NCCL_VERSION_CODE` as `(major, minor, patch)`; `None` when
    /// `ncclGetVersion` failed.
    pub(crate) fn version(&self) -> Option<(u32, u32, u32)> {
        decode_nccl_version(self.version)
    }

    /// `Ok` for `ncclSuccess`, else the code with NCCL's description.
    fn check(&self, op: &'static str, code: NcclResult) -> Result<(), NcclCallFailed> {
        if code == 0 {
            return Ok(());
        }
        // SAFETY: ncclGetErrorString takes any code and returns a pointer to
        // a static NUL-terminated string (or null, checked).
        let text = unsafe { (self.get_error_string)(code) };
        let message = if text.is_null() {
            String::from("unknown")
        } else {
            // SAFETY: non-null, NUL-terminated and static (see above).
            unsafe { std::ffi::CStr::from_ptr(text) }
                .to_string_lossy()
                .into_owned()
        };
        Err(NcclCallFailed {
            op,
            source: NcclError { code, message },
        })
    }

    /// `ncclCommInitAll`: one communicator per device of `ordinals` (distinct
    /// CUDA ordinals), rank `r` on `ordinals[r]`.
    pub(crate) fn comm_init_all(
        &'static self,
        ordinals: &[c_int],
    ) -> Result<Vec<NcclComm>, NcclCallFailed> {
        // Distinct `int` ordinals number fewer than `c_int::MAX`; NCCL's own
        // "invalid argument" code (4) stands for the impossible case.
        let count = c_int::try_from(ordinals.len()).map_err(|_| NcclCallFailed {
            op: "ncclCommInitAll",
            source: NcclError {
                code: 4,
                message: "more devices than an int holds".into(),
            },
        })?;
        let mut comms: Vec<ncclComm_t> = vec![std::ptr::null_mut(); ordinals.len()];
        // SAFETY: `comms` has room for `count` communicators and `ordinals`
        // holds `count` device ordinals; NCCL writes every slot on success.
        let code = unsafe { (self.comm_init_all)(comms.as_mut_ptr(), count, ordinals.as_ptr()) };
        self.check("ncclCommInitAll", code)?;
        Ok(comms
            .into_iter()
            .zip(ordinals)
            .map(|(raw, &ordinal)| NcclComm {
                raw,
                ordinal: usize::try_from(ordinal).unwrap_or(usize::MAX),
                nccl: self,
            })
            .collect())
    }
}

/// One rank's NCCL communicator, destroyed on drop.
#[derive(Debug)]
pub(crate) struct NcclComm {
    raw: ncclComm_t,
    /// The CUDA device it was created on.
    ordinal: usize,
    nccl: &'static Nccl,
}

// SAFETY: an NCCL communicator may be used from any thread, one call at a
// time; `NcclComm` is not `Sync`, and `Collective` calls NCCL under a lock.
unsafe impl Send for NcclComm {}

impl Drop for NcclComm {
    fn drop(&mut self) {
        // SAFETY: `raw` came from ncclCommInitAll and is destroyed only here.
        // Destroying the communicators of one ncclCommInitAll one after the
        // other from one thread is what NCCL's single-thread example does.
        // An error cannot be returned from drop and there is no later call
        // on this communicator to return it from: it is dropped.
        let _ = unsafe { (self.nccl.comm_destroy)(self.raw) };
    }
}

/// `NCCL_VERSION(X, Y, Z)` is `X*1000 + Y*100 + Z` before 2.9 and
/// `X*10000 + Y*100 + Z` since; `None` for 0 (unknown).
pub(crate) fn decode_nccl_version(code: c_int) -> Option<(u32, u32, u32)> {
    let code = u32::try_from(code).ok().filter(|&c| c > 0)?;
    Some(if code >= 10_000 {
        (code / 10_000, (code % 10_000) / 100, code % 100)
    } else {
        (code / 1000, (code % 1000) / 100, code % 100)
    })
}

/// Bytes per element of the NCCL data types gpu-core reduces.
pub(crate) fn nccl_type_size(datatype: ncclDataType_t) -> Option<usize> {
    use ncclDataType_t::*;
    match datatype {
        ncclInt8 | ncclUint8 => Some(1),
        ncclFloat16 => Some(2),
        ncclInt32 | ncclUint32 | ncclFloat32 => Some(4),
        ncclInt64 | ncclUint64 | ncclFloat64 => Some(8),
        _ => None,
    }
}

/// `Err` with what does not fit unless `a` and `b` share a context.
fn same_context(a: &CudaStream, b: &CudaStream) -> Result<(), AllReduceError> {
    if Arc::ptr_eq(a.context(), b.context()) {
        Ok(())
    } else {
        Err(AllReduceError::Invalid(
            "a buffer on another device than its stream",
        ))
    }
}

/// In-place all-reduce of `count` elements of `datatype` over every rank:
/// `views[r]` on `streams[r]` with `comms[r]`, all enqueued inside one NCCL
/// group so that one thread drives every rank.
///
/// Checked here, so that no call can pass NCCL a bad pointer: as many comms,
/// streams and views; each view holds at least `count` elements of
/// `datatype` and lives on its stream's context, whose device is its
/// communicator's.
pub(crate) fn all_reduce_sum(
    comms: &[NcclComm],
    streams: &[&Arc<CudaStream>],
    views: &mut [&mut CudaViewMut<'_, u8>],
    count: usize,
    datatype: ncclDataType_t,
) -> Result<(), AllReduceError> {
    let invalid = |what| Err(AllReduceError::Invalid(what));
    let Some(elem_size) = nccl_type_size(datatype) else {
        return invalid("an element type nccl does not reduce here");
    };
    let Some(bytes) = count.checked_mul(elem_size) else {
        return invalid("more elements than fit in memory");
    };
    if views.len() != comms.len() || streams.len() != comms.len() {
        return invalid("not one buffer and one stream per rank");
    }
    for ((comm, stream), view) in comms.iter().zip(streams).zip(views.iter()) {
        same_context(view.stream(), stream)?;
        if comm.ordinal != stream.context().ordinal() {
            return invalid("a stream on another device than its communicator");
        }
        if view.len() < bytes {
            return invalid("a buffer shorter than the element count");
        }
    }
    let Some(first) = comms.first() else {
        return Ok(());
    };
    let nccl = first.nccl;
    // Pointers first: the guards wait for the buffers' earlier users, and
    // record the all-reduce as their last writer when dropped, after
    // ncclGroupEnd has enqueued it.
    let pointers: Vec<_> = views
        .iter_mut()
        .zip(streams)
        .map(|(view, stream)| view.device_ptr_mut(stream))
        .collect();
    // SAFETY: ncclGroupStart has no precondition; it is matched by the
    // ncclGroupEnd below on every path.
    nccl.check("ncclGroupStart", unsafe { (nccl.group_start)() })
        .map_err(AllReduceError::Nccl)?;
    let mut enqueued = Ok(());
    for ((comm, stream), (ptr, _)) in comms.iter().zip(streams).zip(&pointers) {
        let call = stream
            .context()
            .bind_to_thread()
            .map_err(AllReduceError::Driver)
            .and_then(|()| {
                let buffer = *ptr as *mut c_void;
                // SAFETY: `buffer` is the start of a live device allocation of
                // at least `count` elements on the stream's context (checked
                // above), borrowed mutably for this call; in place, so send
                // and receive buffers are the same. `comm` is a live
                // communicator on the stream's device, and the stream handle
                // is the driver's (the runtime's `cudaStream_t`), kept alive
                // by `stream`.
                let code = unsafe {
                    (nccl.all_reduce)(
                        buffer,
                        buffer,
                        count,
                        datatype,
                        ncclRedOp_t::ncclSum,
                        comm.raw,
                        stream.cu_stream() as cudaStream_t,
                    )
                };
                nccl.check("ncclAllReduce", code)
                    .map_err(AllReduceError::Nccl)
            });
        if let Err(e) = call {
            enqueued = Err(e);
            break;
        }
    }
    // SAFETY: closes the group opened above.
    let ended = nccl
        .check("ncclGroupEnd", unsafe { (nccl.group_end)() })
        .map_err(AllReduceError::Nccl);
    drop(pointers);
    enqueued.and(ended)
}
