//! KernelBuild's own tests: paths made absolute, names from the prefix.

use super::*;

#[test]
fn relative_paths_are_made_absolute_for_nvcc() {
    let build = KernelBuild::new("kernels")
        .include_dir("extra")
        .out_dir("out")
        .with_absolute_paths()
        .unwrap();
    let cwd = std::env::current_dir().unwrap();
    assert_eq!(build.kernels_dir, cwd.join("kernels"));
    assert_eq!(build.include_dirs, [cwd.join("extra")]);
    assert_eq!(build.config_file, Some(cwd.join("kernels/kiln.toml")));
    assert_eq!(build.out_dir, Some(cwd.join("out")));
}

#[test]
fn every_name_derives_from_the_prefix() {
    let build = KernelBuild::new("k").env_prefix("MYCRATE");
    let vars = build.vars();
    assert_eq!(
        [vars.archs, vars.require, vars.switch, vars.launcher],
        [
            "MYCRATE_CUDA_ARCHS",
            "MYCRATE_REQUIRE_CUDA",
            "MYCRATE_CUDA",
            "MYCRATE_NVCC_LAUNCHER"
        ]
    );
    assert_eq!(
        static_lib_name(&build.lower_prefix(), "reduce"),
        "mycrate_reduce"
    );
    assert_eq!(manifest::file_name("MYCRATE"), "mycrate-manifest.toml");
}
