//! What a run may allocate: the host memory available (Linux's
//! `MemAvailable`) and a CUDA device's free memory (as gpu-core reads it),
//! compared with what a run needs before it allocates anything, refused in
//! one line with both figures.

/// A run that needs more memory than there is.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{what} needs {} of {kind} memory but {} is available; use a smaller size",
    needed_text(*.needed),
    human_bytes(*.available)
)]
#[non_exhaustive]
pub struct TooLarge {
    /// What needs it (`"anneal of 100000000000 x 64 points"`).
    pub what: String,
    /// `"host"` or `"device"`.
    pub kind: &'static str,
    /// Bytes needed; `None` when the figure overflows u64.
    pub needed: Option<u64>,
    /// Bytes available.
    pub available: u64,
}

/// [`TooLarge::needed`] in words.
fn needed_text(needed: Option<u64>) -> String {
    needed.map_or("more than 16 EiB".to_string(), human_bytes)
}

/// Bytes as GiB/MiB/KiB with one decimal.
pub fn human_bytes(bytes: u64) -> String {
    const UNITS: [(&str, u64); 3] = [("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)];
    for (unit, size) in UNITS {
        if bytes >= size {
            return format!("{:.1} {unit}", bytes as f64 / size as f64);
        }
    }
    format!("{bytes} bytes")
}

/// Host memory available to a new allocation: `MemAvailable` from
/// `/proc/meminfo` (`None` where there is none, e.g. not Linux).
pub fn host_available() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    parse_meminfo(&text)
}

fn parse_meminfo(text: &str) -> Option<u64> {
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}

/// Refuses `needed` bytes of host memory (`None`: overflowed) when more than
/// is available; passes when the figure cannot be read.
pub fn check_host(what: &str, needed: Option<u64>) -> Result<(), TooLarge> {
    check(what, "host", needed, host_available())
}

/// Refuses `needed` bytes of memory of `kind` against `available`.
pub fn check(
    what: &str,
    kind: &'static str,
    needed: Option<u64>,
    available: Option<u64>,
) -> Result<(), TooLarge> {
    match (needed, available) {
        (Some(n), Some(a)) if n <= a => Ok(()),
        (Some(_), None) => Ok(()),
        (needed, available) => Err(TooLarge {
            what: what.to_string(),
            kind,
            needed,
            available: available.unwrap_or(0),
        }),
    }
}

/// Free memory of CUDA device `ordinal`, as gpu-core reads it in the
/// device's primary context (`None` without a driver or that device, or when
/// the driver cannot say: the size check then passes, and the allocation
/// itself reports running out).
pub fn device_free(ordinal: usize) -> Option<u64> {
    gpu_core::device_memory(ordinal).ok().map(|m| m.free)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn meminfo_is_read_in_bytes() {
        let text = "MemTotal:       24000000 kB\nMemFree: 1 kB\nMemAvailable:   16000000 kB\n";
        assert_eq!(parse_meminfo(text), Some(16_000_000 * 1024));
        assert_eq!(parse_meminfo("MemTotal: 5 kB\n"), None);
    }

    #[test]
    fn refusals_give_both_figures_in_one_line() {
        let err = check("anneal", "host", Some(3 << 30), Some(1 << 30)).unwrap_err();
        assert_eq!(
            err.to_string(),
            "anneal needs 3.0 GiB of host memory but 1.0 GiB is available; use a smaller size"
        );
        let err = check("vadd", "host", None, Some(1 << 20)).unwrap_err();
        assert!(err.to_string().contains("more than 16 EiB"), "{err}");
        assert!(check("x", "host", Some(5), Some(5)).is_ok());
        assert!(check("x", "host", Some(5), None).is_ok());
    }
}
