//! `cargo xtask`: kiln's project commands (see `cargo xtask help`).

mod build;
mod codegen;
mod discovery;
mod doctor;

use std::path::PathBuf;

use anyhow::Result;

const COMMANDS: &str = "build, codegen, doctor";

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let root =
        cuda_build::depfile::normalize(&PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(".."));
    let result: Result<()> = match args.first().map(String::as_str) {
        Some("build") => build::run(&root, &args[1..]),
        Some("doctor") => doctor::run(&root, &args[1..]),
        Some("codegen") => codegen::run(&root, &args[1..]),
        _ => {
            eprintln!("usage: cargo xtask <command>; commands: {COMMANDS}");
            std::process::exit(2);
        }
    };
    if let Err(e) = result {
        eprintln!("error: {e:#}");
        std::process::exit(1);
    }
}
