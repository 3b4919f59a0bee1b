//! The elementwise family (`affine_<dtype>`, declared by one macro in
//! `kernels/include/elementwise.h`): one typed kernel per dtype, each with the
//! CPU reference as its CPU body, behind one generic entry point.

use gpu_core::{Backend, Error, Kernel, KernelDecl, LaunchConfig, Stream};
use half::{bf16, f16};

use crate::kernels;
use crate::reference::Affine;

/// Threads per block; the kernels loop over the grid, so the grid is capped
/// and every `n` (a `size_t`) is covered.
const BLOCK: u32 = 256;
const MAX_BLOCKS: usize = 65_535;

/// An element type of the family, tied to its kernel.
pub trait Dtype: Affine + gpu_core::GpuRepr {
    /// The kernel's declaration, generated from the macro's expansion.
    type Kernel: KernelDecl<Params: gpu_core::LaunchParams>;
    /// The kernel on `backend`, with the CPU reference as its CPU body.
    fn kernel(backend: &Backend) -> Result<Kernel<Self::Kernel>, Error>;
    /// Launches `y = a x + b` over `n` elements.
    fn launch(
        stream: &Stream,
        kernel: &Kernel<Self::Kernel>,
        config: LaunchConfig,
        x: &gpu_core::DeviceBuffer<Self>,
        y: &mut gpu_core::DeviceBuffer<Self>,
        a: Self,
        b: Self,
    ) -> Result<(), Error>;
}

macro_rules! dtypes {
    ($($t:ty => $kernel:ident),* $(,)?) => {$(
        impl Dtype for $t {
            type Kernel = kernels::$kernel;

            fn kernel(backend: &Backend) -> Result<Kernel<Self::Kernel>, Error> {
                backend.kernel_with_cpu::<kernels::$kernel>(|_, (x, y, a, b, n)| {
                    for (y, &x) in y[..n].iter_mut().zip(&x[..n]) {
                        *y = <$t as Affine>::affine(a, x, b);
                    }
                })
            }

            fn launch(
                stream: &Stream,
                kernel: &Kernel<Self::Kernel>,
                config: LaunchConfig,
                x: &gpu_core::DeviceBuffer<Self>,
                y: &mut gpu_core::DeviceBuffer<Self>,
                a: Self,
                b: Self,
            ) -> Result<(), Error> {
                let n = x.len();
                stream.launch(kernel, config, (x.view(), y.view_mut(), a, b, n))
            }
        }
    )*};
}

dtypes! {
    f32 => affine_f32,
    f64 => affine_f64,
    f16 => affine_f16,
    bf16 => affine_bf16,
    i32 => affine_i32,
    u32 => affine_u32,
    u8 => affine_u8,
}

/// `y[i] = a * x[i] + b` on `stream`'s backend.
pub fn affine<T: Dtype>(
    stream: &Stream,
    kernel: &Kernel<T::Kernel>,
    a: T,
    b: T,
    x: &[T],
) -> Result<Vec<T>, Error> {
    let input = stream.to_device(x)?;
    let mut output = stream.alloc_zeros::<T>(x.len())?;
    let blocks = x.len().div_ceil(BLOCK as usize).clamp(1, MAX_BLOCKS);
    let config = LaunchConfig {
        grid: (blocks as u32, 1, 1),
        block: (BLOCK, 1, 1),
        shared_mem_bytes: 0,
    };
    T::launch(stream, kernel, config, &input, &mut output, a, b)?;
    stream.to_host(&output.view())
}
