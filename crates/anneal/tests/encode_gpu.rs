//! The encode on CUDA (issue 27): chunks of a tenth of the points give the
//! bits of one piece and of the GPU engine's own assignment step over all
//! of them, for f32, f16 and bf16 points, through the streamed file path
//! and in memory. Skips, saying why, without a usable GPU; fails under
//! KILN_REQUIRE_GPU=1.

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
    Index::from_run(&out, &problem, &record, Vec::new())
}

/// Encodes `files` on `gpu` in chunks of `chunk` rows into `out`.
fn encode_file(
    gpu: &Backend,
    index: &Index,
    files: &[PathBuf],
    out: &Path,
    chunk: usize,
) -> Vec<u32> {
    let shards = Shards::open(files).unwrap();
    let output = EncodeOutput::prepare(out, false, &[], Path::new("no-index")).unwrap();
    encode::encode(
        index,
        shards.into_chunks(chunk),
        gpu,
        output,
        &mut |_, _| {},
    )
    .unwrap();
    kiln_anneal::npy::read_u32_vector(out).unwrap()
}

#[test]
fn gpu_chunks_of_a_tenth_give_the_bits_of_one_piece_and_of_the_engine_step() {
    let Some(gpu) = gpu_core::testing::cuda_backend(cuda_sys::modules::ALL) else {
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
        let tenth = encode_file(
            &gpu,
            &index,
            &[file],
            &dir.path().join(format!("{name}-10.npy")),
            n / 10,
        );
        assert!(
            one == tenth,
            "{name}: chunks of a tenth differ from one piece"
        );
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
