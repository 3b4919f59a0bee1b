//! `--encode-anchor`: `apps encode` beside `encode_anchor.py` (a streamed
//! PyTorch encode with page-locked staging) on the same `.npy` files and
//! index, with the two limits of the machine measured in the same run: the
//! files' read rate from the page cache (several threads) and the device's
//! page-locked copy rate (the script's own figure). Every failure of one
//! part is a line in the table, never the end of the bench; only the
//! points' folder not being made is.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use super::kmeans_run::output_within;
use super::points::{self, points_path, Kind};

/// The encode's shape: `files` files of `n × d` f32 onto `m` anchors.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct EncodeShape {
    pub(crate) files: usize,
    pub(crate) n: u64,
    pub(crate) d: u64,
    pub(crate) m: u64,
}

impl EncodeShape {
    /// Issue 40's case (4 × 1M × 768 onto 4422 anchors, 12.3 GB), or a
    /// small one with `--quick`.
    pub(crate) fn new(quick: bool) -> Self {
        if quick {
            Self {
                files: 2,
                n: 100_000,
                d: 128,
                m: 256,
            }
        } else {
            Self {
                files: 4,
                n: 1_000_000,
                d: 768,
                m: 4422,
            }
        }
    }

    /// Bytes of input, all files together.
    fn bytes(&self) -> u64 {
        self.files as u64 * self.n * self.d * 4
    }
}

/// How one comparison runs; tests swap the interpreter.
pub(crate) struct Plan<'a> {
    pub(crate) apps: &'a Path,
    pub(crate) script: &'a Path,
    pub(crate) python: OsString,
    pub(crate) shape: EncodeShape,
    /// Runs of each program (the median is the figure).
    pub(crate) reps: usize,
    /// One run of either program; past it the run is killed and noted.
    pub(crate) limit: Duration,
}

impl<'a> Plan<'a> {
    pub(crate) fn new(apps: &'a Path, script: &'a Path, quick: bool) -> Self {
        Self {
            apps,
            script,
            python: "python3".into(),
            shape: EncodeShape::new(quick),
            reps: if quick { 1 } else { 3 },
            limit: Duration::from_secs(600),
        }
    }
}

/// What `encode_anchor.py` printed (its last line, JSON).
#[derive(Debug, Clone, PartialEq, serde::Deserialize)]
pub(crate) struct AnchorRun {
    pub(crate) seconds: f64,
    #[serde(rename = "input_GBps")]
    pub(crate) input_gbps: f64,
    #[serde(rename = "pinned_h2d_GBps")]
    pub(crate) pinned_h2d_gbps: f64,
}

/// The comparison: each side's seconds (or why none) and the limits.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct EncodeTable {
    pub(crate) shape: EncodeShape,
    pub(crate) kiln: std::result::Result<Vec<f64>, String>,
    pub(crate) anchor: std::result::Result<Vec<AnchorRun>, String>,
    /// The files' read rate, GB/s, or why none.
    pub(crate) read_gbps: std::result::Result<f64, String>,
}

/// `encode.md` beside the bench's other outputs.
const ENCODE_MD: &str = "encode.md";

/// With `script` (`--encode-anchor`), runs the comparison and writes
/// `OUT/encode.md` (a comparison that could not start is a line, not the
/// bench's end); without, removes an older `encode.md`, which would read
/// as this run's. Returns the file written.
pub(crate) fn compare(
    apps: &Path,
    script: Option<&Path>,
    quick: bool,
    out: &Path,
) -> Result<Option<PathBuf>> {
    let path = out.join(ENCODE_MD);
    let Some(script) = script else {
        if path.exists() {
            std::fs::remove_file(&path)
                .with_context(|| format!("cannot remove the stale {}", path.display()))?;
        }
        return Ok(None);
    };
    match run(&Plan::new(apps, script, quick)) {
        Ok(table) => {
            let md = render_markdown(&table);
            print!("{md}");
            crate::output::write_atomic(&path, md.as_bytes())?;
            Ok(Some(path))
        }
        Err(e) => {
            println!("bench: encode not compared: {e:#}");
            Ok(None)
        }
    }
}

/// Writes the points and the index, runs both programs on them, removes
/// the points; `Err` only when the points' folder cannot be made.
pub(crate) fn run(plan: &Plan<'_>) -> Result<EncodeTable> {
    let dir = tempfile::Builder::new()
        .prefix("kiln-bench-encode")
        .tempdir()
        .context("cannot make a folder for the encode's points")?;
    let shape = plan.shape;
    let failed = |why: String| EncodeTable {
        shape,
        kiln: Err(why.clone()),
        anchor: Err(why.clone()),
        read_gbps: Err(why),
    };
    let files = match write_files(dir.path(), shape) {
        Ok(files) => files,
        Err(e) => return Ok(failed(format!("points not written: {e:#}"))),
    };
    let index = dir.path().join("index");
    if let Err(e) = train(plan, &files[0], &index) {
        return Ok(failed(format!("no index to encode onto: {e:#}")));
    }
    // The first read fills the page cache; the figure is of the second.
    let _ = read_rate(&files);
    let read_gbps = read_rate(&files).map_err(|e| format!("{e:#}"));
    let out = dir.path().join("codes.npy");
    let kiln = (0..plan.reps)
        .map(|_| run_kiln(plan, &index, &files, &out))
        .collect::<Result<Vec<f64>>>()
        .map_err(|e| format!("`apps encode`: {e:#}"));
    let anchor = (0..plan.reps)
        .map(|_| run_anchor(plan, &index, &files))
        .collect::<Result<Vec<AnchorRun>>>()
        .map_err(|e| format!("{}: {e:#}", plan.script.display()));
    for (what, r) in [
        ("kiln", kiln.as_ref().err()),
        ("anchor", anchor.as_ref().err()),
    ] {
        if let Some(why) = r {
            println!("bench: encode {what}: {why}");
        }
    }
    Ok(EncodeTable {
        shape,
        kiln,
        anchor,
        read_gbps,
    })
}

/// `DIR/partI/x_N_D.npy` for each file (standard-normal points).
fn write_files(dir: &Path, shape: EncodeShape) -> Result<Vec<PathBuf>> {
    (0..shape.files)
        .map(|i| {
            let part = dir.join(format!("part{i}"));
            std::fs::create_dir(&part)
                .with_context(|| format!("cannot create {}", part.display()))?;
            let kind_dir = points::write_points(&part, Kind::Normal, &[(shape.n, shape.d)])?;
            let path = points_path(&kind_dir, shape.n, shape.d);
            // On disk before anything is timed: the kernel's write-back of
            // the files just written would slow the reads measured next.
            std::fs::File::open(&path)
                .and_then(|f| f.sync_all())
                .with_context(|| format!("cannot sync {}", path.display()))?;
            Ok(path)
        })
        .collect()
}

/// An index of `m` anchors trained on `points` (two iterations: the encode
/// needs anchors, not good ones).
fn train(plan: &Plan<'_>, points: &Path, index: &Path) -> Result<()> {
    let mut cmd = Command::new(plan.apps);
    cmd.arg("anneal")
        .arg("--npy")
        .arg(points)
        .args([
            "--m",
            &plan.shape.m.to_string(),
            "--iters",
            "2",
            "--tol",
            "0",
        ])
        .arg("--out")
        .arg(index);
    let (_, status) = output_within(&mut cmd, plan.limit)?;
    if !status.success() {
        bail!("`apps anneal --out` exited with {status}; its errors are above");
    }
    Ok(())
}

/// GB/s of reading every file whole, 16 threads of positional reads at
/// once (as `apps encode` reads a regular file).
fn read_rate(files: &[PathBuf]) -> Result<f64> {
    use std::os::unix::fs::FileExt as _;
    const PIECE: u64 = 8 << 20;
    let mut pieces = Vec::new();
    let mut bytes = 0;
    for path in files {
        let file =
            std::fs::File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
        let len = file.metadata()?.len();
        bytes += len;
        let file = std::sync::Arc::new(file);
        pieces.extend((0..len.div_ceil(PIECE)).map(|i| (file.clone(), i * PIECE, len)));
    }
    let next = std::sync::atomic::AtomicUsize::new(0);
    let started = Instant::now();
    std::thread::scope(|s| -> Result<()> {
        let workers: Vec<_> = (0..16)
            .map(|_| {
                s.spawn(|| -> std::io::Result<()> {
                    let mut buffer = vec![0u8; PIECE as usize];
                    loop {
                        let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        let Some((file, at, len)) = pieces.get(i) else {
                            return Ok(());
                        };
                        let take = PIECE.min(len - at) as usize;
                        file.read_exact_at(&mut buffer[..take], *at)?;
                    }
                })
            })
            .collect();
        for w in workers {
            w.join()
                .map_err(|_| anyhow::anyhow!("a reader thread panicked"))??;
        }
        Ok(())
    })?;
    Ok(bytes as f64 / started.elapsed().as_secs_f64() / 1e9)
}

/// One `apps encode` of every file: its seconds.
fn run_kiln(plan: &Plan<'_>, index: &Path, files: &[PathBuf], out: &Path) -> Result<f64> {
    let mut cmd = Command::new(plan.apps);
    cmd.arg("encode").arg(index).arg("--npy").args(files);
    cmd.arg("--out").arg(out).arg("--force");
    let (text, status) = output_within(&mut cmd, plan.limit)?;
    if !status.success() {
        bail!("exited with {status}; its errors are above");
    }
    let seconds = encoded_seconds(&text)?;
    println!("bench: encode kiln: {seconds:.3} s");
    Ok(seconds)
}

/// The `S s` of `apps encode`'s `encoded: FILE (N points in C chunks, S s,
/// R GB/s of input)` line.
pub(crate) fn encoded_seconds(stdout: &str) -> Result<f64> {
    let line = stdout
        .lines()
        .find(|l| l.starts_with("encoded: "))
        .context(
            "no `encoded: ...` line in its output (are apps and xtask from the same commit?)",
        )?;
    let seconds = line
        .rsplit_once(" chunk")
        .and_then(|(_, rest)| rest.split(", ").nth(1))
        .and_then(|s| s.strip_suffix(" s"))
        .and_then(|s| s.parse::<f64>().ok())
        .filter(|s| s.is_finite() && *s > 0.0);
    seconds.with_context(|| format!("cannot read the encode's time from `{line}`"))
}

/// One run of the script on the same files and anchors.
fn run_anchor(plan: &Plan<'_>, index: &Path, files: &[PathBuf]) -> Result<AnchorRun> {
    if !plan.script.is_file() {
        bail!("no such file");
    }
    let mut cmd = Command::new(&plan.python);
    cmd.arg(plan.script)
        .arg(index.join("anchors.npy"))
        .args(files);
    let (text, status) = output_within(&mut cmd, plan.limit)?;
    if !status.success() {
        bail!("exited with {status}; its errors are above");
    }
    let run = anchor_run(&text)?;
    println!("bench: encode anchor: {:.3} s", run.seconds);
    Ok(run)
}

/// The script's figures: its last line that parses as its JSON.
pub(crate) fn anchor_run(stdout: &str) -> Result<AnchorRun> {
    stdout
        .lines()
        .rev()
        .find_map(|l| serde_json::from_str::<AnchorRun>(l).ok())
        .filter(|r| r.seconds > 0.0 && r.pinned_h2d_gbps > 0.0)
        .context("no JSON line with seconds, input_GBps and pinned_h2d_GBps in its output")
}

fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// The table as Markdown: both programs' seconds and input rates, kiln
/// over the script, and kiln's rate as a share of the machine's limit,
/// min(read rate, page-locked copy rate).
pub(crate) fn render_markdown(t: &EncodeTable) -> String {
    let s = t.shape;
    let gb = s.bytes() as f64 / 1e9;
    let mut out = format!(
        "## Encode: {} files of {} x {} f32 ({gb:.1} GB) onto {} anchors\n\n",
        s.files, s.n, s.d, s.m
    );
    out += "| program | seconds (median) | input GB/s |\n| --- | ---: | ---: |\n";
    let kiln = t
        .kiln
        .as_ref()
        .ok()
        .filter(|v| !v.is_empty())
        .map(|v| median(v));
    let anchor = t
        .anchor
        .as_ref()
        .ok()
        .filter(|v| !v.is_empty())
        .map(|v| median(&v.iter().map(|r| r.seconds).collect::<Vec<_>>()));
    let row = |name: &str, secs: Option<f64>, why: Option<&String>| match (secs, why) {
        (Some(secs), _) => format!("| {name} | {secs:.3} | {:.2} |\n", gb / secs),
        (None, Some(why)) => format!("| {name} | failed: {why} | |\n"),
        (None, None) => format!("| {name} | no run | |\n"),
    };
    out += &row("`apps encode`", kiln, t.kiln.as_ref().err());
    out += &row("`encode_anchor.py`", anchor, t.anchor.as_ref().err());
    let copy = t
        .anchor
        .as_ref()
        .ok()
        .filter(|v| !v.is_empty())
        .map(|v| median(&v.iter().map(|r| r.pinned_h2d_gbps).collect::<Vec<_>>()));
    out += "\n";
    if let (Some(k), Some(a)) = (kiln, anchor) {
        out += &format!("kiln over the anchor: {:.2}x\n", a / k);
    }
    match &t.read_gbps {
        Ok(r) => out += &format!("files' read rate (16 threads, page cache): {r:.1} GB/s\n"),
        Err(why) => out += &format!("files' read rate: not measured ({why})\n"),
    }
    if let Some(c) = copy {
        out += &format!("page-locked host-to-device copy rate: {c:.1} GB/s\n");
    }
    if let (Some(k), Ok(r), Some(c)) = (kiln, &t.read_gbps, copy) {
        let limit = r.min(c);
        out += &format!(
            "kiln's input rate: {:.2} GB/s, {:.0}% of the limit ({limit:.1} GB/s)\n",
            gb / k,
            100.0 * gb / k / limit
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_encode_line_gives_its_seconds() {
        let text = "backend: cuda\nencoded: /t/c.npy (4000000 points in 92 chunks, 1.50 s, 8.19 GB/s of input)\nstages: ...\n";
        assert_eq!(encoded_seconds(text).unwrap(), 1.50);
        let one = "encoded: c.npy (5 points in 1 chunk, 0.01 s, 0.00 GB/s of input)";
        assert_eq!(encoded_seconds(one).unwrap(), 0.01);
        for bad in [
            "",
            "encoded: c.npy (5 points in 1 chunk, soon)",
            "whole run 1 ms",
        ] {
            assert!(encoded_seconds(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn the_scripts_last_json_line_gives_its_figures() {
        let text = "warming up\n{\"points\": 4000000, \"d\": 768, \"anchors\": 4422, \"chunk\": 262144, \"seconds\": 1.324, \"input_GBps\": 9.28, \"pinned_h2d_GBps\": 54.9, \"device\": \"NVIDIA H200\"}\n";
        let run = anchor_run(text).unwrap();
        assert_eq!(
            (run.seconds, run.input_gbps, run.pinned_h2d_gbps),
            (1.324, 9.28, 54.9)
        );
        assert!(anchor_run("{\"seconds\": 0}").is_err());
        assert!(anchor_run("Traceback ...").is_err());
    }

    #[test]
    fn the_table_gives_the_ratio_and_the_share_of_the_limit() {
        let shape = EncodeShape::new(false);
        let run = |s| AnchorRun {
            seconds: s,
            input_gbps: 0.0,
            pinned_h2d_gbps: 50.0,
        };
        let t = EncodeTable {
            shape,
            kiln: Ok(vec![0.9, 0.6, 0.7]),
            anchor: Ok(vec![run(1.2), run(1.4)]),
            read_gbps: Ok(30.0),
        };
        let md = render_markdown(&t);
        assert!(md.contains("| `apps encode` | 0.700 | 17.55 |"), "{md}");
        assert!(md.contains("kiln over the anchor: 2.00x"), "{md}");
        assert!(md.contains("59% of the limit (30.0 GB/s)"), "{md}");
        let failed = EncodeTable {
            anchor: Err("no torch".into()),
            ..t
        };
        let md = render_markdown(&failed);
        assert!(
            md.contains("| `encode_anchor.py` | failed: no torch | |"),
            "{md}"
        );
        assert!(!md.contains("kiln over the anchor"), "{md}");
    }

    #[test]
    fn without_the_flag_an_older_table_is_removed_and_nothing_written() {
        let dir = tempfile::tempdir().unwrap();
        let old = dir.path().join(ENCODE_MD);
        std::fs::write(&old, "an older run's table").unwrap();
        let apps = dir.path().join("no-apps");
        assert_eq!(compare(&apps, None, true, dir.path()).unwrap(), None);
        assert!(!old.exists());
        assert_eq!(compare(&apps, None, true, dir.path()).unwrap(), None);
    }

    #[test]
    fn the_read_rate_reads_every_byte_and_a_missing_file_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.bin");
        std::fs::write(&path, vec![7u8; (9 << 20) + 5]).unwrap();
        assert!(read_rate(&[path.clone(), path]).unwrap() > 0.0);
        assert!(read_rate(&[dir.path().join("none")]).is_err());
    }
}
