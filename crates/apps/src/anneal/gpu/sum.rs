//! The sum of the distances through CUB, a static-library module called
//! over the C ABI (the only `unsafe` of the GPU engine), and its stand-ins
//! in a build without GPU code.

#[cfg(cuda_enabled)]
use gpu_core::Stream;
use gpu_core::{DeviceView, DeviceViewMut};

use super::AnnealError;

/// Bytes of scratch the CUB sum needs for `n` values.
#[cfg(cuda_enabled)]
pub(super) fn sum_scratch_bytes(n: u32) -> Result<usize, AnnealError> {
    let mut bytes = 0usize;
    // SAFETY: `bytes` is a valid out-pointer; the call only computes a size.
    let status = unsafe { cuda_sys::host::kiln_sum_f32_scratch_bytes(n, &mut bytes) };
    runtime_status("kiln_sum_f32_scratch_bytes", status.0)?;
    Ok(bytes)
}

/// `out[0] = Σ values[..n]` on `stream`, through CUB (static-library module).
#[cfg(cuda_enabled)]
pub(super) fn sum_f32(
    stream: &Stream,
    values: DeviceView<'_, f32>,
    n: u32,
    mut out: DeviceViewMut<'_, f32>,
    mut scratch: DeviceViewMut<'_, u8>,
) -> Result<(), AnnealError> {
    let missing = || AnnealError::Input("the CUB sum needs device buffers on a CUDA stream".into());
    if values.len() < n as usize || out.is_empty() {
        return Err(AnnealError::Input(format!(
            "the CUB sum of {n} values got {} values and {} outputs",
            values.len(),
            out.len()
        )));
    }
    let raw_stream = stream.raw_stream().ok_or_else(missing)?;
    let input = values.raw_device_ptr(stream).ok_or_else(missing)?;
    let output = out.raw_device_ptr(stream).ok_or_else(missing)?;
    let scratch_bytes = scratch.len();
    let scratch_ptr = scratch.raw_device_ptr(stream).ok_or_else(missing)?;
    // SAFETY: `input` holds at least `n` f32 and `output` at least one (both
    // checked above), `scratch` `scratch_bytes` bytes, all live device memory
    // of this stream's context for the duration of the call, which only
    // enqueues work on `raw_stream`, the same stream every later use of them
    // goes on.
    let status = unsafe {
        cuda_sys::host::kiln_sum_f32(
            input as *const f32,
            output as *mut f32,
            n,
            scratch_ptr as *mut std::ffi::c_void,
            scratch_bytes,
            raw_stream.cast(),
        )
    };
    runtime_status("kiln_sum_f32", status.0)
}

#[cfg(cuda_enabled)]
fn runtime_status(call: &'static str, status: i32) -> Result<(), AnnealError> {
    if status == 0 {
        Ok(())
    } else {
        Err(AnnealError::CudaRuntime { call, status })
    }
}

#[cfg(not(cuda_enabled))]
pub(super) fn sum_scratch_bytes(_n: u32) -> Result<usize, AnnealError> {
    Err(AnnealError::Input(
        "this build has no GPU code (no CUDA toolkit at build time)".into(),
    ))
}

#[cfg(not(cuda_enabled))]
pub(super) fn sum_f32(
    _stream: &gpu_core::Stream,
    _values: DeviceView<'_, f32>,
    _n: u32,
    _out: DeviceViewMut<'_, f32>,
    _scratch: DeviceViewMut<'_, u8>,
) -> Result<(), AnnealError> {
    Err(AnnealError::Input(
        "this build has no GPU code (no CUDA toolkit at build time)".into(),
    ))
}
