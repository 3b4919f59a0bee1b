//! `cargo xtask ptx-audit [--arch SPEC] [--json FILE] [--prebuilt DIR]`:
//! cargo-kiln's audit of kiln's own kernels, each kernel crate's
//! (cuda-sys's, kiln-anneal's) against its own `kiln-audit.toml`. Only the
//! workspace's part is here: the build (`cargo xtask build`'s), the budgets,
//! and the Rust declarations: cuda-sys's from `cuda_sys::kernels::ALL`
//! (compiled, where `cargo kiln audit` reads the same bindings as source; a
//! test holds the two equal), kiln-anneal's read from its bindings as
//! `cargo kiln audit` reads them (xtask does not build the anneal).

use std::path::Path;

use anyhow::{Context, Result};
use cargo_kiln::audit::{self, Abi, Budgets, Declaration, Declarations, Report};
use cuda_build::Manifest;

use crate::build::{build_workspace, cuobjdump, validate_spec_or_exit};
use crate::cli::AuditArgs;
use crate::kernel_crates::KernelCrate;
use crate::output;

/// cuda-sys's audit config, relative to the workspace root.
pub(crate) const BUDGETS_FILE: &str = "crates/cuda-sys/kiln-audit.toml";

/// A kernel crate's audit config, relative to the workspace root.
fn budgets_file(krate: &KernelCrate) -> String {
    format!("{}/kiln-audit.toml", krate.dir)
}

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
    let tool = cuobjdump(root);
    let tool = tool
        .path()
        .context("cuobjdump not found in the CUDA toolkit; run `cargo xtask toolkit install`")?;
    let reports = match &args.prebuilt {
        // Another crate's images: kiln's driver floor and defaults, not
        // its per-kernel tables (which name kiln's kernels).
        Some(dir) => {
            let budgets = Budgets::read(&root.join(BUDGETS_FILE), BUDGETS_FILE)?;
            vec![(
                BUDGETS_FILE.to_string(),
                audit::audit_prebuilt(tool, dir, &budgets.defaults_only())?,
            )]
        }
        None => build_workspace(root, arch, false)?
            .iter()
            .map(|(krate, manifest)| {
                Ok((
                    budgets_file(krate),
                    audit_crate(root, tool, krate, manifest)?,
                ))
            })
            .collect::<Result<Vec<_>>>()?,
    };
    for (_, report) in &reports {
        print!("{}", report.render());
    }
    if let Some(path) = &args.json {
        let all: Vec<&Report> = reports.iter().map(|(_, r)| r).collect();
        let json = serde_json::to_string_pretty(&all)? + "\n";
        output::write_atomic(path, json.as_bytes())?;
    }
    match reports.into_iter().find(|(_, r)| !r.passed()) {
        Some((file, report)) => Err(audit::failure(&report, &file)),
        None => Ok(()),
    }
}

/// One kernel crate's build audited against its own budgets and
/// declarations.
fn audit_crate(
    root: &Path,
    tool: &Path,
    krate: &KernelCrate,
    manifest: &Manifest,
) -> Result<Report> {
    let file = budgets_file(krate);
    let budgets = Budgets::read(&root.join(&file), &file)?;
    let declared = declarations(root, krate, &budgets)?;
    audit::audit_build(tool, manifest, &budgets, Abi::Declared(&declared))
}

/// A kernel crate's Rust declarations: cuda-sys's compiled into xtask, any
/// other's read from its bindings as source, as `cargo kiln audit` reads them.
fn declarations(root: &Path, krate: &KernelCrate, budgets: &Budgets) -> Result<Declarations> {
    if krate.package == "cuda-sys" {
        return Ok(kiln_declarations());
    }
    audit::crate_declarations(&root.join(krate.dir), budgets)?
        .with_context(|| format!("{}: no generated bindings found", krate.dir))
}

/// kiln's kernels as cuda-sys declares them.
pub(crate) fn kiln_declarations() -> Declarations {
    Declarations {
        kernels: cuda_sys::kernels::ALL
            .iter()
            .map(|k| Declaration::new(k.name, k.header, k.param_names, k.param_layout))
            .collect(),
        unreadable: Vec::new(),
        // Declared by headers alone: codegen refused none of them.
        refused: Vec::new(),
        absent_at: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;
    use std::process::Command;

    use super::*;
    use crate::discovery::kiln_discovery;
    use crate::kernel_crates::KERNEL_CRATES;

    /// What `cargo kiln audit` compares PTX with (the bindings read as
    /// source) is what xtask compares it with (`cuda_sys::kernels::ALL`,
    /// compiled): every kernel, header, parameter name, size and alignment.
    #[test]
    fn cuda_sys_bindings_read_as_source_equal_the_compiled_declarations() {
        let root = crate::workspace::root();
        let budgets = Budgets::read(&root.join(BUDGETS_FILE), BUDGETS_FILE).unwrap();
        let from_source = audit::crate_declarations(&root.join("crates/cuda-sys"), &budgets)
            .unwrap()
            .expect("cuda-sys's kiln-audit.toml names its bindings");
        assert_eq!(from_source, kiln_declarations());
    }

    /// Builds kiln's kernels for `sm_80,sm_90` (every kernel crate's) in a
    /// target dir of this test's own: the `cargo test` running it holds the
    /// workspace's. Rebuilds only what changed since the last run.
    fn build_kiln_kernels(root: &Path) -> Vec<(KernelCrate, Manifest)> {
        let target = std::env::var_os("CARGO_TARGET_DIR")
            .map_or_else(|| root.join("target"), PathBuf::from)
            .join("xtask-audit-test");
        let mut cargo = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
        cargo
            .current_dir(root)
            .env("CARGO_TARGET_DIR", &target)
            .arg("build")
            .arg("--message-format=json-render-diagnostics")
            .stderr(std::process::Stdio::inherit());
        crate::kernel_crates::set_for_all(&mut cargo, "CUDA_ARCHS", "sm_80,sm_90");
        crate::kernel_crates::set_for_all(&mut cargo, "REQUIRE_CUDA", "1");
        for krate in KERNEL_CRATES {
            cargo.args(["-p", krate.package]);
        }
        let output = cargo.output().expect("cargo runs");
        assert!(
            output.status.success(),
            "building kiln's kernels with the toolkit failed ({}); its errors are above",
            output.status
        );
        KERNEL_CRATES
            .iter()
            .map(|krate| {
                let manifest = crate::build::kernel_manifest(&output.stdout, krate).unwrap();
                (*krate, manifest)
            })
            .collect()
    }

    /// Audits a fresh build of every kernel crate, so a kernel change is
    /// audited by the next test run: skipped only without a toolkit, and a
    /// failed build is a failure. The same build audited as `cargo kiln
    /// audit` does it (the crate's config found beside its Cargo.toml, the
    /// declarations read from its bindings) gives the same report.
    #[test]
    fn kiln_kernels_pass_the_audit() {
        let root = crate::workspace::root();
        if kiln_discovery(&root).and_then(|d| d.toolkit).is_none() {
            assert!(
                std::env::var_os(crate::ci::REQUIRE_TOOLKIT_VAR).is_none_or(|v| v != "1"),
                "KILN_REQUIRE_TOOLKIT=1 but no CUDA toolkit was found (run cargo xtask toolkit install)"
            );
            return eprintln!("skipped: no CUDA toolkit (run cargo xtask toolkit install)");
        }
        let tool = cuobjdump(&root);
        let tool = tool.path().unwrap();
        let mut text = String::new();
        for (krate, manifest) in build_kiln_kernels(&root) {
            assert!(
                manifest.cuda_enabled
                    && manifest.sass == ["sm_80", "sm_90"]
                    && manifest.ptx == ["compute_90"],
                "{}: the build is not the sm_80,sm_90 GPU build asked for: {manifest:?}",
                krate.package
            );
            let mut report = audit_crate(&root, tool, &krate, &manifest).unwrap();
            // Deterministic whichever way the build was asked for sm_80,sm_90.
            report.relabel_request("sm_80,sm_90", "the build");
            let rendered = report.render();
            assert!(report.passed(), "{rendered}");

            let dir = root.join(krate.dir);
            let file = budgets_file(&krate);
            let crate_budgets = Budgets::for_crate(&dir, &file).unwrap();
            let declared = audit::crate_declarations(&dir, &crate_budgets)
                .unwrap()
                .unwrap();
            let mut as_cargo_kiln =
                audit::audit_build(tool, &manifest, &crate_budgets, Abi::Declared(&declared))
                    .unwrap();
            as_cargo_kiln.relabel_request("sm_80,sm_90", "the build");
            assert_eq!(as_cargo_kiln.render(), rendered, "{}", krate.package);
            text += &format!("{}:\n{rendered}", krate.package);
        }
        insta::assert_snapshot!(text);
    }
}
