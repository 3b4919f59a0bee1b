//! `cargo xtask ptx-audit [--arch SPEC] [--json FILE] [--prebuilt DIR]`:
//! builds like `cargo xtask build`, then proves from the fat binaries alone
//! (no GPU) that every kernel exists for every arch, fits `ci/budgets.toml`,
//! has PTX the oldest supported driver can JIT, holds no accidental f64, and
//! matches its Rust declaration. With `--prebuilt`, audits a folder of
//! prebuilt kernels (`kernels-prebuilt/`) instead of building: the same
//! checks, except the ABI (the declarations are that crate's).
//!
//! The checks are pure functions (`checks`) over parsed data (`ptx`, `sass`,
//! `budgets`); only `facts` runs cuobjdump.

mod budgets;
mod checks;
mod facts;
mod model;
mod ptx;
mod report;
mod rows;
mod sass;

#[cfg(test)]
mod planted;

use std::path::Path;

use anyhow::{bail, Context, Result};

use crate::build::{build_workspace, validate_spec_or_exit, Cuobjdump};
use crate::cli::AuditArgs;
use crate::output;
use budgets::Budgets;
use report::Report;

/// The budgets file, relative to the workspace root.
pub(crate) const BUDGETS_FILE: &str = "ci/budgets.toml";

/// Runs the command.
pub(crate) fn run(root: &Path, args: &AuditArgs) -> Result<()> {
    let arch = args.arch.arch.as_deref();
    if let Some(spec) = arch {
        validate_spec_or_exit(root, spec, "--arch");
    }
    // Checked before the build, so a bad path costs seconds, not the audit.
    if let Some(path) = &args.json {
        output::check_file(path, "--json")?;
    }
    let budgets = Budgets::read(&root.join(BUDGETS_FILE), BUDGETS_FILE)?;
    let report = match &args.prebuilt {
        Some(dir) => audit_prebuilt(root, dir, &budgets)?,
        None => audit_build(root, &build_workspace(root, arch, false)?, &budgets)?,
    };
    print!("{}", report.render());
    if let Some(path) = &args.json {
        let json = serde_json::to_string_pretty(&report)? + "\n";
        output::write_atomic(path, json.as_bytes())?;
    }
    if !report.passed() {
        bail!(
            "ptx-audit: {} violation(s), listed above; fix the kernels, or the budgets in {BUDGETS_FILE} if the change is intended",
            report.violations.len()
        );
    }
    Ok(())
}

/// Audits what a build produced against `budgets` and kiln's Rust
/// declarations.
fn audit_build(root: &Path, manifest: &cuda_build::Manifest, budgets: &Budgets) -> Result<Report> {
    let cuobjdump = Cuobjdump::find(root);
    let tool = cuobjdump
        .path()
        .context("cuobjdump not found in the CUDA toolkit; run `cargo xtask toolkit install`")?;
    let modules = facts::read_manifest(tool, manifest)?;
    Ok(report::audit(
        &facts::requested(manifest),
        manifest.toolkit.as_ref().map(|t| t.version.clone()),
        &modules,
        budgets,
        Some(cuda_sys::kernels::ALL),
    ))
}

/// Audits a folder of prebuilt kernels (`prebuilt.toml` and its images).
fn audit_prebuilt(root: &Path, dir: &Path, budgets: &Budgets) -> Result<Report> {
    let prebuilt = cuda_build::prebuilt::read(dir)?;
    let cuobjdump = Cuobjdump::find(root);
    let tool = cuobjdump
        .path()
        .context("cuobjdump not found in the CUDA toolkit; run `cargo xtask toolkit install`")?;
    let mut modules = Vec::new();
    for m in &prebuilt.modules {
        let file = m
            .output
            .as_deref()
            .with_context(|| format!("{} lists no image for module {}", dir.display(), m.name))?;
        modules.push(facts::read_module(
            tool,
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
        None,
    ))
}
