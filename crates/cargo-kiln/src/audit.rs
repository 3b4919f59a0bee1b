//! The PTX/SASS audit (`cargo kiln audit`, and `cargo xtask ptx-audit` for
//! kiln's own kernels): proves from the fat binaries alone (no GPU) that
//! every kernel exists for every arch asked for, fits the crate's budgets
//! (`kiln-audit.toml`), has PTX the oldest supported driver can JIT, holds
//! no accidental f64, and matches its Rust declaration (read from the
//! crate's generated bindings). A folder of prebuilt kernels is audited the
//! same way, but for the ABI.
//!
//! The checks are pure functions (`checks`) over parsed data (`ptx`, `sass`,
//! `budgets`, `bindings`); only `facts` runs cuobjdump.

mod bindings;
mod budgets;
mod checks;
mod facts;
mod keys;
mod model;
mod ptx;
mod report;
mod rows;
mod sass;
mod tables;

#[cfg(test)]
mod planted;

use std::path::Path;

use anyhow::{Context, Result};

pub use bindings::{
    find_bindings, parse_declarations, read_declarations, Declaration, Declarations,
};
pub use budgets::{Budgets, CONFIG_FILE};
pub use report::{Abi, Report};

/// Audits what a build produced (its manifest), reading each module with
/// `cuobjdump`.
pub fn audit_build(
    cuobjdump: &Path,
    manifest: &cuda_build::Manifest,
    budgets: &Budgets,
    declared: Abi<'_>,
) -> Result<Report> {
    let modules = facts::read_manifest(cuobjdump, manifest)?;
    Ok(report::audit(
        &facts::requested(manifest),
        manifest.toolkit.as_ref().map(|t| t.version.clone()),
        &modules,
        budgets,
        declared,
    ))
}

/// Audits a folder of prebuilt kernels (`prebuilt.toml` and its images);
/// the ABI is not audited (the declarations are the packaged crate's).
pub fn audit_prebuilt(cuobjdump: &Path, dir: &Path, budgets: &Budgets) -> Result<Report> {
    let prebuilt = cuda_build::prebuilt::read(dir)?;
    let mut modules = Vec::new();
    for m in &prebuilt.modules {
        let file = m
            .output
            .as_deref()
            .with_context(|| format!("{} lists no image for module {}", dir.display(), m.name))?;
        modules.push(facts::read_module(
            cuobjdump,
            &m.name,
            m.link == cuda_build::config::LinkMode::Static,
            &dir.join(file),
            m.kernels.clone(),
        )?);
    }
    let requested = model::Requested {
        spec: prebuilt.summary(),
        origin: dir.display().to_string(),
        sass: prebuilt.sass.clone(),
        ptx: prebuilt.ptx.clone(),
    };
    Ok(report::audit(
        &requested,
        Some(prebuilt.toolkit.clone()),
        &modules,
        budgets,
        Abi::NotRead("prebuilt images of a crate whose Rust declarations this audit does not read"),
    ))
}

/// The crate's declarations from its generated bindings, or why none were
/// read (no file under `src/` implements `KernelDecl`).
pub fn crate_declarations(crate_dir: &Path, budgets: &Budgets) -> Result<Option<Declarations>> {
    let files = find_bindings(crate_dir, budgets.bindings.as_deref())?;
    if files.is_empty() {
        return Ok(None);
    }
    read_declarations(&files).map(Some)
}

/// Why the ABI was not audited for a crate without generated bindings.
pub const NO_BINDINGS: &str = "no generated bindings (no file under src/ implements KernelDecl; \
     set `bindings` in kiln-audit.toml if they are elsewhere)";

/// The one-line failure for a report with violations. PTX above the
/// driver floor is the toolkit's doing, not the kernels': where there is
/// some, the line names that fix too.
pub fn failure(report: &Report, budgets_file: &str) -> anyhow::Error {
    let floor = report
        .violations
        .iter()
        .filter(|v| v.check == checks::Check::DriverFloor)
        .count();
    let toolkit = if floor > 0 {
        format!(
            "; the {floor} PTX ISA one(s) come from the toolkit: build with the pinned one \
             (`cargo kiln toolkit install`), SASS only for every target GPU (each arch \
             `-real`), or raise the floor in {budgets_file} [driver]"
        )
    } else {
        String::new()
    };
    anyhow::anyhow!(
        "audit: {} violation(s), listed above; fix the kernels, or the budgets in {budgets_file} if the change is intended{toolkit}",
        report.violation_count()
    )
}
