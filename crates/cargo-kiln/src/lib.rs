//! `cargo kiln`: kiln's tools for any crate whose build script builds its
//! kernels with cuda-build's `KernelBuild`, found through `cargo metadata`
//! and the manifest the build writes.
//!
//! - `build`: per module, the SASS and PTX inside (cuobjdump), size, compile
//!   time and cache hits;
//! - `audit`: archs, resource budgets (`kiln-audit.toml`), PTX ISA against
//!   the driver floor, f64, and each kernel's PTX parameters against the
//!   crate's generated bindings;
//! - `new`: `cargo kiln new NAME`, a crate with one kernel, its header,
//!   `build.rs`, committed bindings, a CPU reference and a test;
//! - `doctor`, `toolkit [install]` (the pinned toolkit, project-local);
//! - `bundle`: release test binaries and a `run.sh` for a GPU host without
//!   Rust, with compute-sanitizer and a positive control.
//!
//! The library is the one implementation of these tools: the `cargo-kiln`
//! binary and kiln's own xtask both call it (xtask adds only what is
//! kiln's workspace's). Like them it reports with `anyhow`: its errors go to
//! a person, one line each, and [`UsageError`] marks bad input (exit 2).

pub mod audit;
pub mod build;
pub mod bundle;
pub mod codegen;
pub mod commands;
pub mod config;
pub mod doctor;
pub mod error;
pub mod new;
pub mod output;
pub mod project;
pub mod toolkit;

pub use error::UsageError;
