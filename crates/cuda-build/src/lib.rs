//! cuda-build: build-time CUDA for build scripts (kiln's `cuda-sys` and
//! downstream crates'), and the pieces of it that tools reuse.
//!
//! # For build scripts
//! A build script (`build.rs`) is one call to [`KernelBuild`]:
//! ```no_run
//! let build = cuda_build::KernelBuild::new("kernels")
//!     .env_prefix("MYCRATE") // MYCRATE_CUDA_ARCHS, MYCRATE_REQUIRE_CUDA, MYCRATE_CUDA=off, ...
//!     .include_dir(cuda_build::header::include_dir()) // kiln.h
//!     .toolkit_hint("install the CUDA toolkit or set CUDA_PATH");
//! if let Err(e) = build.run() {
//!     // The first line is the headline; nvcc's whole output follows.
//!     let text = e.to_string();
//!     let mut lines = text.lines();
//!     println!("cargo::error={}", lines.next().unwrap_or_default());
//!     lines.for_each(|line| eprintln!("{line}"));
//!     std::process::exit(1);
//! }
//! ```
//! The modules are every top-level `*.cu` of the kernels dir, and the
//! `[modules.NAME]` entries of its `kiln.toml` (sources and globs, flags,
//! defines, include dirs, archs, `link = "static"`, `rdc = true`). The crate
//! embeds the fat binaries with
//! `include!(concat!(env!("OUT_DIR"), "/mycrate_modules.rs"))` (one
//! `pub static NAME: gpu_core::FatbinImage` per fat-binary module, and `ALL`)
//! and may test `cfg(cuda_enabled)` / `cfg(cpu_only)`.
//! `examples/downstream` in kiln's repository is a whole crate built this way.
//! The API: [`KernelBuild`], [`BuildReport`], [`Error`], [`header`],
//! [`cpu_only_directives`].
//!
//! Every nvcc step goes through a content-addressed kernel cache kept outside
//! the target dir (`KILN_CACHE_DIR`, default the user's cache dir;
//! `KILN_CACHE_MAX`; `KILN_CACHE=off`), so `cargo clean` and the other
//! profile compile nothing compiled before. With no toolkit, a crate's
//! [`prebuilt`] kernels (`kernels-prebuilt/`, written by
//! [`prebuilt::export`]) are embedded when they were built from the sources
//! as they are.
//!
//! # For tools
//! What a build reads and writes, for tools that report on or check builds
//! (kiln's own build tooling uses these): [`toolkit`] (discovery and where it looked), [`arch`]
//! (the arch grammar), [`config`] (the config file), [`manifest`] and
//! [`resources`] (what a build produced), and, without libclang, the
//! committed-bindings check in [`bindings`], prebuilt kernels in
//! [`prebuilt`]; `codegen` (feature `codegen`) runs bindgen over kernel
//! headers.

pub mod arch;
pub mod bindings;
mod cache;
#[cfg(feature = "codegen")]
pub mod codegen;
mod compile;
pub mod config;
pub mod cross;
mod depfile;
mod driver;
mod emit;
mod error;
mod fatbin;
pub mod floor;
pub mod header;
mod kernel_build;
pub mod manifest;
mod modules;
mod nvcc;
mod parallel;
pub mod prebuilt;
mod probe;
pub mod regular;
pub mod resources;
mod settings;
pub mod toolkit;

pub use arch::{Arch, ArchError, ArchList, ArchSpec, SupportedArchs};
pub use config::{KernelConfig, LinkMode, ModuleConfig};
pub use error::Error;
pub use fatbin::FatbinError;
pub use kernel_build::{cpu_only_directives, BuildReport, KernelBuild};
pub use manifest::{CacheReport, Manifest};
pub use toolkit::{discover, discover_every, Discovery, Toolkit, ToolkitVersion};

/// The oldest Rust this crate builds with (its `rust-version`): what a crate
/// that depends on it (and on gpu-core, which shares it) may declare.
pub const RUST_VERSION: &str = env!("CARGO_PKG_RUST_VERSION");
