//! A toolkit other than the one the kernels serve, end to end with the fake
//! nvcc: one newer than the driver floor (`kiln-audit.toml [driver]`) is one
//! warning naming the three fixes and an error under `<P>_REQUIRE_CUDA`; a
//! `CUDA_PATH` the user set that cannot compile (the CUDA 12 wheels ship
//! ptxas and no nvcc) is one warning naming what the build took instead, and
//! an error under `<P>_REQUIRE_CUDA`.
#![cfg(unix)]

mod support;

use support::{
    assert_failure, assert_success, build_script_errors, build_script_warnings, write_script,
    Fixture, KERNEL_SOURCES,
};

/// The fake toolkit reporting CUDA 13.5.37, whose PTX (ISA 9.5) a CUDA 13.0
/// driver cannot JIT.
const NEWER: [(&str, &str); 2] = [
    ("FAKE_NVCC_RELEASE", "13.5"),
    ("FAKE_NVCC_VERSION", "13.5.37"),
];

fn newer_and<'a>(env: &[(&'a str, &'a str)]) -> Vec<(&'a str, &'a str)> {
    NEWER.iter().chain(env).copied().collect()
}

/// A fixture crate of its own name: the tests run in parallel in one
/// target dir, and each cleans its crate's outputs there when it starts.
fn fixture(name: &str, crate_name: &str) -> Fixture {
    Fixture::with_sources(name, crate_name, KERNEL_SOURCES)
}

fn floor_warnings(output: &std::process::Output) -> Vec<String> {
    build_script_warnings(output)
        .into_iter()
        .filter(|w| w.contains("writes PTX ISA"))
        .collect()
}

#[test]
fn a_toolkit_newer_than_the_driver_floor_warns_once_naming_the_fixes() {
    let fixture = fixture("floor-newer", "floornewer");
    let output = fixture.cargo_build(&NEWER);
    assert_success(&output, "a build with CUDA 13.5");
    let warnings = floor_warnings(&output);
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    let warning = &warnings[0];
    for part in [
        "CUDA 13.5.37 (NVCC, ",
        "writes PTX ISA 9.5, which the oldest driver these kernels serve, CUDA 13.0 \
         (the default; set it in kiln-audit.toml [driver]; PTX ISA 9.0), cannot JIT",
        "build with the pinned toolkit (`cargo kiln toolkit install`)",
        "build SASS only, for every GPU they target (FIXTURE_CUDA_ARCHS or kiln.toml's archs, \
         each item `-real`)",
        "or raise the floor in kiln-audit.toml [driver]",
    ] {
        assert!(warning.contains(part), "{part:?} not in {warning}");
    }

    // Under REQUIRE, the same line fails the build.
    let output = fixture.cargo_build(&newer_and(&[("FIXTURE_REQUIRE_CUDA", "1")]));
    assert_failure(&output, "CUDA 13.5 under FIXTURE_REQUIRE_CUDA=1");
    let errors = build_script_errors(&output);
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert_eq!(errors[0], format!("FIXTURE_REQUIRE_CUDA=1 but {warning}"));
}

#[test]
fn nvcc_on_path_before_the_stores_toolkit_names_the_store_in_the_fix() {
    let fixture = fixture("floor-shadowed", "floorshadowed");
    // The store's default: a copy of the fake toolkit at another root.
    let store = fixture.root_path("store");
    let pinned = store.join("cuda-13.0/cuda");
    std::fs::create_dir_all(pinned.join("bin")).unwrap();
    std::fs::create_dir_all(pinned.join("include")).unwrap();
    std::fs::copy(fixture.nvcc(), pinned.join("bin/nvcc")).unwrap();
    std::fs::write(pinned.join("include/cuda_runtime.h"), "").unwrap();
    std::os::unix::fs::symlink("cuda-13.0", store.join("default")).unwrap();
    // The newer toolkit's nvcc first on PATH, as a CUDA 13.5 install puts it.
    let bin = fixture.root_path("toolkit/bin").display().to_string();
    let path = format!("{bin}:{}", support::path_without_nvcc());
    let store_var = store.display().to_string();
    let env = newer_and(&[
        ("NVCC", ""),
        ("PATH", &path),
        ("KILN_TOOLKIT_HOME", &store_var),
    ]);
    let output = fixture.cargo_build(&env);
    assert_success(&output, "CUDA 13.5 on PATH before the store");
    let warnings = floor_warnings(&output);
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(
        warnings[0].starts_with("CUDA 13.5.37 (PATH, "),
        "{warnings:?}"
    );
    assert!(
        warnings[0].contains(&format!(
            "build with the toolkit `cargo kiln toolkit install` made the default, at \
             {store_var}/default/cuda, which PATH comes before: set CUDA_PATH to it"
        )),
        "{warnings:?}"
    );
}

#[test]
fn a_raised_floor_or_sass_only_builds_are_quiet_and_the_pinned_toolkit_too() {
    let fixture = fixture("floor-raised", "floorraised");
    // SASS for every target: nothing to JIT.
    let output = fixture.cargo_build(&newer_and(&[("FIXTURE_CUDA_ARCHS", "80-real,90-real")]));
    assert_success(&output, "CUDA 13.5, SASS only");
    assert_eq!(floor_warnings(&output), Vec::<String>::new());
    // The floor raised in the crate's kiln-audit.toml.
    fixture.write(
        "kiln-audit.toml",
        "[driver]\nmin_cuda = \"13.5\"\n\n[default]\nmax_registers = 64\n",
    );
    let output = fixture.cargo_build(&newer_and(&[("FIXTURE_REQUIRE_CUDA", "1")]));
    assert_success(&output, "CUDA 13.5 with the floor at 13.5");
    assert_eq!(floor_warnings(&output), Vec::<String>::new());
    // A floor below the pinned toolkit's PTX warns with the pinned one too,
    // naming where the floor was read.
    fixture.write(
        "kiln-audit.toml",
        "[driver]\nmin_cuda = \"12.8\"\nmax_ptx_isa = \"8.7\"\n",
    );
    let output = fixture.cargo_build(&[]);
    assert_success(&output, "CUDA 13.0 with the floor at 12.8");
    let warnings = floor_warnings(&output);
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(
        warnings[0].contains("CUDA 12.8 (kiln-audit.toml [driver]; PTX ISA 8.7)"),
        "{warnings:?}"
    );
    // A [driver] that cannot be read is one line naming the file.
    fixture.write("kiln-audit.toml", "[driver]\nmin_cuda = 13\n");
    let output = fixture.cargo_build(&[]);
    assert_failure(&output, "a broken [driver]");
    let errors = build_script_errors(&output);
    assert_eq!(errors.len(), 1, "{}", support::stderr(&output));
    assert!(
        errors[0].ends_with("kiln-audit.toml: [driver] min_cuda must be a string (\"13.0\")"),
        "{errors:?}"
    );
}

#[test]
fn a_cuda_path_without_nvcc_is_one_warning_naming_the_toolkit_taken_instead() {
    let fixture = fixture("cu12-wheels", "cutwelve");
    // The cu12 wheels: ptxas and headers, no nvcc.
    let wheels = fixture.root_path("cu12");
    write_script(&wheels.join("bin/ptxas"), "#!/bin/sh\nexit 0\n");
    std::fs::create_dir_all(wheels.join("include")).unwrap();
    std::fs::write(wheels.join("include/cuda_runtime.h"), "").unwrap();
    // The toolkit the build falls back to: the fake one, as the store's
    // default.
    let store = fixture.root_path("store");
    std::fs::create_dir_all(&store).unwrap();
    std::fs::create_dir_all(store.join("default")).unwrap();
    std::os::unix::fs::symlink(fixture.root_path("toolkit"), store.join("default/cuda")).unwrap();
    let wheels = wheels.display().to_string();
    let store = store.display().to_string();
    let env = [
        ("NVCC", ""),
        ("CUDA_PATH", wheels.as_str()),
        ("KILN_TOOLKIT_HOME", store.as_str()),
    ];
    let output = fixture.cargo_build(&env);
    assert_success(&output, "CUDA_PATH at the cu12 wheels");
    let warnings = build_script_warnings(&output);
    assert_eq!(
        warnings,
        [format!(
            "CUDA_PATH={wheels} (no bin/nvcc) cannot compile CUDA: the build took CUDA 13.0.88 \
             (KILN_TOOLKIT_HOME, {store}/default/cuda) instead, whose kernels need a CUDA 13 \
             driver at run time (13.0 or newer to JIT their PTX)"
        )]
    );

    let mut required = env.to_vec();
    required.push(("FIXTURE_REQUIRE_CUDA", "1"));
    let output = fixture.cargo_build(&required);
    assert_failure(&output, "CUDA_PATH at the cu12 wheels under REQUIRE");
    assert_eq!(
        build_script_errors(&output),
        [format!(
            "FIXTURE_REQUIRE_CUDA=1 but CUDA_PATH={wheels} (no bin/nvcc) cannot compile CUDA: \
             point it at a toolkit with bin/nvcc and include/cuda_runtime.h, or unset it"
        )]
    );
}
