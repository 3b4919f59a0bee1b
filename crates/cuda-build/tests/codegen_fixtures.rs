//! Codegen over headers as kernel libraries write them, one fixture dir per
//! pattern under `tests/fixtures/codegen/`: a macro-generated dtype family
//! with `size_t`/`ptrdiff_t` and CUDA's half types (`dtypes`), structs and
//! enums by value (`by_value`), host functions beside a plain prototype
//! (`plain_prototype`), an enum from a toolkit header (`toolkit_enum`), a
//! header whose only toolkit include is `<cuda_fp16.h>` (`fp16_only`). Each
//! generated file but the last is pinned by an insta snapshot, and all of
//! them are compiled together in a scratch crate against the ABI
//! vocabulary (`generated_code_compiles`).
//!
//! Needs libclang and the CUDA toolkit's headers: `LIBCLANG_PATH` and
//! `CUDA_PATH`, or what `cargo xtask toolkit install` put in
//! `target/cuda-toolkit`. Without them each test prints `skipped:` and
//! returns, unless `KILN_REQUIRE_TOOLKIT=1`, where a skip is a failure.
#![cfg(feature = "codegen")]

use std::path::Path;
use std::process::Command;

use cuda_build::codegen::{Codegen, Generated};

/// The fixtures, by dir name.
const FIXTURES: [&str; 6] = [
    "dtypes",
    "by_value",
    "plain_prototype",
    "toolkit_enum",
    "fp16_only",
    "names",
];

mod codegen_support;

use codegen_support::{toolkit_or_skip, workspace_root};

/// Runs codegen on a fixture, or says why it cannot.
fn generate(fixture: &str) -> Option<Generated> {
    generate_with(fixture, |codegen| codegen)
}

/// [`generate`] with options set on the `Codegen` by `configure`.
fn generate_with(fixture: &str, configure: impl FnOnce(Codegen) -> Codegen) -> Option<Generated> {
    let root = toolkit_or_skip()?;
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/codegen")
        .join(fixture);
    let codegen = Codegen::new(dir)
        .include_dir(cuda_build::header::include_dir())
        .toolkit(root)
        .regenerate_with(
            "cargo test -p kiln-cuda-build --features codegen --test codegen_fixtures",
        );
    let generated = configure(codegen)
        .generate()
        .unwrap_or_else(|e| panic!("codegen on fixture {fixture}: {e}"));
    Some(generated)
}

/// Generates a fixture's bindings, checks the warnings and the snapshot
/// (named after the fixture); returns the text, or `None` when skipped.
fn check(fixture: &str, warnings: &[&str]) -> Option<String> {
    let generated = generate(fixture)?;
    assert_eq!(
        generated.warnings, warnings,
        "warnings of fixture {fixture}"
    );
    insta::assert_snapshot!(fixture, generated.text);
    Some(generated.text)
}

/// The regression: `kernel affine_f32 is declared by no header`.
#[test]
fn kernels_written_by_a_macro_are_declared_by_the_invoking_header() {
    let Some(text) = check("dtypes", &[]) else {
        return;
    };
    assert!(text.contains("/// `affine_f32` from `elementwise.h`."));
}

#[test]
fn structs_and_enums_by_value() {
    let Some(text) = check("by_value", &[]) else {
        return;
    };
    assert!(
        !text.contains("DeviceRepr"),
        "cudarc impls without the option"
    );
}

/// With `cudarc_device_repr(true)`: every type with `GpuRepr` (structs and
/// enums) gets cudarc's `DeviceRepr`, and nothing else changes.
#[test]
fn by_value_with_cudarc_device_repr() {
    let Some(generated) = generate_with("by_value", |c| c.cudarc_device_repr(true)) else {
        return;
    };
    assert_eq!(generated.warnings, Vec::<String>::new());
    let text = generated.text;
    insta::assert_snapshot!("by_value_cudarc", text);
    let gpu_repr = text.matches("::GpuRepr for ").count();
    assert!(gpu_repr >= 3, "{text}");
    assert_eq!(
        text.matches("unsafe impl ::cudarc::driver::DeviceRepr for ")
            .count(),
        gpu_repr
    );
    assert!(text.contains("SAFETY of every cudarc `DeviceRepr` impl here"));
    let plain = generate("by_value").unwrap().text;
    // Module docs aside (the SAFETY paragraph), the rest is the same file.
    let without: Vec<&str> = text
        .lines()
        .filter(|l| !l.contains("DeviceRepr") && !l.starts_with("///"))
        .collect();
    let plain: Vec<&str> = plain.lines().filter(|l| !l.starts_with("///")).collect();
    assert_eq!(
        without, plain,
        "the option changed more than the DeviceRepr impls"
    );
}

/// `cudarc_feature`: the same impls, each under the crate's feature (the
/// option off again after it is no longer asked for).
#[test]
fn by_value_with_cudarc_device_repr_behind_a_feature() {
    let Some(generated) = generate_with("by_value", |c| c.cudarc_feature("cudarc")) else {
        return;
    };
    let text = generated.text;
    let impls = text
        .matches("unsafe impl ::cudarc::driver::DeviceRepr for ")
        .count();
    assert!(impls >= 3, "{text}");
    assert_eq!(
        text.matches("#[cfg(feature = \"cudarc\")]\n    unsafe impl ::cudarc::driver::DeviceRepr")
            .count(),
        impls,
        "{text}"
    );
    let Some(off) = generate_with("by_value", |c| {
        c.cudarc_feature("cudarc").cudarc_device_repr(false)
    }) else {
        return;
    };
    assert!(!off.text.contains("DeviceRepr"));
}

#[test]
fn plain_prototype_is_a_warning_and_gets_no_binding() {
    let plain = "launch.h:23: `launch_saxpy_unchecked` is a plain prototype, neither a kernel \
                 (KILN_KERNEL) nor a host function (KILN_HOST_API), so it gets no binding; \
                 declare it with KILN_HOST_API if a static-library module defines it, or move \
                 it out of the include dir";
    let global = "launch.h:25: `scale_raw` is declared __global__ without KILN_KERNEL, so it \
                  gets no typed launch; declare it with KILN_KERNEL(scale_raw, params...)";
    let Some(text) = check("plain_prototype", &[plain, global]) else {
        return;
    };
    for unbound in ["launch_saxpy_unchecked", "scale_raw", "fixture_"] {
        assert!(!text.contains(unbound), "{unbound} has a binding");
    }
    assert!(text.contains("pub fn saxpy_launch(") && text.contains("pub fn sum_launch("));
}

/// The regression: `bindgen bound __half___half but libclang found no such
/// prototype` for a header that includes only `<cuda_fp16.h>`.
#[test]
fn a_header_including_only_cuda_fp16_binds_half_as_half_f16() {
    let Some(text) = check("fp16_only", &[]) else {
        return;
    };
    assert!(text.contains("::half::f16"), "{text}");
    assert!(
        !text.contains("__half"),
        "a binding of cuda_fp16.h's own:\n{text}"
    );
}

/// The regression: kernels named `ALL`, `f32`, `usize`, `match` or like a
/// struct of the header got markers of that name, and the bindings did not
/// compile (`generated_code_compiles` compiles these). Each marker that
/// would shadow a name in scope takes a trailing `_`; `NAME` stays the
/// symbol.
#[test]
fn kernels_named_like_items_in_scope_get_distinct_markers() {
    let Some(generated) = generate("names") else {
        return;
    };
    assert_eq!(generated.warnings, Vec::<String>::new());
    let text = generated.text;
    for (marker, symbol) in [
        ("ALL_", "ALL"),
        ("f32_", "f32"),
        ("usize_", "usize"),
        ("match_", "match"),
        ("fixture_window_", "fixture_window"),
        ("uses_window", "uses_window"),
    ] {
        assert!(
            text.contains(&format!("pub struct {marker};"))
                && text.contains(&format!("const NAME: &'static str = \"{symbol}\";")),
            "no marker `{marker}` for `{symbol}` in:\n{text}"
        );
    }
}

/// Not a snapshot: the enumerators follow the toolkit's version.
#[test]
fn enum_from_a_toolkit_header_by_value() {
    let Some(generated) = generate("toolkit_enum") else {
        return;
    };
    assert_eq!(generated.warnings, Vec::<String>::new());
    let text = generated.text;
    for expected in [
        "pub struct cudaDataType_t(pub ::core::ffi::c_uint);",
        "pub const CUDA_R_16BF: cudaDataType_t = cudaDataType_t(14);",
        "unsafe impl crate::abi::GpuRepr for cudaDataType_t {",
        "impl crate::abi::AbiParam for cudaDataType_t {",
        "const HEADER: &'static str = \"convert.h\";",
    ] {
        assert!(text.contains(expected), "no `{expected}` in:\n{text}");
    }
}

/// The generated files compile, with every const layout assert evaluated,
/// and the parameter types are the Rust types the C types promise.
#[test]
fn generated_code_compiles() {
    let mut files = Vec::new();
    for fixture in FIXTURES {
        let Some(generated) = generate(fixture) else {
            return;
        };
        files.push((fixture, generated.text));
    }
    // Kernels declared by their definitions (`codegen_sources`' tree).
    let tree = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/codegen_sources/tree");
    let generated = Codegen::new(tree.join("include"))
        .include_dir(cuda_build::header::include_dir())
        .toolkit(toolkit_or_skip().expect("the fixtures above found it"))
        .sources(&tree)
        .generate()
        .unwrap();
    files.push(("sources_tree", generated.text));
    let krate = Path::new(env!("CARGO_TARGET_TMPDIR")).join("codegen-fixtures");
    std::fs::create_dir_all(krate.join("src")).unwrap();
    for (fixture, text) in &files {
        write(&krate.join("src").join(format!("{fixture}.rs")), text);
    }
    // The ABI vocabulary as a module of the scratch crate (its new crate when
    // this checkout has it), plus the impls this test may add locally where
    // that source has none yet (for `usize`/`isize` and the half types).
    let abi = ["crates/kiln-abi/src/lib.rs", "crates/cuda-sys/src/abi.rs"]
        .map(|p| workspace_root().join(p))
        .into_iter()
        .find(|p| p.is_file())
        .expect("the ABI vocabulary's source");
    let abi_text = std::fs::read_to_string(&abi).unwrap();
    let local_impls = if abi_text.contains("f16") {
        ""
    } else {
        LOCAL_ABI_IMPLS
    };
    write(
        &krate.join("src/lib.rs"),
        &format!(
            "#[path = {:?}]\npub mod abi;\n{local_impls}\npub mod dtypes;\npub mod by_value;\npub mod plain_prototype;\npub mod toolkit_enum;\npub mod sources_tree;\npub mod names;\n{TYPE_CHECKS}",
            abi.canonicalize().unwrap()
        ),
    );
    write(&krate.join("Cargo.toml"), SCRATCH_MANIFEST);
    // The workspace's lock file pins `half` to the version kiln builds.
    std::fs::copy(
        workspace_root().join("Cargo.lock"),
        krate.join("Cargo.lock"),
    )
    .unwrap();
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let output = Command::new(cargo)
        .args(["check", "--offline", "--quiet", "--manifest-path"])
        .arg(krate.join("Cargo.toml"))
        .env("CARGO_TARGET_DIR", krate.join("target"))
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "the generated code does not compile:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

fn write(path: &Path, text: &str) {
    if std::fs::read_to_string(path).is_ok_and(|old| old == text) {
        return; // keeps cargo's fingerprint
    }
    std::fs::write(path, text).unwrap();
}

const SCRATCH_MANIFEST: &str = r#"[package]
name = "codegen-fixtures-check"
version = "0.0.0"
edition = "2021"
publish = false

[dependencies]
half = "2"

# Not a member of the workspace it sits in.
[workspace]
"#;

/// What the crate that owns the ABI traits provides for kiln-abi's new types.
const LOCAL_ABI_IMPLS: &str = r#"
mod local_impls {
    use crate::abi::{param_kind, AbiParam, GpuRepr};
    macro_rules! by_value {
        ($($t:ty => $c:literal),*) => {$(
            // SAFETY: plain scalars of the C type's size; every bit pattern
            // is a valid value.
            unsafe impl GpuRepr for $t {
                const C_NAME: &'static str = $c;
                const SIZE: usize = ::core::mem::size_of::<$t>();
                const ALIGN: usize = ::core::mem::align_of::<$t>();
                const FIELD_OFFSETS: &'static [(&'static str, usize)] = &[];
            }
            impl AbiParam for $t {
                type Kind = param_kind::ByValue<$t>;
            }
        )*};
    }
    by_value!(usize => "size_t", isize => "ptrdiff_t", half::f16 => "__half", half::bf16 => "__nv_bfloat16");
}
"#;

/// Pins the Rust types of a few parameter lists and the traits of the
/// by-value types: a wrong mapping fails to compile.
const TYPE_CHECKS: &str = r#"
use crate::abi::{AbiParam, GpuRepr, KernelDecl};
use half::{bf16, f16};

fn params<K: KernelDecl>(p: K::Params) -> K::Params {
    p
}
fn by_value<T: AbiParam + GpuRepr>() {}
fn declared<K: KernelDecl>(_: Option<K::Params>) {}

pub fn checks() {
    use by_value::kernels::transform;
    use by_value::types::{fixture_boundary, fixture_params, fixture_precision};
    use dtypes::kernels::{affine_bf16, affine_f16, affine_u8, fill_f32, scale_f16};
    let _: (*const f16, *mut f16, f16, f16, usize) =
        params::<affine_f16>((core::ptr::null(), core::ptr::null_mut(), f16::ZERO, f16::ONE, 0));
    let _: (*const bf16, *mut bf16, bf16, bf16, usize) =
        params::<affine_bf16>((core::ptr::null(), core::ptr::null_mut(), bf16::ZERO, bf16::ONE, 0));
    let _: (*const u8, *mut u8, u8, u8, usize) =
        params::<affine_u8>((core::ptr::null(), core::ptr::null_mut(), 1, 2, 3));
    let _: (*mut f32, f32, isize) = params::<fill_f32>((core::ptr::null_mut(), 0.0, -1));
    let _: (*mut f16, f16, usize) = params::<scale_f16>((core::ptr::null_mut(), f16::ONE, 0));
    let boundary = fixture_boundary::FIXTURE_WRAP;
    let _: (*const f32, *mut f32, fixture_params, fixture_boundary, fixture_precision) =
        params::<transform>((
            core::ptr::null(),
            core::ptr::null_mut(),
            fixture_params { scale: 1.0, offset: 0.0, count: 4, boundary },
            boundary,
            fixture_precision::high,
        ));
    by_value::<fixture_params>();
    by_value::<fixture_boundary>();
    by_value::<fixture_precision>();
    by_value::<toolkit_enum::types::cudaDataType>();
    // `const void *` and `void *` are the ABI's untyped pointers (issue 42).
    declared::<toolkit_enum::kernels::convert>(None::<(
        crate::abi::ConstVoidPtr,
        toolkit_enum::types::cudaDataType,
        crate::abi::MutVoidPtr,
        toolkit_enum::types::cudaDataType,
        usize,
    )>);
    assert_eq!(plain_prototype::kernels::ALL.len(), 1);
    // Markers renamed off the names they would shadow; the parameters keep
    // the primitive and the header's types.
    assert_eq!(names::kernels::ALL.len(), 6);
    let _: (*const f32, *mut f32) = params::<names::kernels::f32_>((core::ptr::null(), core::ptr::null_mut()));
    let _: (*mut u8,) = params::<names::kernels::usize_>((core::ptr::null_mut(),));
    let window = names::types::fixture_window { start: 0, len: 1 };
    let _: (*mut f32, names::types::fixture_window) =
        params::<names::kernels::fixture_window_>((core::ptr::null_mut(), window));
    let _: (names::types::fixture_window, *mut f32) =
        params::<names::kernels::uses_window>((window, core::ptr::null_mut()));
    let _ = (names::kernels::ALL_, names::kernels::match_);
    // From the sources: a template instantiation, a macro family member with
    // nullable pointers, a C++ kernel taking a header's struct by value.
    use sources_tree::kernels::{fixture_fill_window, scale_uint32_t, uneg_f16};
    use sources_tree::types::fixture_window;
    let _: (*const u32, *mut u32, u32, usize) =
        params::<scale_uint32_t>((core::ptr::null(), core::ptr::null_mut(), 2, 0));
    let _: (usize, usize, *const usize, *const f16, *mut f16) = params::<uneg_f16>((
        4,
        1,
        core::ptr::null(),
        core::ptr::null(),
        core::ptr::null_mut(),
    ));
    let _: (*mut u32, fixture_window, u32) = params::<fixture_fill_window>((
        core::ptr::null_mut(),
        fixture_window { start: 0, len: 1 },
        7,
    ));
    assert_eq!(<scale_uint32_t as KernelDecl>::NAME, "_Z5scaleIjEvPKT_PS0_S0_m");
    // `void *`, `bool` and fp8 parameters from the sources (issue 42).
    declared::<sources_tree::kernels::dequantize_block_q8_0_f32>(None::<(crate::abi::ConstVoidPtr, *mut f32, i32)>);
    declared::<sources_tree::kernels::fill_flag>(None::<(*mut f32, bool, usize)>);
    declared::<sources_tree::kernels::affine_fp8>(None::<(usize, crate::abi::Fp8E4M3, *mut crate::abi::Fp8E4M3)>);
}
"#;
