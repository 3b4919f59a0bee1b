//! `apps anneal`: sizes checked (against the memory there is) before the
//! points are generated or mapped, the input validated once into a
//! [`Problem`], then run on the CPU, one GPU or several, and compared; with
//! `--out`, the index written (checked to be writable before the run).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, Result};
use apps::describe_backend;
use gpu_core::{Backend, BackendKind, Devices, GpuCount};
use kiln_anneal::index::{self, Index, IndexError, IndexMeta, IndexOutput, InputFile, InputRecord};
use kiln_anneal::memory;
use kiln_anneal::{Dtype, Params, Points, Problem};

use crate::cli::{AnnealArgs, BackendChoice};
use crate::inputs;
use crate::output::out;
use crate::{backend_choice, select_backend, setting};
#[cfg(feature = "wgpu")]
use kiln_anneal::wgpu::{Adapters, WgpuDevice, WgpuEngine};

/// One backend's run.
pub(crate) struct AnnealRun {
    pub(crate) backend: String,
    /// `"cpu"`, `"cuda"` or `"wgpu"`, for the index.
    pub(crate) kind: &'static str,
    /// The GPU's name, or the CPU's threads, for the index.
    pub(crate) device: String,
    /// GPUs it ran on (0: the CPU).
    pub(crate) gpus: usize,
    /// Upload and allocation.
    pub(crate) setup_seconds: f64,
    /// The iterations.
    pub(crate) seconds: f64,
    /// Where those seconds went.
    pub(crate) phases: kiln_anneal::Phases,
    pub(crate) out: kiln_anneal::Output,
}

/// Where one run goes: one backend, or the points sharded over GPUs.
#[derive(Clone, Copy)]
enum Target<'a> {
    One(&'a Backend),
    Gpus(&'a [Backend]),
    /// A GPU (or a software adapter) through wgpu.
    #[cfg(feature = "wgpu")]
    Wgpu(&'a WgpuDevice),
}

/// What a one-process run without `--gpus` or `--compare` runs on.
enum Single {
    /// CUDA or the CPU.
    Backend(Backend),
    #[cfg(feature = "wgpu")]
    Wgpu(Box<WgpuDevice>),
}

impl Single {
    fn target(&self) -> Target<'_> {
        match self {
            Single::Backend(backend) => Target::One(backend),
            #[cfg(feature = "wgpu")]
            Single::Wgpu(device) => Target::Wgpu(device),
        }
    }
}

/// `--backend` for `apps anneal`: as for the other commands, plus wgpu, by
/// name or in the automatic choice after CUDA (a hardware adapter only).
fn select_single(choice: Option<BackendChoice>) -> Result<Single> {
    let (resolved, source) = backend_choice(choice)?;
    match resolved {
        BackendChoice::Wgpu => open_wgpu(&source),
        BackendChoice::Auto => auto_after_cuda(select_backend(Some(BackendChoice::Auto))?),
        _ => Ok(Single::Backend(select_backend(choice)?)),
    }
}

#[cfg(feature = "wgpu")]
fn open_wgpu(source: &str) -> Result<Single> {
    WgpuDevice::open(Adapters::Any)
        .map(|device| Single::Wgpu(Box::new(device)))
        .map_err(|e| {
            anyhow::anyhow!(
                "{}: {e}; install a Vulkan driver (Mesa's lavapipe for a software one), or use cpu or auto",
                setting(source, "wgpu")
            )
        })
}

#[cfg(not(feature = "wgpu"))]
fn open_wgpu(source: &str) -> Result<Single> {
    Err(anyhow::anyhow!(
        "{}: this `apps` was built without the `wgpu` feature; rebuild it with \
         `cargo build -p apps --features wgpu`, or use cpu or auto",
        setting(source, "wgpu")
    ))
}

/// The automatic choice: CUDA when it runs, else a hardware GPU through
/// wgpu, else the CPU; says why each was passed over.
#[cfg(feature = "wgpu")]
fn auto_after_cuda(backend: Backend) -> Result<Single> {
    let Some(reason) = backend.cpu_reason() else {
        return Ok(Single::Backend(backend));
    };
    match WgpuDevice::open(Adapters::Hardware) {
        Ok(device) => {
            out!("cuda: not used ({reason}); a GPU through wgpu instead");
            Ok(Single::Wgpu(Box::new(device)))
        }
        Err(e) => {
            out!("wgpu: not used ({e})");
            Ok(Single::Backend(backend))
        }
    }
}

#[cfg(not(feature = "wgpu"))]
fn auto_after_cuda(backend: Backend) -> Result<Single> {
    Ok(Single::Backend(backend))
}

impl Target<'_> {
    fn name(&self) -> String {
        match self {
            Target::One(backend) => match backend.kind() {
                BackendKind::Cuda => backend
                    .device()
                    .map_or("cuda".to_string(), |dev| format!("cuda ({})", dev.name)),
                _ => format!("cpu ({} threads)", rayon::current_num_threads()),
            },
            Target::Gpus(backends) => format!(
                "cuda x{} ({})",
                backends.len(),
                backends[0].device().map_or("?", |dev| dev.name.as_str())
            ),
            #[cfg(feature = "wgpu")]
            Target::Wgpu(device) => format!("wgpu ({})", device.name()),
        }
    }

    /// The GPUs it runs on (none: the CPU engine).
    fn gpus(&self) -> &[Backend] {
        match self {
            Target::One(backend) if backend.kind() == BackendKind::Cuda => {
                std::slice::from_ref(*backend)
            }
            Target::One(_) => &[],
            Target::Gpus(backends) => backends,
            #[cfg(feature = "wgpu")]
            Target::Wgpu(_) => &[],
        }
    }

    /// Whether it runs the CPU engine.
    fn is_cpu(&self) -> bool {
        match self {
            Target::One(backend) => backend.kind() != BackendKind::Cuda,
            Target::Gpus(_) => false,
            #[cfg(feature = "wgpu")]
            Target::Wgpu(_) => false,
        }
    }

    /// Refuses a run that needs more memory than the host or a GPU has;
    /// `held`: bytes of the points in host memory (0 when mapped).
    fn check_memory(
        &self,
        what: &str,
        (n, d, max_anchors): (usize, usize, usize),
        held: u64,
        dtype: Dtype,
    ) -> Result<()> {
        let gpus = self.gpus();
        // The CPU engine keeps its own copies of the points on the host;
        // the GPU engines (wgpu too) do not. wgpu tells no free device
        // memory: an allocation it cannot make fails the run instead.
        memory::check_host(
            what,
            kiln_anneal::host_bytes(n, d, max_anchors, held, self.is_cpu()),
        )?;
        for backend in gpus {
            if let Some(dev) = backend.device() {
                let rows = n.div_ceil(gpus.len());
                let needed = kiln_anneal::device_bytes(rows, d, max_anchors, dtype, 1);
                memory::check(what, "device", needed, memory::device_free(dev.ordinal))?;
            }
        }
        Ok(())
    }
}

fn anneal_on(target: Target<'_>, problem: &Problem<'_>) -> Result<AnnealRun> {
    match target {
        Target::One(backend) => out!("{}", describe_backend(backend)),
        Target::Gpus(backends) => {
            for (i, backend) in backends.iter().enumerate() {
                out!("gpu {i}: {}", describe_backend(backend));
            }
        }
        #[cfg(feature = "wgpu")]
        Target::Wgpu(device) => out!("backend: wgpu ({})", device.name()),
    }
    // Setup (upload, allocation, NCCL communicators) is timed apart from
    // the iterations: the speedup compares the iterations.
    let started = Instant::now();
    let backends = target.gpus();
    let mut engine: Box<dyn kiln_anneal::Engine> =
        if let Some(engine) = wgpu_engine(target, problem)? {
            engine
        } else if backends.is_empty() {
            Box::new(kiln_anneal::cpu::CpuEngine::new(problem))
        } else {
            let engine = kiln_anneal::gpu::GpuEngine::sharded(backends, problem)?;
            for backend in backends {
                backend.synchronize()?;
            }
            Box::new(engine)
        };
    let setup_seconds = started.elapsed().as_secs_f64();
    let started = Instant::now();
    let (n, d, m) = (problem.n(), problem.d(), problem.m());
    let long = n.saturating_mul(d).saturating_mul(m) > 1 << 28;
    let mut write_error = None;
    let mut progress = |it: u32, energy: f64, anchors: usize| {
        if long && write_error.is_none() && (it == 1 || it.is_multiple_of(5)) {
            write_error = writeln!(
                std::io::stdout().lock(),
                "  iteration {it:>3}: energy {energy:.6}, {anchors} anchors, {:.2} s",
                started.elapsed().as_secs_f64()
            )
            .err();
        }
    };
    let (out, phases) = kiln_anneal::run_timed(engine.as_mut(), problem, &mut progress)?;
    if let Some(e) = write_error {
        return Err(e.into());
    }
    let (kind, device) = match (backends.first().and_then(|b| b.device()), target) {
        (Some(dev), _) => ("cuda", dev.name.clone()),
        #[cfg(feature = "wgpu")]
        (None, Target::Wgpu(device)) => ("wgpu", device.name()),
        (None, _) => (
            "cpu",
            format!("cpu ({} threads)", rayon::current_num_threads()),
        ),
    };
    Ok(AnnealRun {
        backend: target.name(),
        kind,
        device,
        gpus: backends.len(),
        setup_seconds,
        seconds: started.elapsed().as_secs_f64(),
        phases,
        out,
    })
}

/// The wgpu engine, for a wgpu target (the points uploaded).
#[cfg(feature = "wgpu")]
fn wgpu_engine(
    target: Target<'_>,
    problem: &Problem<'_>,
) -> Result<Option<Box<dyn kiln_anneal::Engine>>> {
    Ok(match target {
        Target::Wgpu(device) => Some(Box::new(WgpuEngine::new(device, problem)?)),
        _ => None,
    })
}

#[cfg(not(feature = "wgpu"))]
fn wgpu_engine(
    _target: Target<'_>,
    _problem: &Problem<'_>,
) -> Result<Option<Box<dyn kiln_anneal::Engine>>> {
    Ok(None)
}

/// The GPUs `--gpus` asks for; says what it found. `None`: no GPU could be
/// used and `all` was asked for, so the run goes to the CPU.
fn open_gpus(count: GpuCount) -> Result<Option<Devices>> {
    match Devices::open(cuda_sys::modules::ALL, count) {
        Ok(devices) => {
            let found = devices.len();
            if found > 1 && !gpu_core::nccl_available() {
                out!(
                    "--gpus: {found} GPUs, but libnccl cannot be loaded: running on 1 GPU \
                     (install NCCL, libnccl.so.2, to use them all)"
                );
                return Ok(Some(Devices::open(
                    cuda_sys::modules::ALL,
                    GpuCount::Exactly(1),
                )?));
            }
            if matches!(count, GpuCount::All) {
                out!(
                    "--gpus all: {found} GPU{} found, running on {}",
                    if found == 1 { "" } else { "s" },
                    if found == 1 { "it" } else { "all of them" }
                );
            }
            Ok(Some(devices))
        }
        Err(e) if matches!(count, GpuCount::All) => {
            out!("--gpus all: no usable GPU ({e}); running on the CPU");
            Ok(None)
        }
        Err(e) => Err(anyhow::Error::new(e).context(format!("--gpus {count}"))),
    }
}

pub(crate) fn run(args: &AnnealArgs) -> Result<()> {
    // One process of several (a launcher set WORLD_SIZE).
    if let Some(env) = kiln_anneal::distributed::RankEnv::from_env()? {
        return crate::rank_cmd::run(args, &env);
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
    let dtype = shards.as_ref().map_or(Dtype::F32, |s| s.dtype);
    // Synthetic points are generated into memory; files are mapped.
    let held = shards.as_ref().map_or_else(
        || (n as u64).saturating_mul(d as u64).saturating_mul(4),
        inputs::Shards::held_bytes,
    );
    let max_anchors = kiln_anneal::check_sizes(n, d, m, &params).with_context(|| what.clone())?;
    let output = prepare_output(args)?;
    let devices = match args.gpus {
        Some(count) => open_gpus(count)?,
        None => None,
    };
    let cpu = Backend::cpu();
    let gpu = if args.compare && devices.is_none() {
        Some(Backend::auto(cuda_sys::modules::ALL)?)
    } else {
        None
    };
    let single = if devices.is_none() && !args.compare {
        // `--gpus all` with no GPU lands here too: the CPU.
        Some(if args.gpus.is_some() {
            Single::Backend(cpu.clone())
        } else {
            select_single(args.backend.backend)?
        })
    } else {
        None
    };
    let targets: Vec<Target<'_>> = match (&devices, &gpu, &single) {
        (Some(devices), _, _) if args.compare && devices.len() > 1 => vec![
            Target::Gpus(&devices.backends()[..1]),
            Target::Gpus(devices.backends()),
        ],
        (Some(devices), _, _) if args.compare => {
            vec![Target::One(&cpu), Target::Gpus(devices.backends())]
        }
        (Some(devices), _, _) => vec![Target::Gpus(devices.backends())],
        (None, Some(gpu), _) => match gpu.cpu_reason() {
            None => vec![Target::One(&cpu), Target::One(gpu)],
            Some(reason) => {
                out!("--compare: no GPU to compare with ({reason}); running the CPU side only");
                vec![Target::One(&cpu)]
            }
        },
        (None, None, Some(single)) => vec![single.target()],
        (None, None, None) => unreachable!("one of the three is set"),
    };
    for target in &targets {
        target.check_memory(&what, (n, d, max_anchors), held, dtype)?;
    }
    let loaded = shards.map(inputs::Shards::load).transpose()?;
    let synthetic = match loaded {
        Some(_) => Vec::new(),
        None => kiln_anneal::synthetic_points(n, d, (m / 2).max(1), 0.25, params.seed),
    };
    let parts = match &loaded {
        Some(loaded) => loaded.parts(),
        None => vec![Points::F32(&synthetic)],
    };
    let points = inputs::as_points(&parts);
    let problem = kiln_anneal::validate(points, n, d, m, &params).with_context(|| what.clone())?;
    out!(
        "anneal: {n} points x {d} dims, {m} initial anchors, up to {} iterations",
        params.max_iters
    );
    let mut runs = Vec::with_capacity(targets.len());
    for target in targets {
        runs.push(anneal_on(target, &problem)?);
    }
    report(&runs)?;
    if let (Some(dir), Some(output), Some(run)) = (&args.out, output, runs.last()) {
        let files = loaded.as_ref().map_or_else(Vec::new, inputs::Loaded::files);
        let index = index_of(run, &problem, files);
        for note in index.write_into(output).map_err(out_error)? {
            eprintln!("apps: {note}");
        }
        out!(
            "index: {} ({} anchors x {d}, {n} assignments, energy {:.8})",
            dir.display(),
            index.meta.m,
            index.meta.energy
        );
    }
    Ok(())
}

/// `--out DIR` checked before the run (refused, or created beside DIR
/// where the index will be written), the inputs protected; a note is
/// printed for each leftover of an interrupted earlier run.
pub(crate) fn prepare_output(args: &AnnealArgs) -> Result<Option<IndexOutput>> {
    let Some(dir) = &args.out else {
        return Ok(None);
    };
    let inputs: Vec<&Path> = args.npy.iter().map(PathBuf::as_path).collect();
    let output = index::prepare_output(dir, args.force, &inputs).map_err(out_error)?;
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

/// The index of `run` over `problem`'s points (`files`: where they came
/// from, empty for synthetic points).
pub(crate) fn index_of(run: &AnnealRun, problem: &Problem<'_>, files: Vec<InputFile>) -> Index {
    let (points, n, d) = (problem.points(), problem.n(), problem.d());
    let out = &run.out;
    let anchors = out.anchors[..out.m * d].to_vec();
    let energy = index::energy(points, d, &anchors, &out.assignments);
    Index {
        meta: IndexMeta {
            schema: index::SCHEMA.to_string(),
            version: index::VERSION,
            n: n as u64,
            d: d as u64,
            m: out.m as u64,
            iterations: out.iterations,
            energy_history: out.history.clone(),
            energy,
            params: problem.params().clone(),
            seed: problem.params().seed,
            maintenance: out
                .maintenance
                .iter()
                .map(|&(iteration, merged, split)| index::MaintenanceRecord {
                    iteration,
                    merged: merged as u64,
                    split: split as u64,
                })
                .collect(),
            backend: run.kind.to_string(),
            device: run.device.clone(),
            gpus: run.gpus as u32,
            world_size: 1,
            kiln_version: env!("CARGO_PKG_VERSION").to_string(),
            input: InputRecord {
                dtype: points.dtype().name().to_string(),
                hash_algorithm: index::HASH_ALGORITHM.to_string(),
                hash: index::input_hash(points, n, d),
                files,
            },
        },
        anchors,
        assignments: out.assignments.clone(),
    }
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
