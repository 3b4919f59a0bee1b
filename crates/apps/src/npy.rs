//! A reader for NumPy `.npy` files holding an `(n, d)` matrix of
//! little-endian float32 (`<f4`) or float16 (`<f2`) in C order, format
//! versions 1.0, 2.0 and 3.0: how users bring their own embeddings.
//!
//! f16 data stays as raw bits ([`NpyData::F16`]) so that it can go to the
//! GPU as it is; [`NpyMatrix::to_f32`] widens it exactly. The data is read in
//! chunks straight into the result, never twice in memory.

use std::fmt;
use std::fs::File;
use std::io::{self, BufReader, Read};
use std::path::Path;

use half::f16;
use half::slice::{HalfBitsSliceExt, HalfFloatSliceExt};

/// The first six bytes of every `.npy` file.
pub const MAGIC: &[u8; 6] = b"\x93NUMPY";

/// The largest header accepted. numpy itself refuses headers over 10,000
/// bytes by default; a 2-D float matrix needs about 128.
pub const MAX_HEADER_BYTES: usize = 1 << 16;

const ACCEPTED: &str = "accepted: `<f4` (float32) and `<f2` (float16)";

/// Why a `.npy` file was not read.
#[derive(Debug)]
#[non_exhaustive]
pub enum NpyError {
    /// Reading failed for a reason other than the file ending early.
    Io {
        /// The I/O error.
        source: io::Error,
    },
    /// The file does not start with the npy magic string.
    NotNpy {
        /// The first bytes found (up to six).
        found: Vec<u8>,
    },
    /// A format version other than 1.0, 2.0 or 3.0.
    UnsupportedVersion {
        /// Major version byte.
        major: u8,
        /// Minor version byte.
        minor: u8,
    },
    /// The header is not the Python dict literal numpy writes.
    BadHeader {
        /// What is wrong with it.
        reason: String,
    },
    /// The dtype is big-endian.
    BigEndian {
        /// The header's `descr`.
        descr: String,
    },
    /// A dtype other than `<f4` and `<f2`.
    UnsupportedDtype {
        /// The header's `descr` (a structured dtype is shown as its list).
        descr: String,
    },
    /// `fortran_order: True`.
    FortranOrder,
    /// A shape that is not `(n, d)`.
    NotTwoD {
        /// The header's shape.
        shape: Vec<u64>,
    },
    /// `n * d * itemsize` does not fit in memory addresses.
    ShapeTooLarge {
        /// The header's shape.
        shape: Vec<u64>,
    },
    /// The file ends before the part named.
    Truncated {
        /// `"preamble"`, `"header"` or `"data"`.
        section: &'static str,
        /// Bytes that part needs.
        needed: u64,
        /// Bytes that were there.
        available: u64,
    },
    /// More data than the shape says.
    DataLength {
        /// The header's shape.
        shape: Vec<u64>,
        /// The header's `descr`.
        descr: &'static str,
        /// Bytes the shape needs.
        expected: u64,
        /// Bytes after the header.
        actual: u64,
    },
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

impl fmt::Display for NpyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Io { source } => write!(f, "reading the npy file failed: {source}"),
            Self::NotNpy { found } if found.is_empty() => {
                write!(f, "not an npy file: it is empty; write it with numpy.save")
            }
            Self::NotNpy { found } => write!(
                f,
                "not an npy file: it starts with {} instead of \\x93NUMPY; write it with \
                 numpy.save (an .npz archive holds .npy files: unzip it first)",
                found.escape_ascii()
            ),
            Self::UnsupportedVersion { major, minor } => write!(
                f,
                "npy format version {major}.{minor} is not supported (1.0, 2.0 and 3.0 are); \
                 re-save the array with numpy.save"
            ),
            Self::BadHeader { reason } => write!(
                f,
                "the npy header is not valid ({reason}); re-save the array with numpy.save"
            ),
            Self::BigEndian { descr } => write!(
                f,
                "dtype `{descr}` is big-endian; convert with `a.astype('<f4')` and re-save \
                 ({ACCEPTED})"
            ),
            Self::UnsupportedDtype { descr } => write!(
                f,
                "dtype `{descr}` is not supported; convert with `a.astype(numpy.float32)` \
                 and re-save ({ACCEPTED})"
            ),
            Self::FortranOrder => write!(
                f,
                "the array is in Fortran order; save `numpy.ascontiguousarray(a)` instead"
            ),
            Self::NotTwoD { shape } => write!(
                f,
                "shape {} is not 2-D; save the embeddings as one (n, d) matrix",
                shape_text(shape)
            ),
            Self::ShapeTooLarge { shape } => write!(
                f,
                "shape {} is too large to address; check the header or split the file",
                shape_text(shape)
            ),
            Self::Truncated {
                section,
                needed,
                available,
            } => write!(
                f,
                "the file is truncated: its {section} needs {needed} bytes but only \
                 {available} are there; copy the file again or re-save it"
            ),
            Self::DataLength {
                shape,
                descr,
                expected,
                actual,
            } => write!(
                f,
                "the data is {actual} bytes but shape {} of `{descr}` is {expected}: the header \
                 does not match the data; re-save the array with numpy.save",
                shape_text(shape)
            ),
        }
    }
}

impl std::error::Error for NpyError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Io { source } => Some(source),
            _ => None,
        }
    }
}

/// The elements of a matrix, in row-major order.
#[derive(Debug, Clone, PartialEq)]
pub enum NpyData {
    /// `<f4`.
    F32(Vec<f32>),
    /// `<f2`, as IEEE binary16 bit patterns.
    F16(Vec<u16>),
}

impl NpyData {
    /// Elements held.
    pub fn len(&self) -> usize {
        match self {
            Self::F32(v) => v.len(),
            Self::F16(v) => v.len(),
        }
    }

    /// Whether there is no element.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The numpy dtype string: `<f4` or `<f2`.
    pub fn descr(&self) -> &'static str {
        match self {
            Self::F32(_) => "<f4",
            Self::F16(_) => "<f2",
        }
    }
}

/// An `(n, d)` matrix read from a `.npy` file: `data` holds `n * d`
/// elements, row `i` at `i * d..(i + 1) * d`.
#[derive(Debug, Clone, PartialEq)]
pub struct NpyMatrix {
    /// Rows.
    pub n: usize,
    /// Columns.
    pub d: usize,
    /// The elements.
    pub data: NpyData,
}

impl NpyMatrix {
    /// The elements as f32. Every f16 value (subnormals, infinities and NaNs
    /// included) is exactly representable in f32, so nothing is rounded.
    pub fn to_f32(&self) -> Vec<f32> {
        match &self.data {
            NpyData::F32(v) => v.clone(),
            NpyData::F16(bits) => f16_bits_to_f32(bits),
        }
    }

    /// [`to_f32`](Self::to_f32), reusing the buffer of f32 data.
    pub fn into_f32(self) -> Vec<f32> {
        match self.data {
            NpyData::F32(v) => v,
            NpyData::F16(bits) => f16_bits_to_f32(&bits),
        }
    }
}

fn f16_bits_to_f32(bits: &[u16]) -> Vec<f32> {
    bits.reinterpret_cast::<f16>().to_f32_vec()
}

/// Reads the `.npy` file at `path`. Errors do not name the path: callers
/// add it (`with_context`).
pub fn read(path: impl AsRef<Path>) -> Result<NpyMatrix, NpyError> {
    let file = File::open(path).map_err(|source| NpyError::Io { source })?;
    let len = file
        .metadata()
        .map_err(|source| NpyError::Io { source })?
        .len();
    read_npy(BufReader::new(file), Some(len))
}

/// Reads a `.npy` file held in memory.
pub fn from_bytes(bytes: &[u8]) -> Result<NpyMatrix, NpyError> {
    read_npy(bytes, Some(bytes.len() as u64))
}

/// Reads a `.npy` file from `reader`, to its end (bytes after the data are
/// a [`NpyError::DataLength`]).
pub fn read_from(reader: impl Read) -> Result<NpyMatrix, NpyError> {
    read_npy(reader, None)
}

/// What the header says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Dtype {
    F32,
    F16,
}

impl Dtype {
    fn size(self) -> u64 {
        match self {
            Self::F32 => 4,
            Self::F16 => 2,
        }
    }

    fn descr(self) -> &'static str {
        match self {
            Self::F32 => "<f4",
            Self::F16 => "<f2",
        }
    }
}

/// `total` is the whole file's length where it is known: then a bad length
/// is found before any data is read or allocated.
fn read_npy(mut r: impl Read, total: Option<u64>) -> Result<NpyMatrix, NpyError> {
    let (header, header_end) = read_header(&mut r)?;
    let (dtype, n, d) = parse_header(&header)?;
    let shape = vec![n, d];
    let elements = n
        .checked_mul(d)
        .filter(|&e| usize::try_from(e).is_ok())
        .ok_or_else(|| NpyError::ShapeTooLarge {
            shape: shape.clone(),
        })?;
    let expected = elements
        .checked_mul(dtype.size())
        .filter(|&b| b <= isize::MAX as u64)
        .ok_or_else(|| NpyError::ShapeTooLarge {
            shape: shape.clone(),
        })?;
    if let Some(total) = total {
        check_data_length(&shape, dtype, expected, total - header_end)?;
    }
    let elements = elements as usize;
    let data = match dtype {
        Dtype::F32 => NpyData::F32(read_elements(&mut r, elements, f32::from_le_bytes)?),
        Dtype::F16 => NpyData::F16(read_elements(&mut r, elements, u16::from_le_bytes)?),
    };
    let extra = io::copy(&mut r, &mut io::sink()).map_err(|source| NpyError::Io { source })?;
    check_data_length(&shape, dtype, expected, expected + extra)?;
    Ok(NpyMatrix {
        n: n as usize,
        d: d as usize,
        data,
    })
}

fn check_data_length(
    shape: &[u64],
    dtype: Dtype,
    expected: u64,
    actual: u64,
) -> Result<(), NpyError> {
    if actual < expected {
        return Err(NpyError::Truncated {
            section: "data",
            needed: expected,
            available: actual,
        });
    }
    if actual > expected {
        return Err(NpyError::DataLength {
            shape: shape.to_vec(),
            descr: dtype.descr(),
            expected,
            actual,
        });
    }
    Ok(())
}

/// Fills `buf` from `r`; returns how many bytes it got (fewer only at the end).
fn fill(r: &mut impl Read, buf: &mut [u8]) -> Result<usize, NpyError> {
    let mut got = 0;
    while got < buf.len() {
        match r.read(&mut buf[got..]) {
            Ok(0) => break,
            Ok(k) => got += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(source) => return Err(NpyError::Io { source }),
        }
    }
    Ok(got)
}

/// The header text and the offset of the data.
fn read_header(r: &mut impl Read) -> Result<(String, u64), NpyError> {
    let mut preamble = [0u8; 8];
    let got = fill(r, &mut preamble)?;
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
    let (major, minor) = (preamble[6], preamble[7]);
    let len_bytes = match (major, minor) {
        (1, 0) => 2,
        (2, 0) | (3, 0) => 4,
        _ => return Err(NpyError::UnsupportedVersion { major, minor }),
    };
    let mut len_buf = [0u8; 4];
    let got_len = fill(r, &mut len_buf[..len_bytes])?;
    if got_len < len_bytes {
        return Err(truncated(8 + len_bytes as u64, 8 + got_len));
    }
    let header_len = u32::from_le_bytes(len_buf) as usize;
    if header_len > MAX_HEADER_BYTES {
        return Err(NpyError::BadHeader {
            reason: format!(
                "it says it is {header_len} bytes long, over the {MAX_HEADER_BYTES} accepted"
            ),
        });
    }
    let mut header = vec![0u8; header_len];
    let got_header = fill(r, &mut header)?;
    if got_header < header_len {
        return Err(NpyError::Truncated {
            section: "header",
            needed: header_len as u64,
            available: got_header as u64,
        });
    }
    let text = if major == 3 {
        String::from_utf8(header).map_err(|_| NpyError::BadHeader {
            reason: "a version 3.0 header must be UTF-8".into(),
        })?
    } else {
        // Versions 1.0 and 2.0 are latin-1, which maps byte for byte to char.
        header.iter().map(|&b| char::from(b)).collect()
    };
    Ok((text, (8 + len_bytes + header_len) as u64))
}

/// Reads `count` little-endian elements of `N` bytes each, in chunks.
fn read_elements<T, const N: usize>(
    r: &mut impl Read,
    count: usize,
    decode: fn([u8; N]) -> T,
) -> Result<Vec<T>, NpyError> {
    const CHUNK: usize = 1 << 16;
    // Bounded up front: a reader's header can claim any size before its data
    // runs out.
    let mut out = Vec::with_capacity(count.min(CHUNK * 16));
    let mut buf = vec![0u8; CHUNK * N];
    while out.len() < count {
        let want = (count - out.len()).min(CHUNK) * N;
        let got = fill(r, &mut buf[..want])?;
        out.extend(
            buf[..got - got % N]
                .chunks_exact(N)
                .map(|c| decode(c.try_into().expect("chunks of N bytes"))),
        );
        if got < want {
            return Err(NpyError::Truncated {
                section: "data",
                needed: (count * N) as u64,
                available: (out.len() * N + got % N) as u64,
            });
        }
    }
    Ok(out)
}

/// A value of the Python literals an npy header uses.
#[derive(Debug, Clone, PartialEq)]
enum Literal {
    Str(String),
    Bool(bool),
    Int(u64),
    Tuple(Vec<Literal>),
    List(Vec<Literal>),
    Dict(Vec<(Literal, Literal)>),
}

impl fmt::Display for Literal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let seq = |f: &mut fmt::Formatter<'_>, items: &[Literal], open, close| {
            write!(f, "{open}")?;
            for (i, item) in items.iter().enumerate() {
                write!(f, "{}{item}", if i > 0 { ", " } else { "" })?;
            }
            write!(f, "{close}")
        };
        match self {
            Self::Str(s) => write!(f, "{s}"),
            Self::Bool(b) => write!(f, "{}", if *b { "True" } else { "False" }),
            Self::Int(i) => write!(f, "{i}"),
            Self::Tuple(items) => seq(f, items, '(', ')'),
            Self::List(items) => seq(f, items, '[', ']'),
            Self::Dict(_) => write!(f, "{{...}}"),
        }
    }
}

/// A recursive-descent parser for the literal subset numpy writes (and
/// Python 2's `3L` integers, which old files hold).
struct Parser<'a> {
    rest: &'a str,
}

impl Parser<'_> {
    fn skip_space(&mut self) {
        self.rest = self.rest.trim_start();
    }

    fn eat(&mut self, c: char) -> bool {
        self.skip_space();
        match self.rest.strip_prefix(c) {
            Some(rest) => {
                self.rest = rest;
                true
            }
            None => false,
        }
    }

    fn expect(&mut self, c: char) -> Result<(), String> {
        if self.eat(c) {
            Ok(())
        } else {
            Err(format!("expected `{c}` at `{}`", self.context()))
        }
    }

    fn context(&self) -> String {
        let head: String = self.rest.chars().take(20).collect();
        head.trim_end().to_string()
    }

    fn literal(&mut self) -> Result<Literal, String> {
        self.skip_space();
        let Some(first) = self.rest.chars().next() else {
            return Err("it ends inside the dict".into());
        };
        match first {
            '\'' | '"' => self.string(first),
            '(' => self.sequence('(', ')').map(Literal::Tuple),
            '[' => self.sequence('[', ']').map(Literal::List),
            '{' => self.dict(),
            '0'..='9' => self.int(),
            _ => self.keyword(),
        }
    }

    fn string(&mut self, quote: char) -> Result<Literal, String> {
        let body = &self.rest[1..];
        let mut out = String::new();
        let mut chars = body.char_indices();
        while let Some((i, c)) = chars.next() {
            match c {
                '\\' => match chars.next() {
                    Some((_, escaped)) => out.push(escaped),
                    None => break,
                },
                c if c == quote => {
                    self.rest = &body[i + 1..];
                    return Ok(Literal::Str(out));
                }
                c => out.push(c),
            }
        }
        Err("a string is not closed".into())
    }

    fn int(&mut self) -> Result<Literal, String> {
        let end = self
            .rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(self.rest.len());
        let value = self.rest[..end]
            .parse()
            .map_err(|_| format!("`{}` is not a dimension", &self.rest[..end]))?;
        self.rest = &self.rest[end..];
        self.rest = self.rest.strip_prefix('L').unwrap_or(self.rest);
        Ok(Literal::Int(value))
    }

    fn keyword(&mut self) -> Result<Literal, String> {
        for (word, value) in [("True", true), ("False", false)] {
            if let Some(rest) = self.rest.strip_prefix(word) {
                self.rest = rest;
                return Ok(Literal::Bool(value));
            }
        }
        Err(format!("unexpected `{}`", self.context()))
    }

    fn sequence(&mut self, open: char, close: char) -> Result<Vec<Literal>, String> {
        self.expect(open)?;
        let mut items = Vec::new();
        while !self.eat(close) {
            items.push(self.literal()?);
            if !self.eat(',') {
                self.expect(close)?;
                break;
            }
        }
        Ok(items)
    }

    fn dict(&mut self) -> Result<Literal, String> {
        self.expect('{')?;
        let mut entries = Vec::new();
        while !self.eat('}') {
            let key = self.literal()?;
            self.expect(':')?;
            entries.push((key, self.literal()?));
            if !self.eat(',') {
                self.expect('}')?;
                break;
            }
        }
        Ok(Literal::Dict(entries))
    }
}

fn parse_header(text: &str) -> Result<(Dtype, u64, u64), NpyError> {
    let bad = |reason: String| NpyError::BadHeader { reason };
    let mut parser = Parser { rest: text };
    let Literal::Dict(entries) = parser.literal().map_err(bad)? else {
        return Err(bad("it is not a dict".into()));
    };
    if !parser.rest.trim().is_empty() {
        return Err(bad(format!("`{}` follows the dict", parser.context())));
    }
    let get = |key: &str| {
        entries
            .iter()
            .find(|(k, _)| *k == Literal::Str(key.into()))
            .map(|(_, v)| v)
            .ok_or_else(|| bad(format!("it has no '{key}' key")))
    };
    let dtype = match get("descr")? {
        Literal::Str(s) if s == "<f4" => Dtype::F32,
        Literal::Str(s) if s == "<f2" => Dtype::F16,
        Literal::Str(s) if s.starts_with('>') => {
            return Err(NpyError::BigEndian { descr: s.clone() })
        }
        other => {
            return Err(NpyError::UnsupportedDtype {
                descr: other.to_string(),
            })
        }
    };
    match get("fortran_order")? {
        Literal::Bool(false) => {}
        Literal::Bool(true) => return Err(NpyError::FortranOrder),
        other => return Err(bad(format!("fortran_order is `{other}`, not a bool"))),
    }
    let Literal::Tuple(dims) = get("shape")? else {
        return Err(bad("shape is not a tuple".into()));
    };
    let shape = dims
        .iter()
        .map(|dim| match dim {
            Literal::Int(v) => Ok(*v),
            other => Err(bad(format!("shape holds `{other}`, not a dimension"))),
        })
        .collect::<Result<Vec<u64>, _>>()?;
    match shape[..] {
        [n, d] => Ok((dtype, n, d)),
        _ => Err(NpyError::NotTwoD { shape }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An npy file as numpy writes it: the preamble, `dict`, spaces and a
    /// newline up to a multiple of 64 bytes, then `data`.
    fn npy_bytes(major: u8, dict: &str, data: &[u8]) -> Vec<u8> {
        let len_bytes = if major == 1 { 2 } else { 4 };
        let unpadded = 8 + len_bytes + dict.len() + 1;
        let header_len = dict.len() + 1 + unpadded.next_multiple_of(64) - unpadded;
        let mut out = MAGIC.to_vec();
        out.extend([major, 0]);
        out.extend(&(header_len as u32).to_le_bytes()[..len_bytes]);
        out.extend(dict.bytes());
        out.resize(8 + len_bytes + header_len - 1, b' ');
        out.push(b'\n');
        out.extend(data);
        out
    }

    fn dict(descr: &str, shape: &str) -> String {
        format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}")
    }

    fn f32_bytes(values: &[f32]) -> Vec<u8> {
        values.iter().flat_map(|v| v.to_le_bytes()).collect()
    }

    /// What numpy 2.4.6 wrote for
    /// `np.save(f, np.array([[1, -2.5, 3], [0.5, 65504, -0.0]], dtype='<f4'))`.
    fn numpy_f32_fixture() -> Vec<u8> {
        let header = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
        let mut file = b"\x93NUMPY\x01\x00\x76\x00".to_vec();
        file.extend(format!("{header:<117}\n").bytes());
        let data = "0000803f000020c0000040400000003f00e07f4700000080";
        file.extend(
            (0..data.len())
                .step_by(2)
                .map(|i| u8::from_str_radix(&data[i..i + 2], 16).expect("hex")),
        );
        file
    }

    #[test]
    fn reads_what_numpy_writes() {
        let file = numpy_f32_fixture();
        assert_eq!(
            file.len(),
            128 + 24,
            "numpy pads the 1.0 header to 64 bytes"
        );
        let m = from_bytes(&file).unwrap();
        assert_eq!((m.n, m.d), (2, 3));
        assert_eq!(
            m.data,
            NpyData::F32(vec![1.0, -2.5, 3.0, 0.5, 65504.0, -0.0])
        );
        // The test helper pads the same way, so the other tests' files are
        // laid out as numpy's are.
        let data = f32_bytes(&[1.0, -2.5, 3.0, 0.5, 65504.0, -0.0]);
        assert_eq!(npy_bytes(1, &dict("<f4", "(2, 3)"), &data), file);
    }

    #[test]
    fn reads_versions_2_and_3() {
        let data = f32_bytes(&[1.0, 2.0]);
        for major in [2, 3] {
            let file = npy_bytes(major, &dict("<f4", "(1, 2)"), &data);
            assert_eq!(file.len() % 64, 8, "version {major}");
            let m = from_bytes(&file).unwrap();
            assert_eq!(m.data, NpyData::F32(vec![1.0, 2.0]), "version {major}");
        }
        // Version 3.0 allows UTF-8 in the header (here in an unknown key).
        let utf8 = "{'descr': '<f2', 'fortran_order': False, 'shape': (1, 1), 'note': 'é'}";
        let m = from_bytes(&npy_bytes(3, utf8, &[0x00, 0x3c])).unwrap();
        assert_eq!(m.to_f32(), vec![1.0]);
    }

    #[test]
    fn f16_round_trips_through_a_file() {
        let values = [
            0.0f32,
            -0.0,
            1.0,
            -2.5,
            65504.0,        // largest finite
            6.103_515_6e-5, // smallest normal
            5.960_464_5e-8, // smallest subnormal
            f32::INFINITY,
            f32::NEG_INFINITY,
            0.333_251_95, // nearest f16 to 1/3
        ];
        let bits: Vec<u16> = values.iter().map(|&v| f16::from_f32(v).to_bits()).collect();
        let data: Vec<u8> = bits.iter().flat_map(|b| b.to_le_bytes()).collect();
        let path = std::env::temp_dir().join(format!("kiln-npy-f16-{}.npy", std::process::id()));
        std::fs::write(&path, npy_bytes(1, &dict("<f2", "(5, 2)"), &data)).unwrap();
        let read_back = read(&path);
        std::fs::remove_file(&path).unwrap();
        let m = read_back.unwrap();
        assert_eq!((m.n, m.d), (5, 2));
        assert_eq!(m.data, NpyData::F16(bits));
        let widened = m.to_f32();
        for (got, want) in widened.iter().zip(values) {
            assert_eq!(got.to_bits(), want.to_bits(), "{want}");
        }
        assert_eq!(m.into_f32(), widened);
    }

    #[test]
    fn f16_to_f32_is_exact_for_every_bit_pattern() {
        let bits: Vec<u16> = (0..=u16::MAX).collect();
        let m = NpyMatrix {
            n: 1,
            d: bits.len(),
            data: NpyData::F16(bits.clone()),
        };
        for (b, got) in bits.iter().zip(m.to_f32()) {
            // binary16: 1 sign, 5 exponent (bias 15), 10 fraction bits.
            let (sign, exp, frac) = (b >> 15, (b >> 10) & 0x1f, b & 0x3ff);
            let magnitude = match exp {
                0 => f64::from(frac) * 2f64.powi(-24),
                31 if frac == 0 => f64::INFINITY,
                31 => f64::NAN,
                e => (1.0 + f64::from(frac) / 1024.0) * 2f64.powi(i32::from(e) - 15),
            };
            let want = if sign == 1 { -magnitude } else { magnitude } as f32;
            if want.is_nan() {
                assert!(got.is_nan(), "{b:#06x}");
            } else {
                assert_eq!(got.to_bits(), want.to_bits(), "{b:#06x}");
            }
        }
    }

    /// A reader that hands out three bytes at a time, as pipes may.
    struct Trickle<'a>(&'a [u8]);

    impl Read for Trickle<'_> {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            let k = buf.len().min(3).min(self.0.len());
            buf[..k].copy_from_slice(&self.0[..k]);
            self.0 = &self.0[k..];
            Ok(k)
        }
    }

    #[test]
    fn reads_a_stream_in_short_pieces() {
        let values: Vec<f32> = (0..300).map(|i| i as f32 * 0.25).collect();
        let file = npy_bytes(1, &dict("<f4", "(100, 3)"), &f32_bytes(&values));
        let m = read_from(Trickle(&file)).unwrap();
        assert_eq!(m.data, NpyData::F32(values));
        let err = read_from(Trickle(&file[..file.len() - 5])).unwrap_err();
        assert!(
            matches!(
                err,
                NpyError::Truncated {
                    section: "data",
                    needed: 1200,
                    available: 1195
                }
            ),
            "{err}"
        );
    }

    #[test]
    fn empty_matrices_are_fine() {
        let m = from_bytes(&npy_bytes(1, &dict("<f4", "(0, 16)"), &[])).unwrap();
        assert_eq!((m.n, m.d, m.data.len()), (0, 16, 0));
    }

    #[test]
    fn python2_long_dimensions() {
        let m = from_bytes(&npy_bytes(1, &dict("<f2", "(1L, 2L)"), &[0; 4])).unwrap();
        assert_eq!((m.n, m.d), (1, 2));
    }

    /// One rejected file and the message it must give.
    fn check_rejected(file: &[u8], message: &str) {
        let err = from_bytes(file).unwrap_err();
        assert_eq!(err.to_string(), message);
    }

    #[test]
    fn rejects_files_that_are_not_npy() {
        check_rejected(
            b"PK\x03\x04 an npz archive",
            "not an npy file: it starts with PK\\x03\\x04 a instead of \\x93NUMPY; write it \
             with numpy.save (an .npz archive holds .npy files: unzip it first)",
        );
        check_rejected(
            b"",
            "not an npy file: it is empty; write it with numpy.save",
        );
    }

    #[test]
    fn rejects_other_versions() {
        let mut file = npy_bytes(1, &dict("<f4", "(1, 1)"), &[0; 4]);
        file[6] = 4;
        check_rejected(
            &file,
            "npy format version 4.0 is not supported (1.0, 2.0 and 3.0 are); re-save the array \
             with numpy.save",
        );
    }

    #[test]
    fn rejects_big_endian_and_other_dtypes() {
        check_rejected(
            &npy_bytes(1, &dict(">f4", "(1, 1)"), &[0; 4]),
            "dtype `>f4` is big-endian; convert with `a.astype('<f4')` and re-save \
             (accepted: `<f4` (float32) and `<f2` (float16))",
        );
        check_rejected(
            &npy_bytes(1, &dict("<f8", "(1, 1)"), &[0; 8]),
            "dtype `<f8` is not supported; convert with `a.astype(numpy.float32)` and re-save \
             (accepted: `<f4` (float32) and `<f2` (float16))",
        );
        let structured =
            "{'descr': [('x', '<f4'), ('y', '<f4')], 'fortran_order': False, 'shape': (1, 1), }";
        let err = from_bytes(&npy_bytes(1, structured, &[0; 8])).unwrap_err();
        assert!(
            err.to_string()
                .starts_with("dtype `[(x, <f4), (y, <f4)]` is not supported"),
            "{err}"
        );
    }

    #[test]
    fn rejects_fortran_order() {
        let header = "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }";
        check_rejected(
            &npy_bytes(1, header, &[0; 16]),
            "the array is in Fortran order; save `numpy.ascontiguousarray(a)` instead",
        );
    }

    #[test]
    fn rejects_shapes_that_are_not_2d() {
        check_rejected(
            &npy_bytes(1, &dict("<f4", "(3,)"), &[0; 12]),
            "shape (3,) is not 2-D; save the embeddings as one (n, d) matrix",
        );
        check_rejected(
            &npy_bytes(1, &dict("<f4", "(1, 2, 3)"), &[0; 24]),
            "shape (1, 2, 3) is not 2-D; save the embeddings as one (n, d) matrix",
        );
        check_rejected(
            &npy_bytes(1, &dict("<f4", "()"), &[0; 4]),
            "shape () is not 2-D; save the embeddings as one (n, d) matrix",
        );
    }

    #[test]
    fn rejects_data_that_does_not_match_the_shape() {
        check_rejected(
            &npy_bytes(1, &dict("<f4", "(2, 3)"), &[0; 28]),
            "the data is 28 bytes but shape (2, 3) of `<f4` is 24: the header does not match \
             the data; re-save the array with numpy.save",
        );
        check_rejected(
            &npy_bytes(1, &dict("<f2", "(2, 3)"), &[0; 11]),
            "the file is truncated: its data needs 12 bytes but only 11 are there; copy the \
             file again or re-save it",
        );
        check_rejected(
            &npy_bytes(1, &dict("<f4", "(4294967296, 4294967296)"), &[]),
            "shape (4294967296, 4294967296) is too large to address; check the header or split \
             the file",
        );
    }

    #[test]
    fn rejects_truncated_headers() {
        let file = numpy_f32_fixture();
        check_rejected(
            &file[..9],
            "the file is truncated: its preamble needs 10 bytes but only 9 are there; copy the \
             file again or re-save it",
        );
        check_rejected(
            &file[..60],
            "the file is truncated: its header needs 118 bytes but only 50 are there; copy the \
             file again or re-save it",
        );
    }

    #[test]
    fn rejects_malformed_headers() {
        for (header, reason) in [
            (
                "{'descr': '<f4', 'shape': (1, 1)}",
                "it has no 'fortran_order' key",
            ),
            (
                "{'descr': '<f4' 'fortran_order': False}",
                "expected `}` at `'fortran_order': Fal`",
            ),
            (
                "{'descr': '<f4', 'fortran_order': 0, 'shape': (1, 1)}",
                "fortran_order is `0`, not a bool",
            ),
            (
                "{'descr': '<f4', 'fortran_order': False, 'shape': (1, -1)}",
                "unexpected `-1)}`",
            ),
            ("['descr']", "it is not a dict"),
            ("{'descr': '<f4", "a string is not closed"),
        ] {
            check_rejected(
                &npy_bytes(1, header, &[]),
                &format!(
                    "the npy header is not valid ({reason}); re-save the array with numpy.save"
                ),
            );
        }
    }
}
