//! kiln-anneal: exact GPU k-means for embeddings, as a library.
//!
//! Fit points to an index of anchors on the CPU, on CUDA GPUs (one process
//! with several GPUs, or one process per GPU over NCCL) or on wgpu, and
//! assign new points to an existing index. kiln's CLI (the `apps` crate) is
//! a thin layer over this crate.
//!
//! The anneal: temperature-annealed anchor compression of embedding vectors.
//!
//! Given `n` points of dimension `d` and `m` initial anchors, find anchors
//! that summarize the points. The CPU and GPU paths run the same algorithm:
//! one driver ([`run_with`]) calls an [`Engine`] for the heavy steps
//! ([`cpu::CpuEngine`], [`gpu::GpuEngine`] on CUDA, one rank's
//! [`distributed::GpuRankEngine`] of several processes, and with the Cargo
//! feature `wgpu` the engine on wgpu, `wgpu::WgpuEngine`) and does every
//! decision itself.
//!
//! # The algorithm, exactly
//! 1. **Init.** The anchors are `m` distinct points, picked by a partial
//!    Fisher-Yates shuffle of `0..n` driven by [`crate::Rng`] seeded with
//!    `seed`. The temperature is `T = t0`.
//! 2. **Iterate**, `it = 1..=max_iters`:
//!    - *assign*: every point goes to its nearest anchor in squared L2
//!      distance (ties to the lowest index); `dist_i` is that distance.
//!    - *stats*: per anchor `j`, `count_j` (members), the mean of its members,
//!      and `sumsq_j = Σ dist_i` over its members.
//!    - *energy* `E = Σ dist_i / n`, from this assignment.
//!    - *update*: with step `η = 1 / (1 + T)`, each anchor with members moves
//!      toward their mean: `c_j += η (mean_j - c_j)`. Anchors without members
//!      stay. (Hot: small steps; cold, `T → 0`: Lloyd's k-means step.)
//!    - *maintenance*, when `maintain_every > 0`, `it % maintain_every == 0`
//!      and `it < max_iters` (see [`maintenance`]): anchors closer than
//!      `merge_frac · E` (squared distance) to their nearest other anchor are
//!      merged, count-weighted; anchors holding more than `split_load · n / m`
//!      points, or whose mean member distance `sumsq_j / count_j` exceeds
//!      `split_var · E`, are split in two along a seeded direction, while the
//!      total stays at most `max_anchors`.
//!    - *stop* when the relative energy change against the previous
//!      iteration, `|E_prev - E| / E_prev`, is below `tol` (never right after
//!      a maintenance pass changed the anchors, whose energy is not
//!      comparable), or after `max_iters`.
//!    - *cool*: `T ← T · cooling`.
//! 3. **Output**: the anchors (after the last update), each point's anchor and
//!    the energy of the last assignment, the iterations run, and the
//!    compression ratio `m_final / n`.
//!
//! # Parameters
//! See [`Params`]; [`Params::default`] documents each default.
//!
//! # Example
//! Fit points held in memory (a `&[f32]` of `n × d` values, row-major) to
//! an index on the CPU, then assign new points to it. For inputs on disk,
//! [`plan::Plan`] reads `.npy` shards, [`index::Index::write`] keeps the
//! index and [`encode::encode`] assigns files of any size a chunk at a time.
//!
//! ```
//! use gpu_core::Backend;
//! use kiln_anneal::index::{Index, RunRecord};
//! use kiln_anneal::{encode, Params, Points};
//!
//! // 300 points of dimension 4 around three centres.
//! let (n, d, m) = (300, 4, 3);
//! let points: Vec<f32> = (0..n * d)
//!     .map(|i| (i / d % 3) as f32 * 10.0 + (i % 7) as f32 * 0.01)
//!     .collect();
//! let problem = kiln_anneal::validate(Points::F32(&points), n, d, m, &Params::default())?;
//! let cpu = Backend::cpu();
//! let out = kiln_anneal::run(&cpu, &problem, &mut |_iteration, _energy, _anchors| {})?;
//! let run = RunRecord {
//!     backend: "cpu",
//!     device: "cpu".into(),
//!     gpus: 0,
//!     world_size: 1,
//! };
//! let index = Index::from_run(&out, &problem, &run, Vec::new())?;
//! assert_eq!(index.assignments.len(), n);
//!
//! // Two new points: each gets the index of its nearest anchor.
//! let new = [0.0f32, 0.0, 0.0, 0.0, 20.0, 20.0, 20.0, 20.0];
//! let codes = encode::assign(&cpu, &index, Points::F32(&new))?;
//! assert_eq!(codes.len(), 2);
//! assert_ne!(codes[0], codes[1]);
//! assert!(codes.iter().all(|&c| u64::from(c) < index.meta.m));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod access;
pub mod assign_tc;
#[rustfmt::skip]
mod bindings;
pub mod cpu;
pub mod distributed;
mod driver;
pub mod encode;
mod error;
pub mod gpu;
pub mod index;
mod input;
pub mod maintenance;
pub mod memory;
pub mod npy;
pub mod plan;
mod rng;
mod target;
#[cfg(feature = "wgpu")]
pub mod wgpu;

pub use driver::{run_timed, run_with, Phases, Progress};
pub use error::{AnnealError, PartProblem};
pub use input::{
    check_anchors, check_sizes, coordinate_bound, device_bytes, host_bytes, validate,
    validate_rows, Problem, BF16_STAGING,
};

pub use plan::join;
pub use rng::Rng;
pub use target::Target;

/// The anneal's kernel declarations from `kernels/include/*.h`: one marker
/// type per kernel, launched typed through gpu-core.
pub use bindings::kernels;
/// `#[repr(C)]` types and constants from `kernels/include/*.h`, shared with
/// the kernels (layouts checked at compile time).
pub use bindings::types;

/// The fat binaries this crate's build compiled from `kernels/*.cu`, one per
/// fat-binary module, and `ALL`, which a CUDA [`gpu_core::Backend`] running
/// the anneal loads (`Backend::auto(kiln_anneal::modules::ALL)`); every
/// image is empty in a CPU-only build.
pub mod modules {
    include!(concat!(env!("OUT_DIR"), "/kiln_anneal_modules.rs"));
}

/// Whether this build carries GPU code (a toolkit was found at build time).
pub const CUDA_ENABLED: bool = cfg!(cuda_enabled);

/// The element type of the points (as the input files hold them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dtype {
    /// float32.
    F32,
    /// float16.
    F16,
    /// bfloat16 (the top half of a float32).
    BF16,
}

impl Dtype {
    /// Bytes per element.
    pub fn size(self) -> u64 {
        match self {
            Self::F32 => 4,
            Self::F16 | Self::BF16 => 2,
        }
    }

    /// The name users know it by (`"float32"`).
    pub fn name(self) -> &'static str {
        match self {
            Self::F32 => "float32",
            Self::F16 => "float16",
            Self::BF16 => "bfloat16",
        }
    }
}

/// Points to compress: row-major `n × d`, f32, f16 or bf16 (raw bits).
///
/// One slice, or several row-contiguous parts of one element type read as
/// one matrix ([`Points::Parts`]: `.npy` shards, each memory-mapped, so that
/// nothing is copied to join them). Consumers read the values through
/// [`Points::pieces`], which yields flat slices whatever the layout.
#[derive(Debug, Clone, Copy)]
pub enum Points<'a> {
    /// f32 values.
    F32(&'a [f32]),
    /// f16 values as raw bits (the GPU keeps them as f16).
    F16(&'a [u16]),
    /// bf16 values as raw bits (the GPU converts them to f32, exactly).
    BF16(&'a [u16]),
    /// Parts concatenated by rows, in order: each a slice variant above (no
    /// nesting), all of one element type, each holding whole rows
    /// ([`validate`] checks all three).
    Parts(&'a [Points<'a>]),
}

impl<'a> Points<'a> {
    /// Values in the buffer (over all parts).
    pub fn len(&self) -> usize {
        match self {
            Points::F32(v) => v.len(),
            Points::F16(v) | Points::BF16(v) => v.len(),
            Points::Parts(parts) => parts.iter().map(Points::len).sum(),
        }
    }

    /// Whether there are no values.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The element type (of the first part, for [`Points::Parts`]; f32 when
    /// there is none).
    pub fn dtype(&self) -> Dtype {
        match self {
            Points::F32(_) => Dtype::F32,
            Points::F16(_) => Dtype::F16,
            Points::BF16(_) => Dtype::BF16,
            Points::Parts(parts) => parts.first().map_or(Dtype::F32, Points::dtype),
        }
    }

    /// The flat slices (never [`Points::Parts`]) holding values
    /// `range`, in order; empty pieces are left out.
    pub fn pieces(&self, range: std::ops::Range<usize>) -> Vec<Points<'a>> {
        let one = |p: Points<'a>, r: std::ops::Range<usize>| match p {
            Points::F32(v) => Points::F32(&v[r]),
            Points::F16(v) => Points::F16(&v[r]),
            Points::BF16(v) => Points::BF16(&v[r]),
            Points::Parts(_) => unreachable!("parts do not nest"),
        };
        let parts: &[Points<'a>] = match self {
            Points::Parts(parts) => parts,
            flat => {
                return vec![one(*flat, range)]
                    .into_iter()
                    .filter(|p| !p.is_empty())
                    .collect()
            }
        };
        let mut out = Vec::new();
        let mut start = 0;
        for part in parts {
            let end = start + part.len();
            let (lo, hi) = (range.start.max(start), range.end.min(end));
            if lo < hi {
                out.push(one(*part, lo - start..hi - start));
            }
            start = end;
        }
        out
    }

    /// Value `i` as f32.
    pub fn get(&self, i: usize) -> f32 {
        match self {
            Points::F32(v) => v[i],
            Points::F16(v) => half::f16::from_bits(v[i]).to_f32(),
            Points::BF16(v) => half::bf16::from_bits(v[i]).to_f32(),
            Points::Parts(_) => self.range_f32(i..i + 1)[0],
        }
    }

    /// Every value as f32.
    pub fn to_f32(&self) -> Vec<f32> {
        self.range_f32(0..self.len())
    }

    /// Values `range` as f32.
    pub fn range_f32(&self, range: std::ops::Range<usize>) -> Vec<f32> {
        let mut out = Vec::with_capacity(range.len());
        for piece in self.pieces(range) {
            match piece {
                Points::F32(v) => out.extend_from_slice(v),
                Points::F16(v) => out.extend(v.iter().map(|b| half::f16::from_bits(*b).to_f32())),
                Points::BF16(v) => out.extend(v.iter().map(|b| half::bf16::from_bits(*b).to_f32())),
                Points::Parts(_) => unreachable!("pieces are flat"),
            }
        }
        out
    }
}

/// Every knob of the algorithm (as the anneal index records them).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Params {
    /// Iterations at most.
    pub max_iters: u32,
    /// Stop when the relative energy change is below this (0: never early).
    pub tol: f64,
    /// Initial temperature.
    pub t0: f32,
    /// `T ← T · cooling` after each iteration, in `(0, 1]`.
    pub cooling: f32,
    /// Run maintenance every this many iterations (0: never).
    pub maintain_every: u32,
    /// Merge anchors whose squared distance is below `merge_frac · E`.
    pub merge_frac: f32,
    /// Split anchors holding more than `split_load · n / m` points.
    pub split_load: f32,
    /// Split anchors whose mean member distance exceeds `split_var · E`.
    pub split_var: f32,
    /// Anchors at most after splits (0: twice the initial `m`).
    pub max_anchors: usize,
    /// Seed of the initial anchors and the split directions.
    pub seed: u64,
}

impl Default for Params {
    /// 30 iterations, `tol = 1e-4`, `t0 = 1` (first step `η = 0.5`),
    /// `cooling = 0.8`, maintenance every 5 iterations with `merge_frac =
    /// 0.05`, `split_load = 3`, `split_var = 4`, up to twice the initial
    /// anchors, seed 0.
    fn default() -> Self {
        Self {
            max_iters: 30,
            tol: 1e-4,
            t0: 1.0,
            cooling: 0.8,
            maintain_every: 5,
            merge_frac: 0.05,
            split_load: 3.0,
            split_var: 4.0,
            max_anchors: 0,
            seed: 0,
        }
    }
}

/// What a run produced.
#[derive(Debug, Clone, PartialEq)]
pub struct Output {
    /// Final anchors, row-major `m_final × d`.
    pub anchors: Vec<f32>,
    /// Anchors at the end.
    pub m: usize,
    /// Each point's anchor in the last assignment.
    pub assignments: Vec<u32>,
    /// Iterations run.
    pub iterations: u32,
    /// Energy (mean squared distance to the assigned anchor) of the last
    /// assignment.
    pub energy: f64,
    /// Energy after each iteration.
    pub history: Vec<f64>,
    /// `m_final / n`.
    pub compression_ratio: f64,
    /// Maintenance passes that changed the anchors: `(iteration, merged, split)`.
    pub maintenance: Vec<(u32, usize, usize)>,
}

/// The initial anchors: `m` distinct points of the `n × d` `points` by a
/// seeded partial shuffle ([`initial_rows`]). Refused when `points` does
/// not hold `n × d` values, `d` is 0, or `initial_rows` refuses `n` and `m`.
pub fn initial_anchors(
    points: Points<'_>,
    n: usize,
    d: usize,
    m: usize,
    seed: u64,
) -> Result<Vec<f32>, AnnealError> {
    if d == 0 {
        return Err(AnnealError::NoDimensions);
    }
    if n.checked_mul(d) != Some(points.len()) {
        return Err(AnnealError::ValueCount {
            values: points.len(),
            n,
            d,
        });
    }
    // m <= n (initial_rows) and n × d values exist: m × d fits.
    let rows = initial_rows(n, m, seed)?;
    let mut anchors = Vec::with_capacity(m * d);
    for p in rows {
        anchors.extend(points.range_f32(p * d..(p + 1) * d));
    }
    Ok(anchors)
}

/// The rows [`initial_anchors`] takes, in anchor order: a process holding
/// only some rows of the input knows from these which anchors are its own.
///
/// The first `m` steps of a Fisher-Yates shuffle of `0..n`, with only the
/// entries it moved held (at most `2m`), so that the time and memory are
/// `O(m)`, not `O(n)`: at 400M points the whole index would be 1.6 GB.
///
/// Refused when `m > n` (there are not `m` distinct rows) or `m` is over
/// `u32::MAX` (the most anchors a run has).
pub fn initial_rows(n: usize, m: usize, seed: u64) -> Result<Vec<usize>, AnnealError> {
    if m > n {
        return Err(AnnealError::MoreAnchorsThanPoints { m, n });
    }
    if u32::try_from(m).is_err() {
        return Err(AnnealError::OverU32 {
            what: "m",
            value: m,
        });
    }
    let mut rng = Rng::new(seed);
    // Position -> the row there now, for the positions a swap has touched.
    let mut moved: std::collections::HashMap<usize, usize> =
        std::collections::HashMap::with_capacity(2 * m);
    let mut rows = Vec::with_capacity(m);
    for i in 0..m {
        let j = i + (rng.next_u64() % (n - i) as u64) as usize;
        let at_i = moved.get(&i).copied().unwrap_or(i);
        let at_j = moved.get(&j).copied().unwrap_or(j);
        moved.insert(j, at_i);
        moved.insert(i, at_j);
        rows.push(at_j);
    }
    Ok(rows)
}

/// Per-anchor statistics of the last assignment.
#[derive(Debug, Clone, PartialEq)]
pub struct AnchorStats {
    /// Members per anchor.
    pub counts: Vec<u32>,
    /// Sum of member distances per anchor.
    pub sumsq: Vec<f64>,
}

/// The driver's stopping test: the relative energy change against the
/// previous iteration is under `tol` (never without a previous iteration).
/// The GPU's `anneal_finish` kernel computes exactly this, in f64.
pub fn converged(previous: Option<f64>, energy: f64, tol: f64) -> bool {
    previous.is_some_and(|p| p > 0.0 && ((p - energy).abs() / p) < tol)
        || (previous == Some(0.0) && energy == 0.0)
}

/// What [`Engine::run_steps`] ran.
#[derive(Debug, Clone, PartialEq)]
pub struct Steps {
    /// The energy of each iteration run, in order.
    pub energies: Vec<f64>,
    /// Whether the last one met [`converged`] (then no more were run).
    pub converged: bool,
}

/// The first `m × d` values of `anchors` (what [`Engine::set_anchors`]
/// reads), or [`AnnealError::AnchorValues`] when there are fewer.
pub(crate) fn anchor_values(anchors: &[f32], m: usize, d: usize) -> Result<&[f32], AnnealError> {
    m.checked_mul(d)
        .and_then(|md| anchors.get(..md))
        .ok_or(AnnealError::AnchorValues {
            values: anchors.len(),
            m,
            d,
        })
}

/// The heavy steps, done by a backend; the driver does every decision.
pub trait Engine {
    /// The anchors the run starts from ([`initial_anchors`] of the
    /// problem's points). An engine holding only some rows of the input (one
    /// process of several) assembles them with the others.
    fn initial_anchors(&mut self, problem: &Problem<'_>) -> Result<Vec<f32>, AnnealError> {
        let (n, d, m) = (problem.n(), problem.d(), problem.m());
        initial_anchors(problem.points(), n, d, m, problem.params().seed)
    }
    /// Sets the run's first anchors: [`Engine::initial_anchors`], then
    /// [`Engine::set_anchors`]; an engine that holds the points may gather
    /// the same values where they are.
    fn start(&mut self, problem: &Problem<'_>) -> Result<(), AnnealError> {
        let initial = self.initial_anchors(problem)?;
        self.set_anchors(&initial, problem.m())
    }
    /// Replaces the anchors (`m × d`, `m <= max_anchors`).
    fn set_anchors(&mut self, anchors: &[f32], m: usize) -> Result<(), AnnealError>;
    /// Moves the anchors (of dimension `d`) as a maintenance pass decided:
    /// [`maintenance::Plan::apply`] on the host between [`Engine::anchors`]
    /// and [`Engine::set_anchors`]; an engine may apply the plan where its
    /// anchors are, with the same bits.
    fn apply_maintenance(&mut self, plan: &maintenance::Plan, d: usize) -> Result<(), AnnealError> {
        let anchors = self.anchors()?;
        let next = plan.apply(&anchors, d)?;
        self.set_anchors(&next, plan.m_new())
    }
    /// Assigns every point, computes the stats, moves the anchors by `eta`;
    /// returns the energy of the assignment.
    fn step(&mut self, eta: f32) -> Result<f64, AnnealError>;
    /// Runs one [`Engine::step`] per `etas` entry, stopping after the first
    /// whose energy has [`converged`] against the one before (`previous`
    /// for the first). An engine may run them without reporting between
    /// them (the GPU runs the test on the device).
    fn run_steps(
        &mut self,
        etas: &[f32],
        tol: f64,
        previous: Option<f64>,
    ) -> Result<Steps, AnnealError> {
        let mut energies = Vec::with_capacity(etas.len());
        let mut previous = previous;
        for &eta in etas {
            let energy = self.step(eta)?;
            energies.push(energy);
            if converged(previous, energy, tol) {
                return Ok(Steps {
                    energies,
                    converged: true,
                });
            }
            previous = Some(energy);
        }
        Ok(Steps {
            energies,
            converged: false,
        })
    }
    /// Seconds of the engine's setup that went to uploading the points,
    /// where it uploads them to a device and times it (the CUDA engine).
    fn upload_seconds(&self) -> Option<f64> {
        None
    }
    /// The stats of the last step.
    fn stats(&mut self) -> Result<AnchorStats, AnnealError>;
    /// The current anchors, `m × d`.
    fn anchors(&mut self) -> Result<Vec<f32>, AnnealError>;
    /// For each anchor, its nearest other anchor (`u32::MAX` when there is
    /// none) and their squared distance.
    fn anchor_neighbors(&mut self) -> Result<(Vec<u32>, Vec<f32>), AnnealError>;
    /// Each point's anchor in the last step.
    fn assignments(&mut self) -> Result<Vec<u32>, AnnealError>;
}

/// Runs the algorithm on `backend`: the GPU engine on the CUDA backend, the
/// CPU engine otherwise ([`Target::of`]).
pub fn run(
    backend: &gpu_core::Backend,
    problem: &Problem<'_>,
    progress: Progress<'_>,
) -> Result<Output, AnnealError> {
    let mut engine = Target::of(backend).engine(problem)?;
    run_with(engine.as_mut(), problem, progress)
}

/// `n × d` points from a seeded mixture of `clusters` Gaussian-ish blobs
/// (uniform centers in [-1, 1), uniform noise of width `spread`): data with
/// structure for anchors to find, reproducible from `seed` (whatever the
/// thread count: each block of rows has its own generator).
pub fn synthetic_points(n: usize, d: usize, clusters: usize, spread: f32, seed: u64) -> Vec<f32> {
    synthetic_rows(d, clusters, spread, seed, 0..n)
}

/// Rows `rows` of [`synthetic_points`]' matrix, the same bits, made without
/// the others: one rank of several makes only its own rows.
pub fn synthetic_rows(
    d: usize,
    clusters: usize,
    spread: f32,
    seed: u64,
    rows: std::ops::Range<usize>,
) -> Vec<f32> {
    use rayon::prelude::*;
    // Rows per block of the whole matrix, each block with its generator.
    const ROWS: usize = 4096;
    let mut rng = Rng::new(seed);
    let clusters = clusters.max(1);
    let centers = rng.f32s(clusters * d);
    let mut points = vec![0.0f32; rows.len() * d];
    if d == 0 || rows.is_empty() {
        return points;
    }
    // The pieces of `points` in each block: the first may start mid-block.
    let head = (rows.start / ROWS + 1) * ROWS - rows.start;
    let (first, rest) = points.split_at_mut(head.min(rows.len()) * d);
    let pieces: Vec<(usize, usize, &mut [f32])> =
        std::iter::once((rows.start / ROWS, rows.start % ROWS, first))
            .chain(
                rest.chunks_mut(ROWS * d)
                    .enumerate()
                    .map(|(i, piece)| (rows.start / ROWS + 1 + i, 0, piece)),
            )
            .collect();
    pieces.into_par_iter().for_each(|(block, skip, piece)| {
        let mut rng = Rng::new(seed ^ (block as u64 + 1).wrapping_mul(0xA076_1D64_78BD_642F));
        // The rows of this block before the piece: one draw for the
        // cluster and d for the noise each.
        for _ in 0..skip * (d + 1) {
            rng.next_u64();
        }
        for row in piece.chunks_mut(d) {
            let c = (rng.next_u64() % clusters as u64) as usize;
            for (k, v) in row.iter_mut().enumerate() {
                *v = centers[c * d + k] + spread * rng.next_f32();
            }
        }
    });
    points
}

/// Runs the algorithm on several GPUs at once (one CUDA backend each,
/// distinct devices, e.g. from [`gpu_core::Devices`]): the points are
/// sharded and combined through NCCL each iteration ([`gpu::GpuEngine`]).
pub fn run_sharded(
    backends: &[gpu_core::Backend],
    problem: &Problem<'_>,
    progress: Progress<'_>,
) -> Result<Output, AnnealError> {
    let mut engine = Target::Gpus(backends).engine(problem)?;
    run_with(engine.as_mut(), problem, progress)
}

#[cfg(test)]
mod tests;
