//! The cudarc interop surface: the context and stream under the CUDA
//! backend (`None` on the CPU), and a gpu-core stream over a cudarc stream,
//! refused on another backend. The CUDA half skips without a device (a
//! failure under `KILN_REQUIRE_GPU=1`).

use std::sync::Arc;

use gpu_core::{Backend, Error, Stream};

#[test]
fn cpu_backend_has_no_cudarc_context_or_stream() {
    let backend = Backend::cpu();
    assert!(backend.cudarc_context().is_none());
    assert!(backend.default_stream().cudarc_stream().is_none());
    assert!(backend.new_stream().unwrap().cudarc_stream().is_none());
}

#[test]
fn cuda_backend_hands_out_its_context_and_streams() {
    let Some(backend) = gpu_core::testing::cuda_backend(&[]) else {
        return;
    };
    let ctx = backend
        .cudarc_context()
        .expect("a cuda backend has a context");
    for stream in [backend.default_stream(), backend.new_stream().unwrap()] {
        let cuda = stream.cudarc_stream().expect("a cuda stream");
        assert_eq!(cuda.context().cu_ctx(), ctx.cu_ctx());
    }
}

/// gpu-core's copies on the caller's cudarc stream, in order with cudarc's
/// own work there; a context of its own from `CudaContext::new` on the same
/// device is the same primary context.
#[test]
fn stream_from_cudarc_runs_gpu_cores_work_on_the_callers_stream() {
    let Some(backend) = gpu_core::testing::cuda_backend(&[]) else {
        return;
    };
    let ordinal = backend.cudarc_context().unwrap().ordinal();
    let own = gpu_core::cudarc::driver::CudaContext::new(ordinal).unwrap();
    let cudarc_stream = own.new_stream().unwrap();
    let stream = Stream::from_cudarc(&backend, Arc::clone(&cudarc_stream)).unwrap();
    assert_eq!(
        stream.cudarc_stream().unwrap().cu_stream(),
        cudarc_stream.cu_stream()
    );
    let host: Vec<u32> = (0..1000).collect();
    let buffer = stream.to_device(&host).unwrap();
    // cudarc's copy of a slice it allocated, on the same stream.
    let slice = cudarc_stream.clone_htod(&host).unwrap();
    assert_eq!(cudarc_stream.clone_dtoh(&slice).unwrap(), host);
    assert_eq!(stream.to_host(&buffer.view()).unwrap(), host);
}

#[test]
fn cudarc_stream_on_the_cpu_backend_is_refused() {
    let Some(backend) = gpu_core::testing::cuda_backend(&[]) else {
        return;
    };
    let cudarc_stream = Arc::clone(backend.default_stream().cudarc_stream().unwrap());
    let err = Stream::from_cudarc(&Backend::cpu(), cudarc_stream).unwrap_err();
    assert!(matches!(err, Error::BackendMismatch { .. }), "{err}");
}
