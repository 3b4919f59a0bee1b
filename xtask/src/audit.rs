//! `cargo xtask ptx-audit [--arch SPEC] [--json FILE] [--prebuilt DIR]`:
//! cargo-kiln's audit of kiln's own kernels. Only the workspace's part is
//! here: the build (`cargo xtask build`'s), the budgets in cuda-sys's
//! `kiln-audit.toml`, and the Rust declarations from
//! `cuda_sys::kernels::ALL` (compiled, where `cargo kiln audit` reads the
//! same bindings as source; a test holds the two equal).

use std::path::Path;

use anyhow::{Context, Result};
use cargo_kiln::audit::{self, Abi, Budgets, Declaration, Declarations};

use crate::build::{build_workspace, cuobjdump, validate_spec_or_exit};
use crate::cli::AuditArgs;
use crate::output;

/// cuda-sys's audit config, relative to the workspace root.
pub(crate) const BUDGETS_FILE: &str = "crates/cuda-sys/kiln-audit.toml";

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
    let tool = cuobjdump(root);
    let tool = tool
        .path()
        .context("cuobjdump not found in the CUDA toolkit; run `cargo xtask toolkit install`")?;
    let report = match &args.prebuilt {
        // Another crate's images: kiln's driver floor and defaults, not
        // its per-kernel tables (which name kiln's kernels).
        Some(dir) => audit::audit_prebuilt(tool, dir, &budgets.defaults_only())?,
        None => {
            let manifest = build_workspace(root, arch, false)?;
            let declared = kiln_declarations();
            audit::audit_build(tool, &manifest, &budgets, Abi::Declared(&declared))?
        }
    };
    print!("{}", report.render());
    if let Some(path) = &args.json {
        let json = serde_json::to_string_pretty(&report)? + "\n";
        output::write_atomic(path, json.as_bytes())?;
    }
    if !report.passed() {
        return Err(audit::failure(&report, BUDGETS_FILE));
    }
    Ok(())
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

    use cuda_build::Manifest;

    use super::*;
    use crate::discovery::kiln_discovery;

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

    /// Builds kiln's kernels for `sm_80,sm_90` (cuda-sys) in a target dir of
    /// this test's own: the `cargo test` running it holds the workspace's.
    /// Rebuilds only what changed since the last run.
    fn build_kiln_kernels(root: &Path) -> Manifest {
        let target = std::env::var_os("CARGO_TARGET_DIR")
            .map_or_else(|| root.join("target"), PathBuf::from)
            .join("xtask-audit-test");
        let output = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
            .current_dir(root)
            .env("CARGO_TARGET_DIR", &target)
            .env("KILN_CUDA_ARCHS", "sm_80,sm_90")
            .env("KILN_REQUIRE_CUDA", "1")
            .args(["build", "-p", "cuda-sys"])
            .arg("--message-format=json-render-diagnostics")
            .stderr(std::process::Stdio::inherit())
            .output()
            .expect("cargo runs");
        assert!(
            output.status.success(),
            "building kiln's kernels with the toolkit failed ({}); its errors are above",
            output.status
        );
        let out_dir = crate::build::cuda_sys_out_dir(&output.stdout)
            .expect("cargo reports cuda-sys's build script output");
        Manifest::read(&out_dir.join(cuda_build::manifest::file_name("KILN"))).unwrap()
    }

    /// Audits a fresh build, so a kernel change is audited by the next test
    /// run: skipped only without a toolkit, and a failed build is a
    /// failure. The same build audited as `cargo kiln audit` does it (the
    /// crate's config found beside its Cargo.toml, the declarations read
    /// from its bindings) gives the same report.
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
        let manifest = build_kiln_kernels(&root);
        assert!(
            manifest.cuda_enabled
                && manifest.sass == ["sm_80", "sm_90"]
                && manifest.ptx == ["compute_90"],
            "the build is not the sm_80,sm_90 GPU build asked for: {manifest:?}"
        );
        let tool = cuobjdump(&root);
        let tool = tool.path().unwrap();
        let budgets = Budgets::read(&root.join(BUDGETS_FILE), BUDGETS_FILE).unwrap();
        let mut report = audit::audit_build(
            tool,
            &manifest,
            &budgets,
            Abi::Declared(&kiln_declarations()),
        )
        .unwrap();
        // Deterministic whichever way the build was asked for sm_80,sm_90.
        report.relabel_request("sm_80,sm_90", "the build");
        let text = report.render();
        assert!(report.passed(), "{text}");

        let sys = root.join("crates/cuda-sys");
        let kiln_budgets = Budgets::for_crate(&sys, BUDGETS_FILE).unwrap();
        let declared = audit::crate_declarations(&sys, &kiln_budgets)
            .unwrap()
            .unwrap();
        let mut as_cargo_kiln =
            audit::audit_build(tool, &manifest, &kiln_budgets, Abi::Declared(&declared)).unwrap();
        as_cargo_kiln.relabel_request("sm_80,sm_90", "the build");
        assert_eq!(as_cargo_kiln.render(), text);
        insta::assert_snapshot!(text);
    }
}
