//! `cargo xtask package`: kiln's library crates as a user gets them.
//! 1. `cargo package` of the crates a user depends on (kiln-abi,
//!    kiln-cuda-build, kiln-gpu-core), each verified by building the packed
//!    copy, in a target dir named by the packed crates' hash
//!    ([`verify_dir`]).
//! 2. `examples/downstream` packaged, unpacked with them in a temp dir and
//!    built where no toolkit can be found (no `NVCC`, `CUDA_PATH`,
//!    `CUDA_HOME`, `CUDA_ROOT`, no nvcc on `PATH`, `DOWNSTREAM_REQUIRE_CUDA=1`
//!    so that a CPU-only fallback fails): GPU code comes from its
//!    `kernels-prebuilt/`; its tests then run. The unpacked kiln crates stand
//!    in for the registry (`[patch.crates-io]`), since they are not published.
//! 3. A crate outside the repository depending on kiln-gpu-core and
//!    kiln-cuda-build by git URL (a bare clone of this checkout's HEAD, so
//!    only committed work counts), built CPU-only and with the toolkit.
//!
//! [`unpacked_downstream_tests`] is also what `gpu-bundle` ships as
//! `downstream-prebuilt__*`.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{bail, Context, Result};
use cargo_metadata::Message;

/// The library crates a user depends on, by package name.
const USER_CRATES: &[&str] = &["kiln-abi", "kiln-cuda-build", "kiln-gpu-core"];

/// The line a build from prebuilt kernels prints.
const PREBUILT_LINE: &str = "warning: downstream@0.1.0: prebuilt kernels: ";

/// Runs the command.
pub(crate) fn run(root: &Path) -> Result<()> {
    println!(
        "[1/3] cargo package {} (each verified)",
        USER_CRATES.join(" ")
    );
    package_user_crates(root, true)?;

    println!("[2/3] examples/downstream packaged, unpacked and built with no toolkit");
    let tests = unpacked_downstream_tests(root, false)?;
    for (name, path) in &tests {
        let status = Command::new(path)
            .status()
            .with_context(|| format!("cannot run {}", path.display()))?;
        if !status.success() {
            bail!("the unpacked downstream's {name} failed ({status})");
        }
    }

    println!("[3/3] a crate depending on kiln by git URL, CPU-only and with the toolkit");
    git_user(root)
}

fn cargo(root: &Path) -> Command {
    let mut cargo = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    cargo.current_dir(root);
    cargo
}

/// `cargo package` of the user crates into `target/package`; verified, also
/// built from a local registry of the packed copies (see [`verify_dir`]).
fn package_user_crates(root: &Path, verify: bool) -> Result<()> {
    package_into(root, None)?;
    if verify {
        package_into(root, Some(&verify_dir(root)?))?;
    }
    Ok(())
}

/// One `cargo package` of the user crates, verified when given a target dir.
fn package_into(root: &Path, verify_target: Option<&Path>) -> Result<()> {
    let mut cargo = cargo(root);
    cargo.args(["package", "--allow-dirty"]);
    match verify_target {
        Some(dir) => cargo.arg("--target-dir").arg(dir),
        None => cargo.arg("--no-verify"),
    };
    for krate in USER_CRATES {
        cargo.args(["-p", krate]);
    }
    let status = cargo.status().context("cannot run cargo package")?;
    if !status.success() {
        bail!(
            "cargo package of {} failed ({status})",
            USER_CRATES.join(", ")
        );
    }
    Ok(())
}

/// `target/package/<crate>-0.1.0.crate`: where `cargo package` packs a
/// user crate.
fn packed(root: &Path, krate: &str) -> PathBuf {
    root.join(format!("target/package/{krate}-0.1.0.crate"))
}

/// The target dir of a verified packaging: `target/package-verify/<hash>`,
/// the hash of the packed `.crate`s just written to `target/package`.
///
/// Cargo verifies crates packaged together against a local registry in
/// `<target dir>/package/tmp-registry` and unpacks from it into
/// `$CARGO_HOME/registry/src/<hash of that path>/`, never again once a crate
/// of the same name and version is there (the miden-vm report,
/// 0xMiden/miden-vm#2530). A CI that keeps `CARGO_HOME` and clones to the
/// same path would build gpu-core against the kiln-abi of an earlier run:
/// a path per content gives changed crates a folder of their own. Older
/// folders under `target/package-verify` named as it names them are
/// removed; anything else there is left, and `target/package-verify` as a
/// link or a file is refused.
fn verify_dir(root: &Path) -> Result<PathBuf> {
    use sha2::{Digest, Sha256};
    let mut hasher = Sha256::new();
    for krate in USER_CRATES {
        let path = packed(root, krate);
        let bytes =
            std::fs::read(&path).with_context(|| format!("cannot read {}", path.display()))?;
        hasher.update(krate.as_bytes());
        hasher.update((bytes.len() as u64).to_le_bytes());
        hasher.update(&bytes);
    }
    let key: String = hasher.finalize()[..8]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let parent = root.join("target/package-verify");
    if let Ok(meta) = std::fs::symlink_metadata(&parent) {
        if !meta.is_dir() {
            bail!(
                "{} is a link or a file, not the folder `xtask package` makes: remove it and rerun",
                parent.display()
            );
        }
    }
    if let Ok(entries) = std::fs::read_dir(&parent) {
        for entry in entries.flatten() {
            let name = entry.file_name();
            let name = name.to_string_lossy();
            let stale = name != key.as_str() && is_key(&name);
            let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
            if stale && is_dir {
                std::fs::remove_dir_all(entry.path())
                    .with_context(|| format!("cannot remove {}", entry.path().display()))?;
            }
        }
    }
    Ok(parent.join(key))
}

/// Whether `name` is a folder name [`verify_dir`] makes: 16 lowercase hex
/// digits.
fn is_key(name: &str) -> bool {
    name.len() == 16 && name.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// `--config patch.crates-io.<crate>.path=...` for each user crate unpacked
/// under `dir`: they stand in for the registry.
fn patches(dir: &Path) -> Vec<String> {
    USER_CRATES
        .iter()
        .flat_map(|krate| {
            let path = dir.join(format!("{krate}-0.1.0"));
            [
                "--config".to_string(),
                format!(
                    "patch.crates-io.{krate}.path={:?}",
                    path.display().to_string()
                ),
            ]
        })
        .collect()
}

/// Unpacks a `.crate` into `dir`.
fn unpack(archive: &Path, dir: &Path) -> Result<()> {
    let status = Command::new("tar")
        .arg("xzf")
        .arg(archive)
        .arg("-C")
        .arg(dir)
        .status()
        .context("cannot run tar")?;
    if !status.success() {
        bail!("tar could not unpack {} ({status})", archive.display());
    }
    Ok(())
}

/// `PATH` without the dirs that hold an nvcc.
fn path_without_nvcc() -> std::ffi::OsString {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let dirs = std::env::split_paths(&path).filter(|dir| !dir.join("nvcc").exists());
    std::env::join_paths(dirs).unwrap_or_default()
}

/// Packages `examples/downstream` and the user crates, unpacks them in a
/// temp dir outside the repository, builds the downstream's tests there
/// with no toolkit to be found (release when asked) in
/// `target/downstream-prebuilt`, checks that the build said it used its
/// prebuilt kernels, and returns the test binaries as
/// `downstream-prebuilt__<target>`.
pub(crate) fn unpacked_downstream_tests(
    root: &Path,
    release: bool,
) -> Result<Vec<(String, PathBuf)>> {
    package_user_crates(root, false)?;
    let unpacked = tempfile::Builder::new()
        .prefix("kiln-user-")
        .tempdir()
        .context("cannot create a temp dir")?;
    for krate in USER_CRATES {
        unpack(&packed(root, krate), unpacked.path())?;
    }
    let package_dir = root.join("target/downstream-package");
    // The patches below are unused by a packaging run, and cargo records
    // them in the example's lock file: put back the committed one.
    let lock = root.join("examples/downstream/Cargo.lock");
    let committed_lock =
        std::fs::read(&lock).with_context(|| format!("cannot read {}", lock.display()))?;
    let status = cargo(root)
        .args(["package", "--no-verify", "--allow-dirty", "--manifest-path"])
        .arg(root.join("examples/downstream/Cargo.toml"))
        .arg("--target-dir")
        .arg(&package_dir)
        // The crates just unpacked: `target/package/<crate>-0.1.0` exists
        // only after a verified `cargo package`.
        .args(patches(unpacked.path()))
        .status()
        .context("cannot run cargo package");
    if std::fs::read(&lock).ok().as_deref() != Some(committed_lock.as_slice()) {
        std::fs::write(&lock, &committed_lock)
            .with_context(|| format!("cannot restore {}", lock.display()))?;
    }
    let status = status?;
    if !status.success() {
        bail!("cargo package of examples/downstream failed ({status})");
    }
    unpack(
        &package_dir.join("package/downstream-0.1.0.crate"),
        unpacked.path(),
    )?;
    let crate_dir = unpacked.path().join("downstream-0.1.0");

    let mut build = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    build.current_dir(&crate_dir);
    for var in [
        "NVCC",
        "CUDA_PATH",
        "CUDA_HOME",
        "CUDA_ROOT",
        "KILN_CUDA",
        "DOWNSTREAM_CUDA",
        cuda_build::toolkit::STORE_VAR,
    ] {
        build.env_remove(var);
    }
    // Nor the user's toolkit store (`cargo kiln toolkit install`'s default,
    // under the data folder): an empty data folder of its own.
    build
        .env("XDG_DATA_HOME", unpacked.path().join("data"))
        .env("PATH", path_without_nvcc())
        .env("DOWNSTREAM_REQUIRE_CUDA", "1")
        .env("CARGO_TARGET_DIR", root.join("target/downstream-prebuilt"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .args([
            "test",
            "--no-run",
            "--message-format=json-render-diagnostics",
        ])
        .args(patches(unpacked.path()));
    if release {
        build.arg("--release");
    }
    let output = build.output().context("cannot run cargo")?;
    let stderr = String::from_utf8_lossy(&output.stderr);
    if !output.status.success() {
        bail!(
            "the unpacked downstream did not build with no toolkit ({}); if its kernels changed, \
             rerun `cargo xtask prebuilt --manifest-path examples/downstream/Cargo.toml`:\n{stderr}",
            output.status
        );
    }
    let Some(line) = stderr.lines().find(|l| l.starts_with(PREBUILT_LINE)) else {
        bail!(
            "the unpacked downstream's build did not say it embedded prebuilt kernels:\n{stderr}"
        );
    };
    println!("{line}");
    let mut tests = Vec::new();
    for msg in Message::parse_stream(output.stdout.as_slice()) {
        let Message::CompilerArtifact(artifact) = msg.context("cannot read cargo's output")? else {
            continue;
        };
        match artifact.executable {
            Some(path) if artifact.profile.test && artifact.target.name != "bindings" => {
                let name = format!("downstream-prebuilt__{}", artifact.target.name);
                tests.push((name, path.into_std_path_buf()));
            }
            _ => {}
        }
    }
    Ok(tests)
}

/// The crate that depends on kiln by git URL: a kernel of its own, built by
/// cuda-build, launched through gpu-core.
const GIT_USER_BUILD_RS: &str = r#"fn main() {
    let build = cuda_build::KernelBuild::new("kernels")
        .env_prefix("GITUSER")
        .include_dir(cuda_build::header::include_dir());
    if let Err(error) = build.run() {
        println!("cargo::error={}", error.to_string().lines().next().unwrap_or_default());
        std::process::exit(1);
    }
}
"#;

const GIT_USER_LIB_RS: &str = r#"//! A crate using kiln by git URL.

/// Its fat binaries.
pub mod modules {
    include!(concat!(env!("OUT_DIR"), "/gituser_modules.rs"));
}

/// Whether the build carried GPU code.
pub const CUDA_ENABLED: bool = cfg!(cuda_enabled);

/// The backend for its modules.
pub fn backend() -> Result<gpu_core::Backend, gpu_core::Error> {
    gpu_core::Backend::auto(modules::ALL)
}
"#;

const GIT_USER_KERNEL: &str = r#"#include "kiln.h"

KILN_KERNEL(scale, float *x, float a, unsigned n) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] *= a;
}
"#;

fn git_user(root: &Path) -> Result<()> {
    let head = String::from_utf8(
        Command::new("git")
            .current_dir(root)
            .args(["rev-parse", "HEAD"])
            .output()
            .context("cannot run git")?
            .stdout,
    )?
    .trim()
    .to_string();
    let tmp = tempfile::Builder::new()
        .prefix("kiln-git-user-")
        .tempdir()?;
    let bare = tmp.path().join("kiln.git");
    let status = Command::new("git")
        .args(["clone", "--quiet", "--bare"])
        .arg(root)
        .arg(&bare)
        .status()
        .context("cannot run git clone")?;
    if !status.success() {
        bail!("git clone of {} failed ({status})", root.display());
    }
    let url = format!("file://{}", bare.display());
    let krate = tmp.path().join("gituser");
    std::fs::create_dir_all(krate.join("src"))?;
    std::fs::create_dir_all(krate.join("kernels"))?;
    std::fs::write(
        krate.join("Cargo.toml"),
        format!(
            "[package]\nname = \"gituser\"\nversion = \"0.1.0\"\nedition = \"2021\"\npublish = false\n\n\
             [dependencies]\ngpu-core = {{ package = \"kiln-gpu-core\", git = {url:?}, rev = {head:?} }}\n\n\
             [build-dependencies]\ncuda-build = {{ package = \"kiln-cuda-build\", git = {url:?}, rev = {head:?} }}\n\n\
             [workspace]\n"
        ),
    )?;
    std::fs::write(krate.join("build.rs"), GIT_USER_BUILD_RS)?;
    std::fs::write(krate.join("src/lib.rs"), GIT_USER_LIB_RS)?;
    std::fs::write(krate.join("kernels/scale.cu"), GIT_USER_KERNEL)?;
    // Pinned to the versions kiln's own lock resolved (already downloaded).
    std::fs::copy(root.join("Cargo.lock"), krate.join("Cargo.lock"))?;
    let nvcc = crate::discovery::toolkit_present()
        .context(
            "no CUDA toolkit for the git-URL crate's CUDA build: run `cargo xtask toolkit install`",
        )?
        .nvcc;
    let target = root.join("target/git-user");
    for (what, env) in [
        ("CPU-only", vec![("GITUSER_CUDA", "off".into())]),
        (
            "with the toolkit",
            vec![
                ("GITUSER_REQUIRE_CUDA", "1".into()),
                ("NVCC", nvcc.display().to_string()),
            ],
        ),
    ] {
        let mut build = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
        build
            .current_dir(&krate)
            .env("CARGO_TARGET_DIR", &target)
            .args(["build", "--manifest-path"])
            .arg(krate.join("Cargo.toml"));
        for (key, value) in env {
            build.env(key, value);
        }
        let status = build.status().context("cannot run cargo")?;
        if !status.success() {
            bail!("the git-URL crate did not build {what} ({status})");
        }
        println!("git-URL crate built {what}");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write_crates(root: &Path, abi: &[u8]) {
        let dir = root.join("target/package");
        std::fs::create_dir_all(&dir).unwrap();
        for krate in USER_CRATES {
            let bytes: &[u8] = if *krate == "kiln-abi" { abi } else { b"same" };
            std::fs::write(dir.join(format!("{krate}-0.1.0.crate")), bytes).unwrap();
        }
    }

    /// A changed crate gets a new folder (so cargo unpacks it afresh), the
    /// same crates the same one; older folders go, files and links stay.
    #[test]
    fn verify_dir_follows_the_packed_crates() {
        let root = tempfile::tempdir().unwrap();
        write_crates(root.path(), b"abi one");
        let first = verify_dir(root.path()).unwrap();
        assert_eq!(first, verify_dir(root.path()).unwrap());
        std::fs::create_dir_all(first.join("package/tmp-registry")).unwrap();

        let parent = root.path().join("target/package-verify");
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("keep"), b"not kiln's").unwrap();
        std::os::unix::fs::symlink(outside.path(), parent.join("link")).unwrap();
        std::fs::write(parent.join("note"), b"a file").unwrap();

        write_crates(root.path(), b"abi two");
        let second = verify_dir(root.path()).unwrap();
        assert_ne!(first, second);
        assert_eq!(second.parent(), Some(parent.as_path()));
        assert!(!first.exists(), "the older folder stayed");
        assert!(parent.join("note").is_file());
        assert!(outside.path().join("keep").is_file());
        assert!(parent.join("link").symlink_metadata().is_ok());
    }

    /// Only folders named as `verify_dir` names them are removed; a link or
    /// a file in place of `target/package-verify` is refused, and what it
    /// points at is untouched.
    #[test]
    fn verify_dir_touches_only_its_own_folders() {
        let root = tempfile::tempdir().unwrap();
        write_crates(root.path(), b"abi");
        let parent = root.path().join("target/package-verify");
        let mine = parent.join("0123456789abcdef");
        let other = parent.join("user-notes");
        let upper = parent.join("0123456789ABCDEF");
        for dir in [&mine, &other, &upper] {
            std::fs::create_dir_all(dir).unwrap();
        }
        verify_dir(root.path()).unwrap();
        assert!(!mine.exists(), "kiln's older folder stayed");
        assert!(
            other.is_dir() && upper.is_dir(),
            "a folder kiln did not name went"
        );

        std::fs::remove_dir_all(&parent).unwrap();
        let elsewhere = tempfile::tempdir().unwrap();
        let victim = elsewhere.path().join("0123456789abcdef");
        std::fs::create_dir(&victim).unwrap();
        std::os::unix::fs::symlink(elsewhere.path(), &parent).unwrap();
        let error = verify_dir(root.path()).unwrap_err().to_string();
        assert!(error.contains("is a link or a file"), "{error}");
        assert!(victim.is_dir(), "removed through the link");

        std::fs::remove_file(&parent).unwrap();
        std::fs::write(&parent, b"a file").unwrap();
        let error = verify_dir(root.path()).unwrap_err().to_string();
        assert!(error.contains("remove it and rerun"), "{error}");
    }

    /// With no packed crates there is nothing to name the folder by.
    #[test]
    fn verify_dir_needs_the_packed_crates() {
        let root = tempfile::tempdir().unwrap();
        let error = verify_dir(root.path()).unwrap_err().to_string();
        assert!(error.contains("kiln-abi-0.1.0.crate"), "{error}");
    }
}
