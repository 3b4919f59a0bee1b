//! The same workload on every backend present: the CPU reference is the
//! oracle. On a machine without a usable GPU the CUDA half says why it skips.

use apps::{vadd, Rng};
use gpu_core::{Backend, BackendKind};

fn cuda_or_skip() -> Option<Backend> {
    gpu_core::testing::cuda_backend(cuda_sys::modules::ALL)
}

#[test]
fn vadd_on_the_gpu_matches_the_cpu_reference() {
    let Some(backend) = cuda_or_skip() else {
        return;
    };
    assert_eq!(backend.kind(), BackendKind::Cuda);
    let stream = backend.default_stream();
    let kernel = vadd::kernel(&backend).unwrap();
    let mut rng = Rng::new(3);
    // Lengths that exercise the float4 body, the scalar tail and several waves.
    for n in [1usize, 3, 4, 5, 1000, 1 << 20, (1 << 22) + 3] {
        let (a, b) = (rng.f32s(n), rng.f32s(n));
        assert_eq!(
            vadd::add(&stream, &kernel, &a, &b).unwrap(),
            vadd::reference(&a, &b),
            "n = {n}"
        );
    }
}

#[test]
fn auto_backend_runs_and_says_why() {
    let backend = Backend::auto(cuda_sys::modules::ALL).unwrap();
    let line = apps::describe_backend(&backend);
    assert!(line.starts_with("backend: "), "{line}");
    if backend.kind() == BackendKind::Cpu {
        assert!(
            backend.cpu_reason().is_some(),
            "a CPU fallback always has a reason"
        );
    }
    let stream = backend.default_stream();
    let kernel = vadd::kernel(&backend).unwrap();
    let (a, b) = (vec![1.5f32; 10], vec![2.0f32; 10]);
    assert_eq!(
        vadd::add(&stream, &kernel, &a, &b).unwrap(),
        vec![3.5f32; 10]
    );
}
