//! What both CUDA engines share ([`Devices`]): the shards of this process,
//! the search among the anchors, the run's sizes, the loop that enqueues
//! iterations without reading back, and the reads of its results. The
//! engines differ only in how the shards' statistics are summed (a
//! `Combine`: over this process's GPUs, or over the ranks) and how the
//! anchors and assignments travel.

use crate::bindings::types::AnnealControl;
use gpu_core::Backend;

use super::super::maintenance::Plan;
use super::neighbors::Neighbors;
use super::shard::Shard;
use super::RUN;
use crate::{
    error::AnnealError,
    input::Problem,
    vocab::{AnchorStats, MaintenanceInputs, Steps},
};

/// Sums every shard's partial statistics of the first `m` anchors (of
/// dimension `d`) into every shard's, between the statistics and the
/// update of each iteration.
pub(super) type Combine<'a> = dyn FnMut(&mut [Shard], usize, usize) -> Result<(), AnnealError> + 'a;

/// The shards of one engine and what the run keeps beside them.
#[derive(Debug)]
pub(super) struct Devices {
    shards: Vec<Shard>,
    /// On the first shard's device.
    neighbors: Neighbors,
    /// Points in the whole problem (over every process).
    n: usize,
    d: u32,
    m: u32,
    max_anchors: usize,
    /// [`super::super::assign_tc::STATS_ENV`] is `1`.
    stats: bool,
    /// One shard in the whole run: nothing sums the shards' partials
    /// between the statistics and the update ([`Shard::fuses`]).
    alone: bool,
    /// The host buffer the assignments are read into at the end, allocated
    /// and written once in the setup so that the end of the run does not
    /// fault its pages in: all the points' (one process, or rank 0 of
    /// several), else empty.
    output: Vec<u32>,
    /// The host buffer the anchors are read into at the end (`max_anchors
    /// × d`), written in the setup for the same reason (at 100K × 4096 ×
    /// 1024 on the H200, a fresh 16 MiB took 15.6 ms to read into, most of
    /// it faulting pages in); handed out once, by [`Devices::anchors`].
    anchors_out: Vec<f32>,
}

impl Devices {
    /// Around `shards` (at least one; the first on `first`'s device);
    /// `root`: this process gathers every point's assignment; `alone`:
    /// these shards are one shard, the run's only one.
    pub(super) fn new(
        first: &Backend,
        problem: &Problem<'_>,
        shards: Vec<Shard>,
        root: bool,
        alone: bool,
    ) -> Result<Self, AnnealError> {
        let (n, d, max_anchors) = (problem.n(), problem.d(), problem.max_anchors());
        let Some(shard) = shards.first() else {
            return Err(AnnealError::internal("a GPU engine without a shard"));
        };
        let alone = alone && shards.len() == 1;
        Ok(Self {
            neighbors: Neighbors::new(
                first,
                shard.stream(),
                max_anchors,
                d,
                shard.uses_tensor_cores(),
            )?,
            shards,
            n,
            d: d as u32,
            m: 0,
            max_anchors,
            stats: std::env::var(super::super::assign_tc::STATS_ENV).is_ok_and(|v| v.trim() == "1"),
            alone,
            // Written, not only allocated (zeroed pages are mapped lazily).
            output: if root { vec![u32::MAX; n] } else { Vec::new() },
            anchors_out: if root {
                vec![f32::MAX; max_anchors * d]
            } else {
                Vec::new()
            },
        })
    }

    /// GPUs the points are spread over.
    pub(super) fn gpus(&self) -> usize {
        self.shards.len()
    }

    /// Points in the whole problem (over every process).
    pub(super) fn n(&self) -> usize {
        self.n
    }

    /// Points this process holds.
    pub(super) fn rows(&self) -> usize {
        self.shards.iter().map(Shard::rows).sum()
    }

    /// The dimension.
    pub(super) fn d(&self) -> usize {
        self.d as usize
    }

    /// The first shard (a rank's only one).
    pub(super) fn first(&mut self) -> &mut Shard {
        &mut self.shards[0]
    }

    /// The host buffer of every point's assignments (see the field), taken.
    pub(super) fn take_output(&mut self) -> Vec<u32> {
        std::mem::take(&mut self.output)
    }

    /// Checks `m` anchors against the run's maximum and, where this process
    /// reads them (`Some`), `anchors` against `m × d`; then makes `m` the
    /// run's.
    pub(super) fn resize(&mut self, m: usize, anchors: Option<&[f32]>) -> Result<u32, AnnealError> {
        let max = self.max_anchors;
        let too_many = || AnnealError::TooManyAnchors { m, max };
        if m > max {
            return Err(too_many());
        }
        // `max` fits u32 (`check_sizes`), so this holds.
        let m32 = u32::try_from(m).map_err(|_| too_many())?;
        if let Some(anchors) = anchors {
            crate::vocab::anchor_values(anchors, m, self.d())?;
        }
        self.m = m32;
        Ok(m32)
    }

    /// Every shard's anchors: `anchors` (`m × d`, checked by
    /// [`Devices::resize`]), and their norms.
    pub(super) fn set_anchors(&mut self, anchors: &[f32]) -> Result<(), AnnealError> {
        let (m, d) = (self.m, self.d);
        for shard in &mut self.shards {
            shard.set_anchors(anchors, m, d)?;
        }
        Ok(())
    }

    /// [`crate::Engine::apply_maintenance`] on every shard's device: the
    /// anchors after `plan`, from the current `m` (which it must start from).
    pub(super) fn apply_plan(&mut self, plan: &Plan) -> Result<(), AnnealError> {
        let (d, capacity) = (self.d, self.max_anchors);
        plan.check(self.m as usize, d as usize, capacity)?;
        self.resize(plan.m_new(), None)?;
        for shard in &mut self.shards {
            shard.apply_plan(plan, d)?;
        }
        Ok(())
    }

    /// The initial anchors `rows` (indices of the problem's points) gathered
    /// on the device, where one shard holds every point; `false` (nothing
    /// done) otherwise.
    pub(super) fn gather_initial(&mut self, rows: &[u32]) -> Result<bool, AnnealError> {
        if self.shards.len() != 1 || self.rows() != self.n {
            return Ok(false);
        }
        self.resize(rows.len(), None)?;
        let d = self.d;
        self.shards[0].gather_anchors(rows, d)?;
        Ok(true)
    }

    /// [`crate::Engine::run_steps`]: runs of up to [`RUN`] iterations on
    /// the device, each read back once.
    pub(super) fn run_steps(
        &mut self,
        combine: &mut Combine<'_>,
        etas: &[f32],
        tol: f64,
        previous: Option<f64>,
    ) -> Result<Steps, AnnealError> {
        self.runs(combine, etas, tol, previous, false)
    }

    /// Runs of up to [`RUN`] iterations until one converges; `then_read`
    /// goes to the last run's [`Devices::run_on_device`].
    fn runs(
        &mut self,
        combine: &mut Combine<'_>,
        etas: &[f32],
        tol: f64,
        previous: Option<f64>,
        then_read: bool,
    ) -> Result<Steps, AnnealError> {
        let mut all = Steps {
            energies: Vec::with_capacity(etas.len()),
            converged: false,
        };
        let mut previous = previous;
        let count = etas.len().div_ceil(RUN);
        for (i, run) in etas.chunks(RUN).enumerate() {
            let last = then_read && i + 1 == count;
            let steps = self.run_on_device(combine, run, tol, previous, last)?;
            all.energies.extend(&steps.energies);
            if steps.converged {
                all.converged = true;
                break;
            }
            previous = all.energies.last().copied();
        }
        Ok(all)
    }

    /// [`crate::Engine::run_steps_then_read`]: [`Devices::run_steps`],
    /// with the statistics' copies and the neighbour search enqueued behind
    /// the last run's iterations, so that the run's one wait covers them
    /// and the host enqueues the search while the device still iterates.
    pub(super) fn run_steps_then_read(
        &mut self,
        combine: &mut Combine<'_>,
        etas: &[f32],
        tol: f64,
        previous: Option<f64>,
    ) -> Result<(Steps, Option<MaintenanceInputs>), AnnealError> {
        let all = self.runs(combine, etas, tol, previous, true)?;
        if all.converged || etas.is_empty() {
            // Converged (the reads, if the last run enqueued them, are not
            // wanted), or no run enqueued them.
            return Ok((all, None));
        }
        let m = self.m;
        let stats = self.shards[0].take_stats(m as usize)?;
        let (neighbors, neighbor_dist) = self.neighbors.take(m)?;
        Ok((
            all,
            Some(MaintenanceInputs {
                stats,
                neighbors,
                neighbor_dist,
            }),
        ))
    }

    /// [`crate::Engine::step`]: one iteration, no convergence test.
    pub(super) fn step(&mut self, combine: &mut Combine<'_>, eta: f32) -> Result<f64, AnnealError> {
        let steps = self.run_on_device(combine, &[eta], 0.0, None, false)?;
        Ok(steps.energies[0])
    }

    /// Runs up to [`RUN`] iterations on the device and reads their
    /// energies; with `then_read`, enqueues after them the copies of the
    /// statistics ([`Shard::start_stats`]) and the neighbour search
    /// ([`Neighbors::enqueue`]), which the same wait covers.
    fn run_on_device(
        &mut self,
        combine: &mut Combine<'_>,
        etas: &[f32],
        tol: f64,
        previous: Option<f64>,
        then_read: bool,
    ) -> Result<Steps, AnnealError> {
        let control = AnnealControl {
            previous: previous.unwrap_or(0.0),
            has_previous: u32::from(previous.is_some()),
            done: 0,
            iterations: 0,
            pad: 0,
        };
        for shard in &mut self.shards {
            shard.start_run(control)?;
        }
        let (m, d, n_total) = (self.m, self.d, self.n as u64);
        let fused = self.shards[0].fuses(self.alone, m, d);
        for (slot, &eta) in etas.iter().enumerate() {
            for shard in &mut self.shards {
                shard.enqueue_partials(m, d, fused)?;
                if self.stats {
                    shard.print_unresolved()?;
                }
            }
            combine(&mut self.shards, m as usize, d as usize)?;
            for shard in &mut self.shards {
                shard.enqueue_update(m, d, eta, n_total, tol, slot as u32, fused)?;
            }
        }
        if then_read {
            self.shards[0].start_stats(m as usize)?;
            self.neighbors
                .enqueue(self.shards[0].anchor_views(), m, d)?;
        }
        self.shards[0].read_run()
    }

    /// [`crate::Engine::stats`] (every shard holds the totals).
    pub(super) fn stats(&mut self) -> Result<AnchorStats, AnnealError> {
        self.shards[0].stats(self.m as usize)
    }

    /// [`crate::Engine::anchors`] (the same on every shard): into the
    /// buffer written in the setup, the first time.
    pub(super) fn anchors(&mut self) -> Result<Vec<f32>, AnnealError> {
        let md = self.m as usize * self.d();
        let mut out = std::mem::take(&mut self.anchors_out);
        if out.len() < md {
            out = vec![0.0; md];
        }
        self.shards[0].anchors_into(&mut out[..md])?;
        out.truncate(md);
        Ok(out)
    }

    /// [`crate::Engine::anchor_neighbors`], on the first shard's device.
    pub(super) fn anchor_neighbors(&mut self) -> Result<(Vec<u32>, Vec<f32>), AnnealError> {
        let (m, d) = (self.m, self.d);
        self.neighbors.search(self.shards[0].anchor_views(), m, d)
    }

    /// The last step's assignments of this process's rows `start..`, in
    /// row order, copied straight into `out` (as many as it holds).
    pub(super) fn assignments_into(
        &self,
        start: usize,
        out: &mut [u32],
    ) -> Result<(), AnnealError> {
        let end = start.saturating_add(out.len());
        let rows = self.rows();
        if end > rows {
            return Err(AnnealError::RowsOutOfRange {
                asked: start..end,
                rows,
            });
        }
        let mut first = 0;
        for shard in &self.shards {
            let last = first + shard.rows();
            let (lo, hi) = (start.max(first), end.min(last));
            if lo < hi {
                shard.assignments_into(lo - first..hi - first, &mut out[lo - start..hi - start])?;
            }
            first = last;
        }
        Ok(())
    }
}
