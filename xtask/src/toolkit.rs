//! `cargo xtask toolkit [install] [--dir DIR]`: provisions the pinned CUDA
//! toolkit (and libclang for bindgen) from PyPI wheels into a venv, without
//! root, verifies it is whole, and reports what is installed.
//!
//! Layout of DIR (the contract with cuda-build's discovery):
//! `cuda` -> the toolkit root inside the venv, `libclang` -> the dir holding
//! libclang.so, `kiln-toolkit.toml` records what was installed.

mod install;
mod pins;
mod report;
mod verify;

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

use crate::cli::{ToolkitAction, ToolkitArgs};
use crate::workspace;
pub(crate) use pins::{CudaPins, LibclangPin, Pins};
pub(crate) use verify::{missing_essentials, verify, ESSENTIAL};

/// The record written into DIR after a successful install.
const RECORD_FILE: &str = "kiln-toolkit.toml";
/// DIR's link to the toolkit root.
const CUDA_LINK: &str = "cuda";
/// DIR's link to the folder holding libclang.so.
const LIBCLANG_LINK: &str = "libclang";

/// Entry point for `cargo xtask toolkit ...`.
pub(crate) fn run(args: &ToolkitArgs) -> Result<()> {
    let dir = match &args.dir {
        Some(d) => std::env::current_dir()
            .context("cannot read the current directory")?
            .join(d),
        None => workspace::default_toolkit_dir(),
    };
    match args.action {
        None => {
            print!("{}", report::report(&dir).render());
            Ok(())
        }
        Some(ToolkitAction::Install) => install::install(&dir),
    }
}

/// What an install wrote into `DIR/kiln-toolkit.toml`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Record {
    /// The pins it was installed from (a copy of `ci/toolkit.toml`).
    cuda: CudaPins,
    libclang: LibclangPin,
    installed: Installed,
}

/// Facts about the install itself.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Installed {
    /// python3 version the venv was made with.
    python: String,
    /// The toolkit root, relative to DIR.
    toolkit_root: String,
    /// `nvcc --version`'s release line at install time.
    nvcc: String,
    /// `pip freeze` of the venv: the pins plus what they pulled in.
    freeze: Vec<String>,
}

impl Record {
    fn pins(&self) -> Pins {
        Pins {
            cuda: self.cuda.clone(),
            libclang: self.libclang.clone(),
        }
    }

    fn read(dir: &Path) -> Option<Record> {
        let text = std::fs::read_to_string(dir.join(RECORD_FILE)).ok()?;
        toml::from_str(&text).ok()
    }

    fn to_toml(&self) -> Result<String> {
        let body = toml::to_string(self).context("cannot serialise the toolkit record")?;
        Ok(format!(
            "# Written by `cargo xtask toolkit install`; do not edit.\n\
             # It is compared with ci/toolkit.toml to decide whether to reinstall.\n\n{body}"
        ))
    }
}

/// Runs `root/bin/nvcc --version` and returns its `release` line.
fn nvcc_release(root: &Path) -> Result<String> {
    let nvcc = root.join("bin").join("nvcc");
    let out = Command::new(&nvcc)
        .arg("--version")
        .output()
        .with_context(|| format!("cannot run {}", nvcc.display()))?;
    if !out.status.success() {
        bail!(
            "`{} --version` failed: {}",
            nvcc.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines()
        .find(|l| l.contains("release"))
        .map(|l| l.trim().to_string())
        .with_context(|| format!("`{} --version` printed no release line", nvcc.display()))
}

/// `.NAME.SUFFIX`: a sibling of DIR that cannot be mistaken for it.
fn hidden(name: &OsStr, suffix: &str) -> OsString {
    let mut s = OsString::from(".");
    s.push(name);
    s.push(".");
    s.push(suffix);
    s
}

/// The siblings an install of DIR works in: `.NAME.partial` (being built),
/// `.NAME.old` (the install it replaces) and `.NAME.lock`.
fn sibling(dir: &Path, suffix: &str) -> Option<PathBuf> {
    Some(dir.parent()?.join(hidden(dir.file_name()?, suffix)))
}

/// A CUDA toolkit found for the CI cells.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Found {
    pub(crate) nvcc: PathBuf,
}

/// Finds the toolkit the way the build will (cuda-build's discovery, with
/// the project-local candidate); `None` under `KILN_CUDA=off`.
pub(crate) fn toolkit_present() -> Option<Found> {
    crate::discovery::kiln_discovery(&workspace::root())
        .and_then(|d| d.toolkit)
        .map(|tk| Found { nvcc: tk.nvcc })
}

#[cfg(test)]
mod tests {
    use super::pins::tests::PINS;
    use super::*;

    #[test]
    fn record_round_trips_and_compares_by_pins() {
        let pins = Pins::parse(PINS).unwrap();
        let record = Record {
            cuda: pins.cuda.clone(),
            libclang: pins.libclang.clone(),
            installed: Installed {
                python: "3.11.7".into(),
                toolkit_root: "venv/lib/python3.11/site-packages/nvidia/cu13".into(),
                nvcc: "Cuda compilation tools, release 13.0, V13.0.88".into(),
                freeze: vec!["libclang==18.1.1".into()],
            },
        };
        let text = record.to_toml().unwrap();
        let back: Record = toml::from_str(&text).unwrap();
        assert_eq!(back, record);
        assert_eq!(back.pins(), pins);
    }

    #[test]
    fn siblings_are_hidden_beside_the_dir() {
        let dir = Path::new("/w/target/cuda-toolkit");
        assert_eq!(
            sibling(dir, "partial").unwrap(),
            Path::new("/w/target/.cuda-toolkit.partial")
        );
        assert_eq!(sibling(Path::new("/"), "lock"), None);
    }
}
