//! The harness of the tensor-core assignment tests: cases (points, anchors,
//! flags), both implementations run on the device, and the check of one
//! against the other and against the CPU reference.
#![allow(dead_code)]

use gpu_core::{Backend, DeviceBuffer, DeviceView, Kernel, LaunchConfig, Stream};
use gpu_core::{GpuRepr, KernelDecl};
use kiln_anneal::assign_tc::{self, Reference, TcAssign, TcJob, TcPoint, Tile};
use kiln_anneal::kernels::{anneal_assign_f16, anneal_assign_f32};
use kiln_anneal::types::{AnnealControl, KILN_ANNEAL_COUNT as COUNT};
use kiln_anneal::Points;
use kiln_anneal::Rng;

/// Relative tolerance against the SIMT kernel, of `|x|^2 + |c|^2`.
pub(crate) const SIMT_TOL: f64 = 1e-5;

#[derive(Debug, Clone)]
pub(crate) enum Values {
    F32(Vec<f32>),
    F16(Vec<u16>),
}

impl Values {
    pub(crate) fn to_f32(&self) -> Vec<f32> {
        match self {
            Values::F32(v) => Points::F32(v).to_f32(),
            Values::F16(v) => Points::F16(v).to_f32(),
        }
    }

    pub(crate) fn f16(values: &[f32]) -> Self {
        Values::F16(
            values
                .iter()
                .map(|v| half::f16::from_f32(*v).to_bits())
                .collect(),
        )
    }
}

/// One assignment to run.
#[derive(Debug, Clone)]
pub(crate) struct Case {
    pub(crate) name: String,
    pub(crate) x: Values,
    pub(crate) n: usize,
    pub(crate) d: usize,
    pub(crate) anchors: Vec<f32>,
    pub(crate) m: usize,
    pub(crate) flags: u32,
    /// Elements before the points in their device buffer: a view whose base
    /// is not 16-byte aligned takes the scalar staging path.
    pub(crate) pad: usize,
}

impl Case {
    pub(crate) fn random(name: &str, n: usize, d: usize, m: usize, seed: u64) -> Self {
        let mut rng = Rng::new(seed);
        Self {
            name: name.into(),
            x: Values::F32(rng.f32s(n * d)),
            n,
            d,
            anchors: rng.f32s(m * d),
            m,
            flags: COUNT,
            pad: 0,
        }
    }
}

/// What one implementation wrote.
#[derive(Debug)]
pub(crate) struct Output {
    pub(crate) assign: Vec<u32>,
    pub(crate) dist: Vec<f32>,
    pub(crate) counts: Vec<u32>,
    /// Points the tc kernel left to the list kernel (tc path only).
    pub(crate) unresolved: u32,
}

pub(crate) fn norms(values: &[f32], rows: usize, d: usize) -> Vec<f32> {
    (0..rows)
        .map(|i| {
            values[i * d..(i + 1) * d]
                .iter()
                .fold(0f32, |s, v| v.mul_add(*v, s))
        })
        .collect()
}

/// The case's buffers on the device, points of type `T` (none empty: a
/// zero-length allocation is not portable, so an empty input is a slice of a
/// one-element buffer).
pub(crate) struct Device<T: GpuRepr> {
    pub(crate) x: DeviceBuffer<T>,
    pub(crate) x_norms: DeviceBuffer<f32>,
    pub(crate) anchors: DeviceBuffer<f32>,
    pub(crate) anchor_norms: DeviceBuffer<f32>,
    pub(crate) assign: DeviceBuffer<u32>,
    pub(crate) dist: DeviceBuffer<f32>,
    pub(crate) counts: DeviceBuffer<u32>,
    /// Never `done`: the kernels run.
    pub(crate) control: DeviceBuffer<AnnealControl>,
}

pub(crate) fn padded<T: Copy + Default>(pad: usize, values: &[T]) -> Vec<T> {
    let mut out = vec![T::default(); pad];
    out.extend_from_slice(values);
    if out.is_empty() {
        out.push(T::default());
    }
    out
}

pub(crate) fn upload<T: GpuRepr + Default>(stream: &Stream, case: &Case, x: &[T]) -> Device<T> {
    let values = case.x.to_f32();
    Device {
        x: stream.to_device(&padded(case.pad, x)).unwrap(),
        x_norms: stream
            .to_device(&padded(0, &norms(&values, case.n, case.d)))
            .unwrap(),
        anchors: stream.to_device(&padded(0, &case.anchors)).unwrap(),
        anchor_norms: stream
            .to_device(&padded(0, &norms(&case.anchors, case.m, case.d)))
            .unwrap(),
        assign: stream.alloc_zeros(case.n.max(1)).unwrap(),
        dist: stream.alloc_zeros(case.n.max(1)).unwrap(),
        counts: stream.alloc_zeros(case.m.max(1)).unwrap(),
        control: stream.alloc_zeros(1).unwrap(),
    }
}

/// The points' view: `n x d` values after the case's padding.
pub(crate) fn points<'a, T: GpuRepr>(x: &'a DeviceBuffer<T>, case: &Case) -> DeviceView<'a, T> {
    x.slice(case.pad..case.pad + case.n * case.d).unwrap()
}

impl<T: GpuRepr> Device<T> {
    pub(crate) fn read_back(&self, stream: &Stream, case: &Case, unresolved: u32) -> Output {
        Output {
            assign: stream
                .to_host(&self.assign.slice(..case.n).unwrap())
                .unwrap(),
            dist: stream.to_host(&self.dist.slice(..case.n).unwrap()).unwrap(),
            counts: if case.m == 0 {
                Vec::new()
            } else {
                stream
                    .to_host(&self.counts.slice(..case.m).unwrap())
                    .unwrap()
            },
            unresolved,
        }
    }
}

/// `TcAssign::launch` on the case, for points of type `T`.
pub(crate) fn tc_on<T: TcPoint + Default>(
    backend: &Backend,
    stream: &Stream,
    tc: &mut TcAssign,
    case: &Case,
    x: &[T],
) -> Output {
    let mut dev = upload(stream, case, x);
    tc.prepare_points(
        stream,
        points(&dev.x, case),
        dev.x_norms.slice(..case.n).unwrap(),
        case.n as u32,
        case.d as u32,
    )
    .unwrap();
    let job = TcJob {
        x: points(&dev.x, case),
        x_norms: dev.x_norms.slice(..case.n).unwrap(),
        n: case.n as u32,
        d: case.d as u32,
        anchors: dev.anchors.slice(..case.m * case.d).unwrap(),
        anchor_norms: dev.anchor_norms.slice(..case.m).unwrap(),
        m: case.m as u32,
        flags: case.flags,
        control: dev.control.view(),
        assign: dev.assign.view_mut(),
        dist: dev.dist.view_mut(),
        counts: dev.counts.view_mut(),
    };
    tc.launch(stream, job).unwrap();
    backend.synchronize().unwrap();
    let unresolved = stream.to_host(&tc.unresolved_count().view()).unwrap()[0];
    dev.read_back(stream, case, unresolved)
}

pub(crate) fn run_tc(backend: &Backend, stream: &Stream, tc: &mut TcAssign, case: &Case) -> Output {
    match &case.x {
        Values::F32(x) => tc_on(backend, stream, tc, case, x),
        Values::F16(x) => tc_on(backend, stream, tc, case, x),
    }
}

/// Parameter tuple of `anneal_assign_f32/f16` for points of type `T`.
type SimtParams<T> = (
    *const T,
    *const f32,
    u32,
    u32,
    *const f32,
    *const f32,
    u32,
    u32,
    *const AnnealControl,
    *mut u32,
    *mut f32,
    *mut u32,
);

/// The SIMT kernel `K` on the case, launched as the GPU engine launches it.
pub(crate) fn simt_on<T, K>(backend: &Backend, stream: &Stream, case: &Case, x: &[T]) -> Output
where
    T: GpuRepr + Default,
    K: KernelDecl<Params = SimtParams<T>>,
{
    let mut dev = upload(stream, case, x);
    let kernel: Kernel<K> = backend.kernel().unwrap();
    let config = LaunchConfig {
        grid: ((case.n as u32).div_ceil(128).max(1), 1, 1),
        block: (256, 1, 1),
        shared_mem_bytes: 0,
    };
    stream
        .launch(
            &kernel,
            config,
            (
                points(&dev.x, case),
                dev.x_norms.slice(..case.n).unwrap(),
                case.n as u32,
                case.d as u32,
                dev.anchors.slice(..case.m * case.d).unwrap(),
                dev.anchor_norms.slice(..case.m).unwrap(),
                case.m as u32,
                case.flags,
                dev.control.view(),
                dev.assign.view_mut(),
                dev.dist.view_mut(),
                dev.counts.view_mut(),
            ),
        )
        .unwrap();
    backend.synchronize().unwrap();
    dev.read_back(stream, case, 0)
}

pub(crate) fn run_simt(backend: &Backend, stream: &Stream, case: &Case) -> Output {
    match &case.x {
        Values::F32(x) => simt_on::<_, anneal_assign_f32>(backend, stream, case, x),
        Values::F16(x) => simt_on::<_, anneal_assign_f16>(backend, stream, case, x),
    }
}

pub(crate) fn histogram(assign: &[u32], m: usize) -> Vec<u32> {
    let mut counts = vec![0u32; m];
    for &a in assign {
        if (a as usize) < m {
            counts[a as usize] += 1;
        }
    }
    counts
}

/// Every check of the module docs; returns the unresolved count.
#[track_caller]
pub(crate) fn check(case: &Case, tc: &Output, simt: &Output) -> u32 {
    let name = &case.name;
    let (n, d, m) = (case.n, case.d, case.m);
    let x = case.x.to_f32();
    let x_norms = norms(&x, n, d);
    let anchor_norms = norms(&case.anchors, m, d);
    let (want_assign, want_dist) =
        assign_tc::reference(&x, &x_norms, d, &case.anchors, &anchor_norms, case.flags);
    println!(
        "{name}: n {n} d {d} m {m} flags {}: {} of {n} points through the list kernel",
        case.flags, tc.unresolved
    );
    assert!(tc.unresolved as usize <= n, "{name}: unresolved count");

    // Bit for bit against the reference.
    let wrong: Vec<usize> = (0..n)
        .filter(|&i| tc.assign[i] != want_assign[i] || tc.dist[i] != want_dist[i])
        .collect();
    if let Some(&i) = wrong.first() {
        panic!(
            "{name}: {} points differ from the exact reference; first, point {i}: tc ({}, {:e}), \
             reference ({}, {:e}), SIMT ({}, {:e})",
            wrong.len(),
            tc.assign[i],
            tc.dist[i],
            want_assign[i],
            want_dist[i],
            simt.assign[i],
            simt.dist[i]
        );
    }

    // Against the SIMT kernel, up to rounding order.
    let true_dist = |i: usize, j: u32| -> f64 {
        let j = j as usize;
        x[i * d..(i + 1) * d]
            .iter()
            .zip(&case.anchors[j * d..(j + 1) * d])
            .map(|(a, c)| (f64::from(*a) - f64::from(*c)).powi(2))
            .sum()
    };
    let mut different = 0;
    for (i, xn) in x_norms.iter().enumerate() {
        let (a, b) = (tc.assign[i], simt.assign[i]);
        if a == u32::MAX || b == u32::MAX {
            assert_eq!(a, b, "{name}: point {i}: one side found no anchor");
            assert_eq!(tc.dist[i], simt.dist[i], "{name}: point {i}");
            continue;
        }
        let cn = f64::from(anchor_norms[a as usize].max(anchor_norms[b as usize]));
        let scale = f64::from(*xn) + cn + f64::from(simt.dist[i]);
        let tol = SIMT_TOL * scale.max(f64::MIN_POSITIVE);
        if a != b {
            different += 1;
            let (da, db) = (true_dist(i, a), true_dist(i, b));
            assert!(
                (da - db).abs() <= tol,
                "{name}: point {i}: tc anchor {a} ({da:e}) and SIMT anchor {b} ({db:e}) are not a \
                 near-tie (tolerance {tol:e})"
            );
        }
        let gap = (f64::from(tc.dist[i]) - f64::from(simt.dist[i])).abs();
        assert!(
            gap <= tol,
            "{name}: point {i}: dist tc {:e} SIMT {:e} (tolerance {tol:e})",
            tc.dist[i],
            simt.dist[i]
        );
    }
    if different > 0 {
        println!("{name}: {different} near-ties resolved differently from the SIMT kernel");
    }
    if case.flags & COUNT != 0 {
        assert_eq!(tc.counts, histogram(&tc.assign, m), "{name}: tc counts");
        assert_eq!(
            simt.counts,
            histogram(&simt.assign, m),
            "{name}: SIMT counts"
        );
    } else {
        assert!(
            tc.counts.iter().all(|&c| c == 0),
            "{name}: counted without COUNT"
        );
    }
    tc.unresolved
}

/// Runs `case` with each tc kernel here (mma.sync with 128 and with 64
/// anchors per tile, and the wgmma kernels, plain and chunked, where the
/// device runs them: each must give the reference's bits) and checks each;
/// the unresolved count of the 128-anchor tile. The copies are centred on
/// the points' mean, as in a run.
pub(crate) fn run_and_check(backend: &Backend, stream: &Stream, case: &Case) -> u32 {
    run_and_check_from(backend, stream, case, Reference::Mean)
}

/// [`run_and_check`] with the f16 copies taken relative to `reference`.
pub(crate) fn run_and_check_from(
    backend: &Backend,
    stream: &Stream,
    case: &Case,
    reference: Reference,
) -> u32 {
    let simt = run_simt(backend, stream, case);
    let mut unresolved = Vec::new();
    for tile in [Tile::Wide, Tile::Slim, Tile::Wgmma, Tile::WgmmaChunked] {
        let mut tc = TcAssign::new(backend, stream, case.n, case.d, case.m)
            .unwrap()
            .expect("tc_device_or_skip admitted this device");
        if matches!(tile, Tile::Wgmma | Tile::WgmmaChunked) && !tc.has_wgmma() {
            continue;
        }
        tc.set_tile(tile);
        tc.set_reference(reference);
        let got = run_tc(backend, stream, &mut tc, case);
        unresolved.push(check(case, &got, &simt));
    }
    unresolved[0]
}

/// Tight clusters of anchors far from the origin: taken relative to the
/// origin ([`Reference::Origin`]), the bound (which then scales with |x|
/// |c|) is much wider than the gaps inside a cluster, so every
/// anchor of a point's cluster is a candidate. Clusters of 2 to 6 anchors
/// (one with an exact duplicate) go through refinement; clusters of 9 to 14
/// overflow into the list kernel.
pub(crate) fn clustered(sizes: &[usize], n: usize, d: usize, seed: u64) -> Case {
    let mut rng = Rng::new(seed);
    let centers: Vec<Vec<f32>> = sizes
        .iter()
        .map(|_| (0..d).map(|_| 3.0 + rng.next_f32()).collect())
        .collect();
    let mut anchors = Vec::new();
    for (c, &size) in sizes.iter().enumerate() {
        for a in 0..size {
            if c == 0 && a == 1 {
                // An exact twin of the cluster's first anchor: a true tie.
                let first = anchors.len() - d;
                anchors.extend_from_within(first..first + d);
            } else {
                anchors.extend(centers[c].iter().map(|v| v + 0.05 * rng.next_f32()));
            }
        }
    }
    let mut x = Vec::with_capacity(n * d);
    for _ in 0..n {
        let c = (rng.next_u64() % sizes.len() as u64) as usize;
        x.extend(centers[c].iter().map(|v| v + 0.05 * rng.next_f32()));
    }
    let m = anchors.len() / d;
    Case {
        name: format!("clustered {sizes:?}"),
        x: Values::F32(x),
        n,
        d,
        anchors,
        m,
        flags: COUNT,
        pad: 0,
    }
}
