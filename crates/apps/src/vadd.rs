//! vector_add (`c = a + b`, f32): the minimal end-to-end check that the build,
//! the embedded fat binary, the typed launch and the CPU fallback all work.

use std::time::Instant;

use cuda_sys::kernels::vector_add;
use gpu_core::{Backend, BackendKind, Error, Kernel, LaunchConfig, Stream};

/// The CPU reference: what every backend must reproduce bit for bit.
pub fn reference(a: &[f32], b: &[f32]) -> Vec<f32> {
    a.iter().zip(b).map(|(x, y)| x + y).collect()
}

/// The CPU body of the kernel, as gpu-core's CPU backend runs it.
fn cpu_body(_config: &LaunchConfig, (a, b, c, n): (&[f32], &[f32], &mut [f32], u32)) {
    let n = n as usize;
    for ((c, a), b) in c[..n].iter_mut().zip(&a[..n]).zip(&b[..n]) {
        *c = a + b;
    }
}

/// The kernel on `backend`.
pub fn kernel(backend: &Backend) -> Result<Kernel<vector_add>, Error> {
    backend.kernel_with_cpu::<vector_add>(cpu_body)
}

/// The launch shape: the kernel strides over the array four floats per
/// thread, so a grid of a few waves per SM covers any n.
pub fn config(backend: &Backend, n: usize) -> LaunchConfig {
    let threads = 256u32;
    let quads = n.div_ceil(4).max(1);
    let needed = u32::try_from(quads.div_ceil(threads as usize)).unwrap_or(u32::MAX);
    let cap = backend
        .device()
        .map_or(needed, |d| d.sm_count.saturating_mul(16).max(1));
    LaunchConfig {
        grid: (needed.clamp(1, cap), 1, 1),
        block: (threads, 1, 1),
        shared_mem_bytes: 0,
    }
}

/// `a + b` on `stream`.
pub fn add(
    stream: &Stream,
    kernel: &Kernel<vector_add>,
    a: &[f32],
    b: &[f32],
) -> Result<Vec<f32>, Error> {
    let n = a.len();
    let n32 = u32::try_from(n).map_err(|_| Error::SizeOverflow {
        len: n,
        elem_size: 4,
    })?;
    let da = stream.to_device(a)?;
    let db = stream.to_device(b)?;
    let mut dc = stream.alloc_zeros::<f32>(n)?;
    stream.launch(
        kernel,
        config(stream.backend(), n),
        (da.view(), db.view(), dc.view_mut(), n32),
    )?;
    stream.to_host(&dc.view())
}

/// What one timed run measured.
#[derive(Debug, Clone, Copy)]
pub struct Timing {
    /// Median time of one launch, in milliseconds.
    pub median_ms: f64,
    /// Bytes read and written per launch (12 per element) over that time.
    pub gb_per_s: f64,
}

/// Times `reps` launches over device-resident inputs (after one warm-up):
/// device events on CUDA, the wall clock on the CPU.
pub fn time(
    stream: &Stream,
    kernel: &Kernel<vector_add>,
    a: &[f32],
    b: &[f32],
    reps: usize,
) -> Result<Timing, Error> {
    let n = a.len();
    let n32 = u32::try_from(n).map_err(|_| Error::SizeOverflow {
        len: n,
        elem_size: 4,
    })?;
    let da = stream.to_device(a)?;
    let db = stream.to_device(b)?;
    let mut dc = stream.alloc_zeros::<f32>(n)?;
    let cfg = config(stream.backend(), n);
    let mut samples = Vec::with_capacity(reps);
    for rep in 0..=reps {
        let ms = if stream.backend().kind() == BackendKind::Cuda {
            let start = stream.record_event()?;
            stream.launch(kernel, cfg, (da.view(), db.view(), dc.view_mut(), n32))?;
            let end = stream.record_event()?;
            end.synchronize()?;
            f64::from(start.elapsed_ms(&end)?)
        } else {
            let started = Instant::now();
            stream.launch(kernel, cfg, (da.view(), db.view(), dc.view_mut(), n32))?;
            started.elapsed().as_secs_f64() * 1e3
        };
        if rep > 0 {
            samples.push(ms);
        }
    }
    samples.sort_by(f64::total_cmp);
    let median_ms = samples.get(samples.len() / 2).copied().unwrap_or(f64::NAN);
    Ok(Timing {
        median_ms,
        gb_per_s: 12.0 * n as f64 / (median_ms * 1e-3) / 1e9,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_backend_matches_the_reference_for_awkward_lengths() {
        let backend = Backend::cpu();
        let stream = backend.default_stream();
        let kernel = kernel(&backend).unwrap();
        let mut rng = crate::Rng::new(7);
        for n in [0usize, 1, 3, 4, 5, 1023, 4097] {
            let (a, b) = (rng.f32s(n), rng.f32s(n));
            assert_eq!(
                add(&stream, &kernel, &a, &b).unwrap(),
                reference(&a, &b),
                "n = {n}"
            );
        }
    }

    #[test]
    fn launch_shape_covers_every_element() {
        let backend = Backend::cpu();
        for n in [0usize, 1, 1000, 1 << 20] {
            let c = config(&backend, n);
            assert!(c.grid.0 as usize * c.block.0 as usize * 4 >= n, "n = {n}");
        }
    }
}
