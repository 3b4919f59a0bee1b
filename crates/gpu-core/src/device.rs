//! Device enumeration and properties read from device attributes, the
//! driver's version, and which kind of backend runs the work.
//!
//! Memory bandwidth comes from `MEMORY_CLOCK_RATE` and `GLOBAL_MEMORY_BUS_WIDTH`
//! attributes (the `cudaDeviceProp` fields were removed in CUDA 13); an
//! attribute the driver does not report is `None`, never a guess.

use cudarc::driver::{result, sys};

use crate::error::{driver, CpuReason, Error};
use crate::ffi::driver as ffi;

use sys::CUdevice_attribute as Attr;

/// Which backend runs the work.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum BackendKind {
    /// A CUDA device through the driver API.
    Cuda,
    /// Host memory and plain Rust kernel bodies.
    Cpu,
}

/// What a CUDA device is and what it can do.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct DeviceInfo {
    /// Ordinal, as `cuDeviceGet` numbers devices.
    pub ordinal: usize,
    /// Marketing name (`NVIDIA H100 80GB HBM3`).
    pub name: String,
    /// `(major, minor)`.
    pub compute_capability: (u32, u32),
    /// Streaming multiprocessors.
    pub sm_count: u32,
    /// Global memory in bytes.
    pub total_memory: usize,
    /// L2 cache in bytes.
    pub l2_cache_bytes: Option<u32>,
    /// Peak memory clock in kHz, when the driver reports it.
    pub memory_clock_khz: Option<u32>,
    /// Memory bus width in bits, when the driver reports it.
    pub memory_bus_width_bits: Option<u32>,
    /// Launch limits.
    pub limits: DeviceLimits,
}

/// Launch limits of a device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct DeviceLimits {
    /// Threads per block.
    pub max_threads_per_block: u32,
    /// Block dimensions `(x, y, z)`.
    pub max_block_dim: [u32; 3],
    /// Grid dimensions `(x, y, z)`.
    pub max_grid_dim: [u32; 3],
    /// Shared memory per block with opt-in, in bytes.
    pub max_shared_memory_per_block_optin: u32,
}

impl DeviceLimits {
    /// Limits the CPU backend checks against: those of every CUDA device since
    /// sm_30, so that a configuration valid on the CPU is valid on a GPU.
    pub const PORTABLE: Self = Self {
        max_threads_per_block: 1024,
        max_block_dim: [1024, 1024, 64],
        max_grid_dim: [i32::MAX as u32, 65535, 65535],
        max_shared_memory_per_block_optin: 48 * 1024,
    };
}

impl DeviceInfo {
    /// Architecture as `major * 10 + minor` (`90` for sm_90).
    pub fn arch(&self) -> u32 {
        self.compute_capability.0 * 10 + self.compute_capability.1
    }

    /// Theoretical peak memory bandwidth in bytes per second: two transfers per
    /// clock (DDR) times the bus width; `None` when either attribute is missing.
    pub fn memory_bandwidth_bytes_per_sec(&self) -> Option<f64> {
        let clock_hz = f64::from(self.memory_clock_khz?) * 1e3;
        let bus_bytes = f64::from(self.memory_bus_width_bits?) / 8.0;
        Some(2.0 * clock_hz * bus_bytes)
    }

    pub(crate) fn query(ordinal: usize) -> Result<Self, Error> {
        let index = i32::try_from(ordinal).map_err(|_| {
            driver("cuDeviceGet")(cudarc::driver::DriverError(
                sys::CUresult::CUDA_ERROR_INVALID_DEVICE,
            ))
        })?;
        let dev = result::device::get(index).map_err(driver("cuDeviceGet"))?;
        let attr = |a: Attr| ffi::device_attribute(dev, a).map_err(driver("cuDeviceGetAttribute"));
        let optional = |a: Attr| {
            ffi::device_attribute(dev, a)
                .ok()
                .and_then(|v| u32::try_from(v).ok())
                .filter(|&v| v > 0)
        };
        let as_u32 = |v: i32| u32::try_from(v).unwrap_or(0);
        Ok(Self {
            ordinal,
            name: result::device::get_name(dev).map_err(driver("cuDeviceGetName"))?,
            compute_capability: (
                as_u32(attr(Attr::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?),
                as_u32(attr(Attr::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?),
            ),
            sm_count: as_u32(attr(Attr::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?),
            total_memory: ffi::device_total_mem(dev).map_err(driver("cuDeviceTotalMem"))?,
            l2_cache_bytes: optional(Attr::CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE),
            memory_clock_khz: optional(Attr::CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE),
            memory_bus_width_bits: optional(Attr::CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH),
            limits: DeviceLimits {
                max_threads_per_block: as_u32(attr(
                    Attr::CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK,
                )?),
                max_block_dim: [
                    as_u32(attr(Attr::CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X)?),
                    as_u32(attr(Attr::CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y)?),
                    as_u32(attr(Attr::CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z)?),
                ],
                max_grid_dim: [
                    as_u32(attr(Attr::CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X)?),
                    as_u32(attr(Attr::CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y)?),
                    as_u32(attr(Attr::CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z)?),
                ],
                max_shared_memory_per_block_optin: as_u32(attr(
                    Attr::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
                )?),
            },
        })
    }
}

/// Whether `libcuda` can be loaded on this machine.
pub fn driver_present() -> bool {
    ffi::driver_present()
}

/// Loads and initializes the driver, or says why it cannot be used.
pub(crate) fn init_driver() -> Result<(), CpuReason> {
    if !ffi::driver_present() {
        return Err(CpuReason::NoDriver);
    }
    match result::init() {
        Ok(()) => Ok(()),
        Err(e) if e.0 == sys::CUresult::CUDA_ERROR_NO_DEVICE => Err(CpuReason::NoDevice),
        Err(e) => Err(CpuReason::DriverInit(e.into())),
    }
}

/// The driver's CUDA version, `(major, minor)` (`(13, 0)`).
pub fn driver_version() -> Result<(u32, u32), Error> {
    init_driver().map_err(|reason| Error::CudaUnavailable { reason })?;
    ffi::driver_version().map_err(driver("cuDriverGetVersion"))
}

/// A device's memory as the driver reports it (`cuMemGetInfo`), in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct MemoryInfo {
    /// Free now, to any context on the device (other processes' use is
    /// already taken off).
    pub free: u64,
    /// The device's global memory.
    pub total: u64,
}

impl MemoryInfo {
    /// The driver's figures in the device's primary context: the context
    /// gpu-core's backends run in, so the figure is the one their
    /// allocations draw on.
    pub(crate) fn read(ctx: &cudarc::driver::CudaContext) -> Result<Self, Error> {
        // cudarc binds `ctx` to this thread before asking: cuMemGetInfo
        // answers for the current context's device.
        let (free, total) = ctx.mem_get_info().map_err(driver("cuMemGetInfo"))?;
        Ok(Self {
            free: free as u64,
            total: total as u64,
        })
    }
}

/// Free and total memory of CUDA device `ordinal`, read in its primary
/// context (the one [`Backend::cuda`](crate::Backend::cuda) uses) without
/// loading any module. [`Error::CudaUnavailable`] when there is no driver
/// or no device `ordinal`; with a backend at hand,
/// [`Backend::memory_info`](crate::Backend::memory_info) reads it in that
/// backend's context.
pub fn device_memory(ordinal: usize) -> Result<MemoryInfo, Error> {
    // cudarc's loader must not be asked without a driver: it would panic.
    init_driver().map_err(|reason| Error::CudaUnavailable { reason })?;
    let count = result::device::get_count().map_err(driver("cuDeviceGetCount"))?;
    if usize::try_from(count).unwrap_or(0) <= ordinal {
        return Err(Error::CudaUnavailable {
            reason: CpuReason::NoDevice,
        });
    }
    let ctx = cudarc::driver::CudaContext::new(ordinal).map_err(driver("create context"))?;
    MemoryInfo::read(&ctx)
}

/// Every CUDA device the driver sees; an error saying why when the driver
/// cannot be used (an empty list means a driver with no device).
pub fn devices() -> Result<Vec<DeviceInfo>, Error> {
    match init_driver() {
        Ok(()) => {}
        Err(CpuReason::NoDevice) => return Ok(Vec::new()),
        Err(reason) => return Err(Error::CudaUnavailable { reason }),
    }
    let count = result::device::get_count().map_err(driver("cuDeviceGetCount"))?;
    (0..usize::try_from(count).unwrap_or(0))
        .map(DeviceInfo::query)
        .collect()
}
