//! Builds the modules of `kernels/` (each top-level `.cu` a fat binary,
//! `moe/` a static library), or CPU-only (one warning) where no CUDA toolkit
//! is found. Env: `CP_CUDA_ARCHS`, `CP_REQUIRE_CUDA=1`, `CP_CUDA=off`, and
//! the toolkit search's `NVCC`, `CUDA_PATH`, ... Checks that the committed
//! `src/bindings.rs` matches the sources.

fn main() {
    // The committed markers were generated from the sources (no headers
    // folder, so the kernels folder stands for it): a source edited without
    // `cargo kiln codegen --sources` fails the build naming that command.
    let build = cuda_build::KernelBuild::new("kernels")
        .env_prefix("CP")
        .check_bindings("src/bindings.rs", "kernels");
    if let Err(error) = build.run() {
        // One line for Cargo; nvcc's diagnostics follow on stderr.
        let text = error.to_string();
        let mut lines = text.lines();
        println!("cargo::error={}", lines.next().unwrap_or_default());
        lines.for_each(|line| eprintln!("{line}"));
        std::process::exit(1);
    }
}
