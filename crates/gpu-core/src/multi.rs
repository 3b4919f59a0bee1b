//! Several GPUs in one process: one backend (its own context) per device, the
//! peer-access matrix, and NCCL collectives over one stream per device.
//!
//! NCCL is loaded at run time (`libnccl.so.2`, then `libnccl.so`), so kiln
//! builds and runs without it; [`Collective::new`] says when it is missing and
//! the caller goes on with one GPU.

use std::fmt;
use std::str::FromStr;
use std::sync::Mutex;

use cudarc::driver::DeviceSlice;
use cudarc::nccl::sys::ncclDataType_t;

use crate::backend::Backend;
use crate::device;
use crate::error::{driver, nccl_failed, CollectiveMismatch, CpuReason, Error};
use crate::ffi::driver::can_access_peer;
use crate::ffi::nccl::{self, AllReduceError};
use crate::memory::ViewMutRef;
use crate::stream::Stream;
use crate::{DeviceViewMut, FatbinImage, GpuRepr};

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
            (Some(a), Some(b)) => can_access_peer(a, b).unwrap_or(false),
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

/// Whether libnccl can be loaded (probes without panicking; the library is
/// loaded once and kept).
pub fn nccl_available() -> bool {
    nccl::nccl().is_ok()
}

/// The loaded NCCL's version, `(major, minor, patch)`; `None` when libnccl
/// cannot be loaded.
pub fn nccl_version() -> Option<(u32, u32, u32)> {
    nccl::nccl().ok().and_then(|nccl| nccl.version())
}

pub(crate) mod sealed {
    /// Keeps [`CollectiveElem`](super::CollectiveElem) to the types below,
    /// and carries each one's NCCL data type.
    pub trait Sealed {
        const NCCL_TYPE: super::ncclDataType_t;
    }

    impl Sealed for f32 {
        const NCCL_TYPE: super::ncclDataType_t = super::ncclDataType_t::ncclFloat32;
    }

    impl Sealed for u32 {
        const NCCL_TYPE: super::ncclDataType_t = super::ncclDataType_t::ncclUint32;
    }

    impl Sealed for f64 {
        const NCCL_TYPE: super::ncclDataType_t = super::ncclDataType_t::ncclFloat64;
    }
}

/// Element types NCCL reduces here: `f32`, `f64` and `u32`.
pub trait CollectiveElem: GpuRepr + sealed::Sealed {}

impl CollectiveElem for f32 {}
impl CollectiveElem for f64 {}
impl CollectiveElem for u32 {}

/// One NCCL communicator per stream (rank `r` is `streams[r]`, each on another
/// device), in one process.
///
/// Any CUDA stream works: a device's default stream (the legacy null stream of
/// its primary context, which NCCL's runtime uses too) or one from
/// [`Backend::new_stream`]. Calls are serialized by a lock, so a `Collective`
/// can be shared between threads.
#[derive(Debug)]
pub struct Collective {
    /// Dropped (communicators destroyed) before `streams`, whose contexts
    /// they live in.
    comms: Mutex<Vec<nccl::NcclComm>>,
    streams: Vec<Stream>,
}

impl Collective {
    /// Creates the communicators (`ncclCommInitAll`) over the streams'
    /// devices. Errors, never panics: [`Error::InvalidCollective`] for no
    /// stream, a CPU stream or two streams on one device (checked first);
    /// [`Error::NcclUnavailable`] when libnccl is missing (run on one GPU
    /// then); [`Error::Nccl`] when NCCL fails.
    pub fn new(streams: &[Stream]) -> Result<Self, Error> {
        let invalid = |m| Err(Error::InvalidCollective(m));
        if streams.is_empty() {
            return invalid(CollectiveMismatch::NoRanks);
        }
        let mut ordinals = Vec::with_capacity(streams.len());
        for (rank, stream) in streams.iter().enumerate() {
            let Some(device) = stream.backend().device() else {
                return invalid(CollectiveMismatch::CpuStream { rank });
            };
            if let Some(first) = ordinals.iter().position(|&o| o == device.ordinal) {
                return invalid(CollectiveMismatch::SameDevice {
                    ordinal: device.ordinal,
                    ranks: (first, rank),
                });
            }
            ordinals.push(device.ordinal);
        }
        let nccl = nccl::nccl().map_err(Error::NcclUnavailable)?;
        // Device ordinals come from `int`s (cuDeviceGet).
        let ordinals: Vec<i32> = ordinals
            .iter()
            .map(|&o| i32::try_from(o).unwrap_or(i32::MAX))
            .collect();
        let comms = nccl.comm_init_all(&ordinals).map_err(nccl_failed)?;
        Ok(Self {
            comms: Mutex::new(comms),
            streams: streams.to_vec(),
        })
    }

    /// How many ranks (devices).
    pub fn ranks(&self) -> usize {
        self.streams.len()
    }

    /// The streams, rank `r` at index `r`.
    pub fn streams(&self) -> &[Stream] {
        &self.streams
    }

    /// In-place sum all-reduce: `bufs[r]` is rank `r`'s buffer (on
    /// `streams[r]`'s device), all of the same length; afterwards each holds
    /// the element-wise sum over ranks. Enqueued on each rank's stream inside
    /// one NCCL group (`ncclGroupStart`/`End`), so one thread drives every
    /// rank without deadlock; does not synchronize. A mismatch is
    /// [`Error::InvalidCollective`] and enqueues nothing.
    pub fn all_reduce_sum<T: CollectiveElem>(
        &self,
        bufs: &mut [DeviceViewMut<'_, T>],
    ) -> Result<(), Error> {
        let invalid = |m| Error::InvalidCollective(m);
        if bufs.len() != self.ranks() {
            return Err(invalid(CollectiveMismatch::RankCount {
                expected: self.ranks(),
                got: bufs.len(),
            }));
        }
        let count = bufs.first().map_or(0, DeviceViewMut::len);
        let mut views = Vec::with_capacity(bufs.len());
        let mut streams = Vec::with_capacity(bufs.len());
        for (rank, (buf, stream)) in bufs.iter_mut().zip(&self.streams).enumerate() {
            if buf.len() != count {
                return Err(invalid(CollectiveMismatch::BufferLength {
                    rank,
                    len: buf.len(),
                    expected: count,
                }));
            }
            let cuda = stream
                .cuda_stream()
                .ok_or(invalid(CollectiveMismatch::CpuStream { rank }))?;
            let ViewMutRef::Cuda(view, local) = &mut buf.inner else {
                return Err(invalid(CollectiveMismatch::HostBuffer { rank }));
            };
            crate::memory::check_local(*local, cuda)?;
            let buffer = view.stream().context().ordinal();
            if buffer != cuda.context().ordinal() {
                return Err(invalid(CollectiveMismatch::BufferDevice {
                    rank,
                    buffer,
                    stream: cuda.context().ordinal(),
                }));
            }
            views.push(view);
            streams.push(cuda);
        }
        if count == 0 {
            return Ok(());
        }
        // A poisoned lock only means another thread panicked between NCCL
        // calls; the communicators are still valid.
        let comms = self.comms.lock().unwrap_or_else(|p| p.into_inner());
        nccl::all_reduce_sum(&comms, &streams, &mut views, count, T::NCCL_TYPE).map_err(|e| match e
        {
            AllReduceError::Invalid(what) => {
                Error::InvalidCollective(CollectiveMismatch::Other { what })
            }
            AllReduceError::Driver(source) => driver("bind context")(source),
            AllReduceError::Nccl(failed) => nccl_failed(failed),
        })
    }
}

impl Drop for Collective {
    /// Waits for each rank's stream before the communicators are destroyed,
    /// so that no collective is in flight. Errors are dropped: there is no
    /// later call to return them from, and the streams keep theirs.
    fn drop(&mut self) {
        for stream in &self.streams {
            let _ = stream.synchronize();
        }
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

    /// One line, naming the library and ending with the fallback.
    fn check_nccl_message(reason: crate::error::NcclUnavailable, starts: &str) {
        let message = Error::NcclUnavailable(reason).to_string();
        println!("{message}");
        assert!(!message.contains('\n'), "{message}");
        assert!(message.starts_with(starts), "{message}");
        assert!(message.ends_with("or use one gpu"), "{message}");
    }

    #[test]
    fn missing_nccl_is_one_line_naming_the_fix() {
        match nccl::nccl() {
            Ok(_) => println!("libnccl loads here"),
            Err(reason @ crate::error::NcclUnavailable::NotFound { .. }) => check_nccl_message(
                reason,
                "cannot load libnccl.so.2 or libnccl.so (libnccl.so.2",
            ),
            Err(reason) => check_nccl_message(reason, "libnccl.so"),
        }
        let not_found = crate::error::NcclUnavailable::NotFound {
            tried: nccl::NCCL_LIBRARIES,
            loader: "libnccl.so.2: cannot open shared object file: No such file or directory"
                .into(),
        };
        check_nccl_message(
            not_found,
            "cannot load libnccl.so.2 or libnccl.so (libnccl.so.2: cannot open",
        );
        let too_old = crate::error::NcclUnavailable::MissingSymbol {
            library: "libnccl.so.2",
            symbol: "ncclGroupEnd",
        };
        check_nccl_message(too_old, "libnccl.so.2 has no `ncclGroupEnd`");
    }

    #[test]
    fn element_types_match_their_nccl_types() {
        use sealed::Sealed;
        assert_eq!(nccl::nccl_type_size(f32::NCCL_TYPE), Some(4));
        assert_eq!(nccl::nccl_type_size(u32::NCCL_TYPE), Some(4));
        assert_eq!(nccl::nccl_type_size(f64::NCCL_TYPE), Some(8));
    }

    #[test]
    fn nccl_version_codes_decode() {
        assert_eq!(nccl::decode_nccl_version(22703), Some((2, 27, 3)));
        assert_eq!(nccl::decode_nccl_version(2804), Some((2, 8, 4)));
        assert_eq!(nccl::decode_nccl_version(0), None);
    }

    #[test]
    fn gpu_counts_print_as_they_parse() {
        for count in [GpuCount::All, GpuCount::Exactly(3)] {
            assert_eq!(count.to_string().parse::<GpuCount>().unwrap(), count);
        }
    }
}
