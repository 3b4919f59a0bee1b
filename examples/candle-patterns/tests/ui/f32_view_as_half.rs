//! cast.cu's `cast_f16_f32` reads `__half` and writes `float`: an f32 view
//! for its input does not compile.
use candle_patterns::markers::cast_f16_f32;
use gpu_core::{Backend, DeviceView, LaunchConfig};

fn main() {
    let backend = Backend::cpu();
    let stream = backend.default_stream();
    let kernel = backend.kernel::<cast_f16_f32>().unwrap();
    let inp = stream.alloc_zeros::<f32>(4).unwrap();
    let mut out = stream.alloc_zeros::<f32>(4).unwrap();
    let cfg = LaunchConfig::for_elements(4, 32);
    stream.launch(&kernel, cfg, (4usize, 1usize, DeviceView::null(), inp.view(), out.view_mut())).unwrap();
}
