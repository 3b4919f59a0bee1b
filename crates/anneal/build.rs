//! Re-publishes cuda-sys's build mode as this crate's `cuda_enabled` cfg, so
//! code that calls host functions of static-library modules (which exist only
//! when kiln's kernels were compiled) is compiled only then.

fn main() {
    println!("cargo::rustc-check-cfg=cfg(cuda_enabled)");
    println!("cargo::rerun-if-env-changed=DEP_KILN_CUDA_ENABLED");
    if std::env::var("DEP_KILN_CUDA_ENABLED").as_deref() == Ok("1") {
        println!("cargo::rustc-cfg=cuda_enabled");
    }
}
