//! unary.cu's `uexp_f32` takes `num_dims` as `size_t`: a u32 does not
//! compile.
use candle_patterns::markers::uexp_f32;
use gpu_core::{Backend, DeviceView, LaunchConfig};

fn main() {
    let backend = Backend::cpu();
    let stream = backend.default_stream();
    let kernel = backend.kernel::<uexp_f32>().unwrap();
    let mut out = stream.alloc_zeros::<f32>(4).unwrap();
    let cfg = LaunchConfig::for_elements(4, 32);
    stream.launch(&kernel, cfg, (4usize, 1u32, DeviceView::null(), DeviceView::null(), out.view_mut())).unwrap();
}
