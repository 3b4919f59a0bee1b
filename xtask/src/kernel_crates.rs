//! kiln's crates that build kernels of their own, each with cuda-build's
//! `KernelBuild` and an env prefix of its own: cuda-sys (kiln's kernels in
//! `kernels/`, `KILN`) and kiln-anneal (`crates/anneal/kernels/`,
//! `KILN_ANNEAL`). What xtask sets for one crate's build (archs, the
//! toolkit required, the toolkit hidden) it sets for every one.

use std::process::Command;

/// A crate of the workspace with its own kernel build.
#[derive(Debug, Clone, Copy)]
pub(crate) struct KernelCrate {
    /// The package name (cargo's `-p`, the build script's package id).
    pub(crate) package: &'static str,
    /// The crate's folder, relative to the workspace root.
    pub(crate) dir: &'static str,
    /// Its build's env prefix (`<PREFIX>_CUDA_ARCHS`, ...).
    pub(crate) prefix: &'static str,
}

/// Every crate of the workspace that compiles kernels.
pub(crate) const KERNEL_CRATES: &[KernelCrate] = &[
    KernelCrate {
        package: "cuda-sys",
        dir: "crates/cuda-sys",
        prefix: "KILN",
    },
    KernelCrate {
        package: "kiln-anneal",
        dir: "crates/anneal",
        prefix: "KILN_ANNEAL",
    },
];

/// `<PREFIX>_<suffix>` of every kernel crate: `CUDA_ARCHS` gives
/// `KILN_CUDA_ARCHS`, `KILN_ANNEAL_CUDA_ARCHS`.
pub(crate) fn vars(suffix: &str) -> impl Iterator<Item = String> + '_ {
    KERNEL_CRATES
        .iter()
        .map(move |c| format!("{}_{suffix}", c.prefix))
}

/// Sets `<PREFIX>_<suffix>=value` for every kernel crate's build.
pub(crate) fn set_for_all(command: &mut Command, suffix: &str, value: &str) {
    for var in vars(suffix) {
        command.env(var, value);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each listed crate's build script names its prefix, so a crate
    /// renamed or a prefix changed is caught here, not by a build that
    /// silently ignores the archs xtask asked for.
    #[test]
    fn every_kernel_crate_builds_with_its_prefix() {
        let root = crate::workspace::root();
        for c in KERNEL_CRATES {
            let dir = root.join(c.dir);
            let script = ["build/main.rs", "build.rs"]
                .iter()
                .map(|p| dir.join(p))
                .find(|p| p.exists())
                .unwrap_or_else(|| panic!("{}: no build script", c.dir));
            let text = std::fs::read_to_string(&script).unwrap();
            assert!(
                text.contains(&format!(".env_prefix(\"{}\")", c.prefix)),
                "{} does not build with prefix {}",
                script.display(),
                c.prefix
            );
            let manifest = std::fs::read_to_string(dir.join("Cargo.toml")).unwrap();
            assert!(
                manifest.contains(&format!("name = \"{}\"", c.package)),
                "{}: not package {}",
                c.dir,
                c.package
            );
        }
        assert_eq!(
            vars("CUDA").collect::<Vec<_>>(),
            ["KILN_CUDA", "KILN_ANNEAL_CUDA"]
        );
    }
}
