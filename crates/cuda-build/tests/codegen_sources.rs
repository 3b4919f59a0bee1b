//! Codegen's `sources`: kernels declared by their definitions in a vendored
//! tree's `.cu` files (`tests/fixtures/codegen_sources/tree`, candle's
//! patterns: a macro dtype family with `size_t`-heavy signatures and nullable
//! pointers, `extern "C"` kernels, a template with two explicit
//! instantiations and one never instantiated, a C++ kernel in a namespace,
//! unmapped parameter types, a kernel a header also declares, a static
//! library), pinned by an insta snapshot; the fingerprint of the sources;
//! and the hostile trees (a source that does not parse, two modules
//! defining one name, a missing or non-UTF-8 source). The real-nvcc test
//! proves every emitted `NAME` is a symbol of the compiled image.
//!
//! Needs libclang and the CUDA headers as `codegen_fixtures` does (skipped
//! without them, a failure under `KILN_REQUIRE_TOOLKIT=1`).
#![cfg(feature = "codegen")]

mod codegen_support;

use std::path::{Path, PathBuf};
use std::process::Command;

use codegen_support::{toolkit_or_skip, workspace_root};
use cuda_build::bindings::check_committed;
use cuda_build::codegen::{Codegen, Generated};

const COMMAND: &str = "cargo test -p kiln-cuda-build --features codegen --test codegen_sources";

fn tree() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/codegen_sources/tree")
}

/// Codegen over `kernels` (headers from `include`) with its sources.
fn generate(kernels: &Path, include: &Path) -> Option<Result<Generated, String>> {
    let root = toolkit_or_skip()?;
    Some(
        Codegen::new(include)
            .include_dir(cuda_build::header::include_dir())
            .toolkit(root)
            .abi_path("crate::abi")
            .regenerate_with(COMMAND)
            .sources(kernels)
            .generate()
            .map_err(|e| e.to_string()),
    )
}

/// A copy of the fixture tree in a temp dir, for the tests that damage it.
fn copy_tree() -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    copy_dir(&tree(), tmp.path());
    tmp
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

#[test]
fn vendored_tree_kernels_get_markers_from_their_definitions() {
    let Some(generated) = generate(&tree(), &tree().join("include")) else {
        return;
    };
    let generated = generated.unwrap();
    let expected = [
        "quantized.cu:29: kernel `mask_fill` gets no typed launch: parameter `mask` has type `const bool *`, which has no Rust mapping (a struct or enum maps when a header of the include dir declares it); launch it by name",
        "quantized.cu:38: kernel `differs` gets no typed launch: its parameters at sm_80 differ from those at sm_90 (quantized.cu:36), and a marker has one parameter list; give each variant its own name, or launch it by name",
        "templates/scale.cu:38: kernel `local_by_value` gets no typed launch: parameter `local` has type `Local`, which has no Rust mapping (a struct or enum maps when a header of the include dir declares it); launch it by name",
        "templates/scale.cu:42: kernel `hidden` has internal linkage (static or in an anonymous namespace), so its symbol in the image is not its name and it gets no typed launch; launch it from host code or give it external linkage",
        "templates/scale.cu:52: macro `SCALE_INST` writes explicit instantiations of a kernel template, which codegen does not read from a macro, so they get no typed launch; write them out in the source, or launch them by name",
    ];
    let text = generated.text;
    insta::assert_snapshot!("tree", text);
    let mut warnings = generated.warnings.clone();
    warnings.sort();
    assert_eq!(warnings, expected, "{:#?}", generated.warnings);
    for (marker, name) in [
        ("uneg_f32", "\"uneg_f32\""),
        ("uneg_f16", "\"uneg_f16\""),
        ("scale_float", "\"_Z5scaleIfEvPKT_PS0_S0_m\""),
        ("scale_uint32_t", "\"_Z5scaleIjEvPKT_PS0_S0_m\""),
        (
            "fixture_fill_window",
            "\"_ZN7fixture11fill_windowEPj14fixture_windowj\"",
        ),
    ] {
        assert!(
            text.contains(&format!("pub struct {marker};")),
            "{marker}:\n{text}"
        );
        assert!(
            text.contains(&format!("const NAME: &'static str = {name};")),
            "{name}"
        );
    }
    // Issue 42: `void *` and `const void *` are the ABI's untyped pointers,
    // `bool` is `bool`, fp8 the ABI's byte type, and a kernel only sm_89+
    // defines has its marker.
    for params in [
        "type Params = (*mut u8, bool);",
        "type Params = (crate::abi::ConstVoidPtr, *mut f32, i32);",
        "type Params = (*const f32, crate::abi::MutVoidPtr, i32);",
        "type Params = (*mut f32, bool, usize);",
        "type Params = (usize, crate::abi::Fp8E4M3, *mut crate::abi::Fp8E4M3);",
        "type Params = (*const f32, *mut crate::abi::Fp8E5M2, usize);",
    ] {
        assert!(text.contains(params), "no `{params}` in:\n{text}");
    }
    // The kernels left without a marker, for the audit (issue 42).
    // Only the sm_90 pass defines it: the audit expects no sm_80 code.
    assert!(
        text.contains(
            "pub static ABSENT_AT: &[(&str, &[&str])] = &[(\"cast_f32_fp8_e5m2\", &[\"sm_80\"])];"
        ),
        "{text}"
    );
    let undeclared = &text[text.find("pub static UNDECLARED").expect("UNDECLARED")..];
    for symbol in [
        "\"mask_fill\",\n",
        "\"differs\",\n",
        "\"local_by_value\",\n",
    ] {
        assert!(undeclared.contains(symbol), "UNDECLARED lacks {symbol}");
    }
    assert!(text.contains("::core::mem::size_of::<bool>() == 1,\n        \"kernel `fill_flag` takes `on` as a 1-byte bool"));
    for absent in [
        "never_defined",
        "unused",
        "host_only",
        "hidden",
        "mask_fill",
        "differs",
        "local_by_value",
        "scale_T",
        "scale_double",
    ] {
        assert!(
            !text.contains(&format!("pub struct {absent}")),
            "{absent} has a marker"
        );
    }
    assert_eq!(
        text.matches("pub struct declared_axpy;").count(),
        1,
        "a kernel a header declares and a source defines has one marker"
    );
}

/// The fingerprint lists the files read, and a signature edited in a `.cu`
/// (or in a `.cuh` it includes) makes the committed file stale, like a
/// header; a comment or a function body edited does not (issue 42).
#[test]
fn an_edited_source_is_stale_bindings() {
    let tmp = copy_tree();
    let (kernels, include) = (tmp.path(), tmp.path().join("include"));
    let Some(generated) = generate(kernels, &include) else {
        return;
    };
    let text = generated.unwrap().text;
    for listed in [
        "// kiln-codegen-source: ../kiln.toml",
        "// kiln-codegen-source: ../unary.cu",
        "// kiln-codegen-source: ../cuda_utils.cuh",
        "// kiln-codegen-source: ../templates/scale.cu",
        "// kiln-codegen-source: declared.h",
    ] {
        assert!(text.contains(listed), "no `{listed}` in the fingerprint");
    }
    assert!(
        !text.contains("kiln.h\n"),
        "kiln's own header is not an input"
    );
    assert!(!text.contains("host.cu"), "a static library is not read");
    let generated = kernels.join("bindings.rs");
    std::fs::write(&generated, &text).unwrap();
    assert_eq!(check_committed(&generated, &include, "regen"), Ok(()));
    for (file, from, to) in [
        ("cuda_utils.cuh", "acc = 1", "acc = 2"),
        (
            "cuda_utils.cuh",
            "// cuda_utils:",
            "/* edited */ // cuda_utils:",
        ),
        ("quantized.cu", "y[i] = ", "y[i] = 2.0f * "),
        ("unary.cu", "#include", "// a comment\n#include"),
    ] {
        let path = kernels.join(file);
        let before = std::fs::read_to_string(&path).unwrap();
        assert!(before.contains(from), "{file}: {from}");
        std::fs::write(&path, before.replace(from, to)).unwrap();
        assert_eq!(
            check_committed(&generated, &include, "regen"),
            Ok(()),
            "{file}: {from} -> {to}"
        );
        std::fs::write(&path, before).unwrap();
    }
    for (file, from, to) in [
        ("unary.cu", "const size_t numel", "const unsigned numel"),
        (
            "cuda_utils.cuh",
            "const size_t num_dims",
            "const unsigned num_dims",
        ),
        ("quantized.cu", "const int nb32", "const size_t nb32"),
        ("kiln.toml", "UNARY_WITH_F16", "UNARY_WITH_BF16"),
    ] {
        let path = kernels.join(file);
        let before = std::fs::read_to_string(&path).unwrap();
        std::fs::write(&path, before.replace(from, to)).unwrap();
        let err = check_committed(&generated, &include, "regen").unwrap_err();
        assert!(
            err.contains("the sources it was generated from changed"),
            "{file}: {err}"
        );
        std::fs::write(&path, before).unwrap();
    }
    std::fs::remove_file(kernels.join("cuda_utils.cuh")).unwrap();
    let err = check_committed(&generated, &include, "regen").unwrap_err();
    assert!(
        err.contains("cannot be read")
            && err.contains("cuda_utils.cuh")
            && err.ends_with("run `regen` and commit the result"),
        "{err}"
    );
}

#[test]
fn a_source_that_does_not_parse_is_one_line_naming_file_and_line() {
    let tmp = copy_tree();
    let path = tmp.path().join("unary.cu");
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(
        &path,
        text.replace(
            "UNARY_OP(double, uneg_f64, -x)",
            "UNARY_OP(double, uneg_f64, -x) int broken(",
        ),
    )
    .unwrap();
    let Some(result) = generate(tmp.path(), &tmp.path().join("include")) else {
        return;
    };
    let err = result.unwrap_err();
    assert!(!err.contains('\n'), "{err}");
    assert!(
        err.contains("[modules.unary]") && err.contains("unary.cu:24: "),
        "{err}"
    );
}

#[test]
fn two_modules_defining_one_kernel_name_is_an_error_naming_both() {
    let tmp = copy_tree();
    std::fs::write(
        tmp.path().join("again.cu"),
        "#include <stddef.h>\nextern \"C\" __global__ void uneg_f32(const size_t numel, float *out) {}\n",
    )
    .unwrap();
    let Some(result) = generate(tmp.path(), &tmp.path().join("include")) else {
        return;
    };
    let err = result.unwrap_err();
    assert!(
        err.contains("kernel `uneg_f32` is defined twice: again.cu:2 ([modules.again]) and unary.cu:22 ([modules.unary])"),
        "{err}"
    );
}

#[test]
fn a_missing_or_non_utf8_source() {
    let tmp = copy_tree();
    std::fs::remove_file(tmp.path().join("templates/scale.cu")).unwrap();
    let Some(result) = generate(tmp.path(), &tmp.path().join("include")) else {
        return;
    };
    let err = result.unwrap_err();
    assert!(
        err.contains("[modules.templates]") && err.contains("templates/scale.cu"),
        "{err}"
    );
    // Bytes that are not UTF-8 in a comment: read as nvcc reads them.
    let tmp = copy_tree();
    let path = tmp.path().join("unary.cu");
    let mut bytes = b"// caf\xe9 \xff\n".to_vec();
    bytes.extend(std::fs::read(&path).unwrap());
    std::fs::write(&path, bytes).unwrap();
    let generated = generate(tmp.path(), &tmp.path().join("include"))
        .unwrap()
        .unwrap();
    assert!(generated.text.contains("pub struct uneg_f32;"));
}

/// Every `NAME` emitted for the fixture is a kernel symbol of the image nvcc
/// compiles from the same source (`.text.<symbol>`, one section per kernel).
#[test]
fn emitted_names_are_the_symbols_nvcc_gives() {
    let nvcc = workspace_root().join("target/cuda-toolkit/cuda/bin/nvcc");
    if !nvcc.is_file() {
        assert!(
            std::env::var_os("KILN_REQUIRE_TOOLKIT").is_none_or(|v| v != "1"),
            "KILN_REQUIRE_TOOLKIT=1 but there is no nvcc at {}",
            nvcc.display()
        );
        println!("skipped: no nvcc at {}", nvcc.display());
        return;
    }
    let Some(generated) = generate(&tree(), &tree().join("include")) else {
        return;
    };
    let text = generated.unwrap().text;
    let tmp = tempfile::tempdir().unwrap();
    let mut images = Vec::new();
    for (source, defines, arch) in [
        ("unary.cu", "-DUNARY_WITH_F16", "-arch=sm_80"),
        ("templates/scale.cu", "-DX", "-arch=sm_80"),
        ("declared.cu", "-DX", "-arch=sm_80"),
        // Its fp8 cast only sm_89+ defines: in the sm_90 image alone.
        ("quantized.cu", "-DX", "-arch=sm_80"),
        ("quantized.cu", "-DX", "-arch=sm_90"),
    ] {
        let out = tmp.path().join(format!("{}.cubin", images.len()));
        let status = Command::new(&nvcc)
            .args(["-cubin", arch, "-std=c++17", defines, "-o"])
            .arg(&out)
            .arg(format!("-I{}", tree().join("include").display()))
            .arg(format!("-I{}", cuda_build::header::include_dir().display()))
            .arg(tree().join(source))
            .status()
            .unwrap();
        assert!(status.success(), "nvcc {source}");
        images.push(std::fs::read(&out).unwrap());
    }
    let names: Vec<&str> = text
        .lines()
        .filter_map(|l| l.trim().strip_prefix("const NAME: &'static str = \""))
        .map(|l| l.trim_end_matches("\";"))
        .collect();
    assert!(names.len() >= 8, "{names:?}");
    for name in names {
        let section = format!(".text.{name}\0");
        assert!(
            images.iter().any(|image| image
                .windows(section.len())
                .any(|w| w == section.as_bytes())),
            "`{name}` is no kernel of the compiled images"
        );
    }
}

/// Two kernels whose markers would share one Rust name: one line naming both.
#[test]
fn marker_names_that_collide_are_an_error_naming_both() {
    let tmp = copy_tree();
    std::fs::write(
        tmp.path().join("clash.cu"),
        "extern \"C\" __global__ void scale_float(float *out) { out[0] = 0.0f; }\n",
    )
    .unwrap();
    let Some(result) = generate(tmp.path(), &tmp.path().join("include")) else {
        return;
    };
    let err = result.unwrap_err();
    assert!(
        err.contains("kernels `scale_float` (clash.cu:1) and `scale<float>` (templates/scale.cu:15) would both be the marker `scale_float`"),
        "{err}"
    );
    assert!(!err.contains('\n'), "{err}");
}

/// Codegen runs side by side in one process (a build tool's threads): each
/// run parses with its own libclang index, and all write the same file.
#[test]
fn concurrent_runs_agree() {
    if toolkit_or_skip().is_none() {
        return;
    }
    let texts: Vec<String> = std::thread::scope(|scope| {
        let runs: Vec<_> = (0..4)
            .map(|_| {
                scope.spawn(|| {
                    generate(&tree(), &tree().join("include"))
                        .unwrap()
                        .unwrap()
                        .text
                })
            })
            .collect();
        runs.into_iter().map(|r| r.join().unwrap()).collect()
    });
    assert!(texts.windows(2).all(|w| w[0] == w[1]), "runs differ");
    assert!(texts[0].contains("pub struct scale_float;"));
}

/// An explicit instantiation codegen cannot pin to one specialization (two
/// overloads of the template): a warning naming it, no marker, no error.
#[test]
fn an_instantiation_of_an_overloaded_template_is_a_warning() {
    let tmp = copy_tree();
    std::fs::write(
        tmp.path().join("overloads.cu"),
        "#include <stddef.h>\n\
         template <typename T> __global__ void twice(T *out) { out[0] = T(0); }\n\
         template <typename T> __global__ void twice(T *out, size_t n) { out[n] = T(0); }\n\
         template __global__ void twice<float>(float *);\n",
    )
    .unwrap();
    let Some(result) = generate(tmp.path(), &tmp.path().join("include")) else {
        return;
    };
    let generated = result.unwrap();
    assert!(
        generated.warnings.iter().any(|w| w
            .starts_with("overloads.cu:4: explicit instantiation `twice<float>`")
            && w.ends_with("could not be resolved, so it gets no typed launch; launch it by name")),
        "{:#?}",
        generated.warnings
    );
    assert!(!generated.text.contains("pub struct twice_float"));
}

/// Kernels behind `#if __CUDA_ARCH__ >= N` (candle guards its `__half` and
/// fp8 families so) are read as the device pass of each arch of the module
/// sees them: declared when any arch builds them (issue 42: `from_90` of an
/// sm_80,sm_90 module vanished, read at sm_80 alone); an `a` arch gets
/// nvcc's feature macro (a source that `#error`s off sm_90a reads), and
/// `native` names no arch (only the unguarded kernels).
#[test]
fn arch_guarded_kernels_get_markers_for_every_arch_that_builds_them() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    std::fs::create_dir(dir.join("include")).unwrap();
    let guarded = "#include <stddef.h>\n\
        extern \"C\" __global__ void plain(size_t n) {}\n\
        #if __CUDA_ARCH__ >= 530\nextern \"C\" __global__ void from_53(size_t n) {}\n#endif\n\
        #if __CUDA_ARCH__ >= 900\nextern \"C\" __global__ void from_90(size_t n) {}\n#endif\n";
    std::fs::write(dir.join("guarded.cu"), guarded).unwrap();
    std::fs::write(
        dir.join("hopper.cu"),
        "#include <stddef.h>\n#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)\n\
         #error \"sm_90a only\"\n#endif\nextern \"C\" __global__ void hopper_only(size_t n) {}\n",
    )
    .unwrap();
    let config = |guarded_archs: &str| {
        format!(
            "archs = \"sm_80,sm_90\"\n[modules.guarded]\nsources = [\"guarded.cu\"]\n\
             archs = \"{guarded_archs}\"\n[modules.hopper]\nsources = [\"hopper.cu\"]\narchs = \"sm_90a\"\n"
        )
    };
    let markers = |text: &str| {
        ["plain", "from_53", "from_90", "hopper_only"]
            .into_iter()
            .filter(|k| text.contains(&format!("pub struct {k};")))
            .collect::<Vec<_>>()
    };
    for (archs, want) in [
        (
            "sm_90,sm_80",
            vec!["plain", "from_53", "from_90", "hopper_only"],
        ),
        ("sm_90", vec!["plain", "from_53", "from_90", "hopper_only"]),
        ("native", vec!["plain", "hopper_only"]),
    ] {
        std::fs::write(dir.join("kiln.toml"), config(archs)).unwrap();
        let Some(result) = generate(dir, &dir.join("include")) else {
            return;
        };
        let generated = result.unwrap_or_else(|e| panic!("{archs}: {e}"));
        assert_eq!(markers(&generated.text), want, "{archs}");
    }
}
