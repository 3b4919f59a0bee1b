//! kiln's safe, typed GPU API on cudarc, with a CPU fallback.
//!
//! - [`Backend::auto`] picks CUDA or the CPU at run time and says why;
//! - [`Stream`] allocates [`DeviceBuffer`]s, copies, and launches [`Kernel`]s
//!   whose arguments are typed by the kernel's C declaration;
//! - the CPU backend offers the same buffer and launch API over host memory,
//!   with kernel bodies written in Rust ([`Backend::kernel_with_cpu`]).
//!
//! All `unsafe` lives in `raw.rs`. gpu-core never names one of kiln's kernels:
//! callers hand in the [`FatbinImage`]s to load.

mod backend;
mod device;
mod error;
mod launch;
mod layout;
mod memory;
mod module;
mod pool;
mod raw;
mod stream;

pub use backend::{Backend, BackendKind, BACKEND_ENV};
pub use cuda_sys::{param_kind, AbiParam, FatbinImage, GpuRepr, KernelDecl, KernelInfo};
pub use device::{
    devices, driver_present, driver_version, toolkit_version, DeviceInfo, DeviceLimits,
};
pub use error::{CpuReason, DriverError, Error, LaunchLimit, LayoutMismatch};
pub use launch::{
    CpuKernel, FfiParam, Kernel, KernelLimits, LaunchConfig, LaunchParams, LaunchSite,
};
pub use layout::check_layout;
pub use memory::{DeviceBuffer, DeviceView, DeviceViewMut, PinnedBuffer};
pub use module::{code_for_arch, CodeChoice};
pub use pool::{size_class, BufferPool, PoolStats, PooledBuffer};
pub use stream::{Event, Stream};

#[doc(hidden)]
pub mod __private {
    pub use cudarc::driver::CudaStream;
}
