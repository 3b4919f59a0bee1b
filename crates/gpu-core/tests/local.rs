//! Stream-local buffers (`DeviceBuffer::into_local`): launches, copies and
//! fills on their own stream give the same elements as shared buffers, at any
//! offset of a view; every use on another stream is refused before anything
//! is enqueued; work other streams enqueued before is waited for, and the free
//! waits for the buffer's stream. One body per backend present (the CPU
//! always, CUDA when a device exists; `KILN_REQUIRE_GPU=1` makes a missing GPU
//! a failure).

mod common;

use common::{add_f32, add_f32_cpu, add_f32_untyped, add_f32_untyped_cpu, backends, cuda_or_skip};
use gpu_core::{
    Arg, Args, BackendKind, DeviceBuffer, DevicePtr, DeviceViewMut, Error, LaunchConfig,
};

/// Enough elements that a kernel takes a while on a GPU, so that a missing
/// wait shows as wrong data; not a multiple of anything.
const BIG: usize = (1 << 22) + 37;

fn ramp(n: usize, offset: f32) -> Vec<f32> {
    (0..n).map(|i| i as f32 + offset).collect()
}

#[test]
fn local_buffers_launch_copy_and_fill_on_their_own_stream() {
    let n = 1000;
    let (x, y) = (ramp(n, 0.5), ramp(n, 100.0));
    let sum: Vec<f32> = x.iter().zip(&y).map(|(a, b)| a + b).collect();
    for backend in backends() {
        let kind = backend.kind();
        let stream = backend.new_stream().unwrap();
        let kernel = backend.kernel_with_cpu::<add_f32>(add_f32_cpu).unwrap();
        let a = stream.to_device(&x).unwrap().into_local(&stream).unwrap();
        let b = stream.to_device(&y).unwrap().into_local(&stream).unwrap();
        let mut c = stream
            .alloc_zeros::<f32>(n)
            .unwrap()
            .into_local(&stream)
            .unwrap();
        assert_eq!(c.is_local(), kind == BackendKind::Cuda, "{kind:?}");
        let config = LaunchConfig::for_elements(n as u32, 128);
        stream
            .launch(
                &kernel,
                config,
                (a.view(), b.view(), c.view_mut(), n as u32),
            )
            .unwrap();
        assert_eq!(stream.to_host(&c.view()).unwrap(), sum, "{kind:?}");

        // Views that start inside the buffer pass their own start: the
        // tail of `c` from 7 is written from the tails of `a` and `b` from
        // 3 and 5.
        let (m, at) = (n - 7, 7);
        stream.memset_zeros(&mut c.view_mut()).unwrap();
        let config = LaunchConfig::for_elements(m as u32, 128);
        stream
            .launch(
                &kernel,
                config,
                (
                    a.slice(3..3 + m).unwrap(),
                    b.slice(5..5 + m).unwrap(),
                    c.slice_mut(at..).unwrap(),
                    m as u32,
                ),
            )
            .unwrap();
        let got = stream.to_host(&c.view()).unwrap();
        assert!(got[..at].iter().all(|&v| v == 0.0), "{kind:?}");
        for (i, &v) in got[at..].iter().enumerate() {
            assert_eq!(v, x[3 + i] + y[5 + i], "{kind:?}: element {}", at + i);
        }

        // A fill of part of a local view zeroes that part only; a copy into
        // a sub-view lands at its offset; the other half of a split is
        // untouched.
        stream.copy_to_device(&sum, &mut c.view_mut()).unwrap();
        stream
            .memset_zeros(&mut c.slice_mut(10..20).unwrap())
            .unwrap();
        stream
            .copy_to_device(&[-1.0, -2.0], &mut c.slice_mut(30..32).unwrap())
            .unwrap();
        let (mut head, _tail) = c.split_at_mut(500).unwrap();
        stream
            .memset_zeros(&mut head.slice_mut(490..).unwrap())
            .unwrap();
        let got = stream.to_host(&c.view()).unwrap();
        for (i, (&g, &s)) in got.iter().zip(&sum).enumerate() {
            let want = match i {
                10..20 | 490..500 => 0.0,
                30 => -1.0,
                31 => -2.0,
                _ => s,
            };
            assert_eq!(g, want, "{kind:?}: element {i}");
        }
        // A device-to-device copy between two local buffers of the stream.
        let mut d = stream
            .alloc_zeros::<f32>(n)
            .unwrap()
            .into_local(&stream)
            .unwrap();
        stream.copy_device(&c.view(), &mut d.view_mut()).unwrap();
        assert_eq!(stream.to_host(&d.view()).unwrap(), got, "{kind:?}");
        // Turning a local buffer local to its own stream again keeps it.
        let d = d.into_local(&stream).unwrap();
        assert_eq!(stream.to_host(&d.view()).unwrap(), got, "{kind:?}");
        // Through `void *` parameters too: c = a + b again.
        let untyped = backend
            .kernel_with_cpu::<add_f32_untyped>(add_f32_untyped_cpu)
            .unwrap();
        let config = LaunchConfig::for_elements(n as u32, 128);
        stream
            .launch(
                &untyped,
                config,
                (
                    DevicePtr::from(&a),
                    DevicePtr::from(b.view()),
                    (&mut c).into(),
                    n as u32,
                ),
            )
            .unwrap();
        assert_eq!(stream.to_host(&c.view()).unwrap(), sum, "{kind:?}: void *");
    }
}

/// add_f32's arguments by name for `c = b + b` over `n` elements.
fn twice<'a>(b: &'a DeviceBuffer<f32>, c: DeviceViewMut<'a, f32>, n: u32) -> Args<'a> {
    // SAFETY: add_f32 takes (const float *, const float *, float *,
    // unsigned); the callers' views hold the n floats it touches.
    unsafe {
        Args::new([
            Arg::view(b.view()),
            Arg::view(b.view()),
            Arg::view_mut(c),
            Arg::value(n),
        ])
    }
}

#[test]
fn a_local_buffer_is_refused_on_any_other_stream() {
    let Some(backend) = cuda_or_skip() else {
        return;
    };
    let n = 256;
    let own = backend.new_stream().unwrap();
    let other = backend.new_stream().unwrap();
    let kernel = backend.kernel::<add_f32>().unwrap();
    let a = own
        .to_device(&ramp(n, 1.0))
        .unwrap()
        .into_local(&own)
        .unwrap();
    let b = other.to_device(&ramp(n, 2.0)).unwrap();
    let mut c = own
        .to_device(&vec![7.0f32; n])
        .unwrap()
        .into_local(&own)
        .unwrap();
    let mut shared = other.alloc_zeros::<f32>(n).unwrap();
    let config = LaunchConfig::for_elements(n as u32, 128);
    let foreign = |r: Result<(), Error>, what: &str| {
        assert!(matches!(r, Err(Error::ForeignStream)), "{what}: {r:?}");
    };
    // A launch on `other` reading a local buffer, or writing one.
    foreign(
        other.launch(
            &kernel,
            config,
            (a.view(), b.view(), shared.view_mut(), n as u32),
        ),
        "launch reading",
    );
    foreign(
        other.launch(
            &kernel,
            config,
            (b.view(), b.view(), c.view_mut(), n as u32),
        ),
        "launch writing",
    );
    // Through `void *` parameters, and by name.
    let untyped = backend.kernel::<add_f32_untyped>().unwrap();
    foreign(
        other.launch(
            &untyped,
            config,
            (
                DevicePtr::from(&a),
                DevicePtr::from(&b),
                (&mut shared).into(),
                n as u32,
            ),
        ),
        "untyped launch",
    );
    let by_name = backend.kernel_by_name("add_f32").unwrap();
    foreign(
        other.launch_by_name(&by_name, config, twice(&b, c.view_mut(), n as u32)),
        "launch by name",
    );
    // On its own stream the same launch by name runs: c = 2 b.
    own.launch_by_name(&by_name, config, twice(&b, c.view_mut(), n as u32))
        .unwrap();
    let doubled: Vec<f32> = ramp(n, 2.0).iter().map(|v| v + v).collect();
    assert_eq!(own.to_host(&c.view()).unwrap(), doubled);
    own.copy_to_device(&vec![7.0f32; n], &mut c.view_mut())
        .unwrap();
    // Copies and fills on `other`.
    foreign(other.to_host(&a.view()).map(drop), "copy to host");
    foreign(
        other.copy_to_device(&vec![0.0; n], &mut c.view_mut()),
        "copy to device",
    );
    foreign(other.memset_zeros(&mut c.view_mut()), "fill");
    foreign(
        other.copy_device(&a.view(), &mut shared.view_mut()),
        "copy from a local buffer",
    );
    foreign(
        other.copy_device(&b.view(), &mut c.view_mut()),
        "copy into a local buffer",
    );
    let mut pinned = other.alloc_pinned::<f32>(n).unwrap();
    foreign(
        other.copy_to_host_async(&a, &mut pinned).map(drop),
        "asynchronous copy to host",
    );
    foreign(
        other.copy_to_device_async(&pinned, &mut c).map(drop),
        "asynchronous copy to device",
    );
    // No raw address for host-side code on another stream; its own gets
    // the view's start.
    assert_eq!(a.view().raw_device_ptr(&other), None);
    let base = a.view().raw_device_ptr(&own).unwrap();
    assert_eq!(a.slice(5..).unwrap().raw_device_ptr(&own), Some(base + 20));
    // Moving a local buffer to another stream is refused too.
    assert!(matches!(a.into_local(&other), Err(Error::ForeignStream)));
    // Nothing reached `c` or `shared`.
    assert_eq!(own.to_host(&c.view()).unwrap(), vec![7.0; n]);
    assert_eq!(other.to_host(&shared.view()).unwrap(), vec![0.0; n]);
    // A CPU buffer cannot become local to a CUDA stream.
    let cpu = gpu_core::Backend::cpu();
    let host = cpu.default_stream().alloc_zeros::<f32>(4).unwrap();
    assert!(matches!(
        host.into_local(&own),
        Err(Error::BackendMismatch { .. })
    ));
}

#[test]
fn a_buffer_turns_local_after_other_streams_work_and_frees_after_its_own() {
    let v = ramp(BIG, 1.5);
    // `v + v` on `upload`, then that twice over on `compute`.
    let quadrupled: Vec<f32> = v.iter().map(|v| (v + v) + (v + v)).collect();
    for backend in backends() {
        let kind = backend.kind();
        let upload = backend.new_stream().unwrap();
        let compute = backend.new_stream().unwrap();
        let kernel = backend.kernel_with_cpu::<add_f32>(add_f32_cpu).unwrap();
        let config = LaunchConfig::for_elements(BIG as u32, 256);
        // Written on `upload` by a copy and a kernel still running when it
        // turns local to `compute`: the first launch there reads the sum.
        let half = upload.to_device(&v).unwrap();
        let rest = upload.to_device(&v).unwrap();
        let mut x_up = upload.alloc_zeros::<f32>(BIG).unwrap();
        upload
            .launch(
                &kernel,
                config,
                (half.view(), rest.view(), x_up.view_mut(), BIG as u32),
            )
            .unwrap();
        let x_local = x_up.into_local(&compute).unwrap();
        let mut out = compute
            .alloc_zeros::<f32>(BIG)
            .unwrap()
            .into_local(&compute)
            .unwrap();
        compute
            .launch(
                &kernel,
                config,
                (x_local.view(), x_local.view(), out.view_mut(), BIG as u32),
            )
            .unwrap();
        // Dropped while `compute` may still read it: the free (on `upload`,
        // which allocated it) waits for `compute`. Memory allocated and
        // filled on `upload` right after must not show in `out`.
        drop(x_local);
        let junk: Vec<_> = (0..4)
            .map(|_| upload.to_device(&vec![-9.0f32; BIG]).unwrap())
            .collect();
        upload.synchronize().unwrap();
        assert!(
            compute.to_host(&out.view()).unwrap() == quadrupled,
            "{kind:?}: the kernel read memory freed or overwritten under it"
        );
        drop(junk);
    }
}
