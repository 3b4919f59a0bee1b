//! The committed `src/bindings.rs` was generated from the headers as they are
//! now, with cudarc's `DeviceRepr` on the by-value struct; a header edited
//! without regenerating fails here with the command.

use std::path::Path;

#[test]
fn committed_bindings_match_the_headers() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    if let Err(message) = cuda_build::bindings::check_committed(
        &root.join("src/bindings.rs"),
        &root.join("kernels/include"),
        "cargo run -p cudarc-interop-codegen",
    ) {
        panic!("{message}");
    }
}

/// Compiles only if the generated struct is both a kiln ABI type and a
/// cudarc kernel argument.
#[test]
fn the_header_struct_is_a_cudarc_kernel_argument() {
    fn by_value<T: cudarc::driver::DeviceRepr + gpu_core::GpuRepr>() -> usize {
        T::SIZE
    }
    assert_eq!(by_value::<cudarc_interop::AffineParams>(), 12);
}
