//! The static module's host launchers (`kernels/moe/`, two sources archived
//! into one library), called through `extern "C"` as candle calls its MoE
//! and sort launchers: `cp_argsort_f32` and `cp_moe_expert_offsets`, each a
//! C function that launches with `<<<>>>` on the stream it is given. Lengths
//! are checked here, device pointers and the stream come from gpu-core, and a
//! CUDA status becomes an error. On the CPU backend the reference runs.

use gpu_core::{BackendKind, Stream};

use crate::reference;

/// What a host launcher can fail with.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HostError {
    /// gpu-core refused a copy or an allocation.
    #[error(transparent)]
    Gpu(#[from] gpu_core::Error),
    /// The launcher returned a CUDA runtime error.
    #[error("{call} failed with CUDA runtime error {status}")]
    CudaRuntime {
        /// The launcher.
        call: &'static str,
        /// Its `cudaError_t`.
        status: i32,
    },
    /// The input does not have the shape the launcher takes.
    #[error("{call}: {what}; {fix}")]
    Shape {
        /// The launcher.
        call: &'static str,
        /// What is wrong.
        what: String,
        /// How to fix it.
        fix: &'static str,
    },
    /// A CUDA stream in a build that carries no GPU code.
    #[error("this build has no GPU code (no CUDA toolkit at build time); use the CPU backend")]
    NoGpuCode,
}

/// The widest row the argsort sorts (one block of padded columns).
pub const MAX_ARGSORT_COLS: usize = 1024;
/// The most experts the routing scan takes (one block).
pub const MAX_EXPERTS: usize = 1024;

/// The indices that sort each row of `x` (`ncols` wide), ascending or not.
pub fn argsort_f32(
    stream: &Stream,
    x: &[f32],
    ncols: usize,
    ascending: bool,
) -> Result<Vec<u32>, HostError> {
    let call = "cp_argsort_f32";
    if ncols == 0 || ncols > MAX_ARGSORT_COLS || !x.len().is_multiple_of(ncols) {
        return Err(HostError::Shape {
            call,
            what: format!("{} values do not make rows of {ncols}", x.len()),
            fix: "pass whole rows of 1 to 1024 columns",
        });
    }
    if stream.backend().kind() == BackendKind::Cpu {
        return Ok(reference::argsort(x, ncols, ascending));
    }
    gpu::argsort_f32(stream, x, ncols, ascending)
}

/// Per expert, how many of `expert_ids` go to it and where its slots start
/// (an exclusive scan of the counts); ids `>= num_experts` are dropped.
pub fn moe_expert_offsets(
    stream: &Stream,
    expert_ids: &[u32],
    num_experts: usize,
) -> Result<(Vec<u32>, Vec<u32>), HostError> {
    if num_experts == 0 || num_experts > MAX_EXPERTS {
        return Err(HostError::Shape {
            call: "cp_moe_expert_offsets",
            what: format!("{num_experts} experts"),
            fix: "route to 1 to 1024 experts",
        });
    }
    if stream.backend().kind() == BackendKind::Cpu {
        return Ok(reference::expert_offsets(expert_ids, num_experts));
    }
    gpu::moe_expert_offsets(stream, expert_ids, num_experts)
}

#[cfg(cuda_enabled)]
mod gpu {
    use std::ffi::c_void;

    use gpu_core::Stream;

    use super::HostError;

    // The launchers of kernels/moe/, archived into the static library the
    // build script links (libcp_moe.a).
    extern "C" {
        fn cp_argsort_f32(
            x: *const f32,
            dst: *mut u32,
            nrows: i32,
            ncols: i32,
            ascending: i32,
            stream: *mut c_void,
        ) -> i32;
        fn cp_moe_expert_offsets(
            expert_ids: *const u32,
            n: usize,
            num_experts: u32,
            counts: *mut u32,
            offsets: *mut u32,
            stream: *mut c_void,
        ) -> i32;
    }

    const CUDA: &str = "a CUDA stream's buffers are device buffers";

    fn status(call: &'static str, status: i32) -> Result<(), HostError> {
        match status {
            0 => Ok(()),
            status => Err(HostError::CudaRuntime { call, status }),
        }
    }

    pub(super) fn argsort_f32(
        stream: &Stream,
        x: &[f32],
        ncols: usize,
        ascending: bool,
    ) -> Result<Vec<u32>, HostError> {
        let nrows = x.len() / ncols;
        let input = stream.to_device(x)?;
        let mut output = stream.alloc_zeros::<u32>(x.len().max(1))?;
        let x_ptr = input.view().raw_device_ptr(stream).expect(CUDA);
        let dst = output.view_mut().raw_device_ptr(stream).expect(CUDA);
        let raw_stream = stream.raw_stream().expect(CUDA);
        let rows = i32::try_from(nrows).map_err(|_| HostError::Shape {
            call: "cp_argsort_f32",
            what: format!("{nrows} rows"),
            fix: "sort at most 2^31 - 1 rows per call",
        })?;
        // SAFETY: `input` holds `nrows * ncols` f32 and `output` as many u32
        // (ncols <= 1024, checked by the caller), both live device memory of
        // this stream's context until the copy below, which waits for the
        // work enqueued on the same stream.
        let code = unsafe {
            cp_argsort_f32(
                x_ptr as *const f32,
                dst as *mut u32,
                rows,
                ncols as i32,
                i32::from(ascending),
                raw_stream,
            )
        };
        status("cp_argsort_f32", code)?;
        let mut all = stream.to_host(&output.view())?;
        all.truncate(x.len());
        Ok(all)
    }

    pub(super) fn moe_expert_offsets(
        stream: &Stream,
        expert_ids: &[u32],
        num_experts: usize,
    ) -> Result<(Vec<u32>, Vec<u32>), HostError> {
        let ids = stream.to_device(expert_ids)?;
        let mut counts = stream.alloc_zeros::<u32>(num_experts)?;
        let mut offsets = stream.alloc_zeros::<u32>(num_experts)?;
        let ids_ptr = ids.view().raw_device_ptr(stream).expect(CUDA);
        let counts_ptr = counts.view_mut().raw_device_ptr(stream).expect(CUDA);
        let offsets_ptr = offsets.view_mut().raw_device_ptr(stream).expect(CUDA);
        let raw_stream = stream.raw_stream().expect(CUDA);
        // SAFETY: `ids` holds `expert_ids.len()` u32 (none read when 0),
        // `counts` and `offsets` `num_experts` (<= 1024, checked by the
        // caller) each; all are live device memory of this stream's context until the copies
        // below, which wait for the work enqueued on the same stream.
        let code = unsafe {
            cp_moe_expert_offsets(
                ids_ptr as *const u32,
                expert_ids.len(),
                num_experts as u32,
                counts_ptr as *mut u32,
                offsets_ptr as *mut u32,
                raw_stream,
            )
        };
        status("cp_moe_expert_offsets", code)?;
        Ok((
            stream.to_host(&counts.view())?,
            stream.to_host(&offsets.view())?,
        ))
    }
}

/// A build without GPU code has no launchers: a CUDA stream cannot exist
/// here (the backend falls back to the CPU), but say so rather than panic.
#[cfg(not(cuda_enabled))]
mod gpu {
    use gpu_core::Stream;

    use super::HostError;

    pub(super) fn argsort_f32(
        _: &Stream,
        _: &[f32],
        _: usize,
        _: bool,
    ) -> Result<Vec<u32>, HostError> {
        Err(HostError::NoGpuCode)
    }

    pub(super) fn moe_expert_offsets(
        _: &Stream,
        _: &[u32],
        _: usize,
    ) -> Result<(Vec<u32>, Vec<u32>), HostError> {
        Err(HostError::NoGpuCode)
    }
}
