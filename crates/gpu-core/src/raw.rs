//! The only module of gpu-core with `unsafe`: thin functions over cudarc's
//! `result` layer and pointer casts, each returning `Result` and each with the
//! contract it relies on written next to it.
//!
//! Everything above this module is safe code. The invariants the callers keep
//! are: device pointers come from live `CudaSlice`s (or views of them) on the
//! stream's context, and lengths were checked before a copy.

use std::ffi::c_void;

use cuda_sys::GpuRepr;
use cudarc::driver::{result, sys, CudaFunction, CudaStream, DriverError, PinnedHostSlice};

/// Whether `libcuda` can be loaded. Checked before any other driver call, as
/// cudarc panics when it has to load a missing library.
pub(crate) fn driver_present() -> bool {
    // SAFETY: `is_culib_present` only tries to open the library with
    // libloading (running its initializers, which for libcuda are benign) and
    // drops it; it calls no driver function.
    unsafe { sys::is_culib_present() }
}

/// The driver's CUDA version as `(major, minor)`. Call only when
/// [`driver_present`] is true.
pub(crate) fn driver_version() -> Result<(u32, u32), DriverError> {
    let mut version: std::ffi::c_int = 0;
    // SAFETY: `version` is a valid, writable `int`; cuDriverGetVersion needs no
    // initialization. The library is present (caller's contract), so cudarc's
    // lazy loader does not panic.
    unsafe { sys::cuDriverGetVersion(&mut version) }.result()?;
    let version = u32::try_from(version).unwrap_or(0);
    Ok((version / 1000, (version % 1000) / 10))
}

/// `cuDeviceGetAttribute` on device `ordinal`.
pub(crate) fn device_attribute(
    device: sys::CUdevice,
    attribute: sys::CUdevice_attribute,
) -> Result<i32, DriverError> {
    // SAFETY: `device` comes from `cuDeviceGet` (via `CudaContext::cu_device`
    // or `result::device::get`), as `get_attribute` requires.
    unsafe { result::device::get_attribute(device, attribute) }
}

/// `cuDeviceTotalMem` of a device from `cuDeviceGet`.
pub(crate) fn device_total_mem(device: sys::CUdevice) -> Result<usize, DriverError> {
    // SAFETY: `device` comes from `cuDeviceGet`.
    unsafe { result::device::total_mem(device) }
}

/// `cuFuncGetAttribute` of a loaded function.
pub(crate) fn function_attribute(
    func: &CudaFunction,
    attribute: sys::CUfunction_attribute,
) -> Result<i32, DriverError> {
    func.get_attribute(attribute)
}

/// Launches `func` on `stream` with the kernel parameters in `params`.
///
/// # Safety
/// `params` must hold, in order, one pointer per kernel parameter, each to a
/// live value of exactly the C parameter's type and size (device pointers as
/// `CUdeviceptr` to allocations on this context that are large enough for
/// what the kernel accesses), and the values must stay alive until this
/// returns. The caller must have bound the stream's context to the thread.
pub(crate) unsafe fn launch(
    func: &CudaFunction,
    grid: (u32, u32, u32),
    block: (u32, u32, u32),
    shared_mem_bytes: u32,
    stream: &CudaStream,
    params: &mut [*mut c_void],
) -> Result<(), DriverError> {
    // SAFETY: the caller guarantees the parameter pointers; the function
    // handle is alive as long as `func` (it holds its module).
    unsafe {
        result::launch_kernel(
            func.cu_function(),
            grid,
            block,
            shared_mem_bytes,
            stream.cu_stream(),
            params,
        )
    }
}

/// Enqueues a copy of `src` to the device at `dst` on `stream`.
///
/// # Safety
/// `dst` must point to a live device allocation on the stream's context with at
/// least `size_of_val(src)` bytes, whose users on other streams were waited for
/// (the `SyncOnDrop` of `device_ptr_mut`). `src` must stay alive and unchanged
/// until the copy completes, unless it is pageable memory (the driver stages
/// pageable memory before it returns).
pub(crate) unsafe fn copy_htod<T: GpuRepr>(
    src: &[T],
    dst: sys::CUdeviceptr,
    stream: &CudaStream,
) -> Result<(), DriverError> {
    stream.context().bind_to_thread()?;
    // SAFETY: caller's contract above; the source is read through a raw
    // pointer by the driver, so padding bytes of `T` never become Rust values.
    unsafe { result::memcpy_htod_async(dst, src, stream.cu_stream()) }
}

/// Enqueues a copy from the device at `src` into `dst` on `stream`.
///
/// # Safety
/// `src` must point to a live device allocation on the stream's context with at
/// least `size_of_val(dst)` bytes. `dst` must stay alive and unaliased until the
/// copy completes (synchronize the stream before reading it, or use pinned
/// memory whose event records the copy).
pub(crate) unsafe fn copy_dtoh<T: GpuRepr>(
    src: sys::CUdeviceptr,
    dst: &mut [T],
    stream: &CudaStream,
) -> Result<(), DriverError> {
    stream.context().bind_to_thread()?;
    // SAFETY: caller's contract above. Any bytes written into `dst` form valid
    // `T`s: `GpuRepr` promises every bit pattern of its fields is valid.
    unsafe { result::memcpy_dtoh_async(dst, src, stream.cu_stream()) }
}

/// Enqueues a device-to-device copy of `bytes` bytes.
///
/// # Safety
/// Both pointers must point to live device allocations on the stream's
/// context with at least `bytes` bytes, not overlapping.
pub(crate) unsafe fn copy_dtod(
    src: sys::CUdeviceptr,
    dst: sys::CUdeviceptr,
    bytes: usize,
    stream: &CudaStream,
) -> Result<(), DriverError> {
    stream.context().bind_to_thread()?;
    // SAFETY: caller's contract above.
    unsafe { result::memcpy_dtod_async(dst, src, bytes, stream.cu_stream()) }
}

/// Allocates `bytes` (at least one) of page-locked host memory, zeroed.
pub(crate) fn alloc_pinned(
    stream: &std::sync::Arc<CudaStream>,
    bytes: usize,
) -> Result<PinnedHostSlice<u8>, DriverError> {
    // A zero-byte request would give a null pointer, which cudarc asserts on.
    let bytes = bytes.max(1);
    // SAFETY: the memory is uninitialized, and it is zeroed below before
    // anything reads it (`as_mut_slice` of `u8` needs no initialized value).
    let mut pinned = unsafe {
        stream
            .context()
            .alloc_pinned_with_flags::<u8>(bytes, sys::CU_MEMHOSTALLOC_PORTABLE)
    }?;
    // Writes only; never reads the uninitialized bytes.
    pinned.as_mut_slice()?.fill(0);
    Ok(pinned)
}

/// The first `len` elements of pinned bytes, as `T`s.
///
/// Returns `None` when the bytes are too short or misaligned for `T` (neither
/// happens for memory from [`alloc_pinned`]: it is page-aligned and sized by
/// the caller).
pub(crate) fn pinned_as_slice<T: GpuRepr>(bytes: &[u8], len: usize) -> Option<&[T]> {
    let needed = len.checked_mul(std::mem::size_of::<T>())?;
    if bytes.len() < needed || !(bytes.as_ptr() as usize).is_multiple_of(std::mem::align_of::<T>())
    {
        return None;
    }
    // SAFETY: size and alignment were checked above; the bytes are initialized
    // (zeroed at allocation, then written only with `T`s or by the device);
    // every bit pattern is a valid `T` (`GpuRepr`); the lifetime is the borrow
    // of `bytes`.
    Some(unsafe { std::slice::from_raw_parts(bytes.as_ptr().cast::<T>(), len) })
}

/// Mutable version of [`pinned_as_slice`].
pub(crate) fn pinned_as_mut_slice<T: GpuRepr>(bytes: &mut [u8], len: usize) -> Option<&mut [T]> {
    let needed = len.checked_mul(std::mem::size_of::<T>())?;
    if bytes.len() < needed || !(bytes.as_ptr() as usize).is_multiple_of(std::mem::align_of::<T>())
    {
        return None;
    }
    // SAFETY: as in `pinned_as_slice`; the unique borrow of `bytes` makes the
    // result unique too. Writing any `T` (padding included) leaves the bytes
    // initialized for later reads as `T`.
    Some(unsafe { std::slice::from_raw_parts_mut(bytes.as_mut_ptr().cast::<T>(), len) })
}

/// A `T` with every byte zero.
pub(crate) fn zeroed<T: GpuRepr>() -> T {
    // SAFETY: `GpuRepr` promises every bit pattern of the fields is a valid
    // value, all-zero included.
    unsafe { std::mem::zeroed() }
}

/// Enqueues a copy of the first `bytes` bytes of pinned memory to `dst`; the
/// pinned memory's event records the copy, so reading, writing or freeing it
/// later waits for the copy.
///
/// # Safety
/// `dst` must point to a live device allocation on the stream's context with
/// at least `bytes` bytes, whose users on other streams were waited for.
pub(crate) unsafe fn copy_pinned_htod(
    src: &PinnedHostSlice<u8>,
    bytes: usize,
    dst: sys::CUdeviceptr,
    stream: &CudaStream,
) -> Result<(), DriverError> {
    use cudarc::driver::HostSlice;
    stream.context().bind_to_thread()?;
    // SAFETY: the slice is only read by the copy below, and the returned guard
    // records the pinned memory's event after it, so any later host access
    // (every accessor synchronizes on that event) sees the copy done.
    let (host, _record) = unsafe { src.stream_synced_slice(stream) };
    let host = host
        .get(..bytes)
        .ok_or(DriverError(sys::CUresult::CUDA_ERROR_INVALID_VALUE))?;
    // SAFETY: `dst` is valid for `bytes` bytes (caller's contract); `host` stays allocated
    // until the event recorded above completes (PinnedHostSlice's drop waits
    // for it).
    unsafe { result::memcpy_htod_async(dst, host, stream.cu_stream()) }
}

/// Enqueues a copy of `bytes` bytes from `src` into pinned memory; see
/// [`copy_pinned_htod`].
///
/// # Safety
/// `src` must point to a live device allocation on the stream's context with
/// at least `bytes` bytes.
pub(crate) unsafe fn copy_dtoh_pinned(
    src: sys::CUdeviceptr,
    dst: &mut PinnedHostSlice<u8>,
    bytes: usize,
    stream: &CudaStream,
) -> Result<(), DriverError> {
    use cudarc::driver::HostSlice;
    stream.context().bind_to_thread()?;
    // SAFETY: as in `copy_pinned_htod`: the event recorded by the guard after
    // the copy makes every later host access wait for it.
    let (host, _record) = unsafe { dst.stream_synced_mut_slice(stream) };
    let host = host
        .get_mut(..bytes)
        .ok_or(DriverError(sys::CUresult::CUDA_ERROR_INVALID_VALUE))?;
    // SAFETY: `src` is valid for `bytes` bytes (caller's contract).
    unsafe { result::memcpy_dtoh_async(host, src, stream.cu_stream()) }
}

// ---------------------------------------------------------------------------
// Kernel parameters: the `FfiParam` impls and the tuple `LaunchParams` impls.

use crate::launch::{FfiParam, LaunchConfig, LaunchParams, LaunchSite};
use crate::memory::{ViewMutRef, ViewRef};
use crate::{DeviceView, DeviceViewMut, Error};
use cuda_sys::param_kind::{ByValue, ConstPtr, MutPtr};
use cuda_sys::AbiParam;
use cudarc::driver::SyncOnDrop;
use std::sync::Arc;

/// A device pointer kernel parameter, and the guard that records the use of
/// its memory on the stream when dropped after the launch.
#[doc(hidden)]
#[derive(Debug)]
pub struct PointerParam<'a> {
    ptr: sys::CUdeviceptr,
    _record: SyncOnDrop<'a>,
}

fn same_context(a: &CudaStream, b: &CudaStream) -> Result<(), Error> {
    if Arc::ptr_eq(a.context(), b.context()) {
        Ok(())
    } else {
        Err(Error::BackendMismatch {
            what: "a buffer from another device's context",
        })
    }
}

// SAFETY: `marshal` yields the `CUdeviceptr` of the view's first byte (a `const
// T *` in C is one pointer-sized device address), kept alive in
// `PointerParam`; the view borrows a live allocation on the same context
// (checked), for the launch's lifetime.
unsafe impl<T: GpuRepr> FfiParam for ConstPtr<T> {
    type Arg<'a> = DeviceView<'a, T>;
    type HostArg<'a> = &'a [T];
    type Marshalled<'a> = PointerParam<'a>;

    #[inline]
    fn marshal<'a>(
        arg: Self::Arg<'a>,
        stream: &'a Arc<CudaStream>,
    ) -> Result<Self::Marshalled<'a>, Error> {
        match arg.inner {
            ViewRef::Cuda(view) => {
                use cudarc::driver::DeviceSlice;
                same_context(view.stream(), stream)?;
                let (ptr, record) = view.view_ptr(stream);
                Ok(PointerParam {
                    ptr,
                    _record: record,
                })
            }
            ViewRef::Host(_) => Err(Error::BackendMismatch {
                what: "a host buffer passed to a cuda launch",
            }),
        }
    }

    #[inline]
    fn param_ptr(marshalled: &Self::Marshalled<'_>) -> *mut c_void {
        (&marshalled.ptr as *const sys::CUdeviceptr)
            .cast_mut()
            .cast()
    }

    fn to_host<'a>(arg: Self::Arg<'a>) -> Result<Self::HostArg<'a>, Error> {
        arg.as_host().ok_or(Error::BackendMismatch {
            what: "a cuda buffer passed to a cpu launch",
        })
    }
}

// SAFETY: as for `ConstPtr<T>` (`const T *`); the view borrows its buffer mutably, so the
// kernel's writes alias no other view handed to the same launch.
unsafe impl<T: GpuRepr> FfiParam for MutPtr<T> {
    type Arg<'a> = DeviceViewMut<'a, T>;
    type HostArg<'a> = &'a mut [T];
    type Marshalled<'a> = PointerParam<'a>;

    #[inline]
    fn marshal<'a>(
        arg: Self::Arg<'a>,
        stream: &'a Arc<CudaStream>,
    ) -> Result<Self::Marshalled<'a>, Error> {
        match arg.inner {
            ViewMutRef::Cuda(view) => {
                use cudarc::driver::DeviceSlice;
                same_context(view.stream(), stream)?;
                let (ptr, record) = view.view_ptr_mut(stream);
                Ok(PointerParam {
                    ptr,
                    _record: record,
                })
            }
            ViewMutRef::Host(_) => Err(Error::BackendMismatch {
                what: "a host buffer passed to a cuda launch",
            }),
        }
    }

    #[inline]
    fn param_ptr(marshalled: &Self::Marshalled<'_>) -> *mut c_void {
        (&marshalled.ptr as *const sys::CUdeviceptr)
            .cast_mut()
            .cast()
    }

    fn to_host<'a>(arg: Self::Arg<'a>) -> Result<Self::HostArg<'a>, Error> {
        match arg.inner {
            ViewMutRef::Host(s) => Ok(s),
            ViewMutRef::Cuda(_) => Err(Error::BackendMismatch {
                what: "a cuda buffer passed to a cpu launch",
            }),
        }
    }
}

// SAFETY: the parameter is passed by value: `param_ptr` points to the value
// itself, kept alive in `Marshalled`; its layout equals the C type's
// (`GpuRepr`, asserted at compile time by generated code or `gpu_repr!`).
unsafe impl<T: GpuRepr> FfiParam for ByValue<T> {
    type Arg<'a> = T;
    type HostArg<'a> = T;
    type Marshalled<'a> = T;

    #[inline]
    fn marshal<'a>(
        arg: Self::Arg<'a>,
        _stream: &'a Arc<CudaStream>,
    ) -> Result<Self::Marshalled<'a>, Error> {
        Ok(arg)
    }

    #[inline]
    fn param_ptr(marshalled: &Self::Marshalled<'_>) -> *mut c_void {
        (marshalled as *const T).cast_mut().cast()
    }

    #[inline]
    fn to_host<'a>(arg: Self::Arg<'a>) -> Result<Self::HostArg<'a>, Error> {
        Ok(arg)
    }
}

macro_rules! tuple_params {
    ($n:literal; $($p:ident $a:ident $m:ident),*) => {
        impl<$($p: AbiParam),*> LaunchParams for ($($p,)*)
        where
            $(<$p as AbiParam>::Kind: FfiParam,)*
        {
            type Args<'a> = ($(<<$p as AbiParam>::Kind as FfiParam>::Arg<'a>,)*);
            type HostArgs<'a> = ($(<<$p as AbiParam>::Kind as FfiParam>::HostArg<'a>,)*);

            #[inline]
            #[allow(unused_variables, clippy::unused_unit)]
            fn launch_cuda<'a>(
                args: Self::Args<'a>,
                stream: &'a Arc<CudaStream>,
                func: &CudaFunction,
                config: &LaunchConfig,
                site: LaunchSite,
            ) -> Result<(), Error> {
                let ($($a,)*) = args;
                $(let $m = <<$p as AbiParam>::Kind as FfiParam>::marshal($a, stream)?;)*
                let mut params: [*mut c_void; $n] = [$(<<$p as AbiParam>::Kind as FfiParam>::param_ptr(&$m)),*];
                stream
                    .context()
                    .bind_to_thread()
                    .map_err(|source| Error::Launch { kernel: site.kernel, module: site.module, source })?;
                // SAFETY: `params` holds one pointer per C parameter, in order
                // (the tuple is the kernel's `Params`, generated from its
                // header), each to a marshalled value that lives until the end
                // of this function (`FfiParam`'s contract); the context is bound
                // above.
                unsafe {
                    launch(func, config.grid, config.block, config.shared_mem_bytes, stream, &mut params)
                }
                .map_err(|source| Error::Launch { kernel: site.kernel, module: site.module, source })
                // The marshalled guards drop here, after the launch is enqueued.
            }

            #[allow(clippy::unused_unit)]
            fn to_host<'a>(args: Self::Args<'a>) -> Result<Self::HostArgs<'a>, Error> {
                let ($($a,)*) = args;
                Ok(($(<<$p as AbiParam>::Kind as FfiParam>::to_host($a)?,)*))
            }
        }
    };
}

tuple_params!(0;);
tuple_params!(1; A a ma);
tuple_params!(2; A a ma, B b mb);
tuple_params!(3; A a ma, B b mb, C c mc);
tuple_params!(4; A a ma, B b mb, C c mc, D d md);
tuple_params!(5; A a ma, B b mb, C c mc, D d md, E e me);
tuple_params!(6; A a ma, B b mb, C c mc, D d md, E e me, F f mf);
tuple_params!(7; A a ma, B b mb, C c mc, D d md, E e me, F f mf, G g mg);
tuple_params!(8; A a ma, B b mb, C c mc, D d md, E e me, F f mf, G g mg, H h mh);
tuple_params!(9; A a ma, B b mb, C c mc, D d md, E e me, F f mf, G g mg, H h mh, I i mi);
tuple_params!(10; A a ma, B b mb, C c mc, D d md, E e me, F f mf, G g mg, H h mh, I i mi, J j mj);
tuple_params!(11; A a ma, B b mb, C c mc, D d md, E e me, F f mf, G g mg, H h mh, I i mi, J j mj, K k mk);
tuple_params!(12; A a ma, B b mb, C c mc, D d md, E e me, F f mf, G g mg, H h mh, I i mi, J j mj, K k mk, L l ml);
tuple_params!(13; A a ma, B b mb, C c mc, D d md, E e me, F f mf, G g mg, H h mh, I i mi, J j mj, K k mk, L l ml, M m mm);
tuple_params!(14; A a ma, B b mb, C c mc, D d md, E e me, F f mf, G g mg, H h mh, I i mi, J j mj, K k mk, L l ml, M m mm, N n mn);
tuple_params!(15; A a ma, B b mb, C c mc, D d md, E e me, F f mf, G g mg, H h mh, I i mi, J j mj, K k mk, L l ml, M m mm, N n mn, O o mo);
tuple_params!(16; A a ma, B b mb, C c mc, D d md, E e me, F f mf, G g mg, H h mh, I i mi, J j mj, K k mk, L l ml, M m mm, N n mn, O o mo, P p mp);

// ---------------------------------------------------------------------------
// Peer access and NCCL.

/// `cuDeviceCanAccessPeer`: whether `device` can access `peer`'s memory.
pub(crate) fn can_access_peer(
    device: sys::CUdevice,
    peer: sys::CUdevice,
) -> Result<bool, DriverError> {
    let mut can: std::ffi::c_int = 0;
    // SAFETY: `can` is a valid, writable `int`; both devices come from
    // `cuDeviceGet` (via `CudaContext::cu_device`), so the driver is loaded.
    unsafe { sys::cuDeviceCanAccessPeer(&mut can, device, peer) }.result()?;
    Ok(can != 0)
}

use crate::error::{NcclError, NcclUnavailable};
use cudarc::driver::{CudaViewMut, DevicePtrMut};
use cudarc::nccl::sys::{cudaStream_t, ncclComm_t, ncclDataType_t, ncclRedOp_t};
use std::ffi::{c_char, c_int};

/// The names libnccl is loaded by, in order: the soname the runtime packages
/// install (`libnccl2`, the `nvidia-nccl` wheels), then the development
/// symlink. cudarc's own loader tries neither of them first and panics when it
/// finds nothing, so gpu-core loads NCCL itself and never calls cudarc's
/// `nccl::sys` functions.
pub(crate) const NCCL_LIBRARIES: &[&str] = &["libnccl.so.2", "libnccl.so"];

/// `ncclResult_t` as returned: an integer, not cudarc's enum, since a newer
/// NCCL may return a code the enum lacks (undefined behaviour for a Rust enum).
type NcclResult = c_int;

/// libnccl, loaded once, with the functions gpu-core calls. Signatures are
/// those of `nccl.h` (NCCL 2.x), with cudarc's types for the arguments.
#[derive(Debug)]
pub(crate) struct Nccl {
    version: c_int,
    get_error_string: unsafe extern "C" fn(NcclResult) -> *const c_char,
    comm_init_all: unsafe extern "C" fn(*mut ncclComm_t, c_int, *const c_int) -> NcclResult,
    comm_destroy: unsafe extern "C" fn(ncclComm_t) -> NcclResult,
    all_reduce: unsafe extern "C" fn(
        *const c_void,
        *mut c_void,
        usize,
        ncclDataType_t,
        ncclRedOp_t,
        ncclComm_t,
        cudaStream_t,
    ) -> NcclResult,
    group_start: unsafe extern "C" fn() -> NcclResult,
    group_end: unsafe extern "C" fn() -> NcclResult,
    /// Keeps the function pointers above valid; never unloaded (it lives in a
    /// `static`).
    _library: libloading::Library,
}

/// libnccl, loaded on first use; the error says why it cannot be.
pub(crate) fn nccl() -> Result<&'static Nccl, NcclUnavailable> {
    static NCCL: std::sync::OnceLock<Result<Nccl, NcclUnavailable>> = std::sync::OnceLock::new();
    NCCL.get_or_init(load_nccl).as_ref().map_err(Clone::clone)
}

fn load_nccl() -> Result<Nccl, NcclUnavailable> {
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
    fn check(&self, op: &'static str, code: NcclResult) -> Result<(), Error> {
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
        Err(Error::Nccl {
            op,
            source: NcclError { code, message },
        })
    }

    /// `ncclCommInitAll`: one communicator per device of `ordinals` (distinct
    /// CUDA ordinals), rank `r` on `ordinals[r]`.
    pub(crate) fn comm_init_all(&'static self, ordinals: &[c_int]) -> Result<Vec<NcclComm>, Error> {
        // Cannot fail: the ordinals are distinct `int`s.
        let count = c_int::try_from(ordinals.len()).map_err(|_| Error::SizeOverflow {
            len: ordinals.len(),
            elem_size: std::mem::size_of::<ncclComm_t>(),
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

/// In-place all-reduce of `count` elements of `datatype` over every rank:
/// `views[r]` on `streams[r]` with `comms[r]`, all enqueued inside one NCCL
/// group so that one thread drives every rank.
///
/// Checked here, so that no call can pass NCCL a bad pointer: as many comms,
/// streams and views; each view holds at least `count` elements of
/// `datatype` and lives on its stream's context, whose device is its
/// communicator's.
pub(crate) fn nccl_all_reduce_sum(
    comms: &[NcclComm],
    streams: &[&Arc<CudaStream>],
    views: &mut [&mut CudaViewMut<'_, u8>],
    count: usize,
    datatype: ncclDataType_t,
) -> Result<(), Error> {
    use cudarc::driver::DeviceSlice;
    let elem_size = nccl_type_size(datatype).ok_or(Error::BackendMismatch {
        what: "an element type nccl does not reduce here",
    })?;
    let bytes = count.checked_mul(elem_size).ok_or(Error::SizeOverflow {
        len: count,
        elem_size,
    })?;
    if views.len() != comms.len() || streams.len() != comms.len() {
        return Err(Error::InvalidCollective(
            crate::error::CollectiveMismatch::RankCount {
                expected: comms.len(),
                got: views.len(),
            },
        ));
    }
    for ((comm, stream), view) in comms.iter().zip(streams).zip(views.iter()) {
        same_context(view.stream(), stream)?;
        if comm.ordinal != stream.context().ordinal() {
            return Err(Error::BackendMismatch {
                what: "a communicator of another device",
            });
        }
        if view.len() < bytes {
            return Err(Error::OutOfBounds {
                start: 0,
                end: count,
                len: view.len() / elem_size,
            });
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
    nccl.check("ncclGroupStart", unsafe { (nccl.group_start)() })?;
    let mut enqueued = Ok(());
    for ((comm, stream), (ptr, _)) in comms.iter().zip(streams).zip(&pointers) {
        let call = stream
            .context()
            .bind_to_thread()
            .map_err(crate::error::driver("bind context"))
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
            });
        if let Err(e) = call {
            enqueued = Err(e);
            break;
        }
    }
    // SAFETY: closes the group opened above.
    let ended = nccl.check("ncclGroupEnd", unsafe { (nccl.group_end)() });
    drop(pointers);
    enqueued.and(ended)
}
