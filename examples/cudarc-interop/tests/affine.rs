//! The kernel against the CPU reference, launched with plain cudarc: on a
//! context of cudarc's own (`CudaContext::new`), and on a gpu-core stream
//! through gpu-core's interop surface. Without a GPU (or without GPU code in
//! this build) each GPU test prints `skipped: <reason>` and passes; under
//! `KILN_REQUIRE_GPU=1` that is a failure (`gpu_core::testing`).

use cudarc::driver::CudaContext;
use cudarc_interop::{affine, affine_on, load, modules, reference};
use gpu_core::Backend;

/// Whether a device here runs this build's GPU code; prints why not.
fn gpu() -> Option<Backend> {
    gpu_core::testing::cuda_backend(modules::ALL)
}

/// Inputs with fractional parts, so a non-fused multiply-add would round
/// differently.
fn inputs(n: usize) -> Vec<f32> {
    (0..n).map(|i| (i as f32).mul_add(0.37, -3.1)).collect()
}

const SIZES: [usize; 6] = [0, 1, 255, 256, 257, 100_003];

#[test]
fn affine_with_plain_cudarc_matches_the_cpu_reference() {
    if gpu().is_none() {
        return;
    }
    let ctx = CudaContext::new(0).unwrap();
    let kernel = load(&ctx).unwrap();
    let stream = ctx.default_stream();
    for n in SIZES {
        let x = inputs(n);
        let got = affine(&stream, &kernel, 1.5, -0.25, &x).unwrap();
        assert_eq!(got, reference(1.5, -0.25, &x), "n = {n}");
    }
}

#[test]
fn affine_on_a_gpu_core_stream_matches_the_cpu_reference() {
    let Some(backend) = gpu() else {
        return;
    };
    for stream in [backend.default_stream(), backend.new_stream().unwrap()] {
        for n in SIZES {
            let x = inputs(n);
            let got = affine_on(&stream, -2.0, 0.5, &x)
                .expect("a cuda stream")
                .unwrap();
            assert_eq!(got, reference(-2.0, 0.5, &x), "n = {n}");
        }
    }
}

/// gpu-core's CPU backend has no cudarc stream: the interop path says so
/// instead of failing.
#[test]
fn the_interop_path_is_none_on_gpu_cores_cpu_backend() {
    let stream = Backend::cpu().default_stream();
    assert!(affine_on(&stream, 1.0, 0.0, &[1.0]).is_none());
}

/// A build with no toolkit embeds no image and refuses to load it with a
/// typed error; with one, the image is there (and non-empty).
#[test]
fn the_image_is_embedded_exactly_when_built_with_a_toolkit() {
    assert_eq!(modules::AFFINE.is_built(), cfg!(cuda_enabled));
    assert_eq!(cudarc_interop::CUDA_ENABLED, cfg!(cuda_enabled));
    #[cfg(cuda_enabled)]
    assert!(!modules::AFFINE.image.is_empty() && !modules::AFFINE.sass.is_empty());
    #[cfg(cpu_only)]
    assert!(modules::AFFINE.image.is_empty());
    println!("kernels: {}", modules::IMAGES_FROM);
}

/// A CPU-only build: `load` is a typed error naming the fix, before any
/// driver call (so it holds on a machine with no driver too).
#[cfg(cpu_only)]
#[test]
fn loading_without_gpu_code_is_an_error_naming_the_fix() {
    use cudarc_interop::Error;
    if gpu_core::driver_present() {
        let Ok(ctx) = CudaContext::new(0) else {
            return;
        };
        let err = load(&ctx).unwrap_err();
        assert!(matches!(err, Error::NoGpuCode), "{err}");
        assert!(err.to_string().contains("set CUDA_PATH"), "{err}");
    } else {
        // No context can be made here; the message is what a user would read.
        assert!(Error::NoGpuCode.to_string().contains("set CUDA_PATH"));
    }
}
