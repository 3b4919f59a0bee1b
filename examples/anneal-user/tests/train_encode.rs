//! The library from outside kiln's workspace, on the CPU: train on a sample,
//! keep the index on disk, encode files in chunks of a tenth and in one
//! piece, and get the same bits as assigning in memory.

use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};

use anneal_user::{encode_files, train};
use gpu_core::Backend;
use kiln_anneal::index::Index;
use kiln_anneal::npy::{read_u32_vector, write_f32_matrix};
use kiln_anneal::{encode, synthetic_points, Points};

const D: usize = 16;

fn write_npy(path: &Path, values: &[f32]) {
    let mut w = BufWriter::new(File::create(path).unwrap());
    write_f32_matrix(&mut w, values.len() / D, D, values).unwrap();
}

#[test]
fn trains_on_a_sample_and_encodes_files_in_chunks_with_the_bits_of_one_piece() {
    let tmp = tempfile::tempdir().unwrap();
    let cpu = Backend::cpu();
    let sample = synthetic_points(2000, D, 8, 0.25, 1);
    let dir = tmp.path().join("index");
    let index = train(&cpu, &sample, D, 8, &dir).unwrap();
    assert_eq!(Index::read(&dir).unwrap().anchors, index.anchors);

    // 5000 new points in two files, encoded a tenth at a time and whole.
    let points = synthetic_points(5000, D, 8, 0.25, 2);
    let (a, b) = points.split_at(3000 * D);
    let inputs: Vec<PathBuf> = vec![tmp.path().join("a.npy"), tmp.path().join("b.npy")];
    write_npy(&inputs[0], a);
    write_npy(&inputs[1], b);
    let tenth = tmp.path().join("tenth.npy");
    let whole = tmp.path().join("whole.npy");
    let done = encode_files(&cpu, &dir, &inputs, 500, &tenth).unwrap();
    assert_eq!((done.n, done.chunks), (5000, 10));
    encode_files(&cpu, &dir, &inputs, 5000, &whole).unwrap();
    let codes = read_u32_vector(&tenth).unwrap();
    assert_eq!(codes, read_u32_vector(&whole).unwrap());
    assert_eq!(
        codes,
        encode::assign(&cpu, &index, Points::F32(&points)).unwrap()
    );
    assert!(codes.iter().all(|&c| u64::from(c) < index.meta.m));
}

#[test]
fn an_existing_output_is_refused_and_left_as_it_was() {
    let tmp = tempfile::tempdir().unwrap();
    let cpu = Backend::cpu();
    let dir = tmp.path().join("index");
    train(&cpu, &synthetic_points(500, D, 4, 0.25, 3), D, 4, &dir).unwrap();
    let input = tmp.path().join("x.npy");
    write_npy(&input, &synthetic_points(100, D, 4, 0.25, 4));
    let out = tmp.path().join("mine.npy");
    std::fs::write(&out, b"a file of the user's").unwrap();
    let err = encode_files(&cpu, &dir, &[input], 10, &out).unwrap_err();
    assert!(err.to_string().contains("already exists"), "{err}");
    assert_eq!(std::fs::read(&out).unwrap(), b"a file of the user's");
}

/// The backend a user builds from kiln-anneal's own modules (no crate of
/// kiln's kernels in between): CUDA where a GPU can run them, else the CPU;
/// either way it trains and encodes with the CPU's bits of the assignment.
#[test]
fn the_anneal_runs_on_a_backend_of_its_own_modules() {
    let backend = Backend::auto(kiln_anneal::modules::ALL).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("index");
    let sample = synthetic_points(1000, D, 4, 0.25, 5);
    let index = train(&backend, &sample, D, 4, &dir).unwrap();
    let points = synthetic_points(300, D, 4, 0.25, 6);
    assert_eq!(
        encode::assign(&backend, &index, Points::F32(&points)).unwrap(),
        encode::assign(&Backend::cpu(), &index, Points::F32(&points)).unwrap()
    );
}
