//! The anneal engine of one GPU process of several ([`GpuRankEngine`]): the
//! GPU engine over this rank's rows, its statistics summed with the other
//! ranks' on the device by NCCL each iteration; the initial anchors, rank
//! 0's anchors after maintenance and the assignments go over the TCP
//! connections (they are on the host anyway). A [`Watchdog`] aborts NCCL
//! when a peer's connection closes, and the engine then names that rank.

use crate::anneal::gpu::GpuEngine;
use crate::anneal::{AnchorStats, AnnealError, Engine, Problem, Steps};

use super::engine::{broadcast_anchors, comm_error, gather_assignments, initial_anchors};
use super::{Communicator, DistError, Watchdog};

/// One GPU rank's engine.
#[derive(Debug)]
pub struct GpuRankEngine<C> {
    gpu: GpuEngine,
    comm: C,
    watchdog: Option<Watchdog>,
    d: usize,
}

impl<C: Communicator> GpuRankEngine<C> {
    /// `gpu` (from [`GpuEngine::for_rank`] over `problem`'s rows) with the
    /// host-side collectives `comm` and the `watchdog` of its peers.
    pub fn new(gpu: GpuEngine, problem: &Problem<'_>, comm: C, watchdog: Option<Watchdog>) -> Self {
        Self {
            gpu,
            comm,
            watchdog,
            d: problem.d(),
        }
    }

    /// The run is over: peers that exit from now on are no failure.
    pub fn finish(&self) {
        if let Some(w) = &self.watchdog {
            w.finish();
        }
    }

    /// A peer's death, when the watchdog saw one (it outranks the error
    /// NCCL gives after the abort).
    fn peer_gone(&self, during: &str) -> Result<(), AnnealError> {
        match self.watchdog.as_ref().and_then(Watchdog::gone) {
            Some(rank) => Err(comm_error(DistError::PeerGone {
                rank,
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

impl<C: Communicator> Engine for GpuRankEngine<C> {
    fn initial_anchors(&mut self, problem: &Problem<'_>) -> Result<Vec<f32>, AnnealError> {
        initial_anchors(&mut self.comm, problem)
    }

    fn set_anchors(&mut self, anchors: &[f32], m: usize) -> Result<(), AnnealError> {
        let (anchors, m) = broadcast_anchors(&mut self.comm, anchors, m, self.d)?;
        let result = self.gpu.set_anchors(&anchors, m);
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

    /// Every point's anchor on rank 0, in row order; nothing on the others.
    fn assignments(&mut self) -> Result<Vec<u32>, AnnealError> {
        let result = self.gpu.assignments();
        let mine = self.checked(result, "reading the assignments")?;
        gather_assignments(&mut self.comm, &mine)
    }
}
