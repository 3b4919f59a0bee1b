//! Stream-local buffers (`DeviceBuffer::into_local`): the storage that
//! keeps the stream it belongs to, and the start address a view of it
//! carries, checked against the stream of every use.

use std::sync::Arc;

use cudarc::driver::{CudaSlice, CudaStream, DevicePtrMut as _};

use super::{DeviceBuffer, Storage};
use crate::error::Error;
use crate::GpuRepr;

/// Device memory that only one stream uses: its launches take the address
/// as it is, with none of cudarc's per-use events (a wait and a record per
/// pointer argument), since the stream's own order already orders every use.
#[derive(Debug)]
pub(crate) struct LocalSlice {
    pub(super) slice: CudaSlice<u8>,
    stream: Arc<CudaStream>,
    addr: u64,
}

impl Drop for LocalSlice {
    fn drop(&mut self) {
        // One tracked use on the buffer's stream, last: cudarc's free (on
        // the stream that allocated it, which may be another) waits for
        // everything the buffer's stream enqueued before the drop.
        let (_, record) = self.slice.device_ptr_mut(&self.stream);
        drop(record);
    }
}

/// The start address of a view of a stream-local buffer, and which stream
/// the buffer belongs to (the `CudaStream`'s address, compared, never read).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Local {
    addr: u64,
    stream: usize,
}

impl Local {
    pub(super) fn of(slice: &LocalSlice) -> Self {
        Self {
            addr: slice.addr,
            stream: Arc::as_ptr(&slice.stream) as usize,
        }
    }

    /// `bytes` further on.
    pub(super) fn offset(self, bytes: usize) -> Self {
        Self {
            addr: self.addr + bytes as u64,
            ..self
        }
    }

    /// The address, or [`Error::ForeignStream`] unless `stream` is the
    /// buffer's own.
    pub(crate) fn address_on(self, stream: &Arc<CudaStream>) -> Result<u64, Error> {
        if Arc::as_ptr(stream) as usize == self.stream {
            Ok(self.addr)
        } else {
            Err(Error::ForeignStream)
        }
    }
}

/// `Ok` unless `local` names a stream other than `stream`.
pub(crate) fn check_local(local: Option<Local>, stream: &Arc<CudaStream>) -> Result<(), Error> {
    local.map_or(Ok(()), |l| l.address_on(stream).map(drop))
}

impl<T: GpuRepr> DeviceBuffer<T> {
    /// This buffer, local to `cuda` ([`crate::Stream`]'s `into_local`);
    /// `None`: the CPU backend's stream.
    pub(crate) fn into_local_on(self, cuda: Option<&Arc<CudaStream>>) -> Result<Self, Error> {
        let Self { storage, len } = self;
        let storage = match (storage, cuda) {
            (Storage::Host(v), None) => Storage::Host(v),
            (Storage::Cuda(mut slice), Some(cuda)) => {
                if !Arc::ptr_eq(slice.stream().context(), cuda.context()) {
                    return Err(Error::BackendMismatch {
                        what: "a buffer from another device's context",
                    });
                }
                // A tracked use on `cuda`: it waits for the other streams'
                // uses so far, and records this one for the free.
                let (addr, record) = slice.device_ptr_mut(cuda);
                drop(record);
                Storage::Local(LocalSlice {
                    slice,
                    stream: cuda.clone(),
                    addr,
                })
            }
            (Storage::Local(l), Some(cuda)) => {
                Local::of(&l).address_on(cuda)?;
                Storage::Local(l)
            }
            (Storage::Host(_), Some(_)) => {
                return Err(Error::BackendMismatch {
                    what: "host memory used on a cuda stream",
                })
            }
            (_, None) => {
                return Err(Error::BackendMismatch {
                    what: "device memory used on the cpu backend",
                })
            }
        };
        Ok(Self { storage, len })
    }
}
