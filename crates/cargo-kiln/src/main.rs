//! The `cargo-kiln` binary: `cargo kiln SUBCOMMAND` (cargo passes `kiln` as
//! the first argument; run directly, `cargo-kiln SUBCOMMAND` works too).
//! A thin clap dispatcher over [`cargo_kiln::commands`]: to add a
//! subcommand, a variant in [`Command`] and an arm in [`dispatch`].

use std::process::ExitCode;

use cargo_kiln::commands::{self, AuditArgs, BuildArgs, BundleArgs, DoctorArgs, ToolkitArgs};
use clap::{Parser, Subcommand};

/// What cargo runs: `cargo-kiln kiln ...`.
#[derive(Debug, Parser)]
#[command(name = "cargo", bin_name = "cargo")]
enum Cargo {
    Kiln(Kiln),
}

/// kiln's tools for a crate whose build script uses cuda-build: a new
/// crate, build report, PTX/SASS audit, doctor, toolkit install, GPU bundle.
#[derive(Debug, clap::Args)]
#[command(version)]
struct Kiln {
    #[command(flatten)]
    krate: commands::CrateArg,
    #[command(subcommand)]
    command: Command,
}

/// The subcommands, in the order `--help` lists them.
#[derive(Debug, Subcommand)]
enum Command {
    /// Create a crate with one CUDA kernel, its header, build.rs, committed bindings, a CPU reference and a test.
    New(cargo_kiln::new::NewArgs),
    /// Build the crate with those archs; report what each module's fat binary holds.
    Build(BuildArgs),
    /// Build, then check every kernel's archs, budgets, PTX ISA, f64 and ABI.
    Audit(AuditArgs),
    /// Toolkit, archs, libclang, driver and GPUs; what the default build makes.
    Doctor(DoctorArgs),
    /// Report on, or install, the pinned CUDA toolkit (into your toolkit store).
    Toolkit(ToolkitArgs),
    /// Regenerate the crate's bindings from its kernels' headers (bindgen), or --check them.
    Codegen(cargo_kiln::codegen::CodegenArgs),
    /// Release test binaries + run.sh (sanitizers, positive control) for a GPU host.
    Bundle(BundleArgs),
}

fn main() -> ExitCode {
    let mut args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    // Run as `cargo-kiln build`, not through cargo: the same CLI.
    if args.get(1).is_none_or(|a| a != "kiln") {
        args.insert(1.min(args.len()), "kiln".into());
    }
    // clap prints help (exit 0) or a usage error (exit 2) itself.
    let Cargo::Kiln(kiln) = Cargo::parse_from(args);
    match dispatch(&kiln.krate, kiln.command) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {}", cargo_kiln::error::one_line(&e));
            ExitCode::from(cargo_kiln::error::exit_status(&e))
        }
    }
}

fn dispatch(krate: &commands::CrateArg, command: Command) -> anyhow::Result<()> {
    match command {
        Command::New(args) => new(&args),
        Command::Build(args) => commands::build(krate, &args),
        Command::Audit(args) => commands::audit(krate, &args),
        Command::Doctor(args) => commands::doctor(krate, &args),
        Command::Toolkit(args) => commands::toolkit(krate, &args),
        Command::Codegen(args) => cargo_kiln::codegen::run(&krate.project()?, &args),
        Command::Bundle(args) => commands::bundle(krate, &args),
    }
}

fn new(args: &cargo_kiln::new::NewArgs) -> anyhow::Result<()> {
    let created = cargo_kiln::new::run(args)?;
    let dir = created.dir.display();
    println!(
        "created `{}` at {dir} ({} files)",
        args.name,
        created.files.len()
    );
    println!("next: cd {dir} && cargo test   (CUDA_PATH=<toolkit root> compiles the kernel)");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::error::ErrorKind;
    use clap::CommandFactory as _;
    use proptest::prelude::*;

    fn parse(args: &[&str]) -> Result<Cargo, clap::Error> {
        Cargo::try_parse_from(["cargo", "kiln"].into_iter().chain(args.iter().copied()))
    }

    #[test]
    fn the_cli_is_well_formed() {
        Cargo::command().debug_assert();
    }

    #[test]
    fn every_command_has_help() {
        for name in [
            "new", "build", "audit", "doctor", "toolkit", "codegen", "bundle",
        ] {
            let err = parse(&[name, "--help"]).unwrap_err();
            assert_eq!(err.kind(), ErrorKind::DisplayHelp, "{name}");
            assert!(
                err.to_string().contains("Usage: cargo kiln"),
                "{name}: {err}"
            );
        }
        let err = parse(&["toolkit", "install", "--help"]).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::DisplayHelp);
    }

    #[test]
    fn manifest_path_goes_before_or_after_the_command() {
        for args in [
            &["--manifest-path", "c/Cargo.toml", "audit", "--json"][..],
            &["audit", "--manifest-path", "c/Cargo.toml", "--json"],
        ] {
            let Cargo::Kiln(k) = parse(args).unwrap();
            assert_eq!(
                k.krate.manifest_path.as_deref(),
                Some(std::path::Path::new("c/Cargo.toml"))
            );
            let Command::Audit(a) = k.command else {
                panic!("not audit")
            };
            assert!(a.json);
        }
    }

    #[test]
    fn bad_arguments_are_usage_errors() {
        for args in [
            &["build", "--arch"][..],
            &["build", "--bogus"],
            &["audit", "--prebuilt", "d", "--arch", "sm_80"],
            &["toolkit", "instal"],
            &["frobnicate"],
            &[],
        ] {
            let err = parse(args).unwrap_err();
            assert_eq!(err.exit_code(), 2, "{args:?}: {err}");
        }
    }

    proptest! {
        /// Any argv at all parses or is refused; clap never panics.
        #[test]
        fn parsing_never_panics(args in proptest::collection::vec(word(), 0..8)) {
            let _ = parse(&args.iter().map(String::as_str).collect::<Vec<_>>());
        }
    }

    fn word() -> impl Strategy<Value = String> {
        const KNOWN: &[&str] = &[
            "new",
            "build",
            "audit",
            "doctor",
            "toolkit",
            "install",
            "bundle",
            "help",
            "--arch",
            "--arch=",
            "--release",
            "--json",
            "--dir",
            "--out",
            "--prebuilt",
            "--kernels",
            "--manifest-path",
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
