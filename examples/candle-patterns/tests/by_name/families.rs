//! Shared by the GPU tests: the CUDA backend with every fat binary loaded,
//! and one typed launch helper per kernel family. Each helper takes the
//! kernel's marker (`candle_patterns::markers`, generated from the sources
//! by `cargo kiln codegen --sources`) bounded by its family's parameter
//! tuple, so a marker of another family or dtype does not compile; candle's
//! nullptr `info` and `inp` are `DeviceView::null()`.

use candle_patterns::reference::{Elem, Layout};
use candle_patterns::{kernels, FATBINS};
use gpu_core::{Backend, DeviceBuffer, Error, GpuRepr, KernelByName, KernelDecl, LaunchConfig};
use gpu_core::{DeviceView, FatbinImage, Stream};

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

/// `Some(buffer)`'s view, `None` as candle's nullptr.
fn opt<T: GpuRepr>(buffer: Option<&DeviceBuffer<T>>) -> DeviceView<'_, T> {
    buffer.map_or_else(DeviceView::null, DeviceBuffer::view)
}

/// unary.cu's and cast.cu's `(numel, num_dims, info, inp, out)`.
pub(crate) type UnaryParams<S, D> = (usize, usize, *const usize, *const S, *mut D);
/// binary_macros.cuh's `(numel, num_dims, dims_and_strides, lhs, rhs, out)`.
pub(crate) type BinaryParams<T> = (usize, usize, *const usize, *const T, *const T, *mut T);
/// affine.cu's `(numel, num_dims, info, inp, out, mul, add)`.
pub(crate) type AffineParams<T> = (usize, usize, *const usize, *const T, *mut T, T, T);
/// ternary.cu's `(numel, num_dims, info, ids, t, f, out)`.
pub(crate) type WhereParams<I, T> = (
    usize,
    usize,
    *const usize,
    *const I,
    *const T,
    *const T,
    *mut T,
);
/// indexing.cu's `is_I_T(numel, num_dims, info, ids, inp, out, left,
/// src_dim, ids_dim, right)`.
pub(crate) type SelectParams<I, T> = (
    usize,
    usize,
    *const usize,
    *const I,
    *const T,
    *mut T,
    usize,
    usize,
    usize,
    usize,
);
/// indexing.cu's `gather_I_T(numel, ids, inp, out, left, src_dim, ids_dim,
/// right)`.
pub(crate) type GatherParams<I, T> = (
    usize,
    *const I,
    *const T,
    *mut T,
    usize,
    usize,
    usize,
    usize,
);
/// reduce.cu's `(src_numel, el_to_sum_per_block, num_dims, info, src, dst)`.
pub(crate) type ReduceParams<T> = (usize, usize, usize, *const usize, *const T, *mut T);

impl Gpu {
    pub(crate) fn open() -> Option<Self> {
        let backend = gpu_core::testing::cuda_backend(FATBINS)?;
        let stream = backend.default_stream();
        Some(Self { backend, stream })
    }

    /// The kernel `name` by name, which the build must have put in an image.
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

    /// The layout's `info` on the device, or `None` (contiguous), with its
    /// `num_dims` (1 without a layout, as candle passes it).
    fn info(&self, layout: Option<&Layout>) -> (usize, Option<DeviceBuffer<usize>>) {
        let num_dims = layout.map_or(1, |l| l.dims.len());
        (num_dims, layout.map(|l| self.up(&l.info())))
    }

    /// unary.cu's and cast.cu's `(numel, num_dims, info, inp, out)` over
    /// `out.len()` elements: `inp == None` in place.
    pub(crate) fn unary<K, S: Elem, D: Elem>(
        &self,
        layout: Option<&Layout>,
        inp: Option<&DeviceBuffer<S>>,
        out: &mut DeviceBuffer<D>,
    ) -> Result<(), Error>
    where
        K: KernelDecl<Params = UnaryParams<S, D>>,
    {
        let kernel = self.backend.kernel::<K>()?;
        let (num_dims, info) = self.info(layout);
        let numel = out.len();
        let args = (
            numel,
            num_dims,
            opt(info.as_ref()),
            opt(inp),
            out.view_mut(),
        );
        self.stream.launch(&kernel, elementwise(numel), args)
    }

    /// binary_macros.cuh's `(numel, num_dims, dims_and_strides, lhs, rhs, out)`.
    pub(crate) fn binary<K, T: Elem>(
        &self,
        layout: Option<&Layout>,
        lhs: &DeviceBuffer<T>,
        rhs: &DeviceBuffer<T>,
        out: &mut DeviceBuffer<T>,
    ) -> Result<(), Error>
    where
        K: KernelDecl<Params = BinaryParams<T>>,
    {
        let kernel = self.backend.kernel::<K>()?;
        let (num_dims, info) = self.info(layout);
        let numel = out.len();
        let args = (
            numel,
            num_dims,
            opt(info.as_ref()),
            lhs.view(),
            rhs.view(),
            out.view_mut(),
        );
        self.stream.launch(&kernel, elementwise(numel), args)
    }

    /// affine.cu's `(numel, num_dims, info, inp, out, mul, add)`.
    pub(crate) fn affine<K, T: Elem>(
        &self,
        layout: Option<&Layout>,
        inp: Option<&DeviceBuffer<T>>,
        out: &mut DeviceBuffer<T>,
        mul: T,
        add: T,
    ) -> Result<(), Error>
    where
        K: KernelDecl<Params = AffineParams<T>>,
    {
        let kernel = self.backend.kernel::<K>()?;
        let (num_dims, info) = self.info(layout);
        let numel = out.len();
        let args = (
            numel,
            num_dims,
            opt(info.as_ref()),
            opt(inp),
            out.view_mut(),
            mul,
            add,
        );
        self.stream.launch(&kernel, elementwise(numel), args)
    }

    /// fill.cu's `fill_T(buf, value, numel)`.
    pub(crate) fn fill<K, T: Elem>(&self, buf: &mut DeviceBuffer<T>, value: T) -> Result<(), Error>
    where
        K: KernelDecl<Params = (*mut T, T, usize)>,
    {
        let kernel = self.backend.kernel::<K>()?;
        let numel = buf.len();
        self.stream
            .launch(&kernel, elementwise(numel), (buf.view_mut(), value, numel))
    }

    /// fill.cu's `copy2d_T(src, dst, rows, cols, src_stride, dst_stride)`.
    pub(crate) fn copy2d<K, T: Elem>(
        &self,
        src: &DeviceBuffer<T>,
        dst: &mut DeviceBuffer<T>,
        rows: u32,
        cols: u32,
        strides: (u32, u32),
    ) -> Result<(), Error>
    where
        K: KernelDecl<Params = (*const T, *mut T, u32, u32, u32, u32)>,
    {
        let kernel = self.backend.kernel::<K>()?;
        let config = LaunchConfig::for_elements(rows * cols, BLOCK);
        let args = (src.view(), dst.view_mut(), rows, cols, strides.0, strides.1);
        self.stream.launch(&kernel, config, args)
    }

    /// ternary.cu's `where_I_T(numel, num_dims, info, ids, t, f, out)`.
    pub(crate) fn where_<K, I: Elem, T: Elem>(
        &self,
        layout: Option<&Layout>,
        ids: &DeviceBuffer<I>,
        on_true: &DeviceBuffer<T>,
        on_false: &DeviceBuffer<T>,
        out: &mut DeviceBuffer<T>,
    ) -> Result<(), Error>
    where
        K: KernelDecl<Params = WhereParams<I, T>>,
    {
        let kernel = self.backend.kernel::<K>()?;
        let (num_dims, info) = self.info(layout);
        let numel = out.len();
        let args = (
            numel,
            num_dims,
            opt(info.as_ref()),
            ids.view(),
            on_true.view(),
            on_false.view(),
            out.view_mut(),
        );
        self.stream.launch(&kernel, elementwise(numel), args)
    }

    /// indexing.cu's `is_I_T`; `shape` is `(left, src_dim, right)`.
    pub(crate) fn index_select<K, I: Elem, T: Elem>(
        &self,
        layout: Option<&Layout>,
        ids: &DeviceBuffer<I>,
        inp: &DeviceBuffer<T>,
        out: &mut DeviceBuffer<T>,
        shape: (usize, usize, usize),
    ) -> Result<(), Error>
    where
        K: KernelDecl<Params = SelectParams<I, T>>,
    {
        let kernel = self.backend.kernel::<K>()?;
        let (num_dims, info) = self.info(layout);
        let numel = out.len();
        let args = (
            numel,
            num_dims,
            opt(info.as_ref()),
            ids.view(),
            inp.view(),
            out.view_mut(),
            shape.0,
            shape.1,
            ids.len(),
            shape.2,
        );
        self.stream.launch(&kernel, elementwise(numel), args)
    }

    /// indexing.cu's `gather_I_T`; `ids` is shaped like `out`.
    pub(crate) fn gather<K, I: Elem, T: Elem>(
        &self,
        ids: &DeviceBuffer<I>,
        inp: &DeviceBuffer<T>,
        out: &mut DeviceBuffer<T>,
        shape: (usize, usize, usize),
    ) -> Result<(), Error>
    where
        K: KernelDecl<Params = GatherParams<I, T>>,
    {
        let kernel = self.backend.kernel::<K>()?;
        let numel = out.len();
        let ids_dim = numel / (shape.0 * shape.2);
        let args = (
            numel,
            ids.view(),
            inp.view(),
            out.view_mut(),
            shape.0,
            shape.1,
            ids_dim,
            shape.2,
        );
        self.stream.launch(&kernel, elementwise(numel), args)
    }

    /// reduce.cu's `fast_sum<T>` / `fast_max<T>` (markers of the explicit
    /// instantiations, found by mangled name), one block per row of `row`
    /// elements.
    pub(crate) fn reduce<K, T: Elem>(
        &self,
        row: usize,
        layout: Option<&Layout>,
        src: &DeviceBuffer<T>,
        dst: &mut DeviceBuffer<T>,
        block: u32,
    ) -> Result<(), Error>
    where
        K: KernelDecl<Params = ReduceParams<T>>,
    {
        let kernel = self.backend.kernel::<K>()?;
        let (num_dims, info) = self.info(layout);
        let rows = dst.len();
        let args = (
            rows * row,
            row,
            num_dims,
            opt(info.as_ref()),
            src.view(),
            dst.view_mut(),
        );
        let config = LaunchConfig {
            grid: (rows as u32, 1, 1),
            block: (block, 1, 1),
            shared_mem_bytes: 0,
        };
        self.stream.launch(&kernel, config, args)
    }
}

/// Asserts a test launched exactly the kernels of `images` (by symbol, so
/// a family test that leaves a kernel out, or launches one twice over
/// another's, fails), sorted.
#[track_caller]
pub(crate) fn launched_every(images: &[&FatbinImage], mut launched: Vec<&str>) {
    launched.sort_unstable();
    let mut want: Vec<String> = kernels::expected()
        .into_iter()
        .filter(|(image, _)| images.iter().any(|i| i.name == image.name))
        .flat_map(|(_, names)| names)
        .collect();
    want.sort_unstable();
    assert_eq!(launched, want, "the kernels launched");
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
