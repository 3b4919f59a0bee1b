//! `bench.json`: kiln's figures (`apps bench`'s report), PyTorch's (the
//! anchor script's JSON object) and the comparisons computed from the two,
//! plus the table printed from them. Pure: no files, no processes.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use anyhow::{bail, Result};
use serde::{Deserialize, Serialize};

use super::grid::{self, GridComparison};

/// The element count PyTorch's anchor times its vector add at (`vadd_ms_2^28`).
const TORCH_VADD_N: u64 = 1 << 28;

/// `apps bench --json`'s report, read back. Mirrors `apps::bench::Report`
/// (xtask does not depend on apps: that would compile the kernels); the
/// fixture in `fixtures/apps.json` is that report's format.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct AppsReport {
    /// The GPU's name, or `cpu` when apps found no GPU.
    pub(crate) device: String,
    /// Threads of kiln's CPU path.
    pub(crate) cpu_threads: usize,
    pub(crate) figures: Vec<Figure>,
}

/// One of apps' figures (`apps::bench::Figure`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Figure {
    pub(crate) name: String,
    /// Median milliseconds.
    pub(crate) ms: f64,
    pub(crate) runs: usize,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) gb_per_s: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) note: Option<String>,
    /// An anneal's distance flops per second (TFLOP/s).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) tflops: Option<f64>,
}

/// PyTorch's figures as its anchor script printed them (`copy_GBps`,
/// `torch_kmeans30_10000x128x256_ms`, ...).
pub(crate) type TorchFigures = BTreeMap<String, serde_json::Value>;

/// The whole of `bench.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct BenchFile {
    /// UTC date of the run, `YYYY-MM-DD`.
    pub(crate) date: String,
    /// The command that made the figures.
    pub(crate) command: String,
    pub(crate) apps: AppsReport,
    /// Absent when the PyTorch comparison did not run.
    pub(crate) torch: Option<TorchFigures>,
    /// Why there are no PyTorch figures, when there are none.
    pub(crate) torch_skipped: Option<String>,
    /// Derived from `apps` and `torch`; recomputed whenever the file is read.
    #[serde(default)]
    pub(crate) comparisons: Comparisons,
}

/// What `bench.json` derives from the raw figures.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
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

/// Which engine an anneal figure ran on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Engine {
    Gpu,
    Cpu,
    Wgpu,
}

/// What a figure's name says it measured.
#[derive(Debug, PartialEq)]
enum Workload<'a> {
    Copy { n: u64 },
    Vadd { n: u64 },
    Anneal { shape: &'a str, engine: Engine },
    Other,
}

/// Reads apps' figure names: `device copy N f32`, `vadd N f32`,
/// `anneal NxDxM gpu|cpu|wgpu`; anything else (batch) has no comparison.
fn classify(name: &str) -> Workload<'_> {
    let words: Vec<&str> = name.split_whitespace().collect();
    match words[..] {
        ["device", "copy", n, "f32"] => n.parse().map_or(Workload::Other, |n| Workload::Copy { n }),
        ["vadd", n, "f32"] => n.parse().map_or(Workload::Other, |n| Workload::Vadd { n }),
        ["anneal", shape, "gpu"] => Workload::Anneal {
            shape,
            engine: Engine::Gpu,
        },
        ["anneal", shape, "cpu"] => Workload::Anneal {
            shape,
            engine: Engine::Cpu,
        },
        ["anneal", shape, "wgpu"] => Workload::Anneal {
            shape,
            engine: Engine::Wgpu,
        },
        _ => Workload::Other,
    }
}

/// `a / b` where both exist and the result is a finite positive ratio.
fn ratio(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    let r = a? / b?;
    (r.is_finite() && r > 0.0).then_some(r)
}

fn torch_number(torch: Option<&TorchFigures>, key: &str) -> Option<f64> {
    torch?.get(key)?.as_f64()
}

/// Every comparison the figures allow; missing figures leave gaps, never
/// errors.
pub(crate) fn compare(apps: &AppsReport, torch: Option<&TorchFigures>) -> Comparisons {
    let on_gpu = apps.device != "cpu";
    let mut copies = BTreeMap::new();
    let mut vadd = None;
    let mut anneal: Vec<AnnealComparison> = Vec::new();
    for f in &apps.figures {
        match classify(&f.name) {
            Workload::Copy { n } => {
                copies.insert(n, f.gb_per_s);
            }
            Workload::Vadd { n } => vadd = Some((n, f)),
            Workload::Anneal { shape, engine } => {
                let row = match anneal.iter_mut().position(|r| r.shape == shape) {
                    Some(i) => &mut anneal[i],
                    None => {
                        anneal.push(AnnealComparison {
                            shape: shape.to_string(),
                            gpu_ms: None,
                            cpu_ms: None,
                            torch_ms: torch_number(torch, &format!("torch_kmeans30_{shape}_ms")),
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
                    Engine::Gpu => &mut row.gpu_ms,
                    Engine::Cpu => &mut row.cpu_ms,
                    Engine::Wgpu => &mut row.wgpu_ms,
                }) = Some(f.ms);
            }
            Workload::Other => {}
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
        let torch_ms = torch_number(torch_figures, "vadd_ms_2^28");
        Some(VaddComparison {
            n,
            on_gpu,
            ms: f.ms,
            gb_per_s,
            copy_gb_per_s,
            percent_of_copy: ratio(Some(gb_per_s), copy_gb_per_s).map(|r| 100.0 * r),
            torch_ms,
            torch_gb_per_s: torch_number(torch_figures, "vadd_GBps"),
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
    apps: AppsReport,
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
        comparisons,
    }
}

/// Parses `apps bench --json`'s output.
pub(crate) fn parse_apps(text: &str) -> Result<AppsReport> {
    Ok(serde_json::from_str(text)?)
}

/// Parses the PyTorch anchor's output: a JSON object with numbers in it.
pub(crate) fn parse_torch(text: &str) -> Result<TorchFigures> {
    let figures: TorchFigures = serde_json::from_str(text)?;
    if !figures.values().any(serde_json::Value::is_number) {
        bail!("a JSON object with no numbers in it");
    }
    Ok(figures)
}

/// Parses `bench.json` and recomputes its comparisons, so that what is
/// printed and plotted always follows the current rules.
pub(crate) fn parse_bench(text: &str) -> Result<BenchFile> {
    let mut bench: BenchFile = serde_json::from_str(text)?;
    bench.comparisons = compare(&bench.apps, bench.torch.as_ref());
    Ok(bench)
}

/// `2^28` for powers of two from 2^10 on, else the number.
pub(crate) fn count_label(n: u64) -> String {
    if n.is_power_of_two() && n >= 1 << 10 {
        format!("2^{}", n.trailing_zeros())
    } else {
        n.to_string()
    }
}

/// `18.45x`.
pub(crate) fn times_label(r: f64) -> String {
    format!("{r:.2}x")
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
    let torch = parse_torch(include_str!("fixtures/torch.json")).unwrap();
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

    #[test]
    fn names_are_classified() {
        let check = |name, expected| assert_eq!(classify(name), expected, "{name}");
        check("device copy 268435456 f32", Workload::Copy { n: 1 << 28 });
        check("vadd 1048576 f32", Workload::Vadd { n: 1 << 20 });
        check(
            "anneal 10000x128x256 gpu",
            Workload::Anneal {
                shape: "10000x128x256",
                engine: Engine::Gpu,
            },
        );
        check(
            "anneal 1000x64x32 cpu",
            Workload::Anneal {
                shape: "1000x64x32",
                engine: Engine::Cpu,
            },
        );
        check(
            "anneal 1000x64x32 wgpu",
            Workload::Anneal {
                shape: "1000x64x32",
                engine: Engine::Wgpu,
            },
        );
        check("batch 10000 structures", Workload::Other);
        check("vadd many f32", Workload::Other);
        check("anneal 1x1x1 tpu", Workload::Other);
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
            .find(|f| f.name == "anneal 10000x128x256 gpu")
            .expect("the fixture's GPU figure")
            .clone();
        wgpu.name = "anneal 10000x128x256 wgpu".into();
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
            f.name = f.name.replace("268435456", "1048576");
        }
        let v = compare(&bench.apps, bench.torch.as_ref()).vadd.unwrap();
        assert_eq!((v.torch_ms, v.speedup_over_torch), (None, None));
        assert!(v.percent_of_copy.is_some(), "the copy has the same size");
    }

    #[test]
    fn a_cpu_run_has_no_gpu_ratios() {
        let apps = AppsReport {
            device: "cpu".into(),
            cpu_threads: 2,
            figures: vec![
                Figure {
                    name: format!("vadd {TORCH_VADD_N} f32"),
                    ms: 100.0,
                    runs: 50,
                    gb_per_s: Some(32.2),
                    note: None,
                    tflops: None,
                },
                Figure {
                    name: "anneal 1000x64x32 cpu".into(),
                    ms: 20.0,
                    runs: 5,
                    gb_per_s: None,
                    note: None,
                    tflops: None,
                },
            ],
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
    fn torch_output_must_be_an_object_of_numbers() {
        assert!(parse_torch("[1, 2]").is_err());
        assert!(parse_torch(r#"{"a": "b"}"#).is_err());
        assert!(parse_torch(r#"{"copy_GBps": 1.5}"#).is_ok());
    }

    #[test]
    fn labels() {
        assert_eq!(count_label(1 << 28), "2^28");
        assert_eq!(count_label(1000), "1000");
        assert_eq!(times_label(18.4454), "18.45x");
    }

    #[test]
    fn table_snapshot() {
        insta::assert_snapshot!(render_table(&fixture()));
    }
}
