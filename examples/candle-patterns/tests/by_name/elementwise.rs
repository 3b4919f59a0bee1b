//! The elementwise families launched by name against the CPU references:
//! every unary op of every float dtype, every binary op of every dtype,
//! affine, fill, copy2d, every cast and every where. Each goes contiguous
//! (`info` null), strided (a transposed or broadcast layout) and, where
//! candle allows it, in place (`inp` null). Named `by_name_*`: the GPU
//! bundle runs them under memcheck with API reports on.

use crate::families::{assert_close, tol, Gpu};
use candle_patterns::kernels::{BINARY_OPS, UNARY_OPS};
use candle_patterns::reference::{self, Elem, Layout};
use half::{bf16, f16};

/// `n` values spread over `[lo, hi)` in a scrambled order, as `T`.
fn values<T: Elem>(n: usize, lo: f64, hi: f64) -> Vec<T> {
    (0..n)
        .map(|i| T::from_f64(lo + (hi - lo) * ((i * 37 % 101) as f64 / 101.0)))
        .collect()
}

/// A (rows, cols) tensor read transposed from a (cols, rows) buffer.
fn transposed(rows: usize, cols: usize, operands: usize) -> Layout {
    Layout {
        dims: vec![rows, cols],
        strides: vec![vec![1, rows]; operands],
    }
}

fn unary_dtype<T: Elem>(gpu: &Gpu) {
    let n = 1000;
    let x: Vec<T> = values(n, 0.25, 3.0);
    let input = gpu.up(&x);
    for op in UNARY_OPS {
        let name = format!("{op}_{}", T::DTYPE);
        let want: Vec<T> = x
            .iter()
            .map(|v| T::from_f64(reference::unary(op, v.to_f64())))
            .collect();
        let mut out = gpu.stream.alloc_zeros::<T>(n).unwrap();
        gpu.unary(&name, n, None, Some(&input), &mut out).unwrap();
        assert_close(&name, &gpu.down(&out.view()), &want, tol::<T>());
        // In place: inp null, out read and written.
        let mut inout = gpu.up(&x);
        gpu.unary(&name, n, None, None, &mut inout).unwrap();
        assert_close(
            &format!("{name} in place"),
            &gpu.down(&inout.view()),
            &want,
            tol::<T>(),
        );
    }
    // Strided: the input read transposed through `info`.
    let layout = transposed(20, 50, 1);
    let name = format!("uneg_{}", T::DTYPE);
    let mut out = gpu.stream.alloc_zeros::<T>(n).unwrap();
    gpu.unary(&name, n, Some(&layout), Some(&input), &mut out)
        .unwrap();
    let want: Vec<T> = layout
        .gather(&x, 0)
        .iter()
        .map(|v| T::from_f64(-v.to_f64()))
        .collect();
    assert_close(
        &format!("{name} strided"),
        &gpu.down(&out.view()),
        &want,
        0.0,
    );
}

#[test]
fn by_name_every_unary_op_of_every_float_dtype() {
    let Some(gpu) = Gpu::open() else { return };
    unary_dtype::<f32>(&gpu);
    unary_dtype::<f64>(&gpu);
    unary_dtype::<f16>(&gpu);
    unary_dtype::<bf16>(&gpu);
    // The integer copies, strided: a gather of the transposed input.
    ucopy_int::<u8>(&gpu);
    ucopy_int::<u32>(&gpu);
    ucopy_int::<i64>(&gpu);
}

fn ucopy_int<T: Elem>(gpu: &Gpu) {
    let x: Vec<T> = values(600, 0.0, 200.0);
    let layout = transposed(30, 20, 1);
    let mut out = gpu.stream.alloc_zeros::<T>(600).unwrap();
    let name = format!("ucopy_{}", T::DTYPE);
    gpu.unary(&name, 600, Some(&layout), Some(&gpu.up(&x)), &mut out)
        .unwrap();
    assert_eq!(gpu.down(&out.view()), layout.gather(&x, 0), "{name}");
}

fn binary_dtype<T: Elem>(gpu: &Gpu) {
    let n = 777;
    let (lo, hi) = if T::INTEGER { (1.0, 60.0) } else { (-4.0, 4.0) };
    let lhs: Vec<T> = values(n, lo, hi);
    // Nonzero divisors: integers from 1, floats away from 0.
    let rhs: Vec<T> = values::<T>(n, 1.0, 7.0)
        .iter()
        .enumerate()
        .map(|(i, v)| {
            if !T::INTEGER && i % 2 == 1 {
                T::from_f64(-v.to_f64())
            } else {
                *v
            }
        })
        .collect();
    let (l, r) = (gpu.up(&lhs), gpu.up(&rhs));
    for op in BINARY_OPS {
        let name = format!("{op}_{}", T::DTYPE);
        let want: Vec<T> = lhs
            .iter()
            .zip(&rhs)
            .map(|(a, b)| reference::binary(op, *a, *b))
            .collect();
        let mut out = gpu.stream.alloc_zeros::<T>(n).unwrap();
        gpu.binary(&name, n, None, &l, &r, &mut out).unwrap();
        assert_close(&name, &gpu.down(&out.view()), &want, tol::<T>());
    }
    // Broadcast: lhs (7, 111) dense, rhs one row of 111 (stride 0 over rows).
    let layout = Layout {
        dims: vec![7, 111],
        strides: vec![vec![111, 1], vec![0, 1]],
    };
    let name = format!("badd_{}", T::DTYPE);
    let mut out = gpu.stream.alloc_zeros::<T>(n).unwrap();
    gpu.binary(&name, n, Some(&layout), &l, &r, &mut out)
        .unwrap();
    let want: Vec<T> = (0..n)
        .map(|i| reference::binary("badd", lhs[layout.offset(i, 0)], rhs[layout.offset(i, 1)]))
        .collect();
    assert_close(
        &format!("{name} broadcast"),
        &gpu.down(&out.view()),
        &want,
        tol::<T>(),
    );
}

#[test]
fn by_name_every_binary_op_of_every_dtype() {
    let Some(gpu) = Gpu::open() else { return };
    binary_dtype::<f32>(&gpu);
    binary_dtype::<f64>(&gpu);
    binary_dtype::<f16>(&gpu);
    binary_dtype::<bf16>(&gpu);
    binary_dtype::<u8>(&gpu);
    binary_dtype::<u32>(&gpu);
    binary_dtype::<i64>(&gpu);
}

fn affine_dtype<T: Elem>(gpu: &Gpu) {
    let n = 500;
    let x: Vec<T> = values(n, 0.0, 20.0);
    let (mul, add) = (T::from_f64(3.0), T::from_f64(2.0));
    let f = |v: &T| T::from_f64(v.to_f64() * 3.0 + 2.0);
    let what = format!("affine_{}", T::DTYPE);
    let mut out = gpu.stream.alloc_zeros::<T>(n).unwrap();
    gpu.affine(n, None, Some(&gpu.up(&x)), &mut out, mul, add)
        .unwrap();
    let want: Vec<T> = x.iter().map(f).collect();
    assert_close(&what, &gpu.down(&out.view()), &want, tol::<T>());
    let mut inout = gpu.up(&x);
    gpu.affine(n, None, None, &mut inout, mul, add).unwrap();
    assert_close(
        &format!("{what} in place"),
        &gpu.down(&inout.view()),
        &want,
        tol::<T>(),
    );
    let layout = transposed(25, 20, 1);
    gpu.affine(n, Some(&layout), Some(&gpu.up(&x)), &mut out, mul, add)
        .unwrap();
    let want: Vec<T> = layout.gather(&x, 0).iter().map(f).collect();
    assert_close(
        &format!("{what} strided"),
        &gpu.down(&out.view()),
        &want,
        tol::<T>(),
    );
}

fn fill_dtype<T: Elem>(gpu: &Gpu) {
    let mut buf = gpu.stream.alloc_zeros::<T>(1029).unwrap();
    gpu.fill(&mut buf, T::from_f64(5.0)).unwrap();
    assert_eq!(
        gpu.down(&buf.view()),
        vec![T::from_f64(5.0); 1029],
        "fill_{}",
        T::DTYPE
    );
    // copy2d: 3 rows of 4 from a 5-wide source into a 6-wide destination.
    let src: Vec<T> = (0..15).map(|i| T::from_f64(i as f64)).collect();
    let mut dst = gpu.up(&[T::from_f64(0.0); 18]);
    gpu.copy2d(&gpu.up(&src), &mut dst, 3, 4, (5, 6)).unwrap();
    let mut want = vec![T::from_f64(0.0); 18];
    for r in 0..3 {
        want[r * 6..r * 6 + 4].copy_from_slice(&src[r * 5..r * 5 + 4]);
    }
    assert_eq!(gpu.down(&dst.view()), want, "copy2d_{}", T::DTYPE);
}

#[test]
fn by_name_affine_fill_and_copy2d_of_every_dtype() {
    let Some(gpu) = Gpu::open() else { return };
    macro_rules! each {
        ($($t:ty),*) => {$( affine_dtype::<$t>(&gpu); fill_dtype::<$t>(&gpu); )*};
    }
    each!(f32, f64, f16, bf16, u8, u32, i64);
}

fn cast_pair<S: Elem, D: Elem>(gpu: &Gpu) {
    let x: Vec<S> = values(400, 0.0, 250.0);
    let what = format!("cast_{}_{}", S::DTYPE, D::DTYPE);
    let mut out = gpu.stream.alloc_zeros::<D>(400).unwrap();
    gpu.cast(None, &gpu.up(&x), &mut out).unwrap();
    let want: Vec<D> = x.iter().map(|v| D::from_f64(v.to_f64())).collect();
    // One rounding of the destination (halves go through f32 first).
    assert_close(
        &what,
        &gpu.down(&out.view()),
        &want,
        tol::<D>().max(tol::<S>()),
    );
    let layout = transposed(20, 20, 1);
    gpu.cast(Some(&layout), &gpu.up(&x), &mut out).unwrap();
    let want: Vec<D> = layout
        .gather(&x, 0)
        .iter()
        .map(|v| D::from_f64(v.to_f64()))
        .collect();
    assert_close(
        &format!("{what} strided"),
        &gpu.down(&out.view()),
        &want,
        tol::<D>().max(tol::<S>()),
    );
}

#[test]
fn by_name_every_cast() {
    let Some(gpu) = Gpu::open() else { return };
    cast_pair::<f32, f16>(&gpu);
    cast_pair::<f16, f32>(&gpu);
    cast_pair::<f32, bf16>(&gpu);
    cast_pair::<bf16, f32>(&gpu);
    cast_pair::<f16, bf16>(&gpu);
    cast_pair::<f32, f64>(&gpu);
    cast_pair::<f64, f32>(&gpu);
    cast_pair::<u8, f32>(&gpu);
    cast_pair::<u32, f32>(&gpu);
    cast_pair::<i64, f32>(&gpu);
    // f32 -> u8 truncates toward zero: whole values only.
    let x: Vec<f32> = (0..256).map(|i| i as f32).collect();
    let mut out = gpu.stream.alloc_zeros::<u8>(256).unwrap();
    gpu.cast(None, &gpu.up(&x), &mut out).unwrap();
    assert_eq!(
        gpu.down(&out.view()),
        (0..=255u8).collect::<Vec<_>>(),
        "cast_f32_u8"
    );
}

fn where_pair<I: Elem, T: Elem>(gpu: &Gpu) {
    let n = 300;
    let ids: Vec<I> = (0..n).map(|i| I::from_f64((i % 3 % 2) as f64)).collect();
    let t: Vec<T> = values(n, 1.0, 9.0);
    let f: Vec<T> = values(n, -9.0, -1.0);
    let (ids_d, t_d, f_d) = (gpu.up(&ids), gpu.up(&t), gpu.up(&f));
    let what = format!("where_{}_{}", I::DTYPE, T::DTYPE);
    let mut out = gpu.stream.alloc_zeros::<T>(n).unwrap();
    gpu.where_(None, &ids_d, &t_d, &f_d, &mut out).unwrap();
    let dense = Layout {
        dims: vec![n],
        strides: vec![vec![1]; 3],
    };
    assert_eq!(
        gpu.down(&out.view()),
        reference::where_(&dense, &ids, &t, &f),
        "{what}"
    );
    // ids broadcast along rows, t transposed, f dense: three layouts.
    let layout = Layout {
        dims: vec![15, 20],
        strides: vec![vec![0, 1], vec![1, 15], vec![20, 1]],
    };
    gpu.where_(Some(&layout), &ids_d, &t_d, &f_d, &mut out)
        .unwrap();
    let want = reference::where_(&layout, &ids, &t, &f);
    assert_eq!(gpu.down(&out.view()), want, "{what} strided");
}

#[test]
fn by_name_every_where() {
    let Some(gpu) = Gpu::open() else { return };
    macro_rules! each {
        ($($i:ty),*) => {$(
            where_pair::<$i, f32>(&gpu);
            where_pair::<$i, f64>(&gpu);
            where_pair::<$i, f16>(&gpu);
            where_pair::<$i, bf16>(&gpu);
        )*};
    }
    each!(u8, u32, i64);
}
