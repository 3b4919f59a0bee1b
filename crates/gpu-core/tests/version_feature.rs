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

/// Every CUDA-version feature in the manifest is one the compile_error
/// accepts and names, and the other way round.
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
    // Two lists: the compile_error's `not(any(..))` and `with_cudarc!`'s.
    let cfg_names = lib.matches("feature = \"cuda-").count();
    assert_eq!(
        cfg_names,
        2 * features.len(),
        "the cfg lists and the manifest differ"
    );
    for feature in &features {
        assert_eq!(
            lib.matches(&format!("feature = \"{feature}\"")).count(),
            2,
            "{feature} is not in both cfg lists"
        );
        assert!(
            manifest.contains(&format!(
                "{feature} = [\"dep:cudarc\", \"cudarc/{feature}\"]"
            )),
            "{feature} does not bring cudarc in"
        );
    }
    let message = lib
        .split_once("compile_error!(")
        .and_then(|(_, rest)| rest.split_once(");"))
        .map(|(message, _)| message)
        .expect("lib.rs has the compile_error");
    for feature in &features {
        assert!(
            lib.contains(&format!("feature = \"{feature}\"")),
            "{feature} not in the cfg"
        );
        assert!(message.contains(feature), "{feature} not in the message");
    }
}
