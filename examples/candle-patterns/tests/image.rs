//! What the build put in each image, checked without a GPU: every module
//! carries the archs kiln.toml gives it, holds exactly the kernels its
//! families stamp out (a kernel a macro dropped or an extra one fails), and
//! kiln-audit.toml governs them with no per-kernel table.

use candle_patterns::{kernels, modules, CUDA_ENABLED, FATBINS};

#[test]
fn each_module_carries_sm80_and_sm90_sass_and_compute90_ptx() {
    if !CUDA_ENABLED {
        println!("skipped: CPU-only build (no CUDA toolkit at build time)");
        assert!(modules::ALL.iter().all(|m| !m.is_built()));
        return;
    }
    assert_eq!(
        modules::ALL.len(),
        FATBINS.len(),
        "moe is a static library, not an image"
    );
    for module in FATBINS {
        assert_eq!(module.sass, [80, 90], "{}", module.name);
        assert_eq!(module.ptx, [90], "{}", module.name);
    }
}

#[test]
fn each_image_holds_exactly_the_kernels_its_families_stamp_out() {
    if !CUDA_ENABLED {
        println!("skipped: CPU-only build (no CUDA toolkit at build time)");
        return;
    }
    let mut total = 0;
    for (image, want) in kernels::expected() {
        let mut want = want.clone();
        want.sort();
        let mut got: Vec<String> = image.kernels.iter().map(|k| k.to_string()).collect();
        got.sort();
        assert_eq!(got, want, "{}", image.name);
        total += want.len();
    }
    // The families' size (candle has ~750; this fixture a fifth of that).
    assert_eq!(total, 152);
}

#[test]
fn the_audit_config_names_no_kernel_by_itself() {
    let text = include_str!("../kiln-audit.toml");
    let tables: Vec<&str> = text.lines().filter(|l| l.starts_with('[')).collect();
    assert!(tables.contains(&"[default]"), "{tables:?}");
    for table in tables.iter().filter(|t| t.starts_with("[kernel.")) {
        assert!(
            table.starts_with("[kernel.\"") && table.contains('*'),
            "{table} names one kernel; use [default] or a glob"
        );
    }
}
