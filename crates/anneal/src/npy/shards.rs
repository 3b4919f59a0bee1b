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
use crate::vocab::Points;

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
    /// A buffer given to [`Chunks::read_into`] cannot hold one row.
    #[error("a buffer of {given} bytes cannot hold a row of {needed} bytes")]
    Buffer {
        /// Bytes of a row.
        needed: usize,
        /// Bytes of the buffer.
        given: usize,
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

    /// Reads the next chunk's rows into the start of `out`, as the files'
    /// bytes in the host's byte order (f32 values for an f32 input, f16 or
    /// bf16 bits for the others): the caller's buffer, page-locked memory for
    /// a copy to the device, say. A regular file's rows are read by several
    /// threads at once, each from its own offset; a pipe's in order. `None`
    /// after the last chunk (and after an error). A whole chunk when `out`
    /// holds [`Chunks::chunk_bytes`], else as many of its rows as `out`
    /// holds (the next read goes on from there); an error when `out` cannot
    /// hold one row.
    pub fn read_into(&mut self, out: &mut [u8]) -> Option<Result<ChunkRows, ShardsError>> {
        self.read_checked(out, &|_| false)
            .map(|read| read.map(|(rows, _)| rows))
    }

    /// [`Chunks::read_into`], with `clean` run on each piece a thread
    /// read from a regular file, in the host's byte order, while it is in
    /// the cache: also returns whether every piece was clean (`false` when
    /// some part came from a pipe, which `clean` did not see).
    pub(crate) fn read_checked(
        &mut self,
        out: &mut [u8],
        clean: &(dyn Fn(&[u8]) -> bool + Sync),
    ) -> Option<Result<(ChunkRows, bool), ShardsError>> {
        if self.next >= self.total {
            return self.finish().err().map(Err);
        }
        let read = self.fill(out, clean);
        if read.is_err() {
            self.next = self.total;
            self.left.clear();
        }
        Some(read)
    }

    /// Bytes of one whole chunk: what [`Chunks::read_into`] needs to read
    /// a whole chunk at once.
    pub fn chunk_bytes(&self) -> usize {
        self.rows.min(self.total) * self.d * self.dtype.size() as usize
    }

    /// Checks that files of no rows after the last chunk end where their
    /// headers say.
    fn finish(&mut self) -> Result<(), ShardsError> {
        while let Some((path, input, _)) = self.left.pop_front() {
            if let Err(error) = at_end(input) {
                self.left.clear();
                return Err(ShardsError::Npy { path, error });
            }
        }
        Ok(())
    }

    fn fill(
        &mut self,
        out: &mut [u8],
        clean: &(dyn Fn(&[u8]) -> bool + Sync),
    ) -> Result<(ChunkRows, bool), ShardsError> {
        let size = self.dtype.size() as usize;
        let row_bytes = self.d * size;
        // The chunk's rows, as many as `out` holds: at least one (rows of
        // no values, d = 0, fit any buffer).
        let rows = self.rows.min(self.total - self.next);
        let rows = match out.len().checked_div(row_bytes) {
            Some(fit) => rows.min(fit),
            None => rows,
        };
        if rows == 0 {
            return Err(ShardsError::Buffer {
                needed: row_bytes,
                given: out.len(),
            });
        }
        let (mut filled, mut all_clean) = (0, true);
        while filled < rows {
            let Some((path, input, done)) = self.left.front_mut() else {
                break;
            };
            let take = (input.n - *done).min(rows - filled);
            let bytes = &mut out[filled * row_bytes..(filled + take) * row_bytes];
            match read_rows(input, *done, bytes, size, clean) {
                Ok(piece_clean) => all_clean &= piece_clean,
                Err(error) => {
                    return Err(ShardsError::Npy {
                        path: path.clone(),
                        error,
                    })
                }
            }
            *done += take;
            filled += take;
            if *done == input.n {
                let (path, input, _) = self.left.pop_front().expect("the front is there");
                at_end(input).map_err(|error| ShardsError::Npy { path, error })?;
            }
        }
        let chunk = ChunkRows {
            start: self.next,
            rows,
        };
        self.next += rows;
        Ok((chunk, all_clean))
    }

    fn read_chunk(&mut self) -> Result<Chunk, ShardsError> {
        let rows = self.rows.min(self.total - self.next);
        let count = rows * self.d;
        let mut data = match self.dtype {
            Dtype::F32 => NpyData::F32(vec![0.0; count]),
            Dtype::F16 => NpyData::F16(vec![0; count]),
            Dtype::BF16 => NpyData::BF16(vec![0; count]),
        };
        let bytes: &mut [u8] = match &mut data {
            NpyData::F32(v) => bytemuck::cast_slice_mut(v),
            NpyData::F16(v) | NpyData::BF16(v) => bytemuck::cast_slice_mut(v),
        };
        let (ChunkRows { start, rows }, _) = self.fill(bytes, &|_| false)?;
        Ok(Chunk { start, rows, data })
    }
}

/// Where [`Chunks::read_into`] put a chunk: rows `start..start + rows` of
/// the whole input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChunkRows {
    /// The first row's index in the whole input.
    pub start: usize,
    /// Rows read.
    pub rows: usize,
}

impl Iterator for Chunks {
    type Item = Result<Chunk, ShardsError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.next >= self.total {
            // Files of no rows after the last chunk are still checked.
            return self.finish().err().map(Err);
        }
        let chunk = self.read_chunk();
        if chunk.is_err() {
            self.next = self.total;
            self.left.clear();
        }
        Some(chunk)
    }
}

/// Bytes a thread reads at once from a regular file: a multiple of every
/// value's size, and small enough to be checked while in the core's cache.
const READ_PIECE: usize = 1 << 20;

/// Fills `out` with the next rows of `input`'s data (after its first `done`
/// rows), in the host's byte order (`size`: bytes a value). A regular
/// file's are read with positional reads, [`READ_PIECE`] bytes a thread
/// (the page cache serves several readers far faster than one), each piece
/// given to `clean` as soon as it is read; a pipe's in order. Returns
/// whether `clean` passed every piece (`false` for a pipe: it saw none).
fn read_rows(
    input: &mut NpyInput<BufReader<File>>,
    done: usize,
    out: &mut [u8],
    size: usize,
    clean: &(dyn Fn(&[u8]) -> bool + Sync),
) -> Result<bool, NpyError> {
    let before = done as u64 * input.d as u64 * size as u64;
    let needed = input.data_bytes();
    let short = |available: u64| NpyError::Truncated {
        section: "data",
        needed,
        available,
    };
    #[cfg(unix)]
    if input.data_len.is_some() {
        use rayon::prelude::*;
        use std::os::unix::fs::FileExt;
        let file = input.reader.get_ref();
        let start = input.data_offset + before;
        let big_endian = input.big_endian != cfg!(target_endian = "big");
        let read: std::io::Result<bool> = out
            .par_chunks_mut(READ_PIECE)
            .enumerate()
            .map(|(i, piece)| {
                file.read_exact_at(piece, start + (i * READ_PIECE) as u64)?;
                if big_endian {
                    swap(piece, size);
                }
                Ok(clean(piece))
            })
            .try_reduce(|| true, |a, b| Ok(a && b));
        match read {
            Ok(all_clean) => return Ok(all_clean),
            // The file shrank after its header was checked: what is there
            // now is what it holds.
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => {
                let len = file.metadata().map_err(NpyError::Io)?.len();
                return Err(short(len.saturating_sub(input.data_offset)));
            }
            Err(e) => return Err(NpyError::Io(e)),
        }
    }
    let got = super::read_full(&mut input.reader, out)?;
    if got < out.len() {
        // A pipe ended early (or the file shrank): what was there is the
        // rows before and this read's part.
        return Err(short(before + got as u64));
    }
    if input.big_endian != cfg!(target_endian = "big") {
        swap(out, size);
    }
    Ok(false)
}

/// Reverses the bytes of each value of `size` bytes.
fn swap(bytes: &mut [u8], size: usize) {
    for value in bytes.chunks_exact_mut(size) {
        value.reverse();
    }
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
