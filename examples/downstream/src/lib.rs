//! SAXPY (`y = a * x + y`, f32) on the GPU with kiln, written as a crate
//! outside kiln's workspace would write it: its own kernel (`kernels/`), its
//! own header with a struct passed by value (`SaxpyParams`), bindings
//! generated from that header, and a CPU body for machines without a GPU.
//!
//! ```
//! let backend = downstream::backend()?; // CUDA if it can run, else the CPU
//! let stream = backend.default_stream();
//! let kernel = downstream::kernel(&backend)?;
//! let y = downstream::saxpy(&stream, &kernel, 2.0, &[1.0, 2.0], &[10.0, 20.0])?;
//! assert_eq!(y, [12.0, 24.0]);
//! # Ok::<(), gpu_core::Error>(())
//! ```

#[rustfmt::skip]
mod bindings;

use gpu_core::{Backend, Error, Kernel, LaunchConfig, Stream};

/// Kernel declarations from `kernels/include/*.h`: one marker type each.
pub use bindings::kernels;
/// `#[repr(C)]` types from `kernels/include/*.h`, layout-checked at compile
/// time.
pub use bindings::types;
pub use bindings::types::SaxpyParams;

/// The fat binaries the build script compiled from `kernels/*.cu` (`SAXPY`,
/// and `ALL`); empty in a CPU-only build.
pub mod modules {
    include!(concat!(env!("OUT_DIR"), "/downstream_modules.rs"));
}

/// Whether this build carries GPU code (a toolkit was found at build time,
/// or none was and `kernels-prebuilt/` matched the kernels' sources).
pub const CUDA_ENABLED: bool = cfg!(cuda_enabled);

/// The backend: CUDA when a device can run this crate's modules, else the CPU
/// (`KILN_BACKEND=cpu|cuda` forces one); [`Backend::cpu_reason`] says why.
pub fn backend() -> Result<Backend, Error> {
    Backend::auto(modules::ALL)
}

/// The saxpy kernel on `backend`, with [`cpu_body`] as its CPU version.
pub fn kernel(backend: &Backend) -> Result<Kernel<kernels::saxpy>, Error> {
    backend.kernel_with_cpu::<kernels::saxpy>(cpu_body)
}

/// The CPU reference: what every backend must reproduce bit for bit (the
/// kernel uses `fmaf`, a fused multiply-add, as `mul_add` does).
pub fn reference(a: f32, x: &[f32], y: &[f32]) -> Vec<f32> {
    x.iter().zip(y).map(|(x, y)| a.mul_add(*x, *y)).collect()
}

/// The kernel's body on the CPU backend: the same arguments the GPU gets,
/// as host slices.
fn cpu_body(_config: &LaunchConfig, (p, x, y): (SaxpyParams, &[f32], &mut [f32])) {
    let n = p.n as usize;
    for (y, x) in y[..n].iter_mut().zip(&x[..n]) {
        *y = p.a.mul_add(*x, *y);
    }
}

/// `a * x + y` on `stream`: copies in, one launch, copies out.
pub fn saxpy(
    stream: &Stream,
    kernel: &Kernel<kernels::saxpy>,
    a: f32,
    x: &[f32],
    y: &[f32],
) -> Result<Vec<f32>, Error> {
    if x.len() != y.len() {
        return Err(Error::LengthMismatch {
            op: "saxpy",
            src: x.len(),
            dst: y.len(),
        });
    }
    let n = u32::try_from(x.len()).map_err(|_| Error::SizeOverflow {
        len: x.len(),
        elem_size: 4,
    })?;
    let dx = stream.to_device(x)?;
    let mut dy = stream.to_device(y)?;
    // The kernel strides over the array, so the grid need not cover n.
    let config = LaunchConfig::for_elements(n.min(1 << 20), 256);
    stream.launch(
        kernel,
        config,
        (SaxpyParams { a, n }, dx.view(), dy.view_mut()),
    )?;
    stream.to_host(&dy.view())
}
