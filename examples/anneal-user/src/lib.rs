//! A vector store's two steps over kiln-anneal, as a user's crate writes
//! them: [`train`] fits an index of anchors to a sample held in memory and
//! keeps it in a folder; [`encode_files`] assigns every point of `.npy`
//! files to that index a chunk at a time, so the files may be larger than
//! memory.

use std::path::{Path, PathBuf};

use gpu_core::Backend;
use kiln_anneal::encode::{self, EncodeOutput, Encoded};
use kiln_anneal::index::{Index, RunRecord};
use kiln_anneal::npy::Shards;
use kiln_anneal::{Params, Points};

/// Why a step failed: the library's own errors, kept as they are.
pub type Error = Box<dyn std::error::Error + Send + Sync>;

/// Fits `m` anchors to `sample` (`n × d` f32 values, row-major) on
/// `backend` and writes the index to `dir` (absent, empty, or an earlier
/// index of kiln's).
pub fn train(
    backend: &Backend,
    sample: &[f32],
    d: usize,
    m: usize,
    dir: &Path,
) -> Result<Index, Error> {
    let n = sample.len() / d;
    let params = Params {
        max_iters: 50,
        ..Params::default()
    };
    let problem = kiln_anneal::validate(Points::F32(sample), n, d, m, &params)?;
    let out = kiln_anneal::run(backend, &problem, &mut |_, _, _| {})?;
    let run = match backend.device() {
        Some(gpu) => RunRecord {
            backend: "cuda",
            device: gpu.name.clone(),
            gpus: 1,
            world_size: 1,
        },
        None => RunRecord {
            backend: "cpu",
            device: "cpu".into(),
            gpus: 0,
            world_size: 1,
        },
    };
    let index = Index::from_run(&out, &problem, &run, Vec::new())?;
    index.write(dir, true)?;
    Ok(index)
}

/// Assigns every row of the `.npy` files `inputs` to the index in `dir`,
/// `chunk` rows at a time, and writes each row's anchor to `out` (a 1-D
/// uint32 `.npy`); nothing is left at `out` on an error.
pub fn encode_files(
    backend: &Backend,
    dir: &Path,
    inputs: &[PathBuf],
    chunk: usize,
    out: &Path,
) -> Result<Encoded, Error> {
    let index = Index::read(dir)?;
    let shards = Shards::open(inputs)?;
    let inputs: Vec<&Path> = inputs.iter().map(PathBuf::as_path).collect();
    let output = EncodeOutput::prepare(out, false, &inputs, dir)?;
    let done = encode::encode(
        &index,
        shards.into_chunks(chunk),
        backend,
        output,
        &mut |_, _| {},
    )?;
    Ok(done)
}
