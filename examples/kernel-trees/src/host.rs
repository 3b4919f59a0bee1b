//! The static-library modules' host launchers, wrapped safely: `reduce`
//! (`kt_sum_*`, a templated reduction launched with `<<<>>>`) and
//! `rdc_static` (`kt_rdc_round_trip`, kernels linked by separate
//! compilation). Lengths are checked, device pointers and the stream come
//! from gpu-core, and a CUDA status becomes an error. On the CPU backend, or
//! in a build without GPU code, the CPU reference runs instead.

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
    /// A CUDA stream in a build that carries no GPU code.
    #[error("this build has no GPU code (no CUDA toolkit at build time); use the CPU backend")]
    NoGpuCode,
}

fn on_cpu(stream: &Stream) -> bool {
    stream.backend().kind() == BackendKind::Cpu
}

/// The sum of `x` (wrapping), by the templated reduction on the GPU.
pub fn sum_u32(stream: &Stream, x: &[u32]) -> Result<u32, HostError> {
    if on_cpu(stream) {
        return Ok(reference::sum_u32(x));
    }
    gpu::sum_u32(stream, x)
}

/// The sum of `x`, by the templated reduction on the GPU (in another order
/// than [`reference::sum_f32`], so equal within rounding only).
pub fn sum_f32(stream: &Stream, x: &[f32]) -> Result<f32, HostError> {
    if on_cpu(stream) {
        return Ok(reference::sum_f32(x) as f32);
    }
    gpu::sum_f32(stream, x)
}

/// `rdc_backward(rdc_forward(x))`, both launched by the static module's
/// host launcher.
pub fn rdc_round_trip(stream: &Stream, x: &[f32]) -> Result<Vec<f32>, HostError> {
    if on_cpu(stream) {
        return Ok(reference::rdc_backward(&reference::rdc_forward(x)));
    }
    gpu::rdc_round_trip(stream, x)
}

#[cfg(cuda_enabled)]
mod gpu {
    use std::ffi::c_void;

    use gpu_core::{DeviceBuffer, GpuRepr, Stream};

    use super::HostError;
    use crate::bindings::host;

    /// A launcher's device buffers: input, output and scratch.
    type Buffers<T> = (DeviceBuffer<T>, DeviceBuffer<T>, DeviceBuffer<T>);

    fn buffers<T: GpuRepr>(
        stream: &Stream,
        x: &[T],
        out: usize,
        scratch: usize,
    ) -> Result<Buffers<T>, HostError> {
        Ok((
            stream.to_device(x)?,
            stream.alloc_zeros(out)?,
            stream.alloc_zeros(scratch.max(1))?,
        ))
    }

    /// Raw pointers of the three buffers and the stream, for one C call.
    struct Raw {
        stream: *mut c_void,
        input: u64,
        output: u64,
        scratch: u64,
    }

    fn raw<T: GpuRepr>(
        stream: &Stream,
        input: &DeviceBuffer<T>,
        output: &mut DeviceBuffer<T>,
        scratch: &mut DeviceBuffer<T>,
    ) -> Raw {
        let cuda = "a CUDA stream's buffers are device buffers";
        Raw {
            stream: stream.raw_stream().expect(cuda),
            input: input.view().raw_device_ptr(stream).expect(cuda),
            output: output.view_mut().raw_device_ptr(stream).expect(cuda),
            scratch: scratch.view_mut().raw_device_ptr(stream).expect(cuda),
        }
    }

    fn status(call: &'static str, status: i32) -> Result<(), HostError> {
        match status {
            0 => Ok(()),
            status => Err(HostError::CudaRuntime { call, status }),
        }
    }

    /// The signature `kt_sum_f32` and `kt_sum_u32` share, for element `T`.
    type SumFn<T> = unsafe extern "C" fn(
        *const T,
        *mut T,
        *mut T,
        usize,
        crate::bindings::types::cudaStream_t,
    ) -> i32;

    /// Runs one of the sum launchers over `x` and reads the sum back.
    ///
    /// # Safety
    /// `launcher` must be `kt_sum_*` for element type `T`.
    unsafe fn sum<T: GpuRepr>(
        stream: &Stream,
        x: &[T],
        call: &'static str,
        launcher: SumFn<T>,
    ) -> Result<T, HostError> {
        // SAFETY: a pure function of `n`.
        let scratch = unsafe { host::kt_sum_scratch_elems(x.len()) };
        let (input, mut output, mut scratch) = buffers(stream, x, 1, scratch)?;
        let p = raw(stream, &input, &mut output, &mut scratch);
        // SAFETY: `launcher` takes `T` (the caller's promise); `input` holds
        // `x.len()` of them, `output` one, `scratch` the elements
        // kt_sum_scratch_elems asked for; all are live device memory of this
        // stream's context until the copy below, which waits for the work
        // enqueued on the same stream.
        let code = unsafe {
            launcher(
                p.input as *const T,
                p.output as *mut T,
                p.scratch as *mut T,
                x.len(),
                p.stream.cast(),
            )
        };
        status(call, code)?;
        Ok(stream.to_host(&output.view())?[0])
    }

    pub(super) fn sum_u32(stream: &Stream, x: &[u32]) -> Result<u32, HostError> {
        // SAFETY: kt_sum_u32 sums u32.
        unsafe { sum(stream, x, "kt_sum_u32", host::kt_sum_u32) }
    }

    pub(super) fn sum_f32(stream: &Stream, x: &[f32]) -> Result<f32, HostError> {
        // SAFETY: kt_sum_f32 sums f32.
        unsafe { sum(stream, x, "kt_sum_f32", host::kt_sum_f32) }
    }

    pub(super) fn rdc_round_trip(stream: &Stream, x: &[f32]) -> Result<Vec<f32>, HostError> {
        let (input, mut output, mut tmp) = buffers(stream, x, x.len(), x.len())?;
        let p = raw(stream, &input, &mut output, &mut tmp);
        // SAFETY: `input`, `tmp` and `output` each hold `x.len()` f32 of live
        // device memory on this stream's context until the copy below.
        let code = unsafe {
            host::kt_rdc_round_trip(
                p.input as *const f32,
                p.scratch as *mut f32,
                p.output as *mut f32,
                x.len(),
                p.stream.cast(),
            )
        };
        status("kt_rdc_round_trip", code)?;
        Ok(stream.to_host(&output.view())?)
    }
}

/// A build without GPU code has no launchers: a CUDA stream cannot exist
/// here (the backend falls back to the CPU), but say so rather than panic.
#[cfg(not(cuda_enabled))]
mod gpu {
    use gpu_core::Stream;

    use super::HostError;

    pub(super) fn sum_u32(_: &Stream, _: &[u32]) -> Result<u32, HostError> {
        Err(HostError::NoGpuCode)
    }

    pub(super) fn sum_f32(_: &Stream, _: &[f32]) -> Result<f32, HostError> {
        Err(HostError::NoGpuCode)
    }

    pub(super) fn rdc_round_trip(_: &Stream, _: &[f32]) -> Result<Vec<f32>, HostError> {
        Err(HostError::NoGpuCode)
    }
}
