//! `apps`: run kiln's workloads from the command line.
//!
//! ```text
//! apps vadd [--n N] [--reps R] [--backend auto|cpu|cuda]
//! apps anneal [--small|--large] [--n N] [--d D] [--m M] [--iters I] [--tol T]
//!              [--seed S] [--npy FILE] [--backend auto|cpu|cuda] [--gpus N|all]
//!              [--compare]
//! apps batch [--structures N] [--seed S] [--backend auto|cpu|cuda]
//! apps devices
//! ```

use std::time::Instant;

use anyhow::{bail, Context, Result};
use apps::anneal::{self, Params, Points};
use apps::{describe_backend, vadd, Rng};
use gpu_core::{Backend, BackendKind, Devices, GpuCount};

const USAGE: &str = "usage: apps vadd [--n N] [--reps R] [--backend auto|cpu|cuda] | \
apps anneal [--small|--large] [--n N] [--d D] [--m M] [--iters I] [--tol T] [--seed S] [--npy FILE] \
[--backend auto|cpu|cuda] [--gpus N|all] [--compare] | apps batch [--structures N] [--seed S] \
[--backend auto|cpu|cuda] | apps devices";

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("vadd") => run_vadd(&args[1..]),
        Some("anneal") => run_anneal(&args[1..]),
        Some("batch") => run_batch(&args[1..]),
        Some("bench") => run_bench(&args[1..]),
        Some("devices") => run_devices(),
        _ => {
            eprintln!("{USAGE}");
            std::process::exit(2);
        }
    };
    if let Err(e) = result {
        eprintln!("error: {e:#}");
        let gpu_error = e.chain().find_map(|c| c.downcast_ref::<gpu_core::Error>());
        if let Some(hint) = gpu_error.and_then(kiln_hint) {
            eprintln!("hint: {hint}");
        }
        std::process::exit(1);
    }
}

/// What to run in kiln's repository for a gpu-core error, whose own message
/// names no kiln tool.
fn kiln_hint(error: &gpu_core::Error) -> Option<String> {
    use gpu_core::Error as E;
    match error {
        E::ModuleNotBuilt { .. } => {
            Some("`cargo xtask toolkit install` installs the pinned toolkit; then rebuild".into())
        }
        E::NoBinaryForDevice { device_arch, .. } => {
            Some(format!("`cargo xtask build --arch sm_{device_arch}`"))
        }
        E::NcclUnavailable(_) => Some("or run with `--gpus 1`".into()),
        _ => None,
    }
}

/// `--name VALUE` pairs, refusing anything else; `flags` take no value and
/// come back as `(name, "")`.
fn options<'a>(args: &'a [String], known: &[&str]) -> Result<Vec<(&'a str, &'a str)>> {
    options_with_flags(args, known, &[])
}

fn options_with_flags<'a>(
    args: &'a [String],
    known: &[&str],
    flags: &[&str],
) -> Result<Vec<(&'a str, &'a str)>> {
    let mut pairs = Vec::new();
    let mut iter = args.iter();
    while let Some(name) = iter.next() {
        if flags.contains(&name.as_str()) {
            pairs.push((name.as_str(), ""));
            continue;
        }
        if !known.contains(&name.as_str()) {
            bail!("unknown option `{name}`; {USAGE}");
        }
        let value = iter
            .next()
            .with_context(|| format!("`{name}` needs a value; {USAGE}"))?;
        pairs.push((name.as_str(), value.as_str()));
    }
    Ok(pairs)
}

fn run_vadd(args: &[String]) -> Result<()> {
    let (mut n, mut reps, mut choice) = (1usize << 24, 20usize, None);
    for (name, value) in options(args, &["--n", "--reps", "--backend"])? {
        match name {
            "--n" => {
                n = value
                    .parse()
                    .with_context(|| format!("--n takes a count, not `{value}`"))?
            }
            "--reps" => {
                reps = value
                    .parse()
                    .with_context(|| format!("--reps takes a count, not `{value}`"))?
            }
            _ => choice = Some(value),
        }
    }
    if reps == 0 {
        bail!("--reps must be at least 1");
    }
    let choice = match choice {
        Some("auto") | None => std::env::var(gpu_core::BACKEND_ENV).ok(),
        Some(other) => Some(other.to_string()),
    };
    let backend = Backend::select(cuda_sys::modules::ALL, choice.as_deref())?;
    println!("{}", describe_backend(&backend));
    let stream = backend.default_stream();
    let kernel = vadd::kernel(&backend)?;
    let mut rng = Rng::new(42);
    let (a, b) = (rng.f32s(n), rng.f32s(n));
    let c = vadd::add(&stream, &kernel, &a, &b)?;
    let expected = vadd::reference(&a, &b);
    if c != expected {
        let bad = c
            .iter()
            .zip(&expected)
            .position(|(x, y)| x != y)
            .unwrap_or(0);
        bail!(
            "vadd: element {bad} is {} but the CPU reference says {}",
            c[bad],
            expected[bad]
        );
    }
    println!("vadd: n = {n}: matches the CPU reference");
    let t = vadd::time(&stream, &kernel, &a, &b, reps)?;
    println!(
        "vadd: median {:.3} ms over {reps} runs, {:.1} GB/s (12 bytes per element)",
        t.median_ms, t.gb_per_s
    );
    Ok(())
}

/// The backend a `--backend` value asks for (`auto` honours KILN_BACKEND).
fn select_backend(choice: Option<&str>) -> Result<Backend> {
    let choice = match choice {
        Some("auto") | None => std::env::var(gpu_core::BACKEND_ENV).ok(),
        Some(other) => Some(other.to_string()),
    };
    Ok(Backend::select(cuda_sys::modules::ALL, choice.as_deref())?)
}

fn parse<T: std::str::FromStr>(name: &str, value: &str) -> Result<T> {
    value
        .parse()
        .map_err(|_| anyhow::anyhow!("{name} takes a number, not `{value}`"))
}

/// One backend's run of `apps anneal`.
struct AnnealRun {
    backend: String,
    /// Upload and allocation.
    setup_seconds: f64,
    /// The iterations.
    seconds: f64,
    out: anneal::Output,
}

/// Where one run of `apps anneal` goes: one backend, or the points sharded
/// over several GPUs.
enum Target<'a> {
    One(&'a Backend),
    Gpus(&'a [Backend]),
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
        }
    }
}

fn anneal_on(
    target: Target<'_>,
    points: Points<'_>,
    n: usize,
    d: usize,
    m: usize,
    params: &Params,
) -> Result<AnnealRun> {
    match target {
        Target::One(backend) => println!("{}", describe_backend(backend)),
        Target::Gpus(backends) => {
            for (i, backend) in backends.iter().enumerate() {
                println!("gpu {i}: {}", describe_backend(backend));
            }
        }
    }
    // Setup (upload, allocation, NCCL communicators) is timed apart from
    // the iterations: the speedup compares the iterations.
    let started = Instant::now();
    let max_anchors = anneal::validate(points, n, d, m, params)?;
    let backends: &[Backend] = match target {
        Target::One(backend) if backend.kind() == BackendKind::Cuda => {
            std::slice::from_ref(backend)
        }
        Target::One(_) => &[],
        Target::Gpus(backends) => backends,
    };
    let mut engine: Box<dyn anneal::Engine> = if backends.is_empty() {
        Box::new(anneal::cpu::CpuEngine::new(points, n, d))
    } else {
        let engine = anneal::gpu::GpuEngine::sharded(backends, points, n, d, max_anchors)?;
        for backend in backends {
            backend.synchronize()?;
        }
        Box::new(engine)
    };
    let setup_seconds = started.elapsed().as_secs_f64();
    let started = Instant::now();
    let long = n * d * m > 1 << 28;
    let mut progress = |it: u32, energy: f64, anchors: usize| {
        if long && (it == 1 || it.is_multiple_of(5)) {
            println!(
                "  iteration {it:>3}: energy {energy:.6}, {anchors} anchors, {:.2} s",
                started.elapsed().as_secs_f64()
            );
        }
    };
    let out = anneal::run_with(engine.as_mut(), points, n, d, m, params, &mut progress)?;
    Ok(AnnealRun {
        backend: target.name(),
        setup_seconds,
        seconds: started.elapsed().as_secs_f64(),
        out,
    })
}

/// The GPUs `--gpus` asks for; says what it found. `None`: no GPU could be
/// used and `all` was asked for, so the run goes to the CPU.
fn open_gpus(count: GpuCount) -> Result<Option<Devices>> {
    match Devices::open(cuda_sys::modules::ALL, count) {
        Ok(devices) => {
            let found = devices.len();
            if found > 1 && !gpu_core::nccl_available() {
                println!(
                    "--gpus: {found} GPUs, but libnccl cannot be loaded: running on 1 GPU \
                     (install NCCL, libnccl.so.2, to use them all)"
                );
                return Ok(Some(Devices::open(
                    cuda_sys::modules::ALL,
                    GpuCount::Exactly(1),
                )?));
            }
            if matches!(count, GpuCount::All) {
                println!(
                    "--gpus all: {found} GPU{} found, running on {}",
                    if found == 1 { "" } else { "s" },
                    if found == 1 { "it" } else { "all of them" }
                );
            }
            Ok(Some(devices))
        }
        Err(e) if matches!(count, GpuCount::All) => {
            println!("--gpus all: no usable GPU ({e}); running on the CPU");
            Ok(None)
        }
        Err(e) => Err(e.into()),
    }
}

fn run_anneal(args: &[String]) -> Result<()> {
    let (mut n, mut d, mut m) = (1000usize, 64usize, 32usize);
    let mut params = Params::default();
    let (mut choice, mut compare, mut npy, mut seed) = (None, false, None, 42u64);
    let mut gpus: Option<GpuCount> = None;
    let known = [
        "--n",
        "--d",
        "--m",
        "--iters",
        "--tol",
        "--seed",
        "--npy",
        "--backend",
        "--gpus",
    ];
    for (name, value) in options_with_flags(args, &known, &["--small", "--large", "--compare"])? {
        match name {
            "--small" => (n, d, m) = (1000, 64, 32),
            "--large" => (n, d, m) = (10_000, 128, 256),
            "--compare" => compare = true,
            "--n" => n = parse(name, value)?,
            "--d" => d = parse(name, value)?,
            "--m" => m = parse(name, value)?,
            "--iters" => params.max_iters = parse(name, value)?,
            "--tol" => params.tol = parse(name, value)?,
            "--seed" => seed = parse(name, value)?,
            "--npy" => npy = Some(value),
            "--gpus" => gpus = Some(value.parse()?),
            _ => choice = Some(value),
        }
    }
    params.seed = seed;
    let (values, f16_bits) = match npy {
        Some(path) => load_npy(path, &mut n, &mut d)?,
        None => (
            anneal::synthetic_points(n, d, (m / 2).max(1), 0.25, seed),
            None,
        ),
    };
    let points = match &f16_bits {
        Some(bits) => Points::F16(bits),
        None => Points::F32(&values),
    };
    println!(
        "anneal: {n} points x {d} dims, {m} initial anchors, up to {} iterations",
        params.max_iters
    );
    let devices = match gpus {
        Some(count) => open_gpus(count)?,
        None => None,
    };
    let cpu = Backend::cpu();
    let runs = match (&devices, compare) {
        // --gpus K --compare: one GPU against K of them.
        (Some(devices), true) if devices.len() > 1 => vec![
            anneal_on(
                Target::Gpus(&devices.backends()[..1]),
                points,
                n,
                d,
                m,
                &params,
            )?,
            anneal_on(Target::Gpus(devices.backends()), points, n, d, m, &params)?,
        ],
        (Some(devices), false) => vec![anneal_on(
            Target::Gpus(devices.backends()),
            points,
            n,
            d,
            m,
            &params,
        )?],
        (Some(devices), true) => vec![
            anneal_on(Target::One(&cpu), points, n, d, m, &params)?,
            anneal_on(Target::Gpus(devices.backends()), points, n, d, m, &params)?,
        ],
        (None, true) => {
            let gpu = Backend::auto(cuda_sys::modules::ALL)?;
            match gpu.cpu_reason() {
                None => vec![
                    anneal_on(Target::One(&cpu), points, n, d, m, &params)?,
                    anneal_on(Target::One(&gpu), points, n, d, m, &params)?,
                ],
                Some(reason) => {
                    println!(
                        "--compare: no GPU to compare with ({reason}); running the CPU side only"
                    );
                    vec![anneal_on(Target::One(&cpu), points, n, d, m, &params)?]
                }
            }
        }
        (None, false) => {
            // `--gpus all` with no GPU lands here too: the CPU.
            let backend = if gpus.is_some() {
                cpu.clone()
            } else {
                select_backend(choice)?
            };
            vec![anneal_on(Target::One(&backend), points, n, d, m, &params)?]
        }
    };
    println!(
        "{:<32} {:>10} {:>11} {:>6} {:>14} {:>8} {:>12}",
        "backend", "setup", "iterations", "iters", "energy", "anchors", "compression"
    );
    for r in &runs {
        println!(
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
    if let [a, b] = runs.as_slice() {
        let diff = (b.out.energy - a.out.energy).abs() / a.out.energy.abs().max(f64::MIN_POSITIVE);
        println!(
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

/// Points from a `.npy` file (f32, or f16 kept as f16); sets `n` and `d`
/// from its shape.
fn load_npy(path: &str, n: &mut usize, d: &mut usize) -> Result<(Vec<f32>, Option<Vec<u16>>)> {
    let matrix =
        apps::npy::read(std::path::Path::new(path)).with_context(|| format!("reading {path}"))?;
    (*n, *d) = (matrix.n, matrix.d);
    Ok(match matrix.data {
        apps::npy::NpyData::F32(values) => (values, None),
        apps::npy::NpyData::F16(bits) => (Vec::new(), Some(bits)),
    })
}

fn run_batch(args: &[String]) -> Result<()> {
    use apps::batch;
    const REPS: usize = 20;
    let (mut structures, mut seed, mut choice) = (10_000usize, 42u64, None);
    for (name, value) in options(args, &["--structures", "--seed", "--backend"])? {
        match name {
            "--structures" => {
                structures = value
                    .parse()
                    .with_context(|| format!("--structures takes a count, not `{value}`"))?
            }
            "--seed" => {
                seed = value
                    .parse()
                    .with_context(|| format!("--seed takes a number, not `{value}`"))?
            }
            _ => choice = Some(value),
        }
    }
    let backend = select_backend(choice)?;
    println!("{}", describe_backend(&backend));
    let stream = backend.default_stream();
    let kernel = batch::kernel(&backend)?;
    let input = batch::random_input(&mut Rng::new(seed), structures);
    let atoms: u64 = input.descs().iter().map(|d| u64::from(d.n_atoms)).sum();
    println!(
        "batch: {structures} structures, {atoms} atoms (seed {seed}), largest {}",
        input.descs().iter().map(|d| d.n_atoms).max().unwrap_or(0)
    );
    let stats = batch::run_on(&stream, &kernel, &input)?;
    if let Some(m) =
        batch::first_mismatch(&input, &stats, &batch::reference(&input), batch::REL_TOL)
    {
        bail!("batch: {m}");
    }
    println!(
        "batch: matches the CPU reference within {:e} of each structure's coordinate scale",
        batch::REL_TOL
    );
    let quarter = std::num::NonZeroUsize::new(structures.div_ceil(4).max(1)).expect("at least 1");
    if batch::run_batched(&stream, &kernel, &input, quarter)? != stats {
        bail!("batch: launches of {quarter} structures into sub-views differ from one launch");
    }
    println!("batch: {quarter} structures per launch into sub-views of one buffer: identical");
    for (s, st) in stats.iter().enumerate().take(3) {
        let [x, y, z] = st.centroid;
        println!(
            "batch: structure {s}: {} atoms, centroid ({x:.3}, {y:.3}, {z:.3}), radius of gyration {:.3}",
            input.descs()[s].n_atoms,
            st.radius_of_gyration
        );
    }
    let t = batch::time(&stream, &kernel, &input, REPS)?;
    println!(
        "batch: median {:.3} ms over {REPS} runs, {:.2} G atoms/s",
        t.median_ms,
        t.atoms_per_s / 1e9
    );
    Ok(())
}

fn run_bench(args: &[String]) -> Result<()> {
    let (mut json, mut quick, mut choice, mut gpus, mut shape) = (None, false, None, None, None);
    for (name, value) in options_with_flags(
        args,
        &["--json", "--backend", "--gpus", "--shape"],
        &["--quick"],
    )? {
        match name {
            "--json" => json = Some(value),
            "--quick" => quick = true,
            "--gpus" => gpus = Some(value.parse::<GpuCount>()?),
            "--shape" => shape = Some(parse_shape(value)?),
            _ => choice = Some(value),
        }
    }
    let print = |f: &apps::bench::Figure| {
        let rate = f
            .gb_per_s
            .map_or(String::new(), |r| format!(", {r:.1} GB/s"));
        let note = f
            .note
            .as_deref()
            .map_or(String::new(), |n| format!(" ({n})"));
        println!(
            "bench: {}: {:.3} ms median of {}{rate}{note}",
            f.name, f.ms, f.runs
        );
    };
    let report = match gpus {
        // The multi-GPU suite: one shape on one GPU and on all asked for.
        Some(count) => {
            let devices = Devices::open(cuda_sys::modules::ALL, count)?;
            for (i, backend) in devices.backends().iter().enumerate() {
                println!("gpu {i}: {}", describe_backend(backend));
            }
            let (n, d, m) = shape.unwrap_or((4_000_000, 128, 2048));
            apps::bench::run_multi(
                devices.backends(),
                n,
                d,
                m,
                if quick { 1 } else { 3 },
                &mut |f| print(f),
            )?
        }
        None => {
            if shape.is_some() {
                bail!("--shape goes with --gpus (the multi-GPU suite)");
            }
            let backend = select_backend(choice)?;
            println!("{}", describe_backend(&backend));
            apps::bench::run(&backend, quick, &mut |f| print(f))?
        }
    };
    if let Some(path) = json {
        std::fs::write(path, serde_json::to_string_pretty(&report)?)
            .with_context(|| format!("writing {path}"))?;
        println!("bench: wrote {path}");
    }
    Ok(())
}

/// `NxDxM`, e.g. `4000000x128x2048`.
fn parse_shape(value: &str) -> Result<(usize, usize, usize)> {
    let parts: Vec<&str> = value.split('x').collect();
    let bad = || {
        anyhow::anyhow!(
            "--shape takes NxDxM (points x dims x anchors, e.g. 4000000x128x2048), not `{value}`"
        )
    };
    let [n, d, m] = parts.as_slice() else {
        return Err(bad());
    };
    Ok((
        n.parse().map_err(|_| bad())?,
        d.parse().map_err(|_| bad())?,
        m.parse().map_err(|_| bad())?,
    ))
}

fn run_devices() -> Result<()> {
    if !gpu_core::driver_present() {
        println!("no CUDA driver on this machine");
        return Ok(());
    }
    let (major, minor) = gpu_core::driver_version()?;
    println!("driver: CUDA {major}.{minor}");
    match cuda_sys::TOOLKIT_VERSION {
        Some((major, minor)) => println!("kernels built with: CUDA {major}.{minor}"),
        None => println!("kernels built with: no toolkit (CPU-only build)"),
    }
    for d in gpu_core::devices()? {
        let bandwidth = d
            .memory_bandwidth_bytes_per_sec()
            .map_or("unknown".to_string(), |b| format!("{:.0} GB/s", b / 1e9));
        println!(
            "{}: {} (sm_{}{}), {} SMs, {:.1} GiB, L2 {} MiB, peak memory bandwidth {bandwidth}",
            d.ordinal,
            d.name,
            d.compute_capability.0,
            d.compute_capability.1,
            d.sm_count,
            d.total_memory as f64 / f64::from(1u32 << 30),
            d.l2_cache_bytes.map_or(0, |b| b >> 20),
        );
    }
    Ok(())
}
