//! cuda-build: the build-time half of kiln, for build scripts (kiln's
//! `cuda-sys` and downstream crates'), `cargo xtask` and tests.
//!
//! - [`toolkit`]: find a CUDA toolkit, report where it looked;
//! - [`arch`]: one arch-spec grammar (`sm_86`, `90-real`, `sm_90+PTX`, ...);
//! - [`nvcc`]: the nvcc command lines;
//! - [`kernels`]: the whole kernel build a build script runs, with CPU-only
//!   fallback, `-MD` rebuild tracking and parallel compiles;
//! - [`manifest`], [`resources`], [`depfile`], [`config`]: what it reads and
//!   writes;
//! - `codegen` (feature `codegen`): bindgen over the shared C headers into the
//!   committed Rust bindings.
//!
//! A downstream build script (`build.rs`) is one call:
//! ```no_run
//! if let Err(e) = cuda_build::KernelBuild::new("kernels").env_prefix("MYCRATE").run() {
//!     println!("cargo::error={e}");
//!     std::process::exit(1);
//! }
//! ```

pub mod arch;
pub mod bindings;
#[cfg(feature = "codegen")]
pub mod codegen;
pub mod config;
pub mod depfile;
mod error;
pub mod kernels;
pub mod manifest;
pub mod nvcc;
pub mod resources;
pub mod toolkit;

pub use arch::{Arch, ArchError, ArchList, ArchSpec, SupportedArchs};
pub use config::{KernelConfig, LinkMode};
pub use error::Error;
pub use kernels::{BuildReport, KernelBuild};
pub use manifest::Manifest;
pub use toolkit::{discover, Discovery, Toolkit, ToolkitVersion};
