//! The ELF side of a fat binary: `cuobjdump --dump-resource-usage` parsed
//! into one record per function per real arch.

use super::ptx::member_line;

/// One function's resource table in one ELF.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SassFunction {
    /// `sm_90`.
    pub(crate) arch: String,
    /// The archive member it came from (`lib.a:reduce.o`), empty for a
    /// fat binary.
    pub(crate) member: String,
    pub(crate) function: String,
    pub(crate) registers: u32,
    /// Stack frame bytes per thread.
    pub(crate) stack_bytes: u32,
    /// Non-stack local memory bytes per thread.
    pub(crate) local_bytes: u32,
    /// Shared memory bytes per block as the ELF records it (on sm_90 and
    /// newer this includes 1 KiB the system reserves when any is used).
    pub(crate) shared_bytes: u32,
}

/// Parses `cuobjdump --dump-resource-usage` output (fat binaries, and
/// archives with their `member ...:` lines).
pub(crate) fn parse_resource_usage(dump: &str) -> Vec<SassFunction> {
    let mut out = Vec::new();
    let mut arch = String::new();
    let mut member = String::new();
    let mut function: Option<String> = None;
    for line in dump.lines() {
        let line = line.trim();
        if let Some(name) = member_line(line) {
            member = name.to_string();
            function = None;
        } else if let Some(a) = line.strip_prefix("arch = ") {
            arch = a.to_string();
            function = None;
        } else if let Some(name) = line.strip_prefix("Function ") {
            function = Some(name.trim_end_matches(':').to_string());
        } else if line.starts_with("REG:") {
            if let Some(function) = function.take() {
                out.push(SassFunction {
                    arch: arch.clone(),
                    member: member.clone(),
                    function,
                    registers: field(line, "REG"),
                    stack_bytes: field(line, "STACK"),
                    local_bytes: field(line, "LOCAL"),
                    shared_bytes: field(line, "SHARED"),
                });
            }
        }
    }
    out
}

/// `KEY:N` in a `REG:40 STACK:0 ...` line (0 when absent).
fn field(line: &str, key: &str) -> u32 {
    line.split_whitespace()
        .filter_map(|t| t.split_once(':'))
        .find(|(k, _)| *k == key)
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_functions_per_arch() {
        let dump = "
member lib.a:reduce.o:

Fatbin elf code:
================
arch = sm_80
code version = [1,8]

Resource usage:
 Common:
  GLOBAL:0
 Function batch_stats:
  REG:40 STACK:8 SHARED:1024 LOCAL:4 CONSTANT[0]:392 TEXTURE:0 SURFACE:0 SAMPLER:0

Fatbin ptx code:
================
arch = sm_90

Fatbin elf code:
================
arch = sm_90

Resource usage:
 Common:
  GLOBAL:0
 Function batch_stats:
  REG:38 STACK:0 SHARED:2048 LOCAL:0 CONSTANT[0]:568 TEXTURE:0 SURFACE:0 SAMPLER:0
";
        let f = parse_resource_usage(dump);
        assert_eq!(
            f[0],
            SassFunction {
                arch: "sm_80".into(),
                member: "lib.a:reduce.o".into(),
                function: "batch_stats".into(),
                registers: 40,
                stack_bytes: 8,
                local_bytes: 4,
                shared_bytes: 1024,
            }
        );
        assert_eq!((f[1].arch.as_str(), f[1].registers), ("sm_90", 38));
        assert_eq!(f.len(), 2);
    }
}
