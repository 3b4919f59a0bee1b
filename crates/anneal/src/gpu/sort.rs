//! The sort of the points by anchor through CUB, a static-library module
//! called over the C ABI (the only `unsafe` of the GPU engine), and its
//! stand-ins in a build without GPU code; and the choice between it and
//! `anneal_members` (the same member lists by one block per anchor reading
//! every assignment) for small problems.

#[cfg(cuda_enabled)]
use gpu_core::Stream;
use gpu_core::{DeviceView, DeviceViewMut};

use super::AnnealError;

/// `KILN_ANNEAL_MEMBERS`: how an iteration lists each anchor's members in
/// point order: `sort` (CUB's radix sort), `scan` (`anneal_members`) or
/// `auto` (scan up to [`SCAN_MAX_WORK`]). The same lists, so the same bits,
/// every way.
pub const MEMBERS_ENV: &str = "KILN_ANNEAL_MEMBERS";

/// The largest `n x m` that [`MembersBy::Auto`] lists by scan: its blocks
/// read `n x m` assignments, where the sort's four to six launches read
/// `n` a few times. Measured on the H200 (BENCHMARKS.md, session 7): at 10K
/// x 128 x 256 the sort took about 19 us an iteration.
pub const SCAN_MAX_WORK: u64 = 1 << 23;

/// How the member lists are made ([`MEMBERS_ENV`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MembersBy {
    /// By problem size: [`SCAN_MAX_WORK`].
    Auto,
    /// CUB's radix sort of `(assign, 0..n)`.
    Sort,
    /// `anneal_members`.
    Scan,
}

impl MembersBy {
    /// [`MEMBERS_ENV`]'s value (unset, empty or `auto`: [`MembersBy::Auto`]);
    /// anything else is an error naming the values it takes.
    pub fn from_env(value: Option<&str>) -> Result<Self, AnnealError> {
        let choices = [
            ("auto", Self::Auto),
            ("sort", Self::Sort),
            ("scan", Self::Scan),
        ];
        crate::setting::choose(MEMBERS_ENV, value, &choices, "sort, scan or auto")
    }

    /// Whether `n` points over `m` anchors are listed by scan.
    pub fn scans(self, n: u32, m: u32) -> bool {
        match self {
            Self::Auto => u64::from(n) * u64::from(m) <= SCAN_MAX_WORK,
            Self::Sort => false,
            Self::Scan => true,
        }
    }
}

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_member_lists_setting_reads_its_values_and_refuses_others() {
        for (value, by) in [
            (None, MembersBy::Auto),
            (Some(""), MembersBy::Auto),
            (Some(" AUTO "), MembersBy::Auto),
            (Some("sort"), MembersBy::Sort),
            (Some("Scan"), MembersBy::Scan),
        ] {
            assert_eq!(MembersBy::from_env(value).unwrap(), by, "{value:?}");
        }
        let err = MembersBy::from_env(Some("radix")).unwrap_err().to_string();
        assert!(
            err.contains(MEMBERS_ENV)
                && err.contains("radix")
                && err.contains("sort, scan or auto"),
            "{err}"
        );
    }

    #[test]
    fn auto_scans_up_to_the_work_bound_and_sorts_past_it() {
        let at = SCAN_MAX_WORK / 256;
        assert!(MembersBy::Auto.scans(at as u32, 256));
        assert!(!MembersBy::Auto.scans(at as u32 + 1, 256));
        assert!(MembersBy::Auto.scans(10_000, 256));
        // No overflow at the largest shapes.
        assert!(!MembersBy::Auto.scans(u32::MAX, u32::MAX));
        assert!(MembersBy::Scan.scans(u32::MAX, u32::MAX));
        assert!(!MembersBy::Sort.scans(1, 1));
    }
}
