//! The driver ([`run_with`], [`run_timed`]): the algorithm's decisions,
//! the same for every engine, which does the heavy steps; and where a
//! run's time went ([`Phases`]).

use crate::vocab::{MaintenanceInputs, Output};
use crate::{engine::Engine, error::AnnealError, input::Problem, maintenance};

/// Progress of a run, for a CLI to print.
pub type Progress<'a> = &'a mut dyn FnMut(u32, f64, usize);

/// Where a run's time went ([`run_timed`]), wall-clock on the calling
/// thread: what a slow run spends its time on, and what does not shrink
/// with more GPUs. An engine that enqueues work without waiting (the GPU's
/// `set_anchors`) has it counted in the phase that next waits for it.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Phases {
    /// The initial anchors, assembled and set ([`Engine::start`]).
    pub start: std::time::Duration,
    /// [`Engine::run_steps`] (or [`Engine::run_steps_then_read`], for a
    /// run a maintenance pass follows): the iterations, and the pass's
    /// reads where the engine makes them with the run (the CUDA engine).
    pub iterations: std::time::Duration,
    /// Calls of [`Engine::run_steps`] and [`Engine::run_steps_then_read`].
    pub runs: u32,
    /// Maintenance passes: reading the statistics and the anchors'
    /// neighbours, deciding, and moving the anchors as decided.
    pub maintenance: std::time::Duration,
    /// Maintenance passes run (whether or not they changed the anchors).
    pub passes: u32,
    /// The part of [`Phases::maintenance`] spent reading the statistics
    /// and the anchors' neighbours from the engine (near zero where
    /// [`Engine::run_steps_then_read`] read them with the run).
    pub reading: std::time::Duration,
    /// The part of [`Phases::maintenance`] spent moving the anchors as the
    /// pass decided ([`Engine::apply_maintenance`]).
    pub setting: std::time::Duration,
    /// Reading the assignments and the anchors at the end.
    pub output: std::time::Duration,
}

impl std::fmt::Display for Phases {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let ms = |d: std::time::Duration| d.as_secs_f64() * 1e3;
        write!(
            f,
            "start {:.1} ms, iterations {:.1} ms in {} run{}, maintenance {:.1} ms in {} pass{} \
             (reading {:.1} ms, setting {:.1} ms), output {:.1} ms",
            ms(self.start),
            ms(self.iterations),
            self.runs,
            if self.runs == 1 { "" } else { "s" },
            ms(self.maintenance),
            self.passes,
            if self.passes == 1 { "" } else { "es" },
            ms(self.reading),
            ms(self.setting),
            ms(self.output)
        )
    }
}

/// Runs the algorithm with `engine` (already holding `problem`'s points).
pub fn run_with(
    engine: &mut dyn Engine,
    problem: &Problem<'_>,
    progress: Progress<'_>,
) -> Result<Output, AnnealError> {
    run_timed(engine, problem, progress).map(|(out, _)| out)
}

/// [`run_with`], and where its time went.
pub fn run_timed(
    engine: &mut dyn Engine,
    problem: &Problem<'_>,
    progress: Progress<'_>,
) -> Result<(Output, Phases), AnnealError> {
    use std::time::Instant;
    let (n, d, m) = (problem.n(), problem.d(), problem.m());
    let (params, max_anchors) = (problem.params(), problem.max_anchors());
    let mut phases = Phases::default();
    let mut m_now = m;
    let started = Instant::now();
    engine.start(problem)?;
    phases.start = started.elapsed();
    let mut temperature = params.t0;
    let mut previous: Option<f64> = None;
    let mut history = Vec::new();
    let mut maintenance_log = Vec::new();
    let mut iterations = 0;
    // Runs of iterations up to the next maintenance pass: the engine gets
    // each run at once, with the steps' etas (the temperature schedule does
    // not depend on the energies).
    while iterations < params.max_iters {
        let last = iterations
            .checked_div(params.maintain_every)
            .map_or(params.max_iters, |runs| {
                ((runs + 1) * params.maintain_every).min(params.max_iters)
            });
        let etas: Vec<f32> = (iterations..last)
            .map(|_| {
                let eta = 1.0 / (1.0 + temperature);
                temperature *= params.cooling;
                eta
            })
            .collect();
        // A pass follows this run unless it converges (the test after it,
        // with `iterations` then at `last`): the engine may read what the
        // pass needs with the run's results.
        let pass_follows = params.maintain_every > 0
            && last % params.maintain_every == 0
            && last < params.max_iters;
        let started = Instant::now();
        let (steps, mut inputs) = if pass_follows {
            engine.run_steps_then_read(&etas, params.tol, previous)?
        } else {
            (engine.run_steps(&etas, params.tol, previous)?, None)
        };
        phases.iterations += started.elapsed();
        phases.runs += 1;
        for &energy in &steps.energies {
            iterations += 1;
            if !energy.is_finite() {
                return Err(AnnealError::NonFiniteEnergy {
                    iteration: iterations,
                    energy,
                });
            }
            history.push(energy);
            progress(iterations, energy, m_now);
        }
        if steps.converged {
            break;
        }
        let energy = *history.last().expect("a run has at least one step");
        previous = Some(energy);
        let it = iterations;
        if params.maintain_every > 0 && it % params.maintain_every == 0 && it < params.max_iters {
            let started = Instant::now();
            let read = match inputs.take() {
                Some(read) => read,
                None => {
                    let stats = engine.stats()?;
                    let (neighbors, neighbor_dist) = engine.anchor_neighbors()?;
                    MaintenanceInputs {
                        stats,
                        neighbors,
                        neighbor_dist,
                    }
                }
            };
            phases.reading += started.elapsed();
            let input = maintenance::PlanInput {
                d,
                stats: &read.stats,
                neighbors: &read.neighbors,
                neighbor_dist: &read.neighbor_dist,
                energy,
                n,
                iteration: it,
                max_anchors,
            };
            if let Some(plan) = maintenance::plan(input, params)? {
                m_now = plan.m_new();
                let setting = Instant::now();
                engine.apply_maintenance(&plan, d)?;
                phases.setting += setting.elapsed();
                maintenance_log.push((it, plan.merged, plan.split));
                previous = None;
            }
            phases.maintenance += started.elapsed();
            phases.passes += 1;
        }
    }
    let started = Instant::now();
    let assignments = engine.assignments()?;
    let anchors = engine.anchors()?;
    phases.output = started.elapsed();
    let out = Output {
        anchors,
        m: m_now,
        assignments,
        iterations,
        energy: *history.last().unwrap_or(&f64::NAN),
        history,
        compression_ratio: m_now as f64 / n as f64,
        maintenance: maintenance_log,
    };
    Ok((out, phases))
}
