//! Two small device arrays read back with one wait: copies into page-locked
//! buffers kept for the run, the stream waited for after the second (the
//! first, on the same stream, is done by then). A run's control and
//! energies, and a maintenance pass's statistics and neighbours, each took
//! two waits (two pageable copies) before.

use gpu_core::{DeviceView, GpuRepr, PinnedBuffer, Stream};

use crate::error::AnnealError;

/// Page-locked room for up to `a` and `b` elements (`ReadBack::new`).
#[derive(Debug)]
pub(super) struct ReadBack<A: GpuRepr, B: GpuRepr> {
    a: PinnedBuffer<A>,
    b: PinnedBuffer<B>,
}

impl<A: GpuRepr, B: GpuRepr> ReadBack<A, B> {
    /// Room for `a` and `b` elements, page-locked on `stream`'s device.
    pub(super) fn new(stream: &Stream, a: usize, b: usize) -> Result<Self, AnnealError> {
        Ok(Self {
            a: stream.alloc_pinned(a)?,
            b: stream.alloc_pinned(b)?,
        })
    }

    /// Enqueues the copies of `a` and `b` (no longer than this was made
    /// for: an error otherwise, nothing copied) on `stream` and returns
    /// without waiting; [`ReadBack::take`] then waits for them and returns
    /// their first `a.len()` and `b.len()` elements.
    pub(super) fn start(
        &mut self,
        stream: &Stream,
        a: DeviceView<'_, A>,
        b: DeviceView<'_, B>,
    ) -> Result<(), AnnealError> {
        let (na, nb) = (a.len(), b.len());
        let (to_a, to_b) = (self.a.slice_mut(..na)?, self.b.slice_mut(..nb)?);
        // Joined to their own stream: the page-locked buffers wait for the
        // copies when next read.
        stream.copy_to_host_async(a, to_a)?.join(stream)?;
        stream.copy_to_host_async(b, to_b)?.join(stream)?;
        Ok(())
    }

    /// The first `na` and `nb` elements [`ReadBack::start`] copied, once
    /// its copies are done: `b`, copied second on the same stream, is read
    /// first, so that one wait covers both.
    pub(super) fn take(&self, na: usize, nb: usize) -> Result<(Vec<A>, Vec<B>), AnnealError> {
        let b = self.b.as_slice()?[..nb].to_vec();
        Ok((self.a.as_slice()?[..na].to_vec(), b))
    }

    /// Copies `a` and `b` (no longer than this was made for: an error
    /// otherwise, nothing copied) on `stream`, waits once, and returns them.
    pub(super) fn read(
        &mut self,
        stream: &Stream,
        a: DeviceView<'_, A>,
        b: DeviceView<'_, B>,
    ) -> Result<(Vec<A>, Vec<B>), AnnealError> {
        let (na, nb) = (a.len(), b.len());
        self.start(stream, a, b)?;
        self.take(na, nb)
    }
}
