//! The kernel against the CPU reference, on every backend present: the CPU
//! always, CUDA where a device runs this crate's fat binary (skipped, with the
//! reason, elsewhere; a failure under `KILN_REQUIRE_GPU=1`).

use downstream::{kernel, modules, reference, saxpy};
use gpu_core::Backend;

/// The CPU backend, and CUDA when it can run here (`gpu_core::testing`
/// prints why not, or fails under `KILN_REQUIRE_GPU=1`).
fn backends() -> Vec<Backend> {
    let mut all = vec![Backend::cpu()];
    all.extend(gpu_core::testing::cuda_backend(modules::ALL));
    all
}

/// Deterministic inputs with fractional parts, so a non-fused multiply-add
/// would round differently.
fn inputs(n: usize) -> (Vec<f32>, Vec<f32>) {
    let x = (0..n).map(|i| (i as f32).mul_add(0.37, -3.1)).collect();
    let y = (0..n).map(|i| (i as f32).mul_add(-0.011, 7.3)).collect();
    (x, y)
}

#[test]
fn saxpy_matches_the_cpu_reference_on_every_backend() {
    for backend in backends() {
        let stream = backend.default_stream();
        let kernel = kernel(&backend).unwrap();
        for n in [0usize, 1, 255, 256, 257, 100_003] {
            let (x, y) = inputs(n);
            let got = saxpy(&stream, &kernel, 1.5, &x, &y).unwrap();
            assert_eq!(got, reference(1.5, &x, &y), "{:?}, n = {n}", backend.kind());
        }
    }
}

#[test]
fn mismatched_lengths_are_an_error_not_a_fault() {
    for backend in backends() {
        let stream = backend.default_stream();
        let kernel = kernel(&backend).unwrap();
        let err = saxpy(&stream, &kernel, 1.0, &[1.0; 4], &[1.0; 3]).unwrap_err();
        assert!(
            matches!(err, gpu_core::Error::LengthMismatch { src: 4, dst: 3, .. }),
            "{err}"
        );
    }
}

#[test]
fn backend_choice_says_why_it_fell_back() {
    let backend = downstream::backend().unwrap();
    match backend.cpu_reason() {
        Some(reason) => println!("running on the CPU: {reason}"),
        None => println!("running on CUDA"),
    }
}

/// Where the embedded kernels came from: nvcc at build time, or the crate's
/// `kernels-prebuilt/` where the build found no toolkit (the GPU bundle's
/// `downstream-prebuilt__saxpy` prints `kernels: prebuilt kernels-prebuilt:
/// CUDA 13.0, ...`).
#[test]
fn kernels_say_where_they_came_from() {
    println!("kernels: {}", modules::IMAGES_FROM);
    assert_eq!(
        downstream::CUDA_ENABLED,
        !modules::IMAGES_FROM.starts_with("none")
    );
}
