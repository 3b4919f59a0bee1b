//! Streams: where copies and launches are enqueued, with a record of the
//! last launch so that an asynchronous error names the kernel it probably came
//! from; and events for ordering and timing.
//!
//! On the CPU backend every call runs to completion before it returns, so
//! streams are trivially ordered and synchronization always succeeds.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use cudarc::driver::{sys, CudaEvent, CudaStream, DevicePtr, DevicePtrMut};

use crate::backend::Backend;
use crate::error::{driver, Error};
use crate::ffi;
use crate::launch::{
    Args, CudaLaunch, Kernel, KernelByName, KernelImpl, LaunchConfig, LaunchParams, LaunchSite,
};
use crate::memory::{byte_len, check_local, check_repr, Storage, ViewMutRef, ViewRef};
use crate::{DeviceBuffer, DeviceView, DeviceViewMut, GpuRepr, KernelDecl};

/// An ordered queue of device work.
#[derive(Debug, Clone)]
pub struct Stream {
    backend: Backend,
    cuda: Option<Arc<CudaStream>>,
    last_launch: Arc<Mutex<Option<LaunchSite>>>,
}

fn oom_or(op: &'static str, bytes: usize) -> impl FnOnce(cudarc::driver::DriverError) -> Error {
    move |source| {
        let source = crate::error::DriverError::from(source);
        if source.is_out_of_memory() {
            Error::OutOfMemory { bytes, source }
        } else {
            Error::Driver { op, source }
        }
    }
}

pub(crate) fn length_check(op: &'static str, src: usize, dst: usize) -> Result<(), Error> {
    if src == dst {
        Ok(())
    } else {
        Err(Error::LengthMismatch { op, src, dst })
    }
}

pub(crate) const HOST_ON_CUDA: Error = Error::BackendMismatch {
    what: "host memory used on a cuda stream",
};
pub(crate) const CUDA_ON_HOST: Error = Error::BackendMismatch {
    what: "device memory used on the cpu backend",
};

impl Backend {
    /// The context's default stream (the CPU backend's only stream).
    pub fn default_stream(&self) -> Stream {
        Stream::new_default(self.clone())
    }

    /// A new stream; on the CPU, work is done when called, so every stream is
    /// the same.
    pub fn new_stream(&self) -> Result<Stream, Error> {
        Stream::new_nondefault(self.clone())
    }
}

impl<T: GpuRepr> DeviceView<'_, T> {
    /// The device address of the first element, for passing to host-side CUDA
    /// C++ (a static-library module) that enqueues work on `stream`; `None` on
    /// the CPU backend or for a stream of another backend.
    ///
    /// Nothing checks how the address is used: the memory stays
    /// valid while this view lives, and the work must go on `stream` (kiln
    /// records no use of the memory for other streams). `None` too for a
    /// stream-local buffer ([`DeviceBuffer::into_local`]) and another stream.
    pub fn raw_device_ptr(&self, stream: &Stream) -> Option<u64> {
        match (&self.inner, stream.cuda_stream()) {
            (ViewRef::Cuda(_, Some(local)), Some(cuda)) => local.address_on(cuda).ok(),
            (ViewRef::Cuda(view, None), Some(cuda)) => Some(view.device_ptr(cuda).0),
            (ViewRef::Null, Some(_)) => Some(0),
            _ => None,
        }
    }
}

impl<T: GpuRepr> DeviceBuffer<T> {
    /// This buffer, used from now on by `stream` alone: its launches, fills
    /// and raw addresses then pass its address as it is, without the two
    /// CUDA event calls per pointer argument that order a buffer shared by
    /// several streams (for kiln-anneal's launches of 10 to 20 pointers,
    /// half of the host's time). Work that other streams enqueued on it
    /// before is waited for first, and its free waits for its stream's work.
    ///
    /// A use on any other stream is refused with [`Error::ForeignStream`],
    /// so the stream's order is the only one its memory ever needs. On the
    /// CPU backend, where every call finishes before it returns, this is
    /// the buffer unchanged. Errors: [`Error::BackendMismatch`] for a stream
    /// of another backend or device, [`Error::ForeignStream`] for a buffer
    /// already local to another stream.
    ///
    /// ```
    /// # use gpu_core::Backend;
    /// # fn main() -> Result<(), gpu_core::Error> {
    /// let backend = Backend::cpu();
    /// let stream = backend.new_stream()?;
    /// let counts = stream.alloc_zeros::<u32>(256)?.into_local(&stream)?;
    /// assert_eq!(stream.to_host(&counts.view())?, vec![0; 256]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn into_local(self, stream: &Stream) -> Result<Self, Error> {
        self.into_local_on(stream.cuda_stream())
    }
}

impl<T: GpuRepr> DeviceViewMut<'_, T> {
    /// The device address of the first element, for host-side CUDA C++ that
    /// writes it on `stream`; see [`DeviceView::raw_device_ptr`].
    pub fn raw_device_ptr(&mut self, stream: &Stream) -> Option<u64> {
        match (&mut self.inner, stream.cuda_stream()) {
            (ViewMutRef::Cuda(_, Some(local)), Some(cuda)) => local.address_on(cuda).ok(),
            (ViewMutRef::Cuda(view, None), Some(cuda)) => Some(view.device_ptr_mut(cuda).0),
            (ViewMutRef::Null, Some(_)) => Some(0),
            _ => None,
        }
    }
}

impl Stream {
    pub(crate) fn new_default(backend: Backend) -> Self {
        let cuda = backend.cuda_state().map(|c| c.ctx.default_stream());
        Self {
            backend,
            cuda,
            last_launch: Arc::default(),
        }
    }

    pub(crate) fn new_nondefault(backend: Backend) -> Result<Self, Error> {
        let cuda = match backend.cuda_state() {
            Some(c) => Some(c.ctx.new_stream().map_err(driver("create stream"))?),
            None => None,
        };
        Ok(Self {
            backend,
            cuda,
            last_launch: Arc::default(),
        })
    }

    /// The cudarc stream, on the CUDA backend.
    pub(crate) fn cuda_stream(&self) -> Option<&Arc<CudaStream>> {
        self.cuda.as_ref()
    }

    /// cudarc's stream under this one, for launching your own kernels or
    /// copying your own `CudaSlice`s in order with gpu-core's work on it;
    /// `None` on the CPU backend. See [`Backend::cudarc_context`].
    pub fn cudarc_stream(&self) -> Option<&Arc<CudaStream>> {
        self.cuda.as_ref()
    }

    /// A gpu-core stream over a cudarc stream of `backend`'s context (made
    /// with [`Backend::cudarc_context`], or with cudarc's `CudaContext::new`
    /// on the same device, which is the same primary context): gpu-core's
    /// copies and launches then go on the caller's stream.
    ///
    /// A stream of another context, or any stream on the CPU backend, is
    /// [`Error::BackendMismatch`].
    pub fn from_cudarc(backend: &Backend, stream: Arc<CudaStream>) -> Result<Self, Error> {
        let Some(cuda) = backend.cuda_state() else {
            return Err(Error::BackendMismatch {
                what: "a cudarc stream",
            });
        };
        if stream.context().cu_ctx() != cuda.ctx.cu_ctx() {
            return Err(Error::BackendMismatch {
                what: "a cudarc stream of another context",
            });
        }
        Ok(Self {
            backend: backend.clone(),
            cuda: Some(stream),
            last_launch: Arc::default(),
        })
    }

    /// The raw `CUstream` (the CUDA runtime's `cudaStream_t`), for host-side
    /// CUDA C++ in a static-library module; `None` on the CPU backend. Using it
    /// is unchecked; see [`DeviceView::raw_device_ptr`].
    pub fn raw_stream(&self) -> Option<*mut std::ffi::c_void> {
        self.cuda.as_ref().map(|s| s.cu_stream().cast())
    }

    /// Fills `dst` with zero bytes, on the stream (CUDA) or at once (CPU).
    pub fn memset_zeros<T: GpuRepr>(&self, dst: &mut DeviceViewMut<'_, T>) -> Result<(), Error> {
        match (&mut dst.inner, &self.cuda) {
            // A null view: nothing to fill.
            (ViewMutRef::Null, _) => Ok(()),
            (ViewMutRef::Cuda(view, Some(local)), Some(stream)) => {
                let addr = local.address_on(stream)?;
                ffi::driver::memset_zeros_local(view, addr, stream)
                    .map_err(driver("cuMemsetD8Async"))
            }
            (ViewMutRef::Cuda(view, None), Some(stream)) => {
                stream.memset_zeros(view).map_err(driver("cuMemsetD8Async"))
            }
            (ViewMutRef::Host(slice), None) => {
                for value in slice.iter_mut() {
                    *value = ffi::zeroed();
                }
                Ok(())
            }
            (_, Some(_)) => Err(HOST_ON_CUDA),
            (_, None) => Err(CUDA_ON_HOST),
        }
    }

    /// The backend this stream belongs to.
    pub fn backend(&self) -> &Backend {
        &self.backend
    }

    /// The last kernel launched on this stream.
    pub fn last_launch(&self) -> Option<LaunchSite> {
        *self.last_launch.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A buffer of `len` zeroed elements.
    pub fn alloc_zeros<T: GpuRepr>(&self, len: usize) -> Result<DeviceBuffer<T>, Error> {
        check_repr::<T>()?;
        let bytes = byte_len::<T>(len)?;
        let storage = match &self.cuda {
            // One byte at least: a zero-byte allocation is not portable.
            Some(s) => Storage::Cuda(
                s.alloc_zeros::<u8>(bytes.max(1))
                    .map_err(oom_or("cuMemAlloc", bytes))?,
            ),
            None => Storage::Host(vec![ffi::zeroed::<T>(); len]),
        };
        Ok(DeviceBuffer { storage, len })
    }

    /// A buffer of `len` zeroed elements that only this stream uses
    /// ([`DeviceBuffer::into_local`]).
    pub fn alloc_zeros_local<T: GpuRepr>(&self, len: usize) -> Result<DeviceBuffer<T>, Error> {
        self.alloc_zeros(len)?.into_local(self)
    }

    /// A new buffer holding a copy of `src`.
    pub fn to_device<T: GpuRepr>(&self, src: &[T]) -> Result<DeviceBuffer<T>, Error> {
        let mut buffer = self.alloc_zeros::<T>(src.len())?;
        self.copy_to_device(src, &mut buffer.view_mut())?;
        Ok(buffer)
    }

    /// Copies `src` into `dst`; the lengths must be equal (nothing is copied
    /// otherwise). `src` may be reused as soon as this returns.
    pub fn copy_to_device<T: GpuRepr>(
        &self,
        src: &[T],
        dst: &mut DeviceViewMut<'_, T>,
    ) -> Result<(), Error> {
        length_check("copy to device", src.len(), dst.len())?;
        match (&mut dst.inner, &self.cuda) {
            // A null view has length 0 (checked equal): nothing to copy.
            (ViewMutRef::Null, _) => Ok(()),
            (ViewMutRef::Cuda(view, local), Some(stream)) => {
                check_local(*local, stream)?;
                ffi::driver::copy_htod(src, view, stream).map_err(driver("cuMemcpyHtoDAsync"))
            }
            (ViewMutRef::Host(d), None) => {
                d.copy_from_slice(src);
                Ok(())
            }
            (ViewMutRef::Host(_), Some(_)) => Err(HOST_ON_CUDA),
            (ViewMutRef::Cuda(..), None) => Err(CUDA_ON_HOST),
        }
    }

    /// Copies `src` into `dst` and waits for the copy; the lengths must be
    /// equal (nothing is copied otherwise).
    pub fn copy_to_host<T: GpuRepr>(
        &self,
        src: &DeviceView<'_, T>,
        dst: &mut [T],
    ) -> Result<(), Error> {
        length_check("copy to host", src.len(), dst.len())?;
        match (&src.inner, &self.cuda) {
            // A null view has length 0 (checked equal): nothing to copy.
            (ViewRef::Null, _) => Ok(()),
            (ViewRef::Cuda(view, local), Some(stream)) => {
                check_local(*local, stream)?;
                match ffi::driver::copy_dtoh(view, dst, stream) {
                    Ok(()) => self.synchronize(),
                    Err(ffi::driver::CopyError::Enqueue(e)) => Err(driver("cuMemcpyDtoHAsync")(e)),
                    Err(ffi::driver::CopyError::Wait(e)) => Err(self.async_error(e)),
                }
            }
            (ViewRef::Host(s), None) => {
                dst.copy_from_slice(s);
                Ok(())
            }
            (ViewRef::Host(_), Some(_)) => Err(HOST_ON_CUDA),
            (ViewRef::Cuda(..), None) => Err(CUDA_ON_HOST),
        }
    }

    /// A `Vec` holding a copy of `src`.
    pub fn to_host<T: GpuRepr>(&self, src: &DeviceView<'_, T>) -> Result<Vec<T>, Error> {
        let mut out = vec![ffi::zeroed::<T>(); src.len()];
        self.copy_to_host(src, &mut out)?;
        Ok(out)
    }

    /// Copies `src` into `dst` on the device; the lengths must be equal.
    pub fn copy_device<T: GpuRepr>(
        &self,
        src: &DeviceView<'_, T>,
        dst: &mut DeviceViewMut<'_, T>,
    ) -> Result<(), Error> {
        length_check("copy on device", src.len(), dst.len())?;
        match (&src.inner, &mut dst.inner, &self.cuda) {
            // A null view has length 0 (checked equal): nothing to copy.
            (ViewRef::Null, _, _) | (_, ViewMutRef::Null, _) => Ok(()),
            // Equal lengths of one `T`: equal byte lengths, as cudarc checks.
            (ViewRef::Cuda(s, s_local), ViewMutRef::Cuda(d, d_local), Some(stream)) => {
                check_local(*s_local, stream)?;
                check_local(*d_local, stream)?;
                stream
                    .memcpy_dtod(s, d)
                    .map_err(driver("cuMemcpyDtoDAsync"))
            }
            (ViewRef::Host(s), ViewMutRef::Host(d), None) => {
                d.copy_from_slice(s);
                Ok(())
            }
            (_, _, Some(_)) => Err(HOST_ON_CUDA),
            (_, _, None) => Err(CUDA_ON_HOST),
        }
    }

    /// Launches `kernel` with `args` (one per C parameter, typed by its
    /// declaration). The configuration is checked against the device's and the
    /// kernel's limits first: a bad one is an `Err`, never a driver fault.
    #[inline]
    pub fn launch<'a, K: KernelDecl>(
        &'a self,
        kernel: &Kernel<K>,
        config: LaunchConfig,
        args: <K::Params as LaunchParams>::Args<'a>,
    ) -> Result<(), Error>
    where
        K::Params: LaunchParams,
    {
        config
            .validate(&kernel.limits)
            .map_err(|limit| Error::InvalidLaunch {
                kernel: K::NAME,
                limit,
            })?;
        match (&kernel.imp, &self.cuda) {
            (KernelImpl::Cuda { func, site }, Some(stream)) => {
                self.record_launch(*site);
                let target = CudaLaunch::new(stream, func, config, *site);
                <K::Params as LaunchParams>::launch_cuda(args, target)
            }
            (KernelImpl::Cpu(body), None) => {
                let host = <K::Params as LaunchParams>::to_host(args)?;
                body(&config, host);
                Ok(())
            }
            _ => Err(Error::BackendMismatch {
                what: "a kernel from another backend",
            }),
        }
    }

    /// Launches the kernel looked up by name with `args`, after checking
    /// them against the parameter count and sizes of its image's table
    /// (and the configuration against its limits): a list that does not fit
    /// is an [`Error::LaunchArgs`] naming the parameter and both sizes, and
    /// never reaches the GPU. See [`Args::new`] for what cannot be checked.
    pub fn launch_by_name(
        &self,
        kernel: &KernelByName,
        config: LaunchConfig,
        args: Args<'_>,
    ) -> Result<(), Error> {
        config
            .validate(kernel.limits())
            .map_err(|limit| Error::InvalidLaunch {
                kernel: kernel.name(),
                limit,
            })?;
        let Some(stream) = &self.cuda else {
            return Err(Error::BackendMismatch {
                what: "a kernel from another backend",
            });
        };
        // Before the launch is recorded, so that a rejected list is never
        // named as the source of a later asynchronous error.
        args.check(kernel)?;
        self.record_launch(LaunchSite {
            kernel: kernel.name(),
            module: kernel.module(),
        });
        crate::launch::launch_by_name(stream, kernel, config, args)
    }

    fn record_launch(&self, site: LaunchSite) {
        *self.last_launch.lock().unwrap_or_else(|p| p.into_inner()) = Some(site);
    }

    /// An asynchronous error, naming the last kernel launched on the stream.
    fn async_error(&self, source: cudarc::driver::DriverError) -> Error {
        let last = self.last_launch();
        Error::Async {
            kernel: last.map(|s| s.kernel),
            module: last.map(|s| s.module),
            source: source.into(),
        }
    }

    /// Waits for all work on the stream. An error here came from earlier
    /// asynchronous work: it names the last kernel launched on the stream.
    pub fn synchronize(&self) -> Result<(), Error> {
        let Some(stream) = &self.cuda else {
            return Ok(());
        };
        stream
            .synchronize()
            .and_then(|()| stream.context().check_err())
            .map_err(|source| self.async_error(source))
    }

    /// Records an event at this point of the stream, with timing.
    pub fn record_event(&self) -> Result<Event, Error> {
        match &self.cuda {
            Some(stream) => {
                let event = stream
                    .record_event(Some(sys::CUevent_flags::CU_EVENT_DEFAULT))
                    .map_err(driver("cuEventRecord"))?;
                Ok(Event {
                    inner: EventInner::Cuda(event),
                })
            }
            None => Ok(Event {
                inner: EventInner::Host(Instant::now()),
            }),
        }
    }

    /// Makes later work on this stream wait for `event`.
    pub fn wait(&self, event: &Event) -> Result<(), Error> {
        match (&self.cuda, &event.inner) {
            (Some(stream), EventInner::Cuda(e)) => {
                stream.wait(e).map_err(driver("cuStreamWaitEvent"))
            }
            (None, EventInner::Host(_)) => Ok(()),
            _ => Err(Error::BackendMismatch {
                what: "an event from another backend",
            }),
        }
    }
}

#[derive(Debug)]
enum EventInner {
    Cuda(CudaEvent),
    Host(Instant),
}

/// A point in a stream: to wait for, or to time work between two of them.
#[derive(Debug)]
pub struct Event {
    inner: EventInner,
}

impl Event {
    /// Blocks until the work before the event is done.
    pub fn synchronize(&self) -> Result<(), Error> {
        match &self.inner {
            EventInner::Cuda(e) => e.synchronize().map_err(driver("cuEventSynchronize")),
            EventInner::Host(_) => Ok(()),
        }
    }

    /// Blocks until the work before the event is done, for a `Drop`: an
    /// error is kept by the context and returned by its next call.
    pub(crate) fn synchronize_in_drop(&self) {
        if let EventInner::Cuda(e) = &self.inner {
            e.context().record_err(e.synchronize());
        }
    }

    /// Milliseconds from this event to `end` (both must be done: synchronize
    /// `end` first).
    pub fn elapsed_ms(&self, end: &Event) -> Result<f32, Error> {
        match (&self.inner, &end.inner) {
            (EventInner::Cuda(a), EventInner::Cuda(b)) => {
                a.elapsed_ms(b).map_err(driver("cuEventElapsedTime"))
            }
            (EventInner::Host(a), EventInner::Host(b)) => {
                Ok(b.saturating_duration_since(*a).as_secs_f32() * 1e3)
            }
            _ => Err(Error::BackendMismatch {
                what: "events from two backends",
            }),
        }
    }
}
