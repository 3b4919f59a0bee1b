//! The build manifest: what a kernel build produced, written as TOML into
//! OUT_DIR next to the fat binaries. `cargo xtask build` prints it and
//! `cargo xtask ptx-audit` checks it.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::config::LinkMode;
use crate::error::{io, Error};
use crate::resources::KernelResources;

/// The manifest's file name in OUT_DIR.
pub const MANIFEST_FILE: &str = "kiln-manifest.toml";

/// Format version; bumped on incompatible changes.
pub const FORMAT: u32 = 1;

/// What a kernel build produced.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    /// [`FORMAT`].
    pub format: u32,
    /// Whether GPU code was built.
    pub cuda_enabled: bool,
    /// Why not, for a CPU-only build.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_only_reason: Option<String>,
    /// The arch spec as written.
    pub arch_spec: String,
    /// Where the spec came from (`KILN_CUDA_ARCHS`, a config file, ...).
    pub arch_origin: String,
    /// Real archs in every fat binary (`sm_80`).
    pub sass: Vec<String>,
    /// Virtual archs in every fat binary (`compute_90`).
    pub ptx: Vec<String>,
    /// The toolkit used, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub toolkit: Option<ToolkitEntry>,
    /// One entry per `.cu` module.
    pub modules: Vec<ModuleEntry>,
}

/// The toolkit a build used.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolkitEntry {
    /// Toolkit root.
    pub root: PathBuf,
    /// `13.0.88`.
    pub version: String,
    /// Which place of the search order found it.
    pub found_by: String,
}

/// One module.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModuleEntry {
    /// The `.cu` stem.
    pub name: String,
    /// The `.cu` file.
    pub source: PathBuf,
    /// How it links.
    pub link: LinkMode,
    /// The fat binary or static library (absent in a CPU-only build).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<PathBuf>,
    /// Size of `output` in bytes.
    pub size_bytes: u64,
    /// Whether this build ran nvcc for it (false: it was up to date).
    pub compiled: bool,
    /// How long nvcc took, when it ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compile_ms: Option<u64>,
    /// Files it depends on (from `nvcc -MD`), system headers left out.
    pub deps: Vec<PathBuf>,
    /// Per-kernel, per-arch resource usage (fat-binary modules).
    pub kernels: Vec<KernelResources>,
}

impl ModuleEntry {
    /// Distinct kernel names, in first-seen order.
    pub fn kernel_names(&self) -> Vec<&str> {
        let mut names: Vec<&str> = Vec::new();
        for k in &self.kernels {
            if !names.contains(&k.kernel.as_str()) {
                names.push(&k.kernel);
            }
        }
        names
    }
}

impl Manifest {
    /// TOML text.
    pub fn to_toml(&self) -> String {
        toml::to_string_pretty(self).expect("a manifest always serializes")
    }

    /// Reads a manifest file.
    pub fn read(path: &Path) -> Result<Self, Error> {
        let text = io(path, std::fs::read_to_string(path))?;
        toml::from_str(&text).map_err(|e| Error::Config {
            path: path.to_path_buf(),
            message: e.to_string(),
        })
    }
}
