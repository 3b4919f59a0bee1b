//! `.npy` shards read as one matrix: every file's header read and checked
//! against the others (the same d and dtype, a refusal naming the file)
//! before any data is touched ([`Shards::open`]); then either each file
//! memory-mapped (or read, for pipes and big-endian data) and seen as one
//! matrix, rows in the order given ([`Shards::load`]), or the rows streamed
//! from disk a bounded chunk at a time ([`Shards::into_chunks`]), for inputs
//! larger than memory.

use std::fs::File;
use std::io::BufReader;
use std::path::{Path, PathBuf};

use super::{map, Dtype, NpyData, NpyError, NpyInput, NpyShard};
use crate::Points;

/// Why shards were not opened, or their data not read. Each message starts
/// with the file it is about.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ShardsError {
    /// No file was given.
    #[error("no file given; give at least one .npy file")]
    NoFiles,
    /// A file could not be read as an `(n, d)` matrix.
    #[error("{}: {error}", path.display())]
    Npy {
        /// The file.
        path: PathBuf,
        /// Why (in the message, so no `source`: a report of the chain would
        /// repeat it).
        error: NpyError,
    },
    /// A file's d differs from the first file's.
    #[error(
        "{}: d = {d}, but {} has d = {first_d}; every file must have the same d",
        path.display(), first.display()
    )]
    Width {
        /// The file.
        path: PathBuf,
        /// Its d.
        d: usize,
        /// The first file.
        first: PathBuf,
        /// The first file's d.
        first_d: usize,
    },
    /// A file's element type differs from the first file's.
    #[error(
        "{}: dtype {}, but {} is {}; every file must have the same dtype",
        path.display(), dtype.name(), first.display(), first_dtype.name()
    )]
    Dtype {
        /// The file.
        path: PathBuf,
        /// Its element type.
        dtype: Dtype,
        /// The first file.
        first: PathBuf,
        /// The first file's element type.
        first_dtype: Dtype,
    },
    /// The files' rows together overflow the address space.
    #[error("{}: the files' rows overflow", path.display())]
    TooManyRows {
        /// The file whose rows overflowed the sum.
        path: PathBuf,
    },
}

/// The shards' checked headers: the data not yet read.
#[derive(Debug)]
pub struct Shards {
    headers: Vec<(PathBuf, NpyInput<BufReader<File>>)>,
    n: usize,
    d: usize,
    dtype: Dtype,
}

impl Shards {
    /// Opens every file in `paths` and checks that they make one matrix.
    pub fn open(paths: &[impl AsRef<Path>]) -> Result<Self, ShardsError> {
        let mut headers: Vec<(PathBuf, NpyInput<BufReader<File>>)> =
            Vec::with_capacity(paths.len());
        let mut n = 0usize;
        for path in paths {
            let path = path.as_ref().to_path_buf();
            let input = match super::open(&path) {
                Ok(input) => input,
                Err(error) => return Err(ShardsError::Npy { path, error }),
            };
            if let Some((first, head)) = headers.first() {
                if input.d != head.d {
                    return Err(ShardsError::Width {
                        d: input.d,
                        first: first.clone(),
                        first_d: head.d,
                        path,
                    });
                }
                if input.dtype != head.dtype {
                    return Err(ShardsError::Dtype {
                        dtype: input.dtype,
                        first: first.clone(),
                        first_dtype: head.dtype,
                        path,
                    });
                }
            }
            n = match n.checked_add(input.n) {
                Some(n) => n,
                None => return Err(ShardsError::TooManyRows { path }),
            };
            headers.push((path, input));
        }
        let (d, dtype) = headers
            .first()
            .map(|(_, h)| (h.d, h.dtype))
            .ok_or(ShardsError::NoFiles)?;
        Ok(Self {
            headers,
            n,
            d,
            dtype,
        })
    }

    /// Rows, all files together.
    pub fn n(&self) -> usize {
        self.n
    }

    /// Columns.
    pub fn d(&self) -> usize {
        self.d
    }

    /// The element type.
    pub fn dtype(&self) -> Dtype {
        self.dtype
    }

    /// The files, in row order.
    pub fn paths(&self) -> impl Iterator<Item = &Path> {
        self.headers.iter().map(|(p, _)| p.as_path())
    }

    /// The files, in row order, with their rows.
    pub fn file_rows(&self) -> impl Iterator<Item = (&Path, usize)> {
        self.headers.iter().map(|(p, h)| (p.as_path(), h.n))
    }

    /// Bytes of host memory [`Shards::load`] will take: 0 for mapped files.
    pub fn held_bytes(&self) -> u64 {
        self.headers.iter().map(|(_, h)| map::read_bytes(h)).sum()
    }

    /// `a.npy b.npy (n x d dtype)`, for messages.
    pub fn describe(&self) -> String {
        let names: Vec<String> = self.paths().map(|p| p.display().to_string()).collect();
        format!(
            "{} ({} x {} {})",
            names.join(" "),
            self.n,
            self.d,
            self.dtype.name()
        )
    }

    /// Maps (or reads) every file's data.
    pub fn load(self) -> Result<Loaded, ShardsError> {
        let mut shards = Vec::with_capacity(self.headers.len());
        for (path, input) in self.headers {
            match map::map_or_read(input) {
                Ok(shard) => shards.push((path, shard)),
                Err(error) => return Err(ShardsError::Npy { path, error }),
            }
        }
        Ok(Loaded { shards })
    }

    /// The rows in order, `rows` at a time (the last chunk holds the rest),
    /// read from the files as a stream: host memory is bounded by the
    /// chunk whatever the input's size, and pipes work too.
    pub fn into_chunks(self, rows: usize) -> Chunks {
        Chunks {
            d: self.d,
            dtype: self.dtype,
            rows: rows.max(1),
            total: self.n,
            next: 0,
            left: self.headers.into_iter().map(|(p, h)| (p, h, 0)).collect(),
        }
    }
}

/// The shards' data, mapped or read.
#[derive(Debug)]
pub struct Loaded {
    shards: Vec<(PathBuf, NpyShard)>,
}

impl Loaded {
    /// One [`Points`] per file, in order (see [`crate::join`]).
    pub fn parts(&self) -> Vec<Points<'_>> {
        self.shards.iter().map(|(_, s)| s.points()).collect()
    }
}

/// Rows `start..start + rows` of the shards, read into memory.
#[derive(Debug)]
pub struct Chunk {
    /// The first row's index in the whole input.
    pub start: usize,
    /// Rows in the chunk.
    pub rows: usize,
    /// Their values, row-major, in the files' element type.
    pub data: NpyData,
}

impl Chunk {
    /// The values as [`Points`].
    pub fn points(&self) -> Points<'_> {
        match &self.data {
            NpyData::F32(v) => Points::F32(v),
            NpyData::F16(v) => Points::F16(v),
            NpyData::BF16(v) => Points::BF16(v),
        }
    }
}

/// The iterator of [`Shards::into_chunks`]; after an error it ends.
#[derive(Debug)]
pub struct Chunks {
    d: usize,
    dtype: Dtype,
    rows: usize,
    total: usize,
    next: usize,
    /// The files not yet read to their end, each with the rows read from it.
    left: std::collections::VecDeque<(PathBuf, NpyInput<BufReader<File>>, usize)>,
}

impl Chunks {
    /// Rows in all.
    pub fn total(&self) -> usize {
        self.total
    }

    /// Columns.
    pub fn d(&self) -> usize {
        self.d
    }

    /// Rows per chunk (the last may have fewer).
    pub fn chunk_rows(&self) -> usize {
        self.rows
    }

    /// The element type.
    pub fn dtype(&self) -> Dtype {
        self.dtype
    }

    fn read_chunk(&mut self) -> Result<Chunk, ShardsError> {
        let rows = self.rows.min(self.total - self.next);
        let count = rows * self.d;
        let mut data = match self.dtype {
            Dtype::F32 => NpyData::F32(vec![0.0; count]),
            Dtype::F16 => NpyData::F16(vec![0; count]),
            Dtype::BF16 => NpyData::BF16(vec![0; count]),
        };
        let mut filled = 0;
        while filled < rows {
            let Some((path, input, done)) = self.left.front_mut() else {
                break;
            };
            let take = (input.n - *done).min(rows - filled);
            let values = filled * self.d..(filled + take) * self.d;
            let read = match &mut data {
                NpyData::F32(v) => read_values(input, *done, &mut v[values]),
                NpyData::F16(v) | NpyData::BF16(v) => read_values(input, *done, &mut v[values]),
            };
            if let Err(error) = read {
                return Err(ShardsError::Npy {
                    path: path.clone(),
                    error,
                });
            }
            *done += take;
            filled += take;
            if *done == input.n {
                let (path, input, _) = self.left.pop_front().expect("the front is there");
                at_end(input).map_err(|error| ShardsError::Npy { path, error })?;
            }
        }
        let chunk = Chunk {
            start: self.next,
            rows,
            data,
        };
        self.next += rows;
        Ok(chunk)
    }
}

impl Iterator for Chunks {
    type Item = Result<Chunk, ShardsError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.next >= self.total {
            // Files of no rows after the last chunk are still checked.
            while let Some((path, input, _)) = self.left.pop_front() {
                if let Err(error) = at_end(input) {
                    self.left.clear();
                    return Some(Err(ShardsError::Npy { path, error }));
                }
            }
            return None;
        }
        let chunk = self.read_chunk();
        if chunk.is_err() {
            self.next = self.total;
            self.left.clear();
        }
        Some(chunk)
    }
}

/// Fills `out` with the next values of `input`'s data (after its first
/// `done` rows), in the host's byte order.
fn read_values<T: bytemuck::Pod>(
    input: &mut NpyInput<BufReader<File>>,
    done: usize,
    out: &mut [T],
) -> Result<(), NpyError> {
    let bytes: &mut [u8] = bytemuck::cast_slice_mut(out);
    let got = super::read_full(&mut input.reader, bytes)?;
    if got < bytes.len() {
        // The file shrank after its header was checked, or a pipe ended
        // early: what was there is the rows before and this read's part.
        let before = done as u64 * input.d as u64 * std::mem::size_of::<T>() as u64;
        return Err(NpyError::Truncated {
            section: "data",
            needed: input.data_bytes(),
            available: before + got as u64,
        });
    }
    if input.big_endian != cfg!(target_endian = "big") {
        let size = std::mem::size_of::<T>();
        for value in bytes.chunks_exact_mut(size) {
            value.reverse();
        }
    }
    Ok(())
}

/// Refuses data past what the header promised (read to find out only when
/// the length was not known up front: a pipe).
fn at_end(mut input: NpyInput<BufReader<File>>) -> Result<(), NpyError> {
    if input.data_len.is_some() {
        return Ok(());
    }
    let mut extra = [0u8; 1];
    if super::read_full(&mut input.reader, &mut extra)? > 0 {
        return Err(NpyError::TrailingData {
            expected: input.data_bytes(),
            actual: None,
        });
    }
    Ok(())
}
