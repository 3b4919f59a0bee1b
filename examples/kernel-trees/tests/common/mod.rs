//! Shared by the fixture tests: the backends a test body runs on.
#![allow(dead_code)]

use gpu_core::{Backend, FatbinImage};

/// The CPU backend, and CUDA with `modules` loaded where a device can run
/// them (else `skipped: <reason>`, or a failure under `KILN_REQUIRE_GPU`).
pub(crate) fn backends(modules: &[&'static FatbinImage]) -> Vec<Backend> {
    let mut all = vec![Backend::cpu()];
    all.extend(gpu_core::testing::cuda_backend(modules));
    all
}
