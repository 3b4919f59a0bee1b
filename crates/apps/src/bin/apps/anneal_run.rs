//! What `apps anneal` shares between a run in one process (`anneal_cmd`)
//! and one rank of many (`rank_cmd`), which never import each other: the
//! [`Plan`] resolved once from the arguments, `--out` checked before the
//! run and the index written after it, and the report of the runs.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use kiln_anneal::index::{self, Index, IndexError, IndexOutput, RunRecord};
use kiln_anneal::plan::Plan;
use kiln_anneal::{Params, Problem};

use crate::cli::AnnealArgs;
use crate::npy_args::open_shards;
use crate::output::out;

/// One backend's run.
pub(crate) struct AnnealRun {
    pub(crate) backend: String,
    /// Where it ran, for the index.
    pub(crate) record: RunRecord,
    /// Upload and allocation.
    pub(crate) setup_seconds: f64,
    /// Where the setup went, where measured (the CUDA engine).
    pub(crate) setup_parts: Option<kiln_anneal::SetupParts>,
    /// The iterations.
    pub(crate) seconds: f64,
    /// Where those seconds went.
    pub(crate) phases: kiln_anneal::Phases,
    pub(crate) out: kiln_anneal::Output,
}

/// The run `args` ask for: the shape (`--small`, `--large`, `--n`, `--d`,
/// `--m`) or the `--npy` files' and the parameters, checked before any
/// point is generated or mapped.
pub(crate) fn plan(args: &AnnealArgs) -> Result<Plan> {
    let (n, d, m) = if args.large {
        (10_000, 128, 256)
    } else {
        (1000, 64, 32)
    };
    let n = args.n.map_or(n, |v| v as usize);
    let d = args.d.map_or(d, |v| v as usize);
    let m = args.m.map_or(m, |v| v as usize);
    let params = Params {
        max_iters: args.iters as u32,
        tol: args.tol,
        seed: args.seed,
        ..Params::default()
    };
    if args.npy.is_empty() {
        return Plan::synthetic(n, d, m, params)
            .with_context(|| format!("anneal --n {n} --d {d} --m {m}"));
    }
    let shards = open_shards(&args.npy)?;
    let what = format!("--npy {}, --m {m}", shards.describe());
    Plan::npy(shards, m, params).with_context(|| what)
}

/// The run as messages name it.
pub(crate) fn what(plan: &Plan) -> String {
    let m = plan.m();
    match plan.shards() {
        Some(shards) => format!("--npy {}, --m {m}", shards.describe()),
        None => format!("anneal --n {} --d {} --m {m}", plan.n(), plan.d()),
    }
}

/// `--out DIR` checked before the run (refused, or created beside DIR
/// where the index will be written), the inputs protected; a note is
/// printed for each leftover of an interrupted earlier run.
pub(crate) fn prepare_output(args: &AnnealArgs) -> Result<Option<IndexOutput>> {
    let Some(dir) = &args.out else {
        return Ok(None);
    };
    let inputs: Vec<&Path> = args.npy.iter().map(PathBuf::as_path).collect();
    let output =
        index::prepare_output(dir, args.force, &inputs, "apps anneal").map_err(out_error)?;
    for note in output.notes() {
        eprintln!("apps: {note}");
    }
    Ok(Some(output))
}

/// An [`IndexError`] of `--out`, with the flag that overrides a refusal.
pub(crate) fn out_error(e: IndexError) -> anyhow::Error {
    let exists = |dir: &Path| {
        format!(
            "--out {}: already exists; pass --force to replace it, or choose another directory",
            dir.display()
        )
    };
    match e {
        IndexError::Exists(dir) => anyhow::anyhow!(exists(&dir)),
        // An interrupted run's index was put back first: say so, then refuse.
        IndexError::Output(kiln_output::Error::AfterLeftovers { notes, refusal }) => match *refusal
        {
            kiln_output::Error::Exists { dir, .. } => {
                anyhow::anyhow!("--out: {notes}; then: {}", exists(&dir))
            }
            refusal => anyhow::anyhow!("--out: {notes}; then: {refusal}"),
        },
        other => anyhow::Error::new(other).context("--out"),
    }
}

/// Writes the index of `run` over all of `problem`'s points into the
/// prepared `output` at `dir`, and says so.
pub(crate) fn write_index(
    dir: &Path,
    output: IndexOutput,
    run: &AnnealRun,
    problem: &Problem<'_>,
    plan_files: Vec<index::InputFile>,
) -> Result<()> {
    let index = Index::from_run(&run.out, problem, &run.record, plan_files).map_err(out_error)?;
    for note in index.write_into(output).map_err(out_error)? {
        eprintln!("apps: {note}");
    }
    let world = run.record.world_size;
    out!(
        "index: {} ({} anchors x {}, {} assignments, energy {:.8}{})",
        dir.display(),
        index.meta.m,
        problem.d(),
        problem.n(),
        index.meta.energy,
        if world > 1 {
            format!(", {world} processes")
        } else {
            String::new()
        }
    );
    Ok(())
}

/// `whole run W ms (setup S ms, iterations I ms)`, with `; upload U ms,
/// buffers B ms, prepare P ms of the setup` where the engine measured its
/// parts: from `launched` (this
/// process's start) to its result, what a user waits for, beside the
/// parts that `report` shows (`run.sh ranks` reads this line).
pub(crate) fn whole_run(prefix: &str, launched: std::time::Instant, run: &AnnealRun) -> Result<()> {
    let upload = run
        .setup_parts
        .map(|p| {
            format!(
                "; upload {:.1} ms, buffers {:.1} ms, prepare {:.1} ms of the setup",
                p.upload * 1e3,
                p.buffers * 1e3,
                p.prepare * 1e3
            )
        })
        .unwrap_or_default();
    out!(
        "{prefix}whole run {:.1} ms (setup {:.1} ms, iterations {:.1} ms{upload})",
        launched.elapsed().as_secs_f64() * 1e3,
        run.setup_seconds * 1e3,
        run.seconds * 1e3
    );
    Ok(())
}

pub(crate) fn report(runs: &[AnnealRun]) -> Result<()> {
    out!(
        "{:<32} {:>10} {:>11} {:>6} {:>14} {:>8} {:>12}",
        "backend",
        "setup",
        "iterations",
        "iters",
        "energy",
        "anchors",
        "compression"
    );
    for r in runs {
        out!(
            "{:<32} {:>7.1} ms {:>8.1} ms {:>6} {:>14.8} {:>8} {:>12.5}",
            r.backend,
            r.setup_seconds * 1e3,
            r.seconds * 1e3,
            r.out.iterations,
            r.out.energy,
            r.out.m,
            r.out.compression_ratio
        );
    }
    for r in runs {
        out!("{} time: {}", r.backend, r.phases);
    }
    if let [a, b] = runs {
        let diff = (b.out.energy - a.out.energy).abs() / a.out.energy.abs().max(f64::MIN_POSITIVE);
        out!(
            "speedup {:.2}x of the iterations ({} over {}); energy difference {:.2e} relative; iterations {} vs {}; anchors {} vs {}",
            a.seconds / b.seconds,
            b.backend,
            a.backend,
            diff,
            a.out.iterations,
            b.out.iterations,
            a.out.m,
            b.out.m
        );
    }
    Ok(())
}
