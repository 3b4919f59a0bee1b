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
//! The tuple impls (arity 0 to 16) live in `raw.rs`, the module that owns
//! `unsafe`; a launch is allocation-free (parameters are marshalled on the
//! stack) and the `CudaFunction` is resolved once, when the [`Kernel`] is made.

use std::ffi::c_void;
use std::marker::PhantomData;
use std::sync::Arc;

use cudarc::driver::{sys, CudaFunction, CudaStream};

use crate::device::DeviceLimits;
use crate::error::{Error, LaunchLimit};
use crate::{DeviceView, DeviceViewMut, KernelDecl};

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

/// Maps one kind of C parameter ([`param_kind`](crate::param_kind): a
/// `const T*`, a `T*`, or a value) to the argument a launch takes.
///
/// # Safety
/// `marshal` must produce a value of exactly the C parameter's type and size
/// for `param_ptr` to point to (a `CUdeviceptr` of a live allocation for
/// pointers; the value itself for scalars and `#[repr(C)]` structs whose
/// layout matches the C type), alive as long as the returned `Marshalled`.
pub unsafe trait FfiParam {
    /// What a launch takes for this parameter.
    type Arg<'a>;
    /// What a CPU kernel body gets for this parameter.
    type HostArg<'a>;
    #[doc(hidden)]
    type Marshalled<'a>;
    #[doc(hidden)]
    fn marshal<'a>(
        arg: Self::Arg<'a>,
        stream: &'a Arc<CudaStream>,
    ) -> Result<Self::Marshalled<'a>, Error>;
    #[doc(hidden)]
    fn param_ptr(marshalled: &Self::Marshalled<'_>) -> *mut c_void;
    #[doc(hidden)]
    fn to_host<'a>(arg: Self::Arg<'a>) -> Result<Self::HostArg<'a>, Error>;
}

/// A kernel's whole parameter tuple: implemented for tuples of
/// [`AbiParam`](crate::AbiParam) types whose kinds are [`FfiParam`], arity 0
/// to 16.
pub trait LaunchParams {
    /// The tuple of launch arguments.
    type Args<'a>;
    /// The tuple a CPU kernel body gets.
    type HostArgs<'a>;
    #[doc(hidden)]
    fn launch_cuda<'a>(
        args: Self::Args<'a>,
        stream: &'a Arc<CudaStream>,
        func: &CudaFunction,
        config: &LaunchConfig,
        site: LaunchSite,
    ) -> Result<(), Error>;
    #[doc(hidden)]
    fn to_host<'a>(args: Self::Args<'a>) -> Result<Self::HostArgs<'a>, Error>;
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
        use sys::CUfunction_attribute as A;
        let attr = |a| {
            crate::raw::function_attribute(&func, a)
                .map(|v| u32::try_from(v).unwrap_or(0))
                .map_err(crate::error::driver("cuFuncGetAttribute"))
        };
        let mut limits = KernelLimits::from_device(device);
        limits.max_threads_per_block = attr(A::CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK)?;
        limits.max_dynamic_shared_bytes = attr(A::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES)?;
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
}

// Keeps the table in the module docs honest about the argument types.
#[allow(dead_code)]
fn _arg_types<'a>(view: DeviceView<'a, f32>, view_mut: DeviceViewMut<'a, f32>) {
    let _: <<*const f32 as crate::AbiParam>::Kind as FfiParam>::Arg<'a> = view;
    let _: <<*mut f32 as crate::AbiParam>::Kind as FfiParam>::Arg<'a> = view_mut;
    let _: <<u32 as crate::AbiParam>::Kind as FfiParam>::Arg<'a> = 0u32;
}
