//! Several GPUs in one process: one backend (its own context) per device, and
//! the peer-access matrix.

use std::fmt;
use std::str::FromStr;

use crate::device;
use crate::error::{driver, CpuReason, Error};
use crate::raw;
use crate::{Backend, FatbinImage, Stream};

/// How many GPUs a caller asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GpuCount {
    /// Every visible device (at least one).
    All,
    /// This many devices, ordinals `0..n` (`n` at least 1).
    Exactly(usize),
}

impl FromStr for GpuCount {
    type Err = Error;

    /// `all` (any case) or a whole number of at least 1.
    fn from_str(s: &str) -> Result<Self, Error> {
        let value = s.trim();
        if value.eq_ignore_ascii_case("all") {
            return Ok(Self::All);
        }
        match value.parse::<usize>() {
            Ok(n) if n >= 1 => Ok(Self::Exactly(n)),
            _ => Err(Error::InvalidGpuCount {
                value: s.to_owned(),
            }),
        }
    }
}

impl fmt::Display for GpuCount {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::All => f.write_str("all"),
            Self::Exactly(n) => write!(f, "{n}"),
        }
    }
}

/// One CUDA backend per device, ordinals `0..k`, each its own context.
#[derive(Debug, Clone)]
pub struct Devices {
    backends: Vec<Backend>,
}

impl Devices {
    /// `All`: every visible device (at least one). `Exactly(n)`: devices
    /// `0..n`, or [`Error::NotEnoughGpus`] naming how many exist. No driver,
    /// no device, or modules built without GPU code:
    /// [`Error::GpusUnavailable`] (the caller falls back to the CPU).
    ///
    /// Each device loads every module in `modules` (none for memory-only
    /// work), as [`Backend::cuda`] does.
    pub fn open(modules: &[&'static FatbinImage], count: GpuCount) -> Result<Self, Error> {
        if count == GpuCount::Exactly(0) {
            return Err(Error::InvalidGpuCount { value: "0".into() });
        }
        let none = |reason| Error::GpusUnavailable {
            ordinal: None,
            reason,
        };
        if !modules.is_empty() && !modules.iter().any(|m| m.is_built()) {
            return Err(none(CpuReason::NoGpuCode));
        }
        device::init_driver().map_err(none)?;
        let visible =
            cudarc::driver::result::device::get_count().map_err(driver("cuDeviceGetCount"))?;
        let visible = usize::try_from(visible).unwrap_or(0);
        let wanted = match count {
            _ if visible == 0 => return Err(none(CpuReason::NoDevice)),
            GpuCount::All => visible,
            GpuCount::Exactly(n) if n <= visible => n,
            GpuCount::Exactly(n) => {
                return Err(Error::NotEnoughGpus {
                    requested: n,
                    available: visible,
                })
            }
        };
        let backends = (0..wanted)
            .map(|ordinal| {
                Backend::probe_cuda(ordinal, modules, false).map_err(|reason| {
                    Error::GpusUnavailable {
                        ordinal: Some(ordinal),
                        reason,
                    }
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self { backends })
    }

    /// The backends, device `i` at index `i`.
    pub fn backends(&self) -> &[Backend] {
        &self.backends
    }

    /// How many devices were opened (at least one).
    pub fn len(&self) -> usize {
        self.backends.len()
    }

    /// Always `false`: [`Devices::open`] opens at least one device.
    pub fn is_empty(&self) -> bool {
        self.backends.is_empty()
    }

    /// `peer[i][j]`: device `i` can access device `j`'s memory directly
    /// (`cuDeviceCanAccessPeer`); `true` on the diagonal. A query the driver
    /// fails counts as `false`. Peer access is not enabled here: NCCL sets up
    /// its own transport.
    pub fn peer_access(&self) -> Vec<Vec<bool>> {
        let handles: Vec<_> = self
            .backends
            .iter()
            .map(|b| b.cuda_state().map(|c| c.ctx.cu_device()))
            .collect();
        let can = |i: usize, j: usize| match (handles[i], handles[j]) {
            _ if i == j => true,
            (Some(a), Some(b)) => raw::can_access_peer(a, b).unwrap_or(false),
            _ => false,
        };
        (0..handles.len())
            .map(|i| (0..handles.len()).map(|j| can(i, j)).collect())
            .collect()
    }

    /// Each device's default stream, in device order.
    pub fn default_streams(&self) -> Vec<Stream> {
        self.backends.iter().map(Backend::default_stream).collect()
    }

    /// A new stream on each device, in device order.
    pub fn new_streams(&self) -> Result<Vec<Stream>, Error> {
        self.backends.iter().map(Backend::new_stream).collect()
    }
}

/// `2 gpus: 0 NVIDIA H200 (sm_90), 1 NVIDIA H200 (sm_90)`.
impl fmt::Display for Devices {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let plural = if self.len() == 1 { "" } else { "s" };
        write!(f, "{} gpu{plural}:", self.len())?;
        for (i, device) in self.backends.iter().filter_map(Backend::device).enumerate() {
            let sep = if i == 0 { " " } else { ", " };
            write!(
                f,
                "{sep}{} {} (sm_{})",
                device.ordinal,
                device.name,
                device.arch()
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(input: &str, expected: Option<GpuCount>) {
        match (input.parse::<GpuCount>(), expected) {
            (Ok(got), Some(want)) => assert_eq!(got, want, "{input:?}"),
            (Err(e), None) => {
                let msg = e.to_string();
                assert!(!msg.contains('\n'), "{msg}");
                assert!(msg.contains(&format!("`{input}`")), "{msg}");
                assert!(msg.contains("use `all`"), "{msg}");
            }
            (got, want) => panic!("{input:?}: got {got:?}, want {want:?}"),
        }
    }

    #[test]
    fn gpu_counts_parse() {
        check("all", Some(GpuCount::All));
        check("ALL", Some(GpuCount::All));
        check(" all ", Some(GpuCount::All));
        check("1", Some(GpuCount::Exactly(1)));
        check("8", Some(GpuCount::Exactly(8)));
        for bad in ["0", "-1", "", "two", "1.5", "all2", "0x2"] {
            check(bad, None);
        }
    }

    #[test]
    fn gpu_counts_print_as_they_parse() {
        for count in [GpuCount::All, GpuCount::Exactly(3)] {
            assert_eq!(count.to_string().parse::<GpuCount>().unwrap(), count);
        }
    }
}
