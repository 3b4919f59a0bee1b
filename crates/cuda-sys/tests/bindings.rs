//! The committed bindings match the headers, and the ABI they describe is the
//! one the kernels were built with.

use std::path::PathBuf;

use cuda_sys::{kernels, types, GpuRepr, KernelDecl};

fn workspace() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

#[test]
fn committed_bindings_match_the_headers() {
    let result = cuda_build::bindings::check_committed(
        &workspace().join("crates/cuda-sys/src/generated.rs"),
        &workspace().join("kernels/include"),
        "cargo xtask codegen",
    );
    if let Err(message) = result {
        panic!("{message}");
    }
}

#[test]
fn batch_descriptor_is_32_bytes_not_24() {
    // The seed's comment said 24: five u32 and a u8 are 21 bytes of fields,
    // and align(16) rounds the size to 32.
    assert_eq!(<types::BatchStructureDesc as GpuRepr>::SIZE, 32);
    assert_eq!(<types::BatchStructureDesc as GpuRepr>::ALIGN, 16);
    assert_eq!(
        <types::BatchStructureDesc as GpuRepr>::FIELD_OFFSETS,
        &[
            ("atom_offset", 0),
            ("ca_offset", 4),
            ("n_atoms", 8),
            ("n_residues", 12),
            ("lineage_hash", 16),
            ("country_id", 20),
            ("_pad", 21)
        ]
    );
}

#[test]
fn kernel_declarations_mirror_the_headers() {
    assert_eq!(kernels::vector_add::NAME, "vector_add");
    assert_eq!(kernels::vector_add::HEADER, "vector_add.h");
    assert_eq!(kernels::vector_add::PARAM_NAMES, ["a", "b", "c", "n"]);
    let _: <kernels::vector_add as KernelDecl>::Params = (
        std::ptr::null(),
        std::ptr::null(),
        std::ptr::null_mut(),
        0u32,
    );
    assert_eq!(kernels::batch_stats::PARAM_NAMES.len(), 5);
}

#[test]
fn embedded_modules_match_the_build_mode() {
    let names: Vec<&str> = cuda_sys::modules::ALL.iter().map(|m| m.name).collect();
    assert_eq!(
        names,
        ["batch", "convert", "vector_add"],
        "reduce is a static library; the anneal's kernels are kiln-anneal's"
    );
    for module in cuda_sys::modules::ALL {
        assert_eq!(module.is_built(), cuda_sys::CUDA_ENABLED, "{}", module.name);
        if module.is_built() {
            assert!(!module.sass.is_empty(), "{}", module.name);
            assert!(!module.kernels.is_empty(), "{}", module.name);
        }
    }
    assert!(cuda_sys::modules::VECTOR_ADD
        .kernels
        .iter()
        .all(|k| *k == "vector_add"));
}

/// The static-library module links: calling into it reaches the CUDA runtime
/// (which, with no GPU, answers with an error code rather than crashing).
#[cfg(cuda_enabled)]
#[test]
fn static_library_module_links_and_answers() {
    let mut bytes = usize::MAX;
    // SAFETY: `bytes` is a valid out-pointer; n = 1024 inputs.
    let status = unsafe { cuda_sys::host::kiln_sum_f32_scratch_bytes(1024, &mut bytes) };
    if status == types::kiln_cuda_error_t(0) {
        assert!(
            bytes > 0 && bytes != usize::MAX,
            "CUB asked for {bytes} bytes"
        );
    } else {
        println!("CUDA runtime answered {status:?} (no GPU here)");
    }
}
