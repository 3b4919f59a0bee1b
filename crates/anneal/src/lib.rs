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
mod engine;
mod error;
pub mod gpu;
pub mod index;
mod input;
pub mod maintenance;
pub mod memory;
pub mod npy;
pub mod plan;
mod rng;
mod setting;
mod synthetic;
mod target;
mod vocab;
#[cfg(feature = "wgpu")]
pub mod wgpu;

pub use driver::{run_timed, run_with, Phases, Progress};
pub use engine::{initial_anchors, initial_rows, Engine, SetupParts};
pub use error::{AnnealError, PartProblem};
pub use input::{
    check_anchors, check_sizes, coordinate_bound, device_bytes, host_bytes, validate,
    validate_rows, Problem, BF16_STAGING,
};

pub use plan::join;
pub use rng::Rng;
pub use synthetic::{synthetic_points, synthetic_rows};
pub use target::Target;
pub use vocab::{converged, AnchorStats, Dtype, MaintenanceInputs, Output, Params, Points, Steps};

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
