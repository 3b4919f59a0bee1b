//! `--npy FILE...`: the shards' headers read and checked against each other
//! (the same d and dtype, refused naming the file) before any data is
//! touched, then each memory-mapped (or read, for pipes and big-endian
//! data) and seen as one matrix, rows in the order given.

use std::fs::File;
use std::io::BufReader;
use std::path::PathBuf;

use anyhow::{Context, Result};
use kiln_anneal::index::InputFile;
use kiln_anneal::npy::{self, Dtype, NpyInput, NpyShard};
use kiln_anneal::Points;

/// The shards' checked headers.
pub(crate) struct Shards {
    headers: Vec<(PathBuf, NpyInput<BufReader<File>>)>,
    /// Rows, all shards together.
    pub(crate) n: usize,
    /// Columns.
    pub(crate) d: usize,
    /// The element type.
    pub(crate) dtype: Dtype,
}

/// Opens every file in `paths` and checks that they make one matrix.
pub(crate) fn open(paths: &[PathBuf]) -> Result<Shards> {
    let mut headers: Vec<(PathBuf, NpyInput<BufReader<File>>)> = Vec::with_capacity(paths.len());
    let mut n = 0usize;
    for path in paths {
        let shown = path.display();
        let input = npy::open(path).with_context(|| format!("--npy {shown}"))?;
        if let Some((first, head)) = headers.first() {
            let first = first.display();
            if input.d != head.d {
                anyhow::bail!(
                    "--npy {shown}: d = {}, but {first} has d = {}; every file must have the same d",
                    input.d,
                    head.d
                );
            }
            if input.dtype != head.dtype {
                anyhow::bail!(
                    "--npy {shown}: dtype {}, but {first} is {}; every file must have the same dtype",
                    input.dtype.name(),
                    head.dtype.name()
                );
            }
        }
        n = n
            .checked_add(input.n)
            .with_context(|| format!("--npy {shown}: the files' rows overflow"))?;
        headers.push((path.clone(), input));
    }
    let (d, dtype) = headers
        .first()
        .map(|(_, h)| (h.d, h.dtype))
        .context("--npy: no file given")?;
    Ok(Shards {
        headers,
        n,
        d,
        dtype,
    })
}

impl Shards {
    /// Bytes of host memory the data will take: 0 for mapped files.
    pub(crate) fn held_bytes(&self) -> u64 {
        self.headers
            .iter()
            .map(|(_, h)| npy::map::read_bytes(h))
            .sum()
    }

    /// `--npy a.npy b.npy (n x d dtype)`, for messages.
    pub(crate) fn describe(&self) -> String {
        let names: Vec<String> = self
            .headers
            .iter()
            .map(|(p, _)| p.display().to_string())
            .collect();
        format!(
            "--npy {} ({} x {} {})",
            names.join(" "),
            self.n,
            self.d,
            self.dtype.name()
        )
    }

    /// Maps (or reads) every file's data.
    pub(crate) fn load(self) -> Result<Loaded> {
        let mut shards = Vec::with_capacity(self.headers.len());
        for (path, input) in self.headers {
            let shard =
                npy::map_or_read(input).with_context(|| format!("--npy {}", path.display()))?;
            shards.push((path, shard));
        }
        Ok(Loaded { shards })
    }
}

/// The shards' data.
pub(crate) struct Loaded {
    shards: Vec<(PathBuf, NpyShard)>,
}

impl Loaded {
    /// One [`Points`] per shard, in order (see [`as_points`]).
    pub(crate) fn parts(&self) -> Vec<Points<'_>> {
        self.shards.iter().map(|(_, s)| s.points()).collect()
    }

    /// The files and their rows, for the index.
    pub(crate) fn files(&self) -> Vec<InputFile> {
        self.shards
            .iter()
            .map(|(path, s)| InputFile {
                path: path.display().to_string(),
                rows: s.n as u64,
            })
            .collect()
    }
}

/// `parts` as one matrix: the part itself when there is one.
pub(crate) fn as_points<'a>(parts: &'a [Points<'a>]) -> Points<'a> {
    match parts {
        [one] => *one,
        many => Points::Parts(many),
    }
}
