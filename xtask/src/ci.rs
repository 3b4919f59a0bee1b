//! `cargo xtask ci-cpu [--require-toolkit] [--require-vulkan] [--only CELL]...`: runs the
//! CPU-only CI matrix of `ci/matrix.toml`, one cell after another, and
//! prints each failed cell's last lines again, a summary table and the
//! `N passed, N failed, N skipped` line.
//!
//! Deciding what runs (skip, fail, environment) is pure and tested apart from
//! spawning the commands.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::Result;
use serde::Deserialize;

use crate::cli::{usage_error, CiArgs};
use crate::discovery::{self, Found};
use crate::{config, kernel_crates, workspace};

/// Why a toolkit cell does not run when there is no toolkit.
const NO_TOOLKIT: &str = "no CUDA toolkit found (run `cargo xtask toolkit install`)";

/// Why a Vulkan cell (the wgpu engine's tests) does not run without a driver.
const NO_VULKAN: &str =
    "no Vulkan driver found (install Mesa's `mesa-vulkan-drivers`, as `.ci/run` does)";

/// Where the Vulkan loader looks for driver manifests (ICDs), besides the
/// variables that name them.
const VULKAN_ICD_DIRS: &[&str] = &[
    "/usr/share/vulkan/icd.d",
    "/usr/local/share/vulkan/icd.d",
    "/etc/vulkan/icd.d",
];

/// Whether a Vulkan driver is installed: a manifest in the loader's
/// folders, or one named by `VK_DRIVER_FILES` / `VK_ICD_FILENAMES`.
fn vulkan_present() -> bool {
    let named = ["VK_DRIVER_FILES", "VK_ICD_FILENAMES"]
        .iter()
        .any(|v| std::env::var_os(v).is_some_and(|s| !s.is_empty()));
    named
        || VULKAN_ICD_DIRS.iter().any(|dir| {
            std::fs::read_dir(dir).is_ok_and(|entries| {
                entries
                    .flatten()
                    .any(|e| e.path().extension().is_some_and(|x| x == "json"))
            })
        })
}

/// Entry point for `cargo xtask ci-cpu ...`.
pub(crate) fn run(args: &CiArgs) -> Result<()> {
    let require_toolkit = args.require_toolkit;
    let matrix = Matrix::load()?;
    let cells = matrix.select(&args.only)?;
    // The cells find the toolkit (and xtask codegen the libclang) the same
    // way on their own; nothing is injected, so no cell's environment differs
    // from a plain `cargo` run and nothing rebuilds for it.
    let found = discovery::toolkit_present();
    match &found {
        Some(f) => println!("ci-cpu: CUDA toolkit: {}", f.nvcc.display()),
        None => println!("ci-cpu: {NO_TOOLKIT}"),
    }
    let vulkan = vulkan_present();
    if !vulkan {
        println!("ci-cpu: {NO_VULKAN}");
    }
    let context = Context {
        toolkit: found,
        require_toolkit,
        vulkan,
        require_vulkan: args.require_vulkan,
    };
    let is_set = |k: &str| std::env::var_os(k).is_some();

    let root = workspace::root();
    let total = cells.len();
    let mut results = Vec::with_capacity(total);
    let mut failed_tails = Vec::new();
    for (i, cell) in cells.iter().enumerate() {
        let plan = plan(cell, &context, is_set);
        let outcome = match plan {
            Plan::Run { env } => {
                println!(
                    "==> [{}/{total}] {}: {}",
                    i + 1,
                    cell.name,
                    command_line(cell, &env)
                );
                let started = Instant::now();
                let (outcome, lines) = run_cell(&root, cell, &absolute_tool_paths(env, &root));
                let time = started.elapsed();
                if let Outcome::Fail(why) = &outcome {
                    println!("==> [{}/{total}] {}: FAIL: {why}", i + 1, cell.name);
                    failed_tails.push((cell.name.clone(), lines));
                }
                results.push(CellResult {
                    name: cell.name.clone(),
                    outcome,
                    time,
                });
                continue;
            }
            Plan::Skip(why) => {
                println!("==> [{}/{total}] {}: skip: {why}", i + 1, cell.name);
                Outcome::Skip(why)
            }
            Plan::Fail(why) => {
                println!("==> [{}/{total}] {}: FAIL: {why}", i + 1, cell.name);
                Outcome::Fail(why)
            }
        };
        results.push(CellResult {
            name: cell.name.clone(),
            outcome,
            time: Duration::ZERO,
        });
    }

    println!();
    print!("{}", render_failed_tails(&failed_tails));
    print!("{}", render_table(&results));
    let summary = Summary::of(&results);
    println!("{summary}");
    if summary.failed > 0 {
        std::process::exit(1);
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// ci/matrix.toml

/// The whole `ci/matrix.toml`: cells in the order they run.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Matrix {
    // Defaulted so an empty file gets `check`'s message, not serde's.
    #[serde(rename = "cell", default)]
    pub(crate) cells: Vec<Cell>,
}

/// One `[[cell]]`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Cell {
    pub(crate) name: String,
    /// argv, run from the workspace root.
    pub(crate) command: Vec<String>,
    #[serde(default)]
    pub(crate) env: BTreeMap<String, String>,
    #[serde(default)]
    pub(crate) needs: Option<Needs>,
    /// Run with `KILN_CUDA=off`: the build behaves as if there were no toolkit.
    #[serde(default)]
    pub(crate) hide_toolkit: bool,
}

/// What a cell needs besides Rust.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Needs {
    Toolkit,
    /// A Vulkan driver (lavapipe in CI) for the wgpu engine's tests.
    Vulkan,
}

impl Matrix {
    fn load() -> Result<Self> {
        let path = workspace::ci_matrix_file();
        let matrix: Matrix = config::load(&path, &workspace::display(&path))?;
        matrix
            .check()
            .map_err(|e| usage_error!("{}: {e}", workspace::display(&path)))?;
        Ok(matrix)
    }

    #[cfg(test)]
    fn parse(text: &str) -> Result<Self, String> {
        let matrix: Matrix = config::parse("matrix.toml", text)?;
        matrix.check()?;
        Ok(matrix)
    }

    fn check(&self) -> Result<(), String> {
        if self.cells.is_empty() {
            return Err("no `[[cell]]`; add at least one".into());
        }
        for (i, cell) in self.cells.iter().enumerate() {
            if cell.name.is_empty() || cell.name.contains(char::is_whitespace) {
                return Err(format!(
                    "cell {} has an empty or spaced name `{}`",
                    i + 1,
                    cell.name
                ));
            }
            if self.cells[..i].iter().any(|c| c.name == cell.name) {
                return Err(format!("cell `{}` is defined twice; rename one", cell.name));
            }
            if cell.command.first().is_none_or(String::is_empty) {
                return Err(format!("cell `{}` has an empty `command`", cell.name));
            }
            if cell.hide_toolkit && cell.needs == Some(Needs::Toolkit) {
                return Err(format!(
                    "cell `{}` both needs and hides the toolkit; drop one",
                    cell.name
                ));
            }
        }
        Ok(())
    }

    /// The cells named by `--only` (in matrix order), or all of them.
    fn select(&self, only: &[String]) -> Result<Vec<&Cell>> {
        if let Some(unknown) = only
            .iter()
            .find(|o| !self.cells.iter().any(|c| &c.name == *o))
        {
            let names: Vec<&str> = self.cells.iter().map(|c| c.name.as_str()).collect();
            return Err(usage_error!(
                "unknown cell `{unknown}` in --only; cells: {}",
                names.join(", ")
            ));
        }
        Ok(self
            .cells
            .iter()
            .filter(|c| only.is_empty() || only.contains(&c.name))
            .collect())
    }
}

// ---------------------------------------------------------------------------
// deciding what runs

/// What the runner knows that decides the plan of each cell.
#[derive(Debug)]
pub(crate) struct Context {
    pub(crate) toolkit: Option<Found>,
    pub(crate) require_toolkit: bool,
    /// Whether a Vulkan driver is installed.
    pub(crate) vulkan: bool,
    pub(crate) require_vulkan: bool,
}

/// What to do with one cell.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Plan {
    /// Run it with these variables added to the inherited environment.
    Run {
        env: BTreeMap<String, String>,
    },
    Skip(String),
    /// Fail without running (a required toolkit is missing).
    Fail(String),
}

/// Set in every cell under `--require-toolkit` (but those that hide the
/// toolkit): each test with a real-nvcc half fails instead of skipping.
pub(crate) const REQUIRE_TOOLKIT_VAR: &str = "KILN_REQUIRE_TOOLKIT";

/// Decides whether `cell` runs and with what environment. `is_set` says
/// whether a variable is already in the environment xtask was started with.
pub(crate) fn plan(cell: &Cell, cx: &Context, is_set: impl Fn(&str) -> bool) -> Plan {
    if cell.needs == Some(Needs::Toolkit) && cx.toolkit.is_none() {
        return if cx.require_toolkit {
            Plan::Fail(format!("{NO_TOOLKIT}; --require-toolkit"))
        } else {
            Plan::Skip(NO_TOOLKIT.to_string())
        };
    }
    if cell.needs == Some(Needs::Vulkan) && !cx.vulkan {
        return if cx.require_vulkan {
            Plan::Fail(format!("{NO_VULKAN}; --require-vulkan"))
        } else {
            Plan::Skip(NO_VULKAN.to_string())
        };
    }
    let mut env = BTreeMap::new();
    if cell.hide_toolkit {
        // Every kernel crate's own switch (KILN_CUDA, KILN_ANNEAL_CUDA).
        for var in kernel_crates::vars("CUDA").filter(|v| !is_set(v)) {
            env.insert(var, "off".to_string());
        }
    }
    // Under --require-toolkit every test with a real-toolkit half must run
    // it: a skip is a failure (the one spelling every such test reads).
    if cx.require_toolkit && !cell.hide_toolkit {
        env.insert(REQUIRE_TOOLKIT_VAR.to_string(), "1".to_string());
    }
    // The cell's own settings win.
    env.extend(cell.env.clone());
    Plan::Run { env }
}

/// Variables naming a toolkit or libclang path. Build scripts read them from
/// their package's dir, not the workspace root, and nvcc runs from OUT_DIR,
/// so a relative value in a cell (`CUDA_PATH = "target/cuda-toolkit/cuda"`)
/// is made absolute against the root.
const TOOL_PATH_VARS: &[&str] = &[
    "NVCC",
    "CUDA_PATH",
    "CUDA_HOME",
    "CUDA_ROOT",
    "LIBCLANG_PATH",
];

/// `env` with every relative [`TOOL_PATH_VARS`] value joined onto `root`.
fn absolute_tool_paths(mut env: BTreeMap<String, String>, root: &Path) -> BTreeMap<String, String> {
    for (key, value) in &mut env {
        if TOOL_PATH_VARS.contains(&key.as_str()) && Path::new(value.as_str()).is_relative() {
            *value = root.join(&*value).display().to_string();
        }
    }
    env
}

/// The header's rendering of a cell: `KEY=V ... argv`, showing the cell's
/// own variables and the kernel crates' off switches (`KILN_CUDA`, ...), not
/// the toolkit paths announced at the start.
fn command_line(cell: &Cell, env: &BTreeMap<String, String>) -> String {
    env.iter()
        .filter(|(k, _)| cell.env.contains_key(*k) || kernel_crates::vars("CUDA").any(|v| v == **k))
        .map(|(k, v)| format!("{k}={}", shell_word(v)))
        .chain(cell.command.iter().map(|a| shell_word(a)))
        .collect::<Vec<_>>()
        .join(" ")
}

/// `word` quoted for a POSIX shell when it needs it, so headers can be
/// pasted into a terminal.
fn shell_word(word: &str) -> String {
    // With NULs allowed the quoter cannot fail; a NUL cannot reach a shell
    // anyway, and the header is for reading.
    shlex::Quoter::new()
        .allow_nul(true)
        .quote(word)
        .map_or_else(|_| word.to_string(), std::borrow::Cow::into_owned)
}

/// Runs the cell's command, its output passed through live; returns how it
/// ended and its last lines (see [`tail`]).
fn run_cell(root: &Path, cell: &Cell, env: &BTreeMap<String, String>) -> (Outcome, Vec<String>) {
    match tail::run(&cell.command, root, env) {
        Ok((s, lines)) if s.success() => (Outcome::Pass, lines),
        Ok((s, lines)) => (
            Outcome::Fail(match s.code() {
                Some(code) => format!("exit status {code}"),
                None => s.to_string(),
            }),
            lines,
        ),
        Err(e) => (
            Outcome::Fail(format!("cannot run `{}`: {e}", cell.command[0])),
            Vec::new(),
        ),
    }
}

/// Each failed cell's last lines, printed again above the summary table so
/// that a log read from its end says why.
pub(crate) fn render_failed_tails(failed: &[(String, Vec<String>)]) -> String {
    let mut out = String::new();
    for (name, lines) in failed {
        let _ = writeln!(out, "--- {name}: its last {} lines ---", lines.len());
        for line in lines {
            let _ = writeln!(out, "{line}");
        }
    }
    out
}

// ---------------------------------------------------------------------------
// results

/// How a cell ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Outcome {
    Pass,
    Fail(String),
    Skip(String),
}

/// One row of the summary table.
#[derive(Debug, Clone)]
pub(crate) struct CellResult {
    pub(crate) name: String,
    pub(crate) outcome: Outcome,
    pub(crate) time: Duration,
}

/// Counts for the final line, which the CI system reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Summary {
    pub(crate) passed: usize,
    pub(crate) failed: usize,
    pub(crate) skipped: usize,
}

impl Summary {
    pub(crate) fn of(results: &[CellResult]) -> Self {
        let count = |f: fn(&Outcome) -> bool| results.iter().filter(|r| f(&r.outcome)).count();
        Summary {
            passed: count(|o| matches!(o, Outcome::Pass)),
            failed: count(|o| matches!(o, Outcome::Fail(_))),
            skipped: count(|o| matches!(o, Outcome::Skip(_))),
        }
    }
}

impl std::fmt::Display for Summary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "ci-cpu: {} passed, {} failed, {} skipped",
            self.passed, self.failed, self.skipped
        )
    }
}

/// The summary table: cell, result, time, and why for skips and failures.
pub(crate) fn render_table(results: &[CellResult]) -> String {
    let rows: Vec<[String; 4]> = results
        .iter()
        .map(|r| {
            let (result, why) = match &r.outcome {
                Outcome::Pass => ("pass", ""),
                Outcome::Fail(why) => ("FAIL", why.as_str()),
                Outcome::Skip(why) => ("skip", why.as_str()),
            };
            let time = match r.outcome {
                Outcome::Pass | Outcome::Fail(_) if !r.time.is_zero() => format_time(r.time),
                _ => "-".to_string(),
            };
            [r.name.clone(), result.to_string(), time, why.to_string()]
        })
        .collect();
    let header = ["cell", "result", "time", "note"].map(String::from);
    let width = |col: usize| {
        std::iter::once(&header)
            .chain(&rows)
            .map(|r| r[col].chars().count())
            .max()
            .unwrap_or(0)
    };
    let (w0, w1, w2) = (width(0), width(1), width(2));
    let mut out = String::new();
    for row in std::iter::once(&header).chain(&rows) {
        let line = format!(
            "{:w0$}  {:w1$}  {:>w2$}  {}",
            row[0], row[1], row[2], row[3]
        );
        let _ = writeln!(out, "{}", line.trim_end());
    }
    out
}

/// `0.4s`, `12.3s`, `4m05s`.
fn format_time(d: Duration) -> String {
    let secs = d.as_secs_f64();
    if secs < 60.0 {
        format!("{secs:.1}s")
    } else {
        let whole = d.as_secs();
        format!("{}m{:02}s", whole / 60, whole % 60)
    }
}

mod tail;
#[cfg(test)]
mod tests;
