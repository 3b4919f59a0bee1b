//! Compiles `kernels/*.cu` into fat binaries embedded by `src/lib.rs`, or
//! builds CPU-only (one warning) where no CUDA toolkit is found.
//! Env: `CUDARC_INTEROP_CUDA_ARCHS`, `CUDARC_INTEROP_REQUIRE_CUDA=1`,
//! `CUDARC_INTEROP_CUDA=off`, and the toolkit search's `NVCC`, `CUDA_PATH`, ...

fn main() {
    let build = cuda_build::KernelBuild::new("kernels")
        .env_prefix("CUDARC_INTEROP")
        .include_dir(cuda_build::header::include_dir())
        .toolkit_hint("install the CUDA toolkit or set CUDA_PATH to its root");
    if let Err(error) = build.run() {
        // One line for Cargo; nvcc's diagnostics follow on stderr.
        let text = error.to_string();
        let mut lines = text.lines();
        println!("cargo::error={}", lines.next().unwrap_or_default());
        lines.for_each(|line| eprintln!("{line}"));
        std::process::exit(1);
    }
}
