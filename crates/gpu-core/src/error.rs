//! The one error type of gpu-core, the driver's error behind it, and the
//! reasons the CPU backend was chosen.
//!
//! Variants carry context (module, kernel, archs, lengths) instead of strings;
//! messages are lower-case and say what to do in terms of gpu-core's API and
//! environment variables. No cudarc type appears here: a driver failure is
//! gpu-core's own [`DriverError`].

use std::fmt;

use crate::ffi::nccl::NcclCallFailed;
pub use crate::ffi::nccl::{NcclError, NcclUnavailable};

/// A CUDA driver call's failure: the `CUresult` by name and number.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{name} ({code})")]
#[non_exhaustive]
pub struct DriverError {
    /// The `CUresult` name (`CUDA_ERROR_OUT_OF_MEMORY`).
    pub name: String,
    /// The `CUresult` value (`2`).
    pub code: u32,
}

impl DriverError {
    /// Whether this is `CUDA_ERROR_OUT_OF_MEMORY`.
    pub fn is_out_of_memory(&self) -> bool {
        self.code == cudarc::driver::sys::CUresult::CUDA_ERROR_OUT_OF_MEMORY as u32
    }
}

impl From<cudarc::driver::DriverError> for DriverError {
    fn from(e: cudarc::driver::DriverError) -> Self {
        // The name from the enum itself: cudarc's Display asks the driver
        // (cuGetErrorString), which may be the thing that failed.
        Self {
            name: format!("{:?}", e.0),
            code: e.0 as u32,
        }
    }
}

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

/// Every arch of a module, SASS and PTX together, sorted: `sm_80,sm_90`.
fn all_archs(sass: &[u32], ptx: &[u32]) -> String {
    let mut all: Vec<u32> = sass.iter().chain(ptx).copied().collect();
    all.sort_unstable();
    all.dedup();
    Archs(&all).to_string()
}

/// Why [`Backend::auto`](crate::Backend::auto) chose the CPU.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CpuReason {
    /// `KILN_BACKEND=cpu`, or [`Backend::cpu`](crate::Backend::cpu).
    #[error("cpu backend requested")]
    Forced,
    /// No module handed in carries GPU code (built without a CUDA toolkit).
    #[error("no toolkit at build time")]
    NoGpuCode,
    /// `libcuda` could not be loaded.
    #[error("no driver")]
    NoDriver,
    /// The driver loaded but `cuInit` failed.
    #[error("driver failed to initialize ({0})")]
    DriverInit(DriverError),
    /// The driver reports no CUDA device.
    #[error("no device")]
    NoDevice,
    /// A module has neither SASS nor PTX the device can run.
    #[error("fat binary has {}, device is sm_{device_arch}", all_archs(sass, ptx))]
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
    #[error("device unusable: {0}")]
    Unusable(Box<Error>),
}

/// Which launch limit a [`LaunchConfig`](crate::LaunchConfig) broke.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LaunchLimit {
    /// A grid or block dimension is zero.
    #[error("a grid or block dimension is zero; use at least 1")]
    ZeroDimension,
    /// `block.0 * block.1 * block.2` is over the kernel's limit.
    #[error("{requested} threads per block, the kernel allows {max}; use smaller blocks")]
    ThreadsPerBlock {
        /// Threads asked for.
        requested: u64,
        /// The kernel's (or device's) maximum.
        max: u32,
    },
    /// A block dimension is over the device's limit.
    #[error("block.{} is {requested}, the device allows {max}", axis_name(*axis))]
    BlockDim {
        /// Axis: 0 = x, 1 = y, 2 = z.
        axis: u8,
        /// Asked for.
        requested: u32,
        /// The device's maximum.
        max: u32,
    },
    /// A grid dimension is over the device's limit.
    #[error("grid.{} is {requested}, the device allows {max}", axis_name(*axis))]
    GridDim {
        /// Axis: 0 = x, 1 = y, 2 = z.
        axis: u8,
        /// Asked for.
        requested: u32,
        /// The device's maximum.
        max: u32,
    },
    /// Dynamic shared memory is over what the kernel may use.
    #[error(
        "{requested} bytes of dynamic shared memory, the kernel may use {max}; use less or opt in with the function attribute"
    )]
    SharedMemory {
        /// Bytes asked for.
        requested: u32,
        /// Bytes available for dynamic shared memory.
        max: u32,
    },
}

fn axis_name(axis: u8) -> &'static str {
    ["x", "y", "z"][usize::from(axis).min(2)]
}

/// How the argument list of a launch by name differs from the kernel's
/// parameters (its image's table); nothing was launched.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ArgMismatch {
    /// Another number of arguments than parameters.
    #[error("{got} arguments for {expected} parameters")]
    Count {
        /// Parameters of the kernel.
        expected: usize,
        /// Arguments given.
        got: usize,
    },
    /// An argument of another size than its parameter.
    #[error("argument {index} is {got} bytes but the kernel's parameter {index} is {expected}")]
    Size {
        /// The parameter's index, from 0.
        index: usize,
        /// The parameter's size in bytes, as the kernel's table gives it.
        expected: usize,
        /// The argument's size in bytes.
        got: usize,
    },
}

/// Why the parameter table in a kernel's image (the cubin's `.nv.info`)
/// cannot be read: the image is damaged.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ParamTableError {
    /// The fat binary's containers or entries are malformed.
    #[error("the fat binary is damaged at byte {offset}: {problem}")]
    Fatbin {
        /// Where in the image.
        offset: usize,
        /// What is wrong.
        problem: &'static str,
    },
    /// A cubin is not a readable ELF file.
    #[error("a cubin is not a readable ELF file: {problem}")]
    Elf {
        /// What the ELF reader said.
        problem: String,
    },
    /// The kernel's `.nv.info` section is malformed.
    #[error(".nv.info.{kernel} is damaged: {problem}")]
    NvInfo {
        /// The kernel whose section it is.
        kernel: String,
        /// What is wrong.
        problem: &'static str,
    },
}

/// Ranks, streams or buffers handed to a [`Collective`](crate::Collective)
/// that do not fit together; nothing was enqueued.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CollectiveMismatch {
    /// No stream was given.
    #[error("no stream given; pass one stream per device")]
    NoRanks,
    /// A rank's stream is on the CPU backend.
    #[error(
        "rank {rank}'s stream is on the cpu backend; give each rank a cuda stream (from `Devices`)"
    )]
    CpuStream {
        /// The rank.
        rank: usize,
    },
    /// Two ranks' streams are on the same device (NCCL hangs on that).
    #[error(
        "ranks {} and {} are both on gpu {ordinal}; give each rank a stream on its own device",
        ranks.0,
        ranks.1
    )]
    SameDevice {
        /// The device.
        ordinal: usize,
        /// The two ranks.
        ranks: (usize, usize),
    },
    /// A call passed another number of buffers than there are ranks.
    #[error("{got} buffers for {expected} ranks; pass one buffer per rank, in rank order")]
    RankCount {
        /// Ranks of the collective.
        expected: usize,
        /// Buffers passed.
        got: usize,
    },
    /// A rank's buffer has another length than rank 0's.
    #[error(
        "rank {rank}'s buffer has {len} elements but rank 0's has {expected}; make them the same length"
    )]
    BufferLength {
        /// The rank.
        rank: usize,
        /// Its buffer's length, in elements.
        len: usize,
        /// Rank 0's buffer's length.
        expected: usize,
    },
    /// A rank's buffer is host memory (from the CPU backend).
    #[error("rank {rank}'s buffer is host memory; allocate it on the rank's stream")]
    HostBuffer {
        /// The rank.
        rank: usize,
    },
    /// A rank's buffer is on another device than its stream.
    #[error(
        "rank {rank}'s buffer is on gpu {buffer} but its stream on gpu {stream}; allocate it on the rank's stream"
    )]
    BufferDevice {
        /// The rank.
        rank: usize,
        /// The buffer's device.
        buffer: usize,
        /// The stream's device.
        stream: usize,
    },
    /// Found by the last check before NCCL is called (the checks above
    /// normally catch it first).
    #[error("{what}; pass one buffer per rank, on the rank's stream, all of one length")]
    Other {
        /// What does not fit.
        what: &'static str,
    },
}

/// Everything that can go wrong in gpu-core.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// `KILN_BACKEND` holds something other than `cpu` or `cuda`.
    #[error("KILN_BACKEND is `{value}`; set it to `cpu`, `cuda` or leave it unset")]
    InvalidBackendEnv {
        /// The value found.
        value: String,
    },
    /// CUDA was forced (`KILN_BACKEND=cuda` or [`Backend::cuda`](crate::Backend::cuda)) but cannot run.
    #[error(
        "cuda backend requested but it cannot run: {reason}; unset KILN_BACKEND to fall back to the cpu"
    )]
    CudaUnavailable {
        /// Why not.
        reason: CpuReason,
    },
    /// A driver call failed.
    #[error("{op} failed: {source}")]
    Driver {
        /// What gpu-core was doing (`"cuMemcpyHtoDAsync"`, `"create stream"`).
        op: &'static str,
        /// The driver's error.
        source: DriverError,
    },
    /// The device is out of memory.
    #[error(
        "out of device memory allocating {bytes} bytes ({source}); free buffers or use smaller batches"
    )]
    OutOfMemory {
        /// Bytes requested.
        bytes: usize,
        /// The driver's error.
        source: DriverError,
    },
    /// `len * size_of::<T>()` does not fit in `usize`.
    #[error("{len} elements of {elem_size} bytes overflow usize; allocate fewer elements")]
    SizeOverflow {
        /// Elements requested.
        len: usize,
        /// `size_of::<T>()`.
        elem_size: usize,
    },
    /// Page-locked host memory could not be allocated
    /// (`Stream::alloc_pinned`); ordinary memory may still be there.
    #[error(
        "allocating {bytes} bytes of page-locked host memory failed ({source}); allocate less, or copy from ordinary memory with `Stream::copy_to_device`"
    )]
    PinnedAlloc {
        /// Bytes requested.
        bytes: usize,
        /// The driver's error.
        source: DriverError,
    },
    /// The driver refused to page-lock the caller's memory
    /// (`Stream::register_host`): already registered (or allocated
    /// page-locked), pages it cannot lock, read-only pages on a device
    /// without read-only registration, or no registration support at all.
    /// Nothing is registered; the memory can still be copied from with
    /// `Stream::copy_to_device`.
    #[error(
        "registering {bytes} bytes of host memory as page-locked{} failed ({source}); copy from it with `Stream::copy_to_device` instead",
        if *read_only { " (read-only)" } else { "" }
    )]
    HostRegister {
        /// Bytes of the caller's slice.
        bytes: usize,
        /// Whether it was registered read-only (`CU_MEMHOSTREGISTER_READ_ONLY`,
        /// where the device supports it).
        read_only: bool,
        /// The driver's error.
        source: DriverError,
    },
    /// Source and destination lengths differ; nothing was copied.
    #[error(
        "{op}: source has {src} elements but destination {dst}; nothing was copied, make the lengths equal"
    )]
    LengthMismatch {
        /// The operation.
        op: &'static str,
        /// Elements in the source.
        src: usize,
        /// Elements in the destination.
        dst: usize,
    },
    /// A view's range is outside its buffer.
    #[error("range {start}..{end} is out of bounds for a buffer of {len} elements")]
    OutOfBounds {
        /// Range start, in elements.
        start: usize,
        /// Range end (exclusive), in elements.
        end: usize,
        /// The buffer's length.
        len: usize,
    },
    /// A stream-local buffer (`DeviceBuffer::into_local`) was handed to an
    /// operation on another stream.
    #[error(
        "a stream-local buffer was used on a stream other than its own; enqueue the work on the stream named in `into_local`"
    )]
    ForeignStream,
    /// A CUDA object was used with the CPU backend or the other way round.
    #[error("{what} belongs to another backend; create it from the same `Backend`")]
    BackendMismatch {
        /// What was mixed up.
        what: &'static str,
    },
    /// A `GpuRepr` impl claims another size than the Rust type has (a
    /// hand-written impl that lies).
    #[error(
        "`{type_name}` is {rust} bytes in rust but its `GpuRepr` impl says {c}; generate the impl from the header or fix it"
    )]
    ReprSize {
        /// The C type's name.
        type_name: &'static str,
        /// `size_of` in Rust.
        rust: usize,
        /// `GpuRepr::SIZE`.
        c: usize,
    },
    /// A module was handed in without GPU code.
    #[error(
        "module `{module}` has no gpu code (built without a cuda toolkit); install one, or point CUDA_PATH at it, and rebuild"
    )]
    ModuleNotBuilt {
        /// The module's name.
        module: &'static str,
    },
    /// A module has neither SASS nor PTX the device can run.
    #[error(
        "module `{module}` has sass for {} and ptx for {}, device is sm_{device_arch}; rebuild the kernels with sm_{device_arch} among their archs",
        Archs(sass),
        Archs(ptx)
    )]
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
    #[error(
        "module `{module}` has ptx from toolkit {}.{} but the driver supports cuda {}.{}; update the driver or build sass for this device",
        toolkit.0, toolkit.1, driver.0, driver.1
    )]
    PtxTooNew {
        /// The module's name.
        module: &'static str,
        /// Toolkit that produced the PTX.
        toolkit: (u32, u32),
        /// The driver's CUDA version.
        driver: (u32, u32),
    },
    /// Loading a module failed for another reason.
    #[error("loading module `{module}` failed: {source}")]
    ModuleLoad {
        /// The module's name.
        module: &'static str,
        /// The driver's error.
        source: DriverError,
    },
    /// No module handed to the backend has the kernel.
    #[error(
        "kernel `{kernel}` is in none of the modules handed in ({}); pass the module that defines it",
        modules.join(", ")
    )]
    KernelNotFound {
        /// The kernel's name.
        kernel: &'static str,
        /// The modules searched.
        modules: Vec<&'static str>,
    },
    /// The CPU backend has no implementation of the kernel.
    #[error(
        "kernel `{kernel}` has no cpu implementation; load it with `Backend::kernel_with_cpu`"
    )]
    NoCpuKernel {
        /// The kernel's name.
        kernel: &'static str,
    },
    /// A kernel was asked for by name on the CPU backend, which has no body
    /// to run for it.
    #[error(
        "kernel `{kernel}` was asked for by name, which needs the cuda backend; declare it in a header with KILN_KERNEL to give it a cpu body"
    )]
    ByNameNeedsCuda {
        /// The name asked for.
        kernel: String,
    },
    /// The kernel's image carries no parameter table kiln can read (no
    /// uncompressed cubin: PTX only, or `-Xfatbin -compress-all`) and the
    /// driver cannot report its parameters (`cuFuncGetParamInfo`, CUDA 12.4
    /// and later), so a launch by name cannot be checked.
    #[error(
        "neither the image nor the driver (cuda {}.{}) gives the parameters of `{kernel}`; build its module with SASS for the device (uncompressed), update the driver to cuda 12.4 or later, or declare the kernel in a header",
        driver.0, driver.1
    )]
    ParamInfoUnavailable {
        /// The kernel's name.
        kernel: &'static str,
        /// The driver's CUDA version.
        driver: (u32, u32),
    },
    /// The parameter table in the image of a kernel looked up by name is
    /// damaged; nothing was launched.
    #[error("cannot read the parameters of `{kernel}` from module `{module}`: {source}; rebuild the module")]
    ParamTable {
        /// The kernel's name.
        kernel: &'static str,
        /// The module it was found in.
        module: &'static str,
        /// What is wrong with the table.
        source: ParamTableError,
    },
    /// The argument list of a launch by name does not fit the kernel's
    /// parameters; nothing was launched.
    #[error(
        "launch of `{kernel}` rejected: {mismatch}; pass one argument per parameter, each of its size"
    )]
    LaunchArgs {
        /// The kernel's name.
        kernel: &'static str,
        /// How the list differs.
        mismatch: ArgMismatch,
    },
    /// The launch configuration breaks a device or kernel limit; nothing was launched.
    #[error("launch of `{kernel}` rejected: {limit}")]
    InvalidLaunch {
        /// The kernel's name.
        kernel: &'static str,
        /// The limit broken.
        limit: LaunchLimit,
    },
    /// A launch failed when enqueued.
    #[error("launch of `{kernel}` (module `{module}`) failed: {source}")]
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
    #[error(
        "asynchronous error {source} surfaced at synchronization{}",
        last_launch(kernel, module)
    )]
    Async {
        /// The last kernel launched on the stream, when known.
        kernel: Option<&'static str>,
        /// Its module, when known.
        module: Option<&'static str>,
        /// The driver's error.
        source: DriverError,
    },
    /// A GPU count is neither `all` nor a whole number of at least 1.
    #[error("`{value}` is not a gpu count; use `all` or a whole number from 1 up")]
    InvalidGpuCount {
        /// The value given.
        value: String,
    },
    /// [`Devices::open`](crate::Devices::open) found no GPU to open (`ordinal`
    /// is `None`), or device `ordinal` cannot run the modules handed in.
    #[error("{}", gpus_unavailable(*ordinal, reason))]
    GpusUnavailable {
        /// The device that failed, when one did.
        ordinal: Option<usize>,
        /// Why.
        reason: CpuReason,
    },
    /// More GPUs were asked for than are visible.
    #[error(
        "{requested} gpus requested but {available} visible; ask for at most {available}, or `all`"
    )]
    NotEnoughGpus {
        /// GPUs asked for.
        requested: usize,
        /// GPUs the driver sees.
        available: usize,
    },
    /// libnccl cannot be loaded (or is too old); one GPU still works.
    #[error(transparent)]
    NcclUnavailable(NcclUnavailable),
    /// An NCCL call failed.
    #[error("{op} failed: {source}; rerun with NCCL_DEBUG=WARN for nccl's reason")]
    Nccl {
        /// The call (`"ncclCommInitAll"`, `"ncclGroupEnd"`).
        op: &'static str,
        /// NCCL's error.
        source: NcclError,
    },
    /// A collective's ranks, streams or buffers do not fit together.
    #[error("invalid collective: {0}")]
    InvalidCollective(CollectiveMismatch),
}

fn last_launch(kernel: &Option<&'static str>, module: &Option<&'static str>) -> String {
    match (kernel, module) {
        (Some(k), Some(m)) => format!("; the last launch on the stream was `{k}` (module `{m}`)"),
        _ => ", from earlier work on the stream".into(),
    }
}

fn gpus_unavailable(ordinal: Option<usize>, reason: &CpuReason) -> String {
    match ordinal {
        None => format!(
            "no gpu to open ({reason}); install the driver on a machine with a cuda device, or run on the cpu"
        ),
        Some(i) => format!(
            "gpu {i} cannot be used ({reason}); ask for fewer gpus or hide it with CUDA_VISIBLE_DEVICES"
        ),
    }
}

/// `map_err` helper: a failed NCCL call as an [`Error::Nccl`].
pub(crate) fn nccl_failed(failed: NcclCallFailed) -> Error {
    Error::Nccl {
        op: failed.op,
        source: failed.source,
    }
}

/// `map_err` helper: a driver call's error with what gpu-core was doing.
pub(crate) fn driver(op: &'static str) -> impl FnOnce(cudarc::driver::DriverError) -> Error {
    move |source| Error::Driver {
        op,
        source: source.into(),
    }
}
