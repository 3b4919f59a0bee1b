//! Which modules a build has and what goes into each: `[modules.NAME]`
//! entries of the config matched against the files of the kernels dir, plus
//! one module per top-level `.cu` that no entry claims. Every mistake in an
//! entry (a name or pattern that matches nothing, a missing file) is one line
//! naming the config file, the entry and the fix.

use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};

use crate::config::{KernelConfig, LinkMode, ModuleConfig};
use crate::emit::{rust_ident, GENERATED_NAMES};
use crate::error::{io, Error};

/// One module: sources and settings, paths absolute.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Module {
    pub(crate) name: String,
    /// Sorted, at least one.
    pub(crate) sources: Vec<PathBuf>,
    /// The config's `nvcc-flags`, the module's `flags`, then `-D` defines.
    pub(crate) flags: Vec<String>,
    /// The module's own `-I` dirs (the build's come after).
    pub(crate) include_dirs: Vec<PathBuf>,
    /// The module's arch spec and where it was written, if it has one.
    pub(crate) archs: Option<(String, String)>,
    pub(crate) link: LinkMode,
    pub(crate) rdc: bool,
}

/// The modules of `kernels_dir`, sorted by name. `config_path` names the
/// config in errors.
pub(crate) fn resolve(
    config: &KernelConfig,
    kernels_dir: &Path,
    config_path: &Path,
) -> Result<Vec<Module>, Error> {
    let fail = |message: String| Error::Config {
        path: config_path.to_path_buf(),
        message,
    };
    // A source may be built both ways (loadable and linked in), but not twice
    // the same way: two static libraries would define the same symbols, two
    // fat binaries the same kernels.
    let mut claimed: BTreeMap<(PathBuf, LinkMode), String> = BTreeMap::new();
    let mut modules = Vec::new();
    for (name, entry) in &config.modules {
        check_name(name)
            .map_err(|why| fail(format!("[modules.\"{name}\"] {why}; rename the entry")))?;
        for define in &entry.defines {
            check_define(define).map_err(|why| {
                fail(format!(
                    "[modules.{name}] define {define:?} {why}; write NAME or NAME=VALUE"
                ))
            })?;
        }
        let sources = entry_sources(name, entry, kernels_dir).map_err(&fail)?;
        for source in &sources {
            if let Some(other) = claimed.insert((source.clone(), entry.link), name.clone()) {
                let shape = match entry.link {
                    LinkMode::Fatbin => "fat-binary module",
                    LinkMode::Static => "static library",
                };
                return Err(fail(format!(
                    "[modules.{name}] source `{}` also belongs to [modules.{other}], another {shape}; \
                     a source may be in one fat-binary module and one static library at most",
                    relative(source, kernels_dir)
                )));
            }
        }
        if sources.len() > 1 && !entry.rdc && entry.link == LinkMode::Fatbin {
            return Err(fail(format!(
                "[modules.{name}] has {} sources but a fat-binary module is one image; \
                 set `rdc = true` to device-link them, or give each its own module",
                sources.len()
            )));
        }
        let mut include_dirs = Vec::new();
        for dir in &entry.include_dirs {
            let path = under(kernels_dir, dir)
                .map_err(|why| fail(format!("[modules.{name}] include dir `{dir}` {why}")))?;
            if !path.is_dir() {
                return Err(fail(format!(
                    "[modules.{name}] include dir `{dir}` does not exist under {}; fix the path or remove it",
                    kernels_dir.display()
                )));
            }
            include_dirs.push(path);
        }
        let mut flags = config.nvcc_flags.clone();
        flags.extend(entry.flags.iter().cloned());
        flags.extend(entry.defines.iter().map(|d| format!("-D{d}")));
        modules.push(Module {
            name: name.clone(),
            sources,
            flags,
            include_dirs,
            archs: entry.archs.clone().map(|spec| {
                (
                    spec,
                    format!("{} [modules.{name}] archs", config_path.display()),
                )
            }),
            link: entry.link,
            rdc: entry.rdc,
        });
    }
    for (stem, path) in top_level_sources(kernels_dir)? {
        if claimed.keys().any(|(source, _)| *source == path) {
            continue;
        }
        let checked = match &stem {
            None => Err("its name is not UTF-8".to_string()),
            Some(stem) => check_name(stem),
        };
        let (Some(stem), Ok(())) = (stem, checked.clone()) else {
            let why = checked.err().unwrap_or_default();
            let shown = path.file_name().unwrap_or_default().to_string_lossy();
            return Err(Error::Config {
                message: format!(
                    "{why}; rename the file, or build it under another name with \
                     [modules.NAME] sources = [\"{shown}\"] in {}",
                    config_path.display()
                ),
                path,
            });
        };
        if config.modules.contains_key(&stem) {
            return Err(fail(format!(
                "{stem}.cu is a module of its own but [modules.{stem}] does not list it in `sources`; \
                 add it there or rename one of them"
            )));
        }
        modules.push(Module {
            name: stem,
            sources: vec![path],
            flags: config.nvcc_flags.clone(),
            include_dirs: Vec::new(),
            archs: None,
            link: LinkMode::Fatbin,
            rdc: false,
        });
    }
    modules.sort_by(|a, b| a.name.cmp(&b.name));
    check_collisions(&modules, config_path)?;
    Ok(modules)
}

/// The `.cu` files under `kernels_dir`'s subfolders that no module builds
/// (top-level ones are modules of their own), each as a warning naming the
/// `kiln.toml` entry that would take it: a vendored tree's kernel left out
/// by a glob that missed it is said, not silently skipped.
pub(crate) fn unclaimed_sources(
    modules: &[Module],
    kernels_dir: &Path,
    config_path: &Path,
) -> Vec<String> {
    let pattern = kernels_dir.join("**").join("*.cu");
    let Ok(found) = glob::glob(&pattern.to_string_lossy()) else {
        return Vec::new();
    };
    let built: std::collections::BTreeSet<&PathBuf> =
        modules.iter().flat_map(|m| &m.sources).collect();
    found
        .flatten()
        .filter(|path| path.parent() != Some(kernels_dir) && !built.contains(path))
        .map(|path| {
            let shown = relative(&path, kernels_dir);
            let stem = path
                .file_stem()
                .unwrap_or_default()
                .to_string_lossy()
                .replace(|c: char| !c.is_ascii_alphanumeric(), "_");
            format!(
                "{shown} is built by no module; to build it add [modules.{stem}] sources = [\"{shown}\"] \
                 (or add it to a module's `sources`) in {}",
                config_path.display()
            )
        })
        .collect()
}

/// Two modules whose names map to one Rust identifier (`Saxpy` and
/// `saxpy`, `a-b` and `a_b`) would define one `static` twice.
fn check_collisions(modules: &[Module], config_path: &Path) -> Result<(), Error> {
    let mut seen: BTreeMap<String, &Module> = BTreeMap::new();
    for module in modules {
        let ident = rust_ident(&module.name);
        if let Some(other) = seen.insert(ident.clone(), module) {
            let file = |m: &Module| {
                m.sources[0]
                    .file_name()
                    .unwrap_or_default()
                    .to_string_lossy()
                    .into_owned()
            };
            return Err(Error::Config {
                path: module.sources[0].clone(),
                message: format!(
                    "module `{}` and module `{}` (from {}) both become `{ident}` in the generated \
                     Rust; rename one file, or give one another name with a [modules.NAME] entry \
                     in {}",
                    module.name,
                    other.name,
                    file(other),
                    config_path.display()
                ),
            });
        }
    }
    Ok(())
}

/// A `defines` entry is one `-D` argument: a macro name, optionally `=VALUE`,
/// with no space (it would not be one word) and not empty or starting with
/// `-` (nvcc would read the next argument, or an option, as the define).
fn check_define(define: &str) -> Result<(), String> {
    let name = define.split(['=', '(']).next().unwrap_or_default();
    let identifier = name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if define.chars().any(|c| c.is_whitespace() || c.is_control()) {
        Err("holds a space or control character".to_string())
    } else if !identifier {
        Err("does not start with a macro name".to_string())
    } else {
        Ok(())
    }
}

/// Module names become file names and Rust identifiers (upper-cased, `-`
/// as `_`): ASCII letters, digits, `_` and `-`, starting with a letter or
/// `_`, and not a name the generated Rust defines itself.
fn check_name(name: &str) -> Result<(), String> {
    let ident = rust_ident(name);
    let usable = name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        && ident != "_";
    if !usable {
        Err(format!(
            "`{name}` is not a usable module name: it must start with an ASCII letter or `_` \
             and hold only letters, digits, `_` and `-`"
        ))
    } else if GENERATED_NAMES.contains(&ident.as_str()) {
        Err(format!(
            "`{name}` is not a usable module name: the generated Rust defines `{ident}` itself"
        ))
    } else {
        Ok(())
    }
}

/// The sources an entry names: `NAME.cu` when it lists none.
fn entry_sources(name: &str, entry: &ModuleConfig, dir: &Path) -> Result<Vec<PathBuf>, String> {
    if entry.sources.is_empty() {
        let path = dir.join(format!("{name}.cu"));
        if !path.is_file() {
            return Err(format!(
                "[modules.{name}] matches no source: there is no {name}.cu in {}; \
                 fix the name or list its files in `sources`",
                dir.display()
            ));
        }
        return Ok(vec![path]);
    }
    let mut sources = Vec::new();
    for pattern in &entry.sources {
        let path = under(dir, pattern)
            .map_err(|why| format!("[modules.{name}] source `{pattern}` {why}"))?;
        if !pattern.contains(['*', '?', '[']) {
            if !path.is_file() {
                return Err(format!(
                    "[modules.{name}] source `{pattern}` does not exist under {}; fix the path or remove it",
                    dir.display()
                ));
            }
            sources.push(path);
            continue;
        }
        let text = path.to_str().ok_or_else(|| {
            format!("[modules.{name}] source `{pattern}`: the kernels dir is not UTF-8")
        })?;
        let matches = glob::glob(text).map_err(|e| {
            format!(
                "[modules.{name}] source `{pattern}` is not a valid glob ({e}); fix the pattern"
            )
        })?;
        let before = sources.len();
        sources.extend(matches.filter_map(Result::ok).filter(|p| p.is_file()));
        if sources.len() == before {
            return Err(format!(
                "[modules.{name}] source pattern `{pattern}` matches no file under {}; fix the pattern or remove it",
                dir.display()
            ));
        }
    }
    sources.sort();
    sources.dedup();
    Ok(sources)
}

/// `dir/relative`, refusing what would leave `dir`.
fn under(dir: &Path, relative: &str) -> Result<PathBuf, String> {
    let path = Path::new(relative);
    let escapes = path
        .components()
        .any(|c| !matches!(c, Component::Normal(_) | Component::CurDir));
    if escapes || relative.is_empty() {
        return Err(format!(
            "is not a relative path under {}; write it relative to that dir, without `..`",
            dir.display()
        ));
    }
    Ok(dir.join(path))
}

fn relative(path: &Path, dir: &Path) -> String {
    path.strip_prefix(dir).unwrap_or(path).display().to_string()
}

/// `(stem, path)` of every `.cu` file directly in `dir`, sorted by path;
/// the stem `None` where it is not UTF-8.
fn top_level_sources(dir: &Path) -> Result<Vec<(Option<String>, PathBuf)>, Error> {
    let mut sources = Vec::new();
    for entry in io(dir, std::fs::read_dir(dir))? {
        let path = io(dir, entry)?.path();
        if path.extension().is_some_and(|e| e == "cu") && path.is_file() {
            let stem = path.file_stem().and_then(|s| s.to_str()).map(String::from);
            sources.push((stem, path));
        }
    }
    sources.sort_by(|a, b| a.1.cmp(&b.1));
    Ok(sources)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A kernels dir with these files (empty), removed when dropped.
    fn tree(files: &[&str]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for file in files {
            let path = dir.path().join(file);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, "").unwrap();
        }
        dir
    }

    fn resolve_text(dir: &Path, toml: &str) -> Result<Vec<Module>, String> {
        let config =
            KernelConfig::parse(toml, Path::new("kiln.toml")).map_err(|e| e.to_string())?;
        resolve(&config, dir, Path::new("kiln.toml")).map_err(|e| e.to_string())
    }

    fn summary(modules: &[Module], dir: &Path) -> Vec<String> {
        modules
            .iter()
            .map(|m| {
                let sources: Vec<String> = m.sources.iter().map(|s| relative(s, dir)).collect();
                format!(
                    "{} {:?} rdc={} [{}] {:?}",
                    m.name,
                    m.link,
                    m.rdc,
                    sources.join(" "),
                    m.flags
                )
            })
            .collect()
    }

    #[test]
    fn a_cu_in_a_subfolder_that_no_module_builds_is_named_with_the_entry_that_would() {
        let dir = tree(&["a.cu", "vendor/b.cu", "vendor/deep/c-d.cu", "vendor/e.cuh"]);
        let toml = "[modules.b]\nsources = [\"vendor/b.cu\"]";
        let modules = resolve_text(dir.path(), toml).unwrap();
        let config = dir.path().join("kiln.toml");
        let warnings = unclaimed_sources(&modules, dir.path(), &config);
        assert_eq!(
            warnings,
            [format!(
                "vendor/deep/c-d.cu is built by no module; to build it add [modules.c_d] \
                 sources = [\"vendor/deep/c-d.cu\"] (or add it to a module's `sources`) in {}",
                config.display()
            )]
        );
        // Claimed by a glob: nothing to say.
        let toml = "[modules.b]\nsources = [\"vendor/**/*.cu\"]\nrdc = true";
        let modules = resolve_text(dir.path(), toml).unwrap();
        assert_eq!(
            unclaimed_sources(&modules, dir.path(), &config),
            Vec::<String>::new()
        );
    }

    #[test]
    fn without_entries_each_top_level_cu_is_a_module() {
        let tmp = tree(&["a.cu", "b.cu", "sub/c.cu", "include/h.h"]);
        let dir = tmp.path();
        let modules = resolve_text(dir, "nvcc-flags = [\"-O3\"]").unwrap();
        assert_eq!(
            summary(&modules, dir),
            [
                "a Fatbin rdc=false [a.cu] [\"-O3\"]",
                "b Fatbin rdc=false [b.cu] [\"-O3\"]"
            ]
        );
    }

    #[test]
    fn entries_claim_sources_and_the_rest_stay_modules() {
        let tmp = tree(&[
            "reduce.cu",
            "lone.cu",
            "family/f32.cu",
            "family/f64.cu",
            "family/inc/h.cuh",
            "x/y.cu",
        ]);
        let dir = tmp.path();
        let toml = "nvcc-flags = [\"-O3\"]\n\
                    [modules.reduce]\nlink = \"static\"\n\
                    [modules.family]\nsources = [\"family/*.cu\"]\nrdc = true\nflags = [\"-G\"]\n\
                    defines = [\"N=4\"]\ninclude-dirs = [\"family/inc\"]\narchs = \"sm_90a\"\n\
                    [modules.deep]\nsources = [\"x/y.cu\"]\n";
        let modules = resolve_text(dir, toml).unwrap();
        assert_eq!(
            summary(&modules, dir),
            [
                "deep Fatbin rdc=false [x/y.cu] [\"-O3\"]",
                "family Fatbin rdc=true [family/f32.cu family/f64.cu] [\"-O3\", \"-G\", \"-DN=4\"]",
                "lone Fatbin rdc=false [lone.cu] [\"-O3\"]",
                "reduce Static rdc=false [reduce.cu] [\"-O3\"]",
            ]
        );
        assert_eq!(modules[1].include_dirs, [dir.join("family/inc")]);
        assert_eq!(
            modules[1].archs,
            Some(("sm_90a".into(), "kiln.toml [modules.family] archs".into()))
        );
    }

    #[test]
    fn a_source_may_be_loadable_and_linked_in() {
        let tmp = tree(&["a/one.cu", "a/two.cu", "a/launch.cu"]);
        let dir = tmp.path();
        let toml = "[modules.loadable]\nsources = [\"a/one.cu\", \"a/two.cu\"]\nrdc = true\n\
                    [modules.linked]\nsources = [\"a/*.cu\"]\nrdc = true\nlink = \"static\"\n";
        let modules = resolve_text(dir, toml).unwrap();
        assert_eq!(
            summary(&modules, dir),
            [
                "linked Static rdc=true [a/launch.cu a/one.cu a/two.cu] []",
                "loadable Fatbin rdc=true [a/one.cu a/two.cu] []",
            ]
        );
    }

    #[test]
    fn mistakes_are_one_line_naming_the_entry_and_the_fix() {
        let tmp = tree(&["reduce.cu", "a/one.cu", "a/two.cu"]);
        let dir = tmp.path();
        let d = dir.display();
        let cases = [
            (
                "[modules.reduc]\nlink = \"static\"",
                format!("kiln.toml: [modules.reduc] matches no source: there is no reduc.cu in {d}; fix the name or list its files in `sources`"),
            ),
            (
                "[modules.m]\nsources = [\"b/*.cu\"]\nrdc = true",
                format!("kiln.toml: [modules.m] source pattern `b/*.cu` matches no file under {d}; fix the pattern or remove it"),
            ),
            (
                "[modules.m]\nsources = [\"a/three.cu\"]",
                format!("kiln.toml: [modules.m] source `a/three.cu` does not exist under {d}; fix the path or remove it"),
            ),
            (
                "[modules.m]\nsources = [\"../x.cu\"]",
                format!("kiln.toml: [modules.m] source `../x.cu` is not a relative path under {d}; write it relative to that dir, without `..`"),
            ),
            (
                "[modules.m]\nsources = [\"a/*.cu\"]",
                "kiln.toml: [modules.m] has 2 sources but a fat-binary module is one image; set `rdc = true` to device-link them, or give each its own module".to_string(),
            ),
            (
                "[modules.m]\nsources = [\"a/*.cu\"]\nrdc = true\n[modules.n]\nsources = [\"a/one.cu\"]",
                "kiln.toml: [modules.n] source `a/one.cu` also belongs to [modules.m], another fat-binary module; a source may be in one fat-binary module and one static library at most".to_string(),
            ),
            (
                "[modules.reduce]\nsources = [\"a/one.cu\"]",
                "kiln.toml: reduce.cu is a module of its own but [modules.reduce] does not list it in `sources`; add it there or rename one of them".to_string(),
            ),
            (
                "[modules.m]\nsources = [\"a/one.cu\"]\ninclude-dirs = [\"inc\"]",
                format!("kiln.toml: [modules.m] include dir `inc` does not exist under {d}; fix the path or remove it"),
            ),
            (
                "[modules.\"a b\"]\nsources = [\"a/one.cu\"]",
                "kiln.toml: [modules.\"a b\"] `a b` is not a usable module name: it must start with an ASCII letter or `_` and hold only letters, digits, `_` and `-`; rename the entry".to_string(),
            ),
        ];
        for (toml, expected) in cases {
            assert_eq!(resolve_text(dir, toml).unwrap_err(), expected, "{toml}");
        }
    }
}
