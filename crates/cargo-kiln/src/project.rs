//! The crate a command works on: found with `cargo metadata` (the crate in
//! the current directory, or `--manifest-path`), its target dir and the
//! project-local toolkit under it, and the one thin layer that runs its
//! `cargo build` and finds the manifest its build script's `KernelBuild`
//! wrote.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use cargo_metadata::Message;
use cuda_build::toolkit::{discover, Discovery, ProcessEnv};
use cuda_build::Manifest;

use crate::error::usage_error;

mod prefix;

/// The variables cuda-build's toolkit search reads first; when one is set,
/// the project-local toolkit is not handed to the build.
const DISCOVERY_VARS: [&str; 4] = ["NVCC", "CUDA_PATH", "CUDA_HOME", "CUDA_ROOT"];

/// The label of the toolkit in the crate's target dir (an install made with
/// `--dir target/cuda-toolkit`, or by an older cargo-kiln).
const PROJECT_LOCAL: &str = "project-local";

/// One crate whose build script runs cuda-build.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Project {
    /// The package name.
    pub name: String,
    /// Its `Cargo.toml`.
    pub manifest_path: PathBuf,
    /// The folder holding it.
    pub dir: PathBuf,
    /// Cargo's target dir for it (`CARGO_TARGET_DIR` honoured).
    pub target_dir: PathBuf,
    /// Its build script's source (touched after a toolkit install, so the
    /// script reruns and finds the toolkit).
    pub build_script: Option<PathBuf>,
}

/// `cargo metadata --no-deps` of `manifest_path` by `cargo`, for at most
/// `limit`; a failure is one line in cargo's words: its `error:` line and
/// the last cause it gives (never a backtrace's last line).
fn read_metadata(
    cargo: &std::ffi::OsStr,
    manifest_path: &Path,
    limit: Duration,
) -> Result<cargo_metadata::Metadata> {
    let mut command = cargo_metadata::MetadataCommand::new()
        .cargo_path(cargo)
        .manifest_path(manifest_path)
        .no_deps()
        .cargo_command();
    let failed = |why: String| {
        usage_error!(
            "cannot read {} with cargo metadata: {why}",
            manifest_path.display()
        )
    };
    let output = cuda_build::toolkit::output_within(&mut command, limit)
        .map_err(|e| failed(format!("`{}` {e}", Path::new(cargo).display())))?;
    if !output.status.success() {
        return Err(failed(cargo_error(&String::from_utf8_lossy(
            &output.stderr,
        ))));
    }
    let stdout = String::from_utf8_lossy(&output.stdout);
    let json = stdout
        .lines()
        .find(|l| l.starts_with('{'))
        .unwrap_or_default();
    cargo_metadata::MetadataCommand::parse(json).map_err(|e| failed(e.to_string()))
}

/// Cargo's error as one line: its first `error:` line, and the last line
/// under its last `Caused by:` (the root cause); the whole first line where
/// it printed no `error:`.
fn cargo_error(stderr: &str) -> String {
    let lines: Vec<&str> = stderr.lines().map(str::trim).collect();
    let Some(error) = lines.iter().find_map(|l| l.strip_prefix("error:")) else {
        return lines.iter().find(|l| !l.is_empty()).map_or_else(
            || "it failed and printed nothing".to_string(),
            |l| l.to_string(),
        );
    };
    let cause = lines
        .iter()
        .rposition(|l| *l == "Caused by:")
        .and_then(|at| lines[at + 1..].iter().take_while(|l| !l.is_empty()).last());
    match cause {
        Some(cause) => format!("{} ({cause})", error.trim()),
        None => error.trim().to_string(),
    }
}

impl Project {
    /// [`Project::locate`], or `None` where no `manifest_path` is given and
    /// no `Cargo.toml` is at or above the current directory (for commands
    /// that serve every crate, such as `toolkit install`).
    pub fn locate_if_any(manifest_path: Option<&Path>) -> Result<Option<Self>> {
        if manifest_path.is_none() && nearest_manifest().is_err() {
            return Ok(None);
        }
        Self::locate(manifest_path).map(Some)
    }

    /// The crate of `manifest_path`, or of the nearest `Cargo.toml` above
    /// the current directory.
    pub fn locate(manifest_path: Option<&Path>) -> Result<Self> {
        let manifest_path = match manifest_path {
            Some(path) => {
                if !path.is_file() {
                    return Err(usage_error!(
                        "`--manifest-path {}`: no such file; give the path of a crate's Cargo.toml",
                        path.display()
                    ));
                }
                std::path::absolute(path)?
            }
            None => nearest_manifest()?,
        };
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        let limit = cuda_build::toolkit::probe_timeout(&ProcessEnv)?;
        let metadata = read_metadata(&cargo, &manifest_path, limit)?;
        let canonical = manifest_path.canonicalize()?;
        let package = metadata
            .packages
            .iter()
            .find(|p| {
                p.manifest_path
                    .as_std_path()
                    .canonicalize()
                    .is_ok_and(|m| m == canonical)
            })
            .ok_or_else(|| {
                usage_error!(
                    "{} is a workspace manifest with no package; run in a crate's folder or pass --manifest-path CRATE/Cargo.toml",
                    manifest_path.display()
                )
            })?;
        let dir = canonical
            .parent()
            .context("a Cargo.toml has a parent folder")?
            .to_path_buf();
        let build_script = package
            .targets
            .iter()
            .find(|t| t.is_custom_build())
            .map(|t| t.src_path.clone().into_std_path_buf());
        Ok(Self {
            name: package.name.to_string(),
            manifest_path: canonical,
            dir,
            target_dir: metadata.target_directory.into_std_path_buf(),
            build_script,
        })
    }

    /// The project-local toolkit dir, `<target dir>/cuda-toolkit` (`cuda`
    /// and `libclang` links inside): looked at before the user's store.
    pub fn toolkit_dir(&self) -> PathBuf {
        self.target_dir.join("cuda-toolkit")
    }

    /// cuda-build's toolkit search, with the project-local toolkit as the
    /// candidate after the variables and `PATH`.
    pub fn discovery(&self) -> Discovery {
        discovery_with_local(&self.toolkit_dir())
    }

    /// `path` as written for humans: relative to the crate when inside it.
    pub fn display(&self, path: &Path) -> String {
        match path.strip_prefix(&self.dir) {
            Ok(rel) if !rel.as_os_str().is_empty() => rel.display().to_string(),
            _ => path.display().to_string(),
        }
    }

    /// A `cargo` command for this crate, with the project-local toolkit
    /// handed over as `NVCC` when nothing else points the build at one.
    pub fn cargo(&self, subcommand: &str) -> Command {
        let mut cargo = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
        cargo
            .current_dir(&self.dir)
            .arg(subcommand)
            .arg("--manifest-path")
            .arg(&self.manifest_path);
        // Only a project-local toolkit is handed over: the user's store is
        // found by the build script itself, so `cargo kiln build` and a plain
        // `cargo build` see the same variables and never rebuild each other.
        if !DISCOVERY_VARS.iter().any(|v| std::env::var_os(v).is_some()) {
            if let Some(tk) = discovery_with_local(&self.toolkit_dir()).toolkit {
                if tk.found_by == PROJECT_LOCAL {
                    cargo.env("NVCC", tk.nvcc);
                }
            }
        }
        cargo
    }

    /// Builds the crate (`--release` when asked) with the arch spec `spec`
    /// (through `<PREFIX>_CUDA_ARCHS`), and returns its kernel build's
    /// manifest. The prefix is read from an earlier build's manifest; the
    /// first build of a crate is run once without the spec to learn it.
    pub fn build(&self, spec: Option<&str>, release: bool) -> Result<Built> {
        let profile = if release { "release" } else { "debug" };
        let mut prefix = self
            .known_prefix(profile)
            .or_else(|| self.build_script_prefix());
        let mut learning = None;
        if spec.is_some() && prefix.is_none() {
            eprintln!(
                "cargo kiln: building {} once to learn its build script's env prefix",
                self.name
            );
            let first = self.cargo_build(None, release)?;
            prefix = Some(first.env_prefix.clone());
            learning = Some(first);
        }
        eprintln!("cargo kiln: building {} ({profile})", self.name);
        let arch = spec.zip(prefix.as_deref());
        let mut built = self.cargo_build(arch, release)?;
        if let Some(first) = learning {
            built.count_in(&first);
        }
        Ok(built)
    }

    fn cargo_build(&self, arch: Option<(&str, &str)>, release: bool) -> Result<Built> {
        let mut cargo = self.cargo("build");
        cargo
            .arg("--message-format=json-render-diagnostics")
            .stdout(Stdio::piped());
        if release {
            cargo.arg("--release");
        }
        if let Some((spec, prefix)) = arch {
            cargo.env(format!("{prefix}_CUDA_ARCHS"), spec);
        }
        let stdout = cargo_stdout(cargo)?;
        let file = kernel_manifest(&stdout, &self.dir).with_context(|| {
            format!(
                "no build script of {} wrote a kernel build manifest; does its build.rs run cuda_build::KernelBuild?",
                self.name
            )
        })?;
        Built::read(file)
    }

    /// The env prefix of an earlier build of this crate, in either profile,
    /// else the one its build script's source gives: what `build`, `bundle`
    /// and `doctor` know without running a build.
    pub fn known_env_prefix(&self) -> Option<String> {
        self.known_prefix("debug")
            .or_else(|| self.known_prefix("release"))
            .or_else(|| self.build_script_prefix())
    }

    /// The prefix the build script's source gives its kernel build.
    fn build_script_prefix(&self) -> Option<String> {
        self.build_script
            .as_deref()
            .and_then(prefix::from_build_script)
    }

    /// The env prefix of an earlier build of this crate in `profile`.
    fn known_prefix(&self, profile: &str) -> Option<String> {
        let build = self.target_dir.join(profile).join("build");
        let stem = format!("{}-", self.name);
        std::fs::read_dir(build)
            .ok()?
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().starts_with(&stem))
            .flat_map(|e| {
                std::fs::read_dir(e.path().join("out"))
                    .into_iter()
                    .flatten()
            })
            .flatten()
            .map(|e| e.path())
            .find(|p| {
                is_manifest_file(p)
                    && Manifest::read(p).is_ok_and(|m| m.base.as_deref() == Some(&self.dir))
            })
            .and_then(|p| prefix_of(&p))
    }
}

/// A finished kernel build.
#[derive(Debug, Clone)]
pub struct Built {
    /// What the build script wrote.
    pub manifest: Manifest,
    /// Where (`OUT_DIR/<prefix>-manifest.toml`).
    pub manifest_file: PathBuf,
    /// The build script's env prefix, upper-case (`DOWNSTREAM`).
    pub env_prefix: String,
}

impl Built {
    /// Counts the work of `earlier`, a build this command ran first, as this
    /// build's: what it compiled or took from the cache, the later build
    /// found up to date, and the report must say what the command did.
    fn count_in(&mut self, earlier: &Built) {
        for module in &mut self.manifest.modules {
            let Some(before) = earlier
                .manifest
                .modules
                .iter()
                .find(|m| m.name == module.name)
            else {
                continue;
            };
            module.compiled |= before.compiled;
            module.cache_hits += before.cache_hits;
            module.compile_ms = match (module.compile_ms, before.compile_ms) {
                (Some(a), Some(b)) => Some(a.saturating_add(b)),
                (a, b) => a.or(b),
            };
        }
    }

    /// Reads a manifest file.
    pub fn read(file: PathBuf) -> Result<Self> {
        let manifest = Manifest::read(&file)?;
        let env_prefix = prefix_of(&file).unwrap_or_default();
        Ok(Self {
            manifest,
            manifest_file: file,
            env_prefix,
        })
    }
}

/// cuda-build's search with `<dir>/cuda` as the project-local candidate.
pub fn discovery_with_local(toolkit_dir: &Path) -> Discovery {
    discover(
        &ProcessEnv,
        &[(PROJECT_LOCAL.to_string(), toolkit_dir.join("cuda"))],
    )
}

/// [`discovery_with_local`], every place looked at: the toolkits after the
/// one taken are reported as shadowed (for `doctor`).
pub fn every_toolkit_with_local(toolkit_dir: &Path) -> Discovery {
    cuda_build::discover_every(
        &ProcessEnv,
        &[(PROJECT_LOCAL.to_string(), toolkit_dir.join("cuda"))],
    )
}

/// Runs a cargo build whose stdout is piped (its JSON messages); its
/// stderr (progress, diagnostics) goes to the user. Fails when it does.
pub fn cargo_stdout(mut cargo: Command) -> Result<Vec<u8>> {
    let output = cargo
        .stderr(Stdio::inherit())
        .spawn()
        .context("cannot run cargo")?
        .wait_with_output()?;
    if !output.status.success() {
        bail!(
            "cargo build failed ({}); its errors are above",
            output.status
        );
    }
    Ok(output.stdout)
}

/// The manifest of the kernel build whose package root is `crate_dir`, from
/// the build scripts cargo reports.
pub fn kernel_manifest(messages: &[u8], crate_dir: &Path) -> Option<PathBuf> {
    Message::parse_stream(messages)
        .map_while(Result::ok)
        .filter_map(|msg| match msg {
            Message::BuildScriptExecuted(script) => Some(script.out_dir.into_std_path_buf()),
            _ => None,
        })
        .flat_map(|out_dir| std::fs::read_dir(out_dir).into_iter().flatten().flatten())
        .map(|entry| entry.path())
        .filter(|path| is_manifest_file(path))
        .find(|path| Manifest::read(path).is_ok_and(|m| m.base.as_deref() == Some(crate_dir)))
}

fn is_manifest_file(path: &Path) -> bool {
    path.file_name()
        .is_some_and(|n| n.to_string_lossy().ends_with("-manifest.toml"))
}

/// `DOWNSTREAM` from `.../downstream-manifest.toml`.
fn prefix_of(file: &Path) -> Option<String> {
    let name = file.file_name()?.to_str()?;
    Some(name.strip_suffix("-manifest.toml")?.to_ascii_uppercase())
}

/// The nearest `Cargo.toml` at or above the current directory.
fn nearest_manifest() -> Result<PathBuf> {
    let cwd = std::env::current_dir().context("cannot read the current directory")?;
    cwd.ancestors()
        .map(|d| d.join("Cargo.toml"))
        .find(|p| p.is_file())
        .ok_or_else(|| {
            usage_error!(
                "no Cargo.toml in {} or above; run in a crate's folder or pass --manifest-path",
                cwd.display()
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_prefix_is_the_manifest_file_name_upper_cased() {
        let f = Path::new("/t/build/x-1/out/downstream-manifest.toml");
        assert_eq!(prefix_of(f).as_deref(), Some("DOWNSTREAM"));
        assert_eq!(prefix_of(Path::new("/t/other.toml")), None);
        assert_eq!(
            cuda_build::manifest::file_name("KT"),
            "kt-manifest.toml",
            "cuda-build's naming, which prefix_of inverts"
        );
    }

    /// Issue 42: `bundle` (and `doctor`) read a fresh crate's prefix from
    /// its `build.rs` as `build` does, instead of a hidden debug build.
    #[test]
    fn a_fresh_crates_prefix_is_read_from_its_build_script() {
        let tmp = tempfile::tempdir().unwrap();
        let build_rs = tmp.path().join("build.rs");
        std::fs::write(
            &build_rs,
            "fn main() { cuda_build::KernelBuild::new(\"kernels\").env_prefix(\"DOWNSTREAM\").run().unwrap(); }\n",
        )
        .unwrap();
        let project = Project {
            name: "fresh".into(),
            manifest_path: tmp.path().join("Cargo.toml"),
            dir: tmp.path().to_path_buf(),
            target_dir: tmp.path().join("target"),
            build_script: Some(build_rs),
        };
        assert_eq!(project.known_env_prefix().as_deref(), Some("DOWNSTREAM"));
        let none = Project {
            build_script: None,
            ..project
        };
        assert_eq!(none.known_env_prefix(), None);
    }

    /// A fake cargo at `dir/cargo` running `body`.
    fn fake_cargo(dir: &Path, body: &str) -> PathBuf {
        use std::os::unix::fs::PermissionsExt as _;
        let cargo = dir.join("cargo");
        std::fs::write(&cargo, format!("#!/bin/sh\n{body}\n")).unwrap();
        std::fs::set_permissions(&cargo, std::fs::Permissions::from_mode(0o755)).unwrap();
        cargo
    }

    /// Issue 41: a `cargo metadata` that fails says cargo's own error line
    /// and its cause, never the last line of a backtrace ("13: <unknown>");
    /// one that hangs is given up after the probe limit, naming it.
    #[test]
    fn a_failing_or_hanging_cargo_metadata_is_one_line_with_cargos_words() {
        let tmp = tempfile::tempdir().unwrap();
        let manifest = tmp.path().join("Cargo.toml");
        std::fs::write(&manifest, "[package\n").unwrap();
        let cargo = fake_cargo(
            tmp.path(),
            "cat >&2 <<'EOF'\nerror: failed to parse manifest at `/w/Cargo.toml`\n\nCaused by:\n  TOML parse error at line 1, column 9\n\nstack backtrace:\n  12: main\n  13: <unknown>\nEOF\nexit 101",
        );
        let err = read_metadata(cargo.as_os_str(), &manifest, Duration::from_secs(60))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("failed to parse manifest at `/w/Cargo.toml`")
                && err.contains("TOML parse error at line 1, column 9")
                && !err.contains("<unknown>")
                && !err.contains('\n'),
            "{err}"
        );
        let cargo = fake_cargo(tmp.path(), "sleep 30");
        let err = read_metadata(cargo.as_os_str(), &manifest, Duration::from_secs(1))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("did not finish within 1s") && err.contains("KILN_PROBE_TIMEOUT"),
            "{err}"
        );
    }

    #[test]
    fn a_missing_manifest_path_is_a_one_line_usage_error() {
        let err = Project::locate(Some(Path::new("/nonexistent/Cargo.toml"))).unwrap_err();
        assert!(err.is::<crate::UsageError>());
        assert_eq!(
            err.to_string(),
            "`--manifest-path /nonexistent/Cargo.toml`: no such file; give the path of a crate's Cargo.toml"
        );
    }

    #[test]
    fn a_workspace_member_is_located_with_its_target_dir() {
        let here = Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml");
        let p = Project::locate(Some(&here)).unwrap();
        assert_eq!(p.name, "cargo-kiln");
        assert_eq!(p.dir, here.parent().unwrap().canonicalize().unwrap());
        assert!(p.target_dir.ends_with("target") || std::env::var_os("CARGO_TARGET_DIR").is_some());
    }
}
