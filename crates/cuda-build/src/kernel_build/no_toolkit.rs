//! A build that found no toolkit: the prebuilt kernels when they pass every
//! check and fit the sources (embedded as a toolkit build's images would
//! be), else CPU-only with one warning naming why, or an error under
//! `<PREFIX>_REQUIRE_CUDA=1`.

use std::path::Path;

use super::{check_rdc_archs, Inputs, KernelBuild, Vars};
use crate::arch::SupportedArchs;
use crate::compile::{output_stamps, static_lib_name};
use crate::config::LinkMode;
use crate::cross::Platform;
use crate::emit;
use crate::error::{io, Error};
use crate::manifest::{Manifest, ModuleEntry, PrebuiltEntry};
use crate::modules::Module;
use crate::prebuilt::{self, Check, Naming, PrebuiltError, Verified, Wanted};
use crate::toolkit::{Discovery, ProcessEnv};

impl KernelBuild {
    /// No toolkit (and `<PREFIX>_REQUIRE_CUDA` off: the caller checked):
    /// one warning, saying why the prebuilt kernels were refused if they
    /// were, and a manifest of modules with nothing built. The specs are
    /// still checked, so a bad one fails on every machine.
    pub(super) fn cpu_only(
        &self,
        inputs: Inputs,
        discovery: Option<&Discovery>,
        stale: Option<PrebuiltError>,
        vars: &Vars,
        cargo: &mut Vec<String>,
    ) -> Result<Manifest, Error> {
        let looked_at = match discovery {
            Some(d) => d.looked_at(),
            None => format!("nowhere: {}=off", vars.switch),
        };
        let builtin = SupportedArchs::cuda_13_0_builtin();
        let archs = inputs
            .spec
            .resolve(&builtin, &inputs.origin, || Ok(Vec::new()))?;
        for (module, own) in inputs.modules.iter().zip(&inputs.specs) {
            let archs = match own {
                Some((spec, origin)) => spec.resolve(&builtin, origin, || Ok(Vec::new()))?,
                None => archs.clone(),
            };
            check_rdc_archs(module, &archs, &inputs.config_path)?;
        }
        let reason = match &stale {
            None => format!("no CUDA toolkit found (looked at {looked_at})"),
            Some(why) => format!(
                "prebuilt kernels refused ({why}) and no CUDA toolkit found (looked at {looked_at})"
            ),
        };
        cargo.push(format!(
            "cargo::warning={reason}; building CPU-only. For GPU code, {}",
            self.toolkit_hint
        ));
        Ok(Manifest {
            cpu_only_reason: Some(reason),
            modules: inputs.modules.iter().map(cpu_only_entry).collect(),
            ..Manifest::empty(inputs.spec.as_str(), inputs.origin)
        })
    }

    pub(super) fn naming<'a>(&'a self, base: &'a Path) -> Naming<'a> {
        Naming {
            base,
            include_dirs: &self.include_dirs,
        }
    }

    /// Whether the prebuilt kernels fit the modules as they are now.
    pub(super) fn check_prebuilt(&self, inputs: &Inputs) -> Result<Check, Error> {
        let base = io(Path::new("."), std::env::current_dir())?;
        let modules: Vec<Wanted> = inputs
            .modules
            .iter()
            .map(|m| Wanted {
                name: m.name.clone(),
                sources: m.sources.clone(),
                output: match m.link {
                    LinkMode::Fatbin => format!("{}.fatbin", m.name),
                    LinkMode::Static => {
                        format!("lib{}.a", static_lib_name(&self.lower_prefix(), &m.name))
                    }
                },
            })
            .collect();
        let check = prebuilt::check(&self.prebuilt_dir, &self.naming(&base), &modules);
        let platform = Platform::from_env(&ProcessEnv);
        Ok(match (check, cross_host_code(&platform, &inputs.modules)) {
            (Check::Matching(_), Some(refused)) => Check::Stale(refused),
            (check, _) => check,
        })
    }

    /// No toolkit, but prebuilt kernels that fit: the images checked
    /// written into the out dir and embedded as a toolkit build's would be,
    /// in one line.
    pub(super) fn embed_prebuilt(
        &self,
        inputs: Inputs,
        verified: &Verified,
        out_dir: &Path,
        cargo: &mut Vec<String>,
    ) -> Result<Manifest, Error> {
        let modules = verified.install(out_dir)?;
        // A toolkit build's stamps would vouch for these bytes next time.
        for stamp in modules
            .iter()
            .flat_map(|module| output_stamps(out_dir, &module.name))
        {
            match std::fs::remove_file(&stamp) {
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                other => io(&stamp, other)?,
            }
        }
        let prebuilt = &verified.prebuilt;
        let libraries: Vec<String> = modules
            .iter()
            .filter(|e| e.link == LinkMode::Static)
            .map(|e| static_lib_name(&self.lower_prefix(), &e.name))
            .collect();
        let relative = self
            .prebuilt_dir
            .strip_prefix(io(Path::new("."), std::env::current_dir())?)
            .unwrap_or(&self.prebuilt_dir)
            .to_path_buf();
        cargo.push(format!(
            "cargo::warning=prebuilt kernels: {} (from {}; no CUDA toolkit found)",
            prebuilt.summary(),
            relative.display()
        ));
        let manifest = Manifest {
            cuda_enabled: true,
            sass: prebuilt.sass.clone(),
            ptx: prebuilt.ptx.clone(),
            modules,
            prebuilt: Some(PrebuiltEntry {
                dir: relative,
                toolkit: prebuilt.toolkit.clone(),
            }),
            ..Manifest::empty(inputs.spec.as_str(), inputs.origin)
        };
        cargo.extend(emit::link_directives(
            &manifest, &libraries, out_dir, out_dir,
        ));
        Ok(manifest)
    }
}

/// A module's entry in a CPU-only build: nothing built.
fn cpu_only_entry(module: &Module) -> ModuleEntry {
    ModuleEntry {
        name: module.name.clone(),
        source: module.sources[0].clone(),
        sources: module.sources.clone(),
        link: module.link,
        rdc: module.rdc,
        sass: Vec::new(),
        ptx: Vec::new(),
        output: None,
        size_bytes: 0,
        compiled: false,
        compile_ms: None,
        cache_hits: 0,
        deps: Vec::new(),
        kernels: Vec::new(),
        warnings: Vec::new(),
    }
}

/// Fat binaries fit any target; a prebuilt static library only the machine
/// that wrote it, which the folder does not record: refused in a cross build.
fn cross_host_code(platform: &Platform, modules: &[Module]) -> Option<PrebuiltError> {
    let module = modules.iter().find(|m| m.link == LinkMode::Static)?;
    platform.is_cross().then(|| PrebuiltError::CrossHostCode {
        module: module.name.clone(),
        target: platform.target.clone(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cross_build_refuses_prebuilt_static_libraries_not_fat_binaries() {
        let module = |name: &str, link| Module {
            name: name.into(),
            sources: vec![format!("{name}.cu").into()],
            flags: Vec::new(),
            include_dirs: Vec::new(),
            archs: None,
            link,
            rdc: false,
        };
        let platform = |target: &str| Platform {
            target: target.into(),
            host: "x86_64-unknown-linux-gnu".into(),
        };
        let arm = platform("aarch64-unknown-linux-gnu");
        let fat = [module("saxpy", LinkMode::Fatbin)];
        let both = [
            module("saxpy", LinkMode::Fatbin),
            module("reduce", LinkMode::Static),
        ];
        assert!(cross_host_code(&arm, &fat).is_none());
        assert!(cross_host_code(&platform("x86_64-unknown-linux-gnu"), &both).is_none());
        let refused = cross_host_code(&arm, &both).unwrap().to_string();
        assert_eq!(
            refused,
            "module `reduce` is a prebuilt static library (host code) and this is a cross build \
             for aarch64-unknown-linux-gnu; build it with a CUDA toolkit and the target's runtime \
             (`cargo kiln toolkit install --target aarch64-unknown-linux-gnu`)"
        );
    }
}
