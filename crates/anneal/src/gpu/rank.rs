//! The CUDA engine of one process of several, one GPU each ([`GpuRank`]):
//! this rank's rows on its GPU, the statistics summed with the other ranks'
//! by NCCL each iteration (`RankCollective`, one group of three sums), the
//! initial anchors summed on the devices, rank 0's anchors after
//! maintenance broadcast from its GPU (their count first), and every
//! rank's assignments sent to rank 0's GPU at the end.
//! `crate::distributed::GpuRankEngine` makes it an engine: the run's side
//! of a rank (which rows are whose, the initial anchors among them, the
//! watchdog that names a dead peer) is the distributed module's, which
//! this module does not import.

use gpu_core::{AbortHandle, Backend, BackendKind, DeviceBuffer, RankCollective, NCCL_ID_BYTES};

use super::devices::Devices;
use super::shard::Shard;
use crate::{
    error::AnnealError,
    input::Problem,
    vocab::{AnchorStats, MaintenanceInputs, Steps},
};

/// Rows per piece of [`GpuRank::gather_assignments`] (4 MiB): rank 0's
/// device buffer for the other ranks' assignments.
const GATHER_PIECE: usize = 1 << 20;

/// One rank's CUDA engine.
#[derive(Debug)]
pub(crate) struct GpuRank {
    /// One shard: this rank's rows.
    devices: Devices,
    ranks: RankCollective,
    /// Rank 0 of several: a piece of the other ranks' assignments, received
    /// on the device ([`GpuRank::gather_assignments`]).
    gather: Option<DeviceBuffer<u32>>,
    /// The anchors' count, broadcast from rank 0
    /// ([`GpuRank::broadcast_count`]).
    count: DeviceBuffer<u32>,
}

/// This rank's rows on its GPU before NCCL joins it to the others
/// ([`GpuRank::upload`]): what a rank can do while it waits at the
/// rendezvous.
#[derive(Debug)]
pub(crate) struct Uploaded {
    shard: Shard,
    backend: Backend,
    /// How long the upload took.
    pub(crate) seconds: f64,
}

/// Where a rank's join (NCCL init and warm-up after the upload) spent its
/// time, in seconds.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct JoinTimes {
    /// `ncclCommInitRank`: every rank connected to the others.
    pub nccl_init: f64,
    /// One call of each collective the run makes (NCCL loads their
    /// kernels), the first sends, and the host side of the engine.
    pub warmup: f64,
}

impl GpuRank {
    /// On one GPU (`backend`): the points are `problem`'s rows
    /// (`crate::validate_rows`), combined each iteration with the other
    /// ranks' through NCCL (`ncclCommInitRank` with rank 0's `id`; blocks
    /// until every rank has joined).
    pub(crate) fn new(
        backend: &Backend,
        problem: &Problem<'_>,
        id: &[u8; NCCL_ID_BYTES],
        rank: usize,
        world_size: usize,
    ) -> Result<Self, AnnealError> {
        Ok(Self::upload(backend, problem)?
            .join(problem, id, rank, world_size)?
            .0)
    }

    /// This rank's rows on its GPU (`backend`), the first half of
    /// [`GpuRank::new`]: it needs no other rank.
    pub(crate) fn upload(
        backend: &Backend,
        problem: &Problem<'_>,
    ) -> Result<Uploaded, AnnealError> {
        if backend.kind() != BackendKind::Cuda {
            return Err(AnnealError::NeedsCuda);
        }
        let started = std::time::Instant::now();
        let (points, d, max_anchors) = (problem.points(), problem.d(), problem.max_anchors());
        let shard = Shard::new(backend, &points.pieces(0..points.len()), d, max_anchors)?;
        shard.stream().synchronize()?;
        Ok(Uploaded {
            shard,
            backend: backend.clone(),
            seconds: started.elapsed().as_secs_f64(),
        })
    }
}

impl Uploaded {
    /// The second half of [`GpuRank::new`]: joins the other ranks through
    /// NCCL (`problem` is the one uploaded).
    pub(crate) fn join(
        self,
        problem: &Problem<'_>,
        id: &[u8; NCCL_ID_BYTES],
        rank: usize,
        world_size: usize,
    ) -> Result<(GpuRank, JoinTimes), AnnealError> {
        let Uploaded {
            mut shard, backend, ..
        } = self;
        let (d, max_anchors) = (problem.d(), problem.max_anchors());
        let started = std::time::Instant::now();
        let ranks = RankCollective::new(shard.stream(), id, rank, world_size)?;
        let nccl_init = started.elapsed().as_secs_f64();
        let started = std::time::Instant::now();
        // NCCL loads a collective's kernels at its first call: one call of
        // each the run makes, on the run's own (zeroed) buffers at their
        // full size, leaves them zero and puts that cost in the setup, not
        // in the first iteration.
        sum_partials(&ranks, &mut shard, max_anchors, d)?;
        ranks.all_reduce_sum(&mut shard.anchors_mut(max_anchors * d)?)?;
        ranks.broadcast(&mut shard.anchors_mut(max_anchors * d)?, 0)?;
        let mut count = shard.stream().alloc_zeros::<u32>(1)?;
        ranks.broadcast(&mut count.view_mut(), 0)?;
        // And NCCL connects two ranks at their first send: one word from
        // each rank's (zeroed) assignments to rank 0's gather buffer.
        let gather = if rank == 0 && world_size > 1 {
            let mut gather = shard
                .stream()
                .alloc_zeros::<u32>(GATHER_PIECE.min(problem.n()))?;
            for peer in 1..world_size {
                ranks.recv(&mut gather.slice_mut(0..1)?, peer)?;
            }
            Some(gather)
        } else {
            ranks.send(&shard.assignments(0..1)?, 0)?;
            None
        };
        shard.stream().synchronize()?;
        let rank = GpuRank {
            // The ranks' partials are summed between the statistics and
            // the update: never alone.
            devices: Devices::new(&backend, problem, vec![shard], rank == 0, false)?,
            ranks,
            gather,
            count,
        };
        let warmup = started.elapsed().as_secs_f64();
        Ok((rank, JoinTimes { nccl_init, warmup }))
    }
}

impl GpuRank {
    /// Ends this process's NCCL operations from another thread (a peer
    /// died).
    pub(crate) fn abort_handle(&self) -> AbortHandle {
        self.ranks.abort_handle()
    }

    /// Points in the whole problem (over every rank).
    pub(crate) fn n(&self) -> usize {
        self.devices.n()
    }

    /// Ranks in the run.
    pub(crate) fn world_size(&self) -> usize {
        self.ranks.world_size()
    }

    /// The element-wise sum over the ranks of each rank's `m × d` `part`,
    /// summed on the devices (`ncclAllReduce`, f32) and read back; every
    /// rank gets the same bits. Leaves the sum as the anchors, whose norms
    /// it does not compute: [`crate::Engine::set_anchors`] follows.
    pub(crate) fn sum_over_ranks(
        &mut self,
        part: &[f32],
        m: usize,
    ) -> Result<Vec<f32>, AnnealError> {
        let md = m * self.devices.d();
        if part.len() != md {
            return Err(AnnealError::internal(format!(
                "{} values to sum over the ranks for {m} anchors of dimension {}",
                part.len(),
                self.devices.d()
            )));
        }
        let d = self.devices.d() as u32;
        let shard = self.devices.first();
        shard.upload_anchors(part, m as u32, d)?;
        self.ranks.all_reduce_sum(&mut shard.anchors_mut(md)?)?;
        shard.anchors(md)
    }

    /// Rank 0's `m` on every rank (`ncclBroadcast` of one word; the others'
    /// `m` is not read), for [`crate::Engine::set_anchors`], which every rank
    /// calls with it.
    fn broadcast_count(&mut self, m: usize) -> Result<usize, AnnealError> {
        let stream = self.devices.first().stream();
        if self.ranks.rank() == 0 {
            let m = u32::try_from(m).map_err(|_| AnnealError::OverU32 {
                what: "the anchors' count",
                value: m,
            })?;
            stream.copy_to_device(&[m], &mut self.count.view_mut())?;
        }
        self.ranks.broadcast(&mut self.count.view_mut(), 0)?;
        Ok(stream.to_host(&self.count.view())?[0] as usize)
    }

    /// Every rank's assignments on rank 0, in row order, through NCCL
    /// (`parts[r]` is rank `r`'s rows, the same on every rank). Rank 0
    /// reads its own into place and receives each other rank's on its
    /// device, a piece at a time, then copies it into place; the others
    /// send theirs from their device. Empty on the other ranks.
    pub(crate) fn gather_assignments(
        &mut self,
        parts: &[std::ops::Range<usize>],
    ) -> Result<Vec<u32>, AnnealError> {
        let (rank, world) = (self.ranks.rank(), self.ranks.world_size());
        let rows = self.devices.rows();
        if parts.len() != world || parts[rank].len() != rows {
            return Err(AnnealError::internal(format!(
                "{} parts of the rows for {world} ranks, rank {rank} holding {rows}",
                parts.len()
            )));
        }
        if rank != 0 {
            let shard = self.devices.first();
            for piece in (0..rows).step_by(GATHER_PIECE) {
                let end = (piece + GATHER_PIECE).min(rows);
                self.ranks.send(&shard.assignments(piece..end)?, 0)?;
            }
            shard.stream().synchronize()?;
            return Ok(Vec::new());
        }
        let mut all = self.devices.take_output();
        all.resize(self.devices.n(), 0);
        let gather = self.gather.as_mut();
        let gather = gather.ok_or_else(|| AnnealError::internal("rank 0 has no gather buffer"))?;
        let shard = self.devices.first();
        shard.assignments_into(0..rows, &mut all[parts[0].clone()])?;
        for (peer, part) in parts.iter().enumerate().skip(1) {
            for piece in part.clone().step_by(GATHER_PIECE) {
                let end = (piece + GATHER_PIECE).min(part.end);
                if end > all.len() {
                    return Err(AnnealError::internal(format!(
                        "rank {peer}'s rows {}..{} are past the {} points",
                        part.start,
                        part.end,
                        all.len()
                    )));
                }
                let mut into = gather.slice_mut(0..end - piece)?;
                self.ranks.recv(&mut into, peer)?;
                shard
                    .stream()
                    .copy_to_host(&gather.slice(0..end - piece)?, &mut all[piece..end])?;
            }
        }
        Ok(all)
    }
}

/// Sums the partial statistics of the first `m` anchors over the ranks of
/// `ranks`, as one NCCL group: one launch for the three sums.
fn sum_partials(
    ranks: &RankCollective,
    shard: &mut Shard,
    m: usize,
    d: usize,
) -> Result<(), AnnealError> {
    let mut partials = shard.partials_mut(m, d)?;
    ranks
        .group()
        .all_reduce_sum(&mut partials.sums)?
        .all_reduce_sum(&mut partials.sumsq)?
        .all_reduce_sum(&mut partials.members)?
        .enqueue()?;
    Ok(())
}

/// What `crate::distributed::GpuRankEngine`'s [`crate::Engine`] calls: the same
/// steps as the one-process engine's, with the rank's own combine and
/// anchors.
impl GpuRank {
    /// Every rank must call this: rank 0's count and then its `anchors` go
    /// from its device to the others' (`ncclBroadcast`); the others' `m`
    /// and `anchors` are not read.
    pub(crate) fn set_anchors(&mut self, anchors: &[f32], m: usize) -> Result<(), AnnealError> {
        let m = self.broadcast_count(m)?;
        let root = self.ranks.rank() == 0;
        let m32 = self.devices.resize(m, root.then_some(anchors))?;
        let d = self.devices.d();
        let shard = self.devices.first();
        if root {
            shard.upload_anchors(anchors, m32, d as u32)?;
        }
        self.ranks.broadcast(&mut shard.anchors_mut(m * d)?, 0)?;
        shard.anchors_changed(m32, d as u32)
    }

    /// [`crate::Engine::step`].
    pub(crate) fn step(&mut self, eta: f32) -> Result<f64, AnnealError> {
        let ranks = &self.ranks;
        self.devices.step(
            &mut |shards, m, d| sum_partials(ranks, &mut shards[0], m, d),
            eta,
        )
    }

    /// [`crate::Engine::run_steps`].
    pub(crate) fn run_steps(
        &mut self,
        etas: &[f32],
        tol: f64,
        previous: Option<f64>,
    ) -> Result<Steps, AnnealError> {
        let ranks = &self.ranks;
        self.devices.run_steps(
            &mut |shards, m, d| sum_partials(ranks, &mut shards[0], m, d),
            etas,
            tol,
            previous,
        )
    }

    /// [`crate::Engine::run_steps_then_read`]: [`GpuRank::run_steps`], with
    /// the pass's reads enqueued behind the last run (every rank computes
    /// the same statistics and neighbours from the same sums).
    pub(crate) fn run_steps_then_read(
        &mut self,
        etas: &[f32],
        tol: f64,
        previous: Option<f64>,
    ) -> Result<(Steps, Option<MaintenanceInputs>), AnnealError> {
        let ranks = &self.ranks;
        self.devices.run_steps_then_read(
            &mut |shards, m, d| sum_partials(ranks, &mut shards[0], m, d),
            etas,
            tol,
            previous,
        )
    }

    /// [`crate::Engine::stats`] (the totals over the ranks).
    pub(crate) fn stats(&mut self) -> Result<AnchorStats, AnnealError> {
        self.devices.stats()
    }

    /// [`crate::Engine::anchors`] (the same on every rank).
    pub(crate) fn anchors(&mut self) -> Result<Vec<f32>, AnnealError> {
        self.devices.anchors()
    }

    /// [`crate::Engine::anchor_neighbors`].
    pub(crate) fn anchor_neighbors(&mut self) -> Result<(Vec<u32>, Vec<f32>), AnnealError> {
        self.devices.anchor_neighbors()
    }
}
