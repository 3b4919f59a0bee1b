//! Cross builds: a crate built for another machine than the one the build
//! runs on (Cargo's `TARGET` against `HOST`, e.g. `aarch64-unknown-linux-gnu`
//! from an x86 box).
//!
//! Device code does not depend on the host: nvcc on x86 writes the same fat
//! binaries for any target, so a crate of fat-binary modules needs nothing
//! here. Static-library modules (`link = "static"`, and their `rdc`
//! device links) carry host code, which must be the target's: nvcc compiles
//! it with the target's C++ compiler (`-ccbin`) and the crate links the
//! target's static CUDA runtime. Both are found here, each checked, and each
//! failure is one line ([`Error::CrossCompiler`], [`Error::NoTargetDir`],
//! [`Error::NoTargetRuntime`]).
//!
//! The target's compiler, in this order: `CUDAHOSTCXX_<target>`, then with
//! underscores (`CUDAHOSTCXX_aarch64_unknown_linux_gnu`); the cc crate's
//! `CXX_<target>` (both spellings) and `TARGET_CXX`; the C++ driver beside
//! Cargo's linker for the target (`CARGO_TARGET_<TRIPLE>_LINKER=
//! aarch64-linux-gnu-gcc` gives `aarch64-linux-gnu-g++`); else
//! `<gnu triple>-g++` on `PATH`. The plain `CUDAHOSTCXX` names the build
//! host's compiler and is not taken for the target.
//!
//! The target's runtime (`libcudart_static.a`), in this order: the
//! toolkit's `targets/<nvcc dir>/lib64` and `lib` (NVIDIA's cross packages
//! install there), then `targets/<nvcc dir>/lib` of the kiln install that
//! holds the toolkit (the folder with `kiln-toolkit.toml`, where
//! `cargo kiln toolkit install --target` puts the target's wheels).

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::config::LinkMode;
use crate::driver::find_program;
use crate::error::Error;
use crate::modules::Module;
use crate::nvcc::Nvcc;
use crate::toolkit::{EnvSource, Toolkit};

/// The static CUDA runtime a crate with static modules links.
pub const RUNTIME_LIB: &str = "libcudart_static.a";

/// The folder of per-target files, in a toolkit root or beside it in a kiln
/// install (`targets/sbsa-linux/lib`).
pub const TARGETS_DIR: &str = "targets";

/// The record that marks a kiln toolkit install (`kiln-toolkit.toml`).
const INSTALL_RECORD: &str = "kiln-toolkit.toml";

/// nvcc's name for a Rust target's folder under `targets/` (its
/// `-target-dir`): `x86_64-linux`, or `sbsa-linux` for 64-bit Arm Linux
/// (the server and Thor flavour CUDA 13's aarch64 wheels are). `None` for a
/// target nvcc builds no host code for (not Linux with glibc, another CPU).
pub fn nvcc_target_dir(triple: &str) -> Option<&'static str> {
    let parts: Vec<&str> = triple.split('-').collect();
    let linux_gnu = parts.len() >= 3
        && parts[parts.len() - 2] == "linux"
        && parts[parts.len() - 1].starts_with("gnu");
    match (parts.first().copied(), linux_gnu) {
        (Some("x86_64"), true) => Some("x86_64-linux"),
        (Some("aarch64"), true) => Some("sbsa-linux"),
        _ => None,
    }
}

/// The GNU triple of a Rust triple, as Debian's cross compilers are named
/// (`aarch64-unknown-linux-gnu` -> `aarch64-linux-gnu`).
fn gnu_triple(triple: &str) -> String {
    let parts: Vec<&str> = triple.split('-').collect();
    match parts.as_slice() {
        [arch, _vendor, os, env] => format!("{arch}-{os}-{env}"),
        _ => triple.to_string(),
    }
}

/// What the build is for and where it runs (Cargo's `TARGET` and `HOST`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Platform {
    pub(crate) target: String,
    pub(crate) host: String,
}

impl Platform {
    /// From Cargo's variables; outside a build script (a test, a tool) both
    /// are taken as the same, so nothing is cross.
    pub(crate) fn from_env<E: EnvSource + ?Sized>(env: &E) -> Self {
        let read = |var: &str| {
            env.var_os(var)
                .map(|v| v.to_string_lossy().into_owned())
                .filter(|v| !v.is_empty())
        };
        let host = read("HOST");
        let target = read("TARGET");
        match (host, target) {
            (Some(host), Some(target)) => Self { target, host },
            (host, target) => {
                let one = host.or(target).unwrap_or_default();
                Self {
                    target: one.clone(),
                    host: one,
                }
            }
        }
    }

    pub(crate) fn is_cross(&self) -> bool {
        self.target != self.host
    }

    /// The variables that name the target's compiler, in the order they are
    /// read (also watched with `rerun-if-env-changed`).
    pub(crate) fn compiler_vars(&self) -> Vec<String> {
        let t = &self.target;
        let u = t.replace('-', "_");
        vec![
            format!("CUDAHOSTCXX_{t}"),
            format!("CUDAHOSTCXX_{u}"),
            format!("CXX_{t}"),
            format!("CXX_{u}"),
            "TARGET_CXX".to_string(),
            self.linker_var(),
        ]
    }

    /// Cargo's `CARGO_TARGET_<TRIPLE>_LINKER` for the target.
    fn linker_var(&self) -> String {
        format!(
            "CARGO_TARGET_{}_LINKER",
            self.target.to_ascii_uppercase().replace(['-', '.'], "_")
        )
    }
}

/// What a cross build of host code uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CrossHost {
    /// The target's C++ compiler and where it came from.
    pub(crate) compiler: (PathBuf, String),
    /// The folder with the target's `libcudart_static.a`.
    pub(crate) runtime_dir: PathBuf,
    /// nvcc's `-target-dir`, where the toolkit has that folder.
    pub(crate) target_dir: Option<&'static str>,
}

/// Sets up `nvcc` for `platform` and returns the runtime dir to link, or
/// `None` for a native build or one with no host code (fat binaries only:
/// nothing changes). Adds the watched variables and the one line that says
/// what was built for what to `cargo`.
pub(crate) fn prepare<E: EnvSource + ?Sized>(
    env: &E,
    platform: &Platform,
    modules: &[Module],
    toolkit: &Toolkit,
    nvcc: &mut Nvcc,
    sass: &str,
    cargo: &mut Vec<String>,
) -> Result<Option<PathBuf>, Error> {
    if !platform.is_cross() {
        return Ok(None);
    }
    for var in platform.compiler_vars() {
        cargo.push(format!("cargo::rerun-if-env-changed={var}"));
    }
    let head = format!(
        "kernels for {} (host {}): SASS {sass}",
        platform.target, platform.host
    );
    if !modules.iter().any(|m| m.link == LinkMode::Static) {
        cargo.push(format!(
            "cargo::warning={head}; fat binaries only, no host code to cross-compile"
        ));
        return Ok(None);
    }
    let cross = resolve(env, platform, &toolkit.root)?;
    cargo.push(format!(
        "cargo::warning={head}; static modules' host code with {} ({}), CUDA runtime from {}",
        cross.compiler.0.display(),
        cross.compiler.1,
        cross.runtime_dir.display()
    ));
    nvcc.ccbin = Some(cross.compiler);
    nvcc.target_dir = cross.target_dir;
    Ok(Some(cross.runtime_dir))
}

/// The target's compiler and runtime for a toolkit at `root`.
pub(crate) fn resolve<E: EnvSource + ?Sized>(
    env: &E,
    platform: &Platform,
    root: &Path,
) -> Result<CrossHost, Error> {
    let target = platform.target.as_str();
    let dir = nvcc_target_dir(target).ok_or_else(|| Error::NoTargetDir {
        target: target.to_string(),
    })?;
    let compiler = target_compiler(env, platform)?;
    check_machine(target, &compiler)?;
    let candidates = runtime_candidates(root, dir);
    let runtime_dir = candidates
        .iter()
        .find(|d| d.join(RUNTIME_LIB).is_file())
        .cloned()
        .ok_or_else(|| Error::NoTargetRuntime {
            target: target.to_string(),
            looked_in: candidates
                .iter()
                .map(|d| d.display().to_string())
                .collect::<Vec<_>>()
                .join(", "),
        })?;
    let target_dir = root.join(TARGETS_DIR).join(dir).is_dir().then_some(dir);
    Ok(CrossHost {
        compiler,
        runtime_dir,
        target_dir,
    })
}

/// Where the target's runtime may be, in order.
pub fn runtime_candidates(root: &Path, nvcc_dir: &str) -> Vec<PathBuf> {
    let in_root = root.join(TARGETS_DIR).join(nvcc_dir);
    let mut dirs = vec![in_root.join("lib64"), in_root.join("lib")];
    // The kiln install holding the toolkit: by the path as given, and as
    // resolved (a toolkit found through a link into the install's venv).
    let resolved = std::fs::canonicalize(root).ok();
    for start in std::iter::once(root).chain(resolved.as_deref()) {
        if let Some(install) = start
            .ancestors()
            .skip(1)
            .find(|a| a.join(INSTALL_RECORD).is_file())
        {
            let dir = install.join(TARGETS_DIR).join(nvcc_dir).join("lib");
            if !dirs.contains(&dir) {
                dirs.push(dir);
            }
        }
    }
    dirs
}

/// The target's C++ compiler, from the first variable set, else derived.
fn target_compiler<E: EnvSource + ?Sized>(
    env: &E,
    platform: &Platform,
) -> Result<(PathBuf, String), Error> {
    let target = &platform.target;
    let path = env.var_os("PATH").unwrap_or_default();
    let underscored = target.replace('-', "_");
    let fix = format!(
        "set CUDAHOSTCXX_{underscored} to a C++ compiler for {target} (a path, or a name on PATH)"
    );
    let vars = platform.compiler_vars();
    let (named, linker_var) = vars.split_at(vars.len() - 1);
    for var in named {
        let Some(value) = env.var_os(var) else {
            continue;
        };
        let value = value.to_string_lossy().into_owned();
        let fail = |problem: String| Error::CrossCompiler {
            target: target.clone(),
            compiler: value.clone(),
            origin: var.clone(),
            problem: format!("{problem}; {fix}, or unset {var}"),
        };
        if value.trim().is_empty() {
            return Err(fail("is set but empty".into()));
        }
        let found = find_program(value.trim(), &path).map_err(fail)?;
        return Ok((found, var.clone()));
    }
    let mut derived = Vec::new();
    if let Some(linker) = env.var_os(&linker_var[0]).filter(|v| !v.is_empty()) {
        if let Some(cxx) = cxx_beside(Path::new(&linker)) {
            derived.push((cxx, format!("beside {}", linker_var[0])));
        }
    }
    derived.push((
        PathBuf::from(format!("{}-g++", gnu_triple(target))),
        "the target's GNU triple".to_string(),
    ));
    for (cxx, origin) in &derived {
        if let Ok(found) = find_program(&cxx.to_string_lossy(), &path) {
            return Ok((found, origin.clone()));
        }
    }
    let tried: Vec<String> = derived
        .iter()
        .map(|(cxx, _)| cxx.display().to_string())
        .collect();
    Err(Error::CrossCompiler {
        target: target.clone(),
        compiler: tried.join(", "),
        origin: "derived".to_string(),
        problem: format!(
            "not found; install a C++ cross compiler for {target} (Debian: g++-{}) or {fix}",
            gnu_triple(target)
        ),
    })
}

/// The C++ driver beside a C linker driver: `aarch64-linux-gnu-gcc` ->
/// `aarch64-linux-gnu-g++`, `clang` -> `clang++`; `None` for another linker.
fn cxx_beside(linker: &Path) -> Option<PathBuf> {
    let name = linker.file_name()?.to_str()?;
    let cxx = if let Some(at) = name.rfind("gcc") {
        format!("{}g++{}", &name[..at], &name[at + 3..])
    } else if let Some(at) = name.rfind("clang") {
        let rest = &name[at + 5..];
        if rest.starts_with("++") {
            name.to_string()
        } else {
            format!("{}clang++{rest}", &name[..at])
        }
    } else if name.ends_with("-cc") || name == "cc" {
        format!("{}c++", &name[..name.len() - 2])
    } else {
        return None;
    };
    Some(linker.with_file_name(cxx))
}

/// Refuses a compiler that says it builds for another CPU (`g++` named for
/// an aarch64 target would write x86 objects that fail only at the link),
/// and one that fails to say (`/bin/false`: it would fail later, in nvcc,
/// without the variable that named it). One that answers nothing is taken
/// as named.
fn check_machine(target: &str, (compiler, origin): &(PathBuf, String)) -> Result<(), Error> {
    // The variable to set: the one that named it, else the target's own.
    let var = if origin.contains(' ') {
        format!("CUDAHOSTCXX_{}", target.replace('-', "_"))
    } else {
        origin.clone()
    };
    let refuse = |problem: String| Error::CrossCompiler {
        target: target.to_string(),
        compiler: compiler.display().to_string(),
        origin: origin.clone(),
        problem: format!("{problem}; set {var} to a C++ compiler for {target}"),
    };
    let asked = format!("`{} -dumpmachine`", compiler.display());
    let output = crate::toolkit::output_within(
        Command::new(compiler).arg("-dumpmachine"),
        crate::probe::process_limit(),
    )
    .map_err(|e| refuse(format!("{asked}: {e}")))?;
    if !output.status.success() {
        return Err(refuse(format!("{asked} failed ({})", output.status)));
    }
    let machine = String::from_utf8_lossy(&output.stdout).trim().to_string();
    if machine.is_empty() {
        return Ok(());
    }
    let cpu = |triple: &str| match triple.split('-').next().unwrap_or_default() {
        "arm64" => "aarch64".to_string(),
        other => other.to_string(),
    };
    if cpu(&machine) == cpu(target) {
        return Ok(());
    }
    Err(Error::CrossCompiler {
        target: target.to_string(),
        compiler: compiler.display().to_string(),
        origin: origin.clone(),
        problem: format!(
            "compiles for {machine} (its -dumpmachine); set CUDAHOSTCXX_{} to a C++ compiler for {target}",
            target.replace('-', "_")
        ),
    })
}

#[cfg(test)]
#[path = "cross/tests.rs"]
mod tests;
