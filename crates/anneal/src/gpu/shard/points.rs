//! A shard's points on its device, f32 or f16, with the kernels that read
//! them, and their upload.

use std::time::Instant;

use crate::bindings::kernels::{
    anneal_assign_f16, anneal_assign_f32, anneal_norms_f16, anneal_norms_f32, anneal_reduce_f16,
    anneal_reduce_f32,
};
use gpu_core::{Backend, DeviceBuffer, Kernel, Stream};

use super::super::norms_config;
use super::super::upload::{upload_f16, upload_f32};
use crate::{
    error::AnnealError,
    vocab::{Dtype, Points},
};

/// A shard's points and the kernels that read them.
#[derive(Debug)]
pub(super) enum ShardPoints {
    F32(
        DeviceBuffer<f32>,
        Kernel<anneal_assign_f32>,
        Kernel<anneal_reduce_f32>,
    ),
    F16(
        DeviceBuffer<u16>,
        Kernel<anneal_assign_f16>,
        Kernel<anneal_reduce_f16>,
    ),
}

impl ShardPoints {
    /// Enqueues the points' squared norms (`n` rows of `d`) into `norms`.
    pub(super) fn norms(
        &self,
        stream: &Stream,
        n: u32,
        d: u32,
        norms: &mut DeviceBuffer<f32>,
    ) -> Result<(), AnnealError> {
        let backend = stream.backend();
        match self {
            ShardPoints::F32(x, _, _) => {
                let kernel: Kernel<anneal_norms_f32> = backend.kernel()?;
                stream.launch(&kernel, norms_config(n), (x.view(), n, d, norms.view_mut()))?
            }
            ShardPoints::F16(x, _, _) => {
                let kernel: Kernel<anneal_norms_f16> = backend.kernel()?;
                stream.launch(&kernel, norms_config(n), (x.view(), n, d, norms.view_mut()))?
            }
        }
        Ok(())
    }
}
/// Uploads a shard's `len` values of `dtype` from `pieces` into a buffer of
/// their type (f32 for bf16, widened), with the kernels that read it; and
/// the seconds from the start to the copies' end on the device.
pub(super) fn upload_points(
    backend: &Backend,
    stream: &Stream,
    pieces: &[Points<'_>],
    len: usize,
    dtype: Dtype,
) -> Result<(ShardPoints, f64), AnnealError> {
    let started = Instant::now();
    let points = if dtype == Dtype::F16 {
        ShardPoints::F16(
            upload_f16(stream, pieces, len)?.into_local(stream)?,
            backend.kernel()?,
            backend.kernel()?,
        )
    } else {
        ShardPoints::F32(
            upload_f32(backend, stream, pieces, len)?.into_local(stream)?,
            backend.kernel()?,
            backend.kernel()?,
        )
    };
    stream.synchronize()?;
    Ok((points, started.elapsed().as_secs_f64()))
}
