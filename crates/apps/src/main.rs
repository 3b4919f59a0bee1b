//! `apps`: run kiln's workloads from the command line.
//!
//! ```text
//! apps vadd [--n N] [--reps R] [--backend auto|cpu|cuda]
//! apps batch [--structures N] [--seed S] [--backend auto|cpu|cuda]
//! apps devices
//! ```

use anyhow::{bail, Context, Result};
use apps::{describe_backend, vadd, Rng};
use gpu_core::Backend;

const USAGE: &str = "usage: apps vadd [--n N] [--reps R] [--backend auto|cpu|cuda] | apps batch [--structures N] [--seed S] [--backend auto|cpu|cuda] | apps devices";

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("vadd") => run_vadd(&args[1..]),
        Some("batch") => run_batch(&args[1..]),
        Some("devices") => run_devices(),
        _ => {
            eprintln!("{USAGE}");
            std::process::exit(2);
        }
    };
    if let Err(e) = result {
        eprintln!("error: {e:#}");
        std::process::exit(1);
    }
}

/// `--name VALUE` pairs, refusing anything else.
fn options<'a>(args: &'a [String], known: &[&str]) -> Result<Vec<(&'a str, &'a str)>> {
    let mut pairs = Vec::new();
    let mut iter = args.iter();
    while let Some(name) = iter.next() {
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
    let choice = match choice {
        Some("auto") | None => std::env::var(gpu_core::BACKEND_ENV).ok(),
        Some(other) => Some(other.to_string()),
    };
    let backend = Backend::select(cuda_sys::modules::ALL, choice.as_deref())?;
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
