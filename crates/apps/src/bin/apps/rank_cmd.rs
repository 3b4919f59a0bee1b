//! `apps anneal` as one process of several (`WORLD_SIZE` set, by a launcher
//! or `apps launch`): this rank's rows of the input, on the CPU or on GPU
//! `LOCAL_RANK`, the rendezvous at `MASTER_ADDR:MASTER_PORT`, the run over
//! the TCP collectives (and NCCL between GPUs); rank 0 reports and writes
//! the index, the other ranks write nothing.

use std::io::Write;
use std::sync::{Arc, OnceLock};
use std::time::Instant;

use anyhow::{Context, Result};
use gpu_core::{AbortHandle, Backend, BackendKind};
use kiln_anneal::distributed::{self, GpuRankEngine, RankEngine, RankEnv, TcpComm, Watchdog};
use kiln_anneal::index::RunRecord;

use crate::anneal_run::{self, AnnealRun};
use crate::cli::AnnealArgs;
use crate::output::out;
use crate::select_backend;

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

/// This rank's engine: the CPU's, or one GPU's.
enum Ranked {
    Cpu(Box<RankEngine<TcpComm>>),
    Gpu(Box<GpuRankEngine>),
}

pub(crate) fn run(args: &AnnealArgs, env: &RankEnv) -> Result<()> {
    let (rank, world) = (env.rank, env.world_size);
    if args.compare {
        anyhow::bail!("--compare: not in a multi-process run (WORLD_SIZE={world}); run it alone");
    }
    if args.gpus.is_some() {
        anyhow::bail!(
            "--gpus: a multi-process run has one process per device; drop --gpus (WORLD_SIZE={world})"
        );
    }
    // A GPU rank runs on GPU LOCAL_RANK of its host (GPU 0 when the
    // launcher left it only one).
    let visible = std::env::var("CUDA_VISIBLE_DEVICES").ok();
    let ordinal = distributed::gpu_ordinal(env.local_rank, visible.as_deref());
    let gpu = match select_backend(args.backend.backend)?.kind() {
        BackendKind::Cuda => Some(
            Backend::cuda(ordinal, cuda_sys::modules::ALL).with_context(|| {
                format!("local rank {}: its gpu {ordinal}", env.local_rank)
            })?,
        ),
        _ => None,
    };
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
    if let Some(dev) = gpu.as_ref().and_then(Backend::device) {
        plan.check_device(&what, rows.len(), dev.ordinal)?;
    }
    // Every rank must run this.
    let problem_text = format!(
        "{} backend={}",
        plan.consensus(),
        if gpu.is_some() { "cuda" } else { "cpu" }
    );
    // Synthetic points are generated whole on each rank (a test shape);
    // files are mapped, and only this rank's rows are read.
    let input = plan.load().map_err(crate::npy_args::npy_error)?;
    let parts = input.parts();
    let mut keep = Vec::new();
    let problem = input
        .rank_problem(&parts, rows.clone(), &mut keep)
        .with_context(|| what.clone())?;
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
    let started = Instant::now();
    // Rank 0 makes the NCCL id the others get at the rendezvous.
    let id = match (&gpu, rank) {
        (Some(_), 0) => gpu_core::nccl_unique_id()?,
        _ => [0; distributed::NCCL_ID_BYTES],
    };
    let (link, id) = distributed::rendezvous(env, &problem_text, || Ok(id), refusals())?;
    let mut comm = TcpComm::new(rank, world, link);
    let mut engine = match &gpu {
        None => {
            barrier(&mut comm)?;
            Ranked::Cpu(Box::new(RankEngine::new(&problem, comm)))
        }
        Some(backend) => {
            // Watched from before NCCL's setup, which waits for every rank:
            // a peer that dies then ends this process, naming it; later,
            // NCCL is aborted and the engine names it.
            let slot: Arc<OnceLock<AbortHandle>> = Arc::new(OnceLock::new());
            let abort = Arc::clone(&slot);
            let watchdog = Watchdog::start(&comm, move |gone| match abort.get() {
                Some(handle) => handle.abort(),
                None => {
                    eprintln!(
                        "error: rank {gone} closed its connection during nccl's setup: \
                         that process exited or was killed; see its output"
                    );
                    std::process::exit(1);
                }
            })?;
            let engine = GpuRankEngine::new(backend, &problem, &id, rank, world)?;
            let _ = slot.set(engine.abort_handle());
            backend.synchronize()?;
            barrier(&mut comm)?;
            // `comm` stays open to the end of the run: the watchdog watches
            // its connections, and closing them tells the peers this rank left.
            Ranked::Gpu(Box::new(engine.watched_by(watchdog)))
        }
    };
    let setup_seconds = started.elapsed().as_secs_f64();
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
    let (out, phases) = match &mut engine {
        Ranked::Cpu(engine) => kiln_anneal::run_timed(engine.as_mut(), &problem, &mut progress)?,
        Ranked::Gpu(engine) => {
            let run = kiln_anneal::run_timed(engine.as_mut(), &problem, &mut progress)?;
            engine.finish();
            run
        }
    };
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
        seconds: started.elapsed().as_secs_f64(),
        phases,
        out,
    };
    anneal_run::report(std::slice::from_ref(&run))?;
    if let (Some(dir), Some(output)) = (&args.out, output) {
        // The index's hash and energy are over every row: rank 0 reads the
        // whole input once more (mapped pages, not held).
        let whole = input.problem(&parts).with_context(|| what.clone())?;
        anneal_run::write_index(dir, output, &run, &whole, input.files())?;
    }
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

/// Waits until every rank has finished its setup, so that each rank's run
/// (and its timing) starts together, not while a slower rank still sets up.
fn barrier(comm: &mut TcpComm) -> Result<()> {
    use distributed::Communicator;
    comm.all_reduce_sum(&mut [0.0], "the end of the setup")?;
    Ok(())
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
