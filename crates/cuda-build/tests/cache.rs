//! The kernel cache end to end (`KILN_CACHE_DIR` in each fixture's own
//! dir): after `cargo clean` a build with a warm cache runs no nvcc step,
//! the release profile reuses what the dev profile compiled, a header whose
//! content changed misses exactly the sources that include it, and another
//! toolkit version misses everything. With the fake nvcc (every module
//! shape: `rdc` in both link modes, static libraries) and, when
//! `cargo xtask toolkit install` has put one in `target/cuda-toolkit`, with
//! the real nvcc behind a logging `NVCC` wrapper.
#![cfg(unix)]

mod support;

use std::path::Path;

use support::{
    assert_fatbin, assert_success, compiles, installed_nvcc, stderr, write_script, Fixture,
    COMMON_CUH, KERNEL_SOURCES, MODULE_SOURCES, SHARED_H,
};

/// Every nvcc step of the modules fixture's first build.
const MODULE_STEPS: usize = 11;

/// The environment that turns the cache on, its store under the fixture.
fn cache_env(fixture: &Fixture) -> Vec<(&'static str, String)> {
    vec![
        ("KILN_CACHE", "on".to_string()),
        (
            "KILN_CACHE_DIR",
            fixture.root_path("cache").display().to_string(),
        ),
    ]
}

/// A build that must succeed: the nvcc steps it ran, and the cache's line
/// from the manifest (the last build script run's).
#[track_caller]
fn build(
    fixture: &Fixture,
    args: &[&str],
    env: &[(&'static str, String)],
    what: &str,
) -> (Vec<String>, Vec<String>) {
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let output = fixture.cargo_build_with(args, &env);
    assert_success(&output, what);
    assert!(
        !stderr(&output).contains("kernel cache: "),
        "the cache's report is no warning: Cargo would replay it on every build"
    );
    let report = fixture.manifest().cache.map(|r| r.to_string());
    (fixture.nvcc_calls(), report.into_iter().collect())
}

fn served(hits: usize, steps: usize, fixture: &Fixture) -> Vec<String> {
    vec![format!(
        "kernel cache: {hits} of {steps} nvcc steps served from {}",
        fixture.root_path("cache").display()
    )]
}

#[test]
fn a_warm_cache_serves_every_step_of_every_module_shape() {
    let fixture = Fixture::with_sources("cache-modules", "cachemods", MODULE_SOURCES);
    let env = cache_env(&fixture);

    let (calls, line) = build(&fixture, &[], &env, "cold build");
    assert_eq!(calls.len(), MODULE_STEPS, "{calls:#?}");
    assert_eq!(line, served(0, MODULE_STEPS, &fixture));

    fixture.clean();
    let (calls, line) = build(&fixture, &[], &env, "after cargo clean");
    assert_eq!(calls, compiles(&[]), "no nvcc step after cargo clean");
    assert_eq!(line, served(MODULE_STEPS, MODULE_STEPS, &fixture));
    let manifest = fixture.manifest();
    assert!(manifest
        .modules
        .iter()
        .all(|m| !m.compiled && m.size_bytes > 0));
    let host = fixture.out_dir().join("libfixture_host.a");
    assert!(host.is_file(), "the static library is restored");

    let (calls, _) = build(&fixture, &["--release"], &env, "release profile");
    assert_eq!(
        calls,
        compiles(&[]),
        "the release profile shares the entries"
    );

    let (calls, _) = build(&fixture, &[], &env, "no-op build");
    assert_eq!(calls, compiles(&[]));

    // The objects of caller.cu come out the same (the fake nvcc writes no
    // header text into them), so the device link is served from the cache.
    let edited = format!("{}// edited\n", MODULE_SOURCES[1].1);
    fixture.write(COMMON_CUH, &edited);
    let (calls, _) = build(&fixture, &[], &env, "after editing common.cuh");
    assert_eq!(
        calls,
        ["compile caller.cu", "compile single.cu"],
        "exactly common.cuh's includers"
    );

    fixture.clean();
    let mut other = env.clone();
    other.push(("FAKE_NVCC_VERSION", "13.0.99".to_string()));
    let (calls, line) = build(&fixture, &[], &other, "another toolkit version");
    assert_eq!(calls.len(), MODULE_STEPS, "every step misses: {calls:#?}");
    assert_eq!(line, served(0, MODULE_STEPS, &fixture));
}

#[test]
fn the_cache_off_compiles_as_before() {
    let fixture = Fixture::with_sources("cache-off", "cacheoff", KERNEL_SOURCES);
    let mut env = cache_env(&fixture);
    let (calls, _) = build(&fixture, &[], &env, "storing");
    assert_eq!(calls, compiles(&["a", "b", "c"]));
    fixture.clean();
    env[0].1 = "off".to_string();
    let (calls, line) = build(&fixture, &[], &env, "KILN_CACHE=off");
    assert_eq!(calls, compiles(&["a", "b", "c"]));
    assert_eq!(line, Vec::<String>::new(), "no cache report");
}

#[test]
fn real_nvcc_warm_cache_compiles_nothing_after_cargo_clean() {
    let Some(nvcc) = installed_nvcc() else {
        return;
    };
    let fixture = Fixture::with_real_nvcc("cache-real", "cachereal", KERNEL_SOURCES, &nvcc);
    let mut env = cache_env(&fixture);
    env.push(("FIXTURE_CUDA_ARCHS", "sm_80".to_string()));

    let (calls, line) = build(&fixture, &[], &env, "cold build");
    assert_eq!(calls, compiles(&["a", "b", "c"]));
    assert_eq!(line, served(0, 3, &fixture));

    fixture.clean();
    let (calls, line) = build(&fixture, &[], &env, "after cargo clean");
    assert_eq!(calls, compiles(&[]), "0 nvcc compiles");
    assert_eq!(line, served(3, 3, &fixture));
    for module in ["a", "b", "c"] {
        assert_fatbin(&fixture.out_dir().join(format!("{module}.fatbin")));
    }

    let edited = format!("{}// edited\n", KERNEL_SOURCES[0].1);
    assert!(KERNEL_SOURCES[0].0 == SHARED_H);
    fixture.write(SHARED_H, &edited);
    let (calls, _) = build(&fixture, &[], &env, "after editing shared.h");
    assert_eq!(calls, compiles(&["a", "b"]), "exactly shared.h's includers");

    // The same nvcc reporting another version, as another toolkit would.
    let wrapper = fixture.root_path("elsewhere/other-version-nvcc");
    write_script(
        &wrapper,
        &format!(
            "#!/usr/bin/env bash\nif [ \"${{1-}}\" = --version ]; then {} --version | sed 's/V13\\.0\\.[0-9]*/V13.0.999/'; exit; fi\nexec {} \"$@\"\n",
            quote(fixture.nvcc()),
            quote(fixture.nvcc())
        ),
    );
    fixture.clean();
    let wrapper = wrapper.display().to_string();
    env.push(("NVCC", wrapper));
    let (calls, line) = build(&fixture, &[], &env, "another toolkit version");
    assert_eq!(calls, compiles(&["a", "b", "c"]), "every source misses");
    assert_eq!(line, served(0, 3, &fixture));
    assert_eq!(
        fixture.manifest().toolkit.map(|t| t.version),
        Some("13.0.999".to_string())
    );
}

fn quote(path: &Path) -> String {
    shlex::try_quote(&path.display().to_string())
        .expect("a quotable path")
        .into_owned()
}
