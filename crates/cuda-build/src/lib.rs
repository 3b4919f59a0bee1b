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
//!   committed Rust bindings; [`bindings`] checks them without libclang;
//! - [`header`]: `kiln.h` (`KILN_KERNEL`), for downstream kernel headers.
//!
//! A downstream build script (`build.rs`) is one call; the kernels are every
//! `*.cu` in the dir named, and `kernels/include` is on the include path:
//! ```no_run
//! let build = cuda_build::KernelBuild::new("kernels")
//!     .env_prefix("MYCRATE") // MYCRATE_CUDA_ARCHS, MYCRATE_REQUIRE_CUDA, MYCRATE_CUDA=off
//!     .include_dir(cuda_build::header::include_dir()) // kiln.h
//!     .toolkit_hint("install the CUDA toolkit or set CUDA_PATH");
//! if let Err(e) = build.run() {
//!     println!("cargo::error={e}");
//!     std::process::exit(1);
//! }
//! ```
//! The crate then embeds the fat binaries with
//! `include!(concat!(env!("OUT_DIR"), "/kiln_modules.rs"))` (one
//! `pub static NAME: gpu_core::FatbinImage` per `.cu` file, and `ALL`) and
//! may test `cfg(cuda_enabled)` / `cfg(cpu_only)`.
//! `examples/downstream` in kiln's repository is a whole crate built this way.

pub mod arch;
pub mod bindings;
#[cfg(feature = "codegen")]
pub mod codegen;
pub mod config;
pub mod depfile;
mod error;
pub mod header;
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
