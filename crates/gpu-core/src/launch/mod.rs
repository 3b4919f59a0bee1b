//! Typed kernel launches: each C parameter type of a [`KernelDecl`] maps to
//! the argument a launch takes, so a wrong count, type or mutability is a
//! compile error.
//!
//! | C parameter (`Params`) | launch argument | CPU kernel body gets |
//! |---|---|---|
//! | `*const T` | [`DeviceView<'_, T>`] | `&[T]` |
//! | `*mut T` | [`DeviceViewMut<'_, T>`] | `&mut [T]` |
//! | scalar or `GpuRepr` struct `T` | `T` | `T` |
//!
//! The argument marshalling ([`FfiParam`], [`LaunchParams`] and their impls
//! for tuples of arity 0 to 20) lives beside, in `marshal.rs`; a launch is
//! allocation-free (parameters are marshalled on the stack) and the function
//! is resolved once, when the [`Kernel`] is made. Kernels without a header
//! are looked up and launched by name (`by_name.rs`), their argument list
//! checked at run time against the parameter table of the kernel's cubin
//! (`param_table.rs`).

mod by_name;
mod marshal;
mod param_table;
mod ptx_params;

use std::marker::PhantomData;

use cudarc::driver::{sys, CudaFunction};

use crate::device::DeviceLimits;
use crate::error::{driver, Error, LaunchLimit};
use crate::KernelDecl;

pub use by_name::{Arg, Args, KernelByName};
pub(crate) use marshal::{launch_by_name, CudaLaunch};
pub use marshal::{FfiParam, HostPtr, HostPtrMut, LaunchParams};

/// Grid, block and dynamic shared memory of a launch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LaunchConfig {
    /// Blocks per grid `(x, y, z)`.
    pub grid: (u32, u32, u32),
    /// Threads per block `(x, y, z)`.
    pub block: (u32, u32, u32),
    /// Dynamic shared memory per block, in bytes.
    pub shared_mem_bytes: u32,
}

impl LaunchConfig {
    /// One thread per element in 1-D blocks of `block` threads (at least one
    /// block, so that `n = 0` is still a valid launch).
    pub fn for_elements(n: u32, block: u32) -> Self {
        let block = block.max(1);
        Self {
            grid: (n.div_ceil(block).max(1), 1, 1),
            block: (block, 1, 1),
            shared_mem_bytes: 0,
        }
    }

    /// Checks this configuration against a kernel's limits.
    pub fn validate(&self, limits: &KernelLimits) -> Result<(), LaunchLimit> {
        let block = [self.block.0, self.block.1, self.block.2];
        let grid = [self.grid.0, self.grid.1, self.grid.2];
        if block.contains(&0) || grid.contains(&0) {
            return Err(LaunchLimit::ZeroDimension);
        }
        for (axis, (&requested, &max)) in (0u8..).zip(block.iter().zip(&limits.max_block_dim)) {
            if requested > max {
                return Err(LaunchLimit::BlockDim {
                    axis,
                    requested,
                    max,
                });
            }
        }
        let threads = block.iter().map(|&b| u64::from(b)).product::<u64>();
        if threads > u64::from(limits.max_threads_per_block) {
            return Err(LaunchLimit::ThreadsPerBlock {
                requested: threads,
                max: limits.max_threads_per_block,
            });
        }
        for (axis, (&requested, &max)) in (0u8..).zip(grid.iter().zip(&limits.max_grid_dim)) {
            if requested > max {
                return Err(LaunchLimit::GridDim {
                    axis,
                    requested,
                    max,
                });
            }
        }
        if self.shared_mem_bytes > limits.max_dynamic_shared_bytes {
            return Err(LaunchLimit::SharedMemory {
                requested: self.shared_mem_bytes,
                max: limits.max_dynamic_shared_bytes,
            });
        }
        Ok(())
    }
}

/// What one kernel may be launched with: the device's dimension limits and
/// the function's own thread and shared-memory limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct KernelLimits {
    /// Threads per block for this function (register use can lower it).
    pub max_threads_per_block: u32,
    /// Block dimensions.
    pub max_block_dim: [u32; 3],
    /// Grid dimensions.
    pub max_grid_dim: [u32; 3],
    /// Dynamic shared memory per block, in bytes.
    pub max_dynamic_shared_bytes: u32,
}

impl KernelLimits {
    /// Limits from a device's, before any function attribute narrows them.
    pub fn from_device(device: &DeviceLimits) -> Self {
        Self {
            max_threads_per_block: device.max_threads_per_block,
            max_block_dim: device.max_block_dim,
            max_grid_dim: device.max_grid_dim,
            max_dynamic_shared_bytes: device.max_shared_memory_per_block_optin,
        }
    }
}

/// Which kernel of which module a launch was: kept per stream so that an
/// asynchronous error can name where it probably came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LaunchSite {
    /// The kernel's name.
    pub kernel: &'static str,
    /// The module's name (`cpu` for the CPU backend).
    pub module: &'static str,
}

/// The Rust body of a kernel for the CPU backend: called once per launch with
/// the configuration and the host views of the arguments.
pub type CpuKernel<K> =
    for<'a> fn(&LaunchConfig, <<K as KernelDecl>::Params as LaunchParams>::HostArgs<'a>);

pub(crate) enum KernelImpl<K: KernelDecl>
where
    K::Params: LaunchParams,
{
    Cuda {
        func: CudaFunction,
        site: LaunchSite,
    },
    Cpu(CpuKernel<K>),
}

/// A loaded kernel, ready to launch on a [`Stream`](crate::Stream) of the
/// backend it came from. Cheap to clone.
pub struct Kernel<K: KernelDecl>
where
    K::Params: LaunchParams,
{
    pub(crate) imp: KernelImpl<K>,
    pub(crate) limits: KernelLimits,
    _k: PhantomData<K>,
}

impl<K: KernelDecl> Clone for Kernel<K>
where
    K::Params: LaunchParams,
{
    fn clone(&self) -> Self {
        let imp = match &self.imp {
            KernelImpl::Cuda { func, site } => KernelImpl::Cuda {
                func: func.clone(),
                site: *site,
            },
            KernelImpl::Cpu(f) => KernelImpl::Cpu(*f),
        };
        Self {
            imp,
            limits: self.limits,
            _k: PhantomData,
        }
    }
}

impl<K: KernelDecl> std::fmt::Debug for Kernel<K>
where
    K::Params: LaunchParams,
{
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let backend = match self.imp {
            KernelImpl::Cuda { site, .. } => site.module,
            KernelImpl::Cpu(_) => "cpu",
        };
        f.debug_struct("Kernel")
            .field("name", &K::NAME)
            .field("module", &backend)
            .field("limits", &self.limits)
            .finish()
    }
}

impl<K: KernelDecl> Kernel<K>
where
    K::Params: LaunchParams,
{
    pub(crate) fn cuda(
        func: CudaFunction,
        module: &'static str,
        device: &DeviceLimits,
    ) -> Result<Self, Error> {
        let limits = function_limits(&func, device)?;
        Ok(Self {
            imp: KernelImpl::Cuda {
                func,
                site: LaunchSite {
                    kernel: K::NAME,
                    module,
                },
            },
            limits,
            _k: PhantomData,
        })
    }

    pub(crate) fn cpu(body: CpuKernel<K>) -> Self {
        Self {
            imp: KernelImpl::Cpu(body),
            limits: KernelLimits::from_device(&DeviceLimits::PORTABLE),
            _k: PhantomData,
        }
    }

    /// What this kernel may be launched with.
    pub fn limits(&self) -> &KernelLimits {
        &self.limits
    }

    /// The kernel's name.
    pub fn name(&self) -> &'static str {
        K::NAME
    }

    /// Lets launches of this kernel ask for up to `bytes` of dynamic shared
    /// memory: past 48 KiB a kernel must opt in before its launch (the
    /// function attribute `MAX_DYNAMIC_SHARED_SIZE_BYTES`). The limit holds
    /// for the function, so for every clone of this kernel too. The driver
    /// refuses more than the device's opt-in maximum less the kernel's static
    /// shared memory. A CPU kernel has nothing to reserve.
    pub fn reserve_dynamic_shared(&mut self, bytes: u32) -> Result<(), Error> {
        use sys::CUfunction_attribute as A;
        if let KernelImpl::Cuda { func, .. } = &self.imp {
            let value = i32::try_from(bytes).unwrap_or(i32::MAX);
            func.set_attribute(A::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, value)
                .map_err(driver("cuFuncSetAttribute"))?;
            self.limits.max_dynamic_shared_bytes = bytes;
        }
        Ok(())
    }
}

/// A loaded function's limits: the device's, narrowed by the function's own
/// thread and dynamic shared memory attributes.
fn function_limits(func: &CudaFunction, device: &DeviceLimits) -> Result<KernelLimits, Error> {
    use sys::CUfunction_attribute as A;
    let attr = |a| {
        func.get_attribute(a)
            .map(|v| u32::try_from(v).unwrap_or(0))
            .map_err(driver("cuFuncGetAttribute"))
    };
    let mut limits = KernelLimits::from_device(device);
    limits.max_threads_per_block = attr(A::CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK)?;
    limits.max_dynamic_shared_bytes = attr(A::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES)?;
    Ok(limits)
}

// Keeps the table in the module docs honest about the argument types.
#[allow(dead_code)]
fn _arg_types<'a>(view: crate::DeviceView<'a, f32>, view_mut: crate::DeviceViewMut<'a, f32>) {
    let _: <<*const f32 as crate::AbiParam>::Kind as FfiParam>::Arg<'a> = view;
    let _: <<*mut f32 as crate::AbiParam>::Kind as FfiParam>::Arg<'a> = view_mut;
    let _: <<u32 as crate::AbiParam>::Kind as FfiParam>::Arg<'a> = 0u32;
}
