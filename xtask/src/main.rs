//! `cargo xtask`: the project's own tooling (toolkit provisioning, the CPU CI
//! matrix, and more as they land), as a Rust binary instead of shell scripts.
//!
//! To add a subcommand: a module with `pub(crate) fn run(args: cli::Args)`,
//! a row in [`COMMANDS`] and an arm in [`dispatch`].

mod audit;
mod bench;
mod build;
mod bundle;
mod ci;
mod cli;
mod codegen;
mod config;
mod discovery;
mod doctor;
mod toolkit;
mod workspace;

use std::process::ExitCode;

use cli::{usage_error, Args, UsageError};

/// Subcommands and their one-line help, in the order `--help` lists them.
const COMMANDS: &[(&str, &str)] = &[
    (
        "build",
        "[--arch SPEC] [--release]  build with those archs; report each fat binary",
    ),
    (
        "gpu-bundle",
        "[--arch SPEC]  release test binaries + apps + run.sh for a GPU host, in target/gpu-bundle",
    ),
    (
        "bench",
        "[--apps PATH] [--torch-json FILE | --torch-script FILE] [--out DIR] [--quick] [--plot-only]  run apps bench (+ PyTorch), write bench.json and speedup.svg",
    ),
    (
        "codegen",
        "[--check]  regenerate (or check) the bindings from kernels/include/*.h",
    ),
    (
        "doctor",
        "  toolkit, archs, libclang, driver and GPUs, what the default build makes",
    ),
    (
        "ptx-audit",
        "[--arch SPEC] [--json FILE]  build, then check every kernel's archs, budgets, PTX ISA, f64, ABI",
    ),
    (
        "toolkit",
        "[install] [--dir DIR]  report on, or install, the pinned CUDA toolkit",
    ),
    (
        "ci-cpu",
        "[--require-toolkit] [--only CELL]...  run the CPU CI matrix (ci/matrix.toml)",
    ),
];

fn main() -> ExitCode {
    let mut argv = std::env::args().skip(1);
    let command = argv.next();
    match dispatch(command.as_deref(), argv.collect()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            if e.is::<UsageError>() {
                ExitCode::from(2)
            } else {
                ExitCode::FAILURE
            }
        }
    }
}

fn dispatch(command: Option<&str>, rest: Vec<String>) -> anyhow::Result<()> {
    let args = |name: &str| Args::new(name, rest.clone());
    let root = workspace::root();
    match command {
        Some("build") => build::run(&root, &rest),
        Some("bench") => bench::run(
            &root,
            args("bench"),
            &std::env::args().skip(1).collect::<Vec<_>>(),
        ),
        Some("codegen") => codegen::run(&root, &rest),
        Some("gpu-bundle") => bundle::run(&root, args("gpu-bundle")),
        Some("doctor") => doctor::run(&root, &rest),
        Some("ptx-audit") => audit::run(&root, &rest),
        Some("toolkit") => toolkit::run(args("toolkit")),
        Some("ci-cpu") => ci::run(args("ci-cpu")),
        Some("help" | "--help" | "-h") => {
            print!("{}", help());
            Ok(())
        }
        Some(other) => Err(usage_error!(
            "unknown subcommand `{other}`; subcommands: {}",
            names()
        )),
        None => {
            eprint!("{}", help());
            Err(usage_error!(
                "no subcommand given; subcommands: {}",
                names()
            ))
        }
    }
}

fn names() -> String {
    COMMANDS
        .iter()
        .map(|(n, _)| *n)
        .collect::<Vec<_>>()
        .join(", ")
}

fn help() -> String {
    let mut out = String::from("usage: cargo xtask <subcommand>\n\nsubcommands:\n");
    for (name, text) in COMMANDS {
        out.push_str(&format!("  {name} {text}\n"));
    }
    out
}
