//! Owned device buffers and borrowed views by range, each backed by CUDA
//! device memory or, on the CPU backend, host memory.
//!
//! One enum per type (`Cuda` / `Host` storage) rather than a generic backend
//! parameter: apps write their buffer and launch code once and pick the backend
//! at run time. Device memory is held as bytes (`CudaSlice<u8>`) so that any
//! [`GpuRepr`] type can live in it; elements are read back only as `GpuRepr`
//! types, which are valid for every bit pattern.

use std::any::TypeId;
use std::marker::PhantomData;
use std::ops::{Bound, Range, RangeBounds};

use cudarc::driver::{CudaSlice, CudaView, CudaViewMut};

use crate::device::BackendKind;
use crate::error::Error;
use crate::GpuRepr;

/// `len * size_of::<T>()`, or [`Error::SizeOverflow`].
pub(crate) fn byte_len<T>(len: usize) -> Result<usize, Error> {
    let elem_size = std::mem::size_of::<T>();
    len.checked_mul(elem_size)
        .filter(|&b| b <= isize::MAX as usize)
        .ok_or(Error::SizeOverflow { len, elem_size })
}

/// Checks that `T`'s Rust layout is what its `GpuRepr` impl claims (a
/// hand-written impl could lie); element sizes are used for byte arithmetic.
pub(crate) fn check_repr<T: GpuRepr>() -> Result<(), Error> {
    if std::mem::size_of::<T>() != T::SIZE {
        return Err(Error::ReprSize {
            type_name: T::C_NAME,
            rust: std::mem::size_of::<T>(),
            c: T::SIZE,
        });
    }
    Ok(())
}

pub(crate) fn resolve(range: impl RangeBounds<usize>, len: usize) -> Result<Range<usize>, Error> {
    let start = match range.start_bound() {
        Bound::Included(&s) => s,
        Bound::Excluded(&s) => s.saturating_add(1),
        Bound::Unbounded => 0,
    };
    let end = match range.end_bound() {
        Bound::Included(&e) => e.saturating_add(1),
        Bound::Excluded(&e) => e,
        Bound::Unbounded => len,
    };
    if start > end || end > len {
        return Err(Error::OutOfBounds { start, end, len });
    }
    Ok(start..end)
}

fn bytes_of<T>(range: &Range<usize>) -> Range<usize> {
    // Cannot overflow: the range is within a buffer whose byte size fit.
    let size = std::mem::size_of::<T>();
    range.start * size..range.end * size
}

mod local;
pub(crate) use local::{check_local, Local, LocalSlice};

#[derive(Debug)]
pub(crate) enum Storage<T> {
    Cuda(CudaSlice<u8>),
    /// A stream-local buffer ([`DeviceBuffer::into_local`]).
    Local(LocalSlice),
    Host(Vec<T>),
}

/// An owned buffer of `T` on the device (or in host memory on the CPU
/// backend). Freed on drop; a free that fails is kept by the context and
/// returned by its next call, never a panic.
#[derive(Debug)]
pub struct DeviceBuffer<T: GpuRepr> {
    pub(crate) storage: Storage<T>,
    /// Elements in the buffer (the CUDA storage holds at least one byte).
    pub(crate) len: usize,
}

impl<T: GpuRepr> DeviceBuffer<T> {
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
            Storage::Cuda(_) | Storage::Local(_) => BackendKind::Cuda,
            Storage::Host(_) => BackendKind::Cpu,
        }
    }

    /// Whether the buffer is local to one stream ([`Self::into_local`]);
    /// `false` on the CPU backend.
    pub fn is_local(&self) -> bool {
        matches!(self.storage, Storage::Local(_))
    }

    /// A shared view of the whole buffer.
    pub fn view(&self) -> DeviceView<'_, T> {
        self.slice(..).expect("the full range is always in bounds")
    }

    /// A mutable view of the whole buffer.
    pub fn view_mut(&mut self) -> DeviceViewMut<'_, T> {
        self.slice_mut(..)
            .expect("the full range is always in bounds")
    }

    /// A shared view of `range`, or [`Error::OutOfBounds`].
    pub fn slice(&self, range: impl RangeBounds<usize>) -> Result<DeviceView<'_, T>, Error> {
        let range = resolve(range, self.len)?;
        let len = range.len();
        let oob = Error::OutOfBounds {
            start: range.start,
            end: range.end,
            len: self.len,
        };
        let bytes = bytes_of::<T>(&range);
        let inner = match &self.storage {
            Storage::Cuda(s) => ViewRef::Cuda(s.try_slice(bytes).ok_or(oob)?, None),
            Storage::Local(l) => ViewRef::Cuda(
                l.slice.try_slice(bytes.clone()).ok_or(oob)?,
                Some(Local::of(l).offset(bytes.start)),
            ),
            Storage::Host(v) => ViewRef::Host(&v[range]),
        };
        Ok(DeviceView {
            inner,
            len,
            _t: PhantomData,
        })
    }

    /// Two mutable views, of `..mid` and `mid..`, that one launch can take
    /// together (the borrow checker holds the buffer for both), or
    /// [`Error::OutOfBounds`] when `mid` is past the end.
    pub fn split_at_mut(
        &mut self,
        mid: usize,
    ) -> Result<(DeviceViewMut<'_, T>, DeviceViewMut<'_, T>), Error> {
        let len = self.len;
        if mid > len {
            return Err(Error::OutOfBounds {
                start: mid,
                end: len,
                len,
            });
        }
        // In bytes, within the storage: mid * size <= len * size.
        let at = mid * std::mem::size_of::<T>();
        let oob = Error::OutOfBounds {
            start: mid,
            end: len,
            len,
        };
        let (head, tail) = match &mut self.storage {
            Storage::Cuda(s) => {
                let (a, b) = s.try_split_at_mut(at).ok_or(oob)?;
                (ViewMutRef::Cuda(a, None), ViewMutRef::Cuda(b, None))
            }
            Storage::Local(l) => {
                let local = Local::of(l);
                let (a, b) = l.slice.try_split_at_mut(at).ok_or(oob)?;
                (
                    ViewMutRef::Cuda(a, Some(local)),
                    ViewMutRef::Cuda(b, Some(local.offset(at))),
                )
            }
            Storage::Host(v) => {
                let (a, b) = v.split_at_mut(mid);
                (ViewMutRef::Host(a), ViewMutRef::Host(b))
            }
        };
        Ok((
            DeviceViewMut {
                inner: head,
                len: mid,
                _t: PhantomData,
            },
            DeviceViewMut {
                inner: tail,
                len: len - mid,
                _t: PhantomData,
            },
        ))
    }

    /// A mutable view of `range`, or [`Error::OutOfBounds`].
    pub fn slice_mut(
        &mut self,
        range: impl RangeBounds<usize>,
    ) -> Result<DeviceViewMut<'_, T>, Error> {
        let full = self.len;
        let range = resolve(range, full)?;
        let len = range.len();
        let oob = Error::OutOfBounds {
            start: range.start,
            end: range.end,
            len: full,
        };
        let bytes = bytes_of::<T>(&range);
        let inner = match &mut self.storage {
            Storage::Cuda(s) => ViewMutRef::Cuda(s.try_slice_mut(bytes).ok_or(oob)?, None),
            Storage::Local(l) => {
                let local = Local::of(l).offset(bytes.start);
                ViewMutRef::Cuda(l.slice.try_slice_mut(bytes).ok_or(oob)?, Some(local))
            }
            Storage::Host(v) => ViewMutRef::Host(&mut v[range]),
        };
        Ok(DeviceViewMut {
            inner,
            len,
            _t: PhantomData,
        })
    }
}

#[derive(Debug)]
pub(crate) enum ViewRef<'a, T> {
    /// Device memory; with where it starts when its buffer is stream-local.
    Cuda(CudaView<'a, u8>, Option<Local>),
    Host(&'a [T]),
    /// [`DeviceView::null`]: no memory, on either backend.
    Null,
}

#[derive(Debug)]
pub(crate) enum ViewMutRef<'a, T> {
    /// As [`ViewRef::Cuda`].
    Cuda(CudaViewMut<'a, u8>, Option<Local>),
    Host(&'a mut [T]),
    /// [`DeviceViewMut::null`]: no memory, on either backend.
    Null,
}

/// A shared view of part of a [`DeviceBuffer`]: what a kernel's `const T *`
/// parameter takes.
#[derive(Debug)]
pub struct DeviceView<'a, T: GpuRepr> {
    pub(crate) inner: ViewRef<'a, T>,
    len: usize,
    _t: PhantomData<&'a [T]>,
}

impl<'a, T: GpuRepr> DeviceView<'a, T> {
    /// `nullptr` for a kernel's `const T *` parameter that the kernel tests
    /// before it reads (candle's `info == nullptr`: contiguous), so a typed
    /// launch passes it as the C code expects. It holds no memory and has
    /// length 0: a copy to or from it copies nothing, and a CPU kernel body
    /// gets an empty slice for it.
    pub fn null() -> Self {
        Self {
            inner: ViewRef::Null,
            len: 0,
            _t: PhantomData,
        }
    }

    /// Whether this is [`DeviceView::null`].
    pub fn is_null(&self) -> bool {
        matches!(self.inner, ViewRef::Null)
    }

    /// Elements in the view.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the view has no element.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// A sub-view of `range` (relative to this view), or [`Error::OutOfBounds`].
    pub fn slice(&self, range: impl RangeBounds<usize>) -> Result<DeviceView<'a, T>, Error> {
        let range = resolve(range, self.len)?;
        let len = range.len();
        let bytes = bytes_of::<T>(&range);
        let inner = match &self.inner {
            ViewRef::Cuda(v, local) => ViewRef::Cuda(
                v.try_slice(bytes.clone()).ok_or(Error::OutOfBounds {
                    start: range.start,
                    end: range.end,
                    len: self.len,
                })?,
                local.map(|l| l.offset(bytes.start)),
            ),
            ViewRef::Host(s) => ViewRef::Host(&s[range]),
            ViewRef::Null => ViewRef::Null,
        };
        Ok(DeviceView {
            inner,
            len,
            _t: PhantomData,
        })
    }

    /// The host slice, on the CPU backend (empty for a null view, on
    /// either).
    pub fn as_host(&self) -> Option<&'a [T]> {
        match self.inner {
            ViewRef::Host(s) => Some(s),
            ViewRef::Null => Some(&[]),
            ViewRef::Cuda(..) => None,
        }
    }
}

impl<T: GpuRepr> Clone for DeviceView<'_, T> {
    fn clone(&self) -> Self {
        self.slice(..).expect("the full range is always in bounds")
    }
}

impl<'a, T: GpuRepr> From<&'a DeviceBuffer<T>> for DeviceView<'a, T> {
    fn from(buffer: &'a DeviceBuffer<T>) -> Self {
        buffer.view()
    }
}

impl<'a, T: GpuRepr> From<&'a mut DeviceBuffer<T>> for DeviceViewMut<'a, T> {
    fn from(buffer: &'a mut DeviceBuffer<T>) -> Self {
        buffer.view_mut()
    }
}

/// A mutable view of part of a [`DeviceBuffer`]: what a kernel's `T *`
/// parameter takes. Borrowing the buffer mutably, it cannot alias another view.
#[derive(Debug)]
pub struct DeviceViewMut<'a, T: GpuRepr> {
    pub(crate) inner: ViewMutRef<'a, T>,
    len: usize,
    _t: PhantomData<&'a mut [T]>,
}

impl<T: GpuRepr> DeviceViewMut<'_, T> {
    /// `nullptr` for a kernel's `T *` parameter that the kernel tests before
    /// it writes (candle's `inp == nullptr`: in place); as
    /// [`DeviceView::null`], length 0, and an empty slice on the CPU.
    pub fn null() -> Self {
        Self {
            inner: ViewMutRef::Null,
            len: 0,
            _t: PhantomData,
        }
    }

    /// Whether this is [`DeviceViewMut::null`].
    pub fn is_null(&self) -> bool {
        matches!(self.inner, ViewMutRef::Null)
    }

    /// Elements in the view.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the view has no element.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// A shared view of the same elements.
    pub fn as_view(&self) -> DeviceView<'_, T> {
        let inner = match &self.inner {
            ViewMutRef::Cuda(v, local) => ViewRef::Cuda(v.slice(..), *local),
            ViewMutRef::Host(s) => ViewRef::Host(s),
            ViewMutRef::Null => ViewRef::Null,
        };
        DeviceView {
            inner,
            len: self.len,
            _t: PhantomData,
        }
    }

    /// A mutable sub-view of `range` (relative to this view), or
    /// [`Error::OutOfBounds`].
    pub fn slice_mut(
        &mut self,
        range: impl RangeBounds<usize>,
    ) -> Result<DeviceViewMut<'_, T>, Error> {
        let full = self.len;
        let range = resolve(range, full)?;
        let len = range.len();
        let oob = Error::OutOfBounds {
            start: range.start,
            end: range.end,
            len: full,
        };
        let bytes = bytes_of::<T>(&range);
        let inner = match &mut self.inner {
            ViewMutRef::Cuda(v, local) => ViewMutRef::Cuda(
                v.try_slice_mut(bytes.clone()).ok_or(oob)?,
                local.map(|l| l.offset(bytes.start)),
            ),
            ViewMutRef::Host(s) => ViewMutRef::Host(&mut s[range]),
            ViewMutRef::Null => ViewMutRef::Null,
        };
        Ok(DeviceViewMut {
            inner,
            len,
            _t: PhantomData,
        })
    }

    /// The same view for a shorter time, so that it can be passed to a launch
    /// and used again afterwards.
    pub fn reborrow(&mut self) -> DeviceViewMut<'_, T> {
        self.slice_mut(..)
            .expect("the full range is always in bounds")
    }

    /// The host slice, on the CPU backend (empty for a null view, on
    /// either).
    pub fn as_host_mut(&mut self) -> Option<&mut [T]> {
        match &mut self.inner {
            ViewMutRef::Host(s) => Some(s),
            ViewMutRef::Null => Some(&mut []),
            ViewMutRef::Cuda(..) => None,
        }
    }
}

/// The host side of an untyped pointer on the CPU backend: where the
/// elements it was made from are, how many, and their type (a CPU kernel
/// body reads them back only as that type).
#[derive(Debug, Clone, Copy)]
pub(crate) struct HostParts {
    pub(crate) ptr: *mut (),
    pub(crate) len: usize,
    pub(crate) ty: TypeId,
}

impl HostParts {
    fn of<T: GpuRepr>(ptr: *mut T, len: usize) -> Self {
        Self {
            ptr: ptr.cast(),
            len,
            ty: TypeId::of::<T>(),
        }
    }
}

#[derive(Debug)]
pub(crate) enum UntypedRef<'a> {
    Cuda(CudaView<'a, u8>, Option<Local>),
    /// Elements borrowed shared for `'a`.
    Host(HostParts, PhantomData<&'a ()>),
    Null,
}

#[derive(Debug)]
pub(crate) enum UntypedMutRef<'a> {
    Cuda(CudaViewMut<'a, u8>, Option<Local>),
    /// Elements borrowed mutably for `'a`.
    Host(HostParts, PhantomData<&'a mut ()>),
    Null,
}

/// What a kernel's `const void *` parameter takes: any [`DeviceView`] (or
/// buffer) converted into it, whatever its element type, or
/// [`DevicePtr::null`]. The kernel reads the bytes as its source says (a
/// GGUF-style block of scales and quants, say); a CPU kernel body gets the
/// elements back as their own type (`HostPtr::get`).
#[derive(Debug)]
pub struct DevicePtr<'a> {
    pub(crate) inner: UntypedRef<'a>,
    bytes: usize,
}

impl DevicePtr<'_> {
    /// `nullptr`, for a parameter the kernel tests before it reads.
    pub fn null() -> Self {
        Self {
            inner: UntypedRef::Null,
            bytes: 0,
        }
    }

    /// Whether this is [`DevicePtr::null`].
    pub fn is_null(&self) -> bool {
        matches!(self.inner, UntypedRef::Null)
    }

    /// The bytes of the view it was made from.
    pub fn byte_len(&self) -> usize {
        self.bytes
    }
}

impl<'a, T: GpuRepr> From<DeviceView<'a, T>> for DevicePtr<'a> {
    fn from(view: DeviceView<'a, T>) -> Self {
        let bytes = view.len * std::mem::size_of::<T>();
        let inner = match view.inner {
            ViewRef::Cuda(v, local) => UntypedRef::Cuda(v, local),
            // Never written through: `ptr` is `*mut` only to share the type.
            ViewRef::Host(s) => {
                UntypedRef::Host(HostParts::of(s.as_ptr().cast_mut(), s.len()), PhantomData)
            }
            ViewRef::Null => UntypedRef::Null,
        };
        Self { inner, bytes }
    }
}

impl<'a, T: GpuRepr> From<&'a DeviceBuffer<T>> for DevicePtr<'a> {
    fn from(buffer: &'a DeviceBuffer<T>) -> Self {
        buffer.view().into()
    }
}

/// What a kernel's `void *` parameter takes: any [`DeviceViewMut`] (or
/// buffer, borrowed mutably) converted into it, or [`DevicePtrMut::null`];
/// as [`DevicePtr`] for memory the kernel may write.
#[derive(Debug)]
pub struct DevicePtrMut<'a> {
    pub(crate) inner: UntypedMutRef<'a>,
    bytes: usize,
}

impl DevicePtrMut<'_> {
    /// `nullptr`, for a parameter the kernel tests before it writes.
    pub fn null() -> Self {
        Self {
            inner: UntypedMutRef::Null,
            bytes: 0,
        }
    }

    /// Whether this is [`DevicePtrMut::null`].
    pub fn is_null(&self) -> bool {
        matches!(self.inner, UntypedMutRef::Null)
    }

    /// The bytes of the view it was made from.
    pub fn byte_len(&self) -> usize {
        self.bytes
    }
}

impl<'a, T: GpuRepr> From<DeviceViewMut<'a, T>> for DevicePtrMut<'a> {
    fn from(view: DeviceViewMut<'a, T>) -> Self {
        let bytes = view.len * std::mem::size_of::<T>();
        let inner = match view.inner {
            ViewMutRef::Cuda(v, local) => UntypedMutRef::Cuda(v, local),
            ViewMutRef::Host(s) => {
                UntypedMutRef::Host(HostParts::of(s.as_mut_ptr(), s.len()), PhantomData)
            }
            ViewMutRef::Null => UntypedMutRef::Null,
        };
        Self { inner, bytes }
    }
}

impl<'a, T: GpuRepr> From<&'a mut DeviceBuffer<T>> for DevicePtrMut<'a> {
    fn from(buffer: &'a mut DeviceBuffer<T>) -> Self {
        buffer.view_mut().into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_len_overflow_is_an_error() {
        assert!(matches!(
            byte_len::<u64>(usize::MAX / 4),
            Err(Error::SizeOverflow { elem_size: 8, .. })
        ));
        assert_eq!(byte_len::<u64>(3).unwrap(), 24);
        assert_eq!(byte_len::<u64>(0).unwrap(), 0);
    }

    #[test]
    fn ranges_are_bounds_checked() {
        assert_eq!(resolve(1..3, 4).unwrap(), 1..3);
        assert_eq!(resolve(.., 0).unwrap(), 0..0);
        assert_eq!(resolve(..=3, 4).unwrap(), 0..4);
        assert!(matches!(
            resolve(2..5, 4),
            Err(Error::OutOfBounds {
                start: 2,
                end: 5,
                len: 4
            })
        ));
        #[allow(clippy::reversed_empty_ranges)]
        let reversed = resolve(3..2, 4);
        assert!(matches!(reversed, Err(Error::OutOfBounds { .. })));
    }
}
