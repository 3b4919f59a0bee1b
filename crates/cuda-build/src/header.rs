//! `kiln.h`, the header that defines `KILN_KERNEL(name, params...)`, shipped
//! with cuda-build so that a downstream crate's kernel headers can include it
//! without copying it: the macro and [`crate::codegen`]'s reading of it are
//! one contract, so they come in one package.
//!
//! A build script adds [`include_dir`] to nvcc's include path; `codegen` adds
//! it to clang's. There is one `kiln.h`: kiln's own build and codegen use this
//! one too.

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
