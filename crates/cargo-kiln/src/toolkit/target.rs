//! `toolkit install --target <triple>`: the target's static CUDA runtime
//! (its pinned, hashed wheels from `[targets.<triple>]` of toolkit.toml),
//! installed beside the toolkit in `DIR/targets/<nvcc's dir>/` for cross
//! builds. nvcc itself stays the build host's: device code does not depend
//! on the host, and host code is compiled by the target's C++ compiler.
//!
//! Layout (the contract with cuda-build's `cross` module):
//! `DIR/targets/sbsa-linux/lib` -> the wheel's `nvidia/cu13/lib` (with
//! `libcudart_static.a`), `include` likewise, `wheels/` what pip installed,
//! `kiln-target.toml` the record. Built in `.sbsa-linux.partial` and
//! renamed into place under a lock, as the toolkit is.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use cuda_build::cross::{nvcc_target_dir, RUNTIME_LIB, TARGETS_DIR};
use serde::{Deserialize, Serialize};

use super::install::{
    check_interrupted, check_replaceable, pip_install_with, relative_to, remove_stale,
    stop_on_interrupt, symlink, InstallLock, StagingDir,
};
use super::{sibling, Pins, TargetPins, CUDA_LINK};
use crate::error::usage_error;

/// The record of a target's install, in its folder.
const TARGET_RECORD: &str = "kiln-target.toml";

/// What `kiln-target.toml` holds: the target and the pins it came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct TargetRecord {
    target: String,
    pins: TargetPins,
}

/// Whether `folder` holds a target record as an install writes it (a
/// target install made before kiln's mark).
pub(super) fn written_in(folder: &Path) -> bool {
    super::written_in::<TargetRecord>(folder, TARGET_RECORD)
}

/// The folder of `target`'s runtime beside the toolkit in `dir`, and its pins;
/// one line when the target has none.
pub(super) fn target_dir(dir: &Path, target: &str, pins: &Pins) -> Result<(PathBuf, TargetPins)> {
    let pinned: Vec<&str> = pins.targets.keys().map(String::as_str).collect();
    let (Some(nvcc_dir), Some(target_pins)) = (nvcc_target_dir(target), pins.targets.get(target))
    else {
        return Err(usage_error!(
            "no CUDA runtime is pinned for target `{target}`; cargo-kiln's toolkit.toml pins: {}",
            if pinned.is_empty() {
                "none".to_string()
            } else {
                pinned.join(", ")
            }
        ));
    };
    Ok((dir.join(TARGETS_DIR).join(nvcc_dir), target_pins.clone()))
}

/// Whether `folder` holds `target_pins` whole: the record matches, and the
/// runtime and every file the wheels' RECORDs list are there.
fn up_to_date(folder: &Path, target: &str, target_pins: &TargetPins) -> Result<(), String> {
    let text = std::fs::read_to_string(folder.join(TARGET_RECORD))
        .map_err(|_| "not installed".to_string())?;
    let record: TargetRecord =
        toml::from_str(&text).map_err(|_| format!("damaged: unreadable {TARGET_RECORD}"))?;
    if record.target != target || record.pins != *target_pins {
        return Err("installed pins differ from cargo-kiln's toolkit.toml".to_string());
    }
    if !folder.join("lib").join(RUNTIME_LIB).is_file() {
        return Err(format!("damaged: no lib/{RUNTIME_LIB}"));
    }
    let wheels = folder.join("wheels");
    for wheel in &target_pins.wheels {
        let files = super::verify::wheel_files(&wheels, &wheel.package)
            .ok_or_else(|| format!("damaged: {} is not installed", wheel.package))?;
        if let Some((file, _)) = files.iter().find(|(file, size)| {
            std::fs::metadata(wheels.join(file))
                .map(|m| size.is_some_and(|s| s != m.len()))
                .unwrap_or(true)
        }) {
            return Err(format!("damaged: wheels/{file} missing or changed"));
        }
    }
    Ok(())
}

/// Installs `target`'s runtime beside the toolkit in `dir` (which must be
/// installed and whole: the caller installs it first), unless it is there.
pub(super) fn install(dir: &Path, target: &str) -> Result<()> {
    let pins = Pins::pinned()?;
    let (folder, target_pins) = target_dir(dir, target, &pins)?;
    let shown = folder.display();
    let targets = folder.parent().context("the target folder has no parent")?;
    std::fs::create_dir_all(targets)
        .with_context(|| format!("cannot create {}", targets.display()))?;
    let _lock = InstallLock::acquire(&sibling(&folder, "lock").context("no folder name")?)?;
    check_replaceable(&folder)?;
    remove_stale(&folder)?;
    let why = match up_to_date(&folder, target, &target_pins) {
        Ok(()) => {
            println!("target runtime for {target} up to date at {shown}");
            return Ok(());
        }
        Err(why) => why,
    };
    stop_on_interrupt();
    println!(
        "target runtime for {target}: {why}; installing {} ({}) into {shown}",
        target_pins
            .wheels
            .iter()
            .map(|w| w.package.as_str())
            .collect::<Vec<_>>()
            .join(" "),
        target_pins.platform
    );
    let staging = StagingDir::create(sibling(&folder, "partial").context("no folder name")?)?;
    let tmp = staging.path();
    let requirements = tmp.join("requirements.txt");
    let lines: String = target_pins
        .wheels
        .iter()
        .map(|w| format!("{} --hash=sha256:{}\n", w.package, w.sha256))
        .collect();
    std::fs::write(&requirements, lines)
        .with_context(|| format!("cannot write {}", requirements.display()))?;
    let wheels = tmp.join("wheels");
    let (wheels_arg, requirements_arg) = (wheels.to_string_lossy(), requirements.to_string_lossy());
    // The toolkit's venv runs pip; `--platform` fetches the target's wheels
    // whatever this machine is, and `--require-hashes` checks each file.
    pip_install_with(
        &dir.join("venv"),
        &[
            "--no-deps",
            "--no-compile",
            "--require-hashes",
            "--platform",
            &target_pins.platform,
            "--target",
            &wheels_arg,
        ],
        &["-r", &requirements_arg],
    )?;
    check_interrupted()?;
    let root = wheels.join("nvidia").join("cu13");
    if !root.join("lib").join(RUNTIME_LIB).is_file() {
        bail!(
            "the {target} wheels installed no nvidia/cu13/lib/{RUNTIME_LIB}; check [targets.{target}] in cargo-kiln's toolkit.toml"
        );
    }
    for sub in ["lib", "include"] {
        symlink(&relative_to(&root.join(sub), tmp)?, &tmp.join(sub))?;
    }
    let record = TargetRecord {
        target: target.to_string(),
        pins: target_pins.clone(),
    };
    let body = toml::to_string(&record).context("cannot serialise the target record")?;
    std::fs::write(
        tmp.join(TARGET_RECORD),
        format!("# Written by `cargo kiln toolkit install --target`; do not edit.\n\n{body}"),
    )
    .with_context(|| format!("cannot write {TARGET_RECORD}"))?;
    std::fs::remove_file(&requirements).ok();
    staging.commit(&folder, &sibling(&folder, "old").context("no folder name")?)?;
    up_to_date(&folder, target, &target_pins)
        .map_err(|why| anyhow::anyhow!("the installed {target} runtime is not whole: {why}"))?;
    println!(
        "target runtime for {target} installed at {shown}: cross builds with the toolkit at {} link its {RUNTIME_LIB}",
        dir.join(CUDA_LINK).display()
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_target_without_pins_is_one_line_naming_the_pinned_ones() {
        let pins = Pins::pinned().unwrap();
        let dir = Path::new("/tk");
        for target in [
            "riscv64gc-unknown-linux-gnu",
            "x86_64-unknown-linux-gnu",
            "",
        ] {
            let err = target_dir(dir, target, &pins).unwrap_err().to_string();
            assert_eq!(
                err,
                format!("no CUDA runtime is pinned for target `{target}`; cargo-kiln's toolkit.toml pins: aarch64-unknown-linux-gnu")
            );
        }
        let (folder, _) = target_dir(dir, "aarch64-unknown-linux-gnu", &pins).unwrap();
        assert_eq!(folder, Path::new("/tk/targets/sbsa-linux"));
    }

    #[test]
    fn a_damaged_target_install_is_not_up_to_date() {
        let pins = Pins::pinned().unwrap();
        let target = "aarch64-unknown-linux-gnu";
        let tmp = tempfile::tempdir().unwrap();
        let (folder, target_pins) = target_dir(tmp.path(), target, &pins).unwrap();
        let check = || up_to_date(&folder, target, &target_pins).unwrap_err();
        assert_eq!(check(), "not installed");
        std::fs::create_dir_all(&folder).unwrap();
        std::fs::write(folder.join(TARGET_RECORD), "target = [").unwrap();
        assert!(check().contains("unreadable"), "{}", check());
        let mut other = target_pins.clone();
        other.platform = "manylinux2014_x86_64".into();
        let record = |pins: &TargetPins| {
            let body = toml::to_string(&TargetRecord {
                target: target.into(),
                pins: pins.clone(),
            })
            .unwrap();
            std::fs::write(folder.join(TARGET_RECORD), body).unwrap();
        };
        record(&other);
        assert!(check().contains("pins differ"), "{}", check());
        record(&target_pins);
        assert_eq!(check(), format!("damaged: no lib/{RUNTIME_LIB}"));
        std::fs::create_dir_all(folder.join("lib")).unwrap();
        std::fs::write(folder.join("lib").join(RUNTIME_LIB), "").unwrap();
        assert!(check().contains("is not installed"), "{}", check());
    }
}
