//! cuda-sys's build script: compiles kiln's kernels (`kernels/`, its
//! `kiln.toml` naming the static-library module) with cuda-build's
//! [`KernelBuild`] (fat binaries embedded from OUT_DIR, static libraries for
//! host-side modules), publishes cfgs and `cargo::metadata`, and falls back to
//! a CPU-only build when no toolkit is found. `kiln.h` comes from cuda-build
//! (`cuda_build::header::include_dir()`).
//!
//! Env: `KILN_CUDA_ARCHS` (arch spec), `KILN_REQUIRE_CUDA=1` (no fallback),
//! `KILN_CUDA=off` (pretend there is no toolkit), `KILN_NVCC_LAUNCHER`
//! (`sccache`, `ccache`), `CUDAHOSTCXX` / `NVCC_CCBIN` (host compiler), plus
//! discovery's `NVCC`, `CUDA_PATH`, `CUDA_HOME`, `CUDA_ROOT`, `PATH`, and
//! the kernel cache's `KILN_CACHE_DIR`, `KILN_CACHE_MAX`, `KILN_CACHE=off`.
//! Sets `KILN_TOOLKIT_MAJOR` / `KILN_TOOLKIT_MINOR` for the crate's code.

use std::path::{Path, PathBuf};

use cuda_build::KernelBuild;

fn main() {
    let manifest_dir = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("set by cargo"));
    let workspace = manifest_dir
        .parent()
        .and_then(Path::parent)
        .expect("cuda-sys lies in <workspace>/crates/cuda-sys");
    if std::env::var_os("CARGO_FEATURE_KERNELS").is_none() {
        // The declarations alone (xtask): no nvcc, CPU-only cfgs.
        for line in cuda_build::cpu_only_directives() {
            println!("{line}");
        }
        println!("cargo::metadata=enabled=0");
        return;
    }
    let build = KernelBuild::new(workspace.join("kernels"))
        .env_prefix("KILN")
        .include_dir(cuda_build::header::include_dir())
        .image_type("crate::FatbinImage")
        .toolkit_hint("run `cargo xtask toolkit install` or set CUDA_PATH")
        .toolkit_candidate("project-local", workspace.join("target/cuda-toolkit/cuda"));
    match build.run() {
        Ok(report) => {
            for line in report.metadata_directives() {
                println!("{line}");
            }
        }
        Err(error) => {
            // One line for Cargo; nvcc's whole output follows on stderr.
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
