//! `cargo xtask build [--arch SPEC] [--release]`: builds the workspace with
//! those archs and prints cargo-kiln's per-module report of each kernel
//! crate's kernels (cuda-sys's, kiln-anneal's: the SASS and PTX inside,
//! size, compile time, cache hits). Only the workspace's part is here:
//! `cargo build --workspace` with every kernel crate's `<PREFIX>_CUDA_ARCHS`,
//! and finding each crate's build manifest.

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
use crate::kernel_crates::{self, KernelCrate, KERNEL_CRATES};

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
    let tool = cuobjdump(root);
    for (krate, manifest) in build_workspace(root, arch, args.release)? {
        println!("{}:", krate.package);
        print!("{}", BuildReport::new(&manifest, &tool).render());
    }
    println!("built in {:.1} s", started.elapsed().as_secs_f64());
    Ok(())
}

/// `cargo build --workspace` with every kernel crate's
/// `<PREFIX>_CUDA_ARCHS=spec` (when given); returns the manifest each kernel
/// crate's build script wrote, in [`KERNEL_CRATES`]' order.
pub(crate) fn build_workspace(
    root: &Path,
    spec: Option<&str>,
    release: bool,
) -> Result<Vec<(KernelCrate, Manifest)>> {
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
        kernel_crates::set_for_all(&mut cargo, "CUDA_ARCHS", spec);
    }
    let stdout = cargo_stdout(cargo)?;
    KERNEL_CRATES
        .iter()
        .map(|krate| Ok((*krate, kernel_manifest(&stdout, krate)?)))
        .collect()
}

/// The manifest `krate`'s build script wrote, found from cargo's JSON
/// messages.
pub(crate) fn kernel_manifest(messages: &[u8], krate: &KernelCrate) -> Result<Manifest> {
    let out_dir = kernel_out_dir(messages, krate).with_context(|| {
        format!(
            "cargo did not report {}'s build script output",
            krate.package
        )
    })?;
    Ok(Manifest::read(
        &out_dir.join(cuda_build::manifest::file_name(krate.prefix)),
    )?)
}

/// The OUT_DIR of `krate`'s build script, from cargo's JSON messages.
pub(crate) fn kernel_out_dir(messages: &[u8], krate: &KernelCrate) -> Option<PathBuf> {
    let manifest = cuda_build::manifest::file_name(krate.prefix);
    Message::parse_stream(messages)
        .map_while(Result::ok)
        .filter_map(|msg| match msg {
            Message::BuildScriptExecuted(script) => Some(script),
            _ => None,
        })
        .filter(|script| script.package_id.repr.contains(krate.package))
        .map(|script| script.out_dir.into_std_path_buf())
        .find(|dir| dir.join(&manifest).exists())
}
