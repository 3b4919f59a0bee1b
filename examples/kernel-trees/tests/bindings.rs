//! The committed `src/bindings.rs` was generated from the headers as they are
//! now; a header edited without regenerating fails here with the command.

use std::path::Path;

#[test]
fn committed_bindings_match_the_headers() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    if let Err(message) = cuda_build::bindings::check_committed(
        &root.join("src/bindings.rs"),
        &root.join("kernels/include"),
        "cargo run -p kernel-trees-codegen",
    ) {
        panic!("{message}");
    }
}
