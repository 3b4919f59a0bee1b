//! What the codegen tests share: the workspace root, and the toolkit whose
//! libclang and CUDA headers codegen runs with (`LIBCLANG_PATH` and
//! `CUDA_PATH`, or what `cargo xtask toolkit install` put in
//! `target/cuda-toolkit`).

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// The workspace the crate sits in.
pub(crate) fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The toolkit root, once libclang is known to load; or why not.
pub(crate) fn toolkit() -> Result<&'static Path, String> {
    static TOOLKIT: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    let found = TOOLKIT.get_or_init(|| {
        let local = workspace_root().join("target/cuda-toolkit");
        if std::env::var_os("LIBCLANG_PATH").is_none() {
            let dir = local.join("libclang");
            if !dir.join("libclang.so").is_file() {
                return Err("no libclang (set LIBCLANG_PATH, or install the pinned toolkit with `cargo xtask toolkit install`)".into());
            }
            // Every test calls this before anything reads the environment,
            // and `get_or_init` holds the others back until it returns.
            std::env::set_var("LIBCLANG_PATH", dir);
        }
        let root = std::env::var_os("CUDA_PATH")
            .map(PathBuf::from)
            .unwrap_or_else(|| local.join("cuda"));
        if !root.join("include/cuda_fp16.h").is_file() {
            return Err(format!(
                "no CUDA toolkit headers at {} (set CUDA_PATH)",
                root.display()
            ));
        }
        Ok(root)
    });
    found.as_deref().map_err(Clone::clone)
}

/// The toolkit root, or `None` after printing why the test is skipped;
/// under `KILN_REQUIRE_TOOLKIT=1` a skip is a failure.
pub(crate) fn toolkit_or_skip() -> Option<&'static Path> {
    match toolkit() {
        Ok(root) => Some(root),
        Err(why) => {
            assert!(
                std::env::var_os("KILN_REQUIRE_TOOLKIT").is_none_or(|v| v != "1"),
                "KILN_REQUIRE_TOOLKIT=1 but {why}"
            );
            println!("skipped: {why}");
            None
        }
    }
}
