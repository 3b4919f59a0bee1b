//! The upload of points from the caller's parts (memory-mapped files: read
//! straight from the map, no host copy): f16 as it is, f32 as it is, bf16
//! through a bounded staging buffer and widened to f32 on the device,
//! exactly. Into a new buffer (a shard's, once per run) or into one made
//! before (the encode's chunk buffers, once per chunk).

use cuda_sys::kernels::bf16_to_f32;
use gpu_core::{Backend, DeviceBuffer, DeviceViewMut, Kernel, LaunchConfig, Stream};

use super::super::{AnnealError, Points, BF16_STAGING};

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
    for piece in pieces {
        let Points::F16(values) = piece else {
            return Err(mixed_types());
        };
        let range = at..at + values.len();
        stream.copy_to_device(values, &mut dst.slice_mut(range)?)?;
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
    let widen: Kernel<bf16_to_f32> = backend.kernel()?;
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
    widen: &Kernel<bf16_to_f32>,
    pieces: &[Points<'_>],
    dst: &mut DeviceViewMut<'_, f32>,
    staging: &mut DeviceViewMut<'_, u16>,
) -> Result<(), AnnealError> {
    let mut at = 0;
    for piece in pieces {
        match piece {
            Points::F32(values) => {
                let range = at..at + values.len();
                stream.copy_to_device(values, &mut dst.slice_mut(range)?)?;
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
                    stream.copy_to_device(chunk, &mut staging.slice_mut(0..count)?)?;
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

/// Pieces of several element types in one shard: `validate` refuses them
/// before any shard is made.
fn mixed_types() -> AnnealError {
    AnnealError::internal("a shard's points mix element types")
}
