//! Launching a kernel that has no header by its name, with a runtime
//! argument list checked against the parameter count and sizes of the
//! kernel's parameter table in its image (`param_table.rs`: the cubin's
//! `.nv.info`, read with no driver call). Only where the image holds no
//! readable table (PTX only, or compressed cubins) is the driver asked
//! (`cuFuncGetParamInfo`, CUDA 12.4 and later), which probes one index past
//! the last parameter: an API error compute-sanitizer reports.
//!
//! The check happens before anything reaches the driver: a wrong count or a
//! wrong size is an [`Error::LaunchArgs`] naming the kernel, the parameter
//! and both sizes. The table holds sizes, not types, so what is left to
//! the caller (the contract of [`Args::new`]) is each argument's kind: a view
//! where the kernel takes a pointer, a value of the C type otherwise.
//!
//! Launching by name needs the CUDA backend: a kernel without a declaration
//! has no typed CPU body to run (declare it with `KILN_KERNEL` in a header to
//! get one); [`Backend::kernel_by_name`](crate::Backend::kernel_by_name) on
//! the CPU backend is [`Error::ByNameNeedsCuda`].

use std::ffi::c_void;
use std::sync::Arc;

use cudarc::driver::{CudaFunction, CudaView, CudaViewMut};
use kiln_abi::GpuRepr;

use super::param_table::kernel_params;
use super::{function_limits, KernelLimits};
use crate::device::DeviceLimits;
use crate::error::{driver, ArgMismatch, Error};
use crate::ffi;
use crate::memory::{Local, ViewMutRef, ViewRef};
use crate::{DeviceView, DeviceViewMut, FatbinImage};

/// A kernel looked up by name in the loaded modules, with its parameter
/// sizes as its image's table (or, lacking one, the driver) gives them.
/// Cheap to clone.
#[derive(Debug, Clone)]
pub struct KernelByName {
    func: CudaFunction,
    name: &'static str,
    module: &'static str,
    param_sizes: Arc<[usize]>,
    limits: KernelLimits,
}

impl KernelByName {
    /// Reads `func`'s parameters from `image`'s table, else from the
    /// driver; an error when the table is damaged, or missing and the
    /// driver cannot report them.
    pub(crate) fn cuda(
        func: CudaFunction,
        name: &'static str,
        image: &'static FatbinImage,
        device: &DeviceLimits,
    ) -> Result<Self, Error> {
        let module = image.name;
        // A PTX image has no cubin: its entry's `.param` list is the table.
        let table = if super::ptx_params::is_ptx(image.image) {
            super::ptx_params::ptx_params(image.image, name)
        } else {
            kernel_params(image.image, name).map_err(|source| Error::ParamTable {
                kernel: name,
                module,
                source,
            })?
        };
        let param_sizes = match table {
            Some(table) => table.iter().map(|p| p.size).collect(),
            None => driver_param_sizes(&func, name)?,
        };
        Ok(Self {
            limits: function_limits(&func, device)?,
            func,
            name,
            module,
            param_sizes,
        })
    }

    /// The kernel's name.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// The module it was found in.
    pub fn module(&self) -> &'static str {
        self.module
    }

    /// Each parameter's size in bytes, as the image's table (or the driver)
    /// gives it.
    pub fn param_sizes(&self) -> &[usize] {
        &self.param_sizes
    }

    /// What this kernel may be launched with.
    pub fn limits(&self) -> &KernelLimits {
        &self.limits
    }

    pub(crate) fn function(&self) -> &CudaFunction {
        &self.func
    }
}

/// The fallback where an image has no readable table: the driver's report
/// (`cuFuncGetParamInfo`, CUDA 12.4 and later).
fn driver_param_sizes(func: &CudaFunction, name: &'static str) -> Result<Arc<[usize]>, Error> {
    let params = ffi::driver::param_info(func).map_err(driver("cuFuncGetParamInfo"))?;
    let Some(params) = params else {
        return Err(Error::ParamInfoUnavailable {
            kernel: name,
            driver: ffi::driver::driver_version().unwrap_or((0, 0)),
        });
    };
    Ok(params.iter().map(|&(_, size)| size).collect())
}

/// A value passed by value, type-erased: the driver copies `size` bytes from
/// `ptr`.
pub(crate) trait ValueArg {
    /// Where the value is; valid as long as `self`.
    fn ptr(&self) -> *mut c_void;
    /// `size_of` the value.
    fn size(&self) -> usize;
}

impl<T: GpuRepr> ValueArg for T {
    fn ptr(&self) -> *mut c_void {
        (self as *const T).cast_mut().cast()
    }

    fn size(&self) -> usize {
        std::mem::size_of::<T>()
    }
}

pub(crate) enum ArgInner<'a> {
    Const(CudaView<'a, u8>, Option<Local>),
    Mut(CudaViewMut<'a, u8>, Option<Local>),
    Value(Box<dyn ValueArg>),
    /// A null pointer (`nullptr`), for a pointer parameter the kernel
    /// tests before it dereferences.
    Null,
    /// A view of the CPU backend: refused at launch.
    Host,
}

impl ArgInner<'_> {
    /// Bytes the argument puts in the parameter buffer.
    fn size(&self) -> usize {
        match self {
            Self::Value(v) => v.size(),
            // A device pointer: `CUdeviceptr`, 8 bytes on every 64-bit target.
            _ => std::mem::size_of::<u64>(),
        }
    }
}

/// One argument of a launch by name: a view for a pointer parameter, or a
/// value. A value is boxed: launches by name cost an allocation per value,
/// so use typed launches in hot loops.
pub struct Arg<'a> {
    inner: ArgInner<'a>,
}

impl std::fmt::Debug for Arg<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = match self.inner {
            ArgInner::Const(..) => "const pointer",
            ArgInner::Mut(..) => "pointer",
            ArgInner::Value(_) => "value",
            ArgInner::Null => "null pointer",
            ArgInner::Host => "host view",
        };
        f.debug_struct("Arg")
            .field("kind", &kind)
            .field("size", &self.size())
            .finish()
    }
}

impl<'a> Arg<'a> {
    /// A `const T *` parameter.
    pub fn view<T: GpuRepr>(view: DeviceView<'a, T>) -> Self {
        let inner = match view.inner {
            ViewRef::Cuda(v, local) => ArgInner::Const(v, local),
            ViewRef::Host(_) => ArgInner::Host,
            ViewRef::Null => ArgInner::Null,
        };
        Self { inner }
    }

    /// A `T *` parameter the kernel may write.
    pub fn view_mut<T: GpuRepr>(view: DeviceViewMut<'a, T>) -> Self {
        let inner = match view.inner {
            ViewMutRef::Cuda(v, local) => ArgInner::Mut(v, local),
            ViewMutRef::Host(_) => ArgInner::Host,
            ViewMutRef::Null => ArgInner::Null,
        };
        Self { inner }
    }

    /// `nullptr` for a pointer parameter (`const T *` or `T *`) that the
    /// kernel tests before it dereferences, as vendored kernels take an
    /// optional layout or an in-place input (`info == nullptr`:
    /// contiguous). Checked as a pointer: 8 bytes.
    pub fn null() -> Self {
        Self {
            inner: ArgInner::Null,
        }
    }

    /// A parameter passed by value: a scalar or a `#[repr(C)]` struct.
    pub fn value<T: GpuRepr>(value: T) -> Self {
        Self {
            inner: ArgInner::Value(Box::new(value)),
        }
    }

    /// Bytes this argument puts in the parameter buffer.
    pub fn size(&self) -> usize {
        self.inner.size()
    }
}

/// The argument list of a launch by name, built with the caller's promise
/// about each argument's kind ([`Args::new`]); the count and sizes are
/// checked at launch.
pub struct Args<'a> {
    pub(crate) args: Vec<ArgInner<'a>>,
}

impl std::fmt::Debug for Args<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Args")
            .field("len", &self.args.len())
            .finish()
    }
}

impl<'a> Args<'a> {
    pub(crate) fn from_args(args: impl IntoIterator<Item = Arg<'a>>) -> Self {
        Self {
            args: args.into_iter().map(|a| a.inner).collect(),
        }
    }

    /// Compares the count and sizes with `kernel`'s parameters.
    pub(crate) fn check(&self, kernel: &KernelByName) -> Result<(), Error> {
        let sizes: Vec<usize> = self.args.iter().map(ArgInner::size).collect();
        check_sizes(kernel.param_sizes(), &sizes).map_err(|mismatch| Error::LaunchArgs {
            kernel: kernel.name(),
            mismatch,
        })
    }
}

/// The first way `args` (sizes in bytes) differs from `params` (the driver's
/// parameter sizes): the count, then each size in order.
pub(crate) fn check_sizes(params: &[usize], args: &[usize]) -> Result<(), ArgMismatch> {
    if params.len() != args.len() {
        return Err(ArgMismatch::Count {
            expected: params.len(),
            got: args.len(),
        });
    }
    match params.iter().zip(args).position(|(p, a)| p != a) {
        Some(index) => Err(ArgMismatch::Size {
            index,
            expected: params[index],
            got: args[index],
        }),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `add_f32(const float *a, const float *b, float *c, unsigned n)` as
    /// its parameter table gives it.
    const ADD_F32: &[usize] = &[8, 8, 8, 4];

    #[test]
    fn the_right_list_passes() {
        check_sizes(ADD_F32, &[8, 8, 8, 4]).unwrap();
        check_sizes(&[], &[]).unwrap();
    }

    #[test]
    fn a_null_pointer_is_a_pointer_sized_argument() {
        let null = Arg::null();
        assert_eq!(null.size(), 8);
        assert!(format!("{null:?}").contains("null pointer"), "{null:?}");
        let args = Args::from_args([Arg::null(), Arg::null(), Arg::null(), Arg::value(4u32)]);
        let sizes: Vec<usize> = args.args.iter().map(ArgInner::size).collect();
        check_sizes(ADD_F32, &sizes).unwrap();
        // In a value's place it is a size mismatch, as any pointer is.
        let sizes = [8, 8, 8, Arg::null().size()];
        assert!(matches!(
            check_sizes(ADD_F32, &sizes),
            Err(ArgMismatch::Size { index: 3, .. })
        ));
    }

    #[test]
    fn a_missing_or_extra_argument_is_a_count_mismatch() {
        assert_eq!(
            check_sizes(ADD_F32, &[8, 8, 8]),
            Err(ArgMismatch::Count {
                expected: 4,
                got: 3
            })
        );
        assert_eq!(
            check_sizes(ADD_F32, &[8, 8, 8, 4, 4]),
            Err(ArgMismatch::Count {
                expected: 4,
                got: 5
            })
        );
    }

    #[test]
    fn a_wrong_size_names_the_first_parameter_that_differs() {
        // A u64 count where the kernel takes an unsigned int.
        assert_eq!(
            check_sizes(ADD_F32, &[8, 8, 8, 8]),
            Err(ArgMismatch::Size {
                index: 3,
                expected: 4,
                got: 8
            })
        );
        assert_eq!(
            check_sizes(&[8, 16, 2], &[8, 12, 4]),
            Err(ArgMismatch::Size {
                index: 1,
                expected: 16,
                got: 12
            })
        );
    }

    #[test]
    fn the_error_names_kernel_parameter_and_both_sizes() {
        let err = Error::LaunchArgs {
            kernel: "add_f32",
            mismatch: check_sizes(ADD_F32, &[8, 8, 8, 8]).unwrap_err(),
        };
        assert_eq!(
            err.to_string(),
            "launch of `add_f32` rejected: argument 3 is 8 bytes but the kernel's parameter 3 \
             is 4; pass one argument per parameter, each of its size"
        );
        let err = Error::LaunchArgs {
            kernel: "add_f32",
            mismatch: check_sizes(ADD_F32, &[8]).unwrap_err(),
        };
        assert_eq!(
            err.to_string(),
            "launch of `add_f32` rejected: 1 arguments for 4 parameters; pass one argument \
             per parameter, each of its size"
        );
    }

    #[test]
    fn argument_sizes_are_what_the_parameter_buffer_gets() {
        assert_eq!(Arg::value(3u32).size(), 4);
        assert_eq!(Arg::value(1u16).size(), 2);
        assert_eq!(Arg::value(1.0f64).size(), 8);
        // A view of host memory, as the CPU backend makes them.
        let buffer = crate::memory::DeviceBuffer {
            storage: crate::memory::Storage::Host(vec![1u8, 2]),
            len: 2,
        };
        let view = Arg::view(buffer.view());
        assert_eq!(view.size(), 8);
        assert_eq!(format!("{view:?}"), "Arg { kind: \"host view\", size: 8 }");
    }
}
