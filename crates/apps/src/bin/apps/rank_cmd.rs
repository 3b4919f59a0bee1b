//! `apps anneal` as one process of several (torchrun's, Slurm's or `apps
//! launch`'s variables set): this rank's rows of the input, on the CPU or
//! on GPU `LOCAL_RANK`, the rendezvous at `MASTER_ADDR:MASTER_PORT`, the
//! run over the TCP collectives (and NCCL between GPUs); rank 0 reports and
//! writes the index, the other ranks write nothing. The setup overlaps
//! what does not wait for the other ranks with what does
//! ([`crate::rank_setup`] times each part): the points are made or mapped
//! while the GPU's context loads, and the rows are checked and uploaded
//! while the rendezvous waits for the slowest rank. The session itself
//! (rendezvous, upload, watchdog, NCCL, barrier) is the library's
//! [`distributed::RankSession`]: this command reads its arguments and
//! input and prints.

use std::io::Write;
use std::time::Instant;

use anyhow::{Context, Result};
use gpu_core::{Backend, BackendKind};
use kiln_anneal::distributed::{self, RankEnv};
use kiln_anneal::index::RunRecord;
use kiln_anneal::Target;

use crate::anneal_run::{self, AnnealRun};
use crate::cli::AnnealArgs;
use crate::output::out;
use crate::rank_setup::{timed, Setup};
use crate::select_backend_on;

/// Test hook: `RANK:ITERATION` makes that rank exit with status 3 once it
/// has run that iteration (what a crashed rank looks like to the others).
pub(crate) const FAULT_ENV: &str = "KILN_FAULT_EXIT_RANK";

fn fault(env: &RankEnv) -> Result<Option<u32>> {
    let Ok(value) = std::env::var(FAULT_ENV) else {
        return Ok(None);
    };
    let parsed = value.split_once(':').and_then(|(r, k)| {
        Some((
            r.trim().parse::<usize>().ok()?,
            k.trim().parse::<u32>().ok()?,
        ))
    });
    match parsed {
        Some((rank, k)) => Ok((rank == env.rank).then_some(k)),
        None => anyhow::bail!("{FAULT_ENV}={value:?} is not RANK:ITERATION; unset it"),
    }
}

pub(crate) fn run(args: &AnnealArgs, env: &RankEnv) -> Result<()> {
    let launched = Instant::now();
    let (rank, world) = (env.rank, env.world_size);
    if args.compare {
        anyhow::bail!("--compare: not in a multi-process run (WORLD_SIZE={world}); run it alone");
    }
    if args.gpus.is_some() {
        anyhow::bail!(
            "--gpus: a multi-process run has one process per device; drop --gpus (WORLD_SIZE={world})"
        );
    }
    let plan = anneal_run::plan(args)?;
    let what = anneal_run::what(&plan);
    let n = plan.n();
    let rows = distributed::rows_of(rank, world, n).with_context(|| {
        format!("WORLD_SIZE={world}: more ranks than the {n} points; every rank needs a row")
    })?;
    let output = if rank == 0 {
        anneal_run::prepare_output(args)?
    } else {
        None
    };
    // Every rank must run this.
    let consensus = plan.consensus();
    let device_need = plan.device_bytes(rows.len());
    // Rank 0 writes the index, whose hash and energy are over every row: it
    // makes (synthetic) or maps them all; the others only their own.
    let held = if output.is_some() { 0..n } else { rows.clone() };
    // A GPU rank runs on GPU LOCAL_RANK of its host (GPU 0 when the
    // launcher left it only one): its context and modules are made while
    // another thread makes or maps the points.
    let visible = std::env::var("CUDA_VISIBLE_DEVICES").ok();
    let ordinal = distributed::gpu_ordinal(env.local_rank, visible.as_deref());
    let mut setup = Setup::default();
    let (backend, input) = std::thread::scope(|scope| {
        let reader = scope.spawn(|| timed(|| plan.load_rows(held)));
        let backend = timed(|| {
            select_backend_on(args.backend.backend, ordinal)
                .with_context(|| format!("local rank {}: its device {ordinal}", env.local_rank))
        });
        let input = reader
            .join()
            .map_err(|_| anyhow::anyhow!("{what}: the thread reading the points panicked"))?;
        anyhow::Ok((backend, input))
    })?;
    setup.context = backend.1;
    setup.points = input.1;
    let backend = backend.0?;
    let input = input.0.map_err(crate::npy_args::npy_error)?;
    let gpu = (backend.kind() == BackendKind::Cuda).then_some(backend);
    if let Some(dev) = gpu.as_ref().and_then(Backend::device) {
        let free = kiln_anneal::memory::device_free(dev.ordinal);
        kiln_anneal::memory::check(&what, "device", device_need, free)?;
    }
    let problem_text = format!(
        "{consensus} backend={}",
        if gpu.is_some() { "cuda" } else { "cpu" }
    );
    let device = match gpu.as_ref().and_then(Backend::device) {
        Some(dev) => format!("gpu {} ({})", dev.ordinal, dev.name),
        None => format!("cpu ({} threads)", rayon::current_num_threads()),
    };
    warn_unset_secret(env);
    out!(
        "rank {rank} of {world}: rows {}..{} of {n}, {device}; rendezvous at {}:{}",
        rows.start,
        rows.end,
        env.master_addr,
        env.master_port
    );
    // The rendezvous waits for the slowest rank: meanwhile this one checks
    // its rows, and the session uploads them. On an error here the process
    // exits, and the rendezvous's thread with it.
    let target = match &gpu {
        Some(backend) => Target::of(backend),
        None => Target::Cpu,
    };
    let meeting = distributed::meet(env, &problem_text, target, refusals())?;
    let parts = input.parts();
    let mut keep = Vec::new();
    let (problem, seconds) = timed(|| input.rank_problem(&parts, rows.clone(), &mut keep));
    setup.rows = seconds;
    let problem = problem.with_context(|| what.clone())?;
    let mut session = meeting.join(&problem)?;
    setup.session = session.times();
    let setup_seconds = launched.elapsed().as_secs_f64();
    out!("rank {rank}: setup {}", setup.describe(setup_seconds));
    let started = Instant::now();
    let exit_after = fault(env)?;
    let mut write_error = None;
    let mut progress = |it: u32, energy: f64, anchors: usize| {
        if exit_after.is_some_and(|k| it >= k) {
            eprintln!("{FAULT_ENV}: rank {rank} exits after iteration {it}");
            std::process::exit(3);
        }
        if rank == 0 && write_error.is_none() {
            write_error = writeln!(
                std::io::stdout().lock(),
                "  iteration {it:>3}: energy {energy:.6}, {anchors} anchors"
            )
            .err();
        }
    };
    let (out, phases) = session.run(&problem, &mut progress)?;
    if let Some(e) = write_error {
        return Err(e.into());
    }
    out!(
        "rank {rank}: done, {} rows; peak host memory {}; time: {phases}",
        rows.len(),
        peak_rss().unwrap_or_else(|| "unknown".into())
    );
    if rank != 0 {
        return Ok(());
    }
    let run = AnnealRun {
        backend: format!(
            "{} x{world} processes",
            if gpu.is_some() { "cuda" } else { "cpu" }
        ),
        record: RunRecord {
            backend: if gpu.is_some() { "cuda" } else { "cpu" },
            device: match gpu.as_ref().and_then(Backend::device) {
                Some(dev) => dev.name.clone(),
                None => format!("cpu ({world} processes)"),
            },
            gpus: if gpu.is_some() { world as u32 } else { 0 },
            world_size: world as u32,
        },
        setup_seconds,
        setup_parts: None,
        seconds: started.elapsed().as_secs_f64(),
        phases,
        out,
    };
    anneal_run::report(std::slice::from_ref(&run))?;
    if let (Some(dir), Some(output)) = (&args.out, output) {
        // The index's hash and energy are over every row: rank 0 made or
        // mapped them all (`held`), and reads them once more.
        let whole = input.problem(&parts).with_context(|| what.clone())?;
        anneal_run::write_index(dir, output, &run, &whole, input.files())?;
    }
    // From this process's start to its result: what a user waits for
    // (`run.sh ranks` compares it with one GPU's).
    anneal_run::whole_run("rank 0: ", launched, &run)?;
    Ok(())
}

/// Refusals shown before the rest are only counted: a flood of strangers
/// does not flood the log.
const SHOWN_REFUSALS: usize = 8;

/// Rank 0's log of the connections the rendezvous turned away: each on one
/// line, up to [`SHOWN_REFUSALS`].
fn refusals() -> impl FnMut(&distributed::Refusal) {
    let mut seen = 0usize;
    move |refusal| {
        seen += 1;
        if seen <= SHOWN_REFUSALS {
            eprintln!("rendezvous: {refusal}");
        }
        if seen == SHOWN_REFUSALS {
            eprintln!("rendezvous: further refused connections are not shown");
        }
    }
}

/// Says, once, that a job without a secret can be joined by another's
/// ranks.
fn warn_unset_secret(env: &RankEnv) {
    if env.secret.source() == distributed::SecretSource::Unset {
        eprintln!(
            "warning: {} is not set and no torchrun or Slurm job id was found: ranks of another \
             job on port {} could join this one; set {0} to the same random value on every rank \
             (apps launch does)",
            distributed::SECRET_ENV,
            env.master_port
        );
    }
}

/// This process's peak resident memory (`VmHWM` of `/proc/self/status`),
/// for the memory figures per rank; `None` off Linux.
fn peak_rss() -> Option<String> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some(format!("{:.1} MiB", kib as f64 / 1024.0))
}
