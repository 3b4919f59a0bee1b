//! The CPU references: what each fixture kernel must compute, written from the
//! kernels' documented arithmetic. The GPU tests compare against these, and
//! the CPU backend runs them as the kernels' bodies.

use half::{bf16, f16};

/// An element type of the elementwise family, with its arithmetic as the
/// kernel does it (`kernels/common/affine.cuh`).
pub trait Affine: Copy + PartialEq + std::fmt::Debug {
    /// `a * x + b`: one fused multiply-add for floats (through f32 for the
    /// half types, rounded once to nearest-even), wrapping for integers.
    fn affine(a: Self, x: Self, b: Self) -> Self;
    /// A deterministic test value for index `i`, with fractional parts where
    /// the type has them.
    fn sample(i: usize) -> Self;
}

impl Affine for f32 {
    fn affine(a: f32, x: f32, b: f32) -> f32 {
        a.mul_add(x, b)
    }
    fn sample(i: usize) -> f32 {
        (i as f32).mul_add(0.37, -3.1)
    }
}

impl Affine for f64 {
    fn affine(a: f64, x: f64, b: f64) -> f64 {
        a.mul_add(x, b)
    }
    fn sample(i: usize) -> f64 {
        (i as f64).mul_add(0.37, -3.1)
    }
}

impl Affine for f16 {
    fn affine(a: f16, x: f16, b: f16) -> f16 {
        f16::from_f32(a.to_f32().mul_add(x.to_f32(), b.to_f32()))
    }
    fn sample(i: usize) -> f16 {
        f16::from_f32(((i % 512) as f32).mul_add(0.37, -3.1))
    }
}

impl Affine for bf16 {
    fn affine(a: bf16, x: bf16, b: bf16) -> bf16 {
        bf16::from_f32(a.to_f32().mul_add(x.to_f32(), b.to_f32()))
    }
    fn sample(i: usize) -> bf16 {
        bf16::from_f32(((i % 512) as f32).mul_add(0.37, -3.1))
    }
}

impl Affine for i32 {
    fn affine(a: i32, x: i32, b: i32) -> i32 {
        a.wrapping_mul(x).wrapping_add(b)
    }
    fn sample(i: usize) -> i32 {
        (i as i32).wrapping_mul(2_654_435_761_u32 as i32)
    }
}

impl Affine for u32 {
    fn affine(a: u32, x: u32, b: u32) -> u32 {
        a.wrapping_mul(x).wrapping_add(b)
    }
    fn sample(i: usize) -> u32 {
        (i as u32).wrapping_mul(2_654_435_761)
    }
}

impl Affine for u8 {
    fn affine(a: u8, x: u8, b: u8) -> u8 {
        a.wrapping_mul(x).wrapping_add(b)
    }
    fn sample(i: usize) -> u8 {
        (i as u8).wrapping_mul(37)
    }
}

/// `y[i] = a * x[i] + b`.
pub fn affine<T: Affine>(a: T, b: T, x: &[T]) -> Vec<T> {
    x.iter().map(|&x| T::affine(a, x, b)).collect()
}

/// The sum of `x`, wrapping (what `kt_sum_u32` computes in any order).
pub fn sum_u32(x: &[u32]) -> u32 {
    x.iter().fold(0u32, |s, &v| s.wrapping_add(v))
}

/// The sum of `x` in f64: `kt_sum_f32` adds in another order, so it is
/// compared within a bound, not bit for bit.
pub fn sum_f32(x: &[f32]) -> f64 {
    x.iter().map(|&v| f64::from(v)).sum()
}

/// `rdc_forward`: `kt_offset(kt_scale(x)) = 3 x + 1`, rounded twice as the
/// kernel rounds: the two functions live in separate translation units, so
/// without link-time optimization nvcc cannot fuse them into one fma.
pub fn rdc_forward(x: &[f32]) -> Vec<f32> {
    x.iter().map(|&x| 3.0 * x + 1.0).collect()
}

/// `rdc_backward`: `kt_scale(kt_offset(x)) = 3 (x + 1)`.
pub fn rdc_backward(x: &[f32]) -> Vec<f32> {
    x.iter().map(|&x| 3.0 * (x + 1.0)).collect()
}

/// `hopper_axpo`: `y = a * x + 1`, one fma.
pub fn hopper_axpo(a: f32, x: &[f32]) -> Vec<f32> {
    x.iter().map(|&x| a.mul_add(x, 1.0)).collect()
}

/// `byname_iota`: `out[i] = value + i`, wrapping.
pub fn iota(value: u32, n: usize) -> Vec<u32> {
    (0..n).map(|i| value.wrapping_add(i as u32)).collect()
}
