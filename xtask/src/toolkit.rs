//! `cargo xtask toolkit [install] [--dir DIR]`: provisions the pinned CUDA
//! toolkit (and libclang for bindgen) from PyPI wheels into a venv, without
//! root, and reports what is installed.
//!
//! Layout of DIR (the contract with cuda-build's discovery):
//! `cuda` -> the toolkit root inside the venv, `libclang` -> the dir holding
//! libclang.so, `kiln-toolkit.toml` records what was installed.

use std::ffi::OsString;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

use crate::cli::{usage_error, Args};
use crate::{config, workspace};

const USAGE: &str = "cargo xtask toolkit [install] [--dir DIR]";

/// The record written into DIR after a successful install.
const RECORD_FILE: &str = "kiln-toolkit.toml";

/// Oldest python3 the install is supported on.
const MIN_PYTHON: (u32, u32) = (3, 9);

/// Entry point for `cargo xtask toolkit ...`.
pub(crate) fn run(mut args: Args) -> Result<()> {
    let sub = args.positional();
    let dir = match args.value("--dir")? {
        Some(d) => std::env::current_dir()
            .context("cannot read the current directory")?
            .join(d),
        None => workspace::default_toolkit_dir(),
    };
    args.finish(USAGE)?;
    match sub.as_deref() {
        None => {
            print!("{}", report(&dir).render());
            Ok(())
        }
        Some("install") => install(&dir),
        Some(other) => Err(usage_error!(
            "unknown `cargo xtask toolkit` subcommand `{other}`; usage: {USAGE}"
        )),
    }
}

// ---------------------------------------------------------------------------
// ci/toolkit.toml

/// The pinned versions, as written in `ci/toolkit.toml`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Pins {
    pub(crate) cuda: CudaPins,
    pub(crate) libclang: LibclangPin,
}

/// `[cuda]`: the toolkit's version and its exactly pinned wheels.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct CudaPins {
    /// `major.minor`, e.g. `13.0`; for people and reports.
    pub(crate) version: String,
    /// `name==version` requirements handed to pip.
    pub(crate) packages: Vec<String>,
}

/// `[libclang]`: the wheel that ships libclang.so for bindgen.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct LibclangPin {
    pub(crate) package: String,
}

impl Pins {
    /// Reads and checks `ci/toolkit.toml`.
    pub(crate) fn load() -> Result<Self> {
        let path = workspace::toolkit_pins_file();
        let pins: Pins = config::load(&path)?;
        pins.check()
            .map_err(|e| usage_error!("{}: {e}", workspace::display(&path)))?;
        Ok(pins)
    }

    /// Parses and checks the text of a `ci/toolkit.toml`.
    #[cfg(test)]
    fn parse(text: &str) -> Result<Self, String> {
        let pins: Pins = config::parse("toolkit.toml", text)?;
        pins.check()?;
        Ok(pins)
    }

    /// Every requirement handed to pip, CUDA wheels first.
    pub(crate) fn requirements(&self) -> Vec<&str> {
        let cuda = self.cuda.packages.iter().map(String::as_str);
        cuda.chain([self.libclang.package.as_str()]).collect()
    }

    /// Rejects what would make the install unreproducible or useless.
    fn check(&self) -> Result<(), String> {
        if self.cuda.packages.is_empty() {
            return Err("`cuda.packages` is empty; list the pinned CUDA wheels".into());
        }
        let mut names = Vec::new();
        for req in self.requirements() {
            let (name, _) = split_pin(req)?;
            if names.contains(&name) {
                return Err(format!("`{name}` is listed twice; keep one pin"));
            }
            names.push(name);
        }
        if !names.contains(&"nvidia-cuda-nvcc".to_string()) {
            return Err("`nvidia-cuda-nvcc` is not pinned; nvcc comes from it".into());
        }
        Ok(())
    }
}

/// Splits `name==version` into a normalised name and the version; anything
/// but an exact pin is an error.
fn split_pin(req: &str) -> Result<(String, &str), String> {
    let not_pinned = || {
        format!(
            "`{req}` is not an exact pin; write it as `name==version` (pip index versions NAME)"
        )
    };
    let (name, version) = req.split_once("==").ok_or_else(not_pinned)?;
    let name = name.trim();
    let version = version.trim();
    let bad = |s: &str| {
        s.is_empty()
            || !s
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
    };
    if bad(name) || bad(version) {
        return Err(not_pinned());
    }
    Ok((normalise_name(name), version))
}

/// PyPI names compare case-insensitively with `-`, `_` and `.` equivalent.
fn normalise_name(name: &str) -> String {
    name.to_ascii_lowercase().replace(['_', '.'], "-")
}

// ---------------------------------------------------------------------------
// DIR/kiln-toolkit.toml

/// What an install wrote into `DIR/kiln-toolkit.toml`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Record {
    /// The pins it was installed from (a copy of `ci/toolkit.toml`).
    cuda: CudaPins,
    libclang: LibclangPin,
    installed: Installed,
}

/// Facts about the install itself.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Installed {
    /// python3 version the venv was made with.
    python: String,
    /// The toolkit root, relative to DIR.
    toolkit_root: String,
    /// `nvcc --version`'s release line at install time.
    nvcc: String,
    /// `pip freeze` of the venv: the pins plus what they pulled in.
    freeze: Vec<String>,
}

impl Record {
    fn pins(&self) -> Pins {
        Pins {
            cuda: self.cuda.clone(),
            libclang: self.libclang.clone(),
        }
    }

    fn read(dir: &Path) -> Option<Record> {
        let text = std::fs::read_to_string(dir.join(RECORD_FILE)).ok()?;
        toml::from_str(&text).ok()
    }

    fn to_toml(&self) -> Result<String> {
        let body = toml::to_string(self).context("cannot serialise the toolkit record")?;
        Ok(format!(
            "# Written by `cargo xtask toolkit install`; do not edit.\n\
             # It is compared with ci/toolkit.toml to decide whether to reinstall.\n\n{body}"
        ))
    }
}

// ---------------------------------------------------------------------------
// install

/// `cargo xtask toolkit install`: installs into `dir` unless it is up to date.
fn install(dir: &Path) -> Result<()> {
    let pins = Pins::load()?;
    let shown = workspace::display(dir);
    let why = match up_to_date(dir, &pins) {
        Ok(release) => {
            println!(
                "toolkit up to date at {shown} (CUDA {}; {release})",
                pins.cuda.version
            );
            return Ok(());
        }
        Err(why) => why,
    };
    check_replaceable(dir)?;
    println!(
        "toolkit: {why}; installing CUDA {} into {shown}",
        pins.cuda.version
    );
    let started = Instant::now();
    let python = check_python()?;

    let parent = dir
        .parent()
        .context("the toolkit dir must not be the filesystem root; pass another --dir")?;
    let name = dir
        .file_name()
        .context("the toolkit dir has no name; pass another --dir")?;
    std::fs::create_dir_all(parent)
        .with_context(|| format!("cannot create {}", parent.display()))?;
    let staging = StagingDir::create(parent.join(hidden(name, "partial")))?;
    let tmp = staging.path();

    let venv = tmp.join("venv");
    println!("[1/4] creating venv at {}", venv.display());
    let status = Command::new("python3")
        .args(["-m", "venv"])
        .arg(&venv)
        .status()
        .context("cannot run python3; install python3 (>= 3.9) with its venv module")?;
    if !status.success() {
        bail!(
            "`python3 -m venv` failed ({status}); see its output above (if it names ensurepip, install python3-venv)"
        );
    }

    let requirements = pins.requirements();
    println!(
        "[2/4] installing {} pinned packages with pip: {}",
        requirements.len(),
        requirements.join(" ")
    );
    pip_install(&venv, &requirements)?;

    println!("[3/4] linking cuda and libclang; checking nvcc");
    let site = site_packages(&venv)?;
    let toolkit_root = site.join("nvidia").join("cu13");
    if !toolkit_root.join("bin").join("nvcc").is_file() {
        bail!(
            "the wheels installed no nvidia/cu13/bin/nvcc under {}; check the CUDA pins in ci/toolkit.toml",
            site.display()
        );
    }
    let libclang_dir = site.join("clang").join("native");
    if !libclang_dir.join("libclang.so").is_file() {
        bail!(
            "the libclang wheel installed no clang/native/libclang.so under {}; check [libclang] in ci/toolkit.toml",
            site.display()
        );
    }
    // Relative links, so the staging dir can be renamed into place.
    let toolkit_rel = relative_to(&toolkit_root, tmp)?;
    symlink(&toolkit_rel, &tmp.join("cuda"))?;
    symlink(&relative_to(&libclang_dir, tmp)?, &tmp.join("libclang"))?;
    let release = nvcc_release(&tmp.join("cuda"))?;
    let record = Record {
        cuda: pins.cuda.clone(),
        libclang: pins.libclang.clone(),
        installed: Installed {
            python,
            toolkit_root: toolkit_rel.display().to_string(),
            nvcc: release,
            freeze: pip_freeze(&venv)?,
        },
    };
    std::fs::write(tmp.join(RECORD_FILE), record.to_toml()?)
        .with_context(|| format!("cannot write {RECORD_FILE} in {}", tmp.display()))?;

    println!("[4/4] moving into place at {shown}");
    staging.commit(dir, &parent.join(hidden(name, "old")))?;

    // Checked again through the final path: the venv was renamed.
    let release = nvcc_release(&dir.join("cuda"))?;
    invalidate_kernel_build()?;
    println!(
        "toolkit installed in {:.0?}: {} -> {} ({release})",
        started.elapsed(),
        dir.join("cuda").display(),
        toolkit_rel.display(),
    );
    if dir != workspace::default_toolkit_dir() {
        println!(
            "note: not the default dir; point discovery at it with CUDA_PATH={}",
            dir.join("cuda").display()
        );
    }
    Ok(())
}

/// `Ok(nvcc release line)` when `dir` holds exactly `pins` and nvcc runs;
/// otherwise why it needs (re)installing.
fn up_to_date(dir: &Path, pins: &Pins) -> Result<String, String> {
    if !dir.exists() {
        return Err("nothing installed".into());
    }
    let record = Record::read(dir).ok_or_else(|| format!("no readable {RECORD_FILE}"))?;
    if &record.pins() != pins {
        return Err("installed pins differ from ci/toolkit.toml".into());
    }
    if !dir.join("libclang").join("libclang.so").is_file() {
        return Err("libclang/libclang.so is missing".into());
    }
    nvcc_release(&dir.join("cuda")).map_err(|e| format!("{e:#}"))
}

/// An install replaces DIR wholesale, so DIR must be absent, empty, or an
/// earlier install (it has a record): never someone's directory passed as
/// `--dir` by mistake.
fn check_replaceable(dir: &Path) -> Result<()> {
    if !dir.exists() && !dir.is_symlink() {
        return Ok(());
    }
    let empty = std::fs::read_dir(dir).is_ok_and(|mut d| d.next().is_none());
    if empty || dir.join(RECORD_FILE).is_file() {
        return Ok(());
    }
    bail!(
        "{} exists and is not a toolkit install (no {RECORD_FILE}); remove it or pass another --dir",
        dir.display()
    )
}

/// Checks python3 is there, new enough and has venv; returns its version.
fn check_python() -> Result<String> {
    const PROBE: &str = "import sys, venv, ensurepip; print('%d.%d.%d' % sys.version_info[:3])";
    let out = match Command::new("python3").args(["-c", PROBE]).output() {
        Ok(out) => out,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => bail!(
            "python3 not found on PATH; install python3 (>= 3.9) with the venv module (e.g. `apt-get install python3 python3-venv`)"
        ),
        Err(e) => bail!("cannot run python3: {e}; install python3 (>= 3.9) with the venv module"),
    };
    if !out.status.success() {
        bail!(
            "python3 lacks the venv/ensurepip modules; install them (e.g. `apt-get install python3-venv`)"
        );
    }
    let version = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let mut parts = version.split('.').map(|p| p.parse::<u32>().unwrap_or(0));
    let (major, minor) = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
    if (major, minor) < MIN_PYTHON {
        bail!(
            "python3 is {version}; the toolkit install needs python3 >= {}.{} with venv",
            MIN_PYTHON.0,
            MIN_PYTHON.1
        );
    }
    Ok(version)
}

/// Runs pip, streaming its output; on failure names the package that failed.
fn pip_install(venv: &Path, requirements: &[&str]) -> Result<()> {
    // `python -m pip`, not `bin/pip`: pip's script hard-codes the staging
    // path in its shebang.
    let mut child = Command::new(venv.join("bin").join("python"))
        .args([
            "-m",
            "pip",
            "install",
            "--progress-bar",
            "off",
            "--disable-pip-version-check",
            "--no-input",
            "--only-binary=:all:",
        ])
        .args(requirements)
        .stderr(Stdio::piped())
        .spawn()
        .context("cannot run the venv's python")?;
    // Echo stderr live while keeping it, to name the failing package.
    let mut stderr_text = String::new();
    if let Some(stderr) = child.stderr.take() {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            eprintln!("{line}");
            stderr_text.push_str(&line);
            stderr_text.push('\n');
        }
    }
    let status = child.wait().context("cannot wait for pip")?;
    if status.success() {
        return Ok(());
    }
    let hint = "PyPI (https://pypi.org) must be reachable, or set PIP_INDEX_URL to a mirror";
    match pip_failure(&stderr_text, requirements) {
        Some((package, reason)) => {
            bail!("pip could not install {package} ({reason}); {hint}, and the pin in ci/toolkit.toml must exist there")
        }
        None => bail!("pip install failed ({status}); see pip's output above; {hint}"),
    }
}

/// From pip's stderr: the first pinned requirement an `ERROR:` line names,
/// with that line as the reason.
fn pip_failure(stderr: &str, requirements: &[&str]) -> Option<(String, String)> {
    let names: Vec<(String, &str)> = requirements
        .iter()
        .filter_map(|r| Some((split_pin(r).ok()?.0, *r)))
        .collect();
    stderr
        .lines()
        .filter_map(|l| l.trim().strip_prefix("ERROR:"))
        .find_map(|line| {
            let words = line
                .split(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')))
                .map(normalise_name);
            let found = words
                .into_iter()
                .find_map(|w| names.iter().find(|(n, _)| *n == w))?;
            // pip appends every version it knows; too long for one line.
            let reason = line.split(" (from versions:").next().unwrap_or(line);
            Some((found.1.to_string(), reason.trim().to_string()))
        })
}

/// `pip freeze` of the venv, for the record.
fn pip_freeze(venv: &Path) -> Result<Vec<String>> {
    let out = Command::new(venv.join("bin").join("python"))
        .args(["-m", "pip", "freeze", "--disable-pip-version-check"])
        .output()
        .context("cannot run pip freeze")?;
    if !out.status.success() {
        bail!(
            "pip freeze failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    let text = String::from_utf8_lossy(&out.stdout);
    Ok(text.lines().map(str::to_string).collect())
}

/// `venv/lib/python3.X/site-packages`, whatever X is.
fn site_packages(venv: &Path) -> Result<PathBuf> {
    let lib = venv.join("lib");
    let entries =
        std::fs::read_dir(&lib).with_context(|| format!("cannot read {}", lib.display()))?;
    let mut found: Vec<PathBuf> = entries
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with("python"))
        .map(|e| e.path().join("site-packages"))
        .filter(|p| p.is_dir())
        .collect();
    found.sort();
    match found.as_slice() {
        [one] => Ok(one.clone()),
        [] => bail!(
            "no python*/site-packages under {}; the venv is broken",
            lib.display()
        ),
        many => bail!("several site-packages under {}: {many:?}", lib.display()),
    }
}

/// Runs `root/bin/nvcc --version` and returns its `release` line.
fn nvcc_release(root: &Path) -> Result<String> {
    let nvcc = root.join("bin").join("nvcc");
    let out = Command::new(&nvcc)
        .arg("--version")
        .output()
        .with_context(|| format!("cannot run {}", nvcc.display()))?;
    if !out.status.success() {
        bail!(
            "`{} --version` failed: {}",
            nvcc.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines()
        .find(|l| l.contains("release"))
        .map(|l| l.trim().to_string())
        .with_context(|| format!("`{} --version` printed no release line", nvcc.display()))
}

/// `.NAME.SUFFIX`: a sibling of DIR that cannot be mistaken for it.
fn hidden(name: &std::ffi::OsStr, suffix: &str) -> OsString {
    let mut s = OsString::from(".");
    s.push(name);
    s.push(".");
    s.push(suffix);
    s
}

fn relative_to(path: &Path, base: &Path) -> Result<PathBuf> {
    path.strip_prefix(base)
        .map(Path::to_path_buf)
        .with_context(|| format!("{} is not under {}", path.display(), base.display()))
}

fn symlink(target: &Path, link: &Path) -> Result<()> {
    std::os::unix::fs::symlink(target, link)
        .with_context(|| format!("cannot link {} -> {}", link.display(), target.display()))
}

/// A dir the install is built in; removed on drop unless committed, so a
/// failed or interrupted install leaves nothing at DIR.
#[derive(Debug)]
struct StagingDir {
    path: PathBuf,
    committed: bool,
}

impl StagingDir {
    /// Creates `path`, first removing what an interrupted run left there.
    fn create(path: PathBuf) -> Result<Self> {
        if path.exists() {
            std::fs::remove_dir_all(&path)
                .with_context(|| format!("cannot remove the leftover {}", path.display()))?;
        }
        std::fs::create_dir(&path).with_context(|| format!("cannot create {}", path.display()))?;
        Ok(Self {
            path,
            committed: false,
        })
    }

    fn path(&self) -> &Path {
        &self.path
    }

    /// Renames the staging dir to `dir`, replacing an old install (moved to
    /// `old` first, since rename cannot replace a non-empty dir).
    fn commit(mut self, dir: &Path, old: &Path) -> Result<()> {
        if old.exists() {
            std::fs::remove_dir_all(old)
                .with_context(|| format!("cannot remove {}", old.display()))?;
        }
        if dir.exists() || dir.is_symlink() {
            std::fs::rename(dir, old)
                .with_context(|| format!("cannot move the old install {} aside", dir.display()))?;
        }
        std::fs::rename(&self.path, dir)
            .with_context(|| format!("cannot move {} to {}", self.path.display(), dir.display()))?;
        self.committed = true;
        if old.exists() {
            std::fs::remove_dir_all(old)
                .with_context(|| format!("cannot remove the old install at {}", old.display()))?;
        }
        Ok(())
    }
}

impl Drop for StagingDir {
    fn drop(&mut self) {
        if !self.committed {
            // Best effort: the next install removes leftovers anyway.
            let _ = std::fs::remove_dir_all(&self.path);
        }
    }
}

// ---------------------------------------------------------------------------
// report and discovery

/// What `cargo xtask toolkit` prints: labelled lines, easy to add to.
#[derive(Debug, Default)]
pub(crate) struct Report {
    entries: Vec<(String, String)>,
}

impl Report {
    pub(crate) fn push(&mut self, label: &str, value: impl Into<String>) {
        self.entries.push((label.to_string(), value.into()));
    }

    pub(crate) fn render(&self) -> String {
        // Room for the longest label and its colon.
        let width = self
            .entries
            .iter()
            .map(|(l, _)| l.len() + 1)
            .max()
            .unwrap_or(0);
        let mut out = String::new();
        for (label, value) in &self.entries {
            let mut lines = value.lines();
            let first = lines.next().unwrap_or("");
            out.push_str(&format!("{:width$}  {first}\n", format!("{label}:")));
            for line in lines {
                out.push_str(&format!("{:width$}  {line}\n", ""));
            }
        }
        out
    }
}

/// What is installed in `dir`, how it compares with the pins, and what
/// nvcc says.
pub(crate) fn report(dir: &Path) -> Report {
    let mut r = Report::default();
    let present = dir.join("cuda").join("bin").join("nvcc").is_file();
    r.push(
        "install dir",
        format!(
            "{} ({})",
            workspace::display(dir),
            if present { "present" } else { "absent" }
        ),
    );
    let pins = Pins::load();
    match &pins {
        Ok(p) => r.push(
            "pinned",
            format!(
                "CUDA {} in {}:\n{}",
                p.cuda.version,
                workspace::display(&workspace::toolkit_pins_file()),
                p.requirements().join("\n")
            ),
        ),
        Err(e) => r.push("pinned", format!("error: {e:#}")),
    }
    match Record::read(dir) {
        Some(record) => {
            let verdict = match &pins {
                Ok(p) if *p == record.pins() => "matches the pins".to_string(),
                Ok(_) => "differs from the pins; run `cargo xtask toolkit install`".to_string(),
                Err(_) => "cannot compare".to_string(),
            };
            r.push(
                "installed",
                format!(
                    "CUDA {}, python {}; {verdict}",
                    record.cuda.version, record.installed.python
                ),
            );
            r.push("packages", record.installed.freeze.join("\n"));
        }
        None if dir.exists() => r.push(
            "installed",
            format!("no readable {RECORD_FILE}; run `cargo xtask toolkit install`"),
        ),
        None => r.push("installed", "nothing; run `cargo xtask toolkit install`"),
    }
    if present {
        let root = std::fs::read_link(dir.join("cuda"))
            .map(|t| format!(" -> {}", t.display()))
            .unwrap_or_default();
        r.push(
            "toolkit root",
            format!("{}{root}", dir.join("cuda").display()),
        );
        r.push(
            "nvcc",
            nvcc_release(&dir.join("cuda")).unwrap_or_else(|e| format!("error: {e:#}")),
        );
    }
    let libclang = dir.join("libclang").join("libclang.so");
    if libclang.is_file() {
        r.push("libclang", libclang.display().to_string());
    }
    r
}

/// A CUDA toolkit found for the CI cells.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Found {
    pub(crate) nvcc: PathBuf,
}

/// Finds the toolkit the way the build will (cuda-build's discovery, with
/// the project-local candidate); `None` under `KILN_CUDA=off`.
pub(crate) fn toolkit_present() -> Option<Found> {
    crate::discovery::kiln_discovery(&workspace::root())
        .and_then(|d| d.toolkit)
        .map(|tk| Found { nvcc: tk.nvcc })
}

/// Makes the next `cargo build` rerun cuda-sys's build script, so a
/// workspace built CPU-only before the install picks the toolkit up. The
/// build script cannot watch a toolkit dir that does not exist yet (Cargo
/// reruns a script on every build for a missing watched path), so the install
/// bumps the mtime of a file it does watch: `kernels/kiln.toml`.
fn invalidate_kernel_build() -> Result<()> {
    let config = workspace::root().join("kernels").join("kiln.toml");
    let file = std::fs::File::options()
        .append(true)
        .open(&config)
        .with_context(|| format!("cannot open {}", config.display()))?;
    file.set_modified(std::time::SystemTime::now())
        .with_context(|| format!("cannot touch {}", config.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    const PINS: &str = r#"
[cuda]
version = "13.0"
packages = ["nvidia-cuda-nvcc==13.0.88", "nvidia-nvvm==13.0.88"]
[libclang]
package = "libclang==18.1.1"
"#;

    #[test]
    fn the_committed_pins_parse() {
        let text = std::fs::read_to_string(workspace::toolkit_pins_file()).unwrap();
        let pins = Pins::parse(&text).unwrap();
        assert_eq!(pins.cuda.version, "13.0");
        assert!(pins.requirements().contains(&"nvidia-cuda-nvcc==13.0.88"));
        assert!(pins.libclang.package.starts_with("libclang=="));
    }

    #[test]
    fn requirements_list_cuda_then_libclang() {
        let pins = Pins::parse(PINS).unwrap();
        assert_eq!(
            pins.requirements(),
            [
                "nvidia-cuda-nvcc==13.0.88",
                "nvidia-nvvm==13.0.88",
                "libclang==18.1.1"
            ]
        );
    }

    #[test]
    fn unpinned_package_is_rejected() {
        let text = PINS.replace("nvidia-nvvm==13.0.88", "nvidia-nvvm>=13.0");
        let err = Pins::parse(&text).unwrap_err();
        assert!(
            err.contains("`nvidia-nvvm>=13.0` is not an exact pin"),
            "{err}"
        );
        let text = PINS.replace("nvidia-nvvm==13.0.88", "nvidia-nvvm");
        assert!(Pins::parse(&text).is_err());
    }

    #[test]
    fn duplicate_package_is_rejected() {
        let text = PINS.replace("nvidia-nvvm==13.0.88", "NVIDIA_CUDA_NVCC==13.0.99");
        let err = Pins::parse(&text).unwrap_err();
        assert!(err.contains("listed twice"), "{err}");
    }

    #[test]
    fn missing_nvcc_is_rejected() {
        let text = PINS.replace("nvidia-cuda-nvcc==13.0.88", "nvidia-cuda-crt==13.0.88");
        let err = Pins::parse(&text).unwrap_err();
        assert!(err.contains("nvidia-cuda-nvcc"), "{err}");
    }

    #[test]
    fn unknown_key_is_a_one_line_error() {
        let text = PINS.replace("version = ", "verison = ");
        let err = Pins::parse(&text).unwrap_err();
        assert!(
            err.starts_with("toolkit.toml:3:1: unknown field `verison`"),
            "{err}"
        );
        assert!(!err.contains('\n'));
    }

    #[test]
    fn record_round_trips_and_compares_by_pins() {
        let pins = Pins::parse(PINS).unwrap();
        let record = Record {
            cuda: pins.cuda.clone(),
            libclang: pins.libclang.clone(),
            installed: Installed {
                python: "3.11.7".into(),
                toolkit_root: "venv/lib/python3.11/site-packages/nvidia/cu13".into(),
                nvcc: "Cuda compilation tools, release 13.0, V13.0.88".into(),
                freeze: vec!["libclang==18.1.1".into()],
            },
        };
        let text = record.to_toml().unwrap();
        let back: Record = toml::from_str(&text).unwrap();
        assert_eq!(back, record);
        assert_eq!(back.pins(), pins);
    }

    #[test]
    fn pip_failure_names_the_pinned_package() {
        let reqs = ["nvidia-cuda-nvcc==13.0.88", "nvidia-nvvm==13.0.88"];
        let stderr = "WARNING: Retrying (Retry(total=0)) after connection broken\n\
            ERROR: Could not find a version that satisfies the requirement nvidia_nvvm==13.0.88 (from versions: 13.0.48, 13.5.37)\n\
            ERROR: No matching distribution found for nvidia_nvvm==13.0.88\n";
        let (package, reason) = pip_failure(stderr, &reqs).unwrap();
        assert_eq!(package, "nvidia-nvvm==13.0.88");
        assert_eq!(
            reason,
            "Could not find a version that satisfies the requirement nvidia_nvvm==13.0.88"
        );
        assert_eq!(pip_failure("ERROR: disk full\n", &reqs), None);
    }

    #[test]
    fn install_refuses_to_replace_a_foreign_dir() {
        let base = std::env::temp_dir().join(format!("xtask-replaceable-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        std::fs::create_dir_all(&base).unwrap();
        assert!(check_replaceable(&base.join("absent")).is_ok());
        assert!(check_replaceable(&base).is_ok(), "empty dir");
        std::fs::write(base.join("precious.txt"), "").unwrap();
        let err = check_replaceable(&base).unwrap_err().to_string();
        assert!(err.contains("is not a toolkit install"), "{err}");
        std::fs::write(base.join(RECORD_FILE), "").unwrap();
        assert!(check_replaceable(&base).is_ok(), "earlier install");
        std::fs::remove_dir_all(&base).unwrap();
    }

    #[test]
    fn report_aligns_labels_and_continues_lines() {
        let mut r = Report::default();
        r.push("dir", "x");
        r.push("packages", "a==1\nb==2");
        assert_eq!(
            r.render(),
            "dir:       x\npackages:  a==1\n           b==2\n"
        );
    }
}
