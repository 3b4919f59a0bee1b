//! `cargo xtask bench`: runs `apps bench` (kiln's figures), optionally
//! PyTorch's anchor script beside it (the weak cdist anchor) and kiln's
//! anneal against `kmeans_anchors.py`'s five modes (`--kmeans-anchors`),
//! and writes `bench.json` (the figures and the speedups computed from
//! them), `speedup.svg` and, with the anchors, `kmeans.md` and (with
//! `--encode-anchor`, `apps encode` beside `encode_anchor.py`) `encode.md`.
//!
//! With `--apps PATH` it needs no workspace, so the same binary runs from the
//! GPU bundle on a host without cargo; `--plot-only` re-renders a fetched
//! `bench.json` here. The comparisons (`report`) and the chart (`plot`) are
//! pure; this file only runs processes and writes files.

mod encode_run;
mod grid;
mod kmeans;
mod kmeans_run;
mod labels;
mod plot;
mod points;
mod report;
mod torch;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{bail, Context, Result};

use crate::cli::{usage_error, BenchArgs};
use crate::output::{self, write_atomic};
use kiln_bench_schema::Report as AppsReport;
use points::Kind;
use report::BenchFile;
use torch::TorchFigures;

/// What `--out` holds after a run.
const APPS_JSON: &str = "apps.json";
const TORCH_JSON: &str = "torch.json";
const BENCH_JSON: &str = "bench.json";
const SPEEDUP_SVG: &str = "speedup.svg";
const KMEANS_MD: &str = "kmeans.md";

/// Where PyTorch's figures come from.
#[derive(Debug, PartialEq)]
enum Torch {
    None,
    /// An earlier run of the anchor script, saved.
    Json(PathBuf),
    /// Run the anchor script now, after `apps bench`.
    Script(PathBuf),
}

#[derive(Debug)]
struct Options {
    apps: Option<PathBuf>,
    torch: Torch,
    kmeans_anchors: Option<PathBuf>,
    encode_anchor: Option<PathBuf>,
    /// The points' kinds for `--kmeans-anchors`, each once, in the order given.
    kinds: Vec<Kind>,
    out: PathBuf,
    quick: bool,
    plot_only: bool,
}

/// The options of one run; clap has already refused conflicting flags, and
/// an unknown kind is refused here.
fn options(root: &Path, args: &BenchArgs) -> Result<Options> {
    let torch = match (&args.torch_json, &args.torch_script) {
        (Some(json), _) => Torch::Json(json.clone()),
        (None, Some(script)) => Torch::Script(script.clone()),
        (None, None) => Torch::None,
    };
    // Inside the workspace, beside the other build outputs; elsewhere (the
    // bundle on a GPU host) in the current directory.
    let out = args.out.clone().unwrap_or_else(|| {
        if root.join("Cargo.toml").is_file() {
            root.join("target/bench")
        } else {
            PathBuf::from("bench")
        }
    });
    Ok(Options {
        apps: args.apps.clone(),
        torch,
        kmeans_anchors: args.kmeans_anchors.clone(),
        encode_anchor: args.encode_anchor.clone(),
        kinds: points::chosen(args.kinds.as_deref(), args.quick)
            .map_err(|why| usage_error!("`--kinds`: {why}"))?,
        out,
        quick: args.quick,
        plot_only: args.plot_only,
    })
}

/// Runs the command.
pub(crate) fn run(root: &Path, args: &BenchArgs, argv: &[String]) -> Result<()> {
    let opts = options(root, args)?;
    if opts.plot_only {
        return plot_only(&opts.out);
    }
    // The folder first: a run takes minutes, and its results must land.
    output::check_dir(&opts.out, "--out")?;
    // Everything that can be checked before the long run is.
    let saved_torch = match &opts.torch {
        Torch::Json(path) => Some(read_torch(path)?),
        Torch::Script(path) if !path.is_file() => {
            return Err(usage_error!(
                "`--torch-script {}`: no such file; give the path of torch_anchor.py",
                path.display()
            ))
        }
        _ => None,
    };
    let apps = match &opts.apps {
        Some(path) if path.is_file() => path.clone(),
        Some(path) => {
            return Err(usage_error!(
                "`--apps {}`: no such file; give the `apps` binary (in the GPU bundle: bin/apps)",
                path.display()
            ))
        }
        None => build_apps(root)?,
    };

    let report = run_apps(&apps, &opts.out, opts.quick)?;
    let mut written = vec![opts.out.join(APPS_JSON)];
    let torch_json = opts.out.join(TORCH_JSON);
    let mut torch_failed = None;
    let torch = match (&opts.torch, saved_torch) {
        (Torch::Json(path), Some((figures, text))) => {
            // Kept beside the rest, so the folder holds every input of bench.json.
            if !same_file(path, &torch_json) {
                write_atomic(&torch_json, text.as_bytes())?;
                written.push(torch_json.clone());
            }
            Ok(figures)
        }
        (Torch::Script(script), _) => match torch_ready() {
            Err(why) => Err(why),
            Ok(()) => match run_torch(script) {
                Ok((figures, text)) => {
                    write_atomic(&torch_json, text.as_bytes())?;
                    written.push(torch_json.clone());
                    Ok(figures)
                }
                Err(e) => {
                    let why = format!("{e:#}");
                    torch_failed = Some(why.clone());
                    Err(why)
                }
            },
        },
        _ => Err("no `--torch-script` or `--torch-json` given".to_string()),
    };
    if torch.is_err() && torch_json.exists() {
        // The folder's files all come from one run: an older torch.json
        // would read as this run's.
        std::fs::remove_file(&torch_json)
            .with_context(|| format!("cannot remove the stale {}", torch_json.display()))?;
    }

    // After apps bench, so a failing anchor costs none of kiln's figures.
    let kmeans = match &opts.kmeans_anchors {
        None => Vec::new(),
        Some(script) => {
            let plan = kmeans_run::Plan::new(&apps, script, opts.quick, opts.kinds.clone());
            match kmeans_run::run(&plan) {
                Ok(tables) => tables,
                Err(e) => {
                    println!("bench: k-means anchors not compared: {e:#}");
                    Vec::new()
                }
            }
        }
    };
    written.extend(encode_run::compare(
        &apps,
        opts.encode_anchor.as_deref(),
        opts.quick,
        &opts.out,
    )?);
    let command = format!("xtask {}", argv.join(" "));
    let mut bench = report::merge(today(), command, report, torch);
    bench.kmeans = kmeans;
    written.extend(write_outputs(&bench, &opts.out)?);
    print!("{}", report::render_table(&bench));
    println!("bench: wrote {}", list(&written));
    if let Some(why) = torch_failed {
        bail!(
            "the PyTorch anchor failed ({why}); {BENCH_JSON} and {SPEEDUP_SVG} are written without PyTorch figures"
        );
    }
    Ok(())
}

/// Re-renders `DIR/bench.json`: comparisons recomputed, the SVG redrawn.
fn plot_only(out: &Path) -> Result<()> {
    let path = out.join(BENCH_JSON);
    let text = std::fs::read_to_string(&path).map_err(|e| {
        anyhow::anyhow!(
            "cannot read {} ({e}); point `--out` at the folder holding a bench.json \
             (fetched from the GPU host, or made by `cargo xtask bench`)",
            path.display()
        )
    })?;
    let bench = report::parse_bench(&text).with_context(|| {
        format!(
            "{} is not a bench.json of `cargo xtask bench`",
            path.display()
        )
    })?;
    let written = write_outputs(&bench, out)?;
    print!("{}", report::render_table(&bench));
    println!("bench: wrote {}", list(&written));
    Ok(())
}

/// Writes `bench.json` and `speedup.svg`, each whole or not at all.
fn write_outputs(bench: &BenchFile, out: &Path) -> Result<Vec<PathBuf>> {
    let svg = plot::render_svg(bench).context("cannot draw the speedup chart")?;
    let json = serde_json::to_string_pretty(bench)? + "\n";
    let (json_path, svg_path) = (out.join(BENCH_JSON), out.join(SPEEDUP_SVG));
    write_atomic(&json_path, json.as_bytes())?;
    write_atomic(&svg_path, svg.as_bytes())?;
    let mut written = vec![json_path, svg_path];
    let md_path = out.join(KMEANS_MD);
    if !bench.kmeans.is_empty() {
        let md = kmeans::render_markdown(&bench.kmeans);
        print!("{md}");
        write_atomic(&md_path, md.as_bytes())?;
        written.push(md_path);
    } else if md_path.exists() {
        // An older kmeans.md would read as this run's.
        std::fs::remove_file(&md_path)
            .with_context(|| format!("cannot remove the stale {}", md_path.display()))?;
    }
    Ok(written)
}

fn list(paths: &[PathBuf]) -> String {
    paths
        .iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// `DIR/.NAME.partial`.
fn partial_path(path: &Path) -> PathBuf {
    let name = path
        .file_name()
        .map_or("out".into(), |n| n.to_string_lossy());
    path.with_file_name(format!(".{name}.partial"))
}

fn same_file(a: &Path, b: &Path) -> bool {
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}

/// `cargo build --release -p apps --features wgpu` (the wgpu engine's
/// figures beside CUDA's and the CPU's), its output shown; the binary's
/// path.
fn build_apps(root: &Path) -> Result<PathBuf> {
    if !root.join("Cargo.toml").is_file() {
        return Err(usage_error!(
            "no kiln workspace at {} to build apps in: pass `--apps PATH` (in the GPU bundle: `--apps bin/apps`)",
            root.display()
        ));
    }
    println!("bench: building apps (cargo build --release -p apps --features wgpu)");
    let status = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .current_dir(root)
        .args(["build", "--release", "-p", "apps", "--features", "wgpu"])
        .status()
        .context("cannot run cargo")?;
    if !status.success() {
        bail!("`cargo build --release -p apps --features wgpu` failed ({status}); its errors are above");
    }
    let target = std::env::var_os("CARGO_TARGET_DIR").map_or(root.join("target"), |d| root.join(d));
    Ok(target
        .join("release")
        .join(format!("apps{}", std::env::consts::EXE_SUFFIX)))
}

/// Runs `apps bench`, its progress lines streamed through; keeps its JSON
/// as `DIR/apps.json` only when it finished.
fn run_apps(apps: &Path, out: &Path, quick: bool) -> Result<AppsReport> {
    let final_path = out.join(APPS_JSON);
    let partial = partial_path(&final_path);
    let mut cmd = Command::new(apps);
    cmd.arg("bench").arg("--json").arg(&partial);
    if quick {
        cmd.arg("--quick");
    }
    println!(
        "bench: running {} bench{}",
        apps.display(),
        if quick { " --quick" } else { "" }
    );
    let status = cmd
        .status()
        .with_context(|| format!("cannot run {}", apps.display()))?;
    if !status.success() {
        let _ = std::fs::remove_file(&partial);
        bail!(
            "`{} bench` failed ({status}); its output is above",
            apps.display()
        );
    }
    let text = std::fs::read_to_string(&partial)
        .with_context(|| format!("`apps bench` wrote no {}", partial.display()))?;
    let report = report::parse_apps(&text).with_context(|| {
        format!(
            "{} is not `apps bench`'s report: are apps and xtask from the same commit?",
            partial.display()
        )
    })?;
    std::fs::rename(&partial, &final_path)
        .with_context(|| format!("cannot write {}", final_path.display()))?;
    Ok(report)
}

/// A saved run of the anchor script: its figures and its text.
fn read_torch(path: &Path) -> Result<(TorchFigures, String)> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read `--torch-json {}`", path.display()))?;
    let figures = torch::parse(&text).with_context(|| {
        format!(
            "{} is not the PyTorch anchor's output (a JSON object of figures)",
            path.display()
        )
    })?;
    Ok((figures, text))
}

/// Whether `python3` imports torch and sees a GPU; else why not, for the
/// one line that says the comparison is skipped.
fn torch_ready() -> Result<(), String> {
    let probe = "import sys, torch; sys.exit(0 if torch.cuda.is_available() else 3)";
    let status = Command::new("python3")
        .args(["-c", probe])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    match status.map(|s| s.code()) {
        Err(_) => Err("python3 not found on PATH".into()),
        Ok(Some(0)) => Ok(()),
        Ok(Some(3)) => Err("PyTorch sees no CUDA GPU (torch.cuda.is_available() is false)".into()),
        Ok(_) => Err("python3 cannot import torch (install PyTorch to compare with it)".into()),
    }
}

/// Runs the anchor script; its figures and its output as printed.
fn run_torch(script: &Path) -> Result<(TorchFigures, String)> {
    println!(
        "bench: running python3 {} (the PyTorch figures)",
        script.display()
    );
    let output = Command::new("python3")
        .arg(script)
        .stderr(Stdio::inherit())
        .output()
        .context("cannot run python3")?;
    if !output.status.success() {
        bail!("python3 {} exited with {}", script.display(), output.status);
    }
    let text = String::from_utf8_lossy(&output.stdout).into_owned();
    let figures = torch::parse(&text)
        .with_context(|| format!("{} printed no JSON object of figures", script.display()))?;
    Ok((figures, text))
}

/// Today's UTC date, `YYYY-MM-DD`.
fn today() -> String {
    jiff::Timestamp::now().strftime("%Y-%m-%d").to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::cli::{Cli, Command as Sub};
    use clap::{CommandFactory as _, Parser as _};

    const NO_WORKSPACE: &str = "/nonexistent-workspace";

    fn bench_args(v: &[&str]) -> BenchArgs {
        let argv = ["xtask", "bench"].iter().chain(v);
        match Cli::try_parse_from(argv).unwrap().command {
            Sub::Bench(args) => args,
            other => panic!("parsed as {other:?}"),
        }
    }

    /// A fresh empty folder for one test, removed when dropped.
    fn scratch() -> tempfile::TempDir {
        tempfile::tempdir().unwrap()
    }

    #[test]
    fn today_is_an_iso_date() {
        let date = today();
        let parsed: jiff::civil::Date = date.parse().unwrap();
        assert_eq!(parsed.to_string(), date);
        assert!(parsed.year() >= 2024, "{date}");
    }

    #[test]
    fn flags() {
        let args = bench_args(&[
            "--apps",
            "bin/apps",
            "--torch-script=t.py",
            "--quick",
            "--kmeans-anchors",
            "a/kmeans_anchors.py",
        ]);
        let o = options(Path::new(NO_WORKSPACE), &args).unwrap();
        assert_eq!(o.apps.as_deref(), Some(Path::new("bin/apps")));
        assert_eq!(o.torch, Torch::Script("t.py".into()));
        assert_eq!(
            o.kmeans_anchors.as_deref(),
            Some(Path::new("a/kmeans_anchors.py"))
        );
        assert_eq!(
            options(Path::new(NO_WORKSPACE), &bench_args(&[]))
                .unwrap()
                .kmeans_anchors,
            None
        );
        assert!(o.quick && !o.plot_only);
        // Outside a workspace the default folder is in the current directory.
        assert_eq!(o.out, Path::new("bench"));
    }

    #[test]
    fn kinds_are_read_and_a_bad_one_is_a_usage_error() {
        let kinds = |v: &[&str]| {
            let mut argv = vec!["--kmeans-anchors", "k.py"];
            argv.extend(v);
            options(Path::new(NO_WORKSPACE), &bench_args(&argv)).map(|o| o.kinds)
        };
        assert_eq!(kinds(&["--quick"]).unwrap(), [Kind::Normal, Kind::Offset]);
        assert_eq!(
            kinds(&["--kinds", "clustered,scaled-down"]).unwrap(),
            [Kind::Clustered, Kind::ScaledDown]
        );
        // A bad kind: one line naming the valid ones, and exit 2.
        let err = kinds(&["--kinds", "normal,gaussian"]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "`--kinds`: unknown kind `gaussian`; the kinds are normal, offset, scaled-up, scaled-down, clustered, anisotropic, embedding"
        );
        assert!(err.downcast_ref::<crate::cli::UsageError>().is_some());
        // cli.rs names the kinds in `--help` by hand (it cannot import
        // bench's type without an import circle): every one, no other.
        let help = crate::cli::Cli::command()
            .find_subcommand("bench")
            .and_then(|b| b.get_arguments().find(|a| a.get_id() == "kinds"))
            .and_then(|a| a.get_help())
            .map(ToString::to_string)
            .unwrap();
        let listed = help.split_once(": ").unwrap().1.split_once(" (").unwrap().0;
        let names: Vec<&str> = points::ALL.iter().map(|k| k.name()).collect();
        assert_eq!(listed, names.join(", "), "{help}");
    }

    #[test]
    fn an_unwritable_out_is_refused_before_apps_runs() {
        let dir = scratch();
        let file = dir.path().join("a-file");
        std::fs::write(&file, "").unwrap();
        // apps would fail loudly if it ran (exit 9); the check comes first.
        let args = bench_args(&[
            "--apps",
            "/bin/false",
            "--out",
            file.join("out").to_str().unwrap(),
        ]);
        let err = run(Path::new(NO_WORKSPACE), &args, &[]).unwrap_err();
        assert!(err.is::<crate::cli::UsageError>(), "{err}");
        assert!(err.to_string().starts_with("`--out "), "{err}");
    }

    #[test]
    fn outputs_are_written_whole_and_plot_only_reads_them_back() {
        let tmp = scratch();
        let dir = tmp.path().to_path_buf();
        let bench = report::fixture();
        let written = write_outputs(&bench, &dir).unwrap();
        assert_eq!(written, [dir.join(BENCH_JSON), dir.join(SPEEDUP_SVG)]);
        let svg = std::fs::read_to_string(dir.join(SPEEDUP_SVG)).unwrap();
        assert!(svg.contains("anneal 100000x384x1024") && svg.contains("over PyTorch"));
        let back = std::fs::read_to_string(dir.join(BENCH_JSON)).unwrap();
        assert_eq!(report::parse_bench(&back).unwrap(), bench);
        // No partial file is left behind.
        let names: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert!(names.iter().all(|n| !n.ends_with(".partial")), "{names:?}");
        std::fs::remove_file(dir.join(SPEEDUP_SVG)).unwrap();
        plot_only(&dir).unwrap();
        assert!(dir.join(SPEEDUP_SVG).is_file());
    }

    /// A whole run, `apps` played by a script that writes the fixture
    /// report where it is told to; the PyTorch script exists but this test
    /// does not assume python3 or torch is installed, so it is either run or
    /// skipped with a reason, never an error.
    #[test]
    fn a_run_writes_every_file_from_the_apps_report() {
        use std::os::unix::fs::PermissionsExt as _;
        let tmp = scratch();
        let dir = tmp.path();
        let fixture = dir.join("fixture.json");
        std::fs::write(&fixture, include_str!("bench/fixtures/apps.json")).unwrap();
        let apps = dir.join("apps");
        let script = format!(
            "#!/bin/sh\n[ \"$1 $2\" = \"bench --json\" ] || exit 9\necho 'bench: fake figure'\ncp {} \"$3\"\n",
            fixture.display()
        );
        std::fs::write(&apps, script).unwrap();
        std::fs::set_permissions(&apps, std::fs::Permissions::from_mode(0o755)).unwrap();
        let torch_script = dir.join("torch_anchor.py");
        std::fs::write(&torch_script, "print('{\"copy_GBps\": 1.0}')\n").unwrap();
        let out = dir.join("out");
        // A torch.json of an earlier run must not survive a run without one.
        std::fs::create_dir_all(&out).unwrap();
        std::fs::write(out.join(TORCH_JSON), "{}").unwrap();
        let argv = [
            "--apps",
            apps.to_str().unwrap(),
            "--torch-script",
            torch_script.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ];
        let owned = argv.map(String::from);
        run(Path::new(NO_WORKSPACE), &bench_args(&argv), &owned).unwrap();

        let bench =
            report::parse_bench(&std::fs::read_to_string(out.join(BENCH_JSON)).unwrap()).unwrap();
        assert_eq!(bench.apps.device, "NVIDIA H100 80GB HBM3");
        assert!(
            bench.command.starts_with("xtask --apps"),
            "{}",
            bench.command
        );
        assert_eq!(
            bench.torch.is_some(),
            out.join(TORCH_JSON).is_file(),
            "torch.json exists exactly when the PyTorch figures are in bench.json"
        );
        assert_eq!(bench.torch.is_none(), bench.torch_skipped.is_some());
        assert!(out.join(APPS_JSON).is_file() && out.join(SPEEDUP_SVG).is_file());
    }

    /// The runs kept in docs/bench are read by `--plot-only` and by this
    /// schema: each parses, and each apps report is read whole.
    #[test]
    fn archived_reports_are_read_whole() {
        let docs = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/bench");
        let mut read = 0;
        for run in std::fs::read_dir(&docs).unwrap() {
            let run = run.unwrap().path();
            for name in [APPS_JSON, "multi.json", BENCH_JSON] {
                let path = run.join(name);
                let Ok(text) = std::fs::read_to_string(&path) else {
                    continue;
                };
                let json: serde_json::Value = serde_json::from_str(&text).unwrap();
                let apps = if name == BENCH_JSON {
                    let bench = report::parse_bench(&text)
                        .unwrap_or_else(|e| panic!("{}: {e:#}", path.display()));
                    serde_json::to_value(bench.apps).unwrap()
                } else {
                    let apps = report::parse_apps(&text)
                        .unwrap_or_else(|e| panic!("{}: {e:#}", path.display()));
                    serde_json::to_value(apps).unwrap()
                };
                let original = if name == BENCH_JSON {
                    &json["apps"]
                } else {
                    &json
                };
                assert_eq!(&apps, original, "{}", path.display());
                read += 1;
            }
        }
        assert!(read >= 5, "only {read} reports under {}", docs.display());
    }

    /// The anchors' table goes to kmeans.md and bench.json, is read back by
    /// `--plot-only`, and a run without it leaves no older kmeans.md.
    #[test]
    fn the_kmeans_table_is_written_and_a_stale_one_removed() {
        let tmp = scratch();
        let dir = tmp.path();
        let mut bench = report::fixture();
        let shape = kmeans::Shape::new(10_000, 128, 256, 10);
        bench.kmeans = vec![kmeans::table(
            Kind::Offset,
            &[shape],
            &[kmeans::Kiln::Runs(vec![2.0], None)],
            Err("no script"),
        )];
        let written = write_outputs(&bench, dir).unwrap();
        assert!(written.contains(&dir.join(KMEANS_MD)));
        let md = std::fs::read_to_string(dir.join(KMEANS_MD)).unwrap();
        assert!(md.contains("| 10000x128x256_it10 | 2.00 |"), "{md}");
        assert!(md.contains("## offset: "), "{md}");
        let back = std::fs::read_to_string(dir.join(BENCH_JSON)).unwrap();
        assert_eq!(report::parse_bench(&back).unwrap(), bench);
        std::fs::remove_file(dir.join(KMEANS_MD)).unwrap();
        plot_only(dir).unwrap();
        assert_eq!(std::fs::read_to_string(dir.join(KMEANS_MD)).unwrap(), md);
        bench.kmeans = Vec::new();
        write_outputs(&bench, dir).unwrap();
        assert!(!dir.join(KMEANS_MD).exists());
    }

    #[test]
    fn a_failed_apps_run_leaves_nothing() {
        let dir = scratch();
        let err = run_apps(Path::new("/bin/false"), dir.path(), false).unwrap_err();
        assert!(err.to_string().contains("failed"), "{err}");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    #[test]
    fn plot_only_without_bench_json_says_where_to_point() {
        let err = plot_only(Path::new("/nonexistent-bench-dir")).unwrap_err();
        assert!(
            err.to_string().contains("point `--out` at the folder"),
            "{err}"
        );
    }
}
