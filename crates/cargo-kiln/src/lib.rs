//! cargo-kiln: kiln's tools for any crate whose build script uses
//! cuda-build, as the cargo subcommand `cargo kiln` (installed with
//! `cargo install`). The binary parses the command line; each subcommand is a
//! module here.
//!
//! - [`new`]: `cargo kiln new NAME`, a crate with one kernel, its header,
//!   `build.rs`, committed bindings, a CPU reference and a test.

pub mod new;
