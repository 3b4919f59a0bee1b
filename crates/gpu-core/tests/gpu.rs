//! Tests that need a CUDA device; each prints `skipped: no CUDA device
//! (<reason>)` and returns when there is none (and fails instead under
//! `KILN_REQUIRE_GPU=1`).

mod common;

use common::{add_f32, cuda_or_skip, TEST_MODULE};
use gpu_core::error::ArgMismatch;
use gpu_core::{Arg, Args, Backend, BackendKind, Error, LaunchConfig};

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
    let by_name = backend.kernel_by_name("not_there").unwrap_err();
    assert!(
        matches!(
            &by_name,
            Error::KernelNotFound {
                kernel: "not_there",
                ..
            }
        ),
        "{by_name}"
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
    let Some(backend) = gpu_core::testing::cuda_backend(cuda_sys::modules::ALL) else {
        return;
    };
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

#[test]
fn launch_by_name_checks_the_arguments_before_the_gpu_sees_them() {
    let Some(backend) = cuda_or_skip() else {
        return;
    };
    // The parameter table comes from the image's cubins: any driver, and
    // no failing driver call (the bundle runs this under memcheck with API
    // reports on).
    let kernel = backend.kernel_by_name("add_f32").unwrap();
    assert_eq!(kernel.param_sizes(), [8, 8, 8, 4]);
    let stream = backend.default_stream();
    let a = stream.to_device(&[1.0f32, 2.0, 3.0, 4.0]).unwrap();
    let mut c = stream.to_device(&[-1.0f32; 4]).unwrap();
    let cfg = LaunchConfig::for_elements(4, 32);

    // add_f32 takes `const float *a, const float *b, float *c, unsigned n`.
    // SAFETY: views of f32 where it takes pointers, holding the 4 elements
    // it touches; one argument is missing, which the launch checks.
    let too_few = unsafe {
        Args::new([
            Arg::view(a.view()),
            Arg::view(a.view()),
            Arg::view_mut(c.view_mut()),
        ])
    };
    let err = stream.launch_by_name(&kernel, cfg, too_few).unwrap_err();
    assert!(
        matches!(
            err,
            Error::LaunchArgs {
                kernel: "add_f32",
                mismatch: ArgMismatch::Count {
                    expected: 4,
                    got: 3
                }
            }
        ),
        "{err}"
    );
    // SAFETY: as above; the count is a u64 where the kernel takes 4 bytes.
    let too_wide = unsafe {
        Args::new([
            Arg::view(a.view()),
            Arg::view(a.view()),
            Arg::view_mut(c.view_mut()),
            Arg::value(4u64),
        ])
    };
    let err = stream.launch_by_name(&kernel, cfg, too_wide).unwrap_err();
    assert!(
        matches!(
            err,
            Error::LaunchArgs {
                kernel: "add_f32",
                mismatch: ArgMismatch::Size {
                    index: 3,
                    expected: 4,
                    got: 8
                }
            }
        ),
        "{err}"
    );
    assert_eq!(
        stream.to_host(&c.view()).unwrap(),
        [-1.0; 4],
        "a rejected launch must not run"
    );
    assert_eq!(
        stream.last_launch(),
        None,
        "nor be named as the last launch"
    );

    // SAFETY: as above, with every size right.
    let right = unsafe {
        Args::new([
            Arg::view(a.view()),
            Arg::view(a.view()),
            Arg::view_mut(c.view_mut()),
            Arg::value(4u32),
        ])
    };
    stream.launch_by_name(&kernel, cfg, right).unwrap();
    assert_eq!(stream.to_host(&c.view()).unwrap(), [2.0, 4.0, 6.0, 8.0]);
    assert_eq!(stream.last_launch().unwrap().kernel, "add_f32");
}

#[test]
fn free_memory_is_read_in_the_devices_context() {
    let Some(backend) = cuda_or_skip() else {
        return;
    };
    let device = backend.device().unwrap();
    let info = backend.memory_info().unwrap().expect("a cuda backend");
    assert_eq!(info.total, device.total_memory as u64);
    assert!(0 < info.free && info.free <= info.total, "{info:?}");
    // By ordinal, from several threads at once (each retains the same
    // primary context): the same device, the same total.
    let ordinal = device.ordinal;
    let threads: Vec<_> = (0..4)
        .map(|_| std::thread::spawn(move || gpu_core::device_memory(ordinal)))
        .collect();
    for t in threads {
        let by_ordinal = t.join().unwrap().unwrap();
        assert_eq!(by_ordinal.total, info.total);
        assert!(by_ordinal.free <= by_ordinal.total, "{by_ordinal:?}");
    }
}
