//! The build manifest: what a kernel build produced, written as TOML into
//! OUT_DIR next to the fat binaries (`<prefix>-manifest.toml`), for tools
//! that report on or audit a build (a `links` crate hands its path on as
//! `DEP_<LINKS>_MANIFEST`).

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::config::LinkMode;
use crate::error::{io, Error};
use crate::resources::KernelResources;

/// The manifest's file name in OUT_DIR for a build with this env prefix
/// (`KILN` -> `kiln-manifest.toml`).
pub fn file_name(env_prefix: &str) -> String {
    format!("{}-manifest.toml", env_prefix.to_ascii_lowercase())
}

/// Format version; bumped on incompatible changes.
pub(crate) const FORMAT: u32 = 1;

/// What a kernel build produced.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Manifest {
    /// The format version (1); bumped on incompatible changes.
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
    /// Real archs of the build's spec (`sm_80`); a module with its own
    /// `archs` lists its own in [`ModuleEntry::sass`].
    pub sass: Vec<String>,
    /// Virtual archs of the build's spec (`compute_90`).
    pub ptx: Vec<String>,
    /// The toolkit used, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub toolkit: Option<ToolkitEntry>,
    /// One entry per module.
    pub modules: Vec<ModuleEntry>,
    /// What the kernel cache did (absent when it is off or unused).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache: Option<CacheReport>,
    /// The prebuilt kernels embedded instead of compiling (no toolkit).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prebuilt: Option<PrebuiltEntry>,
    /// The dir the build named files from (the package root).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base: Option<PathBuf>,
    /// The build's own include dirs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub include_dirs: Vec<PathBuf>,
    /// Every input of a CUDA build by content (what prebuilt kernels record).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub inputs: Vec<InputFile>,
}

/// One file a build read, by content.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct InputFile {
    /// Relative to the package root, or (with `include`) to an include dir
    /// (absolute when it lies under neither).
    pub path: PathBuf,
    /// Whether `path` is relative to an include dir.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub include: bool,
    /// SHA-256 of its content, in hex.
    pub sha256: String,
}

/// Prebuilt kernels a build embedded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct PrebuiltEntry {
    /// Their folder.
    pub dir: PathBuf,
    /// The toolkit that built them (`13.0.88`).
    pub toolkit: String,
}

/// What the kernel cache did in one build.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct CacheReport {
    /// The store.
    pub dir: PathBuf,
    /// nvcc steps served from it.
    pub hits: usize,
    /// nvcc steps that ran (and were stored).
    pub misses: usize,
}

/// The toolkit a build used.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
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
#[non_exhaustive]
pub struct ModuleEntry {
    /// The module's name (the `.cu` stem, or its `[modules.NAME]`).
    pub name: String,
    /// Its first source.
    pub source: PathBuf,
    /// Every source.
    #[serde(default)]
    pub sources: Vec<PathBuf>,
    /// How it links.
    pub link: LinkMode,
    /// Whether its sources are compiled separately and device-linked.
    #[serde(default)]
    pub rdc: bool,
    /// Real archs in its output.
    #[serde(default)]
    pub sass: Vec<String>,
    /// Virtual archs (PTX) in its output.
    #[serde(default)]
    pub ptx: Vec<String>,
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
    /// Compile steps this build restored from the kernel cache instead of
    /// running nvcc (0 when the cache is off or missed).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cache_hits: usize,
    /// Files it depends on (from `nvcc -MD`), system headers left out.
    pub deps: Vec<PathBuf>,
    /// Per-kernel, per-arch resource usage (fat-binary modules).
    pub kernels: Vec<KernelResources>,
    /// nvcc's warnings (cicc's, ptxas's, nvlink's, the host compiler's)
    /// from the steps this build wrote; the build prints each as a Cargo
    /// warning, so they are not left in a log file only.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

impl std::fmt::Display for CacheReport {
    /// `kernel cache: 3 of 4 nvcc steps served from /home/u/.cache/kiln`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "kernel cache: {} of {} nvcc steps served from {}",
            self.hits,
            self.hits + self.misses,
            self.dir.display()
        )
    }
}

fn is_zero(n: &usize) -> bool {
    *n == 0
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
    /// A manifest of a build of these archs that built nothing yet: the
    /// fields every kind of build fills in start empty.
    pub(crate) fn empty(arch_spec: &str, arch_origin: String) -> Self {
        Self {
            format: FORMAT,
            cuda_enabled: false,
            cpu_only_reason: None,
            arch_spec: arch_spec.to_string(),
            arch_origin,
            sass: Vec::new(),
            ptx: Vec::new(),
            toolkit: None,
            modules: Vec::new(),
            cache: None,
            prebuilt: None,
            base: None,
            include_dirs: Vec::new(),
            inputs: Vec::new(),
        }
    }

    /// TOML text.
    pub(crate) fn to_toml(&self) -> String {
        toml::to_string_pretty(self).expect("a manifest always serializes")
    }

    /// Reads a manifest file.
    pub fn read(path: &Path) -> Result<Self, Error> {
        let text = io(path, std::fs::read_to_string(path))?;
        toml::from_str(&text).map_err(|e| Error::Config {
            path: path.to_path_buf(),
            message: format!(
                "not a build manifest ({}); rebuild to rewrite it",
                e.message().split_whitespace().collect::<Vec<_>>().join(" ")
            ),
        })
    }
}
