//! kiln's safe, typed GPU API on cudarc, with a CPU fallback.
//!
//! - [`Backend::auto`] picks CUDA or the CPU at run time and says why;
//! - [`Stream`] allocates [`DeviceBuffer`]s, copies, and launches [`Kernel`]s
//!   whose arguments are typed by the kernel's C declaration;
//! - the CPU backend offers the same buffer and launch API over host memory,
//!   with kernel bodies written in Rust ([`Backend::kernel_with_cpu`]);
//! - page-locked host memory ([`PinnedBuffer`], [`HostRegistration`]) and
//!   asynchronous copies guarded by [`InFlight`];
//! - [`Devices`] opens one backend per GPU, and [`Collective`] all-reduces
//!   buffers across them through NCCL, loaded at run time.
//!
//! gpu-core never names one of kiln's kernels: callers hand in the
//! [`FatbinImage`]s to load. Kernels without a header are looked up by name
//! ([`Backend::kernel_by_name`]) and launched with a runtime argument list
//! checked against the driver's parameter info ([`Stream::launch_by_name`]).
//!
//! # Unsafe contract
//! `unsafe` code (outside doc comments and their examples) is in exactly
//! these files: `src/ffi/mod.rs`, `src/ffi/driver.rs`, `src/ffi/nccl.rs`,
//! `src/ffi/nccl/rank.rs` (the driver and NCCL calls, the last for one rank
//! of a multi-process job) and `src/launch/marshal.rs` (kernel argument
//! marshalling: the `FfiParam` and `LaunchParams` impls and the launch of a
//! checked argument list); kiln's tidy test checks this list against the
//! files. Every
//! `unsafe fn` and `unsafe trait` has a `# Safety` section, every `unsafe`
//! block a `// SAFETY:` comment.
//!
//! The `ffi` layer takes raw handles and cudarc's own types only and never
//! imports from the modules above it; its safe functions check what they rely
//! on (lengths, contexts) before the driver sees a pointer. Everything else is
//! safe code, which keeps these invariants: device memory is reached only
//! through live views of buffers on the stream's context; a kernel's
//! arguments are typed by its [`KernelDecl`] (an `unsafe trait`: generated
//! code promises the C parameter types) or, launched by name, promised by
//! the caller of the `unsafe fn` [`Args::new`] and checked for count and
//! size; host memory is read back only as [`GpuRepr`] types, valid for every
//! bit pattern; page-locked host memory that asynchronous copies use is
//! owned or borrowed by `ffi`'s own types, which wait for the last copy
//! before the host reads, writes, frees or unregisters it.
//!
//! # From your own crate
//! Depend on gpu-core, and on `cuda-build` as a build-dependency to compile
//! your `kernels/*.cu` (see its crate docs, and `examples/downstream` in
//! kiln's repository). The build script writes `<prefix>_modules.rs` (the
//! prefix its build script gives cuda-build), one
//! [`FatbinImage`] per module plus `ALL`, for `Backend::auto(modules::ALL)`;
//! cuda-build's codegen turns your header's structs and `KILN_KERNEL(...)`
//! lines into [`GpuRepr`] types and [`KernelDecl`] markers (with
//! `abi_path("::gpu_core")`). Written by hand, that generated code and a
//! launch look like this (on the CPU backend here, so the example runs
//! anywhere):
//! ```
//! use gpu_core::{Backend, KernelDecl, LaunchConfig};
//!
//! // Generated from `typedef struct Scale { float a; uint32_t n; } Scale;`
//! #[repr(C)]
//! #[derive(Debug, Clone, Copy)]
//! pub struct Scale { pub a: f32, pub n: u32 }
//! gpu_core::gpu_repr!(Scale = "Scale" { size: 8, align: 4, fields: { a: 0, n: 4 } });
//!
//! // Generated from `KILN_KERNEL(scale, Scale p, float *y);`
//! #[allow(non_camel_case_types)]
//! #[derive(Debug, Clone, Copy)]
//! pub struct scale;
//! // SAFETY: the kernel's entry point and C parameter types, in order.
//! unsafe impl KernelDecl for scale {
//!     const NAME: &'static str = "scale";
//!     const HEADER: &'static str = "scale.h";
//!     const PARAM_NAMES: &'static [&'static str] = &["p", "y"];
//!     const PARAM_LAYOUT: &'static [(usize, usize)] = &[(8, 4), (8, 8)];
//!     type Params = (Scale, *mut f32);
//! }
//!
//! // The kernel's body for the CPU backend: the same arguments, as host data.
//! fn scale_cpu(_: &LaunchConfig, (p, y): (Scale, &mut [f32])) {
//!     y[..p.n as usize].iter_mut().for_each(|v| *v *= p.a);
//! }
//!
//! // `Backend::auto(modules::ALL)` in a real crate: CUDA where it can run.
//! let backend = Backend::cpu();
//! let kernel = backend.kernel_with_cpu::<scale>(scale_cpu)?;
//! let stream = backend.default_stream();
//! let mut y = stream.to_device(&[1.0f32, 2.0, 3.0])?;
//! // The tuple's type comes from `Params`: (Scale, DeviceViewMut<f32>).
//! let args = (Scale { a: 2.0, n: 3 }, y.view_mut());
//! stream.launch(&kernel, LaunchConfig::for_elements(3, 256), args)?;
//! assert_eq!(stream.to_host(&y.view())?, [2.0, 4.0, 6.0]);
//! # Ok::<(), gpu_core::Error>(())
//! ```
//!
//! # Page-locked memory and asynchronous copies
//! [`Stream::alloc_pinned`] allocates a [`PinnedBuffer`] in page-locked host
//! memory, and [`Stream::register_host`] page-locks memory you already have
//! (a `Vec`, a memory-mapped file's pages) for as long as the
//! [`HostRegistration`] borrows it. [`Stream::copy_to_device_async`] and
//! [`Stream::copy_to_host_async`] enqueue a copy and return at once, with an
//! [`InFlight`] guard that borrows both sides until it is waited for or
//! joined to another stream (dropping it waits), so the host goes on while
//! the device copies. On the CPU backend the buffer is a `Vec`, the
//! registration does nothing, and the copy is done when the call returns.
//! ```
//! use gpu_core::Backend;
//!
//! // `Backend::auto(modules::ALL)` in a real crate: CUDA where it can run.
//! let backend = Backend::cpu();
//! let upload = backend.new_stream()?;
//! let compute = backend.new_stream()?;
//! let mut staging = upload.alloc_pinned::<f32>(4)?;
//! staging.as_mut_slice()?.copy_from_slice(&[1.0, 2.0, 3.0, 4.0]);
//! let mut on_device = upload.alloc_zeros::<f32>(4)?;
//! // Both buffers stay borrowed until the copy is joined: later work on
//! // `compute` runs after it, and `staging` waits for it before it is
//! // written again.
//! upload
//!     .copy_to_device_async(&staging, &mut on_device)?
//!     .join(&compute)?;
//! let mut back = compute.alloc_pinned::<f32>(4)?;
//! compute.copy_to_host_async(&on_device, &mut back)?.wait()?;
//! assert_eq!(back.as_slice()?, [1.0, 2.0, 3.0, 4.0]);
//!
//! // Memory you already have (a `Vec`, a memory-mapped file), page-locked
//! // for as long as the registration borrows it: a sub-range of it here.
//! let data = vec![5.0f32, 6.0, 7.0, 8.0, 9.0];
//! let registered = upload.register_host(&data)?;
//! upload
//!     .copy_to_device_async(registered.slice(1..)?, &mut on_device)?
//!     .wait()?;
//! assert_eq!(upload.to_host(&on_device.view())?, [6.0, 7.0, 8.0, 9.0]);
//! # Ok::<(), gpu_core::Error>(())
//! ```
//!
//! # Stream-local buffers
//! cudarc orders a buffer shared by several streams with two CUDA events per
//! use: a launch with a dozen pointer arguments makes two dozen driver calls
//! before its own, half of the host's time in kiln-anneal's small problems
//! (where the GPU then waited for the host). A buffer that one stream
//! alone uses needs none of that, since the stream's order
//! already orders every use: [`DeviceBuffer::into_local`] (or
//! [`Stream::alloc_zeros_local`]) makes it so. Work other streams enqueued
//! on it before is waited for; from then on its launches, fills and raw
//! addresses pass its address as it is (its copies keep cudarc's path, on
//! its own stream), a use on any other stream is refused with
//! [`Error::ForeignStream`] before anything is enqueued, and its free waits
//! for its stream's work. On the CPU backend it is the buffer unchanged.
//! ```
//! use gpu_core::Backend;
//!
//! let backend = Backend::cpu();
//! let stream = backend.new_stream()?;
//! let mut counts = stream.alloc_zeros_local::<u32>(4)?;
//! stream.copy_to_device(&[1, 2, 3, 4], &mut counts.view_mut())?;
//! assert_eq!(stream.to_host(&counts.view())?, [1, 2, 3, 4]);
//! # Ok::<(), gpu_core::Error>(())
//! ```
//!
//! # CUDA version
//! cudarc's bindings are per CUDA version, and exactly one must be on:
//! gpu-core's features `cuda-12040` ... `cuda-13040` pass the choice to
//! cudarc (`cuda-13000` by default; 12.4 is the floor, for
//! `cuFuncGetParamInfo`). A crate already on cudarc with, say,
//! `cuda-12080` writes `kiln-gpu-core = { default-features = false,
//! features = ["cuda-12080"] }`. cudarc loads libcuda at run time, so a
//! build for an older version runs on any newer driver.
//!
//! # With plain cudarc
//! cudarc is part of gpu-core's public promise in three places only, its
//! interop surface: [`Backend::cudarc_context`] and [`Stream::cudarc_stream`]
//! hand out the context and stream under the CUDA backend (`None` on the
//! CPU), and [`Stream::from_cudarc`] wraps a stream of yours; gpu-core
//! re-exports the [`cudarc`] it is built with, so those types are the ones
//! your own `cudarc` dependency names when both are 0.19. The rest of the
//! API names no cudarc type. A crate that launches with cudarc alone still
//! uses kiln's build: cuda-build embeds the fat binaries, loaded with
//! `ctx.load_module(Ptx::from_binary(modules::NAME.image.to_vec()))`, and
//! cuda-build's codegen with `cudarc_device_repr(true)` implements cudarc's
//! `DeviceRepr` for the header's structs so they pass by value
//! (`examples/cudarc-interop` in kiln's repository).

// cudarc's bindings are chosen by CUDA version, and gpu-core cannot see
// which one cudarc was built with: the user names it through gpu-core. With
// none, cudarc (an optional dependency every version feature enables) is
// not built, so its build script never asks an `nvcc` it may not know for
// a version; this error is then the build's only one, since every item
// below is compiled only with a version (`cfg(with_cudarc)`, which
// `build.rs` sets from the features).
#[cfg(not(with_cudarc))]
compile_error!(
    "kiln-gpu-core needs one CUDA-version feature: cuda-12040, cuda-12050, cuda-12060, cuda-12080, cuda-12090, cuda-13000 (the default), cuda-13010, cuda-13020, cuda-13030 or cuda-13040; with default-features = false, enable the one your cudarc dependency uses"
);

/// The items it is given, compiled only when a CUDA-version feature (and
/// so cudarc) is on.
macro_rules! with_cudarc {
    ($($item:item)*) => {
        $(
            #[cfg(with_cudarc)]
            $item
        )*
    };
}

with_cudarc! {
    mod backend;
    mod device;
    pub mod error;
    mod ffi;
    mod launch;
    mod memory;
    mod module;
    mod multi;
    mod pinned;
    mod ranks;
    mod stream;
    #[cfg(feature = "testing")]
    pub mod testing;

    /// The cudarc gpu-core is built with, for the interop surface
    /// ([`Backend::cudarc_context`], [`Stream::cudarc_stream`]).
    pub use cudarc;

    pub use backend::{Backend, BACKEND_ENV};
    pub use device::{
        device_memory, devices, driver_present, driver_version, BackendKind, DeviceInfo, DeviceLimits,
        MemoryInfo,
    };
    pub use error::{CpuReason, Error};
    pub use kiln_abi::{
        gpu_repr, param_kind, AbiParam, ConstVoidPtr, FatbinImage, Fp4E2M1, Fp4x2E2M1, Fp6E2M3,
        Fp6E3M2, Fp8E4M3, Fp8E5M2, Fp8E8M0, GpuRepr, KernelDecl, KernelInfo, MutVoidPtr,
    };
    pub use launch::{
        Arg, Args, CpuKernel, FfiParam, HostPtr, HostPtrMut, Kernel, KernelByName, KernelLimits,
        LaunchConfig, LaunchParams, LaunchSite,
    };
    pub use memory::{DeviceBuffer, DevicePtr, DevicePtrMut, DeviceView, DeviceViewMut};
    pub use multi::{nccl_available, nccl_version, Collective, CollectiveElem, Devices, GpuCount};
    pub use pinned::{HostRegistration, InFlight, PinnedBuffer, PinnedView, PinnedViewMut};
    pub use ranks::{nccl_unique_id, AbortHandle, RankCollective, RankGroup, NCCL_ID_BYTES};
    pub use stream::{Event, Stream};
}
