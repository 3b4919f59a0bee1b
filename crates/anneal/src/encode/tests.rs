//! Tests of the encode on the CPU: chunks give the same bits as one piece
//! and as the anneal's own assignment step; the training points reproduce
//! the index's assignments; f16, bf16 and big-endian input; and the
//! refusals (wrong d, missing, empty and damaged shards, a bad coordinate
//! named by its row, every unsafe output) leaving nothing behind; two
//! encodes racing to one file.

use std::fs;
use std::path::{Path, PathBuf};

use gpu_core::Backend;

use super::*;
use crate::engine::Engine;
use crate::index::tests::entries;
use crate::index::{Index, RunRecord};
use crate::npy::Shards;

/// An npy file's bytes: `descr`, `(rows, d)`, then `data`.
fn npy_file(descr: &str, rows: usize, d: usize, data: &[u8]) -> Vec<u8> {
    let dict = crate::npy::tests::dict(descr, &format!("({rows}, {d})"));
    crate::npy::tests::npy_bytes(1, &dict, data)
}

fn f32_le(values: &[f32]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_le_bytes()).collect()
}

/// Writes `values` (`rows × d`) split into `shards` files; returns their paths.
fn write_shards(dir: &Path, name: &str, values: &[f32], d: usize, shards: usize) -> Vec<PathBuf> {
    let rows = values.len() / d;
    (0..shards)
        .map(|s| {
            let part = &values[s * rows / shards * d..(s + 1) * rows / shards * d];
            let path = dir.join(format!("{name}{s}.npy"));
            fs::write(&path, npy_file("<f4", part.len() / d, d, &f32_le(part))).unwrap();
            path
        })
        .collect()
}

/// An index fitted on the CPU to `n × d` synthetic points (`spread`: the
/// blobs' width), with those points.
fn fitted(n: usize, d: usize, m: usize, spread: f32) -> (Index, Vec<f32>) {
    fitted_with(n, d, m, spread, Params::default())
}

fn fitted_with(n: usize, d: usize, m: usize, spread: f32, params: Params) -> (Index, Vec<f32>) {
    let points = crate::synthetic::synthetic_points(n, d, m, spread, 7);
    let problem = crate::input::validate(Points::F32(&points), n, d, m, &params).unwrap();
    let out = crate::run(&Backend::cpu(), &problem, &mut |_, _, _| {}).unwrap();
    let record = RunRecord {
        backend: "cpu",
        device: "cpu".into(),
        gpus: 0,
        world_size: 1,
    };
    (
        Index::from_run(&out, &problem, &record, Vec::new()).unwrap(),
        points,
    )
}

/// Encodes `paths` into `out` in chunks of `chunk` rows.
fn encode_files(
    index: &Index,
    index_dir: &Path,
    paths: &[PathBuf],
    out: &Path,
    replace: bool,
    chunk: usize,
) -> Result<Encoded, EncodeError> {
    let shards = Shards::open(paths).map_err(EncodeError::Shards)?;
    let inputs: Vec<&Path> = paths.iter().map(PathBuf::as_path).collect();
    let output = EncodeOutput::prepare(out, replace, &inputs, index_dir)?;
    encode(
        index,
        shards.into_chunks(chunk),
        &Backend::cpu(),
        output,
        &mut |_, _| {},
    )
}

#[test]
fn chunks_of_a_tenth_give_the_bits_of_one_piece_and_of_the_anneal_step() {
    let (n, d, m) = (3000, 13, 40);
    let (index, _) = fitted(1000, d, m, 0.5);
    // New points, near boundaries as often as not.
    let points = crate::synthetic::synthetic_points(n, d, 3, 1.0, 99);
    let dir = tempfile::tempdir().unwrap();
    let paths = write_shards(dir.path(), "p", &points, d, 3);
    let (whole, tenths) = (dir.path().join("whole.npy"), dir.path().join("tenths.npy"));
    let one = encode_files(&index, &dir.path().join("idx"), &paths, &whole, false, n).unwrap();
    let many = encode_files(
        &index,
        &dir.path().join("idx"),
        &paths,
        &tenths,
        false,
        n / 10,
    )
    .unwrap();
    assert_eq!((one.n, one.chunks, many.n, many.chunks), (n, 1, n, 10));
    assert_eq!(fs::read(&whole).unwrap(), fs::read(&tenths).unwrap());
    let written = crate::npy::read_u32_vector(&tenths).unwrap();
    // The anneal's own assignment step over all the points at once.
    let problem = crate::input::validate(
        Points::F32(&points),
        n,
        d,
        1,
        &Params {
            max_anchors: m,
            ..Params::default()
        },
    )
    .unwrap();
    let mut engine = crate::cpu::CpuEngine::new(&problem);
    engine
        .set_anchors(&index.anchors, index.meta.m as usize)
        .unwrap();
    engine.step(0.0).unwrap();
    assert_eq!(written, engine.assignments().unwrap());
    assert_eq!(
        written,
        assign(&Backend::cpu(), &index, Points::F32(&points)).unwrap()
    );
    assert!(
        written.iter().any(|&a| a != written[0]),
        "one anchor for all"
    );
}

#[test]
fn the_training_points_reproduce_the_index_assignments() {
    // The stored assignments are the last step's, against the anchors
    // before its update. Blobs far apart, run until the temperature is 0
    // (Lloyd's steps) and the assignment is stable: the last update moves
    // no point across a boundary.
    let params = Params {
        max_iters: 300,
        tol: 0.0,
        ..Params::default()
    };
    let (index, points) = fitted_with(2000, 8, 16, 0.01, params);
    let got = assign(&Backend::cpu(), &index, Points::F32(&points)).unwrap();
    assert_eq!(got, index.assignments);
}

#[test]
fn f16_bf16_and_big_endian_shards_are_read_as_the_anneal_reads_them() {
    let (n, d) = (500, 6);
    let (index, _) = fitted(400, d, 10, 0.3);
    let points = crate::synthetic::synthetic_points(n, d, 4, 0.8, 5);
    let dir = tempfile::tempdir().unwrap();
    let f16: Vec<u16> = points
        .iter()
        .map(|v| half::f16::from_f32(*v).to_bits())
        .collect();
    let bf16: Vec<u16> = points
        .iter()
        .map(|v| half::bf16::from_f32(*v).to_bits())
        .collect();
    let le16 = |v: &[u16]| v.iter().flat_map(|b| b.to_le_bytes()).collect::<Vec<u8>>();
    let be32: Vec<u8> = points.iter().flat_map(|v| v.to_be_bytes()).collect();
    for (name, descr, data, expected) in [
        ("f16", "<f2", le16(&f16), Points::F16(&f16)),
        ("bf16", "<V2", le16(&bf16), Points::BF16(&bf16)),
        ("be", ">f4", be32, Points::F32(&points)),
    ] {
        let path = dir.path().join(format!("{name}.npy"));
        fs::write(&path, npy_file(descr, n, d, &data)).unwrap();
        let out = dir.path().join(format!("{name}.out.npy"));
        encode_files(&index, &dir.path().join("idx"), &[path], &out, false, 77).unwrap();
        let want = assign(&Backend::cpu(), &index, expected).unwrap();
        assert_eq!(crate::npy::read_u32_vector(&out).unwrap(), want, "{name}");
    }
}

#[test]
fn bad_inputs_are_refused_and_leave_no_output() {
    let d = 4;
    let (index, _) = fitted(200, d, 5, 0.3);
    let dir = tempfile::tempdir().unwrap();
    let good = write_shards(
        dir.path(),
        "good",
        &crate::synthetic::synthetic_points(90, d, 2, 0.3, 1),
        d,
        1,
    );
    let wide = write_shards(
        dir.path(),
        "wide",
        &crate::synthetic::synthetic_points(9, d + 1, 2, 0.3, 1),
        d + 1,
        1,
    );
    let empty_file = dir.path().join("empty.npy");
    fs::write(&empty_file, b"").unwrap();
    let no_rows = dir.path().join("norows.npy");
    fs::write(&no_rows, npy_file("<f4", 0, d, &[])).unwrap();
    let mut nan = crate::synthetic::synthetic_points(30, d, 2, 0.3, 1);
    nan[25 * d + 2] = f32::NAN;
    let bad = write_shards(dir.path(), "nan", &nan, d, 1);
    let out = dir.path().join("out.npy");
    let missing = dir.path().join("missing.npy");
    let cases: Vec<(Vec<PathBuf>, &str)> = vec![
        (wide.clone(), "d = 5 but the index has d = 4"),
        (vec![good[0].clone(), missing], "missing.npy: No such file"),
        (
            vec![good[0].clone(), empty_file],
            "empty.npy: not an npy file: it is empty",
        ),
        (vec![no_rows.clone()], "no points to encode"),
        // Chunks of 10: the bad row is in the third, named in the whole.
        (vec![good[0].clone(), bad[0].clone()], "point 115 has a NaN"),
    ];
    for (paths, says) in cases {
        let err =
            encode_files(&index, &dir.path().join("idx"), &paths, &out, false, 10).unwrap_err();
        assert!(err.to_string().contains(says), "{paths:?}: {err}");
        assert!(!err.to_string().contains('\n'), "{err}");
        assert!(!out.exists(), "{paths:?} left {}", out.display());
        assert!(!entries(dir.path()).iter().any(|e| e.ends_with(TEMP_SUFFIX)));
    }
    // A shard of no rows among others is no refusal.
    let done = encode_files(
        &index,
        &dir.path().join("idx"),
        &[no_rows, good[0].clone()],
        &out,
        false,
        7,
    )
    .unwrap();
    assert_eq!(done.n, 90);
}

#[test]
fn unsafe_outputs_are_refused_touching_nothing() {
    let d = 3;
    let (index, _) = fitted(100, d, 4, 0.3);
    let dir = tempfile::tempdir().unwrap();
    let index_dir = dir.path().join("idx");
    index.write(&index_dir, false).unwrap();
    let inputs = write_shards(
        dir.path(),
        "in",
        &crate::synthetic::synthetic_points(50, d, 2, 0.3, 3),
        d,
        1,
    );
    let users = dir.path().join("users.npy");
    fs::write(&users, b"the user's own file").unwrap();
    fs::create_dir(dir.path().join("folder")).unwrap();
    let before = entries(dir.path());
    for (out, replace, says) in [
        (users.clone(), false, "already exists"),
        (inputs[0].clone(), true, "is one of the input files"),
        (
            dir.path().join("nowhere/out.npy"),
            false,
            "directory does not exist",
        ),
        (dir.path().join("folder"), true, "is not a regular file"),
        (index_dir.join("codes.npy"), false, "is inside the index"),
    ] {
        let err = encode_files(&index, &index_dir, &inputs, &out, replace, 16).unwrap_err();
        assert!(err.to_string().contains(says), "{}: {err}", out.display());
    }
    assert_eq!(entries(dir.path()), before);
    assert_eq!(fs::read(&users).unwrap(), b"the user's own file");
    // Asked to replace it, the user's file is replaced whole.
    encode_files(&index, &index_dir, &inputs, &users, true, 16).unwrap();
    assert_eq!(crate::npy::read_u32_vector(&users).unwrap().len(), 50);
    assert_eq!(entries(dir.path()), before);
}

/// The output has the mode any new file of the user's has (0666 less the
/// umask), not a temporary file's 0600.
#[test]
#[cfg(unix)]
fn the_output_has_a_new_files_mode() {
    use std::os::unix::fs::PermissionsExt as _;
    let d = 3;
    let (index, _) = fitted(100, d, 4, 0.3);
    let dir = tempfile::tempdir().unwrap();
    let index_dir = dir.path().join("idx");
    index.write(&index_dir, false).unwrap();
    let points = crate::synthetic::synthetic_points(20, d, 2, 0.3, 5);
    let inputs = write_shards(dir.path(), "in", &points, d, 1);
    let out = dir.path().join("codes.npy");
    encode_files(&index, &index_dir, &inputs, &out, false, 8).unwrap();
    let plain = dir.path().join("plain");
    fs::File::create(&plain).unwrap();
    let mode = |p: &Path| fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&out), mode(&plain));
}

#[test]
fn concurrent_encodes_to_one_file_leave_one_whole_result() {
    let d = 5;
    let (index, _) = fitted(300, d, 8, 0.3);
    let dir = tempfile::tempdir().unwrap();
    let inputs = write_shards(
        dir.path(),
        "in",
        &crate::synthetic::synthetic_points(4000, d, 3, 0.5, 4),
        d,
        2,
    );
    let expected = dir.path().join("expected.npy");
    encode_files(
        &index,
        &dir.path().join("idx"),
        &inputs,
        &expected,
        false,
        4000,
    )
    .unwrap();
    for replace in [false, true] {
        let out = dir.path().join(format!("race-{replace}.npy"));
        let results: Vec<Result<Encoded, EncodeError>> = std::thread::scope(|s| {
            let runs: Vec<_> = (0..4)
                .map(|_| {
                    s.spawn(|| {
                        encode_files(&index, &dir.path().join("idx"), &inputs, &out, replace, 300)
                    })
                })
                .collect();
            runs.into_iter().map(|r| r.join().unwrap()).collect()
        });
        let won = results.iter().filter(|r| r.is_ok()).count();
        if replace {
            assert_eq!(won, 4, "{results:?}");
        } else {
            // One wins; each other is refused, before its run or at its
            // rename (never over the winner's file).
            assert_eq!(won, 1, "{results:?}");
            for r in &results {
                if let Err(e) = r {
                    assert!(matches!(e, EncodeError::Exists(_)), "{e}");
                }
            }
        }
        assert_eq!(fs::read(&out).unwrap(), fs::read(&expected).unwrap());
    }
    assert!(!entries(dir.path()).iter().any(|e| e.ends_with(TEMP_SUFFIX)));
}

/// A FIFO at `path` fed `bytes` by a thread (joined by the caller).
fn fifo_fed(path: &Path, bytes: Vec<u8>) -> std::thread::JoinHandle<()> {
    crate::npy::tests::make_fifo(path);
    let path = path.to_path_buf();
    // The reader may stop early (a refusal): a broken pipe is no failure.
    std::thread::spawn(move || {
        let _ = fs::write(path, bytes);
    })
}

#[test]
fn a_pipe_is_streamed_and_its_short_or_long_data_refused() {
    let d = 4;
    let (index, _) = fitted(200, d, 6, 0.3);
    let dir = tempfile::tempdir().unwrap();
    let points = crate::synthetic::synthetic_points(100, d, 3, 0.5, 8);
    let file = npy_file("<f4", 100, d, &f32_le(&points));
    let want = assign(&Backend::cpu(), &index, Points::F32(&points)).unwrap();
    let idx = dir.path().join("idx");
    let cases: [(&str, Vec<u8>, Option<&str>); 3] = [
        ("whole", file.clone(), None),
        (
            "short",
            file[..file.len() - 3].to_vec(),
            Some("the input is truncated: its data needs 1600 bytes but only 1597 are there"),
        ),
        (
            "long",
            [file.clone(), vec![0; 8]].concat(),
            Some("the data after the header is longer"),
        ),
    ];
    for (name, bytes, refusal) in cases {
        let fifo = dir.path().join(format!("{name}.fifo"));
        let out = dir.path().join(format!("{name}.npy"));
        let feeder = fifo_fed(&fifo, bytes);
        let result = encode_files(&index, &idx, &[fifo], &out, false, 30);
        feeder.join().unwrap();
        match refusal {
            None => {
                assert_eq!(result.unwrap().chunks, 4, "{name}");
                assert_eq!(crate::npy::read_u32_vector(&out).unwrap(), want, "{name}");
            }
            Some(says) => {
                let err = result.unwrap_err().to_string();
                assert!(err.contains(says), "{name}: {err}");
                assert!(!out.exists(), "{name}: an output was left");
            }
        }
    }
    assert!(!entries(dir.path()).iter().any(|e| e.ends_with(TEMP_SUFFIX)));
}

#[test]
fn a_chunk_past_the_memory_there_is_is_refused_and_the_default_fits() {
    let (index, _) = fitted(100, 64, 4, 0.3);
    let cpu = Backend::cpu();
    let chunk = default_chunk(&index, Dtype::F32, &cpu);
    assert!((1..=MAX_DEFAULT_CHUNK).contains(&chunk), "{chunk}");
    check_chunk("encode", &index, Dtype::F32, &cpu, chunk).unwrap();
    if crate::memory::host_available().is_some() {
        let err = check_chunk("encode", &index, Dtype::F32, &cpu, 1 << 40).unwrap_err();
        assert!(err.to_string().contains("of host memory"), "{err}");
    }
    let err = check_chunk("encode", &index, Dtype::F32, &cpu, usize::MAX).unwrap_err();
    assert!(err.to_string().contains("more than 16 EiB"), "{err}");
}

#[test]
fn an_index_made_by_hand_that_does_not_add_up_is_refused_not_a_panic() {
    let (index, points) = fitted(100, 3, 4, 0.3);
    for edit in [
        |i: &mut Index| i.anchors.truncate(5),
        |i: &mut Index| i.meta.m = 0,
        |i: &mut Index| i.meta.d = 0,
    ] {
        let mut bad = index.clone();
        edit(&mut bad);
        let err = assign(&Backend::cpu(), &bad, Points::F32(&points)).unwrap_err();
        assert!(!err.to_string().contains('\n'), "{err}");
    }
}

#[test]
fn an_in_memory_index_with_a_nan_or_huge_anchor_is_refused() {
    let (index, points) = fitted(100, 3, 4, 0.3);
    let bound = crate::input::coordinate_bound(3);
    for (value, says) in [
        (f32::NAN, "anchor 2 is NaN at dimension 1".to_string()),
        (f32::INFINITY, "anchor 2 is inf at dimension 1".to_string()),
        (3e38, format!("beyond ±{bound:.3e}")),
    ] {
        let mut bad = index.clone();
        bad.anchors[2 * 3 + 1] = value;
        let err = assign(&Backend::cpu(), &bad, Points::F32(&points)).unwrap_err();
        let err = err.to_string();
        assert!(err.contains(&says), "{err}");
        assert!(!err.contains('\n'), "{err}");
    }
}

/// The encode's output beside a file of its own, `out`, with `index`.
fn encode_to(out: &Path) -> Result<Encoded, EncodeError> {
    let d = 3;
    let dir = out.parent().unwrap();
    let (index, _) = fitted(60, d, 4, 0.3);
    let index_dir = dir.join("idx");
    if !index_dir.exists() {
        index.write(&index_dir, false).unwrap();
    }
    let points = crate::synthetic::synthetic_points(20, d, 2, 0.3, 5);
    let inputs = write_shards(dir, "in", &points, d, 1);
    encode_files(&index, &index_dir, &inputs, out, false, 8)
}

#[test]
fn a_244_byte_output_name_is_taken() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join(format!("{}.npy", "a".repeat(240)));
    encode_to(&out).unwrap();
    assert_eq!(crate::npy::read_u32_vector(&out).unwrap().len(), 20);
    assert!(!entries(dir.path()).iter().any(|e| e.ends_with(TEMP_SUFFIX)));
}

#[test]
fn an_output_path_ending_in_a_slash_is_refused_before_the_run() {
    let dir = tempfile::tempdir().unwrap();
    for tail in ["new.npy/", "new.npy/."] {
        let out = PathBuf::from(format!("{}/{tail}", dir.path().display()));
        let err = EncodeOutput::prepare(&out, true, &[], &dir.path().join("idx")).unwrap_err();
        assert!(matches!(err, EncodeError::NotAFile(_)), "{tail}: {err}");
        assert!(entries(dir.path()).is_empty(), "{tail}: something was made");
    }
}

/// The bytes and mode of every entry of `dir` (links unfollowed).
fn snapshot(dir: &Path) -> Vec<(String, Vec<u8>, u32)> {
    use std::os::unix::fs::PermissionsExt as _;
    entries(dir)
        .into_iter()
        .map(|name| {
            let path = dir.join(&name);
            let meta = fs::symlink_metadata(&path).unwrap();
            let bytes = if meta.is_file() {
                fs::read(&path).unwrap()
            } else {
                Vec::new()
            };
            (name, bytes, meta.permissions().mode())
        })
        .collect()
}

#[test]
fn a_killed_encodes_temp_file_is_removed_and_nothing_else() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    let (index, _) = fitted(60, 3, 4, 0.3);
    index.write(&p.join("idx"), false).unwrap();
    let mut header = Vec::new();
    crate::npy::write_u32_header(&mut header, 1000).unwrap();
    // What a killed encode leaves: its header and some of its values.
    let stale = |name: &str| {
        fs::write(p.join(name), [header.clone(), vec![7; 40]].concat()).unwrap();
    };
    stale(".codes.npy.Xy12ab.kiln-encode.tmp");
    stale(".Q7x9Zk.kiln-encode.tmp");
    // A user's files of the same pattern, a FIFO, a folder and a link to
    // a stale-looking file outside: kept, not followed, not waited on.
    fs::write(p.join(".mine.kiln-encode.tmp"), b"user data").unwrap();
    fs::write(p.join(".short.kiln-encode.tmp"), &header[..20]).unwrap();
    crate::npy::tests::make_fifo(&p.join(".fifo.kiln-encode.tmp"));
    fs::create_dir(p.join(".dir.kiln-encode.tmp")).unwrap();
    let away = tempfile::tempdir().unwrap();
    let target = away.path().join("target");
    fs::write(&target, [header.clone(), vec![7; 40]].concat()).unwrap();
    std::os::unix::fs::symlink(&target, p.join(".link.kiln-encode.tmp")).unwrap();
    // A live encode's file, its header written: held, so kept.
    let mut live = EncodeOutput::prepare(&p.join("live.npy"), false, &[], &p.join("idx")).unwrap();
    crate::npy::write_u32_header(live.writer(), 20).unwrap();
    live.writer().flush().unwrap();
    let before: Vec<_> = snapshot(p)
        .into_iter()
        .filter(|(name, ..)| !name.starts_with(".codes") && !name.starts_with(".Q7x9Zk"))
        .collect();
    let target_before = fs::read(&target).unwrap();
    encode_to(&p.join("codes.npy")).unwrap();
    let after: Vec<_> = snapshot(p)
        .into_iter()
        .filter(|(name, ..)| !["codes.npy", "in0.npy"].contains(&name.as_str()))
        .collect();
    assert_eq!(after, before);
    assert_eq!(fs::read(&target).unwrap(), target_before);
    drop(live);
}

#[test]
fn a_replaced_output_keeps_its_mode() {
    use std::os::unix::fs::PermissionsExt as _;
    let dir = tempfile::tempdir().unwrap();
    let d = 3;
    let (index, _) = fitted(60, d, 4, 0.3);
    let index_dir = dir.path().join("idx");
    index.write(&index_dir, false).unwrap();
    let points = crate::synthetic::synthetic_points(20, d, 2, 0.3, 5);
    let inputs = write_shards(dir.path(), "in", &points, d, 1);
    for mode in [0o600, 0o640, 0o604, 0o755] {
        let out = dir.path().join(format!("codes-{mode:o}.npy"));
        fs::write(&out, b"old").unwrap();
        fs::set_permissions(&out, fs::Permissions::from_mode(mode)).unwrap();
        encode_files(&index, &index_dir, &inputs, &out, true, 8).unwrap();
        assert_eq!(crate::npy::read_u32_vector(&out).unwrap().len(), 20);
        let now = fs::metadata(&out).unwrap().permissions().mode() & 0o7777;
        assert_eq!(now, mode, "{mode:o} became {now:o}");
    }
}
