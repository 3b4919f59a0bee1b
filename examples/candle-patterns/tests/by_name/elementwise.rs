//! The elementwise families launched typed (each kernel's marker, generated
//! from its source) against the CPU references: every unary op of every
//! dtype, every binary op of every dtype, affine, fill, copy2d, every cast
//! and every where. Each goes contiguous (`info` null), strided (a
//! transposed or broadcast layout) and, where candle allows it, in place
//! (`inp` null); each test ends checking it launched every kernel of its
//! modules. Named `typed_*`: the GPU bundle runs them under memcheck.

use crate::families::{assert_close, launched_every, tol, Gpu};
use crate::families::{AffineParams, BinaryParams, UnaryParams, WhereParams};
use candle_patterns::reference::{self, Elem, Layout};
use candle_patterns::{markers::*, modules};
use gpu_core::{DeviceBuffer, KernelDecl};
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

/// The op of a family kernel's name: `uexp` of `uexp_f32`.
fn op<K: KernelDecl>() -> &'static str {
    K::NAME.split('_').next().unwrap()
}

fn unary_op<K, T: Elem>(gpu: &Gpu, x: &[T], input: &DeviceBuffer<T>)
where
    K: KernelDecl<Params = UnaryParams<T, T>>,
{
    let name = K::NAME;
    let want: Vec<T> = x
        .iter()
        .map(|v| T::from_f64(reference::unary(op::<K>(), v.to_f64())))
        .collect();
    let mut out = gpu.stream.alloc_zeros::<T>(x.len()).unwrap();
    gpu.unary::<K, T, T>(None, Some(input), &mut out).unwrap();
    assert_close(name, &gpu.down(&out.view()), &want, tol::<T>());
    // In place: inp null, out read and written.
    let mut inout = gpu.up(x);
    gpu.unary::<K, T, T>(None, None, &mut inout).unwrap();
    let what = format!("{name} in place");
    assert_close(&what, &gpu.down(&inout.view()), &want, tol::<T>());
}

/// `uneg` (floats) or `ucopy` (integers) of a (rows, cols) tensor read
/// transposed through `info`.
fn unary_strided<K, T: Elem>(gpu: &Gpu, rows: usize, cols: usize)
where
    K: KernelDecl<Params = UnaryParams<T, T>>,
{
    let x: Vec<T> = values(rows * cols, 0.0, 200.0);
    let layout = transposed(rows, cols, 1);
    let mut out = gpu.stream.alloc_zeros::<T>(x.len()).unwrap();
    gpu.unary::<K, T, T>(Some(&layout), Some(&gpu.up(&x)), &mut out)
        .unwrap();
    let sign = if op::<K>() == "uneg" { -1.0 } else { 1.0 };
    let want: Vec<T> = layout
        .gather(&x, 0)
        .iter()
        .map(|v| T::from_f64(sign * v.to_f64()))
        .collect();
    let what = format!("{} strided", K::NAME);
    assert_close(&what, &gpu.down(&out.view()), &want, 0.0);
}

#[test]
fn typed_every_unary_op_of_every_dtype() {
    let Some(gpu) = Gpu::open() else { return };
    let mut launched = Vec::new();
    macro_rules! float {
        ($t:ty: $neg:ident, $($k:ident),*) => {{
            let x: Vec<$t> = values(1000, 0.25, 3.0);
            let input = gpu.up(&x);
            $( unary_op::<$k, $t>(&gpu, &x, &input); launched.push($k::NAME); )*
            unary_op::<$neg, $t>(&gpu, &x, &input);
            unary_strided::<$neg, $t>(&gpu, 20, 50);
            launched.push($neg::NAME);
        }};
    }
    float!(f32: uneg_f32, ucopy_f32, uexp_f32, ulog_f32, usqr_f32, usqrt_f32, uabs_f32, urecip_f32, urelu_f32, ugelu_f32);
    float!(f64: uneg_f64, ucopy_f64, uexp_f64, ulog_f64, usqr_f64, usqrt_f64, uabs_f64, urecip_f64, urelu_f64, ugelu_f64);
    float!(f16: uneg_f16, ucopy_f16, uexp_f16, ulog_f16, usqr_f16, usqrt_f16, uabs_f16, urecip_f16, urelu_f16, ugelu_f16);
    float!(bf16: uneg_bf16, ucopy_bf16, uexp_bf16, ulog_bf16, usqr_bf16, usqrt_bf16, uabs_bf16, urecip_bf16, urelu_bf16, ugelu_bf16);
    // The integer copies, strided: a gather of the transposed input.
    unary_strided::<ucopy_u8, u8>(&gpu, 30, 20);
    unary_strided::<ucopy_u32, u32>(&gpu, 30, 20);
    unary_strided::<ucopy_i64, i64>(&gpu, 30, 20);
    launched.extend([ucopy_u8::NAME, ucopy_u32::NAME, ucopy_i64::NAME]);
    launched_every(&[&modules::UNARY], launched);
}

/// `n` left-hand values and nonzero divisors (integers from 1, floats away
/// from 0, alternating sign).
fn operands<T: Elem>(n: usize) -> (Vec<T>, Vec<T>) {
    let (lo, hi) = if T::INTEGER { (1.0, 60.0) } else { (-4.0, 4.0) };
    let rhs = values::<T>(n, 1.0, 7.0)
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
    (values(n, lo, hi), rhs)
}

fn binary_op<K, T: Elem>(gpu: &Gpu, lhs: &[T], rhs: &[T])
where
    K: KernelDecl<Params = BinaryParams<T>>,
{
    let n = lhs.len();
    let (l, r) = (gpu.up(lhs), gpu.up(rhs));
    let want: Vec<T> = lhs
        .iter()
        .zip(rhs)
        .map(|(a, b)| reference::binary(op::<K>(), *a, *b))
        .collect();
    let mut out = gpu.stream.alloc_zeros::<T>(n).unwrap();
    gpu.binary::<K, T>(None, &l, &r, &mut out).unwrap();
    assert_close(K::NAME, &gpu.down(&out.view()), &want, tol::<T>());
    // Broadcast: lhs (7, 111) dense, rhs one row of 111 (stride 0 over rows).
    let layout = Layout {
        dims: vec![7, 111],
        strides: vec![vec![111, 1], vec![0, 1]],
    };
    gpu.binary::<K, T>(Some(&layout), &l, &r, &mut out).unwrap();
    let want: Vec<T> = (0..n)
        .map(|i| {
            reference::binary(
                op::<K>(),
                lhs[layout.offset(i, 0)],
                rhs[layout.offset(i, 1)],
            )
        })
        .collect();
    let what = format!("{} broadcast", K::NAME);
    assert_close(&what, &gpu.down(&out.view()), &want, tol::<T>());
}

#[test]
fn typed_every_binary_op_of_every_dtype() {
    let Some(gpu) = Gpu::open() else { return };
    let mut launched = Vec::new();
    macro_rules! each {
        ($t:ty: $($k:ident),*) => {{
            let (lhs, rhs) = operands::<$t>(777);
            $( binary_op::<$k, $t>(&gpu, &lhs, &rhs); launched.push($k::NAME); )*
        }};
    }
    each!(f32: badd_f32, bsub_f32, bmul_f32, bdiv_f32, bminimum_f32, bmaximum_f32);
    each!(f64: badd_f64, bsub_f64, bmul_f64, bdiv_f64, bminimum_f64, bmaximum_f64);
    each!(f16: badd_f16, bsub_f16, bmul_f16, bdiv_f16, bminimum_f16, bmaximum_f16);
    each!(bf16: badd_bf16, bsub_bf16, bmul_bf16, bdiv_bf16, bminimum_bf16, bmaximum_bf16);
    each!(u8: badd_u8, bsub_u8, bmul_u8, bdiv_u8, bminimum_u8, bmaximum_u8);
    each!(u32: badd_u32, bsub_u32, bmul_u32, bdiv_u32, bminimum_u32, bmaximum_u32);
    each!(i64: badd_i64, bsub_i64, bmul_i64, bdiv_i64, bminimum_i64, bmaximum_i64);
    launched_every(&[&modules::BINARY], launched);
}

fn affine_dtype<K, T: Elem>(gpu: &Gpu)
where
    K: KernelDecl<Params = AffineParams<T>>,
{
    let n = 500;
    let x: Vec<T> = values(n, 0.0, 20.0);
    let (mul, add) = (T::from_f64(3.0), T::from_f64(2.0));
    let f = |v: &T| T::from_f64(v.to_f64() * 3.0 + 2.0);
    let what = K::NAME;
    let mut out = gpu.stream.alloc_zeros::<T>(n).unwrap();
    gpu.affine::<K, T>(None, Some(&gpu.up(&x)), &mut out, mul, add)
        .unwrap();
    let want: Vec<T> = x.iter().map(f).collect();
    assert_close(what, &gpu.down(&out.view()), &want, tol::<T>());
    let mut inout = gpu.up(&x);
    gpu.affine::<K, T>(None, None, &mut inout, mul, add)
        .unwrap();
    let in_place = format!("{what} in place");
    assert_close(&in_place, &gpu.down(&inout.view()), &want, tol::<T>());
    let layout = transposed(25, 20, 1);
    gpu.affine::<K, T>(Some(&layout), Some(&gpu.up(&x)), &mut out, mul, add)
        .unwrap();
    let want: Vec<T> = layout.gather(&x, 0).iter().map(f).collect();
    let strided = format!("{what} strided");
    assert_close(&strided, &gpu.down(&out.view()), &want, tol::<T>());
}

fn fill_dtype<F, C, T: Elem>(gpu: &Gpu)
where
    F: KernelDecl<Params = (*mut T, T, usize)>,
    C: KernelDecl<Params = (*const T, *mut T, u32, u32, u32, u32)>,
{
    let mut buf = gpu.stream.alloc_zeros::<T>(1029).unwrap();
    gpu.fill::<F, T>(&mut buf, T::from_f64(5.0)).unwrap();
    let want = vec![T::from_f64(5.0); 1029];
    assert_eq!(gpu.down(&buf.view()), want, "{}", F::NAME);
    // copy2d: 3 rows of 4 from a 5-wide source into a 6-wide destination.
    let src: Vec<T> = (0..15).map(|i| T::from_f64(i as f64)).collect();
    let mut dst = gpu.up(&[T::from_f64(0.0); 18]);
    gpu.copy2d::<C, T>(&gpu.up(&src), &mut dst, 3, 4, (5, 6))
        .unwrap();
    let mut want = vec![T::from_f64(0.0); 18];
    for r in 0..3 {
        want[r * 6..r * 6 + 4].copy_from_slice(&src[r * 5..r * 5 + 4]);
    }
    assert_eq!(gpu.down(&dst.view()), want, "{}", C::NAME);
}

#[test]
fn typed_affine_fill_and_copy2d_of_every_dtype() {
    let Some(gpu) = Gpu::open() else { return };
    let mut launched = Vec::new();
    macro_rules! each {
        ($($t:ty: $a:ident, $f:ident, $c:ident);*) => {$(
            affine_dtype::<$a, $t>(&gpu);
            fill_dtype::<$f, $c, $t>(&gpu);
            launched.extend([$a::NAME, $f::NAME, $c::NAME]);
        )*};
    }
    each!(
        f32: affine_f32, fill_f32, copy2d_f32;
        f64: affine_f64, fill_f64, copy2d_f64;
        f16: affine_f16, fill_f16, copy2d_f16;
        bf16: affine_bf16, fill_bf16, copy2d_bf16;
        u8: affine_u8, fill_u8, copy2d_u8;
        u32: affine_u32, fill_u32, copy2d_u32;
        i64: affine_i64, fill_i64, copy2d_i64
    );
    launched_every(&[&modules::AFFINE, &modules::FILL], launched);
}

fn cast_pair<K, S: Elem, D: Elem>(gpu: &Gpu)
where
    K: KernelDecl<Params = UnaryParams<S, D>>,
{
    let x: Vec<S> = values(400, 0.0, 250.0);
    let what = K::NAME;
    let mut out = gpu.stream.alloc_zeros::<D>(400).unwrap();
    gpu.unary::<K, S, D>(None, Some(&gpu.up(&x)), &mut out)
        .unwrap();
    let want: Vec<D> = x.iter().map(|v| D::from_f64(v.to_f64())).collect();
    // One rounding of the destination (halves go through f32 first).
    let tol = tol::<D>().max(tol::<S>());
    assert_close(what, &gpu.down(&out.view()), &want, tol);
    let layout = transposed(20, 20, 1);
    gpu.unary::<K, S, D>(Some(&layout), Some(&gpu.up(&x)), &mut out)
        .unwrap();
    let want: Vec<D> = layout
        .gather(&x, 0)
        .iter()
        .map(|v| D::from_f64(v.to_f64()))
        .collect();
    assert_close(
        &format!("{what} strided"),
        &gpu.down(&out.view()),
        &want,
        tol,
    );
}

#[test]
fn typed_every_cast() {
    let Some(gpu) = Gpu::open() else { return };
    cast_pair::<cast_f32_f16, f32, f16>(&gpu);
    cast_pair::<cast_f16_f32, f16, f32>(&gpu);
    cast_pair::<cast_f32_bf16, f32, bf16>(&gpu);
    cast_pair::<cast_bf16_f32, bf16, f32>(&gpu);
    cast_pair::<cast_f16_bf16, f16, bf16>(&gpu);
    cast_pair::<cast_f32_f64, f32, f64>(&gpu);
    cast_pair::<cast_f64_f32, f64, f32>(&gpu);
    cast_pair::<cast_u8_f32, u8, f32>(&gpu);
    cast_pair::<cast_u32_f32, u32, f32>(&gpu);
    cast_pair::<cast_i64_f32, i64, f32>(&gpu);
    // f32 -> u8 truncates toward zero: whole values only.
    let x: Vec<f32> = (0..256).map(|i| i as f32).collect();
    let mut out = gpu.stream.alloc_zeros::<u8>(256).unwrap();
    gpu.unary::<cast_f32_u8, f32, u8>(None, Some(&gpu.up(&x)), &mut out)
        .unwrap();
    let want: Vec<u8> = (0..=255u8).collect();
    assert_eq!(gpu.down(&out.view()), want, "cast_f32_u8");
    let launched = vec![
        cast_f32_f16::NAME,
        cast_f16_f32::NAME,
        cast_f32_bf16::NAME,
        cast_bf16_f32::NAME,
        cast_f16_bf16::NAME,
        cast_f32_f64::NAME,
        cast_f64_f32::NAME,
        cast_u8_f32::NAME,
        cast_u32_f32::NAME,
        cast_i64_f32::NAME,
        cast_f32_u8::NAME,
    ];
    launched_every(&[&modules::CAST], launched);
}

fn where_pair<K, I: Elem, T: Elem>(gpu: &Gpu)
where
    K: KernelDecl<Params = WhereParams<I, T>>,
{
    let n = 300;
    let ids: Vec<I> = (0..n).map(|i| I::from_f64((i % 3 % 2) as f64)).collect();
    let t: Vec<T> = values(n, 1.0, 9.0);
    let f: Vec<T> = values(n, -9.0, -1.0);
    let (ids_d, t_d, f_d) = (gpu.up(&ids), gpu.up(&t), gpu.up(&f));
    let what = K::NAME;
    let mut out = gpu.stream.alloc_zeros::<T>(n).unwrap();
    gpu.where_::<K, I, T>(None, &ids_d, &t_d, &f_d, &mut out)
        .unwrap();
    let dense = Layout {
        dims: vec![n],
        strides: vec![vec![1]; 3],
    };
    let want = reference::where_(&dense, &ids, &t, &f);
    assert_eq!(gpu.down(&out.view()), want, "{what}");
    // ids broadcast along rows, t transposed, f dense: three layouts.
    let layout = Layout {
        dims: vec![15, 20],
        strides: vec![vec![0, 1], vec![1, 15], vec![20, 1]],
    };
    gpu.where_::<K, I, T>(Some(&layout), &ids_d, &t_d, &f_d, &mut out)
        .unwrap();
    let want = reference::where_(&layout, &ids, &t, &f);
    assert_eq!(gpu.down(&out.view()), want, "{what} strided");
}

#[test]
fn typed_every_where() {
    let Some(gpu) = Gpu::open() else { return };
    let mut launched = Vec::new();
    macro_rules! each {
        ($($i:ty: $f32:ident, $f64:ident, $f16:ident, $bf16:ident);*) => {$(
            where_pair::<$f32, $i, f32>(&gpu);
            where_pair::<$f64, $i, f64>(&gpu);
            where_pair::<$f16, $i, f16>(&gpu);
            where_pair::<$bf16, $i, bf16>(&gpu);
            launched.extend([$f32::NAME, $f64::NAME, $f16::NAME, $bf16::NAME]);
        )*};
    }
    each!(
        u8: where_u8_f32, where_u8_f64, where_u8_f16, where_u8_bf16;
        u32: where_u32_f32, where_u32_f64, where_u32_f16, where_u32_bf16;
        i64: where_i64_f32, where_i64_f64, where_i64_f16, where_i64_bf16
    );
    launched_every(&[&modules::TERNARY], launched);
}
