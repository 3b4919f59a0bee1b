//! What went into each image, as `kernels/kiln.toml` asks: the portable
//! modules carry SASS for sm_80 and sm_90 and PTX for compute_90 (the
//! device-linked one SASS alone: a device link joins SASS, there is no PTX
//! to JIT across translation units), the sm_90a-only module nothing else, and
//! the header-less and macro-declared kernels are all in their modules.
//! Read from the images' build facts, so it runs (and fails) on any machine
//! that built with a toolkit.

use kernel_trees::{modules, CUDA_ENABLED};

#[test]
fn each_module_carries_the_archs_kiln_toml_gives_it() {
    if !CUDA_ENABLED {
        println!("skipped: CPU-only build (no CUDA toolkit at build time)");
        assert!(modules::ALL.iter().all(|m| !m.is_built()));
        return;
    }
    for module in [&modules::ELEMENTWISE, &modules::BYNAME] {
        assert_eq!(module.sass, [80, 90], "{}", module.name);
        assert_eq!(module.ptx, [90], "{}", module.name);
    }
    assert_eq!(modules::RDC_FATBIN.sass, [80, 90], "RDC_FATBIN");
    assert!(
        modules::RDC_FATBIN.ptx.is_empty(),
        "RDC_FATBIN: device-linked SASS only"
    );
    assert_eq!(modules::HOPPER.sass, [90], "HOPPER: sm_90a SASS alone");
    assert!(modules::HOPPER.ptx.is_empty(), "HOPPER: no PTX");
}

#[test]
fn every_declared_kernel_is_in_its_module() {
    if !CUDA_ENABLED {
        println!("skipped: CPU-only build (no CUDA toolkit at build time)");
        return;
    }
    for dtype in ["f32", "f64", "f16", "bf16", "i32", "u32", "u8"] {
        let name = format!("affine_{dtype}");
        assert!(modules::ELEMENTWISE.has_kernel(&name), "{name}");
    }
    assert!(modules::RDC_FATBIN.has_kernel("rdc_forward"));
    assert!(modules::RDC_FATBIN.has_kernel("rdc_backward"));
    assert!(modules::BYNAME.has_kernel("byname_iota"));
    assert!(modules::BYNAME.has_kernel("byname_fill_span"));
    assert!(modules::HOPPER.has_kernel("hopper_axpo"));
}
