//! `cargo xtask build [--arch SPEC] [--release]`: builds the workspace with
//! those archs and prints cargo-kiln's per-module report of cuda-sys's
//! kernels (the SASS and PTX inside, size, compile time, cache hits). Only
//! the workspace's part is here: `cargo build --workspace` with
//! `KILN_CUDA_ARCHS`, and finding cuda-sys's manifest.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::{Context, Result};
use cargo_kiln::build::{validate_spec, BuildReport, Cuobjdump};
use cargo_kiln::project::cargo_stdout;
use cargo_metadata::Message;
use cuda_build::Manifest;

use crate::cli::BuildArgs;
use crate::discovery::kiln_discovery;

/// Checks an arch spec before anything is built; exits 2 with one line on a
/// bad spec.
pub(crate) fn validate_spec_or_exit(root: &Path, spec: &str, origin: &str) {
    if let Err(e) = validate_spec(kiln_discovery(root).as_ref(), spec, origin) {
        eprintln!("error: {e}");
        std::process::exit(2);
    }
}

/// cuobjdump of the toolkit kiln's build uses.
pub(crate) fn cuobjdump(root: &Path) -> Cuobjdump {
    Cuobjdump::find(kiln_discovery(root).as_ref())
}

/// Runs the command.
pub(crate) fn run(root: &Path, args: &BuildArgs) -> Result<()> {
    let arch = args.arch.arch.as_deref();
    if let Some(spec) = arch {
        validate_spec_or_exit(root, spec, "--arch");
    }
    let started = Instant::now();
    let manifest = build_workspace(root, arch, args.release)?;
    print!("{}", BuildReport::new(&manifest, &cuobjdump(root)).render());
    println!("built in {:.1} s", started.elapsed().as_secs_f64());
    Ok(())
}

/// `cargo build --workspace` with `KILN_CUDA_ARCHS=spec` (when given); returns
/// the manifest cuda-sys's build script wrote.
pub(crate) fn build_workspace(root: &Path, spec: Option<&str>, release: bool) -> Result<Manifest> {
    let mut cargo = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    cargo
        .current_dir(root)
        .args([
            "build",
            "--workspace",
            "--message-format=json-render-diagnostics",
        ])
        .stdout(Stdio::piped());
    if release {
        cargo.arg("--release");
    }
    if let Some(spec) = spec {
        cargo.env("KILN_CUDA_ARCHS", spec);
    }
    let stdout = cargo_stdout(cargo)?;
    let out_dir =
        cuda_sys_out_dir(&stdout).context("cargo did not report cuda-sys's build script output")?;
    Ok(Manifest::read(
        &out_dir.join(cuda_build::manifest::file_name("KILN")),
    )?)
}

/// The OUT_DIR of cuda-sys's build script, from cargo's JSON messages.
pub(crate) fn cuda_sys_out_dir(messages: &[u8]) -> Option<PathBuf> {
    Message::parse_stream(messages)
        .map_while(Result::ok)
        .filter_map(|msg| match msg {
            Message::BuildScriptExecuted(script) => Some(script),
            _ => None,
        })
        .filter(|script| script.package_id.repr.contains("cuda-sys"))
        .map(|script| script.out_dir.into_std_path_buf())
        .find(|dir| dir.join(cuda_build::manifest::file_name("KILN")).exists())
}
