//! Encoding: each point's anchor in a trained index, for inputs past one
//! device's memory. The points are read from disk a chunk at a time by a
//! reader thread that fills the next chunk while the current one is
//! assigned (double buffering: two chunks in host memory at most, one on
//! the device), and the anchors' indices are streamed to the output file
//! ([`EncodeOutput`]), so that memory is bounded by the chunk, not the
//! input. On the CPU each chunk is assigned by the anneal's own engine; on
//! CUDA by one assigner made for the encode (`gpu::ChunkAssigner`: the
//! anchors uploaded once, two chunk buffers, so that the upload of the next
//! chunk overlaps the assignment of the current one, and only the
//! assignment kernels, the shard's path to them). Either way the index's
//! anchors give the same f32 argmin, ties to the lowest index, as the
//! anneal's assignment step, and the same bits whatever the chunk size.
//! Device memory: [`chunk_device_bytes`].

use std::io::{self, Write};
use std::path::PathBuf;
use std::sync::mpsc;

use gpu_core::{Backend, BackendKind};

use crate::gpu::{chunk_device_bytes, ChunkAssigner};
use crate::index::Index;
use crate::memory::TooLarge;
use crate::npy::{self, Chunk, Chunks, ShardsError};
use crate::{AnnealError, Dtype, Engine, Params, Points, Problem};

mod output;

pub use output::{EncodeOutput, TEMP_SUFFIX};

/// Rows per chunk at most when the size is chosen from memory: small
/// enough for progress to move, large enough that a chunk's fixed costs
/// (its kernels' launches, the read-back's wait) are a small part of its
/// time.
pub const MAX_DEFAULT_CHUNK: usize = 1 << 22;

/// Why an encode was refused or failed. One line each.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EncodeError {
    /// The points' dimension is not the index's.
    #[error("the points have d = {points} but the index has d = {index}; give points of the index's dimension")]
    Dimension {
        /// The points' d.
        points: usize,
        /// The index's d.
        index: usize,
    },
    /// The values do not make whole rows.
    #[error("{values} values do not make whole points of dimension {d}")]
    Ragged {
        /// Values given.
        values: usize,
        /// The index's d.
        d: usize,
    },
    /// The input has no rows.
    #[error("no points to encode; give at least one row")]
    NoPoints,
    /// The input ended before the rows its headers promise (a file cut
    /// short while it was read, or a pipe that closed early).
    #[error("the input ended after {rows} of its {total} rows; give whole files")]
    ShortInput {
        /// Rows read.
        rows: usize,
        /// Rows the headers promise.
        total: usize,
    },
    /// The input files could not be read.
    #[error(transparent)]
    Shards(ShardsError),
    /// A chunk was refused (a bad coordinate, named by its row in the whole
    /// input) or its assignment failed.
    #[error(transparent)]
    Anneal(AnnealError),
    /// The output file exists and replacing it was not asked for.
    #[error("{}: already exists; allow replacing it, or choose another file", .0.display())]
    Exists(PathBuf),
    /// The output path is not a regular file (a folder, a symlink, a
    /// device) or has no file name.
    #[error("{}: is not a regular file; give the path of a file to write", .0.display())]
    NotAFile(PathBuf),
    /// The output file is a mount point (a file bind-mounted there), which
    /// the rename at the end cannot replace.
    #[error("{}: is a mount point, which cannot be replaced; choose another file", .0.display())]
    MountPoint(PathBuf),
    /// The folder that would hold the output does not exist.
    #[error("{}: directory does not exist; create it first", .0.display())]
    NoParent(PathBuf),
    /// The output is one of the input files.
    #[error("{}: is one of the input files; choose another output file", .0.display())]
    IsInput(PathBuf),
    /// The output is inside the index's folder.
    #[error(
        "{}: is inside the index {}, which holds only the index's files; choose a file outside it",
        path.display(), index.display()
    )]
    InIndex {
        /// The output.
        path: PathBuf,
        /// The index folder.
        index: PathBuf,
    },
    /// A filesystem call on the output failed.
    #[error("{}: {what}: {error}", path.display())]
    Io {
        /// What was being done.
        what: &'static str,
        /// The output file.
        path: PathBuf,
        /// The error (in the message, so no `source`).
        error: io::Error,
    },
}

/// What an encode did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Encoded {
    /// Points encoded.
    pub n: usize,
    /// Chunks they were read in.
    pub chunks: usize,
}

/// Each of `points`' nearest anchor in `index` (squared L2 in f32, ties to
/// the lowest index), computed by the anneal's assignment on `backend` (the
/// GPU engine on a CUDA backend, the CPU engine otherwise); the points
/// are checked as the anneal checks its input.
pub fn assign(
    backend: &Backend,
    index: &Index,
    points: Points<'_>,
) -> Result<Vec<u32>, EncodeError> {
    assign_rows(backend, index, points, 0)
}

/// [`assign`] of rows that start at row `first` of a larger input (named so
/// in a refusal): on a CUDA backend by a [`ChunkAssigner`] of one chunk,
/// else by the CPU engine.
fn assign_rows(
    backend: &Backend,
    index: &Index,
    points: Points<'_>,
    first: usize,
) -> Result<Vec<u32>, EncodeError> {
    let Some(problem) = checked(index, points, first)? else {
        return Ok(Vec::new());
    };
    let (d, m) = (index.meta.d as usize, index.meta.m as usize);
    if backend.kind() == BackendKind::Cuda {
        let mut gpu =
            ChunkAssigner::new(backend, &index.anchors, m, d, problem.n(), points.dtype())?;
        gpu.upload(&points.pieces(0..points.len()))?;
        gpu.launch()?;
        let mut out = Vec::new();
        gpu.read(&mut out)?;
        return Ok(out);
    }
    let mut engine = crate::cpu::CpuEngine::new(&problem);
    engine.set_anchors(&index.anchors, m)?;
    // A step assigns against the anchors it was given, then moves them
    // (by nothing, with a step of 0), which nothing reads.
    engine.step(0.0)?;
    Ok(engine.assignments()?)
}

/// Refuses an index made by hand with no anchors, the wrong number of
/// values, or an anchor NaN, infinite or past [`crate::coordinate_bound`]
/// (`Index::read` refuses such a file).
fn check_index(index: &Index) -> Result<(), EncodeError> {
    let (d, m) = (index.meta.d as usize, index.meta.m as usize);
    if m == 0 || m.checked_mul(d) != Some(index.anchors.len()) {
        return Err(EncodeError::Anneal(AnnealError::AnchorValues {
            values: index.anchors.len(),
            m,
            d,
        }));
    }
    crate::check_anchors(&index.anchors, m, d).map_err(EncodeError::Anneal)
}

/// `points` (rows from row `first` of the whole input) checked as the
/// anneal checks its input, for `index`; `None` when there are no rows.
fn checked<'a>(
    index: &Index,
    points: Points<'a>,
    first: usize,
) -> Result<Option<Problem<'a>>, EncodeError> {
    let (d, m) = (index.meta.d as usize, index.meta.m as usize);
    if d == 0 || !points.len().is_multiple_of(d) {
        return Err(EncodeError::Ragged {
            values: points.len(),
            d,
        });
    }
    check_index(index)?;
    let n = points.len() / d;
    if n == 0 {
        return Ok(None);
    }
    // One initial anchor stands for the run's `m`: the index's `m` anchors
    // are set in its place, within `max_anchors`, and no run is made.
    let params = Params {
        max_anchors: m,
        ..Params::default()
    };
    let problem = crate::validate(points, n, d, 1, &params)
        .map_err(|e| EncodeError::Anneal(e.numbered_from(first)))?;
    Ok(Some(problem))
}

impl From<AnnealError> for EncodeError {
    fn from(e: AnnealError) -> Self {
        EncodeError::Anneal(e)
    }
}

impl From<gpu_core::Error> for EncodeError {
    fn from(e: gpu_core::Error) -> Self {
        EncodeError::Anneal(e.into())
    }
}

/// Bytes of host memory an encode in chunks of `rows` holds: two chunks
/// as read (the one assigned, or on CUDA uploaded, and the one being read)
/// and, on the CPU, the engine's copies of one; `None` when the figure
/// overflows.
fn host_needs(d: usize, dtype: Dtype, cuda: bool, rows: usize) -> Option<u64> {
    let raw = (rows as u64)
        .checked_mul(d as u64)?
        .checked_mul(dtype.size())?;
    let engine = crate::host_bytes(rows, d, 0, 0, !cuda)?;
    // The assignments read back, as u32.
    raw.checked_mul(2)?
        .checked_add(engine)?
        .checked_add((rows as u64).checked_mul(4)?)
}

/// Rows per chunk when none is given: what fits a quarter of the host's
/// available memory ([`check_chunk`]'s figure) and, on a CUDA backend, half
/// of the device's free memory ([`chunk_device_bytes`]: both chunk buffers
/// of the double buffering); at most [`MAX_DEFAULT_CHUNK`], at least 1.
pub fn default_chunk(index: &Index, dtype: Dtype, backend: &Backend) -> usize {
    const PROBE: usize = 1 << 16;
    let (d, m) = (index.meta.d as usize, index.meta.m as usize);
    let cuda = backend.kind() == BackendKind::Cuda;
    let host_row = host_needs(d, dtype, cuda, PROBE).map_or(u64::MAX, |b| b / PROBE as u64);
    let host_budget = crate::memory::host_available().unwrap_or(4 << 30) / 4;
    let mut rows = host_budget / host_row.max(1);
    if let Some(dev) = backend.device().filter(|_| cuda) {
        let fixed = chunk_device_bytes(0, d, m, dtype).unwrap_or(u64::MAX);
        let grown = chunk_device_bytes(PROBE, d, m, dtype).unwrap_or(u64::MAX);
        let device_row = (grown.saturating_sub(fixed) / PROBE as u64).max(1);
        if let Some(free) = crate::memory::device_free(dev.ordinal) {
            rows = rows.min((free / 2).saturating_sub(fixed) / device_row);
        }
    }
    (rows.min(MAX_DEFAULT_CHUNK as u64) as usize).max(1)
}

/// Refuses chunks of `rows` points that need more host memory than is
/// available, or on a CUDA backend more device memory than is free (the
/// assigner's, [`chunk_device_bytes`]); `what` names the encode in the
/// message.
pub fn check_chunk(
    what: &str,
    index: &Index,
    dtype: Dtype,
    backend: &Backend,
    rows: usize,
) -> Result<(), TooLarge> {
    let (d, m) = (index.meta.d as usize, index.meta.m as usize);
    let cuda = backend.kind() == BackendKind::Cuda;
    crate::memory::check_host(what, host_needs(d, dtype, cuda, rows))?;
    match backend.device().filter(|_| cuda) {
        Some(dev) => crate::memory::check(
            what,
            "device",
            chunk_device_bytes(rows, d, m, dtype),
            crate::memory::device_free(dev.ordinal),
        ),
        None => Ok(()),
    }
}

/// Progress of an encode: points done, points in all.
pub type EncodeProgress<'a> = &'a mut dyn FnMut(usize, usize);

/// Assigns every row of `chunks` to `index` on `backend` and writes each
/// point's anchor to `out` (a 1-D uint32 `.npy`, as the index's
/// assignments file), then renames it into place. Reading the next chunk
/// overlaps the assignment of the current one, and on CUDA so do its
/// upload and the write of the chunk before (`pipeline`). On an error
/// nothing is
/// left at `out`'s path (its temporary file is removed).
pub fn encode(
    index: &Index,
    chunks: Chunks,
    backend: &Backend,
    mut out: EncodeOutput,
    progress: EncodeProgress<'_>,
) -> Result<Encoded, EncodeError> {
    let (total, d) = (chunks.total(), index.meta.d as usize);
    if chunks.d() != d {
        return Err(EncodeError::Dimension {
            points: chunks.d(),
            index: d,
        });
    }
    if total == 0 {
        return Err(EncodeError::NoPoints);
    }
    check_index(index)?;
    // Flushed at once, before the device is set up: a killed run's file
    // then starts with it, which is how the next encode knows the file for
    // its own (`output/stale.rs`).
    npy::write_u32_header(out.writer(), total as u64)
        .and_then(|()| out.writer().flush())
        .map_err(|e| out.write_error(e))?;
    // On CUDA one assigner for the whole encode, sized for the chunk.
    let mut gpu = match backend.kind() {
        BackendKind::Cuda => Some(ChunkAssigner::new(
            backend,
            &index.anchors,
            index.meta.m as usize,
            d,
            chunks.chunk_rows().min(total),
            chunks.dtype(),
        )?),
        _ => None,
    };
    let mut done = Encoded { n: 0, chunks: 0 };
    std::thread::scope(|scope| {
        // No capacity: the reader holds one chunk ready while the current
        // one is assigned, and waits for it to be taken.
        let (send, receive) = mpsc::sync_channel(0);
        scope.spawn(move || {
            for chunk in chunks {
                let failed = chunk.is_err();
                if send.send(chunk).is_err() || failed {
                    break;
                }
            }
        });
        // Dropping `receive` on an error ends the reader at its next send.
        let mut sink = |assigned: &[u32], done: &mut Encoded| {
            write_u32s(out.writer(), assigned).map_err(|e| out.write_error(e))?;
            done.n += assigned.len();
            done.chunks += 1;
            progress(done.n, total);
            Ok::<(), EncodeError>(())
        };
        match gpu.as_mut() {
            Some(gpu) => pipeline(gpu, index, receive, |a| sink(a, &mut done)),
            None => {
                for chunk in receive {
                    let chunk = chunk.map_err(EncodeError::Shards)?;
                    let assigned = assign_rows(backend, index, chunk.points(), chunk.start)?;
                    sink(&assigned, &mut done)?;
                }
                Ok(())
            }
        }
    })?;
    drop(gpu);
    if done.n != total {
        return Err(EncodeError::ShortInput {
            rows: done.n,
            total,
        });
    }
    out.commit()?;
    Ok(done)
}

/// The CUDA encode's loop: while chunk `k` is assigned on the device, the
/// assignments of chunk `k - 1` are written by `sink`, chunk `k + 1` is
/// taken from the reader, checked and uploaded into the other buffer; then
/// chunk `k`'s assignments are read back. The device waits only for that
/// read-back (4 bytes a point) between two chunks' kernels.
fn pipeline(
    gpu: &mut ChunkAssigner,
    index: &Index,
    chunks: mpsc::Receiver<Result<Chunk, ShardsError>>,
    mut sink: impl FnMut(&[u32]) -> Result<(), EncodeError>,
) -> Result<(), EncodeError> {
    let mut chunks = chunks.into_iter();
    // Takes, checks and uploads the next chunk; `false` after the last.
    let mut feed = |gpu: &mut ChunkAssigner| -> Result<bool, EncodeError> {
        let Some(chunk) = chunks.next() else {
            return Ok(false);
        };
        let chunk = chunk.map_err(EncodeError::Shards)?;
        let points = chunk.points();
        if checked(index, points, chunk.start)?.is_some() {
            gpu.upload(&points.pieces(0..points.len()))?;
        }
        // The chunk's host memory goes here: its upload was staged.
        Ok(true)
    };
    let (mut assigned, mut ready) = (Vec::new(), false);
    let mut more = feed(gpu)?;
    while more {
        gpu.launch()?;
        if ready {
            sink(&assigned)?;
        }
        more = feed(gpu)?;
        ready = gpu.read(&mut assigned)?;
    }
    if ready {
        sink(&assigned)?;
    }
    Ok(())
}

/// `values` as little-endian bytes.
fn write_u32s(w: &mut impl Write, values: &[u32]) -> io::Result<()> {
    if cfg!(target_endian = "little") {
        return w.write_all(bytemuck::cast_slice(values));
    }
    for chunk in values.chunks(1 << 14) {
        let bytes: Vec<u8> = chunk.iter().flat_map(|v| v.to_le_bytes()).collect();
        w.write_all(&bytes)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests;
