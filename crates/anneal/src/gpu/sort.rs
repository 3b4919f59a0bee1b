//! The sort of the points by anchor through CUB, a static-library module
//! called over the C ABI (the only `unsafe` of the GPU engine), and its
//! stand-ins in a build without GPU code.

#[cfg(cuda_enabled)]
use gpu_core::Stream;
use gpu_core::{DeviceView, DeviceViewMut};

use super::AnnealError;

/// Bytes of scratch the CUB sort needs for `n` pairs (any key width).
#[cfg(cuda_enabled)]
pub(super) fn sort_scratch_bytes(n: u32) -> Result<usize, AnnealError> {
    let mut bytes = 0usize;
    // SAFETY: `bytes` is a valid out-pointer; the call only computes a size.
    let status =
        unsafe { crate::bindings::host::anneal_sort_pairs_u32_scratch_bytes(n, 32, &mut bytes) };
    runtime_status("anneal_sort_pairs_u32_scratch_bytes", status)?;
    Ok(bytes)
}

/// The two buffers a sort writes: sorted keys and their values.
pub(super) struct SortOut<'a> {
    pub(super) keys: DeviceViewMut<'a, u32>,
    pub(super) values: DeviceViewMut<'a, u32>,
}

/// Sorts the `n` pairs `(keys, values)` by key (keys below `2^end_bit`),
/// stably, into `out` on `stream`, through CUB (static-library module).
#[cfg(cuda_enabled)]
pub(super) fn sort_pairs_u32(
    stream: &Stream,
    (keys, values): (DeviceView<'_, u32>, DeviceView<'_, u32>),
    n: u32,
    end_bit: u32,
    out: SortOut<'_>,
    mut scratch: DeviceViewMut<'_, u8>,
) -> Result<(), AnnealError> {
    let missing = || AnnealError::internal("the CUB sort got buffers or a stream not of CUDA");
    let SortOut {
        keys: mut keys_out,
        values: mut values_out,
    } = out;
    let shortest = [keys.len(), values.len(), keys_out.len(), values_out.len()]
        .into_iter()
        .min()
        .unwrap_or(0);
    if shortest < n as usize || !(1..=32).contains(&end_bit) {
        return Err(AnnealError::internal(format!(
            "the CUB sort of {n} pairs on {end_bit} bits got buffers of {shortest} values"
        )));
    }
    let raw_stream = stream.raw_stream().ok_or_else(missing)?;
    let keys_in = keys.raw_device_ptr(stream).ok_or_else(missing)?;
    let values_in = values.raw_device_ptr(stream).ok_or_else(missing)?;
    let keys_out = keys_out.raw_device_ptr(stream).ok_or_else(missing)?;
    let values_out = values_out.raw_device_ptr(stream).ok_or_else(missing)?;
    let scratch_bytes = scratch.len();
    let scratch_ptr = scratch.raw_device_ptr(stream).ok_or_else(missing)?;
    // SAFETY: the four buffers hold at least `n` u32 each (checked above),
    // `scratch` `scratch_bytes` bytes (the function checks that this is
    // enough), all live device memory of this stream's context for the
    // duration of the call, which only enqueues work on `raw_stream`, the
    // same stream every later use of them goes on.
    let status = unsafe {
        crate::bindings::host::anneal_sort_pairs_u32(
            keys_in as *const u32,
            keys_out as *mut u32,
            values_in as *const u32,
            values_out as *mut u32,
            n,
            end_bit,
            scratch_ptr as *mut std::ffi::c_void,
            scratch_bytes,
            raw_stream.cast(),
        )
    };
    runtime_status("anneal_sort_pairs_u32", status)
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
pub(super) fn sort_scratch_bytes(_n: u32) -> Result<usize, AnnealError> {
    Err(AnnealError::NoGpuCode)
}

#[cfg(not(cuda_enabled))]
pub(super) fn sort_pairs_u32(
    _stream: &gpu_core::Stream,
    _pairs: (DeviceView<'_, u32>, DeviceView<'_, u32>),
    _n: u32,
    _end_bit: u32,
    out: SortOut<'_>,
    _scratch: DeviceViewMut<'_, u8>,
) -> Result<(), AnnealError> {
    // The fields are read only by the CUDA build; naming them here keeps a
    // build without a toolkit free of dead-code warnings.
    let SortOut { keys, values } = out;
    let _ = (keys, values);
    Err(AnnealError::NoGpuCode)
}
