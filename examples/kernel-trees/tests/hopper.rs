//! The sm_90a-only module: it loads and computes on Hopper. Elsewhere the
//! module has no code the device can run, which is what its `archs` promise.

use gpu_core::{Backend, LaunchConfig};
use kernel_trees::{kernels, modules, reference, PORTABLE};

#[test]
fn hopper_module_runs_on_hopper() {
    // Ask for a device with the portable modules first: whether it is a
    // Hopper decides whether the sm_90a module can load at all.
    let Some(portable) = gpu_core::testing::cuda_backend(PORTABLE) else {
        return;
    };
    let capability = portable
        .device()
        .expect("a CUDA backend has a device")
        .compute_capability;
    if capability != (9, 0) {
        println!(
            "skipped: HOPPER is built for sm_90a alone; this device is sm_{}{}",
            capability.0, capability.1
        );
        return;
    }
    let backend = Backend::cuda(0, &[&modules::HOPPER]).unwrap();
    let kernel = backend.kernel::<kernels::hopper_axpo>().unwrap();
    let stream = backend.default_stream();
    let n = 100_003usize;
    let x: Vec<f32> = (0..n).map(|i| (i as f32).mul_add(0.37, -3.1)).collect();
    let input = stream.to_device(&x).unwrap();
    let mut y = stream.alloc_zeros::<f32>(n).unwrap();
    let config = LaunchConfig::for_elements(n as u32, 128);
    stream
        .launch(&kernel, config, (input.view(), y.view_mut(), 1.5, n))
        .unwrap();
    assert_eq!(
        stream.to_host(&y.view()).unwrap(),
        reference::hopper_axpo(1.5, &x)
    );
}
