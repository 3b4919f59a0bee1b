//! `bench.json`: kiln's figures (`apps bench`'s report), PyTorch's (the
//! anchor script's JSON object) and the comparisons computed from the two,
//! plus the table printed from them. Pure: no files, no processes.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use anyhow::Result;
use kiln_bench_schema::{Data, Dtype, Engine, Report, Workload};
use serde::{Deserialize, Serialize};

use super::grid::{self, GridComparison};
use super::labels::{count_label, times_label};
use super::torch::{self, TorchFigures};

/// The element count PyTorch's anchor times its vector add at (`vadd_ms_2^28`).
const TORCH_VADD_N: u64 = 1 << 28;

/// The whole of `bench.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct BenchFile {
    /// UTC date of the run, `YYYY-MM-DD`.
    pub(crate) date: String,
    /// The command that made the figures.
    pub(crate) command: String,
    /// `apps bench --json`'s report, whole.
    pub(crate) apps: Report,
    /// Absent when the PyTorch comparison did not run.
    pub(crate) torch: Option<TorchFigures>,
    /// Why there are no PyTorch figures, when there are none.
    pub(crate) torch_skipped: Option<String>,
    /// kiln's anneal against `kmeans_anchors.py`, a table per data kind,
    /// when `--kmeans-anchors` ran.
    #[serde(
        default,
        deserialize_with = "super::kmeans::one_or_many",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub(crate) kmeans: Vec<super::kmeans::KmeansTable>,
    /// Derived from `apps` and `torch`; recomputed whenever the file is read.
    #[serde(default)]
    pub(crate) comparisons: Comparisons,
}

/// What `bench.json` derives from the raw figures.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Comparisons {
    pub(crate) vadd: Option<VaddComparison>,
    /// One per anneal shape apps ran, in its order.
    pub(crate) anneal: Vec<AnnealComparison>,
    /// One per embedding-grid figure (`anneal NxDxM gpu 10it f32|f16`).
    #[serde(default)]
    pub(crate) grid: Vec<GridComparison>,
}

/// The vector add against the copy bandwidth and PyTorch's add.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct VaddComparison {
    /// Elements (f32).
    pub(crate) n: u64,
    /// Whether it ran on the GPU (else apps found none and it ran on the CPU).
    pub(crate) on_gpu: bool,
    pub(crate) ms: f64,
    pub(crate) gb_per_s: f64,
    /// kiln's own device copy of the same size, in the same run.
    pub(crate) copy_gb_per_s: Option<f64>,
    pub(crate) percent_of_copy: Option<f64>,
    /// PyTorch's add; only for the size it times (2^28) and a GPU run.
    pub(crate) torch_ms: Option<f64>,
    pub(crate) torch_gb_per_s: Option<f64>,
    /// `torch_ms / ms`: above 1, kiln is faster.
    pub(crate) speedup_over_torch: Option<f64>,
}

/// One anneal shape: kiln's GPU and CPU runs and PyTorch's k-means.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct AnnealComparison {
    /// `NxDxM`.
    pub(crate) shape: String,
    pub(crate) gpu_ms: Option<f64>,
    pub(crate) cpu_ms: Option<f64>,
    /// `torch_kmeans30_<shape>_ms`: PyTorch k-means, 30 iterations, on the GPU.
    pub(crate) torch_ms: Option<f64>,
    /// `cpu_ms / gpu_ms`.
    pub(crate) speedup_over_cpu: Option<f64>,
    /// `torch_ms / gpu_ms`.
    pub(crate) speedup_over_torch: Option<f64>,
    /// kiln's wgpu engine (`anneal NxDxM wgpu`), when apps was built with
    /// it and found an adapter; absent from older files.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) wgpu_ms: Option<f64>,
    /// `cpu_ms / wgpu_ms`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) wgpu_speedup_over_cpu: Option<f64>,
    /// `wgpu_ms / gpu_ms`: how much faster the CUDA engine is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) gpu_speedup_over_wgpu: Option<f64>,
}

/// `a / b` where both exist and the result is a finite positive ratio.
fn ratio(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    let r = a? / b?;
    (r.is_finite() && r > 0.0).then_some(r)
}

/// Every comparison the figures allow; missing figures leave gaps, never
/// errors.
pub(crate) fn compare(apps: &Report, torch: Option<&TorchFigures>) -> Comparisons {
    let on_gpu = apps.device != "cpu";
    let mut copies = BTreeMap::new();
    let mut vadd = None;
    let mut anneal: Vec<AnnealComparison> = Vec::new();
    for f in &apps.figures {
        match f.kind {
            Workload::DeviceCopy { n } => {
                copies.insert(n, f.gb_per_s);
            }
            Workload::Vadd { n } => vadd = Some((n, f)),
            // The seed shapes' runs, which PyTorch's 30-iteration k-means
            // matches; the grid's and the multi-GPU runs are compared apart.
            Workload::Anneal {
                shape,
                engine,
                iterations: Workload::SEED_ITERATIONS,
                dtype: Dtype::F32,
                data: Data::Clustered,
            } => {
                if matches!(engine, Engine::Cuda { gpus } if gpus != 1) {
                    continue;
                }
                let shape = shape.to_string();
                let row = match anneal.iter_mut().position(|r| r.shape == shape) {
                    Some(i) => &mut anneal[i],
                    None => {
                        anneal.push(AnnealComparison {
                            torch_ms: torch::number(torch, &format!("torch_kmeans30_{shape}_ms")),
                            shape,
                            gpu_ms: None,
                            cpu_ms: None,
                            speedup_over_cpu: None,
                            speedup_over_torch: None,
                            wgpu_ms: None,
                            wgpu_speedup_over_cpu: None,
                            gpu_speedup_over_wgpu: None,
                        });
                        anneal.last_mut().expect("just pushed")
                    }
                };
                *(match engine {
                    Engine::Cpu => &mut row.cpu_ms,
                    Engine::Wgpu => &mut row.wgpu_ms,
                    Engine::Cuda { .. } => &mut row.gpu_ms,
                }) = Some(f.ms);
            }
            Workload::Anneal { .. } | Workload::Batch { .. } | Workload::Speedup { .. } => {}
        }
    }
    for row in &mut anneal {
        row.speedup_over_cpu = ratio(row.cpu_ms, row.gpu_ms);
        row.speedup_over_torch = ratio(row.torch_ms, row.gpu_ms);
        row.wgpu_speedup_over_cpu = ratio(row.cpu_ms, row.wgpu_ms);
        row.gpu_speedup_over_wgpu = ratio(row.wgpu_ms, row.gpu_ms);
    }
    let vadd = vadd.and_then(|(n, f)| {
        let gb_per_s = f.gb_per_s?;
        let copy_gb_per_s = copies.get(&n).copied().flatten();
        let torch_figures = torch.filter(|_| on_gpu && n == TORCH_VADD_N);
        let torch_ms = torch::number(torch_figures, "vadd_ms_2^28");
        Some(VaddComparison {
            n,
            on_gpu,
            ms: f.ms,
            gb_per_s,
            copy_gb_per_s,
            percent_of_copy: ratio(Some(gb_per_s), copy_gb_per_s).map(|r| 100.0 * r),
            torch_ms,
            torch_gb_per_s: torch::number(torch_figures, "vadd_GBps"),
            speedup_over_torch: ratio(torch_ms, Some(f.ms)),
        })
    });
    let grid = grid::compare(&apps.device, &apps.figures, torch);
    Comparisons { vadd, anneal, grid }
}

/// Builds `bench.json`'s contents from one run's parts.
pub(crate) fn merge(
    date: String,
    command: String,
    apps: Report,
    torch: Result<TorchFigures, String>,
) -> BenchFile {
    let (torch, torch_skipped) = match torch {
        Ok(t) => (Some(t), None),
        Err(why) => (None, Some(why)),
    };
    let comparisons = compare(&apps, torch.as_ref());
    BenchFile {
        date,
        command,
        apps,
        torch,
        torch_skipped,
        kmeans: Vec::new(),
        comparisons,
    }
}

/// Parses `apps bench --json`'s output; a field or workload the schema
/// does not know is an error, never dropped.
pub(crate) fn parse_apps(text: &str) -> Result<Report> {
    Ok(serde_json::from_str(text)?)
}

/// Parses `bench.json` and recomputes its comparisons, so that what is
/// printed and plotted always follows the current rules.
pub(crate) fn parse_bench(text: &str) -> Result<BenchFile> {
    let mut bench: BenchFile = serde_json::from_str(text)?;
    bench.comparisons = compare(&bench.apps, bench.torch.as_ref());
    Ok(bench)
}

fn ms_cell(ms: Option<f64>) -> String {
    ms.map_or("-".to_string(), |ms| format!("{ms:.3} ms"))
}

fn times_cell(r: Option<f64>) -> String {
    r.map_or("-".to_string(), times_label)
}

/// The comparisons as the table `cargo xtask bench` prints.
pub(crate) fn render_table(bench: &BenchFile) -> String {
    let c = &bench.comparisons;
    let mut rows: Vec<[String; 6]> = vec![[
        "workload".into(),
        "kiln GPU".into(),
        "kiln CPU".into(),
        "PyTorch GPU".into(),
        "vs kiln CPU".into(),
        "vs PyTorch".into(),
    ]];
    if let Some(v) = &c.vadd {
        let (gpu, cpu) = if v.on_gpu {
            (Some(v.ms), None)
        } else {
            (None, Some(v.ms))
        };
        rows.push([
            format!("vadd {} f32", count_label(v.n)),
            ms_cell(gpu),
            ms_cell(cpu),
            ms_cell(v.torch_ms),
            "-".into(),
            times_cell(v.speedup_over_torch),
        ]);
    }
    for a in &c.anneal {
        rows.push([
            format!("anneal {}", a.shape),
            ms_cell(a.gpu_ms),
            ms_cell(a.cpu_ms),
            ms_cell(a.torch_ms),
            times_cell(a.speedup_over_cpu),
            times_cell(a.speedup_over_torch),
        ]);
    }
    let mut widths = [0; 6];
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.len());
        }
    }
    let mut out = format!(
        "bench: {} ({} CPU threads), {}\n",
        bench.apps.device, bench.apps.cpu_threads, bench.date
    );
    for row in &rows {
        let mut line = format!("{:<w$}", row[0], w = widths[0]);
        for (cell, w) in row.iter().zip(widths).skip(1) {
            let _ = write!(line, "  {cell:>w$}");
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    if let Some(v) = &c.vadd {
        let _ = write!(out, "vadd: {:.1} GB/s", v.gb_per_s);
        if let (Some(p), Some(copy)) = (v.percent_of_copy, v.copy_gb_per_s) {
            let _ = write!(out, ", {p:.1}% of kiln's device copy ({copy:.1} GB/s)");
        }
        if let Some(t) = v.torch_gb_per_s {
            let _ = write!(out, "; PyTorch add {t:.1} GB/s");
        }
        out.push('\n');
    }
    out.push_str("ratios are PyTorch or kiln CPU time over kiln GPU time: above 1x, kiln's GPU path is faster\n");
    out.push_str("PyTorch here is its cdist k-means, the weak anchor (`--kmeans-anchors` runs the strong ones)\n");
    for a in c.anneal.iter().filter(|a| a.wgpu_ms.is_some()) {
        let _ = writeln!(
            out,
            "wgpu: anneal {} {}, {} over kiln CPU, CUDA {} faster",
            a.shape,
            ms_cell(a.wgpu_ms),
            times_cell(a.wgpu_speedup_over_cpu),
            times_cell(a.gpu_speedup_over_wgpu)
        );
    }
    out.push_str(&grid::render(&c.grid));
    if let Some(overhead) = &bench.apps.launch_overhead {
        let _ = writeln!(out, "{}", overhead.summary());
    }
    if let Some(why) = &bench.torch_skipped {
        let _ = writeln!(out, "PyTorch comparison skipped: {why}");
    }
    out
}

/// A run's `bench.json` for tests: the H100 figures of BENCHMARKS.md where it
/// has them, made up where it does not (the small shape's CPU run, notes).
#[cfg(test)]
pub(crate) fn fixture() -> BenchFile {
    let apps = parse_apps(include_str!("fixtures/apps.json")).unwrap();
    let torch = torch::parse(include_str!("fixtures/torch.json")).unwrap();
    merge(
        "2026-11-21".into(),
        "xtask bench --apps bin/apps --torch-script torch_anchor.py".into(),
        apps,
        Ok(torch),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    use kiln_bench_schema::{Figure, Shape};

    fn shape<'a>(bench: &'a BenchFile, shape: &str) -> &'a AnnealComparison {
        bench
            .comparisons
            .anneal
            .iter()
            .find(|a| a.shape == shape)
            .unwrap()
    }

    fn close(a: Option<f64>, b: f64) {
        let a = a.expect("a figure");
        assert!((a - b).abs() < 1e-9 * b.abs(), "{a} != {b}");
    }

    /// A figure of `kind` taking `ms`.
    fn figure(kind: Workload, ms: f64) -> Figure {
        Figure {
            kind,
            ms,
            runs: 5,
            gb_per_s: None,
            note: None,
            tflops: None,
        }
    }

    fn anneal(n: u64, engine: Engine, iterations: u32, data: Data) -> Workload {
        Workload::Anneal {
            shape: Shape { n, d: 64, m: 32 },
            engine,
            iterations,
            dtype: Dtype::F32,
            data,
        }
    }

    #[test]
    fn only_seed_runs_are_anneal_rows_and_other_kinds_are_kept_apart() {
        let mut apps = fixture().apps;
        let before = compare(&apps, None).anneal;
        let seed = Workload::SEED_ITERATIONS;
        // Of the seed shape 1000x64x32: a sharded run and the speedup (the
        // multi-GPU suite's), a grid-style run and a clustered run of other
        // iterations; none is the shape's one-GPU time.
        apps.figures.extend([
            figure(
                anneal(1000, Engine::Cuda { gpus: 2 }, seed, Data::Clustered),
                1.0,
            ),
            figure(
                Workload::Speedup {
                    shape: Shape {
                        n: 1000,
                        d: 64,
                        m: 32,
                    },
                    gpus: 2,
                },
                1.0,
            ),
            figure(anneal(1000, Engine::Cpu, seed, Data::Gaussian), 1.0),
            figure(anneal(1000, Engine::Cpu, 5, Data::Clustered), 1.0),
        ]);
        let c = compare(&apps, None);
        assert_eq!(c.anneal, before);
        // A one-GPU Gaussian run is the grid's.
        apps.figures.push(figure(
            anneal(7, Engine::Cuda { gpus: 1 }, 10, Data::Gaussian),
            3.0,
        ));
        let c = compare(&apps, None);
        assert_eq!(c.anneal, before);
        assert_eq!(c.grid.len(), 1);
        assert_eq!(
            (c.grid[0].shape.as_str(), c.grid[0].gpu_ms),
            ("7x64x32", 3.0)
        );
    }

    #[test]
    fn anneal_speedups_are_time_ratios_over_the_gpu_run() {
        let bench = fixture();
        let a = shape(&bench, "10000x128x256");
        close(a.speedup_over_cpu, 167.3 / 9.07);
        close(a.speedup_over_torch, 8.47 / 9.07);
        assert!(
            a.speedup_over_torch.unwrap() < 1.0,
            "PyTorch is faster here"
        );
        // Only a GPU run for the large shape: no CPU ratio, a PyTorch one.
        let a = shape(&bench, "1000000x128x2048");
        assert_eq!((a.cpu_ms, a.speedup_over_cpu), (None, None));
        close(a.speedup_over_torch, 903.1 / 847.5);
        // apps' order is kept, one row per shape.
        let shapes: Vec<&str> = bench
            .comparisons
            .anneal
            .iter()
            .map(|a| a.shape.as_str())
            .collect();
        assert_eq!(
            shapes,
            [
                "1000x64x32",
                "10000x128x256",
                "100000x384x1024",
                "1000000x128x2048"
            ]
        );
    }

    #[test]
    fn wgpu_rows_are_held_to_the_cpu_and_the_cuda_runs() {
        let mut apps = parse_apps(include_str!("fixtures/apps.json")).unwrap();
        let mut wgpu = apps
            .figures
            .iter()
            .find(|f| f.name() == "anneal 10000x128x256 gpu")
            .expect("the fixture's GPU figure")
            .clone();
        let Workload::Anneal { engine, .. } = &mut wgpu.kind else {
            panic!("an anneal figure")
        };
        *engine = Engine::Wgpu;
        wgpu.ms = 18.14;
        apps.figures.push(wgpu);
        let c = compare(&apps, None);
        let a = c
            .anneal
            .iter()
            .find(|a| a.shape == "10000x128x256")
            .unwrap();
        close(a.gpu_ms, 9.07);
        close(a.wgpu_ms, 18.14);
        close(a.wgpu_speedup_over_cpu, 167.3 / 18.14);
        close(a.gpu_speedup_over_wgpu, 18.14 / 9.07);
        // No wgpu figure, no wgpu ratio (and nothing in older files).
        let a = shape(&fixture(), "10000x128x256").clone();
        assert_eq!((a.wgpu_ms, a.gpu_speedup_over_wgpu), (None, None));
    }

    #[test]
    fn vadd_is_held_to_the_copy_of_the_same_run_and_to_pytorch() {
        let v = fixture().comparisons.vadd.unwrap();
        assert!(v.on_gpu);
        close(v.percent_of_copy, 100.0 * 2883.0 / 2987.0);
        close(v.torch_gb_per_s, 2984.0);
        close(v.speedup_over_torch, 1.080 / 1.117);
    }

    #[test]
    fn vadd_of_another_size_is_not_compared_with_pytorch() {
        let mut bench = fixture();
        for f in &mut bench.apps.figures {
            if let Workload::Vadd { n } | Workload::DeviceCopy { n } = &mut f.kind {
                *n = 1 << 20;
            }
        }
        let v = compare(&bench.apps, bench.torch.as_ref()).vadd.unwrap();
        assert_eq!((v.torch_ms, v.speedup_over_torch), (None, None));
        assert!(v.percent_of_copy.is_some(), "the copy has the same size");
    }

    #[test]
    fn a_cpu_run_has_no_gpu_ratios() {
        let vadd = Figure {
            gb_per_s: Some(32.2),
            ..figure(Workload::Vadd { n: TORCH_VADD_N }, 100.0)
        };
        let cpu = anneal(
            1000,
            Engine::Cpu,
            Workload::SEED_ITERATIONS,
            Data::Clustered,
        );
        let apps = Report {
            device: "cpu".into(),
            cpu_threads: 2,
            figures: vec![vadd, figure(cpu, 20.0)],
            launch_overhead: None,
        };
        let torch = fixture().torch;
        let c = compare(&apps, torch.as_ref());
        let v = c.vadd.unwrap();
        assert!(!v.on_gpu);
        assert_eq!(
            v.speedup_over_torch, None,
            "a CPU add against PyTorch's GPU add"
        );
        assert_eq!(c.anneal[0].speedup_over_cpu, None);
        assert_eq!(c.anneal[0].speedup_over_torch, None);
    }

    #[test]
    fn skipped_pytorch_leaves_only_the_cpu_ratios() {
        let mut bench = fixture();
        bench = merge(
            bench.date,
            bench.command,
            bench.apps,
            Err("python3 not found on PATH".into()),
        );
        assert!(bench.torch.is_none());
        let a = shape(&bench, "1000x64x32");
        assert!(a.speedup_over_cpu.is_some());
        assert_eq!((a.torch_ms, a.speedup_over_torch), (None, None));
        assert!(
            render_table(&bench).contains("PyTorch comparison skipped: python3 not found on PATH")
        );
    }

    #[test]
    fn bench_json_round_trips_and_comparisons_are_recomputed_on_read() {
        let bench = fixture();
        let mut stale = bench.clone();
        stale.comparisons = Comparisons::default();
        let text = serde_json::to_string_pretty(&stale).unwrap();
        assert_eq!(parse_bench(&text).unwrap(), bench);
        // The raw parts are kept as they came.
        let json: serde_json::Value = serde_json::to_value(&bench).unwrap();
        assert_eq!(json["apps"]["device"], "NVIDIA H100 80GB HBM3");
        assert_eq!(json["torch"]["copy_GBps"], 2944.0);
        assert_eq!(json["torch_skipped"], serde_json::Value::Null);
    }

    #[test]
    fn apps_reports_lose_nothing_through_bench_json() {
        // The fixture sets every field the schema has: launch_overhead
        // included, which a copy of the schema here once dropped.
        let fixture = include_str!("fixtures/apps.json");
        let json: serde_json::Value = serde_json::from_str(fixture).unwrap();
        assert!(json["launch_overhead"]["overhead_us"].is_number());
        let bench = merge(
            "d".into(),
            "c".into(),
            parse_apps(fixture).unwrap(),
            Err("-".into()),
        );
        let written = serde_json::to_value(&bench).unwrap();
        assert_eq!(written["apps"], json, "bench.json holds apps.json whole");
        let text = serde_json::to_string_pretty(&bench).unwrap();
        assert_eq!(parse_bench(&text).unwrap(), bench);
    }

    #[test]
    fn unknown_fields_and_kinds_are_errors_not_dropped() {
        let bench = serde_json::to_value(fixture()).unwrap();
        type Plant = (&'static str, fn(&mut serde_json::Value));
        let plants: [Plant; 5] = [
            ("a top-level field", |b| b["extra"] = 1.into()),
            ("an apps field", |b| b["apps"]["gpus"] = 2.into()),
            ("a figure field", |b| {
                b["apps"]["figures"][0]["name"] = "x".into()
            }),
            ("a workload", |b| {
                b["apps"]["figures"][0]["kind"]["workload"] = "matmul".into();
            }),
            ("an engine", |b| {
                b["apps"]["figures"][3]["kind"]["engine"] = "tpu".into();
            }),
        ];
        for (what, plant) in plants {
            let mut edited = bench.clone();
            plant(&mut edited);
            let text = edited.to_string();
            assert!(parse_bench(&text).is_err(), "{what} was accepted");
            if edited["apps"] != bench["apps"] {
                let apps = edited["apps"].to_string();
                assert!(
                    parse_apps(&apps).is_err(),
                    "{what} was accepted by parse_apps"
                );
            }
        }
    }

    #[test]
    fn table_snapshot() {
        insta::assert_snapshot!(render_table(&fixture()));
    }
}
