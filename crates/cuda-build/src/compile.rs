//! Bringing one module up to date: its plan (one nvcc compile per source,
//! then the device link and/or the static library), stamps that say whether
//! an output is still right (the command line, and no source or included
//! header newer than the output), and nvcc's failures turned into errors
//! whose first line is the first diagnostic.
//!
//! Every step proves its output: nvcc writes into a temp dir made for that
//! step, so a step that exits 0 without writing (a broken launcher, a flag
//! such as `--version`) fails instead of leaving an older output in place;
//! a fat binary is checked to hold the archs the generated module will
//! declare before it is moved into place or stored, and a cache hit or an
//! up-to-date output that does not is built again.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Instant;

use crate::arch::ArchList;
use crate::cache::{self, Cache, Hit};
use crate::config::LinkMode;
use crate::depfile;
use crate::error::{io, Error};
use crate::manifest::ModuleEntry;
use crate::modules::Module;
use crate::nvcc::{library_args, shell_line, CompileCommand, CompileMode, DeviceLinkCommand, Nvcc};
use crate::resources::{parse_nvlink_output, parse_ptxas_output};

mod step;

use crate::toolkit::Toolkit;
use step::{Expect, Step};

/// What every module of a build shares.
#[derive(Debug)]
pub(crate) struct Context<'a> {
    pub(crate) nvcc: &'a Nvcc,
    pub(crate) toolkit: &'a Toolkit,
    pub(crate) out_dir: &'a Path,
    pub(crate) kernels_dir: &'a Path,
    /// The build's own `-I` dirs, after each module's.
    pub(crate) include_dirs: &'a [PathBuf],
    /// Static libraries are `lib<prefix>_<module>.a`.
    pub(crate) lib_prefix: &'a str,
    /// The crate's root: nvcc runs there, is given the crate's files
    /// relative to it, and diagnostics name files relative to it.
    pub(crate) base: &'a Path,
    /// The kernel cache, unless it is off.
    pub(crate) cache: Option<&'a Cache>,
}

/// One source's compile: its command and the files beside its output.
#[derive(Debug)]
pub(crate) struct Unit {
    pub(crate) module: String,
    source: PathBuf,
    output: PathBuf,
    depfile: PathBuf,
    stamp: PathBuf,
    log: PathBuf,
    args: Vec<OsString>,
    expect: Expect,
}

/// What a unit's compile left: its dependencies, nvcc's output, and how
/// long it took when it ran.
#[derive(Debug)]
pub(crate) struct UnitResult {
    pub(crate) deps: Vec<PathBuf>,
    pub(crate) log: String,
    pub(crate) ms: Option<u64>,
    /// Whether its output was written by this build (compiled, or restored
    /// from the cache).
    pub(crate) written: bool,
}

/// A module's units, link steps and output.
#[derive(Debug)]
pub(crate) struct ModulePlan {
    pub(crate) module: Module,
    pub(crate) archs: ArchList,
    pub(crate) units: Vec<Unit>,
    /// Each step's output, arguments and input objects.
    link_steps: Vec<LinkStep>,
    link_stamp: PathBuf,
    link_log: PathBuf,
    /// The stamp of the module's other shape (one-call fat binary or linked
    /// objects), which writes the same output: removed when this shape
    /// writes it, so that switching back cannot reuse an output it did not
    /// make.
    other_stamp: PathBuf,
    pub(crate) output: PathBuf,
}

/// The static library's name for `module` (`kiln_reduce`).
pub(crate) fn static_lib_name(prefix: &str, module: &str) -> String {
    format!("{prefix}_{module}").replace('-', "_")
}

/// A link step: its output, its arguments, the objects it reads and what
/// its output must hold.
#[derive(Debug)]
struct LinkStep {
    output: PathBuf,
    args: Vec<OsString>,
    inputs: Vec<PathBuf>,
    expect: Expect,
}

/// How nvcc's command line names a source: relative to the crate's root
/// when it lies under it, with `./` in front of a name nvcc would read as
/// an option (`-x.cu` in a crate whose kernels dir is its root).
fn source_argument(source: &Path, base: &Path) -> PathBuf {
    let name = depfile::relative_to(source, base);
    if name.as_os_str().as_encoded_bytes().starts_with(b"-") {
        Path::new(".").join(name)
    } else {
        name
    }
}

/// What every unit of one module shares.
struct Units<'a> {
    cx: &'a Context<'a>,
    module: &'a Module,
    archs: &'a ArchList,
    /// The module's own `-I` dirs, then the build's (those of the crate
    /// relative to its root).
    include_dirs: Vec<PathBuf>,
}

impl Units<'_> {
    /// The compile of `source` into `stem.ext`, beside `stem.d`, `stem.stamp`
    /// and `stem.log`. Host code of a static library is position-independent.
    fn unit(&self, source: &Path, stem: PathBuf, ext: &str, mode: CompileMode) -> Unit {
        let file = |e: &str| PathBuf::from(format!("{}.{e}", stem.display()));
        let (output, depfile) = (file(ext), file("d"));
        // nvcc runs in the crate's root and is given the crate's files
        // relative to it: the command line, the depfile and the diagnostics
        // are the same wherever the crate lies (see `cache.rs`).
        let source_arg = source_argument(source, self.cx.base);
        let args = CompileCommand {
            nvcc: self.cx.nvcc,
            mode,
            source: &source_arg,
            output: &output,
            depfile: &depfile,
            include_dirs: &self.include_dirs,
            archs: self.archs,
            flags: &self.module.flags,
            pic: self.module.link == LinkMode::Static,
        }
        .args();
        let expect = match mode {
            CompileMode::Fatbin => Expect::fatbin(&self.archs.sass, &self.archs.ptx),
            CompileMode::Object | CompileMode::Relocatable => Expect::default(),
        };
        Unit {
            expect,
            module: self.module.name.clone(),
            source: source.to_path_buf(),
            stamp: file("stamp"),
            log: file("log"),
            output,
            depfile,
            args,
        }
    }
}

/// The steps after the compiles, each with its output, and the module's
/// output: a device link into a fat binary; or, for a static library, the
/// device link of `rdc` objects into `dlink.o`, then `nvcc -lib`.
fn link_steps(
    module: &Module,
    archs: &ArchList,
    mut objects: Vec<PathBuf>,
    objs: &Path,
    cx: &Context<'_>,
) -> (Vec<LinkStep>, PathBuf) {
    let device_link = |output: &Path, fatbin: bool, objects: &[PathBuf]| {
        DeviceLinkCommand {
            nvcc: cx.nvcc,
            objects,
            output,
            archs,
            fatbin,
        }
        .args()
    };
    let mut steps = Vec::new();
    match module.link {
        LinkMode::Fatbin => {
            let output = cx.out_dir.join(format!("{}.fatbin", module.name));
            steps.push(LinkStep {
                output: output.clone(),
                args: device_link(&output, true, &objects),
                inputs: objects,
                // The device link keeps SASS only.
                expect: Expect::fatbin(&archs.sass, &[]),
            });
            (steps, output)
        }
        LinkMode::Static => {
            if module.rdc {
                let dlink = objs.join("dlink.o");
                steps.push(LinkStep {
                    output: dlink.clone(),
                    args: device_link(&dlink, false, &objects),
                    inputs: objects.clone(),
                    expect: Expect::default(),
                });
                objects.push(dlink);
            }
            let lib_name = static_lib_name(cx.lib_prefix, &module.name);
            let output = cx.out_dir.join(format!("lib{lib_name}.a"));
            steps.push(LinkStep {
                args: library_args(&objects, &output),
                output: output.clone(),
                inputs: objects,
                expect: Expect::default(),
            });
            (steps, output)
        }
    }
}

/// Every stamp that can say module `name`'s output in `out` is up to date:
/// the one-call compile's (`NAME.stamp`), and the links' (`NAME.link.stamp`,
/// `NAME.objs/link.stamp`). Whoever writes that output other than by
/// compiling it (the prebuilt kernels) removes them, so the next toolkit
/// build compiles again instead of keeping bytes it did not make.
pub(crate) fn output_stamps(out: &Path, name: &str) -> [PathBuf; 3] {
    [
        out.join(format!("{name}.stamp")),
        out.join(format!("{name}.link.stamp")),
        out.join(format!("{name}.objs")).join("link.stamp"),
    ]
}

impl ModulePlan {
    /// A module compiled in one nvcc call to one fat binary keeps today's
    /// file names (`NAME.fatbin`, `NAME.d`, `NAME.stamp`); every other shape
    /// compiles each source into `NAME.objs/` and links.
    pub(crate) fn new(module: Module, archs: ArchList, cx: &Context<'_>) -> Self {
        let (out, name) = (cx.out_dir, module.name.clone());
        let objs = out.join(format!("{name}.objs"));
        let include_dirs = module
            .include_dirs
            .iter()
            .chain(cx.include_dirs)
            .map(|dir| depfile::relative_to(dir, cx.base))
            .collect();
        let units = Units {
            cx,
            module: &module,
            archs: &archs,
            include_dirs,
        };
        if module.sources.len() == 1 && !module.rdc && module.link == LinkMode::Fatbin {
            let unit = units.unit(
                &module.sources[0],
                out.join(&name),
                "fatbin",
                CompileMode::Fatbin,
            );
            let output = unit.output.clone();
            return Self {
                units: vec![unit],
                link_steps: Vec::new(),
                link_stamp: out.join(format!("{name}.link.stamp")),
                link_log: out.join(format!("{name}.link.log")),
                other_stamp: objs.join("link.stamp"),
                output,
                module,
                archs,
            };
        }
        let mode = if module.rdc {
            CompileMode::Relocatable
        } else {
            CompileMode::Object
        };
        let units: Vec<Unit> = module
            .sources
            .iter()
            .map(|source| {
                let relative = source.strip_prefix(cx.kernels_dir).unwrap_or(source);
                let key = relative.display().to_string().replace(['/', '\\'], "__");
                units.unit(source, objs.join(key), "o", mode)
            })
            .collect();
        let objects: Vec<PathBuf> = units.iter().map(|u| u.output.clone()).collect();
        let (link_steps, output) = link_steps(&module, &archs, objects, &objs, cx);
        Self {
            units,
            link_steps,
            link_stamp: objs.join("link.stamp"),
            link_log: objs.join("link.log"),
            other_stamp: out.join(format!("{name}.stamp")),
            output,
            module,
            archs,
        }
    }

    /// Device-links and archives when a unit was compiled, the output is
    /// missing or the link commands changed; then the manifest entry.
    pub(crate) fn finish(
        &self,
        results: Vec<UnitResult>,
        cx: &Context<'_>,
    ) -> Result<ModuleEntry, Error> {
        let fingerprint = self.link_fingerprint(cx);
        let compiled_any = results.iter().any(|r| r.written);
        let up_to_date = !compiled_any
            && self.output.is_file()
            && std::fs::read_to_string(&self.link_stamp).is_ok_and(|s| s == fingerprint)
            && self
                .link_steps
                .iter()
                .all(|step| step.expect.holds(&step.output));
        let started = Instant::now();
        let mut link_log = String::new();
        let mut linked = false;
        let mut ran_nvcc = false;
        if !self.link_steps.is_empty() && !up_to_date {
            let _ = std::fs::remove_file(&self.link_stamp);
            for step in &self.link_steps {
                let (log, ran) = link_step(cx, &self.module.name, step)?;
                link_log.push_str(&log);
                ran_nvcc |= ran;
            }
            io(&self.link_log, std::fs::write(&self.link_log, &link_log))?;
            io(
                &self.link_stamp,
                std::fs::write(&self.link_stamp, &fingerprint),
            )?;
            linked = true;
        } else if !self.link_steps.is_empty() {
            link_log = std::fs::read_to_string(&self.link_log).unwrap_or_default();
        }
        if linked || (self.link_steps.is_empty() && compiled_any) {
            let _ = std::fs::remove_file(&self.other_stamp);
        }
        let link_ms = ran_nvcc.then(|| elapsed_ms(started));
        let ms = results
            .iter()
            .filter_map(|r| r.ms)
            .chain(link_ms)
            .reduce(|a, b| a.saturating_add(b));
        let mut deps: Vec<PathBuf> = Vec::new();
        for dep in results.iter().flat_map(|r| &r.deps) {
            if !deps.contains(dep) && !self.module.sources.contains(dep) {
                deps.push(dep.clone());
            }
        }
        let kernels = match (self.module.link, self.link_steps.is_empty()) {
            (LinkMode::Static, _) => Vec::new(),
            (LinkMode::Fatbin, true) => parse_ptxas_output(&results[0].log),
            (LinkMode::Fatbin, false) => {
                let single = self
                    .archs
                    .sass
                    .first()
                    .map(|a| a.sm_name())
                    .unwrap_or_default();
                parse_nvlink_output(&link_log, &single)
            }
        };
        // The device link keeps SASS only.
        let ptx = if self.module.rdc {
            Vec::new()
        } else {
            self.archs.ptx.clone()
        };
        Ok(ModuleEntry {
            name: self.module.name.clone(),
            source: self.module.sources[0].clone(),
            sources: self.module.sources.clone(),
            link: self.module.link,
            rdc: self.module.rdc,
            sass: self.archs.sass.iter().map(|a| a.sm_name()).collect(),
            ptx: ptx.iter().map(|a| a.compute_name()).collect(),
            size_bytes: std::fs::metadata(&self.output)
                .map(|m| m.len())
                .unwrap_or(0),
            output: Some(self.output.clone()),
            compiled: ms.is_some(),
            compile_ms: ms,
            cache_hits: results
                .iter()
                .filter(|r| r.written && r.ms.is_none())
                .count(),
            deps,
            kernels,
            warnings: nvcc_warnings(
                results
                    .iter()
                    .filter(|r| r.written)
                    .map(|r| r.log.as_str())
                    .chain(linked.then_some(link_log.as_str())),
            ),
        })
    }

    fn link_fingerprint(&self, cx: &Context<'_>) -> String {
        let lines: Vec<String> = self
            .link_steps
            .iter()
            .map(|step| shell_line(&cx.nvcc.program, &step.args))
            .collect();
        format!("{} {}", cx.toolkit.version, lines.join("\n"))
    }
}

impl Unit {
    /// The command line (without the launcher, which does not change the
    /// output), the toolkit version and the crate's root: what an existing
    /// output was made by. The root, because the command line names the
    /// crate's files relative to it: a second checkout building in the same
    /// target dir (Cargo gives it the same OUT_DIR) must not take the first
    /// one's output and the headers its stamp lists; it goes to the cache.
    fn fingerprint(&self, cx: &Context<'_>) -> String {
        format!(
            "{} {} in {}",
            cx.toolkit.version,
            shell_line(&cx.nvcc.program, &self.args),
            cx.base.display()
        )
    }

    /// Reuses the output when it is up to date, else compiles.
    pub(crate) fn bring_up_to_date(&self, cx: &Context<'_>) -> Result<UnitResult, Error> {
        if let Some(result) = self.reuse(cx) {
            return Ok(result);
        }
        if let Some(cache) = cx.cache {
            let accept = |bytes: &[u8]| self.expect.check(bytes).is_ok();
            if let Some(hit) = cache.lookup_compile(&self.args, &self.source, accept) {
                return self.restore(cx, hit);
            }
        }
        self.compile(cx)
    }

    /// Writes a cached compile's output, log and stamp, as if nvcc had run.
    fn restore(&self, cx: &Context<'_>, hit: Hit) -> Result<UnitResult, Error> {
        if let Some(dir) = self.output.parent() {
            io(dir, std::fs::create_dir_all(dir))?;
        }
        io(
            &self.output,
            cache::write_atomically(&self.output, &hit.output),
        )?;
        io(&self.log, std::fs::write(&self.log, &hit.log))?;
        let deps = self.project_deps(cx, hit.deps);
        self.write_stamp(cx, &deps)?;
        Ok(UnitResult {
            deps,
            log: hit.log,
            ms: None,
            written: true,
        })
    }

    /// The dependencies worth watching: not the source, not the system's or
    /// the toolkit's headers.
    fn project_deps(&self, cx: &Context<'_>, all: Vec<PathBuf>) -> Vec<PathBuf> {
        all.into_iter()
            .filter(|d| *d != self.source && !depfile::is_system_header(d, &cx.toolkit.root))
            .collect()
    }

    fn write_stamp(&self, cx: &Context<'_>, deps: &[PathBuf]) -> Result<(), Error> {
        let stamp: String = std::iter::once(self.fingerprint(cx))
            .chain(deps.iter().map(|d| d.display().to_string()))
            .collect::<Vec<_>>()
            .join("\n");
        io(&self.stamp, std::fs::write(&self.stamp, stamp))
    }

    fn reuse(&self, cx: &Context<'_>) -> Option<UnitResult> {
        let stamp = std::fs::read_to_string(&self.stamp).ok()?;
        let (fingerprint, deps) = stamp.split_once('\n').unwrap_or((&stamp, ""));
        if fingerprint != self.fingerprint(cx) {
            return None;
        }
        let built = std::fs::metadata(&self.output)
            .and_then(|m| m.modified())
            .ok()?;
        let deps: Vec<PathBuf> = deps.lines().map(PathBuf::from).collect();
        let newer = |p: &Path| {
            std::fs::metadata(p)
                .and_then(|m| m.modified())
                .map_or(true, |t| t > built)
        };
        if newer(&self.source) || deps.iter().any(|d| newer(d)) || !self.expect.holds(&self.output)
        {
            return None;
        }
        let log = std::fs::read_to_string(&self.log).unwrap_or_default();
        Some(UnitResult {
            deps,
            log,
            ms: None,
            written: false,
        })
    }

    fn compile(&self, cx: &Context<'_>) -> Result<UnitResult, Error> {
        // A stale stamp must not survive a failed compile.
        let _ = std::fs::remove_file(&self.stamp);
        if let Some(dir) = self.output.parent() {
            io(dir, std::fs::create_dir_all(dir))?;
        }
        let started = Instant::now();
        let step = Step {
            module: &self.module,
            args: &self.args,
            outputs: &[&self.output, &self.depfile],
            expect: &self.expect,
            launcher: true,
        };
        let (log, bytes) = step.run(cx)?;
        let ms = elapsed_ms(started);
        let text = io(&self.depfile, std::fs::read_to_string(&self.depfile))?;
        let all: Vec<PathBuf> = depfile::parse(&text, cx.base)
            .into_iter()
            .map(|d| depfile::normalize(&d))
            .collect();
        io(&self.log, std::fs::write(&self.log, &log))?;
        if let Some(cache) = cx.cache {
            cache.store_compile(&self.args, &self.source, &all, &bytes, &log);
        }
        let deps = self.project_deps(cx, all);
        self.write_stamp(cx, &deps)?;
        Ok(UnitResult {
            deps,
            log,
            ms: Some(ms),
            written: true,
        })
    }
}

/// The warning lines of nvcc's output (`x.cu(12): warning #177-D: ...`,
/// `ptxas warning : ...`, `nvlink warning : ...`, the host compiler's
/// `warning:`), each once, in order.
fn nvcc_warnings<'a>(logs: impl Iterator<Item = &'a str>) -> Vec<String> {
    let mut warnings: Vec<String> = Vec::new();
    for line in logs.flat_map(str::lines) {
        let line = line.trim();
        let is_warning = line.contains(": warning")
            || line.contains("warning #")
            || line.starts_with("ptxas warning")
            || line.starts_with("nvlink warning")
            || line.starts_with("warning:");
        if is_warning && !warnings.iter().any(|w| w == line) {
            warnings.push(line.to_string());
        }
    }
    warnings
}

/// One link step, from the cache when the same command linked the same
/// objects before; returns what it printed and whether nvcc ran.
fn link_step(cx: &Context<'_>, module: &str, step: &LinkStep) -> Result<(String, bool), Error> {
    let accept = |bytes: &[u8]| step.expect.check(bytes).is_ok();
    if let Some((bytes, log)) = cx
        .cache
        .and_then(|c| c.lookup_link(&step.args, &step.inputs, accept))
    {
        io(&step.output, cache::write_atomically(&step.output, &bytes))?;
        return Ok((log, false));
    }
    let (log, bytes) = Step {
        module,
        args: &step.args,
        outputs: &[&step.output],
        expect: &step.expect,
        launcher: false,
    }
    .run(cx)?;
    if let Some(cache) = cx.cache {
        cache.store_link(&step.args, &step.inputs, &bytes, &log);
    }
    Ok((log, true))
}

fn elapsed_ms(since: Instant) -> u64 {
    u64::try_from(since.elapsed().as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::{nvcc_warnings, source_argument};
    use std::path::Path;

    #[test]
    fn sources_are_named_relative_to_the_crate_and_never_as_an_option() {
        let base = Path::new("/w/crate");
        let check = |source: &str, expected: &str| {
            assert_eq!(
                source_argument(Path::new(source), base),
                Path::new(expected)
            );
        };
        check("/w/crate/kernels/a.cu", "kernels/a.cu");
        check("/w/crate/-x.cu", "./-x.cu");
        check("/w/crate/kernels/-x.cu", "kernels/-x.cu");
        check("/elsewhere/-x.cu", "/elsewhere/-x.cu");
    }

    #[test]
    fn nvcc_warnings_are_its_warning_lines_each_once() {
        let cicc = "k.cu(3): warning #177-D: variable \"unused\" was declared but never referenced\n\
                    \nRemark: The warnings can be suppressed with \"-diag-suppress <warning-number>\"\n";
        let ptxas = "ptxas info    : Used 8 registers\n\
                     ptxas warning : Stack size for entry function cannot be statically determined\n";
        let host =
            "k.cu: In function 'f':\nk.cu:9:1: warning: unused variable 'y' [-Wunused-variable]\n";
        let warnings = nvcc_warnings([cicc, ptxas, host, cicc].into_iter());
        assert_eq!(
            warnings,
            [
                "k.cu(3): warning #177-D: variable \"unused\" was declared but never referenced",
                "ptxas warning : Stack size for entry function cannot be statically determined",
                "k.cu:9:1: warning: unused variable 'y' [-Wunused-variable]",
            ]
        );
        assert!(nvcc_warnings(["ptxas info : Used 8 registers\n"].into_iter()).is_empty());
    }
}
