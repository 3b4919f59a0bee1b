//! [`KernelBuild`], the kernel build a build script runs: read the config,
//! match its modules against the kernels dir, find the toolkit, resolve the
//! archs, bring every module up to date (sources compiled in parallel under
//! Cargo's jobserver, then device links and libraries), write the manifest
//! and the Rust that embeds the fat binaries, and tell Cargo what to watch,
//! link and set. Falls back to a CPU-only build when there is no toolkit.
//!
//! Nothing here assumes kiln's layout: the caller names its kernels dir,
//! include dirs, config file, env var prefix and the Rust path of its image
//! type; every variable and generated name derives from the prefix.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::arch::{Arch, ArchList, ArchSpec};
use crate::cache::{self, Cache};
use crate::compile::{static_lib_name, Context, ModulePlan};
use crate::config::{self, KernelConfig, LinkMode};
use crate::cross::{self, Platform};
use crate::driver::{nvcc_from_env, HOST_COMPILER_VARS, NVCC_OWN_VARS};
use crate::emit;
use crate::error::{io, Error};
use crate::floor;
use crate::manifest::{self, Manifest, ModuleEntry, ToolkitEntry};
use crate::modules::{self, Module};
use crate::parallel;
use crate::prebuilt::{self, Check, PrebuiltError};
use crate::settings;
use crate::toolkit::{discover, Discovery, ProcessEnv, Toolkit, DISCOVERY_ENV_VARS};

mod drift;
mod no_toolkit;
mod other_toolkit;
use other_toolkit::Taken;
mod report;

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
    prebuilt_dir: PathBuf,
    audit_file: PathBuf,
    bindings: Option<(PathBuf, PathBuf)>,
}

/// What a kernel build produced.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct BuildReport {
    /// The manifest (also written to OUT_DIR).
    pub manifest: Manifest,
    /// Where the manifest was written (`<prefix>-manifest.toml`).
    pub manifest_path: PathBuf,
    /// Where the Rust that embeds the modules was written
    /// (`<prefix>_modules.rs`).
    pub modules_rs: PathBuf,
    /// The toolkit, for a CUDA build.
    pub toolkit: Option<Toolkit>,
    /// Where discovery looked.
    pub discovery: Option<Discovery>,
    /// Directives for Cargo, in order (`cargo::...` lines).
    pub directives: Vec<String>,
}

/// What the config and the environment ask for, checked.
struct Inputs {
    /// The config file, for errors (it need not exist).
    config_path: PathBuf,
    spec: ArchSpec,
    /// Where `spec` came from.
    origin: String,
    modules: Vec<Module>,
    /// Each module's own spec and its origin, beside `modules`.
    specs: Vec<Option<(ArchSpec, String)>>,
}

/// The variables a build reads, named from its prefix.
struct Vars {
    archs: String,
    require: String,
    switch: String,
    launcher: String,
}

impl KernelBuild {
    /// A build of the modules in `kernels_dir` (every top-level `*.cu`, and
    /// the `[modules]` of its config), with `kernels_dir/include` as include
    /// dir and `kernels_dir/kiln.toml` as config file (each only if it
    /// exists), and the `KILN` env prefix.
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
            toolkit_hint: "install the CUDA toolkit or set CUDA_PATH to its root".to_string(),
            candidates: Vec::new(),
            image_type: "::gpu_core::FatbinImage".to_string(),
            out_dir: None,
            prebuilt_dir: PathBuf::from(prebuilt::DEFAULT_DIR),
            audit_file: PathBuf::from(floor::AUDIT_FILE),
            bindings: None,
        }
    }

    /// Adds an include dir (`-I`), for every module.
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

    /// The env prefix every variable and generated name derives from:
    /// `PREFIX_CUDA_ARCHS`, `PREFIX_REQUIRE_CUDA`, `PREFIX_CUDA=off`,
    /// `PREFIX_NVCC_LAUNCHER`, `PREFIX_TOOLKIT_MAJOR`/`_MINOR` (set for the
    /// crate's code), `<prefix>_modules.rs`, `<prefix>-manifest.toml`,
    /// `lib<prefix>_<module>.a`. Default `KILN`.
    pub fn env_prefix(mut self, prefix: &str) -> Self {
        self.env_prefix = prefix.to_string();
        self
    }

    /// A toolkit root to try after `PATH` and before the system dirs.
    pub fn toolkit_candidate(mut self, label: &str, root: impl Into<PathBuf>) -> Self {
        self.candidates.push((label.to_string(), root.into()));
        self
    }

    /// What to tell the user when no toolkit is found, as a clause (default
    /// `"install the CUDA toolkit or set CUDA_PATH to its root"`): it follows
    /// "for GPU code," in the CPU-only warning and precedes ", or unset
    /// PREFIX_REQUIRE_CUDA" in the error.
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

    /// The folder of prebuilt kernels (default `kernels-prebuilt` in the
    /// package root), embedded when no toolkit is found and they were built
    /// from the sources as they are; see [`prebuilt`](crate::prebuilt).
    pub fn prebuilt_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.prebuilt_dir = dir.into();
        self
    }

    /// The file whose `[driver]` table names the oldest driver the kernels
    /// serve (default `kiln-audit.toml` in the package root; missing means
    /// CUDA 13.0). A toolkit that writes PTX those drivers cannot JIT is one
    /// warning naming the fixes, and an error under `<P>_REQUIRE_CUDA`.
    pub fn audit_file(mut self, path: impl Into<PathBuf>) -> Self {
        self.audit_file = path.into();
        self
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

    fn vars(&self) -> Vars {
        let var = |suffix: &str| format!("{}_{suffix}", self.env_prefix);
        Vars {
            archs: var("CUDA_ARCHS"),
            require: var("REQUIRE_CUDA"),
            switch: var("CUDA"),
            launcher: var("NVCC_LAUNCHER"),
        }
    }

    fn lower_prefix(&self) -> String {
        self.env_prefix.to_ascii_lowercase()
    }

    /// The build with every path made absolute against the current dir (a
    /// build script's is its package's root), so that every file has one
    /// name; nvcc is then given those under the root relative to it
    /// (`compile.rs`).
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
        self.prebuilt_dir = absolute(&self.prebuilt_dir)?;
        self.audit_file = absolute(&self.audit_file)?;
        Ok(self)
    }

    fn build_from_absolute_paths(self) -> Result<BuildReport, Error> {
        let out_dir = match &self.out_dir {
            Some(dir) => dir.clone(),
            None => PathBuf::from(std::env::var_os("OUT_DIR").ok_or(Error::NoOutDir)?),
        };
        io(&out_dir, std::fs::create_dir_all(&out_dir))?;
        let vars = self.vars();
        let mut cargo = self.watch_directives(&vars);
        self.check_bindings_now(&mut cargo)?;
        let inputs = self.read_inputs(&vars, &mut cargo)?;
        // Every switch is checked on every machine, toolkit or not, so that
        // a typo fails where it is made.
        let switched_off = settings::switch(&vars.switch)? == Some(false);
        let require = settings::switch(&vars.require)? == Some(true);
        settings::switch(cache::SWITCH_VAR)?;
        crate::toolkit::probe_timeout(&ProcessEnv)?;
        let discovery = (!switched_off).then(|| discover(&ProcessEnv, &self.candidates));
        let passed_over =
            other_toolkit::passed_over(discovery.as_ref(), require, &vars, &mut cargo)?;
        if self.prebuilt_dir.is_dir() {
            cargo.push(format!(
                "cargo::rerun-if-changed={}",
                self.prebuilt_dir.display()
            ));
        }
        match discovery.as_ref().and_then(|d| d.toolkit.clone()) {
            None if switched_off => {
                if require {
                    return Err(self.toolkit_required(&vars, None, None));
                }
                let manifest = self.cpu_only(inputs, None, None, &vars, &mut cargo)?;
                self.finish(manifest, None, discovery, &out_dir, cargo)
            }
            None => match self.check_prebuilt(&inputs)? {
                Check::Matching(prebuilt) => {
                    let taken = Taken::Prebuilt(&prebuilt.prebuilt.toolkit);
                    other_toolkit::warn_passed_over(&passed_over, taken, &mut cargo);
                    let manifest = self.embed_prebuilt(inputs, &prebuilt, &out_dir, &mut cargo)?;
                    self.finish(manifest, None, discovery, &out_dir, cargo)
                }
                check => {
                    let stale = match check {
                        Check::Stale(why) => Some(why),
                        _ => None,
                    };
                    if require {
                        return Err(self.toolkit_required(&vars, discovery.as_ref(), stale));
                    }
                    other_toolkit::warn_passed_over(&passed_over, Taken::Nothing, &mut cargo);
                    let manifest =
                        self.cpu_only(inputs, discovery.as_ref(), stale, &vars, &mut cargo)?;
                    self.finish(manifest, None, discovery, &out_dir, cargo)
                }
            },
            Some(toolkit) => {
                let taken = Taken::Toolkit(&toolkit);
                other_toolkit::warn_passed_over(&passed_over, taken, &mut cargo);
                let manifest = self.compile(inputs, &toolkit, &vars, &out_dir, &mut cargo)?;
                self.finish(manifest, Some(toolkit), discovery, &out_dir, cargo)
            }
        }
    }

    /// `<P>_REQUIRE_CUDA` is on and no toolkit is there: where discovery
    /// looked, and why the prebuilt kernels (if any) could not stand in.
    fn toolkit_required(
        &self,
        vars: &Vars,
        discovery: Option<&Discovery>,
        stale: Option<PrebuiltError>,
    ) -> Error {
        let mut looked_at = match discovery {
            Some(d) => d.looked_at(),
            None => format!("nowhere: {}=off", vars.switch),
        };
        if let Some(why) = stale {
            looked_at.push_str(&format!(
                "; the prebuilt kernels in {} were refused: {why}",
                self.prebuilt_dir.display()
            ));
        }
        Error::ToolkitRequired {
            var: vars.require.clone(),
            looked_at,
            hint: self.toolkit_hint.clone(),
        }
    }

    /// `rerun-if-env-changed` for every variable the build reads, and
    /// `rerun-if-changed` for the kernels and include dirs.
    fn watch_directives(&self, vars: &Vars) -> Vec<String> {
        let own = [&vars.archs, &vars.require, &vars.switch, &vars.launcher];
        let mut cargo: Vec<String> = DISCOVERY_ENV_VARS
            .iter()
            .copied()
            .chain(own.map(String::as_str))
            .chain(HOST_COMPILER_VARS)
            .chain(NVCC_OWN_VARS)
            .chain(cache::VARS)
            .chain(["NUM_JOBS"])
            .map(|var| format!("cargo::rerun-if-env-changed={var}"))
            .collect();
        for dir in std::iter::once(&self.kernels_dir).chain(&self.include_dirs) {
            cargo.push(format!("cargo::rerun-if-changed={}", dir.display()));
        }
        // A new default toolkit in the user's store reruns the build. Only
        // an existing file is watched: Cargo reruns a script on every build
        // while a watched path is missing.
        if let Some(default) = crate::toolkit::store_default(&ProcessEnv) {
            let record = default.join("kiln-toolkit.toml");
            if record.is_file() {
                cargo.push(format!("cargo::rerun-if-changed={}", record.display()));
            }
        }
        if self.audit_file.is_file() {
            cargo.push(format!(
                "cargo::rerun-if-changed={}",
                self.audit_file.display()
            ));
        }
        cargo
    }

    /// The config, the arch spec and the modules, checked on every machine
    /// (toolkit or not), so that a typo fails at once.
    fn read_inputs(&self, vars: &Vars, cargo: &mut Vec<String>) -> Result<Inputs, Error> {
        let config_path = self
            .config_file
            .clone()
            .unwrap_or_else(|| self.kernels_dir.join("kiln.toml"));
        let config = match &self.config_file {
            // Cargo reruns a build script on every build while a path it
            // watches is missing. A config file created later inside the
            // kernels dir is still noticed: the dir is watched.
            Some(path) if config::present(path) => {
                cargo.push(format!("cargo::rerun-if-changed={}", path.display()));
                KernelConfig::load(path)?
            }
            _ => KernelConfig::default(),
        };
        let (spec_text, origin) = match std::env::var(&vars.archs) {
            Ok(text) if !text.trim().is_empty() => (text, vars.archs.clone()),
            _ => match &self.config_file {
                Some(path) if config::present(path) => {
                    (config.archs.clone(), path.display().to_string())
                }
                _ => (config.archs.clone(), "the default arch list".to_string()),
            },
        };
        let spec = ArchSpec::parse(&spec_text, &origin)?;
        let modules = modules::resolve(&config, &self.kernels_dir, &config_path)?;
        for unclaimed in modules::unclaimed_sources(&modules, &self.kernels_dir, &config_path) {
            cargo.push(format!("cargo::warning={unclaimed}"));
        }
        let mut specs = Vec::new();
        for module in &modules {
            specs.push(match &module.archs {
                Some((text, origin)) => Some((ArchSpec::parse(text, origin)?, origin.clone())),
                None => None,
            });
        }
        for dir in modules.iter().flat_map(|m| &m.include_dirs) {
            if !dir.starts_with(&self.kernels_dir) {
                cargo.push(format!("cargo::rerun-if-changed={}", dir.display()));
            }
        }
        Ok(Inputs {
            config_path,
            spec,
            origin,
            modules,
            specs,
        })
    }

    /// With a toolkit: resolve the archs, bring every module up to date, and
    /// add the link lines and the watched headers outside the kernels dir.
    fn compile(
        &self,
        inputs: Inputs,
        toolkit: &Toolkit,
        vars: &Vars,
        out_dir: &Path,
        cargo: &mut Vec<String>,
    ) -> Result<Manifest, Error> {
        let supported = toolkit.supported_archs()?;
        let archs = inputs
            .spec
            .resolve(&supported, &inputs.origin, probe_native_archs)?;
        let mut nvcc = nvcc_from_env(&toolkit.nvcc, &vars.launcher)?;
        // A cross build's host code: the target's compiler and runtime.
        let platform = Platform::from_env(&ProcessEnv);
        let sass = names(&archs.sass, Arch::sm_name).join(" ");
        let modules = &inputs.modules;
        let runtime = cross::prepare(
            &ProcessEnv,
            &platform,
            modules,
            toolkit,
            &mut nvcc,
            &sass,
            cargo,
        )?;
        let base = io(Path::new("."), std::env::current_dir())?;
        let lib_prefix = self.lower_prefix();
        let cache = cache::settings_from_env()?
            .map(|(dir, max)| Cache::new(dir, max, toolkit, out_dir, &base));
        let cx = Context {
            nvcc: &nvcc,
            toolkit,
            out_dir,
            kernels_dir: &self.kernels_dir,
            include_dirs: &self.include_dirs,
            lib_prefix: &lib_prefix,
            base: &base,
            cache: cache.as_ref(),
        };
        let mut plans = Vec::new();
        for (module, own) in inputs.modules.into_iter().zip(inputs.specs) {
            let archs = match own {
                Some((spec, origin)) => spec.resolve(&supported, &origin, probe_native_archs)?,
                None => archs.clone(),
            };
            check_rdc_archs(&module, &archs, &inputs.config_path)?;
            plans.push(ModulePlan::new(module, archs, &cx));
        }
        if plans.iter().any(|plan| !plan.archs.ptx.is_empty()) {
            other_toolkit::check_floor(&self.audit_file, toolkit, vars, cargo)?;
        }
        let entries = bring_up_to_date(&plans, &cx)?;
        cargo.extend(entries.iter().flat_map(|e| {
            e.warnings
                .iter()
                .map(move |w| format!("cargo::warning=nvcc on module `{}`: {w}", e.name))
        }));
        let cache = cache.map(|cache| {
            cache.evict();
            cache.report()
        });
        // In the manifest, and on stderr (`cargo build -vv`): a warning
        // would be replayed by Cargo on every later build.
        if let Some(report) = cache.as_ref().filter(|r| r.hits + r.misses > 0) {
            eprintln!("{report}");
        }
        let libraries: Vec<String> = entries
            .iter()
            .filter(|e| e.link == LinkMode::Static)
            .map(|e| static_lib_name(&lib_prefix, &e.name))
            .collect();
        let manifest = Manifest {
            cuda_enabled: true,
            sass: names(&archs.sass, Arch::sm_name),
            ptx: names(&archs.ptx, Arch::compute_name),
            toolkit: Some(ToolkitEntry {
                root: toolkit.root.clone(),
                version: toolkit.version.to_string(),
                found_by: toolkit.found_by.clone(),
            }),
            inputs: self.naming(&base).inputs(
                &entries,
                Some(inputs.config_path.as_path()).filter(|p| p.is_file()),
            )?,
            modules: entries,
            cache: cache.filter(|r| r.hits + r.misses > 0),
            base: Some(base.clone()),
            include_dirs: self.include_dirs.clone(),
            ..Manifest::empty(inputs.spec.as_str(), inputs.origin)
        };
        cargo.extend(emit::link_directives(
            &manifest,
            &libraries,
            out_dir,
            &runtime.unwrap_or_else(|| toolkit.lib_dir()),
        ));
        for dep in manifest.modules.iter().flat_map(|e| &e.deps) {
            if !dep.starts_with(&self.kernels_dir) {
                cargo.push(format!("cargo::rerun-if-changed={}", dep.display()));
            }
        }
        Ok(manifest)
    }

    fn finish(
        &self,
        manifest: Manifest,
        toolkit: Option<Toolkit>,
        discovery: Option<Discovery>,
        out_dir: &Path,
        mut cargo: Vec<String>,
    ) -> Result<BuildReport, Error> {
        let prefix = self.lower_prefix();
        let version = match (&toolkit, &manifest.prebuilt) {
            (Some(tk), _) => Some((tk.version.major, tk.version.minor)),
            (None, Some(prebuilt)) => Some(prebuilt::major_minor(&prebuilt.toolkit)),
            (None, None) => None,
        };
        let manifest_path = out_dir.join(manifest::file_name(&self.env_prefix));
        emit::write_if_changed(&manifest_path, &manifest.to_toml())?;
        let modules_rs = out_dir.join(format!("{prefix}_modules.rs"));
        emit::write_if_changed(
            &modules_rs,
            &emit::modules_rust(&manifest, version, &self.image_type),
        )?;
        cargo.extend(emit::cfg_directives(&self.env_prefix, version));
        Ok(BuildReport {
            manifest,
            manifest_path,
            modules_rs,
            toolkit,
            discovery,
            directives: cargo,
        })
    }
}

/// Every source compiled (in parallel across modules), then every module
/// linked (in parallel); entries in module order.
fn bring_up_to_date(plans: &[ModulePlan], cx: &Context<'_>) -> Result<Vec<ModuleEntry>, Error> {
    let units: Vec<(usize, &crate::compile::Unit)> = plans
        .iter()
        .enumerate()
        .flat_map(|(i, plan)| plan.units.iter().map(move |u| (i, u)))
        .collect();
    let results = parallel::map(&units, &|(_, unit)| unit.bring_up_to_date(cx))?;
    let mut per_module: Vec<Vec<_>> = plans.iter().map(|_| Vec::new()).collect();
    for ((index, _), result) in units.iter().zip(results) {
        per_module[*index].push(result);
    }
    let work: Vec<(&ModulePlan, std::sync::Mutex<Vec<_>>)> = plans
        .iter()
        .zip(per_module)
        .map(|(plan, results)| (plan, std::sync::Mutex::new(results)))
        .collect();
    parallel::map(&work, &|(plan, results)| {
        let results = std::mem::take(&mut *results.lock().unwrap_or_else(|e| e.into_inner()));
        plan.finish(results, cx)
    })
}

/// A device link keeps SASS only: an `rdc` module needs a real arch.
fn check_rdc_archs(module: &Module, archs: &ArchList, config_path: &Path) -> Result<(), Error> {
    if module.rdc && archs.sass.is_empty() {
        return Err(Error::Config {
            path: config_path.to_path_buf(),
            message: format!(
                "[modules.{}] uses rdc but its archs hold no real arch; the device link \
                 keeps SASS only, so add one (e.g. sm_90)",
                module.name
            ),
        });
    }
    Ok(())
}

fn names(archs: &[Arch], name: fn(Arch) -> String) -> Vec<String> {
    archs.iter().map(|a| name(*a)).collect()
}

/// The GPUs' archs on this machine, for `native`.
fn probe_native_archs() -> Result<Vec<Arch>, String> {
    let output = crate::toolkit::output_within(
        Command::new("nvidia-smi").args(["--query-gpu=compute_cap", "--format=csv,noheader"]),
        crate::probe::process_limit(),
    )
    .map_err(|e| format!("cannot run nvidia-smi: {e}"))?;
    if !output.status.success() {
        return Err(format!("nvidia-smi failed ({})", output.status));
    }
    let text = String::from_utf8_lossy(&output.stdout);
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            Arch::from_nvcc_name(&l.trim().replace('.', ""))
                .ok_or_else(|| format!("nvidia-smi printed an unknown compute capability `{l}`"))
        })
        .collect()
}

/// The directives of a build with no kernels at all (a crate whose kernels
/// are switched off by a feature): `cpu_only` set, every cfg declared.
pub fn cpu_only_directives() -> Vec<String> {
    emit::cfg_directives("", None)
}

#[cfg(test)]
mod tests;
