//! `cargo kiln`'s subcommands: each one's arguments (clap) and the function
//! that runs it on the crate `--manifest-path` names (or the current dir's).
//! Reports go to stdout (a table, or JSON with `--json`), progress to
//! stderr.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use clap::{Args, Subcommand};
use serde::Serialize;

use crate::audit::{self, Abi, Budgets};
use crate::build::{validate_spec, BuildReport, Cuobjdump};
use crate::project::Project;
use crate::{bundle, doctor, toolkit};

/// `--manifest-path PATH`, for every subcommand.
#[derive(Debug, Args)]
pub struct CrateArg {
    /// The crate's Cargo.toml (default: the nearest one above the current dir).
    #[arg(long, value_name = "PATH", global = true)]
    pub manifest_path: Option<PathBuf>,
}

impl CrateArg {
    /// The crate it names.
    pub fn project(&self) -> Result<Project> {
        Project::locate(self.manifest_path.as_deref())
    }
}

/// `cargo kiln build`.
#[derive(Debug, Args)]
pub struct BuildArgs {
    /// Arch spec (e.g. `sm_80,sm_90`); overrides the crate's kiln.toml.
    #[arg(long, value_name = "SPEC")]
    pub arch: Option<String>,
    /// Build in release mode.
    #[arg(long)]
    pub release: bool,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
}

/// `cargo kiln audit`.
#[derive(Debug, Args)]
pub struct AuditArgs {
    /// Arch spec (e.g. `sm_80,sm_90`); overrides the crate's kiln.toml.
    #[arg(long, value_name = "SPEC")]
    pub arch: Option<String>,
    /// Build and audit the release profile (what `cargo kiln build --release` built).
    #[arg(long, conflicts_with = "prebuilt")]
    pub release: bool,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
    /// Audit this folder of prebuilt kernels (prebuilt.toml) instead of building.
    #[arg(long, value_name = "DIR", conflicts_with = "arch")]
    pub prebuilt: Option<PathBuf>,
}

/// `cargo kiln doctor`.
#[derive(Debug, Args)]
pub struct DoctorArgs {
    /// The crate's kernels dir, relative to it (what its build.rs gives KernelBuild::new).
    #[arg(long, value_name = "DIR", default_value = "kernels")]
    pub kernels: PathBuf,
    /// Print the findings as JSON.
    #[arg(long)]
    pub json: bool,
}

/// `cargo kiln toolkit [install] [--dir DIR]`.
#[derive(Debug, Args)]
pub struct ToolkitArgs {
    #[command(subcommand)]
    pub action: Option<ToolkitAction>,
    /// The install dir (default: `cuda-<version>` in the user's toolkit
    /// store, made its default: KILN_TOOLKIT_HOME, else kiln/toolkits in the
    /// local data dir, ~/.local/share on Linux; `cargo clean` leaves it)
    #[arg(long, value_name = "DIR", global = true)]
    pub dir: Option<PathBuf>,
    /// Also install this cross target's static CUDA runtime beside the
    /// toolkit (e.g. aarch64-unknown-linux-gnu), for `cargo build --target`
    #[arg(long, value_name = "TRIPLE", global = true)]
    pub target: Option<String>,
}

/// What `cargo kiln toolkit` does besides reporting.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Subcommand)]
pub enum ToolkitAction {
    /// Install the pinned toolkit (cargo-kiln's toolkit.toml), or repair a damaged install.
    Install,
}

/// `cargo kiln bundle`.
#[derive(Debug, Args)]
pub struct BundleArgs {
    /// Arch spec (e.g. `sm_90`); overrides the crate's kiln.toml.
    #[arg(long, value_name = "SPEC")]
    pub arch: Option<String>,
    /// Output folder (default: kiln-bundle in the crate's target dir).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Leave out this test target (repeatable): tests that read the source
    /// tree cannot run on the GPU host. Default: `bindings` (the committed
    /// bindings check).
    #[arg(long, value_name = "TEST", default_values_t = [String::from("bindings")])]
    pub exclude: Vec<String>,
}

/// Prints `value` as pretty JSON on stdout.
fn print_json(value: &impl Serialize) -> Result<()> {
    println!("{}", serde_json::to_string_pretty(value)?);
    Ok(())
}

/// Checks `--arch` before anything is built.
fn check_arch(project: &Project, arch: Option<&str>) -> Result<()> {
    match arch {
        Some(spec) => validate_spec(Some(&project.discovery()), spec, "--arch"),
        None => Ok(()),
    }
}

/// `cargo kiln build`.
pub fn build(krate: &CrateArg, args: &BuildArgs) -> Result<()> {
    let project = krate.project()?;
    check_arch(&project, args.arch.as_deref())?;
    let built = project.build(args.arch.as_deref(), args.release)?;
    let discovery = project.discovery();
    let report = BuildReport::new(&built.manifest, &Cuobjdump::find(Some(&discovery)));
    if args.json {
        print_json(&report)
    } else {
        print!("{}", report.render());
        Ok(())
    }
}

/// `cargo kiln audit`.
pub fn audit(krate: &CrateArg, args: &AuditArgs) -> Result<()> {
    let project = krate.project()?;
    check_arch(&project, args.arch.as_deref())?;
    let shown = project.display(&project.dir.join(audit::CONFIG_FILE));
    let budgets = Budgets::for_crate(&project.dir, &shown)?;
    let discovery = project.discovery();
    let cuobjdump = Cuobjdump::find(Some(&discovery));
    let tool = || {
        cuobjdump.path().context(
            "no cuobjdump: no CUDA toolkit found; run `cargo kiln toolkit install` or set CUDA_PATH",
        )
    };
    let report = match &args.prebuilt {
        Some(dir) => audit::audit_prebuilt(tool()?, dir, &budgets)?,
        None => {
            let declared = audit::crate_declarations(&project.dir, &budgets)?;
            let built = project.build(args.arch.as_deref(), args.release)?;
            let abi = match &declared {
                Some(d) => Abi::Declared(d),
                None => Abi::NotRead(audit::NO_BINDINGS),
            };
            audit::audit_build(tool()?, &built.manifest, &budgets, abi)?
        }
    };
    if args.json {
        print_json(&report)?;
    } else {
        print!("{}", report.render());
    }
    if report.passed() {
        Ok(())
    } else {
        Err(audit::failure(&report, &shown))
    }
}

/// `cargo kiln doctor`.
pub fn doctor(krate: &CrateArg, args: &DoctorArgs) -> Result<()> {
    let project = krate.project()?;
    let subject = doctor::Subject {
        env_prefix: project.known_env_prefix(),
        kernels_dir: project.dir.join(&args.kernels),
        kernels_shown: args.kernels.display().to_string(),
        toolkit_dir: project.toolkit_dir(),
        audit_file: project.dir.join(cuda_build::floor::AUDIT_FILE),
    };
    let findings = doctor::gather(&subject)?;
    if args.json {
        print_json(&findings.json())?;
    } else {
        print!("{}", doctor::render(&findings));
    }
    if findings.problem_count() == 0 {
        Ok(())
    } else {
        Err(doctor::failure(&findings))
    }
}

/// `cargo kiln toolkit [install]`.
pub fn toolkit(krate: &CrateArg, args: &ToolkitArgs) -> Result<()> {
    // The store serves every crate, so no crate is needed; inside one, its
    // build script is touched after an install so that it looks again.
    let project = Project::locate_if_any(krate.manifest_path.as_deref())?;
    let touch = project
        .iter()
        .flat_map(|p| p.build_script.iter().cloned())
        .collect();
    let place = match &args.dir {
        Some(dir) => toolkit::Place::new(Some(dir), PathBuf::new(), touch)?,
        None => toolkit::Place::in_store(None, &toolkit::user_store()?, touch)?,
    };
    match args.action {
        None => {
            print!("{}", toolkit::report(&place.dir));
            Ok(())
        }
        Some(ToolkitAction::Install) => toolkit::install_for(&place, args.target.as_deref()),
    }
}

/// `cargo kiln bundle`.
pub fn bundle(krate: &CrateArg, args: &BundleArgs) -> Result<()> {
    let project = krate.project()?;
    check_arch(&project, args.arch.as_deref())?;
    let out = match &args.out {
        Some(dir) => std::path::absolute(dir)?,
        None => project.target_dir.join(bundle::DEFAULT_DIR),
    };
    let exclude: Vec<&str> = args.exclude.iter().map(String::as_str).collect();
    let made = bundle::make(&project, args.arch.as_deref(), &out, &exclude)?;
    println!(
        "{} ({} test binaries, {}): on the GPU host, `bash {}/run.sh`",
        out.display(),
        made.tests,
        crate::build::human_size(made.bytes),
        shown_dir(&out)
    );
    Ok(())
}

/// The bundle's folder name, as the GPU host sees it once copied over.
fn shown_dir(out: &Path) -> String {
    out.file_name().map_or_else(
        || out.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    )
}
