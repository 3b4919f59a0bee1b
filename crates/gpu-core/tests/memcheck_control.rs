//! The positive control for compute-sanitizer: a kernel that writes one
//! element past its buffer. Ignored in normal runs (the write lands in the
//! allocation's padding and nothing fails); the GPU bundle's `run.sh` runs it
//! under memcheck and requires memcheck to flag it, so that a clean sanitizer
//! run of the real suite means something.

mod common;

use common::{cuda_or_skip, oob_write};
use gpu_core::LaunchConfig;

#[test]
#[ignore = "run under compute-sanitizer memcheck by the GPU bundle, which must flag it"]
fn out_of_bounds_write_for_memcheck() {
    let Some(backend) = cuda_or_skip() else {
        return;
    };
    let stream = backend.default_stream();
    let kernel = backend.kernel::<oob_write>().unwrap();
    let n = 256usize;
    let mut c = stream.alloc_zeros::<f32>(n).unwrap();
    stream
        .launch(
            &kernel,
            LaunchConfig::for_elements(1, 1),
            (c.view_mut(), n as u32),
        )
        .unwrap();
    stream.synchronize().unwrap();
}
