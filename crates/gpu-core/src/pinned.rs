//! Page-locked host memory and asynchronous copies: [`PinnedBuffer`]s the
//! driver allocates, [`HostRegistration`]s of memory the caller already has
//! (a memory-mapped file's pages), and copies between them and device memory
//! that return an [`InFlight`] guard instead of waiting.
//!
//! The guard borrows both sides until the copy is waited for, or joined to
//! another stream, so that neither can be touched, freed or aliased while the
//! copy runs; dropping it waits. Underneath, page-locked memory also keeps an
//! event of its last use, which its accessors and its `Drop` wait for, so
//! that a guard released early (joined, or leaked) never leaves a copy
//! reading or writing memory the host has let go of.
//!
//! Registered memory is only copied from: the borrow of the caller's slice
//! ends when the registration is dropped or leaked, and a copy into it that
//! was still running then would write memory its owner had freed (a
//! registration's `Drop` waits, a leaked one cannot). Copies to the host go
//! into a [`PinnedBuffer`], which owns its memory.

use std::marker::PhantomData;
use std::ops::{Range, RangeBounds};

use cudarc::driver::sys;

use crate::device::BackendKind;
use crate::error::{driver, Error};
use crate::ffi;
use crate::ffi::driver::{PinnedHost, Registration};
use crate::memory::check_local;
use crate::memory::{byte_len, check_repr, resolve, ViewMutRef, ViewRef};
use crate::stream::{length_check, CUDA_ON_HOST, HOST_ON_CUDA};
use crate::{DeviceView, DeviceViewMut, Event, GpuRepr, Stream};

#[derive(Debug)]
enum PinnedStorage<T> {
    Cuda(PinnedHost<T>),
    Host(Vec<T>),
}

/// An owned buffer of `T` in page-locked host memory (on the CPU backend, a
/// plain `Vec`), which the device copies to and from without staging, while
/// the host goes on: see [`Stream::copy_to_device_async`].
///
/// Its elements are read and written through [`PinnedBuffer::as_slice`] and
/// [`PinnedBuffer::as_mut_slice`], which first wait for copies still using
/// the memory (one joined to another stream, say). Freed on drop, after the
/// same wait; an error then is kept by the context and returned by its next
/// call, never a panic.
#[derive(Debug)]
pub struct PinnedBuffer<T: GpuRepr> {
    storage: PinnedStorage<T>,
    len: usize,
}

/// An asynchronous copy's error when waited for: it came from the copy or
/// earlier work on its stream.
fn async_copy(source: cudarc::driver::DriverError) -> Error {
    Error::Async {
        kernel: None,
        module: None,
        source: source.into(),
    }
}

impl<T: GpuRepr> PinnedBuffer<T> {
    /// Elements in the buffer.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the buffer has no element.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Which backend's memory this is.
    pub fn kind(&self) -> BackendKind {
        match self.storage {
            PinnedStorage::Cuda(_) => BackendKind::Cuda,
            PinnedStorage::Host(_) => BackendKind::Cpu,
        }
    }

    /// The elements, once no copy uses them.
    pub fn as_slice(&self) -> Result<&[T], Error> {
        match &self.storage {
            PinnedStorage::Cuda(pinned) => pinned.as_slice().map_err(async_copy),
            PinnedStorage::Host(v) => Ok(v),
        }
    }

    /// The elements to write, once no copy uses them.
    pub fn as_mut_slice(&mut self) -> Result<&mut [T], Error> {
        match &mut self.storage {
            PinnedStorage::Cuda(pinned) => pinned.as_mut_slice().map_err(async_copy),
            PinnedStorage::Host(v) => Ok(v),
        }
    }

    /// The whole buffer, as a copy's source.
    pub fn view(&self) -> PinnedView<'_, T> {
        self.slice(..).expect("the full range is always in bounds")
    }

    /// The whole buffer, as a copy's destination.
    pub fn view_mut(&mut self) -> PinnedViewMut<'_, T> {
        self.slice_mut(..)
            .expect("the full range is always in bounds")
    }

    /// Elements `range`, as a copy's source, or [`Error::OutOfBounds`].
    pub fn slice(&self, range: impl RangeBounds<usize>) -> Result<PinnedView<'_, T>, Error> {
        let range = resolve(range, self.len)?;
        let src = match &self.storage {
            PinnedStorage::Cuda(pinned) => Source::Pinned(pinned),
            PinnedStorage::Host(v) => Source::Host(v),
        };
        Ok(PinnedView { src, range })
    }

    /// Elements `range`, as a copy's destination, or [`Error::OutOfBounds`].
    pub fn slice_mut(
        &mut self,
        range: impl RangeBounds<usize>,
    ) -> Result<PinnedViewMut<'_, T>, Error> {
        let range = resolve(range, self.len)?;
        let dst = match &mut self.storage {
            PinnedStorage::Cuda(pinned) => Destination::Pinned(pinned),
            PinnedStorage::Host(v) => Destination::Host(v),
        };
        Ok(PinnedViewMut { dst, range })
    }
}

#[derive(Debug)]
enum RegisteredMemory<'a, T> {
    Cuda(Registration<'a, T>),
    /// The CPU backend: nothing to register.
    Host(&'a [T]),
}

/// The caller's memory (a `Vec`, a memory-mapped file's pages), page-locked
/// for as long as this borrows it, as a source of
/// [`Stream::copy_to_device_async`]; made by [`Stream::register_host`].
///
/// Unregistered on drop, after waiting for copies still reading it; an error
/// then is kept by the context and returned by its next call, never a panic.
/// On the CPU backend nothing is registered.
///
/// Only a source: a copy into borrowed memory could outlive the borrow (a
/// registration leaked with `mem::forget` never waits), so copies to the host
/// go into a [`PinnedBuffer`], which owns its memory.
#[derive(Debug)]
pub struct HostRegistration<'a, T: GpuRepr> {
    memory: RegisteredMemory<'a, T>,
    read_only: bool,
}

impl<'a, T: GpuRepr> HostRegistration<'a, T> {
    /// Elements registered.
    pub fn len(&self) -> usize {
        match &self.memory {
            RegisteredMemory::Cuda(registration) => registration.len(),
            RegisteredMemory::Host(data) => data.len(),
        }
    }

    /// Whether the slice is empty (then nothing is registered).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether the driver registered the memory read-only
    /// (`CU_MEMHOSTREGISTER_READ_ONLY`, where the device supports it; false
    /// on the CPU backend).
    pub fn is_read_only(&self) -> bool {
        self.read_only
    }

    /// The whole slice, as a copy's source.
    pub fn view(&self) -> PinnedView<'_, T> {
        self.slice(..).expect("the full range is always in bounds")
    }

    /// Elements `range`, as a copy's source, or [`Error::OutOfBounds`].
    pub fn slice(&self, range: impl RangeBounds<usize>) -> Result<PinnedView<'_, T>, Error> {
        let range = resolve(range, self.len())?;
        let src = match &self.memory {
            RegisteredMemory::Cuda(registration) => Source::Registered(registration),
            RegisteredMemory::Host(data) => Source::Host(data),
        };
        Ok(PinnedView { src, range })
    }
}

#[derive(Debug)]
enum Source<'a, T> {
    Pinned(&'a PinnedHost<T>),
    Registered(&'a Registration<'a, T>),
    /// The CPU backend's memory, whole (`range` selects).
    Host(&'a [T]),
}

/// Elements of a [`PinnedBuffer`] or a [`HostRegistration`]: the source of
/// [`Stream::copy_to_device_async`].
#[derive(Debug)]
pub struct PinnedView<'a, T: GpuRepr> {
    src: Source<'a, T>,
    range: Range<usize>,
}

impl<T: GpuRepr> PinnedView<'_, T> {
    /// Elements in the view.
    pub fn len(&self) -> usize {
        self.range.len()
    }

    /// Whether the view has no element.
    pub fn is_empty(&self) -> bool {
        self.range.is_empty()
    }
}

#[derive(Debug)]
enum Destination<'a, T> {
    Pinned(&'a mut PinnedHost<T>),
    /// The CPU backend's memory, whole (`range` selects).
    Host(&'a mut [T]),
}

/// Elements of a [`PinnedBuffer`]: the destination of
/// [`Stream::copy_to_host_async`].
#[derive(Debug)]
pub struct PinnedViewMut<'a, T: GpuRepr> {
    dst: Destination<'a, T>,
    range: Range<usize>,
}

impl<T: GpuRepr> PinnedViewMut<'_, T> {
    /// Elements in the view.
    pub fn len(&self) -> usize {
        self.range.len()
    }

    /// Whether the view has no element.
    pub fn is_empty(&self) -> bool {
        self.range.is_empty()
    }
}

impl<'a, T: GpuRepr> From<&'a PinnedBuffer<T>> for PinnedView<'a, T> {
    fn from(buffer: &'a PinnedBuffer<T>) -> Self {
        buffer.view()
    }
}

impl<'a, 'r: 'a, T: GpuRepr> From<&'a HostRegistration<'r, T>> for PinnedView<'a, T> {
    fn from(registration: &'a HostRegistration<'r, T>) -> Self {
        registration.view()
    }
}

impl<'a, T: GpuRepr> From<&'a mut PinnedBuffer<T>> for PinnedViewMut<'a, T> {
    fn from(buffer: &'a mut PinnedBuffer<T>) -> Self {
        buffer.view_mut()
    }
}

/// An asynchronous copy in flight, borrowing its source and destination
/// until it is waited for ([`InFlight::wait`]) or joined to another stream
/// ([`InFlight::join`]). Dropped, it waits for the copy (an error then is
/// kept by the context and returned by its next call).
#[derive(Debug)]
#[must_use = "dropping the guard waits for the copy at once; call `wait` to see its error, or `join` to go on without waiting"]
pub struct InFlight<'a> {
    /// Recorded after the copy; `None` when it is done (the CPU backend,
    /// nothing to copy) or handed on.
    event: Option<Event>,
    _buffers: PhantomData<&'a mut ()>,
}

impl InFlight<'_> {
    fn done() -> Self {
        Self {
            event: None,
            _buffers: PhantomData,
        }
    }

    /// Blocks until the copy is done. An error came from the copy or earlier
    /// work on its stream.
    pub fn wait(mut self) -> Result<(), Error> {
        match self.event.take() {
            Some(event) => event.synchronize(),
            None => Ok(()),
        }
    }

    /// Makes later work on `stream` wait for the copy, and lets go of the
    /// buffers without blocking the host: a [`PinnedBuffer`] waits for the
    /// copy when next read, written or dropped, a [`HostRegistration`] when
    /// dropped, and device memory is ordered by the streams that use it. An
    /// error (an event from another backend) waits for the copy first.
    pub fn join(mut self, stream: &Stream) -> Result<(), Error> {
        let Some(event) = self.event.take() else {
            return Ok(());
        };
        stream
            .wait(&event)
            .inspect_err(|_| event.synchronize_in_drop())
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        if let Some(event) = self.event.take() {
            event.synchronize_in_drop();
        }
    }
}

impl Stream {
    /// A buffer of `len` zeroed elements in page-locked host memory (a
    /// `Vec` on the CPU backend), for [`Stream::copy_to_device_async`] and
    /// [`Stream::copy_to_host_async`] on this backend's streams.
    pub fn alloc_pinned<T: GpuRepr>(&self, len: usize) -> Result<PinnedBuffer<T>, Error> {
        check_repr::<T>()?;
        let bytes = byte_len::<T>(len)?;
        let storage = match self.cuda_stream() {
            Some(stream) => {
                PinnedStorage::Cuda(PinnedHost::alloc(stream.context(), len).map_err(|source| {
                    Error::PinnedAlloc {
                        bytes,
                        source: source.into(),
                    }
                })?)
            }
            None => PinnedStorage::Host(vec![ffi::zeroed::<T>(); len]),
        };
        Ok(PinnedBuffer { storage, len })
    }

    /// Page-locks `data` (`cuMemHostRegister`, read-only where the device
    /// supports it, so that read-only pages such as a file mapped for reading
    /// can be registered) for as long as the registration borrows it, as a
    /// source of [`Stream::copy_to_device_async`]. On the CPU backend, and
    /// for an empty slice, nothing is registered.
    ///
    /// What the driver refuses is [`Error::HostRegister`], with nothing
    /// registered: memory already registered or allocated page-locked,
    /// pages it cannot lock, read-only pages on a device without read-only
    /// registration. Copy from such memory with [`Stream::copy_to_device`].
    pub fn register_host<'a, T: GpuRepr>(
        &self,
        data: &'a [T],
    ) -> Result<HostRegistration<'a, T>, Error> {
        check_repr::<T>()?;
        let Some(stream) = self.cuda_stream() else {
            return Ok(HostRegistration {
                memory: RegisteredMemory::Host(data),
                read_only: false,
            });
        };
        let ctx = stream.context();
        let bytes = std::mem::size_of_val(data);
        let refused = |read_only: bool, source: cudarc::driver::DriverError| Error::HostRegister {
            bytes,
            read_only,
            source: source.into(),
        };
        let supported = |attribute| {
            ctx.attribute(attribute)
                .map(|value| value != 0)
                .map_err(driver("cuDeviceGetAttribute"))
        };
        use sys::CUdevice_attribute::*;
        // An empty slice registers nothing, so the device's support is moot.
        let read_only = if data.is_empty() {
            false
        } else if !supported(CU_DEVICE_ATTRIBUTE_HOST_REGISTER_SUPPORTED)? {
            let unsupported = sys::CUresult::CUDA_ERROR_NOT_SUPPORTED;
            return Err(refused(false, cudarc::driver::DriverError(unsupported)));
        } else {
            supported(CU_DEVICE_ATTRIBUTE_READ_ONLY_HOST_REGISTER_SUPPORTED)?
        };
        let registration =
            Registration::new(ctx, data, read_only).map_err(|e| refused(read_only, e))?;
        Ok(HostRegistration {
            memory: RegisteredMemory::Cuda(registration),
            read_only,
        })
    }

    /// Enqueues a copy of `src` (page-locked host memory) into `dst` and
    /// returns at once; the lengths must be equal (nothing is enqueued
    /// otherwise). Both stay borrowed until the returned guard is waited for,
    /// joined to another stream, or dropped (which waits). On the CPU backend
    /// the copy is done when this returns.
    ///
    /// `src` is a [`PinnedBuffer`] or [`HostRegistration`] (`&buffer`), or
    /// part of one (`buffer.slice(2..6)?`); `dst` a `&mut DeviceBuffer` or a
    /// [`DeviceViewMut`].
    pub fn copy_to_device_async<'a, T: GpuRepr>(
        &self,
        src: impl Into<PinnedView<'a, T>>,
        dst: impl Into<DeviceViewMut<'a, T>>,
    ) -> Result<InFlight<'a>, Error> {
        let (src, mut dst) = (src.into(), dst.into());
        length_check("copy to device", src.len(), dst.len())?;
        let range = src.range.clone();
        let enqueued = match (&src.src, &mut dst.inner, self.cuda_stream()) {
            // A null view has length 0 (checked equal): nothing to copy.
            (_, ViewMutRef::Null, _) => return Ok(InFlight::done()),
            (Source::Pinned(pinned), ViewMutRef::Cuda(view, local), Some(stream)) => {
                check_local(*local, stream)?;
                pinned.copy_to_device(range, view, stream)
            }
            (Source::Registered(registration), ViewMutRef::Cuda(view, local), Some(stream)) => {
                check_local(*local, stream)?;
                registration.copy_to_device(range, view, stream)
            }
            (Source::Host(host), ViewMutRef::Host(d), None) => {
                d.copy_from_slice(&host[range]);
                return Ok(InFlight::done());
            }
            (_, _, Some(_)) => return Err(HOST_ON_CUDA),
            (_, _, None) => return Err(CUDA_ON_HOST),
        };
        enqueued.map_err(driver("cuMemcpyHtoDAsync"))?;
        self.in_flight()
    }

    /// Enqueues a copy of `src` into `dst` (a [`PinnedBuffer`], whole or in
    /// part) and returns at once; as [`Stream::copy_to_device_async`], the
    /// other way. `dst` is written once the guard is done.
    pub fn copy_to_host_async<'a, T: GpuRepr>(
        &self,
        src: impl Into<DeviceView<'a, T>>,
        dst: impl Into<PinnedViewMut<'a, T>>,
    ) -> Result<InFlight<'a>, Error> {
        let (src, mut dst) = (src.into(), dst.into());
        length_check("copy to host", src.len(), dst.len())?;
        let range = dst.range.clone();
        let enqueued = match (&src.inner, &mut dst.dst, self.cuda_stream()) {
            // A null view has length 0 (checked equal): nothing to copy.
            (ViewRef::Null, _, _) => return Ok(InFlight::done()),
            (ViewRef::Cuda(view, local), Destination::Pinned(pinned), Some(stream)) => {
                check_local(*local, stream)?;
                pinned.copy_from_device(range, view, stream)
            }
            (ViewRef::Host(host), Destination::Host(d), None) => {
                d[range].copy_from_slice(host);
                return Ok(InFlight::done());
            }
            (_, _, Some(_)) => return Err(HOST_ON_CUDA),
            (_, _, None) => return Err(CUDA_ON_HOST),
        };
        enqueued.map_err(driver("cuMemcpyDtoHAsync"))?;
        self.in_flight()
    }

    /// The guard of a copy just enqueued. Should the event not be recorded,
    /// the stream is waited for, so that no copy runs unguarded.
    fn in_flight<'a>(&self) -> Result<InFlight<'a>, Error> {
        let event = self.record_event().inspect_err(|_| {
            // The error worth returning is the event's.
            let _ = self.synchronize();
        })?;
        Ok(InFlight {
            event: Some(event),
            _buffers: PhantomData,
        })
    }
}
