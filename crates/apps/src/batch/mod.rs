//! batch_stats: many molecular structures packed in one atom array, each
//! described by a `BatchStructureDesc`; one launch computes every structure's
//! centroid and radius of gyration. Inputs are validated before any launch
//! (`input`); the CPU reference is in `reference`.

mod input;
mod random;
mod reference;

pub use input::{BatchError, BatchInput};
pub use random::{random_input, EDGE_SIZES};
pub use reference::{first_mismatch, reference, Mismatch, REL_TOL};

use std::num::NonZeroUsize;
use std::time::Instant;

use cuda_sys::kernels::batch_stats;
use cuda_sys::types::{BatchStats, BatchStructureDesc};
use gpu_core::{Backend, BackendKind, DeviceBuffer, Error, Kernel, LaunchConfig, Stream};

/// Threads per block: `kThreads` in `kernels/batch.cu`.
pub const THREADS: u32 = 256;

/// The kernel body for gpu-core's CPU backend. It follows `batch.cu` step by
/// step in f32 (256 strided lanes, the same halving tree, the same guard on
/// bad descriptors) so that the CPU backend rounds like the GPU, up to the
/// fused multiply-adds nvcc forms.
fn cpu_body(
    config: &LaunchConfig,
    (xyz, total_atoms, descs, n_structures, out): (
        &[f32],
        u32,
        &[BatchStructureDesc],
        u32,
        &mut [BatchStats],
    ),
) {
    for s in 0..config.grid.0.min(n_structures) as usize {
        out[s] = block_stats(xyz, total_atoms, &descs[s]);
    }
}

/// One block of `batch_stats`.
fn block_stats(xyz: &[f32], total_atoms: u32, d: &BatchStructureDesc) -> BatchStats {
    let valid = d.atom_offset <= total_atoms && d.n_atoms <= total_atoms - d.atom_offset;
    let n = if valid { d.n_atoms } else { 0 };
    let start = if valid { 3 * d.atom_offset as usize } else { 0 };
    let atoms = &xyz[start..start + 3 * n as usize];
    let lane = |i: usize| i % THREADS as usize;

    let mut sums = [[0f32; THREADS as usize]; 3];
    for (i, atom) in atoms.chunks_exact(3).enumerate() {
        for k in 0..3 {
            sums[k][lane(i)] += atom[k];
        }
    }
    let inv_n = if n > 0 { 1.0 / n as f32 } else { 0.0 };
    let c = sums.map(|lanes| block_sum(lanes) * inv_n);

    let mut sq = [0f32; THREADS as usize];
    for (i, atom) in atoms.chunks_exact(3).enumerate() {
        let (dx, dy, dz) = (atom[0] - c[0], atom[1] - c[1], atom[2] - c[2]);
        sq[lane(i)] += dx * dx + dy * dy + dz * dz;
    }
    BatchStats {
        centroid: c,
        radius_of_gyration: (block_sum(sq) * inv_n).sqrt(),
    }
}

/// `block_sum` in `batch.cu`: halve the active width until one lane is left.
fn block_sum(mut lanes: [f32; THREADS as usize]) -> f32 {
    let mut width = lanes.len() / 2;
    while width > 0 {
        for i in 0..width {
            lanes[i] += lanes[i + width];
        }
        width /= 2;
    }
    lanes[0]
}

/// The kernel on `backend`.
pub fn kernel(backend: &Backend) -> Result<Kernel<batch_stats>, Error> {
    backend.kernel_with_cpu::<batch_stats>(cpu_body)
}

/// The launch shape: one block of [`THREADS`] per structure.
pub fn config(n_structures: u32) -> LaunchConfig {
    LaunchConfig {
        grid: (n_structures, 1, 1),
        block: (THREADS, 1, 1),
        shared_mem_bytes: 0,
    }
}

/// A batch on the device: the atoms, the descriptors and one output buffer
/// for every structure.
#[derive(Debug)]
pub struct DeviceBatch {
    xyz: DeviceBuffer<f32>,
    descs: DeviceBuffer<BatchStructureDesc>,
    out: DeviceBuffer<BatchStats>,
    total_atoms: u32,
}

impl DeviceBatch {
    /// Copies `input` to `stream`'s device and allocates the output.
    pub fn upload(stream: &Stream, input: &BatchInput) -> Result<Self, Error> {
        Ok(Self {
            xyz: stream.to_device(input.xyz())?,
            descs: stream.to_device(input.descs())?,
            out: stream.alloc_zeros(input.descs().len())?,
            total_atoms: input.total_atoms(),
        })
    }

    /// Launches `batch_stats` over structures `start..end`, writing their
    /// slots of the shared output buffer (a sub-view of it; the kernel indexes
    /// descriptors and outputs from the start of the views it gets, and atoms
    /// by absolute offset in the whole array).
    pub fn launch(
        &mut self,
        stream: &Stream,
        kernel: &Kernel<batch_stats>,
        range: std::ops::Range<usize>,
    ) -> Result<(), Error> {
        let count = range.len();
        if count == 0 {
            // A grid of zero blocks is not a valid launch, and there is nothing to do.
            return Ok(());
        }
        let n = u32::try_from(count).map_err(|_| Error::SizeOverflow {
            len: count,
            elem_size: std::mem::size_of::<BatchStructureDesc>(),
        })?;
        stream.launch(
            kernel,
            config(n),
            (
                self.xyz.view(),
                self.total_atoms,
                self.descs.slice(range.clone())?,
                n,
                self.out.slice_mut(range)?,
            ),
        )
    }

    /// The output buffer, copied back.
    pub fn results(&self, stream: &Stream) -> Result<Vec<BatchStats>, Error> {
        stream.to_host(&self.out.view())
    }
}

/// Every structure's statistics on `backend`'s default stream.
pub fn run(backend: &Backend, input: &BatchInput) -> Result<Vec<BatchStats>, Error> {
    run_on(&backend.default_stream(), &kernel(backend)?, input)
}

/// Every structure's statistics on `stream`, in one launch when the grid
/// limit allows.
pub fn run_on(
    stream: &Stream,
    kernel: &Kernel<batch_stats>,
    input: &BatchInput,
) -> Result<Vec<BatchStats>, Error> {
    run_batched(stream, kernel, input, NonZeroUsize::MAX)
}

/// Every structure's statistics on `stream`, launching once per
/// `batch_size` structures (fewer where the grid limit is lower), each
/// launch writing its sub-view of one output buffer.
pub fn run_batched(
    stream: &Stream,
    kernel: &Kernel<batch_stats>,
    input: &BatchInput,
    batch_size: NonZeroUsize,
) -> Result<Vec<BatchStats>, Error> {
    let grid_limit = kernel.limits().max_grid_dim[0].max(1) as usize;
    let step = batch_size.get().min(grid_limit);
    let mut batch = DeviceBatch::upload(stream, input)?;
    let n = input.descs().len();
    for start in (0..n).step_by(step) {
        batch.launch(stream, kernel, start..n.min(start + step))?;
    }
    batch.results(stream)
}

/// What one timed run measured.
#[derive(Debug, Clone, Copy)]
pub struct Timing {
    /// Median time of one launch over the whole batch, in milliseconds.
    pub median_ms: f64,
    /// Atoms (in structures) processed per second at that time.
    pub atoms_per_s: f64,
}

/// Times `reps` one-launch runs over a device-resident batch (after one
/// warm-up): device events on CUDA, the wall clock on the CPU.
pub fn time(
    stream: &Stream,
    kernel: &Kernel<batch_stats>,
    input: &BatchInput,
    reps: usize,
) -> Result<Timing, Error> {
    let mut batch = DeviceBatch::upload(stream, input)?;
    let all = 0..input.descs().len();
    let mut samples = Vec::with_capacity(reps);
    for rep in 0..=reps {
        let ms = if stream.backend().kind() == BackendKind::Cuda {
            let start = stream.record_event()?;
            batch.launch(stream, kernel, all.clone())?;
            let end = stream.record_event()?;
            end.synchronize()?;
            f64::from(start.elapsed_ms(&end)?)
        } else {
            let started = Instant::now();
            batch.launch(stream, kernel, all.clone())?;
            started.elapsed().as_secs_f64() * 1e3
        };
        if rep > 0 {
            samples.push(ms);
        }
    }
    samples.sort_by(f64::total_cmp);
    let median_ms = samples.get(samples.len() / 2).copied().unwrap_or(f64::NAN);
    let atoms: u64 = input.descs().iter().map(|d| u64::from(d.n_atoms)).sum();
    Ok(Timing {
        median_ms,
        atoms_per_s: atoms as f64 / (median_ms * 1e-3),
    })
}

#[cfg(test)]
mod tests;
