//! A kernel declared from its source (byname.cu, no header): its launch is
//! typed like a header's. `byname_fill<float>` takes `float value`, not u32.
use gpu_core::{Backend, LaunchConfig};
use kernel_trees::kernels::byname_fill_float;

fn main() {
    let backend = Backend::cpu();
    let stream = backend.default_stream();
    let kernel = backend.kernel::<byname_fill_float>().unwrap();
    let mut out = stream.alloc_zeros::<f32>(4).unwrap();
    let cfg = LaunchConfig::for_elements(4, 32);
    stream.launch(&kernel, cfg, (out.view_mut(), 1u32, 4usize)).unwrap();
}
