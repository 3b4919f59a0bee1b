//! The anneal index on disk: what a run keeps. A directory holding
//! `anchors.npy` (`m × d` float32), `assignments.npy` (`n` uint32: each
//! point's anchor) and `index.json` ([`IndexMeta`]: shapes, energies,
//! parameters, seed, backend, device, kiln's version and a hash of the
//! input), written through kiln's output folders (`kiln_output`): the
//! folder must be new, empty or an earlier index (kiln's marker), the index
//! is made beside it and swapped into place, so that a reader sees a whole
//! index, the old or the new, and only kiln's files are removed; each file
//! takes the mode and group of the one it replaces, or what the folder
//! allows (`access.rs`: an 0700 folder's files are 0600). Read back with
//! [`Index::read`], which checks the three agree; [`Reconstruction`]
//! (`measure.rs`) measures what the compression kept, against the original
//! points.

use std::fs::{self, File};
use std::io::{self, BufWriter, Read, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::npy::{self, NpyData, NpyError};
use crate::vocab::{Params, Points};

/// `index.json`'s `schema`: what the file is.
pub const SCHEMA: &str = "kiln.anneal.index";
/// `index.json`'s `version`: bumped when a field changes meaning or a
/// required one is added (fields added as optional keep it).
pub const VERSION: u32 = 1;
/// The input hash's algorithm, as `index.json` names it.
pub const HASH_ALGORITHM: &str = "xxh3-128";
/// The anchors' file in an index directory.
pub const ANCHORS_FILE: &str = "anchors.npy";
/// The assignments' file in an index directory.
pub const ASSIGNMENTS_FILE: &str = "assignments.npy";
/// The metadata's file in an index directory.
pub const META_FILE: &str = "index.json";
/// How far [`Index::read`]'s caller may find the energy recomputed from
/// the index and the points from `index.json`'s `energy`, relative: the
/// same deterministic sum, only the JSON round trip of an f64 in between.
pub const ENERGY_TOLERANCE: f64 = 1e-9;

/// Why an index was not written or read. One line each; the path is in the
/// message.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum IndexError {
    /// The output directory holds an earlier index and replacing it was not
    /// asked for.
    #[error("{}: already exists; choose another directory or allow replacing it", .0.display())]
    Exists(PathBuf),
    /// The directory that would hold the index does not exist.
    #[error("{}: directory does not exist; create it first", .0.display())]
    NoParent(PathBuf),
    /// The output directory is refused (not kiln's, holds a file kiln did
    /// not write, contains an input) or could not be written.
    #[error(transparent)]
    Output(kiln_output::Error),
    /// A filesystem call failed.
    #[error("{}: {what}: {error}", path.display())]
    Io {
        /// What was being done (`"writing"`).
        what: &'static str,
        /// The path.
        path: PathBuf,
        /// The error (its text is in the message, so it is no `source`: a
        /// report of the chain would repeat it).
        error: io::Error,
    },
    /// An array file is not readable as the index's array.
    #[error("{}: {error}", path.display())]
    Npy {
        /// The file.
        path: PathBuf,
        /// Why (in the message, as for `Io`).
        error: NpyError,
    },
    /// `index.json` is not the metadata of an index of this version.
    #[error("{}: {message}", path.display())]
    Meta {
        /// The file.
        path: PathBuf,
        /// Why, in one line.
        message: String,
    },
    /// The three files do not agree.
    #[error("{}: {message}; the index is corrupt, write it again", path.display())]
    Inconsistent {
        /// The index directory.
        path: PathBuf,
        /// What disagrees.
        message: String,
    },
    /// An anchor of `anchors.npy` is NaN, infinite or too large for f32
    /// distances ([`crate::check_anchors`]).
    #[error("{}: {error}", path.display())]
    Anchors {
        /// The file.
        path: PathBuf,
        /// Which anchor, and the bound that holds (in the message, as for
        /// `Io`).
        error: crate::error::AnnealError,
    },
    /// [`Index::write`] (or a measure) was given an index that
    /// [`Index::read`] would refuse (made or edited by hand); nothing was
    /// written.
    #[error(
        "the index is not valid: {message}; use an index made by a run or read by Index::read"
    )]
    Invalid {
        /// What [`Index::read`] would refuse, in one line.
        message: String,
    },
    /// The points given are not the ones the index was made from.
    #[error(
        "the input does not match the index: {what}; give the same files the index was made from"
    )]
    InputMismatch {
        /// What differs.
        what: String,
    },
}

/// `index.json`: everything about a run but its arrays.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IndexMeta {
    /// [`SCHEMA`].
    pub schema: String,
    /// [`VERSION`].
    pub version: u32,
    /// Points.
    pub n: u64,
    /// Dimensions.
    pub d: u64,
    /// Anchors (rows of `anchors.npy`).
    pub m: u64,
    /// Iterations run.
    pub iterations: u32,
    /// Energy (mean squared distance to the assigned anchor) of each
    /// iteration's assignment, against the anchors before that iteration's
    /// update, as the run computed it.
    pub energy_history: Vec<f64>,
    /// The energy of the index as stored: the mean squared distance of each
    /// point to its stored anchor after the last update (so at most the
    /// last entry of `energy_history`), summed in f64 on the host.
    pub energy: f64,
    /// The parameters of the run.
    pub params: Params,
    /// The seed (also in `params`).
    pub seed: u64,
    /// Maintenance passes that changed the anchors.
    pub maintenance: Vec<MaintenanceRecord>,
    /// `"cpu"`, `"cuda"` or `"wgpu"`.
    pub backend: String,
    /// The device (GPU name, or the CPU's thread count).
    pub device: String,
    /// GPUs the points were sharded over (0 on the CPU).
    pub gpus: u32,
    /// Processes the run was spread over (one per GPU or CPU rank; 1 for a
    /// one-process run, and for indexes written before this field).
    #[serde(default = "one_process")]
    pub world_size: u32,
    /// kiln's version (kiln-anneal's, the workspace's).
    pub kiln_version: String,
    /// What the points were.
    pub input: InputRecord,
}

fn one_process() -> u32 {
    1
}

/// One maintenance pass in [`IndexMeta`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MaintenanceRecord {
    /// After this iteration.
    pub iteration: u32,
    /// Anchors merged away.
    pub merged: u64,
    /// Anchors split.
    pub split: u64,
}

/// The input in [`IndexMeta`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InputRecord {
    /// The element type (`"float32"`, `"float16"`, `"bfloat16"`).
    pub dtype: String,
    /// [`HASH_ALGORITHM`].
    pub hash_algorithm: String,
    /// The hash ([`input_hash`]), 32 hex digits.
    pub hash: String,
    /// The files, in row order, with their rows (empty for synthetic points).
    pub files: Vec<InputFile>,
}

/// One input file in [`InputRecord`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InputFile {
    /// The path as given.
    pub path: String,
    /// Its rows.
    pub rows: u64,
}

/// A whole index: the metadata and the two arrays.
#[derive(Debug, Clone, PartialEq)]
pub struct Index {
    /// `index.json`.
    pub meta: IndexMeta,
    /// `m × d`, row-major.
    pub anchors: Vec<f32>,
    /// `n` anchor indices.
    pub assignments: Vec<u32>,
}

/// The hash of `n × d` points of one element type: xxh3-128 over a tag, the
/// element type's name, `n`, `d`, then the values' little-endian bytes in
/// row order, so the same rows split differently into files hash the same
/// and the same values in another type do not. 32 hex digits.
pub fn input_hash(points: Points<'_>, n: usize, d: usize) -> String {
    let mut hasher = xxhash_rust::xxh3::Xxh3::new();
    hasher.update(b"kiln.anneal.input/1\0");
    hasher.update(points.dtype().name().as_bytes());
    hasher.update(&[0]);
    hasher.update(&(n as u64).to_le_bytes());
    hasher.update(&(d as u64).to_le_bytes());
    for piece in points.pieces(0..points.len()) {
        match piece {
            Points::F32(v) => hash_le(&mut hasher, v, |x| x.to_le_bytes()),
            Points::F16(v) | Points::BF16(v) => hash_le(&mut hasher, v, |x| x.to_le_bytes()),
            Points::Parts(_) => unreachable!("pieces are flat"),
        }
    }
    format!("{:032x}", hasher.digest128())
}

/// Feeds `values` as little-endian bytes: the memory itself on a
/// little-endian host, converted in blocks otherwise.
fn hash_le<T: bytemuck::Pod, const B: usize>(
    hasher: &mut xxhash_rust::xxh3::Xxh3,
    values: &[T],
    le: fn(T) -> [u8; B],
) {
    if cfg!(target_endian = "little") {
        hasher.update(bytemuck::cast_slice(values));
    } else {
        for chunk in values.chunks(4096) {
            let bytes: Vec<u8> = chunk.iter().flat_map(|v| le(*v)).collect();
            hasher.update(&bytes);
        }
    }
}

/// An index's output directory, checked before the run
/// ([`prepare_output`]) and written by [`Index::write_into`].
#[derive(Debug)]
pub struct IndexOutput(kiln_output::Output);

impl IndexOutput {
    /// One line for each leftover of an interrupted earlier write that was
    /// found beside the directory, saying where it went.
    pub fn notes(&self) -> &[String] {
        self.0.notes()
    }
}

/// The kind of output an index directory is, in kiln's marker.
pub const OUTPUT_KIND: &str = "anneal-index";

/// The writer [`Index::write`] records in an index's marker: this library,
/// for a caller that names no tool of its own.
pub const LIBRARY_TOOL: &str = "kiln-anneal";

/// Checks, before a run, that an index can be written to `dir`: it must
/// not exist, be empty, or hold an earlier index (replaced only with
/// `replace`) and nothing else; it must not contain one of `inputs` or the
/// current directory; the directory holding it must take a new entry.
/// Refusals touch nothing. `tool` is what the index's marker records as its
/// writer: the caller's command as its user types it (or [`LIBRARY_TOOL`]).
pub fn prepare_output(
    dir: &Path,
    replace: bool,
    inputs: &[&Path],
    tool: &'static str,
) -> Result<IndexOutput, IndexError> {
    let spec = kiln_output::Spec {
        tool,
        kind: OUTPUT_KIND,
        replace,
        legacy: Some(unmarked_index),
    };
    kiln_output::Output::prepare(dir, spec, inputs)
        .map(IndexOutput)
        .map_err(output_error)
}

/// The three files of an index written before kiln's marker existed: a
/// `index.json` of [`SCHEMA`] (a regular file of at most [`META_MAX_BYTES`]) and the
/// arrays beside it.
fn unmarked_index(dir: &Path) -> Option<Vec<String>> {
    let path = dir.join(META_FILE);
    let meta = fs::symlink_metadata(&path).ok()?;
    if !meta.is_file() {
        return None;
    }
    let value: serde_json::Value = serde_json::from_str(&read_meta_text(&path).ok()?).ok()?;
    (value.get("schema")?.as_str()? == SCHEMA).then(|| {
        [ANCHORS_FILE, ASSIGNMENTS_FILE, META_FILE]
            .map(String::from)
            .into()
    })
}

/// The index's error for an output folder's.
fn output_error(e: kiln_output::Error) -> IndexError {
    match e {
        kiln_output::Error::Exists { dir, .. } => IndexError::Exists(dir),
        kiln_output::Error::NoParent(parent) => IndexError::NoParent(parent),
        other => IndexError::Output(other),
    }
}

impl Index {
    /// Writes the index into `dir` ([`prepare_output`] then
    /// [`Index::write_into`]), its marker naming [`LIBRARY_TOOL`] as the
    /// writer; returns the notes of both.
    pub fn write(&self, dir: &Path, replace: bool) -> Result<Vec<String>, IndexError> {
        self.check()?;
        let out = prepare_output(dir, replace, &[], LIBRARY_TOOL)?;
        let mut notes = out.notes().to_vec();
        notes.extend(self.write_into(out)?);
        Ok(notes)
    }

    /// Writes the three files, flushed to disk, into the prepared output
    /// and swaps it into place; an earlier index there is then removed
    /// file by file. Returns a line for anything of note (an old index
    /// kept aside because it held a file kiln did not write).
    pub fn write_into(&self, out: IndexOutput) -> Result<Vec<String>, IndexError> {
        self.check()?;
        let meta = &self.meta;
        let (m, d) = (meta.m as usize, meta.d as usize);
        let (staged, dir) = (out.0.path(), out.0.dir());
        write_file(staged, dir, ANCHORS_FILE, |w| {
            npy::write_f32_matrix(w, m, d, &self.anchors)
        })?;
        write_file(staged, dir, ASSIGNMENTS_FILE, |w| {
            npy::write_u32_vector(w, &self.assignments)
        })?;
        write_file(staged, dir, META_FILE, |w| {
            serde_json::to_writer_pretty(&mut *w, meta).map_err(io::Error::other)?;
            w.write_all(b"\n")
        })?;
        out.0.commit().map_err(output_error)
    }

    /// Reads the index in `dir` and checks that its files agree: the
    /// schema and version, every field of `index.json` against what a run
    /// writes (`check.rs`), the arrays' shapes against it, every assignment
    /// below `m`, the history's length, and every anchor finite and within
    /// [`crate::coordinate_bound`] ([`crate::check_anchors`]).
    pub fn read(dir: &Path) -> Result<Self, IndexError> {
        let meta_path = dir.join(META_FILE);
        let text = read_meta_text(&meta_path)?;
        let meta = parse_meta(&text)
            .and_then(|meta| check::meta(&meta).map(|()| meta))
            .map_err(|message| IndexError::Meta {
                path: meta_path,
                message,
            })?;
        let anchors_path = dir.join(ANCHORS_FILE);
        let anchors = npy::read_regular(&anchors_path).map_err(|error| IndexError::Npy {
            path: anchors_path.clone(),
            error,
        })?;
        let assignments_path = dir.join(ASSIGNMENTS_FILE);
        let assignments =
            npy::read_u32_vector(&assignments_path).map_err(|error| IndexError::Npy {
                path: assignments_path,
                error,
            })?;
        let bad = |message: String| IndexError::Inconsistent {
            path: dir.to_path_buf(),
            message,
        };
        if (anchors.n as u64, anchors.d as u64) != (meta.m, meta.d) {
            return Err(bad(format!(
                "{ANCHORS_FILE} is {} x {} but {META_FILE} says m = {}, d = {}",
                anchors.n, anchors.d, meta.m, meta.d
            )));
        }
        let NpyData::F32(anchors) = anchors.data else {
            return Err(bad(format!("{ANCHORS_FILE} is not float32")));
        };
        check::arrays(&meta, &assignments).map_err(bad)?;
        check::anchors(&anchors, &meta).map_err(|error| IndexError::Anchors {
            path: anchors_path,
            error,
        })?;
        Ok(Self {
            meta,
            anchors,
            assignments,
        })
    }

    /// Refuses an index [`Index::read`] would refuse, with the same checks,
    /// so that what [`Index::write`] writes is read back equal.
    fn check(&self) -> Result<(), IndexError> {
        let meta = &self.meta;
        let invalid = |message: String| IndexError::Invalid { message };
        check::meta(meta).map_err(|m| invalid(format!("{META_FILE}: {m}")))?;
        let values = (meta.m as usize).checked_mul(meta.d as usize);
        if values != Some(self.anchors.len()) {
            return Err(invalid(format!(
                "{} anchor values for m = {}, d = {}",
                self.anchors.len(),
                meta.m,
                meta.d
            )));
        }
        check::arrays(meta, &self.assignments).map_err(invalid)?;
        check::anchors(&self.anchors, meta).map_err(|e| invalid(format!("{ANCHORS_FILE}: {e}")))
    }

    /// Refuses `points` (`n × d`) unless they are the ones the index was
    /// made from: the same shape, element type and [`input_hash`].
    pub fn check_input(&self, points: Points<'_>, n: usize, d: usize) -> Result<(), IndexError> {
        let meta = &self.meta;
        let what = if (n as u64, d as u64) != (meta.n, meta.d) {
            format!("it is {n} x {d}, the index {} x {}", meta.n, meta.d)
        } else if points.dtype().name() != meta.input.dtype {
            format!(
                "it is {}, the index was made from {}",
                points.dtype().name(),
                meta.input.dtype
            )
        } else {
            let hash = input_hash(points, n, d);
            if hash == meta.input.hash {
                return Ok(());
            }
            format!(
                "its {HASH_ALGORITHM} hash is {hash}, the index's {}",
                meta.input.hash
            )
        };
        Err(IndexError::InputMismatch { what })
    }
}

/// The most bytes of `index.json` read: a run writes a few KiB (its input
/// files' paths are the most of it).
pub const META_MAX_BYTES: u64 = 64 << 20;

/// `index.json`'s text: a regular file (a FIFO is refused at once, not
/// waited on) of at most [`META_MAX_BYTES`], in UTF-8.
fn read_meta_text(path: &Path) -> Result<String, IndexError> {
    let meta_error = |message: String| IndexError::Meta {
        path: path.to_path_buf(),
        message,
    };
    let io_error = |error| IndexError::Io {
        what: "reading",
        path: path.to_path_buf(),
        error,
    };
    let (file, len) = match npy::open_regular(path) {
        Ok(opened) => opened,
        Err(npy::Irregular::Io(e)) => return Err(io_error(e)),
        Err(npy::Irregular::Kind(kind)) => {
            return Err(meta_error(format!(
                "is {kind}, not a regular file; give the folder an index was written to"
            )))
        }
    };
    let too_big = || {
        meta_error(format!(
            "is over {} MiB, more than an index's metadata; give the folder an index was \
             written to",
            META_MAX_BYTES >> 20
        ))
    };
    if len > META_MAX_BYTES {
        return Err(too_big());
    }
    let mut text = String::new();
    // The bound holds even if the file grows after its fstat.
    file.take(META_MAX_BYTES + 1)
        .read_to_string(&mut text)
        .map_err(io_error)?;
    if text.len() as u64 > META_MAX_BYTES {
        return Err(too_big());
    }
    Ok(text)
}

/// `index.json`'s text as [`IndexMeta`], the schema and version checked
/// first (so that another file's fields are not what is reported).
fn parse_meta(text: &str) -> Result<IndexMeta, String> {
    let value: serde_json::Value =
        serde_json::from_str(text).map_err(|e| format!("not JSON ({e})"))?;
    let schema = value.get("schema").and_then(|s| s.as_str());
    if schema != Some(SCHEMA) {
        return Err(format!(
            "not an anneal index (schema {}, expected {SCHEMA:?})",
            schema.map_or("missing".to_string(), |s| format!("{s:?}"))
        ));
    }
    let version = value.get("version").and_then(|v| v.as_u64());
    if version != Some(u64::from(VERSION)) {
        return Err(format!(
            "index version {} is not supported (this kiln reads version {VERSION}); \
             write the index again with this kiln",
            version.map_or("missing".to_string(), |v| v.to_string())
        ));
    }
    serde_json::from_value(value).map_err(|e| format!("not a valid index ({e})"))
}

/// Creates `staged/name`, fills it with `fill` and flushes it to disk; it
/// takes the mode and group of `dir/name`, the file it will replace, or
/// what the folder `dir` allows (`access.rs`).
fn write_file(
    staged: &Path,
    dir: &Path,
    name: &str,
    fill: impl FnOnce(&mut BufWriter<File>) -> io::Result<()>,
) -> Result<(), IndexError> {
    let path = staged.join(name);
    let result = (|| {
        let file = File::create(&path)?;
        crate::access::keep_or_like_folder(&file, dir, name)?;
        let mut w = BufWriter::new(file);
        fill(&mut w)?;
        w.into_inner().map_err(|e| e.into_error())?.sync_all()
    })();
    result.map_err(|error| IndexError::Io {
        what: "writing",
        path,
        error,
    })
}

mod build;
mod check;
mod measure;

pub use build::RunRecord;
pub use measure::{energy, member_spread, Reconstruction, Spread};

#[cfg(test)]
pub(crate) mod tests;
