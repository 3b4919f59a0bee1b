//! The CUDA engines: [`GpuEngine`] for one process on one GPU or sharded
//! over several, and the engine of one rank of several processes (one GPU
//! each, `rank.rs`, which `crate::distributed::GpuRankEngine` wraps). Two
//! types sharing their parts (`devices.rs`: the shards, the iteration loop,
//! the reads), so that a rank's calls do not exist on the one-process
//! engine.
//!
//! Every buffer is allocated once for the run and the points are uploaded
//! once (f32 or f16; bf16 widened to f32 on the device), split into one
//! contiguous shard per GPU, each read straight from the caller's parts
//! (memory-mapped files: no host copy). A shard's buffers are local to its
//! stream (`DeviceBuffer::into_local`): an iteration's dozen launches pass
//! their addresses with no CUDA event per argument, which on small problems
//! was the host's time, not the GPU's. One iteration
//! is, on every GPU: the fused distance + argmin of its shard (no `n × m`
//! distance matrix exists anywhere), the CUB radix sort of its points by
//! anchor (the static-library module `reduce`: member lists in point order;
//! on small problems `anneal_members` makes the same lists, `sort.rs`),
//! the per-anchor partial statistics (member counts, sums of member points
//! and of their distances, in f64, over pieces of at most
//! `KILN_ANNEAL_PIECE` members so that a crowded anchor does not serialize
//! the step, the pieces added in order): no sum depends on the order in
//! which threads finish, so a run gives the same bits every time. With
//! several GPUs (or ranks) NCCL all-reduces then combine the partials, and every GPU
//! applies the same
//! update, so the anchors stay identical without a broadcast. Then
//! `anneal_finish` records the energy and runs the convergence test on the
//! device.
//!
//! So [`Engine::run_steps`] enqueues all the iterations up to the next
//! maintenance pass without reading anything back, and reads the energies
//! once at the end: after convergence the remaining kernels return at once.
//! Nothing is allocated per iteration. On sm_80 and newer the assignment
//! runs on tensor cores with exact refinement ([`super::assign_tc`]), unless
//! `KILN_ANNEAL_TC=0` asks for the SIMT kernel.
//!
//! The encode's assigner (`chunks.rs`) is the assignment alone, to fixed
//! anchors, a chunk at a time, through the same enqueue (`assign.rs`) as
//! a shard's iteration; [`chunk_device_bytes`] is its device memory.

use gpu_core::{Backend, BackendKind, Collective, LaunchConfig, Stream};

mod assign;
mod chunks;
mod devices;
mod fuse;
mod neighbors;
mod rank;
mod readback;
mod shard;
mod sort;
mod upload;

pub use chunks::chunk_device_bytes;
pub(crate) use chunks::{ChunkAssigner, Staged};
pub use fuse::{Fuse, FUSED_MAX_D, FUSE_ENV};
pub use neighbors::EXACT_MAX_WORK as NEIGHBORS_EXACT_MAX_WORK;
pub use sort::{MembersBy, MEMBERS_ENV, SCAN_MAX_WORK};

use crate::{
    engine::{Engine, SetupParts},
    error::AnnealError,
    input::Problem,
    vocab::{AnchorStats, MaintenanceInputs, Steps},
};
use devices::Devices;
pub use rank::JoinTimes;
pub(crate) use rank::{GpuRank, Uploaded};
use shard::Shard;

/// Points per block of `anneal_assign_*`.
const ASSIGN_TILE: u32 = 128;
/// Iterations enqueued between two read-backs at most (the history buffer).
const RUN: usize = 64;

/// The norms kernels' grid: one warp per row.
fn norms_config(rows: u32) -> LaunchConfig {
    LaunchConfig::for_elements(rows.saturating_mul(32), 256)
}

fn assign_config(rows: u32) -> LaunchConfig {
    LaunchConfig {
        grid: (rows.div_ceil(ASSIGN_TILE).max(1), 1, 1),
        block: (256, 1, 1),
        shared_mem_bytes: 0,
    }
}

/// The GPU engine of one process: the points on one GPU, or split over
/// several of this process's GPUs and combined by NCCL each iteration.
///
/// A rank's calls are not there to misuse: they belong to
/// [`crate::distributed::GpuRankEngine`].
///
/// ```compile_fail
/// fn abort(engine: &kiln_anneal::gpu::GpuEngine) {
///     engine.abort_handle().abort();
/// }
/// ```
#[derive(Debug)]
pub struct GpuEngine {
    devices: Devices,
    /// Where the setup went: every GPU's shard's parts, added up.
    setup: SetupParts,
    /// Present with more than one shard.
    collective: Option<Collective>,
}

impl GpuEngine {
    /// Uploads `problem`'s points and allocates every buffer of the run,
    /// for up to its `max_anchors` anchors, on one GPU. `backend` must be
    /// the CUDA backend.
    pub fn new(backend: &Backend, problem: &Problem<'_>) -> Result<Self, AnnealError> {
        Self::sharded(std::slice::from_ref(backend), problem)
    }

    /// The same over several GPUs (one CUDA backend each, distinct devices):
    /// the points are split into as many contiguous shards (at most one per
    /// point), combined each iteration by NCCL.
    pub fn sharded(backends: &[Backend], problem: &Problem<'_>) -> Result<Self, AnnealError> {
        if backends.is_empty() || backends.iter().any(|b| b.kind() != BackendKind::Cuda) {
            return Err(AnnealError::NeedsCuda);
        }
        // Sizes fit u32: `validate` checked them.
        let (points, n, d) = (problem.points(), problem.n(), problem.d());
        let max_anchors = problem.max_anchors();
        let k = backends.len().min(n);
        let mut shards = Vec::with_capacity(k);
        for (r, backend) in backends[..k].iter().enumerate() {
            let rows = (r * n / k) * d..((r + 1) * n / k) * d;
            shards.push(Shard::new(backend, &points.pieces(rows), d, max_anchors)?);
        }
        let mut setup = SetupParts::default();
        for shard in &shards {
            setup += shard.setup_parts();
        }
        let collective = if k > 1 {
            let streams: Vec<Stream> = shards.iter().map(|s| s.stream().clone()).collect();
            Some(Collective::new(&streams)?)
        } else {
            None
        };
        Ok(Self {
            devices: Devices::new(&backends[0], problem, shards, true, k == 1)?,
            setup,
            collective,
        })
    }

    /// Where the setup went: the points' upload, the buffers and the
    /// points' preparation (every GPU's shard in turn).
    pub fn setup_parts(&self) -> SetupParts {
        self.setup
    }

    /// GPUs the points are spread over.
    pub fn gpus(&self) -> usize {
        self.devices.gpus()
    }

    /// Points in the problem.
    pub fn n(&self) -> usize {
        self.devices.n()
    }

    /// The last step's assignments of rows `start..`, in row order, copied
    /// straight into `out` (as many as it holds).
    pub fn assignments_into(&mut self, start: usize, out: &mut [u32]) -> Result<(), AnnealError> {
        self.devices.assignments_into(start, out)
    }
}

/// The sum over this process's shards, when there are several.
fn combine(
    collective: Option<&Collective>,
) -> impl FnMut(&mut [Shard], usize, usize) -> Result<(), AnnealError> + '_ {
    move |shards, m, d| match collective {
        None => Ok(()),
        Some(collective) => combine_shards(collective, shards, m, d),
    }
}

/// Sums every shard's partials into every shard's (NCCL), one sum at a
/// time: the point sums, the distance sums, the member counts.
fn combine_shards(
    collective: &Collective,
    shards: &mut [Shard],
    m: usize,
    d: usize,
) -> Result<(), AnnealError> {
    let (mut sums, mut sumsq, mut members) = (Vec::new(), Vec::new(), Vec::new());
    for shard in shards {
        let partials = shard.partials_mut(m, d)?;
        sums.push(partials.sums);
        sumsq.push(partials.sumsq);
        members.push(partials.members);
    }
    collective.all_reduce_sum(&mut sums)?;
    collective.all_reduce_sum(&mut sumsq)?;
    collective.all_reduce_sum(&mut members)?;
    Ok(())
}

impl Engine for GpuEngine {
    fn setup_parts(&self) -> Option<SetupParts> {
        Some(self.setup)
    }

    /// On one GPU, the initial anchors are gathered from the points there
    /// (the rows [`crate::initial_rows`] names: the host's values, with no
    /// `m × d` copy through the host); sharded, as [`Engine::start`] does.
    fn start(&mut self, problem: &Problem<'_>) -> Result<(), AnnealError> {
        let (n, m) = (problem.n(), problem.m());
        let rows: Vec<u32> = crate::engine::initial_rows(n, m, problem.params().seed)?
            .into_iter()
            .map(|r| r as u32)
            .collect();
        if self.devices.gather_initial(&rows)? {
            return Ok(());
        }
        let initial = self.initial_anchors(problem)?;
        self.set_anchors(&initial, m)
    }

    fn set_anchors(&mut self, anchors: &[f32], m: usize) -> Result<(), AnnealError> {
        self.devices.resize(m, Some(anchors))?;
        self.devices.set_anchors(anchors)
    }

    /// On the device, on every GPU: only the plan crosses to it.
    fn apply_maintenance(
        &mut self,
        plan: &crate::maintenance::Plan,
        _d: usize,
    ) -> Result<(), AnnealError> {
        self.devices.apply_plan(plan)
    }

    fn step(&mut self, eta: f32) -> Result<f64, AnnealError> {
        let mut combine = combine(self.collective.as_ref());
        self.devices.step(&mut combine, eta)
    }

    fn run_steps(
        &mut self,
        etas: &[f32],
        tol: f64,
        previous: Option<f64>,
    ) -> Result<Steps, AnnealError> {
        let mut combine = combine(self.collective.as_ref());
        self.devices.run_steps(&mut combine, etas, tol, previous)
    }

    fn run_steps_then_read(
        &mut self,
        etas: &[f32],
        tol: f64,
        previous: Option<f64>,
    ) -> Result<(Steps, Option<MaintenanceInputs>), AnnealError> {
        let mut combine = combine(self.collective.as_ref());
        self.devices
            .run_steps_then_read(&mut combine, etas, tol, previous)
    }

    fn stats(&mut self) -> Result<AnchorStats, AnnealError> {
        self.devices.stats()
    }

    fn anchors(&mut self) -> Result<Vec<f32>, AnnealError> {
        self.devices.anchors()
    }

    fn anchor_neighbors(&mut self) -> Result<(Vec<u32>, Vec<f32>), AnnealError> {
        self.devices.anchor_neighbors()
    }

    fn assignments(&mut self) -> Result<Vec<u32>, AnnealError> {
        let mut all = self.devices.take_output();
        all.resize(self.devices.rows(), 0);
        self.devices.assignments_into(0, &mut all)?;
        Ok(all)
    }
}
