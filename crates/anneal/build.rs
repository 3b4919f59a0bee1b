//! Compiles the anneal's kernels (`kernels/*.cu`, shaped by `kernels/kiln.toml`)
//! with cuda-build's `KernelBuild`, as any crate of kiln's users does: fat
//! binaries embedded by `src/kernels.rs`, the sort as a static library, or a
//! CPU-only build (one warning) where no CUDA toolkit is found.
//!
//! Env: `KILN_ANNEAL_CUDA_ARCHS` (arch spec), `KILN_ANNEAL_REQUIRE_CUDA=1`
//! (no fallback), `KILN_ANNEAL_CUDA=off` (pretend there is no toolkit),
//! `KILN_ANNEAL_NVCC_LAUNCHER`, and the toolkit search's `NVCC`,
//! `CUDA_PATH`, ... Sets the cfgs `cuda_enabled` / `cpu_only`.

use std::path::PathBuf;

fn main() {
    let manifest_dir = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("set by cargo"));
    let build = cuda_build::KernelBuild::new(manifest_dir.join("kernels"))
        .env_prefix("KILN_ANNEAL")
        .include_dir(cuda_build::header::include_dir())
        .toolkit_hint("install the CUDA toolkit or set CUDA_PATH to its root")
        // Inside kiln's checkout, the toolkit kiln's own build installs
        // (`target/cuda-toolkit`); in a package it does not exist and is one
        // place not found.
        .toolkit_candidate(
            "kiln checkout",
            manifest_dir.join("../../target/cuda-toolkit/cuda"),
        );
    if let Err(error) = build.run() {
        // One line for Cargo; nvcc's diagnostics follow on stderr.
        let text = error.to_string();
        let mut lines = text.lines();
        println!("cargo::error={}", lines.next().unwrap_or_default());
        lines.for_each(|line| eprintln!("{line}"));
        std::process::exit(1);
    }
}
