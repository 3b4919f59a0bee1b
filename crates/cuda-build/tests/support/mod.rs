//! Helpers for the rebuild tests: a fixture crate whose build script runs
//! cuda-build's `KernelBuild`, built by a real `cargo build --offline` in its
//! own target dir, with either a fake nvcc that logs its compiles or the real
//! nvcc behind a logging wrapper.

// Each test binary uses its own subset of these helpers.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, SystemTime};

use cuda_build::Manifest;

mod output;
mod sources;

pub(crate) use output::*;
pub(crate) use sources::*;

/// The fake nvcc (see the script's header).
const FAKE_NVCC: &str = include_str!("fake_nvcc.sh");

/// The fixture's build script: kiln's downstream one-call build, reporting an
/// error as cuda-sys's build script does (first line to Cargo, the rest to
/// stderr).
const BUILD_RS: &str = r#"fn main() {
    let build = cuda_build::KernelBuild::new("kernels")
        .env_prefix("FIXTURE")
        .image_type("crate::Image");
    if let Err(error) = build.run() {
        let text = error.to_string();
        let mut lines = text.lines();
        println!("cargo::error={}", lines.next().unwrap_or_default());
        for line in lines {
            eprintln!("{line}");
        }
        std::process::exit(1);
    }
}
"#;

const LIB_RS: &str = r#"//! A crate embedding kernels the way cuda-sys does.

/// One embedded module, as cuda-build's generated code constructs it.
#[derive(Debug)]
pub struct Image {
    pub name: &'static str,
    pub image: &'static [u8],
    pub sass: &'static [u32],
    pub ptx: &'static [u32],
    pub kernels: &'static [&'static str],
    pub toolkit: (u32, u32),
}

// Exactly one of the two cfgs is set, in every build.
const _: () = assert!(cfg!(cuda_enabled) != cfg!(cpu_only));

include!(concat!(env!("OUT_DIR"), "/fixture_modules.rs"));
"#;

/// The kiln workspace root.
pub(crate) fn workspace_root() -> PathBuf {
    let cuda_build = Path::new(env!("CARGO_MANIFEST_DIR"));
    cuda_build
        .parent()
        .and_then(Path::parent)
        .expect("cuda-build lies in <workspace>/crates/cuda-build")
        .to_path_buf()
}

/// The target dir every fixture crate builds in (each under its own crate
/// name), so that cuda-build and its dependencies compile once per run.
fn shared_target_dir() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join("rebuild-target")
}

/// A fixture crate, its toolkit and its target dir, under Cargo's temp dir for
/// integration tests (`target/tmp/rebuild-<name>`). The dir is wiped when the
/// fixture is created and kept afterwards, for inspecting a failure.
#[derive(Debug)]
pub(crate) struct Fixture {
    name: String,
    root: PathBuf,
    crate_dir: PathBuf,
    target_dir: PathBuf,
    nvcc: PathBuf,
    log: PathBuf,
    sources: &'static [(&'static str, &'static str)],
    env: Vec<(String, String)>,
}

impl Fixture {
    /// A fixture crate named `fixture` with [`KERNEL_SOURCES`], whose
    /// toolkit is the fake nvcc.
    pub(crate) fn new(name: &str) -> Self {
        Self::with_sources(name, "fixture", KERNEL_SOURCES)
    }

    /// A fixture crate named `crate_name` with these files, whose toolkit is
    /// the fake nvcc.
    pub(crate) fn with_sources(
        name: &str,
        crate_name: &str,
        sources: &'static [(&'static str, &'static str)],
    ) -> Self {
        Self::create(name, crate_name, sources, |toolkit| {
            write_executable(&toolkit.join("bin/nvcc"), FAKE_NVCC);
            write_file(&toolkit.join("include/cuda_runtime.h"), "");
            // Static modules link the static runtime: an empty archive.
            write_file(&toolkit.join("lib/libcudart_static.a"), "!<arch>\n");
            Vec::new()
        })
    }

    /// A fixture crate named `crate_name` with these files whose toolkit is
    /// the real one of `real_nvcc`, run through a logging wrapper
    /// script that lies outside any toolkit (`NVCC=<root>/elsewhere/log-nvcc`,
    /// `CUDA_PATH` naming the real root): nvcc as users put a wrapper in
    /// front of it. The wrapper logs each step as the fake nvcc does.
    pub(crate) fn with_real_nvcc(
        name: &str,
        crate_name: &str,
        sources: &'static [(&'static str, &'static str)],
        real_nvcc: &Path,
    ) -> Self {
        let real_root = real_nvcc
            .parent()
            .and_then(Path::parent)
            .expect("nvcc lies in <toolkit>/bin")
            .to_path_buf();
        let wrapper = format!(
            "#!/usr/bin/env bash\n\
             # Logs each step for the rebuild tests, then runs the real nvcc.\n\
             out='' step=compile\n\
             for a in \"$@\"; do case \"$prev\" in -o) out=$a ;; esac; prev=$a\n\
             case \"$a\" in -dlink) step=dlink ;; -lib) step=lib ;; esac; done\n\
             case \"${{1-}}\" in --version|--list-gpu-code|--list-gpu-arch) ;;\n\
             *) if [ $step = compile ]; then echo \"compile $(basename \"${{!#}}\")\";\n\
             else echo \"$step $(basename \"$out\")\"; fi >>\"$FAKE_NVCC_LOG\" ;; esac\n\
             exec {} \"$@\"\n",
            shell_quote(real_nvcc)
        );
        Self::create(name, crate_name, sources, |toolkit| {
            let root = toolkit
                .parent()
                .expect("the toolkit lies in the fixture's root");
            write_executable(&root.join("elsewhere/log-nvcc"), &wrapper);
            vec![("CUDA_PATH".to_string(), real_root.display().to_string())]
        })
        .with_nvcc_at("elsewhere/log-nvcc")
    }

    /// The same fixture with `NVCC` naming another file under its root.
    pub(crate) fn with_nvcc_at(mut self, relative: &str) -> Self {
        self.nvcc = self.root.join(relative);
        self
    }

    fn create(
        name: &str,
        crate_name: &str,
        sources: &'static [(&'static str, &'static str)],
        make_toolkit: impl FnOnce(&Path) -> Vec<(String, String)>,
    ) -> Self {
        let root = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("rebuild-{name}"));
        if root.exists() {
            std::fs::remove_dir_all(&root)
                .unwrap_or_else(|e| panic!("removing {}: {e}", root.display()));
        }
        let toolkit = root.join("toolkit");
        let env = make_toolkit(&toolkit);
        let crate_dir = root.join(crate_name);
        let fixture = Self {
            name: crate_name.to_string(),
            nvcc: toolkit.join("bin/nvcc"),
            log: root.join("nvcc.log"),
            target_dir: shared_target_dir(),
            crate_dir,
            root,
            sources,
            env,
        };
        fixture.forget_earlier_runs();
        fixture.write_crate();
        fixture
    }

    /// The same crate written again at another path, deeper than this one
    /// (`rebuild-<name>/another/checkout/<crate>`), as a second checkout or
    /// a CI runner's would be: the same files, the same toolkit and nvcc,
    /// its own nvcc log. Its package has this one's name, so it shares this
    /// one's place in the shared target dir: [`Fixture::clean`] either
    /// before building the other.
    pub(crate) fn second_checkout(&self, name: &str) -> Self {
        let root = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("rebuild-{name}"));
        if root.exists() {
            std::fs::remove_dir_all(&root)
                .unwrap_or_else(|e| panic!("removing {}: {e}", root.display()));
        }
        let checkout = Self {
            name: self.name.clone(),
            crate_dir: root.join("another/checkout").join(&self.name),
            target_dir: self.target_dir.clone(),
            nvcc: self.nvcc.clone(),
            log: root.join("nvcc.log"),
            sources: self.sources,
            env: self.env.clone(),
            root,
        };
        checkout.write_crate();
        checkout
    }

    /// Removes what an earlier test run left of this crate in the shared
    /// target dir, so that its first build starts from nothing.
    fn forget_earlier_runs(&self) {
        self.clean();
    }

    /// What `cargo clean -p <crate>` removes: this crate's build script
    /// runs, fingerprints and artifacts, in both profiles.
    pub(crate) fn clean(&self) {
        let dirs = ["debug", "release"].into_iter().flat_map(|profile| {
            [".fingerprint", "build", "deps"].map(|dir| self.target_dir.join(profile).join(dir))
        });
        for dir in dirs {
            let Ok(entries) = std::fs::read_dir(dir) else {
                continue;
            };
            for entry in entries.flatten() {
                let file = entry.file_name().to_string_lossy().into_owned();
                let ours = [format!("{}-", self.name), format!("lib{}-", self.name)]
                    .iter()
                    .any(|p| file.starts_with(p.as_str()));
                if ours {
                    let path = entry.path();
                    let _ = if path.is_dir() {
                        std::fs::remove_dir_all(&path)
                    } else {
                        std::fs::remove_file(&path)
                    };
                }
            }
        }
    }

    fn write_crate(&self) {
        let cuda_build = Path::new(env!("CARGO_MANIFEST_DIR"));
        let manifest = format!(
            "[package]\nname = \"{}\"\nversion = \"0.1.0\"\nedition = \"2021\"\npublish = false\n\n\
             [build-dependencies]\ncuda-build = {{ package = \"kiln-cuda-build\", path = {:?} }}\n\n\
             # Its own workspace, not a stray member of the one above it.\n[workspace]\n",
            self.name,
            cuda_build.display().to_string()
        );
        write_file(&self.crate_dir.join("Cargo.toml"), &manifest);
        // The workspace's lock file, so `--offline` resolves to crates already
        // in the local registry.
        let lock = workspace_root().join("Cargo.lock");
        std::fs::copy(&lock, self.crate_dir.join("Cargo.lock"))
            .unwrap_or_else(|e| panic!("copying {}: {e}", lock.display()));
        write_file(&self.crate_dir.join("build.rs"), BUILD_RS);
        write_file(&self.crate_dir.join("src/lib.rs"), LIB_RS);
        self.restore_kernels();
    }

    /// The fixture crate's dir.
    pub(crate) fn crate_dir(&self) -> &Path {
        &self.crate_dir
    }

    /// The nvcc the fixture's builds use.
    pub(crate) fn nvcc(&self) -> &Path {
        &self.nvcc
    }

    /// A path inside the fixture crate.
    pub(crate) fn path(&self, relative: &str) -> PathBuf {
        self.crate_dir.join(relative)
    }

    /// Writes every kernel source whose text differs from the original
    /// (undoing what an earlier scenario changed).
    pub(crate) fn restore_kernels(&self) {
        for (relative, text) in self.sources {
            if std::fs::read_to_string(self.path(relative)).ok().as_deref() != Some(text) {
                self.write(relative, text);
            }
        }
    }

    /// Runs `cargo build --offline -v` on the fixture, in its own target dir,
    /// with an environment cleaned of everything that steers toolkit
    /// discovery or the fixture's build script: `NVCC`, `CUDA_PATH`,
    /// `CUDA_HOME`, `CUDA_ROOT`, `FIXTURE_*` are removed and `PATH` loses
    /// every dir holding an `nvcc`. `NVCC` is then set to the fixture's nvcc.
    /// `env` comes last; an empty value removes the variable.
    pub(crate) fn cargo_build(&self, env: &[(&str, &str)]) -> Output {
        self.cargo_build_with(&[], env)
    }

    /// [`Fixture::cargo_build`] with more arguments (`--release`). The
    /// kernel cache is off (`KILN_CACHE=off`) unless `env` turns it on.
    pub(crate) fn cargo_build_with(&self, args: &[&str], env: &[(&str, &str)]) -> Output {
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        let mut command = Command::new(cargo);
        command
            .args(["build", "--offline", "-v"])
            .args(args)
            .arg("--manifest-path")
            .arg(self.crate_dir.join("Cargo.toml"))
            .current_dir(&self.crate_dir);
        for (key, _) in std::env::vars_os() {
            let key = key.to_string_lossy();
            if key.starts_with("FIXTURE_") || key.starts_with("CARGO_TERM_") {
                command.env_remove(&*key);
            }
        }
        for key in [
            "CUDA_PATH",
            "CUDA_HOME",
            "CUDA_ROOT",
            "CARGO_BUILD_TARGET_DIR",
            "KILN_CACHE_DIR",
            "KILN_CACHE_MAX",
            cuda_build::toolkit::PROBE_TIMEOUT_VAR,
            cuda_build::toolkit::STORE_VAR,
        ] {
            command.env_remove(key);
        }
        // The user's toolkit store (`~/.local/share/kiln/toolkits`) is not
        // the fixture's: discovery looks in an empty data folder instead.
        command
            .env("XDG_DATA_HOME", self.root.join("data"))
            .env("PATH", path_without_nvcc())
            .env("CARGO_TARGET_DIR", &self.target_dir)
            .env("CARGO_TERM_COLOR", "never")
            .env("KILN_CACHE", "off")
            .env("FAKE_NVCC_LOG", &self.log)
            .env("FAKE_NVCC_COMMANDS", self.root.join("commands.log"))
            .env("NVCC", &self.nvcc);
        for (key, value) in &self.env {
            command.env(key, value);
        }
        for (key, value) in env {
            if value.is_empty() {
                command.env_remove(key);
            } else {
                command.env(key, value);
            }
        }
        command
            .output()
            .unwrap_or_else(|e| panic!("running cargo build on the fixture: {e}"))
    }

    /// The environment discovery would see in `cargo_build(env)`, for
    /// `cuda_build::discover`.
    pub(crate) fn discovery_env(&self, env: &[(&str, &str)]) -> Vec<(String, String)> {
        let mut vars: BTreeMap<String, String> = BTreeMap::new();
        vars.insert("PATH".into(), path_without_nvcc());
        vars.insert("NVCC".into(), self.nvcc.display().to_string());
        vars.extend(self.env.iter().cloned());
        for (key, value) in env {
            if value.is_empty() {
                vars.remove(*key);
            } else {
                vars.insert(key.to_string(), value.to_string());
            }
        }
        vars.into_iter().collect()
    }

    /// The compiles logged since the last call (`compile a.cu`), sorted:
    /// modules compile in parallel, in no fixed order. Clears the log.
    pub(crate) fn nvcc_calls(&self) -> Vec<String> {
        let text = match std::fs::read_to_string(&self.log) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
            Err(e) => panic!("reading {}: {e}", self.log.display()),
        };
        if self.log.exists() {
            std::fs::remove_file(&self.log).expect("clearing the nvcc log");
        }
        let mut calls: Vec<String> = text.lines().map(str::to_string).collect();
        calls.sort();
        calls
    }

    /// The fake nvcc's command lines since the last call, sorted, with the
    /// fixture's paths written `<out>`, `<crate>` and `<root>`, and the temp
    /// dir each step writes into (`.kiln-step-XXXXXX`) `<step>`. Clears them.
    pub(crate) fn nvcc_command_lines(&self) -> Vec<String> {
        let file = self.root.join("commands.log");
        let text = std::fs::read_to_string(&file).unwrap_or_default();
        let _ = std::fs::remove_file(&file);
        let (out, krate, root) = (
            self.out_dir().display().to_string(),
            self.crate_dir.display().to_string(),
            self.root.display().to_string(),
        );
        let mut lines: Vec<String> = text
            .lines()
            .map(|l| {
                let l = l
                    .replace(&out, "<out>")
                    .replace(&krate, "<crate>")
                    .replace(&root, "<root>");
                without_step_dirs(&l)
            })
            .collect();
        lines.sort();
        lines
    }

    /// Writes a file of the fixture crate and dates it as [`Fixture::touch`]
    /// does.
    pub(crate) fn write(&self, relative: &str, text: &str) {
        write_file(&self.path(relative), text);
        self.touch(relative);
    }

    /// Removes a file of the fixture crate and dates its dir as
    /// [`Fixture::touch`] does.
    pub(crate) fn remove(&self, relative: &str) {
        let path = self.path(relative);
        std::fs::remove_file(&path).unwrap_or_else(|e| panic!("removing {}: {e}", path.display()));
        let dir = Path::new(relative).parent().expect("a file in a dir");
        self.touch(&dir.display().to_string());
    }

    /// Sets a file's modification time to a moment strictly after every file
    /// the last build wrote, and not later than needed: the present, or the
    /// newest build output plus a millisecond where the clock lags it.
    ///
    /// Not further into the future: Cargo (`rerun-if-changed`, rustc's
    /// dep-info) and cuda-build (its stamps) rebuild when an input is newer
    /// than an output, so an input dated ahead of the clock would stay newer
    /// than every later output and rebuild on every build until the clock
    /// caught up.
    pub(crate) fn touch(&self, relative: &str) {
        let path = self.path(relative);
        let after = newest_mtime(&self.target_dir).max(mtime(&path));
        let at = SystemTime::now().max(after + Duration::from_millis(1));
        // Setting times needs ownership, not write access: dirs work too.
        File::open(&path)
            .and_then(|file| file.set_modified(at))
            .unwrap_or_else(|e| panic!("touching {}: {e}", path.display()));
    }

    /// The fixture's OUT_DIR: the `target/debug/build/fixture-*` dir holding
    /// the build script's `output`.
    pub(crate) fn out_dir(&self) -> PathBuf {
        self.build_script_run_dir().join("out")
    }

    /// What the build script printed on its last run (Cargo keeps it in
    /// `output`, next to OUT_DIR).
    pub(crate) fn build_script_output(&self) -> String {
        read(&self.build_script_run_dir().join("output"))
    }

    /// When the build script last ran: the mtime of its `output`.
    pub(crate) fn build_script_ran_at(&self) -> SystemTime {
        mtime(&self.build_script_run_dir().join("output"))
    }

    fn build_script_run_dir(&self) -> PathBuf {
        let build = self.target_dir.join("debug/build");
        let dirs: Vec<PathBuf> = std::fs::read_dir(&build)
            .unwrap_or_else(|e| panic!("reading {}: {e}", build.display()))
            .map(|entry| entry.expect("a dir entry").path())
            .filter(|dir| {
                dir.file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with(&format!("{}-", self.name)))
                    && dir.join("output").is_file()
            })
            .collect();
        assert_eq!(
            dirs.len(),
            1,
            "expected one run of {}'s build script under {}, found {dirs:?}",
            self.name,
            build.display()
        );
        dirs.into_iter().next().expect("checked above")
    }

    /// The Rust cuda-build generated (`fixture_modules.rs`).
    pub(crate) fn generated_modules(&self) -> String {
        read(&self.out_dir().join("fixture_modules.rs"))
    }

    /// The manifest cuda-build wrote.
    pub(crate) fn manifest(&self) -> Manifest {
        let path = self
            .out_dir()
            .join(cuda_build::manifest::file_name("FIXTURE"));
        Manifest::read(&path).unwrap_or_else(|e| panic!("{e}"))
    }

    /// The modules the manifest says this build compiled, sorted.
    pub(crate) fn compiled_per_manifest(&self) -> Vec<String> {
        let mut names: Vec<String> = self
            .manifest()
            .modules
            .iter()
            .filter(|m| m.compiled)
            .map(|m| m.name.clone())
            .collect();
        names.sort();
        names
    }

    /// Where the fixture lives.
    pub(crate) fn root(&self) -> &Path {
        &self.root
    }

    /// A path under the fixture's root (beside the crate, not in it).
    pub(crate) fn root_path(&self, relative: &str) -> PathBuf {
        self.root.join(relative)
    }
}

/// `text` with every `.kiln-step-XXXXXX` (a step's temp dir) as `<step>`.
fn without_step_dirs(text: &str) -> String {
    let mut rest = text;
    let mut out = String::new();
    while let Some(at) = rest.find(".kiln-step-") {
        out.push_str(&rest[..at]);
        out.push_str("<step>");
        let tail = &rest[at..];
        rest = &tail[tail.find('/').unwrap_or(tail.len())..];
    }
    out.push_str(rest);
    out
}

/// The nvcc `cargo xtask toolkit install` put in this checkout, or `None`
/// after printing why a test that needs it is skipped.
pub(crate) fn installed_nvcc() -> Option<PathBuf> {
    let nvcc = workspace_root().join("target/cuda-toolkit/cuda/bin/nvcc");
    if nvcc.is_file() {
        return Some(nvcc);
    }
    assert!(
        std::env::var_os("KILN_REQUIRE_TOOLKIT").is_none_or(|v| v != "1"),
        "KILN_REQUIRE_TOOLKIT=1 but there is no CUDA toolkit at {} (run cargo xtask toolkit install)",
        nvcc.display()
    );
    eprintln!(
        "skipped: no CUDA toolkit at {} (run cargo xtask toolkit install)",
        nvcc.display()
    );
    None
}

/// Panics unless `path` is a fat binary: its header starts with the magic
/// 0xBA55ED50.
#[track_caller]
pub(crate) fn assert_fatbin(path: &Path) {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    assert_eq!(
        bytes.get(..4),
        Some(&[0x50, 0xed, 0x55, 0xba][..]),
        "{}",
        path.display()
    );
}

/// `compile a.cu` lines for these modules, as [`Fixture::nvcc_calls`] returns
/// them.
pub(crate) fn compiles(modules: &[&str]) -> Vec<String> {
    let mut calls: Vec<String> = modules.iter().map(|m| format!("compile {m}.cu")).collect();
    calls.sort();
    calls
}

/// `PATH` without the dirs that hold an `nvcc`, so that only the toolkit a
/// test names is found.
pub(crate) fn path_without_nvcc() -> String {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let dirs = std::env::split_paths(&path).filter(|dir| !dir.join("nvcc").exists());
    std::env::join_paths(dirs)
        .expect("PATH entries were joinable before")
        .to_string_lossy()
        .into_owned()
}

/// The newest modification time of any file under `dir` (the epoch if none).
fn newest_mtime(dir: &Path) -> SystemTime {
    let mut newest = SystemTime::UNIX_EPOCH;
    let mut pending = vec![dir.to_path_buf()];
    while let Some(dir) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let Ok(meta) = entry.metadata() else { continue };
            if meta.is_dir() {
                pending.push(entry.path());
            }
            if let Ok(modified) = meta.modified() {
                newest = newest.max(modified);
            }
        }
    }
    newest
}

fn mtime(path: &Path) -> SystemTime {
    std::fs::metadata(path)
        .and_then(|m| m.modified())
        .unwrap_or_else(|e| panic!("reading the mtime of {}: {e}", path.display()))
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
}

fn write_file(path: &Path, text: &str) {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).unwrap_or_else(|e| panic!("creating {}: {e}", dir.display()));
    }
    std::fs::write(path, text).unwrap_or_else(|e| panic!("writing {}: {e}", path.display()));
}

/// Writes an executable script.
pub(crate) fn write_script(path: &Path, text: &str) {
    write_executable(path, text);
}

fn write_executable(path: &Path, text: &str) {
    use std::os::unix::fs::PermissionsExt as _;
    write_file(path, text);
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755))
        .unwrap_or_else(|e| panic!("making {} executable: {e}", path.display()));
}

fn shell_quote(path: &Path) -> String {
    let text = path.display().to_string();
    shlex::try_quote(&text)
        .unwrap_or_else(|e| panic!("{} cannot be quoted for sh: {e}", path.display()))
        .into_owned()
}
