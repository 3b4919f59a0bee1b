//! The kernel build a build script runs: find the toolkit, resolve the archs,
//! compile every `.cu` module that changed (in parallel, under Cargo's
//! jobserver), write the manifest and the Rust that embeds the fat binaries,
//! and tell Cargo what to watch, link and set. Falls back to a CPU-only build
//! when there is no toolkit.
//!
//! Nothing here assumes kiln's layout: the caller names its kernels dir,
//! include dirs, config file, env var prefix and the Rust path of its image
//! type.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;
use std::time::Instant;

use crate::arch::{ArchList, ArchSpec, SupportedArchs};
use crate::config::{KernelConfig, LinkMode};
use crate::depfile;
use crate::error::{io, Error};
use crate::manifest::{Manifest, ModuleEntry, ToolkitEntry, FORMAT, MANIFEST_FILE};
use crate::nvcc::{shell_line, FatbinCommand};
use crate::resources::{parse_ptxas_output, KernelResources};
use crate::toolkit::{discover, Discovery, ProcessEnv, Toolkit, DISCOVERY_ENV_VARS};

/// The Rust file, in OUT_DIR, that embeds the fat binaries.
pub const MODULES_RS: &str = "kiln_modules.rs";

/// Toolkit versions published as `cuda_ge_MAJOR_MINOR` cfgs.
pub const VERSION_CFGS: &[(u32, u32)] = &[
    (11, 8),
    (12, 0),
    (12, 4),
    (12, 8),
    (12, 9),
    (13, 0),
    (13, 1),
    (13, 2),
];

/// What the CPU-only warning and the missing-toolkit error tell the user to
/// do, unless the build script says otherwise with
/// [`KernelBuild::toolkit_hint`]. kiln's own: its xtask installs a toolkit.
pub const DEFAULT_TOOLKIT_HINT: &str = "run `cargo xtask toolkit install` or set CUDA_PATH";

/// A kernel build, configured by the caller's build script.
#[derive(Debug, Clone)]
pub struct KernelBuild {
    kernels_dir: PathBuf,
    toolkit_hint: String,
    include_dirs: Vec<PathBuf>,
    config_file: Option<PathBuf>,
    env_prefix: String,
    candidates: Vec<(String, PathBuf)>,
    image_type: String,
    out_dir: Option<PathBuf>,
}

/// What a kernel build produced.
#[derive(Debug, Clone)]
pub struct BuildReport {
    /// The manifest (also written to OUT_DIR).
    pub manifest: Manifest,
    /// Where the manifest was written.
    pub manifest_path: PathBuf,
    /// The toolkit, for a CUDA build.
    pub toolkit: Option<Toolkit>,
    /// Where discovery looked.
    pub discovery: Option<Discovery>,
    /// Directives for Cargo, in order (`cargo::...` lines).
    pub directives: Vec<String>,
}

impl KernelBuild {
    /// A build of every `*.cu` file directly inside `kernels_dir`, with
    /// `kernels_dir/include` as include dir and `kernels_dir/kiln.toml` as
    /// config file (each only if it exists), and the `KILN` env prefix.
    pub fn new(kernels_dir: impl Into<PathBuf>) -> Self {
        let kernels_dir = kernels_dir.into();
        let include = kernels_dir.join("include");
        Self {
            include_dirs: if include.is_dir() {
                vec![include]
            } else {
                Vec::new()
            },
            config_file: Some(kernels_dir.join("kiln.toml")),
            kernels_dir,
            env_prefix: "KILN".to_string(),
            toolkit_hint: DEFAULT_TOOLKIT_HINT.to_string(),
            candidates: Vec::new(),
            image_type: "::gpu_core::FatbinImage".to_string(),
            out_dir: None,
        }
    }

    /// Adds an include dir (`-I`).
    pub fn include_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.include_dirs.push(dir.into());
        self
    }

    /// The config file (default `kernels_dir/kiln.toml`; missing means
    /// defaults).
    pub fn config_file(mut self, path: impl Into<PathBuf>) -> Self {
        self.config_file = Some(path.into());
        self
    }

    /// The env var prefix: `PREFIX_CUDA_ARCHS`, `PREFIX_REQUIRE_CUDA`,
    /// `PREFIX_CUDA=off`. Default `KILN`.
    pub fn env_prefix(mut self, prefix: &str) -> Self {
        self.env_prefix = prefix.to_string();
        self
    }

    /// A toolkit root to try after `PATH` and before the system dirs.
    pub fn toolkit_candidate(mut self, label: &str, root: impl Into<PathBuf>) -> Self {
        self.candidates.push((label.to_string(), root.into()));
        self
    }

    /// What to tell the user when no toolkit is found, as a clause
    /// (`"install the CUDA toolkit or set CUDA_PATH"`): it follows "for GPU
    /// code," in the CPU-only warning and precedes ", or unset
    /// PREFIX_REQUIRE_CUDA" in the error. The default names kiln's xtask,
    /// which a downstream crate does not have.
    pub fn toolkit_hint(mut self, hint: &str) -> Self {
        self.toolkit_hint = hint.to_string();
        self
    }

    /// The Rust path of the image type the generated code constructs (default
    /// `::gpu_core::FatbinImage`).
    pub fn image_type(mut self, path: &str) -> Self {
        self.image_type = path.to_string();
        self
    }

    /// Where outputs go (default: `OUT_DIR`).
    pub fn out_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.out_dir = Some(dir.into());
        self
    }

    fn var(&self, suffix: &str) -> String {
        format!("{}_{suffix}", self.env_prefix)
    }

    /// Runs the build and prints the Cargo directives. For build scripts.
    pub fn run(self) -> Result<BuildReport, Error> {
        let report = self.build()?;
        for line in &report.directives {
            println!("{line}");
        }
        Ok(report)
    }

    /// Runs the build without printing; the directives are in the report.
    pub fn build(self) -> Result<BuildReport, Error> {
        self.with_absolute_paths()?.build_from_absolute_paths()
    }

    /// The build with every path made absolute against the current dir (a
    /// build script's is its package's root). nvcc runs in OUT_DIR, where a
    /// relative `kernels/a.cu` or `-Ikernels/include` would name nothing.
    fn with_absolute_paths(mut self) -> Result<Self, Error> {
        let absolute = |path: &Path| io(path, std::path::absolute(path));
        self.kernels_dir = absolute(&self.kernels_dir)?;
        for dir in &mut self.include_dirs {
            *dir = absolute(dir)?;
        }
        if let Some(path) = &self.config_file {
            self.config_file = Some(absolute(path)?);
        }
        if let Some(dir) = &self.out_dir {
            self.out_dir = Some(absolute(dir)?);
        }
        Ok(self)
    }

    fn build_from_absolute_paths(self) -> Result<BuildReport, Error> {
        let mut cargo = Vec::new();
        let out_dir = match &self.out_dir {
            Some(dir) => dir.clone(),
            None => PathBuf::from(std::env::var_os("OUT_DIR").ok_or_else(|| Error::Config {
                path: PathBuf::from("OUT_DIR"),
                message: "OUT_DIR is not set: run from a build script or call out_dir()".into(),
            })?),
        };
        for var in DISCOVERY_ENV_VARS {
            cargo.push(format!("cargo::rerun-if-env-changed={var}"));
        }
        let (archs_var, require_var, switch_var) = (
            self.var("CUDA_ARCHS"),
            self.var("REQUIRE_CUDA"),
            self.var("CUDA"),
        );
        for var in [&archs_var, &require_var, &switch_var] {
            cargo.push(format!("cargo::rerun-if-env-changed={var}"));
        }
        cargo.push(format!(
            "cargo::rerun-if-changed={}",
            self.kernels_dir.display()
        ));
        for dir in &self.include_dirs {
            cargo.push(format!("cargo::rerun-if-changed={}", dir.display()));
        }
        let config = match &self.config_file {
            Some(path) => {
                // Cargo reruns a build script on every build while a path it
                // watches is missing. A config file created later inside the
                // kernels dir is still noticed: the dir is watched.
                if path.exists() {
                    cargo.push(format!("cargo::rerun-if-changed={}", path.display()));
                }
                KernelConfig::load(path)?
            }
            None => KernelConfig::default(),
        };
        let (spec_text, origin) = match std::env::var(&archs_var) {
            Ok(text) if !text.trim().is_empty() => (text, archs_var.clone()),
            _ => match &self.config_file {
                Some(path) if path.exists() => (config.archs.clone(), path.display().to_string()),
                _ => (config.archs.clone(), "the default arch list".to_string()),
            },
        };
        let spec = ArchSpec::parse(&spec_text, &origin)?;
        let sources = list_sources(&self.kernels_dir)?;

        let switched_off = std::env::var(&switch_var).is_ok_and(|v| v == "off" || v == "0");
        let discovery = (!switched_off).then(|| discover(&ProcessEnv, &self.candidates));
        let toolkit = discovery.as_ref().and_then(|d| d.toolkit.clone());
        for probe in discovery.iter().flat_map(Discovery::misconfigured) {
            cargo.push(format!("cargo::warning={probe}: ignored, looking further"));
        }

        let Some(toolkit) = toolkit else {
            let looked_at = match &discovery {
                Some(d) => d.looked_at(),
                None => format!("nowhere: {switch_var}=off"),
            };
            if std::env::var(&require_var).is_ok_and(|v| v == "1") {
                return Err(Error::ToolkitRequired {
                    var: require_var,
                    looked_at,
                    hint: self.toolkit_hint.clone(),
                });
            }
            // Still check the spec, so a bad one fails on every machine.
            spec.resolve(&SupportedArchs::cuda_13_0_builtin(), &origin, || {
                Ok(Vec::new())
            })?;
            let reason = format!("no CUDA toolkit found (looked at {looked_at})");
            cargo.push(format!(
                "cargo::warning={reason}; building CPU-only. For GPU code, {}",
                self.toolkit_hint
            ));
            let manifest = Manifest {
                format: FORMAT,
                cuda_enabled: false,
                cpu_only_reason: Some(reason),
                arch_spec: spec.as_str().to_string(),
                arch_origin: origin,
                sass: Vec::new(),
                ptx: Vec::new(),
                toolkit: None,
                modules: sources
                    .iter()
                    .map(|(name, source)| ModuleEntry {
                        name: name.clone(),
                        source: source.clone(),
                        link: config.link_mode(name),
                        output: None,
                        size_bytes: 0,
                        compiled: false,
                        compile_ms: None,
                        deps: Vec::new(),
                        kernels: Vec::new(),
                    })
                    .collect(),
            };
            return self.finish(manifest, None, discovery, &out_dir, cargo);
        };

        let supported = toolkit.supported_archs()?;
        let archs = spec.resolve(&supported, &origin, probe_native_archs)?;
        if sources
            .iter()
            .any(|(name, _)| config.link_mode(name) == LinkMode::Static)
        {
            // cc finds nvcc through NVCC only. Set before any thread starts;
            // it only affects this build script's process.
            std::env::set_var("NVCC", &toolkit.nvcc);
        }
        let jobs: Vec<Job<'_>> = sources
            .iter()
            .map(|(name, source)| Job {
                name,
                source,
                link: config.link_mode(name),
                out_dir: &out_dir,
                include_dirs: &self.include_dirs,
                archs: &archs,
                flags: &config.nvcc_flags,
                toolkit: &toolkit,
            })
            .collect();
        let entries = run_jobs(&jobs)?;
        if entries.iter().any(|e| e.link == LinkMode::Static) {
            cargo.push(format!(
                "cargo::rustc-link-search=native={}",
                out_dir.display()
            ));
            for entry in entries.iter().filter(|e| e.link == LinkMode::Static) {
                cargo.push(format!(
                    "cargo::rustc-link-lib=static={}",
                    static_lib_name(&entry.name)
                ));
            }
            cargo.push(format!(
                "cargo::rustc-link-search=native={}",
                toolkit.lib_dir().display()
            ));
            for lib in [
                "static=cudart_static",
                "dylib=stdc++",
                "dylib=dl",
                "dylib=rt",
                "dylib=pthread",
            ] {
                cargo.push(format!("cargo::rustc-link-lib={lib}"));
            }
        }
        for dep in entries.iter().flat_map(|e| &e.deps) {
            if !dep.starts_with(&self.kernels_dir) {
                cargo.push(format!("cargo::rerun-if-changed={}", dep.display()));
            }
        }
        let manifest = Manifest {
            format: FORMAT,
            cuda_enabled: true,
            cpu_only_reason: None,
            arch_spec: spec.as_str().to_string(),
            arch_origin: origin,
            sass: archs.sass.iter().map(|a| a.sm_name()).collect(),
            ptx: archs.ptx.iter().map(|a| a.compute_name()).collect(),
            toolkit: Some(ToolkitEntry {
                root: toolkit.root.clone(),
                version: toolkit.version.to_string(),
                found_by: toolkit.found_by.clone(),
            }),
            modules: entries,
        };
        self.finish(manifest, Some(toolkit), discovery, &out_dir, cargo)
    }

    fn finish(
        &self,
        manifest: Manifest,
        toolkit: Option<Toolkit>,
        discovery: Option<Discovery>,
        out_dir: &Path,
        mut cargo: Vec<String>,
    ) -> Result<BuildReport, Error> {
        let manifest_path = out_dir.join(MANIFEST_FILE);
        write_if_changed(&manifest_path, &manifest.to_toml())?;
        let modules_rs = out_dir.join(MODULES_RS);
        write_if_changed(
            &modules_rs,
            &modules_rust(&manifest, toolkit.as_ref(), &self.image_type),
        )?;
        cargo.extend(cfg_directives(toolkit.as_ref()));
        Ok(BuildReport {
            manifest,
            manifest_path,
            toolkit,
            discovery,
            directives: cargo,
        })
    }
}

impl BuildReport {
    /// `cargo::metadata` lines for a `links` crate's dependents
    /// (`DEP_<LINKS>_ENABLED`, `_ROOT`, `_VERSION`, `_SASS`, `_PTX`,
    /// `_MANIFEST`).
    pub fn metadata_directives(&self) -> Vec<String> {
        let numbers = |names: &[String]| {
            names
                .iter()
                .filter_map(|n| crate::arch::Arch::from_nvcc_name(n))
                .map(|a| a.number().to_string())
                .collect::<Vec<_>>()
                .join(",")
        };
        let mut lines = vec![
            format!(
                "cargo::metadata=enabled={}",
                u8::from(self.manifest.cuda_enabled)
            ),
            format!("cargo::metadata=manifest={}", self.manifest_path.display()),
            format!("cargo::metadata=sass={}", numbers(&self.manifest.sass)),
            format!("cargo::metadata=ptx={}", numbers(&self.manifest.ptx)),
        ];
        if let Some(tk) = &self.toolkit {
            lines.push(format!("cargo::metadata=root={}", tk.root.display()));
            lines.push(format!(
                "cargo::metadata=version={}.{}",
                tk.version.major, tk.version.minor
            ));
        }
        lines
    }
}

/// `cuda_enabled` / `cpu_only` and `cuda_ge_*` cfgs, each declared with
/// `rustc-check-cfg` first.
pub fn cfg_directives(toolkit: Option<&Toolkit>) -> Vec<String> {
    let mut lines = vec![
        "cargo::rustc-check-cfg=cfg(cuda_enabled)".to_string(),
        "cargo::rustc-check-cfg=cfg(cpu_only)".to_string(),
    ];
    for (major, minor) in VERSION_CFGS {
        lines.push(format!(
            "cargo::rustc-check-cfg=cfg(cuda_ge_{major}_{minor})"
        ));
    }
    match toolkit {
        None => lines.push("cargo::rustc-cfg=cpu_only".to_string()),
        Some(tk) => {
            lines.push("cargo::rustc-cfg=cuda_enabled".to_string());
            for (major, minor) in VERSION_CFGS {
                if (tk.version.major, tk.version.minor) >= (*major, *minor) {
                    lines.push(format!("cargo::rustc-cfg=cuda_ge_{major}_{minor}"));
                }
            }
            lines.push(format!(
                "cargo::rustc-env=KILN_TOOLKIT_MAJOR={}",
                tk.version.major
            ));
            lines.push(format!(
                "cargo::rustc-env=KILN_TOOLKIT_MINOR={}",
                tk.version.minor
            ));
        }
    }
    lines
}

/// `(stem, path)` of every `.cu` file directly in `dir`, sorted.
fn list_sources(dir: &Path) -> Result<Vec<(String, PathBuf)>, Error> {
    let mut sources = Vec::new();
    for entry in io(dir, std::fs::read_dir(dir))? {
        let path = io(dir, entry)?.path();
        if path.extension().is_some_and(|e| e == "cu") {
            if let Some(stem) = path.file_stem().and_then(|s| s.to_str()) {
                sources.push((stem.to_string(), path.clone()));
            }
        }
    }
    sources.sort();
    Ok(sources)
}

/// `kiln_<module>`: the static library's name.
fn static_lib_name(module: &str) -> String {
    format!("kiln_{module}")
}

/// The GPUs' archs on this machine, for `native`.
fn probe_native_archs() -> Result<Vec<crate::arch::Arch>, String> {
    let output = Command::new("nvidia-smi")
        .args(["--query-gpu=compute_cap", "--format=csv,noheader"])
        .output()
        .map_err(|e| format!("cannot run nvidia-smi: {e}"))?;
    if !output.status.success() {
        return Err(format!("nvidia-smi failed ({})", output.status));
    }
    let text = String::from_utf8_lossy(&output.stdout);
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            crate::arch::Arch::from_nvcc_name(&l.trim().replace('.', ""))
                .ok_or_else(|| format!("nvidia-smi printed an unknown compute capability `{l}`"))
        })
        .collect()
}

/// One module to bring up to date.
#[derive(Debug)]
struct Job<'a> {
    name: &'a str,
    source: &'a Path,
    link: LinkMode,
    out_dir: &'a Path,
    include_dirs: &'a [PathBuf],
    archs: &'a ArchList,
    flags: &'a [String],
    toolkit: &'a Toolkit,
}

impl Job<'_> {
    fn output(&self) -> PathBuf {
        match self.link {
            LinkMode::Fatbin => self.out_dir.join(format!("{}.fatbin", self.name)),
            LinkMode::Static => self
                .out_dir
                .join(format!("lib{}.a", static_lib_name(self.name))),
        }
    }

    fn file(&self, ext: &str) -> PathBuf {
        self.out_dir.join(format!("{}.{ext}", self.name))
    }

    fn fatbin_command(&self) -> (PathBuf, Vec<std::ffi::OsString>) {
        let (output, depfile) = (self.output(), self.file("d"));
        let command = FatbinCommand {
            nvcc: &self.toolkit.nvcc,
            source: self.source,
            output: &output,
            depfile: &depfile,
            include_dirs: self.include_dirs,
            archs: self.archs,
            flags: self.flags,
        };
        (self.toolkit.nvcc.clone(), command.args())
    }

    /// What decides whether an existing output is still right: the command
    /// line (flags, archs, toolkit) and the link mode.
    fn fingerprint(&self) -> String {
        let (program, args) = self.fatbin_command();
        format!(
            "{:?} {} {}",
            self.link,
            self.toolkit.version,
            shell_line(&program, &args)
        )
    }

    /// The entry for an output that is up to date, or `None`.
    fn reuse(&self) -> Option<ModuleEntry> {
        let stamp = std::fs::read_to_string(self.file("stamp")).ok()?;
        let (fingerprint, deps) = stamp.split_once('\n')?;
        if fingerprint != self.fingerprint() {
            return None;
        }
        let built = std::fs::metadata(self.output())
            .and_then(|m| m.modified())
            .ok()?;
        let deps: Vec<PathBuf> = deps.lines().map(PathBuf::from).collect();
        let newer = |p: &PathBuf| {
            std::fs::metadata(p)
                .and_then(|m| m.modified())
                .map_or(true, |t| t > built)
        };
        if newer(&self.source.to_path_buf()) || deps.iter().any(newer) {
            return None;
        }
        let kernels = std::fs::read_to_string(self.file("ptxas")).unwrap_or_default();
        Some(self.entry(deps, parse_ptxas_output(&kernels), None))
    }

    fn entry(
        &self,
        deps: Vec<PathBuf>,
        kernels: Vec<KernelResources>,
        ms: Option<u64>,
    ) -> ModuleEntry {
        let output = self.output();
        ModuleEntry {
            name: self.name.to_string(),
            source: self.source.to_path_buf(),
            link: self.link,
            size_bytes: std::fs::metadata(&output).map(|m| m.len()).unwrap_or(0),
            output: Some(output),
            compiled: ms.is_some(),
            compile_ms: ms,
            deps,
            kernels,
        }
    }

    fn compile(&self) -> Result<ModuleEntry, Error> {
        if let Some(entry) = self.reuse() {
            return Ok(entry);
        }
        let started = Instant::now();
        let ptxas = match self.link {
            LinkMode::Fatbin => self.compile_fatbin()?,
            LinkMode::Static => {
                self.compile_static()?;
                String::new()
            }
        };
        let ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
        let text = io(&self.file("d"), std::fs::read_to_string(self.file("d")))?;
        let deps: Vec<PathBuf> = depfile::parse(&text, self.out_dir)
            .into_iter()
            .map(|d| depfile::normalize(&d))
            .filter(|d| d != self.source && !depfile::is_system_header(d, &self.toolkit.root))
            .collect();
        io(
            &self.file("ptxas"),
            std::fs::write(self.file("ptxas"), &ptxas),
        )?;
        let stamp: String = std::iter::once(self.fingerprint())
            .chain(deps.iter().map(|d| d.display().to_string()))
            .collect::<Vec<_>>()
            .join("\n");
        io(
            &self.file("stamp"),
            std::fs::write(self.file("stamp"), stamp),
        )?;
        Ok(self.entry(deps, parse_ptxas_output(&ptxas), Some(ms)))
    }

    /// Runs nvcc; returns ptxas's resource report.
    fn compile_fatbin(&self) -> Result<String, Error> {
        let (program, args) = self.fatbin_command();
        // A stale stamp must not survive a failed compile.
        let _ = std::fs::remove_file(self.file("stamp"));
        let output = Command::new(&program)
            .args(&args)
            .current_dir(self.out_dir)
            .output()
            .map_err(|source| Error::Spawn {
                program: program.clone(),
                source,
            })?;
        let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
        let stdout = String::from_utf8_lossy(&output.stdout);
        if !output.status.success() {
            let _ = std::fs::remove_file(self.output());
            return Err(Error::Compile {
                module: self.name.to_string(),
                command: shell_line(&program, &args),
                stderr: format!("{stdout}{stderr}").trim().to_string(),
            });
        }
        Ok(format!("{stdout}{stderr}"))
    }

    /// Compiles host-side CUDA C++ with the `cc` crate's nvcc mode.
    fn compile_static(&self) -> Result<(), Error> {
        let _ = std::fs::remove_file(self.file("stamp"));
        let objects = self.out_dir.join(format!("{}-objects", self.name));
        io(&objects, std::fs::create_dir_all(&objects))?;
        let mut build = cc::Build::new();
        build
            .cuda(true)
            .cudart("none")
            .debug(false)
            .opt_level(3)
            .warnings(false)
            .cargo_metadata(false)
            .out_dir(&objects)
            .file(self.source)
            .flag("-MD")
            .flag("-MF")
            .flag(self.file("d").to_string_lossy().as_ref());
        for flag in self.flags {
            build.flag(flag);
        }
        for flag in self.archs.gencode_flags() {
            build.flag(&flag);
        }
        for dir in self.include_dirs {
            build.include(dir);
        }
        build
            .try_compile(&static_lib_name(self.name))
            .map_err(|e| Error::StaticLibrary {
                module: self.name.to_string(),
                message: e.to_string(),
            })?;
        let produced = objects.join(format!("lib{}.a", static_lib_name(self.name)));
        io(&produced, std::fs::rename(&produced, self.output()))
    }
}

/// Compiles every job, `NUM_JOBS` at a time, holding a jobserver token for
/// each job beyond the first. Returns entries in job order; the first error
/// wins.
fn run_jobs(jobs: &[Job<'_>]) -> Result<Vec<ModuleEntry>, Error> {
    let parallel = std::env::var("NUM_JOBS")
        .ok()
        .and_then(|n| n.parse::<usize>().ok())
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
        .clamp(1, jobs.len().max(1));
    let client = jobserver_client(parallel);
    let next = Mutex::new(0usize);
    let results: Mutex<BTreeMap<usize, Result<ModuleEntry, Error>>> = Mutex::new(BTreeMap::new());
    std::thread::scope(|scope| {
        for worker in 0..parallel {
            let (next, results, client) = (&next, &results, &client);
            scope.spawn(move || {
                // The build script itself holds one implicit token.
                let _token = if worker == 0 {
                    None
                } else {
                    client.acquire().ok()
                };
                if worker > 0 && _token.is_none() {
                    return;
                }
                loop {
                    let index = {
                        let mut next = next.lock().unwrap_or_else(|e| e.into_inner());
                        let index = *next;
                        *next += 1;
                        index
                    };
                    let Some(job) = jobs.get(index) else { break };
                    let result = job.compile();
                    results
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .insert(index, result);
                }
            });
        }
    });
    results
        .into_inner()
        .unwrap_or_else(|e| e.into_inner())
        .into_values()
        .collect()
}

/// Cargo's jobserver when there is one, else a private one of `parallel`
/// tokens.
fn jobserver_client(parallel: usize) -> jobserver::Client {
    // SAFETY: `from_env` takes over file descriptors named in MAKEFLAGS /
    // CARGO_MAKEFLAGS; Cargo passes them open to build scripts, and nothing in
    // this process closes or reuses them.
    let inherited = unsafe { jobserver::Client::from_env() };
    inherited.unwrap_or_else(|| {
        jobserver::Client::new(parallel.saturating_sub(1).max(1)).expect("creating a jobserver")
    })
}

/// Writes `text` unless the file already holds it (keeps mtimes still, so
/// nothing downstream rebuilds for nothing).
fn write_if_changed(path: &Path, text: &str) -> Result<(), Error> {
    if std::fs::read_to_string(path).is_ok_and(|old| old == text) {
        return Ok(());
    }
    io(path, std::fs::write(path, text))
}

/// The Rust that embeds each fat-binary module as a `static`.
fn modules_rust(manifest: &Manifest, toolkit: Option<&Toolkit>, image_type: &str) -> String {
    let arch_numbers = |names: &[String]| {
        names
            .iter()
            .filter_map(|n| crate::arch::Arch::from_nvcc_name(n))
            .map(|a| a.number().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let (sass, ptx) = (arch_numbers(&manifest.sass), arch_numbers(&manifest.ptx));
    let version = toolkit.map_or((0, 0), |t| (t.version.major, t.version.minor));
    let mut text = String::from("// @generated by cuda-build's KernelBuild. Do not edit.\n");
    let mut names = Vec::new();
    for module in manifest
        .modules
        .iter()
        .filter(|m| m.link == LinkMode::Fatbin)
    {
        let ident = module
            .name
            .to_ascii_uppercase()
            .replace(|c: char| !c.is_ascii_alphanumeric(), "_");
        let image = match &module.output {
            Some(path) if manifest.cuda_enabled => {
                format!("include_bytes!({:?})", path.display().to_string())
            }
            _ => "&[]".to_string(),
        };
        let kernels: Vec<String> = module
            .kernel_names()
            .iter()
            .map(|k| format!("{k:?}"))
            .collect();
        let what = if manifest.cuda_enabled {
            format!("SASS for `{sass}`, PTX for `{ptx}`")
        } else {
            "empty: CPU-only build".to_string()
        };
        let _ = write!(
            text,
            "/// `{}.cu`: {what}.\npub static {ident}: {image_type} = {image_type} {{\n    name: {:?},\n    \
             image: {image},\n    sass: &[{sass}],\n    ptx: &[{ptx}],\n    kernels: &[{}],\n    toolkit: {version:?},\n}};\n",
            module.name,
            module.name,
            kernels.join(", "),
        );
        names.push(format!("&{ident}"));
    }
    let _ = writeln!(
        text,
        "/// Every embedded module.\npub static ALL: &[&{image_type}] = &[{}];",
        names.join(", ")
    );
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_paths_are_made_absolute_for_nvcc() {
        let build = KernelBuild::new("kernels")
            .include_dir("extra")
            .out_dir("out")
            .with_absolute_paths()
            .unwrap();
        let cwd = std::env::current_dir().unwrap();
        assert_eq!(build.kernels_dir, cwd.join("kernels"));
        assert_eq!(build.include_dirs, [cwd.join("extra")]);
        assert_eq!(build.config_file, Some(cwd.join("kernels/kiln.toml")));
        assert_eq!(build.out_dir, Some(cwd.join("out")));
    }
}
