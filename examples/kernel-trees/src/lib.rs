//! A team's CUDA kernel tree, taken as it is (`kernels/`): a macro-generated
//! dtype family, a templated reduction behind a host launcher, two
//! translation units linked by separate compilation, an sm_90a-only module
//! and kernels with no header. `kernels/kiln.toml` names each module's
//! sources; this crate gives each pattern a safe Rust entry point that runs on
//! the GPU where it can and on the CPU reference otherwise.
//!
//! ```
//! use kernel_trees::{affine, backend, Dtype};
//! let backend = backend()?; // CUDA if it can run the portable modules, else the CPU
//! let stream = backend.default_stream();
//! let kernel = f32::kernel(&backend)?;
//! assert_eq!(affine(&stream, &kernel, 2.0f32, 1.0, &[1.0, 2.0])?, [3.0, 5.0]);
//! # Ok::<(), gpu_core::Error>(())
//! ```

#[rustfmt::skip]
mod bindings;
mod elementwise;
mod host;
pub mod reference;

use gpu_core::{Backend, Error, FatbinImage};

pub use bindings::kernels;
pub use elementwise::{affine, Dtype};
pub use host::{rdc_round_trip, sum_f32, sum_u32, HostError};

/// The fat binaries the build script compiled (`ELEMENTWISE`, `RDC_FATBIN`,
/// `HOPPER`, `BYNAME`, and `ALL`); empty in a CPU-only build. The static
/// modules (`reduce`, `rdc_static`) are linked in instead.
pub mod modules {
    include!(concat!(env!("OUT_DIR"), "/kt_modules.rs"));
}

/// The modules every GPU from sm_80 runs: all but `HOPPER`, which is built
/// for sm_90a alone and loads only on Hopper.
pub static PORTABLE: &[&FatbinImage] = &[
    &modules::ELEMENTWISE,
    &modules::RDC_FATBIN,
    &modules::BYNAME,
];

/// Whether this build carries GPU code (a toolkit was found at build time).
pub const CUDA_ENABLED: bool = cfg!(cuda_enabled);

/// The backend for the portable modules: CUDA when a device can run them,
/// else the CPU (`KILN_BACKEND=cpu|cuda` forces one);
/// [`Backend::cpu_reason`] says why.
pub fn backend() -> Result<Backend, Error> {
    Backend::auto(PORTABLE)
}
