//! `cargo xtask ptx-audit [--arch SPEC] [--json FILE]`: builds like
//! `cargo xtask build`, then proves from the fat binaries alone (no GPU) that
//! every kernel exists for every arch, fits `ci/budgets.toml`, has PTX the
//! oldest supported driver can JIT, holds no accidental f64, and matches its
//! Rust declaration.
//!
//! The checks are pure functions (`checks`) over parsed data (`ptx`, `sass`,
//! `budgets`); only `facts` runs cuobjdump.

mod budgets;
mod checks;
mod facts;
mod ptx;
mod report;
mod sass;

#[cfg(test)]
mod planted;

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

use crate::build::{build_workspace, validate_spec_or_exit, Cuobjdump};
use budgets::Budgets;
use report::Report;

/// The budgets file, relative to the workspace root.
pub(crate) const BUDGETS_FILE: &str = "ci/budgets.toml";

const USAGE: &str = "usage: cargo xtask ptx-audit [--arch SPEC] [--json FILE]";

#[derive(Debug, Default)]
struct Args {
    arch: Option<String>,
    json: Option<PathBuf>,
}

fn parse_args(args: &[String]) -> Result<Args> {
    let mut parsed = Args::default();
    let mut iter = args.iter();
    while let Some(arg) = iter.next() {
        let (flag, inline) = match arg.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f, Some(v.to_string())),
            _ => (arg.as_str(), None),
        };
        let mut value = || {
            inline
                .clone()
                .or_else(|| iter.next().cloned())
                .ok_or_else(|| crate::cli::usage_error!("{flag} needs a value; {USAGE}"))
        };
        match flag {
            "--arch" => parsed.arch = Some(value()?),
            "--json" => parsed.json = Some(PathBuf::from(value()?)),
            other => {
                return Err(crate::cli::usage_error!(
                    "unknown argument `{other}`; {USAGE}"
                ))
            }
        }
    }
    Ok(parsed)
}

/// Runs the command.
pub(crate) fn run(root: &Path, args: &[String]) -> Result<()> {
    let args = parse_args(args)?;
    if let Some(spec) = &args.arch {
        validate_spec_or_exit(root, spec, "--arch");
    }
    let budgets = Budgets::read(&root.join(BUDGETS_FILE), BUDGETS_FILE)?;
    let manifest = build_workspace(root, args.arch.as_deref(), false)?;
    let report = audit_build(root, &manifest, &budgets)?;
    print!("{}", report.render());
    if let Some(path) = &args.json {
        let json = serde_json::to_string_pretty(&report)?;
        std::fs::write(path, json + "\n")
            .with_context(|| format!("cannot write {}", path.display()))?;
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
        cuda_sys::kernels::ALL,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn args() {
        let a = parse_args(&["--arch".into(), "sm_80".into(), "--json=r.json".into()]).unwrap();
        assert_eq!(a.arch.as_deref(), Some("sm_80"));
        assert_eq!(a.json, Some(PathBuf::from("r.json")));
        let e = parse_args(&["--jsn".into()]).unwrap_err();
        assert!(e.is::<crate::cli::UsageError>());
        assert!(parse_args(&["--json".into()]).is_err());
    }
}
