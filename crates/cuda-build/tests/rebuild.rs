//! The kernel build rebuilds exactly what changed: a fixture crate whose build
//! script runs `KernelBuild` is built with `cargo build`, and each test checks
//! which modules nvcc compiled (from a log) and what Cargo printed.
//!
//! Most tests use a fake nvcc (`support/fake_nvcc.sh`), so they run without a
//! CUDA toolkit. They share one fixture, built from scratch once per run (the
//! first build compiles cuda-build and its dependencies); each test takes it in
//! turn and first brings it up to date, so they hold in any order. The last
//! test repeats the core scenarios with the real nvcc when
//! `cargo xtask toolkit install` has put one in `target/cuda-toolkit`.
#![cfg(unix)]

mod support;

use std::process::Output;
use std::sync::{Mutex, MutexGuard, OnceLock, PoisonError};

use support::{
    assert_failure, assert_fatbin, assert_success, build_script_errors, build_script_warnings,
    compiles, installed_nvcc, stderr, Fixture, C_ONLY_H, KERNEL_SOURCES, SHARED_H,
};

/// The fake-nvcc fixture and what its first build did.
struct Shared {
    fixture: Fixture,
    first_build: Output,
    first_calls: Vec<String>,
}

/// The shared fake-nvcc fixture, locked for the calling test.
fn shared() -> MutexGuard<'static, Shared> {
    static SHARED: OnceLock<Mutex<Shared>> = OnceLock::new();
    SHARED
        .get_or_init(|| {
            let fixture = Fixture::new("fake");
            let first_build = fixture.cargo_build(&[]);
            let first_calls = fixture.nvcc_calls();
            Mutex::new(Shared {
                fixture,
                first_build,
                first_calls,
            })
        })
        .lock()
        // A failed test leaves the fixture usable: the next one restores it.
        .unwrap_or_else(PoisonError::into_inner)
}

/// Restores the kernels, builds with the default environment and forgets the
/// compiles that took: the state every scenario starts from.
fn up_to_date(fixture: &Fixture) {
    fixture.restore_kernels();
    let output = fixture.cargo_build(&[]);
    assert_success(&output, "bringing the fixture up to date");
    fixture.nvcc_calls();
}

/// A build that must succeed; returns the compiles it ran.
#[track_caller]
fn build_ok(fixture: &Fixture, env: &[(&str, &str)], what: &str) -> (Output, Vec<String>) {
    let output = fixture.cargo_build(env);
    assert_success(&output, what);
    (output, fixture.nvcc_calls())
}

/// The environment in which discovery finds no toolkit: `NVCC` unset, or
/// `FIXTURE_CUDA=off` where this machine has a toolkit in a system dir.
fn no_toolkit_env(fixture: &Fixture) -> &'static [(&'static str, &'static str)] {
    let unset: &'static [(&str, &str)] = &[("NVCC", "")];
    let env = fixture.discovery_env(unset);
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (&**k, &**v)).collect();
    match cuda_build::discover(&env[..], &[]).toolkit {
        None => unset,
        Some(_) => &[("NVCC", ""), ("FIXTURE_CUDA", "off")],
    }
}

#[test]
fn first_build_compiles_every_module_once() {
    let shared = shared();
    let fixture = &shared.fixture;
    assert_success(&shared.first_build, "first build");
    assert_eq!(shared.first_calls, compiles(&["a", "b", "c"]));
    up_to_date(fixture);

    let manifest = fixture.manifest();
    assert!(manifest.cuda_enabled);
    assert_eq!(manifest.sass, ["sm_80", "sm_90"], "the default arch spec");
    let deps = |module: &str| -> Vec<String> {
        let entry = manifest.modules.iter().find(|m| m.name == module);
        let entry = entry.unwrap_or_else(|| panic!("module {module} is in the manifest"));
        entry.deps.iter().map(|d| d.display().to_string()).collect()
    };
    let header = |relative: &str| fixture.path(relative).display().to_string();
    assert_eq!(deps("a"), [header(SHARED_H)], "a.cu's depfile");
    assert_eq!(deps("b"), [header(SHARED_H)], "b.cu's depfile");
    assert_eq!(deps("c"), [header(C_ONLY_H)], "c.cu's depfile");

    let generated = fixture.generated_modules();
    for (module, kernel) in [("a", "a_kernel"), ("b", "b_kernel"), ("c", "c_kernel")] {
        let fatbin = fixture.out_dir().join(format!("{module}.fatbin"));
        assert!(fatbin.is_file(), "{} was written", fatbin.display());
        assert!(
            generated.contains(&format!(
                "include_bytes!({:?})",
                fatbin.display().to_string()
            )),
            "{module} is embedded:\n{generated}"
        );
        assert!(
            generated.contains(&format!("kernels: &[\"{kernel}\"]")),
            "{module}'s kernel comes from ptxas's report:\n{generated}"
        );
    }
    let directives = fixture.build_script_output();
    assert!(directives.contains("cargo::rustc-cfg=cuda_enabled\n"));
    assert!(!directives.contains("cargo::rustc-cfg=cpu_only"));
}

/// Also the regression test for a missing `kernels/kiln.toml` (the fixture has
/// none) being watched: Cargo reran the build script on every build.
#[test]
fn noop_build_runs_no_nvcc() {
    let shared = shared();
    let fixture = &shared.fixture;
    up_to_date(fixture);
    let script_ran_at = fixture.build_script_ran_at();

    let (output, calls) = build_ok(fixture, &[], "no-op build");
    assert_eq!(calls, compiles(&[]));
    assert!(
        stderr(&output).contains("Fresh fixture v0.1.0"),
        "Cargo finds the fixture fresh:\n{}",
        stderr(&output)
    );
    assert_eq!(
        fixture.build_script_ran_at(),
        script_ran_at,
        "the build script did not run"
    );
}

#[test]
fn touching_one_cu_recompiles_only_that_module() {
    let shared = shared();
    let fixture = &shared.fixture;
    up_to_date(fixture);

    fixture.touch("kernels/b.cu");
    let (_, calls) = build_ok(fixture, &[], "build after touching b.cu");
    assert_eq!(calls, compiles(&["b"]), "nvcc ran for b only");
    assert_eq!(fixture.compiled_per_manifest(), ["b"]);

    let (_, calls) = build_ok(fixture, &[], "build after that");
    assert_eq!(
        calls,
        compiles(&[]),
        "the touch was taken into account once"
    );
}

#[test]
fn touching_a_header_recompiles_exactly_its_includers() {
    let shared = shared();
    let fixture = &shared.fixture;
    up_to_date(fixture);

    fixture.touch(SHARED_H);
    let (_, calls) = build_ok(fixture, &[], "build after touching shared.h");
    assert_eq!(
        calls,
        compiles(&["a", "b"]),
        "shared.h is included by a and b"
    );
    assert_eq!(fixture.compiled_per_manifest(), ["a", "b"]);

    fixture.touch(C_ONLY_H);
    let (_, calls) = build_ok(fixture, &[], "build after touching c_only.h");
    assert_eq!(calls, compiles(&["c"]), "c_only.h is included by c only");

    let (_, calls) = build_ok(fixture, &[], "build after that");
    assert_eq!(calls, compiles(&[]));
}

#[test]
fn touching_rust_source_runs_no_nvcc() {
    let shared = shared();
    let fixture = &shared.fixture;
    up_to_date(fixture);
    let script_ran_at = fixture.build_script_ran_at();

    fixture.touch("src/lib.rs");
    let (output, calls) = build_ok(fixture, &[], "build after touching lib.rs");
    assert_eq!(calls, compiles(&[]));
    assert!(
        stderr(&output).contains("--crate-name fixture --edition=2021 src/lib.rs"),
        "Cargo recompiled the fixture's Rust:\n{}",
        stderr(&output)
    );
    assert_eq!(
        fixture.build_script_ran_at(),
        script_ran_at,
        "the build script did not run: no rerun-if-changed covers src/"
    );
}

#[test]
fn changing_the_arch_env_recompiles_everything() {
    let shared = shared();
    let fixture = &shared.fixture;
    up_to_date(fixture);
    let sm_86 = [("FIXTURE_CUDA_ARCHS", "sm_86")];

    let (_, calls) = build_ok(fixture, &sm_86, "build with FIXTURE_CUDA_ARCHS=sm_86");
    assert_eq!(calls, compiles(&["a", "b", "c"]));
    let manifest = fixture.manifest();
    assert_eq!(
        (manifest.arch_origin.as_str(), manifest.sass, manifest.ptx),
        (
            "FIXTURE_CUDA_ARCHS",
            vec!["sm_86".into()],
            vec!["compute_86".into()]
        )
    );
    assert_eq!(
        fixture.generated_modules().matches("sass: &[86],").count(),
        3,
        "every module is generated for sm_86"
    );

    let (_, calls) = build_ok(fixture, &sm_86, "the same env again");
    assert_eq!(calls, compiles(&[]), "nothing changed since");

    let (_, calls) = build_ok(fixture, &[], "back to the config's archs");
    assert_eq!(
        calls,
        compiles(&["a", "b", "c"]),
        "the outputs hold sm_86 now, so every module is compiled again"
    );
}

#[test]
fn creating_and_removing_the_config_file_recompiles_everything() {
    let shared = shared();
    let fixture = &shared.fixture;
    up_to_date(fixture);
    let config = "kernels/kiln.toml";

    fixture.write(config, "nvcc-flags = [\"-O3\"]\n");
    let (_, calls) = build_ok(fixture, &[], "build after creating kiln.toml");
    assert_eq!(calls, compiles(&["a", "b", "c"]), "its flags are new");
    assert!(fixture.build_script_output().contains(&format!(
        "cargo::rerun-if-changed={}\n",
        fixture.path(config).display()
    )));

    let (_, calls) = build_ok(fixture, &[], "build after that");
    assert_eq!(calls, compiles(&[]));

    fixture.remove(config);
    let (_, calls) = build_ok(fixture, &[], "build after removing kiln.toml");
    assert_eq!(calls, compiles(&["a", "b", "c"]), "its flags are gone");
}

#[test]
fn no_toolkit_builds_cpu_only_with_exactly_one_warning() {
    let shared = shared();
    let fixture = &shared.fixture;
    up_to_date(fixture);

    let switched_off: &[(&str, &str)] = &[("FIXTURE_CUDA", "off")];
    for env in [switched_off, no_toolkit_env(fixture)] {
        let (output, calls) = build_ok(fixture, env, &format!("CPU-only build with {env:?}"));
        assert_eq!(calls, compiles(&[]), "{env:?}");
        let warnings = build_script_warnings(&output);
        assert_eq!(warnings.len(), 1, "{env:?}: {warnings:#?}");
        assert!(
            warnings[0].starts_with("no CUDA toolkit found")
                && warnings[0].contains("building CPU-only")
                && warnings[0].contains("install the CUDA toolkit or set CUDA_PATH to its root"),
            "{env:?}: {}",
            warnings[0]
        );
        let directives = fixture.build_script_output();
        assert!(
            directives.contains("cargo::rustc-cfg=cpu_only\n"),
            "{env:?}"
        );
        assert!(
            !directives.contains("cargo::rustc-cfg=cuda_enabled"),
            "{env:?}"
        );
        let generated = fixture.generated_modules();
        assert_eq!(generated.matches("image: &[],").count(), 3, "{generated}");
        assert!(!generated.contains("include_bytes!"), "{generated}");
        assert!(!fixture.manifest().cuda_enabled);
    }

    let (output, calls) = build_ok(fixture, &[], "the toolkit back");
    assert_eq!(calls, compiles(&[]), "the outputs from before are reused");
    assert_eq!(build_script_warnings(&output), Vec::<String>::new());
    assert!(fixture.generated_modules().contains("include_bytes!"));
}

#[test]
fn require_cuda_without_toolkit_fails_with_one_line() {
    let shared = shared();
    let fixture = &shared.fixture;
    up_to_date(fixture);

    let mut env = no_toolkit_env(fixture).to_vec();
    env.push(("FIXTURE_REQUIRE_CUDA", "1"));
    let output = fixture.cargo_build(&env);
    assert_failure(&output, "FIXTURE_REQUIRE_CUDA=1 without a toolkit");
    let errors = build_script_errors(&output);
    assert_eq!(errors.len(), 1, "{errors:#?}\n{}", stderr(&output));
    assert!(
        errors[0].starts_with("FIXTURE_REQUIRE_CUDA=1 but no CUDA toolkit was found (looked at ")
            && errors[0].contains("; install the CUDA toolkit or set CUDA_PATH to its root, or unset FIXTURE_REQUIRE_CUDA"),
        "{}",
        errors[0]
    );
    assert_eq!(
        build_script_warnings(&output),
        Vec::<String>::new(),
        "no CPU-only fallback warning"
    );
    assert!(
        !stderr(&output).contains("--- stderr"),
        "the build script printed nothing beyond that line:\n{}",
        stderr(&output)
    );
    assert_eq!(fixture.nvcc_calls(), compiles(&[]));

    let (_, calls) = build_ok(
        fixture,
        &[("FIXTURE_REQUIRE_CUDA", "1")],
        "FIXTURE_REQUIRE_CUDA=1 with a toolkit",
    );
    assert_eq!(calls, compiles(&[]));
}

#[test]
fn bad_arch_spec_fails_naming_the_item() {
    let shared = shared();
    let fixture = &shared.fixture;
    up_to_date(fixture);

    // With a toolkit, and without one: a spec is checked on every machine.
    for extra in [None, Some(("FIXTURE_CUDA", "off"))] {
        let env: Vec<_> = [("FIXTURE_CUDA_ARCHS", "sm_80,sm_12")]
            .into_iter()
            .chain(extra)
            .collect();
        let output = fixture.cargo_build(&env);
        assert_failure(&output, &format!("{env:?}"));
        let errors = build_script_errors(&output);
        assert_eq!(errors.len(), 1, "{env:?}: {errors:#?}\n{}", stderr(&output));
        assert!(
            errors[0].contains("CUDA arch `sm_12` in FIXTURE_CUDA_ARCHS")
                && errors[0].contains("accepted forms: sm_86, 86, 8.6"),
            "{env:?}: {}",
            errors[0]
        );
        assert_eq!(fixture.nvcc_calls(), compiles(&[]), "{env:?}");
    }
}

#[test]
fn compile_error_surfaces_and_is_retried() {
    let shared = shared();
    let fixture = &shared.fixture;
    up_to_date(fixture);
    let (fatbin, stamp) = (
        fixture.out_dir().join("c.fatbin"),
        fixture.out_dir().join("c.stamp"),
    );
    assert!(fatbin.is_file() && stamp.is_file());

    let broken = format!(
        "{}// --fail-on-purpose\n",
        std::fs::read_to_string(fixture.path("kernels/c.cu")).expect("reading c.cu")
    );
    fixture.write("kernels/c.cu", &broken);
    for attempt in ["build with a broken c.cu", "the same build again"] {
        let output = fixture.cargo_build(&[]);
        assert_failure(&output, attempt);
        assert_eq!(fixture.nvcc_calls(), compiles(&["c"]), "{attempt}");
        let errors = build_script_errors(&output);
        assert_eq!(
            errors,
            ["nvcc failed on module `c`: kernels/c.cu:1: error: this source asks to fail (--fail-on-purpose)"],
            "{attempt}: the headline carries the first diagnostic"
        );
        assert!(
            stderr(&output).contains("error: this source asks to fail (--fail-on-purpose)"),
            "{attempt}: nvcc's diagnostics are shown:\n{}",
            stderr(&output)
        );
        assert!(!fatbin.exists(), "{attempt}: no stale c.fatbin is left");
        assert!(!stamp.exists(), "{attempt}: no stale c.stamp is left");
    }

    fixture.restore_kernels();
    let (_, calls) = build_ok(fixture, &[], "build with c.cu fixed");
    assert_eq!(calls, compiles(&["c"]));
    assert!(fatbin.is_file() && stamp.is_file());
    let (_, calls) = build_ok(fixture, &[], "build after that");
    assert_eq!(calls, compiles(&[]));
}

#[test]
fn real_nvcc_rebuilds_exactly_what_changed() {
    let Some(nvcc) = installed_nvcc() else {
        return;
    };
    let fixture = Fixture::with_real_nvcc("real", "realfix", KERNEL_SOURCES, &nvcc);
    // One arch keeps the real compiles short.
    let env = [("FIXTURE_CUDA_ARCHS", "sm_80")];

    let (_, calls) = build_ok(&fixture, &env, "first build");
    assert_eq!(calls, compiles(&["a", "b", "c"]), "first build");
    for module in ["a", "b", "c"] {
        assert_fatbin(&fixture.out_dir().join(format!("{module}.fatbin")));
    }
    let generated = fixture.generated_modules();
    assert!(
        generated.contains("kernels: &[\"a_kernel\"]"),
        "{generated}"
    );

    let (_, calls) = build_ok(&fixture, &env, "no-op build");
    assert_eq!(calls, compiles(&[]), "no-op build");

    fixture.touch("kernels/a.cu");
    let (_, calls) = build_ok(&fixture, &env, "after touching a.cu");
    assert_eq!(calls, compiles(&["a"]), "after touching a.cu");

    fixture.touch(SHARED_H);
    let (_, calls) = build_ok(&fixture, &env, "after touching shared.h");
    assert_eq!(calls, compiles(&["a", "b"]), "after touching shared.h");

    let (_, calls) = build_ok(&fixture, &env, "no-op build at the end");
    assert_eq!(calls, compiles(&[]), "no-op build at the end");
}
