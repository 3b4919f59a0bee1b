//! Tests that need a CUDA device; each prints `skipped: no CUDA device
//! (<reason>)` and returns when there is none.

mod common;

use common::{add_f32, cuda_or_skip, TEST_MODULE};
use gpu_core::{Backend, BackendKind, Error, LaunchConfig};

#[test]
fn device_properties_are_read_from_attributes() {
    let Some(backend) = cuda_or_skip() else {
        return;
    };
    let device = backend.device().unwrap();
    println!("{device:#?}");
    assert!(!device.name.is_empty());
    assert!(device.compute_capability.0 >= 3);
    assert!(device.sm_count > 0);
    assert!(device.total_memory > 0);
    assert!(device.limits.max_threads_per_block >= 512);
    if let Some(bw) = device.memory_bandwidth_bytes_per_sec() {
        println!("peak memory bandwidth: {:.0} GB/s", bw / 1e9);
        assert!(bw > 1e10, "bandwidth {bw} is implausibly low");
    }
    let (major, _) = gpu_core::driver_version().unwrap();
    assert!(major >= 11);
    assert_eq!(gpu_core::devices().unwrap()[0], *device);
}

#[test]
fn auto_picks_cuda_when_the_module_fits() {
    if cuda_or_skip().is_none() {
        return;
    }
    let backend = Backend::select(&[&TEST_MODULE], None).unwrap();
    assert_eq!(
        backend.kind(),
        BackendKind::Cuda,
        "{:?}",
        backend.cpu_reason()
    );
    let forced = Backend::select(&[&TEST_MODULE], Some("cuda")).unwrap();
    assert_eq!(forced.kind(), BackendKind::Cuda);
}

#[test]
fn arch_mismatch_falls_back_with_the_archs_named() {
    let Some(backend) = cuda_or_skip() else {
        return;
    };
    let arch = backend.device().unwrap().arch();
    // SASS only, for an arch of another major version than the device's.
    let other: &'static [u32] = if arch >= 100 { &[75] } else { &[120] };
    let image = Box::leak(Box::new(gpu_core::FatbinImage {
        sass: other,
        ptx: &[],
        ..TEST_MODULE
    }));
    let fallback = Backend::select(&[image], None).unwrap();
    let reason = fallback.cpu_reason().unwrap().to_string();
    assert_eq!(
        reason,
        format!("fat binary has sm_{}, device is sm_{arch}", other[0])
    );
}

#[test]
fn unknown_kernel_names_the_modules_searched() {
    #[derive(Clone, Copy)]
    #[allow(non_camel_case_types)]
    struct not_there;
    // SAFETY: `NAME` and `Params` are the test kernel's own entry point and C
    // parameter types.
    unsafe impl gpu_core::KernelDecl for not_there {
        const NAME: &'static str = "not_there";
        const HEADER: &'static str = "none.h";
        const PARAM_NAMES: &'static [&'static str] = &[];
        const PARAM_LAYOUT: &'static [(usize, usize)] = &[];
        type Params = ();
    }
    let Some(backend) = cuda_or_skip() else {
        return;
    };
    let err = backend.kernel::<not_there>().unwrap_err();
    assert!(
        matches!(&err, Error::KernelNotFound { kernel: "not_there", modules } if modules == &["gpu_core_test"])
    );
}

#[test]
fn out_of_memory_is_an_error_and_small_allocations_work_after() {
    let Some(backend) = cuda_or_skip() else {
        return;
    };
    let stream = backend.default_stream();
    let huge = backend.device().unwrap().total_memory * 4;
    let err = stream.alloc_zeros::<u8>(huge).unwrap_err();
    assert!(matches!(err, Error::OutOfMemory { .. }), "{err}");
    let small = stream.to_device(&[1u8, 2, 3]).unwrap();
    assert_eq!(stream.to_host(&small.view()).unwrap(), [1, 2, 3]);
}

#[test]
fn kiln_vector_add_from_cuda_sys_when_built() {
    let Some(_) = cuda_or_skip() else { return };
    let modules = cuda_sys::modules::ALL;
    if !modules
        .iter()
        .any(|m| m.is_built() && m.has_kernel("vector_add"))
    {
        println!(
            "skipped: this test binary was built without kiln's kernels (no toolkit at build time)"
        );
        return;
    }
    let backend = Backend::cuda(0, modules).unwrap();
    let stream = backend.default_stream();
    let kernel = backend.kernel::<cuda_sys::kernels::vector_add>().unwrap();
    let a: Vec<f32> = (0..4096).map(|i| i as f32).collect();
    let da = stream.to_device(&a).unwrap();
    let mut dc = stream.alloc_zeros::<f32>(a.len()).unwrap();
    stream
        .launch(
            &kernel,
            LaunchConfig::for_elements(4096, 256),
            (da.view(), da.view(), dc.view_mut(), 4096),
        )
        .unwrap();
    let got = stream.to_host(&dc.view()).unwrap();
    assert!(got.iter().zip(&a).all(|(c, a)| *c == 2.0 * a));
}

#[test]
fn kernels_on_two_streams_see_each_others_writes_after_a_wait() {
    let Some(backend) = cuda_or_skip() else {
        return;
    };
    let first = backend.new_stream().unwrap();
    let second = backend.new_stream().unwrap();
    let kernel = backend.kernel::<add_f32>().unwrap();
    let n = 1 << 20;
    let ones = first.to_device(&vec![1.0f32; n]).unwrap();
    let mut twos = first.alloc_zeros::<f32>(n).unwrap();
    let cfg = LaunchConfig::for_elements(n as u32, 256);
    first
        .launch(
            &kernel,
            cfg,
            (ones.view(), ones.view(), twos.view_mut(), n as u32),
        )
        .unwrap();
    let done = first.record_event().unwrap();
    second.wait(&done).unwrap();
    let mut fours = second.alloc_zeros::<f32>(n).unwrap();
    second
        .launch(
            &kernel,
            cfg,
            (twos.view(), twos.view(), fours.view_mut(), n as u32),
        )
        .unwrap();
    assert!(second
        .to_host(&fours.view())
        .unwrap()
        .iter()
        .all(|&x| x == 4.0));
    assert_eq!(second.last_launch().unwrap().kernel, "add_f32");
}

/// Prints gpu-core's launch overhead over a raw cudarc `launch_builder`
/// launch of the same function. Not a pass/fail timing: the budget (< 0.5 µs)
/// is checked by reading the output on the GPU machine.
#[test]
fn launch_overhead_against_raw_cudarc() {
    use cudarc::driver::{CudaContext, LaunchConfig as RawConfig, PushKernelArg};
    let Some(backend) = cuda_or_skip() else {
        return;
    };
    let stream = backend.default_stream();
    let kernel = backend.kernel::<add_f32>().unwrap();
    let a = stream.alloc_zeros::<f32>(256).unwrap();
    let mut c = stream.alloc_zeros::<f32>(256).unwrap();
    let cfg = LaunchConfig::for_elements(256, 256);
    const N: u32 = 20_000;
    let mut ours = || {
        let t = std::time::Instant::now();
        for _ in 0..N {
            stream
                .launch(&kernel, cfg, (a.view(), a.view(), c.view_mut(), 256))
                .unwrap();
        }
        let e = t.elapsed();
        stream.synchronize().unwrap();
        e
    };

    let ctx = CudaContext::new(0).unwrap();
    let raw_stream = ctx.default_stream();
    let module = ctx
        .load_module(cudarc::nvrtc::Ptx::from_src(common::ADD_PTX))
        .unwrap();
    let func = module.load_function("add_f32").unwrap();
    let ra = raw_stream.alloc_zeros::<f32>(256).unwrap();
    let mut rc = raw_stream.alloc_zeros::<f32>(256).unwrap();
    let n = 256u32;
    let raw_cfg = RawConfig {
        grid_dim: (1, 1, 1),
        block_dim: (256, 1, 1),
        shared_mem_bytes: 0,
    };
    let mut raw = || {
        let t = std::time::Instant::now();
        for _ in 0..N {
            let mut b = raw_stream.launch_builder(&func);
            b.arg(&ra).arg(&ra).arg(&mut rc).arg(&n);
            // SAFETY: add_f32 takes (const float*, const float*, float*, uint)
            // and all buffers hold 256 floats.
            unsafe { b.launch(raw_cfg) }.unwrap();
        }
        let e = t.elapsed();
        raw_stream.synchronize().unwrap();
        e
    };
    let (_, _) = (ours(), raw()); // warm up
    let (t_ours, t_raw) = (ours(), raw());
    let per = |d: std::time::Duration| d.as_secs_f64() * 1e6 / f64::from(N);
    println!(
        "launch: gpu-core {:.3} µs, raw cudarc {:.3} µs, overhead {:+.3} µs",
        per(t_ours),
        per(t_raw),
        per(t_ours) - per(t_raw)
    );
}
