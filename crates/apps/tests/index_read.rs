//! Reading an index back (`Index::read`, and `apps decode` over it) against
//! damaged files: impossible metadata (world_size 0, sizes 0, counts that do
//! not add up, unknown names, negative energies) and non-finite anchors,
//! each refused in one line naming the field, through one `check` helper;
//! and a property test: any field set to any value, or any byte of any of
//! the three files changed or cut, is read back whole and possible or
//! refused in one line, never a panic.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use kiln_anneal::index::{Index, ANCHORS_FILE, ASSIGNMENTS_FILE, META_FILE};
use proptest::prelude::*;
use serde_json::{json, Value};

mod cli_support;

use cli_support::{apps, npy, refused};

const N: usize = 300;
const D: usize = 4;

/// The good index and the points it was made from.
struct Good {
    idx: PathBuf,
    points: PathBuf,
}

/// The good index, written once for the whole suite by `apps anneal`.
fn good() -> &'static Good {
    static GOOD: OnceLock<Good> = OnceLock::new();
    GOOD.get_or_init(|| {
        // A static is never dropped: under cargo's temp dir for tests, not
        // the system's, it is left where `cargo clean` takes it. On a GPU
        // host (the bundle) that folder of the build machine's does not
        // exist: the system's temp dir then.
        let target_tmp = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"));
        let root = if target_tmp.is_dir() {
            tempfile::tempdir_in(target_tmp)
        } else {
            tempfile::tempdir()
        }
        .unwrap()
        .keep();
        let values = kiln_anneal::synthetic_points(N, D, 5, 0.25, 11);
        let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        let points = root.join("p.npy");
        fs::write(&points, npy("<f4", N, D, &bytes)).unwrap();
        let idx = root.join("idx");
        let out = apps()
            .args(["anneal", "--backend", "cpu", "--m", "6", "--iters", "8"])
            .args([
                "--npy",
                points.to_str().unwrap(),
                "--out",
                idx.to_str().unwrap(),
            ])
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        Good { idx, points }
    })
}

/// A copy of the good index in a fresh temp dir.
fn copy_of_good() -> (tempfile::TempDir, PathBuf) {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("idx");
    fs::create_dir(&dir).unwrap();
    for file in [META_FILE, ANCHORS_FILE, ASSIGNMENTS_FILE] {
        fs::copy(good().idx.join(file), dir.join(file)).unwrap();
    }
    (root, dir)
}

fn meta_of(dir: &Path) -> Value {
    serde_json::from_str(&fs::read_to_string(dir.join(META_FILE)).unwrap()).unwrap()
}

/// Sets the field at JSON pointer `at` of `dir`'s index.json to `value`.
fn set_field(dir: &Path, at: &str, value: Value) {
    let mut meta = meta_of(dir);
    *meta
        .pointer_mut(at)
        .unwrap_or_else(|| panic!("no field {at}")) = value;
    fs::write(dir.join(META_FILE), meta.to_string()).unwrap();
}

/// Sets anchor `row`'s value at `dim` in `dir`'s anchors.npy.
fn set_anchor(dir: &Path, row: usize, dim: usize, value: f32) {
    let path = dir.join(ANCHORS_FILE);
    let mut bytes = fs::read(&path).unwrap();
    let header = 10 + u16::from_le_bytes([bytes[8], bytes[9]]) as usize;
    let at = header + (row * D + dim) * 4;
    bytes[at..at + 4].copy_from_slice(&value.to_le_bytes());
    fs::write(path, bytes).unwrap();
}

/// Damages a copy of the good index with `damage` and checks that
/// `Index::read` and `apps decode` (with and without the points) refuse it
/// in one line saying `says`.
#[track_caller]
fn check(damage: impl FnOnce(&Path), says: &str) {
    let (_root, dir) = copy_of_good();
    damage(&dir);
    let err = Index::read(&dir).expect_err(says).to_string();
    assert!(err.contains(says), "{err:?} does not say {says:?}");
    assert!(!err.contains('\n'), "{err}");
    let dir = dir.to_str().unwrap();
    refused(&["decode", dir], 1, says);
    refused(
        &["decode", dir, "--npy", good().points.to_str().unwrap()],
        1,
        says,
    );
}

#[test]
fn the_good_index_reads_and_decodes() {
    let index = Index::read(&good().idx).unwrap();
    assert_eq!((index.meta.n, index.meta.d), (N as u64, D as u64));
    let idx = good().idx.to_str().unwrap();
    let out = apps()
        .args(["decode", idx, "--npy", good().points.to_str().unwrap()])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    assert!(
        text.contains("reconstruction: mean squared error"),
        "{text}"
    );
    assert!(!text.contains("NaN"), "{text}");
}

#[test]
fn impossible_metadata_is_refused_naming_the_field() {
    let field = |at: &'static str, value: Value| move |dir: &Path| set_field(dir, at, value);
    let cases: Vec<(&str, Value, &str)> = vec![
        ("/world_size", json!(0), "world_size = 0 is not in 1..=300"),
        ("/world_size", json!(301), "world_size = 301"),
        ("/world_size", json!(-1), "not a valid index"),
        ("/n", json!(0), "no points (n = 0)"),
        ("/n", json!(1u64 << 40), "is over u32::MAX"),
        ("/d", json!(0), "points have no dimensions (d = 0)"),
        ("/m", json!(0), "m = 0: an index has at least one anchor"),
        (
            "/m",
            json!(5_000_000_000u64),
            "m = 5000000000 is over u32::MAX",
        ),
        (
            "/energy",
            json!(-1.0),
            "energy -1 is not a finite value >= 0",
        ),
        ("/energy", Value::Null, "not a valid index"),
        ("/energy", json!("NaN"), "not a valid index"),
        ("/energy_history/0", json!(-2.5), "energy_history[0] = -2.5"),
        ("/iterations", json!(0), "iterations = 0 is not in 1..=8"),
        ("/iterations", json!(9), "iterations = 9 is not in 1..=8"),
        ("/seed", json!(12345), "seed 12345 differs from params.seed"),
        (
            "/params/tol",
            json!(-1.0),
            "tol -1 is not a finite value >= 0",
        ),
        ("/params/cooling", json!(0.0), "cooling 0 is not in (0, 1]"),
        (
            "/params/t0",
            json!(-1.0),
            "t0 -1 is not a finite temperature",
        ),
        (
            "/params/max_iters",
            json!(0),
            "max_iters must be at least 1",
        ),
        (
            "/params/max_anchors",
            json!(2),
            "m = 6 is above params.max_anchors = 2",
        ),
        (
            "/maintenance",
            json!([{"iteration": 9, "merged": 0, "split": 1}]),
            "maintenance[0].iteration = 9",
        ),
        (
            "/maintenance",
            json!([{"iteration": 5, "merged": 0, "split": 1}, {"iteration": 5, "merged": 1, "split": 0}]),
            "maintenance[1].iteration = 5",
        ),
        ("/backend", json!("tpu"), "backend \"tpu\" is none of"),
        ("/gpus", json!(2), "gpus = 2 for backend \"cpu\""),
        (
            "/input/dtype",
            json!("int8"),
            "input.dtype \"int8\" is none of",
        ),
        (
            "/input/hash_algorithm",
            json!("md5"),
            "input.hash_algorithm \"md5\"",
        ),
        ("/input/hash", json!("xyz"), "input.hash \"xyz\" is not 32"),
        (
            "/input/hash",
            json!("0123456789ABCDEF0123456789abcdef"),
            "is not 32 lower-case hex digits",
        ),
        (
            "/input/files",
            json!([{"path": "p.npy", "rows": 299}]),
            "input.files hold 299 rows in all, but n = 300",
        ),
        (
            "/input/files",
            json!([{"path": "a", "rows": u64::MAX}, {"path": "b", "rows": 2}]),
            "input.files hold more than 2^64 rows",
        ),
        ("/schema", json!("kiln.other"), "not an anneal index"),
        ("/version", json!(0), "index version 0 is not supported"),
    ];
    for (at, value, says) in cases {
        check(field(at, value), says);
    }
}

#[test]
fn non_finite_anchors_and_arrays_that_do_not_agree_are_refused() {
    check(
        |dir| set_anchor(dir, 2, 1, f32::NAN),
        "anchors.npy: anchor 2 is NaN at dimension 1",
    );
    check(
        |dir| set_anchor(dir, 0, 0, f32::INFINITY),
        "anchor 0 is inf at dimension 0",
    );
    check(
        |dir| set_anchor(dir, 5, 3, f32::NEG_INFINITY),
        "anchor 5 is -inf at dimension 3",
    );
    // Anchors' count and the metadata's m disagree.
    check(
        |dir| set_field(dir, "/m", json!(5)),
        "but index.json says m = 5",
    );
    check(
        |dir| {
            set_field(dir, "/n", json!(299));
            set_field(dir, "/input/files/0/rows", json!(299));
        },
        "holds 300 assignments but index.json says n = 299",
    );
    check(
        |dir| set_field(dir, "/energy_history", json!([1.0])),
        "index.json has 1 energies for",
    );
}

/// Where a mutation lands.
#[derive(Debug, Clone)]
enum Damage {
    /// Field `at` of index.json set to a value.
    Field(&'static str, Value),
    /// Byte `at` (modulo the length) of file `file` set to `byte`.
    Byte(usize, usize, u8),
    /// File `file` cut to `at` (modulo its length) bytes.
    Cut(usize, usize),
}

const FIELDS: [&str; 16] = [
    "/n",
    "/d",
    "/m",
    "/iterations",
    "/energy",
    "/energy_history/0",
    "/seed",
    "/world_size",
    "/gpus",
    "/backend",
    "/params/max_iters",
    "/params/max_anchors",
    "/params/cooling",
    "/input/dtype",
    "/input/hash",
    "/maintenance",
];

const FILES: [&str; 3] = [META_FILE, ANCHORS_FILE, ASSIGNMENTS_FILE];

fn value() -> impl Strategy<Value = Value> {
    prop_oneof![
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        (0u64..400).prop_map(Value::from),
        any::<f64>().prop_map(Value::from),
        Just(Value::Null),
        "[a-z0-9]{0,40}".prop_map(Value::from),
        Just(json!([])),
        Just(json!({})),
    ]
}

fn damage() -> impl Strategy<Value = Damage> {
    prop_oneof![
        (prop::sample::select(&FIELDS[..]), value()).prop_map(|(at, v)| Damage::Field(at, v)),
        (0..3usize, any::<usize>(), any::<u8>()).prop_map(|(f, at, b)| Damage::Byte(f, at, b)),
        (0..3usize, any::<usize>()).prop_map(|(f, at)| Damage::Cut(f, at)),
    ]
}

fn apply(dir: &Path, damage: &Damage) {
    match damage {
        Damage::Field(at, value) => set_field(dir, at, value.clone()),
        Damage::Byte(file, at, byte) => {
            let path = dir.join(FILES[*file]);
            let mut bytes = fs::read(&path).unwrap();
            let at = at % bytes.len();
            bytes[at] = *byte;
            fs::write(path, bytes).unwrap();
        }
        Damage::Cut(file, at) => {
            let path = dir.join(FILES[*file]);
            let bytes = fs::read(&path).unwrap();
            fs::write(&path, &bytes[..at % bytes.len()]).unwrap();
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// Whatever the damage, the reader gives back an index that a run could
    /// have written (its parts agree and every number is usable) or one
    /// line of refusal; never a panic.
    #[test]
    fn a_damaged_index_is_read_whole_and_possible_or_refused(damage in damage()) {
        let (_root, dir) = copy_of_good();
        apply(&dir, &damage);
        match Index::read(&dir) {
            Ok(index) => {
                let meta = &index.meta;
                prop_assert!(meta.n >= 1 && meta.d >= 1 && meta.m >= 1);
                prop_assert!(meta.world_size >= 1 && u64::from(meta.world_size) <= meta.n);
                prop_assert_eq!(index.anchors.len() as u64, meta.m * meta.d);
                prop_assert_eq!(index.assignments.len() as u64, meta.n);
                prop_assert!(index.assignments.iter().all(|&a| u64::from(a) < meta.m));
                prop_assert!(index.anchors.iter().all(|v| v.is_finite()));
                prop_assert!(meta.energy.is_finite() && meta.energy >= 0.0);
                prop_assert!(meta.energy_history.iter().all(|e| e.is_finite() && *e >= 0.0));
                prop_assert_eq!(meta.energy_history.len(), meta.iterations as usize);
            }
            Err(e) => {
                let text = e.to_string();
                prop_assert!(!text.contains('\n'), "{}", text);
                prop_assert!(!text.is_empty());
            }
        }
    }
}
