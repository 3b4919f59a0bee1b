//! The anneal index on disk: what a run keeps. A directory holding
//! `anchors.npy` (`m × d` float32), `assignments.npy` (`n` uint32: each
//! point's anchor) and `index.json` ([`IndexMeta`]: shapes, energies,
//! parameters, seed, backend, device, kiln's version and a hash of the
//! input), written into a temp directory beside it and renamed into place,
//! so that a reader sees a whole index or none. Read back with
//! [`Index::read`], which checks the three agree; [`Reconstruction`]
//! (`measure.rs`) measures what the compression kept, against the original
//! points.

use std::fs::{self, File};
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::anneal::{Params, Points};
use crate::npy::{self, NpyData, NpyError};

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
    /// The output directory exists and replacing it was not asked for.
    #[error("{}: already exists; choose another directory or allow replacing it", .0.display())]
    Exists(PathBuf),
    /// Replacing was asked for, but the path holds something that is not an
    /// index (it is not removed).
    #[error(
        "{}: is not an anneal index directory (no {META_FILE}, or not a directory); \
         remove it yourself or choose another path",
        .0.display()
    )]
    NotAnIndex(PathBuf),
    /// The directory that would hold the index does not exist.
    #[error("{}: directory does not exist; create it first", .0.display())]
    NoParent(PathBuf),
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
    /// kiln's version (the apps crate's).
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

impl Index {
    /// Writes the index into `dir`: the three files into a temp directory
    /// beside it, flushed to disk, then renamed to `dir`. An existing `dir`
    /// is refused unless `replace`, and then only an index directory (one
    /// holding `index.json`) or an empty one is replaced, after the new one
    /// is complete.
    pub fn write(&self, dir: &Path, replace: bool) -> Result<(), IndexError> {
        let existing = existing_index(dir, replace)?;
        let parent = parent_of(dir);
        if !parent.is_dir() {
            return Err(IndexError::NoParent(parent));
        }
        let io_err = |what, path: &Path| {
            let path = path.to_path_buf();
            move |error| IndexError::Io { what, path, error }
        };
        let temp = tempfile::Builder::new()
            .prefix(".kiln-index-")
            .tempdir_in(&parent)
            .map_err(io_err("creating a temp directory", &parent))?;
        let meta = &self.meta;
        let (m, d) = (meta.m as usize, meta.d as usize);
        write_file(&temp.path().join(ANCHORS_FILE), |w| {
            npy::write_f32_matrix(w, m, d, &self.anchors)
        })?;
        write_file(&temp.path().join(ASSIGNMENTS_FILE), |w| {
            npy::write_u32_vector(w, &self.assignments)
        })?;
        write_file(&temp.path().join(META_FILE), |w| {
            serde_json::to_writer_pretty(&mut *w, meta).map_err(io::Error::other)?;
            w.write_all(b"\n")
        })?;
        let staged = temp.keep();
        let result = if existing {
            swap_in(&staged, dir, &parent)
        } else {
            fs::rename(&staged, dir).map_err(io_err("renaming the new index into place", dir))
        };
        if result.is_err() {
            let _ = fs::remove_dir_all(&staged);
        }
        result
    }

    /// Reads the index in `dir` and checks that its files agree: the
    /// schema and version, every field of `index.json` against what a run
    /// writes (`check.rs`), the arrays' shapes against it, every assignment
    /// below `m`, the history's length, and every anchor finite.
    pub fn read(dir: &Path) -> Result<Self, IndexError> {
        let meta_path = dir.join(META_FILE);
        let text = fs::read_to_string(&meta_path).map_err(|error| IndexError::Io {
            what: "reading",
            path: meta_path.clone(),
            error,
        })?;
        let meta = parse_meta(&text)
            .and_then(|meta| check::meta(&meta).map(|()| meta))
            .map_err(|message| IndexError::Meta {
                path: meta_path,
                message,
            })?;
        let anchors_path = dir.join(ANCHORS_FILE);
        let anchors = npy::read(&anchors_path).map_err(|error| IndexError::Npy {
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
        if assignments.len() as u64 != meta.n {
            return Err(bad(format!(
                "{ASSIGNMENTS_FILE} holds {} assignments but {META_FILE} says n = {}",
                assignments.len(),
                meta.n
            )));
        }
        if let Some((point, &anchor)) = assignments
            .iter()
            .enumerate()
            .find(|(_, &a)| u64::from(a) >= meta.m)
        {
            return Err(bad(format!(
                "point {point} is assigned to anchor {anchor}, but there are {} anchors",
                meta.m
            )));
        }
        if meta.energy_history.len() != meta.iterations as usize {
            return Err(bad(format!(
                "{META_FILE} has {} energies for {} iterations",
                meta.energy_history.len(),
                meta.iterations
            )));
        }
        check::anchors(&anchors, meta.d as usize).map_err(bad)?;
        Ok(Self {
            meta,
            anchors,
            assignments,
        })
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

/// Checks, before a run, that [`Index::write`] could write `dir`: refused
/// when it exists (unless `replace`, and then unless it is an index or
/// empty), or when the directory that would hold it does not exist.
pub fn check_output(dir: &Path, replace: bool) -> Result<(), IndexError> {
    existing_index(dir, replace)?;
    let parent = parent_of(dir);
    if parent.is_dir() {
        Ok(())
    } else {
        Err(IndexError::NoParent(parent))
    }
}

/// The directory holding `dir` (`.` for a bare name).
fn parent_of(dir: &Path) -> PathBuf {
    match dir.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// Whether `dir` exists as something a write may replace; refuses it
/// when it exists and may not be.
fn existing_index(dir: &Path, replace: bool) -> Result<bool, IndexError> {
    let meta = match fs::symlink_metadata(dir) {
        Ok(meta) => meta,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
        Err(error) => {
            return Err(IndexError::Io {
                what: "checking the output path",
                path: dir.to_path_buf(),
                error,
            })
        }
    };
    if !replace {
        return Err(IndexError::Exists(dir.to_path_buf()));
    }
    let empty = || fs::read_dir(dir).is_ok_and(|mut entries| entries.next().is_none());
    if meta.is_dir() && (dir.join(META_FILE).is_file() || empty()) {
        Ok(true)
    } else {
        Err(IndexError::NotAnIndex(dir.to_path_buf()))
    }
}

/// Replaces the index `dir` by `staged`: the old one is moved aside, the
/// new one renamed in, the old one removed (moved back if the rename fails).
fn swap_in(staged: &Path, dir: &Path, parent: &Path) -> Result<(), IndexError> {
    let io_err = |what, path: &Path| {
        let path = path.to_path_buf();
        move |error| IndexError::Io { what, path, error }
    };
    let aside = tempfile::Builder::new()
        .prefix(".kiln-index-old-")
        .tempdir_in(parent)
        .map_err(io_err("creating a temp directory", parent))?
        .keep();
    // Renaming a directory onto an empty one replaces it.
    fs::rename(dir, &aside).map_err(io_err("moving the old index aside", dir))?;
    if let Err(error) = fs::rename(staged, dir) {
        let _ = fs::rename(&aside, dir);
        return Err(IndexError::Io {
            what: "renaming the new index into place",
            path: dir.to_path_buf(),
            error,
        });
    }
    fs::remove_dir_all(&aside).map_err(io_err("removing the old index", &aside))
}

/// Creates `path`, fills it with `fill` and flushes it to disk.
fn write_file(
    path: &Path,
    fill: impl FnOnce(&mut BufWriter<File>) -> io::Result<()>,
) -> Result<(), IndexError> {
    let result = (|| {
        let mut w = BufWriter::new(File::create(path)?);
        fill(&mut w)?;
        w.into_inner().map_err(|e| e.into_error())?.sync_all()
    })();
    result.map_err(|error| IndexError::Io {
        what: "writing",
        path: path.to_path_buf(),
        error,
    })
}

mod check;
mod measure;

pub use measure::{energy, member_spread, Reconstruction, Spread};

#[cfg(test)]
mod tests;
