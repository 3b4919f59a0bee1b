//! `--npy FILE...` as every command reads it: the files opened as one
//! matrix by the library ([`Shards::open`]), a refusal naming the flag and
//! the file.

use std::path::PathBuf;

use anyhow::Result;
use kiln_anneal::npy::{Shards, ShardsError};

/// The `--npy` files, checked to make one matrix.
pub(crate) fn open_shards(paths: &[PathBuf]) -> Result<Shards> {
    Shards::open(paths).map_err(npy_error)
}

/// A [`ShardsError`] of `--npy`, naming the flag (the error starts with
/// the file).
pub(crate) fn npy_error(e: ShardsError) -> anyhow::Error {
    match e {
        ShardsError::NoFiles => anyhow::anyhow!("--npy: no file given"),
        other => anyhow::anyhow!("--npy {other}"),
    }
}
