//! Kernels declared by their definitions in a crate's `.cu` sources
//! ([`Codegen::sources`](super::Codegen::sources)): the modules of
//! `kiln.toml` are resolved as a build resolves them, each source of a
//! fat-binary module (the images a typed launch loads) is read by
//! [`source_walk`](super::source_walk) with the module's defines and include
//! dirs, and the kernels are checked across sources: one definition read
//! through two modules is one kernel; two definitions of one symbol are an
//! error, as a typed launch finds its kernel by name.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use super::source_walk::{walk, Defined};
use crate::arch::Variant;
use crate::config::{self, KernelConfig, LinkMode};

/// The prelude of a source: the marks of the header path, then the CUDA
/// runtime's declarations nvcc includes into every `.cu` (`cudaStream_t`,
/// `dim3`, `cudaError_t`), when a toolkit is there.
pub(super) fn prelude(with_runtime: bool) -> String {
    let runtime = if with_runtime {
        "#include <cuda_runtime.h>\n"
    } else {
        ""
    };
    format!("{}{runtime}", super::PRELUDE)
}

/// A kernel a source defines, with the module that builds it.
#[derive(Debug, Clone)]
pub(super) struct SourceKernel {
    pub(super) defined: Defined,
    /// The defining file, relative to the kernels dir, `/`-separated.
    pub(super) shown: String,
}

/// What the sources give.
#[derive(Debug, Default)]
pub(super) struct Sources {
    pub(super) kernels: Vec<SourceKernel>,
    pub(super) warnings: Vec<String>,
    /// `(symbol, warning)` of each kernel of the images left without a
    /// marker: the generated file lists them for the audit.
    pub(super) refused: Vec<(String, String)>,
    /// `(symbol, archs)` of each kernel its module's device passes at
    /// `archs` (`sm_80`) left out (`#if __CUDA_ARCH__ >= 890`): the audit
    /// expects no code of it there.
    pub(super) absent_at: Vec<(String, Vec<String>)>,
    /// Every file read (the config, the sources, the headers they include
    /// outside the system headers and `ignore`), absolute.
    pub(super) files: BTreeSet<PathBuf>,
}

/// Reads the modules of `kernels_dir` and walks their sources; clang's
/// command line is `language`, the module's own flags and include dirs, then
/// `includes` (the build's include dirs, then the system ones); files under
/// `ignore` (kiln.h's dir) are not inputs of the fingerprint. The modules
/// are `config` (the build script's config file) or `kernels_dir/kiln.toml`;
/// with neither there, nothing says which modules a build makes (a tree
/// compiled into a static library would be read as fat binaries), so it is
/// refused.
pub(super) fn scan_sources(
    kernels_dir: &Path,
    config: Option<&Path>,
    language: &[String],
    includes: &[String],
    with_runtime: bool,
    ignore: &[PathBuf],
) -> Result<Sources, String> {
    let kernels_dir = kernels_dir
        .canonicalize()
        .map_err(|e| format!("kernels dir {}: {e}", kernels_dir.display()))?;
    let config_path = match config {
        Some(file) => file
            .canonicalize()
            .map_err(|e| format!("config file {}: {e}", file.display()))?,
        None => kernels_dir.join("kiln.toml"),
    };
    let mut sources = Sources::default();
    if !config::present(&config_path) {
        return Err(format!(
            "{} has no kiln.toml, so nothing says which modules a build makes of its sources; write one ([modules.NAME] entries, or none for a fat binary per top-level .cu), or name the config file the build script uses",
            kernels_dir.display()
        ));
    }
    sources.files.insert(config_path.clone());
    let config = KernelConfig::load(&config_path).map_err(|e| e.to_string())?;
    let modules =
        crate::modules::resolve(&config, &kernels_dir, &config_path).map_err(|e| e.to_string())?;
    let prelude = prelude(with_runtime);
    let ignore: Vec<PathBuf> = ignore
        .iter()
        .map(|d| d.canonicalize().unwrap_or_else(|_| d.clone()))
        .collect();
    // symbol -> the kernel kept: where, in which module, at which archs.
    let mut seen: BTreeMap<String, Seen> = BTreeMap::new();
    // module -> the archs its sources were read at.
    let mut passes: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for module in modules.iter().filter(|m| m.link == LinkMode::Fatbin) {
        for (arch, defines) in device_passes(module, &config) {
            passes
                .entry(module.name.clone())
                .or_default()
                .push(arch.clone());
            let mut module_args = language.to_vec();
            module_args.extend(defines);
            module_args.extend(module_flags(&module.flags));
            module_args.extend(
                module
                    .include_dirs
                    .iter()
                    .map(|d| format!("-I{}", d.display())),
            );
            module_args.extend(includes.iter().cloned());
            for source in &module.sources {
                let walked = walk_source(source, &prelude, &module_args, &module.name, &arch)
                    .map_err(|e| shorten(&e, &kernels_dir))?;
                for file in walked.files {
                    let file = file.canonicalize().unwrap_or(file);
                    if !ignore.iter().any(|d| file.starts_with(d)) {
                        sources.files.insert(file);
                    }
                }
                for warning in walked.warnings.iter().map(|w| shorten(w, &kernels_dir)) {
                    if !sources.warnings.contains(&warning) {
                        sources.warnings.push(warning);
                    }
                }
                for defined in walked.kernels {
                    let file = defined.file.canonicalize().unwrap_or(defined.file.clone());
                    let shown = relative(&file, &kernels_dir);
                    let site = format!("{shown}:{}", defined.line);
                    match seen.get_mut(&defined.symbol) {
                        // One source read through two modules or at two archs,
                        // or a source's prototype of its own kernel: one
                        // kernel, if the parameters agree.
                        Some(kept)
                            if kept.module == module.name
                                || (kept.file == file && kept.line == defined.line) =>
                        {
                            let first = &sources.kernels[kept.index].defined;
                            if first.params == defined.params && first.sizes == defined.sizes {
                                if !kept.archs.contains(&arch) {
                                    kept.archs.push(arch.clone());
                                }
                            } else if kept.differs.is_none() {
                                kept.differs = Some(format!("{arch} ({site})"));
                            }
                            continue;
                        }
                        Some(kept) => {
                            return Err(format!(
                                "kernel `{}` is defined twice: {}:{} ([modules.{}]) and {site} ([modules.{}]); a typed launch finds a kernel by name, so rename one",
                                defined.source_name,
                                relative(&kept.file, &kernels_dir),
                                kept.line,
                                kept.module,
                                module.name
                            ))
                        }
                        None => {}
                    }
                    seen.insert(
                        defined.symbol.clone(),
                        Seen {
                            file,
                            line: defined.line,
                            module: module.name.clone(),
                            index: sources.kernels.len(),
                            archs: vec![arch.clone()],
                            differs: None,
                        },
                    );
                    sources.kernels.push(SourceKernel { defined, shown });
                }
            }
        }
    }
    // A kernel whose parameters differ between archs has no one marker.
    let mut dropped = BTreeSet::new();
    for (symbol, kept) in &seen {
        let absent: Vec<String> = passes[&kept.module]
            .iter()
            .filter(|a| !a.is_empty() && !kept.archs.contains(a))
            .cloned()
            .collect();
        if !absent.is_empty() && kept.differs.is_none() {
            sources.absent_at.push((symbol.clone(), absent));
        }
        if let Some(other) = &kept.differs {
            let kernel = &sources.kernels[kept.index];
            let warning = format!(
                "{}:{}: kernel `{}` gets no typed launch: its parameters at {} differ from those at {other}, and a marker has one parameter list; give each variant its own name, or launch it by name",
                kernel.shown,
                kernel.defined.line,
                kernel.defined.source_name,
                kept.archs.join(", "),
            );
            sources.warnings.push(warning.clone());
            sources
                .refused
                .push((kernel.defined.symbol.clone(), warning));
            dropped.insert(kept.index);
        }
    }
    let mut index = 0;
    sources.kernels.retain(|_| {
        index += 1;
        !dropped.contains(&(index - 1))
    });
    Ok(sources)
}

/// Where one kernel was kept, and at which device passes it was read.
struct Seen {
    file: PathBuf,
    line: u32,
    module: String,
    /// Into `Sources::kernels`.
    index: usize,
    /// The device passes (`sm_80`) that read it with these parameters.
    archs: Vec<String>,
    /// The first pass that read other parameters for it, with the site.
    differs: Option<String>,
}

/// Walks one source at one device pass, after the checks on what libclang
/// reads; an error names the module and the pass.
fn walk_source(
    source: &Path,
    prelude: &str,
    args: &[String],
    module: &str,
    arch: &str,
) -> Result<super::source_walk::Walked, String> {
    super::inputs::check_include_graph(&[source.to_path_buf()], args)?;
    let trial = || super::source_walk::check_source(source, prelude, args);
    super::child::trial(&source.display().to_string(), trial)
        .and_then(|()| walk(source, prelude, args))
        .map_err(|e| {
            let pass = if arch.is_empty() {
                String::new()
            } else {
                format!(" (read as {arch})")
            };
            format!(
                "cannot read the kernels of [modules.{module}]{pass}: {e}; fix the source (codegen reads it as C++, with its module's defines and include dirs)"
            )
        })
}

/// One device pass per arch the module is built for, lowest first, each
/// `(sm_80, [-D__CUDA_ARCH__=800])`: clang reads the source as that arch's
/// device pass does, so every kernel of every image is seen, those candle-
/// style trees guard (`#if __CUDA_ARCH__ >= 890` around an fp8 family)
/// included; an `a` / `f` arch adds the feature macros nvcc defines for it
/// (sources that `#error` off their arch read as nvcc reads them). One pass
/// with no define where the spec names no arch (`native`) or does not parse
/// (the build reports that).
fn device_passes(
    module: &crate::modules::Module,
    config: &KernelConfig,
) -> Vec<(String, Vec<String>)> {
    let spec = module
        .archs
        .as_ref()
        .map_or(config.archs.as_str(), |(s, _)| s);
    let archs = crate::arch::ArchSpec::parse(spec, "kiln.toml")
        .map(|spec| spec.named())
        .unwrap_or_default();
    if archs.is_empty() {
        return vec![(String::new(), Vec::new())];
    }
    archs
        .into_iter()
        .map(|arch| (arch.sm_name(), arch_defines(arch)))
        .collect()
}

/// The macros nvcc defines in `arch`'s device pass.
fn arch_defines(arch: crate::arch::Arch) -> Vec<String> {
    let (number, value) = (arch.number(), arch.number() * 10);
    let mut defines = vec![format!("-D__CUDA_ARCH__={value}")];
    match arch.variant {
        Variant::Portable => {}
        Variant::ArchSpecific => defines.extend([
            format!("-D__CUDA_ARCH_FEAT_SM{number}_ALL"),
            format!("-D__CUDA_ARCH_SPECIFIC__={value}"),
        ]),
        Variant::Family => defines.push(format!("-D__CUDA_ARCH_FAMILY_SPECIFIC__={value}")),
    }
    defines
}

/// The flags of a module clang reads too: defines, undefines, include dirs
/// and the language standard (`-DX`, `-D X`, `-std=c++20`).
fn module_flags(flags: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    let mut iter = flags.iter().peekable();
    while let Some(flag) = iter.next() {
        match flag.as_str() {
            "-D" | "-U" | "-I" => {
                if let Some(value) = iter.next() {
                    out.push(format!("{flag}{value}"));
                }
            }
            f if f.starts_with("-D") || f.starts_with("-U") || f.starts_with("-I") => {
                out.push(f.to_string());
            }
            f if f.starts_with("-std=") => out.push(f.to_string()),
            f if f.starts_with("--std=") => out.push(f[1..].to_string()),
            _ => {}
        }
    }
    out
}

/// `path` relative to `base`, `/`-separated, with `..` where it is outside.
pub(super) fn relative(path: &Path, base: &Path) -> String {
    let path: Vec<_> = path.components().collect();
    let base: Vec<_> = base.components().collect();
    let common = path.iter().zip(&base).take_while(|(a, b)| a == b).count();
    let ups = std::iter::repeat_n("..".to_string(), base.len() - common);
    let downs = path[common..]
        .iter()
        .map(|c| c.as_os_str().to_string_lossy().into_owned());
    ups.chain(downs).collect::<Vec<_>>().join("/")
}

/// A message with the kernels dir's absolute path cut off its file names.
fn shorten(message: &str, kernels_dir: &Path) -> String {
    message.replace(&format!("{}/", kernels_dir.display()), "")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn module_flags_keep_what_changes_the_declarations() {
        let flags: Vec<String> = [
            "-O3",
            "-std=c++20",
            "-D",
            "A=1",
            "-DB",
            "-lineinfo",
            "-Iinc",
            "-U",
            "C",
        ]
        .map(String::from)
        .to_vec();
        assert_eq!(
            module_flags(&flags),
            ["-std=c++20", "-DA=1", "-DB", "-Iinc", "-UC"]
        );
        assert_eq!(module_flags(&["-D".to_string()]), Vec::<String>::new());
    }

    #[test]
    fn relative_paths_climb_out_of_the_base() {
        let base = Path::new("/ws/kernels/include");
        assert_eq!(relative(Path::new("/ws/kernels/a/b.cu"), base), "../a/b.cu");
        assert_eq!(relative(Path::new("/ws/kernels/include/x.h"), base), "x.h");
        assert_eq!(
            relative(Path::new("/other/y.cuh"), base),
            "../../../other/y.cuh"
        );
    }
}
