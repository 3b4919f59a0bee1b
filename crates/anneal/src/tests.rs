//! Tests of the driver and the validation: refusals in one line, CPU runs
//! that lower the energy and repeat exactly, f16 input, odd shapes.

use super::*;

/// The error `validate` refuses with, after checking that its message is
/// one line.
#[track_caller]
fn refused(points: &[f32], n: usize, d: usize, m: usize, params: &Params) -> AnnealError {
    let err = validate(Points::F32(points), n, d, m, params).unwrap_err();
    assert!(!err.to_string().contains('\n'), "{err}");
    err
}

#[test]
fn bad_input_is_an_error_with_a_reason() {
    let p = Params::default();
    assert!(matches!(refused(&[], 0, 4, 1, &p), AnnealError::NoPoints));
    assert!(matches!(
        refused(&[], 4, 0, 1, &p),
        AnnealError::NoDimensions
    ));
    assert!(matches!(
        refused(&[0.0; 8], 4, 2, 0, &p),
        AnnealError::NoAnchors
    ));
    let err = refused(&[0.0; 8], 4, 2, 5, &p);
    assert!(
        matches!(err, AnnealError::MoreAnchorsThanPoints { m: 5, n: 4 }),
        "{err}"
    );
    assert!(err.to_string().contains("more anchors (5) than points (4)"));
    let err = refused(&[0.0; 7], 4, 2, 1, &p);
    assert!(
        matches!(
            err,
            AnnealError::ValueCount {
                values: 7,
                n: 4,
                d: 2
            }
        ),
        "{err}"
    );
    let err = refused(&[0.0, f32::NAN, 0.0, 0.0], 2, 2, 1, &p);
    assert!(
        matches!(err, AnnealError::NonFinite { point: 0, dim: 1 }),
        "{err}"
    );
    let err = refused(&[0.0, 0.0, 0.0, f32::INFINITY], 2, 2, 1, &p);
    assert!(err
        .to_string()
        .contains("point 1 has a NaN or infinite coordinate (dimension 1)"));
    let with = |params: Params| refused(&[0.0; 4], 2, 2, 1, &params);
    let err = with(Params {
        cooling: 0.0,
        ..Params::default()
    });
    assert!(
        matches!(
            err,
            AnnealError::BadParam {
                name: "cooling",
                ..
            }
        ),
        "{err}"
    );
    let err = with(Params {
        max_iters: 0,
        ..Params::default()
    });
    assert!(matches!(err, AnnealError::NoIterations), "{err}");
    let err = with(Params {
        split_var: f32::NAN,
        ..Params::default()
    });
    assert_eq!(err.to_string(), "split_var NaN is not a finite value >= 0");
    let err = refused(
        &[0.0; 4],
        2,
        2,
        2,
        &Params {
            max_anchors: 1,
            ..Params::default()
        },
    );
    assert!(
        matches!(
            err,
            AnnealError::MaxAnchorsBelowM {
                max_anchors: 1,
                m: 2
            }
        ),
        "{err}"
    );
    assert_eq!(err.to_string(), "max_anchors 1 is below m = 2");
}

#[test]
fn cpu_run_reduces_energy_and_reports_consistently() {
    let (n, d, m) = (2000, 24, 40);
    let points = synthetic_points(n, d, 20, 0.2, 1);
    let params = Params {
        seed: 3,
        ..Params::default()
    };
    let mut seen = 0;
    let out = run(
        &gpu_core::Backend::cpu(),
        &validate(Points::F32(&points), n, d, m, &params).unwrap(),
        &mut |_, _, _| seen += 1,
    )
    .unwrap();
    assert_eq!(seen as u32, out.iterations);
    assert_eq!(out.history.len() as u32, out.iterations);
    assert!(
        out.history.last().unwrap() < &out.history[0],
        "{:?}",
        out.history
    );
    assert_eq!(out.anchors.len(), out.m * d);
    assert_eq!(out.assignments.len(), n);
    assert!(out.assignments.iter().all(|&a| (a as usize) < out.m));
    assert!((out.compression_ratio - out.m as f64 / n as f64).abs() < 1e-12);
    assert!(out.energy.is_finite() && out.energy > 0.0);
    // Deterministic: the same run twice gives the same result.
    let again = run(
        &gpu_core::Backend::cpu(),
        &validate(Points::F32(&points), n, d, m, &params).unwrap(),
        &mut |_, _, _| {},
    )
    .unwrap();
    assert_eq!(out, again);
}

#[test]
fn f16_points_give_the_same_run_as_their_f32_values() {
    let (n, d, m) = (500, 9, 10);
    let values = synthetic_points(n, d, 5, 0.3, 2);
    let bits: Vec<u16> = values
        .iter()
        .map(|v| half::f16::from_f32(*v).to_bits())
        .collect();
    let rounded: Vec<f32> = bits
        .iter()
        .map(|b| half::f16::from_bits(*b).to_f32())
        .collect();
    let params = Params::default();
    let cpu = gpu_core::Backend::cpu();
    let a = run(
        &cpu,
        &validate(Points::F16(&bits), n, d, m, &params).unwrap(),
        &mut |_, _, _| {},
    )
    .unwrap();
    let b = run(
        &cpu,
        &validate(Points::F32(&rounded), n, d, m, &params).unwrap(),
        &mut |_, _, _| {},
    )
    .unwrap();
    assert_eq!(a, b);
}

#[test]
fn one_anchor_and_any_dimension_work() {
    for (n, d, m) in [(1, 1, 1), (5, 3, 1), (64, 1, 64), (33, 130, 7)] {
        let points = synthetic_points(n, d, 3, 0.5, 9);
        let out = run(
            &gpu_core::Backend::cpu(),
            &validate(Points::F32(&points), n, d, m, &Params::default()).unwrap(),
            &mut |_, _, _| {},
        )
        .unwrap();
        assert!(out.energy.is_finite(), "n={n} d={d} m={m}");
        assert!(out.m >= 1 && out.assignments.len() == n);
    }
}

#[test]
fn initial_anchors_are_distinct_points_and_seeded() {
    let points: Vec<f32> = (0..100).map(|i| i as f32).collect();
    let a = initial_anchors(Points::F32(&points), 50, 2, 10, 7).unwrap();
    let b = initial_anchors(Points::F32(&points), 50, 2, 10, 7).unwrap();
    assert_eq!(a, b);
    let mut firsts: Vec<u32> = a.chunks(2).map(|c| c[0] as u32).collect();
    assert!(a.chunks(2).all(|c| c[1] == c[0] + 1.0), "whole points");
    firsts.sort();
    firsts.dedup();
    assert_eq!(firsts.len(), 10, "distinct");
    assert_ne!(
        a,
        initial_anchors(Points::F32(&points), 50, 2, 10, 8).unwrap()
    );
}

#[test]
fn coordinates_at_the_bound_run_and_beyond_it_are_refused() {
    for d in [1, 4, 128, 1000] {
        let bound = coordinate_bound(d);
        // Two points at opposite corners: the largest squared distance the
        // bound allows, 4 d B², must be finite through the whole run.
        let mut points = vec![bound; d];
        points.extend(vec![-bound; d]);
        let problem = validate(Points::F32(&points), 2, d, 1, &Params::default()).unwrap();
        let out = run(&gpu_core::Backend::cpu(), &problem, &mut |_, _, _| {}).unwrap();
        assert!(
            out.energy.is_finite() && out.energy > 0.0,
            "d = {d}: {}",
            out.energy
        );
        let over = bound * 1.01;
        points[d + d / 2] = -over;
        let err = validate(Points::F32(&points), 2, d, 1, &Params::default())
            .unwrap_err()
            .to_string();
        assert!(
            err.contains(&format!(
                "point 1 has coordinate {:e} at dimension {}",
                -over,
                d / 2
            )),
            "{err}"
        );
        assert!(err.contains(&format!("±{bound:.3e}")), "{err}");
    }
    // The values of issue 13: ±1e19 panicked in the CPU engine, ±1e20 gave
    // energy 0.
    for big in [1e19f32, -1e19, 1e20, -1e20] {
        let points = [0.5, big, 0.25, 0.0, 1.0, 2.0];
        let err = validate(Points::F32(&points), 3, 2, 1, &Params::default()).unwrap_err();
        assert!(
            matches!(
                err,
                AnnealError::OutOfRange {
                    point: 0,
                    dim: 1,
                    ..
                }
            ),
            "{err}"
        );
    }
}

#[test]
fn pieces_cross_part_boundaries_in_row_order() {
    let values: Vec<f32> = (0..12).map(|i| i as f32).collect();
    let parts = [
        Points::F32(&values[..4]),
        Points::F32(&values[4..4]),
        Points::F32(&values[4..10]),
        Points::F32(&values[10..]),
    ];
    let points = Points::Parts(&parts);
    assert_eq!(points.len(), 12);
    assert_eq!(points.to_f32(), values);
    assert_eq!(points.range_f32(3..11), &values[3..11]);
    assert_eq!(points.get(10), 10.0);
    let pieces = points.pieces(2..11);
    let lens: Vec<usize> = pieces.iter().map(Points::len).collect();
    assert_eq!(lens, [2, 6, 1]);
    assert!(pieces.iter().all(|p| !matches!(p, Points::Parts(_))));
    assert_eq!(Points::F32(&values).pieces(5..5).len(), 0);
}

#[test]
fn parts_of_mixed_types_nested_or_split_rows_are_refused() {
    let values = synthetic_points(6, 2, 2, 0.3, 1);
    let bits = [0u16; 4];
    let p = Params::default();
    let check = |parts: &[Points<'_>], part: usize, problem: PartProblem| {
        let err = validate(Points::Parts(parts), 6, 2, 2, &p).unwrap_err();
        assert!(
            matches!(err, AnnealError::BadPart { part: q, problem: r } if q == part && r == problem),
            "{err}"
        );
    };
    check(
        &[Points::F32(&values[..8]), Points::BF16(&bits)],
        1,
        PartProblem::MixedTypes,
    );
    check(
        &[Points::F32(&values[..3]), Points::F32(&values[3..])],
        0,
        PartProblem::PartialRows,
    );
    let inner = [Points::F32(&values[..4])];
    check(
        &[Points::Parts(&inner), Points::F32(&values[4..])],
        0,
        PartProblem::Nested,
    );
    let err = validate(Points::Parts(&[Points::Parts(&inner)]), 2, 2, 1, &p).unwrap_err();
    assert_eq!(
        err.to_string(),
        "part 0 of the points is itself split into parts; give row-contiguous parts of one \
         element type"
    );
}

#[test]
fn shards_run_exactly_as_one_matrix() {
    let (n, d, m) = (500, 6, 12);
    let values = synthetic_points(n, d, 6, 0.3, 5);
    let parts = [
        Points::F32(&values[..123 * d]),
        Points::F32(&values[123 * d..124 * d]),
        Points::F32(&values[124 * d..]),
    ];
    let params = Params::default();
    let cpu = gpu_core::Backend::cpu();
    let whole = run(
        &cpu,
        &validate(Points::F32(&values), n, d, m, &params).unwrap(),
        &mut |_, _, _| {},
    )
    .unwrap();
    let sharded = run(
        &cpu,
        &validate(Points::Parts(&parts), n, d, m, &params).unwrap(),
        &mut |_, _, _| {},
    )
    .unwrap();
    assert_eq!(whole, sharded);
}

#[test]
fn bf16_input_runs_as_its_exact_f32_values() {
    let (n, d, m) = (400, 5, 10);
    let values = synthetic_points(n, d, 5, 0.3, 6);
    let bits: Vec<u16> = values
        .iter()
        .map(|v| half::bf16::from_f32(*v).to_bits())
        .collect();
    let widened: Vec<f32> = bits
        .iter()
        .map(|b| f32::from_bits(u32::from(*b) << 16))
        .collect();
    assert_eq!(Points::BF16(&bits).to_f32(), widened);
    let params = Params::default();
    let cpu = gpu_core::Backend::cpu();
    let a = run(
        &cpu,
        &validate(Points::BF16(&bits), n, d, m, &params).unwrap(),
        &mut |_, _, _| {},
    )
    .unwrap();
    let b = run(
        &cpu,
        &validate(Points::F32(&widened), n, d, m, &params).unwrap(),
        &mut |_, _, _| {},
    )
    .unwrap();
    assert_eq!(a, b);
    let mut bad = bits.clone();
    bad[7] = 0x7fc0; // bf16 NaN
    let err = validate(Points::BF16(&bad), n, d, m, &params).unwrap_err();
    assert!(err.to_string().contains("point 1 has a NaN"), "{err}");
}

/// The `O(m)` shuffle picks the rows a whole-index Fisher-Yates shuffle
/// picks (the anchors of every saved index depend on it), and distinct ones.
#[test]
fn initial_rows_are_the_whole_shuffles_first_m() {
    fn dense(n: usize, m: usize, seed: u64) -> Vec<usize> {
        let mut rng = Rng::new(seed);
        let mut index: Vec<usize> = (0..n).collect();
        for i in 0..m {
            let j = i + (rng.next_u64() % (n - i) as u64) as usize;
            index.swap(i, j);
        }
        index.truncate(m);
        index
    }
    for (n, m) in [
        (1, 1),
        (2, 2),
        (5, 3),
        (10, 10),
        (1000, 32),
        (100_000, 2048),
    ] {
        for seed in [0, 1, 0xDEAD_BEEF] {
            let rows = initial_rows(n, m, seed).unwrap();
            assert_eq!(rows, dense(n, m, seed), "n {n} m {m} seed {seed}");
            let mut sorted = rows.clone();
            sorted.sort_unstable();
            sorted.dedup();
            assert_eq!(sorted.len(), m, "n {n} m {m}: repeated rows");
        }
    }
}

#[test]
fn the_cpu_engine_refuses_too_few_anchor_values() {
    let points = synthetic_points(10, 3, 2, 0.1, 1);
    let problem = validate(Points::F32(&points), 10, 3, 2, &Params::default()).unwrap();
    let mut engine = cpu::CpuEngine::new(&problem);
    for (values, m) in [(5, 2), (3, usize::MAX)] {
        let err = engine.set_anchors(&vec![0.0; values], m).unwrap_err();
        assert!(
            matches!(err, AnnealError::AnchorValues { values: v, m: k, d: 3 } if (v, k) == (values, m)),
            "{err}"
        );
    }
    engine.set_anchors(&[0.0; 6], 2).unwrap();
}

/// The public helpers refuse what they cannot do (more rows than there
/// are: a remainder by zero; anchors past the points: a capacity
/// overflow), in typed errors.
#[test]
fn initial_rows_and_anchors_refuse_impossible_sizes_without_a_panic() {
    assert!(matches!(
        initial_rows(5, 10, 0),
        Err(AnnealError::MoreAnchorsThanPoints { m: 10, n: 5 })
    ));
    assert!(matches!(
        initial_rows(0, 1, 0),
        Err(AnnealError::MoreAnchorsThanPoints { m: 1, n: 0 })
    ));
    assert!(matches!(
        initial_rows(usize::MAX, 1 << 40, 0),
        Err(AnnealError::OverU32 { what: "m", .. })
    ));
    assert_eq!(initial_rows(0, 0, 0).unwrap(), Vec::<usize>::new());
    let points = synthetic_points(10, 2, 2, 0.1, 1);
    let err = initial_anchors(Points::F32(&points), 10, 2, 1 << 60, 0).unwrap_err();
    assert!(
        matches!(err, AnnealError::MoreAnchorsThanPoints { .. }),
        "{err}"
    );
    let err = initial_anchors(Points::F32(&points), 1 << 60, 2, 1 << 60, 0).unwrap_err();
    assert!(matches!(err, AnnealError::ValueCount { .. }), "{err}");
    let err = initial_anchors(Points::F32(&points), 20, 0, 1, 0).unwrap_err();
    assert!(matches!(err, AnnealError::NoDimensions), "{err}");
}

mod helpers_never_panic {
    use super::*;
    use proptest::prelude::*;

    /// Sizes around the edges: small ones, and huge ones past `u32` and
    /// `usize`'s halves.
    fn size() -> impl Strategy<Value = usize> {
        prop_oneof![0usize..40, (u32::MAX as usize + 1)..=usize::MAX]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]
        /// `m` distinct rows below `n` when `m <= n` (and `m` fits u32),
        /// a typed refusal otherwise.
        #[test]
        fn initial_rows_gives_distinct_rows_or_an_error(n in size(), m in size(), seed: u64) {
            match initial_rows(n, m, seed) {
                Ok(rows) => {
                    prop_assert!(m <= n);
                    prop_assert_eq!(rows.len(), m);
                    let mut sorted = rows.clone();
                    sorted.sort_unstable();
                    sorted.dedup();
                    prop_assert_eq!(sorted.len(), m);
                    prop_assert!(rows.iter().all(|&r| r < n));
                }
                Err(e) => prop_assert!(
                    m > n || u32::try_from(m).is_err(),
                    "{} refused: {}", m, e
                ),
            }
        }

        /// The anchors are whole rows of the points, or a typed refusal.
        #[test]
        fn initial_anchors_gives_rows_of_the_points_or_an_error(
            rows in 0usize..12, n in size(), d in 0usize..4, m in size(), seed: u64
        ) {
            let points: Vec<f32> = (0..rows * d.max(1)).map(|i| i as f32).collect();
            match initial_anchors(Points::F32(&points), n, d, m, seed) {
                Ok(anchors) => {
                    prop_assert!(m <= n && n * d == points.len());
                    prop_assert_eq!(anchors.len(), m * d);
                    for row in anchors.chunks(d) {
                        prop_assert_eq!(row[0] as usize % d, 0);
                        prop_assert_eq!(row, &points[row[0] as usize..row[0] as usize + d]);
                    }
                }
                Err(e) => prop_assert!(
                    m > n || d == 0 || n.checked_mul(d) != Some(points.len()),
                    "{} x {} m {} refused: {}", n, d, m, e
                ),
            }
        }
    }
}

/// One place turns a backend into an engine: the CPU backend is the CPU
/// target, whose engine runs the same anneal `run` runs, bit for bit, and
/// uploads nothing; a CUDA backend is a GPU target of that one backend.
#[test]
fn a_target_builds_the_engine_that_run_runs() {
    let cpu = gpu_core::Backend::cpu();
    let target = Target::of(&cpu);
    assert!(matches!(target, Target::Cpu), "{target:?}");
    assert!(target.gpus().is_empty());
    let points = synthetic_points(400, 8, 4, 0.2, 7);
    let problem = validate(Points::F32(&points), 400, 8, 4, &Params::default()).unwrap();
    let mut engine = target.engine(&problem).unwrap();
    assert_eq!(engine.setup_parts(), None);
    let built = run_with(engine.as_mut(), &problem, &mut |_, _, _| {}).unwrap();
    let ran = run(&cpu, &problem, &mut |_, _, _| {}).unwrap();
    assert_eq!(built.anchors, ran.anchors);
    assert_eq!(built.assignments, ran.assignments);
    if let Some(gpu) = gpu_core::testing::cuda_backend(crate::modules::ALL) {
        let target = Target::of(&gpu);
        assert_eq!(target.gpus().len(), 1);
        let engine = target.engine(&problem).unwrap();
        let parts = engine
            .setup_parts()
            .expect("the CUDA engine times its setup");
        assert!(
            parts.upload > 0.0 && parts.buffers > 0.0 && parts.prepare > 0.0,
            "{parts:?}"
        );
    }
}

/// The CPU engine, recording which run call the driver made for how many
/// steps; with `no_inputs`, its `run_steps_then_read` returns none (an
/// engine that could not read them), which the driver must then read.
struct Recording {
    inner: cpu::CpuEngine,
    calls: Vec<(&'static str, usize)>,
    no_inputs: bool,
}

impl Engine for Recording {
    fn set_anchors(&mut self, anchors: &[f32], m: usize) -> Result<(), AnnealError> {
        self.inner.set_anchors(anchors, m)
    }
    fn step(&mut self, eta: f32) -> Result<f64, AnnealError> {
        self.inner.step(eta)
    }
    fn run_steps(
        &mut self,
        etas: &[f32],
        tol: f64,
        previous: Option<f64>,
    ) -> Result<Steps, AnnealError> {
        self.calls.push(("run_steps", etas.len()));
        self.inner.run_steps(etas, tol, previous)
    }
    fn run_steps_then_read(
        &mut self,
        etas: &[f32],
        tol: f64,
        previous: Option<f64>,
    ) -> Result<(Steps, Option<MaintenanceInputs>), AnnealError> {
        self.calls.push(("run_steps_then_read", etas.len()));
        let (steps, inputs) = self.inner.run_steps_then_read(etas, tol, previous)?;
        Ok((steps, inputs.filter(|_| !self.no_inputs)))
    }
    fn stats(&mut self) -> Result<AnchorStats, AnnealError> {
        self.calls.push(("stats", 0));
        self.inner.stats()
    }
    fn anchors(&mut self) -> Result<Vec<f32>, AnnealError> {
        self.inner.anchors()
    }
    fn anchor_neighbors(&mut self) -> Result<(Vec<u32>, Vec<f32>), AnnealError> {
        self.inner.anchor_neighbors()
    }
    fn assignments(&mut self) -> Result<Vec<u32>, AnnealError> {
        self.inner.assignments()
    }
}

/// The driver reads a pass's inputs with the run before it
/// (`run_steps_then_read`) exactly when a pass follows the run, reads them
/// itself when the engine returned none, and runs the same either way as
/// with plain runs and reads.
#[test]
fn the_driver_reads_a_passs_inputs_with_the_run_before_it() {
    let (n, d, m) = (3000, 8, 24);
    let points = synthetic_points(n, d, 12, 0.2, 3);
    let params = Params {
        seed: 3,
        tol: 0.0,
        max_iters: 10,
        maintain_every: 4,
        ..Params::default()
    };
    let problem = validate(Points::F32(&points), n, d, m, &params).unwrap();
    let reference = run_with(
        &mut cpu::CpuEngine::new(&problem),
        &problem,
        &mut |_, _, _| {},
    )
    .unwrap();
    for no_inputs in [false, true] {
        let mut engine = Recording {
            inner: cpu::CpuEngine::new(&problem),
            calls: Vec::new(),
            no_inputs,
        };
        let out = run_with(&mut engine, &problem, &mut |_, _, _| {}).unwrap();
        let runs: Vec<_> = engine
            .calls
            .iter()
            .filter(|(c, _)| *c != "stats")
            .copied()
            .collect();
        assert_eq!(
            runs,
            [
                ("run_steps_then_read", 4),
                ("run_steps_then_read", 4),
                ("run_steps", 2)
            ],
            "no_inputs {no_inputs}"
        );
        let reads = engine.calls.iter().filter(|(c, _)| *c == "stats").count();
        assert_eq!(
            reads,
            if no_inputs { 2 } else { 0 },
            "no_inputs {no_inputs}"
        );
        assert_eq!(out.assignments, reference.assignments);
        assert_eq!(out.maintenance, reference.maintenance);
        let bits = |o: &Output| o.history.iter().map(|e| e.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&out), bits(&reference));
    }
}
