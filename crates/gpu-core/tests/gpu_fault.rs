//! A kernel that traps: the error surfaces at synchronization, named as
//! asynchronous and with the kernel and module of the last launch. Alone in its
//! own test binary because a trap poisons the process's CUDA context.

mod common;

use common::{cuda_or_skip, trap_kernel};
use gpu_core::{Error, LaunchConfig};

#[test]
fn trap_surfaces_at_synchronize_with_the_launch_named() {
    let Some(backend) = cuda_or_skip() else {
        return;
    };
    let stream = backend.default_stream();
    let kernel = backend.kernel::<trap_kernel>().unwrap();
    stream
        .launch(&kernel, LaunchConfig::for_elements(1, 1), ())
        .unwrap();
    let err = stream.synchronize().unwrap_err();
    assert!(
        matches!(
            err,
            Error::Async {
                kernel: Some("trap_kernel"),
                module: Some("gpu_core_test"),
                ..
            }
        ),
        "{err}"
    );
    assert!(err.to_string().contains("surfaced at synchronization"));
}
