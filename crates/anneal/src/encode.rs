//! Encoding: each point's anchor in a trained index, for inputs past one
//! device's memory. The points are read from disk a chunk at a time and
//! the anchors' indices are streamed to the output file
//! ([`EncodeOutput`]), so that memory is bounded by the chunk, not the
//! input ([`DEFAULT_HOST_BYTES`] by default).
//!
//! On CUDA the encode is a pipeline of three stages in flight at once: a
//! reader thread reads each chunk straight into one of a few page-locked
//! buffers (a regular file by several threads, each piece's coordinates
//! checked while it is in the cache), the device copies it from there at
//! the pinned rate and assigns it (`gpu::ChunkAssigner`: the anchors
//! uploaded once, two device buffers, only the assignment kernels), and
//! the encode's thread writes the chunk before's assignments. On the CPU a
//! reader thread reads the next chunk while the anneal's own engine
//! assigns the current one. Either way the index's anchors give the same
//! f32 argmin, ties to the lowest index, as the anneal's assignment step,
//! and the same bits whatever the chunk size. Device memory:
//! [`chunk_device_bytes`]; where the time went: [`Stages`].

use std::io::{self, Write};
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use gpu_core::{Backend, BackendKind};

use crate::gpu::{chunk_device_bytes, ChunkAssigner, Staged};
use crate::index::Index;
use crate::memory::TooLarge;
use crate::npy::{self, ChunkRows, Chunks, ShardsError};
use crate::{
    error::AnnealError,
    input::Problem,
    vocab::{Dtype, Params, Points},
};

mod output;

pub use output::{EncodeOutput, TEMP_SUFFIX};

/// Rows per chunk at most when the size is chosen from memory: small
/// enough for progress to move, large enough that a chunk's fixed costs
/// (its kernels' launches, the read-back's wait) are a small part of its
/// time.
pub const MAX_DEFAULT_CHUNK: usize = 1 << 22;

/// Host memory the default chunk's buffers take at most (the CPU engine's
/// copies included): resident memory stays about this whatever the
/// input's size.
pub const DEFAULT_HOST_BYTES: u64 = 2 << 30;

/// Bytes of input in the default chunk of a CUDA encode: large enough that
/// a chunk's fixed costs (launches, the read-back's wait) are small beside
/// its copy, small enough that page-locking the whole-chunk buffers, which
/// the first chunks wait for, is a small part of the whole (measured on an
/// H200 with the 8 MiB first buffer: 32 MiB 0.36-0.43 s, 64 MiB 0.39-0.48 s,
/// 128 MiB 0.54-0.62 s, 256 MiB 0.84-0.93 s for 12.3 GB, `BENCHMARKS.md`).
pub const STAGED_CHUNK_BYTES: u64 = 32 << 20;

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
    /// Reads they were assigned in: the chunks, and on CUDA with chunks of
    /// more than 8 MiB also the first buffer's smaller reads, whose number
    /// depends on how soon the whole-chunk buffers are page-locked.
    pub chunks: usize,
    /// Where the time went, on CUDA (zero on the CPU).
    pub stages: Stages,
}

/// Where a CUDA encode's time went. The reader thread reads and checks
/// while the encode's own thread uploads, assigns and writes: the stage
/// the other waits on is the one that bounds the encode.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stages {
    /// Making the assigner: the anchors uploaded, the device buffers and
    /// the first (8 MiB) page-locked buffer allocated; the others are
    /// page-locked meanwhile, and a wait for them counts in
    /// `waiting_for_input`.
    pub setup: Duration,
    /// The reader reading the files into page-locked memory (each piece's
    /// coordinates checked as it is read).
    pub reading: Duration,
    /// The reader checking a chunk's points again, as points: a chunk with
    /// a value out of bounds, or one read from a pipe.
    pub checking: Duration,
    /// The encode waiting for the reader's next chunk.
    pub waiting_for_input: Duration,
    /// The encode waiting for a chunk's assignments from the device.
    pub waiting_for_device: Duration,
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
    check_index(index)?;
    assign_with_checked_index(backend, index, points, first)
}

/// [`assign_rows`] for an index already checked (once per encode, not once
/// per chunk).
fn assign_with_checked_index(
    backend: &Backend,
    index: &Index,
    points: Points<'_>,
    first: usize,
) -> Result<Vec<u32>, EncodeError> {
    let Some(problem) = checked_points(index, points, first)? else {
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
    let mut engine = crate::target::Target::Cpu.engine(&problem)?;
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
    crate::input::check_anchors(&index.anchors, m, d).map_err(EncodeError::Anneal)
}

/// `points` (rows from row `first` of the whole input) checked as the
/// anneal checks its input, for an index already checked by
/// [`check_index`]; `None` when there are no rows.
fn checked_points<'a>(
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
    let problem = crate::input::validate(points, n, d, 1, &params)
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

/// Bytes of host memory an encode in chunks of `rows` holds: on the CPU two
/// chunks as read (the one assigned and the one being read) and the
/// engine's copies of one, on CUDA the [`STAGES`] page-locked buffers; and
/// the assignments read back. `None` when the figure overflows.
fn host_needs(d: usize, dtype: Dtype, cuda: bool, rows: usize) -> Option<u64> {
    let raw = (rows as u64)
        .checked_mul(d as u64)?
        .checked_mul(dtype.size())?;
    let engine = crate::input::host_bytes(rows, d, 0, 0, !cuda)?;
    let buffers = if cuda { STAGES as u64 } else { 2 };
    // The assignments read back, as u32.
    raw.checked_mul(buffers)?
        .checked_add(engine)?
        .checked_add((rows as u64).checked_mul(4)?)
}

/// Rows per chunk when none is given: what fits a quarter of the host's
/// available memory and at most [`DEFAULT_HOST_BYTES`] ([`check_chunk`]'s
/// figure) and, on a CUDA backend, half of the device's free memory
/// ([`chunk_device_bytes`]: both chunk buffers of the double buffering) and
/// [`STAGED_CHUNK_BYTES`] of input; at most [`MAX_DEFAULT_CHUNK`], at
/// least 1.
pub fn default_chunk(index: &Index, dtype: Dtype, backend: &Backend) -> usize {
    const PROBE: usize = 1 << 16;
    let (d, m) = (index.meta.d as usize, index.meta.m as usize);
    let cuda = backend.kind() == BackendKind::Cuda;
    let host_row = host_needs(d, dtype, cuda, PROBE).map_or(u64::MAX, |b| b / PROBE as u64);
    let host_budget =
        (crate::memory::host_available().unwrap_or(4 << 30) / 4).min(DEFAULT_HOST_BYTES);
    let mut rows = host_budget / host_row.max(1);
    if cuda {
        let row_bytes = (d as u64).saturating_mul(dtype.size()).max(1);
        rows = rows.min(STAGED_CHUNK_BYTES / row_bytes);
    }
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
    let started = Instant::now();
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
    let mut done = Encoded {
        n: 0,
        chunks: 0,
        stages: Stages::default(),
    };
    let mut sink = |assigned: &[u32]| {
        write_u32s(out.writer(), assigned).map_err(|e| out.write_error(e))?;
        done.n += assigned.len();
        done.chunks += 1;
        progress(done.n, total);
        Ok::<(), EncodeError>(())
    };
    let stages = match gpu.as_mut() {
        Some(gpu) => stream_staged(gpu, index, chunks, started, &mut sink)?,
        None => stream_chunks(backend, index, chunks, &mut sink).map(|()| Stages::default())?,
    };
    done.stages = stages;
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

/// The CPU encode: a reader thread reads the next chunk while the current
/// one is assigned by the CPU engine.
fn stream_chunks(
    backend: &Backend,
    index: &Index,
    chunks: Chunks,
    sink: &mut dyn FnMut(&[u32]) -> Result<(), EncodeError>,
) -> Result<(), EncodeError> {
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
        for chunk in receive {
            let chunk = chunk.map_err(EncodeError::Shards)?;
            // `encode` checked the index before the first chunk.
            sink(&assign_with_checked_index(
                backend,
                index,
                chunk.points(),
                chunk.start,
            )?)?;
        }
        Ok(())
    })
}

/// Page-locked host buffers of the CUDA encode: a small first one and
/// three of a chunk, which stay once the small one retires: one being
/// read, one whose upload runs, one read and waiting, so that a slow read
/// (a page-cache miss) does not leave the device idle.
const STAGES: usize = 4;

/// The first page-locked buffer's size: [`STAGES`]` - 1` whole-chunk
/// buffers are page-locked while it is read into.
const FIRST_STAGE_BYTES: usize = 8 << 20;

/// A chunk read and checked in a staged buffer, or why not.
type Read = Result<(Staged, ChunkRows), EncodeError>;

/// The CUDA encode: a reader thread reads each chunk straight into one of
/// [`STAGES`] page-locked buffers (a regular file by several threads) and
/// checks it, while the chunks before are copied by the device and
/// assigned (`pipeline`); a buffer goes back to the reader once its copy is
/// enqueued, and is written again once the copy is done.
fn stream_staged(
    gpu: &mut ChunkAssigner,
    index: &Index,
    mut chunks: Chunks,
    started: Instant,
    sink: &mut dyn FnMut(&[u32]) -> Result<(), EncodeError>,
) -> Result<Stages, EncodeError> {
    let (free, take_free) = mpsc::channel::<Staged>();
    let alloc = gpu.staged_alloc();
    // A small first buffer: page-locked in a few milliseconds, so that the
    // first read starts at once. `take_free` is alive: the send cannot fail.
    let _ = free.send(alloc.alloc_first(FIRST_STAGE_BYTES, chunks.d())?);
    let setup = started.elapsed();
    // Whole-chunk buffers page-locked so far.
    let (pinned, whole) = (&AtomicUsize::new(0), alloc.chunk_values());
    std::thread::scope(|scope| {
        // The whole-chunk buffers are page-locked while the first chunks
        // are read, each on a thread of its own (page-locking runs at about
        // 2 GB/s a thread); one that cannot be leaves the encode with fewer
        // (slower, not wrong: the reader waits for a buffer's copy to
        // refill it).
        for _ in 1..STAGES {
            let (more, alloc) = (free.clone(), alloc.clone());
            scope.spawn(move || {
                if let Ok(staged) = alloc.alloc() {
                    pinned.fetch_add(1, Ordering::Relaxed);
                    let _ = more.send(staged);
                }
            });
        }
        let (ready, take_ready) = mpsc::sync_channel::<Read>(STAGES);
        let reader = scope.spawn(move || {
            let mut stages = Stages::default();
            let mut first = true;
            // Ends at the last chunk, at an error, or when the loop below
            // dropped its ends of the channels (after an error of its own).
            while let Ok(mut staged) = take_free.recv() {
                // The small first buffer (sent first) always takes the
                // first read, whatever the threads have page-locked by
                // then; it retires once two whole ones are there: its
                // chunks cost a launch each for less work.
                if !first && staged.len() < whole && pinned.load(Ordering::Relaxed) >= 2 {
                    continue;
                }
                first = false;
                let Some(read) = read_staged(&mut chunks, &mut staged, index, &mut stages) else {
                    break;
                };
                let failed = read.is_err();
                if ready.send(read.map(|rows| (staged, rows))).is_err() || failed {
                    break;
                }
            }
            stages
        });
        let mut stages = pipeline(gpu, take_ready, free, sink)?;
        // The reader has ended: it sent its last chunk, which was taken.
        if let Ok(read) = reader.join() {
            stages.reading = read.reading;
            stages.checking = read.checking;
        }
        stages.setup = setup;
        Ok(stages)
    })
}

/// Reads the next chunk into `staged` and checks its points as the anneal
/// checks its input; `None` after the last.
fn read_staged(
    chunks: &mut Chunks,
    staged: &mut Staged,
    index: &Index,
    stages: &mut Stages,
) -> Option<Result<ChunkRows, EncodeError>> {
    let bytes = match staged.bytes_mut() {
        Ok(bytes) => bytes,
        Err(e) => return Some(Err(e.into())),
    };
    let started = Instant::now();
    let (d, dtype) = (chunks.d(), chunks.dtype());
    // Each piece is checked as it is read; a chunk that is not all clean
    // (a bad value, or a pipe's) is checked again as points, which names
    // the first bad value.
    let clean = |piece: &[u8]| crate::input::coordinates_clean(piece, dtype, d);
    let (rows, clean) = match chunks.read_checked(bytes, &clean)? {
        Ok(read) => read,
        Err(e) => return Some(Err(EncodeError::Shards(e))),
    };
    let read = Instant::now();
    stages.reading += read - started;
    if clean {
        return Some(Ok(rows));
    }
    let checked = staged
        .points(rows.rows * d)
        .map_err(EncodeError::from)
        .and_then(|points| checked_points(index, points, rows.start).map(|_| rows));
    stages.checking += read.elapsed();
    Some(checked)
}

/// The CUDA encode's loop: while chunk `k` is assigned on the device, the
/// assignments of chunk `k - 1` are written by `sink`, chunk `k + 1` is
/// taken from the reader and its upload enqueued (its buffer handed back
/// to the reader); then chunk `k`'s assignments are read back. The device
/// waits only for that read-back (4 bytes a point) between two chunks'
/// kernels.
fn pipeline(
    gpu: &mut ChunkAssigner,
    chunks: mpsc::Receiver<Read>,
    free: mpsc::Sender<Staged>,
    sink: &mut dyn FnMut(&[u32]) -> Result<(), EncodeError>,
) -> Result<Stages, EncodeError> {
    let mut chunks = chunks.into_iter();
    let mut stages = Stages::default();
    // Takes the next chunk and enqueues its upload; `false` after the last.
    let mut feed = |gpu: &mut ChunkAssigner, stages: &mut Stages| -> Result<bool, EncodeError> {
        let started = Instant::now();
        let next = chunks.next();
        stages.waiting_for_input += started.elapsed();
        let Some(read) = next else {
            return Ok(false);
        };
        let (staged, rows) = read?;
        gpu.upload_staged(&staged, rows.rows)?;
        // A reader that has ended has no use for it: dropped here, after
        // its copy.
        let _ = free.send(staged);
        Ok(true)
    };
    let (mut assigned, mut ready) = (Vec::new(), false);
    let mut more = feed(gpu, &mut stages)?;
    while more {
        gpu.launch()?;
        if ready {
            sink(&assigned)?;
        }
        more = feed(gpu, &mut stages)?;
        let started = Instant::now();
        ready = gpu.read(&mut assigned)?;
        stages.waiting_for_device += started.elapsed();
    }
    if ready {
        sink(&assigned)?;
    }
    Ok(stages)
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
