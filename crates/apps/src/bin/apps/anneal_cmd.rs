//! `apps anneal`: sizes checked (against the memory there is) before the
//! points are generated or mapped, the input validated once into a
//! [`Problem`], then run on the CPU, one GPU or several, and compared; with
//! `--out`, the index written (checked to be writable before the run).

use std::io::Write;
use std::time::Instant;

use anyhow::{Context, Result};
use apps::describe_backend;
use gpu_core::{Backend, BackendKind, Devices, GpuCount};
use kiln_anneal::index::RunRecord;
use kiln_anneal::plan::Plan;
use kiln_anneal::Problem;

use crate::anneal_run::{self, AnnealRun};
use crate::cli::{AnnealArgs, BackendChoice};
use crate::output::out;
use crate::{backend_choice, select_backend, setting};
#[cfg(feature = "wgpu")]
use kiln_anneal::wgpu::{Adapters, WgpuDevice};

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

    /// The library's target, which builds the engine.
    fn engine_target(&self) -> kiln_anneal::Target<'_> {
        match *self {
            Target::One(backend) => kiln_anneal::Target::of(backend),
            Target::Gpus(backends) => kiln_anneal::Target::Gpus(backends),
            #[cfg(feature = "wgpu")]
            Target::Wgpu(device) => kiln_anneal::Target::Wgpu(device),
        }
    }

    /// The GPUs it runs on (none: the CPU engine).
    fn gpus(&self) -> &[Backend] {
        self.engine_target().gpus()
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

    /// Refuses a run that needs more memory than the host or a GPU has.
    fn check_memory(&self, what: &str, plan: &Plan) -> Result<()> {
        let gpus = self.gpus();
        // The CPU engine keeps its own copies of the points on the host;
        // the GPU engines (wgpu too) do not. wgpu tells no free device
        // memory: an allocation it cannot make fails the run instead.
        plan.check_host(what, self.is_cpu())?;
        for backend in gpus {
            if let Some(dev) = backend.device() {
                plan.check_device(what, plan.n().div_ceil(gpus.len()), dev.ordinal)?;
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
    let mut engine = target.engine_target().engine(problem)?;
    let setup_parts = engine.setup_parts();
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
        record: RunRecord {
            backend: kind,
            device,
            gpus: backends.len() as u32,
            world_size: 1,
        },
        setup_seconds,
        setup_parts,
        seconds: started.elapsed().as_secs_f64(),
        phases,
        out,
    })
}

/// The GPUs `--gpus` asks for; says what it found. `None`: no GPU could be
/// used and `all` was asked for, so the run goes to the CPU.
fn open_gpus(count: GpuCount) -> Result<Option<Devices>> {
    match Devices::open(kiln_anneal::modules::ALL, count) {
        Ok(devices) => {
            let found = devices.len();
            if found > 1 && !gpu_core::nccl_available() {
                out!(
                    "--gpus: {found} GPUs, but libnccl cannot be loaded: running on 1 GPU \
                     (install NCCL, libnccl.so.2, to use them all)"
                );
                return Ok(Some(Devices::open(
                    kiln_anneal::modules::ALL,
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

/// `apps anneal` in one process (`rank_cmd` runs one rank of many).
pub(crate) fn run(args: &AnnealArgs) -> Result<()> {
    let launched = Instant::now();
    let plan = anneal_run::plan(args)?;
    let what = anneal_run::what(&plan);
    let output = anneal_run::prepare_output(args)?;
    let devices = match args.gpus {
        Some(count) => open_gpus(count)?,
        None => None,
    };
    let cpu = Backend::cpu();
    let gpu = if args.compare && devices.is_none() {
        Some(Backend::auto(kiln_anneal::modules::ALL)?)
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
        target.check_memory(&what, &plan)?;
    }
    let (n, d, m, iters) = (plan.n(), plan.d(), plan.m(), plan.params().max_iters);
    let input = plan.load().map_err(crate::npy_args::npy_error)?;
    let parts = input.parts();
    let problem = input.problem(&parts).with_context(|| what.clone())?;
    out!("anneal: {n} points x {d} dims, {m} initial anchors, up to {iters} iterations");
    let mut runs = Vec::with_capacity(targets.len());
    for target in targets {
        runs.push(anneal_on(target, &problem)?);
    }
    anneal_run::report(&runs)?;
    if let (Some(dir), Some(output), Some(run)) = (&args.out, output, runs.last()) {
        anneal_run::write_index(dir, output, run, &problem, input.files())?;
    }
    if let [run] = &runs[..] {
        anneal_run::whole_run("", launched, run)?;
    }
    Ok(())
}
