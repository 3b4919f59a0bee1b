#![allow(non_camel_case_types)]
use gpu_core::{Backend, KernelDecl, LaunchConfig};

#[derive(Clone, Copy)]
struct add_f32;
// SAFETY: `NAME` and `Params` are the test kernel's own entry point and C
// parameter types.
unsafe impl KernelDecl for add_f32 {
    const NAME: &'static str = "add_f32";
    const HEADER: &'static str = "add.h";
    const PARAM_NAMES: &'static [&'static str] = &["a", "b", "c", "n"];
    const PARAM_LAYOUT: &'static [(usize, usize)] = &[(8, 8), (8, 8), (8, 8), (4, 4)];
    type Params = (*const f32, *const f32, *mut f32, u32);
}

fn main() {
    let backend = Backend::cpu();
    let stream = backend.default_stream();
    let kernel = backend.kernel::<add_f32>().unwrap();
    let a = stream.alloc_zeros::<f32>(4).unwrap();
    let mut c = stream.alloc_zeros::<f32>(4).unwrap();
    let cfg = LaunchConfig::for_elements(4, 32);
    // A buffer of u32 where the kernel reads floats.
    let ints = stream.alloc_zeros::<u32>(4).unwrap();
    stream.launch(&kernel, cfg, (ints.view(), a.view(), c.view_mut(), 4u32)).unwrap();
}
