//! Separate compilation, loadable: `rdc_forward` (scale.cu) calls a
//! `__device__` function of offset.cu and `rdc_backward` the other way round;
//! the device link makes one image of both. Typed launches against the CPU
//! reference.

mod common;

use gpu_core::LaunchConfig;
use kernel_trees::{kernels, reference, PORTABLE};

fn forward_cpu(_: &LaunchConfig, (x, y, n): (&[f32], &mut [f32], usize)) {
    y[..n].copy_from_slice(&reference::rdc_forward(&x[..n]));
}

fn backward_cpu(_: &LaunchConfig, (x, y, n): (&[f32], &mut [f32], usize)) {
    y[..n].copy_from_slice(&reference::rdc_backward(&x[..n]));
}

#[test]
fn both_directions_cross_the_translation_units() {
    for backend in common::backends(PORTABLE) {
        let stream = backend.default_stream();
        let forward = backend
            .kernel_with_cpu::<kernels::rdc_forward>(forward_cpu)
            .unwrap();
        let backward = backend
            .kernel_with_cpu::<kernels::rdc_backward>(backward_cpu)
            .unwrap();
        for n in [1usize, 257, 100_003] {
            let x: Vec<f32> = (0..n).map(|i| (i as f32).mul_add(0.37, -3.1)).collect();
            let input = stream.to_device(&x).unwrap();
            let mut y = stream.alloc_zeros::<f32>(n).unwrap();
            let config = LaunchConfig::for_elements(n as u32, 256);
            stream
                .launch(&forward, config, (input.view(), y.view_mut(), n))
                .unwrap();
            assert_eq!(
                stream.to_host(&y.view()).unwrap(),
                reference::rdc_forward(&x),
                "forward, {:?}",
                backend.kind()
            );
            stream
                .launch(&backward, config, (input.view(), y.view_mut(), n))
                .unwrap();
            assert_eq!(
                stream.to_host(&y.view()).unwrap(),
                reference::rdc_backward(&x),
                "backward, {:?}",
                backend.kind()
            );
        }
    }
}
