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
mod tests {
    use super::*;
    use cuda_build::toolkit::{Probe, ProbeOutcome, Toolkit, ToolkitVersion};

    fn fake_findings() -> Findings {
        let root = PathBuf::from("/fake/cuda");
        let probes = vec![
            Probe {
                place: "NVCC".into(),
                outcome: ProbeOutcome::NotSet,
            },
            Probe {
                place: "CUDA_PATH".into(),
                outcome: ProbeOutcome::NoNvcc("/opt/broken".into()),
            },
            Probe {
                place: "CUDA_HOME".into(),
                outcome: ProbeOutcome::NotSet,
            },
            Probe {
                place: "CUDA_ROOT".into(),
                outcome: ProbeOutcome::NotSet,
            },
            Probe {
                place: "PATH".into(),
                outcome: ProbeOutcome::NotOnPath,
            },
            Probe {
                place: "project-local".into(),
                outcome: ProbeOutcome::Found(root.clone()),
            },
            Probe {
                place: "/usr/local/cuda".into(),
                outcome: ProbeOutcome::Shadowed {
                    root: "/usr/local/cuda".into(),
                    version: ToolkitVersion {
                        major: 12,
                        minor: 9,
                        patch: 86,
                    },
                },
            },
            Probe {
                place: "/opt/cuda".into(),
                outcome: ProbeOutcome::NotReached,
            },
        ];
        let toolkit = Toolkit {
            nvcc: root.join("bin/nvcc"),
            root,
            version: ToolkitVersion {
                major: 13,
                minor: 0,
                patch: 88,
            },
            found_by: "project-local".into(),
        };
        Findings {
            off_by: None,
            floor: Ok(DriverFloor::default_floor()),
            discovery: Some(Discovery {
                probes,
                toolkit: Some(toolkit),
            }),
            supported: Some(Ok(SupportedArchs::from_nvcc_lists(
                "13.0",
                "sm_75 sm_80 sm_86 sm_90 sm_100 sm_120",
                "compute_75 compute_80 compute_86 compute_90 compute_100 compute_120",
            ))),
            libclang: Ok(PathBuf::from("/fake/libclang")),
            gpus: Err("no nvidia-smi: no NVIDIA driver on this machine".into()),
            spec: ("sm_80,sm_90".into(), "kernels/kiln.toml".into()),
            modules: vec![
                ("reduce".into(), "static".into()),
                ("vector_add".into(), "fatbin".into()),
            ],
            problems: vec![],
        }
    }

    #[test]
    fn doctor_report_for_a_fake_toolkit() {
        insta::assert_snapshot!(render(&fake_findings()));
    }

    #[test]
    fn doctor_report_without_toolkit_or_with_a_bad_spec() {
        let mut f = fake_findings();
        f.discovery = None;
        f.off_by = Some("KILN_CUDA=off".into());
        f.supported = None;
        f.spec = ("sm_12".into(), "KILN_CUDA_ARCHS".into());
        insta::assert_snapshot!(render(&f));
    }

    #[test]
    fn a_toolkit_without_cicc_is_a_problem_saying_what_to_do() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("cuda");
        for file in toolkit::ESSENTIAL.iter().map(|(f, _)| f) {
            let path = root.join(file);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, "").unwrap();
        }
        let mut f = fake_findings();
        let d = f.discovery.as_mut().unwrap();
        let tk = d.toolkit.as_mut().unwrap();
        tk.root = root.clone();
        tk.found_by = "CUDA_PATH".into();
        assert_eq!(
            toolkit_problems(f.discovery.as_ref(), Path::new("/nonexistent"))
                .iter()
                .filter(|p| p.contains("lacks"))
                .count(),
            0
        );
        std::fs::remove_dir_all(root.join("nvvm")).unwrap();
        let problems = toolkit_problems(f.discovery.as_ref(), Path::new("/nonexistent"));
        let lacks: Vec<&String> = problems.iter().filter(|p| p.contains("lacks")).collect();
        assert_eq!(
            lacks,
            [&format!(
                "the toolkit at {} (found by CUDA_PATH) lacks nvvm/bin/cicc (nvcc's CUDA front end); \
                 reinstall that toolkit, or point CUDA_PATH elsewhere (`cargo kiln toolkit install` provides the pinned one)",
                root.display()
            )]
        );
        f.problems = problems;
        assert!(render(&f).contains("\nproblem: the toolkit at "));
    }

    #[test]
    fn a_toolkit_newer_than_the_floor_is_a_problem_and_doctor_shows_what_it_shadows() {
        let mut f = fake_findings();
        let d = f.discovery.as_mut().unwrap();
        d.probes[4].outcome = ProbeOutcome::Found("/opt/cuda-13.5".into());
        d.probes[5].outcome = ProbeOutcome::Shadowed {
            root: "/fake/cuda".into(),
            version: ToolkitVersion {
                major: 13,
                minor: 0,
                patch: 88,
            },
        };
        let tk = d.toolkit.as_mut().unwrap();
        tk.root = "/opt/cuda-13.5".into();
        tk.found_by = "PATH".into();
        tk.version = ToolkitVersion {
            major: 13,
            minor: 5,
            patch: 37,
        };
        let problem = floor_problem(Some(tk), &f.floor).expect("13.5 is above a 13.0 floor");
        assert_eq!(
            problem,
            "CUDA 13.5.37 (found by PATH) writes PTX ISA 9.5, which drivers of the floor, \
             CUDA 13.0 (PTX ISA 9.0, the default; set it in kiln-audit.toml [driver]), cannot \
             JIT; build with the pinned toolkit (`cargo kiln toolkit install`, first in the \
             search), build SASS only for every GPU the kernels target (each arch `-real`), or \
             raise the floor in kiln-audit.toml [driver]"
        );
        let raised = Ok(DriverFloor {
            min_cuda: "13.5".into(),
            max_ptx_isa: PtxIsa { major: 9, minor: 5 },
            origin: "kiln-audit.toml [driver]".into(),
        });
        assert_eq!(floor_problem(Some(tk), &raised), None);
        f.problems = vec![problem];
        let report = render(&f);
        assert!(
            report.contains(
                "toolkit: CUDA 13.5.37 at /opt/cuda-13.5 (via PATH)\n  \
                 shadows: project-local=/fake/cuda (CUDA 13.0.88, shadowed)\n  \
                 shadows: /usr/local/cuda=/usr/local/cuda (CUDA 12.9.86, shadowed)\n\
                 driver floor: CUDA 13.0 (PTX ISA 9.0, the default; set it in kiln-audit.toml [driver])\n"
            ),
            "{report}"
        );
        assert!(report.contains("\nproblem: CUDA 13.5.37 (found by PATH) writes PTX ISA 9.5"));
        let json = f.json();
        assert_eq!(json.shadowed.len(), 2);
        assert_eq!(json.driver_floor, Some("13.0"));
    }
}
