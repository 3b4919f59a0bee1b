//! gpu-core with no CUDA-version feature: the build stops with one error,
//! gpu-core's, naming the features (not cudarc's build script's list of its
//! own, nor its panic on an nvcc newer than it knows). Runs `cargo check` on
//! a scratch crate that depends on gpu-core with `default-features = false`,
//! in its own target dir under cargo's test tmp.

use std::path::Path;
use std::process::Command;

#[test]
fn no_version_feature_is_one_compile_error_naming_the_features() {
    no_version_feature_with_path_first(None);
}

/// cudarc 0.19.10's build script, asked for a version, runs the `nvcc` on
/// PATH and panics on a release it has no bindings for (13.5); gpu-core
/// with no version feature must not let it run.
#[test]
fn an_nvcc_newer_than_cudarc_knows_on_path_is_no_build_script_panic() {
    let bin = Path::new(env!("CARGO_TARGET_TMPDIR")).join("nvcc-13.5/bin");
    std::fs::create_dir_all(&bin).unwrap();
    let nvcc = bin.join("nvcc");
    std::fs::write(
        &nvcc,
        "#!/bin/sh
echo 'nvcc: NVIDIA (R) Cuda compiler driver'
echo 'Copyright (c) 2005-2026 NVIDIA Corporation'
         echo 'Built on Mon_Jan_01_00:00:00_PST_2026'
echo 'Cuda compilation tools, release 13.5, V13.5.37'
",
    )
    .unwrap();
    let mut perms = std::fs::metadata(&nvcc).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
    std::fs::set_permissions(&nvcc, perms).unwrap();
    no_version_feature_with_path_first(Some(&bin));
}

fn no_version_feature_with_path_first(bin: Option<&Path>) {
    let core = Path::new(env!("CARGO_MANIFEST_DIR"));
    let name = if bin.is_some() {
        "gpu-core-no-version-nvcc-13.5"
    } else {
        "gpu-core-no-version"
    };
    let krate = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    std::fs::create_dir_all(krate.join("src")).unwrap();
    std::fs::write(krate.join("src/lib.rs"), "pub use gpu_core::Backend;\n").unwrap();
    std::fs::write(
        krate.join("Cargo.toml"),
        format!(
            "[package]\nname = \"gpu-core-no-version\"\nversion = \"0.0.0\"\nedition = \"2021\"\npublish = false\n\n\
             [dependencies]\ngpu-core = {{ package = \"kiln-gpu-core\", path = {:?}, default-features = false }}\n\n\
             # Not a member of the workspace it sits in.\n[workspace]\n",
            core.display().to_string()
        ),
    )
    .unwrap();
    // The workspace's lock file: the versions kiln builds, resolvable offline.
    std::fs::copy(core.join("../../Cargo.lock"), krate.join("Cargo.lock")).unwrap();
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut check = Command::new(cargo);
    if let Some(bin) = bin {
        let path = std::env::var_os("PATH").unwrap_or_default();
        let path = std::env::join_paths(
            std::iter::once(bin.to_path_buf()).chain(std::env::split_paths(&path)),
        )
        .unwrap();
        check.env("PATH", path);
    }
    let output = check
        .args(["check", "--offline", "--quiet", "--manifest-path"])
        .arg(krate.join("Cargo.toml"))
        .env("CARGO_TARGET_DIR", krate.join("target"))
        // cudarc would take its version from this variable instead.
        .env_remove("CUDARC_CUDA_VERSION")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "built with no version:\n{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    let errors: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("error"))
        .filter(|l| !l.starts_with("error: could not compile"))
        .collect();
    assert_eq!(errors.len(), 1, "{stderr}");
    assert!(
        errors[0].starts_with("error: kiln-gpu-core needs one CUDA-version feature: cuda-12040,")
            && errors[0].contains("cuda-12080")
            && errors[0].contains("cuda-13000 (the default)")
            && errors[0].contains("default-features = false"),
        "{stderr}"
    );
    assert!(
        stderr.contains("could not compile `kiln-gpu-core`"),
        "{stderr}"
    );
}

/// `build.rs`, whose rule the test below holds against the manifest.
#[allow(dead_code)]
#[path = "../build.rs"]
mod build_script;

/// Every CUDA-version feature in the manifest brings cudarc in, turns
/// `cfg(with_cudarc)` on (`build.rs`) and is named by the compile_error; no
/// other feature turns the cfg on.
#[test]
fn the_compile_error_names_exactly_the_manifests_version_features() {
    let core = Path::new(env!("CARGO_MANIFEST_DIR"));
    let manifest = std::fs::read_to_string(core.join("Cargo.toml")).unwrap();
    let lib = std::fs::read_to_string(core.join("src/lib.rs")).unwrap();
    let features: Vec<&str> = manifest
        .lines()
        .filter_map(|l| l.split_once(" = [\"dep:cudarc\", \"cudarc/"))
        .map(|(name, _)| name)
        .collect();
    assert_eq!(features.len(), 10, "{features:?}");
    let var = |feature: &str| format!("CARGO_FEATURE_{}", feature.to_uppercase().replace('-', "_"));
    for feature in &features {
        assert!(
            manifest.contains(&format!(
                "{feature} = [\"dep:cudarc\", \"cudarc/{feature}\"]"
            )),
            "{feature} does not bring cudarc in"
        );
        assert!(
            build_script::is_version_feature(&var(feature)),
            "build.rs does not turn cfg(with_cudarc) on for {feature}"
        );
    }
    let others = manifest
        .lines()
        .skip_while(|l| *l != "[features]")
        .skip(1)
        .take_while(|l| !l.starts_with('['))
        .filter_map(|l| l.split_once(" = ").map(|(name, _)| name.trim()))
        .filter(|name| !name.starts_with('#') && !features.contains(name))
        .collect::<Vec<_>>();
    assert!(others.contains(&"testing"), "{others:?}");
    for other in others {
        assert!(
            !build_script::is_version_feature(&var(other)),
            "{other} would turn cfg(with_cudarc) on"
        );
    }
    for near in [
        "CARGO_FEATURE_CUDA_1300",
        "CARGO_FEATURE_CUDA_130000",
        "CARGO_FEATURE_CUDA_X3000",
    ] {
        assert!(!build_script::is_version_feature(near), "{near}");
    }
    let message = lib
        .split_once("compile_error!(")
        .and_then(|(_, rest)| rest.split_once(");"))
        .map(|(message, _)| message)
        .expect("lib.rs has the compile_error");
    for feature in &features {
        assert!(message.contains(feature), "{feature} not in the message");
    }
    assert_eq!(
        message.matches("cuda-1").count(),
        features.len(),
        "the message names a version the manifest lacks"
    );
    assert!(
        !lib.contains("feature = \"cuda-"),
        "lib.rs lists versions again: cfg(with_cudarc) is build.rs's"
    );
}
