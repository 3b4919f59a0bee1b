//! The tensor-core assignment (`TcAssign`: `anneal_assign_tc_*` then
//! `anneal_assign_list_*`) on the GPU, checked two ways for every point:
//! - bit for bit against its CPU reference (`assign_tc::reference`: the least
//!   exact f32 distance, in the kernels' own summation order, lowest index on
//!   ties): a candidate the error bound wrongly dropped shows up here;
//! - against the SIMT kernel `anneal_assign_f32/f16`: the same anchor, or one
//!   whose true (f64) distance differs by at most 1e-5 of the formula's scale
//!   `|x|^2 + |c|^2` (rounding-order near-ties; cancellation makes a plain
//!   relative test on a near-zero distance meaningless); dist within the
//!   same; counts equal to the histogram of assign.
//!
//! Skips, saying why, without a CUDA device of sm_80 or newer.

use apps::anneal::assign_tc::{self, TcAssign, TcJob, TcPoint};
use apps::anneal::Points;
use apps::Rng;
use cuda_sys::kernels::{anneal_assign_f16, anneal_assign_f32, anneal_assign_list_f32};
use cuda_sys::types::{
    AnnealControl, KILN_ANNEAL_COUNT as COUNT, KILN_ANNEAL_EXCLUDE_SELF as EXCLUDE_SELF,
    KILN_ANNEAL_LIST_THREADS,
};
use cuda_sys::{GpuRepr, KernelDecl};
use gpu_core::{Backend, DeviceBuffer, DeviceView, Kernel, LaunchConfig, Stream};

/// Relative tolerance against the SIMT kernel, of `|x|^2 + |c|^2`.
const SIMT_TOL: f64 = 1e-5;

fn tc_device_or_skip() -> Option<Backend> {
    let backend = gpu_core::testing::cuda_backend(cuda_sys::modules::ALL)?;
    let arch = backend.device().map_or(0, |d| d.arch());
    let env = std::env::var(assign_tc::ENV).ok();
    if !assign_tc::tc_wanted(arch, env.as_deref()) {
        println!(
            "skipped: the tensor-core path is off here (sm_{arch}, {}={env:?})",
            assign_tc::ENV
        );
        return None;
    }
    Some(backend)
}

#[derive(Debug, Clone)]
enum Values {
    F32(Vec<f32>),
    F16(Vec<u16>),
}

impl Values {
    fn to_f32(&self) -> Vec<f32> {
        match self {
            Values::F32(v) => Points::F32(v).to_f32(),
            Values::F16(v) => Points::F16(v).to_f32(),
        }
    }

    fn f16(values: &[f32]) -> Self {
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
struct Case {
    name: String,
    x: Values,
    n: usize,
    d: usize,
    anchors: Vec<f32>,
    m: usize,
    flags: u32,
    /// Elements before the points in their device buffer: a view whose base
    /// is not 16-byte aligned takes the scalar staging path.
    pad: usize,
}

impl Case {
    fn random(name: &str, n: usize, d: usize, m: usize, seed: u64) -> Self {
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
struct Output {
    assign: Vec<u32>,
    dist: Vec<f32>,
    counts: Vec<u32>,
    /// Points the tc kernel left to the list kernel (tc path only).
    unresolved: u32,
}

fn norms(values: &[f32], rows: usize, d: usize) -> Vec<f32> {
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
struct Device<T: GpuRepr> {
    x: DeviceBuffer<T>,
    x_norms: DeviceBuffer<f32>,
    anchors: DeviceBuffer<f32>,
    anchor_norms: DeviceBuffer<f32>,
    assign: DeviceBuffer<u32>,
    dist: DeviceBuffer<f32>,
    counts: DeviceBuffer<u32>,
    /// Never `done`: the kernels run.
    control: DeviceBuffer<AnnealControl>,
}

fn padded<T: Copy + Default>(pad: usize, values: &[T]) -> Vec<T> {
    let mut out = vec![T::default(); pad];
    out.extend_from_slice(values);
    if out.is_empty() {
        out.push(T::default());
    }
    out
}

fn upload<T: GpuRepr + Default>(stream: &Stream, case: &Case, x: &[T]) -> Device<T> {
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
fn points<'a, T: GpuRepr>(x: &'a DeviceBuffer<T>, case: &Case) -> DeviceView<'a, T> {
    x.slice(case.pad..case.pad + case.n * case.d).unwrap()
}

impl<T: GpuRepr> Device<T> {
    fn read_back(&self, stream: &Stream, case: &Case, unresolved: u32) -> Output {
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
fn tc_on<T: TcPoint + Default>(
    backend: &Backend,
    stream: &Stream,
    tc: &mut TcAssign,
    case: &Case,
    x: &[T],
) -> Output {
    let mut dev = upload(stream, case, x);
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

fn run_tc(backend: &Backend, stream: &Stream, tc: &mut TcAssign, case: &Case) -> Output {
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
fn simt_on<T, K>(backend: &Backend, stream: &Stream, case: &Case, x: &[T]) -> Output
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

fn run_simt(backend: &Backend, stream: &Stream, case: &Case) -> Output {
    match &case.x {
        Values::F32(x) => simt_on::<_, anneal_assign_f32>(backend, stream, case, x),
        Values::F16(x) => simt_on::<_, anneal_assign_f16>(backend, stream, case, x),
    }
}

fn histogram(assign: &[u32], m: usize) -> Vec<u32> {
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
fn check(case: &Case, tc: &Output, simt: &Output) -> u32 {
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

fn run_and_check(backend: &Backend, stream: &Stream, case: &Case) -> u32 {
    let mut tc = TcAssign::new(backend, stream, case.n)
        .unwrap()
        .expect("tc_device_or_skip admitted this device");
    let got = run_tc(backend, stream, &mut tc, case);
    let simt = run_simt(backend, stream, case);
    check(case, &got, &simt)
}

#[test]
fn tc_matches_reference_and_simt_on_awkward_shapes() {
    let Some(backend) = tc_device_or_skip() else {
        return;
    };
    let stream = backend.default_stream();
    let mut cases = vec![
        Case::random("one point", 1, 5, 3, 1),
        Case::random("d 3 m 7", 1000, 3, 7, 2),
        Case::random("d 130 m 257", 777, 130, 257, 3),
        Case::random("d 128 m 256", 10_000, 128, 256, 4),
        Case::random("d 33 m 1", 300, 33, 1, 5),
        Case::random("d 64 m 129, n off the tile", 4097, 64, 129, 6),
    ];
    let mut no_count = Case::random("no COUNT", 513, 40, 70, 7);
    no_count.flags = 0;
    cases.push(no_count);
    let mut misaligned = Case::random("misaligned view, d 128", 1000, 128, 100, 8);
    misaligned.pad = 1;
    cases.push(misaligned);
    let mut no_anchor = Case::random("m 0", 50, 16, 0, 9);
    no_anchor.anchors.clear();
    cases.push(no_anchor);
    for case in &cases {
        run_and_check(&backend, &stream, case);
    }
}

#[test]
fn tc_keeps_f16_points() {
    let Some(backend) = tc_device_or_skip() else {
        return;
    };
    let stream = backend.default_stream();
    for (name, n, d, m, pad) in [
        ("f16 d 48", 3001, 48, 100, 0),
        ("f16 d 37 (scalar loads)", 1000, 37, 65, 0),
        ("f16 misaligned view", 700, 64, 90, 2),
    ] {
        let mut rng = Rng::new(n as u64);
        let values = apps::anneal::synthetic_points(n, d, 8, 0.25, n as u64);
        let case = Case {
            name: name.into(),
            x: Values::f16(&values),
            n,
            d,
            anchors: rng.f32s(m * d),
            m,
            flags: COUNT,
            pad,
        };
        run_and_check(&backend, &stream, &case);
    }
}

#[test]
fn tc_excludes_self_among_anchors() {
    let Some(backend) = tc_device_or_skip() else {
        return;
    };
    let stream = backend.default_stream();
    // Anchor-to-anchor neighbours, as the engine asks for them; some anchors
    // duplicated, so that a point's twin is at distance 0 and ties occur.
    let (m, d) = (500, 64);
    let mut anchors = apps::anneal::synthetic_points(m, d, 20, 0.1, 10);
    for j in (0..m).step_by(7).skip(1) {
        let (src, dst) = ((j - 1) * d, j * d);
        anchors.copy_within(src..src + d, dst);
    }
    for flags in [EXCLUDE_SELF, EXCLUDE_SELF | COUNT] {
        let case = Case {
            name: format!("anchors as points, flags {flags}"),
            x: Values::F32(anchors.clone()),
            n: m,
            d,
            anchors: anchors.clone(),
            m,
            flags,
            pad: 0,
        };
        run_and_check(&backend, &stream, &case);
    }
    // Unclustered anchors: most points resolve in the tc kernel itself
    // (tight clusters like the above mostly overflow into the list kernel).
    let mut spread = Case::random("random anchors as points", 300, 32, 300, 11);
    spread.x = Values::F32(spread.anchors.clone());
    spread.flags = EXCLUDE_SELF | COUNT;
    run_and_check(&backend, &stream, &spread);
    let single = Case {
        name: "one anchor, excluded for point 0".into(),
        x: Values::F32(anchors[..3 * d].to_vec()),
        n: 3,
        d,
        anchors: anchors[..d].to_vec(),
        m: 1,
        flags: EXCLUDE_SELF | COUNT,
        pad: 0,
    };
    run_and_check(&backend, &stream, &single);
}

/// Tight clusters of anchors far from the origin: the bound (which scales
/// with |x| |c|) is much wider than the gaps inside a cluster, so every
/// anchor of a point's cluster is a candidate. Clusters of 2 to 6 anchors
/// (one with an exact duplicate) go through refinement; clusters of 9 to 14
/// overflow into the list kernel.
fn clustered(sizes: &[usize], n: usize, d: usize, seed: u64) -> Case {
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

#[test]
fn near_ties_go_through_refinement_and_the_list_kernel() {
    let Some(backend) = tc_device_or_skip() else {
        return;
    };
    let stream = backend.default_stream();
    let case = clustered(&[4, 12, 2, 6, 9, 5, 14, 3], 5000, 64, 21);
    let unresolved = run_and_check(&backend, &stream, &case);
    assert!(
        unresolved > 0 && (unresolved as usize) < case.n,
        "{}: expected some but not all points unresolved, got {unresolved}",
        case.name
    );
    // The same data as f16 (exact in TF32) and with a 130-wide d.
    let mut f16 = case.clone();
    f16.name.push_str(", f16");
    f16.x = Values::f16(&case.x.to_f32());
    run_and_check(&backend, &stream, &f16);
    let wide = clustered(&[3, 11, 6], 2000, 130, 22);
    let unresolved = run_and_check(&backend, &stream, &wide);
    assert!(unresolved > 0 && (unresolved as usize) < wide.n);
}

/// Points at one far-off center; per 64-anchor tile, six anchors at squared
/// distance about 20 (tile 0), then 10 (tile 1), then 0.5 (tile 2), the rest
/// far away. Each tile's six are candidates together (the bound's window is
/// ~4.8 wide here), and each tile's lowers the upper bound below the lower
/// bounds of the previous tile's: eighteen candidates in all, never more than
/// twelve at once, so only a list that prunes when full resolves every point.
#[test]
fn a_full_list_is_pruned_as_the_bound_tightens() {
    let Some(backend) = tc_device_or_skip() else {
        return;
    };
    let stream = backend.default_stream();
    let (n, d, m) = (1000, 64, 192);
    let mut rng = Rng::new(51);
    let center: Vec<f32> = (0..d).map(|_| 3.0 + rng.next_f32()).collect();
    let mut anchors = rng.f32s(m * d);
    for (tile, level) in [(0usize, 20.0f32), (1, 10.0), (2, 0.5)] {
        for k in 0..6 {
            let squared = level + 0.8 * k as f32 / 6.0;
            let direction = rng.f32s(d);
            let length = direction.iter().map(|v| v * v).sum::<f32>().sqrt();
            let j = tile * 64 + 10 + 9 * k;
            for (i, value) in anchors[j * d..(j + 1) * d].iter_mut().enumerate() {
                *value = center[i] + squared.sqrt() * direction[i] / length;
            }
        }
    }
    let mut x = Vec::with_capacity(n * d);
    for _ in 0..n {
        x.extend(center.iter().map(|v| v + 0.01 * rng.next_f32()));
    }
    let case = Case {
        name: "candidates over three tiles".into(),
        x: Values::F32(x),
        n,
        d,
        anchors,
        m,
        flags: COUNT,
        pad: 0,
    };
    let unresolved = run_and_check(&backend, &stream, &case);
    assert_eq!(
        unresolved, 0,
        "{}: pruning should keep every list within 8",
        case.name
    );
}

#[test]
fn every_point_overflowing_goes_through_the_list_kernel() {
    let Some(backend) = tc_device_or_skip() else {
        return;
    };
    let stream = backend.default_stream();
    // One cluster of 16 anchors: every point has more than 8 candidates.
    let case = clustered(&[16], 3000, 96, 23);
    let unresolved = run_and_check(&backend, &stream, &case);
    assert_eq!(unresolved as usize, case.n, "{}", case.name);
}

#[test]
fn one_tc_assign_serves_launch_after_launch() {
    let Some(backend) = tc_device_or_skip() else {
        return;
    };
    let stream = backend.default_stream();
    // The unresolved count is zeroed by each launch: a clustered launch (many
    // unresolved) then a random one (few) must both come out exact.
    let first = clustered(&[12, 3], 2000, 32, 31);
    let second = Case::random("after a clustered launch", 2000, 32, 40, 32);
    let mut tc = TcAssign::new(&backend, &stream, 2000).unwrap().unwrap();
    for case in [&first, &second] {
        let got = run_tc(&backend, &stream, &mut tc, case);
        let simt = run_simt(&backend, &stream, case);
        check(case, &got, &simt);
    }
    // More points than it was made for is refused, not written out of bounds.
    let big = Case::random("too many", 2001, 8, 4, 33);
    let mut dev = upload(&stream, &big, &big.x.to_f32());
    let err = tc
        .launch_f32(
            &stream,
            dev.x.view(),
            dev.x_norms.view(),
            2001,
            8,
            dev.anchors.view(),
            dev.anchor_norms.view(),
            4,
            COUNT,
            dev.control.view(),
            dev.assign.view_mut(),
            dev.dist.view_mut(),
            dev.counts.view_mut(),
        )
        .unwrap_err();
    assert!(err.to_string().contains("2001 points"), "{err}");
}

/// The list kernel alone over every point equals the reference bit for bit
/// (it is the whole path below sm_80).
#[test]
fn list_kernel_alone_is_exact() {
    let Some(backend) = tc_device_or_skip() else {
        return;
    };
    let stream = backend.default_stream();
    let case = Case::random("list kernel over every point", 1500, 70, 300, 41);
    let mut dev = upload(&stream, &case, &case.x.to_f32());
    let list: Vec<u32> = (0..case.n as u32).collect();
    let list = stream.to_device(&list).unwrap();
    let count = stream.to_device(&[case.n as u32]).unwrap();
    let kernel: Kernel<anneal_assign_list_f32> = backend.kernel().unwrap();
    let config = LaunchConfig {
        grid: (7, 1, 1),
        block: (KILN_ANNEAL_LIST_THREADS, 1, 1),
        shared_mem_bytes: 0,
    };
    stream
        .launch(
            &kernel,
            config,
            (
                dev.x.view(),
                dev.x_norms.view(),
                case.d as u32,
                dev.anchors.view(),
                dev.anchor_norms.view(),
                case.m as u32,
                case.flags,
                dev.control.view(),
                list.view(),
                count.view(),
                dev.assign.view_mut(),
                dev.dist.view_mut(),
                dev.counts.view_mut(),
            ),
        )
        .unwrap();
    backend.synchronize().unwrap();
    let got = dev.read_back(&stream, &case, case.n as u32);
    let simt = run_simt(&backend, &stream, &case);
    check(&case, &got, &simt);
}
