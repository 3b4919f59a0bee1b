//! kiln's anneal beside the five k-means anchors of `kmeans_anchors.py`
//! (issue 28's Benchmarks): the shapes, the anchor script's JSON read
//! strictly, and one table per data kind (times, kiln over the best anchor,
//! the fraction of the dense FP16 peak). Pure: no files, no processes.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

use super::labels::times_label;
use super::points::Kind;

/// Dense FP16 tensor peak of an H100 or H200 SXM (the same on both), TFLOP/s.
pub(crate) const FP16_PEAK_TFLOPS: f64 = 989.0;

/// The anchor script's modes, in its order; `cdist_tf32` is the weak one.
pub(crate) const MODES: [&str; 5] = [
    "cdist_tf32",
    "gemm_tf32",
    "gemm_f16",
    "flash_f16",
    "flash_f32",
];

/// The column heads of [`MODES`].
const MODE_HEADS: [&str; 5] = [
    "cdist TF32 (weak)",
    "GEMM TF32",
    "GEMM f16",
    "Flash f16",
    "Flash f32",
];

/// One benchmark shape: `n` points of `d` dimensions, `k` anchors, `iters`
/// iterations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Shape {
    pub(crate) n: u64,
    pub(crate) d: u64,
    pub(crate) k: u64,
    pub(crate) iters: u32,
}

impl Shape {
    pub(crate) const fn new(n: u64, d: u64, k: u64, iters: u32) -> Self {
        Self { n, d, k, iters }
    }

    /// `NxDxK_itI`, the prefix of the anchor script's keys.
    pub(crate) fn key(&self) -> String {
        format!("{}x{}x{}_it{}", self.n, self.d, self.k, self.iters)
    }

    /// `N,D,K,I`, the anchor script's argument.
    pub(crate) fn arg(&self) -> String {
        format!("{},{},{},{}", self.n, self.d, self.k, self.iters)
    }

    /// `2·n·d·k` per iteration.
    fn flops(&self) -> f64 {
        2.0 * self.n as f64 * self.d as f64 * self.k as f64 * f64::from(self.iters)
    }
}

/// Issue 28's shapes, 10 iterations each, and the small one for 30; then
/// issue 39's: narrow points by the million, a `d` that is no multiple of
/// 16, `k` above 10K.
pub(crate) const SHAPES: [Shape; 12] = [
    Shape::new(10_000, 128, 256, 10),
    Shape::new(10_000, 128, 256, 30),
    Shape::new(1_000_000, 128, 2048, 10),
    Shape::new(100_000, 384, 1024, 10),
    Shape::new(100_000, 768, 1024, 10),
    Shape::new(100_000, 1536, 1024, 10),
    Shape::new(1_000_000, 768, 4096, 10),
    Shape::new(100_000, 4096, 1024, 10),
    Shape::new(50_000, 2048, 256, 10),
    Shape::new(2_000_000, 64, 2048, 10),
    Shape::new(100_000, 200, 1024, 10),
    Shape::new(200_000, 128, 16384, 10),
];

/// `--quick`: the small shapes only (seconds, not minutes), with the `d`
/// that is no multiple of 16.
pub(crate) fn shapes(quick: bool) -> Vec<Shape> {
    if quick {
        [0, 1, 3, 10].iter().map(|i| SHAPES[*i]).collect()
    } else {
        SHAPES.to_vec()
    }
}

/// One mode's figure for one shape, as the script printed it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Figure {
    Ms(f64),
    /// The mode raised (`error: TYPE: message`), or did not run.
    Missing(String),
}

/// What `kmeans_anchors.py` printed, read strictly.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct AnchorOutput {
    pub(crate) device: String,
    pub(crate) torch: String,
    pub(crate) flash_kmeans: bool,
    /// `(shape key, mode)` to its figure, every requested pair present.
    pub(crate) figures: BTreeMap<(String, &'static str), Figure>,
}

/// The fixed fields of the script's object; the rest are figures.
#[derive(Deserialize)]
struct Header {
    flash_kmeans: bool,
    torch: String,
    #[allow(dead_code)] // read so that its absence is an error of the output
    mm_out_dtype_f32: bool,
    device: String,
    #[serde(flatten)]
    figures: BTreeMap<String, serde_json::Value>,
}

/// Reads the script's JSON: every key known, every requested figure a
/// number of milliseconds or an `error: ...` string; the Flash modes may be
/// absent only where the script says flash-kmeans did not import.
pub(crate) fn parse_anchors(text: &str, shapes: &[Shape]) -> Result<AnchorOutput> {
    let header: Header = serde_json::from_str(text.trim())?;
    let mut wanted = BTreeMap::new();
    for s in shapes {
        for mode in MODES {
            wanted.insert(format!("{}_{mode}_ms", s.key()), (s.key(), mode));
        }
    }
    let mut figures = BTreeMap::new();
    for (key, value) in &header.figures {
        let Some(slot) = wanted.get(key) else {
            bail!("unknown key `{key}` (not a figure of a shape this bench asked for)");
        };
        let figure = match value {
            serde_json::Value::Number(n) => match n.as_f64() {
                Some(ms) if ms.is_finite() && ms >= 0.0 => Figure::Ms(ms),
                _ => bail!("key `{key}`: {n} is not a time in milliseconds"),
            },
            serde_json::Value::String(s) if s.starts_with("error: ") => Figure::Missing(s.clone()),
            other => bail!("key `{key}`: expected milliseconds or `error: ...`, got {other}"),
        };
        figures.insert(slot.clone(), figure);
    }
    for (key, slot) in wanted {
        if figures.contains_key(&slot) {
            continue;
        }
        if slot.1.starts_with("flash") && !header.flash_kmeans {
            figures.insert(
                slot,
                Figure::Missing("not run: flash-kmeans did not import".into()),
            );
        } else {
            bail!("no key `{key}` in the anchor output");
        }
    }
    Ok(AnchorOutput {
        device: header.device,
        torch: header.torch,
        flash_kmeans: header.flash_kmeans,
        figures,
    })
}

/// [`parse_anchors`] with the script named in its error.
pub(crate) fn parse_script_output(
    text: &str,
    shapes: &[Shape],
    script: &str,
) -> Result<AnchorOutput> {
    parse_anchors(text, shapes).with_context(|| format!("{script} printed no valid anchor JSON"))
}

/// One anchor mode's cell of a row.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct AnchorCell {
    pub(crate) mode: String,
    pub(crate) ms: Option<f64>,
    /// Why there is no time (`error: ...`, `not run: ...`).
    pub(crate) note: Option<String>,
}

/// One shape: kiln's median beside the five anchors.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct KmeansRow {
    /// `NxDxK_itI`.
    pub(crate) shape: String,
    /// kiln's anneal, the median of its runs' time after setup.
    pub(crate) kiln_ms: Option<f64>,
    pub(crate) kiln_runs_ms: Vec<f64>,
    /// Why kiln has no time.
    pub(crate) kiln_note: Option<String>,
    /// In [`MODES`] order.
    pub(crate) anchors: Vec<AnchorCell>,
    /// The fastest anchor mode that ran.
    pub(crate) best_anchor: Option<String>,
    /// Best anchor time over kiln's: above 1, kiln is faster.
    pub(crate) kiln_speed_over_best: Option<f64>,
    /// `2·n·d·k·iters` over the run's time, as a fraction of 989 TFLOP/s.
    pub(crate) kiln_fp16_peak: Option<f64>,
    pub(crate) flash_f16_fp16_peak: Option<f64>,
    /// The largest share of the points the tensor-core kernel left to the
    /// list kernel in any assignment after the first, from one more, untimed
    /// run under `KILN_ANNEAL_TC_STATS=1` (which waits on every assignment).
    /// Absent where that run printed fewer than two (no tensor cores, or it
    /// failed; the bench printed why), and in a bench.json from before it.
    #[serde(default)]
    pub(crate) kiln_list_share: Option<f64>,
}

/// The comparison on one kind of points, as `bench.json` keeps it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct KmeansTable {
    /// The points' distribution (absent in a bench.json from before kinds:
    /// those were normal).
    #[serde(default)]
    pub(crate) kind: Kind,
    /// The anchors' device and PyTorch, as the script printed them.
    pub(crate) anchor_device: Option<String>,
    pub(crate) anchor_torch: Option<String>,
    /// Why no anchor figure at all, when none.
    pub(crate) anchors_skipped: Option<String>,
    pub(crate) rows: Vec<KmeansRow>,
}

/// kiln's figures for one shape: run times and the list share
/// ([`KmeansRow::kiln_list_share`]), or why none.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Kiln {
    Runs(Vec<f64>, Option<f64>),
    Failed(String),
}

/// The median (the upper one of an even count).
fn median(v: &[f64]) -> Option<f64> {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied()
}

fn peak(shape: &Shape, ms: Option<f64>) -> Option<f64> {
    let ms = ms.filter(|ms| *ms > 0.0)?;
    Some(shape.flops() / (ms * 1e-3) / (FP16_PEAK_TFLOPS * 1e12))
}

/// The rows from kiln's runs and the anchors' output (`Err`: why none) on
/// `kind`'s points.
pub(crate) fn table(
    kind: Kind,
    shapes: &[Shape],
    kiln: &[Kiln],
    anchors: std::result::Result<&AnchorOutput, &str>,
) -> KmeansTable {
    let rows = shapes
        .iter()
        .zip(kiln)
        .map(|(shape, kiln)| {
            let (runs, list_share, kiln_note) = match kiln {
                Kiln::Runs(runs, share) => (runs.clone(), *share, None),
                Kiln::Failed(why) => (Vec::new(), None, Some(why.clone())),
            };
            let kiln_ms = median(&runs);
            let cells: Vec<AnchorCell> = MODES
                .iter()
                .map(|mode| {
                    let figure = match anchors {
                        Ok(a) => a.figures.get(&(shape.key(), *mode)).cloned(),
                        Err(_) => None,
                    };
                    let (ms, note) = match figure {
                        Some(Figure::Ms(ms)) => (Some(ms), None),
                        Some(Figure::Missing(why)) => (None, Some(why)),
                        None => (None, Some("not run".into())),
                    };
                    AnchorCell {
                        mode: (*mode).into(),
                        ms,
                        note,
                    }
                })
                .collect();
            let best = cells
                .iter()
                .filter_map(|c| c.ms.filter(|ms| *ms > 0.0).map(|ms| (ms, &c.mode)))
                .min_by(|a, b| a.0.total_cmp(&b.0));
            let flash_f16 = cells[3].ms;
            KmeansRow {
                shape: shape.key(),
                kiln_ms,
                kiln_runs_ms: runs,
                kiln_note,
                best_anchor: best.map(|(_, m)| m.clone()),
                kiln_speed_over_best: match (best, kiln_ms) {
                    (Some((b, _)), Some(k)) if k > 0.0 => Some(b / k),
                    _ => None,
                },
                kiln_fp16_peak: peak(shape, kiln_ms),
                flash_f16_fp16_peak: peak(shape, flash_f16),
                kiln_list_share: list_share,
                anchors: cells,
            }
        })
        .collect();
    let (anchor_device, anchor_torch, anchors_skipped) = match anchors {
        Ok(a) => (Some(a.device.clone()), Some(a.torch.clone()), None),
        Err(why) => (None, None, Some(why.to_string())),
    };
    KmeansTable {
        kind,
        anchor_device,
        anchor_torch,
        anchors_skipped,
        rows,
    }
}

fn ms_cell(ms: Option<f64>, note: Option<&String>) -> String {
    match (ms, note) {
        (Some(ms), _) => format!("{ms:.2}"),
        (None, Some(n)) if n.starts_with("not run") => "not run".into(),
        (None, _) => "error".into(),
    }
}

fn percent(f: Option<f64>) -> String {
    f.map_or("-".into(), |f| format!("{:.1}%", f * 100.0))
}

/// A list share as the table and the bench's progress show it: two
/// decimals, since the bar is 1% (`-` for none).
pub(crate) fn list_share_cell(f: Option<f64>) -> String {
    f.map_or("-".into(), |f| format!("{:.2}%", f * 100.0))
}

/// Every kind's table as markdown (`kmeans.md`): with more than one kind,
/// kiln over the best anchor by shape and kind first, then a section per
/// kind, its notes under it.
pub(crate) fn render_markdown(tables: &[KmeansTable]) -> String {
    let mut out = String::from("# kiln's anneal against the k-means anchors\n\n");
    let _ = writeln!(
        out,
        "Times in ms for the whole run after setup, the same points (`KIND/x_N_D.npy`, f32) for kiln and the anchors. \
         `kiln / best`: the best anchor's time over kiln's (above 1x, kiln is faster). \
         `% peak`: 2·n·d·k per iteration over the run's time, of the dense FP16 peak ({FP16_PEAK_TFLOPS} TFLOP/s). \
         cdist TF32 is the weak anchor. \
         `list share`: the largest share of the points the tensor-core kernel left to the list kernel \
         in any assignment after the first, from one more, untimed run under `KILN_ANNEAL_TC_STATS=1` \
         (`-`: none printed, as on a GPU without tensor cores).\n"
    );
    if tables.len() > 1 {
        render_summary(&mut out, tables);
    }
    for t in tables {
        render_kind(&mut out, t);
    }
    out.truncate(out.trim_end().len());
    out.push('\n');
    out
}

/// kiln over the best anchor, a row per shape and a column per kind.
fn render_summary(out: &mut String, tables: &[KmeansTable]) {
    let _ = writeln!(out, "## kiln / best anchor, by kind\n");
    let mut head = vec!["shape n x d x k, iterations"];
    head.extend(tables.iter().map(|t| t.kind.name()));
    let _ = writeln!(out, "| {} |", head.join(" | "));
    let _ = writeln!(out, "|{}", " --- |".repeat(head.len()));
    for (i, r) in tables[0].rows.iter().enumerate() {
        let mut cells = vec![r.shape.clone()];
        cells.extend(tables.iter().map(|t| {
            t.rows
                .get(i)
                .and_then(|r| r.kiln_speed_over_best)
                .map_or("-".into(), times_label)
        }));
        let _ = writeln!(out, "| {} |", cells.join(" | "));
    }
    out.push('\n');
}

/// One kind's section: its table, then its notes.
fn render_kind(out: &mut String, t: &KmeansTable) {
    let _ = writeln!(out, "## {}: {}\n", t.kind.name(), t.kind.description());
    if let Some(device) = &t.anchor_device {
        let torch = t.anchor_torch.as_deref().unwrap_or("?");
        let _ = writeln!(out, "Anchors on {device} (PyTorch {torch}).\n");
    }
    let mut head = vec!["shape n x d x k, iterations", "kiln"];
    head.extend(MODE_HEADS);
    head.extend([
        "kiln / best",
        "kiln % peak",
        "Flash f16 % peak",
        "list share",
    ]);
    let _ = writeln!(out, "| {} |", head.join(" | "));
    let _ = writeln!(out, "|{}", " --- |".repeat(head.len()));
    let mut notes = Vec::new();
    for r in &t.rows {
        let mut cells = vec![r.shape.clone(), ms_cell(r.kiln_ms, r.kiln_note.as_ref())];
        if let Some(n) = &r.kiln_note {
            notes.push(format!("{} kiln: {n}", r.shape));
        }
        for c in &r.anchors {
            cells.push(ms_cell(c.ms, c.note.as_ref()));
            if let Some(n) = &c.note {
                notes.push(format!("{} {}: {n}", r.shape, c.mode));
            }
        }
        let ratio = r.kiln_speed_over_best.map_or("-".into(), times_label);
        let best = r.best_anchor.as_deref().unwrap_or("");
        cells.push(if best.is_empty() {
            ratio
        } else {
            format!("{ratio} ({best})")
        });
        cells.push(percent(r.kiln_fp16_peak));
        cells.push(percent(r.flash_f16_fp16_peak));
        cells.push(list_share_cell(r.kiln_list_share));
        let _ = writeln!(out, "| {} |", cells.join(" | "));
    }
    if let Some(why) = &t.anchors_skipped {
        notes.insert(0, format!("anchors not run: {why}"));
    }
    if !notes.is_empty() {
        out.push('\n');
    }
    for n in notes {
        let _ = writeln!(out, "- {n}");
    }
    out.push('\n');
}

/// `bench.json`'s `kmeans`: a list of kinds' tables, or the one table (of
/// normal points) a bench.json from before kinds holds.
pub(crate) fn one_or_many<'de, D>(
    deserializer: D,
) -> std::result::Result<Vec<KmeansTable>, D::Error>
where
    D: serde::Deserializer<'de>,
{
    use serde::de::Error as _;
    // Through a value, so that a bad table's error names its field (an
    // untagged enum says only that no variant matched).
    let value = serde_json::Value::deserialize(deserializer)?;
    match value {
        serde_json::Value::Null => Ok(Vec::new()),
        serde_json::Value::Array(_) => serde_json::from_value(value),
        _ => serde_json::from_value(value).map(|t| vec![t]),
    }
    .map_err(D::Error::custom)
}

#[cfg(test)]
#[path = "kmeans_tests.rs"]
mod tests;
