//! gpu-core with no CUDA-version feature: the build stops with one error,
//! gpu-core's, naming the features (not cudarc's build script's list of its
//! own). Runs `cargo check` on a scratch crate that depends on gpu-core with
//! `default-features = false`, in its own target dir under cargo's test tmp.

use std::path::Path;
use std::process::Command;

#[test]
fn no_version_feature_is_one_compile_error_naming_the_features() {
    let core = Path::new(env!("CARGO_MANIFEST_DIR"));
    let krate = Path::new(env!("CARGO_TARGET_TMPDIR")).join("gpu-core-no-version");
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
    let output = Command::new(cargo)
        .args(["check", "--offline", "--quiet", "--manifest-path"])
        .arg(krate.join("Cargo.toml"))
        .env("CARGO_TARGET_DIR", krate.join("target"))
        // cudarc would take its version from this variable instead.
        .env_remove("CUDARC_CUDA_VERSION")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "built with no version:\n{stderr}");
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
        .filter_map(|l| l.split_once(" = [\"cudarc/"))
        .map(|(name, _)| name)
        .collect();
    assert_eq!(features.len(), 10, "{features:?}");
    let cfg_names = lib.matches("feature = \"cuda-").count();
    assert_eq!(
        cfg_names,
        features.len(),
        "the cfg list and the manifest differ"
    );
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
