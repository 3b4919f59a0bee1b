//! `cargo kiln`: parses the command line (cargo passes `kiln` as the first
//! argument) and runs the subcommand from the library; errors are one line.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Run as `cargo kiln COMMAND` (cargo calls `cargo-kiln kiln COMMAND`)
#[derive(Debug, Parser)]
#[command(name = "cargo", bin_name = "cargo")]
enum Cargo {
    Kiln(KilnArgs),
}

/// kiln's tools for crates whose build script uses cuda-build
#[derive(Debug, clap::Args)]
#[command(version)]
struct KilnArgs {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Create a crate with one CUDA kernel, its header, build.rs, committed
    /// bindings, a CPU reference and a test
    New(cargo_kiln::new::NewArgs),
}

fn main() -> ExitCode {
    let Cargo::Kiln(args) = Cargo::parse();
    let result = match args.command {
        Command::New(args) => new(&args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error:#}");
            ExitCode::FAILURE
        }
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
