//! `cargo kiln toolkit [install] [--dir DIR]` (and `cargo xtask toolkit`):
//! provisions the pinned CUDA toolkit (and libclang for bindgen) from PyPI
//! wheels into a venv, without root, verifies it is whole, and reports what
//! is installed. The pins (`toolkit.toml`) are compiled into the binary, so
//! an installed `cargo kiln` carries them.
//!
//! Layout of DIR (the contract with cuda-build's discovery):
//! `cuda` -> the toolkit root inside the venv, `libclang` -> the dir holding
//! libclang.so, `kiln-toolkit.toml` records what was installed, and
//! `.kiln-toolkit-install` is kiln's mark: only a folder carrying it (or an
//! earlier install's whole record) is ever replaced or removed.

mod install;
mod pins;
mod report;
mod target;
mod verify;

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

pub use pins::{CudaPins, LibclangPin, Pins, TargetPins, TargetWheel};
pub use verify::{missing_essentials, verify, ESSENTIAL};

/// The record written into DIR after a successful install.
const RECORD_FILE: &str = "kiln-toolkit.toml";
/// kiln's mark on a folder it made (DIR, `.NAME.partial`, `.NAME.old`):
/// written first into every staging folder, so an install, a partial one
/// or a replaced one carries it, and a user's folder never does.
const MARK_FILE: &str = ".kiln-toolkit-install";
/// The mark's whole content.
const MARK_TEXT: &str =
    "written by `cargo kiln toolkit install`: kiln replaces or removes this folder\n";
/// DIR's link to the toolkit root.
const CUDA_LINK: &str = "cuda";
/// DIR's link to the folder holding libclang.so.
const LIBCLANG_LINK: &str = "libclang";

/// Where an install goes, and what it touches after.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Place {
    /// The install dir (`cuda` and `libclang` links inside).
    pub dir: PathBuf,
    /// Whether it is the dir the project's build looks in by itself; else
    /// the install says how to point discovery at it.
    pub is_default: bool,
    /// Files whose mtime the install bumps so that a build script that ran
    /// CPU-only reruns and finds the toolkit (a build script cannot watch a
    /// dir that does not exist yet).
    pub touch: Vec<PathBuf>,
    /// The user store's `default` link, pointed at `dir` once it is
    /// installed and whole, so every plain `cargo build` finds it.
    pub default_link: Option<PathBuf>,
}

impl Place {
    /// `dir` given on the command line (relative to the current dir), or
    /// `default`.
    pub fn new(given: Option<&Path>, default: PathBuf, touch: Vec<PathBuf>) -> Result<Self> {
        Ok(match given {
            Some(d) => Self {
                dir: std::env::current_dir()
                    .context("cannot read the current directory")?
                    .join(d),
                is_default: false,
                touch,
                default_link: None,
            },
            None => Self {
                dir: default,
                is_default: true,
                touch,
                default_link: None,
            },
        })
    }

    /// The install in the user's toolkit store (`cuda-<version>` of the pins
    /// inside `store`), made the store's default after it is installed; or
    /// `given` (relative to the current dir), which becomes no default.
    pub fn in_store(given: Option<&Path>, store: &Path, touch: Vec<PathBuf>) -> Result<Self> {
        if given.is_some() {
            return Self::new(given, PathBuf::new(), touch);
        }
        let pins = Pins::pinned()?;
        Ok(Self {
            dir: store.join(format!("cuda-{}", pins.cuda.version)),
            is_default: true,
            touch,
            default_link: Some(store.join(cuda_build::toolkit::STORE_DEFAULT)),
        })
    }
}

/// The user's toolkit store ([`cuda_build::toolkit::user_store`]), or one
/// line saying how to name one.
pub fn user_store() -> Result<PathBuf> {
    cuda_build::toolkit::user_store(&cuda_build::toolkit::ProcessEnv).ok_or_else(|| {
        crate::error::usage_error!(
            "no local data dir is known for this user; set {} to a folder for kiln's toolkits, or pass --dir",
            cuda_build::toolkit::STORE_VAR
        )
    })
}

/// What is installed in `dir`, as labelled lines.
pub fn report(dir: &Path) -> String {
    report::report(dir).render()
}

/// Installs the pins into `place.dir` unless it is up to date and whole;
/// repairs (reinstalls) a damaged one.
pub fn install(place: &Place) -> Result<()> {
    install::install(place)
}

/// Installs the toolkit as [`install`] does, then, for a cross `target`
/// (`aarch64-unknown-linux-gnu`), its pinned static CUDA runtime beside it
/// in `DIR/targets/`, where cuda-build looks for that TARGET.
pub fn install_for(place: &Place, target: Option<&str>) -> Result<()> {
    install::install(place)?;
    match target {
        Some(target) => target::install(&place.dir, target),
        None => Ok(()),
    }
}

/// What an install wrote into `DIR/kiln-toolkit.toml`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Record {
    /// The pins it was installed from (a copy of `cargo-kiln's toolkit.toml`).
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
    fn read(dir: &Path) -> Option<Record> {
        let text = std::fs::read_to_string(dir.join(RECORD_FILE)).ok()?;
        toml::from_str(&text).ok()
    }

    fn to_toml(&self) -> Result<String> {
        let body = toml::to_string(self).context("cannot serialise the toolkit record")?;
        Ok(format!(
            "# Written by `cargo kiln toolkit install`; do not edit.\n\
             # It is compared with cargo-kiln's toolkit.toml to decide whether to reinstall.\n\n{body}"
        ))
    }
}

/// Runs `root/bin/nvcc --version` and returns its `release` line.
fn nvcc_release(root: &Path) -> Result<String> {
    let nvcc = root.join("bin").join("nvcc");
    let limit = cuda_build::toolkit::probe_timeout(&cuda_build::toolkit::ProcessEnv)?;
    let out = cuda_build::toolkit::output_within(Command::new(&nvcc).arg("--version"), limit)
        .with_context(|| format!("cannot run `{} --version`", nvcc.display()))?;
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

/// Whether kiln made the folder at `path`: a folder (not a link) holding
/// kiln's mark, or an install's whole record from before the mark.
fn kiln_made(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok_and(|m| m.is_dir())
        && (read_regular(&path.join(MARK_FILE), MARK_TEXT.len() as u64)
            .is_some_and(|text| text == MARK_TEXT)
            || written_in::<Record>(path, RECORD_FILE)
            || target::written_in(path))
}

/// Whether `dir` holds a whole record `file` as an install writes it
/// (kiln's header and every field of `T`), as a regular file: installs made
/// before the mark are still recognised; a user's file of that name is not.
fn written_in<T: serde::de::DeserializeOwned>(dir: &Path, file: &str) -> bool {
    read_regular(&dir.join(file), 1 << 20).is_some_and(|text| {
        text.starts_with("# Written by `cargo kiln toolkit install")
            && toml::from_str::<T>(&text).is_ok()
    })
}

/// Writes kiln's mark into the folder `dir` that it just created.
fn mark(dir: &Path) -> Result<()> {
    std::fs::write(dir.join(MARK_FILE), MARK_TEXT)
        .with_context(|| format!("cannot write {MARK_FILE} in {}", dir.display()))
}

/// The text of the regular file at `path` of at most `bound` bytes, read
/// without following a symlink or waiting on a FIFO (cuda-build's reader of
/// untrusted files); `None` for anything else.
fn read_regular(path: &Path, bound: u64) -> Option<String> {
    cuda_build::regular::read_text(path, bound, cuda_build::regular::Links::Refuse)
        .ok()
        .flatten()
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
        assert_eq!((&back.cuda, &back.libclang), (&pins.cuda, &pins.libclang));
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
