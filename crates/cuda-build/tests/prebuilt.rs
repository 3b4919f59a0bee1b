//! Prebuilt kernels end to end: the modules fixture (every module shape,
//! static libraries too) is built with the fake nvcc, its images exported
//! with `cuda_build::prebuilt::export` into `kernels-prebuilt/`, and then
//! built where no toolkit is found: a matching folder is embedded with one
//! line and `cfg(cuda_enabled)`; a stale one (a header edited, a module
//! added) is refused with one warning naming the file, and the build is
//! CPU-only; a missing one changes nothing; `FIXTURE_CUDA=off` ignores it.
#![cfg(unix)]

mod support;

use std::process::Output;

use support::{
    assert_failure, assert_success, build_script_errors, build_script_warnings, compiles, Fixture,
    COMMON_CUH, MODULE_SOURCES,
};

/// No toolkit by any route: `NVCC` unset (the fixture's builds take
/// `CUDA_PATH`, `CUDA_HOME`, `CUDA_ROOT` and nvcc's `PATH` dirs away), and
/// the system dirs skipped with `FIXTURE_CUDA=off` where this machine has
/// one, which the test then cannot run.
fn no_toolkit(fixture: &Fixture) -> Option<Vec<(&'static str, &'static str)>> {
    let env: Vec<(String, String)> = fixture.discovery_env(&[("NVCC", "")]);
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (&**k, &**v)).collect();
    if cuda_build::discover(&env[..], &[]).toolkit.is_some() {
        eprintln!("skipped: this machine has a CUDA toolkit in a system dir");
        return None;
    }
    Some(vec![("NVCC", "")])
}

fn build(fixture: &Fixture, env: &[(&str, &str)], what: &str) -> Output {
    let output = fixture.cargo_build(env);
    assert_success(&output, what);
    assert_eq!(fixture.nvcc_calls(), compiles(&[]), "{what}: no nvcc");
    output
}

#[test]
fn prebuilt_kernels_are_embedded_only_while_they_match_the_sources() {
    let fixture = Fixture::with_sources("prebuilt", "prebuilt", MODULE_SOURCES);
    let output = fixture.cargo_build(&[]);
    assert_success(&output, "the toolkit build");
    fixture.nvcc_calls();
    let manifest_path = fixture
        .out_dir()
        .join(cuda_build::manifest::file_name("FIXTURE"));
    let dir = fixture.path("kernels-prebuilt");
    let prebuilt = cuda_build::prebuilt::export(&manifest_path, &dir).unwrap();
    assert_eq!(prebuilt.summary(), "CUDA 13.0, sm_80 sm_90 + compute_90");
    let written = cuda_build::prebuilt::read(&dir).unwrap();
    assert_eq!(written, prebuilt);
    let names: Vec<String> = prebuilt
        .inputs
        .iter()
        .map(|f| f.path.display().to_string())
        .collect();
    assert!(
        names.contains(&"kernels/kiln.toml".to_string())
            && names.contains(&COMMON_CUH.to_string())
            && names.contains(&"kernels/pair/caller.cu".to_string()),
        "inputs by package-relative name: {names:?}"
    );
    for file in ["pair.fatbin", "libfixture_host.a", "libcudart_static.a"] {
        assert!(dir.join(file).is_file(), "{file} in the folder");
    }
    // An existing folder is never removed (issue 26): a second export
    // into it is refused and leaves it as it was.
    let again = cuda_build::prebuilt::export(&manifest_path, &dir)
        .unwrap_err()
        .to_string();
    assert!(again.contains("already exists and is not empty"), "{again}");
    assert_eq!(cuda_build::prebuilt::read(&dir).unwrap(), prebuilt);

    let Some(env) = no_toolkit(&fixture) else {
        return;
    };
    let mut required = env.clone();
    required.push(("FIXTURE_REQUIRE_CUDA", "1"));
    let output = build(
        &fixture,
        &required,
        "matching, no toolkit, GPU code required",
    );
    assert_eq!(
        build_script_warnings(&output),
        ["prebuilt kernels: CUDA 13.0, sm_80 sm_90 + compute_90 (from kernels-prebuilt; no CUDA toolkit found)"]
    );
    let directives = fixture.build_script_output();
    assert!(
        directives.contains("cargo::rustc-cfg=cuda_enabled\n"),
        "{directives}"
    );
    assert!(
        directives.contains("cargo::rustc-cfg=cuda_ge_13_0\n"),
        "{directives}"
    );
    assert!(directives.contains("cargo::rustc-link-lib=static=fixture_host\n"));
    let generated = fixture.generated_modules();
    let pair = fixture.out_dir().join("pair.fatbin");
    assert!(
        generated.contains(&format!("include_bytes!({:?})", pair.display().to_string())),
        "{generated}"
    );
    assert!(
        generated.contains("kernels: &[\"pair_kernel\"]"),
        "{generated}"
    );
    assert!(
        generated.contains(
            "IMAGES_FROM: &str = \"prebuilt kernels-prebuilt: CUDA 13.0, sm_80 sm_90 + compute_90\""
        ),
        "{generated}"
    );
    let manifest = fixture.manifest();
    assert!(manifest.cuda_enabled && manifest.toolkit.is_none());

    let mut off = env.clone();
    off.push(("FIXTURE_CUDA", "off"));
    build(&fixture, &off, "FIXTURE_CUDA=off");
    assert!(fixture
        .build_script_output()
        .contains("cargo::rustc-cfg=cpu_only\n"));

    fixture.write(COMMON_CUH, &format!("{}// edited\n", MODULE_SOURCES[1].1));
    let output = build(&fixture, &env, "a header edited since");
    let warnings = build_script_warnings(&output);
    assert_eq!(warnings.len(), 1, "{warnings:#?}");
    assert!(
        warnings[0].starts_with(&format!(
            "prebuilt kernels refused ({COMMON_CUH} changed since they were built) and no CUDA toolkit found"
        )) && warnings[0].contains("building CPU-only"),
        "{}",
        warnings[0]
    );
    assert!(fixture
        .build_script_output()
        .contains("cargo::rustc-cfg=cpu_only\n"));
    assert!(!fixture.generated_modules().contains("include_bytes!"));

    let output = fixture.cargo_build(&required);
    assert_failure(&output, "stale, GPU code required");
    let errors = build_script_errors(&output);
    assert!(
        errors.len() == 1 && errors[0].contains(&format!("are stale: {COMMON_CUH} changed")),
        "{errors:#?}"
    );
    fixture.nvcc_calls();

    fixture.restore_kernels();
    fixture.write(
        "kernels/extra.cu",
        "extern \"C\" __global__ void extra(float *x) {}\n",
    );
    let output = build(&fixture, &env, "a module added since");
    assert!(
        build_script_warnings(&output)[0].starts_with(
            "prebuilt kernels refused (kernels/extra.cu (module `extra`) is not among them)"
        ),
        "{:#?}",
        build_script_warnings(&output)
    );

    fixture.remove("kernels/extra.cu");
    std::fs::remove_dir_all(&dir).unwrap();
    fixture.touch("kernels");
    let output = build(&fixture, &env, "no prebuilt folder");
    let warnings = build_script_warnings(&output);
    assert!(
        warnings.len() == 1 && warnings[0].starts_with("no CUDA toolkit found"),
        "{warnings:#?}"
    );
}

#[test]
fn exporting_a_build_without_a_toolkit_is_refused() {
    let fixture = Fixture::with_sources("prebuilt-cpu", "prebuiltcpu", MODULE_SOURCES);
    let output = fixture.cargo_build(&[("FIXTURE_CUDA", "off")]);
    assert_success(&output, "CPU-only build");
    let manifest_path = fixture
        .out_dir()
        .join(cuda_build::manifest::file_name("FIXTURE"));
    let error = cuda_build::prebuilt::export(&manifest_path, &fixture.path("kernels-prebuilt"))
        .unwrap_err()
        .to_string();
    assert!(
        error.ends_with(
            "this build used no CUDA toolkit; build with one (set CUDA_PATH) to write prebuilt kernels"
        ),
        "{error}"
    );
    assert!(!fixture.path("kernels-prebuilt").exists());
}
