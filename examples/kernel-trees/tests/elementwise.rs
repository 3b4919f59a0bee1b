//! The macro-generated dtype family: every dtype's kernel against the CPU
//! reference, bit for bit, on every backend present, across block and
//! grid-stride boundaries.

mod common;

use kernel_trees::reference::{self, Affine};
use kernel_trees::{affine, Dtype, PORTABLE};

fn check<T: Dtype>(a: T, b: T) {
    for backend in common::backends(PORTABLE) {
        let stream = backend.default_stream();
        let kernel = T::kernel(&backend).unwrap();
        for n in [0usize, 1, 255, 256, 257, 100_003] {
            let x: Vec<T> = (0..n).map(T::sample).collect();
            let got = affine(&stream, &kernel, a, b, &x).unwrap();
            let want = reference::affine(a, b, &x);
            if let Some(i) = (0..n).find(|&i| got[i] != want[i]) {
                panic!(
                    "{}: {:?}, n = {n}: y[{i}] = {:?}, want {:?}",
                    std::any::type_name::<T>(),
                    backend.kind(),
                    got[i],
                    want[i]
                );
            }
        }
    }
}

#[test]
fn affine_f32_matches_the_reference() {
    check(1.37f32, -0.25);
}

#[test]
fn affine_f64_matches_the_reference() {
    check(1.37f64, -0.25);
}

#[test]
fn affine_f16_matches_the_reference() {
    check(half::f16::from_f32(1.37), half::f16::from_f32(-0.25));
}

#[test]
fn affine_bf16_matches_the_reference() {
    check(half::bf16::from_f32(1.37), half::bf16::from_f32(-0.25));
}

#[test]
fn affine_i32_wraps_as_the_reference() {
    check(-7i32, i32::MAX);
}

#[test]
fn affine_u32_wraps_as_the_reference() {
    check(2_654_435_761u32, 12345);
}

#[test]
fn affine_u8_wraps_as_the_reference() {
    check(37u8, 200);
}

/// The family's arithmetic itself: what the kernels are held to.
#[test]
fn the_reference_rounds_once_and_wraps() {
    // One rounding: a fused multiply-add keeps the product's low bits.
    let (a, x, b) = (1.0f32 + f32::EPSILON, 1.0 - f32::EPSILON, -1.0);
    assert_eq!(f32::affine(a, x, b), -f32::EPSILON * f32::EPSILON);
    assert_eq!(u8::affine(16, 16, 1), 1);
    assert_eq!(i32::affine(i32::MAX, 2, 2), 0);
}
