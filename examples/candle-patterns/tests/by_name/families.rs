//! Shared by the by-name tests: the CUDA backend with every fat binary
//! loaded, and one launch helper per kernel family. Each helper builds the
//! family's argument list by name (`Args::new`, `Arg::null()` for candle's
//! nullptr `info` and `inp`); when typed launches of vendored kernels come,
//! each family changes here and nowhere else.

use candle_patterns::reference::{Elem, Layout};
use candle_patterns::FATBINS;
use gpu_core::{Arg, Args, Backend, DeviceBuffer, Error, GpuRepr, KernelByName, LaunchConfig};
use gpu_core::{DeviceView, Stream};

/// The CUDA backend with every fat binary loaded and its default stream;
/// `None` after `skipped: <reason>` (a failure under `KILN_REQUIRE_GPU`).
pub(crate) struct Gpu {
    pub(crate) backend: Backend,
    pub(crate) stream: Stream,
}

/// Threads per block of the elementwise launches; the grid is capped so
/// the kernels' grid-stride loops take more than one step.
const BLOCK: u32 = 128;
const MAX_GRID: u32 = 4;

fn elementwise(numel: usize) -> LaunchConfig {
    let mut config = LaunchConfig::for_elements(numel as u32, BLOCK);
    config.grid.0 = config.grid.0.min(MAX_GRID);
    config
}

/// `Some(buffer)` as a device pointer, `None` as candle's nullptr.
fn opt<'a, T: GpuRepr>(buffer: Option<&'a DeviceBuffer<T>>) -> Arg<'a> {
    match buffer {
        Some(b) => Arg::view(b.view()),
        None => Arg::null(),
    }
}

impl Gpu {
    pub(crate) fn open() -> Option<Self> {
        let backend = gpu_core::testing::cuda_backend(FATBINS)?;
        let stream = backend.default_stream();
        Some(Self { backend, stream })
    }

    /// The kernel `name`, which the build must have put in an image.
    pub(crate) fn kernel(&self, name: &str) -> KernelByName {
        self.backend
            .kernel_by_name(name)
            .unwrap_or_else(|e| panic!("{name}: {e}"))
    }

    pub(crate) fn up<T: GpuRepr>(&self, x: &[T]) -> DeviceBuffer<T> {
        self.stream.to_device(x).unwrap()
    }

    pub(crate) fn down<T: GpuRepr>(&self, x: &DeviceView<'_, T>) -> Vec<T> {
        self.stream.to_host(x).unwrap()
    }

    /// The layout's `info` on the device, or `None` (contiguous).
    pub(crate) fn info(&self, layout: Option<&Layout>) -> Option<DeviceBuffer<usize>> {
        layout.map(|l| self.up(&l.info()))
    }

    /// Launches `name` over `numel` elements with the head candle's strided
    /// families share, `(numel, num_dims, info)` (`info` null without a
    /// layout), then `rest`.
    ///
    /// # Safety
    /// `rest` must be the kernel's remaining parameters in kind and order:
    /// views where it takes pointers, each covering what the kernel reads or
    /// writes under `layout`, values of the parameters' types elsewhere.
    unsafe fn strided(
        &self,
        name: &str,
        numel: usize,
        layout: Option<&Layout>,
        rest: Vec<Arg<'_>>,
    ) -> Result<(), Error> {
        let kernel = self.kernel(name);
        let info = self.info(layout);
        let num_dims = layout.map_or(1, |l| l.dims.len());
        let head = [Arg::value(numel), Arg::value(num_dims), opt(info.as_ref())];
        // SAFETY: the head is two values and a layout of `num_dims` sizes
        // then `num_dims` strides per operand, or null; `rest` is the
        // caller's promise.
        let args = unsafe { Args::new(head.into_iter().chain(rest)) };
        self.stream
            .launch_by_name(&kernel, elementwise(numel), args)
    }

    /// unary.cu's `(numel, num_dims, info, inp, out)`: `inp == None` in place.
    pub(crate) fn unary<T: Elem>(
        &self,
        name: &str,
        numel: usize,
        layout: Option<&Layout>,
        inp: Option<&DeviceBuffer<T>>,
        out: &mut DeviceBuffer<T>,
    ) -> Result<(), Error> {
        let rest = vec![opt(inp), Arg::view_mut(out.view_mut())];
        // SAFETY: `inp` holds the strided input (or is null) and `out`
        // numel elements of the kernel's dtype `T`.
        unsafe { self.strided(name, numel, layout, rest) }
    }

    /// binary_macros.cuh's `(numel, num_dims, dims_and_strides, lhs, rhs, out)`.
    pub(crate) fn binary<T: Elem>(
        &self,
        name: &str,
        numel: usize,
        layout: Option<&Layout>,
        lhs: &DeviceBuffer<T>,
        rhs: &DeviceBuffer<T>,
        out: &mut DeviceBuffer<T>,
    ) -> Result<(), Error> {
        let rest = vec![
            Arg::view(lhs.view()),
            Arg::view(rhs.view()),
            Arg::view_mut(out.view_mut()),
        ];
        // SAFETY: lhs and rhs cover their strides (the layout has two
        // stride lists), `out` holds numel elements of `T`.
        unsafe { self.strided(name, numel, layout, rest) }
    }

    /// affine.cu's `(numel, num_dims, info, inp, out, mul, add)`.
    pub(crate) fn affine<T: Elem>(
        &self,
        numel: usize,
        layout: Option<&Layout>,
        inp: Option<&DeviceBuffer<T>>,
        out: &mut DeviceBuffer<T>,
        mul: T,
        add: T,
    ) -> Result<(), Error> {
        let name = format!("affine_{}", T::DTYPE);
        let rest = vec![
            opt(inp),
            Arg::view_mut(out.view_mut()),
            Arg::value(mul),
            Arg::value(add),
        ];
        // SAFETY: as `unary`, then the two scalars by value in `T`.
        unsafe { self.strided(&name, numel, layout, rest) }
    }

    /// fill.cu's `fill_T(buf, value, numel)`.
    pub(crate) fn fill<T: Elem>(&self, buf: &mut DeviceBuffer<T>, value: T) -> Result<(), Error> {
        let kernel = self.kernel(&format!("fill_{}", T::DTYPE));
        let numel = buf.len();
        // SAFETY: `buf` holds numel elements of `T`; the rest are values.
        let args = unsafe {
            Args::new([
                Arg::view_mut(buf.view_mut()),
                Arg::value(value),
                Arg::value(numel),
            ])
        };
        self.stream
            .launch_by_name(&kernel, elementwise(numel), args)
    }

    /// fill.cu's `copy2d_T(src, dst, rows, cols, src_stride, dst_stride)`.
    pub(crate) fn copy2d<T: Elem>(
        &self,
        src: &DeviceBuffer<T>,
        dst: &mut DeviceBuffer<T>,
        rows: u32,
        cols: u32,
        strides: (u32, u32),
    ) -> Result<(), Error> {
        let kernel = self.kernel(&format!("copy2d_{}", T::DTYPE));
        // SAFETY: `src` holds rows rows of src_stride, `dst` of dst_stride
        // (cols <= each stride); the rest are values.
        let args = unsafe {
            Args::new([
                Arg::view(src.view()),
                Arg::view_mut(dst.view_mut()),
                Arg::value(rows),
                Arg::value(cols),
                Arg::value(strides.0),
                Arg::value(strides.1),
            ])
        };
        let config = LaunchConfig::for_elements(rows * cols, BLOCK);
        self.stream.launch_by_name(&kernel, config, args)
    }

    /// cast.cu's `cast_S_D(numel, num_dims, info, inp, out)`.
    pub(crate) fn cast<S: Elem, D: Elem>(
        &self,
        layout: Option<&Layout>,
        inp: &DeviceBuffer<S>,
        out: &mut DeviceBuffer<D>,
    ) -> Result<(), Error> {
        let name = format!("cast_{}_{}", S::DTYPE, D::DTYPE);
        let numel = out.len();
        let rest = vec![Arg::view(inp.view()), Arg::view_mut(out.view_mut())];
        // SAFETY: `inp` of `S` covers the layout, `out` holds numel `D`.
        unsafe { self.strided(&name, numel, layout, rest) }
    }

    /// ternary.cu's `where_I_T(numel, num_dims, info, ids, t, f, out)`.
    pub(crate) fn where_<I: Elem, T: Elem>(
        &self,
        layout: Option<&Layout>,
        ids: &DeviceBuffer<I>,
        on_true: &DeviceBuffer<T>,
        on_false: &DeviceBuffer<T>,
        out: &mut DeviceBuffer<T>,
    ) -> Result<(), Error> {
        let name = format!("where_{}_{}", I::DTYPE, T::DTYPE);
        let numel = out.len();
        let rest = vec![
            Arg::view(ids.view()),
            Arg::view(on_true.view()),
            Arg::view(on_false.view()),
            Arg::view_mut(out.view_mut()),
        ];
        // SAFETY: the three inputs cover their strides (three stride lists
        // in the layout), `out` holds numel elements of `T`.
        unsafe { self.strided(&name, numel, layout, rest) }
    }

    /// indexing.cu's `is_I_T(numel, num_dims, info, ids, inp, out, left,
    /// src_dim, ids_dim, right)`; `shape` is `(left, src_dim, right)`.
    pub(crate) fn index_select<I: Elem, T: Elem>(
        &self,
        layout: Option<&Layout>,
        ids: &DeviceBuffer<I>,
        inp: &DeviceBuffer<T>,
        out: &mut DeviceBuffer<T>,
        shape: (usize, usize, usize),
    ) -> Result<(), Error> {
        let name = format!("is_{}_{}", I::DTYPE, T::DTYPE);
        let numel = out.len();
        let rest = vec![
            Arg::view(ids.view()),
            Arg::view(inp.view()),
            Arg::view_mut(out.view_mut()),
            Arg::value(shape.0),
            Arg::value(shape.1),
            Arg::value(ids.len()),
            Arg::value(shape.2),
        ];
        // SAFETY: `ids` holds ids_dim indices below src_dim, `inp` left *
        // src_dim * right elements of `T` under the layout, `out` numel.
        unsafe { self.strided(&name, numel, layout, rest) }
    }

    /// indexing.cu's `gather_I_T(numel, ids, inp, out, left, src_dim,
    /// ids_dim, right)`; `ids` is shaped like `out`.
    pub(crate) fn gather<I: Elem, T: Elem>(
        &self,
        ids: &DeviceBuffer<I>,
        inp: &DeviceBuffer<T>,
        out: &mut DeviceBuffer<T>,
        shape: (usize, usize, usize),
    ) -> Result<(), Error> {
        let kernel = self.kernel(&format!("gather_{}_{}", I::DTYPE, T::DTYPE));
        let numel = out.len();
        let ids_dim = numel / (shape.0 * shape.2);
        // SAFETY: values; `ids` numel indices below src_dim; `inp` left *
        // src_dim * right and `out` numel elements of `T`.
        let args = unsafe {
            Args::new([
                Arg::value(numel),
                Arg::view(ids.view()),
                Arg::view(inp.view()),
                Arg::view_mut(out.view_mut()),
                Arg::value(shape.0),
                Arg::value(shape.1),
                Arg::value(ids_dim),
                Arg::value(shape.2),
            ])
        };
        self.stream
            .launch_by_name(&kernel, elementwise(numel), args)
    }

    /// reduce.cu's `fast_sum<T>` / `fast_max<T>` (by mangled name):
    /// `(src_numel, el_to_sum_per_block, num_dims, info, src, dst)`, one
    /// block per row of `row` elements.
    pub(crate) fn reduce<T: Elem>(
        &self,
        mangled: &str,
        row: usize,
        layout: Option<&Layout>,
        src: &DeviceBuffer<T>,
        dst: &mut DeviceBuffer<T>,
        block: u32,
    ) -> Result<(), Error> {
        let kernel = self.kernel(mangled);
        let info = self.info(layout);
        let rows = dst.len();
        let numel = rows * row;
        let num_dims = layout.map_or(1, |l| l.dims.len());
        // SAFETY: values; a layout of `src` or null; `src` covering numel
        // elements and `dst` numel / row elements of `T`.
        let args = unsafe {
            Args::new([
                Arg::value(numel),
                Arg::value(row),
                Arg::value(num_dims),
                opt(info.as_ref()),
                Arg::view(src.view()),
                Arg::view_mut(dst.view_mut()),
            ])
        };
        let config = LaunchConfig {
            grid: (rows as u32, 1, 1),
            block: (block, 1, 1),
            shared_mem_bytes: 0,
        };
        self.stream.launch_by_name(&kernel, config, args)
    }
}

/// Asserts `got` equals `want` within the dtype's rounding: exact for
/// integers, relative `tol` (plus `tol` absolute near zero) for floats.
#[track_caller]
pub(crate) fn assert_close<T: Elem>(what: &str, got: &[T], want: &[T], tol: f64) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        let (g, w) = (g.to_f64(), w.to_f64());
        let ok = if T::INTEGER {
            g == w
        } else {
            (g - w).abs() <= tol * w.abs().max(1.0) || (g.is_nan() && w.is_nan())
        };
        assert!(ok, "{what}[{i}]: got {g}, want {w}");
    }
}

/// The dtype's tolerance: one rounding of its precision, with room for the
/// kernels computing halves in f32 and libm differing in the last bits.
pub(crate) fn tol<T: Elem>() -> f64 {
    match T::DTYPE {
        "f64" => 1e-12,
        "f32" => 1e-5,
        "f16" => 2e-3,
        "bf16" => 1e-2,
        _ => 0.0,
    }
}
