//! `cargo kiln doctor` (and `cargo xtask doctor`): what this machine offers
//! a crate's kernel build and run: the toolkit search (every toolkit found,
//! the one taken and those it shadows), version and supported archs, the
//! driver floor the kernels serve, libclang for codegen, the driver and
//! GPUs, and what the default build of the crate's kernels dir would produce.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Result};
use cuda_build::floor::{DriverFloor, PtxIsa};
use cuda_build::toolkit::{Discovery, Toolkit};
use cuda_build::{ArchSpec, KernelConfig, SupportedArchs};
use serde::Serialize;

use crate::project::every_toolkit_with_local;
use crate::toolkit;

/// What the doctor looks at: one crate's kernel build.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Subject {
    /// The build script's env prefix (`KILN`), when known: `<P>_CUDA=off`
    /// and `<P>_CUDA_ARCHS` are read with it.
    pub env_prefix: Option<String>,
    /// The kernels dir (`kiln.toml` and the `.cu` files).
    pub kernels_dir: PathBuf,
    /// How messages name it (`kernels`).
    pub kernels_shown: String,
    /// The project-local toolkit install dir.
    pub toolkit_dir: PathBuf,
    /// The crate's `kiln-audit.toml`, whose `[driver]` is the floor its
    /// kernels serve (it need not exist).
    pub audit_file: PathBuf,
}

/// Everything the report says, gathered first so the rendering is testable.
#[derive(Debug)]
pub struct Findings {
    /// `<P>_CUDA=off` when that turned the search off.
    pub(crate) off_by: Option<String>,
    /// The toolkit search, every place looked at; `None` when `<P>_CUDA=off`.
    pub(crate) discovery: Option<Discovery>,
    /// The driver floor the kernels serve, or why it could not be read.
    pub(crate) floor: Result<DriverFloor, String>,
    /// What the toolkit found supports (`None` without one).
    pub(crate) supported: Option<Result<SupportedArchs, String>>,
    /// libclang's location, or why none was found.
    pub(crate) libclang: Result<PathBuf, String>,
    /// `nvidia-smi` lines (name, compute capability, memory, driver), or why not.
    pub(crate) gpus: Result<Vec<String>, String>,
    /// The arch spec in force and where it came from.
    pub(crate) spec: (String, String),
    /// Kernel modules with their link modes.
    pub(crate) modules: Vec<(String, String)>,
    /// What is broken, each with what to do (a damaged toolkit).
    pub(crate) problems: Vec<String>,
}

/// The findings as JSON (`--json`).
#[derive(Debug, Serialize)]
pub struct Json<'a> {
    pub toolkit: Option<String>,
    pub toolkit_root: Option<&'a Path>,
    pub found_by: Option<&'a str>,
    /// The other toolkits found, after the one taken (`PLACE=ROOT (CUDA V, shadowed)`).
    pub shadowed: Vec<String>,
    /// `13.0`, the oldest CUDA driver the kernels serve.
    pub driver_floor: Option<&'a str>,
    pub supported_archs: Option<String>,
    pub libclang: Option<&'a Path>,
    pub gpus: Vec<String>,
    pub arch_spec: &'a str,
    pub arch_origin: &'a str,
    pub modules: Vec<(&'a str, &'a str)>,
    pub problems: &'a [String],
}

impl Findings {
    /// Whether anything needs fixing.
    pub fn problem_count(&self) -> usize {
        self.problems.len()
    }

    /// The JSON form.
    pub fn json(&self) -> Json<'_> {
        let tk = self.discovery.as_ref().and_then(|d| d.toolkit.as_ref());
        Json {
            toolkit: tk.map(|t| t.version.to_string()),
            toolkit_root: tk.map(|t| t.root.as_path()),
            found_by: tk.map(|t| t.found_by.as_str()),
            shadowed: self
                .discovery
                .iter()
                .flat_map(Discovery::shadowed)
                .map(ToString::to_string)
                .collect(),
            driver_floor: self.floor.as_ref().ok().map(|f| f.min_cuda.as_str()),
            supported_archs: match &self.supported {
                Some(Ok(s)) => Some(s.describe()),
                _ => None,
            },
            libclang: self.libclang.as_deref().ok(),
            gpus: self.gpus.clone().unwrap_or_default(),
            arch_spec: &self.spec.0,
            arch_origin: &self.spec.1,
            modules: self
                .modules
                .iter()
                .map(|(n, l)| (n.as_str(), l.as_str()))
                .collect(),
            problems: &self.problems,
        }
    }
}

/// The one-line failure for findings with problems.
pub fn failure(findings: &Findings) -> anyhow::Error {
    anyhow::anyhow!(
        "doctor: {} problem(s), listed above with what to do",
        findings.problems.len()
    )
}

/// Whether `<P>_CUDA` turns the toolkit off.
fn turned_off(prefix: Option<&str>) -> Option<String> {
    let var = format!("{}_CUDA", prefix?);
    std::env::var(&var)
        .is_ok_and(|v| v == "off" || v == "0")
        .then(|| format!("{var}=off"))
}

/// A toolkit that discovery finds but a build cannot use (files missing),
/// and a damaged project-local install.
fn toolkit_problems(discovery: Option<&Discovery>, install_dir: &Path) -> Vec<String> {
    let mut problems = Vec::new();
    // The project-local install and the user store's default are verified
    // file by file against their pins.
    let store_default =
        cuda_build::toolkit::store_default(&cuda_build::toolkit::ProcessEnv).filter(|d| d.exists());
    let local_repair = format!(
        "run `cargo kiln toolkit install --dir {}` to repair it",
        install_dir.display()
    );
    let installs = [
        Some((install_dir.to_path_buf(), local_repair)),
        store_default.map(|d| {
            (
                d,
                "run `cargo kiln toolkit install` to repair it".to_string(),
            )
        }),
    ];
    for (dir, repair) in installs.into_iter().flatten() {
        if !dir.exists() {
            continue;
        }
        match toolkit::Pins::pinned() {
            Ok(pins) => {
                if let Err(damage) = toolkit::verify(&dir, &pins) {
                    problems.push(format!("{}: {damage}; {repair}", dir.display()));
                }
            }
            Err(e) => problems.push(format!("{e:#}")),
        }
    }
    // Any other toolkit, for the files a build needs.
    let other = discovery
        .and_then(|d| d.toolkit.as_ref())
        .filter(|tk| problems.is_empty() || !tk.root.starts_with(install_dir));
    if let Some(tk) = other {
        let missing = toolkit::missing_essentials(&tk.root);
        if !missing.is_empty() {
            let named: Vec<String> = missing
                .iter()
                .map(|file| {
                    let why = toolkit::ESSENTIAL
                        .iter()
                        .find(|(f, _)| f == file)
                        .map_or("", |(_, why)| why);
                    format!("{file} ({why})")
                })
                .collect();
            let advice = if tk.root.starts_with(install_dir) {
                format!(
                    "run `cargo kiln toolkit install --dir {}` to repair it",
                    install_dir.display()
                )
            } else if tk.found_by == "user store" || tk.found_by == cuda_build::toolkit::STORE_VAR {
                "run `cargo kiln toolkit install` to repair it".to_string()
            } else {
                format!(
                    "reinstall that toolkit, or point {} elsewhere (`cargo kiln toolkit install` provides the pinned one)",
                    tk.found_by
                )
            };
            problems.push(format!(
                "the toolkit at {} (found by {}) lacks {}; {advice}",
                tk.root.display(),
                tk.found_by,
                named.join(", ")
            ));
        }
    }
    problems
}

/// The toolkit taken against the driver floor: a problem naming the fixes
/// when the floor's drivers cannot JIT its PTX.
fn floor_problem(toolkit: Option<&Toolkit>, floor: &Result<DriverFloor, String>) -> Option<String> {
    let floor = match floor {
        Ok(floor) => floor,
        Err(why) => return Some(why.clone()),
    };
    let tk = toolkit?;
    let isa = PtxIsa::written_by(tk.version);
    (isa > floor.max_ptx_isa).then(|| {
        format!(
            "CUDA {} (found by {}) writes PTX ISA {isa}, which drivers of the floor, CUDA {} \
             (PTX ISA {}, {}), cannot JIT; build with the pinned toolkit (`cargo kiln toolkit \
             install`, first in the search), build SASS only for every GPU the kernels target \
             (each arch `-real`), or raise the floor in {} [driver]",
            tk.version,
            tk.found_by,
            floor.min_cuda,
            floor.max_ptx_isa,
            floor.origin,
            cuda_build::floor::AUDIT_FILE,
        )
    })
}

/// Looks at the machine and the subject's kernels dir.
pub fn gather(subject: &Subject) -> Result<Findings> {
    // A bad limit is refused, not taken as the default without a word.
    let probe_limit = cuda_build::toolkit::probe_timeout(&cuda_build::toolkit::ProcessEnv)?;
    let off_by = turned_off(subject.env_prefix.as_deref());
    let discovery = off_by
        .is_none()
        .then(|| every_toolkit_with_local(&subject.toolkit_dir));
    let supported = discovery
        .as_ref()
        .and_then(|d| d.toolkit.as_ref())
        .map(|tk| tk.supported_archs().map_err(|e| e.to_string()));
    let kernels = &subject.kernels_dir;
    if !kernels.is_dir() {
        bail!(
            "no kernels dir at {}; pass --kernels DIR (the dir the build script gives KernelBuild::new)",
            kernels.display()
        );
    }
    let config_path = kernels.join("kiln.toml");
    let config_shown = format!("{}/kiln.toml", subject.kernels_shown);
    let config = if config_path.exists() {
        KernelConfig::load(&config_path)?
    } else {
        KernelConfig::default()
    };
    let arch_var = subject
        .env_prefix
        .as_ref()
        .map(|p| format!("{p}_CUDA_ARCHS"));
    let spec = match arch_var.as_ref().map(|v| (v, std::env::var(v))) {
        Some((var, Ok(text))) if !text.trim().is_empty() => (text, var.clone()),
        _ if config_path.exists() => (config.archs.clone(), config_shown),
        _ => (config.archs.clone(), "cuda-build's default".to_string()),
    };
    let mut modules = Vec::new();
    for entry in std::fs::read_dir(kernels)? {
        let path = entry?.path();
        if path.extension().is_some_and(|e| e == "cu") {
            let name = path
                .file_stem()
                .unwrap_or_default()
                .to_string_lossy()
                .into_owned();
            let link = format!("{:?}", config.link_mode(&name)).to_lowercase();
            modules.push((name, link));
        }
    }
    modules.sort();
    let mut problems = toolkit_problems(discovery.as_ref(), &subject.toolkit_dir);
    let floor = DriverFloor::read(&subject.audit_file).map_err(|e| e.to_string());
    let taken = discovery.as_ref().and_then(|d| d.toolkit.as_ref());
    problems.extend(floor_problem(taken, &floor));
    Ok(Findings {
        off_by,
        discovery,
        floor,
        supported,
        libclang: find_libclang(&subject.toolkit_dir),
        gpus: query_gpus(probe_limit),
        spec,
        modules,
        problems,
    })
}

/// bindgen's libclang: `LIBCLANG_PATH`, the project-local one, or the system's.
pub(crate) fn find_libclang(toolkit_dir: &Path) -> Result<PathBuf, String> {
    let has_lib = |dir: &Path| {
        std::fs::read_dir(dir).is_ok_and(|entries| {
            entries.flatten().any(|e| {
                // libclang.so, libclang.so.18, libclang-14.so.1; not libclang-cpp.
                let name = e.file_name().to_string_lossy().into_owned();
                name.starts_with("libclang.so")
                    || (name.starts_with("libclang-") && !name.starts_with("libclang-cpp"))
            })
        })
    };
    if let Some(dir) = std::env::var_os("LIBCLANG_PATH").map(PathBuf::from) {
        return if has_lib(&dir) {
            Ok(dir)
        } else {
            Err(format!("LIBCLANG_PATH={} holds no libclang", dir.display()))
        };
    }
    let store = cuda_build::toolkit::store_default(&cuda_build::toolkit::ProcessEnv)
        .map(|default| default.join("libclang"));
    let candidates = [Some(toolkit_dir.join("libclang")), store]
        .into_iter()
        .flatten()
        .chain([PathBuf::from("/usr/lib/x86_64-linux-gnu")]);
    candidates.into_iter().find(|d| has_lib(d)).ok_or_else(|| {
        "not found (needed only to regenerate bindings; `cargo kiln toolkit install` installs one)".to_string()
    })
}

fn query_gpus(limit: std::time::Duration) -> Result<Vec<String>, String> {
    let output = cuda_build::toolkit::output_within(
        Command::new("nvidia-smi").args([
            "--query-gpu=name,compute_cap,memory.total,driver_version",
            "--format=csv,noheader",
        ]),
        limit,
    )
    .map_err(|e| match e.kind() {
        std::io::ErrorKind::TimedOut => format!("nvidia-smi {e}"),
        _ => "no nvidia-smi: no NVIDIA driver on this machine".to_string(),
    })?;
    if !output.status.success() {
        return Err(format!(
            "nvidia-smi failed: {}",
            String::from_utf8_lossy(&output.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(str::to_string)
        .collect())
}

/// The report.
pub fn render(f: &Findings) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "toolkit search:");
    match &f.discovery {
        None => {
            let off = f.off_by.as_deref().unwrap_or("turned off");
            let _ = writeln!(out, "  skipped: {off}");
        }
        Some(d) => {
            for probe in &d.probes {
                let _ = writeln!(out, "  {probe}");
            }
        }
    }
    let toolkit = f.discovery.as_ref().and_then(|d| d.toolkit.as_ref());
    match toolkit {
        Some(tk) => {
            let _ = writeln!(
                out,
                "toolkit: CUDA {} at {} (via {})",
                tk.version,
                tk.root.display(),
                tk.found_by
            );
            for probe in f.discovery.iter().flat_map(Discovery::shadowed) {
                let _ = writeln!(out, "  shadows: {probe}");
            }
        }
        None => {
            let _ = writeln!(
                out,
                "toolkit: none; builds are CPU-only (run `cargo kiln toolkit install`)"
            );
        }
    }
    if let Ok(floor) = &f.floor {
        let _ = writeln!(
            out,
            "driver floor: CUDA {} (PTX ISA {}, {})",
            floor.min_cuda, floor.max_ptx_isa, floor.origin
        );
    }
    match &f.supported {
        Some(Ok(s)) => {
            let _ = writeln!(out, "supported archs: {}", s.describe());
        }
        Some(Err(e)) => {
            let _ = writeln!(out, "supported archs: unknown ({e})");
        }
        None => {}
    }
    match &f.libclang {
        Ok(dir) => {
            let _ = writeln!(out, "libclang: {}", dir.display());
        }
        Err(why) => {
            let _ = writeln!(out, "libclang: {why}");
        }
    }
    match &f.gpus {
        Ok(gpus) if !gpus.is_empty() => {
            for gpu in gpus {
                let _ = writeln!(out, "gpu: {gpu}");
            }
        }
        Ok(_) => {
            let _ = writeln!(out, "gpus: none");
        }
        Err(why) => {
            let _ = writeln!(out, "gpus: none ({why})");
        }
    }
    let (spec, origin) = &f.spec;
    let builtin = SupportedArchs::cuda_13_0_builtin();
    let supported = match &f.supported {
        Some(Ok(s)) => s,
        _ => &builtin,
    };
    let produced = ArchSpec::parse(spec, origin).and_then(|s| {
        if s.needs_native_probe() {
            Ok("the archs of this machine's GPUs (native)".to_string())
        } else {
            s.resolve(supported, origin, || Ok(Vec::new())).map(|l| {
                format!(
                    "SASS {} + PTX {}",
                    join(&l.sass, |a| a.sm_name()),
                    join(&l.ptx, |a| a.compute_name())
                )
            })
        }
    });
    let _ = writeln!(out, "default build: archs `{spec}` from {origin}");
    match (produced, toolkit) {
        (Err(e), _) => {
            let _ = writeln!(out, "  invalid: {e}");
        }
        (Ok(_), None) => {
            let _ = writeln!(out, "  would produce: CPU-only build (no fat binaries)");
        }
        (Ok(what), Some(_)) => {
            let _ = writeln!(out, "  would produce: {what}");
        }
    }
    for (name, link) in &f.modules {
        let _ = writeln!(out, "  module {name}: {link}");
    }
    if f.problems.is_empty() {
        let _ = writeln!(out, "problems: none");
    }
    for problem in &f.problems {
        let _ = writeln!(out, "problem: {problem}");
    }
    out
}

fn join<T>(items: &[T], name: impl Fn(&T) -> String) -> String {
    let names: Vec<String> = items.iter().map(name).collect();
    if names.is_empty() {
        "none".to_string()
    } else {
        names.join(",")
    }
}

#[cfg(test)]
mod tests;
