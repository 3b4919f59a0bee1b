//! The static-library modules' host launchers: the templated reduction
//! (`reduce`) and the separately compiled kernels behind `rdc_static`,
//! against the CPU reference on every backend present.

mod common;

use kernel_trees::{rdc_round_trip, reference, sum_f32, sum_u32, PORTABLE};

#[test]
fn sum_u32_wraps_as_the_reference() {
    for backend in common::backends(PORTABLE) {
        let stream = backend.default_stream();
        for n in [0usize, 1, 31, 256, 257, 262_145, 1_000_003] {
            let x: Vec<u32> = (0..n as u32)
                .map(|i| i.wrapping_mul(2_654_435_761))
                .collect();
            assert_eq!(
                sum_u32(&stream, &x).unwrap(),
                reference::sum_u32(&x),
                "{:?}, n = {n}",
                backend.kind()
            );
        }
    }
}

#[test]
fn sum_f32_is_within_rounding_of_the_reference() {
    for backend in common::backends(PORTABLE) {
        let stream = backend.default_stream();
        for n in [1usize, 257, 1_000_003] {
            let x: Vec<f32> = (0..n)
                .map(|i| ((i % 1000) as f32).mul_add(0.01, 0.5))
                .collect();
            let want = reference::sum_f32(&x);
            let got = f64::from(sum_f32(&stream, &x).unwrap());
            // Pairwise/tree order: error within ~log2(n) ulps of the sum.
            assert!(
                (got - want).abs() <= 1e-5 * want,
                "{:?}, n = {n}: {got} vs {want}",
                backend.kind()
            );
        }
    }
}

#[test]
fn rdc_round_trip_matches_the_reference() {
    for backend in common::backends(PORTABLE) {
        let stream = backend.default_stream();
        for n in [0usize, 1, 255, 256, 257, 100_003] {
            let x: Vec<f32> = (0..n).map(|i| (i as f32).mul_add(0.37, -3.1)).collect();
            let want = reference::rdc_backward(&reference::rdc_forward(&x));
            assert_eq!(
                rdc_round_trip(&stream, &x).unwrap(),
                want,
                "{:?}, n = {n}",
                backend.kind()
            );
        }
    }
}
