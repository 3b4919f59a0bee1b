//! Per-kernel, per-arch resource usage from `ptxas -v` (nvcc
//! `--resource-usage`): registers, spills, stack (local memory), shared
//! memory. Kept in the build manifest for tools that audit kernels.

use serde::{Deserialize, Serialize};

/// One kernel compiled for one arch.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KernelResources {
    /// Entry point name.
    pub kernel: String,
    /// `sm_90`.
    pub arch: String,
    /// Registers per thread.
    pub registers: u32,
    /// Stack frame bytes per thread (local memory).
    pub stack_bytes: u32,
    /// Spill stores, bytes.
    pub spill_store_bytes: u32,
    /// Spill loads, bytes.
    pub spill_load_bytes: u32,
    /// Static shared memory, bytes.
    pub shared_bytes: u32,
    /// Barriers used.
    pub barriers: u32,
}

impl KernelResources {
    /// A kernel whose figures are still to be read (all zero).
    fn unmeasured(kernel: String, arch: String) -> Self {
        Self {
            kernel,
            arch,
            registers: 0,
            stack_bytes: 0,
            spill_store_bytes: 0,
            spill_load_bytes: 0,
            shared_bytes: 0,
            barriers: 0,
        }
    }
}

/// Parses ptxas's verbose output. Lines for device functions that are not
/// entry points (`Function properties for helper`) without a preceding
/// `Compiling entry function` are ignored.
pub fn parse_ptxas_output(text: &str) -> Vec<KernelResources> {
    let mut out: Vec<KernelResources> = Vec::new();
    let mut current: Option<KernelResources> = None;
    for line in text.lines() {
        let line = line.trim();
        if let Some(rest) = line.strip_prefix("ptxas info    : Compiling entry function '") {
            out.extend(current.take());
            let mut parts = rest.split('\'');
            let kernel = parts.next().unwrap_or_default().to_string();
            let arch = parts.nth(1).unwrap_or_default().to_string();
            current = Some(KernelResources::unmeasured(kernel, arch));
            continue;
        }
        let Some(k) = current.as_mut() else { continue };
        if line.contains("bytes stack frame") {
            k.stack_bytes = number_before(line, "bytes stack frame");
            k.spill_store_bytes = number_before(line, "bytes spill stores");
            k.spill_load_bytes = number_before(line, "bytes spill loads");
        } else if line.contains("Used ") && line.contains("registers") {
            k.registers = number_before(line, "registers");
            k.barriers = number_before(line, "barriers");
            k.shared_bytes = number_before(line, "bytes smem");
        }
    }
    out.extend(current);
    out
}

/// Parses nvlink's verbose output (`nvcc -dlink --resource-usage`, for
/// separately compiled modules): `Function properties for 'k': (target:
/// sm_80)` then `used 24 registers, used 0 barriers, 0 stack, 0 bytes smem,
/// ...`. `single_arch` names the target where nvlink does not (one arch).
pub(crate) fn parse_nvlink_output(text: &str, single_arch: &str) -> Vec<KernelResources> {
    let mut out: Vec<KernelResources> = Vec::new();
    for line in text.lines() {
        let Some(rest) = line.trim().strip_prefix("nvlink info    : ") else {
            continue;
        };
        let (body, arch) = match rest.rsplit_once(" (target: ") {
            Some((body, arch)) => (body, arch.trim_end_matches(')').to_string()),
            None => (rest, single_arch.to_string()),
        };
        if let Some(name) = body.strip_prefix("Function properties for '") {
            let kernel = name.trim_end_matches(':').trim_end_matches('\'');
            out.push(KernelResources::unmeasured(kernel.to_string(), arch));
        } else if let (Some(k), true) = (out.last_mut(), body.starts_with("used ")) {
            k.registers = number_before(body, "registers");
            k.barriers = number_before(body, "barriers");
            k.stack_bytes = number_before(body, "stack");
            k.shared_bytes = number_before(body, "bytes smem");
        }
    }
    out
}

/// The integer just before `label` in `line` (0 when absent).
fn number_before(line: &str, label: &str) -> u32 {
    line.find(label)
        .and_then(|at| line[..at].split_whitespace().last())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_nvlink_resource_usage() {
        let text = "nvlink info    : 0 bytes gmem (target: sm_80)
nvlink info    : Function properties for 'ak': (target: sm_80)
nvlink info    : used 24 registers, used 1 barriers, 16 stack, 64 bytes smem, 360 bytes cmem[0], 0 bytes lmem (target: sm_80)
nvlink info    : Function properties for 'ak': (target: sm_90)
nvlink info    : used 22 registers, used 0 barriers, 0 stack, 0 bytes smem, 536 bytes cmem[0], 0 bytes lmem (target: sm_90)
";
        let r = parse_nvlink_output(text, "sm_80");
        assert_eq!(r.len(), 2);
        assert_eq!(
            (
                r[0].kernel.as_str(),
                r[0].arch.as_str(),
                r[0].registers,
                r[0].barriers
            ),
            ("ak", "sm_80", 24, 1)
        );
        assert_eq!((r[0].stack_bytes, r[0].shared_bytes), (16, 64));
        assert_eq!((r[1].arch.as_str(), r[1].registers), ("sm_90", 22));
        let single = "nvlink info    : Function properties for 'k':\nnvlink info    : used 8 registers, used 0 barriers, 0 stack, 0 bytes smem\n";
        assert_eq!(parse_nvlink_output(single, "sm_86")[0].arch, "sm_86");
    }

    #[test]
    fn parses_entries_for_each_arch() {
        let text = "ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'batch_stats' for 'sm_80'
ptxas info    : Function properties for batch_stats
    8 bytes stack frame, 4 bytes spill stores, 4 bytes spill loads
ptxas info    : Used 40 registers, used 1 barriers, 1024 bytes smem, 400 bytes cmem[0]
ptxas info    : Compile time = 3.2 ms
ptxas info    : Compiling entry function 'batch_stats' for 'sm_90'
ptxas info    : Function properties for batch_stats
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 38 registers, used 1 barriers, 1024 bytes smem
";
        let r = parse_ptxas_output(text);
        assert_eq!(r.len(), 2);
        assert_eq!(
            r[0],
            KernelResources {
                kernel: "batch_stats".into(),
                arch: "sm_80".into(),
                registers: 40,
                stack_bytes: 8,
                spill_store_bytes: 4,
                spill_load_bytes: 4,
                shared_bytes: 1024,
                barriers: 1,
            }
        );
        assert_eq!(
            (r[1].arch.as_str(), r[1].registers, r[1].spill_store_bytes),
            ("sm_90", 38, 0)
        );
    }
}
