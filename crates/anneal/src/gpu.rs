//! The GPU engine, on one GPU or sharded over several.
//!
//! Every buffer is allocated once for the run and the points are uploaded
//! once (f32 or f16; bf16 widened to f32 on the device), split into one
//! contiguous shard per GPU, each read straight from the caller's parts
//! (memory-mapped files: no host copy). One iteration
//! is, on every GPU: the fused distance + argmin of its shard (no `n × m`
//! distance matrix exists anywhere), the CUB radix sort of its points by
//! anchor (the static-library module `reduce`: member lists in point order),
//! the per-anchor partial statistics (member counts, sums of member points
//! and of their distances, in f64, over pieces of at most
//! `KILN_ANNEAL_PIECE` members so that a crowded anchor does not serialize
//! the step, the pieces added in order): no sum depends on the order in
//! which threads finish, so a run gives the same bits every time. With
//! several GPUs NCCL all-reduces then combine the partials, and every GPU
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

use cuda_sys::kernels::anneal_assign_f32;
use cuda_sys::types::{AnnealControl, KILN_ANNEAL_EXCLUDE_SELF as EXCLUDE_SELF};
use gpu_core::{
    AbortHandle, Backend, BackendKind, Collective, DeviceBuffer, DeviceViewMut, Kernel,
    LaunchConfig, RankCollective, Stream, NCCL_ID_BYTES,
};

mod shard;
mod sort;
mod upload;

use super::assign_tc::{TcAssign, TcJob};
use super::{AnchorStats, AnnealError, Engine, Problem, Steps};
use shard::Shard;

/// Points per block of `anneal_assign_*`.
const ASSIGN_TILE: u32 = 128;
/// Iterations enqueued between two read-backs at most (the history buffer).
const RUN: usize = 64;
/// Rows per piece of [`GpuEngine::gather_assignments`] (4 MiB): rank 0's
/// device buffer for the other ranks' assignments.
const GATHER_PIECE: usize = 1 << 20;

/// The GPU engine.
#[derive(Debug)]
pub struct GpuEngine {
    shards: Vec<Shard>,
    /// Present with more than one shard, or more than one process.
    collective: Option<Combine>,
    /// Anchor-to-anchor nearest neighbours, on shard 0.
    anchor_assign: Kernel<anneal_assign_f32>,
    /// The same search on tensor cores (when the points' assignment uses
    /// them): the anchors are its points.
    anchor_tc: Option<TcAssign>,
    neighbors: DeviceBuffer<u32>,
    neighbor_dist: DeviceBuffer<f32>,
    /// Never `done`: the control of the neighbour search.
    idle: DeviceBuffer<AnnealControl>,
    n: usize,
    d: u32,
    m: u32,
    /// [`super::assign_tc::STATS_ENV`] is `1`.
    stats: bool,
    /// The host buffer the assignments are read into at the end, allocated
    /// and written once in the setup so that the end of the run does not
    /// fault its pages in: all the points' (one process, or rank 0 of
    /// several), else empty.
    output: Vec<u32>,
    /// Rank 0 of several: a piece of the other ranks' assignments, received
    /// on the device ([`GpuEngine::gather_assignments`]).
    gather: Option<DeviceBuffer<u32>>,
    /// One process of several: the anchors' count, broadcast from rank 0
    /// ([`GpuEngine::broadcast_count`]).
    count: Option<DeviceBuffer<u32>>,
}

/// How the shards' partial statistics are summed.
#[derive(Debug)]
enum Combine {
    /// The shards of this process, one per GPU.
    Local(Collective),
    /// This process's one shard with the other processes' (one GPU each).
    Ranks(RankCollective),
}

fn assign_config(rows: u32) -> LaunchConfig {
    LaunchConfig {
        grid: (rows.div_ceil(ASSIGN_TILE).max(1), 1, 1),
        block: (256, 1, 1),
        shared_mem_bytes: 0,
    }
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
            return Err(AnnealError::Input(
                "the GPU engine needs CUDA backends".into(),
            ));
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
        let collective = if k > 1 {
            let streams: Vec<Stream> = shards.iter().map(|s| s.stream.clone()).collect();
            Some(Combine::Local(Collective::new(&streams)?))
        } else {
            None
        };
        Self::with_shards(backends, problem, shards, collective)
    }

    /// The engine of one process of several, on one GPU (`backend`): the
    /// points are `problem`'s rows (`crate::validate_rows`), combined each
    /// iteration with the other ranks' through NCCL (`ncclCommInitRank`
    /// with rank 0's `id`; blocks until every rank has joined). Its
    /// assignments are its rows'.
    pub fn for_rank(
        backend: &Backend,
        problem: &Problem<'_>,
        id: &[u8; NCCL_ID_BYTES],
        rank: usize,
        world_size: usize,
    ) -> Result<Self, AnnealError> {
        if backend.kind() != BackendKind::Cuda {
            return Err(AnnealError::Input(
                "the GPU engine needs CUDA backends".into(),
            ));
        }
        let points = problem.points();
        let mut shard = Shard::new(
            backend,
            &points.pieces(0..points.len()),
            problem.d(),
            problem.max_anchors(),
        )?;
        let ranks = RankCollective::new(&shard.stream, id, rank, world_size)?;
        // NCCL loads a collective's kernels at its first call: one call of
        // each the run makes, on the run's own (zeroed) buffers at their
        // full size, leaves them zero and puts that cost in the setup, not
        // in the first iteration.
        shard.reduce_partials(&ranks, problem.max_anchors(), problem.d())?;
        ranks.all_reduce_sum(&mut shard.anchors.view_mut())?;
        ranks.broadcast(&mut shard.anchors.view_mut(), 0)?;
        let mut count = shard.stream.alloc_zeros::<u32>(1)?;
        ranks.broadcast(&mut count.view_mut(), 0)?;
        // And NCCL connects two ranks at their first send: one word from
        // each rank's (zeroed) assignments to rank 0's gather buffer.
        let gather = if rank == 0 && world_size > 1 {
            let mut gather = shard
                .stream
                .alloc_zeros::<u32>(GATHER_PIECE.min(problem.n()))?;
            for peer in 1..world_size {
                ranks.recv(&mut gather.slice_mut(0..1)?, peer)?;
            }
            Some(gather)
        } else {
            ranks.send(&shard.assign.slice(0..1)?, 0)?;
            None
        };
        shard.stream.synchronize()?;
        let mut engine = Self::with_shards(
            std::slice::from_ref(backend),
            problem,
            vec![shard],
            Some(Combine::Ranks(ranks)),
        )?;
        engine.gather = gather;
        engine.count = Some(count);
        Ok(engine)
    }

    /// Ends this process's NCCL operations from another thread (a peer
    /// died); `None` unless made by [`GpuEngine::for_rank`].
    pub fn abort_handle(&self) -> Option<AbortHandle> {
        match &self.collective {
            Some(Combine::Ranks(ranks)) => Some(ranks.abort_handle()),
            _ => None,
        }
    }

    /// One process of several ([`GpuEngine::for_rank`]): the element-wise
    /// sum over the ranks of each rank's `m × d` `part`, summed on the
    /// devices (`ncclAllReduce`, f32) and read back; every rank gets the
    /// same bits. Leaves the sum as the anchors, whose norms it does not
    /// compute: [`Engine::set_anchors`] follows.
    pub fn sum_over_ranks(&mut self, part: &[f32], m: usize) -> Result<Vec<f32>, AnnealError> {
        let Some(Combine::Ranks(ranks)) = &self.collective else {
            return Err(AnnealError::Input(
                "a sum over ranks needs an engine made by GpuEngine::for_rank".into(),
            ));
        };
        let md = m * self.d as usize;
        let shard = &mut self.shards[0];
        if part.len() != md || md > shard.anchors.len() {
            return Err(AnnealError::Input(format!(
                "{} values to sum over the ranks, not {m} anchors of dimension {} within the run's maximum",
                part.len(),
                self.d
            )));
        }
        {
            let mut buf = shard.anchors.slice_mut(0..md)?;
            shard.stream.copy_to_device(part, &mut buf)?;
            ranks.all_reduce_sum(&mut buf)?;
        }
        Ok(shard.stream.to_host(&shard.anchors.slice(0..md)?)?)
    }

    fn with_shards(
        backends: &[Backend],
        problem: &Problem<'_>,
        shards: Vec<Shard>,
        collective: Option<Combine>,
    ) -> Result<Self, AnnealError> {
        let (n, d, max_anchors) = (problem.n(), problem.d(), problem.max_anchors());
        let d32 = d as u32;
        let first = &shards[0].stream;
        let root = match &collective {
            Some(Combine::Ranks(ranks)) => ranks.rank() == 0,
            _ => true,
        };
        Ok(Self {
            anchor_assign: backends[0].kernel()?,
            anchor_tc: if shards[0].tc.is_some() {
                TcAssign::new(&backends[0], first, max_anchors, d, max_anchors)?
            } else {
                None
            },
            neighbors: first.alloc_zeros(max_anchors)?,
            neighbor_dist: first.alloc_zeros(max_anchors)?,
            idle: first.alloc_zeros(1)?,
            shards,
            collective,
            n,
            d: d32,
            m: 0,
            stats: std::env::var(super::assign_tc::STATS_ENV).is_ok_and(|v| v.trim() == "1"),
            // Written, not only allocated (zeroed pages are mapped lazily).
            output: if root { vec![u32::MAX; n] } else { Vec::new() },
            gather: None,
            count: None,
        })
    }

    /// GPUs the points are spread over.
    pub fn gpus(&self) -> usize {
        self.shards.len()
    }

    /// Points in the whole problem (over every process).
    pub fn n(&self) -> usize {
        self.n
    }

    /// Points this engine holds: all of them, or this rank's rows.
    pub fn rows(&self) -> usize {
        self.shards.iter().map(|s| s.n as usize).sum()
    }

    /// The last step's assignments of this engine's rows `start..`, in row
    /// order, copied straight into `out` (as many as it holds).
    pub fn assignments_into(&mut self, start: usize, out: &mut [u32]) -> Result<(), AnnealError> {
        let end = start.saturating_add(out.len());
        if end > self.rows() {
            return Err(AnnealError::Input(format!(
                "assignments {start}..{end} of an engine of {} rows",
                self.rows()
            )));
        }
        let mut first = 0;
        for shard in &self.shards {
            let last = first + shard.n as usize;
            let (lo, hi) = (start.max(first), end.min(last));
            if lo < hi {
                shard.stream.copy_to_host(
                    &shard.assign.slice(lo - first..hi - first)?,
                    &mut out[lo - start..hi - start],
                )?;
            }
            first = last;
        }
        Ok(())
    }

    /// One process of several ([`GpuEngine::for_rank`]): rank 0's `m` on
    /// every rank (`ncclBroadcast` of one word; the others' `m` is not
    /// read), for [`Engine::set_anchors`], which every rank calls with it.
    pub fn broadcast_count(&mut self, m: usize) -> Result<usize, AnnealError> {
        let (Some(Combine::Ranks(ranks)), Some(count)) = (&self.collective, &mut self.count) else {
            return Err(AnnealError::Input(
                "a count broadcast needs an engine made by GpuEngine::for_rank".into(),
            ));
        };
        let stream = &self.shards[0].stream;
        if ranks.rank() == 0 {
            let m = u32::try_from(m)
                .map_err(|_| AnnealError::Input(format!("{m} anchors is over u32::MAX")))?;
            stream.copy_to_device(&[m], &mut count.view_mut())?;
        }
        ranks.broadcast(&mut count.view_mut(), 0)?;
        Ok(stream.to_host(&count.view())?[0] as usize)
    }

    /// One process of several ([`GpuEngine::for_rank`]): every rank's
    /// assignments on rank 0, in row order, through NCCL (`parts[r]` is
    /// rank `r`'s rows, the same on every rank). Rank 0 reads its own into
    /// place and receives each other rank's on its device, a piece at a
    /// time, then copies it into place; the others send theirs from their
    /// device. Empty on the other ranks.
    pub fn gather_assignments(
        &mut self,
        parts: &[std::ops::Range<usize>],
    ) -> Result<Vec<u32>, AnnealError> {
        let Some(Combine::Ranks(ranks)) = &self.collective else {
            return Err(AnnealError::Input(
                "a gather over ranks needs an engine made by GpuEngine::for_rank".into(),
            ));
        };
        let (rank, world) = (ranks.rank(), ranks.world_size());
        let rows = self.rows();
        if parts.len() != world || parts[rank].len() != rows {
            return Err(AnnealError::Input(format!(
                "{} parts of the rows for {world} ranks, rank {rank} holding {rows}",
                parts.len()
            )));
        }
        let shard = &self.shards[0];
        if rank != 0 {
            for piece in (0..rows).step_by(GATHER_PIECE) {
                let end = (piece + GATHER_PIECE).min(rows);
                ranks.send(&shard.assign.slice(piece..end)?, 0)?;
            }
            shard.stream.synchronize()?;
            return Ok(Vec::new());
        }
        let mut all = std::mem::take(&mut self.output);
        all.resize(self.n, 0);
        let gather = self.gather.as_mut();
        let gather =
            gather.ok_or_else(|| AnnealError::Input("rank 0 has no gather buffer".into()))?;
        let own = &parts[0];
        shard
            .stream
            .copy_to_host(&shard.assign.slice(0..rows)?, &mut all[own.clone()])?;
        for (peer, part) in parts.iter().enumerate().skip(1) {
            for piece in part.clone().step_by(GATHER_PIECE) {
                let end = (piece + GATHER_PIECE).min(part.end);
                if end > all.len() {
                    return Err(AnnealError::Input(format!(
                        "rank {peer}'s rows {}..{} are past the {} points",
                        part.start,
                        part.end,
                        all.len()
                    )));
                }
                let mut into = gather.slice_mut(0..end - piece)?;
                ranks.recv(&mut into, peer)?;
                shard
                    .stream
                    .copy_to_host(&gather.slice(0..end - piece)?, &mut all[piece..end])?;
            }
        }
        Ok(all)
    }

    fn md(&self) -> usize {
        self.m as usize * self.d as usize
    }

    /// Sums every shard's partials into every shard's (NCCL).
    fn all_reduce(&mut self) -> Result<(), AnnealError> {
        let (m, md) = (self.m as usize, self.md());
        let collective = match &self.collective {
            None => return Ok(()),
            Some(Combine::Ranks(ranks)) => {
                return self.shards[0].reduce_partials(ranks, m, self.d as usize)
            }
            Some(Combine::Local(collective)) => collective,
        };
        let mut partials = self
            .shards
            .iter_mut()
            .map(|s| s.partial.slice_mut(0..md))
            .collect::<Result<Vec<DeviceViewMut<'_, f64>>, _>>()?;
        collective.all_reduce_sum(&mut partials)?;
        drop(partials);
        let mut sumsq = self
            .shards
            .iter_mut()
            .map(|s| s.sumsq.slice_mut(0..m))
            .collect::<Result<Vec<DeviceViewMut<'_, f64>>, _>>()?;
        collective.all_reduce_sum(&mut sumsq)?;
        drop(sumsq);
        let mut members = self
            .shards
            .iter_mut()
            .map(|s| s.members.slice_mut(0..m))
            .collect::<Result<Vec<DeviceViewMut<'_, u32>>, _>>()?;
        collective.all_reduce_sum(&mut members)?;
        Ok(())
    }

    /// Runs up to [`RUN`] iterations on the device and reads their energies.
    fn run_on_device(
        &mut self,
        etas: &[f32],
        tol: f64,
        previous: Option<f64>,
    ) -> Result<Steps, AnnealError> {
        let control = AnnealControl {
            previous: previous.unwrap_or(0.0),
            has_previous: u32::from(previous.is_some()),
            done: 0,
            iterations: 0,
            pad: 0,
        };
        for shard in &mut self.shards {
            shard
                .stream
                .copy_to_device(&[control], &mut shard.control.view_mut())?;
        }
        let (m, d, n_total) = (self.m, self.d, self.n as u64);
        for (slot, &eta) in etas.iter().enumerate() {
            for shard in &mut self.shards {
                shard.enqueue_partials(m, d)?;
                if self.stats {
                    shard.print_unresolved()?;
                }
            }
            self.all_reduce()?;
            for shard in &mut self.shards {
                shard.enqueue_update(m, d, eta, n_total, tol, slot as u32)?;
            }
        }
        let first = &self.shards[0];
        let state = first.stream.to_host(&first.control.view())?[0];
        let ran = state.iterations as usize;
        let energies = first.stream.to_host(&first.history.slice(0..ran)?)?;
        Ok(Steps {
            energies,
            converged: state.done != 0,
        })
    }
}

impl Engine for GpuEngine {
    /// In one process of several ([`GpuEngine::for_rank`]), every rank must
    /// call this with the same `m`: rank 0's `anchors` go from its device
    /// to the others' (`ncclBroadcast`), and the others' are not read.
    fn set_anchors(&mut self, anchors: &[f32], m: usize) -> Result<(), AnnealError> {
        let m32 = u32::try_from(m)
            .map_err(|_| AnnealError::Input(format!("{m} anchors is over u32::MAX")))?;
        if m * self.d as usize > self.shards[0].anchors.len() {
            return Err(AnnealError::Input(format!(
                "{m} anchors is over the run's maximum"
            )));
        }
        let d = self.d;
        let root = match &self.collective {
            Some(Combine::Ranks(ranks)) => ranks.rank() == 0,
            _ => true,
        };
        if root && anchors.len() < m * d as usize {
            return Err(AnnealError::Input(format!(
                "{} anchor values for {m} anchors of dimension {d}",
                anchors.len()
            )));
        }
        self.m = m32;
        if let Some(Combine::Ranks(ranks)) = &self.collective {
            // Rank 0's anchors, sent from its device to the others'.
            let shard = &mut self.shards[0];
            if ranks.rank() == 0 {
                shard.upload_anchors(anchors, m32, d)?;
            }
            let md = m * d as usize;
            ranks.broadcast(&mut shard.anchors.slice_mut(0..md)?, 0)?;
            return shard.anchors_changed(m32, d);
        }
        for shard in &mut self.shards {
            shard.set_anchors(anchors, m32, d)?;
        }
        Ok(())
    }

    fn step(&mut self, eta: f32) -> Result<f64, AnnealError> {
        let steps = self.run_on_device(&[eta], 0.0, None)?;
        Ok(steps.energies[0])
    }

    fn run_steps(
        &mut self,
        etas: &[f32],
        tol: f64,
        previous: Option<f64>,
    ) -> Result<Steps, AnnealError> {
        let mut all = Steps {
            energies: Vec::with_capacity(etas.len()),
            converged: false,
        };
        let mut previous = previous;
        for run in etas.chunks(RUN) {
            let steps = self.run_on_device(run, tol, previous)?;
            all.energies.extend(&steps.energies);
            if steps.converged {
                all.converged = true;
                break;
            }
            previous = all.energies.last().copied();
        }
        Ok(all)
    }

    fn stats(&mut self) -> Result<AnchorStats, AnnealError> {
        let m = self.m as usize;
        let first = &self.shards[0];
        let counts = first.stream.to_host(&first.members.slice(0..m)?)?;
        let sumsq = first.stream.to_host(&first.sumsq.slice(0..m)?)?;
        Ok(AnchorStats { counts, sumsq })
    }

    fn anchors(&mut self) -> Result<Vec<f32>, AnnealError> {
        let md = self.md();
        let first = &self.shards[0];
        Ok(first.stream.to_host(&first.anchors.slice(0..md)?)?)
    }

    fn anchor_neighbors(&mut self) -> Result<(Vec<u32>, Vec<f32>), AnnealError> {
        let (m, d) = (self.m, self.d);
        let md = self.md();
        let first = &mut self.shards[0];
        if let Some(tc) = &mut self.anchor_tc {
            let anchors = first.anchors.slice(0..md)?;
            tc.prepare_points(&first.stream, anchors.clone(), m, d)?;
            tc.launch(
                &first.stream,
                TcJob {
                    x: anchors.clone(),
                    x_norms: first.anchor_norms.slice(0..m as usize)?,
                    n: m,
                    d,
                    anchors,
                    anchor_norms: first.anchor_norms.slice(0..m as usize)?,
                    m,
                    flags: EXCLUDE_SELF,
                    control: self.idle.view(),
                    assign: self.neighbors.view_mut(),
                    dist: self.neighbor_dist.view_mut(),
                    counts: first.counts.slice_mut(0..0)?,
                },
            )?;
        } else {
            first.stream.launch(
                &self.anchor_assign,
                assign_config(m),
                (
                    first.anchors.slice(0..md)?,
                    first.anchor_norms.view(),
                    m,
                    d,
                    first.anchors.slice(0..md)?,
                    first.anchor_norms.view(),
                    m,
                    EXCLUDE_SELF,
                    self.idle.view(),
                    self.neighbors.view_mut(),
                    self.neighbor_dist.view_mut(),
                    first.counts.view_mut(),
                ),
            )?;
        }
        let m = m as usize;
        let neighbors = first.stream.to_host(&self.neighbors.slice(0..m)?)?;
        Ok((
            neighbors,
            first.stream.to_host(&self.neighbor_dist.slice(0..m)?)?,
        ))
    }

    fn assignments(&mut self) -> Result<Vec<u32>, AnnealError> {
        let mut all = std::mem::take(&mut self.output);
        all.resize(self.rows(), 0);
        self.assignments_into(0, &mut all)?;
        Ok(all)
    }
}
