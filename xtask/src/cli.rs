//! The command line, declared once with clap's derive: every subcommand, its
//! flags and its `--help`; and the error type that marks bad input found
//! after parsing (exit status 2, like clap's own usage errors).

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

/// kiln's own tooling: toolkit provisioning, builds, audits, CI and benchmarks.
#[derive(Debug, Parser)]
#[command(name = "xtask", bin_name = "cargo xtask")]
pub(crate) struct Cli {
    #[command(subcommand)]
    pub(crate) command: Command,
}

/// The subcommands, in the order `--help` lists them.
#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Build with those archs; report what each fat binary holds.
    Build(BuildArgs),
    /// Release test binaries + apps + run.sh for a GPU host, in target/gpu-bundle.
    GpuBundle(ArchArg),
    /// Run apps bench (+ PyTorch); write bench.json and speedup.svg.
    Bench(BenchArgs),
    /// Regenerate (or check) the bindings from kernels/include/*.h.
    Codegen(CodegenArgs),
    /// Toolkit, archs, libclang, driver and GPUs; what the default build makes.
    Doctor,
    /// Build, then check every kernel's archs, budgets, PTX ISA, f64 and ABI.
    PtxAudit(AuditArgs),
    /// Report on, or install, the pinned CUDA toolkit.
    Toolkit(ToolkitArgs),
    /// Run the CPU CI matrix of ci/matrix.toml.
    CiCpu(CiArgs),
    /// Build a crate's kernels and write them into its kernels-prebuilt/.
    Prebuilt(PrebuiltArgs),
    /// cargo package the user crates; build them as users would (packed, by git URL).
    Package,
}

/// `--arch SPEC`, shared by the commands that build kernels.
#[derive(Debug, Args)]
pub(crate) struct ArchArg {
    /// Arch spec, as in kernels/kiln.toml (e.g. `sm_80,sm_90`); overrides it.
    #[arg(long, value_name = "SPEC")]
    pub(crate) arch: Option<String>,
}

/// `cargo xtask build`.
#[derive(Debug, Args)]
pub(crate) struct BuildArgs {
    #[command(flatten)]
    pub(crate) arch: ArchArg,
    /// Build in release mode.
    #[arg(long)]
    pub(crate) release: bool,
}

/// `cargo xtask codegen`.
#[derive(Debug, Args)]
pub(crate) struct CodegenArgs {
    /// Fail when the committed bindings differ instead of rewriting them.
    #[arg(long)]
    pub(crate) check: bool,
}

/// `cargo xtask ptx-audit`.
#[derive(Debug, Args)]
pub(crate) struct AuditArgs {
    #[command(flatten)]
    pub(crate) arch: ArchArg,
    /// Also write the report as JSON to FILE (checked writable before the build).
    #[arg(long, value_name = "FILE")]
    pub(crate) json: Option<PathBuf>,
    /// Audit this folder of prebuilt kernels (prebuilt.toml) instead of building.
    #[arg(long, value_name = "DIR", conflicts_with = "arch")]
    pub(crate) prebuilt: Option<PathBuf>,
}

/// `cargo xtask toolkit [install] [--dir DIR]`.
#[derive(Debug, Args)]
pub(crate) struct ToolkitArgs {
    #[command(subcommand)]
    pub(crate) action: Option<ToolkitAction>,
    /// The install dir (default: target/cuda-toolkit).
    #[arg(long, value_name = "DIR", global = true)]
    pub(crate) dir: Option<PathBuf>,
    /// Also install this cross target's static CUDA runtime beside the
    /// toolkit (e.g. aarch64-unknown-linux-gnu).
    #[arg(long, value_name = "TRIPLE", global = true)]
    pub(crate) target: Option<String>,
}

/// What `cargo xtask toolkit` does besides reporting.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Subcommand)]
pub(crate) enum ToolkitAction {
    /// Install the pins of cargo-kiln's toolkit.toml, or repair a damaged install.
    Install,
}

/// `cargo xtask prebuilt`.
#[derive(Debug, Args)]
pub(crate) struct PrebuiltArgs {
    /// The crate (its Cargo.toml) whose build script runs cuda-build's KernelBuild.
    #[arg(long, value_name = "PATH")]
    pub(crate) manifest_path: PathBuf,
    /// Where to write (default: kernels-prebuilt beside that Cargo.toml).
    #[arg(long, value_name = "DIR")]
    pub(crate) out: Option<PathBuf>,
}

/// `cargo xtask ci-cpu`.
#[derive(Debug, Args)]
pub(crate) struct CiArgs {
    /// Fail (not skip) the cells that need a CUDA toolkit when none is found.
    #[arg(long)]
    pub(crate) require_toolkit: bool,
    /// Fail (not skip) the cells that need a Vulkan driver when none is found.
    #[arg(long)]
    pub(crate) require_vulkan: bool,
    /// Run only this cell (repeatable); the cells keep the matrix's order.
    #[arg(long, value_name = "CELL")]
    pub(crate) only: Vec<String>,
}

/// `cargo xtask bench`.
#[derive(Debug, Args)]
pub(crate) struct BenchArgs {
    /// The `apps` binary to run (default: build it in release).
    #[arg(long, value_name = "PATH", conflicts_with = "plot_only")]
    pub(crate) apps: Option<PathBuf>,
    /// PyTorch's figures from an earlier run of the anchor script.
    #[arg(
        long,
        value_name = "FILE",
        conflicts_with_all = ["torch_script", "plot_only"]
    )]
    pub(crate) torch_json: Option<PathBuf>,
    /// Run PyTorch's anchor script (torch_anchor.py) after apps bench.
    #[arg(long, value_name = "FILE", conflicts_with = "plot_only")]
    pub(crate) torch_script: Option<PathBuf>,
    /// Run kmeans_anchors.py (flash-kmeans/ beside it) against kiln's anneal
    /// on the same points; writes kmeans.md.
    #[arg(long, value_name = "FILE", conflicts_with = "plot_only")]
    pub(crate) kmeans_anchors: Option<PathBuf>,
    /// The points' kinds for --kmeans-anchors, comma-separated: normal,
    /// offset, scaled-up, scaled-down, clustered, anisotropic, embedding
    /// (default: all; with --quick, normal,offset).
    #[arg(
        long,
        value_name = "KIND,...",
        value_delimiter = ',',
        requires = "kmeans_anchors"
    )]
    pub(crate) kinds: Option<Vec<String>>,
    /// Run encode_anchor.py (a streamed PyTorch encode) beside `apps encode`
    /// on the same files and index, with the files' read rate and the
    /// device's page-locked copy rate as the limit; writes encode.md.
    #[arg(long, value_name = "FILE", conflicts_with = "plot_only")]
    pub(crate) encode_anchor: Option<PathBuf>,
    /// Output folder (default: target/bench in the workspace, else ./bench).
    #[arg(long, value_name = "DIR")]
    pub(crate) out: Option<PathBuf>,
    /// Fewer, smaller runs.
    #[arg(long, conflicts_with = "plot_only")]
    pub(crate) quick: bool,
    /// Run nothing: redraw the chart and table from DIR/bench.json.
    #[arg(long)]
    pub(crate) plot_only: bool,
}

/// Bad input found after parsing (unknown cell, malformed config): the
/// library's type, so that its usage errors and xtask's exit 2 alike.
pub(crate) use cargo_kiln::UsageError;

/// Returns a [`UsageError`] wrapped in `anyhow`, formatted like `format!`.
macro_rules! usage_error {
    ($($arg:tt)*) => {
        anyhow::Error::new(cargo_kiln::UsageError(format!($($arg)*)))
    };
}
pub(crate) use usage_error;

#[cfg(test)]
mod tests {
    use super::*;
    use clap::error::ErrorKind;
    use clap::CommandFactory as _;
    use proptest::prelude::*;

    fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(std::iter::once("xtask").chain(args.iter().copied()))
    }

    #[test]
    fn the_cli_is_well_formed() {
        Cli::command().debug_assert();
    }

    #[test]
    fn every_command_and_subcommand_has_help() {
        for name in [
            "build",
            "gpu-bundle",
            "bench",
            "codegen",
            "doctor",
            "ptx-audit",
            "toolkit",
            "ci-cpu",
        ] {
            let err = parse(&[name, "--help"]).unwrap_err();
            assert_eq!(err.kind(), ErrorKind::DisplayHelp, "{name}");
            assert!(err.to_string().contains("Usage: cargo xtask"), "{name}");
        }
        let err = parse(&["toolkit", "install", "--help"]).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::DisplayHelp);
    }

    #[test]
    fn flags_take_both_spellings() {
        let cli = parse(&[
            "ci-cpu",
            "--only",
            "fmt",
            "--only=test",
            "--require-toolkit",
        ])
        .unwrap();
        let Command::CiCpu(a) = cli.command else {
            panic!("not ci-cpu");
        };
        assert_eq!(a.only, ["fmt", "test"]);
        assert!(a.require_toolkit);
        let cli = parse(&["ptx-audit", "--arch=sm_80", "--json", "r.json"]).unwrap();
        let Command::PtxAudit(a) = cli.command else {
            panic!("not ptx-audit");
        };
        assert_eq!(a.arch.arch.as_deref(), Some("sm_80"));
        assert_eq!(a.json, Some(PathBuf::from("r.json")));
    }

    #[test]
    fn toolkit_dir_goes_before_or_after_install() {
        for args in [
            &["toolkit", "--dir", "d", "install"][..],
            &["toolkit", "install", "--dir", "d"],
        ] {
            let Command::Toolkit(t) = parse(args).unwrap().command else {
                panic!("not toolkit");
            };
            assert_eq!(t.action, Some(ToolkitAction::Install), "{args:?}");
            assert_eq!(t.dir, Some(PathBuf::from("d")), "{args:?}");
        }
    }

    #[test]
    fn bad_arguments_are_usage_errors() {
        let bad = [
            &["bench", "--torch-json", "a", "--torch-script", "b"][..],
            &["bench", "--plot-only", "--quick"],
            &["bench", "--plot-only", "--apps", "x"],
            &["bench", "--plot-only", "--kmeans-anchors", "k.py"],
            &["bench", "--kmeans-anchors"],
            &["bench", "--kinds", "normal"],
            &["bench", "--bogus"],
            &["ptx-audit", "--json"],
            &["ptx-audit", "--jsn", "x"],
            &["codegen", "extra"],
            &["doctor", "--x"],
            &["toolkit", "instal"],
            &["frobnicate"],
            &[],
        ];
        for args in bad {
            let err = parse(args).unwrap_err();
            // clap exits 2 for all of these (help and version exit 0).
            assert_eq!(err.exit_code(), 2, "{args:?}: {err}");
        }
    }

    proptest! {
        /// Any argv at all parses or is refused; clap never panics. Words are
        /// drawn from the real flags and subcommands as well as noise, so
        /// the generator reaches past the first argument.
        #[test]
        fn parsing_never_panics(args in proptest::collection::vec(word(), 0..8)) {
            let _ = parse(&args.iter().map(String::as_str).collect::<Vec<_>>());
        }
    }

    fn word() -> impl Strategy<Value = String> {
        const KNOWN: &[&str] = &[
            "build",
            "gpu-bundle",
            "bench",
            "codegen",
            "doctor",
            "ptx-audit",
            "toolkit",
            "install",
            "ci-cpu",
            "help",
            "--arch",
            "--arch=",
            "--release",
            "--check",
            "--json",
            "--dir",
            "--require-toolkit",
            "--only",
            "--apps",
            "--torch-json",
            "--torch-script",
            "--kmeans-anchors",
            "--kinds",
            "--out",
            "--quick",
            "--plot-only",
            "--help",
            "-h",
            "--",
            "-",
            "=",
        ];
        prop_oneof![
            proptest::sample::select(KNOWN).prop_map(String::from),
            any::<String>(),
            "--[a-z-]{0,12}(=.{0,4})?",
        ]
    }
}
