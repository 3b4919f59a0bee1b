//! The one place a chosen backend becomes an engine: a [`Target`] (the CPU,
//! CUDA GPUs, or a wgpu device) builds the [`Engine`] that runs a
//! [`Problem`] on it. [`crate::run`], [`crate::run_sharded`], the encode's
//! CPU path and kiln's CLI and benchmarks all build their engines here; a
//! rank of several processes is given its `Target` too
//! ([`crate::distributed::Meeting::join`]), which builds the rank's engine
//! over the same engines.

use gpu_core::{Backend, BackendKind};

use crate::{engine::Engine, error::AnnealError, input::Problem};

/// What an anneal runs on.
#[derive(Debug, Clone, Copy)]
pub enum Target<'a> {
    /// The CPU engine ([`crate::cpu::CpuEngine`]).
    Cpu,
    /// The GPU engine over these CUDA backends, one per GPU (one: no NCCL;
    /// [`crate::gpu::GpuEngine`]).
    Gpus(&'a [Backend]),
    /// The wgpu engine on this device ([`crate::wgpu::WgpuEngine`]).
    #[cfg(feature = "wgpu")]
    Wgpu(&'a crate::wgpu::WgpuDevice),
}

impl<'a> Target<'a> {
    /// The target a gpu-core backend stands for: its GPU on the CUDA
    /// backend, the CPU otherwise.
    pub fn of(backend: &'a Backend) -> Self {
        if backend.kind() == BackendKind::Cuda {
            Target::Gpus(std::slice::from_ref(backend))
        } else {
            Target::Cpu
        }
    }

    /// The CUDA backends the target runs on (none for the CPU and wgpu).
    pub fn gpus(&self) -> &'a [Backend] {
        match self {
            Target::Gpus(backends) => backends,
            _ => &[],
        }
    }

    /// What the target is, in a few words, for messages.
    pub fn describe(&self) -> String {
        match self {
            Target::Cpu => "the CPU".into(),
            Target::Gpus(backends) => format!("{} CUDA GPUs", backends.len()),
            #[cfg(feature = "wgpu")]
            Target::Wgpu(_) => "a wgpu device".into(),
        }
    }

    /// The engine for `problem` on this target, set up: the points uploaded
    /// (on GPUs, every upload finished when this returns, so that the setup
    /// can be timed apart from the run).
    pub fn engine(&self, problem: &Problem<'_>) -> Result<Box<dyn Engine>, AnnealError> {
        Ok(match self {
            Target::Cpu => Box::new(crate::cpu::CpuEngine::new(problem)),
            Target::Gpus(backends) => {
                let engine = crate::gpu::GpuEngine::sharded(backends, problem)?;
                for backend in backends.iter() {
                    backend.synchronize()?;
                }
                Box::new(engine)
            }
            #[cfg(feature = "wgpu")]
            Target::Wgpu(device) => Box::new(crate::wgpu::WgpuEngine::new(device, problem)?),
        })
    }
}
