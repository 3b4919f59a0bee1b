//! kiln's kernel build with plain cudarc, for a crate that already launches
//! with cudarc: `build.rs` runs cuda-build on `kernels/`, this crate loads the
//! embedded fat binary with `CudaContext::load_module` and launches it with
//! cudarc's `launch_builder`, passing the header's `AffineParams` by value
//! (its generated binding implements cudarc's `DeviceRepr`:
//! `Codegen::cudarc_device_repr(true)` in `codegen/`).
//!
//! ```no_run
//! use cudarc::driver::CudaContext;
//! let ctx = CudaContext::new(0)?;
//! let kernel = cudarc_interop::load(&ctx)?;
//! let y = cudarc_interop::affine(&ctx.default_stream(), &kernel, 2.0, 1.0, &[1.0, 2.0])?;
//! assert_eq!(y, [3.0, 5.0]);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! It also depends on gpu-core, with cudarc's CUDA version (`cuda-12080`),
//! and launches on a gpu-core stream through gpu-core's interop surface
//! ([`affine_on`]).

#[rustfmt::skip]
mod bindings;

use std::sync::Arc;

use cudarc::driver::{
    CudaContext, CudaFunction, CudaStream, DriverError, LaunchConfig, PushKernelArg,
};
use cudarc::nvrtc::Ptx;
use gpu_core::KernelDecl;

/// Kernel declarations from `kernels/include/*.h`: one marker type each.
pub use bindings::kernels;
/// `#[repr(C)]` types from `kernels/include/*.h`, layout-checked at compile
/// time, each a cudarc `DeviceRepr`.
pub use bindings::types::AffineParams;

/// The fat binaries the build script compiled from `kernels/*.cu` (`AFFINE`,
/// and `ALL`); empty in a CPU-only build.
pub mod modules {
    include!(concat!(env!("OUT_DIR"), "/cudarc_interop_modules.rs"));
}

/// Whether this build carries GPU code (a toolkit was found at build time).
pub const CUDA_ENABLED: bool = cfg!(cuda_enabled);

/// What can go wrong loading or running the kernel.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The build found no CUDA toolkit, so no fat binary was embedded.
    #[error("this build carries no GPU code (no CUDA toolkit was found at build time); set CUDA_PATH to a toolkit's root and rebuild")]
    NoGpuCode,
    /// More elements than the kernel's `uint32_t` count holds.
    #[error("{len} elements do not fit the kernel's 32-bit count")]
    TooLong {
        /// The input's length.
        len: usize,
    },
    /// A cudarc call failed.
    #[error("cannot {op}: {source}")]
    Driver {
        /// What was being done.
        op: &'static str,
        /// cudarc's error.
        #[source]
        source: DriverError,
    },
}

fn driver(op: &'static str) -> impl FnOnce(DriverError) -> Error {
    move |source| Error::Driver { op, source }
}

/// The launch below passes exactly these argument types; this fails to
/// compile when the header's signature changes and the launch does not.
const _: fn(<kernels::affine as KernelDecl>::Params) -> (AffineParams, *const f32, *mut f32) =
    |params| params;

/// Loads the embedded `affine` module into `ctx` with plain cudarc and
/// returns its kernel.
pub fn load(ctx: &Arc<CudaContext>) -> Result<CudaFunction, Error> {
    if !modules::AFFINE.is_built() {
        return Err(Error::NoGpuCode);
    }
    let image = Ptx::from_binary(modules::AFFINE.image.to_vec());
    let module = ctx
        .load_module(image)
        .map_err(driver("load the embedded affine module"))?;
    module
        .load_function(kernels::affine::NAME)
        .map_err(driver("find the affine kernel in its module"))
}

/// `scale * x + offset` on `stream` with plain cudarc: copies in, one launch
/// taking `AffineParams` by value, copies out.
pub fn affine(
    stream: &Arc<CudaStream>,
    kernel: &CudaFunction,
    scale: f32,
    offset: f32,
    x: &[f32],
) -> Result<Vec<f32>, Error> {
    let n = u32::try_from(x.len()).map_err(|_| Error::TooLong { len: x.len() })?;
    if n == 0 {
        // A launch of no blocks is an error in the driver.
        return Ok(Vec::new());
    }
    let dx = stream
        .clone_htod(x)
        .map_err(driver("copy x to the device"))?;
    let mut dy = stream
        .alloc_zeros::<f32>(x.len())
        .map_err(driver("allocate y"))?;
    let params = AffineParams { scale, offset, n };
    // The kernel strides over the array, so the grid need not cover n.
    let config = LaunchConfig::for_num_elems(n.min(1 << 20));
    let mut launch = stream.launch_builder(kernel);
    launch.arg(&params).arg(&dx).arg(&mut dy);
    // SAFETY: the arguments are the kernel's C parameters in order, as the
    // `const _` above pins them: `AffineParams` by value (layout asserted
    // against the header's in bindings.rs), then two device buffers of `n`
    // floats each; the kernel touches only indices below `params.n`.
    unsafe { launch.launch(config) }.map_err(driver("launch affine"))?;
    stream.clone_dtoh(&dy).map_err(driver("copy y to the host"))
}

/// The same launch through gpu-core's interop surface: the kernel loaded
/// into the context under `stream`'s backend, launched on its cudarc stream,
/// in order with gpu-core's own work there. `None` on gpu-core's CPU backend.
pub fn affine_on(
    stream: &gpu_core::Stream,
    scale: f32,
    offset: f32,
    x: &[f32],
) -> Option<Result<Vec<f32>, Error>> {
    let ctx = stream.backend().cudarc_context()?;
    let cuda = stream.cudarc_stream()?;
    Some(load(ctx).and_then(|kernel| affine(cuda, &kernel, scale, offset, x)))
}

/// The CPU reference: what the GPU must reproduce bit for bit (the kernel
/// uses `fmaf`, a fused multiply-add, as `mul_add` does).
pub fn reference(scale: f32, offset: f32, x: &[f32]) -> Vec<f32> {
    x.iter().map(|x| scale.mul_add(*x, offset)).collect()
}
