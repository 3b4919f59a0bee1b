//! Nothing a build does is silent: nvcc's warnings reach `cargo build`'s
//! output as Cargo warnings naming the module (not only `OUT_DIR/*.log`),
//! and a `.cu` in a subfolder that no module builds is named with the
//! `kiln.toml` entry that would build it. The real nvcc where installed.
#![cfg(unix)]

mod support;

use support::{assert_success, installed_nvcc, stderr, Fixture};

/// A kernel with a variable nvcc warns about (#177-D, declared but never
/// referenced), and a vendored kernel no module claims.
const SOURCES: &[(&str, &str)] = &[
    (
        "kernels/warn.cu",
        "extern \"C\" __global__ void warn(float *x) { int unused; x[0] = 1.0f; }\n",
    ),
    (
        "kernels/vendor/left_out.cu",
        "extern \"C\" __global__ void left_out(float *x) { x[0] = 2.0f; }\n",
    ),
];

#[test]
fn nvcc_warnings_and_unclaimed_sources_reach_cargo_build() {
    let Some(nvcc) = installed_nvcc() else {
        return;
    };
    let fixture = Fixture::with_real_nvcc("warnings-real", "warnreal", SOURCES, &nvcc);
    let env = [("FIXTURE_CUDA_ARCHS", "sm_80"), ("KILN_CACHE", "off")];
    let output = fixture.cargo_build(&env);
    assert_success(&output, "a build with a warning");
    let text = stderr(&output);
    let warned: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("nvcc on module `warn`"))
        .collect();
    assert!(
        warned
            .iter()
            .any(|l| l.contains("warning #177-D") && l.contains("unused")),
        "nvcc's warning as a Cargo warning:\n{text}"
    );
    assert!(
        text.contains("vendor/left_out.cu is built by no module")
            && text.contains("[modules.left_out] sources = [\"vendor/left_out.cu\"]"),
        "the unclaimed source named with its entry:\n{text}"
    );
    // The manifest keeps them, for tools (`cargo kiln build --json`).
    let manifest = fixture.manifest();
    let warn = manifest.modules.iter().find(|m| m.name == "warn").unwrap();
    assert!(!warn.warnings.is_empty(), "{:?}", warn.warnings);
}
