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
    /// Every file read (the config, the sources, the headers they include
    /// outside the system headers and `ignore`), absolute.
    pub(super) files: BTreeSet<PathBuf>,
}

/// Reads the modules of `kernels_dir` and walks their sources; clang's
/// command line is `language`, the module's own flags and include dirs, then
/// `includes` (the build's include dirs, then the system ones); files under
/// `ignore` (kiln.h's dir) are not inputs of the fingerprint.
pub(super) fn scan_sources(
    kernels_dir: &Path,
    language: &[String],
    includes: &[String],
    with_runtime: bool,
    ignore: &[PathBuf],
) -> Result<Sources, String> {
    let kernels_dir = kernels_dir
        .canonicalize()
        .map_err(|e| format!("kernels dir {}: {e}", kernels_dir.display()))?;
    let config_path = kernels_dir.join("kiln.toml");
    let mut sources = Sources::default();
    let config = if config::present(&config_path) {
        sources.files.insert(config_path.clone());
        KernelConfig::load(&config_path).map_err(|e| e.to_string())?
    } else {
        KernelConfig::default()
    };
    let modules =
        crate::modules::resolve(&config, &kernels_dir, &config_path).map_err(|e| e.to_string())?;
    let prelude = prelude(with_runtime);
    let ignore: Vec<PathBuf> = ignore
        .iter()
        .map(|d| d.canonicalize().unwrap_or_else(|_| d.clone()))
        .collect();
    // symbol -> (definition site, module) of the kernel kept.
    let mut seen: BTreeMap<String, (PathBuf, u32, String)> = BTreeMap::new();
    for module in modules.iter().filter(|m| m.link == LinkMode::Fatbin) {
        let mut module_args = language.to_vec();
        module_args.extend(device_arch_defines(module, &config));
        module_args.extend(module_flags(&module.flags));
        module_args.extend(
            module
                .include_dirs
                .iter()
                .map(|d| format!("-I{}", d.display())),
        );
        module_args.extend(includes.iter().cloned());
        for source in &module.sources {
            super::inputs::check_include_graph(std::slice::from_ref(source), &module_args)
                .map_err(|e| shorten(&e, &kernels_dir))?;
            let trial = || super::source_walk::check_source(source, &prelude, &module_args);
            let walked = super::child::trial(&source.display().to_string(), trial)
                .and_then(|()| walk(source, &prelude, &module_args))
                .map_err(|e| {
                format!(
                    "cannot read the kernels of [modules.{}]: {}; fix the source (codegen reads it as C++, with its module's defines and include dirs)",
                    module.name,
                    shorten(&e, &kernels_dir)
                )
            })?;
            for file in walked.files {
                let file = file.canonicalize().unwrap_or(file);
                if !ignore.iter().any(|d| file.starts_with(d)) {
                    sources.files.insert(file);
                }
            }
            sources
                .warnings
                .extend(walked.warnings.iter().map(|w| shorten(w, &kernels_dir)));
            for defined in walked.kernels {
                let file = defined.file.canonicalize().unwrap_or(defined.file.clone());
                let shown = relative(&file, &kernels_dir);
                match seen.get(&defined.symbol) {
                    // One source read through two modules, or a source's
                    // prototype of its own kernel.
                    Some((f, l, _)) if *f == file && *l == defined.line => continue,
                    Some((_, _, other)) if *other == module.name => continue,
                    Some((f, l, other)) => {
                        return Err(format!(
                            "kernel `{}` is defined twice: {}:{l} ([modules.{other}]) and {shown}:{} ([modules.{}]); a typed launch finds a kernel by name, so rename one",
                            defined.source_name,
                            relative(f, &kernels_dir),
                            defined.line,
                            module.name
                        ))
                    }
                    None => {}
                }
                seen.insert(
                    defined.symbol.clone(),
                    (file, defined.line, module.name.clone()),
                );
                sources.kernels.push(SourceKernel { defined, shown });
            }
        }
    }
    Ok(sources)
}

/// `-D__CUDA_ARCH__=800` for a module built for sm_80 and up: clang reads
/// the source as the device pass of the module's lowest arch does, so the
/// kernels candle-style trees guard (`#if __CUDA_ARCH__ >= 530` around the
/// `__half` family) are declared, as every image of the module holds them;
/// an `a` / `f` arch adds the feature macros nvcc defines for it (sources
/// that `#error` off their arch read as nvcc reads them). None where the
/// spec names no arch (`native`) or does not parse (the build reports that).
fn device_arch_defines(module: &crate::modules::Module, config: &KernelConfig) -> Vec<String> {
    let spec = module
        .archs
        .as_ref()
        .map_or(config.archs.as_str(), |(s, _)| s);
    let Some(lowest) = crate::arch::ArchSpec::parse(spec, "kiln.toml")
        .ok()
        .and_then(|spec| spec.lowest_named())
    else {
        return Vec::new();
    };
    let (number, arch) = (lowest.number(), lowest.number() * 10);
    let mut defines = vec![format!("-D__CUDA_ARCH__={arch}")];
    match lowest.variant {
        Variant::Portable => {}
        Variant::ArchSpecific => defines.extend([
            format!("-D__CUDA_ARCH_FEAT_SM{number}_ALL"),
            format!("-D__CUDA_ARCH_SPECIFIC__={arch}"),
        ]),
        Variant::Family => defines.push(format!("-D__CUDA_ARCH_FAMILY_SPECIFIC__={arch}")),
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
