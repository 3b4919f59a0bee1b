//! Prebuilt kernels: a crate's fat binaries and static libraries, built once
//! with a toolkit and shipped in its package (`kernels-prebuilt/`, with
//! `prebuilt.toml`), so that a user with no CUDA toolkit still gets GPU code.
//!
//! [`export`] writes the folder from a toolkit build's manifest. A build that
//! finds no toolkit embeds those images when every input they were built from
//! (each module's sources, the headers its depfile lists outside the system
//! and the toolkit, the config file) still has the content recorded, and the
//! modules are the same; otherwise it names the first file that changed and
//! builds CPU-only.
//!
//! Files are named as the build saw them: relative to the package root (the
//! build script's dir), or, outside it, relative to the include dir that
//! holds them (`kiln.h` in cuda-build's), so that the check works wherever
//! the package is unpacked.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

use crate::cache::hex;
use crate::config::LinkMode;
use crate::error::{io, Error};
pub use crate::manifest::InputFile;
use crate::manifest::{Manifest, ModuleEntry};

/// The folder's default name, in the package root.
pub const DEFAULT_DIR: &str = "kernels-prebuilt";
/// The manifest's name in the folder.
pub const MANIFEST: &str = "prebuilt.toml";
/// The static CUDA runtime, copied beside static libraries (they need it to
/// link; NVIDIA lists it as redistributable).
const RUNTIME: &str = "libcudart_static.a";
const FORMAT: u32 = 1;

/// What a prebuilt folder holds (`prebuilt.toml`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Prebuilt {
    /// The format version (1).
    pub format: u32,
    /// The toolkit that built them (`13.0.88`).
    pub toolkit: String,
    /// Real archs of the build's spec.
    pub sass: Vec<String>,
    /// Virtual archs of the build's spec.
    pub ptx: Vec<String>,
    /// Every input, with the content it had.
    pub inputs: Vec<InputFile>,
    /// The modules; `output` is a file name in the folder, sources are named
    /// as [`InputFile::path`] names them.
    pub modules: Vec<ModuleEntry>,
}

/// How files are named: the package root and the include dirs.
#[derive(Debug, Clone)]
pub(crate) struct Naming<'a> {
    pub(crate) base: &'a Path,
    pub(crate) include_dirs: &'a [PathBuf],
}

impl Naming<'_> {
    /// `(name, include)` of an absolute path.
    fn name(&self, path: &Path) -> (PathBuf, bool) {
        if let Ok(relative) = path.strip_prefix(self.base) {
            return (relative.to_path_buf(), false);
        }
        for dir in self.include_dirs {
            if let Ok(relative) = path.strip_prefix(dir) {
                return (relative.to_path_buf(), true);
            }
        }
        (path.to_path_buf(), false)
    }

    /// Where a named file is now.
    fn resolve(&self, file: &InputFile) -> PathBuf {
        if !file.include {
            return self.base.join(&file.path);
        }
        self.include_dirs
            .iter()
            .map(|dir| dir.join(&file.path))
            .find(|p| p.is_file())
            .unwrap_or_else(|| file.path.clone())
    }

    /// Every input of these modules and the config file, named and hashed.
    pub(crate) fn inputs(
        &self,
        modules: &[ModuleEntry],
        config: Option<&Path>,
    ) -> Result<Vec<InputFile>, Error> {
        let mut paths: Vec<&Path> = config.into_iter().collect();
        for module in modules {
            for path in module.sources.iter().chain(&module.deps) {
                if !paths.contains(&path.as_path()) {
                    paths.push(path);
                }
            }
        }
        paths
            .into_iter()
            .map(|path| {
                let (name, include) = self.name(path);
                Ok(InputFile {
                    path: name,
                    include,
                    sha256: sha256_of(path)?,
                })
            })
            .collect()
    }

    /// A module's sources, named.
    fn sources(&self, sources: &[PathBuf]) -> Vec<PathBuf> {
        sources.iter().map(|s| self.name(s).0).collect()
    }
}

fn sha256_of(path: &Path) -> Result<String, Error> {
    Ok(hex(&Sha256::digest(io(path, std::fs::read(path))?)))
}

/// Whether a folder's kernels fit the sources as they are.
#[derive(Debug)]
pub(crate) enum Check {
    /// No folder (or no manifest in it).
    Absent,
    /// Built from other sources: why, naming the first file.
    Stale(String),
    /// Usable.
    Matching(Prebuilt),
}

/// Checks the folder `dir` against the current modules (sources absolute).
pub(crate) fn check(dir: &Path, naming: &Naming<'_>, modules: &[(String, Vec<PathBuf>)]) -> Check {
    let path = dir.join(MANIFEST);
    let Ok(text) = std::fs::read_to_string(&path) else {
        return Check::Absent;
    };
    let prebuilt: Prebuilt = match toml::from_str(&text) {
        Ok(p) => p,
        Err(e) => {
            return Check::Stale(format!(
                "{} cannot be read ({})",
                path.display(),
                e.message()
            ))
        }
    };
    if prebuilt.format != FORMAT {
        return Check::Stale(format!(
            "{} has format {}, not {FORMAT}",
            path.display(),
            prebuilt.format
        ));
    }
    for file in &prebuilt.inputs {
        let name = file.path.display();
        match sha256_of(&naming.resolve(file)) {
            Err(_) => return Check::Stale(format!("{name} is missing")),
            Ok(sum) if sum != file.sha256 => {
                return Check::Stale(format!("{name} changed since they were built"));
            }
            Ok(_) => {}
        }
    }
    for (name, sources) in modules {
        let sources = naming.sources(sources);
        match prebuilt.modules.iter().find(|m| &m.name == name) {
            None => {
                let first = sources
                    .first()
                    .map(|s| s.display().to_string())
                    .unwrap_or_default();
                return Check::Stale(format!("{first} (module `{name}`) is not among them"));
            }
            Some(m) if m.sources != sources => {
                return Check::Stale(format!("module `{name}` has other sources now"));
            }
            Some(m) => {
                let output = m.output.as_ref().map(|o| dir.join(o));
                if !output.as_ref().is_some_and(|o| o.is_file()) {
                    return Check::Stale(format!("module `{name}`'s image is missing"));
                }
            }
        }
    }
    if let Some(gone) = prebuilt
        .modules
        .iter()
        .find(|m| !modules.iter().any(|(n, _)| *n == m.name))
    {
        return Check::Stale(format!("module `{}` is gone from the sources", gone.name));
    }
    Check::Matching(prebuilt)
}

impl Prebuilt {
    /// `CUDA 13.0, sm_80 sm_90 + compute_90`.
    pub fn summary(&self) -> String {
        summary(&self.toolkit, &self.sass, &self.ptx)
    }

    /// Copies the images (and the static runtime, if any) from `dir` into
    /// `out_dir`; returns the modules with their outputs there.
    pub(crate) fn install(&self, dir: &Path, out_dir: &Path) -> Result<Vec<ModuleEntry>, Error> {
        let mut modules = self.modules.clone();
        for module in &mut modules {
            if let Some(name) = &module.output {
                let to = out_dir.join(name);
                io(&to, copy_if_changed(&dir.join(name), &to))?;
                module.output = Some(to);
            }
            module.compiled = false;
            module.compile_ms = None;
        }
        if self.modules.iter().any(|m| m.link == LinkMode::Static) {
            let to = out_dir.join(RUNTIME);
            io(&to, copy_if_changed(&dir.join(RUNTIME), &to))?;
        }
        Ok(modules)
    }
}

/// `(13, 0)` of `13.0.88`.
pub(crate) fn major_minor(version: &str) -> (u32, u32) {
    let mut parts = version.split('.').map(|p| p.parse().unwrap_or(0));
    (parts.next().unwrap_or(0), parts.next().unwrap_or(0))
}

/// `CUDA 13.0, sm_80 sm_90 + compute_90` for a toolkit version and archs.
pub(crate) fn summary(toolkit: &str, sass: &[String], ptx: &[String]) -> String {
    let version: Vec<&str> = toolkit.split('.').take(2).collect();
    let mut text = format!("CUDA {}, {}", version.join("."), sass.join(" "));
    if !ptx.is_empty() {
        text.push_str(&format!(" + {}", ptx.join(" ")));
    }
    text
}

/// Copies unless the destination already holds the same bytes (keeps its
/// mtime, so nothing downstream rebuilds).
fn copy_if_changed(from: &Path, to: &Path) -> std::io::Result<()> {
    let bytes = std::fs::read(from)?;
    if std::fs::read(to).is_ok_and(|old| old == bytes) {
        return Ok(());
    }
    std::fs::write(to, bytes)
}

/// Writes a prebuilt folder at `dest` from the manifest of a build that
/// compiled with a toolkit (`<prefix>-manifest.toml` in its OUT_DIR): the fat
/// binaries, static libraries (and the static CUDA runtime they link), and
/// `prebuilt.toml`. The folder is written beside `dest` and renamed into
/// place; `dest` must not exist or be empty (an existing folder is never
/// removed: replace it yourself, or write to a new path).
pub fn export(build_manifest: &Path, dest: &Path) -> Result<Prebuilt, Error> {
    let manifest = Manifest::read(build_manifest)?;
    let refuse = |message: &str| Error::Config {
        path: build_manifest.to_path_buf(),
        message: message.to_string(),
    };
    let Some(toolkit) = manifest.toolkit.as_ref().filter(|_| manifest.cuda_enabled) else {
        return Err(refuse(
            "this build used no CUDA toolkit; build with one (set CUDA_PATH) to write prebuilt kernels",
        ));
    };
    let base = manifest.base.as_deref().ok_or_else(|| {
        refuse("this manifest does not name its inputs; rebuild with this version of cuda-build")
    })?;
    let naming = Naming {
        base,
        include_dirs: &manifest.include_dirs,
    };
    let parent = dest.parent().unwrap_or(Path::new("."));
    io(parent, std::fs::create_dir_all(parent))?;
    let staging = io(
        parent,
        tempfile::Builder::new()
            .prefix(".kernels-prebuilt.")
            .tempdir_in(parent),
    )?;
    let mut modules = Vec::new();
    for module in &manifest.modules {
        let mut entry = module.clone();
        if let Some(output) = &module.output {
            let name = output.file_name().map(PathBuf::from).unwrap_or_default();
            let to = staging.path().join(&name);
            io(&to, std::fs::copy(output, &to))?;
            entry.output = Some(name);
        }
        entry.source = naming.name(&module.source).0;
        entry.sources = naming.sources(&module.sources);
        entry.deps = naming.sources(&module.deps);
        entry.compiled = false;
        entry.compile_ms = None;
        modules.push(entry);
    }
    if modules.iter().any(|m| m.link == LinkMode::Static) {
        let lib64 = toolkit.root.join("lib64").join(RUNTIME);
        let from = if lib64.is_file() {
            lib64
        } else {
            toolkit.root.join("lib").join(RUNTIME)
        };
        let to = staging.path().join(RUNTIME);
        io(&from, std::fs::copy(&from, &to))?;
    }
    let prebuilt = Prebuilt {
        format: FORMAT,
        toolkit: toolkit.version.clone(),
        sass: manifest.sass.clone(),
        ptx: manifest.ptx.clone(),
        inputs: manifest.inputs.clone(),
        modules,
    };
    let text = toml::to_string_pretty(&prebuilt).expect("a prebuilt manifest always serializes");
    let path = staging.path().join(MANIFEST);
    io(&path, std::fs::write(&path, text))?;
    // Never over a folder with anything in it: this writes a new folder, and
    // removes nothing it did not write (a rename replaces only an empty
    // folder; kiln's tools replace an earlier one through their own swap).
    let staged = staging.keep();
    if let Err(e) = std::fs::rename(&staged, dest) {
        let _ = std::fs::remove_dir_all(&staged);
        return Err(refuse_dest(dest, e));
    }
    Ok(prebuilt)
}

/// The error for a `dest` the finished folder could not be renamed onto.
fn refuse_dest(dest: &Path, source: std::io::Error) -> Error {
    use std::io::ErrorKind::{AlreadyExists, DirectoryNotEmpty, NotADirectory};
    match source.kind() {
        DirectoryNotEmpty | AlreadyExists | NotADirectory => Error::Config {
            path: dest.to_path_buf(),
            message: "already exists and is not empty; prebuilt kernels are written to a new \
                      or empty folder: remove it yourself or give another path"
                .into(),
        },
        _ => Error::Io {
            path: dest.to_path_buf(),
            source,
        },
    }
}

/// Reads a prebuilt folder's manifest (for tools: the audit).
pub fn read(dir: &Path) -> Result<Prebuilt, Error> {
    let path = dir.join(MANIFEST);
    let text = io(&path, std::fs::read_to_string(&path))?;
    toml::from_str(&text).map_err(|e| Error::Config {
        path: path.clone(),
        message: format!(
            "not a prebuilt kernels manifest ({}); write it again",
            e.message()
        ),
    })
}
