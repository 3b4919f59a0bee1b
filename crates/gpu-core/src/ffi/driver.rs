//! The CUDA driver calls gpu-core makes itself, over cudarc's `sys` and
//! `result` layers: version and device queries, the kernel launch, parameter
//! info for launches by name, host/device copies of any `GpuRepr` type, and
//! page-locked host memory (allocated, or registered) with its asynchronous
//! copies.
//!
//! The safe functions take cudarc's own handles (`CudaStream`, `CudaView`,
//! `CudaFunction`), whose lifetimes keep the memory and modules they name
//! alive, and check lengths and contexts before the driver sees a pointer.
//! Page-locked memory keeps an event of its last use on a stream, waited for
//! before the host touches or lets go of the memory: an asynchronous copy
//! never outlives its host memory, whatever the layers above do with their
//! borrows (a guard leaked with `mem::forget` included).

use std::ffi::{c_int, c_void};
use std::ops::Range;
use std::ptr::NonNull;
use std::sync::{Arc, Mutex, PoisonError};

use cudarc::driver::{
    result, sys, CudaContext, CudaEvent, CudaFunction, CudaStream, CudaView, CudaViewMut,
    DevicePtr, DevicePtrMut, DeviceSlice, DriverError, PinnedHostSlice,
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

/// Zeroes `view` on `stream` without cudarc's events: for a view of a
/// stream-local buffer (`memory::LocalSlice`) on its own stream, whose
/// start address is `addr` (`memory::Local::address_on`).
pub(crate) fn memset_zeros_local(
    view: &mut CudaViewMut<'_, u8>,
    addr: u64,
    stream: &CudaStream,
) -> Result<(), DriverError> {
    if !Arc::ptr_eq(view.stream().context(), stream.context()) {
        return Err(refuse(sys::CUresult::CUDA_ERROR_INVALID_CONTEXT));
    }
    stream.context().bind_to_thread()?;
    // SAFETY: `addr` is where `view` starts (the caller took it from the
    // view's buffer on this stream), and `view`, borrowed for this call,
    // keeps its `num_bytes()` bytes allocated on the stream's context. Only
    // this stream uses a stream-local buffer, and its free is ordered after
    // the stream's work, so the memset cannot outlive the memory.
    unsafe { result::memset_d8_async(addr, 0, view.num_bytes(), stream.cu_stream()) }
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

/// The last use of page-locked host memory by a stream: an event recorded
/// after each copy. Every copy first makes its stream wait for the event, so
/// the event, recorded again after it, covers every earlier copy too, on any
/// stream.
#[derive(Debug)]
struct LastUse {
    event: CudaEvent,
    /// Held from the wait to the record: two threads copying from one buffer
    /// (`&self` is enough for a source) must not both wait for the same
    /// record, or the second record would not cover the first copy.
    order: Mutex<()>,
}

impl LastUse {
    fn new(ctx: &Arc<CudaContext>) -> Result<Self, DriverError> {
        Ok(Self {
            event: ctx.new_event(None)?,
            order: Mutex::new(()),
        })
    }

    fn context(&self) -> &Arc<CudaContext> {
        self.event.context()
    }

    /// Enqueues `copy` on `stream` after every earlier use and records the
    /// event after it. When the event cannot be recorded, the stream is waited
    /// for instead, so that the event never misses a copy in flight.
    fn around(
        &self,
        stream: &CudaStream,
        copy: impl FnOnce() -> Result<(), DriverError>,
    ) -> Result<(), DriverError> {
        if !Arc::ptr_eq(self.context(), stream.context()) {
            return Err(refuse(sys::CUresult::CUDA_ERROR_INVALID_CONTEXT));
        }
        let _order = self.order.lock().unwrap_or_else(PoisonError::into_inner);
        stream.wait(&self.event)?;
        copy()?;
        self.event.record(stream).or_else(|e| {
            stream.synchronize()?;
            Err(e)
        })
    }

    /// Blocks until every copy that used the memory is done.
    fn wait(&self) -> Result<(), DriverError> {
        self.event.synchronize()
    }
}

/// Checks that `range` of a host buffer of `len` elements and a device view
/// of `view_bytes` on `view_stream`'s context can take part in one copy on
/// `stream`; the byte range of the host side.
fn check_host_copy<T>(
    range: &Range<usize>,
    len: usize,
    view_stream: &Arc<CudaStream>,
    view_bytes: usize,
    stream: &CudaStream,
) -> Result<Range<usize>, DriverError> {
    if range.start > range.end || range.end > len {
        return Err(refuse(sys::CUresult::CUDA_ERROR_INVALID_VALUE));
    }
    let size = std::mem::size_of::<T>();
    let bytes = range.start * size..range.end * size;
    check_copy(view_stream, view_bytes, bytes.len(), stream)?;
    Ok(bytes)
}

/// Enqueues a copy of `dst.len()` bytes from `src` into `dst` on `stream`,
/// after every earlier use recorded in `last_use` and recorded in it.
///
/// # Safety
/// `src` must point to `dst.len()` bytes of page-locked host memory that stay
/// allocated and unwritten until `last_use` has been waited for; `dst` must
/// be on the stream's context, checked as in [`check_copy`].
unsafe fn htod_tracked(
    last_use: &LastUse,
    src: *const u8,
    dst: &mut CudaViewMut<'_, u8>,
    stream: &CudaStream,
) -> Result<(), DriverError> {
    let bytes = dst.len();
    last_use.around(stream, || {
        let (ptr, _record) = dst.device_ptr_mut(stream);
        // SAFETY: `ptr` starts `dst`, a live device allocation of
        // `dst.len()` bytes on the stream's context, ordered after its other
        // users (`device_ptr_mut`); the caller guarantees `src` until the
        // last-use event, which `around` records after the copy. The driver
        // only reads `src`; padding bytes of `T` are never Rust values.
        unsafe { sys::cuMemcpyHtoDAsync_v2(ptr, src.cast(), bytes, stream.cu_stream()) }.result()
    })
}

/// Page-locked host memory from cudarc's `cuMemHostAlloc`, holding `len`
/// values of `T`, zeroed when allocated.
#[derive(Debug)]
pub(crate) struct PinnedHost<T> {
    ptr: NonNull<T>,
    len: usize,
    last_use: LastUse,
    /// Held to be freed by cudarc (after `Drop` below waited for the last
    /// use); cudarc's own event in it is never recorded, since no cudarc copy
    /// sees it.
    _alloc: PinnedHostSlice<u8>,
}

// SAFETY: `PinnedHost` owns its memory as a `Vec<T>` would (the pointer is
// reached only through `&self`/`&mut self`), and cudarc's allocation and event
// are `Send` and `Sync`.
unsafe impl<T: Send> Send for PinnedHost<T> {}
// SAFETY: as for `Send`: shared access gives out `&[T]` only.
unsafe impl<T: Sync> Sync for PinnedHost<T> {}

impl<T: GpuRepr> PinnedHost<T> {
    /// `len` zeroed values of `T` in page-locked memory of `ctx` (copied on
    /// its streams only: the last-use event is of `ctx`). `INVALID_VALUE` when
    /// the size overflows.
    pub(crate) fn alloc(ctx: &Arc<CudaContext>, len: usize) -> Result<Self, DriverError> {
        let bytes = len
            .checked_mul(std::mem::size_of::<T>())
            .filter(|&b| b < isize::MAX as usize)
            .ok_or(refuse(sys::CUresult::CUDA_ERROR_INVALID_VALUE))?;
        // One byte at least: a zero-byte allocation is not portable. Not
        // write-combined (cudarc's default): copies to the host are read back.
        // SAFETY: the memory is not initialized; it is zeroed below before
        // anything reads it.
        let mut alloc = unsafe { ctx.alloc_pinned_with_flags::<u8>(bytes.max(1), 0) }?;
        let raw = alloc.as_mut_ptr()?;
        if raw.align_offset(std::mem::align_of::<T>()) != 0 {
            // cuMemHostAlloc returns whole pages; never seen, but checked.
            return Err(refuse(sys::CUresult::CUDA_ERROR_INVALID_VALUE));
        }
        // SAFETY: `raw` is the start of the `bytes.max(1)` writable bytes just
        // allocated, which nothing else uses yet.
        unsafe { std::ptr::write_bytes(raw, 0, bytes.max(1)) };
        let ptr =
            NonNull::new(raw.cast::<T>()).ok_or(refuse(sys::CUresult::CUDA_ERROR_INVALID_VALUE))?;
        let last_use = LastUse::new(ctx)?;
        Ok(Self {
            ptr,
            len,
            last_use,
            _alloc: alloc,
        })
    }

    /// The values, once every copy that used them is done.
    pub(crate) fn as_slice(&self) -> Result<&[T], DriverError> {
        self.last_use.wait()?;
        // SAFETY: `ptr` is aligned for `T` (checked in `alloc`) and starts
        // `len` values of `T` in memory this owns: zeroed when allocated and
        // since written only as `T`s or by copies from the device, and every
        // bit pattern is a valid `T` (`GpuRepr`). No copy is in flight (waited
        // for above), and a copy into this memory needs `&mut self`, which
        // cannot exist while the returned slice borrows `self`.
        Ok(unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) })
    }

    /// The values to write, once every copy that used them is done.
    pub(crate) fn as_mut_slice(&mut self) -> Result<&mut [T], DriverError> {
        self.last_use.wait()?;
        // SAFETY: as in `as_slice`; `&mut self` excludes every other use,
        // copies included, for as long as the slice lives.
        Ok(unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) })
    }

    /// Enqueues a copy of elements `range` into `dst` on `stream`. Lengths and
    /// contexts are checked as in [`copy_htod`] (`INVALID_VALUE` for a range
    /// out of bounds); nothing is copied then.
    pub(crate) fn copy_to_device(
        &self,
        range: Range<usize>,
        dst: &mut CudaViewMut<'_, u8>,
        stream: &CudaStream,
    ) -> Result<(), DriverError> {
        let bytes = check_host_copy::<T>(&range, self.len, dst.stream(), dst.len(), stream)?;
        if bytes.is_empty() {
            return Ok(());
        }
        // SAFETY: the source is `bytes` of this allocation (in bounds,
        // checked above, so the offset stays inside it), which stays
        // allocated and unwritten until the copy is done: `Drop` and
        // `as_mut_slice` wait for `last_use`.
        unsafe {
            htod_tracked(
                &self.last_use,
                self.alloc_ptr().add(bytes.start),
                dst,
                stream,
            )
        }
    }

    /// Enqueues a copy of `src` into elements `range` on `stream`; checked as
    /// in [`PinnedHost::copy_to_device`].
    pub(crate) fn copy_from_device(
        &mut self,
        range: Range<usize>,
        src: &CudaView<'_, u8>,
        stream: &CudaStream,
    ) -> Result<(), DriverError> {
        let bytes = check_host_copy::<T>(&range, self.len, src.stream(), src.len(), stream)?;
        if bytes.is_empty() {
            return Ok(());
        }
        let dst = self.alloc_ptr();
        self.last_use.around(stream, || {
            let (ptr, _record) = src.device_ptr(stream);
            // SAFETY: `ptr` starts `src`, a live device allocation of
            // `bytes.len()` bytes on the stream's context (checked above).
            // The destination is `bytes` of this allocation (in bounds),
            // which nothing reads or frees until the copy is done: `around`
            // records the last-use event after it, which `Drop`, `as_slice`
            // and `as_mut_slice` wait for. Any bytes written form valid `T`s
            // (`GpuRepr`).
            unsafe {
                sys::cuMemcpyDtoHAsync_v2(
                    dst.add(bytes.start).cast(),
                    ptr,
                    bytes.len(),
                    stream.cu_stream(),
                )
            }
            .result()
        })
    }

    fn alloc_ptr(&self) -> *mut u8 {
        self.ptr.as_ptr().cast()
    }
}

impl<T> Drop for PinnedHost<T> {
    fn drop(&mut self) {
        // Before `alloc` is freed: no copy may still use the memory. An error
        // is kept by the context for its next call.
        let ctx = self.last_use.context();
        ctx.record_err(self.last_use.wait());
    }
}

/// Host memory of the caller's, page-locked with `cuMemHostRegister` for as
/// long as this borrows it; nothing is registered for an empty slice.
#[derive(Debug)]
pub(crate) struct Registration<'a, T> {
    data: &'a [T],
    /// `None` for an empty slice.
    last_use: Option<LastUse>,
}

impl<'a, T: GpuRepr> Registration<'a, T> {
    /// Registers `data` with `ctx`, read-only (`CU_MEMHOSTREGISTER_READ_ONLY`:
    /// the device only reads it, so read-only pages such as a file mapped
    /// for reading can be registered) when `read_only`. The driver refuses
    /// memory already registered or allocated page-locked, pages it cannot
    /// lock, and read-only pages without the flag.
    pub(crate) fn new(
        ctx: &Arc<CudaContext>,
        data: &'a [T],
        read_only: bool,
    ) -> Result<Self, DriverError> {
        let bytes = std::mem::size_of_val(data);
        if bytes == 0 {
            return Ok(Self {
                data,
                last_use: None,
            });
        }
        let last_use = LastUse::new(ctx)?;
        ctx.bind_to_thread()?;
        let flags = if read_only {
            sys::CU_MEMHOSTREGISTER_READ_ONLY
        } else {
            0
        };
        // SAFETY: `data` is `bytes` bytes of live host memory, borrowed for as
        // long as the registration (`Drop` unregisters it); the driver only
        // locks the pages and never writes through this pointer (no copy
        // into registered memory is offered).
        unsafe { sys::cuMemHostRegister_v2(data.as_ptr().cast_mut().cast(), bytes, flags) }
            .result()?;
        Ok(Self {
            data,
            last_use: Some(last_use),
        })
    }

    /// Elements registered.
    pub(crate) fn len(&self) -> usize {
        self.data.len()
    }

    /// Enqueues a copy of elements `range` into `dst` on `stream`; checked as
    /// in [`PinnedHost::copy_to_device`].
    pub(crate) fn copy_to_device(
        &self,
        range: Range<usize>,
        dst: &mut CudaViewMut<'_, u8>,
        stream: &CudaStream,
    ) -> Result<(), DriverError> {
        let bytes = check_host_copy::<T>(&range, self.data.len(), dst.stream(), dst.len(), stream)?;
        let Some(last_use) = self.last_use.as_ref().filter(|_| !bytes.is_empty()) else {
            return Ok(());
        };
        // SAFETY: the source is `bytes` of the registered slice (in bounds,
        // checked above), borrowed by `self` for `'a` and only read; `Drop`
        // waits for `last_use` before it unregisters and ends the borrow.
        unsafe { htod_tracked(last_use, self.data[range].as_ptr().cast(), dst, stream) }
    }
}

impl<T> Drop for Registration<'_, T> {
    fn drop(&mut self) {
        let Some(last_use) = &self.last_use else {
            return;
        };
        // Errors are kept by the context for its next call.
        let ctx = last_use.context();
        ctx.record_err(last_use.wait());
        ctx.record_err(ctx.bind_to_thread());
        // SAFETY: the pointer is the one registered in `new` (the slice is
        // still borrowed), and no copy uses it any more (waited for above).
        let unregistered =
            unsafe { sys::cuMemHostUnregister(self.data.as_ptr().cast_mut().cast()) };
        ctx.record_err(unregistered.result());
    }
}
