//! `cargo kiln build --arch SPEC [--release]` (and `cargo xtask build`):
//! what each module's fat binary holds, read back with cuobjdump (the SASS
//! and PTX archs actually inside, not those asked for), its size, its
//! compile time and whether the kernel cache served it; as a table or JSON.

use std::path::{Path, PathBuf};
use std::process::Command;

use cuda_build::toolkit::Discovery;
use cuda_build::{ArchSpec, Manifest, SupportedArchs};
use serde::Serialize;

use crate::error::usage_error;

/// Checks an arch spec (given as `origin`) before anything is built:
/// against the toolkit that would be used, or CUDA 13.0's list when there
/// is none. A bad spec is a one-line usage error.
pub fn validate_spec(
    discovery: Option<&Discovery>,
    spec: &str,
    origin: &str,
) -> anyhow::Result<()> {
    let supported = discovery
        .and_then(|d| d.toolkit.as_ref())
        .and_then(|tk| tk.supported_archs().ok())
        .unwrap_or_else(SupportedArchs::cuda_13_0_builtin);
    let checked = ArchSpec::parse(spec, origin).and_then(|parsed| {
        if parsed.needs_native_probe() {
            // `native` is probed by the build itself, on the machine it runs on.
            return Ok(());
        }
        parsed
            .resolve(&supported, origin, || Ok(Vec::new()))
            .map(|_| ())
    });
    checked.map_err(|e| usage_error!("{e}"))
}

/// cuobjdump, to read back what a fat binary holds.
#[derive(Debug, Clone)]
pub struct Cuobjdump(Option<PathBuf>);

impl Cuobjdump {
    /// The toolkit's cuobjdump, when discovery found a toolkit that has one.
    pub fn find(discovery: Option<&Discovery>) -> Self {
        Self(
            discovery
                .and_then(|d| d.toolkit.as_ref())
                .map(|tk| tk.tool("cuobjdump"))
                .filter(|p| p.is_file()),
        )
    }

    /// The tool, when the toolkit has one.
    pub fn path(&self) -> Option<&Path> {
        self.0.as_deref()
    }

    /// `(sass, ptx)` arch lists inside `file`, e.g. `(["sm_80","sm_90"], ["compute_90"])`.
    pub fn contents(&self, file: &Path) -> Option<(Vec<String>, Vec<String>)> {
        let tool = self.0.as_ref()?;
        let list = |flag: &str| -> Option<Vec<String>> {
            let out = Command::new(tool).arg(flag).arg(file).output().ok()?;
            let text = String::from_utf8_lossy(&out.stdout);
            let mut archs: Vec<String> = text
                .lines()
                .filter_map(|l| l.rsplit('.').nth(1).map(str::to_string))
                .filter(|a| a.starts_with("sm_"))
                .collect();
            archs.sort();
            archs.dedup();
            Some(archs)
        };
        let ptx = list("--list-ptx")?
            .iter()
            .map(|a| a.replacen("sm_", "compute_", 1))
            .collect();
        Some((list("--list-elf")?, ptx))
    }
}

/// What a build made, module by module.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BuildReport {
    /// Whether GPU code was built.
    pub cuda_enabled: bool,
    /// Why not, for a CPU-only build.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu_only_reason: Option<String>,
    /// `CUDA 13.0.88 (project-local)`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub toolkit: Option<String>,
    /// The spec as written, and where it came from.
    pub arch_spec: String,
    pub arch_origin: String,
    /// Archs asked for.
    pub sass: Vec<String>,
    pub ptx: Vec<String>,
    pub modules: Vec<ModuleReport>,
    /// nvcc steps served from the kernel cache, and those that ran.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cache: Option<CacheLine>,
}

/// One module's line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ModuleReport {
    pub name: String,
    /// `fatbin` or `static`.
    pub link: String,
    /// Real archs whose SASS is in the output (cuobjdump); `None` when it
    /// could not be read (no cuobjdump).
    pub sass_inside: Option<Vec<String>>,
    /// Virtual archs whose PTX is in the output (cuobjdump).
    pub ptx_inside: Option<Vec<String>>,
    pub size_bytes: u64,
    /// nvcc's time for it in this build; `None`: nvcc did not run.
    pub compile_ms: Option<u64>,
    /// Compile steps restored from the kernel cache.
    pub cache_hits: usize,
    /// `compiled`, `cache`, `compiled+cache` or `up to date`.
    pub status: String,
}

/// The cache's totals for the build.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CacheLine {
    pub hits: usize,
    pub misses: usize,
    pub dir: PathBuf,
}

impl BuildReport {
    /// Reads each module's output back with `cuobjdump`.
    pub fn new(manifest: &Manifest, cuobjdump: &Cuobjdump) -> Self {
        let modules = manifest
            .modules
            .iter()
            .map(|m| {
                let inside = m.output.as_deref().and_then(|f| cuobjdump.contents(f));
                let status = match (m.compile_ms.is_some(), m.cache_hits > 0) {
                    (true, true) => "compiled+cache",
                    (true, false) => "compiled",
                    (false, true) => "cache",
                    (false, false) => "up to date",
                };
                ModuleReport {
                    name: m.name.clone(),
                    link: format!("{:?}", m.link).to_lowercase(),
                    sass_inside: inside.as_ref().map(|(s, _)| s.clone()),
                    ptx_inside: inside.map(|(_, p)| p),
                    size_bytes: m.size_bytes,
                    compile_ms: m.compile_ms,
                    cache_hits: m.cache_hits,
                    status: status.to_string(),
                }
            })
            .collect();
        Self {
            cuda_enabled: manifest.cuda_enabled,
            cpu_only_reason: manifest.cpu_only_reason.clone(),
            toolkit: manifest
                .toolkit
                .as_ref()
                .map(|t| format!("CUDA {} ({})", t.version, t.found_by)),
            arch_spec: manifest.arch_spec.clone(),
            arch_origin: manifest.arch_origin.clone(),
            sass: manifest.sass.clone(),
            ptx: manifest.ptx.clone(),
            modules,
            cache: manifest.cache.as_ref().map(|c| CacheLine {
                hits: c.hits,
                misses: c.misses,
                dir: c.dir.clone(),
            }),
        }
    }

    /// The table.
    pub fn render(&self) -> String {
        if !self.cuda_enabled {
            return format!(
                "CPU-only build: {}\n",
                self.cpu_only_reason.as_deref().unwrap_or("no toolkit")
            );
        }
        let mut text = format!(
            "archs `{}` from {}: SASS {} PTX {}; {}\n",
            self.arch_spec,
            self.arch_origin,
            self.sass.join(","),
            self.ptx.join(","),
            self.toolkit.as_deref().unwrap_or_default()
        );
        text.push_str(&format!(
            "{:<12} {:<7} {:<28} {:<16} {:>10} {:>10}  {}\n",
            "module", "link", "SASS (cuobjdump)", "PTX (cuobjdump)", "size", "compile", "status"
        ));
        let joined = |l: &Option<Vec<String>>| l.as_ref().map_or("?".to_string(), |l| l.join(","));
        for m in &self.modules {
            let compile = m
                .compile_ms
                .map_or("-".to_string(), |ms| format!("{:.1} s", ms as f64 / 1000.0));
            text.push_str(&format!(
                "{:<12} {:<7} {:<28} {:<16} {:>10} {:>10}  {}\n",
                m.name,
                m.link,
                joined(&m.sass_inside),
                joined(&m.ptx_inside),
                human_size(m.size_bytes),
                compile,
                m.status
            ));
        }
        if let Some(c) = &self.cache {
            text.push_str(&format!(
                "kernel cache: {} of {} nvcc steps served from {}\n",
                c.hits,
                c.hits + c.misses,
                c.dir.display()
            ));
        }
        text
    }
}

/// `12.0 KiB`, `1.5 MiB`.
pub fn human_size(bytes: u64) -> String {
    if bytes >= 1 << 20 {
        format!("{:.1} MiB", bytes as f64 / f64::from(1 << 20))
    } else {
        format!("{:.1} KiB", bytes as f64 / 1024.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bad_spec_is_a_one_line_usage_error() {
        let err = validate_spec(None, "sm_5", "--arch").unwrap_err();
        assert!(err.is::<crate::UsageError>());
        assert!(!err.to_string().contains('\n'), "{err}");
        assert!(err.to_string().contains("--arch"), "{err}");
        validate_spec(None, "sm_80,sm_90", "--arch").unwrap();
    }

    #[test]
    fn sizes_read_as_kib_or_mib() {
        assert_eq!(human_size(12 * 1024), "12.0 KiB");
        assert_eq!(human_size(3 << 19), "1.5 MiB");
    }
}
