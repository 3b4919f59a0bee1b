//! Codegen on inputs a careless or hostile user writes (issue 41): an
//! include of a FIFO or a device, a macro that expands without end, a
//! syntax error in the user's header, a source under a folder whose name
//! holds a `"`. Each ends in one error line naming the user's file, never a
//! hang or the host's memory.
//!
//! Needs libclang and the CUDA headers as `codegen_fixtures` does (skipped
//! without them, a failure under `KILN_REQUIRE_TOOLKIT=1`).
#![cfg(feature = "codegen")]

mod codegen_support;

use std::path::Path;

use codegen_support::toolkit_or_skip;
use cuda_build::codegen::{Codegen, Generated};

/// Codegen over the headers of `include` (and the sources of `kernels`).
fn generate(include: &Path, kernels: Option<&Path>) -> Option<Result<Generated, String>> {
    let root = toolkit_or_skip()?;
    let mut codegen = Codegen::new(include)
        .include_dir(cuda_build::header::include_dir())
        .toolkit(root);
    if let Some(dir) = kernels {
        codegen = codegen.sources(dir);
    }
    Some(codegen.generate().map_err(|e| e.to_string()))
}

fn header(dir: &Path, name: &str, text: &str) {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join(name), text).unwrap();
}

/// A FIFO at `path` (no writer ever opens it).
fn mkfifo(path: &Path) {
    let made = std::process::Command::new("mkfifo").arg(path).status();
    assert!(made.unwrap().success(), "mkfifo {}", path.display());
}

/// A kernels folder of one module, `k`, whose source `k.cu` is `text`.
fn one_module(kernels: &Path, text: &str) {
    header(kernels, "kiln.toml", "[modules.k]\nsources = [\"k.cu\"]\n");
    header(kernels, "k.cu", text);
}

/// The regression: codegen blocked for ever opening a FIFO a header
/// includes (and `/dev/stdin`).
#[cfg(unix)]
#[test]
fn an_include_of_a_fifo_is_refused_naming_it() {
    let tmp = tempfile::tempdir().unwrap();
    let include = tmp.path().join("include");
    header(
        &include,
        "k.h",
        "#include \"kiln.h\"\n#include \"../pipe.h\"\nKILN_KERNEL(k, float *x);\n",
    );
    let fifo = tmp.path().join("pipe.h");
    mkfifo(&fifo);
    let Some(result) = generate(&include, None) else {
        return;
    };
    let err = result.unwrap_err();
    assert!(
        err.starts_with(&format!(
            "codegen: {}/../pipe.h (included from {}:2) is a FIFO;",
            include.display(),
            include.join("k.h").display()
        )),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1, "{err}");
}

/// The same for a `.cu` source read with `sources` (its include of a FIFO),
/// and a header's include of `/dev/stdin`.
#[cfg(unix)]
#[test]
fn a_source_including_a_fifo_and_a_header_including_stdin_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let kernels = tmp.path().join("kernels");
    one_module(
        &kernels,
        "#include \"pipe.cuh\"\nextern \"C\" __global__ void k(float *x) {}\n",
    );
    let fifo = kernels.join("pipe.cuh");
    mkfifo(&fifo);
    let Some(result) = generate(&kernels, Some(&kernels)) else {
        return;
    };
    let err = result.unwrap_err();
    assert_eq!(
        err,
        "codegen: pipe.cuh (included from k.cu:1) is a FIFO; codegen reads only regular files of at most 16 MiB: include the header itself"
    );
    let include = tmp.path().join("include");
    header(&include, "k.h", "#include \"/dev/stdin\"\n");
    if std::fs::metadata("/dev/stdin").is_ok_and(|m| !m.is_file()) {
        let err = generate(&include, None).unwrap().unwrap_err();
        assert!(
            err.starts_with("codegen: /dev/stdin (included from "),
            "{err}"
        );
    }
}

/// The regression: a macro that doubles its argument forty times took the
/// host's memory (libclang has no bound of its own).
#[test]
fn a_macro_bomb_ends_at_the_memory_bound() {
    let tmp = tempfile::tempdir().unwrap();
    let bomb = (0..40).fold("1".to_string(), |inner, _| format!("F({inner})"));
    header(
        tmp.path(),
        "bomb.h",
        &format!("#define F(x) (x+x)\nstatic const int bomb = {bomb};\n"),
    );
    let Some(result) = generate(tmp.path(), None) else {
        return;
    };
    let err = result.unwrap_err();
    assert!(
        err.starts_with("codegen: libclang ran out of its 4 GiB memory bound (or crashed) parsing the headers of "),
        "{err}"
    );
}

/// The regression: a syntax error in the user's header was reported as
/// bindgen's failure under advice to install libclang.
#[test]
fn a_syntax_error_is_reported_at_its_line() {
    let tmp = tempfile::tempdir().unwrap();
    header(
        tmp.path(),
        "broken.h",
        "#include \"kiln.h\"\n\nKILN_KERNEL(k, flaot *x);\n",
    );
    let Some(result) = generate(tmp.path(), None) else {
        return;
    };
    let err = result.unwrap_err();
    assert_eq!(
        err,
        format!(
            "codegen: {}:3: unknown type name 'flaot'",
            tmp.path().join("broken.h").display()
        )
    );
}

/// The regression: a source under a folder named `we"ird` failed in the
/// file codegen wrote around it (`kiln_codegen_source.cu`).
#[test]
fn a_source_under_a_folder_with_a_quote_in_its_name_is_read() {
    let tmp = tempfile::tempdir().unwrap();
    let kernels = tmp.path().join("we\"ird");
    one_module(
        &kernels,
        "extern \"C\" __global__ void weird_kernel(float *x) {}\n",
    );
    let Some(result) = generate(&kernels, Some(&kernels)) else {
        return;
    };
    let generated = result.unwrap();
    assert!(
        generated.text.contains("pub struct weird_kernel;"),
        "{}",
        generated.text
    );
}
