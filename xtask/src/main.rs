//! `cargo xtask`: the project's own tooling (toolkit provisioning, builds,
//! audits, the CPU CI matrix, the GPU bundle and benchmarks), as a Rust
//! binary instead of shell scripts.
//!
//! What cargo-kiln also does (build report, audit, doctor, toolkit, the
//! bundle's pieces) is called from its library; xtask adds only kiln's
//! workspace: the matrix, bench, codegen, package, prebuilt.
//!
//! To add a subcommand: a variant in [`cli::Command`] (its doc comment is
//! its `--help` line), a module with a `run` taking its arguments, and an arm
//! in [`dispatch`].

mod audit;
mod bench;
mod build;
mod bundle;
mod ci;
mod cli;
mod codegen;
mod discovery;
mod kernel_crates;
mod package;
mod prebuilt;
mod toolkit;
mod workspace;

use std::process::ExitCode;

// The library's modules, under the names xtask's code has always used.
use cargo_kiln::{config, output};

use clap::Parser as _;
use cli::{Cli, Command, UsageError};

fn main() -> ExitCode {
    // clap prints help (exit 0) or a usage error (exit 2) itself.
    let cli = Cli::parse();
    match dispatch(cli.command) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {}", cargo_kiln::error::one_line(&e));
            if e.is::<UsageError>() {
                ExitCode::from(2)
            } else {
                ExitCode::FAILURE
            }
        }
    }
}

fn dispatch(command: Command) -> anyhow::Result<()> {
    let root = workspace::root();
    match command {
        Command::Build(args) => build::run(&root, &args),
        Command::Bench(args) => {
            bench::run(&root, &args, &std::env::args().skip(1).collect::<Vec<_>>())
        }
        Command::Codegen(args) => codegen::run(&root, &args),
        Command::GpuBundle(args) => bundle::run(&root, &args),
        Command::Doctor => toolkit::doctor(&root),
        Command::PtxAudit(args) => audit::run(&root, &args),
        Command::Toolkit(args) => toolkit::run(&args),
        Command::CiCpu(args) => ci::run(&args),
        Command::Prebuilt(args) => prebuilt::run(&root, &args),
        Command::Package => package::run(&root),
    }
}
