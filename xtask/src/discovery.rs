//! The toolkit search as kiln's build script does it (same order, same
//! project-local candidate), for xtask commands that need nvcc or cuobjdump.

use std::path::{Path, PathBuf};

use cuda_build::toolkit::{discover, Discovery, ProcessEnv};

/// Where `cargo xtask toolkit install` puts the toolkit root (a symlink).
pub(crate) fn project_local_root(root: &Path) -> PathBuf {
    root.join("target/cuda-toolkit/cuda")
}

/// Searches like `crates/cuda-sys/build/main.rs`; `None` when `KILN_CUDA=off`.
pub(crate) fn kiln_discovery(root: &Path) -> Option<Discovery> {
    if std::env::var("KILN_CUDA").is_ok_and(|v| v == "off" || v == "0") {
        return None;
    }
    Some(discover(
        &ProcessEnv,
        &[("project-local".to_string(), project_local_root(root))],
    ))
}
