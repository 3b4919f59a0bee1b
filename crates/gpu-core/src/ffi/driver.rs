//! The CUDA driver calls gpu-core makes itself, over cudarc's `sys` and
//! `result` layers: version and device queries, the kernel launch, parameter
//! info for launches by name, and host/device copies of any `GpuRepr` type.
//!
//! The safe functions take cudarc's own handles (`CudaStream`, `CudaView`,
//! `CudaFunction`), whose lifetimes keep the memory and modules they name
//! alive, and check lengths and contexts before the driver sees a pointer.

use std::ffi::{c_int, c_void};
use std::sync::Arc;

use cudarc::driver::{
    result, sys, CudaFunction, CudaStream, CudaView, CudaViewMut, DevicePtr, DevicePtrMut,
    DeviceSlice, DriverError,
};
use kiln_abi::GpuRepr;

/// Whether `libcuda` can be loaded. Checked before any other driver call, as
/// cudarc panics when it has to load a missing library.
pub(crate) fn driver_present() -> bool {
    // SAFETY: `is_culib_present` only tries to open the library with
    // libloading (running its initializers, which for libcuda are benign) and
    // drops it; it calls no driver function.
    unsafe { sys::is_culib_present() }
}

/// The driver's CUDA version as `(major, minor)`. Call only when
/// [`driver_present`] is true (cudarc panics on a missing library).
pub(crate) fn driver_version() -> Result<(u32, u32), DriverError> {
    let mut version: c_int = 0;
    // SAFETY: `version` is a valid, writable `int`; cuDriverGetVersion needs no
    // initialization.
    unsafe { sys::cuDriverGetVersion(&mut version) }.result()?;
    let version = u32::try_from(version).unwrap_or(0);
    Ok((version / 1000, (version % 1000) / 10))
}

/// `cuDeviceGetAttribute` of a device from `cuDeviceGet`.
pub(crate) fn device_attribute(
    device: sys::CUdevice,
    attribute: sys::CUdevice_attribute,
) -> Result<i32, DriverError> {
    // SAFETY: any `CUdevice` value is accepted (an invalid one is an error
    // code, not undefined behaviour); the driver is loaded, since `device`
    // came from it.
    unsafe { result::device::get_attribute(device, attribute) }
}

/// `cuDeviceTotalMem` of a device from `cuDeviceGet`.
pub(crate) fn device_total_mem(device: sys::CUdevice) -> Result<usize, DriverError> {
    // SAFETY: as in `device_attribute`.
    unsafe { result::device::total_mem(device) }
}

/// `cuDeviceCanAccessPeer`: whether `device` can access `peer`'s memory.
pub(crate) fn can_access_peer(
    device: sys::CUdevice,
    peer: sys::CUdevice,
) -> Result<bool, DriverError> {
    let mut can: c_int = 0;
    // SAFETY: `can` is a valid, writable `int`; any device values are
    // accepted (invalid ones are an error code); the driver is loaded, since
    // the devices came from it.
    unsafe { sys::cuDeviceCanAccessPeer(&mut can, device, peer) }.result()?;
    Ok(can != 0)
}

/// The `(offset, size)` in bytes of each parameter of `func`, as the driver
/// reports them (`cuFuncGetParamInfo`, CUDA 12.4 and later); `None` when the
/// driver is older and lacks the call.
pub(crate) fn param_info(func: &CudaFunction) -> Result<Option<Vec<(usize, usize)>>, DriverError> {
    // SAFETY: `culib` returns the library cudarc loaded, present since `func`
    // came from it; the symbol is looked up, never called through this type.
    let present =
        unsafe { sys::culib().get::<unsafe extern "C" fn()>(b"cuFuncGetParamInfo\0") }.is_ok();
    if !present {
        return Ok(None);
    }
    // A parameter buffer holds at most 32,764 bytes, so a kernel has fewer
    // parameters than this; the loop ends at the first index out of range.
    const MAX_PARAMS: usize = 32_768;
    let mut params = Vec::new();
    for index in 0..MAX_PARAMS {
        let (mut offset, mut size) = (0usize, 0usize);
        // SAFETY: the function handle is alive as long as `func` (which holds
        // its module); both out-pointers are valid, writable `size_t`s; the
        // symbol exists (checked above), so cudarc's loader does not panic.
        let status =
            unsafe { sys::cuFuncGetParamInfo(func.cu_function(), index, &mut offset, &mut size) };
        match status {
            sys::CUresult::CUDA_SUCCESS => params.push((offset, size)),
            sys::CUresult::CUDA_ERROR_INVALID_VALUE => break,
            other => return Err(DriverError(other)),
        }
    }
    Ok(Some(params))
}

/// Binds the stream's context and launches `func` on `stream` with the kernel
/// parameters in `params`.
///
/// # Safety
/// `params` must hold, in order, one pointer per kernel parameter, each to a
/// live value of exactly the C parameter's type and size (device pointers as
/// `CUdeviceptr` to allocations on this context that are large enough for
/// what the kernel accesses, and that no other launch or copy uses in a
/// conflicting way meanwhile), and the values must stay alive until this
/// returns.
pub(crate) unsafe fn launch(
    func: &CudaFunction,
    grid: (u32, u32, u32),
    block: (u32, u32, u32),
    shared_mem_bytes: u32,
    stream: &CudaStream,
    params: &mut [*mut c_void],
) -> Result<(), DriverError> {
    stream.context().bind_to_thread()?;
    // SAFETY: the caller guarantees the parameter pointers; the function
    // handle is alive as long as `func` (it holds its module), and the
    // stream's context is bound above.
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

/// `CUDA_ERROR_INVALID_VALUE`, `CUDA_ERROR_INVALID_CONTEXT`: what a copy
/// returns when its arguments do not fit, before the driver is called.
fn refuse(code: sys::CUresult) -> DriverError {
    DriverError(code)
}

/// Checks that a device view of `view_bytes` on `view_stream`'s context can
/// take part in a copy of `bytes` on `stream`.
fn check_copy(
    view_stream: &Arc<CudaStream>,
    view_bytes: usize,
    bytes: usize,
    stream: &CudaStream,
) -> Result<(), DriverError> {
    if view_bytes != bytes {
        return Err(refuse(sys::CUresult::CUDA_ERROR_INVALID_VALUE));
    }
    if !Arc::ptr_eq(view_stream.context(), stream.context()) {
        return Err(refuse(sys::CUresult::CUDA_ERROR_INVALID_CONTEXT));
    }
    stream.context().bind_to_thread()
}

/// Enqueues a copy of `src` into `dst` on `stream`; `src` may be reused as
/// soon as this returns. `INVALID_VALUE` when the byte lengths differ,
/// `INVALID_CONTEXT` when `dst` is on another context; nothing is copied then.
pub(crate) fn copy_htod<T: Copy>(
    src: &[T],
    dst: &mut CudaViewMut<'_, u8>,
    stream: &CudaStream,
) -> Result<(), DriverError> {
    let bytes = std::mem::size_of_val(src);
    check_copy(dst.stream(), dst.len(), bytes, stream)?;
    if bytes == 0 {
        return Ok(());
    }
    let (ptr, _record) = dst.device_ptr_mut(stream);
    // SAFETY: `ptr` is the start of `dst`, a live device allocation of `bytes`
    // bytes on the stream's context (checked above) that the stream now
    // orders after its other users (`device_ptr_mut`). The driver reads
    // `bytes` bytes of `src`, which is borrowed for this call; pageable memory
    // is staged before cuMemcpyHtoDAsync returns, so `src` may be reused then.
    // Padding bytes of `T` are read by the driver only, never as Rust values.
    unsafe { sys::cuMemcpyHtoDAsync_v2(ptr, src.as_ptr().cast(), bytes, stream.cu_stream()) }
        .result()
}

/// Why a copy to the host failed.
#[derive(Debug)]
pub(crate) enum CopyError {
    /// The copy was refused or could not be enqueued; `dst` is unchanged.
    Enqueue(DriverError),
    /// Waiting for the stream failed: an asynchronous error of earlier work.
    Wait(DriverError),
}

/// Copies `src` into `dst` on `stream` and waits for the stream, so that
/// `dst` is written when this returns. Lengths and contexts are checked as in
/// [`copy_htod`].
pub(crate) fn copy_dtoh<T: GpuRepr>(
    src: &CudaView<'_, u8>,
    dst: &mut [T],
    stream: &CudaStream,
) -> Result<(), CopyError> {
    let bytes = std::mem::size_of_val(dst);
    check_copy(src.stream(), src.len(), bytes, stream).map_err(CopyError::Enqueue)?;
    if bytes == 0 {
        return Ok(());
    }
    {
        let (ptr, _record) = src.device_ptr(stream);
        // SAFETY: `ptr` is the start of `src`, a live device allocation of
        // `bytes` bytes on the stream's context (checked above). `dst` is
        // `bytes` bytes, borrowed mutably until the stream is synchronized
        // below, so nothing reads it while the copy writes it; any bytes
        // written form valid `T`s (`GpuRepr`: every bit pattern is valid).
        unsafe {
            sys::cuMemcpyDtoHAsync_v2(dst.as_mut_ptr().cast(), ptr, bytes, stream.cu_stream())
        }
        .result()
        .map_err(CopyError::Enqueue)?;
    }
    stream.synchronize().map_err(CopyError::Wait)
}
