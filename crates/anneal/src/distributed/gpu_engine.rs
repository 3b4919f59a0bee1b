//! The anneal engine of one GPU process of several ([`GpuRankEngine`]): the
//! CUDA engine over this rank's rows, its statistics summed with the other
//! ranks' on the device by NCCL each iteration. The initial anchors are
//! summed on the devices too (each rank's part holds the anchors among its
//! rows), and rank 0's anchors after maintenance go from its GPU to the
//! others' (`ncclBroadcast`, their count first), and the assignments go
//! to rank 0 by NCCL sends at the end: after the setup, nothing of the
//! run goes over the TCP connections. A [`Watchdog`] aborts NCCL
//! when a peer's connection closes, and the engine then fails with
//! [`DistError::PeerGone`] naming that rank.

use gpu_core::{AbortHandle, Backend, NCCL_ID_BYTES};

use crate::gpu::{GpuRank, JoinTimes, Uploaded};
use crate::{
    engine::Engine,
    error::AnnealError,
    input::Problem,
    vocab::{AnchorStats, MaintenanceInputs, Steps},
};

use super::engine::own_initial_anchors;
use super::{rows_of, DistError, Watchdog};

/// One GPU rank's engine.
#[derive(Debug)]
pub struct GpuRankEngine {
    gpu: GpuRank,
    watchdog: Option<Watchdog>,
}

impl GpuRankEngine {
    /// The engine of rank `rank` of `world_size` on one GPU (`backend`, the
    /// CUDA backend): uploads `problem`'s points (this rank's rows, from
    /// `crate::validate_rows`) and joins the other ranks through NCCL
    /// (`ncclCommInitRank` with rank 0's `id`; blocks until every rank has
    /// joined). Unwatched until [`GpuRankEngine::watched_by`].
    pub fn new(
        backend: &Backend,
        problem: &Problem<'_>,
        id: &[u8; NCCL_ID_BYTES],
        rank: usize,
        world_size: usize,
    ) -> Result<Self, AnnealError> {
        Ok(Self {
            gpu: GpuRank::new(backend, problem, id, rank, world_size)?,
            watchdog: None,
        })
    }

    /// This rank's rows on its GPU (`backend`), before any other rank is
    /// needed: the first half of [`GpuRankEngine::new`], which a rank runs
    /// while it waits at the rendezvous.
    pub fn upload(backend: &Backend, problem: &Problem<'_>) -> Result<UploadedRank, AnnealError> {
        Ok(UploadedRank(GpuRank::upload(backend, problem)?))
    }

    /// Ends this process's NCCL operations from another thread: what a
    /// [`Watchdog`]'s abort calls when a peer dies.
    pub fn abort_handle(&self) -> AbortHandle {
        self.gpu.abort_handle()
    }

    /// This engine, its failures after a peer's death reported as that
    /// death ([`DistError::PeerGone`], which outranks the error NCCL gives
    /// after the abort). The watchdog's connections must stay open for the
    /// run (keep the communicator it watches).
    pub fn watched_by(mut self, watchdog: Watchdog) -> Self {
        self.watchdog = Some(watchdog);
        self
    }

    /// The run is over: peers that exit from now on are no failure.
    pub fn finish(&self) {
        if let Some(w) = &self.watchdog {
            w.finish();
        }
    }

    /// A peer's death, when the watchdog saw one.
    fn peer_gone(&self, during: &str) -> Result<(), AnnealError> {
        match self.watchdog.as_ref().and_then(Watchdog::gone_at) {
            Some((rank, addr)) => Err(AnnealError::Dist(DistError::PeerGone {
                rank,
                addr,
                during: during.into(),
            })),
            None => Ok(()),
        }
    }

    /// `result`, unless a peer died: then the peer's death.
    fn checked<T>(&self, result: Result<T, AnnealError>, during: &str) -> Result<T, AnnealError> {
        match result {
            Err(e) => {
                self.peer_gone(during)?;
                Err(e)
            }
            ok => ok,
        }
    }
}

/// One rank's points on its GPU, not yet joined to the other ranks
/// ([`GpuRankEngine::upload`]).
#[derive(Debug)]
pub struct UploadedRank(Uploaded);

impl UploadedRank {
    /// Seconds the upload took.
    pub fn seconds(&self) -> f64 {
        self.0.seconds
    }

    /// The engine: joins the other ranks through NCCL (rank 0's `id`;
    /// blocks until every rank has joined), `problem` the one uploaded.
    /// Returns where that time went beside it.
    pub fn join(
        self,
        problem: &Problem<'_>,
        id: &[u8; NCCL_ID_BYTES],
        rank: usize,
        world_size: usize,
    ) -> Result<(GpuRankEngine, JoinTimes), AnnealError> {
        let (gpu, times) = self.0.join(problem, id, rank, world_size)?;
        let engine = GpuRankEngine {
            gpu,
            watchdog: None,
        };
        Ok((engine, times))
    }
}

impl Engine for GpuRankEngine {
    fn initial_anchors(&mut self, problem: &Problem<'_>) -> Result<Vec<f32>, AnnealError> {
        let part = own_initial_anchors(problem)?;
        let result = self.gpu.sum_over_ranks(&part, problem.m());
        self.checked(result, "assembling the initial anchors")
    }

    /// Rank 0's anchors on every rank: their count, then the anchors, from
    /// its GPU (the other ranks' `anchors` and `m` are not read).
    fn set_anchors(&mut self, anchors: &[f32], m: usize) -> Result<(), AnnealError> {
        let result = self.gpu.set_anchors(anchors, m);
        self.checked(result, "setting the anchors")
    }

    fn step(&mut self, eta: f32) -> Result<f64, AnnealError> {
        self.peer_gone("a step")?;
        let result = self.gpu.step(eta);
        self.peer_gone("a step")?;
        result
    }

    /// A peer that left before or during the steps fails them: NCCL's sums
    /// after an abort are not the run's.
    fn run_steps(
        &mut self,
        etas: &[f32],
        tol: f64,
        previous: Option<f64>,
    ) -> Result<Steps, AnnealError> {
        self.peer_gone("the iterations")?;
        let result = self.gpu.run_steps(etas, tol, previous);
        self.peer_gone("the iterations")?;
        result
    }

    /// As [`Engine::run_steps`], the pass's reads with it.
    fn run_steps_then_read(
        &mut self,
        etas: &[f32],
        tol: f64,
        previous: Option<f64>,
    ) -> Result<(Steps, Option<MaintenanceInputs>), AnnealError> {
        self.peer_gone("the iterations")?;
        let result = self.gpu.run_steps_then_read(etas, tol, previous);
        self.peer_gone("the iterations")?;
        result
    }

    fn stats(&mut self) -> Result<AnchorStats, AnnealError> {
        let result = self.gpu.stats();
        self.checked(result, "reading the statistics")
    }

    fn anchors(&mut self) -> Result<Vec<f32>, AnnealError> {
        let result = self.gpu.anchors();
        self.checked(result, "reading the anchors")
    }

    fn anchor_neighbors(&mut self) -> Result<(Vec<u32>, Vec<f32>), AnnealError> {
        let result = self.gpu.anchor_neighbors();
        self.checked(result, "the anchors' neighbours")
    }

    /// Every point's anchor on rank 0, in row order, sent from the other
    /// ranks' devices by NCCL (each rank's rows as [`rows_of`] splits
    /// them); nothing on the others.
    fn assignments(&mut self) -> Result<Vec<u32>, AnnealError> {
        let (n, world) = (self.gpu.n(), self.gpu.world_size());
        let parts = (0..world)
            .map(|r| rows_of(r, world, n).ok_or(AnnealError::MoreRanksThanPoints { world, n }))
            .collect::<Result<Vec<_>, _>>()?;
        let result = self.gpu.gather_assignments(&parts);
        self.checked(result, "gathering the assignments")
    }
}
