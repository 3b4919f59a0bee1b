//! Argument marshalling for launches: how each kind of C parameter
//! ([`param_kind`](crate::param_kind)) becomes the pointer the driver reads
//! ([`FfiParam`]), the tuple impls of [`LaunchParams`] (arity 0 to 20), and
//! the launch of a checked runtime argument list ([`launch_by_name`]).
//!
//! With `ffi/`, the only place of gpu-core with `unsafe`: the impls promise
//! the driver a value of each parameter's C type, which the types above
//! (views, `GpuRepr` values, `KernelDecl` tuples) make true.

use std::any::TypeId;
use std::ffi::c_void;
use std::marker::PhantomData;
use std::sync::Arc;

use cudarc::driver::{
    sys, CudaFunction, CudaStream, CudaView, CudaViewMut, DeviceSlice, SyncOnDrop,
};
use kiln_abi::param_kind::{Bool, ByValue, ConstPtr, ConstUntyped, MutPtr, MutUntyped};
use kiln_abi::{AbiParam, GpuRepr};

use super::by_name::{ArgInner, Args, KernelByName, ValueArg};
use super::{LaunchConfig, LaunchSite};
use crate::error::Error;
use crate::ffi;
use crate::memory::{HostParts, Local, UntypedMutRef, UntypedRef, ViewMutRef, ViewRef};
use crate::{DevicePtr, DevicePtrMut, DeviceView, DeviceViewMut};

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
    fn marshal<'a>(arg: Self::Arg<'a>, stream: OnStream<'a>)
        -> Result<Self::Marshalled<'a>, Error>;
    #[doc(hidden)]
    fn param_ptr(marshalled: &Self::Marshalled<'_>) -> *mut c_void;
    #[doc(hidden)]
    fn to_host<'a>(arg: Self::Arg<'a>) -> Result<Self::HostArg<'a>, Error>;
}

/// A kernel's whole parameter tuple: implemented for tuples of
/// [`AbiParam`](crate::AbiParam) types whose kinds are [`FfiParam`], arity 0
/// to 20.
pub trait LaunchParams {
    /// The tuple of launch arguments.
    type Args<'a>;
    /// The tuple a CPU kernel body gets.
    type HostArgs<'a>;
    #[doc(hidden)]
    fn launch_cuda<'a>(args: Self::Args<'a>, target: CudaLaunch<'a, '_>) -> Result<(), Error>;
    #[doc(hidden)]
    fn to_host<'a>(args: Self::Args<'a>) -> Result<Self::HostArgs<'a>, Error>;
}

/// The CUDA stream a parameter is marshalled for. Appears only in the hidden
/// methods of the public traits above and cannot be named or built outside
/// gpu-core, so that no cudarc type is part of gpu-core's API.
#[derive(Debug, Clone, Copy)]
#[allow(unreachable_pub)]
pub struct OnStream<'a>(&'a Arc<CudaStream>);

/// Where a typed launch goes: the stream, function, configuration and site.
/// Opaque outside gpu-core, as [`OnStream`].
#[derive(Debug, Clone, Copy)]
#[allow(unreachable_pub)]
pub struct CudaLaunch<'a, 'f> {
    stream: OnStream<'a>,
    func: &'f CudaFunction,
    config: LaunchConfig,
    site: LaunchSite,
}

impl<'a, 'f> CudaLaunch<'a, 'f> {
    pub(crate) fn new(
        stream: &'a Arc<CudaStream>,
        func: &'f CudaFunction,
        config: LaunchConfig,
        site: LaunchSite,
    ) -> Self {
        Self {
            stream: OnStream(stream),
            func,
            config,
            site,
        }
    }

    /// Enqueues the launch with the parameter pointers given.
    ///
    /// # Safety
    /// As [`ffi::driver::launch`]: one pointer per C parameter of the
    /// function, in order, each to a live value of the parameter's type.
    unsafe fn launch(&self, params: &mut [*mut c_void]) -> Result<(), Error> {
        let config = &self.config;
        // SAFETY: the caller's contract is the ffi function's.
        unsafe {
            ffi::driver::launch(
                self.func,
                config.grid,
                config.block,
                config.shared_mem_bytes,
                self.stream.0,
                params,
            )
        }
        .map_err(|source| Error::Launch {
            kernel: self.site.kernel,
            module: self.site.module,
            source: source.into(),
        })
    }
}

/// A device pointer kernel parameter, and the guard that records the use of
/// its memory on the stream when dropped after the launch.
#[doc(hidden)]
#[derive(Debug)]
pub struct PointerParam<'a> {
    ptr: sys::CUdeviceptr,
    /// `None` for a null view: no memory to record a use of.
    _record: Option<SyncOnDrop<'a>>,
}

impl<'a> PointerParam<'a> {
    /// The device pointer of a read-only view, for a launch on `stream`: a
    /// stream-local buffer's address as it is (on its own stream only),
    /// any other's with cudarc's record of the use.
    fn of_view(
        view: CudaView<'a, u8>,
        local: Option<Local>,
        stream: &'a Arc<CudaStream>,
    ) -> Result<Self, Error> {
        same_context(view.stream(), stream)?;
        if let Some(local) = local {
            return Self::local(local, stream);
        }
        let (ptr, record) = view.view_ptr(stream);
        Ok(Self {
            ptr,
            _record: Some(record),
        })
    }

    /// The device pointer of a view the kernel may write, for a launch on
    /// `stream` (as [`Self::of_view`]).
    fn of_view_mut(
        view: CudaViewMut<'a, u8>,
        local: Option<Local>,
        stream: &'a Arc<CudaStream>,
    ) -> Result<Self, Error> {
        same_context(view.stream(), stream)?;
        if let Some(local) = local {
            return Self::local(local, stream);
        }
        let (ptr, record) = view.view_ptr_mut(stream);
        Ok(Self {
            ptr,
            _record: Some(record),
        })
    }

    /// A stream-local view's address, on its own stream only.
    fn local(local: Local, stream: &Arc<CudaStream>) -> Result<Self, Error> {
        Ok(Self {
            ptr: local.address_on(stream)?,
            _record: None,
        })
    }

    /// `nullptr`, for a null view (`DeviceView::null`).
    fn null() -> Self {
        Self {
            ptr: 0,
            _record: None,
        }
    }

    /// Where the driver reads the parameter: the `CUdeviceptr` itself.
    fn param_ptr(&self) -> *mut c_void {
        (&self.ptr as *const sys::CUdeviceptr).cast_mut().cast()
    }
}

/// `Err` unless `a` and `b` share a context (a buffer of another device).
fn same_context(a: &CudaStream, b: &CudaStream) -> Result<(), Error> {
    if Arc::ptr_eq(a.context(), b.context()) {
        Ok(())
    } else {
        Err(Error::BackendMismatch {
            what: "a buffer from another device's context",
        })
    }
}

/// A buffer of the CPU backend handed to a CUDA launch.
fn host_on_cuda() -> Error {
    Error::BackendMismatch {
        what: "a host buffer passed to a cuda launch",
    }
}

/// A buffer of the CUDA backend handed to a CPU launch.
fn cuda_on_host() -> Error {
    Error::BackendMismatch {
        what: "a cuda buffer passed to a cpu launch",
    }
}

// SAFETY: `marshal` yields the `CUdeviceptr` of the view's first byte (a `const
// T *` in C is one pointer-sized device address), kept alive in
// `PointerParam`; the view borrows a live allocation on the same context
// (checked), for the launch's lifetime. A null view yields address 0, which the
// C code must test before reading (the caller chose `DeviceView::null` for a
// parameter documented as nullable; 0 is a valid `const T *` value).
unsafe impl<T: GpuRepr> FfiParam for ConstPtr<T> {
    type Arg<'a> = DeviceView<'a, T>;
    type HostArg<'a> = &'a [T];
    type Marshalled<'a> = PointerParam<'a>;

    #[inline]
    fn marshal<'a>(
        arg: Self::Arg<'a>,
        stream: OnStream<'a>,
    ) -> Result<Self::Marshalled<'a>, Error> {
        match arg.inner {
            ViewRef::Cuda(view, local) => PointerParam::of_view(view, local, stream.0),
            ViewRef::Null => Ok(PointerParam::null()),
            ViewRef::Host(_) => Err(host_on_cuda()),
        }
    }

    #[inline]
    fn param_ptr(marshalled: &Self::Marshalled<'_>) -> *mut c_void {
        marshalled.param_ptr()
    }

    fn to_host<'a>(arg: Self::Arg<'a>) -> Result<Self::HostArg<'a>, Error> {
        arg.as_host().ok_or_else(cuda_on_host)
    }
}

// SAFETY: as for `ConstPtr<T>` (`const T *`); the view borrows its buffer mutably, so the
// kernel's writes alias no other view handed to the same launch.
unsafe impl<T: GpuRepr> FfiParam for MutPtr<T> {
    type Arg<'a> = DeviceViewMut<'a, T>;
    type HostArg<'a> = &'a mut [T];
    type Marshalled<'a> = PointerParam<'a>;

    #[inline]
    fn marshal<'a>(
        arg: Self::Arg<'a>,
        stream: OnStream<'a>,
    ) -> Result<Self::Marshalled<'a>, Error> {
        match arg.inner {
            ViewMutRef::Cuda(view, local) => PointerParam::of_view_mut(view, local, stream.0),
            ViewMutRef::Null => Ok(PointerParam::null()),
            ViewMutRef::Host(_) => Err(host_on_cuda()),
        }
    }

    #[inline]
    fn param_ptr(marshalled: &Self::Marshalled<'_>) -> *mut c_void {
        marshalled.param_ptr()
    }

    fn to_host<'a>(arg: Self::Arg<'a>) -> Result<Self::HostArg<'a>, Error> {
        match arg.inner {
            ViewMutRef::Host(s) => Ok(s),
            ViewMutRef::Null => Ok(&mut []),
            ViewMutRef::Cuda(..) => Err(cuda_on_host()),
        }
    }
}

// SAFETY: the parameter is passed by value: `param_ptr` points to the value
// itself, kept alive in `Marshalled`; its layout equals the C type's
// (`GpuRepr`, asserted at compile time by generated code or `gpu_repr!`).
unsafe impl<T: GpuRepr> FfiParam for ByValue<T> {
    type Arg<'a> = T;
    type HostArg<'a> = T;
    type Marshalled<'a> = T;

    #[inline]
    fn marshal<'a>(
        arg: Self::Arg<'a>,
        _stream: OnStream<'a>,
    ) -> Result<Self::Marshalled<'a>, Error> {
        Ok(arg)
    }

    #[inline]
    fn param_ptr(marshalled: &Self::Marshalled<'_>) -> *mut c_void {
        (marshalled as *const T).cast_mut().cast()
    }

    #[inline]
    fn to_host<'a>(arg: Self::Arg<'a>) -> Result<Self::HostArg<'a>, Error> {
        Ok(arg)
    }
}

/// A kernel's `const void *` parameter as a CPU kernel body gets it: the
/// elements of the view the [`DevicePtr`] was made from, read back as
/// their own type.
#[derive(Debug, Clone, Copy)]
pub struct HostPtr<'a> {
    /// `None` for a null pointer.
    parts: Option<HostParts>,
    _borrow: PhantomData<&'a ()>,
}

impl<'a> HostPtr<'a> {
    /// Whether the launch passed [`DevicePtr::null`].
    pub fn is_null(&self) -> bool {
        self.parts.is_none()
    }

    /// The elements, when the pointer was made from a view of `T` (empty
    /// for a null pointer); `None` when it was made from another type.
    pub fn get<T: GpuRepr>(&self) -> Option<&'a [T]> {
        match self.parts {
            None => Some(&[]),
            Some(p) if p.ty == TypeId::of::<T>() => {
                // SAFETY: `p` was made from a `&'a [T]` of exactly this `T`
                // (the type ids match) and this length, borrowed shared for
                // `'a` (`DevicePtr<'a>`), so the slice is that one again.
                Some(unsafe { std::slice::from_raw_parts(p.ptr.cast::<T>(), p.len) })
            }
            Some(_) => None,
        }
    }
}

/// A kernel's `void *` parameter as a CPU kernel body gets it, as
/// [`HostPtr`] for elements the body may write.
#[derive(Debug)]
pub struct HostPtrMut<'a> {
    parts: Option<HostParts>,
    _borrow: PhantomData<&'a mut ()>,
}

impl<'a> HostPtrMut<'a> {
    /// Whether the launch passed [`DevicePtrMut::null`].
    pub fn is_null(&self) -> bool {
        self.parts.is_none()
    }

    /// The elements, when the pointer was made from a view of `T` (empty
    /// for a null pointer); `None` when it was made from another type.
    pub fn get_mut<T: GpuRepr>(&mut self) -> Option<&mut [T]> {
        match self.parts {
            None => Some(&mut []),
            Some(p) if p.ty == TypeId::of::<T>() => {
                // SAFETY: as in `into_mut`; the slice borrows `self`
                // mutably, so no other slice of it is alive meanwhile.
                Some(unsafe { std::slice::from_raw_parts_mut(p.ptr.cast::<T>(), p.len) })
            }
            Some(_) => None,
        }
    }

    /// As [`HostPtrMut::get_mut`], for all of `'a`.
    pub fn into_mut<T: GpuRepr>(self) -> Option<&'a mut [T]> {
        match self.parts {
            None => Some(&mut []),
            Some(p) if p.ty == TypeId::of::<T>() => {
                // SAFETY: `p` was made from a `&'a mut [T]` of exactly this
                // `T` and length (`DevicePtrMut<'a>` borrowed it mutably for
                // `'a`), and `self`, the only holder of it, is consumed.
                Some(unsafe { std::slice::from_raw_parts_mut(p.ptr.cast::<T>(), p.len) })
            }
            Some(_) => None,
        }
    }
}

// SAFETY: as for `ConstPtr<T>`: a `const void *` is one pointer-sized device
// address, of the view's first byte (or 0 for a null pointer), the view
// borrowed for the launch on the same context (checked).
unsafe impl FfiParam for ConstUntyped {
    type Arg<'a> = DevicePtr<'a>;
    type HostArg<'a> = HostPtr<'a>;
    type Marshalled<'a> = PointerParam<'a>;

    #[inline]
    fn marshal<'a>(
        arg: Self::Arg<'a>,
        stream: OnStream<'a>,
    ) -> Result<Self::Marshalled<'a>, Error> {
        match arg.inner {
            UntypedRef::Cuda(view, local) => PointerParam::of_view(view, local, stream.0),
            UntypedRef::Null => Ok(PointerParam::null()),
            UntypedRef::Host(..) => Err(host_on_cuda()),
        }
    }

    #[inline]
    fn param_ptr(marshalled: &Self::Marshalled<'_>) -> *mut c_void {
        marshalled.param_ptr()
    }

    fn to_host<'a>(arg: Self::Arg<'a>) -> Result<Self::HostArg<'a>, Error> {
        let parts = match arg.inner {
            UntypedRef::Host(parts, _) => Some(parts),
            UntypedRef::Null => None,
            UntypedRef::Cuda(..) => return Err(cuda_on_host()),
        };
        Ok(HostPtr {
            parts,
            _borrow: PhantomData,
        })
    }
}

// SAFETY: as for `ConstUntyped` (`void *`); the view it was made from
// borrowed its buffer mutably, so the kernel's writes alias no other view
// handed to the same launch.
unsafe impl FfiParam for MutUntyped {
    type Arg<'a> = DevicePtrMut<'a>;
    type HostArg<'a> = HostPtrMut<'a>;
    type Marshalled<'a> = PointerParam<'a>;

    #[inline]
    fn marshal<'a>(
        arg: Self::Arg<'a>,
        stream: OnStream<'a>,
    ) -> Result<Self::Marshalled<'a>, Error> {
        match arg.inner {
            UntypedMutRef::Cuda(view, local) => PointerParam::of_view_mut(view, local, stream.0),
            UntypedMutRef::Null => Ok(PointerParam::null()),
            UntypedMutRef::Host(..) => Err(host_on_cuda()),
        }
    }

    #[inline]
    fn param_ptr(marshalled: &Self::Marshalled<'_>) -> *mut c_void {
        marshalled.param_ptr()
    }

    fn to_host<'a>(arg: Self::Arg<'a>) -> Result<Self::HostArg<'a>, Error> {
        let parts = match arg.inner {
            UntypedMutRef::Host(parts, _) => Some(parts),
            UntypedMutRef::Null => None,
            UntypedMutRef::Cuda(..) => return Err(cuda_on_host()),
        };
        Ok(HostPtrMut {
            parts,
            _borrow: PhantomData,
        })
    }
}

// SAFETY: C's `bool` is one byte holding 0 or 1 (its 1-byte size is
// asserted by generated code against clang's); `param_ptr` points to such a
// byte, kept alive in `Marshalled`.
unsafe impl FfiParam for Bool {
    type Arg<'a> = bool;
    type HostArg<'a> = bool;
    type Marshalled<'a> = u8;

    #[inline]
    fn marshal<'a>(
        arg: Self::Arg<'a>,
        _stream: OnStream<'a>,
    ) -> Result<Self::Marshalled<'a>, Error> {
        Ok(u8::from(arg))
    }

    #[inline]
    fn param_ptr(marshalled: &Self::Marshalled<'_>) -> *mut c_void {
        (marshalled as *const u8).cast_mut().cast()
    }

    #[inline]
    fn to_host<'a>(arg: Self::Arg<'a>) -> Result<Self::HostArg<'a>, Error> {
        Ok(arg)
    }
}

macro_rules! tuple_params {
    ($n:literal; $($p:ident $a:ident $m:ident),*) => {
        impl<$($p: AbiParam),*> LaunchParams for ($($p,)*)
        where
            $(<$p as AbiParam>::Kind: FfiParam,)*
        {
            type Args<'a> = ($(<<$p as AbiParam>::Kind as FfiParam>::Arg<'a>,)*);
            type HostArgs<'a> = ($(<<$p as AbiParam>::Kind as FfiParam>::HostArg<'a>,)*);

            #[inline]
            #[allow(unused_variables, clippy::unused_unit)]
            fn launch_cuda<'a>(args: Self::Args<'a>, target: CudaLaunch<'a, '_>) -> Result<(), Error> {
                let ($($a,)*) = args;
                $(let $m = <<$p as AbiParam>::Kind as FfiParam>::marshal($a, target.stream)?;)*
                let mut params: [*mut c_void; $n] = [$(<<$p as AbiParam>::Kind as FfiParam>::param_ptr(&$m)),*];
                // SAFETY: `params` holds one pointer per C parameter, in order
                // (the tuple is the kernel's `Params`, which `KernelDecl`'s
                // contract makes its C parameter types), each to a marshalled
                // value that lives until the end of this function
                // (`FfiParam`'s contract).
                unsafe { target.launch(&mut params) }
                // The marshalled guards drop here, after the launch is enqueued.
            }

            #[allow(clippy::unused_unit)]
            fn to_host<'a>(args: Self::Args<'a>) -> Result<Self::HostArgs<'a>, Error> {
                let ($($a,)*) = args;
                Ok(($(<<$p as AbiParam>::Kind as FfiParam>::to_host($a)?,)*))
            }
        }
    };
}

tuple_params!(0;);
tuple_params!(1; A a ma);
tuple_params!(2; A a ma, B b mb);
tuple_params!(3; A a ma, B b mb, C c mc);
tuple_params!(4; A a ma, B b mb, C c mc, D d md);
tuple_params!(5; A a ma, B b mb, C c mc, D d md, E e me);
tuple_params!(6; A a ma, B b mb, C c mc, D d md, E e me, F f mf);
tuple_params!(7; A a ma, B b mb, C c mc, D d md, E e me, F f mf, G g mg);
tuple_params!(8; A a ma, B b mb, C c mc, D d md, E e me, F f mf, G g mg, H h mh);
tuple_params!(9; A a ma, B b mb, C c mc, D d md, E e me, F f mf, G g mg, H h mh, I i mi);
tuple_params!(10; A a ma, B b mb, C c mc, D d md, E e me, F f mf, G g mg, H h mh, I i mi, J j mj);
tuple_params!(11; A a ma, B b mb, C c mc, D d md, E e me, F f mf, G g mg, H h mh, I i mi, J j mj, K k mk);
tuple_params!(12; A a ma, B b mb, C c mc, D d md, E e me, F f mf, G g mg, H h mh, I i mi, J j mj, K k mk, L l ml);
tuple_params!(13; A a ma, B b mb, C c mc, D d md, E e me, F f mf, G g mg, H h mh, I i mi, J j mj, K k mk, L l ml, M m mm);
tuple_params!(14; A a ma, B b mb, C c mc, D d md, E e me, F f mf, G g mg, H h mh, I i mi, J j mj, K k mk, L l ml, M m mm, N n mn);
tuple_params!(15; A a ma, B b mb, C c mc, D d md, E e me, F f mf, G g mg, H h mh, I i mi, J j mj, K k mk, L l ml, M m mm, N n mn, O o mo);
tuple_params!(16; A a ma, B b mb, C c mc, D d md, E e me, F f mf, G g mg, H h mh, I i mi, J j mj, K k mk, L l ml, M m mm, N n mn, O o mo, P p mp);
tuple_params!(17; A a ma, B b mb, C c mc, D d md, E e me, F f mf, G g mg, H h mh, I i mi, J j mj, K k mk, L l ml, M m mm, N n mn, O o mo, P p mp, Q q mq);
tuple_params!(18; A a ma, B b mb, C c mc, D d md, E e me, F f mf, G g mg, H h mh, I i mi, J j mj, K k mk, L l ml, M m mm, N n mn, O o mo, P p mp, Q q mq, R r mr);
tuple_params!(19; A a ma, B b mb, C c mc, D d md, E e me, F f mf, G g mg, H h mh, I i mi, J j mj, K k mk, L l ml, M m mm, N n mn, O o mo, P p mp, Q q mq, R r mr, S s ms);
tuple_params!(20; A a ma, B b mb, C c mc, D d md, E e me, F f mf, G g mg, H h mh, I i mi, J j mj, K k mk, L l ml, M m mm, N n mn, O o mo, P p mp, Q q mq, R r mr, S s ms, T t mt);

impl<'a> Args<'a> {
    /// The argument list of a launch by name, in parameter order.
    ///
    /// # Safety
    /// Each argument must be of its parameter's kind, which the driver does
    /// not report and so cannot be checked: [`Arg::view`] or
    /// [`Arg::view_mut`] where the kernel takes a pointer to elements of the
    /// view's type (`view_mut` where it writes through it), holding as many
    /// elements as the kernel accesses; [`Arg::null`] only where the kernel
    /// tests the pointer before it dereferences it; [`Arg::value`] of the
    /// parameter's C type otherwise (never an address standing for a
    /// pointer). The count and each size are checked at launch.
    ///
    /// [`Arg::null`]: super::Arg::null
    /// [`Arg::view`]: super::Arg::view
    /// [`Arg::view_mut`]: super::Arg::view_mut
    /// [`Arg::value`]: super::Arg::value
    pub unsafe fn new(args: impl IntoIterator<Item = super::Arg<'a>>) -> Self {
        Self::from_args(args)
    }
}

/// A marshalled argument of a launch by name: a device pointer with the
/// guard that records the launch as its memory's user, or a boxed value.
enum Marshalled<'a> {
    Pointer(PointerParam<'a>),
    Value(Box<dyn ValueArg>),
}

/// Launches `kernel` with a runtime argument list, after checking it against
/// the parameter sizes the driver reported; a list that does not fit is an
/// `Err` and nothing reaches the driver.
pub(crate) fn launch_by_name(
    stream: &Arc<CudaStream>,
    kernel: &KernelByName,
    config: LaunchConfig,
    args: Args<'_>,
) -> Result<(), Error> {
    args.check(kernel)?;
    let marshalled = args
        .args
        .into_iter()
        .map(|arg| match arg {
            ArgInner::Const(view, local) => {
                PointerParam::of_view(view, local, stream).map(Marshalled::Pointer)
            }
            ArgInner::Mut(view, local) => {
                PointerParam::of_view_mut(view, local, stream).map(Marshalled::Pointer)
            }
            ArgInner::Value(value) => Ok(Marshalled::Value(value)),
            // A device pointer of 0: `CUdeviceptr` is a u64.
            ArgInner::Null => Ok(Marshalled::Value(Box::new(0u64))),
            ArgInner::Host => Err(host_on_cuda()),
        })
        .collect::<Result<Vec<_>, Error>>()?;
    let mut params: Vec<*mut c_void> = marshalled
        .iter()
        .map(|m| match m {
            Marshalled::Pointer(pointer) => pointer.param_ptr(),
            Marshalled::Value(value) => value.ptr(),
        })
        .collect();
    let site = LaunchSite {
        kernel: kernel.name(),
        module: kernel.module(),
    };
    let target = CudaLaunch::new(stream, kernel.function(), config, site);
    // SAFETY: `params` holds one pointer per parameter of the function, in
    // order: `check` compared the count and each size with the driver's
    // parameter info, and `Args::new`'s caller promised each argument's kind
    // and type. Each pointer is to a `CUdeviceptr` or a boxed value inside
    // `marshalled`, which is not moved or dropped until after the launch is
    // enqueued (its guards then record the launch as the memory's user).
    let launched = unsafe { target.launch(&mut params) };
    drop(marshalled);
    launched
}
