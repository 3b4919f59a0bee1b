//! Every kernel of the images has a marker (no GPU, no toolkit): the
//! committed `src/bindings.rs`, generated from the sources by `cargo kiln
//! codegen --sources`, declares exactly the 152 kernels the families stamp
//! out (`kernels::expected()`, which `tests/image.rs` holds equal to the
//! images), so none is left to a launch by name; the `__half` and bf16
//! families behind `#if __CUDA_ARCH__` guards included (quantized.cu's
//! sm_89+ fp8 family too: codegen reads each module at each of its archs),
//! and none of the static `moe` module, whose kernels its host launchers
//! run.

use std::collections::BTreeSet;

use candle_patterns::kernels;
use candle_patterns::markers::{
    affine_bf16, affine_fp8e4m3, dequantize_block_q8_0_f32, fast_sum___half, fill_flag_f32,
    quantize_q8_0, ucopy_u8, uexp_f16,
};
use gpu_core::KernelDecl;

/// The `NAME` of every marker in the committed bindings.
fn marker_names() -> BTreeSet<String> {
    let text = include_str!("../src/bindings.rs");
    let prefix = "const NAME: &'static str = \"";
    text.lines()
        .filter_map(|l| l.trim().strip_prefix(prefix))
        .map(|rest| rest.split('"').next().unwrap().to_string())
        .collect()
}

#[test]
fn every_kernel_of_the_images_has_a_marker() {
    let expected: BTreeSet<String> = kernels::expected()
        .into_iter()
        .flat_map(|(_, names)| names)
        .collect();
    assert_eq!(expected.len(), 152, "the families stamp out 152 kernels");
    let markers = marker_names();
    let missing: Vec<_> = expected.difference(&markers).collect();
    let extra: Vec<_> = markers.difference(&expected).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "kernels with no marker: {missing:?}; markers of no image kernel: {extra:?}"
    );
}

#[test]
fn guarded_and_template_kernels_have_markers_with_their_symbols() {
    // Behind `#if __CUDA_ARCH__ >= 530` / `>= 800` in the sources.
    assert_eq!(uexp_f16::NAME, "uexp_f16");
    assert_eq!(affine_bf16::NAME, "affine_bf16");
    // Only the sm_89+ device passes define it (issue 42: it had no marker).
    assert_eq!(affine_fp8e4m3::NAME, "affine_fp8e4m3");
    // `void *` and `const void *` parameters are launchable untyped
    // pointers, `bool` and fp8 map (issue 42: no marker, or `c_void`).
    let _: Option<<dequantize_block_q8_0_f32 as KernelDecl>::Params> =
        None::<(gpu_core::ConstVoidPtr, *mut f32, i32)>;
    let _: Option<<quantize_q8_0 as KernelDecl>::Params> =
        None::<(*const f32, gpu_core::MutVoidPtr, i32)>;
    let _: Option<<fill_flag_f32 as KernelDecl>::Params> = None::<(*mut f32, f32, bool, usize)>;
    let _: Option<<affine_fp8e4m3 as KernelDecl>::Params> = None::<(
        usize,
        *const gpu_core::Fp8E4M3,
        *mut gpu_core::Fp8E4M3,
        gpu_core::Fp8E4M3,
    )>;
    // `fast_sum<__half>`: its marker names the mangled symbol.
    assert_eq!(fast_sum___half::NAME, kernels::fast_sum("f16"));
    assert_eq!(ucopy_u8::HEADER, "unary.cu");
    // The static module's launchers are no image kernels.
    let markers = marker_names();
    assert!(!markers.iter().any(|n| n.starts_with("cp_")), "{markers:?}");
}
