//! `kiln.h`, the header that defines `KILN_KERNEL(name, params...)`, shipped
//! with cuda-build so that a downstream crate's kernel headers can include it
//! without copying it: the macro and [`crate::codegen`]'s reading of it are
//! one contract, so they come in one package.
//!
//! A build script adds [`include_dir`] to nvcc's include path; `codegen` adds
//! it to clang's. kiln's own `kernels/include/kiln.h` is the same file (a test
//! keeps the two equal).

use std::path::{Path, PathBuf};

/// The text of `kiln.h`, for crates that prefer to vendor it.
pub const KILN_H: &str = include_str!("../include/kiln.h");

/// The directory that holds `kiln.h`: pass it to
/// [`KernelBuild::include_dir`](crate::KernelBuild::include_dir) and
/// `Codegen::include_dir`, then write `#include "kiln.h"` in your headers.
///
/// ```
/// let dir = cuda_build::header::include_dir();
/// assert!(dir.join("kiln.h").is_file());
/// ```
pub fn include_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("include")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shipped_kiln_h_equals_the_kernels_copy() {
        let kernels = include_dir().join("../../../kernels/include/kiln.h");
        let Ok(text) = std::fs::read_to_string(&kernels) else {
            println!("skipped: no kiln checkout around cuda-build");
            return;
        };
        assert_eq!(
            text, KILN_H,
            "crates/cuda-build/include/kiln.h and kernels/include/kiln.h differ: copy one over the other"
        );
    }
}
