//! Tests of the anneal index: the writer and reader round-trip, the
//! output directory's refusals (nothing touched) and replacement, the reader's refusals of corrupt
//! indexes, the input hash's independence from the sharding, and the error
//! measures against hand-computed values.

use super::*;
use crate::vocab::Params;

fn meta(n: u64, d: u64, m: u64) -> IndexMeta {
    IndexMeta {
        schema: SCHEMA.to_string(),
        version: VERSION,
        n,
        d,
        m,
        iterations: 2,
        energy_history: vec![3.0, 2.5],
        energy: 2.25,
        params: Params::default(),
        seed: 0,
        maintenance: vec![MaintenanceRecord {
            iteration: 1,
            merged: 0,
            split: 1,
        }],
        backend: "cpu".into(),
        device: "cpu (1 threads)".into(),
        gpus: 0,
        world_size: 1,
        kiln_version: "0.1.0".into(),
        input: InputRecord {
            dtype: "float32".into(),
            hash_algorithm: HASH_ALGORITHM.into(),
            hash: "0".repeat(32),
            files: vec![InputFile {
                path: "a.npy".into(),
                rows: n,
            }],
        },
    }
}

/// 4 points of 2 dims, 2 anchors.
fn small_index() -> Index {
    Index {
        meta: meta(4, 2, 2),
        anchors: vec![0.0, 0.0, 10.0, 10.0],
        assignments: vec![0, 0, 1, 1],
    }
}

/// The names in `dir`, sorted (a leftover temporary file shows here).
pub(crate) fn entries(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn an_index_round_trips_and_leaves_no_temp_files() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("idx");
    let index = small_index();
    index.write(&dir, false).unwrap();
    assert_eq!(
        entries(&dir),
        [
            kiln_output::MARKER,
            ANCHORS_FILE,
            ASSIGNMENTS_FILE,
            META_FILE
        ]
    );
    assert_eq!(entries(root.path()), ["idx"]);
    assert_eq!(Index::read(&dir).unwrap(), index);
    // The arrays are plain .npy files the input reader takes too.
    let anchors = npy::read(dir.join(ANCHORS_FILE)).unwrap();
    assert_eq!((anchors.n, anchors.d), (2, 2));
}

#[test]
fn a_directory_that_is_not_an_index_is_refused_untouched() {
    let root = tempfile::tempdir().unwrap();
    let index = small_index();
    // A web app's folder with its own index.json, with and without --force.
    let app = root.path().join("app");
    fs::create_dir(&app).unwrap();
    fs::write(app.join(META_FILE), r#"{"name": "my-app"}"#).unwrap();
    fs::write(app.join("main.js"), "x").unwrap();
    // An index of another program's schema beside its arrays, and an
    // index with a file of the user's in it.
    let lookalike = root.path().join("lookalike");
    fs::create_dir(&lookalike).unwrap();
    for file in [ANCHORS_FILE, ASSIGNMENTS_FILE] {
        fs::write(lookalike.join(file), "x").unwrap();
    }
    fs::write(lookalike.join(META_FILE), r#"{"schema": "other"}"#).unwrap();
    let mine = root.path().join("mine");
    index.write(&mine, false).unwrap();
    fs::write(mine.join("notes.txt"), "keep").unwrap();
    let before: Vec<_> = [&app, &lookalike, &mine].map(|d| entries(d)).into();
    for replace in [false, true] {
        for dir in [&app, &lookalike] {
            let err = index.write(dir, replace).unwrap_err();
            assert!(matches!(err, IndexError::Output(_)), "{err}");
            assert!(
                err.to_string()
                    .contains("which kiln did not write; give a new or empty folder"),
                "{err}"
            );
        }
        let err = index.write(&mine, replace).unwrap_err();
        assert!(
            err.to_string()
                .contains("holds `notes.txt`, which kiln did not write"),
            "{err}"
        );
    }
    let after: Vec<_> = [&app, &lookalike, &mine].map(|d| entries(d)).into();
    assert_eq!(before, after);
    assert_eq!(entries(root.path()), ["app", "lookalike", "mine"]);
}

#[test]
fn an_earlier_index_is_replaced_only_when_asked_and_an_empty_directory_is_taken() {
    let root = tempfile::tempdir().unwrap();
    let index = small_index();
    let other = root.path().join("other");
    index.write(&other, false).unwrap();
    assert!(matches!(
        index.write(&other, false),
        Err(IndexError::Exists(_))
    ));
    let mut newer = small_index();
    newer.assignments = vec![1, 1, 1, 0];
    newer.write(&other, true).unwrap();
    assert_eq!(Index::read(&other).unwrap(), newer);
    assert_eq!(entries(root.path()), ["other"]);

    // An index an older kiln wrote (no marker) is kiln's too.
    fs::remove_file(other.join(kiln_output::MARKER)).unwrap();
    assert!(matches!(
        index.write(&other, false),
        Err(IndexError::Exists(_))
    ));
    index.write(&other, true).unwrap();
    assert_eq!(Index::read(&other).unwrap(), index);

    // An empty directory is taken without replacing; a missing parent is
    // named before anything is written.
    let empty = root.path().join("empty");
    fs::create_dir(&empty).unwrap();
    index.write(&empty, false).unwrap();
    assert_eq!(Index::read(&empty).unwrap(), index);
    let orphan = root.path().join("no/such/idx");
    assert!(matches!(
        prepare_output(&orphan, false, &[], LIBRARY_TOOL),
        Err(IndexError::NoParent(_))
    ));
    // A directory holding an input is refused.
    let input = empty.join(ANCHORS_FILE);
    let err = prepare_output(&empty, true, &[&input], LIBRARY_TOOL).unwrap_err();
    assert!(
        err.to_string().contains("give an output folder of its own"),
        "{err}"
    );
    assert_eq!(entries(root.path()), ["empty", "other"]);
}

/// The index's marker names the writer its caller gave, and the library's
/// own name where the caller gave none: never a binary of kiln's.
#[test]
fn the_marker_names_the_tool_the_caller_passes() {
    let index = small_index();
    let root = tempfile::tempdir().unwrap();
    let marker = |dir: &Path| fs::read_to_string(dir.join(kiln_output::MARKER)).unwrap();
    let mine = root.path().join("mine");
    let out = prepare_output(&mine, false, &[], "vector-store train").unwrap();
    index.write_into(out).unwrap();
    assert!(
        marker(&mine).contains("tool = \"vector-store train\""),
        "{}",
        marker(&mine)
    );
    assert_eq!(Index::read(&mine).unwrap(), index);
    let plain = root.path().join("plain");
    index.write(&plain, false).unwrap();
    assert!(
        marker(&plain).contains("tool = \"kiln-anneal\""),
        "{}",
        marker(&plain)
    );
}

/// Writes `index` and rewrites one of its files with `edit`; returns the
/// reader's message.
fn corrupt(index: &Index, edit: impl FnOnce(&Path)) -> String {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("idx");
    index.write(&dir, false).unwrap();
    edit(&dir);
    let message = Index::read(&dir).unwrap_err().to_string();
    assert_eq!(message.lines().count(), 1, "{message}");
    message
}

fn rewrite_meta(dir: &Path, edit: impl FnOnce(&mut serde_json::Value)) {
    let path = dir.join(META_FILE);
    let mut value: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(&path).unwrap()).unwrap();
    edit(&mut value);
    fs::write(path, value.to_string()).unwrap();
}

#[test]
fn corrupt_indexes_are_refused_in_one_line() {
    let index = small_index();
    let out_of_range = corrupt(&index, |dir| {
        let mut w = File::create(dir.join(ASSIGNMENTS_FILE)).unwrap();
        npy::write_u32_vector(&mut w, &[0, 1, 2, 0]).unwrap();
    });
    assert!(
        out_of_range.contains("point 2 is assigned to anchor 2, but there are 2 anchors"),
        "{out_of_range}"
    );
    let short = corrupt(&index, |dir| {
        let mut w = File::create(dir.join(ASSIGNMENTS_FILE)).unwrap();
        npy::write_u32_vector(&mut w, &[0, 1, 1]).unwrap();
    });
    assert!(
        short.contains("holds 3 assignments but index.json says n = 4"),
        "{short}"
    );
    let shape = corrupt(&index, |dir| {
        let mut w = File::create(dir.join(ANCHORS_FILE)).unwrap();
        npy::write_f32_matrix(&mut w, 1, 4, &[0.0; 4]).unwrap();
    });
    assert!(
        shape.contains("is 1 x 4 but index.json says m = 2, d = 2"),
        "{shape}"
    );
    let truncated = corrupt(&index, |dir| {
        let path = dir.join(ANCHORS_FILE);
        let bytes = fs::read(&path).unwrap();
        fs::write(&path, &bytes[..bytes.len() - 3]).unwrap();
    });
    assert!(truncated.contains("truncated"), "{truncated}");
    let floats = corrupt(&index, |dir| {
        let mut w = File::create(dir.join(ASSIGNMENTS_FILE)).unwrap();
        npy::write_f32_matrix(&mut w, 4, 1, &[0.0; 4]).unwrap();
    });
    assert!(floats.contains("expected a 1-D uint32 array"), "{floats}");
    let version = corrupt(&index, |dir| {
        rewrite_meta(dir, |v| v["version"] = 99.into())
    });
    assert!(
        version.contains("index version 99 is not supported"),
        "{version}"
    );
    let schema = corrupt(&index, |dir| {
        rewrite_meta(dir, |v| v["schema"] = "x".into())
    });
    assert!(schema.contains("not an anneal index"), "{schema}");
    let missing = corrupt(&index, |dir| {
        rewrite_meta(dir, |v| {
            v.as_object_mut().unwrap().remove("energy");
        })
    });
    assert!(missing.contains("missing field `energy`"), "{missing}");
    let history = corrupt(&index, |dir| {
        rewrite_meta(dir, |v| v["iterations"] = 5.into())
    });
    assert!(history.contains("2 energies for 5 iterations"), "{history}");
    let gone = corrupt(&index, |dir| {
        fs::remove_file(dir.join(ANCHORS_FILE)).unwrap()
    });
    assert!(gone.contains(ANCHORS_FILE), "{gone}");
}

#[test]
fn the_input_hash_ignores_the_sharding_but_not_the_values_or_type() {
    let values: Vec<f32> = (0..24).map(|i| i as f32 * 0.5).collect();
    let whole = input_hash(Points::F32(&values), 6, 4);
    let parts = [
        Points::F32(&values[..8]),
        Points::F32(&values[8..12]),
        Points::F32(&values[12..]),
    ];
    assert_eq!(input_hash(Points::Parts(&parts), 6, 4), whole);
    assert_eq!(whole.len(), 32);
    let mut changed = values.clone();
    changed[23] = 0.25;
    assert_ne!(input_hash(Points::F32(&changed), 6, 4), whole);
    // The same shape read as 3 x 8 is other data.
    assert_ne!(input_hash(Points::F32(&values), 3, 8), whole);
    let bits: Vec<u16> = (0..24).collect();
    assert_ne!(
        input_hash(Points::F16(&bits), 6, 4),
        input_hash(Points::BF16(&bits), 6, 4)
    );
}

#[test]
fn energy_and_reconstruction_match_hand_computed_values() {
    let points = [1.0f32, 0.0, 0.0, 2.0, 10.0, 13.0, 10.0, 10.0];
    let mut index = small_index();
    // Squared errors: 1, 4, 9, 0.
    let mse = energy(Points::F32(&points), 2, &index.anchors, &index.assignments).unwrap();
    assert_eq!(mse, 14.0 / 4.0);
    index.meta.energy = mse;
    let r = Reconstruction::measure(&index, Points::F32(&points)).unwrap();
    assert_eq!(r.mse, 3.5);
    assert_eq!((r.max_squared_error, r.max_point), (9.0, 2));
    assert_eq!(r.energy_relative_difference, 0.0);
    // Anchor 0: (1 + 4) / 2; anchor 1: (9 + 0) / 2.
    assert_eq!(
        r.anchor_mse,
        Spread {
            min: 2.5,
            median: 2.5,
            max: 4.5
        }
    );
    index.assignments = vec![0, 0, 0, 0];
    let (members, empty) = member_spread(&index).unwrap();
    assert_eq!((members.min, members.max, empty), (0.0, 4.0, 1));
}

#[test]
fn the_energy_sum_does_not_depend_on_the_thread_count() {
    let (n, d, m) = (3 * measure::BLOCK + 17, 3, 5);
    let points = crate::synthetic::synthetic_points(n, d, m, 0.5, 9);
    let anchors = &points[..m * d];
    let assignments: Vec<u32> = (0..n as u32).map(|i| i % m as u32).collect();
    let on = |threads| {
        rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap()
            .install(|| energy(Points::F32(&points), d, anchors, &assignments).unwrap())
    };
    let one = on(1);
    assert_eq!(one.to_bits(), on(3).to_bits());
    let naive: f64 = (0..n)
        .map(|i| {
            let a = assignments[i] as usize;
            (0..d)
                .map(|k| (f64::from(points[i * d + k]) - f64::from(anchors[a * d + k])).powi(2))
                .sum::<f64>()
        })
        .sum::<f64>()
        / n as f64;
    assert!((one - naive).abs() <= 1e-12 * naive, "{one} vs {naive}");
}

#[test]
fn check_input_refuses_other_points_in_one_line() {
    let points = [1.0f32, 0.0, 0.0, 2.0, 10.0, 13.0, 10.0, 10.0];
    let mut index = small_index();
    index.meta.input.hash = input_hash(Points::F32(&points), 4, 2);
    index.check_input(Points::F32(&points), 4, 2).unwrap();
    let mut other = points;
    other[0] = 1.5;
    let err = index.check_input(Points::F32(&other), 4, 2).unwrap_err();
    assert!(err.to_string().contains("xxh3-128 hash is"), "{err}");
    let err = index.check_input(Points::F32(&points), 2, 4).unwrap_err();
    assert!(
        err.to_string().contains("it is 2 x 4, the index 4 x 2"),
        "{err}"
    );
    let bits = [0u16; 8];
    let err = index.check_input(Points::BF16(&bits), 4, 2).unwrap_err();
    assert!(
        err.to_string()
            .contains("it is bfloat16, the index was made from float32"),
        "{err}"
    );
}

#[test]
fn huge_finite_anchors_are_refused_by_read_and_write_with_the_bound() {
    let bound = crate::input::coordinate_bound(2);
    let index = small_index();
    // 3e38 is finite, but its squared distances overflow f32: points would
    // land on it.
    let huge = corrupt(&index, |dir| {
        let mut w = File::create(dir.join(ANCHORS_FILE)).unwrap();
        npy::write_f32_matrix(&mut w, 2, 2, &[0.0, 0.0, 3e38, 0.0]).unwrap();
    });
    assert!(
        huge.contains("anchors.npy: anchor 1 has coordinate 3e38 at dimension 0")
            && huge.contains(&format!("beyond ±{bound:.3e}")),
        "{huge}"
    );
    let root = tempfile::tempdir().unwrap();
    for value in [3e38, bound * 1.01, f32::NAN, f32::NEG_INFINITY] {
        let mut bad = small_index();
        bad.anchors[3] = value;
        let dir = root.path().join("idx");
        let err = bad.write(&dir, false).unwrap_err();
        assert!(matches!(err, IndexError::Invalid { .. }), "{err}");
        assert!(err.to_string().contains("anchor 1"), "{err}");
        assert!(!dir.exists(), "{value}: something was written");
    }
    // At the bound itself the index is written and read back.
    let mut edge = small_index();
    edge.anchors[3] = -bound;
    let dir = root.path().join("edge");
    edge.write(&dir, false).unwrap();
    assert_eq!(Index::read(&dir).unwrap(), edge);
}

#[test]
fn an_index_read_would_refuse_is_not_written() {
    let root = tempfile::tempdir().unwrap();
    type Edit = fn(&mut Index);
    let edits: [(Edit, &str); 5] = [
        (|i| i.assignments[0] = 2, "point 0 is assigned to anchor 2"),
        (
            |i| i.assignments.pop().map(drop).unwrap(),
            "holds 3 assignments",
        ),
        (|i| i.meta.energy = f64::NAN, "energy NaN"),
        (|i| i.meta.iterations = 1, "2 energies for 1 iterations"),
        (|i| i.anchors.push(1.0), "5 anchor values for m = 2, d = 2"),
    ];
    for (edit, says) in edits {
        let mut bad = small_index();
        edit(&mut bad);
        let dir = root.path().join("idx");
        let err = bad.write(&dir, false).unwrap_err().to_string();
        assert!(err.contains(says), "{err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(!dir.exists(), "{says}: something was written");
    }
}

mod write_read {
    use super::*;
    use proptest::prelude::*;

    /// Indexes of every shape, mostly valid, with values anywhere in f32
    /// and f64 (NaN, infinities, subnormals, huge finite ones).
    fn any_index() -> impl Strategy<Value = Index> {
        (1u64..6, 1u64..4)
            .prop_flat_map(|(n, d)| (Just(n), Just(d), 1..=n))
            .prop_flat_map(|(n, d, m)| {
                let values = (m * d) as usize;
                let anchor = prop_oneof![
                    8 => -1e3f32..1e3,
                    1 => proptest::num::f32::ANY,
                ];
                let energy = prop_oneof![
                    8 => 0f64..1e6,
                    1 => proptest::num::f64::ANY,
                ];
                (
                    Just((n, d, m)),
                    proptest::collection::vec(anchor, values),
                    proptest::collection::vec(0..m as u32 + 1, n as usize),
                    proptest::collection::vec(energy.clone(), 1..4),
                    energy,
                    0.01f32..1.0,
                    any::<u64>(),
                )
            })
            .prop_map(
                |((n, d, m), anchors, assignments, history, e, cooling, seed)| {
                    let mut meta = meta(n, d, m);
                    meta.iterations = history.len() as u32;
                    meta.energy_history = history;
                    meta.energy = e;
                    meta.params.cooling = cooling;
                    meta.params.seed = seed;
                    meta.seed = seed;
                    meta.maintenance.clear();
                    Index {
                        meta,
                        anchors,
                        assignments,
                    }
                },
            )
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]
        /// The measures of any index against any points: a result when the
        /// index is one `read` takes and the points its shape, a typed
        /// refusal otherwise, never a panic (an assignment past the
        /// anchors indexed out of bounds).
        #[test]
        fn measures_refuse_what_they_cannot_measure(
            index in any_index(),
            extra in 0usize..3,
            last in 0u32..8,
        ) {
            let (n, d) = (index.meta.n as usize, index.meta.d as usize);
            let points: Vec<f32> = (0..(n * d + extra).saturating_sub(1)).map(|i| i as f32).collect();
            let mut index = index;
            if let Some(a) = index.assignments.last_mut() {
                *a = last;
            }
            let valid = index.check().is_ok();
            let shaped = points.len() == n * d;
            let got = Reconstruction::measure(&index, Points::F32(&points));
            prop_assert_eq!(got.is_ok(), valid && shaped, "{:?}", got.err());
            prop_assert_eq!(member_spread(&index).is_ok(), valid);
            let in_range = index.assignments.iter().all(|&a| u64::from(a) < index.meta.m)
                && index.anchors.len() as u64 == index.meta.m * index.meta.d;
            let e = energy(Points::F32(&points), d, &index.anchors, &index.assignments);
            prop_assert_eq!(e.is_ok(), in_range && shaped, "{:?}", e.err());
        }

        /// What `write` writes, `read` reads back equal; what it refuses,
        /// it refuses as invalid, writing nothing.
        #[test]
        fn what_write_writes_read_reads_back_equal(index in any_index()) {
            let root = tempfile::tempdir().unwrap();
            let dir = root.path().join("idx");
            match index.write(&dir, false) {
                Ok(_) => prop_assert_eq!(Index::read(&dir).unwrap(), index),
                Err(e) => {
                    prop_assert!(matches!(e, IndexError::Invalid { .. }), "{}", e);
                    prop_assert!(!dir.exists());
                }
            }
        }
    }
}

#[test]
fn an_index_file_that_is_a_fifo_is_refused_at_once() {
    for file in [META_FILE, ANCHORS_FILE, ASSIGNMENTS_FILE] {
        let message = corrupt(&small_index(), |dir| {
            crate::npy::tests::make_fifo(&dir.join(file))
        });
        assert!(
            message.contains(&format!("{file}: is a FIFO, not a regular file")),
            "{message}"
        );
    }
}

#[test]
fn an_index_json_past_its_bound_is_refused_unread() {
    let message = corrupt(&small_index(), |dir| {
        // Sparse: the size is checked, not the bytes read.
        let file = File::options()
            .write(true)
            .open(dir.join(META_FILE))
            .unwrap();
        file.set_len(META_MAX_BYTES + 1).unwrap();
    });
    assert!(
        message.contains("index.json: is over 64 MiB, more than an index's metadata"),
        "{message}"
    );
}

/// The permission bits of `dir`'s index files.
fn file_modes(dir: &Path) -> Vec<u32> {
    use std::os::unix::fs::PermissionsExt as _;
    [ANCHORS_FILE, ASSIGNMENTS_FILE, META_FILE]
        .map(|f| fs::metadata(dir.join(f)).unwrap().permissions().mode() & 0o777)
        .into()
}

#[test]
fn index_files_keep_the_mode_of_what_they_replace_and_of_their_folder() {
    use std::os::unix::fs::PermissionsExt as _;
    let root = tempfile::tempdir().unwrap();
    let index = small_index();
    // An earlier index whose files were made private: replaced, they stay so.
    let private = root.path().join("private");
    index.write(&private, false).unwrap();
    for (file, mode) in [
        (ANCHORS_FILE, 0o600),
        (ASSIGNMENTS_FILE, 0o640),
        (META_FILE, 0o604),
    ] {
        fs::set_permissions(private.join(file), fs::Permissions::from_mode(mode)).unwrap();
    }
    index.write(&private, true).unwrap();
    assert_eq!(file_modes(&private), [0o600, 0o640, 0o604]);
    // An empty folder of the user's at 0700: its files are not readable
    // by others either (the folder itself is kiln-output's to keep).
    let empty = root.path().join("empty");
    fs::create_dir(&empty).unwrap();
    fs::set_permissions(&empty, fs::Permissions::from_mode(0o700)).unwrap();
    index.write(&empty, false).unwrap();
    assert!(
        file_modes(&empty).iter().all(|m| m & 0o077 == 0),
        "{:?}",
        file_modes(&empty)
            .iter()
            .map(|m| format!("{m:o}"))
            .collect::<Vec<_>>()
    );
    // A new folder: a new file's mode, as before.
    let new = root.path().join("new");
    index.write(&new, false).unwrap();
    let plain = root.path().join("plain");
    File::create(&plain).unwrap();
    let mode = fs::metadata(&plain).unwrap().permissions().mode() & 0o777;
    assert_eq!(file_modes(&new), [mode; 3]);
}
