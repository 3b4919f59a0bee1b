//! The embedding grid's comparisons: kiln's anneal of Gaussian points on
//! one GPU (`anneal NxDxM gpu 10it f32|f16`) against PyTorch's plain k-means of the
//! same shape in exact fp32 and with TF32 allowed
//! (`torch_kmeans10_NxDxM_{fp32,tf32}_ms`), and kiln's distance flops per
//! second as a fraction of the GPU's dense tensor peaks. Pure, like
//! `report.rs`.

use std::fmt::Write as _;

use kiln_bench_schema::{Data, Engine, Figure, Workload};
use serde::{Deserialize, Serialize};

use super::labels::times_label;
use super::torch::{self, TorchFigures};

/// One grid shape and input type.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct GridComparison {
    /// `NxDxM`.
    pub(crate) shape: String,
    /// Iterations of both runs.
    pub(crate) iterations: u32,
    /// `f32` or `f16` (kiln's input; PyTorch's is always f32).
    pub(crate) dtype: String,
    pub(crate) gpu_ms: f64,
    /// kiln's distance flops (`2·n·d·m` per iteration) per second.
    pub(crate) tflops: Option<f64>,
    pub(crate) torch_fp32_ms: Option<f64>,
    pub(crate) torch_tf32_ms: Option<f64>,
    /// `torch_fp32_ms / gpu_ms`.
    pub(crate) speedup_over_fp32: Option<f64>,
    /// `torch_tf32_ms / gpu_ms`.
    pub(crate) speedup_over_tf32: Option<f64>,
    /// `tflops` over the device's dense FP16 tensor peak (the precision of
    /// kiln's distance kernel), in percent.
    pub(crate) percent_of_fp16_peak: Option<f64>,
    /// The same over the dense TF32 peak.
    pub(crate) percent_of_tf32_peak: Option<f64>,
}

/// Dense tensor peaks `(fp16, tf32)` in TFLOP/s of the GPUs kiln is measured
/// on, by a piece of the name the driver reports; `None` for any other GPU
/// (then no fraction of peak is given rather than a guessed one). H100 SXM
/// and H200: 989.4 and 494.7 (NVIDIA's H100/H200 data sheets, dense); A100:
/// 312 and 156.
pub(crate) fn dense_peaks(device: &str) -> Option<(f64, f64)> {
    if device.contains("H100 80GB HBM3") || device.contains("H100 SXM") || device.contains("H200") {
        Some((989.4, 494.7))
    } else if device.contains("A100") {
        Some((312.0, 156.0))
    } else {
        None
    }
}

fn ratio(a: Option<f64>, b: f64) -> Option<f64> {
    let r = a? / b;
    (r.is_finite() && r > 0.0).then_some(r)
}

/// One row per grid figure (Gaussian points on one GPU), in apps' order.
pub(crate) fn compare(
    device: &str,
    figures: &[Figure],
    torch: Option<&TorchFigures>,
) -> Vec<GridComparison> {
    let peaks = dense_peaks(device);
    let torch_ms = |key: String| torch::number(torch, &key);
    figures
        .iter()
        .filter_map(|f| {
            let Workload::Anneal {
                shape,
                engine: Engine::Cuda { gpus: 1 },
                iterations,
                dtype,
                data: Data::Gaussian,
            } = f.kind
            else {
                return None;
            };
            let fp32 = torch_ms(format!("torch_kmeans{iterations}_{shape}_fp32_ms"));
            let tf32 = torch_ms(format!("torch_kmeans{iterations}_{shape}_tf32_ms"));
            let percent = |peak: f64| f.tflops.map(|t| 100.0 * t / peak);
            Some(GridComparison {
                shape: shape.to_string(),
                iterations,
                dtype: dtype.to_string(),
                gpu_ms: f.ms,
                tflops: f.tflops,
                torch_fp32_ms: fp32,
                torch_tf32_ms: tf32,
                speedup_over_fp32: ratio(fp32, f.ms),
                speedup_over_tf32: ratio(tf32, f.ms),
                percent_of_fp16_peak: peaks.and_then(|(fp16, _)| percent(fp16)),
                percent_of_tf32_peak: peaks.and_then(|(_, tf32)| percent(tf32)),
            })
        })
        .collect()
}

/// The grid's table, after the main one.
pub(crate) fn render(rows: &[GridComparison]) -> String {
    if rows.is_empty() {
        return String::new();
    }
    let cell = |v: Option<f64>, f: &dyn Fn(f64) -> String| v.map_or("-".to_string(), f);
    let ms = |v: f64| format!("{v:.2} ms");
    let pct = |v: f64| format!("{v:.1}%");
    let mut table: Vec<[String; 9]> = vec![[
        "embedding grid".into(),
        "kiln GPU".into(),
        "PyTorch fp32".into(),
        "PyTorch TF32".into(),
        "vs fp32".into(),
        "vs TF32".into(),
        "TFLOP/s".into(),
        "FP16 peak".into(),
        "TF32 peak".into(),
    ]];
    for r in rows {
        table.push([
            format!("{} {}it {}", r.shape, r.iterations, r.dtype),
            ms(r.gpu_ms),
            cell(r.torch_fp32_ms, &ms),
            cell(r.torch_tf32_ms, &ms),
            cell(r.speedup_over_fp32, &times_label),
            cell(r.speedup_over_tf32, &times_label),
            cell(r.tflops, &|t| format!("{t:.1}")),
            cell(r.percent_of_fp16_peak, &pct),
            cell(r.percent_of_tf32_peak, &pct),
        ]);
    }
    let mut widths = [0; 9];
    for row in &table {
        for (w, c) in widths.iter_mut().zip(row) {
            *w = (*w).max(c.len());
        }
    }
    let mut out = String::new();
    for row in &table {
        let mut line = format!("{:<w$}", row[0], w = widths[0]);
        for (c, w) in row.iter().zip(widths).skip(1) {
            let _ = write!(line, "  {c:>w$}");
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out.push_str(
        "grid: PyTorch's k-means (f32 input) over kiln's anneal time; TFLOP/s counts 2·n·d·m \
         distance flops per iteration; peaks are the GPU's dense tensor figures\n",
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    use kiln_bench_schema::{Dtype, Shape};

    fn figure(n: u64, iterations: u32, dtype: Dtype, ms: f64, tflops: Option<f64>) -> Figure {
        Figure {
            kind: Workload::Anneal {
                shape: Shape { n, d: 8, m: 4 },
                engine: Engine::Cuda { gpus: 1 },
                iterations,
                dtype,
                data: if iterations == 10 {
                    Data::Gaussian
                } else {
                    Data::Clustered
                },
            },
            ms,
            runs: 3,
            gb_per_s: None,
            note: None,
            tflops,
        }
    }

    #[test]
    fn peaks() {
        assert_eq!(dense_peaks("NVIDIA H100 80GB HBM3"), Some((989.4, 494.7)));
        assert_eq!(dense_peaks("NVIDIA H200"), Some((989.4, 494.7)));
        assert_eq!(dense_peaks("NVIDIA H100 PCIe"), None);
        assert_eq!(dense_peaks("cpu"), None);
    }

    #[test]
    fn ratios_and_fractions_of_peak() {
        let mut torch = TorchFigures::new();
        torch.insert("torch_kmeans10_100x8x4_fp32_ms".into(), 60.0.into());
        torch.insert("torch_kmeans10_100x8x4_tf32_ms".into(), 30.0.into());
        let figures = [
            figure(100, 10, Dtype::F32, 10.0, Some(98.94)),
            figure(100, 30, Dtype::F32, 1.0, None),
            figure(200, 10, Dtype::F16, 5.0, None),
        ];
        let rows = compare("NVIDIA H100 80GB HBM3", &figures, Some(&torch));
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0].speedup_over_fp32, Some(6.0));
        assert_eq!(rows[0].speedup_over_tf32, Some(3.0));
        assert!((rows[0].percent_of_fp16_peak.unwrap() - 10.0).abs() < 1e-9);
        assert!((rows[0].percent_of_tf32_peak.unwrap() - 20.0).abs() < 1e-9);
        // No PyTorch figure of that shape, no flops: gaps, not errors.
        assert_eq!(rows[1].speedup_over_tf32, None);
        assert_eq!(rows[1].percent_of_fp16_peak, None);
        let table = render(&rows);
        assert!(table.contains("100x8x4 10it f32"), "{table}");
        assert!(table.contains("3.00x"), "{table}");
        assert!(render(&[]).is_empty());
    }
}
