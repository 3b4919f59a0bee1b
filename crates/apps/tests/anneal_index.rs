//! `apps anneal --out DIR` and `apps decode` (issue 18): the index written,
//! read back and its energy recomputed from it; shards against one file;
//! `--force` (the output folder's refusals are in `anneal_out.rs`); f32, f16 and bf16 input; the
//! decode report and its refusals of corrupt indexes. On the CPU backend,
//! and on CUDA too where a GPU is usable (`skipped:` otherwise).

use std::fs;
use std::path::{Path, PathBuf};

use kiln_anneal::index::{Index, ANCHORS_FILE, ASSIGNMENTS_FILE, META_FILE};

mod cli_support;

use cli_support::{apps, npy, refused, refused_line};

/// Runs `apps args`; returns stdout, panicking with stderr on failure.
#[track_caller]
fn ok(args: &[&str]) -> String {
    let out = apps().args(args).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{args:?}: {stderr}");
    String::from_utf8(out.stdout).unwrap()
}

/// The element types, with each value's bytes and its exact f32 value.
#[derive(Clone, Copy, Debug)]
enum Ty {
    F32,
    F16,
    BF16,
}

impl Ty {
    fn descr(self) -> &'static str {
        match self {
            Ty::F32 => "<f4",
            Ty::F16 => "<f2",
            Ty::BF16 => "<V2",
        }
    }
    fn bytes(self, values: &[f32]) -> Vec<u8> {
        match self {
            Ty::F32 => values.iter().flat_map(|v| v.to_le_bytes()).collect(),
            Ty::F16 => values
                .iter()
                .flat_map(|v| half::f16::from_f32(*v).to_le_bytes())
                .collect(),
            Ty::BF16 => values
                .iter()
                .flat_map(|v| half::bf16::from_f32(*v).to_le_bytes())
                .collect(),
        }
    }
    /// The values as the file holds them, widened to f32.
    fn exact(self, values: &[f32]) -> Vec<f32> {
        match self {
            Ty::F32 => values.to_vec(),
            Ty::F16 => values
                .iter()
                .map(|v| half::f16::from_f32(*v).to_f32())
                .collect(),
            Ty::BF16 => values
                .iter()
                .map(|v| half::bf16::from_f32(*v).to_f32())
                .collect(),
        }
    }
}

/// Writes `values` (`n × d`) as shards of `rows` rows each (the last takes
/// the rest); returns their paths.
fn shards(
    dir: &Path,
    name: &str,
    ty: Ty,
    values: &[f32],
    d: usize,
    rows: &[usize],
) -> Vec<PathBuf> {
    let n = values.len() / d;
    let mut paths = Vec::new();
    let mut start = 0;
    for (i, &r) in rows
        .iter()
        .chain([&(n - rows.iter().sum::<usize>())])
        .enumerate()
    {
        let path = dir.join(format!("{name}{i}.npy"));
        let part = &values[start * d..(start + r) * d];
        fs::write(&path, npy(ty.descr(), r, d, &ty.bytes(part))).unwrap();
        paths.push(path);
        start += r;
    }
    paths
}

fn points(n: usize, d: usize, seed: u64) -> Vec<f32> {
    kiln_anneal::synthetic_points(n, d, 6, 0.3, seed)
}

/// The backends to run on: the CPU, and CUDA where a GPU is usable.
fn backends() -> Vec<&'static str> {
    let mut backends = vec!["cpu"];
    if gpu_core::testing::cuda_backend(kiln_anneal::modules::ALL).is_some() {
        backends.push("cuda");
    }
    backends
}

/// `anneal --backend B --npy FILES --m M --out DIR [extra]`.
fn anneal_out(backend: &str, files: &[PathBuf], m: usize, out: &Path, extra: &[&str]) -> String {
    let mut args = vec![
        "anneal".to_string(),
        "--backend".into(),
        backend.into(),
        "--npy".into(),
    ];
    args.extend(files.iter().map(|p| p.display().to_string()));
    args.extend([
        "--m".into(),
        m.to_string(),
        "--out".into(),
        out.display().to_string(),
    ]);
    args.extend(extra.iter().map(|s| s.to_string()));
    ok(&args.iter().map(String::as_str).collect::<Vec<_>>())
}

/// The mean squared distance of each point to its stored anchor, in f64,
/// computed here independently of the library's sum.
fn recomputed_energy(values: &[f32], d: usize, index: &Index) -> f64 {
    let total: f64 = index
        .assignments
        .iter()
        .enumerate()
        .map(|(i, &a)| {
            let anchor = &index.anchors[a as usize * d..(a as usize + 1) * d];
            values[i * d..(i + 1) * d]
                .iter()
                .zip(anchor)
                .map(|(&x, &c)| (f64::from(x) - f64::from(c)).powi(2))
                .sum::<f64>()
        })
        .sum();
    total / index.assignments.len() as f64
}

fn file_args(files: &[PathBuf]) -> Vec<String> {
    files.iter().map(|p| p.display().to_string()).collect()
}

#[test]
fn out_writes_an_index_that_recomputes_its_energy() {
    let root = tempfile::tempdir().unwrap();
    let (n, d, m) = (1500, 12, 16);
    let values = points(n, d, 3);
    let files = shards(root.path(), "p", Ty::F32, &values, d, &[700, 300]);
    for backend in backends() {
        let dir = root.path().join(format!("index-{backend}"));
        let stdout = anneal_out(backend, &files, m, &dir, &[]);
        assert!(stdout.contains("index: "), "{stdout}");
        assert_eq!(
            listing(&dir),
            [
                kiln_output::MARKER,
                ANCHORS_FILE,
                ASSIGNMENTS_FILE,
                META_FILE
            ]
        );
        let index = Index::read(&dir).unwrap();
        let meta = &index.meta;
        assert_eq!((meta.n, meta.d), (n as u64, d as u64));
        assert_eq!(meta.backend, backend);
        assert_eq!(index.anchors.len() as u64, meta.m * meta.d);
        assert_eq!(meta.energy_history.len(), meta.iterations as usize);
        assert_eq!(meta.input.files.len(), 3);
        let energy = recomputed_energy(&values, d, &index);
        let rel = (energy - meta.energy).abs() / meta.energy;
        println!(
            "{backend}: stored {} recomputed {energy} ({rel:.1e})",
            meta.energy
        );
        assert!(
            rel <= 1e-6,
            "{backend}: energy {energy} vs {} ({rel:e})",
            meta.energy
        );
        // The stored anchors are the last update's: with the assignments
        // held, the update only lowers the last iteration's energy.
        let last = *meta.energy_history.last().unwrap();
        assert!(
            meta.energy <= last * (1.0 + 1e-5),
            "{} > {last}",
            meta.energy
        );
        // decode says the same.
        let mut args = vec![
            "decode".to_string(),
            dir.display().to_string(),
            "--json".into(),
            "--npy".into(),
        ];
        args.extend(file_args(&files));
        let report: serde_json::Value =
            serde_json::from_str(&ok(&args.iter().map(String::as_str).collect::<Vec<_>>()))
                .unwrap();
        let mse = report["reconstruction"]["mse"].as_f64().unwrap();
        assert!((mse - meta.energy).abs() <= 1e-9 * meta.energy, "{report}");
        assert_eq!(report["m"].as_u64(), Some(meta.m));
    }
}

#[test]
fn shards_and_one_file_give_identical_indexes_and_input_hashes() {
    let root = tempfile::tempdir().unwrap();
    let (n, d, m) = (900, 7, 10);
    let values = points(n, d, 4);
    let one = shards(root.path(), "one", Ty::F32, &values, d, &[]);
    let three = shards(root.path(), "three", Ty::F32, &values, d, &[1, 450]);
    let (a, b) = (root.path().join("a"), root.path().join("b"));
    anneal_out("cpu", &one, m, &a, &[]);
    anneal_out("cpu", &three, m, &b, &[]);
    for file in [ANCHORS_FILE, ASSIGNMENTS_FILE] {
        assert_eq!(
            fs::read(a.join(file)).unwrap(),
            fs::read(b.join(file)).unwrap(),
            "{file}"
        );
    }
    let (mut ia, mut ib) = (Index::read(&a).unwrap(), Index::read(&b).unwrap());
    assert_eq!(ia.meta.input.hash, ib.meta.input.hash);
    assert_eq!(
        ib.meta
            .input
            .files
            .iter()
            .map(|f| f.rows)
            .collect::<Vec<_>>(),
        [1, 450, 449]
    );
    ia.meta.input.files.clear();
    ib.meta.input.files.clear();
    assert_eq!(ia, ib);
    // Another seed is another index of the same input.
    let c = root.path().join("c");
    anneal_out("cpu", &one, m, &c, &["--seed", "7"]);
    let ic = Index::read(&c).unwrap();
    assert_eq!(ic.meta.input.hash, ia.meta.input.hash);
    assert_ne!(ic.assignments, ia.assignments);
}

/// The names in `dir`, sorted.
fn listing(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn force_replaces_an_index_and_out_needs_a_run_that_writes_one() {
    // The folder's refusals are tests/anneal_out.rs's.
    let root = tempfile::tempdir().unwrap();
    let values = points(300, 4, 5);
    let files = shards(root.path(), "p", Ty::F32, &values, 4, &[]);
    let file = files[0].display().to_string();
    let idx = root.path().join("idx");
    anneal_out("cpu", &files, 5, &idx, &[]);
    let before = fs::read(idx.join(ASSIGNMENTS_FILE)).unwrap();
    let idx_arg = idx.display().to_string();
    refused_line(
        &format!("anneal --backend cpu --npy {file} --m 5 --seed 9 --out {idx_arg}"),
        1,
        "already exists",
    );
    assert_eq!(fs::read(idx.join(ASSIGNMENTS_FILE)).unwrap(), before);
    anneal_out("cpu", &files, 5, &idx, &["--seed", "9", "--force"]);
    assert_eq!(Index::read(&idx).unwrap().meta.seed, 9);
    assert_ne!(fs::read(idx.join(ASSIGNMENTS_FILE)).unwrap(), before);
    // No temp directory is left beside it.
    assert_eq!(listing(root.path()), ["idx", "p0.npy"]);
    // A missing parent is refused before the run.
    let orphan = root.path().join("no/idx").display().to_string();
    refused_line(
        &format!("anneal --backend cpu --npy {file} --m 5 --out {orphan}"),
        1,
        "does not exist; create it first",
    );
    refused(&["anneal", "--force"], 2, "--out");
    refused(&["anneal", "--compare", "--out", &idx_arg], 2, "--out");
}

#[test]
fn mismatched_shards_are_refused_naming_the_file() {
    let root = tempfile::tempdir().unwrap();
    let a = shards(root.path(), "a", Ty::F32, &points(50, 4, 1), 4, &[]);
    let b = shards(root.path(), "b", Ty::F32, &points(50, 5, 1), 5, &[]);
    let c = shards(root.path(), "c", Ty::F16, &points(50, 4, 1), 4, &[]);
    let (a, b, c) = (
        a[0].display().to_string(),
        b[0].display().to_string(),
        c[0].display().to_string(),
    );
    refused(
        &["anneal", "--backend", "cpu", "--npy", &a, &b],
        1,
        &format!("--npy {b}: d = 5, but {a} has d = 4"),
    );
    refused(
        &["anneal", "--backend", "cpu", "--npy", &a, &c],
        1,
        &format!("--npy {c}: dtype float16, but {a} is float32"),
    );
    let missing = root.path().join("missing.npy").display().to_string();
    refused(
        &["anneal", "--backend", "cpu", "--npy", &a, &missing],
        1,
        &format!("--npy {missing}"),
    );
}

#[test]
fn f16_and_bf16_inputs_give_the_index_of_their_exact_values() {
    let root = tempfile::tempdir().unwrap();
    let (n, d, m) = (800, 9, 12);
    let values = points(n, d, 8);
    for backend in backends() {
        for ty in [Ty::F16, Ty::BF16] {
            let name = format!("{ty:?}-{backend}");
            let low = shards(root.path(), &format!("{name}-low"), ty, &values, d, &[333]);
            let wide = shards(
                root.path(),
                &format!("{name}-wide"),
                Ty::F32,
                &ty.exact(&values),
                d,
                &[],
            );
            let (a, b) = (
                root.path().join(format!("{name}-a")),
                root.path().join(format!("{name}-b")),
            );
            anneal_out(backend, &low, m, &a, &[]);
            anneal_out(backend, &wide, m, &b, &[]);
            let (ia, ib) = (Index::read(&a).unwrap(), Index::read(&b).unwrap());
            let expected = match ty {
                Ty::F16 => "float16",
                _ => "bfloat16",
            };
            assert_eq!(ia.meta.input.dtype, expected);
            assert_ne!(ia.meta.input.hash, ib.meta.input.hash);
            if backend == "cpu" {
                assert_eq!(
                    (&ia.anchors, &ia.assignments),
                    (&ib.anchors, &ib.assignments),
                    "{name}"
                );
            } else {
                // The GPU sums in its own order: the same run within rounding
                // (the tolerance of the GPU-against-CPU tests).
                let rel = (ia.meta.energy - ib.meta.energy).abs() / ib.meta.energy;
                assert!(
                    rel <= 1e-3,
                    "{name}: {} vs {}",
                    ia.meta.energy,
                    ib.meta.energy
                );
            }
            let energy = recomputed_energy(&ty.exact(&values), d, &ia);
            assert!((energy - ia.meta.energy).abs() <= 1e-6 * energy, "{name}");
        }
    }
}

#[test]
fn decode_reports_and_refuses_corrupt_indexes_in_one_line() {
    let root = tempfile::tempdir().unwrap();
    let (n, d, m) = (400, 6, 8);
    let values = points(n, d, 2);
    let files = shards(root.path(), "p", Ty::F32, &values, d, &[100]);
    let idx = root.path().join("idx");
    anneal_out("cpu", &files, m, &idx, &[]);
    let idx_arg = idx.display().to_string();
    let mut args = vec!["decode".to_string(), idx_arg.clone(), "--npy".into()];
    args.extend(file_args(&files));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let text = ok(&args);
    for says in [
        "400 points x 6 dims",
        "members per anchor: min",
        "reconstruction: mean squared error",
        "max squared error",
        "per-anchor mean squared distance: min",
    ] {
        assert!(text.contains(says), "{text}");
    }
    let alone = ok(&["decode", &idx_arg]);
    assert!(
        alone.contains("give the original points with --npy"),
        "{alone}"
    );
    // The same rows split otherwise are the same input.
    let other_split = shards(root.path(), "q", Ty::F32, &values, d, &[399]);
    let mut split_args = vec!["decode".to_string(), idx_arg.clone(), "--npy".into()];
    split_args.extend(file_args(&other_split));
    ok(&split_args.iter().map(String::as_str).collect::<Vec<_>>());
    // Other points are refused.
    let mut changed = values.clone();
    changed[5] += 1.0;
    let other = shards(root.path(), "r", Ty::F32, &changed, d, &[]);
    let other_arg = other[0].display().to_string();
    refused(
        &["decode", &idx_arg, "--npy", &other_arg],
        1,
        "the input does not match the index",
    );
    // Corruptions, each refused in one line.
    let assignments = fs::read(idx.join(ASSIGNMENTS_FILE)).unwrap();
    let mut bad = assignments.clone();
    let at = bad.len() - 4;
    bad[at..].copy_from_slice(&(m as u32 + 3).to_le_bytes());
    fs::write(idx.join(ASSIGNMENTS_FILE), &bad).unwrap();
    refused(
        &args,
        1,
        &format!("point {} is assigned to anchor {}", n - 1, m + 3),
    );
    fs::write(
        idx.join(ASSIGNMENTS_FILE),
        &assignments[..assignments.len() - 4],
    )
    .unwrap();
    refused(&args, 1, "truncated");
    fs::write(idx.join(ASSIGNMENTS_FILE), &assignments).unwrap();
    let meta_text = fs::read_to_string(idx.join(META_FILE)).unwrap();
    fs::write(
        idx.join(META_FILE),
        meta_text.replace("\"d\": 6", "\"d\": 3"),
    )
    .unwrap();
    refused(&args, 1, "but index.json says m = ");
    let mut meta: serde_json::Value = serde_json::from_str(&meta_text).unwrap();
    meta["energy"] = (meta["energy"].as_f64().unwrap() * 1.01).into();
    fs::write(idx.join(META_FILE), meta.to_string()).unwrap();
    refused(&args, 1, "the energy recomputed from the index");
    ok(&["decode", &idx_arg]);
    refused(
        &["decode", root.path().join("nothing").to_str().unwrap()],
        1,
        "index.json",
    );
}
