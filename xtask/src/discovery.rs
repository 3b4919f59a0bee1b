//! The toolkit search as kiln's build script does it (same order, same
//! project-local candidate), for xtask commands that need nvcc or cuobjdump.

use std::path::{Path, PathBuf};

use cuda_build::toolkit::Discovery;

use crate::workspace;

/// Where `cargo xtask toolkit install` puts the toolkit root (a symlink).
pub(crate) fn project_local_root(root: &Path) -> PathBuf {
    root.join("target/cuda-toolkit/cuda")
}

/// Searches like `crates/cuda-sys/build/main.rs`; `None` when `KILN_CUDA=off`.
pub(crate) fn kiln_discovery(root: &Path) -> Option<Discovery> {
    if std::env::var("KILN_CUDA").is_ok_and(|v| v == "off" || v == "0") {
        return None;
    }
    let local = project_local_root(root);
    Some(cargo_kiln::project::discovery_with_local(
        local.parent().unwrap_or(root),
    ))
}

/// A CUDA toolkit found for the CI cells.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Found {
    pub(crate) nvcc: PathBuf,
}

/// Finds the toolkit the way the build will (cuda-build's discovery, with
/// the project-local candidate); `None` under `KILN_CUDA=off`.
pub(crate) fn toolkit_present() -> Option<Found> {
    kiln_discovery(&workspace::root())
        .and_then(|d| d.toolkit)
        .map(|tk| Found { nvcc: tk.nvcc })
}
