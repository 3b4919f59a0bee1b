//! The cost of kiln's typed launch: the same tiny kernel (kiln's
//! `vector_add` on 256 floats) launched through gpu-core and through raw
//! cudarc from the same fat binary, per launch, without waiting between;
//! then through gpu-core on a stream of its own with stream-local buffers.

use std::time::Instant;

use cuda_sys::kernels::vector_add;
use cuda_sys::KernelDecl;
use cudarc::driver::{CudaContext, LaunchConfig as RawConfig, PushKernelArg};
use gpu_core::{Backend, BackendKind, DeviceBuffer, Kernel, LaunchConfig, Stream};
use kiln_bench_schema::LaunchOverhead;

use super::BenchError;
use crate::vadd;
use kiln_anneal::AnnealError;

/// Launches per timed batch.
const LAUNCHES: u32 = 20_000;
/// Elements of the kernel's arrays: one block's worth.
const N: u32 = 256;

/// The figure of a run that measured nothing, and why.
fn not_measured(why: &str) -> LaunchOverhead {
    LaunchOverhead {
        kiln_us: None,
        raw_cudarc_us: None,
        kiln_local_us: None,
        overhead_us: None,
        launches: LAUNCHES,
        not_measured: Some(why.to_string()),
    }
}

/// Measures the overhead on `backend`; on the CPU backend says it was not
/// measured.
pub(super) fn measure(backend: &Backend) -> Result<LaunchOverhead, BenchError> {
    let Some(device) = backend
        .device()
        .filter(|_| backend.kind() == BackendKind::Cuda)
    else {
        return Ok(not_measured("cpu backend: there is no GPU launch to time"));
    };
    let Some(image) = cuda_sys::modules::ALL
        .iter()
        .find(|m| m.kernels.contains(&vector_add::NAME))
    else {
        return Ok(not_measured("no fat binary holds vector_add in this build"));
    };
    // kiln: the typed launch.
    let stream = backend.default_stream();
    let kernel = vadd::kernel(backend).map_err(AnnealError::from)?;
    let a = stream
        .alloc_zeros::<f32>(N as usize)
        .map_err(AnnealError::from)?;
    let mut c = stream
        .alloc_zeros::<f32>(N as usize)
        .map_err(AnnealError::from)?;
    let cfg = vadd::config(backend, N as usize);
    let mut kiln = || typed_batch(&stream, &kernel, cfg, &a, &mut c);
    // Raw cudarc: the same function from the same image.
    let raw_err = |e: cudarc::driver::DriverError| BenchError::RawLaunch(e.to_string());
    let ctx = CudaContext::new(device.ordinal).map_err(raw_err)?;
    let raw_stream = ctx.default_stream();
    let module = ctx
        .load_module(cudarc::nvrtc::Ptx::from_binary(image.image.to_vec()))
        .map_err(raw_err)?;
    let func = module.load_function(vector_add::NAME).map_err(raw_err)?;
    let ra = raw_stream.alloc_zeros::<f32>(N as usize).map_err(raw_err)?;
    let mut rc = raw_stream.alloc_zeros::<f32>(N as usize).map_err(raw_err)?;
    let raw_cfg = RawConfig {
        grid_dim: cfg.grid,
        block_dim: cfg.block,
        shared_mem_bytes: cfg.shared_mem_bytes,
    };
    let mut raw = || -> Result<f64, BenchError> {
        let started = Instant::now();
        for _ in 0..LAUNCHES {
            let mut builder = raw_stream.launch_builder(&func);
            builder.arg(&ra).arg(&ra).arg(&mut rc).arg(&N);
            // SAFETY: vector_add takes (const float*, const float*, float*,
            // unsigned); the three buffers hold N floats and n is N.
            unsafe { builder.launch(raw_cfg) }.map_err(raw_err)?;
        }
        let seconds = started.elapsed().as_secs_f64();
        raw_stream.synchronize().map_err(raw_err)?;
        Ok(seconds)
    };
    kiln()?;
    raw()?;
    let (mut ours, mut theirs) = (Vec::new(), Vec::new());
    for _ in 0..5 {
        ours.push(kiln()?);
        theirs.push(raw()?);
    }
    // Stream-local buffers on a stream of their own (made after the figures
    // above, whose buffers cudarc tracks once a second stream exists).
    let own = backend.new_stream().map_err(AnnealError::from)?;
    let local = |len| own.alloc_zeros_local::<f32>(len).map_err(AnnealError::from);
    let (la, mut lc) = (local(N as usize)?, local(N as usize)?);
    let mut kiln_local = || typed_batch(&own, &kernel, cfg, &la, &mut lc);
    kiln_local()?;
    let mut locals = Vec::new();
    for _ in 0..5 {
        locals.push(kiln_local()?);
    }
    let per_launch = |samples: Vec<f64>| super::median(samples) * 1e6 / f64::from(LAUNCHES);
    let (k, r) = (per_launch(ours), per_launch(theirs));
    Ok(LaunchOverhead {
        kiln_us: Some(k),
        raw_cudarc_us: Some(r),
        kiln_local_us: Some(per_launch(locals)),
        overhead_us: Some(k - r),
        launches: LAUNCHES,
        not_measured: None,
    })
}

/// Seconds to enqueue [`LAUNCHES`] typed launches of `kernel` (`c = a + a`)
/// on `stream`, then waits for them.
fn typed_batch(
    stream: &Stream,
    kernel: &Kernel<vector_add>,
    cfg: LaunchConfig,
    a: &DeviceBuffer<f32>,
    c: &mut DeviceBuffer<f32>,
) -> Result<f64, BenchError> {
    let started = Instant::now();
    for _ in 0..LAUNCHES {
        stream
            .launch(kernel, cfg, (a.view(), a.view(), c.view_mut(), N))
            .map_err(AnnealError::from)?;
    }
    let seconds = started.elapsed().as_secs_f64();
    stream.synchronize().map_err(AnnealError::from)?;
    Ok(seconds)
}
