//! `.npy` input: an `(n, d)` matrix of float32, float16 or bfloat16 in C
//! order, read with `npyz` after a bounded check of the header (size,
//! nesting, shape arithmetic), so that no input can exhaust the stack or
//! memory.
//!
//! f16 and bf16 data stay as raw bits ([`NpyData::F16`], [`NpyData::BF16`])
//! so that they can go to the GPU as they are. The length of the data is
//! taken from the file's metadata only for regular files: pipes and FIFOs are
//! read to their end. A little-endian regular file is memory-mapped instead
//! of read ([`map`]); the writer of the anneal index's arrays is here too
//! ([`write_f32_matrix`], [`write_u32_vector`]), with its reader
//! ([`read_u32_vector`]), which with [`read_regular`] reads only a regular
//! file (`regular.rs`: a FIFO refused, not waited on). Several files read
//! as one matrix are [`Shards`].

use std::fmt;
use std::fs::File;
use std::io::{self, BufReader, Cursor, Read};
use std::path::Path;

use npyz::{DType, Endianness, NpyFile, NpyHeader, Order, TypeChar};
use py_literal::Value;

/// The first six bytes of every `.npy` file.
pub const MAGIC: &[u8; 6] = b"\x93NUMPY";

/// The largest header accepted. numpy itself refuses headers over 10,000
/// bytes by default; a 2-D float matrix needs about 128.
pub const MAX_HEADER_BYTES: usize = 1 << 16;

/// The deepest bracket nesting accepted in a header: numpy writes 2 for a
/// plain matrix, a structured dtype a few more. npyz's parser recurses per
/// level, so this bounds its stack and its backtracking.
pub const MAX_NESTING: usize = 8;

/// Why a `.npy` input was not read. Messages are one line and do not name
/// the file: the caller adds it.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum NpyError {
    /// Reading failed for a reason other than the input ending early.
    // Its text is the message: no `source`, so that a report of the chain
    // does not repeat it.
    #[error("{0}")]
    Io(io::Error),
    /// The path is a directory.
    #[error("is a directory; give the path of a .npy file")]
    IsDirectory,
    /// A file read as a regular file ([`read_regular`],
    /// [`read_u32_vector`]: an index's arrays) is not one.
    #[error("is {0}, not a regular file; give the path of a .npy file")]
    NotRegular(&'static str),
    /// The input does not start with the npy magic string.
    #[error("{}", not_npy_text(.found))]
    NotNpy {
        /// The first bytes found (up to six).
        found: Vec<u8>,
    },
    /// A format version other than 1.0, 2.0 or 3.0.
    #[error(
        "npy format version {0}.{1} is not supported (1.0, 2.0 and 3.0 are); \
         re-save the array with numpy.save"
    )]
    UnsupportedVersion(u8, u8),
    /// The header is not the Python dict literal numpy writes.
    #[error("the npy header is not valid ({0}); re-save the array with numpy.save")]
    BadHeader(String),
    /// A dtype other than float32, float16 and bfloat16.
    #[error(
        "dtype {0} is not supported; convert with `a.astype(numpy.float32)` and \
         re-save (accepted: float32, float16 and bfloat16)"
    )]
    UnsupportedDtype(String),
    /// An array of another type or rank than the one asked for (the anneal
    /// index's arrays).
    #[error("expected {expected} but the file holds dtype {descr} of shape {}", shape_text(.shape))]
    WrongArray {
        /// What was asked for (`"a 1-D uint32 array"`).
        expected: &'static str,
        /// The dtype found.
        descr: String,
        /// The shape found.
        shape: Vec<u64>,
    },
    /// `fortran_order: True`.
    #[error("the array is in Fortran order; save `numpy.ascontiguousarray(a)` instead")]
    FortranOrder,
    /// A shape that is not `(n, d)`.
    #[error(
        "shape {} is not 2-D; save the embeddings as one (n, d) matrix",
        shape_text(.0)
    )]
    NotTwoD(Vec<u64>),
    /// `n * d * itemsize` does not fit in memory addresses.
    #[error(
        "shape {} is too large to address; check the header or split the file",
        shape_text(.0)
    )]
    ShapeTooLarge(Vec<u64>),
    /// The input ends before the part named.
    #[error(
        "the input is truncated: its {section} needs {needed} bytes but only \
         {available} are there; copy the file again or re-save it"
    )]
    Truncated {
        /// `"preamble"`, `"header"` or `"data"`.
        section: &'static str,
        /// Bytes that part needs.
        needed: u64,
        /// Bytes that were there.
        available: u64,
    },
    /// More data than the shape says.
    #[error(
        "the data after the header is {} but the shape needs {expected}: the header does not \
         match the data; re-save the array with numpy.save",
        actual_text(*.actual)
    )]
    TrailingData {
        /// Bytes the shape needs.
        expected: u64,
        /// Bytes after the header, where known (a regular file).
        actual: Option<u64>,
    },
}

/// [`NpyError::NotNpy`]'s message: an empty input is named as such.
fn not_npy_text(found: &[u8]) -> String {
    if found.is_empty() {
        return "not an npy file: it is empty; write it with numpy.save".to_string();
    }
    format!(
        "not an npy file: it starts with {} instead of \\x93NUMPY; write it with \
         numpy.save (an .npz archive holds .npy files: unzip it first)",
        found.escape_ascii()
    )
}

/// [`NpyError::TrailingData`]'s length after the header, where known.
fn actual_text(actual: Option<u64>) -> String {
    actual.map_or("longer".to_string(), |actual| format!("{actual} bytes"))
}

fn shape_text(shape: &[u64]) -> String {
    match shape {
        [one] => format!("({one},)"),
        _ => {
            let dims: Vec<String> = shape.iter().map(u64::to_string).collect();
            format!("({})", dims.join(", "))
        }
    }
}

/// The element type of the data (the anneal's, which reads it).
pub use crate::vocab::Dtype;

/// The `descr`s read as bfloat16: `numpy.save` of an `ml_dtypes.bfloat16`
/// array writes `'<V2'` (numpy has no bfloat16 type code), other writers
/// `'bfloat16'`.
const BF16_DESCRS: &[&str] = &["<V2", "|V2", "bfloat16"];

/// The elements of a matrix, in row-major order.
#[derive(Debug, Clone, PartialEq)]
pub enum NpyData {
    /// float32.
    F32(Vec<f32>),
    /// float16, as IEEE binary16 bit patterns.
    F16(Vec<u16>),
    /// bfloat16, as bit patterns.
    BF16(Vec<u16>),
}

/// An `(n, d)` matrix: `data` holds `n * d` elements, row `i` at
/// `i * d..(i + 1) * d`.
#[derive(Debug, Clone, PartialEq)]
pub struct NpyMatrix {
    /// Rows.
    pub n: usize,
    /// Columns.
    pub d: usize,
    /// The elements.
    pub data: NpyData,
}

/// A `.npy` input whose header has been read and checked; the data is read
/// by [`NpyInput::read`], so that a caller can check the size first.
pub struct NpyInput<R> {
    /// Rows.
    pub n: usize,
    /// Columns.
    pub d: usize,
    /// The element type.
    pub dtype: Dtype,
    header: NpyHeader,
    reader: R,
    /// Bytes of data after the header, where known (regular files only).
    data_len: Option<u64>,
    /// Where the data starts: the preamble and header's length.
    data_offset: u64,
    /// Whether the data is stored big-endian (it is then read and swapped,
    /// never mapped).
    big_endian: bool,
}

impl<R> fmt::Debug for NpyInput<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NpyInput")
            .field("n", &self.n)
            .field("d", &self.d)
            .field("dtype", &self.dtype)
            .field("data_len", &self.data_len)
            .finish_non_exhaustive()
    }
}

/// Opens the `.npy` file at `path` and reads its header. A regular file's
/// length is checked against the shape before any data is read.
pub fn open(path: impl AsRef<Path>) -> Result<NpyInput<BufReader<File>>, NpyError> {
    let file = File::open(path).map_err(NpyError::Io)?;
    let meta = file.metadata().map_err(NpyError::Io)?;
    if meta.is_dir() {
        return Err(NpyError::IsDirectory);
    }
    // Pipes, FIFOs and character devices report a length of 0 (or anything):
    // only a regular file's length says how much data there is.
    let total = meta.is_file().then_some(meta.len());
    open_reader(BufReader::new(file), total)
}

/// Reads the header of a `.npy` input from `reader`; `total` is the whole
/// input's length where it is known.
pub fn open_reader<R: Read>(mut reader: R, total: Option<u64>) -> Result<NpyInput<R>, NpyError> {
    let prefix = read_prefix(&mut reader)?;
    let (shape, descr) = checked_shape(&prefix.text)?;
    let bf16 = descr.as_deref().is_some_and(|d| BF16_DESCRS.contains(&d));
    // npyz knows no bfloat16: it reads the header with the descr as '<u2'
    // (the same 2-byte little-endian elements, as bits).
    let header = match &descr {
        Some(descr) if bf16 => npyz_header(&prefix.text, descr, "<u2"),
        _ => NpyHeader::from_reader(Cursor::new(&prefix.bytes)),
    }
    .map_err(|e| bad_header(&e))?;
    let (dtype, big_endian) = match header.dtype() {
        DType::Plain(ts) if bf16 => (Dtype::BF16, ts.endianness() == Endianness::Big),
        DType::Plain(ts) if ts.type_char() == TypeChar::Float && ts.size_field() == 4 => {
            (Dtype::F32, ts.endianness() == Endianness::Big)
        }
        DType::Plain(ts) if ts.type_char() == TypeChar::Float && ts.size_field() == 2 => {
            (Dtype::F16, ts.endianness() == Endianness::Big)
        }
        other => return Err(NpyError::UnsupportedDtype(other.descr())),
    };
    if header.order() == Order::Fortran && shape.iter().filter(|&&s| s > 1).count() > 1 {
        return Err(NpyError::FortranOrder);
    }
    let [n, d] = shape[..] else {
        return Err(NpyError::NotTwoD(shape));
    };
    let bytes = n
        .checked_mul(d)
        .and_then(|e| e.checked_mul(dtype.size()))
        .filter(|&b| b <= isize::MAX as u64)
        .ok_or_else(|| NpyError::ShapeTooLarge(shape.clone()))?;
    let data_len = total.map(|t| t.saturating_sub(prefix.bytes.len() as u64));
    match data_len {
        Some(actual) if actual < bytes => {
            return Err(NpyError::Truncated {
                section: "data",
                needed: bytes,
                available: actual,
            })
        }
        Some(actual) if actual > bytes => {
            return Err(NpyError::TrailingData {
                expected: bytes,
                actual: Some(actual),
            })
        }
        _ => {}
    }
    Ok(NpyInput {
        n: usize::try_from(n).map_err(|_| NpyError::ShapeTooLarge(shape.clone()))?,
        d: usize::try_from(d).map_err(|_| NpyError::ShapeTooLarge(shape.clone()))?,
        dtype,
        header,
        reader,
        data_len,
        data_offset: prefix.bytes.len() as u64,
        big_endian,
    })
}

/// npyz's reading of `text` (a header dict) with the quoted descr `from`
/// replaced by `to`.
fn npyz_header(text: &str, from: &str, to: &str) -> io::Result<NpyHeader> {
    let quoted = [format!("'{from}'"), format!("\"{from}\"")];
    let replaced = quoted
        .iter()
        .find(|q| text.contains(q.as_str()))
        .map_or_else(
            || text.to_string(),
            |q| text.replacen(q.as_str(), &format!("'{to}'"), 1),
        );
    let mut bytes = MAGIC.to_vec();
    bytes.extend([2, 0]);
    bytes.extend((replaced.len() as u32).to_le_bytes());
    bytes.extend(replaced.bytes());
    NpyHeader::from_reader(Cursor::new(bytes))
}

impl<R: Read> NpyInput<R> {
    /// Bytes of data the header promises.
    pub fn data_bytes(&self) -> u64 {
        self.n as u64 * self.d as u64 * self.dtype.size()
    }

    /// Reads the data (to the input's end: bytes after it are an error).
    pub fn read(mut self) -> Result<NpyMatrix, NpyError> {
        let count = self.n * self.d;
        let needed = self.data_bytes();
        let data = match self.dtype {
            Dtype::F32 => NpyData::F32(self.elements(count, needed, |v: f32| v)?),
            Dtype::F16 => NpyData::F16(self.elements(count, needed, |v: half::f16| v.to_bits())?),
            Dtype::BF16 => NpyData::BF16(self.elements(count, needed, |v: u16| v)?),
        };
        if self.data_len.is_none() {
            // One byte more is enough to know; reading on could never end
            // on an endless stream.
            let mut extra = [0u8; 1];
            if read_full(&mut self.reader, &mut extra)? > 0 {
                return Err(NpyError::TrailingData {
                    expected: needed,
                    actual: None,
                });
            }
        }
        Ok(NpyMatrix {
            n: self.n,
            d: self.d,
            data,
        })
    }

    fn elements<T: npyz::Deserialize, U>(
        &mut self,
        count: usize,
        needed: u64,
        convert: fn(T) -> U,
    ) -> Result<Vec<U>, NpyError> {
        let file = NpyFile::with_header(self.header.clone(), &mut self.reader);
        let values = file
            .data::<T>()
            .map_err(|e| NpyError::BadHeader(one_line(&e.to_string())))?;
        // Grown as the data arrives: a stream's header can claim any size
        // before its data runs out.
        let mut out = Vec::with_capacity(count.min(1 << 20));
        for value in values {
            match value {
                Ok(v) => out.push(convert(v)),
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => {
                    return Err(NpyError::Truncated {
                        section: "data",
                        needed,
                        available: out.len() as u64 * (needed / count.max(1) as u64),
                    })
                }
                Err(e) => return Err(NpyError::Io(e)),
            }
        }
        Ok(out)
    }
}

/// Reads the `.npy` file at `path` (a pipe or FIFO to its end).
pub fn read(path: impl AsRef<Path>) -> Result<NpyMatrix, NpyError> {
    open(path)?.read()
}

/// [`read`] of a regular file only: a FIFO, a device or a socket is
/// refused at once, never waited on (an index's arrays are files kiln
/// wrote).
pub fn read_regular(path: impl AsRef<Path>) -> Result<NpyMatrix, NpyError> {
    let (file, len) = open_regular(path.as_ref())?;
    open_reader(BufReader::new(file), Some(len))?.read()
}

/// Reads a `.npy` file held in memory.
pub fn from_bytes(bytes: &[u8]) -> Result<NpyMatrix, NpyError> {
    open_reader(bytes, Some(bytes.len() as u64))?.read()
}

/// Reads a `.npy` input from `reader` to its end, its length unknown.
pub fn read_from(reader: impl Read) -> Result<NpyMatrix, NpyError> {
    open_reader(reader, None)?.read()
}

/// The preamble and header, as bytes (for npyz) and as text.
struct Prefix {
    bytes: Vec<u8>,
    text: String,
}

/// Fills `buf` from `r`; returns how many bytes it got (fewer only at the end).
fn read_full(r: &mut impl Read, buf: &mut [u8]) -> Result<usize, NpyError> {
    let mut got = 0;
    while got < buf.len() {
        match r.read(&mut buf[got..]) {
            Ok(0) => break,
            Ok(k) => got += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(NpyError::Io(e)),
        }
    }
    Ok(got)
}

/// Reads the magic, version, header length and header, each bounded.
fn read_prefix(r: &mut impl Read) -> Result<Prefix, NpyError> {
    let mut preamble = [0u8; 8];
    let got = read_full(r, &mut preamble)?;
    let seen = &preamble[..got.min(MAGIC.len())];
    if seen.is_empty() || !MAGIC.starts_with(seen) {
        return Err(NpyError::NotNpy {
            found: seen.to_vec(),
        });
    }
    let truncated = |needed: u64, available: usize| NpyError::Truncated {
        section: "preamble",
        needed,
        available: available as u64,
    };
    if got < preamble.len() {
        return Err(truncated(10, got));
    }
    let len_bytes = match (preamble[6], preamble[7]) {
        (1, 0) => 2,
        (2, 0) | (3, 0) => 4,
        (major, minor) => return Err(NpyError::UnsupportedVersion(major, minor)),
    };
    let mut len_buf = [0u8; 4];
    let got_len = read_full(r, &mut len_buf[..len_bytes])?;
    if got_len < len_bytes {
        return Err(truncated(8 + len_bytes as u64, 8 + got_len));
    }
    let header_len = u32::from_le_bytes(len_buf) as usize;
    if header_len > MAX_HEADER_BYTES {
        return Err(NpyError::BadHeader(format!(
            "it says it is {header_len} bytes long, over the {MAX_HEADER_BYTES} accepted"
        )));
    }
    let mut bytes = Vec::with_capacity(8 + len_bytes + header_len);
    bytes.extend_from_slice(&preamble);
    bytes.extend_from_slice(&len_buf[..len_bytes]);
    let start = bytes.len();
    bytes.resize(start + header_len, 0);
    let got_header = read_full(r, &mut bytes[start..])?;
    if got_header < header_len {
        return Err(NpyError::Truncated {
            section: "header",
            needed: header_len as u64,
            available: got_header as u64,
        });
    }
    let text = std::str::from_utf8(&bytes[start..])
        .map_err(|_| NpyError::BadHeader("it is not ASCII or UTF-8 text".into()))?
        .to_string();
    check_nesting(&text)?;
    Ok(Prefix { bytes, text })
}

/// Refuses brackets nested deeper than [`MAX_NESTING`] (outside strings),
/// in one pass without recursion.
fn check_nesting(text: &str) -> Result<(), NpyError> {
    let (mut depth, mut quote) = (0usize, None);
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        match (quote, c) {
            (Some(_), '\\') => {
                chars.next();
            }
            (Some(q), c) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '\'' | '"') => quote = Some(c),
            (None, '(' | '[' | '{') => {
                depth += 1;
                if depth > MAX_NESTING {
                    return Err(NpyError::BadHeader(format!(
                        "brackets nest deeper than {MAX_NESTING} levels"
                    )));
                }
            }
            (None, ')' | ']' | '}') => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    Ok(())
}

/// The header's shape, every dimension a u64 and their products too (npyz
/// multiplies them unchecked), and its descr where it is a string.
fn checked_shape(text: &str) -> Result<(Vec<u64>, Option<String>), NpyError> {
    let value: Value = text
        .trim_end()
        .parse()
        .map_err(|e: py_literal::ParseError| {
            // pest's report spans lines and repeats the header: its position
            // is what helps.
            let at = e
                .to_string()
                .split_whitespace()
                .skip_while(|w| *w != "-->")
                .nth(1)
                .map_or(String::new(), |pos| format!(" at line:column {pos}"));
            NpyError::BadHeader(format!("it is not a Python dict literal{at}"))
        })?;
    let Value::Dict(entries) = value else {
        return Err(NpyError::BadHeader("it is not a dict".into()));
    };
    let descr = entries
        .iter()
        .find(|(k, _)| k.as_string().map(String::as_str) == Some("descr"))
        .and_then(|(_, v)| v.as_string().cloned());
    let shape = entries
        .iter()
        .find(|(k, _)| k.as_string().map(String::as_str) == Some("shape"))
        .map(|(_, v)| v)
        .ok_or_else(|| NpyError::BadHeader("it has no 'shape'".into()))?;
    let (Value::Tuple(dims) | Value::List(dims)) = shape else {
        return Err(NpyError::BadHeader(
            "'shape' is not a tuple of integers".into(),
        ));
    };
    let dims = dims
        .iter()
        .map(|v| match v {
            Value::Integer(i) => u64::try_from(i).map_err(|_| {
                NpyError::BadHeader(format!("dimension {i} is negative or over 2^64"))
            }),
            _ => Err(NpyError::BadHeader(
                "'shape' is not a tuple of integers".into(),
            )),
        })
        .collect::<Result<Vec<u64>, _>>()?;
    // Every partial product must fit too (npyz forms the strides in both
    // orders): so the product of the non-zero dimensions must.
    let mut nonzero = dims.iter().filter(|&&s| s != 0);
    if nonzero.try_fold(1u64, |p, &s| p.checked_mul(s)).is_none() {
        return Err(NpyError::ShapeTooLarge(dims));
    }
    Ok((dims, descr))
}

fn bad_header(e: &dyn fmt::Display) -> NpyError {
    NpyError::BadHeader(one_line(&e.to_string()))
}

/// A parser's message on one line, at most 160 characters.
fn one_line(text: &str) -> String {
    let joined = text.split_whitespace().collect::<Vec<_>>().join(" ");
    match joined.char_indices().nth(160) {
        Some((cut, _)) => format!("{}…", &joined[..cut]),
        None => joined,
    }
}

pub mod map;
mod regular;
mod shards;
mod write;

pub use map::{map_or_read, NpyShard};
pub(crate) use regular::{open_regular, Irregular};
pub use shards::{Chunk, ChunkRows, Chunks, Loaded, Shards, ShardsError};
pub use write::{read_u32_vector, write_f32_matrix, write_u32_header, write_u32_vector};

#[cfg(test)]
pub(crate) mod tests;
