//! The encode on CUDA (issue 27), all through its chunk assigner (the one
//! CUDA path of `encode::encode` and `encode::assign`): chunks of a tenth
//! of the points, chunks that are no multiple of the kernels' 128-point
//! tiles with a partial last chunk, and one chunk past the input give the
//! bits of one piece and of the GPU engine's own assignment step over all
//! of them, for f32, f16 and bf16 points, through the streamed file path
//! and in memory; a bad row far into the stream is named and leaves no
//! output. Run with `KILN_ANNEAL_TC=0` too for the SIMT kernel's path (the
//! engine's step then takes it as well). Skips, saying why, without a
//! usable GPU; fails under KILN_REQUIRE_GPU=1.

use std::fs;
use std::path::{Path, PathBuf};

use gpu_core::Backend;
use kiln_anneal::encode::{self, EncodeOutput};
use kiln_anneal::index::{Index, RunRecord};
use kiln_anneal::npy::Shards;
use kiln_anneal::{Engine, Params, Points};

/// An `.npy` file of `rows × d` elements given as little-endian bytes.
fn npy(descr: &str, rows: usize, d: usize, data: &[u8]) -> Vec<u8> {
    let dict = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': ({rows}, {d}), }}");
    let unpadded = 10 + dict.len() + 1;
    let header_len = dict.len() + 1 + unpadded.next_multiple_of(64) - unpadded;
    let mut out = b"\x93NUMPY\x01\x00".to_vec();
    out.extend((header_len as u16).to_le_bytes());
    out.extend(dict.bytes());
    out.resize(10 + header_len - 1, b' ');
    out.push(b'\n');
    out.extend(data);
    out
}

/// An index fitted on `gpu` to `n × d` synthetic points.
fn fitted(gpu: &Backend, n: usize, d: usize, m: usize) -> Index {
    let points = kiln_anneal::synthetic_points(n, d, m, 0.4, 11);
    let problem = kiln_anneal::validate(Points::F32(&points), n, d, m, &Params::default()).unwrap();
    let out = kiln_anneal::run(gpu, &problem, &mut |_, _, _| {}).unwrap();
    let record = RunRecord {
        backend: "cuda",
        device: "gpu".into(),
        gpus: 1,
        world_size: 1,
    };
    Index::from_run(&out, &problem, &record, Vec::new()).unwrap()
}

/// Encodes `files` on `gpu` in chunks of `chunk` rows into `out`; the
/// encode's error, or what it wrote (checked against the chunks it says
/// it made).
fn try_encode(
    gpu: &Backend,
    index: &Index,
    files: &[PathBuf],
    out: &Path,
    chunk: usize,
) -> Result<Vec<u32>, encode::EncodeError> {
    let shards = Shards::open(files).unwrap();
    let n = shards.n();
    let value_bytes = shards.dtype().size() as usize;
    let output = EncodeOutput::prepare(out, false, &[], Path::new("no-index")).unwrap();
    let mut seen = Vec::new();
    let done = encode::encode(
        index,
        shards.into_chunks(chunk),
        gpu,
        output,
        &mut |done, total| seen.push((done, total)),
    )?;
    // A chunk of more rows than 8 MiB holds starts with a smaller
    // page-locked buffer (`FIRST_STAGE_BYTES`), which always takes the
    // first read: the first progress report is its rows. How many reads
    // follow depends on how soon the whole-chunk buffers are page-locked
    // (each read takes a chunk's rows from where the last ended), never
    // fewer than the chunks.
    let first_rows = ((8usize << 20) / (index.meta.d as usize * value_bytes)).max(1);
    if chunk.min(n) <= first_rows {
        assert_eq!((done.n, done.chunks), (n, n.div_ceil(chunk)));
    } else {
        assert_eq!(seen.first(), Some(&(first_rows, n)), "{done:?}");
        assert!(done.n == n && done.chunks >= n.div_ceil(chunk), "{done:?}");
    }
    assert_eq!(seen.last(), Some(&(n, n)));
    Ok(kiln_anneal::npy::read_u32_vector(out).unwrap())
}

fn encode_file(
    gpu: &Backend,
    index: &Index,
    files: &[PathBuf],
    out: &Path,
    chunk: usize,
) -> Vec<u32> {
    try_encode(gpu, index, files, out, chunk).unwrap()
}

/// A chunk larger than the first page-locked buffer (8 MiB): the first
/// read fills that buffer with part of the chunk, the next ones go on
/// from there, and the output is the same bits as small chunks'.
#[test]
fn gpu_a_first_buffer_smaller_than_the_chunk_gives_the_same_bits() {
    let Some(gpu) = gpu_core::testing::cuda_backend(kiln_anneal::modules::ALL) else {
        return;
    };
    let (n, d, m) = (100_003, 96, 64); // 38 MB of f32: 8 MiB holds 21845 rows
    let index = fitted(&gpu, 4000, d, m);
    let points = kiln_anneal::synthetic_points(n, d, 9, 1.0, 3);
    let bytes: Vec<u8> = points.iter().flat_map(|v| v.to_le_bytes()).collect();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("x.npy");
    fs::write(&file, npy("<f4", n, d, &bytes)).unwrap();
    let files = std::slice::from_ref(&file);
    let small = encode_file(&gpu, &index, files, &dir.path().join("small.npy"), 5000);
    for chunk in [n, 40_000] {
        let big = encode_file(
            &gpu,
            &index,
            files,
            &dir.path().join(format!("{chunk}.npy")),
            chunk,
        );
        assert!(big == small, "chunks of {chunk} differ from chunks of 5000");
    }
    assert!(encode::assign(&gpu, &index, Points::F32(&points)).unwrap() == small);
}

#[test]
fn gpu_chunks_of_a_tenth_give_the_bits_of_one_piece_and_of_the_engine_step() {
    let Some(gpu) = gpu_core::testing::cuda_backend(kiln_anneal::modules::ALL) else {
        return;
    };
    // d not a multiple of 32, m not a multiple of the 128-wide tile.
    let (n, d, m) = (20_000, 37, 131);
    let index = fitted(&gpu, 4000, d, m);
    let points = kiln_anneal::synthetic_points(n, d, 7, 1.0, 5);
    let f16: Vec<u16> = points
        .iter()
        .map(|v| half::f16::from_f32(*v).to_bits())
        .collect();
    let bf16: Vec<u16> = points
        .iter()
        .map(|v| half::bf16::from_f32(*v).to_bits())
        .collect();
    let le16 = |v: &[u16]| v.iter().flat_map(|b| b.to_le_bytes()).collect::<Vec<u8>>();
    let le32: Vec<u8> = points.iter().flat_map(|v| v.to_le_bytes()).collect();
    let dir = tempfile::tempdir().unwrap();
    for (name, descr, bytes, given) in [
        ("f32", "<f4", le32, Points::F32(&points)),
        ("f16", "<f2", le16(&f16), Points::F16(&f16)),
        ("bf16", "<V2", le16(&bf16), Points::BF16(&bf16)),
    ] {
        let file = dir.path().join(format!("{name}.npy"));
        fs::write(&file, npy(descr, n, d, &bytes)).unwrap();
        let one = encode_file(
            &gpu,
            &index,
            std::slice::from_ref(&file),
            &dir.path().join(format!("{name}-1.npy")),
            n,
        );
        // A tenth; no multiple of 128 with a last chunk of 5 rows; one
        // row short of the tile (158 chunks: each buffer reused 79 times);
        // one chunk larger than the input.
        for chunk in [n / 10, 1333, 127, n + 5] {
            let chunked = encode_file(
                &gpu,
                &index,
                std::slice::from_ref(&file),
                &dir.path().join(format!("{name}-{chunk}.npy")),
                chunk,
            );
            assert!(
                one == chunked,
                "{name}: chunks of {chunk} differ from one piece"
            );
        }
        // The GPU engine's own assignment step over all the points.
        let params = Params {
            max_anchors: index.meta.m as usize,
            ..Params::default()
        };
        let problem = kiln_anneal::validate(given, n, d, 1, &params).unwrap();
        let mut engine = kiln_anneal::gpu::GpuEngine::new(&gpu, &problem).unwrap();
        engine
            .set_anchors(&index.anchors, index.meta.m as usize)
            .unwrap();
        engine.step(0.0).unwrap();
        assert!(
            engine.assignments().unwrap() == one,
            "{name}: differs from the engine's step"
        );
        let in_memory = encode::assign(&gpu, &index, given).unwrap();
        assert!(in_memory == one, "{name}: in memory differs");
        println!("{name}: {n} points, {} anchors used", {
            let mut used = one.clone();
            used.sort_unstable();
            used.dedup();
            used.len()
        });
    }
}

#[test]
fn gpu_a_bad_row_far_into_the_stream_is_named_and_leaves_no_output() {
    let Some(gpu) = gpu_core::testing::cuda_backend(kiln_anneal::modules::ALL) else {
        return;
    };
    let (n, d, m) = (5000, 37, 40);
    let index = fitted(&gpu, 2000, d, m);
    let dir = tempfile::tempdir().unwrap();
    // Row 4001 is in the fourth chunk of 1333, read while the third is
    // assigned: the error comes with kernels in flight.
    for (row, says) in [(4001, "point 4001 has a NaN"), (0, "point 0 has a NaN")] {
        let mut points = kiln_anneal::synthetic_points(n, d, 7, 1.0, 5);
        points[row * d + 3] = f32::NAN;
        let le32: Vec<u8> = points.iter().flat_map(|v| v.to_le_bytes()).collect();
        let file = dir.path().join(format!("nan-{row}.npy"));
        fs::write(&file, npy("<f4", n, d, &le32)).unwrap();
        let out = dir.path().join(format!("out-{row}.npy"));
        let err = try_encode(&gpu, &index, &[file], &out, 1333).unwrap_err();
        assert!(err.to_string().contains(says), "{err}");
        assert!(!out.exists(), "{} was left", out.display());
        let temporary = fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .find(|name| name.ends_with(encode::TEMP_SUFFIX));
        assert_eq!(temporary, None);
    }
    // The device is still usable after both: a clean encode gives the
    // in-memory bits.
    let points = kiln_anneal::synthetic_points(n, d, 7, 1.0, 5);
    let le32: Vec<u8> = points.iter().flat_map(|v| v.to_le_bytes()).collect();
    let file = dir.path().join("clean.npy");
    fs::write(&file, npy("<f4", n, d, &le32)).unwrap();
    let streamed = encode_file(&gpu, &index, &[file], &dir.path().join("c.npy"), 1333);
    let in_memory = encode::assign(&gpu, &index, Points::F32(&points)).unwrap();
    assert!(streamed == in_memory, "streamed differs from in memory");
}
