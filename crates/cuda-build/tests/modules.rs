//! `[modules]` entries and nvcc as users run it, end to end: a fixture crate
//! whose `kiln.toml` has an `rdc` module in each link mode, a static module
//! and a module with its own archs, built by `cargo build` with the fake nvcc
//! (`support/fake_nvcc.sh`). Each test checks which steps ran (from the
//! fake's log), what Cargo printed, and the command lines (a snapshot).
//! Launchers, host compilers and `NVCC` wrapper scripts are covered here too.
#![cfg(unix)]

mod support;

use std::sync::{Mutex, MutexGuard, OnceLock, PoisonError};

use support::{
    assert_failure, assert_fatbin, assert_success, build_script_errors, build_script_warnings,
    installed_nvcc, stderr, Fixture, COMMON_CUH, MODULE_SOURCES,
};

/// Every step of a first build, as the fake nvcc logs them.
const EVERY_STEP: &[&str] = &[
    "compile a.cu",
    "compile b.cu",
    "compile caller.cu",
    "compile helper.cu",
    "compile host.cu",
    "compile only90.cu",
    "compile single.cu",
    "dlink dlink.o",
    "dlink pair.fatbin",
    "lib libfixture_host.a",
    "lib libfixture_pairlib.a",
];

/// The modules fixture, the steps of its first build and their command
/// lines.
type Shared = (Fixture, Vec<String>, Vec<String>);

/// The modules fixture, locked for the calling test.
fn fixture() -> MutexGuard<'static, Shared> {
    static SHARED: OnceLock<Mutex<Shared>> = OnceLock::new();
    SHARED
        .get_or_init(|| {
            let fixture = Fixture::with_sources("modules", "modfix", MODULE_SOURCES);
            let output = fixture.cargo_build(&[]);
            assert_success(&output, "the modules fixture's first build");
            let steps = fixture.nvcc_calls();
            let commands = fixture.nvcc_command_lines();
            Mutex::new((fixture, steps, commands))
        })
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
}

/// Restores the files, builds, forgets the log: where every test starts.
fn up_to_date(fixture: &Fixture) {
    fixture.restore_kernels();
    let output = fixture.cargo_build(&[]);
    assert_success(&output, "bringing the modules fixture up to date");
    fixture.nvcc_calls();
    fixture.nvcc_command_lines();
}

/// A build that must succeed; returns the steps it ran.
#[track_caller]
fn steps(fixture: &Fixture, env: &[(&str, &str)], what: &str) -> Vec<String> {
    let output = fixture.cargo_build(env);
    assert_success(&output, what);
    fixture.nvcc_calls()
}

fn sorted(lines: &[&str]) -> Vec<String> {
    let mut lines: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
    lines.sort();
    lines
}

#[test]
fn first_build_runs_every_step_once_with_pinned_command_lines() {
    let shared = fixture();
    let (fixture, first_steps, first_commands) = (&shared.0, &shared.1, &shared.2);
    assert_eq!(*first_steps, sorted(EVERY_STEP));
    insta::assert_snapshot!(first_commands.join("\n"));

    up_to_date(fixture);
    let manifest = fixture.manifest();
    let module = |name: &str| {
        manifest
            .modules
            .iter()
            .find(|m| m.name == name)
            .unwrap_or_else(|| panic!("module {name} is in the manifest"))
            .clone()
    };
    let pair = module("pair");
    assert!(pair.rdc);
    assert_eq!(
        (pair.sass.as_slice(), pair.ptx.len()),
        (&["sm_80".to_string(), "sm_90".to_string()][..], 0)
    );
    assert_eq!(pair.sources.len(), 2);
    assert_eq!(pair.kernel_names(), ["pair_kernel"], "from nvlink's report");
    assert_eq!(module("only90").sass, ["sm_90a"]);
    assert_eq!(module("only90").ptx, Vec::<String>::new());
    assert_eq!(module("single").ptx, ["compute_90"]);

    let generated = fixture.generated_modules();
    for ident in ["PAIR", "ONLY90", "SINGLE"] {
        assert!(
            generated.contains(&format!("pub static {ident}:")),
            "{generated}"
        );
    }
    assert!(
        generated.contains("sass: &[90],"),
        "only90 is built for sm_90a alone:\n{generated}"
    );
    assert!(
        !generated.contains("HOST") && !generated.contains("PAIRLIB"),
        "{generated}"
    );

    let directives = fixture.build_script_output();
    for line in [
        "cargo::rustc-link-lib=static=fixture_host",
        "cargo::rustc-link-lib=static=fixture_pairlib",
        "cargo::rustc-link-lib=static=cudart_static",
        "cargo::rustc-env=FIXTURE_TOOLKIT_MAJOR=13",
        "cargo::rustc-env=FIXTURE_TOOLKIT_MINOR=0",
        "cargo::rerun-if-env-changed=FIXTURE_NVCC_LAUNCHER",
        "cargo::rerun-if-env-changed=CUDAHOSTCXX",
        "cargo::rerun-if-env-changed=NVCC_CCBIN",
        "cargo::rerun-if-env-changed=NVCC_APPEND_FLAGS",
    ] {
        assert!(
            directives.contains(&format!("{line}\n")),
            "{line}:\n{directives}"
        );
    }
    // The kernel cache's and the toolkit store's variables are cuda-build's
    // own, one store per user for every crate, whatever its prefix; nothing
    // else is named after kiln.
    let own: Vec<&str> = directives.lines().filter(|l| l.contains("KILN")).collect();
    assert_eq!(
        own,
        [
            "cargo::rerun-if-env-changed=KILN_TOOLKIT_HOME",
            "cargo::rerun-if-env-changed=KILN_PROBE_TIMEOUT",
            "cargo::rerun-if-env-changed=KILN_CACHE",
            "cargo::rerun-if-env-changed=KILN_CACHE_DIR",
            "cargo::rerun-if-env-changed=KILN_CACHE_MAX"
        ],
        "nothing else is named after kiln:\n{directives}"
    );
}

#[test]
fn noop_build_runs_no_step() {
    let shared = fixture();
    up_to_date(&shared.0);
    assert_eq!(steps(&shared.0, &[], "no-op build"), Vec::<String>::new());
}

#[test]
fn touching_one_source_of_an_rdc_module_recompiles_that_module_only() {
    let shared = fixture();
    let fixture = &shared.0;
    up_to_date(fixture);

    fixture.touch("kernels/pair/helper.cu");
    assert_eq!(
        steps(fixture, &[], "after touching pair/helper.cu"),
        sorted(&["compile helper.cu", "dlink pair.fatbin"]),
        "helper.cu is compiled again and pair relinked; caller.cu is not"
    );
    fixture.touch("kernels/pairlib/b.cu");
    assert_eq!(
        steps(fixture, &[], "after touching pairlib/b.cu"),
        sorted(&["compile b.cu", "dlink dlink.o", "lib libfixture_pairlib.a"]),
    );
    assert_eq!(steps(fixture, &[], "after that"), Vec::<String>::new());
}

#[test]
fn touching_a_shared_cuh_recompiles_exactly_its_includers() {
    let shared = fixture();
    let fixture = &shared.0;
    up_to_date(fixture);

    fixture.touch(COMMON_CUH);
    assert_eq!(
        steps(fixture, &[], "after touching common.cuh"),
        sorted(&[
            "compile caller.cu",
            "compile single.cu",
            "dlink pair.fatbin"
        ]),
    );
    fixture.touch("kernels/arch/include/width.cuh");
    assert_eq!(
        steps(fixture, &[], "after touching a module's own include dir"),
        ["compile only90.cu"]
    );
}

#[test]
fn a_module_name_that_matches_nothing_fails_at_once_naming_kiln_toml() {
    let shared = fixture();
    let fixture = &shared.0;
    up_to_date(fixture);
    let toml = fixture.path("kernels/kiln.toml");
    let original = std::fs::read_to_string(&toml).expect("reading kiln.toml");
    let cases = [
        (
            original.replace("[modules.host]", "[modules.hots]"),
            format!(
                "{}: [modules.hots] matches no source: there is no hots.cu in {}; \
                 fix the name or list its files in `sources`",
                toml.display(),
                fixture.path("kernels").display()
            ),
        ),
        (
            original.replace("rdc = true\nlink", "rdc = true\nnvcc-flags = []\nlink"),
            format!("{}: line 11 in [modules.pairlib]: unknown field `nvcc-flags`", toml.display()),
        ),
        (
            original.replace("rdc = true\nlink", "rdc = true\narchs = \"90-virtual\"\nlink"),
            format!(
                "{}: [modules.pairlib] uses rdc but its archs hold no real arch; the device link \
                 keeps SASS only, so add one (e.g. sm_90)",
                toml.display()
            ),
        ),
        (
            original.replace("\"pairlib/b.cu\"", "\"pairlib/c.cu\""),
            format!(
                "{}: [modules.pairlib] source `pairlib/c.cu` does not exist under {}; fix the path or remove it",
                toml.display(),
                fixture.path("kernels").display()
            ),
        ),
    ];
    for (text, expected) in cases {
        fixture.write("kernels/kiln.toml", &text);
        // With a toolkit and without one: the config is checked everywhere.
        for env in [&[][..], &[("FIXTURE_CUDA", "off")][..]] {
            let output = fixture.cargo_build(env);
            assert_failure(&output, &expected);
            let errors = build_script_errors(&output);
            assert_eq!(errors.len(), 1, "{errors:#?}\n{}", stderr(&output));
            assert!(
                errors[0].starts_with(&expected),
                "{env:?}\n{}\n{expected}",
                errors[0]
            );
            assert_eq!(fixture.nvcc_calls(), Vec::<String>::new());
        }
    }
}

/// A script that logs `<tag> <last argument's basename>` (except for
/// discovery's queries) and runs its arguments, with `exec_target` in front
/// when one is given.
fn logging_script(fixture: &Fixture, relative: &str, tag: &str, exec_target: &str) -> String {
    let path = fixture.root_path(relative);
    let text = format!(
        "#!/usr/bin/env bash\n\
         case \"${{1-}}\" in --version|--list-gpu-code|--list-gpu-arch) ;;\n\
         *) echo \"{tag} $(basename -- \"${{!#}}\")\" >>\"$FAKE_NVCC_LOG\" ;; esac\n\
         exec {exec_target} \"$@\"\n"
    );
    support::write_script(&path, &text);
    path.display().to_string()
}

#[test]
fn a_launcher_prefixes_every_compile_and_changes_no_output() {
    let shared = fixture();
    let fixture = &shared.0;
    up_to_date(fixture);
    let launcher = logging_script(fixture, "bin/fake-sccache", "launch", "");
    let env = [("FIXTURE_NVCC_LAUNCHER", launcher.as_str())];

    assert_eq!(
        steps(fixture, &env, "no-op build with a launcher"),
        Vec::<String>::new(),
        "a launcher does not change what is built"
    );
    fixture.touch("kernels/single.cu");
    fixture.touch("kernels/pairlib/a.cu");
    assert_eq!(
        steps(fixture, &env, "with a launcher, after touching two sources"),
        sorted(&[
            "launch single.cu",
            "compile single.cu",
            "launch a.cu",
            "compile a.cu",
            "dlink dlink.o",
            "lib libfixture_pairlib.a",
        ]),
        "compiles go through the launcher, links do not"
    );

    let output = fixture.cargo_build(&[("FIXTURE_NVCC_LAUNCHER", "no-such-launcher")]);
    assert_failure(&output, "a launcher that is not there");
    assert_eq!(
        build_script_errors(&output),
        ["FIXTURE_NVCC_LAUNCHER=no-such-launcher: not found on PATH; install it, name it by path, or unset FIXTURE_NVCC_LAUNCHER"]
    );
}

#[test]
fn the_host_compiler_is_checked_up_front_and_its_refusal_is_one_line() {
    let shared = fixture();
    let fixture = &shared.0;
    up_to_date(fixture);

    let output = fixture.cargo_build(&[("CUDAHOSTCXX", "/nonexistent/g++-99")]);
    assert_failure(&output, "a host compiler that is not there");
    assert_eq!(
        build_script_errors(&output),
        ["CUDAHOSTCXX=/nonexistent/g++-99: does not exist; set CUDAHOSTCXX to an installed host C++ compiler (a path, or a name on PATH), or unset it"]
    );
    assert_eq!(fixture.nvcc_calls(), Vec::<String>::new());

    let refused = fixture.root_path("bin/g++-99");
    support::write_script(&refused, "#!/bin/sh\n# unsupported-host-compiler\n");
    let output = fixture.cargo_build(&[("NVCC_CCBIN", refused.to_str().unwrap())]);
    assert_failure(&output, "a host compiler nvcc refuses");
    assert_eq!(
        build_script_errors(&output),
        [format!(
            "nvcc refuses the host compiler {} (NVCC_CCBIN) for module `host`: unsupported GNU version! \
             gcc versions later than 13 are not supported!; set CUDAHOSTCXX to a compiler this CUDA \
             supports, or add -allow-unsupported-compiler to the module's flags",
            refused.display()
        )]
    );
    fixture.nvcc_command_lines();

    let fine = fixture.root_path("bin/g++-12");
    support::write_script(&fine, "#!/bin/sh\n");
    let env = [("CUDAHOSTCXX", fine.to_str().unwrap())];
    assert_eq!(
        steps(fixture, &env, "with an accepted host compiler"),
        sorted(EVERY_STEP),
        "a new host compiler rebuilds everything"
    );
    let commands = fixture.nvcc_command_lines();
    let compiles: Vec<&String> = commands.iter().filter(|c| !c.contains(" -lib ")).collect();
    assert!(
        compiles
            .iter()
            .all(|c| c.contains(" -ccbin <root>/bin/g++-12 ")),
        "{compiles:#?}"
    );
}

#[test]
fn nvcc_may_be_a_wrapper_script_outside_the_toolkit() {
    let shared = fixture();
    let fixture = &shared.0;
    up_to_date(fixture);
    let real = fixture.nvcc().display().to_string();
    let wrapper = logging_script(fixture, "elsewhere/log-nvcc", "wrapped", &real);
    let toolkit = fixture.root_path("toolkit").display().to_string();
    let env = [("NVCC", wrapper.as_str()), ("CUDA_PATH", toolkit.as_str())];

    let output = fixture.cargo_build(&env);
    assert_success(&output, "first build through the wrapper");
    assert_eq!(build_script_warnings(&output), Vec::<String>::new());
    let calls = fixture.nvcc_calls();
    assert_eq!(
        calls.iter().filter(|c| c.starts_with("compile ")).count(),
        7,
        "another nvcc compiles everything again: {calls:#?}"
    );
    assert!(
        calls.contains(&"wrapped single.cu".to_string()),
        "{calls:#?}"
    );

    assert_eq!(
        steps(fixture, &env, "no-op build through the wrapper"),
        Vec::<String>::new()
    );
    fixture.touch("kernels/pair/caller.cu");
    assert_eq!(
        steps(fixture, &env, "after touching pair/caller.cu"),
        sorted(&[
            "wrapped caller.cu",
            "compile caller.cu",
            "wrapped pair__helper.cu.o",
            "dlink pair.fatbin",
        ]),
        "the wrapper runs every step: the compile of one source, then the module's link"
    );
}

#[test]
fn nvcc_bin_false_is_reported_by_the_path_given() {
    let shared = fixture();
    let fixture = &shared.0;
    up_to_date(fixture);
    let toolkit = fixture.root_path("toolkit").display().to_string();
    let output = fixture.cargo_build(&[("NVCC", "/bin/false"), ("CUDA_PATH", &toolkit)]);
    assert_success(&output, "NVCC=/bin/false with a toolkit in CUDA_PATH");
    let warnings = build_script_warnings(&output);
    assert_eq!(
        warnings,
        [format!(
            "NVCC=/bin/false (`/bin/false --version` printed no CUDA release; exit status: 1) \
             cannot compile CUDA: the build took CUDA 13.0.88 (CUDA_PATH, {toolkit}) instead, \
             whose kernels need a CUDA 13 driver at run time (13.0 or newer to JIT their PTX)"
        )]
    );
}

/// The same modules compiled and linked by the real nvcc (behind a logging
/// `NVCC` wrapper outside the toolkit), when `cargo xtask toolkit install`
/// has put one in `target/cuda-toolkit`.
#[test]
fn real_nvcc_builds_every_module_shape() {
    let Some(nvcc) = installed_nvcc() else {
        return;
    };
    let fixture = Fixture::with_real_nvcc("real-modules", "realmod", MODULE_SOURCES, &nvcc);
    // One arch keeps the real compiles short (only90 keeps its own sm_90a).
    let env = [("FIXTURE_CUDA_ARCHS", "sm_80")];
    assert_eq!(steps(&fixture, &env, "first build"), sorted(EVERY_STEP));

    let out = fixture.out_dir();
    for module in ["pair", "single", "only90"] {
        assert_fatbin(&out.join(format!("{module}.fatbin")));
    }
    let manifest = fixture.manifest();
    let pair = manifest
        .modules
        .iter()
        .find(|m| m.name == "pair")
        .expect("pair");
    assert!(
        pair.kernels
            .iter()
            .any(|k| k.kernel == "pair_kernel" && k.arch == "sm_80" && k.registers > 0),
        "nvlink's resource report: {:?}",
        pair.kernels
    );
    for lib in ["libfixture_host.a", "libfixture_pairlib.a"] {
        let bytes = std::fs::read(out.join(lib)).expect("reading a static library");
        assert!(bytes.starts_with(b"!<arch>\n"), "{lib} is an archive");
    }

    assert_eq!(steps(&fixture, &env, "no-op build"), Vec::<String>::new());
    fixture.touch("kernels/pair/helper.cu");
    assert_eq!(
        steps(&fixture, &env, "after touching pair/helper.cu"),
        sorted(&["compile helper.cu", "dlink pair.fatbin"])
    );
    fixture.touch(COMMON_CUH);
    assert_eq!(
        steps(&fixture, &env, "after touching common.cuh"),
        sorted(&[
            "compile caller.cu",
            "compile single.cu",
            "dlink pair.fatbin"
        ])
    );
    assert_eq!(
        steps(&fixture, &env, "no-op build at the end"),
        Vec::<String>::new()
    );
}

/// `single.fatbin` is written by one `-fatbin` compile, or (with `rdc`) by a
/// device link: switching back and forth never reuses the other's output.
#[test]
fn switching_a_module_to_rdc_and_back_rebuilds_its_image_each_time() {
    let shared = fixture();
    let fixture = &shared.0;
    up_to_date(fixture);
    let toml = std::fs::read_to_string(fixture.path("kernels/kiln.toml")).expect("kiln.toml");
    let with_rdc = format!("{toml}\n[modules.single]\nrdc = true\n");

    fixture.write("kernels/kiln.toml", &with_rdc);
    assert_eq!(
        steps(fixture, &[], "single made rdc"),
        sorted(&["compile single.cu", "dlink single.fatbin"])
    );
    fixture.write("kernels/kiln.toml", &toml);
    assert_eq!(
        steps(fixture, &[], "single back to one call"),
        ["compile single.cu"]
    );
    fixture.write("kernels/kiln.toml", &with_rdc);
    assert_eq!(
        steps(fixture, &[], "single rdc again"),
        ["dlink single.fatbin"],
        "its object is still up to date; the image is linked again"
    );
    fixture.write("kernels/kiln.toml", &toml);
    assert_eq!(steps(fixture, &[], "and back again"), ["compile single.cu"]);
}
