//! Where things are in the kiln workspace, as seen from xtask.
//!
//! xtask is always built from inside the workspace, so its manifest dir's
//! parent is the workspace root; every other path here hangs off that.

use std::path::{Path, PathBuf};

/// The workspace root: the directory holding the root `Cargo.toml`.
pub(crate) fn root() -> PathBuf {
    // Compile-time, so it holds even when the binary is run directly.
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask lives one level below the workspace root")
        .to_path_buf()
}

/// Where `cargo xtask toolkit install` puts the toolkit by default.
///
/// Contract with cuda-build's discovery: `<this>/cuda` is the toolkit root
/// (`bin/nvcc`, `include/`, `lib/`) and `<this>/libclang` holds libclang.so.
/// Fixed under `target/` (not `CARGO_TARGET_DIR`) so discovery can find it
/// without being told.
pub(crate) fn default_toolkit_dir() -> PathBuf {
    root().join("target").join("cuda-toolkit")
}

/// `ci/matrix.toml`: the cells `cargo xtask ci-cpu` runs.
pub(crate) fn ci_matrix_file() -> PathBuf {
    root().join("ci").join("matrix.toml")
}

/// `path` as written for humans: relative to the workspace root when inside it.
pub(crate) fn display(path: &Path) -> String {
    let root = root();
    match path.strip_prefix(&root) {
        Ok(rel) if !rel.as_os_str().is_empty() => rel.display().to_string(),
        _ => path.display().to_string(),
    }
}
