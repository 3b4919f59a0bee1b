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
//! Nothing in the folder is trusted (`folder`): `prebuilt.toml` carries the
//! SHA-256 of its own text and of every file beside it; only regular files
//! are read, never through a symlink, never past a size bound; every name it
//! gives stays inside its folder; its archs are read with the arch grammar;
//! each image is a fat binary holding the archs its module declares. Any
//! failure refuses the whole folder in one line ([`PrebuiltError`]).
//!
//! Files are named as the build saw them: relative to the package root (the
//! build script's dir), or, outside it, relative to the include dir that
//! holds them (`kiln.h` in cuda-build's), so that the check works wherever
//! the package is unpacked.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

use crate::cache::{hex, write_atomically};
use crate::config::LinkMode;
use crate::error::{io, Error};
pub use crate::manifest::InputFile;
use crate::manifest::{Manifest, ModuleEntry};

mod error;
mod folder;

pub use error::PrebuiltError;
use folder::{read_regular, MAX_FILE_BYTES, MAX_MANIFEST_BYTES};

/// The folder's default name, in the package root.
pub const DEFAULT_DIR: &str = "kernels-prebuilt";
/// The manifest's name in the folder.
pub const MANIFEST: &str = "prebuilt.toml";
/// The static CUDA runtime, copied beside static libraries (they need it to
/// link; NVIDIA lists it as redistributable).
const RUNTIME: &str = "libcudart_static.a";
/// 2: the manifest sealed by the SHA-256 of its text, and `[[files]]`.
const FORMAT: u32 = 2;

/// What a prebuilt folder holds (`prebuilt.toml`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Prebuilt {
    /// The format version (2).
    pub format: u32,
    /// The toolkit that built them (`13.0.88`).
    pub toolkit: String,
    /// Real archs of the build's spec.
    pub sass: Vec<String>,
    /// Virtual archs of the build's spec.
    pub ptx: Vec<String>,
    /// Every input, with the content it had.
    pub inputs: Vec<InputFile>,
    /// Every file of the folder but `prebuilt.toml`, with its content.
    pub files: Vec<PrebuiltFile>,
    /// The modules; `output` is a file name in the folder, sources are named
    /// as [`InputFile::path`] names them.
    pub modules: Vec<ModuleEntry>,
}

/// A file of the folder (an image, a static library, the static runtime).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct PrebuiltFile {
    /// Its name in the folder.
    pub path: PathBuf,
    /// Its size.
    pub size_bytes: u64,
    /// SHA-256 of its content, in hex.
    pub sha256: String,
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

    /// Where a named input is now: inside the package root (or the include
    /// dir that holds it) once every symlink is followed, or refused.
    fn locate(&self, file: &InputFile) -> Result<PathBuf, PrebuiltError> {
        let missing = || PrebuiltError::InputMissing {
            name: error::shown(&file.path.to_string_lossy()),
        };
        let root = if file.include {
            self.include_dirs
                .iter()
                .find(|dir| dir.join(&file.path).symlink_metadata().is_ok())
                .ok_or_else(missing)?
        } else {
            self.base
        };
        let real = std::fs::canonicalize(root.join(&file.path)).map_err(|_| missing())?;
        let real_root = std::fs::canonicalize(root).map_err(|_| missing())?;
        if !real.starts_with(&real_root) {
            return Err(PrebuiltError::InputOutside {
                name: error::shown(&file.path.to_string_lossy()),
                root: root.to_path_buf(),
            });
        }
        Ok(real)
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
    /// Damaged, or built from other sources: why, naming the first file.
    Stale(PrebuiltError),
    /// Usable: checked, and its files read.
    Matching(Verified),
}

/// A folder read and checked, its files' bytes in hand: what is embedded is
/// what was checked, not what the folder holds a moment later.
#[derive(Debug)]
pub(crate) struct Verified {
    pub(crate) prebuilt: Prebuilt,
    files: Vec<(PathBuf, Vec<u8>)>,
}

/// Reads and checks the folder `dir` on its own; `None` when it holds no
/// manifest.
fn open(dir: &Path) -> Result<Option<Verified>, PrebuiltError> {
    let path = dir.join(MANIFEST);
    let bytes = match read_regular(&path, MAX_MANIFEST_BYTES) {
        Err(PrebuiltError::Missing { .. }) => return Ok(None),
        read => read?,
    };
    let text = String::from_utf8(bytes)
        .map_err(|_| PrebuiltError::damaged(&path, "it is not UTF-8 text"))?;
    let prebuilt = folder::parse(&path, &text)?;
    let files = folder::read_files(dir, &prebuilt)?;
    Ok(Some(Verified { prebuilt, files }))
}

/// A module of the sources as they are now, as a folder must hold it.
#[derive(Debug)]
pub(crate) struct Wanted {
    pub(crate) name: String,
    /// Absolute.
    pub(crate) sources: Vec<PathBuf>,
    /// The file name a toolkit build gives its output (`NAME.fatbin`,
    /// `libPREFIX_NAME.a`): the generated code and the link lines expect it.
    pub(crate) output: String,
}

/// Checks the folder `dir` against the current modules.
pub(crate) fn check(dir: &Path, naming: &Naming<'_>, modules: &[Wanted]) -> Check {
    let verified = match open(dir) {
        Ok(None) => return Check::Absent,
        Ok(Some(verified)) => verified,
        Err(why) => return Check::Stale(why),
    };
    match fits(dir, &verified.prebuilt, naming, modules) {
        Ok(()) => Check::Matching(verified),
        Err(why) => Check::Stale(why),
    }
}

/// Whether a checked folder was built from these sources.
fn fits(
    dir: &Path,
    prebuilt: &Prebuilt,
    naming: &Naming<'_>,
    modules: &[Wanted],
) -> Result<(), PrebuiltError> {
    for file in &prebuilt.inputs {
        let name = || error::shown(&file.path.to_string_lossy());
        let bytes = match read_regular(&naming.locate(file)?, MAX_FILE_BYTES) {
            Err(PrebuiltError::Missing { .. }) => {
                return Err(PrebuiltError::InputMissing { name: name() })
            }
            read => read?,
        };
        if hex(&Sha256::digest(&bytes)) != file.sha256 {
            return Err(PrebuiltError::InputChanged { name: name() });
        }
    }
    for wanted in modules {
        let name = &wanted.name;
        let sources = naming.sources(&wanted.sources);
        let Some(m) = prebuilt.modules.iter().find(|m| &m.name == name) else {
            let first = sources
                .first()
                .map(|s| s.display().to_string())
                .unwrap_or_default();
            return Err(PrebuiltError::ModuleAdded {
                first,
                module: name.clone(),
            });
        };
        if m.sources != sources {
            return Err(PrebuiltError::ModuleSources {
                module: name.clone(),
            });
        }
        if m.output.as_deref() != Some(Path::new(&wanted.output)) {
            let found = m.output.as_deref().unwrap_or(Path::new(""));
            return Err(PrebuiltError::OutputName {
                path: dir.join(MANIFEST),
                module: name.clone(),
                found: error::shown(&found.to_string_lossy()),
                expected: wanted.output.clone(),
            });
        }
    }
    if let Some(gone) = prebuilt
        .modules
        .iter()
        .find(|m| !modules.iter().any(|w| w.name == m.name))
    {
        return Err(PrebuiltError::ModuleGone {
            module: error::shown(&gone.name),
        });
    }
    Ok(())
}

impl Verified {
    /// Writes the checked files into `out_dir`, each under the plain file
    /// name the manifest was checked to give it; returns the modules with
    /// their outputs there.
    pub(crate) fn install(&self, out_dir: &Path) -> Result<Vec<ModuleEntry>, Error> {
        for (name, bytes) in &self.files {
            let to = out_dir.join(name);
            // The same bytes keep their mtime, so nothing downstream rebuilds.
            if std::fs::read(&to).is_ok_and(|old| old == *bytes) {
                continue;
            }
            io(&to, write_atomically(&to, bytes))?;
        }
        let mut modules = self.prebuilt.modules.clone();
        for module in &mut modules {
            module.output = module.output.as_ref().map(|name| out_dir.join(name));
            module.compiled = false;
            module.compile_ms = None;
        }
        Ok(modules)
    }
}

impl Prebuilt {
    /// `CUDA 13.0, sm_80 sm_90 + compute_90`.
    pub fn summary(&self) -> String {
        summary(&self.toolkit, &self.sass, &self.ptx)
    }

    /// `prebuilt.toml`'s text: the SHA-256 of the rest on the first line.
    /// Fails only for values TOML cannot hold (a size over `i64::MAX`).
    pub fn to_toml(&self) -> Result<String, PrebuiltError> {
        let body = toml::to_string_pretty(self).map_err(|e| PrebuiltError::Unwritable {
            problem: e.to_string().lines().next().unwrap_or_default().to_string(),
        })?;
        Ok(folder::seal(&body))
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
    // A reader finds inputs in the package or an include dir only.
    if let Some(outside) = manifest
        .inputs
        .iter()
        .find(|f| !folder::stays_inside(&f.path))
    {
        return Err(refuse(&format!(
            "input {} lies outside the package and its include dirs, where no user of the \
             package has it; move it inside to ship prebuilt kernels",
            outside.path.display()
        )));
    }
    let parent = dest.parent().unwrap_or(Path::new("."));
    io(parent, std::fs::create_dir_all(parent))?;
    let staging = io(
        parent,
        tempfile::Builder::new()
            .prefix(".kernels-prebuilt.")
            .tempdir_in(parent),
    )?;
    let mut modules = Vec::new();
    let mut files = Vec::new();
    for module in &manifest.modules {
        let mut entry = module.clone();
        if let Some(output) = &module.output {
            let name = output.file_name().map(PathBuf::from).unwrap_or_default();
            files.push(copy_recorded(output, staging.path(), &name)?);
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
        files.push(copy_recorded(&from, staging.path(), Path::new(RUNTIME))?);
    }
    let prebuilt = Prebuilt {
        format: FORMAT,
        toolkit: toolkit.version.clone(),
        sass: manifest.sass.clone(),
        ptx: manifest.ptx.clone(),
        inputs: manifest.inputs.clone(),
        files,
        modules,
    };
    let path = staging.path().join(MANIFEST);
    let text = prebuilt.to_toml().map_err(|why| refuse(&why.to_string()))?;
    io(&path, std::fs::write(&path, text))?;
    // Never write a folder its readers would refuse (an image without an
    // arch its module declares, an arch the grammar does not know).
    if let Err(why) = open(staging.path()) {
        return Err(refuse(&format!(
            "the folder written from this build would be refused: {why}"
        )));
    }
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

/// Copies `from` into `dir` as `name`; returns what the manifest records of
/// the copy.
fn copy_recorded(from: &Path, dir: &Path, name: &Path) -> Result<PrebuiltFile, Error> {
    let to = dir.join(name);
    io(&to, std::fs::copy(from, &to))?;
    let bytes = io(&to, std::fs::read(&to))?;
    Ok(PrebuiltFile {
        path: name.to_path_buf(),
        size_bytes: bytes.len() as u64,
        sha256: hex(&Sha256::digest(&bytes)),
    })
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

/// Reads a prebuilt folder (for tools: the audit), with every check a build
/// makes of the folder itself: its manifest, names, archs, and each file's
/// size, SHA-256 and kind. Whether it fits a crate's sources is not asked.
pub fn read(dir: &Path) -> Result<Prebuilt, PrebuiltError> {
    match open(dir)? {
        Some(verified) => Ok(verified.prebuilt),
        None => Err(PrebuiltError::Missing {
            path: dir.join(MANIFEST),
        }),
    }
}

/// Parses and checks `prebuilt.toml`'s text on its own: its seal, its shape,
/// the format, the toolkit version, every arch and every name (the files it
/// names are checked by [`read`]).
pub fn parse(text: &str) -> Result<Prebuilt, PrebuiltError> {
    folder::parse(Path::new(MANIFEST), text)
}
