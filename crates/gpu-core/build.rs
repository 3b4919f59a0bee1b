//! Sets `cfg(with_cudarc)` when one of gpu-core's CUDA-version features
//! (`cuda-12040` ... `cuda-13040`, each of which brings cudarc in) is on, so
//! that `[features]` in Cargo.toml is the one list of versions and
//! `src/lib.rs` compiles its items, or its one error, on this cfg.

fn main() {
    println!("cargo::rerun-if-changed=build.rs");
    println!("cargo::rustc-check-cfg=cfg(with_cudarc)");
    if std::env::vars_os().any(|(key, _)| is_version_feature(&key.to_string_lossy())) {
        println!("cargo::rustc-cfg=with_cudarc");
    }
}

/// `CARGO_FEATURE_CUDA_` and five digits: how Cargo tells a build script
/// that `cuda-NNNNN` is on.
pub(crate) fn is_version_feature(var: &str) -> bool {
    var.strip_prefix("CARGO_FEATURE_CUDA_")
        .is_some_and(|v| v.len() == 5 && v.bytes().all(|b| b.is_ascii_digit()))
}
