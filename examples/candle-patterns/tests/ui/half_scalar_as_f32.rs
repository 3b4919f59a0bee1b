//! affine.cu's `affine_f16` takes `mul` and `add` as `__half`: an f32 does
//! not compile (by name it is refused at run time, `by_name_wrong_lists_*`).
use candle_patterns::markers::affine_f16;
use gpu_core::{Backend, DeviceView, LaunchConfig};
use half::f16;

fn main() {
    let backend = Backend::cpu();
    let stream = backend.default_stream();
    let kernel = backend.kernel::<affine_f16>().unwrap();
    let mut out = stream.alloc_zeros::<f16>(4).unwrap();
    let cfg = LaunchConfig::for_elements(4, 32);
    stream.launch(&kernel, cfg, (4usize, 1usize, DeviceView::null(), DeviceView::null(), out.view_mut(), 3.0f32, f16::ONE)).unwrap();
}
