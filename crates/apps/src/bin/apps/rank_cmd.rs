//! `apps anneal` as one process of several (`WORLD_SIZE` set, by a launcher
//! or `apps launch`): this rank's rows of the input, the rendezvous at
//! `MASTER_ADDR:MASTER_PORT`, the run over the TCP collectives; rank 0
//! reports and writes the index, the other ranks write nothing.

use std::io::Write;
use std::ops::Range;
use std::time::Instant;

use anyhow::{Context, Result};
use apps::anneal::{self, Params, Points};
use apps::distributed::{self, RankEngine, RankEnv, TcpComm};

use crate::anneal_cmd::{index_of, out_error, report, AnnealRun};
use crate::cli::{AnnealArgs, BackendChoice};
use crate::inputs;
use crate::output::out;

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

/// The rows `rows` of `points` (`d` values a row), as one matrix.
fn rows_of_points<'a>(
    points: Points<'a>,
    rows: &Range<usize>,
    d: usize,
    keep: &'a mut Vec<Points<'a>>,
) -> Points<'a> {
    *keep = points.pieces(rows.start * d..rows.end * d);
    let keep: &'a Vec<Points<'a>> = keep;
    match keep.as_slice() {
        [one] => *one,
        many => Points::Parts(many),
    }
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
    if args.backend.backend == Some(BackendChoice::Cuda) {
        anyhow::bail!(
            "--backend cuda: multi-process runs have only the CPU engine so far; \
             pass --backend cpu, or run on this host's GPUs in one process with --gpus all"
        );
    }
    let (mut n, mut d, m) = if args.large {
        (10_000, 128, 256)
    } else {
        (1000, 64, 32)
    };
    n = args.n.map_or(n, |v| v as usize);
    d = args.d.map_or(d, |v| v as usize);
    let m = args.m.map_or(m, |v| v as usize);
    let params = Params {
        max_iters: args.iters as u32,
        tol: args.tol,
        seed: args.seed,
        ..Params::default()
    };
    let shards = if args.npy.is_empty() {
        None
    } else {
        let shards = inputs::open(&args.npy)?;
        (n, d) = (shards.n, shards.d);
        Some(shards)
    };
    let what = match &shards {
        Some(shards) => format!("{}, --m {m}", shards.describe()),
        None => format!("anneal --n {n} --d {d} --m {m}"),
    };
    anneal::check_sizes(n, d, m, &params).with_context(|| what.clone())?;
    let rows = distributed::rows_of(rank, world, n).with_context(|| {
        format!("WORLD_SIZE={world}: more ranks than the {n} points; every rank needs a row")
    })?;
    if rank == 0 {
        if let Some(dir) = &args.out {
            apps::index::check_output(dir, args.force).map_err(out_error)?;
        }
    }
    let dtype = shards.as_ref().map_or("float32", |s| s.dtype.name());
    let loaded = shards.map(inputs::Shards::load).transpose()?;
    let files = loaded.as_ref().map_or_else(Vec::new, inputs::Loaded::files);
    // Every rank must run this: sizes, parameters, dtype and the files'
    // names and rows (hashing the input would make every rank read all of it).
    let problem_text = format!(
        "n={n} d={d} m={m} dtype={dtype} params={params:?} files={:?}",
        files
            .iter()
            .map(|f| format!("{}:{}", f.path, f.rows))
            .collect::<Vec<_>>()
    );
    // Synthetic points are generated whole on each rank (a test shape);
    // files are mapped, and only this rank's rows are read.
    let synthetic = match loaded {
        Some(_) => Vec::new(),
        None => anneal::synthetic_points(n, d, (m / 2).max(1), 0.25, params.seed),
    };
    let parts = match &loaded {
        Some(loaded) => loaded.parts(),
        None => vec![Points::F32(&synthetic)],
    };
    let all = inputs::as_points(&parts);
    let mut keep = Vec::new();
    let mine = rows_of_points(all, &rows, d, &mut keep);
    let problem = anneal::validate_rows(mine, rows.clone(), n, d, m, &params)
        .with_context(|| what.clone())?;
    out!(
        "rank {rank} of {world}: rows {}..{} of {n}, cpu ({} threads); rendezvous at {}:{}",
        rows.start,
        rows.end,
        rayon::current_num_threads(),
        env.master_addr,
        env.master_port
    );
    let started = Instant::now();
    let (link, _) =
        distributed::rendezvous(env, &problem_text, || Ok([0; distributed::NCCL_ID_BYTES]))?;
    let mut engine = RankEngine::new(&problem, TcpComm::new(rank, world, link));
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
    let out = anneal::run_with(&mut engine, &problem, &mut progress)?;
    if let Some(e) = write_error {
        return Err(e.into());
    }
    if rank != 0 {
        out!("rank {rank}: done");
        return Ok(());
    }
    let run = AnnealRun {
        backend: format!("cpu x{world} processes"),
        kind: "cpu",
        device: format!("cpu ({world} processes)"),
        gpus: 0,
        setup_seconds,
        seconds: started.elapsed().as_secs_f64(),
        out,
    };
    report(std::slice::from_ref(&run))?;
    if let Some(dir) = &args.out {
        // The index's hash and energy are over every row: rank 0 reads the
        // whole input once more (mapped pages, not held).
        let whole = anneal::validate(all, n, d, m, &params).with_context(|| what.clone())?;
        let mut index = index_of(&run, &whole, files);
        index.meta.world_size = world as u32;
        index.write(dir, args.force).map_err(out_error)?;
        out!(
            "index: {} ({} anchors x {d}, {n} assignments, energy {:.8}, {world} processes)",
            dir.display(),
            index.meta.m,
            index.meta.energy
        );
    }
    Ok(())
}
