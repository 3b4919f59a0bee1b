//! `cargo kiln toolkit install`: builds the install in `.NAME.partial`
//! beside DIR (a venv with the pinned wheels, the links, the record) and
//! renames it into place, under an exclusive lock, so an interrupted or
//! concurrent install never leaves half a toolkit at DIR.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::Instant;

use anyhow::{bail, Context, Result};

use super::pins::{normalise_name, split_pin};
use super::{
    hidden, kiln_made, mark, nvcc_release, sibling, verify, Installed, Pins, Place, Record,
    CUDA_LINK, LIBCLANG_LINK, RECORD_FILE,
};
use crate::error::usage_error;

/// Oldest python3 the install is supported on.
const MIN_PYTHON: (u32, u32) = (3, 9);

/// `cargo kiln toolkit install`: installs into `dir` unless it is up to
/// date and whole; repairs (reinstalls) a damaged one.
pub(super) fn install(place: &Place) -> Result<()> {
    let dir = place.dir.as_path();
    let pins = Pins::pinned()?;
    let shown = dir.display();
    let parent = dir.parent().ok_or_else(|| {
        usage_error!("the toolkit dir must not be the filesystem root; pass another --dir")
    })?;
    std::fs::create_dir_all(parent)
        .with_context(|| format!("cannot create {}", parent.display()))?;
    // Held until the install is in place: a second install waits, then finds
    // this one up to date, and anything left beside DIR is stale.
    let _lock = InstallLock::acquire(
        &sibling(dir, "lock").context("the toolkit dir has no name; pass another --dir")?,
    )?;
    // Everything refused before anything is removed.
    check_replaceable(dir)?;
    remove_stale(dir)?;
    let why = match up_to_date(dir, &pins) {
        Ok(release) => {
            println!(
                "toolkit up to date at {shown} (CUDA {}; {release})",
                pins.cuda.version
            );
            return make_default(place);
        }
        Err(why) => why,
    };
    stop_on_interrupt();
    println!(
        "toolkit: {why}; installing CUDA {} into {shown}",
        pins.cuda.version
    );
    let started = Instant::now();
    let python = check_python()?;

    let staging =
        StagingDir::create(sibling(dir, "partial").context("the toolkit dir has no name")?)?;
    let tmp = staging.path();

    let venv = tmp.join("venv");
    println!("[1/4] creating venv at {}", venv.display());
    let status = Command::new("python3")
        .args(["-m", "venv"])
        .arg(&venv)
        .status()
        .context("cannot run python3; install python3 (>= 3.9) with its venv module")?;
    if !status.success() {
        check_interrupted()?;
        bail!(
            "`python3 -m venv` failed ({status}); see its output above (if it names ensurepip, install python3-venv)"
        );
    }

    let requirements = pins.requirements();
    check_interrupted()?;
    println!(
        "[2/4] installing {} pinned packages with pip: {}",
        requirements.len(),
        requirements.join(" ")
    );
    pip_install(&venv, &requirements)?;

    check_interrupted()?;
    println!("[3/4] linking cuda and libclang; checking nvcc");
    let site = verify::site_packages(tmp).with_context(|| {
        format!(
            "the venv at {} has not exactly one python*/site-packages; see pip's output above",
            venv.display()
        )
    })?;
    let toolkit_root = site.join("nvidia").join("cu13");
    if !toolkit_root.join("bin").join("nvcc").is_file() {
        bail!(
            "the wheels installed no nvidia/cu13/bin/nvcc under {}; check the CUDA pins in cargo-kiln's toolkit.toml",
            site.display()
        );
    }
    let libclang_dir = site.join("clang").join("native");
    if !libclang_dir.join("libclang.so").is_file() {
        bail!(
            "the libclang wheel installed no clang/native/libclang.so under {}; check [libclang] in cargo-kiln's toolkit.toml",
            site.display()
        );
    }
    // Relative links, so the staging dir can be renamed into place.
    let toolkit_rel = relative_to(&toolkit_root, tmp)?;
    symlink(&toolkit_rel, &tmp.join(CUDA_LINK))?;
    symlink(&relative_to(&libclang_dir, tmp)?, &tmp.join(LIBCLANG_LINK))?;
    let release = nvcc_release(&tmp.join(CUDA_LINK))?;
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

    check_interrupted()?;
    println!("[4/4] moving into place at {shown}");
    staging.commit(
        dir,
        &sibling(dir, "old").context("the toolkit dir has no name")?,
    )?;

    // Checked again through the final path: the venv was renamed.
    let release = nvcc_release(&dir.join(CUDA_LINK))?;
    invalidate_kernel_build(&place.touch)?;
    println!(
        "toolkit installed in {:.0?}: {} -> {} ({release})",
        started.elapsed(),
        dir.join("cuda").display(),
        toolkit_rel.display(),
    );
    if !place.is_default {
        println!(
            "note: not the default dir; point discovery at it with CUDA_PATH={}",
            dir.join("cuda").display()
        );
    }
    make_default(place)
}

/// Points the store's `default` link at the install (a relative link,
/// written beside and renamed over the old one, so a build never sees none).
fn make_default(place: &Place) -> Result<()> {
    let Some(link) = &place.default_link else {
        return Ok(());
    };
    let name = place
        .dir
        .file_name()
        .context("the toolkit dir has no name")?;
    let store = link
        .parent()
        .context("the store's default link has no parent")?;
    let staged = store.join(hidden(
        link.file_name().unwrap_or_default(),
        &format!("new-{}", std::process::id()),
    ));
    let _ = std::fs::remove_file(&staged);
    symlink(Path::new(name), &staged)?;
    if let Err(e) = std::fs::rename(&staged, link) {
        let _ = std::fs::remove_file(&staged);
        return Err(e).with_context(|| {
            format!(
                "cannot make {} the default toolkit ({} is in the way; move it aside)",
                place.dir.display(),
                link.display()
            )
        });
    }
    println!(
        "default toolkit: {} -> {} (every crate's plain `cargo build` finds it; \
         a crate built CPU-only before picks it up once its build script reruns)",
        link.display(),
        name.to_string_lossy()
    );
    Ok(())
}

/// `Ok(nvcc release line)` when `dir` holds exactly `pins`, whole, and nvcc
/// runs; otherwise why it needs (re)installing.
fn up_to_date(dir: &Path, pins: &Pins) -> Result<String, String> {
    verify(dir, pins).map_err(|damage| damage.to_string())?;
    nvcc_release(&dir.join(CUDA_LINK)).map_err(|e| format!("{e:#}"))
}

/// Set by the signal handler: the user pressed Ctrl-C (or the install got
/// SIGTERM).
static INTERRUPTED: AtomicBool = AtomicBool::new(false);

/// The pip running now (0: none), the leader of a process group of its
/// own, stopped with all it started by the signal handler: a SIGTERM sent
/// to the install alone (`timeout`, `kill`) would never reach it, and pip
/// would go on downloading for minutes.
static PIP: AtomicU32 = AtomicU32::new(0);

/// Turns Ctrl-C and SIGTERM into an error at the next step, so the staging
/// dir is dropped (removed) on the way out instead of left behind. python
/// (venv), in the same process group, gets a Ctrl-C too; pip, in a group of
/// its own, is sent SIGTERM by the handler, on a Ctrl-C or a SIGTERM alike.
pub(super) fn stop_on_interrupt() {
    // Fails only if a handler is already set: then it is this one.
    // No "second signal exits at once": `timeout` and shells deliver one
    // Ctrl-C twice (to the process, then its group), and every step ends
    // soon anyway, its child having got the signal too.
    let _ = ctrlc::set_handler(|| {
        if !INTERRUPTED.swap(true, Ordering::SeqCst) {
            eprintln!(
                "toolkit: interrupted; stopping after this step and removing the partial install"
            );
        }
        let pip = PIP.load(Ordering::SeqCst);
        if let Some(pid) = i32::try_from(pip)
            .ok()
            .and_then(rustix::process::Pid::from_raw)
        {
            let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::TERM);
        }
    });
}

pub(super) fn check_interrupted() -> Result<()> {
    if INTERRUPTED.load(Ordering::SeqCst) {
        bail!("interrupted; the partial install was removed and the old one (if any) kept");
    }
    Ok(())
}

/// Removes what an interrupted install left beside DIR (the caller holds
/// the lock, so no install is using them): only folders kiln marked; one
/// of those names that kiln did not write stops the install before
/// anything is removed.
pub(super) fn remove_stale(dir: &Path) -> Result<()> {
    let stale: Vec<PathBuf> = ["partial", "old"]
        .into_iter()
        .filter_map(|suffix| sibling(dir, suffix))
        .filter(|path| std::fs::symlink_metadata(path).is_ok())
        .collect();
    if let Some(foreign) = stale.iter().find(|path| !kiln_made(path)) {
        return Err(usage_error!(
            "{} is in the way of the install and was not written by kiln; move it aside or pass another --dir",
            foreign.display()
        ));
    }
    for path in stale {
        std::fs::remove_dir_all(&path).with_context(|| {
            format!(
                "cannot remove the stale {}; remove it by hand",
                path.display()
            )
        })?;
        println!(
            "toolkit: removed {}, left by an interrupted install",
            path.display()
        );
    }
    Ok(())
}

/// An exclusive lock on `.NAME.lock` beside DIR, released when dropped (or
/// when the process dies: it is an OS file lock, never left held).
#[derive(Debug)]
pub(super) struct InstallLock {
    _file: std::fs::File,
}

impl InstallLock {
    pub(super) fn acquire(path: &Path) -> Result<Self> {
        use rustix::fs::{Mode, OFlags, CWD};
        // Never through a symlink, never waiting on a FIFO: a lock file
        // planted as either is refused.
        let flags =
            OFlags::WRONLY | OFlags::CREATE | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
        let file = rustix::fs::openat(CWD, path, flags, Mode::from_raw_mode(0o644))
            .map(std::fs::File::from)
            .map_err(std::io::Error::from)
            .and_then(|file| {
                if file.metadata()?.is_file() {
                    Ok(file)
                } else {
                    Err(std::io::Error::other("it is not a regular file"))
                }
            })
            .with_context(|| {
                format!(
                    "cannot open the lock file {} (remove it if it is not a file kiln made)",
                    path.display()
                )
            })?;
        match file.try_lock() {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => {
                println!(
                    "toolkit: another install holds {}; waiting for it to finish",
                    path.display()
                );
                file.lock()
                    .with_context(|| format!("cannot lock {}", path.display()))?;
            }
            Err(std::fs::TryLockError::Error(e)) => {
                return Err(e).with_context(|| format!("cannot lock {}", path.display()))
            }
        }
        Ok(Self { _file: file })
    }
}

/// An install replaces DIR wholesale, so DIR must be absent, an empty
/// folder, or a folder kiln made (its mark, or an earlier install's whole
/// record): never someone's directory passed as `--dir` by mistake, nor
/// one that merely looks like an install.
pub(super) fn check_replaceable(dir: &Path) -> Result<()> {
    let Ok(meta) = std::fs::symlink_metadata(dir) else {
        return Ok(());
    };
    let empty = meta.is_dir() && std::fs::read_dir(dir).is_ok_and(|mut d| d.next().is_none());
    if empty || kiln_made(dir) {
        return Ok(());
    }
    Err(usage_error!(
        "{} exists and is not a toolkit install kiln made (no {} of kiln's); remove it or pass another --dir",
        dir.display(),
        super::MARK_FILE
    ))
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
    pip_install_with(venv, &[], requirements)
}

/// pip install with `extra` options before the requirements.
pub(super) fn pip_install_with(venv: &Path, extra: &[&str], requirements: &[&str]) -> Result<()> {
    // `python -m pip`, not `bin/pip`: pip's script hard-codes the staging
    // path in its shebang.
    let mut command = Command::new(venv.join("bin").join("python"));
    command
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
        .args(extra)
        .args(requirements)
        .stderr(Stdio::piped());
    // Its own group, so that the handler stops it and what it started.
    std::os::unix::process::CommandExt::process_group(&mut command, 0);
    let mut child = command.spawn().context("cannot run the venv's python")?;
    PIP.store(child.id(), Ordering::SeqCst);
    // Echo stderr live while keeping it, to name the failing package.
    let mut stderr_text = String::new();
    if let Some(stderr) = child.stderr.take() {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            eprintln!("{line}");
            stderr_text.push_str(&line);
            stderr_text.push('\n');
        }
    }
    let status = child.wait();
    PIP.store(0, Ordering::SeqCst);
    let status = status.context("cannot wait for pip")?;
    if status.success() {
        return Ok(());
    }
    check_interrupted()?;
    if stderr_text.contains("DO NOT MATCH THE HASHES") {
        bail!(
            "pip refused a wheel whose SHA-256 is not the one pinned in cargo-kiln's toolkit.toml \
             (a changed file on the index or a mirror); see pip's output above"
        );
    }
    let hint = "PyPI (https://pypi.org) must be reachable, or set PIP_INDEX_URL to a mirror";
    match pip_failure(&stderr_text, requirements) {
        Some((package, reason)) => {
            bail!("pip could not install {package} ({reason}); {hint}, and the pin in cargo-kiln's toolkit.toml must exist there")
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

pub(super) fn relative_to(path: &Path, base: &Path) -> Result<PathBuf> {
    path.strip_prefix(base)
        .map(Path::to_path_buf)
        .with_context(|| format!("{} is not under {}", path.display(), base.display()))
}

pub(super) fn symlink(target: &Path, link: &Path) -> Result<()> {
    std::os::unix::fs::symlink(target, link)
        .with_context(|| format!("cannot link {} -> {}", link.display(), target.display()))
}

/// A dir the install is built in; removed on drop unless committed, so a
/// failed or interrupted install leaves nothing at DIR.
#[derive(Debug)]
pub(super) struct StagingDir {
    path: PathBuf,
    committed: bool,
}

impl StagingDir {
    /// Creates `path` (the caller removed what an interrupted install left
    /// there) and marks it as kiln's first.
    pub(super) fn create(path: PathBuf) -> Result<Self> {
        std::fs::create_dir(&path).with_context(|| {
            format!(
                "cannot create {}; if it exists, move it aside",
                path.display()
            )
        })?;
        let staging = Self {
            path,
            committed: false,
        };
        mark(&staging.path)?;
        Ok(staging)
    }

    pub(super) fn path(&self) -> &Path {
        &self.path
    }

    /// Renames the staging dir to `dir`, replacing an old install (moved to
    /// `old` first, since rename cannot replace a non-empty dir; `dir` was
    /// checked to be kiln's or empty, and `old` absent, under the lock).
    pub(super) fn commit(mut self, dir: &Path, old: &Path) -> Result<()> {
        if std::fs::symlink_metadata(old).is_ok() {
            bail!(
                "{} appeared during the install; move it aside and install again",
                old.display()
            );
        }
        if std::fs::symlink_metadata(dir).is_ok() {
            std::fs::rename(dir, old)
                .with_context(|| format!("cannot move the old install {} aside", dir.display()))?;
        }
        std::fs::rename(&self.path, dir)
            .with_context(|| format!("cannot move {} to {}", self.path.display(), dir.display()))?;
        self.committed = true;
        if kiln_made(old) {
            std::fs::remove_dir_all(old)
                .with_context(|| format!("cannot remove the old install at {}", old.display()))?;
        } else if std::fs::symlink_metadata(old).is_ok() && std::fs::remove_dir(old).is_err() {
            // DIR was an empty folder when checked; something was put in
            // it since: left for its owner.
            println!(
                "toolkit: {} was not empty any more; left as it is",
                old.display()
            );
        }
        Ok(())
    }
}

impl Drop for StagingDir {
    fn drop(&mut self) {
        if self.committed {
            return;
        }
        // On Ctrl-C a grandchild (venv's ensurepip) may still be writing
        // into the dir for a moment, making one removal fail with "not
        // empty"; a few tries outlast it. Best effort: the next install
        // removes leftovers anyway.
        for _ in 0..20 {
            if std::fs::remove_dir_all(&self.path).is_ok() || !self.path.exists() {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(250));
        }
    }
}

/// Makes the next `cargo build` rerun the kernel build script, so a crate
/// built CPU-only before the install picks the toolkit up. The build script
/// cannot watch a toolkit dir that does not exist yet (Cargo reruns a script
/// on every build for a missing watched path), so the install bumps the
/// mtime of files it does watch.
fn invalidate_kernel_build(files: &[PathBuf]) -> Result<()> {
    for file in files {
        let f = std::fs::File::options()
            .append(true)
            .open(file)
            .with_context(|| format!("cannot open {}", file.display()))?;
        f.set_modified(std::time::SystemTime::now())
            .with_context(|| format!("cannot touch {}", file.display()))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests;
