//! The indexing and reduce families launched typed (the reduce templates'
//! markers name their mangled symbols), then by name: every kernel resolves
//! with its family's parameter table, and wrong argument lists are refused
//! before the GPU. The GPU bundle runs `typed_*` and `by_name_*` under
//! memcheck with API reports on.

use crate::families::{assert_close, launched_every, tol, Gpu};
use crate::families::{GatherParams, ReduceParams, SelectParams};
use candle_patterns::kernels::{self, fast_sum};
use candle_patterns::reference::{self, Elem, Layout};
use candle_patterns::{markers::*, modules};
use gpu_core::error::ArgMismatch;
use gpu_core::{Arg, Args, Backend, Error, KernelDecl, LaunchConfig};
use half::{bf16, f16};

fn select_pair<S, G, I: Elem, T: Elem>(gpu: &Gpu)
where
    S: KernelDecl<Params = SelectParams<I, T>>,
    G: KernelDecl<Params = GatherParams<I, T>>,
{
    // x: (left 3, src_dim 10, right 4); 6 ids, repeats included.
    let (left, src_dim, right) = (3, 10, 4);
    let x: Vec<T> = (0..left * src_dim * right)
        .map(|i| T::from_f64((i % 97) as f64))
        .collect();
    let picks = [9usize, 0, 3, 3, 7, 1];
    let ids: Vec<I> = picks.iter().map(|&j| I::from_f64(j as f64)).collect();
    let what = S::NAME;
    let mut out = gpu
        .stream
        .alloc_zeros::<T>(left * picks.len() * right)
        .unwrap();
    let (ids_d, x_d) = (gpu.up(&ids), gpu.up(&x));
    gpu.index_select::<S, I, T>(None, &ids_d, &x_d, &mut out, (left, src_dim, right))
        .unwrap();
    let want = reference::index_select(&x, &picks, left, right);
    assert_eq!(gpu.down(&out.view()), want, "{what}");
    // The source read through a layout: x stored as (right, src_dim, left).
    let layout = Layout {
        dims: vec![left, src_dim, right],
        strides: vec![vec![1, left, left * src_dim]],
    };
    gpu.index_select::<S, I, T>(
        Some(&layout),
        &ids_d,
        &x_d,
        &mut out,
        (left, src_dim, right),
    )
    .unwrap();
    let logical = layout.gather(&x, 0);
    let want = reference::index_select(&logical, &picks, left, right);
    assert_eq!(gpu.down(&out.view()), want, "{what} strided");

    // gather: ids shaped like the output, (left 3, 5, right 4).
    let picks: Vec<usize> = (0..left * 5 * right).map(|i| (i * 7) % src_dim).collect();
    let ids: Vec<I> = picks.iter().map(|&j| I::from_f64(j as f64)).collect();
    let mut out = gpu.stream.alloc_zeros::<T>(picks.len()).unwrap();
    gpu.gather::<G, I, T>(&gpu.up(&ids), &x_d, &mut out, (left, src_dim, right))
        .unwrap();
    let want = reference::gather(&x, &picks, left, right);
    assert_eq!(gpu.down(&out.view()), want, "{}", G::NAME);
}

#[test]
fn typed_every_index_select_and_gather() {
    let Some(gpu) = Gpu::open() else { return };
    let mut launched = Vec::new();
    macro_rules! each {
        ($($i:ty, $t:ty: $s:ident, $g:ident);*) => {$(
            select_pair::<$s, $g, $i, $t>(&gpu);
            launched.extend([$s::NAME, $g::NAME]);
        )*};
    }
    each!(
        u32, f32: is_u32_f32, gather_u32_f32;
        u32, f16: is_u32_f16, gather_u32_f16;
        u32, u32: is_u32_u32, gather_u32_u32;
        i64, f32: is_i64_f32, gather_i64_f32;
        i64, f16: is_i64_f16, gather_i64_f16;
        i64, u32: is_i64_u32, gather_i64_u32
    );
    launched_every(&[&modules::INDEXING], launched);
}

/// `fast_sum<T>` (`Sum`) and, where reduce.cu instantiates it,
/// `fast_max<T>` (`Max`; `None` where reduce.cu has no instantiation, and
/// any marker of the dtype fills the type parameter).
fn reduce_dtype<Sum, Max, T: Elem>(gpu: &Gpu, max: Option<Max>)
where
    Sum: KernelDecl<Params = ReduceParams<T>>,
    Max: KernelDecl<Params = ReduceParams<T>>,
{
    // 9 rows of 700: each block folds one row with strided threads.
    let (rows, row) = (9, 700);
    let x: Vec<T> = (0..rows * row)
        .map(|i| T::from_f64(((i * 31 % 17) as f64 - 8.0) / 4.0))
        .collect();
    let src = gpu.up(&x);
    let sums = |x: &[T]| -> Vec<T> {
        x.chunks(row)
            .map(|r| T::from_f64(r.iter().map(|v| v.to_f64()).sum()))
            .collect()
    };
    for block in [32, 256, 1024] {
        let mut dst = gpu.stream.alloc_zeros::<T>(rows).unwrap();
        gpu.reduce::<Sum, T>(row, None, &src, &mut dst, block)
            .unwrap();
        // The sums of quarters are exact in every dtype but their rounding.
        let what = format!("fast_sum<{}> block {block}", T::DTYPE);
        assert_close(&what, &gpu.down(&dst.view()), &sums(&x), tol::<T>() * 4.0);
    }
    // Columns of a (row, rows) buffer: the rows read through strides.
    let layout = Layout {
        dims: vec![rows, row],
        strides: vec![vec![1, rows]],
    };
    let mut dst = gpu.stream.alloc_zeros::<T>(rows).unwrap();
    gpu.reduce::<Sum, T>(row, Some(&layout), &src, &mut dst, 128)
        .unwrap();
    let what = format!("fast_sum<{}> strided", T::DTYPE);
    assert_close(
        &what,
        &gpu.down(&dst.view()),
        &sums(&layout.gather(&x, 0)),
        tol::<T>() * 4.0,
    );
    if max.is_some() {
        gpu.reduce::<Max, T>(row, None, &src, &mut dst, 64).unwrap();
        let want: Vec<T> = x
            .chunks(row)
            .map(|r| T::from_f64(r.iter().map(|v| v.to_f64()).fold(f64::MIN, f64::max)))
            .collect();
        assert_eq!(gpu.down(&dst.view()), want, "fast_max<{}>", T::DTYPE);
    }
}

#[test]
fn typed_every_reduce_template_instantiation() {
    let Some(gpu) = Gpu::open() else { return };
    reduce_dtype::<fast_sum_float, _, f32>(&gpu, Some(fast_max_float));
    reduce_dtype::<fast_sum_double, fast_sum_double, f64>(&gpu, None);
    reduce_dtype::<fast_sum___half, _, f16>(&gpu, Some(fast_max___half));
    reduce_dtype::<fast_sum___nv_bfloat16, fast_sum___nv_bfloat16, bf16>(&gpu, None);
    let launched = vec![
        fast_sum_float::NAME,
        fast_sum_double::NAME,
        fast_sum___half::NAME,
        fast_sum___nv_bfloat16::NAME,
        fast_max_float::NAME,
        fast_max___half::NAME,
    ];
    launched_every(&[&modules::REDUCE], launched);
}

/// The parameter sizes a kernel's family signature gives it.
fn family_sizes(name: &str) -> Vec<usize> {
    let dtype_size = |d: &str| match d {
        "f64" | "i64" => 8,
        "f32" | "u32" => 4,
        "f16" | "bf16" => 2,
        "u8" => 1,
        other => panic!("{other}"),
    };
    // quantized.cu's: `void *` blocks, a bool, fp8 (issue 42).
    match name {
        "dequantize_block_q8_0_f32" | "quantize_q8_0" => return vec![8, 8, 4],
        "fill_flag_f32" => return vec![8, 4, 1, 8],
        "cast_fp8e4m3_f32" => return vec![8, 8, 8],
        "affine_fp8e4m3" => return vec![8, 8, 8, 1],
        _ => {}
    }
    let last = name.rsplit('_').next().unwrap();
    match name.split('_').next().unwrap() {
        "affine" => [vec![8; 5], vec![dtype_size(last); 2]].concat(),
        "fill" => vec![8, dtype_size(last), 8],
        "copy2d" => vec![8, 8, 4, 4, 4, 4],
        "is" => vec![8; 10],
        "gather" => vec![8; 8],
        "where" => vec![8; 7],
        "" => vec![8; 6], // the mangled reduce templates: _Z8fast_...
        op if op.starts_with('b') => vec![8; 6],
        _ => vec![8; 5], // unary and cast
    }
}

#[test]
fn by_name_every_kernel_resolves_with_its_family_parameter_table() {
    let Some(gpu) = Gpu::open() else { return };
    let arch = gpu.backend.device().map_or(0, |d| d.arch());
    let mut seen = 0;
    for (image, names) in kernels::expected() {
        for name in names {
            if name == "affine_fp8e4m3" && arch < 89 {
                // Only sm_89+ device passes define it: not in this image.
                seen += 1;
                continue;
            }
            let kernel = gpu.kernel(&name);
            assert_eq!(kernel.module(), image.name, "{name}");
            assert_eq!(kernel.param_sizes(), family_sizes(&name), "{name}");
            seen += 1;
        }
    }
    assert_eq!(
        seen, 152,
        "the families stamp out 152 kernels (tests/image.rs)"
    );
}

#[test]
fn a_launch_by_name_needs_cuda() {
    let err = Backend::cpu().kernel_by_name("uexp_f32").unwrap_err();
    assert!(matches!(err, Error::ByNameNeedsCuda { .. }), "{err}");
}

#[test]
fn by_name_wrong_lists_are_refused_before_the_gpu() {
    let Some(gpu) = Gpu::open() else { return };
    let n = 256usize;
    let sentinel = vec![f16::from_f64(-1.0); n];
    let input = gpu.up(&vec![f16::from_f64(2.0); n]);
    let mut out = gpu.up(&sentinel);
    let affine = gpu.kernel("affine_f16");
    let config = LaunchConfig::for_elements(n as u32, 128);
    // Each case replaces parameter `at` of the right list (`None`: drops
    // the last) with another argument, and names the mismatch it must be.
    let three = f16::from_f64(3.0);
    let cases: [(usize, Option<Arg<'_>>, ArgMismatch); 3] = [
        // mul as an f32 where the kernel takes __half
        (
            5,
            Some(Arg::value(3.0f32)),
            ArgMismatch::Size {
                index: 5,
                expected: 2,
                got: 4,
            },
        ),
        // num_dims as a u32 where the kernel takes size_t
        (
            1,
            Some(Arg::value(1u32)),
            ArgMismatch::Size {
                index: 1,
                expected: 8,
                got: 4,
            },
        ),
        // `add` left out
        (
            6,
            None,
            ArgMismatch::Count {
                expected: 7,
                got: 6,
            },
        ),
    ];
    for (at, replacement, want) in cases {
        let mut list = vec![
            Arg::value(n),
            Arg::value(1usize),
            Arg::null(),
            Arg::view(input.view()),
            Arg::view_mut(out.view_mut()),
            Arg::value(three),
            Arg::value(three),
        ];
        match replacement {
            Some(arg) => list[at] = arg,
            None => drop(list.remove(at)),
        }
        // SAFETY: numel and num_dims values, info null, `input` and `out`
        // f16 views of n elements, the scalars; each wrong list differs in
        // count or size only, which the launch checks before the GPU.
        let args = unsafe { Args::new(list) };
        match gpu.stream.launch_by_name(&affine, config, args) {
            Err(Error::LaunchArgs { kernel, mismatch }) => {
                assert_eq!((kernel, mismatch), ("affine_f16", want));
            }
            other => panic!("affine_f16 with {want}: {other:?}"),
        }
    }
    // A mangled name's list is checked the same way (one argument short).
    let sum = gpu.kernel(&fast_sum("f32"));
    let src = gpu.up(&vec![1.0f32; n]);
    // SAFETY: values, a null layout and `src` (refused before any launch).
    let short = unsafe {
        Args::new([
            Arg::value(n),
            Arg::value(n),
            Arg::value(1usize),
            Arg::null(),
            Arg::view(src.view()),
        ])
    };
    let err = gpu.stream.launch_by_name(&sum, config, short).unwrap_err();
    assert!(
        matches!(
            err,
            Error::LaunchArgs {
                mismatch: ArgMismatch::Count {
                    expected: 6,
                    got: 5
                },
                ..
            }
        ),
        "{err}"
    );
    gpu.stream.synchronize().unwrap();
    assert_eq!(gpu.down(&out.view()), sentinel, "a refused launch ran");
}
