//! CUDA toolkit discovery: looks in a fixed order, reports every place it
//! looked and why each was or was not taken, and asks the toolkit it takes for
//! its version and supported archs.
//!
//! Order: `NVCC`, `CUDA_PATH`, `CUDA_HOME`, `CUDA_ROOT`, `nvcc` on `PATH`, the
//! caller's own candidates (kiln passes its project-local install,
//! `target/cuda-toolkit/cuda`), the user's toolkit store (the toolkit
//! `cargo kiln toolkit install` made the default, for every crate and every
//! plain `cargo build`: [`user_store`]), `/usr/local/cuda`, `/opt/cuda`.
//!
//! `NVCC` names the compiler to run and may be any executable (a wrapper
//! script, a logging shim); the toolkit root for headers and libraries is then
//! found separately: the first of `CUDA_PATH`, `CUDA_HOME`, `CUDA_ROOT`,
//! `NVCC`'s dir's parent (also after resolving symlinks), the candidates and
//! the system dirs that holds `include/cuda_runtime.h`.

use std::ffi::OsString;
use std::fmt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::arch::SupportedArchs;
use crate::error::Error;
pub use crate::probe::{output_within, DEFAULT_PROBE_TIMEOUT, PROBE_TIMEOUT_VAR};

/// Environment variables discovery reads; a build script declares each with
/// `cargo::rerun-if-env-changed`.
pub(crate) const DISCOVERY_ENV_VARS: &[&str] = &[
    "NVCC",
    "CUDA_PATH",
    "CUDA_HOME",
    "CUDA_ROOT",
    "PATH",
    STORE_VAR,
    PROBE_TIMEOUT_VAR,
];

/// Moves the user's toolkit store (default: `kiln/toolkits` in the
/// platform's local data dir, `~/.local/share/kiln/toolkits` on Linux). One
/// store per user for every crate, like `KILN_CACHE_DIR`, so it carries no
/// crate's prefix.
pub const STORE_VAR: &str = "KILN_TOOLKIT_HOME";

/// The link in the store to the toolkit builds take, as rustup's default
/// toolchain: `<store>/default -> <one install>`, each install a folder with
/// `cuda` (the toolkit root) and `libclang` inside.
pub const STORE_DEFAULT: &str = "default";

/// The install the user's store makes the default (`<store>/default`, with
/// `cuda`, `libclang` and the install's record inside), where a store is known.
pub fn store_default<E: EnvSource + ?Sized>(env: &E) -> Option<PathBuf> {
    user_store(env).map(|store| store.join(STORE_DEFAULT))
}

/// The user's toolkit store: `$KILN_TOOLKIT_HOME`, else `kiln/toolkits` in
/// the platform's local data dir; `None` where neither is known. It lives
/// outside every target dir, so `cargo clean` leaves it alone.
pub fn user_store<E: EnvSource + ?Sized>(env: &E) -> Option<PathBuf> {
    match env.var_os(STORE_VAR).filter(|v| !v.is_empty()) {
        Some(dir) => Some(PathBuf::from(dir)),
        None => env
            .data_local_dir()
            .map(|d| d.join("kiln").join("toolkits")),
    }
}

/// Where environment variables come from: the process, or a test's table.
pub trait EnvSource {
    /// The variable's value, if set.
    fn var_os(&self, key: &str) -> Option<OsString>;

    /// The platform's local data dir for this user; a test's table has none
    /// unless it sets [`STORE_VAR`], so it never finds the real user's store.
    fn data_local_dir(&self) -> Option<PathBuf> {
        None
    }
}

/// The process environment.
#[derive(Debug, Clone, Copy, Default)]
pub struct ProcessEnv;

impl EnvSource for ProcessEnv {
    fn var_os(&self, key: &str) -> Option<OsString> {
        std::env::var_os(key)
    }

    fn data_local_dir(&self) -> Option<PathBuf> {
        dirs::data_local_dir()
    }
}

impl EnvSource for [(&str, &str)] {
    fn var_os(&self, key: &str) -> Option<OsString> {
        self.iter()
            .find(|(k, _)| *k == key)
            .map(|(_, v)| OsString::from(v))
    }
}

/// The probe limit `env` sets ([`PROBE_TIMEOUT_VAR`], whole seconds from 1
/// to a day), or the default; one line naming the variable otherwise.
pub fn probe_timeout<E: EnvSource + ?Sized>(env: &E) -> Result<Duration, Error> {
    crate::probe::limit_from(env.var_os(PROBE_TIMEOUT_VAR))
}

/// A toolkit version from `nvcc --version` (`release 13.0, V13.0.88`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ToolkitVersion {
    /// 13 for CUDA 13.0.
    pub major: u32,
    /// 0 for CUDA 13.0.
    pub minor: u32,
    /// 88 for V13.0.88; 0 when nvcc did not say.
    pub patch: u32,
}

impl ToolkitVersion {
    /// Parses the output of `nvcc --version`.
    pub(crate) fn parse_nvcc_version(text: &str) -> Option<Self> {
        let release = text.split("release ").nth(1)?;
        let (major, rest) = release.split_once('.')?;
        let minor: String = rest.chars().take_while(char::is_ascii_digit).collect();
        let patch = rest
            .split(", V")
            .nth(1)
            .and_then(|v| v.split(|c: char| !c.is_ascii_digit() && c != '.').next())
            .and_then(|v| v.rsplit('.').next())
            .and_then(|p| p.parse().ok())
            .unwrap_or(0);
        Some(Self {
            major: major.trim().parse().ok()?,
            minor: minor.parse().ok()?,
            patch,
        })
    }
}

impl fmt::Display for ToolkitVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)?;
        if self.patch != 0 {
            write!(f, ".{}", self.patch)?;
        }
        Ok(())
    }
}

/// A usable toolkit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Toolkit {
    /// The toolkit root (holds `bin/`, `include/`, `lib/` or `lib64/`).
    pub root: PathBuf,
    /// The nvcc executable.
    pub nvcc: PathBuf,
    /// From `nvcc --version`.
    pub version: ToolkitVersion,
    /// Which place of the search order found it (`CUDA_PATH`, `PATH`, ...).
    pub found_by: String,
}

impl Toolkit {
    /// Inspects a toolkit root, as discovery does for each candidate.
    /// `nvcc --version` may run for `limit`.
    pub(crate) fn at(root: &Path, found_by: &str, limit: Duration) -> Result<Self, ProbeOutcome> {
        let nvcc = root.join("bin").join("nvcc");
        Self::with_nvcc(root, &nvcc, found_by, limit)
    }

    fn with_nvcc(
        root: &Path,
        nvcc: &Path,
        found_by: &str,
        limit: Duration,
    ) -> Result<Self, ProbeOutcome> {
        if !root.is_dir() {
            return Err(ProbeOutcome::Missing(root.to_path_buf()));
        }
        if !nvcc.is_file() {
            return Err(ProbeOutcome::NoNvcc(root.to_path_buf()));
        }
        if !root.join("include").join("cuda_runtime.h").is_file() {
            return Err(ProbeOutcome::NoHeaders(root.to_path_buf()));
        }
        let output = output_within(Command::new(nvcc).arg("--version"), limit).map_err(|e| {
            ProbeOutcome::NvccFailed {
                nvcc: nvcc.to_path_buf(),
                reason: match e.kind() {
                    std::io::ErrorKind::TimedOut => format!("`{} --version` {e}", nvcc.display()),
                    _ => e.to_string(),
                },
            }
        })?;
        let text = String::from_utf8_lossy(&output.stdout);
        let version = ToolkitVersion::parse_nvcc_version(&text)
            .filter(|_| output.status.success())
            .ok_or_else(|| ProbeOutcome::NvccFailed {
                nvcc: nvcc.to_path_buf(),
                reason: format!(
                    "`{} --version` printed no CUDA release; {}",
                    nvcc.display(),
                    output.status
                ),
            })?;
        Ok(Self {
            root: root.to_path_buf(),
            nvcc: nvcc.to_path_buf(),
            version,
            found_by: found_by.to_string(),
        })
    }

    /// The library dir: `lib64/` where it exists (system installs), else
    /// `lib/` (the PyPI wheels).
    pub(crate) fn lib_dir(&self) -> PathBuf {
        let lib64 = self.root.join("lib64");
        if lib64.is_dir() {
            lib64
        } else {
            self.root.join("lib")
        }
    }

    /// A tool from `bin/` (`cuobjdump`, `ptxas`, ...).
    pub fn tool(&self, name: &str) -> PathBuf {
        self.root.join("bin").join(name)
    }

    /// The archs this toolkit compiles for (`nvcc --list-gpu-code` and
    /// `--list-gpu-arch`).
    pub fn supported_archs(&self) -> Result<SupportedArchs, Error> {
        let list = |flag: &str| -> Result<String, Error> {
            let output = output_within(
                Command::new(&self.nvcc).arg(flag),
                crate::probe::process_limit(),
            )
            .map_err(|source| Error::Spawn {
                program: self.nvcc.clone(),
                source,
            })?;
            if !output.status.success() {
                return Err(Error::ToolFailed {
                    command: format!("{} {flag}", self.nvcc.display()),
                    status: output.status.to_string(),
                    stderr: String::from_utf8_lossy(&output.stderr).trim().to_string(),
                });
            }
            Ok(String::from_utf8_lossy(&output.stdout).into_owned())
        };
        let supported = SupportedArchs::from_nvcc_lists(
            &format!("{}.{}", self.version.major, self.version.minor),
            &list("--list-gpu-code")?,
            &list("--list-gpu-arch")?,
        );
        // An empty list would fail later as if the crate's arch spec asked
        // for something this toolkit lacks.
        let empty = [
            ("--list-gpu-code", supported.sass.is_empty()),
            ("--list-gpu-arch", supported.ptx.is_empty()),
        ];
        if let Some((flag, _)) = empty.iter().find(|(_, empty)| *empty) {
            return Err(Error::NoArchs {
                command: format!("{} {flag}", self.nvcc.display()),
                found_by: self.found_by.clone(),
            });
        }
        Ok(supported)
    }
}

/// What one place of the search order held.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ProbeOutcome {
    /// The environment variable is not set.
    NotSet,
    /// `nvcc` is not on `PATH`.
    NotOnPath,
    /// The directory does not exist.
    Missing(PathBuf),
    /// The directory has no `bin/nvcc`.
    NoNvcc(PathBuf),
    /// The directory has no `include/cuda_runtime.h`.
    NoHeaders(PathBuf),
    /// `NVCC` names a program, but no toolkit root with
    /// `include/cuda_runtime.h` goes with it.
    NoToolkitRoot(PathBuf),
    /// nvcc is there but `nvcc --version` failed.
    NvccFailed {
        /// The nvcc that failed.
        nvcc: PathBuf,
        /// Why.
        reason: String,
    },
    /// A toolkit was found here (the first one is taken).
    Found(PathBuf),
    /// A toolkit may be here, but an earlier place was taken.
    NotReached,
    /// A toolkit is here, but an earlier place's was taken: this one is
    /// shadowed ([`discover_every`] only).
    Shadowed {
        /// Its root.
        root: PathBuf,
        /// From its `nvcc --version`.
        version: ToolkitVersion,
    },
}

/// One place of the search order and what it held.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Probe {
    /// `NVCC`, `CUDA_PATH`, `PATH`, `/usr/local/cuda`, ...
    pub place: String,
    /// What was there.
    pub outcome: ProbeOutcome,
}

impl fmt::Display for Probe {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let place = &self.place;
        match &self.outcome {
            ProbeOutcome::NotSet => write!(f, "{place} (not set)"),
            ProbeOutcome::NotOnPath => write!(f, "{place} (no nvcc)"),
            ProbeOutcome::Missing(p) => write!(f, "{place}={} (does not exist)", p.display()),
            ProbeOutcome::NoNvcc(p) => write!(f, "{place}={} (no bin/nvcc)", p.display()),
            ProbeOutcome::NoHeaders(p) => {
                write!(f, "{place}={} (no include/cuda_runtime.h)", p.display())
            }
            ProbeOutcome::NoToolkitRoot(p) => write!(
                f,
                "{place}={} (no toolkit root with include/cuda_runtime.h beside it; \
                 set CUDA_PATH to the toolkit it uses)",
                p.display()
            ),
            ProbeOutcome::NvccFailed { nvcc, reason } if place == "NVCC" => {
                write!(f, "{place}={} ({reason})", nvcc.display())
            }
            ProbeOutcome::NvccFailed { nvcc, reason } => {
                write!(f, "{place}: {} failed: {reason}", nvcc.display())
            }
            ProbeOutcome::Found(p) => write!(f, "{place}={} (taken)", p.display()),
            ProbeOutcome::NotReached => write!(f, "{place} (not reached)"),
            ProbeOutcome::Shadowed { root, version } => {
                write!(f, "{place}={} (CUDA {version}, shadowed)", root.display())
            }
        }
    }
}

/// The result of a search: every place looked at, and the toolkit taken.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Discovery {
    /// Every place, in search order.
    pub probes: Vec<Probe>,
    /// The first usable toolkit.
    pub toolkit: Option<Toolkit>,
}

impl Discovery {
    /// `NVCC (not set), CUDA_PATH=/x (no bin/nvcc), ...`: where it looked.
    pub(crate) fn looked_at(&self) -> String {
        self.probes
            .iter()
            .filter(|p| p.outcome != ProbeOutcome::NotReached)
            .map(Probe::to_string)
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// The toolkits found after the one taken ([`discover_every`]).
    pub fn shadowed(&self) -> impl Iterator<Item = &Probe> {
        self.probes
            .iter()
            .filter(|p| matches!(p.outcome, ProbeOutcome::Shadowed { .. }))
    }

    /// Places set explicitly (an env var) that held no usable toolkit: worth a
    /// warning even when a later place was taken.
    pub(crate) fn misconfigured(&self) -> impl Iterator<Item = &Probe> {
        self.probes.iter().filter(|p| {
            matches!(
                p.outcome,
                ProbeOutcome::Missing(_)
                    | ProbeOutcome::NoToolkitRoot(_)
                    | ProbeOutcome::NoNvcc(_)
                    | ProbeOutcome::NoHeaders(_)
                    | ProbeOutcome::NvccFailed { .. }
            ) && DISCOVERY_ENV_VARS.contains(&p.place.as_str())
        })
    }
}

/// Searches for a toolkit. `candidates` are the caller's own places, named by
/// label (`("project-local", path)`), searched after `PATH` and before the
/// system directories. Places after the one taken are not looked at.
pub fn discover<E: EnvSource + ?Sized>(env: &E, candidates: &[(String, PathBuf)]) -> Discovery {
    search(env, candidates, false)
}

/// [`discover`], and every place after the one taken looked at too: each
/// other toolkit found is [`ProbeOutcome::Shadowed`] (for `doctor`, which
/// shows what the toolkit taken passes over).
pub fn discover_every<E: EnvSource + ?Sized>(
    env: &E,
    candidates: &[(String, PathBuf)],
) -> Discovery {
    search(env, candidates, true)
}

fn search<E: EnvSource + ?Sized>(
    env: &E,
    candidates: &[(String, PathBuf)],
    every: bool,
) -> Discovery {
    let mut probes = Vec::new();
    let mut toolkit: Option<Toolkit> = None;
    // An invalid limit is refused by the build before it discovers.
    let limit = probe_timeout(env).unwrap_or(DEFAULT_PROBE_TIMEOUT);
    // Unless `every`, looked at only until a toolkit is taken: no nvcc runs
    // after that.
    let mut consider = |place: &str, probe: &dyn Fn() -> Result<Toolkit, ProbeOutcome>| {
        let looked = (toolkit.is_none() || every).then(probe);
        let outcome = match (&toolkit, looked) {
            (_, None) => ProbeOutcome::NotReached,
            (None, Some(Ok(found))) => {
                let outcome = ProbeOutcome::Found(found.root.clone());
                toolkit = Some(found);
                outcome
            }
            (Some(taken), Some(Ok(found))) if same_root(&taken.root, &found.root) => {
                ProbeOutcome::NotReached
            }
            (Some(_), Some(Ok(found))) => ProbeOutcome::Shadowed {
                root: found.root,
                version: found.version,
            },
            (_, Some(Err(outcome))) => outcome,
        };
        probes.push(Probe {
            place: place.to_string(),
            outcome,
        });
    };

    match env.var_os("NVCC").filter(|v| !v.is_empty()) {
        None => consider("NVCC", &|| Err(ProbeOutcome::NotSet)),
        Some(nvcc) => consider("NVCC", &|| {
            nvcc_as_given(env, &PathBuf::from(&nvcc), candidates, limit)
        }),
    }
    for var in ["CUDA_PATH", "CUDA_HOME", "CUDA_ROOT"] {
        match env.var_os(var).filter(|v| !v.is_empty()) {
            None => consider(var, &|| Err(ProbeOutcome::NotSet)),
            Some(root) => consider(var, &|| Toolkit::at(Path::new(&root), var, limit)),
        }
    }
    let on_path = env.var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .map(|dir| dir.join("nvcc"))
            .find(|nvcc| nvcc.is_file())
    });
    match on_path {
        None => consider("PATH", &|| Err(ProbeOutcome::NotOnPath)),
        Some(nvcc) => {
            // nvcc on PATH may be a symlink into the toolkit (/usr/bin/nvcc).
            let real = std::fs::canonicalize(&nvcc).unwrap_or(nvcc);
            let root = real
                .parent()
                .and_then(Path::parent)
                .unwrap_or(Path::new("/"));
            consider("PATH", &|| Toolkit::with_nvcc(root, &real, "PATH", limit));
        }
    }
    for (label, root) in candidates {
        consider(label, &|| Toolkit::at(root, label, limit));
    }
    // Named by the variable when it is set, so that a wrong value is warned
    // about like any other (`misconfigured`).
    let store_place = match env.var_os(STORE_VAR).filter(|v| !v.is_empty()) {
        Some(_) => STORE_VAR,
        None => "user store",
    };
    match store_default(env) {
        None => consider(store_place, &|| Err(ProbeOutcome::NotSet)),
        Some(default) => consider(store_place, &|| {
            Toolkit::at(&default.join("cuda"), store_place, limit)
        }),
    }
    for root in ["/usr/local/cuda", "/opt/cuda"] {
        consider(root, &|| Toolkit::at(Path::new(root), root, limit));
    }
    Discovery { probes, toolkit }
}

/// Two roots of one toolkit (a link to it, or the same path).
pub(crate) fn same_root(a: &Path, b: &Path) -> bool {
    a == b
        || matches!((std::fs::canonicalize(a), std::fs::canonicalize(b)), (Ok(a), Ok(b)) if a == b)
}

/// The toolkit for `NVCC=given`: `given` is the compiler to run, found on
/// `PATH` when it is a bare name; the root comes from where headers are.
fn nvcc_as_given<E: EnvSource + ?Sized>(
    env: &E,
    given: &Path,
    candidates: &[(String, PathBuf)],
    limit: Duration,
) -> Result<Toolkit, ProbeOutcome> {
    let program = if given.components().count() == 1 && !given.is_file() {
        env.var_os("PATH")
            .and_then(|path| {
                std::env::split_paths(&path)
                    .map(|dir| dir.join(given))
                    .find(|p| p.is_file())
            })
            .ok_or_else(|| ProbeOutcome::Missing(given.to_path_buf()))?
    } else {
        given.to_path_buf()
    };
    if !program.is_file() {
        return Err(ProbeOutcome::Missing(given.to_path_buf()));
    }
    let has_headers = |root: &Path| root.join("include").join("cuda_runtime.h").is_file();
    let beside = |nvcc: &Path| nvcc.parent().and_then(Path::parent).map(Path::to_path_buf);
    let from_env = ["CUDA_PATH", "CUDA_HOME", "CUDA_ROOT"]
        .into_iter()
        .filter_map(|var| env.var_os(var).filter(|v| !v.is_empty()).map(PathBuf::from));
    let fixed = beside(&program)
        .into_iter()
        .chain(
            std::fs::canonicalize(&program)
                .ok()
                .and_then(|p| beside(&p)),
        )
        .chain(candidates.iter().map(|(_, root)| root.clone()))
        .chain(["/usr/local/cuda", "/opt/cuda"].map(PathBuf::from));
    let root = from_env
        .chain(fixed)
        .find(|root| has_headers(root))
        .ok_or_else(|| ProbeOutcome::NoToolkitRoot(given.to_path_buf()))?;
    Toolkit::with_nvcc(&root, &program, "NVCC", limit).map_err(|outcome| match outcome {
        ProbeOutcome::NvccFailed { reason, .. } => ProbeOutcome::NvccFailed {
            nvcc: given.to_path_buf(),
            reason,
        },
        other => other,
    })
}

#[cfg(test)]
mod tests;
