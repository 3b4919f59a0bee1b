//! A kernel tree written in huggingface/candle's patterns (`kernels/`): macro
//! dtype families of extern "C" kernels with `size_t`-heavy signatures and a
//! strided layout that may be null, kernel templates exported by their
//! mangled names, and a static module of host launchers (`moe/`). Nothing in
//! `kernels/` was written for kiln: the fat binaries are launched by name
//! (`Backend::kernel_by_name`), the launchers through `extern "C"`.
//!
//! ```
//! use candle_patterns::{kernels, modules};
//! // Each module's image holds exactly the kernels its families stamp out.
//! for (image, names) in kernels::expected() {
//!     assert!(!image.is_built() || names.iter().all(|n| image.has_kernel(n)));
//! }
//! ```

pub mod kernels;
mod moe;
pub mod reference;

pub use moe::{argsort_f32, moe_expert_offsets, HostError, MAX_ARGSORT_COLS, MAX_EXPERTS};

use gpu_core::FatbinImage;

/// The fat binaries the build script compiled, one per top-level `.cu`
/// (`UNARY`, `BINARY`, `AFFINE`, `FILL`, `CAST`, `TERNARY`, `INDEXING`,
/// `REDUCE`, and `ALL`); empty in a CPU-only build. `moe` is a static library
/// linked in instead.
pub mod modules {
    include!(concat!(env!("OUT_DIR"), "/cp_modules.rs"));
}

/// Every fat binary, for a backend that launches them by name.
pub static FATBINS: &[&FatbinImage] = &[
    &modules::UNARY,
    &modules::BINARY,
    &modules::AFFINE,
    &modules::FILL,
    &modules::CAST,
    &modules::TERNARY,
    &modules::INDEXING,
    &modules::REDUCE,
];

/// Whether this build carries GPU code (a toolkit was found at build time).
pub const CUDA_ENABLED: bool = cfg!(cuda_enabled);
