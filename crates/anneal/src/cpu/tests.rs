//! Tests of the CPU engine: the blocked distance loop against brute force on
//! awkward shapes, every instruction set against the baseline, ties, the
//! stats and update, thread-count independence, and overflowing inputs.

use super::*;

/// The straightforward distance, to check the blocked one against.
fn brute(points: &[f32], anchors: &[f32], d: usize) -> Vec<(u32, f32)> {
    points
        .chunks(d)
        .map(|x| {
            let mut best = (u32::MAX, f32::INFINITY);
            for (j, c) in anchors.chunks(d).enumerate() {
                let dd: f32 = x.iter().zip(c).map(|(a, b)| (a - b) * (a - b)).sum();
                if dd < best.1 {
                    best = (j as u32, dd);
                }
            }
            best
        })
        .collect()
}

/// The nearest anchor of every point, on `isa`.
fn nearest_on(isa: Isa, points: &[f32], anchors: &[f32], d: usize) -> (Vec<u32>, Vec<f32>) {
    let mut rows = Rows::default();
    rows.pack(points, d);
    let mut packed = Packed::default();
    packed.pack(anchors, anchors.len() / d, d);
    let query = Query {
        rows: &rows,
        anchors: &packed,
        exclude_self: false,
    };
    let mut assign = vec![0; rows.count];
    let mut dist = vec![0.0; rows.count];
    nearest(isa, &query, &mut assign, &mut dist);
    (assign, dist)
}

/// Tiles of every size and remainders: n not a multiple of the tile or
/// the task, d of odd sizes, m leaving a partial block or an odd block.
const AWKWARD: [(usize, usize, usize); 7] = [
    (1, 1, 1),
    (7, 3, 5),
    (300, 17, 33),
    (513, 64, 40),
    (97, 130, 16),
    (205, 31, 49),
    (1000, 128, 259),
];

#[test]
fn blocked_assignment_matches_brute_force_for_awkward_shapes() {
    let mut rng = crate::rng::Rng::new(11);
    for (n, d, m) in AWKWARD {
        let points = rng.f32s(n * d);
        let anchors = rng.f32s(m * d);
        let expected = brute(&points, &anchors, d);
        for isa in Isa::available() {
            let (assign, dist) = nearest_on(isa, &points, &anchors, d);
            for (i, (a, dd)) in expected.iter().copied().enumerate() {
                let what = format!("{isa:?} n={n} d={d} m={m} point {i}");
                assert!((dist[i] - dd).abs() <= 1e-4 * dd.max(1.0), "{what}");
                if assign[i] != a {
                    // A near tie may go either way under different rounding.
                    let other = brute(
                        &points[i * d..(i + 1) * d],
                        &anchors[assign[i] as usize * d..][..d],
                        d,
                    )[0]
                    .1;
                    assert!((other - dd).abs() <= 1e-4 * dd.max(1.0), "{what}");
                }
            }
        }
    }
}

#[test]
fn simd_paths_agree_with_the_scalar_fallback() {
    let mut rng = crate::rng::Rng::new(12);
    for (n, d, m) in AWKWARD {
        let points = rng.f32s(n * d);
        let anchors = rng.f32s(m * d);
        let (base_assign, base_dist) = nearest_on(Isa::Baseline, &points, &anchors, d);
        let mut fused = None;
        for isa in Isa::available() {
            let (assign, dist) = nearest_on(isa, &points, &anchors, d);
            for i in 0..n {
                let what = format!("{isa:?} n={n} d={d} m={m} point {i}");
                let tol = 1e-5 * base_dist[i].max(1.0);
                assert!((dist[i] - base_dist[i]).abs() <= tol, "{what}");
                if assign[i] != base_assign[i] {
                    let a = assign[i] as usize;
                    let (assign_b, dist_b) = nearest_on(
                        Isa::Baseline,
                        &points[i * d..][..d],
                        &anchors[a * d..][..d],
                        d,
                    );
                    assert_eq!(assign_b, [0]);
                    assert!((dist_b[0] - base_dist[i]).abs() <= tol, "{what}: not a tie");
                }
            }
            // The fused paths sum in the same order with the same
            // rounding, whatever their tile: bit for bit equal.
            if isa != Isa::Baseline {
                match &fused {
                    None => fused = Some((assign, dist)),
                    Some(first) => {
                        assert_eq!(first, &(assign, dist), "{isa:?} n={n} d={d} m={m}")
                    }
                }
            }
        }
    }
}

#[test]
fn ties_go_to_the_lowest_anchor() {
    let d = 3;
    // Anchors 2, 19 and 40 are the same point; 19 and 40 sit in other
    // lanes and blocks than 2.
    let mut anchors: Vec<f32> = (0..50 * d).map(|i| 10.0 + i as f32).collect();
    for a in [2, 19, 40] {
        anchors[a * d..(a + 1) * d].copy_from_slice(&[0.5, -0.25, 1.0]);
    }
    let points: Vec<f32> = [0.5, -0.25, 1.0].repeat(30);
    for isa in Isa::available() {
        let (assign, dist) = nearest_on(isa, &points, &anchors, d);
        assert!(assign.iter().all(|&a| a == 2), "{isa:?}: {assign:?}");
        assert!(dist.iter().all(|&v| v == 0.0), "{isa:?}");
    }
}

#[test]
fn anchor_neighbors_exclude_the_anchor_itself() {
    let mut rng = crate::rng::Rng::new(13);
    for (m, d) in [(1, 4), (2, 1), (37, 9), (130, 20)] {
        let anchors = rng.f32s(m * d);
        for isa in Isa::available() {
            let mut engine = CpuEngine::with_isa(Points::F32(&anchors), m, d, isa);
            engine.set_anchors(&anchors, m).unwrap();
            let (nn, nn_dist) = engine.anchor_neighbors().unwrap();
            for j in 0..m {
                let what = format!("{isa:?} m={m} d={d} anchor {j}");
                let others: Vec<(usize, f32)> = anchors
                    .chunks(d)
                    .enumerate()
                    .filter(|(i, _)| *i != j)
                    .map(|(i, c)| (i, brute(&anchors[j * d..][..d], c, d)[0].1))
                    .collect();
                match others.iter().min_by(|a, b| a.1.total_cmp(&b.1)) {
                    None => assert_eq!(nn[j], u32::MAX, "{what}"),
                    Some(&(_, best)) => {
                        assert_ne!(nn[j] as usize, j, "{what}");
                        let got = others.iter().find(|(i, _)| *i == nn[j] as usize).unwrap();
                        assert!((got.1 - best).abs() <= 1e-4 * best.max(1.0), "{what}");
                        assert!((nn_dist[j] - best).abs() <= 1e-4 * best.max(1.0), "{what}");
                    }
                }
            }
        }
    }
}

#[test]
fn step_stats_and_update_match_a_direct_computation() {
    let (n, d, m) = (777, 13, 21);
    let points = crate::synthetic::synthetic_points(n, d, 8, 0.3, 4);
    let anchors = crate::engine::initial_anchors(Points::F32(&points), n, d, m, 4).unwrap();
    let eta = 0.6;
    for isa in Isa::available() {
        let mut engine = CpuEngine::with_isa(Points::F32(&points), n, d, isa);
        engine.set_anchors(&anchors, m).unwrap();
        let energy = engine.step(eta).unwrap();
        let assign = engine.assignments().unwrap();
        let stats = engine.stats().unwrap();
        let moved = engine.anchors().unwrap();
        let (_, dist) = nearest_on(isa, &points, &anchors, d);
        let expected = dist.iter().map(|v| f64::from(*v)).sum::<f64>() / n as f64;
        assert_eq!(energy, expected, "{isa:?}");
        for j in 0..m {
            let members: Vec<usize> = (0..n).filter(|&i| assign[i] as usize == j).collect();
            assert_eq!(
                stats.counts[j] as usize,
                members.len(),
                "{isa:?} anchor {j}"
            );
            let sumsq: f64 = members.iter().map(|&i| f64::from(dist[i])).sum();
            assert_eq!(stats.sumsq[j], sumsq, "{isa:?} anchor {j}");
            for k in 0..d {
                let c = anchors[j * d + k];
                let want = if members.is_empty() {
                    c
                } else {
                    let sum: f64 = members.iter().map(|&i| f64::from(points[i * d + k])).sum();
                    let mean = (sum / members.len() as f64) as f32;
                    c + eta * (mean - c)
                };
                let got = moved[j * d + k];
                assert!(
                    (got - want).abs() <= 1e-6 * want.abs().max(1.0),
                    "{isa:?} anchor {j} dim {k}"
                );
            }
        }
    }
}

#[test]
fn runs_do_not_depend_on_the_thread_count() {
    let (n, d, m) = (3001, 37, 131);
    let points = crate::synthetic::synthetic_points(n, d, 60, 0.25, 2);
    let params = crate::vocab::Params {
        seed: 2,
        ..Default::default()
    };
    let run = |threads: usize| {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap();
        pool.install(|| {
            let problem = crate::input::validate(Points::F32(&points), n, d, m, &params).unwrap();
            let mut engine = CpuEngine::new(&problem);
            crate::driver::run_with(&mut engine, &problem, &mut |_, _, _| {}).unwrap()
        })
    };
    let one = run(1);
    assert_eq!(one, run(3));
    assert_eq!(one, run(4));
}

#[test]
fn overflowing_distances_never_give_an_index_out_of_range() {
    // ±1e19 made every distance +inf (the argmin returned u32::MAX and the
    // stats pass indexed with it); ±1e20 made them NaN.
    for big in [1e19f32, -1e19, 1e20, f32::MAX, f32::INFINITY, f32::NAN] {
        let (n, d, m) = (30, 8, 5);
        let mut points = crate::rng::Rng::new(3).f32s(n * d);
        for v in points.iter_mut().step_by(3) {
            *v *= big;
        }
        let anchors = points[..m * d].to_vec();
        for isa in Isa::available() {
            let (assign, _) = nearest_on(isa, &points, &anchors, d);
            assert!(
                assign.iter().all(|&a| (a as usize) < m),
                "{isa:?} {big}: {assign:?}"
            );
            let mut engine = CpuEngine::with_isa(Points::F32(&points), n, d, isa);
            engine.set_anchors(&anchors, m).unwrap();
            // Either refused (a squared norm is not finite) or computed with
            // every assignment an index.
            match engine.step(0.5) {
                Ok(_) => {
                    let assign = engine.assignments().unwrap();
                    assert!(assign.iter().all(|&a| (a as usize) < m), "{isa:?} {big}");
                }
                Err(e) => assert!(
                    matches!(e, AnnealError::NormOverflow { .. }),
                    "{isa:?} {big}: {e}"
                ),
            }
        }
    }
}
