//! One test body per feature, run on every backend present (the CPU always,
//! CUDA when a device exists); the CPU result is the oracle.

mod common;

use common::{add_f32, add_f32_cpu, add_f32_untyped, add_f32_untyped_cpu, backends};
use gpu_core::error::LaunchLimit;
use gpu_core::{
    Backend, BackendKind, CpuReason, DevicePtr, DevicePtrMut, DeviceView, DeviceViewMut, Error,
    LaunchConfig,
};

#[test]
fn vector_add_matches_the_cpu_oracle() {
    let n = 1000usize;
    let a: Vec<f32> = (0..n).map(|i| i as f32).collect();
    let b: Vec<f32> = (0..n).map(|i| 2.0 * i as f32 + 0.5).collect();
    let expected: Vec<f32> = a.iter().zip(&b).map(|(x, y)| x + y).collect();
    for backend in backends() {
        let stream = backend.default_stream();
        let kernel = backend.kernel_with_cpu::<add_f32>(add_f32_cpu).unwrap();
        let da = stream.to_device(&a).unwrap();
        let db = stream.to_device(&b).unwrap();
        let mut dc = stream.alloc_zeros::<f32>(n).unwrap();
        let config = LaunchConfig::for_elements(n as u32, 128);
        stream
            .launch(
                &kernel,
                config,
                (da.view(), db.view(), dc.view_mut(), n as u32),
            )
            .unwrap();
        stream.synchronize().unwrap();
        assert_eq!(
            stream.to_host(&dc.view()).unwrap(),
            expected,
            "{:?}",
            backend.kind()
        );
    }
}

/// A kernel whose C parameters are `const void *` / `void *` (codegen's
/// `ConstVoidPtr` / `MutVoidPtr`, issue 42) launches typed: any view
/// converts into the untyped pointer, and the result matches the CPU.
#[test]
fn void_pointer_kernels_launch_with_any_view() {
    let n = 300usize;
    let a: Vec<f32> = (0..n).map(|i| i as f32 * 0.25).collect();
    let b: Vec<f32> = (0..n).map(|i| 3.0 - i as f32).collect();
    let expected: Vec<f32> = a.iter().zip(&b).map(|(x, y)| x + y).collect();
    for backend in backends() {
        let stream = backend.default_stream();
        let kernel = backend
            .kernel_with_cpu::<add_f32_untyped>(add_f32_untyped_cpu)
            .unwrap();
        let da = stream.to_device(&a).unwrap();
        let db = stream.to_device(&b).unwrap();
        let mut dc = stream.alloc_zeros::<f32>(n).unwrap();
        let (pa, pb) = (DevicePtr::from(&da), DevicePtr::from(db.view()));
        assert_eq!(pa.byte_len(), 4 * n);
        let config = LaunchConfig::for_elements(n as u32, 128);
        stream
            .launch(&kernel, config, (pa, pb, (&mut dc).into(), n as u32))
            .unwrap();
        stream.synchronize().unwrap();
        assert_eq!(
            stream.to_host(&dc.view()).unwrap(),
            expected,
            "{:?}",
            backend.kind()
        );
    }
}

#[test]
fn untyped_pointers_are_null_or_their_views_bytes() {
    assert!(DevicePtr::null().is_null() && DevicePtr::null().byte_len() == 0);
    assert!(DevicePtrMut::null().is_null());
    let backend = Backend::cpu();
    let stream = backend.default_stream();
    let kernel = backend
        .kernel_with_cpu::<add_f32_untyped>(|_, (a, b, mut c, n)| {
            // A null pointer is empty as any type; a view reads back only
            // as its own element type.
            assert!(a.is_null() && a.get::<u64>() == Some(&[][..]));
            assert!(!b.is_null() && b.get::<u32>().is_none());
            assert_eq!(b.get::<f32>().unwrap().len(), n as usize);
            assert!(c.get_mut::<i32>().is_none());
            c.get_mut::<f32>().unwrap()[0] = 7.0;
        })
        .unwrap();
    let b = stream.to_device(&[1.0f32, 2.0]).unwrap();
    let mut c = stream.alloc_zeros::<f32>(2).unwrap();
    let c_ptr = DevicePtrMut::from(c.view_mut());
    assert_eq!(c_ptr.byte_len(), 8);
    stream
        .launch(
            &kernel,
            LaunchConfig::for_elements(2, 32),
            (DevicePtr::null(), (&b).into(), c_ptr, 2),
        )
        .unwrap();
    assert_eq!(stream.to_host(&c.view()).unwrap(), [7.0, 0.0]);
}

/// `bool` and fp8 parameters by value (issue 42): a launch takes them as
/// the kernel's C types, and a CPU body gets them back.
#[test]
fn bool_and_fp8_parameters_pass_by_value() {
    #[allow(non_camel_case_types)]
    #[derive(Debug, Clone, Copy)]
    struct flag_fp8;
    // SAFETY: only launched on the CPU backend, by the body below.
    unsafe impl gpu_core::KernelDecl for flag_fp8 {
        const NAME: &'static str = "flag_fp8";
        const HEADER: &'static str = "tests/backends.rs";
        const PARAM_NAMES: &'static [&'static str] = &["on", "v", "out"];
        const PARAM_LAYOUT: &'static [(usize, usize)] = &[(1, 1), (1, 1), (8, 8)];
        type Params = (bool, gpu_core::Fp8E4M3, *mut gpu_core::Fp8E4M3);
    }
    let backend = Backend::cpu();
    let stream = backend.default_stream();
    let kernel = backend
        .kernel_with_cpu::<flag_fp8>(|_, (on, v, out)| {
            out[0] = if on { v } else { gpu_core::Fp8E4M3(0) };
        })
        .unwrap();
    let mut out = stream.alloc_zeros::<gpu_core::Fp8E4M3>(1).unwrap();
    for (on, want) in [(true, 0x38), (false, 0)] {
        let args = (on, gpu_core::Fp8E4M3(0x38), out.view_mut());
        stream
            .launch(&kernel, LaunchConfig::for_elements(1, 32), args)
            .unwrap();
        assert_eq!(
            stream.to_host(&out.view()).unwrap(),
            [gpu_core::Fp8E4M3(want)]
        );
    }
}

#[test]
fn launch_on_sub_views_touches_only_the_range() {
    for backend in backends() {
        let stream = backend.default_stream();
        let kernel = backend.kernel_with_cpu::<add_f32>(add_f32_cpu).unwrap();
        let ones = stream.to_device(&[1.0f32; 8]).unwrap();
        let mut out = stream.to_device(&[-1.0f32; 8]).unwrap();
        let config = LaunchConfig::for_elements(4, 32);
        let a = ones.slice(0..4).unwrap();
        let b = ones.slice(4..8).unwrap();
        stream
            .launch(&kernel, config, (a, b, out.slice_mut(2..6).unwrap(), 4))
            .unwrap();
        let got = stream.to_host(&out.view()).unwrap();
        assert_eq!(
            got,
            [-1.0, -1.0, 2.0, 2.0, 2.0, 2.0, -1.0, -1.0],
            "{:?}",
            backend.kind()
        );
    }
}

#[test]
fn bad_launch_configs_are_errors_not_faults() {
    for backend in backends() {
        let stream = backend.default_stream();
        let kernel = backend.kernel_with_cpu::<add_f32>(add_f32_cpu).unwrap();
        let a = stream.alloc_zeros::<f32>(4).unwrap();
        let mut c = stream.alloc_zeros::<f32>(4).unwrap();
        let mut launch =
            |config| stream.launch(&kernel, config, (a.view(), a.view(), c.view_mut(), 4));
        let too_wide = LaunchConfig {
            grid: (1, 1, 1),
            block: (2048, 1, 1),
            shared_mem_bytes: 0,
        };
        assert!(matches!(
            launch(too_wide),
            Err(Error::InvalidLaunch {
                kernel: "add_f32",
                limit: LaunchLimit::BlockDim {
                    axis: 0,
                    requested: 2048,
                    ..
                }
            })
        ));
        let too_many = LaunchConfig {
            grid: (1, 1, 1),
            block: (32, 32, 2),
            shared_mem_bytes: 0,
        };
        assert!(matches!(
            launch(too_many),
            Err(Error::InvalidLaunch {
                limit: LaunchLimit::ThreadsPerBlock {
                    requested: 2048,
                    ..
                },
                ..
            })
        ));
        let zero = LaunchConfig {
            grid: (0, 1, 1),
            block: (32, 1, 1),
            shared_mem_bytes: 0,
        };
        assert!(matches!(
            launch(zero),
            Err(Error::InvalidLaunch {
                limit: LaunchLimit::ZeroDimension,
                ..
            })
        ));
        let smem = LaunchConfig {
            grid: (1, 1, 1),
            block: (32, 1, 1),
            shared_mem_bytes: 16 << 20,
        };
        assert!(matches!(
            launch(smem),
            Err(Error::InvalidLaunch {
                limit: LaunchLimit::SharedMemory { .. },
                ..
            })
        ));
        let grid_y = LaunchConfig {
            grid: (1, 1 << 20, 1),
            block: (32, 1, 1),
            shared_mem_bytes: 0,
        };
        assert!(matches!(
            launch(grid_y),
            Err(Error::InvalidLaunch {
                limit: LaunchLimit::GridDim { axis: 1, .. },
                ..
            })
        ));
        // A valid one still works afterwards.
        launch(LaunchConfig::for_elements(4, 32)).unwrap();
    }
}

#[test]
fn copies_check_lengths_and_copy_nothing_on_mismatch() {
    for backend in backends() {
        let stream = backend.default_stream();
        let mut buf = stream.to_device(&[7u32; 4]).unwrap();
        let err = stream
            .copy_to_device(&[1u32; 3], &mut buf.view_mut())
            .unwrap_err();
        assert!(matches!(err, Error::LengthMismatch { src: 3, dst: 4, .. }));
        let mut short = [0u32; 5];
        assert!(matches!(
            stream.copy_to_host(&buf.view(), &mut short),
            Err(Error::LengthMismatch { src: 4, dst: 5, .. })
        ));
        assert_eq!(short, [0; 5]);
        assert_eq!(stream.to_host(&buf.view()).unwrap(), [7; 4]);
    }
}

#[test]
fn views_are_bounds_checked() {
    for backend in backends() {
        let stream = backend.default_stream();
        let mut buf = stream.to_device(&[1u16, 2, 3, 4, 5]).unwrap();
        assert!(matches!(
            buf.slice(2..6),
            Err(Error::OutOfBounds {
                start: 2,
                end: 6,
                len: 5
            })
        ));
        assert!(matches!(buf.slice_mut(6..), Err(Error::OutOfBounds { .. })));
        let view = buf.slice(1..4).unwrap();
        assert_eq!(stream.to_host(&view.slice(1..).unwrap()).unwrap(), [3, 4]);
        assert!(view.slice(0..4).is_err());
        let mut tail = buf.slice_mut(3..).unwrap();
        stream.copy_to_device(&[9, 9], &mut tail).unwrap();
        assert_eq!(stream.to_host(&buf.view()).unwrap(), [1, 2, 3, 9, 9]);
    }
}

#[test]
fn split_halves_go_to_one_launch_and_touch_only_their_range() {
    for backend in backends() {
        let stream = backend.default_stream();
        let kernel = backend.kernel_with_cpu::<add_f32>(add_f32_cpu).unwrap();
        let ones = stream.to_device(&[1.0f32; 6]).unwrap();
        let mut out = stream.to_device(&[-1.0f32; 6]).unwrap();
        assert!(matches!(
            out.split_at_mut(7),
            Err(Error::OutOfBounds { start: 7, .. })
        ));
        // The head is the output, the tail an input of the same launch.
        let mut pair = stream
            .to_device(&[5.0f32, 5.0, 5.0, 0.5, 0.25, 0.125])
            .unwrap();
        let (head, mut tail) = pair.split_at_mut(3).unwrap();
        assert_eq!((head.len(), tail.len()), (3, 3));
        stream
            .launch(
                &kernel,
                LaunchConfig::for_elements(3, 32),
                (ones.slice(0..3).unwrap(), tail.as_view(), head, 3),
            )
            .unwrap();
        stream.copy_to_device(&[7.0, 7.0, 7.0], &mut tail).unwrap();
        let got = stream.to_host(&pair.view()).unwrap();
        assert_eq!(
            got,
            [1.5, 1.25, 1.125, 7.0, 7.0, 7.0],
            "{:?}",
            backend.kind()
        );
        let (empty, all) = out.split_at_mut(0).unwrap();
        assert_eq!((empty.len(), all.len()), (0, 6));
    }
}

#[test]
fn zero_length_buffers_work() {
    for backend in backends() {
        let stream = backend.default_stream();
        let empty = stream.to_device::<f32>(&[]).unwrap();
        assert!(empty.is_empty());
        assert_eq!(stream.to_host(&empty.view()).unwrap(), Vec::<f32>::new());
        let kernel = backend.kernel_with_cpu::<add_f32>(add_f32_cpu).unwrap();
        let mut out = stream.alloc_zeros::<f32>(0).unwrap();
        stream
            .launch(
                &kernel,
                LaunchConfig::for_elements(0, 32),
                (empty.view(), empty.view(), out.view_mut(), 0),
            )
            .unwrap();
        stream.synchronize().unwrap();
    }
}

#[test]
fn null_views_are_empty_views_with_a_null_address() {
    for backend in backends() {
        let stream = backend.default_stream();
        let kind = backend.kind();
        let null = DeviceView::<f32>::null();
        assert!(null.is_null() && null.is_empty(), "{kind:?}");
        assert!(null.slice(..).unwrap().is_null());
        assert!(matches!(
            null.slice(0..1).unwrap_err(),
            Error::OutOfBounds { len: 0, .. }
        ));
        let mut null_mut = DeviceViewMut::<f32>::null();
        assert!(null_mut.is_null() && null_mut.as_view().is_null());
        assert!(null_mut.reborrow().is_null());
        // Copies to and from a null view copy nothing; lengths still count.
        assert_eq!(stream.to_host(&null).unwrap(), Vec::<f32>::new());
        stream.copy_to_device(&[], &mut null_mut).unwrap();
        let err = stream.copy_to_device(&[1.0f32], &mut null_mut).unwrap_err();
        assert!(matches!(err, Error::LengthMismatch { .. }), "{err}");
        stream.memset_zeros(&mut null_mut).unwrap();
        stream.copy_device(&null, &mut null_mut).unwrap();
        let buffer = stream.to_device(&[1.0f32]).unwrap();
        let err = stream
            .copy_device(&buffer.view(), &mut null_mut)
            .unwrap_err();
        assert!(matches!(err, Error::LengthMismatch { .. }), "{err}");
        // The address host code would get: 0 on CUDA, none on the CPU.
        let want = match kind {
            BackendKind::Cuda => Some(0),
            _ => None,
        };
        assert_eq!(null.raw_device_ptr(&stream), want, "{kind:?}");
        assert_eq!(null_mut.raw_device_ptr(&stream), want, "{kind:?}");
        // A typed launch takes them where a view goes; the CPU body gets
        // empty slices.
        let kernel = backend.kernel_with_cpu::<add_f32>(add_f32_cpu).unwrap();
        stream
            .launch(
                &kernel,
                LaunchConfig::for_elements(0, 32),
                (DeviceView::null(), null.clone(), DeviceViewMut::null(), 0),
            )
            .unwrap();
        stream.synchronize().unwrap();
    }
}

#[test]
fn size_overflow_is_an_error() {
    for backend in backends() {
        let stream = backend.default_stream();
        let err = stream.alloc_zeros::<u64>(usize::MAX / 2).unwrap_err();
        assert!(
            matches!(err, Error::SizeOverflow { elem_size: 8, .. }),
            "{err}"
        );
    }
}

#[test]
fn events_time_work() {
    // Enough work between events that each interval is well above the
    // resolution of either clock (an event's is about half a microsecond).
    let data = vec![7u8; 16 << 20];
    for backend in backends() {
        let stream = backend.default_stream();
        let start = stream.record_event().unwrap();
        let first = stream.to_device(&data).unwrap();
        let middle = stream.record_event().unwrap();
        let second = stream.to_device(&data).unwrap();
        let end = stream.record_event().unwrap();
        end.synchronize().unwrap();
        let total = start.elapsed_ms(&end).unwrap();
        let (a, b) = (
            start.elapsed_ms(&middle).unwrap(),
            middle.elapsed_ms(&end).unwrap(),
        );
        println!("{:?}: {a} + {b} = {total} ms", backend.kind());
        assert!(a > 0.0 && b > 0.0, "{:?}: {a}, {b}", backend.kind());
        // Intervals add up: the middle event lies between the others.
        let slack = 1e-3 * total + 2e-3;
        assert!((a + b - total).abs() <= slack, "{a} + {b} != {total}");
        // Waiting on an event orders another stream after the work before it.
        let other = backend.new_stream().unwrap();
        other.wait(&end).unwrap();
        assert_eq!(other.to_host(&second.slice(..4).unwrap()).unwrap(), [7; 4]);
        drop(first);
    }
}

#[test]
fn launching_by_name_needs_cuda() {
    let err = Backend::cpu().kernel_by_name("add_f32").unwrap_err();
    assert!(
        matches!(&err, Error::ByNameNeedsCuda { kernel } if kernel == "add_f32"),
        "{err}"
    );
    assert!(err.to_string().contains("needs the cuda backend"), "{err}");
}

#[test]
fn mixing_backends_is_an_error() {
    let cpu = Backend::cpu();
    let host_buf = cpu.default_stream().to_device(&[1.0f32]).unwrap();
    assert_eq!(host_buf.kind(), BackendKind::Cpu);
    if let Some(cuda) = common::cuda_or_skip() {
        let stream = cuda.default_stream();
        assert!(matches!(
            stream.to_host(&host_buf.view()),
            Err(Error::BackendMismatch { .. })
        ));
        let cpu_kernel = cpu.kernel_with_cpu::<add_f32>(add_f32_cpu).unwrap();
        let dev = stream.alloc_zeros::<f32>(1).unwrap();
        let mut out = stream.alloc_zeros::<f32>(1).unwrap();
        let r = stream.launch(
            &cpu_kernel,
            LaunchConfig::for_elements(1, 32),
            (dev.view(), dev.view(), out.view_mut(), 1),
        );
        assert!(matches!(r, Err(Error::BackendMismatch { .. })));
    }
}

#[test]
fn cpu_backend_without_cpu_body_says_how_to_fix() {
    let err = Backend::cpu().kernel::<add_f32>().unwrap_err();
    assert!(matches!(err, Error::NoCpuKernel { kernel: "add_f32" }));
    assert!(err.to_string().contains("kernel_with_cpu"));
}

#[test]
fn no_driver_gives_cpu_with_reason() {
    if gpu_core::driver_present() {
        // The converse: with a driver, "no driver" is never the reason.
        let backend = Backend::select(&[&common::TEST_MODULE], None).unwrap();
        assert!(
            !matches!(backend.cpu_reason(), Some(CpuReason::NoDriver)),
            "{:?}",
            backend.cpu_reason()
        );
        return;
    }
    let backend = Backend::select(&[&common::TEST_MODULE], None).unwrap();
    assert_eq!(backend.kind(), BackendKind::Cpu);
    assert!(matches!(backend.cpu_reason(), Some(CpuReason::NoDriver)));
    assert_eq!(backend.cpu_reason().unwrap().to_string(), "no driver");
    assert!(matches!(
        gpu_core::devices(),
        Err(Error::CudaUnavailable {
            reason: CpuReason::NoDriver
        })
    ));
    // Forcing CUDA where it cannot run is an error, not a fallback.
    let forced = Backend::select(&[&common::TEST_MODULE], Some("cuda")).unwrap_err();
    assert!(matches!(
        forced,
        Error::CudaUnavailable {
            reason: CpuReason::NoDriver
        }
    ));
    assert!(forced
        .to_string()
        .starts_with("cuda backend requested but it cannot run: no driver"));
}

#[test]
fn backend_env_values() {
    let cpu = Backend::select(&[], Some("cpu")).unwrap();
    assert!(matches!(cpu.cpu_reason(), Some(CpuReason::Forced)));
    let err = Backend::select(&[], Some("tpu")).unwrap_err();
    assert_eq!(
        err.to_string(),
        "KILN_BACKEND is `tpu`; set it to `cpu`, `cuda` or leave it unset"
    );
}

/// `select_on` probes the device it is given, never device 0 instead: a
/// device that is not there (here or on any GPU host) is CUDA unavailable,
/// the CPU under `auto`, an error under `cuda`.
#[test]
fn select_on_probes_only_the_device_it_is_given() {
    let absent = 1 << 20;
    let cpu = Backend::select_on(absent, &[], Some("cpu")).unwrap();
    assert!(matches!(cpu.cpu_reason(), Some(CpuReason::Forced)));
    let auto = Backend::select_on(absent, &[&common::TEST_MODULE], None).unwrap();
    assert!(auto.cpu_reason().is_some(), "device {absent} is not there");
    let err = Backend::select_on(absent, &[&common::TEST_MODULE], Some("cuda")).unwrap_err();
    assert!(
        matches!(err, gpu_core::Error::CudaUnavailable { .. }),
        "{err}"
    );
    let err = Backend::select_on(0, &[], Some("tpu")).unwrap_err();
    assert!(
        err.to_string().starts_with("KILN_BACKEND is `tpu`"),
        "{err}"
    );
}

#[test]
fn unbuilt_modules_mean_no_toolkit_at_build_time() {
    // Without a device the reason would be the driver or device, not the build.
    if common::cuda_or_skip().is_none() {
        return;
    }
    let unbuilt = Box::leak(Box::new(gpu_core::FatbinImage {
        image: b"",
        ..common::TEST_MODULE
    }));
    let backend = Backend::select(&[unbuilt], None).unwrap();
    assert!(matches!(backend.cpu_reason(), Some(CpuReason::NoGpuCode)));
    assert_eq!(
        backend.cpu_reason().unwrap().to_string(),
        "no toolkit at build time"
    );
}

#[test]
fn the_cpu_backend_has_no_device_memory() {
    assert_eq!(Backend::cpu().memory_info().unwrap(), None);
}

#[test]
fn device_memory_of_a_device_that_is_not_there_is_an_error() {
    // No driver here, or a driver with fewer devices: either way the reason,
    // never a panic from cudarc's loader and never a figure.
    for ordinal in [usize::MAX, 1 << 20] {
        match gpu_core::device_memory(ordinal) {
            Err(Error::CudaUnavailable {
                reason: CpuReason::NoDriver | CpuReason::NoDevice,
            }) => {}
            other => panic!("device {ordinal}: {other:?}"),
        }
    }
    if !gpu_core::driver_present() {
        let err = gpu_core::device_memory(0).unwrap_err();
        assert!(
            matches!(
                err,
                Error::CudaUnavailable {
                    reason: CpuReason::NoDriver
                }
            ),
            "{err}"
        );
    }
}
