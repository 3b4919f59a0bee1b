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
//! Every check runs each tc kernel: mma.sync with both anchor tiles, and the
//! wgmma kernels (plain and chunked) on a device of compute capability 9.0.
//!
//! Skips, saying why, without a CUDA device of sm_80 or newer.

mod tc_harness;

use gpu_core::{Backend, Kernel, LaunchConfig};
use kiln_anneal::assign_tc::{self, Reference, TcAssign};
use kiln_anneal::kernels::anneal_assign_list_f32;
use kiln_anneal::types::{
    KILN_ANNEAL_COUNT as COUNT, KILN_ANNEAL_EXCLUDE_SELF as EXCLUDE_SELF, KILN_ANNEAL_LIST_THREADS,
};
use kiln_anneal::Rng;
use tc_harness::*;

fn tc_device_or_skip() -> Option<Backend> {
    let backend = gpu_core::testing::cuda_backend(kiln_anneal::modules::ALL)?;
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

/// The wgmma kernel on its own edges (every other test here runs it too,
/// beside both mma.sync tiles, where the device has it): one 64-half stage
/// half zero-filled, a last stage half zero-filled, a second block of one
/// point, eight anchor tiles, anchors that are the points with EXCLUDE_SELF
/// across 192-point blocks, f16 points. On a device of compute capability
/// 9.0 the build must carry its sm_90a image; elsewhere it is not run.
#[test]
fn wgmma_kernel_matches_reference_on_hopper() {
    let Some(backend) = tc_device_or_skip() else {
        return;
    };
    let cc = backend.device().map_or((0, 0), |d| d.compute_capability);
    let stream = backend.default_stream();
    let probe = TcAssign::new(&backend, &stream, 1, 1, 1).unwrap().unwrap();
    let available = assign_tc::wgmma_available(cc, kiln_anneal::modules::ALL);
    assert_eq!(probe.has_wgmma(), available, "compute capability {cc:?}");
    if cc != (9, 0) {
        println!("not run: the wgmma kernel needs compute capability 9.0, not {cc:?}");
        return;
    }
    assert!(
        available,
        "compute capability 9.0 but this build has no sm_90 image of {}",
        assign_tc::WGMMA_MODULE
    );
    let mut cases = vec![
        Case::random("d 16: one stage, half zero fill", 500, 16, 300, 21),
        Case::random("d 96: last stage half zero fill", 1000, 96, 129, 22),
        Case::random("n 193: a block of one point", 193, 64, 128, 23),
        Case::random("m 1000: eight anchor tiles", 2000, 200, 1000, 24),
        Case::random("m 1", 400, 8, 1, 25),
        // The chunked kernel's chunks are 4 stages (256 halves of d).
        Case::random("d 256: one whole chunk", 400, 256, 130, 28),
        Case::random("d 257: a chunk and a zero-filled stage", 400, 257, 130, 29),
        Case::random("d 600: chunks of 4, 4 and 2 stages", 500, 600, 200, 30),
    ];
    let mut own = Case::random("anchors are the points, EXCLUDE_SELF", 700, 40, 700, 26);
    own.anchors = own.x.to_f32();
    own.flags = COUNT | EXCLUDE_SELF;
    cases.push(own);
    let values = kiln_anneal::synthetic_points(900, 72, 8, 0.25, 27);
    let mut rng = Rng::new(27);
    cases.push(Case {
        name: "f16 points".into(),
        x: Values::f16(&values),
        n: 900,
        d: 72,
        anchors: rng.f32s(300 * 72),
        m: 300,
        flags: COUNT,
        pad: 0,
    });
    for case in &cases {
        run_and_check(&backend, &stream, case);
    }
}

/// At wide d the plain bound (its accumulation term grows with d) admits so
/// many anchors that the candidate lists overflow; the chunked wgmma kernel's
/// bound grows with its 256-wide chunk instead. Both give the reference's
/// bits, and the chunked one leaves fewer points to the list kernel.
#[test]
fn chunked_wgmma_lists_fewer_wide_points() {
    let Some(backend) = tc_device_or_skip() else {
        return;
    };
    let stream = backend.default_stream();
    let case = Case::random("d 2048", 1500, 2048, 300, 31);
    let mut tc = TcAssign::new(&backend, &stream, case.n, case.d, case.m)
        .unwrap()
        .unwrap();
    if !tc.has_wgmma() {
        println!("not run: the wgmma kernels need compute capability 9.0");
        return;
    }
    let simt = run_simt(&backend, &stream, &case);
    let mut listed = Vec::new();
    for tile in [assign_tc::Tile::Wgmma, assign_tc::Tile::WgmmaChunked] {
        tc.set_tile(tile);
        let got = run_tc(&backend, &stream, &mut tc, &case);
        listed.push(check(&case, &got, &simt));
    }
    println!("listed: plain {}, chunked {}", listed[0], listed[1]);
    assert!(
        listed[0] > 0,
        "the plain bound overflowed no list: {listed:?}"
    );
    assert!(listed[1] < listed[0], "{listed:?}");
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
        let values = kiln_anneal::synthetic_points(n, d, 8, 0.25, n as u64);
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
    let mut anchors = kiln_anneal::synthetic_points(m, d, 20, 0.1, 10);
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

#[test]
fn near_ties_go_through_refinement_and_the_list_kernel() {
    let Some(backend) = tc_device_or_skip() else {
        return;
    };
    let stream = backend.default_stream();
    let case = clustered(&[4, 12, 2, 6, 9, 5, 14, 3], 5000, 64, 21);
    let unresolved = run_and_check_from(&backend, &stream, &case, Reference::Origin);
    assert!(
        unresolved > 0 && (unresolved as usize) < case.n,
        "{}: expected some but not all points unresolved, got {unresolved}",
        case.name
    );
    // The same data as f16 (exact in TF32) and with a 130-wide d.
    let mut f16 = case.clone();
    f16.name.push_str(", f16");
    f16.x = Values::f16(&case.x.to_f32());
    run_and_check_from(&backend, &stream, &f16, Reference::Origin);
    run_and_check(&backend, &stream, &f16);
    let wide = clustered(&[3, 11, 6], 2000, 130, 22);
    let unresolved = run_and_check_from(&backend, &stream, &wide, Reference::Origin);
    assert!(unresolved > 0 && (unresolved as usize) < wide.n);
}

/// Points at one far-off center; per 64-anchor tile, six anchors at squared
/// distance about 20 (tile 0), then 10 (tile 1), then 0.5 (tile 2), the rest
/// far away. Taken relative to the origin, each tile's six are candidates
/// together (the bound's window is ~4.8 wide here), and each tile's lowers the upper bound below the lower
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
    let unresolved = run_and_check_from(&backend, &stream, &case, Reference::Origin);
    assert_eq!(
        unresolved, 0,
        "{}: pruning should keep every list within 8",
        case.name
    );
}

/// Twelve anchors of the first 128-anchor tile tie within the bound's
/// window, and the second tile holds one much nearer: the wgmma kernels'
/// lists hold 16 while the tiles go by and the final bound prunes them to
/// that one, so no point goes to the list kernel, where the mma.sync
/// kernel's list of 8 overflows on the first tile. Every kernel gives the
/// reference's bits.
#[test]
fn a_wgmma_list_holds_more_than_it_keeps_until_the_final_bound() {
    let Some(backend) = tc_device_or_skip() else {
        return;
    };
    let stream = backend.default_stream();
    let (n, d, m) = (1000, 64, 256);
    let mut rng = Rng::new(61);
    let center: Vec<f32> = (0..d).map(|_| 3.0 + rng.next_f32()).collect();
    let mut anchors = rng.f32s(m * d);
    let mut place = |j: usize, squared: f32, rng: &mut Rng| {
        let direction = rng.f32s(d);
        let length = direction.iter().map(|v| v * v).sum::<f32>().sqrt();
        for (i, value) in anchors[j * d..(j + 1) * d].iter_mut().enumerate() {
            *value = center[i] + squared.sqrt() * direction[i] / length;
        }
    };
    for k in 0..12 {
        place(5 + 9 * k, 20.0 + 0.7 * k as f32 / 12.0, &mut rng);
    }
    place(200, 0.5, &mut rng);
    let mut x = Vec::with_capacity(n * d);
    for _ in 0..n {
        x.extend(center.iter().map(|v| v + 0.01 * rng.next_f32()));
    }
    let case = Case {
        name: "twelve ties, then one nearer".into(),
        x: Values::F32(x),
        n,
        d,
        anchors,
        m,
        flags: COUNT,
        pad: 0,
    };
    let simt = run_simt(&backend, &stream, &case);
    for tile in [assign_tc::Tile::Wide, assign_tc::Tile::Wgmma] {
        let mut tc = TcAssign::new(&backend, &stream, n, d, m).unwrap().unwrap();
        if tile == assign_tc::Tile::Wgmma && !tc.has_wgmma() {
            println!("not run on the wgmma kernel: it needs compute capability 9.0");
            continue;
        }
        tc.set_tile(tile);
        tc.set_reference(Reference::Origin);
        let got = run_tc(&backend, &stream, &mut tc, &case);
        let unresolved = check(&case, &got, &simt) as usize;
        let expected = if tile == assign_tc::Tile::Wide { n } else { 0 };
        assert_eq!(unresolved, expected, "{tile:?}");
    }
    run_and_check_from(&backend, &stream, &case, Reference::Origin);
}

#[test]
fn every_point_overflowing_goes_through_the_list_kernel() {
    let Some(backend) = tc_device_or_skip() else {
        return;
    };
    let stream = backend.default_stream();
    // One cluster of 16 anchors: relative to the origin, every point has
    // more than 8 candidates.
    let case = clustered(&[16], 3000, 96, 23);
    let unresolved = run_and_check_from(&backend, &stream, &case, Reference::Origin);
    assert_eq!(unresolved as usize, case.n, "{}", case.name);
}

/// An anchor far past the points' f16 scale sends every point to the list
/// kernel, from every tc kernel (the wgmma kernel marks every candidate list
/// overflowed and its refinement lists each point once), with the
/// reference's bits.
#[test]
fn an_anchor_past_the_f16_range_leaves_every_point_to_the_list_kernel() {
    let Some(backend) = tc_device_or_skip() else {
        return;
    };
    let stream = backend.default_stream();
    let mut case = Case::random("an anchor past the f16 range", 700, 40, 9, 41);
    case.anchors[3 * case.d + 5] = 1e15;
    let simt = run_simt(&backend, &stream, &case);
    for tile in [
        assign_tc::Tile::Wide,
        assign_tc::Tile::Slim,
        assign_tc::Tile::Wgmma,
        assign_tc::Tile::WgmmaChunked,
    ] {
        let mut tc = TcAssign::new(&backend, &stream, case.n, case.d, case.m)
            .unwrap()
            .unwrap();
        if matches!(tile, assign_tc::Tile::Wgmma | assign_tc::Tile::WgmmaChunked) && !tc.has_wgmma()
        {
            continue;
        }
        tc.set_tile(tile);
        let got = run_tc(&backend, &stream, &mut tc, &case);
        assert_eq!(check(&case, &got, &simt) as usize, case.n, "{tile:?}");
    }
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
    let mut tc = TcAssign::new(&backend, &stream, 2000, 32, 40)
        .unwrap()
        .unwrap();
    tc.set_reference(Reference::Origin);
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
    assert!(
        matches!(err, kiln_anneal::AnnealError::OverCapacity { n: 2001, .. }),
        "{err}"
    );
}

/// The list kernels alone over every point equal the reference bit for bit
/// (they are the whole path below sm_80).
/// The data users have (issue 39), each `n` points with `m` anchors taken
/// as a k-means run has them (points of the data, or the clusters' centres):
/// every dimension offset by one shared mean (embeddings share a
/// direction), scaled by 1e3 and by 1e-3, unit vectors in clusters, a few
/// dominant directions, and near-ties far from the origin (every point
/// halfway between two anchors). Every tc kernel gives the reference's bits
/// on each; centred on the points' mean, the bound leaves at most 1% of the
/// points to the list kernel (the near-ties aside, which are candidates by
/// design), where taken relative to the origin it leaves most of the offset
/// points.
#[test]
fn tc_is_exact_and_tight_on_every_kind_of_data() {
    let Some(backend) = tc_device_or_skip() else {
        return;
    };
    let stream = backend.default_stream();
    let (n, d, m) = (4000usize, 128usize, 256usize);
    let mut rng = Rng::new(61);
    let spread = rng.f32s(n * d);
    let sampled = |x: &[f32]| -> Vec<f32> {
        (0..m)
            .flat_map(|j| x[j * (n / m) * d..(j * (n / m) + 1) * d].iter().copied())
            .collect()
    };
    let mean: Vec<f32> = (0..d).map(|_| 8.0 + rng.next_f32()).collect();
    let offset: Vec<f32> = spread
        .iter()
        .enumerate()
        .map(|(i, v)| v + mean[i % d])
        .collect();
    let scaled = |by: f32| spread.iter().map(|v| v * by).collect::<Vec<f32>>();
    let unit = |v: &mut [f32]| {
        let length = v.iter().map(|a| a * a).sum::<f32>().sqrt();
        v.iter_mut().for_each(|a| *a /= length);
    };
    let mut centres = rng.f32s(m * d);
    centres.chunks_mut(d).for_each(unit);
    let mut clustered = Vec::with_capacity(n * d);
    for i in 0..n {
        let c = &centres[(i % m) * d..(i % m + 1) * d];
        let mut row: Vec<f32> = c.iter().map(|v| v + 0.02 * rng.next_f32()).collect();
        unit(&mut row);
        clustered.extend(row);
    }
    let directions = rng.f32s(4 * d);
    let mut anisotropic = spread.clone();
    for (i, row) in anisotropic.chunks_mut(d).enumerate() {
        let weights = [(i % 7) as f32 - 3.0, rng.next_f32() * 10.0, 4.0, -6.0];
        for (w, dir) in weights.iter().zip(directions.chunks(d)) {
            row.iter_mut().zip(dir).for_each(|(v, u)| *v += w * u);
        }
    }
    let kinds: Vec<(&str, Vec<f32>, Vec<f32>)> = vec![
        ("offset 8", offset.clone(), sampled(&offset)),
        ("scaled 1e3", scaled(1e3), sampled(&scaled(1e3))),
        ("scaled 1e-3", scaled(1e-3), sampled(&scaled(1e-3))),
        ("unit clusters", clustered, centres),
        ("anisotropic", anisotropic.clone(), sampled(&anisotropic)),
    ];
    for (name, x, anchors) in kinds {
        let case = Case {
            name: name.into(),
            x: Values::F32(x),
            n,
            d,
            anchors,
            m,
            flags: COUNT,
            pad: 0,
        };
        let listed = run_and_check(&backend, &stream, &case);
        assert!(
            listed as usize * 100 <= n,
            "{name}: {listed} of {n} points left to the list kernel"
        );
        if name == "offset 8" {
            let origin = run_and_check_from(&backend, &stream, &case, Reference::Origin);
            assert!(
                origin as usize > n / 2,
                "{name}: relative to the origin only {origin} of {n} listed"
            );
        }
    }
    // Near-ties far from the origin: point i sits halfway between anchors
    // 2j and 2j + 1 (j = i mod m / 2), which differ by +-w from it.
    let mut anchors = Vec::with_capacity(m * d);
    let mut x = Vec::with_capacity(n * d);
    let halves: Vec<Vec<f32>> = (0..m / 2).map(|_| rng.f32s(d)).collect();
    for (j, w) in halves.iter().enumerate() {
        let base = &offset[j * d..(j + 1) * d];
        anchors.extend(base.iter().zip(w).map(|(b, w)| b + 0.25 * w));
        anchors.extend(base.iter().zip(w).map(|(b, w)| b - 0.25 * w));
    }
    for i in 0..n {
        x.extend_from_slice(&offset[(i % (m / 2)) * d..(i % (m / 2) + 1) * d]);
    }
    let ties = Case {
        name: "near-ties at offset 8".into(),
        x: Values::F32(x),
        n,
        d,
        anchors,
        m,
        flags: COUNT,
        pad: 0,
    };
    run_and_check(&backend, &stream, &ties);
}

#[test]
fn list_kernel_alone_is_exact() {
    let Some(backend) = tc_device_or_skip() else {
        return;
    };
    let stream = backend.default_stream();
    // Groups of 8 listed points: whole groups, one past a group (with
    // EXCLUDE_SELF, so point i skips anchor i), and one point whose only
    // anchor is itself (no eligible anchor).
    let mut one_past = Case::random("9 points, one past a group", 9, 33, 65, 42);
    one_past.flags |= EXCLUDE_SELF;
    let mut alone = Case::random("one point, its only anchor excluded", 1, 5, 1, 43);
    alone.flags |= EXCLUDE_SELF;
    let cases = [
        Case::random("list kernel over every point", 1500, 70, 300, 41),
        one_past,
        alone,
    ];
    for case in &cases {
        list_alone(&backend, &stream, case);
    }
}

fn list_alone(backend: &Backend, stream: &gpu_core::Stream, case: &Case) {
    let mut dev = upload(stream, case, &case.x.to_f32());
    let list: Vec<u32> = (0..case.n as u32).collect();
    let list = stream.to_device(&list).unwrap();
    let count = stream.to_device(&[case.n as u32]).unwrap();
    let mut best = stream.alloc_zeros::<u64>(case.n).unwrap();
    let mut arrived = stream.alloc_zeros::<u32>(1).unwrap();
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
                best.view_mut(),
                dev.assign.view_mut(),
                dev.dist.view_mut(),
                dev.counts.view_mut(),
                arrived.view_mut(),
            ),
        )
        .unwrap();
    backend.synchronize().unwrap();
    // The last block's finish leaves `best` and the count of blocks zero
    // for the next list.
    assert!(
        stream
            .to_host(&best.view())
            .unwrap()
            .iter()
            .all(|&b| b == 0),
        "the list's results are still in best after its finish"
    );
    assert_eq!(
        stream.to_host(&arrived.view()).unwrap(),
        [0],
        "{}",
        case.name
    );
    let got = dev.read_back(stream, case, case.n as u32);
    let simt = run_simt(backend, stream, case);
    check(case, &got, &simt);
}
