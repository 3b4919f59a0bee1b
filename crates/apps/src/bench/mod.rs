//! `apps bench`: the benchmark suite, run where the GPU is (through the GPU
//! bundle). Every figure is a median over repeated runs with fresh seeded
//! random inputs (never zeros), after a warm-up; GPU kernels are timed with
//! device events, whole anneal runs with the wall clock around the run (the
//! engine reads its results back at each maintenance pass and at the end,
//! so the clock waits for the GPU). Writes the results as JSON for
//! `cargo xtask bench` (kiln-bench-schema's `Report`, each figure's kind as
//! data), with the typed launch's overhead over raw cudarc (`launch`).

pub mod grid;
mod launch;

use std::time::Instant;

use gpu_core::{Backend, BackendKind, Error};

use crate::Rng;
use crate::{batch, vadd};
use kiln_anneal::{self, AnnealError, Params, Points};

pub use kiln_bench_schema::{Data, Dtype, Engine, Figure, LaunchOverhead, Report, Shape, Workload};

/// Why the suite stopped.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BenchError {
    /// A workload failed (the GPU included).
    #[error(transparent)]
    Anneal(#[from] AnnealError),
    /// The raw cudarc launch of the overhead figure failed.
    #[error("raw cudarc launch: {0}")]
    RawLaunch(String),
    /// The progress callback could not write (a closed pipe, say).
    #[error("writing progress: {0}")]
    Output(#[source] std::io::Error),
}

// gpu-core's error reaches the suite through anneal's: a two-step `From`
// that `#[from]` does not write.
impl From<Error> for BenchError {
    fn from(e: Error) -> Self {
        Self::Anneal(e.into())
    }
}

/// The schema's shape of an `n × d × m` anneal.
fn shape(n: usize, d: usize, m: usize) -> Shape {
    Shape {
        n: n as u64,
        d: d as u64,
        m: m as u64,
    }
}

pub(crate) fn median(mut samples: Vec<f64>) -> f64 {
    samples.sort_by(f64::total_cmp);
    samples[samples.len() / 2]
}

/// Device-to-device copy of `n` f32, timed with events: the bandwidth
/// ceiling the vector add is held to.
fn copy_bandwidth(backend: &Backend, n: usize, reps: usize) -> Result<Figure, Error> {
    let stream = backend.default_stream();
    let src = stream.to_device(&Rng::new(1).f32s(n))?;
    let mut dst = stream.alloc_zeros::<f32>(n)?;
    let mut samples = Vec::new();
    for rep in 0..=reps {
        let start = stream.record_event()?;
        stream.copy_device(&src.view(), &mut dst.view_mut())?;
        let end = stream.record_event()?;
        end.synchronize()?;
        if rep > 0 {
            samples.push(f64::from(start.elapsed_ms(&end)?));
        }
    }
    let ms = median(samples);
    Ok(Figure {
        kind: Workload::DeviceCopy { n: n as u64 },
        ms,
        runs: reps,
        gb_per_s: Some(8.0 * n as f64 / ms / 1e6),
        note: None,
        tflops: None,
    })
}

/// What an anneal figure runs on: the library's target, which builds the
/// engine (the CPU, CUDA GPUs (one: no NCCL), or a wgpu device).
pub type AnnealTarget<'a> = kiln_anneal::Target<'a>;

/// One anneal figure's workload.
#[derive(Debug, Clone, Copy)]
pub struct AnnealCase {
    /// Points.
    pub n: usize,
    /// Dimension.
    pub d: usize,
    /// Initial anchors.
    pub m: usize,
    /// Iterations (`tol = 0`: all of them run).
    pub iterations: u32,
    /// Points given as f16 (else f32).
    pub f16: bool,
    /// What the points are.
    pub data: Data,
    /// Timed runs, after one warm-up.
    pub reps: usize,
}

impl AnnealCase {
    /// The seed shapes' case: 30 iterations of clustered f32 points.
    pub fn seed(n: usize, d: usize, m: usize, reps: usize) -> Self {
        Self {
            n,
            d,
            m,
            iterations: Workload::SEED_ITERATIONS,
            f16: false,
            data: Data::Clustered,
            reps,
        }
    }

    /// The figure's kind on `engine`.
    fn workload(&self, engine: Engine) -> Workload {
        Workload::Anneal {
            shape: shape(self.n, self.d, self.m),
            engine,
            iterations: self.iterations,
            dtype: if self.f16 { Dtype::F16 } else { Dtype::F32 },
            data: self.data,
        }
    }
}

/// Times whole anneal runs (without the upload of the points, which is
/// reported apart) on `target`, `reps` runs on fresh seeds after a warm-up.
/// The GPU engine reads back only at maintenance passes and at the end, so
/// the wall clock around the run waits for the GPU.
pub fn anneal_figure(
    target: AnnealTarget<'_>,
    n: usize,
    d: usize,
    m: usize,
    reps: usize,
) -> Result<Figure, kiln_anneal::AnnealError> {
    anneal_case(target, &AnnealCase::seed(n, d, m, reps))
}

/// [`anneal_figure`] for any [`AnnealCase`].
pub fn anneal_case(
    target: AnnealTarget<'_>,
    case: &AnnealCase,
) -> Result<Figure, kiln_anneal::AnnealError> {
    let &AnnealCase { n, d, m, reps, .. } = case;
    let params = Params {
        tol: 0.0,
        max_iters: case.iterations,
        ..Params::default()
    };
    let mut samples = Vec::new();
    let mut upload = Vec::new();
    let mut flops = Vec::new();
    let mut last = None;
    for rep in 0..=reps {
        let seed = 1000 + rep as u64;
        let values = match case.data {
            Data::Clustered => kiln_anneal::synthetic_points(n, d, m / 2, 0.25, seed),
            Data::Gaussian => grid::gaussian_points(n, d, seed),
        };
        let bits: Vec<u16> = if case.f16 {
            values
                .iter()
                .map(|v| half::f16::from_f32(*v).to_bits())
                .collect()
        } else {
            Vec::new()
        };
        let points = if case.f16 {
            Points::F16(&bits)
        } else {
            Points::F32(&values)
        };
        let params = Params {
            seed,
            ..params.clone()
        };
        let problem = kiln_anneal::validate(points, n, d, m, &params)?;
        let started = Instant::now();
        let mut engine = target.engine(&problem)?;
        upload.push(started.elapsed().as_secs_f64() * 1e3);
        let started = Instant::now();
        let out = kiln_anneal::run_with(engine.as_mut(), &problem, &mut |_, _, _| {})?;
        samples.push(started.elapsed().as_secs_f64() * 1e3);
        flops.push(grid::assignment_flops(&out, n, d, m));
        if rep == 0 {
            samples.clear();
            upload.clear();
            flops.clear();
        }
        last = Some(out);
    }
    let out = last.expect("at least one run");
    let engine = match target {
        AnnealTarget::Cpu => Engine::Cpu,
        AnnealTarget::Gpus(backends) => Engine::Cuda {
            gpus: u32::try_from(backends.len()).unwrap_or(u32::MAX),
        },
        #[cfg(feature = "wgpu")]
        AnnealTarget::Wgpu(_) => Engine::Wgpu,
    };
    let ms = median(samples);
    Ok(Figure {
        kind: case.workload(engine),
        ms,
        runs: reps,
        gb_per_s: None,
        note: Some(format!(
            "{} iterations, energy {:.6}, {} anchors, setup (upload + allocation) {:.1} ms",
            out.iterations,
            out.energy,
            out.m,
            median(upload)
        )),
        tflops: Some(median(flops) / ms / 1e9),
    })
}

/// Runs the suite; `quick` shrinks the shapes (for a smoke test).
/// `progress` sees each figure as it is measured.
pub fn run(
    backend: &Backend,
    quick: bool,
    progress: &mut dyn FnMut(&Figure) -> std::io::Result<()>,
) -> Result<Report, BenchError> {
    let mut figures = Vec::new();
    let mut push = |f: Figure, figures: &mut Vec<Figure>| -> Result<(), BenchError> {
        progress(&f).map_err(BenchError::Output)?;
        figures.push(f);
        Ok(())
    };
    let gpu = backend.kind() == BackendKind::Cuda;
    let n_vadd = if quick || !gpu { 1 << 20 } else { 1 << 28 };
    if gpu {
        push(copy_bandwidth(backend, n_vadd, 20)?, &mut figures)?;
    }
    let stream = backend.default_stream();
    let kernel = vadd::kernel(backend)?;
    let mut rng = Rng::new(7);
    let (a, b) = (rng.f32s(n_vadd), rng.f32s(n_vadd));
    let t = vadd::time(&stream, &kernel, &a, &b, 50)?;
    push(
        Figure {
            kind: Workload::Vadd { n: n_vadd as u64 },
            ms: t.median_ms,
            runs: 50,
            gb_per_s: Some(t.gb_per_s),
            note: None,
            tflops: None,
        },
        &mut figures,
    )?;
    let batch_kernel = batch::kernel(backend)?;
    let input = batch::random_input(&mut Rng::new(9), if quick { 500 } else { 10_000 });
    let t = batch::time(&stream, &batch_kernel, &input, 20)?;
    push(
        Figure {
            kind: Workload::Batch {
                structures: input.descs().len() as u64,
            },
            ms: t.median_ms,
            runs: 20,
            gb_per_s: None,
            note: Some(format!("{:.2} G atoms/s", t.atoms_per_s / 1e9)),
            tflops: None,
        },
        &mut figures,
    )?;
    let shapes: &[(usize, usize, usize, usize)] = if quick {
        &[(1000, 64, 32, 3)]
    } else if gpu {
        &[
            (1000, 64, 32, 5),
            (10_000, 128, 256, 5),
            (100_000, 384, 1024, 3),
            (1_000_000, 128, 2048, 3),
        ]
    } else {
        &[(1000, 64, 32, 5), (10_000, 128, 256, 5)]
    };
    let target = if gpu {
        AnnealTarget::Gpus(std::slice::from_ref(backend))
    } else {
        AnnealTarget::Cpu
    };
    for &(n, d, m, reps) in shapes {
        push(anneal_figure(target, n, d, m, reps)?, &mut figures)?;
        if gpu && n <= 10_000 {
            push(
                anneal_figure(AnnealTarget::Cpu, n, d, m, reps)?,
                &mut figures,
            )?;
        }
    }
    // The wgpu engine beside them, on a hardware adapter (the GPU through
    // Vulkan, Metal or DX12), on the same shapes.
    #[cfg(feature = "wgpu")]
    if let Some(device) = wgpu_device()? {
        for &(n, d, m, reps) in shapes {
            push(
                anneal_figure(AnnealTarget::Wgpu(&device), n, d, m, reps)?,
                &mut figures,
            )?;
        }
    }
    if gpu && !quick {
        for (n, d, m) in grid::SHAPES {
            for f16 in [false, true] {
                let case = AnnealCase {
                    n,
                    d,
                    m,
                    iterations: grid::ITERATIONS,
                    f16,
                    data: Data::Gaussian,
                    reps: 3,
                };
                push(anneal_case(target, &case)?, &mut figures)?;
            }
        }
    }
    let device = backend
        .device()
        .map_or("cpu".to_string(), |d| d.name.clone());
    Ok(Report {
        device,
        cpu_threads: rayon::current_num_threads(),
        figures,
        launch_overhead: Some(launch::measure(backend)?),
    })
}

/// The adapter of the wgpu figures: a hardware one, none when there is
/// none; with `KILN_REQUIRE_WGPU=1` (CI on lavapipe, the GPU bundle) the best
/// there is, software included, and none is an error.
#[cfg(feature = "wgpu")]
fn wgpu_device() -> Result<Option<kiln_anneal::wgpu::WgpuDevice>, BenchError> {
    use kiln_anneal::wgpu::{Adapters, WgpuDevice};
    let required = std::env::var("KILN_REQUIRE_WGPU").is_ok_and(|v| v.trim() == "1");
    let want = if required {
        Adapters::Any
    } else {
        Adapters::Hardware
    };
    match WgpuDevice::open(want) {
        Ok(device) => Ok(Some(device)),
        Err(e) if required => Err(BenchError::Anneal(e.into())),
        Err(_) => Ok(None),
    }
}

/// The multi-GPU suite: the anneal of `n × d × m` (30 iterations, `tol = 0`)
/// on the first GPU alone and sharded over all of `backends`, `reps` runs
/// each after a warm-up, plus the speedup.
pub fn run_multi(
    backends: &[Backend],
    n: usize,
    d: usize,
    m: usize,
    reps: usize,
    progress: &mut dyn FnMut(&Figure) -> std::io::Result<()>,
) -> Result<Report, BenchError> {
    let mut figures = Vec::new();
    let one = anneal_figure(AnnealTarget::Gpus(&backends[..1]), n, d, m, reps)?;
    progress(&one).map_err(BenchError::Output)?;
    figures.push(one);
    if backends.len() > 1 {
        let all = anneal_figure(AnnealTarget::Gpus(backends), n, d, m, reps)?;
        progress(&all).map_err(BenchError::Output)?;
        let speedup = Figure {
            kind: Workload::Speedup {
                shape: shape(n, d, m),
                gpus: u32::try_from(backends.len()).unwrap_or(u32::MAX),
            },
            ms: all.ms,
            runs: reps,
            gb_per_s: None,
            note: Some(format!("{:.2}x", figures[0].ms / all.ms)),
            tflops: None,
        };
        progress(&speedup).map_err(BenchError::Output)?;
        figures.push(all);
        figures.push(speedup);
    }
    let device = backends[0].device().map_or("cuda".to_string(), |d| {
        format!("{} x{}", d.name, backends.len())
    });
    Ok(Report {
        device,
        cpu_threads: rayon::current_num_threads(),
        figures,
        launch_overhead: None,
    })
}
