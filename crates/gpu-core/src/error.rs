//! The one error type of gpu-core, and the reasons the CPU backend was chosen.
//!
//! Variants carry context (module, kernel, archs, lengths) instead of strings;
//! messages are lower-case and say what to do.

use std::fmt;

pub use cudarc::driver::DriverError;

/// `sm_XX` list as `sm_80,sm_90`.
pub(crate) struct Archs<'a>(pub(crate) &'a [u32]);

impl fmt::Display for Archs<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() {
            return f.write_str("none");
        }
        for (i, arch) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "sm_{arch}")?;
        }
        Ok(())
    }
}

/// Why [`Backend::auto`](crate::Backend::auto) chose the CPU.
#[derive(Debug)]
#[non_exhaustive]
pub enum CpuReason {
    /// `KILN_BACKEND=cpu`, or [`Backend::cpu`](crate::Backend::cpu).
    Forced,
    /// No module handed in carries GPU code (built without a CUDA toolkit).
    NoGpuCode,
    /// `libcuda` could not be loaded.
    NoDriver,
    /// The driver loaded but `cuInit` failed.
    DriverInit(DriverError),
    /// The driver reports no CUDA device.
    NoDevice,
    /// A module has neither SASS nor PTX the device can run.
    ArchMismatch {
        /// The module's name.
        module: &'static str,
        /// Real archs inside.
        sass: &'static [u32],
        /// Virtual archs inside.
        ptx: &'static [u32],
        /// The device's arch (`major * 10 + minor`).
        device_arch: u32,
    },
    /// Creating the context or loading a module failed.
    Unusable(Box<Error>),
}

impl fmt::Display for CpuReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Forced => f.write_str("cpu backend requested"),
            Self::NoGpuCode => f.write_str("no toolkit at build time"),
            Self::NoDriver => f.write_str("no driver"),
            Self::DriverInit(e) => write!(f, "driver failed to initialize ({e})"),
            Self::NoDevice => f.write_str("no device"),
            Self::ArchMismatch {
                sass,
                ptx,
                device_arch,
                ..
            } => {
                let mut all: Vec<u32> = sass.iter().chain(ptx.iter()).copied().collect();
                all.sort_unstable();
                all.dedup();
                write!(
                    f,
                    "fat binary has {}, device is sm_{device_arch}",
                    Archs(&all)
                )
            }
            Self::Unusable(e) => write!(f, "device unusable: {e}"),
        }
    }
}

/// Which launch limit a [`LaunchConfig`](crate::LaunchConfig) broke.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum LaunchLimit {
    /// A grid or block dimension is zero.
    ZeroDimension,
    /// `block.0 * block.1 * block.2` is over the kernel's limit.
    ThreadsPerBlock {
        /// Threads asked for.
        requested: u64,
        /// The kernel's (or device's) maximum.
        max: u32,
    },
    /// A block dimension is over the device's limit.
    BlockDim {
        /// Axis: 0 = x, 1 = y, 2 = z.
        axis: u8,
        /// Asked for.
        requested: u32,
        /// The device's maximum.
        max: u32,
    },
    /// A grid dimension is over the device's limit.
    GridDim {
        /// Axis: 0 = x, 1 = y, 2 = z.
        axis: u8,
        /// Asked for.
        requested: u32,
        /// The device's maximum.
        max: u32,
    },
    /// Dynamic shared memory is over what the kernel may use.
    SharedMemory {
        /// Bytes asked for.
        requested: u32,
        /// Bytes available for dynamic shared memory.
        max: u32,
    },
}

impl fmt::Display for LaunchLimit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const AXES: [&str; 3] = ["x", "y", "z"];
        match *self {
            Self::ZeroDimension => f.write_str("a grid or block dimension is zero; use at least 1"),
            Self::ThreadsPerBlock { requested, max } => {
                write!(f, "{requested} threads per block, the kernel allows {max}; use smaller blocks")
            }
            Self::BlockDim { axis, requested, max } => {
                let axis = AXES[usize::from(axis).min(2)];
                write!(f, "block.{axis} is {requested}, the device allows {max}")
            }
            Self::GridDim { axis, requested, max } => {
                let axis = AXES[usize::from(axis).min(2)];
                write!(f, "grid.{axis} is {requested}, the device allows {max}")
            }
            Self::SharedMemory { requested, max } => write!(
                f,
                "{requested} bytes of dynamic shared memory, the kernel may use {max}; use less or opt in with the function attribute"
            ),
        }
    }
}

/// A `#[repr(C)]` type's Rust layout differs from the C compiler's.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum LayoutMismatch {
    /// `size_of` differs.
    Size {
        /// The C type's name.
        type_name: &'static str,
        /// Rust's value.
        rust: usize,
        /// The C compiler's value.
        c: usize,
    },
    /// `align_of` differs.
    Align {
        /// The C type's name.
        type_name: &'static str,
        /// Rust's value.
        rust: usize,
        /// The C compiler's value.
        c: usize,
    },
    /// A field's offset differs.
    FieldOffset {
        /// The C type's name.
        type_name: &'static str,
        /// The field.
        field: String,
        /// Rust's offset.
        rust: usize,
        /// The C compiler's offset.
        c: usize,
    },
    /// A field is on one side only.
    MissingField {
        /// The C type's name.
        type_name: &'static str,
        /// The field.
        field: String,
        /// Whether Rust has it (otherwise only C does).
        in_rust: bool,
    },
}

impl fmt::Display for LayoutMismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const FIX: &str = "regenerate the bindings with `cargo xtask codegen` or fix the struct";
        match self {
            Self::Size { type_name, rust, c } => {
                write!(
                    f,
                    "`{type_name}` is {rust} bytes in rust but {c} in c; {FIX}"
                )
            }
            Self::Align { type_name, rust, c } => {
                write!(
                    f,
                    "`{type_name}` is aligned to {rust} in rust but {c} in c; {FIX}"
                )
            }
            Self::FieldOffset {
                type_name,
                field,
                rust,
                c,
            } => write!(
                f,
                "`{type_name}.{field}` is at offset {rust} in rust but {c} in c; {FIX}"
            ),
            Self::MissingField {
                type_name,
                field,
                in_rust,
            } => {
                let (has, lacks) = if *in_rust {
                    ("rust", "c")
                } else {
                    ("c", "rust")
                };
                write!(
                    f,
                    "`{type_name}.{field}` exists in {has} but not in {lacks}; {FIX}"
                )
            }
        }
    }
}

impl std::error::Error for LayoutMismatch {}

/// Why libnccl could not be used; NCCL is loaded at run time, so a missing
/// library is an error of [`Collective::new`](crate::Collective::new), not of
/// the build.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum NcclUnavailable {
    /// No library of these names could be loaded.
    NotFound {
        /// The names tried, in order (sonames, looked up on the loader path).
        tried: &'static [&'static str],
        /// What the loader said about the first name.
        loader: String,
    },
    /// The library lacks a function gpu-core calls.
    MissingSymbol {
        /// The library loaded.
        library: &'static str,
        /// The function it lacks.
        symbol: &'static str,
    },
}

impl fmt::Display for NcclUnavailable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const FIX: &str = "or run with --gpus 1";
        match self {
            Self::NotFound { tried, loader } => write!(
                f,
                "cannot load {} ({}); install NCCL 2 or put its lib dir on LD_LIBRARY_PATH, {FIX}",
                tried.join(" or "),
                loader.replace('\n', " ")
            ),
            Self::MissingSymbol { library, symbol } => write!(
                f,
                "{library} has no `{symbol}`; install a current NCCL 2, {FIX}"
            ),
        }
    }
}

/// An NCCL call's failure: its `ncclResult_t` and NCCL's description of it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct NcclError {
    /// The `ncclResult_t` value.
    pub code: i32,
    /// `ncclGetErrorString` of it.
    pub message: String,
}

impl fmt::Display for NcclError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "nccl error {} ({})", self.code, self.message)
    }
}

impl std::error::Error for NcclError {}

/// Ranks, streams or buffers handed to a [`Collective`](crate::Collective)
/// that do not fit together; nothing was enqueued.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum CollectiveMismatch {
    /// No stream was given.
    NoRanks,
    /// A rank's stream is on the CPU backend.
    CpuStream {
        /// The rank.
        rank: usize,
    },
    /// Two ranks' streams are on the same device (NCCL hangs on that).
    SameDevice {
        /// The device.
        ordinal: usize,
        /// The two ranks.
        ranks: (usize, usize),
    },
    /// A call passed another number of buffers than there are ranks.
    RankCount {
        /// Ranks of the collective.
        expected: usize,
        /// Buffers passed.
        got: usize,
    },
    /// A rank's buffer has another length than rank 0's.
    BufferLength {
        /// The rank.
        rank: usize,
        /// Its buffer's length, in elements.
        len: usize,
        /// Rank 0's buffer's length.
        expected: usize,
    },
    /// A rank's buffer is host memory (from the CPU backend).
    HostBuffer {
        /// The rank.
        rank: usize,
    },
    /// A rank's buffer is on another device than its stream.
    BufferDevice {
        /// The rank.
        rank: usize,
        /// The buffer's device.
        buffer: usize,
        /// The stream's device.
        stream: usize,
    },
}

impl fmt::Display for CollectiveMismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Self::NoRanks => f.write_str("no stream given; pass one stream per device"),
            Self::CpuStream { rank } => write!(
                f,
                "rank {rank}'s stream is on the cpu backend; give each rank a cuda stream (from `Devices`)"
            ),
            Self::SameDevice { ordinal, ranks: (a, b) } => write!(
                f,
                "ranks {a} and {b} are both on gpu {ordinal}; give each rank a stream on its own device"
            ),
            Self::RankCount { expected, got } => write!(
                f,
                "{got} buffers for {expected} ranks; pass one buffer per rank, in rank order"
            ),
            Self::BufferLength { rank, len, expected } => write!(
                f,
                "rank {rank}'s buffer has {len} elements but rank 0's has {expected}; make them the same length"
            ),
            Self::HostBuffer { rank } => write!(
                f,
                "rank {rank}'s buffer is host memory; allocate it on the rank's stream"
            ),
            Self::BufferDevice { rank, buffer, stream } => write!(
                f,
                "rank {rank}'s buffer is on gpu {buffer} but its stream on gpu {stream}; allocate it on the rank's stream"
            ),
        }
    }
}

/// Everything that can go wrong in gpu-core.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// `KILN_BACKEND` holds something other than `cpu` or `cuda`.
    InvalidBackendEnv {
        /// The value found.
        value: String,
    },
    /// CUDA was forced (`KILN_BACKEND=cuda` or [`Backend::cuda`](crate::Backend::cuda)) but cannot run.
    CudaUnavailable {
        /// Why not.
        reason: CpuReason,
    },
    /// A driver call failed.
    Driver {
        /// What gpu-core was doing (`"cuMemcpyHtoDAsync"`, `"create stream"`).
        op: &'static str,
        /// The driver's error.
        source: DriverError,
    },
    /// The device is out of memory.
    OutOfMemory {
        /// Bytes requested.
        bytes: usize,
        /// The driver's error.
        source: DriverError,
    },
    /// `len * size_of::<T>()` does not fit in `usize`.
    SizeOverflow {
        /// Elements requested.
        len: usize,
        /// `size_of::<T>()`.
        elem_size: usize,
    },
    /// Source and destination lengths differ; nothing was copied.
    LengthMismatch {
        /// The operation.
        op: &'static str,
        /// Elements in the source.
        src: usize,
        /// Elements in the destination.
        dst: usize,
    },
    /// A view's range is outside its buffer.
    OutOfBounds {
        /// Range start, in elements.
        start: usize,
        /// Range end (exclusive), in elements.
        end: usize,
        /// The buffer's length.
        len: usize,
    },
    /// A CUDA object was used with the CPU backend or the other way round.
    BackendMismatch {
        /// What was mixed up.
        what: &'static str,
    },
    /// A module was handed in without GPU code.
    ModuleNotBuilt {
        /// The module's name.
        module: &'static str,
    },
    /// A module has neither SASS nor PTX the device can run.
    NoBinaryForDevice {
        /// The module's name.
        module: &'static str,
        /// Real archs inside.
        sass: &'static [u32],
        /// Virtual archs inside.
        ptx: &'static [u32],
        /// The device's arch.
        device_arch: u32,
    },
    /// The module's PTX is newer than the driver can JIT.
    PtxTooNew {
        /// The module's name.
        module: &'static str,
        /// Toolkit that produced the PTX.
        toolkit: (u32, u32),
        /// The driver's CUDA version.
        driver: (u32, u32),
    },
    /// Loading a module failed for another reason.
    ModuleLoad {
        /// The module's name.
        module: &'static str,
        /// The driver's error.
        source: DriverError,
    },
    /// No module handed to the backend has the kernel.
    KernelNotFound {
        /// The kernel's name.
        kernel: &'static str,
        /// The modules searched.
        modules: Vec<&'static str>,
    },
    /// The CPU backend has no implementation of the kernel.
    NoCpuKernel {
        /// The kernel's name.
        kernel: &'static str,
    },
    /// The launch configuration breaks a device or kernel limit; nothing was launched.
    InvalidLaunch {
        /// The kernel's name.
        kernel: &'static str,
        /// The limit broken.
        limit: LaunchLimit,
    },
    /// A launch failed when enqueued.
    Launch {
        /// The kernel's name.
        kernel: &'static str,
        /// The module it came from.
        module: &'static str,
        /// The driver's error.
        source: DriverError,
    },
    /// An asynchronous error surfaced at a synchronization point; it came from
    /// earlier work on the stream, not from the call that returned it.
    Async {
        /// The last kernel launched on the stream, when known.
        kernel: Option<&'static str>,
        /// Its module, when known.
        module: Option<&'static str>,
        /// The driver's error.
        source: DriverError,
    },
    /// A struct's layout differs between Rust and C.
    Layout(LayoutMismatch),
    /// A GPU count is neither `all` nor a whole number of at least 1.
    InvalidGpuCount {
        /// The value given.
        value: String,
    },
    /// [`Devices::open`](crate::Devices::open) found no GPU to open (`ordinal`
    /// is `None`), or device `ordinal` cannot run the modules handed in.
    GpusUnavailable {
        /// The device that failed, when one did.
        ordinal: Option<usize>,
        /// Why.
        reason: CpuReason,
    },
    /// More GPUs were asked for than are visible.
    NotEnoughGpus {
        /// GPUs asked for.
        requested: usize,
        /// GPUs the driver sees.
        available: usize,
    },
    /// libnccl cannot be loaded (or is too old); one GPU still works.
    NcclUnavailable(NcclUnavailable),
    /// An NCCL call failed.
    Nccl {
        /// The call (`"ncclCommInitAll"`, `"ncclGroupEnd"`).
        op: &'static str,
        /// NCCL's error.
        source: NcclError,
    },
    /// A collective's ranks, streams or buffers do not fit together.
    InvalidCollective(CollectiveMismatch),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::InvalidBackendEnv { value } => {
                write!(f, "KILN_BACKEND is `{value}`; set it to `cpu`, `cuda` or leave it unset")
            }
            Self::CudaUnavailable { reason } => write!(
                f,
                "cuda backend requested but it cannot run: {reason}; unset KILN_BACKEND to fall back to the cpu"
            ),
            Self::Driver { op, source } => write!(f, "{op} failed: {source}"),
            Self::OutOfMemory { bytes, source } => write!(
                f,
                "out of device memory allocating {bytes} bytes ({source}); free buffers or use smaller batches"
            ),
            Self::SizeOverflow { len, elem_size } => write!(
                f,
                "{len} elements of {elem_size} bytes overflow usize; allocate fewer elements"
            ),
            Self::LengthMismatch { op, src, dst } => write!(
                f,
                "{op}: source has {src} elements but destination {dst}; nothing was copied, make the lengths equal"
            ),
            Self::OutOfBounds { start, end, len } => {
                write!(f, "range {start}..{end} is out of bounds for a buffer of {len} elements")
            }
            Self::BackendMismatch { what } => write!(
                f,
                "{what} belongs to another backend; create it from the same `Backend`"
            ),
            Self::ModuleNotBuilt { module } => write!(
                f,
                "module `{module}` has no gpu code (built without a toolkit); run `cargo xtask toolkit install` and rebuild"
            ),
            Self::NoBinaryForDevice { module, sass, ptx, device_arch } => write!(
                f,
                "module `{module}` has sass for {} and ptx for {}, device is sm_{device_arch}; run `cargo xtask build --arch sm_{device_arch}`",
                Archs(sass),
                Archs(ptx)
            ),
            Self::PtxTooNew { module, toolkit, driver } => write!(
                f,
                "module `{module}` has ptx from toolkit {}.{} but the driver supports cuda {}.{}; update the driver or build sass for this device",
                toolkit.0, toolkit.1, driver.0, driver.1
            ),
            Self::ModuleLoad { module, source } => {
                write!(f, "loading module `{module}` failed: {source}")
            }
            Self::KernelNotFound { kernel, modules } => write!(
                f,
                "kernel `{kernel}` is in none of the modules handed in ({}); pass the module that defines it",
                modules.join(", ")
            ),
            Self::NoCpuKernel { kernel } => write!(
                f,
                "kernel `{kernel}` has no cpu implementation; load it with `Backend::kernel_with_cpu`"
            ),
            Self::InvalidLaunch { kernel, limit } => write!(f, "launch of `{kernel}` rejected: {limit}"),
            Self::Launch { kernel, module, source } => {
                write!(f, "launch of `{kernel}` (module `{module}`) failed: {source}")
            }
            Self::Async { kernel, module, source } => match (kernel, module) {
                (Some(k), Some(m)) => write!(
                    f,
                    "asynchronous error {source} surfaced at synchronization; the last launch on the stream was `{k}` (module `{m}`)"
                ),
                _ => write!(
                    f,
                    "asynchronous error {source} surfaced at synchronization, from earlier work on the stream"
                ),
            },
            Self::Layout(m) => m.fmt(f),
            Self::InvalidGpuCount { value } => write!(
                f,
                "`{value}` is not a gpu count; use `all` or a whole number from 1 up"
            ),
            Self::GpusUnavailable { ordinal: None, reason } => write!(
                f,
                "no gpu to open ({reason}); install the driver on a machine with a cuda device, or run on the cpu"
            ),
            Self::GpusUnavailable { ordinal: Some(i), reason } => write!(
                f,
                "gpu {i} cannot be used ({reason}); ask for fewer gpus or hide it with CUDA_VISIBLE_DEVICES"
            ),
            Self::NotEnoughGpus { requested, available } => write!(
                f,
                "{requested} gpus requested but {available} visible; ask for at most {available}, or `all`"
            ),
            Self::NcclUnavailable(reason) => reason.fmt(f),
            Self::Nccl { op, source } => write!(
                f,
                "{op} failed: {source}; rerun with NCCL_DEBUG=WARN for nccl's reason"
            ),
            Self::InvalidCollective(m) => write!(f, "invalid collective: {m}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Driver { source, .. }
            | Self::OutOfMemory { source, .. }
            | Self::ModuleLoad { source, .. }
            | Self::Launch { source, .. }
            | Self::Async { source, .. } => Some(source),
            Self::Layout(m) => Some(m),
            Self::Nccl { source, .. } => Some(source),
            _ => None,
        }
    }
}

impl From<LayoutMismatch> for Error {
    fn from(m: LayoutMismatch) -> Self {
        Self::Layout(m)
    }
}

/// `map_err` helper: a driver call's error with what gpu-core was doing.
pub(crate) fn driver(op: &'static str) -> impl FnOnce(DriverError) -> Error {
    move |source| Error::Driver { op, source }
}
