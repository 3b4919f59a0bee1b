//! The upload of points from the caller's parts (memory-mapped files, say):
//! f16 as it is, f32 as it is, bf16 through a bounded staging buffer and
//! widened to f32 on the device, exactly. Into a new buffer (a shard's, once
//! per run) or into one made before (the encode's chunk buffers).
//!
//! A large part goes through page-locked buffers ([`Stager`]): the host
//! copies a piece into one with every core while the device copies the
//! others, at the pinned rate. The driver's own copy from pageable memory is
//! one thread's memcpy into its staging, a fraction of that rate.

use crate::bindings::kernels::anneal_widen_bf16;
use gpu_core::{
    Backend, BackendKind, DeviceBuffer, DeviceViewMut, GpuRepr, Kernel, LaunchConfig, PinnedBuffer,
    Stream,
};
use rayon::prelude::*;
use std::collections::VecDeque;
use std::sync::mpsc;

use crate::{error::AnnealError, input::BF16_STAGING, vocab::Points};

/// The f16 `pieces` (`len` values in all) in one buffer, as they are.
pub(super) fn upload_f16(
    stream: &Stream,
    pieces: &[Points<'_>],
    len: usize,
) -> Result<DeviceBuffer<u16>, AnnealError> {
    let mut buffer = stream.alloc_zeros::<u16>(len)?;
    copy_f16(stream, pieces, &mut buffer.view_mut())?;
    Ok(buffer)
}

/// Copies the f16 `pieces`, in order, to the start of `dst` (which holds
/// them all).
pub(super) fn copy_f16(
    stream: &Stream,
    pieces: &[Points<'_>],
    dst: &mut DeviceViewMut<'_, u16>,
) -> Result<(), AnnealError> {
    let mut at = 0;
    let mut stager = Stager::default();
    for piece in pieces {
        let Points::F16(values) = piece else {
            return Err(mixed_types());
        };
        let range = at..at + values.len();
        stager.copy(stream, values, &mut dst.slice_mut(range)?)?;
        at += values.len();
    }
    Ok(())
}

/// The f32 and bf16 `pieces` (`len` values in all) in one f32 buffer: f32
/// copied as they are, bf16 through a staging buffer of at most
/// [`BF16_STAGING`] elements and widened on the device (exactly).
pub(super) fn upload_f32(
    backend: &Backend,
    stream: &Stream,
    pieces: &[Points<'_>],
    len: usize,
) -> Result<DeviceBuffer<f32>, AnnealError> {
    let mut buffer = stream.alloc_zeros::<f32>(len)?;
    let bf16_len: usize = pieces
        .iter()
        .filter(|p| matches!(p, Points::BF16(_)))
        .map(Points::len)
        .sum();
    let mut staging = stream.alloc_zeros::<u16>(bf16_len.min(BF16_STAGING))?;
    let widen: Kernel<anneal_widen_bf16> = backend.kernel()?;
    copy_f32(
        stream,
        &widen,
        pieces,
        &mut buffer.view_mut(),
        &mut staging.view_mut(),
    )?;
    Ok(buffer)
}

/// Copies the f32 and bf16 `pieces`, in order, to the start of `dst` (which
/// holds them all): bf16 through `staging`, a piece of its length at a
/// time, widened by `widen`. Everything is enqueued on `stream`, so that
/// `staging` is reused only after the widening that read it.
pub(super) fn copy_f32(
    stream: &Stream,
    widen: &Kernel<anneal_widen_bf16>,
    pieces: &[Points<'_>],
    dst: &mut DeviceViewMut<'_, f32>,
    staging: &mut DeviceViewMut<'_, u16>,
) -> Result<(), AnnealError> {
    let mut at = 0;
    let (mut f32s, mut bf16s) = (Stager::default(), Stager::default());
    for piece in pieces {
        match piece {
            Points::F32(values) => {
                let range = at..at + values.len();
                f32s.copy(stream, values, &mut dst.slice_mut(range)?)?;
                at += values.len();
            }
            Points::BF16(values) if staging.is_empty() && !values.is_empty() => {
                return Err(AnnealError::internal(
                    "bf16 points without a staging buffer",
                ))
            }
            Points::BF16(values) => {
                for chunk in values.chunks(staging.len().max(1)) {
                    let count = chunk.len();
                    bf16s.copy(stream, chunk, &mut staging.slice_mut(0..count)?)?;
                    stream.launch(
                        widen,
                        LaunchConfig::for_elements(count as u32, 256),
                        (
                            staging.as_view().slice(0..count)?,
                            dst.slice_mut(at..at + count)?,
                            count as u32,
                        ),
                    )?;
                    at += count;
                }
            }
            Points::F16(_) | Points::Parts(_) => return Err(mixed_types()),
        }
    }
    Ok(())
}

/// Bytes of each of a [`Stager`]'s whole page-locked buffers.
/// Page-locking costs about as much as copying through them (2 GB/s
/// against 50): large buffers make the copy cheaper than it costs to make
/// them (measured on an H200 at 1M x 768 f32: 2 x 8 MiB 143 ms, 2 x 32 MiB
/// 106 ms, 2 x 128 MiB 270 ms).
const STAGE_BYTES: usize = 16 << 20;

/// A [`Stager`]'s whole buffers: one filled by the host while the others'
/// copies run.
const STAGE_BUFFERS: usize = 3;

/// Bytes of a [`Stager`]'s first buffer, page-locked before its first
/// copy (about 2 ms) while the whole ones are page-locked on threads of
/// their own (the copy does not wait the 25 ms they take).
const FIRST_STAGE_BYTES: usize = 4 << 20;

/// Copies smaller than this are left to the driver (a stager's buffers
/// cost more to allocate than they save).
const STAGE_MIN_BYTES: usize = 8 << 20;

/// Bytes a thread copies at once into a stager's buffer: a whole buffer is
/// 64 pieces, several for every core.
const STAGE_PIECE_BYTES: usize = STAGE_BYTES / 64;

/// A page-locked buffer from a thread, or why it could not be made.
type Arrival<T> = Result<PinnedBuffer<T>, gpu_core::Error>;

/// Page-locked buffers for copies from pageable memory, made at the first
/// copy large enough to use them: a small first one at once, and
/// [`STAGE_BUFFERS`] whole ones on threads of their own, used as they
/// arrive (the small one retires once two have). Freed (after their last
/// copy) on drop.
#[derive(Debug)]
pub(crate) struct Stager<T: GpuRepr> {
    /// In turn: the front is filled next.
    buffers: VecDeque<PinnedBuffer<T>>,
    /// The whole buffers still being page-locked.
    arriving: Option<mpsc::Receiver<Arrival<T>>>,
}

impl<T: GpuRepr> Default for Stager<T> {
    fn default() -> Self {
        Self {
            buffers: VecDeque::new(),
            arriving: None,
        }
    }
}

impl<T: GpuRepr + Copy + Send + Sync + 'static> Stager<T> {
    /// Copies `src` into `dst` (of its length) on `stream`: a piece at a
    /// time, each copied by the host's threads into the buffer whose last
    /// copy is done, then by the device while the host fills the next.
    /// Returns with the last copies enqueued: the buffers wait for them
    /// when reused or dropped. A small `src` is copied by the driver.
    pub(crate) fn copy(
        &mut self,
        stream: &Stream,
        src: &[T],
        dst: &mut DeviceViewMut<'_, T>,
    ) -> Result<(), AnnealError> {
        let size = std::mem::size_of::<T>().max(1);
        if std::mem::size_of_val(src) < STAGE_MIN_BYTES
            || stream.backend().kind() != BackendKind::Cuda
        {
            stream.copy_to_device(src, dst)?;
            return Ok(());
        }
        let whole = STAGE_BYTES / size;
        if self.buffers.is_empty() && self.arriving.is_none() {
            self.buffers
                .push_back(stream.alloc_pinned(FIRST_STAGE_BYTES / size)?);
            self.arriving = Some(page_lock(stream, whole, STAGE_BUFFERS));
        }
        let piece = (STAGE_PIECE_BYTES / size).max(1);
        let mut at = 0;
        while at < src.len() {
            self.take_arrivals(whole);
            let mut buffer = self
                .buffers
                .pop_front()
                .ok_or_else(|| AnnealError::internal("a stager without buffers"))?;
            let part = &src[at..(at + buffer.len()).min(src.len())];
            // Waits for this buffer's last copy.
            let host = &mut buffer.as_mut_slice()?[..part.len()];
            host.par_chunks_mut(piece)
                .zip(part.par_chunks(piece))
                .for_each(|(to, from)| to.copy_from_slice(from));
            stream
                .copy_to_device_async(
                    buffer.slice(..part.len())?,
                    dst.slice_mut(at..at + part.len())?,
                )?
                .join(stream)?;
            at += part.len();
            self.buffers.push_back(buffer);
        }
        Ok(())
    }

    /// Puts the whole buffers page-locked since the last look first in
    /// turn (no copy uses them yet), and retires the small first buffer
    /// once two are there. One that could not be made leaves the stager
    /// with fewer (slower, not wrong).
    fn take_arrivals(&mut self, whole: usize) {
        let Some(arriving) = &self.arriving else {
            return;
        };
        let mut ended = false;
        loop {
            match arriving.try_recv() {
                Ok(Ok(buffer)) => self.buffers.push_front(buffer),
                Ok(Err(_)) => {}
                Err(mpsc::TryRecvError::Empty) => break,
                Err(mpsc::TryRecvError::Disconnected) => {
                    ended = true;
                    break;
                }
            }
        }
        if ended {
            self.arriving = None;
        }
        if self.buffers.iter().filter(|b| b.len() >= whole).count() >= 2 {
            // Dropping it waits for its last copy.
            self.buffers.retain(|b| b.len() >= whole);
        }
    }
}

/// `count` buffers of `len` page-locked on a thread each (page-locking
/// runs at about 2 GB/s a thread), sent as each is made. A buffer made
/// after the receiver is gone is freed on its thread; a thread the system
/// will not start means one buffer fewer.
fn page_lock<T: GpuRepr + Send + 'static>(
    stream: &Stream,
    len: usize,
    count: usize,
) -> mpsc::Receiver<Arrival<T>> {
    let (send, receive) = mpsc::channel();
    for _ in 0..count {
        let (send, stream) = (send.clone(), stream.clone());
        let _ = std::thread::Builder::new()
            .name("kiln-page-lock".into())
            .spawn(move || {
                let _ = send.send(stream.alloc_pinned(len));
            });
    }
    receive
}

/// Pieces of several element types in one shard: `validate` refuses them
/// before any shard is made.
fn mixed_types() -> AnnealError {
    AnnealError::internal("a shard's points mix element types")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whole buffers go first in turn as they arrive (no copy uses them
    /// yet), one that could not be made is skipped, and the small first
    /// buffer retires once two whole ones are there.
    #[test]
    fn arrivals_go_first_and_the_small_buffer_retires_at_two() {
        let cpu = Backend::cpu();
        let stream = cpu.default_stream();
        let (send, receive) = mpsc::channel();
        let mut stager = Stager::<f32> {
            buffers: VecDeque::from([stream.alloc_pinned(4).unwrap()]),
            arriving: Some(receive),
        };
        let lens =
            |stager: &Stager<f32>| stager.buffers.iter().map(|b| b.len()).collect::<Vec<_>>();
        stager.take_arrivals(16);
        assert_eq!(lens(&stager), [4]);
        send.send(Ok(stream.alloc_pinned(16).unwrap())).unwrap();
        stager.take_arrivals(16);
        assert_eq!(lens(&stager), [16, 4]);
        assert!(stager.arriving.is_some());
        send.send(Err(gpu_core::Error::InvalidBackendEnv {
            value: "x".into(),
        }))
        .unwrap();
        stager.take_arrivals(16);
        assert_eq!(lens(&stager), [16, 4]);
        send.send(Ok(stream.alloc_pinned(16).unwrap())).unwrap();
        drop(send);
        stager.take_arrivals(16);
        assert_eq!(lens(&stager), [16, 16]);
        assert!(stager.arriving.is_none(), "every thread has sent");
    }

    /// `page_lock` sends as many buffers of the length asked, then ends.
    #[test]
    fn page_lock_sends_each_buffer_then_ends() {
        let cpu = Backend::cpu();
        let arriving = page_lock::<u16>(&cpu.default_stream(), 8, 3);
        let lens: Vec<usize> = arriving.iter().map(|b| b.unwrap().len()).collect();
        assert_eq!(lens, [8, 8, 8]);
    }

    /// Parts past the stager's threshold, with tails that fill no buffer
    /// and several parts in a row, arrive bit for bit: f32 and f16 as they
    /// are, bf16 widened.
    #[test]
    fn staged_uploads_arrive_bit_for_bit() {
        let Some(gpu) = gpu_core::testing::cuda_backend(crate::modules::ALL) else {
            return;
        };
        let stream = gpu.new_stream().unwrap();
        // Over three buffers' worth in all, none a whole number of them.
        let len = STAGE_BYTES / 4 * 3 + STAGE_BYTES / 4 / 3 + 13;
        let bits = |i: usize| (i as u32).wrapping_mul(2_654_435_761) & 0x3f7f_ffff;
        let f32s: Vec<f32> = (0..len).map(|i| f32::from_bits(bits(i))).collect();
        let (a, b) = f32s.split_at(len / 3 * 2 + 1);
        let pieces = [Points::F32(a), Points::F32(b)];
        let up = upload_f32(&gpu, &stream, &pieces, len).unwrap();
        let back = stream.to_host(&up.view()).unwrap();
        assert!(back
            .iter()
            .zip(&f32s)
            .all(|(x, y)| x.to_bits() == y.to_bits()));

        let halves: Vec<u16> = (0..len * 2).map(|i| bits(i) as u16 & 0x7bff).collect();
        let up = upload_f16(&stream, &[Points::F16(&halves)], halves.len()).unwrap();
        assert_eq!(stream.to_host(&up.view()).unwrap(), halves);

        let bf16: Vec<u16> = (0..BF16_STAGING + 7)
            .map(|i| bits(i) as u16 & 0x7f7f)
            .collect();
        let up = upload_f32(&gpu, &stream, &[Points::BF16(&bf16)], bf16.len()).unwrap();
        let back = stream.to_host(&up.view()).unwrap();
        let widened = bf16.iter().map(|&b| half::bf16::from_bits(b).to_f32());
        assert!(back
            .iter()
            .zip(widened)
            .all(|(x, y)| x.to_bits() == y.to_bits()));
    }
}
