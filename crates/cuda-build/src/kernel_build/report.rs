//! What a finished kernel build tells a `links` crate's dependents
//! (`cargo::metadata`), apart from the build itself so that `kernel_build.rs`
//! keeps to the line cap.

use super::BuildReport;
use crate::emit;

impl BuildReport {
    /// `cargo::metadata` lines for a `links` crate's dependents
    /// (`DEP_<LINKS>_ENABLED`, `_ROOT`, `_VERSION`, `_SASS`, `_PTX`,
    /// `_MANIFEST`).
    pub fn metadata_directives(&self) -> Vec<String> {
        let mut lines = vec![
            format!(
                "cargo::metadata=enabled={}",
                u8::from(self.manifest.cuda_enabled)
            ),
            format!("cargo::metadata=manifest={}", self.manifest_path.display()),
            format!(
                "cargo::metadata=sass={}",
                emit::arch_numbers(&self.manifest.sass, ",")
            ),
            format!(
                "cargo::metadata=ptx={}",
                emit::arch_numbers(&self.manifest.ptx, ",")
            ),
        ];
        if let Some(tk) = &self.toolkit {
            lines.push(format!("cargo::metadata=root={}", tk.root.display()));
            lines.push(format!(
                "cargo::metadata=version={}.{}",
                tk.version.major, tk.version.minor
            ));
        }
        lines
    }
}
