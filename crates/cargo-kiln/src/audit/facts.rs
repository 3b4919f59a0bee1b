//! The thin layer that runs cuobjdump: reads one fat binary (or static
//! library) into [`ModuleFacts`] for the pure checks, and a build manifest
//! into the facts of every module.

use std::path::Path;
use std::process::Command;

use anyhow::{bail, Context, Result};
use cuda_build::config::LinkMode;
use cuda_build::resources::KernelResources;
use cuda_build::Manifest;

use super::model::{ModuleFacts, Requested};
use super::ptx::{parse_ptx, split_ptx_dump};
use super::sass::parse_resource_usage;

/// `cuobjdump FLAG file`'s stdout.
fn cuobjdump(tool: &Path, flag: &str, file: &Path) -> Result<String> {
    let out = Command::new(tool)
        .arg(flag)
        .arg(file)
        .output()
        .with_context(|| format!("cannot run {}", tool.display()))?;
    if !out.status.success() {
        bail!(
            "cuobjdump {flag} {} failed ({}): {}; rebuild the crate",
            file.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Reads one module's binary with `--dump-resource-usage` and `--dump-ptx`.
/// `ptxas` is the build's ptxas report for it (spill counts).
pub(crate) fn read_module(
    tool: &Path,
    name: &str,
    is_static: bool,
    file: &Path,
    ptxas: Vec<KernelResources>,
) -> Result<ModuleFacts> {
    let sass = parse_resource_usage(&cuobjdump(tool, "--dump-resource-usage", file)?);
    let mut ptx = Vec::new();
    let mut ptx_members = std::collections::BTreeSet::new();
    for section in split_ptx_dump(&cuobjdump(tool, "--dump-ptx", file)?) {
        let module = parse_ptx(&section.text)
            .map_err(|e| anyhow::anyhow!("cannot read the {} PTX of {name}: {e}", section.arch))?;
        ptx_members.insert(section.member);
        ptx.push((section.arch, module));
    }
    Ok(ModuleFacts {
        name: name.to_string(),
        is_static,
        ptx,
        sass,
        ptx_members,
        ptxas,
        own_archs: None,
    })
}

/// The archs a manifest's build was asked for.
pub(crate) fn requested(manifest: &Manifest) -> Requested {
    Requested {
        spec: manifest.arch_spec.clone(),
        origin: manifest.arch_origin.clone(),
        sass: manifest.sass.clone(),
        ptx: manifest.ptx.clone(),
    }
}

/// Facts of every module of a GPU build.
pub(crate) fn read_manifest(tool: &Path, manifest: &Manifest) -> Result<Vec<ModuleFacts>> {
    if !manifest.cuda_enabled {
        bail!(
            "the build made no GPU code ({}); install a CUDA toolkit (`cargo kiln toolkit install`) or set CUDA_PATH",
            manifest.cpu_only_reason.as_deref().unwrap_or("no toolkit")
        );
    }
    manifest
        .modules
        .iter()
        .map(|m| {
            let file = m.output.as_deref().with_context(|| {
                format!(
                    "the manifest lists no output for module {}; rebuild",
                    m.name
                )
            })?;
            let mut facts = read_module(
                tool,
                &m.name,
                m.link == LinkMode::Static,
                file,
                m.kernels.clone(),
            )?;
            if (&m.sass, &m.ptx) != (&manifest.sass, &manifest.ptx) {
                let why = if m.rdc && m.ptx.is_empty() {
                    "rdc: the device link keeps SASS only"
                } else {
                    "its own archs in kiln.toml"
                };
                facts.own_archs = Some(Requested {
                    spec: m
                        .sass
                        .iter()
                        .chain(&m.ptx)
                        .cloned()
                        .collect::<Vec<_>>()
                        .join(","),
                    origin: format!("module {} ({why})", m.name),
                    sass: m.sass.clone(),
                    ptx: m.ptx.clone(),
                });
            }
            Ok(facts)
        })
        .collect()
}
