//! The Rust side of kiln's kernels: CPU references (the oracles the GPU is
//! tested against), the workloads built on gpu-core, and what the CLI runs.

pub mod batch;
pub mod bench;
pub mod vadd;

pub use kiln_anneal::Rng;

use gpu_core::{Backend, BackendKind, FatbinImage};

/// Every fat binary a command of `apps` launches from: kiln's own kernels
/// (cuda-sys: vadd, batch) and the anneal's (kiln-anneal builds its own), so
/// one backend runs any command.
pub fn modules() -> Vec<&'static FatbinImage> {
    cuda_sys::modules::ALL
        .iter()
        .chain(kiln_anneal::modules::ALL)
        .copied()
        .collect()
}

/// One line saying which backend runs and why.
pub fn describe_backend(backend: &Backend) -> String {
    match (backend.kind(), backend.device(), backend.cpu_reason()) {
        (BackendKind::Cuda, Some(device), _) => format!(
            "backend: cuda ({}, sm_{}{}, {} SMs)",
            device.name, device.compute_capability.0, device.compute_capability.1, device.sm_count
        ),
        (_, _, Some(reason)) => format!("backend: cpu ({reason})"),
        (kind, _, None) => format!("backend: {kind:?}"),
    }
}
