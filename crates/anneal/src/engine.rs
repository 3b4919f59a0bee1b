//! The [`Engine`] trait (the heavy steps a backend does; the driver decides
//! everything else) and the run's first anchors ([`initial_anchors`],
//! [`initial_rows`]), which every engine starts from.

use crate::error::AnnealError;
use crate::input::Problem;
use crate::maintenance;
use crate::rng::Rng;
use crate::vocab::{converged, AnchorStats, MaintenanceInputs, Points, Steps};

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

/// Parts of a device engine's setup, in seconds (every GPU's shard in
/// turn, added up); what they leave of the whole setup went to the engine's
/// own work beside its shards (NCCL communicators, say).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct SetupParts {
    /// The points' copy to the device, to its end.
    pub upload: f64,
    /// Allocating the run's device buffers and finding its kernels.
    pub buffers: f64,
    /// The points' norms and tensor-core copy, to the kernels' end.
    pub prepare: f64,
}

impl std::ops::AddAssign for SetupParts {
    fn add_assign(&mut self, other: Self) {
        self.upload += other.upload;
        self.buffers += other.buffers;
        self.prepare += other.prepare;
    }
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
    /// [`Engine::run_steps`], then, unless the run converged, what the
    /// maintenance pass after it reads ([`Engine::stats`] and
    /// [`Engine::anchor_neighbors`], the same values). The driver calls
    /// this for a run that a pass follows. An engine may enqueue the reads
    /// behind the steps and wait once (the CUDA engine does: a pass's reads
    /// took two more waits, and the GPU idled while the host enqueued the
    /// neighbour search).
    fn run_steps_then_read(
        &mut self,
        etas: &[f32],
        tol: f64,
        previous: Option<f64>,
    ) -> Result<(Steps, Option<MaintenanceInputs>), AnnealError> {
        let steps = self.run_steps(etas, tol, previous)?;
        if steps.converged {
            return Ok((steps, None));
        }
        let stats = self.stats()?;
        let (neighbors, neighbor_dist) = self.anchor_neighbors()?;
        Ok((
            steps,
            Some(MaintenanceInputs {
                stats,
                neighbors,
                neighbor_dist,
            }),
        ))
    }
    /// Where the engine's setup went, where it uploads the points to a
    /// device and times it (the CUDA engine).
    fn setup_parts(&self) -> Option<SetupParts> {
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
