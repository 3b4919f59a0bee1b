//! `cargo xtask codegen [--check]`: regenerates the committed Rust bindings
//! (`crates/cuda-sys/src/generated.rs`) from `kernels/include/*.h` with
//! bindgen; `--check` fails when the committed file differs.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use cuda_build::codegen::{read_committed, write_if_changed, Codegen};

use crate::cli::CodegenArgs;

/// The committed bindings, relative to the workspace root.
pub(crate) const GENERATED: &str = "crates/cuda-sys/src/generated.rs";

/// Runs the command.
pub(crate) fn run(root: &Path, args: &CodegenArgs) -> Result<()> {
    let check = args.check;
    point_bindgen_at_libclang(root);
    let generated = Codegen::new(root.join("kernels/include"))
        .include_dir(cuda_build::header::include_dir())
        .new_type_alias("kiln_cuda_error_t")
        .abi_path("::kiln_abi")
        .regenerate_with("cargo xtask codegen")
        .generate()
        .with_context(|| {
            "generating bindings failed (bindgen loads libclang: `cargo xtask toolkit install` \
             installs one, or set LIBCLANG_PATH)"
        })?;
    for warning in &generated.warnings {
        eprintln!("codegen: warning: {warning}");
    }
    let text = generated.text;
    let path = root.join(GENERATED);
    if check {
        let committed = read_committed(&path)?.unwrap_or_default();
        if committed != text {
            bail!("{GENERATED} is out of date with kernels/include/*.h; run `cargo xtask codegen` and commit it");
        }
        println!("codegen: {GENERATED} is up to date");
    } else if write_if_changed(&path, &text)? {
        println!("codegen: wrote {GENERATED}");
    } else {
        println!("codegen: {GENERATED} already up to date");
    }
    Ok(())
}

/// bindgen loads libclang at run time; use the one `toolkit install` put
/// under the project unless the user chose one.
fn point_bindgen_at_libclang(root: &Path) {
    if std::env::var_os("LIBCLANG_PATH").is_some() {
        return;
    }
    let local: PathBuf = root.join("target/cuda-toolkit/libclang");
    if local.is_dir() {
        // Single-threaded here: xtask sets this before any thread starts.
        std::env::set_var("LIBCLANG_PATH", local);
    }
}
