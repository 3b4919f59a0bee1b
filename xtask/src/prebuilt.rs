//! `cargo xtask prebuilt --manifest-path CRATE/Cargo.toml [--out DIR]`:
//! builds a crate's kernels with the toolkit and writes them, with their
//! manifest, into `CRATE/kernels-prebuilt/` (which its package then ships),
//! through `cuda_build::prebuilt::export`. Only the wiring is here: which
//! cargo build, and which of its build scripts wrote the kernels.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{bail, Context, Result};
use cargo_kiln::project::{cargo_stdout, kernel_manifest};

use crate::cli::PrebuiltArgs;
use crate::workspace;

/// Runs the command.
pub(crate) fn run(root: &Path, args: &PrebuiltArgs) -> Result<()> {
    let manifest_path = std::path::absolute(&args.manifest_path)?;
    let crate_dir = manifest_path
        .parent()
        .context("--manifest-path names no file in a dir")?
        .to_path_buf();
    let dest = match &args.out {
        Some(dir) => std::path::absolute(dir)?,
        None => crate_dir.join(cuda_build::prebuilt::DEFAULT_DIR),
    };
    let build_manifest = build_with_toolkit(root, &manifest_path, &crate_dir)?;
    let prebuilt = cuda_build::prebuilt::export(&build_manifest, &dest)?;
    let modules: Vec<String> = prebuilt
        .modules
        .iter()
        .filter_map(|m| m.output.as_ref())
        .map(|o| o.display().to_string())
        .collect();
    println!(
        "wrote {}: {} ({}), from {} inputs",
        workspace::display(&dest),
        prebuilt.summary(),
        modules.join(", "),
        prebuilt.inputs.len()
    );
    Ok(())
}

/// Builds the crate with the toolkit kiln's own build finds (handed over as
/// `NVCC` unless a discovery variable is set), in `target/prebuilt`; returns
/// the path of the crate's build manifest.
fn build_with_toolkit(root: &Path, manifest_path: &Path, crate_dir: &Path) -> Result<PathBuf> {
    let mut cargo = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    cargo
        .current_dir(root)
        .env("CARGO_TARGET_DIR", root.join("target/prebuilt"))
        .stdout(Stdio::piped())
        .args([
            "build",
            "--message-format=json-render-diagnostics",
            "--manifest-path",
        ])
        .arg(manifest_path);
    let discovery_set = ["NVCC", "CUDA_PATH", "CUDA_HOME", "CUDA_ROOT"]
        .iter()
        .any(|var| std::env::var_os(var).is_some());
    if !discovery_set {
        match crate::discovery::toolkit_present() {
            Some(found) => {
                cargo.env("NVCC", found.nvcc);
            }
            None => {
                bail!("no CUDA toolkit found: run `cargo xtask toolkit install` or set CUDA_PATH")
            }
        }
    }
    let stdout = cargo_stdout(cargo)?;
    kernel_manifest(&stdout, crate_dir).with_context(|| {
        format!(
            "no build script of {} wrote a kernel build manifest: does its build.rs run cuda_build::KernelBuild?",
            workspace::display(crate_dir)
        )
    })
}
