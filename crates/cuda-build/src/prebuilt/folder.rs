//! Reading a prebuilt folder without trusting it: regular files only, never
//! through a symlink, never blocking on a FIFO, never past a size bound;
//! every name the manifest gives kept inside its folder; the manifest sealed
//! by the SHA-256 of its own text; archs checked with the crate's arch
//! grammar; each image checked against its recorded size and SHA-256, then
//! against what its module declares (a fat binary of its archs, or an
//! archive).

use std::collections::BTreeSet;
use std::path::{Component, Path, PathBuf};

use sha2::{Digest as _, Sha256};

use super::error::{shown, PrebuiltError};
use super::{Prebuilt, FORMAT, RUNTIME};
use crate::arch::{Arch, SupportedArchs};
use crate::cache::hex;
use crate::config::LinkMode;
use crate::fatbin;
use crate::manifest::ModuleEntry;
use crate::regular::{self, Links, Refusal};

/// The most a `prebuilt.toml` may hold.
pub(crate) const MAX_MANIFEST_BYTES: u64 = 16 << 20;
/// The most an image, library or input may hold.
pub(crate) const MAX_FILE_BYTES: u64 = 1 << 30;
/// How a static library (and the static runtime) starts.
const ARCHIVE_MAGIC: &[u8] = b"!<arch>\n";
/// The manifest's first line, before the SHA-256 of every byte after it.
const SEAL: &str = "sha256 = \"";

/// The bytes of the regular file at `path`, at most `limit` of them. A
/// symlink, FIFO, device or dir is refused without being opened for
/// reading; the file is opened without following a symlink and without
/// blocking, and looked at again once open, in case it was swapped.
pub(crate) fn read_regular(path: &Path, limit: u64) -> Result<Vec<u8>, PrebuiltError> {
    let path_buf = || path.to_path_buf();
    match regular::read(path, limit, Links::Refuse) {
        Ok((_, bytes)) => Ok(bytes),
        Err(Refusal::Missing) => Err(PrebuiltError::Missing { path: path_buf() }),
        Err(Refusal::NotRegular(kind)) => Err(PrebuiltError::NotRegular {
            path: path_buf(),
            kind,
        }),
        Err(Refusal::TooLarge) => Err(PrebuiltError::TooLarge {
            path: path_buf(),
            limit,
        }),
        Err(Refusal::Io(source)) => Err(PrebuiltError::Unreadable {
            path: path_buf(),
            source,
        }),
    }
}

/// Whether `path` is a relative path down its folder: plain components
/// only (no `..`, no `.`, no root or drive), none holding a control
/// character.
pub(crate) fn stays_inside(path: &Path) -> bool {
    path.components().count() > 0
        && path.components().all(|c| match c {
            Component::Normal(part) => part
                .to_str()
                .is_some_and(|s| !s.chars().any(char::is_control)),
            _ => false,
        })
}

/// Whether `name` is one plain file name in its folder.
pub(crate) fn is_file_name(name: &Path) -> bool {
    stays_inside(name) && name.components().count() == 1
}

/// `prebuilt.toml`'s text for this body: the SHA-256 of the body first.
pub(crate) fn seal(body: &str) -> String {
    format!("{SEAL}{}\"\n{body}", hex(&Sha256::digest(body.as_bytes())))
}

/// The body of a manifest whose first line holds the SHA-256 of the rest
/// (line ends taken as `\n`, as a checkout may have made them `\r\n`).
fn unseal(path: &Path, text: &str) -> Result<String, PrebuiltError> {
    let text = text.replace("\r\n", "\n");
    let Some((first, body)) = text.split_once('\n') else {
        return Err(PrebuiltError::damaged(path, "it is not one of format 2"));
    };
    let recorded = first
        .strip_prefix(SEAL)
        .and_then(|rest| rest.strip_suffix('"'))
        .ok_or_else(|| {
            PrebuiltError::damaged(
                path,
                "its first line is not the `sha256 = \"...\"` of format 2",
            )
        })?;
    if recorded != hex(&Sha256::digest(body.as_bytes())) {
        return Err(PrebuiltError::damaged(
            path,
            "its text is not the text its sha256 line was written for",
        ));
    }
    Ok(body.to_string())
}

/// Parses and checks a manifest's text (`path` names it in messages): the
/// seal, TOML of the right shape, the format, the toolkit version, every arch
/// and every name.
pub(crate) fn parse(path: &Path, text: &str) -> Result<Prebuilt, PrebuiltError> {
    let body = unseal(path, text)?;
    let prebuilt: Prebuilt =
        toml::from_str(&body).map_err(|e| PrebuiltError::damaged(path, e.message()))?;
    validate(path, &prebuilt)?;
    Ok(prebuilt)
}

fn validate(path: &Path, prebuilt: &Prebuilt) -> Result<(), PrebuiltError> {
    if prebuilt.format != FORMAT {
        return Err(PrebuiltError::damaged(
            path,
            format!("format {}, not {FORMAT}", prebuilt.format),
        ));
    }
    let version = prebuilt.toolkit.split('.').collect::<Vec<_>>();
    let numbers = version
        .iter()
        .all(|p| !p.is_empty() && p.len() <= 6 && p.bytes().all(|b| b.is_ascii_digit()));
    if !(2..=3).contains(&version.len()) || !numbers {
        return Err(PrebuiltError::damaged(
            path,
            format!(
                "toolkit `{}` is not a version such as 13.0.88",
                shown(&prebuilt.toolkit)
            ),
        ));
    }
    check_archs(path, "sass", &prebuilt.sass, false)?;
    check_archs(path, "ptx", &prebuilt.ptx, true)?;
    let outside = |what: String, name: &Path, inside: &str| PrebuiltError::Outside {
        path: path.to_path_buf(),
        what,
        name: shown(&name.to_string_lossy()),
        inside: inside.to_string(),
    };
    for input in &prebuilt.inputs {
        if !stays_inside(&input.path) {
            return Err(outside("the input".into(), &input.path, "the package"));
        }
    }
    let mut files = BTreeSet::new();
    for file in &prebuilt.files {
        if !is_file_name(&file.path) {
            return Err(outside("the file".into(), &file.path, "the folder"));
        }
        if !files.insert(file.path.as_path()) {
            return Err(PrebuiltError::damaged(
                path,
                format!("it lists {} twice", file.path.display()),
            ));
        }
    }
    let mut used = BTreeSet::new();
    for module in &prebuilt.modules {
        validate_module(path, prebuilt, module, &outside)?;
        let output = module.output.as_deref().unwrap_or(Path::new(""));
        if !files.contains(output) || !used.insert(output) {
            return Err(PrebuiltError::damaged(
                path,
                format!(
                    "module `{}`'s image is not one of its own [[files]]",
                    shown(&module.name)
                ),
            ));
        }
    }
    if prebuilt.modules.iter().any(|m| m.link == LinkMode::Static) {
        if !files.contains(Path::new(RUNTIME)) {
            return Err(PrebuiltError::damaged(
                path,
                format!("it lists no {RUNTIME}, which its static libraries link"),
            ));
        }
        used.insert(Path::new(RUNTIME));
    }
    if let Some(extra) = files.difference(&used).next() {
        return Err(PrebuiltError::damaged(
            path,
            format!(
                "it lists {} as a file, which no module uses",
                extra.display()
            ),
        ));
    }
    Ok(())
}

fn validate_module(
    path: &Path,
    prebuilt: &Prebuilt,
    module: &ModuleEntry,
    outside: &dyn Fn(String, &Path, &str) -> PrebuiltError,
) -> Result<(), PrebuiltError> {
    let name = shown(&module.name);
    if module.name.is_empty() || name != module.name {
        return Err(PrebuiltError::damaged(
            path,
            format!("a module is named `{name}`"),
        ));
    }
    let what = |role: &str| format!("the {role} of module `{name}`");
    match &module.output {
        Some(output) if is_file_name(output) => {}
        Some(output) => return Err(outside(what("output"), output, "the folder")),
        None => return Err(outside(what("output"), Path::new(""), "the folder")),
    }
    let named = std::iter::once(&module.source)
        .chain(&module.sources)
        .chain(&module.deps);
    for file in named {
        if !stays_inside(file) {
            return Err(outside(what("source"), file, "the package"));
        }
    }
    check_archs(path, &format!("modules.{name}.sass"), &module.sass, false)?;
    check_archs(path, &format!("modules.{name}.ptx"), &module.ptx, true)?;
    for kernel in &module.kernels {
        if kernel.kernel.is_empty() || shown(&kernel.kernel) != kernel.kernel {
            return Err(PrebuiltError::damaged(
                path,
                format!(
                    "module `{name}` has a kernel named `{}`",
                    shown(&kernel.kernel)
                ),
            ));
        }
        let list = format!("modules.{name}.kernels");
        check_archs(path, &list, std::slice::from_ref(&kernel.arch), false)?;
    }
    let (sass, ptx) = declared_archs(prebuilt, module);
    if module.link == LinkMode::Fatbin && sass.is_empty() && ptx.is_empty() {
        return Err(PrebuiltError::damaged(
            path,
            format!("module `{name}` declares no arch"),
        ));
    }
    Ok(())
}

/// The archs the generated code declares for a module: its own, or (older
/// manifests carry them once) the folder's.
pub(crate) fn declared_archs<'a>(
    prebuilt: &'a Prebuilt,
    module: &'a ModuleEntry,
) -> (&'a [String], &'a [String]) {
    if module.sass.is_empty() && module.ptx.is_empty() {
        (&prebuilt.sass, &prebuilt.ptx)
    } else {
        (&module.sass, &module.ptx)
    }
}

/// Every entry is an arch the arch grammar reads and CUDA 13.0 knows,
/// written as nvcc writes it (`sm_90a`; `compute_90` for `virtual`).
fn check_archs(
    path: &Path,
    list: &str,
    entries: &[String],
    virtual_: bool,
) -> Result<(), PrebuiltError> {
    let known = SupportedArchs::cuda_13_0_builtin();
    for entry in entries {
        let arch = Arch::from_nvcc_name(entry).filter(|arch| {
            let spelled = if virtual_ {
                arch.compute_name()
            } else {
                arch.sm_name()
            };
            spelled == *entry && known.allows(*arch, virtual_)
        });
        if arch.is_none() {
            return Err(PrebuiltError::Arch {
                path: path.to_path_buf(),
                list: list.to_string(),
                entry: shown(entry),
                kind: if virtual_ { "virtual" } else { "real" },
                example: if virtual_ { "compute_90" } else { "sm_90" },
            });
        }
    }
    Ok(())
}

/// Every file of the folder, read once and checked: its recorded size and
/// SHA-256, then its kind (a fat binary of the archs its module declares, or
/// an archive). Returns `(name, bytes)` of each.
pub(crate) fn read_files(
    dir: &Path,
    prebuilt: &Prebuilt,
) -> Result<Vec<(PathBuf, Vec<u8>)>, PrebuiltError> {
    let mut read = Vec::new();
    for file in &prebuilt.files {
        let path = dir.join(&file.path);
        let bytes = read_regular(&path, MAX_FILE_BYTES)?;
        let changed = |problem: String| PrebuiltError::Changed {
            path: path.clone(),
            problem,
        };
        if bytes.len() as u64 != file.size_bytes {
            return Err(changed(format!(
                "{} bytes, not {}",
                bytes.len(),
                file.size_bytes
            )));
        }
        if hex(&Sha256::digest(&bytes)) != file.sha256 {
            return Err(changed("another SHA-256".to_string()));
        }
        let module = prebuilt
            .modules
            .iter()
            .find(|m| m.output.as_deref() == Some(file.path.as_path()));
        let (what, problem) = match module {
            Some(m) if m.link == LinkMode::Fatbin => {
                let (sass, ptx) = declared_archs(prebuilt, m);
                (
                    format!("module `{}`", m.name),
                    fatbin_problem(&bytes, sass, ptx),
                )
            }
            Some(m) => (format!("module `{}`", m.name), archive_problem(&bytes)),
            None => (
                "the static CUDA runtime".to_string(),
                archive_problem(&bytes),
            ),
        };
        if let Some(problem) = problem {
            return Err(PrebuiltError::WrongImage {
                path,
                what,
                problem,
            });
        }
        read.push((file.path.clone(), bytes));
    }
    Ok(read)
}

/// What keeps `bytes` from being a fat binary of these archs (each
/// already checked to be an arch).
fn fatbin_problem(bytes: &[u8], sass: &[String], ptx: &[String]) -> Option<String> {
    let archs = |names: &[String]| -> Vec<Arch> {
        names
            .iter()
            .filter_map(|n| Arch::from_nvcc_name(n))
            .collect()
    };
    fatbin::check_archs(bytes, &archs(sass), &archs(ptx))
        .err()
        .map(|e| e.to_string())
}

fn archive_problem(bytes: &[u8]) -> Option<String> {
    (!bytes.starts_with(ARCHIVE_MAGIC)).then(|| "not a static library (no `!<arch>` header)".into())
}
