//! `cargo xtask toolkit [install]` and `cargo xtask doctor`: cargo-kiln's,
//! pointed at kiln's workspace (the install in `target/cuda-toolkit`, the
//! kernels in `kernels/`, env prefix `KILN`).

use std::path::Path;

use anyhow::Result;
use cargo_kiln::{doctor as kiln_doctor, toolkit};

use crate::cli::{ToolkitAction, ToolkitArgs};
use crate::workspace;

/// `cargo xtask toolkit ...`.
pub(crate) fn run(args: &ToolkitArgs) -> Result<()> {
    // The kernel build's config: the file cuda-sys's build script watches.
    let touch = vec![workspace::root().join("kernels").join("kiln.toml")];
    let place = toolkit::Place::new(args.dir.as_deref(), workspace::default_toolkit_dir(), touch)?;
    match args.action {
        None => {
            print!("{}", toolkit::report(&place.dir));
            Ok(())
        }
        Some(ToolkitAction::Install) => toolkit::install_for(&place, args.target.as_deref()),
    }
}

/// `cargo xtask doctor`; fails when it finds a problem, after the report.
pub(crate) fn doctor(root: &Path) -> Result<()> {
    let subject = kiln_doctor::Subject {
        env_prefix: Some("KILN".to_string()),
        kernels_dir: root.join("kernels"),
        kernels_shown: "kernels".to_string(),
        toolkit_dir: workspace::default_toolkit_dir(),
        audit_file: root.join("crates/cuda-sys/kiln-audit.toml"),
    };
    let findings = kiln_doctor::gather(&subject)?;
    print!("{}", kiln_doctor::render(&findings));
    if findings.problem_count() == 0 {
        Ok(())
    } else {
        Err(kiln_doctor::failure(&findings))
    }
}
