//! `--kmeans-anchors`: for each data kind, writes the shapes' points once as
//! `KIND/x_N_D.npy`, runs kiln's anneal on each a few times and
//! `kmeans_anchors.py` once over all of them on the same files, and returns
//! one table per kind. Every failure of one part (a kind's points, kiln on a
//! shape, the script, flash-kmeans) is a line in the table, never the end of
//! the bench; only the points' folder not being made is.

use std::ffi::OsString;
use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use wait_timeout::ChildExt as _;

use super::kmeans::{self, Kiln, KmeansTable, Shape};
use super::points::{self, points_path, Kind};

/// How one comparison runs; tests swap the interpreter and shorten limits.
pub(crate) struct Plan<'a> {
    pub(crate) apps: &'a Path,
    pub(crate) script: &'a Path,
    /// `python3` (a test's fake interpreter runs the script its own way).
    pub(crate) python: OsString,
    pub(crate) shapes: Vec<Shape>,
    /// Each kind is written, measured and removed before the next, so the
    /// disk holds one kind's points at a time.
    pub(crate) kinds: Vec<Kind>,
    /// kiln runs per shape (their median is the figure).
    pub(crate) reps: usize,
    /// One `apps anneal` run; past it the run is killed and noted.
    pub(crate) kiln_limit: Duration,
    /// The anchor script over all shapes.
    pub(crate) script_limit: Duration,
}

impl<'a> Plan<'a> {
    pub(crate) fn new(apps: &'a Path, script: &'a Path, quick: bool, kinds: Vec<Kind>) -> Self {
        Self {
            apps,
            script,
            python: "python3".into(),
            shapes: kmeans::shapes(quick),
            kinds,
            reps: if quick { 1 } else { 3 },
            kiln_limit: Duration::from_secs(600),
            script_limit: Duration::from_secs(3600),
        }
    }
}

/// Runs the comparison, one table per kind; `Err` only when the points'
/// folder cannot be made.
pub(crate) fn run(plan: &Plan<'_>) -> Result<Vec<KmeansTable>> {
    let dir = tempfile::Builder::new()
        .prefix("kiln-bench-points")
        .tempdir()
        .context("cannot make a folder for the benchmark points")?;
    Ok(plan
        .kinds
        .iter()
        .map(|kind| run_kind(plan, dir.path(), *kind))
        .collect())
}

/// One kind: its points written, kiln and the script run on them, the
/// points removed.
fn run_kind(plan: &Plan<'_>, dir: &Path, kind: Kind) -> KmeansTable {
    println!("bench: k-means on {} points", kind.name());
    let sizes: Vec<(u64, u64)> = plan.shapes.iter().map(|s| (s.n, s.d)).collect();
    let kind_dir = match points::write_points(dir, kind, &sizes) {
        Ok(kind_dir) => kind_dir,
        Err(e) => {
            let why = format!("{} points not written: {e:#}", kind.name());
            println!("bench: {why}");
            let kiln = vec![Kiln::Failed(why.clone()); plan.shapes.len()];
            let _ = std::fs::remove_dir_all(dir.join(kind.name()));
            return kmeans::table(kind, &plan.shapes, &kiln, Err(&why));
        }
    };
    let kiln: Vec<Kiln> = plan
        .shapes
        .iter()
        .map(|s| run_kiln(plan, &kind_dir, s))
        .collect();
    let anchors = run_script(plan, &kind_dir);
    if let Err(why) = &anchors {
        println!("bench: k-means anchors on {}: {why}", kind.name());
    }
    if let Err(e) = std::fs::remove_dir_all(&kind_dir) {
        println!("bench: cannot remove {}: {e}", kind_dir.display());
    }
    kmeans::table(
        kind,
        &plan.shapes,
        &kiln,
        anchors.as_ref().map_err(String::as_str),
    )
}

/// A command's stdout and exit, killed past `limit`; stderr streams through.
pub(super) fn output_within(
    cmd: &mut Command,
    limit: Duration,
) -> Result<(String, std::process::ExitStatus)> {
    cmd.stdout(Stdio::piped()).stderr(Stdio::inherit());
    read_within(cmd, limit, |child| {
        child
            .stdout
            .take()
            .map(|s| Box::new(s) as Box<dyn Read + Send>)
    })
}

/// A command's stderr and exit, killed past `limit`; stdout is dropped.
fn errors_within(cmd: &mut Command, limit: Duration) -> Result<(String, std::process::ExitStatus)> {
    cmd.stdout(Stdio::null()).stderr(Stdio::piped());
    read_within(cmd, limit, |child| {
        child
            .stderr
            .take()
            .map(|s| Box::new(s) as Box<dyn Read + Send>)
    })
}

/// Runs `cmd` (its streams set by the caller), reading the pipe `take` gives
/// beside the wait, so that a full pipe cannot stall the child.
fn read_within(
    cmd: &mut Command,
    limit: Duration,
    take: impl FnOnce(&mut std::process::Child) -> Option<Box<dyn Read + Send>>,
) -> Result<(String, std::process::ExitStatus)> {
    let mut child = cmd.stdin(Stdio::null()).spawn()?;
    let mut pipe = take(&mut child).context("no pipe to read")?;
    let reader = std::thread::spawn(move || {
        let mut bytes = Vec::new();
        let _ = pipe.read_to_end(&mut bytes);
        bytes
    });
    let status = match child.wait_timeout(limit)? {
        Some(status) => status,
        None => {
            let _ = child.kill();
            let _ = child.wait();
            bail!("killed after {} s without finishing", limit.as_secs_f64());
        }
    };
    let bytes = reader.join().unwrap_or_default();
    Ok((String::from_utf8_lossy(&bytes).into_owned(), status))
}

/// `apps anneal` on one shape `plan.reps` times: the run times after setup.
fn run_kiln(plan: &Plan<'_>, dir: &Path, s: &Shape) -> Kiln {
    let anneal = || {
        let mut cmd = Command::new(plan.apps);
        cmd.arg("anneal")
            .arg("--npy")
            .arg(points_path(dir, s.n, s.d))
            .args(["--m", &s.k.to_string(), "--iters", &s.iters.to_string()])
            .args(["--tol", "0", "--backend", "cuda"]);
        cmd
    };
    let mut runs = Vec::new();
    for _ in 0..plan.reps {
        let mut cmd = anneal();
        let outcome = output_within(&mut cmd, plan.kiln_limit).and_then(|(text, status)| {
            if !status.success() {
                bail!("exited with {status}; its errors are above");
            }
            run_ms(&text)
        });
        match outcome {
            Ok(ms) => runs.push(ms),
            Err(e) => {
                let why = format!("`apps anneal` on {}: {e:#}", s.key());
                println!("bench: {why}");
                return Kiln::Failed(why);
            }
        }
    }
    let mut cmd = anneal();
    cmd.env(LIST_STATS_ENV, "1");
    let share = errors_within(&mut cmd, plan.kiln_limit).and_then(|(text, status)| {
        if !status.success() {
            bail!("exited with {status}");
        }
        Ok(list_share(&text))
    });
    let share = share.unwrap_or_else(|e| {
        println!("bench: the list share of {} not measured: {e:#}", s.key());
        None
    });
    let shown = kmeans::list_share_cell(share);
    println!("bench: kiln {}: {runs:?} ms, list share {shown}", s.key());
    Kiln::Runs(runs, share)
}

/// `kiln_anneal::assign_tc::STATS_ENV`: with it `1`, `apps anneal` prints
/// after every assignment how many points the tensor-core kernel left to
/// the list kernel.
const LIST_STATS_ENV: &str = "KILN_ANNEAL_TC_STATS";

/// The largest share of the points left to the list kernel in any
/// assignment after the first, from the lines `apps anneal` prints under
/// [`LIST_STATS_ENV`] (`tc: C of N points (P%) left to the list kernel`, one
/// an assignment); `None` with fewer than two. Other lines, and counts past
/// their `N`, are not read.
pub(crate) fn list_share(stderr: &str) -> Option<f64> {
    let shares = stderr.lines().filter_map(|line| {
        let rest = line.strip_prefix("tc: ")?;
        let (count, rest) = rest.split_once(" of ")?;
        let (n, rest) = rest.split_once(" points ")?;
        if !rest.ends_with(" left to the list kernel") {
            return None;
        }
        let (count, n) = (count.parse::<u64>().ok()?, n.parse::<u64>().ok()?);
        (n > 0 && count <= n).then(|| count as f64 / n as f64)
    });
    shares.skip(1).reduce(f64::max)
}

/// The `iterations I ms` of `apps anneal`'s `whole run W ms (setup S ms,
/// iterations I ms)` line (a CUDA run adds `; upload U ms, ... of the
/// setup` before the parenthesis closes): the run after setup.
pub(crate) fn run_ms(stdout: &str) -> Result<f64> {
    let line = stdout
        .lines()
        .find(|l| l.starts_with("whole run "))
        .context(
            "no `whole run ... ms` line in its output (are apps and xtask from the same commit?)",
        )?;
    let ms = line
        .split_once(", iterations ")
        .and_then(|(_, rest)| rest.split_once(" ms"))
        .and_then(|(v, _)| v.parse::<f64>().ok())
        .filter(|v| v.is_finite() && *v >= 0.0);
    ms.with_context(|| format!("cannot read the run's time from `{line}`"))
}

/// The script once over every shape; its figures, or one line why none.
fn run_script(plan: &Plan<'_>, dir: &Path) -> std::result::Result<kmeans::AnchorOutput, String> {
    let script = plan.script;
    if !script.is_file() {
        return Err(format!("{}: no such file", script.display()));
    }
    let flash = script
        .parent()
        .unwrap_or(Path::new("."))
        .join("flash-kmeans");
    let mut cmd = Command::new(&plan.python);
    if flash.is_dir() {
        let mut path = OsString::from(&flash);
        if let Some(old) = std::env::var_os("PYTHONPATH").filter(|p| !p.is_empty()) {
            path.push(":");
            path.push(old);
        }
        cmd.env("PYTHONPATH", path);
    } else {
        println!(
            "bench: no flash-kmeans/ beside {}: its Flash modes are not run",
            script.display()
        );
    }
    cmd.arg(script)
        .args(plan.shapes.iter().map(Shape::arg))
        .arg("--npy")
        .arg(dir);
    println!(
        "bench: running {} {}",
        plan.python.to_string_lossy(),
        script.display()
    );
    let name = script.display().to_string();
    let (text, status) = output_within(&mut cmd, plan.script_limit)
        .map_err(|e| format!("{} {name}: {e:#}", plan.python.to_string_lossy()))?;
    if !status.success() {
        return Err(format!("{name} exited with {status}; its errors are above"));
    }
    kmeans::parse_script_output(&text, &plan.shapes, &name).map_err(|e| format!("{e:#}"))
}

#[cfg(test)]
#[path = "kmeans_run_tests.rs"]
mod tests;
