//! Regenerates the fixture's `src/bindings.rs` from `kernels/include/*.h`
//! with bindgen, and from the `.cu` sources of `kernels/kiln.toml`'s modules
//! (the header-less kernels and the template's instantiations get typed
//! declarations too): `cargo run -p kernel-trees-codegen` (libclang; set
//! `LIBCLANG_PATH` if it is not found). `tests/bindings.rs` fails with this
//! command when a header or a source changed and the bindings did not.

use std::path::Path;
use std::process::ExitCode;

/// The command, as the generated file and the stale-bindings test name it.
const COMMAND: &str = "cargo run -p kernel-trees-codegen";

fn main() -> ExitCode {
    // The fixture crate is this crate's parent.
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("codegen/ sits inside the fixture crate");
    let generated = cuda_build::codegen::Codegen::new(root.join("kernels/include"))
        .include_dir(cuda_build::header::include_dir())
        .abi_path("::gpu_core")
        .root(root)
        .sources(root.join("kernels"))
        .regenerate_with(COMMAND)
        .generate();
    let text = match generated {
        Ok(generated) => {
            for warning in &generated.warnings {
                eprintln!("warning: {warning}");
            }
            generated.text
        }
        Err(error) => {
            eprintln!("error: {error}");
            return ExitCode::FAILURE;
        }
    };
    let path = root.join("src/bindings.rs");
    match cuda_build::codegen::write_if_changed(&path, &text) {
        Ok(true) => println!("wrote {}", path.display()),
        Ok(false) => println!("{} is up to date", path.display()),
        Err(error) => {
            eprintln!("error: {error}");
            return ExitCode::FAILURE;
        }
    }
    ExitCode::SUCCESS
}
