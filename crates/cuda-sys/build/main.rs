//! cuda-sys's build script: compiles `kernels/*.cu` with cuda-build's
//! [`KernelBuild`] (fat binaries embedded from OUT_DIR, static libraries for
//! host-side modules), publishes cfgs and `cargo::metadata`, and falls back to
//! a CPU-only build when no toolkit is found.
//!
//! Env: `KILN_CUDA_ARCHS` (arch spec), `KILN_REQUIRE_CUDA=1` (no fallback),
//! `KILN_CUDA=off` (pretend there is no toolkit), plus discovery's `NVCC`,
//! `CUDA_PATH`, `CUDA_HOME`, `CUDA_ROOT`, `PATH`.

use std::path::PathBuf;

use cuda_build::KernelBuild;

fn main() {
    let manifest_dir = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("set by cargo"));
    let workspace = cuda_build::depfile::normalize(&manifest_dir.join("../.."));
    let build = KernelBuild::new(workspace.join("kernels"))
        .env_prefix("KILN")
        .image_type("crate::FatbinImage")
        .toolkit_candidate("project-local", workspace.join("target/cuda-toolkit/cuda"));
    match build.run() {
        Ok(report) => {
            for line in report.metadata_directives() {
                println!("{line}");
            }
        }
        Err(error) => {
            let text = error.to_string();
            let mut lines = text.lines();
            println!("cargo::error={}", lines.next().unwrap_or_default());
            for line in lines {
                eprintln!("{line}");
            }
            std::process::exit(1);
        }
    }
}
