//! Page-locked host memory and asynchronous copies (issue 40), one test body
//! run on every backend present (the CPU always, CUDA when a device exists;
//! `KILN_REQUIRE_GPU=1` makes a missing GPU a failure). Every copy is checked
//! element by element, against data the host wrote and against the
//! synchronous copies.

mod common;

use common::{add_f32, add_f32_cpu, backends, cuda_or_skip, map_read_only};
use gpu_core::{Backend, BackendKind, DeviceViewMut, Error, LaunchConfig, PinnedBuffer, Stream};

/// Enough elements that a copy takes a while on a GPU, so that a missing
/// wait shows as wrong data; not a multiple of anything.
const BIG: usize = (1 << 22) + 37;

fn ramp(n: usize, offset: f32) -> Vec<f32> {
    (0..n).map(|i| i as f32 + offset).collect()
}

fn pinned_from(stream: &Stream, values: &[f32]) -> PinnedBuffer<f32> {
    let mut pinned = stream.alloc_pinned::<f32>(values.len()).unwrap();
    pinned.as_mut_slice().unwrap().copy_from_slice(values);
    pinned
}

#[test]
fn a_pinned_round_trip_returns_every_element() {
    let values = ramp(BIG, 0.25);
    for backend in backends() {
        let kind = backend.kind();
        let stream = backend.new_stream().unwrap();
        let staging = pinned_from(&stream, &values);
        assert_eq!(staging.kind(), kind);
        assert_eq!(staging.len(), BIG);
        let mut on_device = stream.alloc_zeros::<f32>(BIG).unwrap();
        stream
            .copy_to_device_async(&staging, &mut on_device)
            .unwrap()
            .wait()
            .unwrap();
        // The synchronous path reads what the asynchronous one wrote.
        assert!(
            stream.to_host(&on_device.view()).unwrap() == values,
            "{kind:?}"
        );
        let mut back = stream.alloc_pinned::<f32>(BIG).unwrap();
        assert!(back.as_slice().unwrap().iter().all(|&v| v == 0.0));
        stream
            .copy_to_host_async(&on_device, &mut back)
            .unwrap()
            .wait()
            .unwrap();
        assert!(back.as_slice().unwrap() == values, "{kind:?}");
    }
}

#[test]
fn sub_ranges_copy_only_their_elements() {
    for backend in backends() {
        let kind = backend.kind();
        let stream = backend.default_stream();
        let staging = pinned_from(&stream, &ramp(10, 0.0));
        let mut on_device = stream.to_device(&[-1.0f32; 8]).unwrap();
        stream
            .copy_to_device_async(
                staging.slice(2..6).unwrap(),
                on_device.slice_mut(1..5).unwrap(),
            )
            .unwrap()
            .wait()
            .unwrap();
        assert_eq!(
            stream.to_host(&on_device.view()).unwrap(),
            [-1.0, 2.0, 3.0, 4.0, 5.0, -1.0, -1.0, -1.0],
            "{kind:?}"
        );

        let mut back = pinned_from(&stream, &[9.0; 6]);
        stream
            .copy_to_host_async(
                on_device.slice(2..4).unwrap(),
                back.slice_mut(3..5).unwrap(),
            )
            .unwrap()
            .wait()
            .unwrap();
        assert_eq!(
            back.as_slice().unwrap(),
            [9.0, 9.0, 9.0, 3.0, 4.0, 9.0],
            "{kind:?}"
        );

        let data = ramp(7, 100.0);
        let registered = stream.register_host(&data).unwrap();
        stream
            .copy_to_device_async(
                registered.slice(..=2).unwrap(),
                on_device.slice_mut(5..).unwrap(),
            )
            .unwrap()
            .wait()
            .unwrap();
        assert_eq!(
            stream.to_host(&on_device.view()).unwrap(),
            [-1.0, 2.0, 3.0, 4.0, 5.0, 100.0, 101.0, 102.0],
            "{kind:?}"
        );
    }
}

#[test]
fn ranges_out_of_bounds_are_errors() {
    for backend in backends() {
        let stream = backend.default_stream();
        let mut pinned = stream.alloc_pinned::<f32>(4).unwrap();
        let err = pinned.slice(2..5).unwrap_err();
        assert!(
            matches!(
                err,
                Error::OutOfBounds {
                    start: 2,
                    end: 5,
                    len: 4
                }
            ),
            "{err}"
        );
        let err = pinned.slice_mut(5..).unwrap_err();
        assert!(matches!(err, Error::OutOfBounds { .. }), "{err}");
        let data = [1u32; 3];
        let registered = stream.register_host(&data).unwrap();
        let err = registered.slice(..4).unwrap_err();
        assert!(
            matches!(err, Error::OutOfBounds { end: 4, len: 3, .. }),
            "{err}"
        );
    }
}

#[test]
fn length_mismatch_is_an_error_and_copies_nothing() {
    for backend in backends() {
        let kind = backend.kind();
        let stream = backend.default_stream();
        let staging = pinned_from(&stream, &[1.0; 4]);
        let mut on_device = stream.alloc_zeros::<f32>(3).unwrap();
        let err = stream
            .copy_to_device_async(&staging, &mut on_device)
            .unwrap_err();
        assert!(
            matches!(
                err,
                Error::LengthMismatch {
                    op: "copy to device",
                    src: 4,
                    dst: 3
                }
            ),
            "{kind:?}: {err}"
        );
        let data = [1.0f32; 2];
        let registered = stream.register_host(&data).unwrap();
        let err = stream
            .copy_to_device_async(&registered, &mut on_device)
            .unwrap_err();
        assert!(
            matches!(err, Error::LengthMismatch { src: 2, dst: 3, .. }),
            "{err}"
        );
        assert_eq!(
            stream.to_host(&on_device.view()).unwrap(),
            [0.0; 3],
            "{kind:?}"
        );

        let filled = stream.to_device(&[5.0f32; 3]).unwrap();
        let mut back = pinned_from(&stream, &[7.0; 4]);
        let err = stream.copy_to_host_async(&filled, &mut back).unwrap_err();
        assert!(
            matches!(
                err,
                Error::LengthMismatch {
                    op: "copy to host",
                    src: 3,
                    dst: 4
                }
            ),
            "{kind:?}: {err}"
        );
        stream.synchronize().unwrap();
        assert_eq!(back.as_slice().unwrap(), [7.0; 4], "{kind:?}");
    }
}

#[test]
fn a_guard_dropped_without_wait_still_leaves_correct_data() {
    let values = ramp(BIG, -3.5);
    for backend in backends() {
        let kind = backend.kind();
        let stream = backend.new_stream().unwrap();
        let staging = pinned_from(&stream, &values);
        let mut on_device = stream.alloc_zeros::<f32>(BIG).unwrap();
        let guard = stream
            .copy_to_device_async(&staging, &mut on_device)
            .unwrap();
        drop(guard);
        // The staging buffer is free again: dropped at once, and the device
        // still holds what it held.
        drop(staging);
        let mut back = stream.alloc_pinned::<f32>(BIG).unwrap();
        {
            let _guard = stream.copy_to_host_async(&on_device, &mut back).unwrap();
        }
        assert!(back.as_slice().unwrap() == values, "{kind:?}");
        stream.synchronize().unwrap();
    }
}

#[test]
fn a_leaked_guard_still_leaves_correct_data() {
    let values = ramp(BIG, 7.0);
    for backend in backends() {
        let kind = backend.kind();
        let stream = backend.new_stream().unwrap();
        let mut staging = pinned_from(&stream, &values);
        let mut on_device = stream.alloc_zeros::<f32>(BIG).unwrap();
        // `mem::forget` is safe: the borrows end, the copy may still run.
        std::mem::forget(
            stream
                .copy_to_device_async(&staging, &mut on_device)
                .unwrap(),
        );
        // Waits for the copy before it hands out the memory to overwrite.
        staging.as_mut_slice().unwrap().fill(0.0);
        let mut back = stream.alloc_pinned::<f32>(BIG).unwrap();
        std::mem::forget(stream.copy_to_host_async(&on_device, &mut back).unwrap());
        // Waits for the copy before it hands out what it wrote.
        assert!(back.as_slice().unwrap() == values, "{kind:?}");
        // Freed only after the copy it was leaked with (none left here).
        std::mem::forget(stream.copy_to_device_async(&back, &mut on_device).unwrap());
        drop(back);
        assert!(
            stream.to_host(&on_device.view()).unwrap() == values,
            "{kind:?}"
        );
    }
}

#[test]
fn a_copy_joined_to_another_stream_orders_its_kernel_and_copies() {
    let x = ramp(BIG, 1.0);
    let doubled: Vec<f32> = x.iter().map(|v| v + v).collect();
    for backend in backends() {
        let kind = backend.kind();
        let upload = backend.new_stream().unwrap();
        let compute = backend.new_stream().unwrap();
        let kernel = backend.kernel_with_cpu::<add_f32>(add_f32_cpu).unwrap();
        let mut staging = pinned_from(&upload, &x);
        let mut d_x = upload.alloc_zeros::<f32>(BIG).unwrap();
        let mut d_sum = compute.alloc_zeros::<f32>(BIG).unwrap();
        upload
            .copy_to_device_async(&staging, &mut d_x)
            .unwrap()
            .join(&compute)
            .unwrap();
        // Written at once: the buffer waits for the copy still reading it.
        staging.as_mut_slice().unwrap().fill(-1.0);
        // A kernel on `compute` after the upload on `upload`.
        let config = LaunchConfig::for_elements(BIG as u32, 256);
        compute
            .launch(
                &kernel,
                config,
                (d_x.view(), d_x.view(), d_sum.view_mut(), BIG as u32),
            )
            .unwrap();
        let mut back = compute.alloc_pinned::<f32>(BIG).unwrap();
        compute
            .copy_to_host_async(&d_sum, &mut back)
            .unwrap()
            .wait()
            .unwrap();
        assert!(
            back.as_slice().unwrap() == doubled,
            "{kind:?}: kernel after join"
        );

        // A copy on `compute` after an upload on `upload`, the upload from
        // the buffer just overwritten.
        upload
            .copy_to_device_async(&staging, &mut d_x)
            .unwrap()
            .join(&compute)
            .unwrap();
        compute
            .copy_to_host_async(&d_x, &mut back)
            .unwrap()
            .wait()
            .unwrap();
        assert!(
            back.as_slice().unwrap().iter().all(|&v| v == -1.0),
            "{kind:?}: copy after join"
        );
    }
}

/// The driver refuses memory registered twice: a typed error, and the first
/// registration still works. (A failing driver call by design: the GPU
/// bundle's sanitizer steps skip this test, `SANITIZER_SKIPS`.)
#[test]
fn registering_memory_twice_is_a_typed_error() {
    let data = ramp(BIG, 0.25);
    for backend in backends() {
        let stream = backend.default_stream();
        let registered = stream.register_host(&data).unwrap();
        if backend.kind() == BackendKind::Cuda {
            let err = stream.register_host(&data[1..]).unwrap_err();
            assert!(matches!(err, Error::HostRegister { .. }), "{err}");
        }
        let mut on_device = stream.alloc_zeros::<f32>(BIG).unwrap();
        stream
            .copy_to_device_async(&registered, &mut on_device)
            .unwrap()
            .wait()
            .unwrap();
        assert!(stream.to_host(&on_device.view()).unwrap() == data);
    }
}

#[test]
fn a_registered_vec_copies_to_the_device_and_is_unregistered_on_drop() {
    let data = ramp(BIG, 0.5);
    for backend in backends() {
        let kind = backend.kind();
        let upload = backend.new_stream().unwrap();
        let other = backend.new_stream().unwrap();
        let mut on_device = upload.alloc_zeros::<f32>(BIG).unwrap();
        let registered = upload.register_host(&data).unwrap();
        assert_eq!(registered.len(), BIG);
        if kind == BackendKind::Cpu {
            assert!(!registered.is_read_only());
        }
        upload
            .copy_to_device_async(&registered, &mut on_device)
            .unwrap()
            .join(&other)
            .unwrap();
        // The registration waits for the copy before it unregisters.
        drop(registered);
        let got = other.to_host(&on_device.view()).unwrap();
        assert!(got == data, "{kind:?}");
        upload.synchronize().unwrap();
        // Unregistered: the same memory registers again.
        let again = upload.register_host(&data).unwrap();
        let mut small = upload.alloc_zeros::<f32>(3).unwrap();
        upload
            .copy_to_device_async(again.slice(BIG - 3..).unwrap(), &mut small)
            .unwrap()
            .wait()
            .unwrap();
        assert_eq!(
            upload.to_host(&small.view()).unwrap(),
            data[BIG - 3..],
            "{kind:?}"
        );
    }
}

#[test]
fn a_file_mapped_read_only_registers_and_copies_to_the_device() {
    let bytes: Vec<u8> = (0..(1usize << 20) + 13)
        .map(|i| (i * 7 % 251) as u8)
        .collect();
    let path = std::env::temp_dir().join(format!("kiln-pinned-{}.bin", std::process::id()));
    std::fs::write(&path, &bytes).unwrap();
    let file = std::fs::File::open(&path).unwrap();
    let map = map_read_only(&file);
    for backend in backends() {
        let kind = backend.kind();
        let stream = backend.new_stream().unwrap();
        let mut on_device = stream.alloc_zeros::<u8>(bytes.len()).unwrap();
        match stream.register_host(&map[..]) {
            Ok(registered) => {
                println!(
                    "{kind:?}: registered, read-only: {}",
                    registered.is_read_only()
                );
                stream
                    .copy_to_device_async(&registered, &mut on_device)
                    .unwrap()
                    .wait()
                    .unwrap();
            }
            // A device without read-only registration cannot lock read-only
            // pages: the fallback a caller takes.
            Err(Error::HostRegister {
                read_only: false,
                source,
                ..
            }) => {
                println!("{kind:?}: read-only registration unsupported ({source}); copying from pageable memory");
                stream
                    .copy_to_device(&map, &mut on_device.view_mut())
                    .unwrap();
            }
            Err(err) => panic!("{kind:?}: {err}"),
        }
        assert!(
            stream.to_host(&on_device.view()).unwrap() == bytes,
            "{kind:?}"
        );
    }
    drop(map);
    std::fs::remove_file(&path).unwrap();
}

#[test]
fn zero_length_buffers_copy_nothing() {
    for backend in backends() {
        let kind = backend.kind();
        let stream = backend.default_stream();
        let mut empty = stream.alloc_pinned::<f32>(0).unwrap();
        assert!(empty.is_empty());
        assert_eq!(empty.as_slice().unwrap(), &[] as &[f32]);
        let mut on_device = stream.alloc_zeros::<f32>(0).unwrap();
        stream
            .copy_to_device_async(&empty, &mut on_device)
            .unwrap()
            .wait()
            .unwrap();
        stream
            .copy_to_host_async(&on_device, &mut empty)
            .unwrap()
            .wait()
            .unwrap();
        stream
            .copy_to_device_async(&empty, DeviceViewMut::null())
            .unwrap()
            .wait()
            .unwrap();
        let nothing: [f32; 0] = [];
        let registered = stream.register_host(&nothing).unwrap();
        assert!(
            registered.is_empty() && !registered.is_read_only(),
            "{kind:?}"
        );
        stream
            .copy_to_device_async(&registered, &mut on_device)
            .unwrap()
            .wait()
            .unwrap();
        // An empty range of a non-empty buffer too.
        let mut four = stream.to_device(&[3.0f32; 4]).unwrap();
        let staging = pinned_from(&stream, &[1.0; 4]);
        stream
            .copy_to_device_async(staging.slice(2..2).unwrap(), four.slice_mut(4..).unwrap())
            .unwrap()
            .wait()
            .unwrap();
        assert_eq!(stream.to_host(&four.view()).unwrap(), [3.0; 4], "{kind:?}");
    }
}

#[test]
fn host_memory_of_another_backend_is_refused() {
    let Some(cuda) = cuda_or_skip() else {
        return;
    };
    let cpu = Backend::cpu().default_stream();
    let gpu = cuda.default_stream();
    let host_pinned = cpu.alloc_pinned::<f32>(4).unwrap();
    let mut on_gpu = gpu.alloc_zeros::<f32>(4).unwrap();
    let err = gpu
        .copy_to_device_async(&host_pinned, &mut on_gpu)
        .unwrap_err();
    assert!(matches!(err, Error::BackendMismatch { .. }), "{err}");
    let mut gpu_pinned = gpu.alloc_pinned::<f32>(4).unwrap();
    let mut on_cpu = cpu.alloc_zeros::<f32>(4).unwrap();
    let err = cpu
        .copy_to_device_async(&gpu_pinned, &mut on_cpu)
        .unwrap_err();
    assert!(matches!(err, Error::BackendMismatch { .. }), "{err}");
    let err = cpu
        .copy_to_host_async(&on_cpu, &mut gpu_pinned)
        .unwrap_err();
    assert!(matches!(err, Error::BackendMismatch { .. }), "{err}");

    // Joined to a stream of another backend: refused, after waiting, so the
    // copy is complete when the buffers are free again.
    let values = ramp(BIG, 2.0);
    let staging = pinned_from(&gpu, &values);
    let mut big = gpu.alloc_zeros::<f32>(BIG).unwrap();
    let err = gpu
        .copy_to_device_async(&staging, &mut big)
        .unwrap()
        .join(&cpu)
        .unwrap_err();
    assert!(matches!(err, Error::BackendMismatch { .. }), "{err}");
    drop(staging);
    assert!(gpu.to_host(&big.view()).unwrap() == values);
}
