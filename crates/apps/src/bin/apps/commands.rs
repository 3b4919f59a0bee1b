//! `apps vadd`, `apps batch`, `apps bench` and `apps devices`: each checks
//! its sizes against the memory there is before it allocates, then runs.

use std::io::Write;
use std::num::NonZeroUsize;

use anyhow::{bail, Result};
use apps::{batch, describe_backend, vadd, Rng};
use gpu_core::{Backend, BackendKind, Devices};
use kiln_anneal::memory;

use crate::cli::{BatchArgs, BenchArgs, VaddArgs};
use crate::output::{out, ResultFile};
use crate::select_backend;

/// Refuses `host` bytes of host memory and `device` bytes on `backend`'s
/// GPU when there is not that much (on the CPU backend, both are host).
fn check_memory(
    what: &str,
    backend: &Backend,
    host: Option<u64>,
    device: Option<u64>,
) -> Result<()> {
    match backend
        .device()
        .filter(|_| backend.kind() == BackendKind::Cuda)
    {
        Some(dev) => {
            memory::check_host(what, host)?;
            memory::check(what, "device", device, memory::device_free(dev.ordinal))?;
        }
        None => memory::check_host(what, host.zip(device).and_then(|(h, d)| h.checked_add(d)))?,
    }
    Ok(())
}

pub(crate) fn vadd(args: &VaddArgs) -> Result<()> {
    let (n, reps) = (args.n as usize, args.reps as usize);
    let backend = select_backend(args.backend.backend)?;
    // a, b, the result and the reference on the host; a, b, c on the device.
    check_memory(
        &format!("--n {n}"),
        &backend,
        args.n.checked_mul(16),
        args.n.checked_mul(12),
    )?;
    out!("{}", describe_backend(&backend));
    let stream = backend.default_stream();
    let kernel = vadd::kernel(&backend)?;
    let mut rng = Rng::new(42);
    let (a, b) = (rng.f32s(n), rng.f32s(n));
    let c = vadd::add(&stream, &kernel, &a, &b)?;
    let expected = vadd::reference(&a, &b);
    if let Some(bad) = c.iter().zip(&expected).position(|(x, y)| x != y) {
        bail!(
            "vadd: element {bad} is {} but the CPU reference says {}",
            c[bad],
            expected[bad]
        );
    }
    out!("vadd: n = {n}: matches the CPU reference");
    let t = vadd::time(&stream, &kernel, &a, &b, reps)?;
    out!(
        "vadd: median {:.3} ms over {reps} runs, {:.1} GB/s (12 bytes per element)",
        t.median_ms,
        t.gb_per_s
    );
    Ok(())
}

pub(crate) fn batch(args: &BatchArgs) -> Result<()> {
    const REPS: usize = 20;
    // The generator's structures average about 560 atoms of 12 bytes; 8 KiB
    // each covers the input, its device copy and the results.
    const BYTES_PER_STRUCTURE: u64 = 8 << 10;
    let (structures, seed) = (args.structures as usize, args.seed);
    let backend = select_backend(args.backend.backend)?;
    let bytes = args.structures.checked_mul(BYTES_PER_STRUCTURE);
    check_memory(
        &format!("--structures {structures}"),
        &backend,
        bytes,
        bytes,
    )?;
    out!("{}", describe_backend(&backend));
    let stream = backend.default_stream();
    let kernel = batch::kernel(&backend)?;
    let input = batch::random_input(&mut Rng::new(seed), structures);
    let atoms: u64 = input.descs().iter().map(|d| u64::from(d.n_atoms)).sum();
    out!(
        "batch: {structures} structures, {atoms} atoms (seed {seed}), largest {}",
        input.descs().iter().map(|d| d.n_atoms).max().unwrap_or(0)
    );
    let stats = batch::run_on(&stream, &kernel, &input)?;
    if let Some(m) =
        batch::first_mismatch(&input, &stats, &batch::reference(&input), batch::REL_TOL)
    {
        bail!("batch: {m}");
    }
    out!(
        "batch: matches the CPU reference within {:e} of each structure's coordinate scale",
        batch::REL_TOL
    );
    let quarter = NonZeroUsize::new(structures.div_ceil(4)).unwrap_or(NonZeroUsize::MIN);
    if batch::run_batched(&stream, &kernel, &input, quarter)? != stats {
        bail!("batch: launches of {quarter} structures into sub-views differ from one launch");
    }
    out!("batch: {quarter} structures per launch into sub-views of one buffer: identical");
    for (s, st) in stats.iter().enumerate().take(3) {
        let [x, y, z] = st.centroid;
        out!(
            "batch: structure {s}: {} atoms, centroid ({x:.3}, {y:.3}, {z:.3}), radius of gyration {:.3}",
            input.descs()[s].n_atoms,
            st.radius_of_gyration
        );
    }
    let t = batch::time(&stream, &kernel, &input, REPS)?;
    out!(
        "batch: median {:.3} ms over {REPS} runs, {:.2} G atoms/s",
        t.median_ms,
        t.atoms_per_s / 1e9
    );
    Ok(())
}

pub(crate) fn bench(args: &BenchArgs) -> Result<()> {
    // Checked before the run: a run of minutes must not end in a write error.
    let result_file = match &args.json {
        Some(path) => Some(ResultFile::prepare("--json", path)?),
        None => None,
    };
    let mut print = |f: &apps::bench::Figure| -> std::io::Result<()> {
        let rate = f
            .gb_per_s
            .map_or(String::new(), |r| format!(", {r:.1} GB/s"));
        let note = f
            .note
            .as_deref()
            .map_or(String::new(), |n| format!(" ({n})"));
        writeln!(
            std::io::stdout().lock(),
            "bench: {}: {:.3} ms median of {}{rate}{note}",
            f.kind,
            f.ms,
            f.runs
        )
    };
    let report = match args.gpus {
        // The multi-GPU suite: one shape on one GPU and on all asked for.
        Some(count) => {
            let devices = Devices::open(&apps::modules(), count)?;
            for (i, backend) in devices.backends().iter().enumerate() {
                out!("gpu {i}: {}", describe_backend(backend));
            }
            let (n, d, m) = args.shape.unwrap_or((4_000_000, 128, 2048));
            let (n, d, m) = (n as usize, d as usize, m as usize);
            let what = format!("--shape {n}x{d}x{m}");
            let params = kiln_anneal::Params::default();
            let max_anchors = kiln_anneal::check_sizes(n, d, m, &params)
                .map_err(|e| anyhow::anyhow!("{what}: {e}"))?;
            memory::check_host(
                &what,
                kiln_anneal::host_bytes(
                    n,
                    d,
                    max_anchors,
                    (n as u64).saturating_mul(d as u64).saturating_mul(4),
                    false,
                ),
            )?;
            for backend in devices.backends() {
                if let Some(dev) = backend.device() {
                    let needed =
                        kiln_anneal::device_bytes(n, d, max_anchors, kiln_anneal::Dtype::F32, 1);
                    memory::check(&what, "device", needed, memory::device_free(dev.ordinal))?;
                }
            }
            let reps = if args.quick { 1 } else { 3 };
            apps::bench::run_multi(devices.backends(), n, d, m, reps, &mut print)?
        }
        None => {
            let backend = select_backend(args.backend.backend)?;
            out!("{}", describe_backend(&backend));
            apps::bench::run(&backend, args.quick, &mut print)?
        }
    };
    if let Some(overhead) = &report.launch_overhead {
        out!("bench: {}", overhead.summary());
    }
    if let (Some(file), Some(path)) = (result_file, &args.json) {
        file.commit(&serde_json::to_string_pretty(&report)?)?;
        out!("bench: wrote {}", path.display());
    }
    Ok(())
}

pub(crate) fn devices() -> Result<()> {
    if !gpu_core::driver_present() {
        out!("no CUDA driver on this machine");
        return Ok(());
    }
    let (major, minor) = gpu_core::driver_version()?;
    out!("driver: CUDA {major}.{minor}");
    match cuda_sys::TOOLKIT_VERSION {
        Some((major, minor)) => out!("kernels built with: CUDA {major}.{minor}"),
        None => out!("kernels built with: no toolkit (CPU-only build)"),
    }
    for d in gpu_core::devices()? {
        let bandwidth = d
            .memory_bandwidth_bytes_per_sec()
            .map_or("unknown".to_string(), |b| format!("{:.0} GB/s", b / 1e9));
        out!(
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
