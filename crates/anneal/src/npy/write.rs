//! The anneal index's arrays as `.npy` files numpy reads (`numpy.load`):
//! `anchors.npy` (`<f4`, `(m, d)`) and `assignments.npy` (`<u4`, `(n,)`),
//! headers padded to 64 bytes as numpy pads them; and the reader of the
//! second, with the same bounded header check as every input.

use std::io::{self, BufReader, Write};
use std::path::Path;

use super::{checked_shape, read_full, read_prefix, NpyError};

/// A version 1.0 header for `descr` and `shape` (a Python tuple literal),
/// padded with spaces and a newline to a multiple of 64 bytes.
fn header(descr: &str, shape: &str) -> Vec<u8> {
    let dict = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}");
    let unpadded = 10 + dict.len() + 1;
    let header_len = dict.len() + 1 + unpadded.next_multiple_of(64) - unpadded;
    let mut out = super::MAGIC.to_vec();
    out.extend([1, 0]);
    out.extend((header_len as u16).to_le_bytes());
    out.extend(dict.bytes());
    out.resize(10 + header_len - 1, b' ');
    out.push(b'\n');
    out
}

/// Writes `values` (`rows × cols`, row-major) as a float32 `.npy` matrix;
/// an `InvalidInput` error, nothing written, when they are not
/// `rows × cols` values.
pub fn write_f32_matrix(
    w: &mut impl Write,
    rows: usize,
    cols: usize,
    values: &[f32],
) -> io::Result<()> {
    if rows.checked_mul(cols) != Some(values.len()) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "{} values do not make a {rows} x {cols} matrix; give rows x cols values",
                values.len()
            ),
        ));
    }
    w.write_all(&header("<f4", &format!("({rows}, {cols})")))?;
    for chunk in values.chunks(1 << 16) {
        let bytes: Vec<u8> = chunk.iter().flat_map(|v| v.to_le_bytes()).collect();
        w.write_all(&bytes)?;
    }
    Ok(())
}

/// Writes the header of a 1-D uint32 `.npy` array of `n` values, for a
/// writer that streams the values after it (little-endian).
pub fn write_u32_header(w: &mut impl Write, n: u64) -> io::Result<()> {
    w.write_all(&header("<u4", &format!("({n},)")))
}

/// Writes `values` as a 1-D uint32 `.npy` array.
pub fn write_u32_vector(w: &mut impl Write, values: &[u32]) -> io::Result<()> {
    write_u32_header(w, values.len() as u64)?;
    for chunk in values.chunks(1 << 16) {
        let bytes: Vec<u8> = chunk.iter().flat_map(|v| v.to_le_bytes()).collect();
        w.write_all(&bytes)?;
    }
    Ok(())
}

/// Reads a 1-D little-endian uint32 `.npy` array (as [`write_u32_vector`]
/// writes it) from a regular file; anything else is refused (a FIFO at
/// once, never waited on).
pub fn read_u32_vector(path: impl AsRef<Path>) -> Result<Vec<u32>, NpyError> {
    let (file, len) = super::open_regular(path.as_ref())?;
    let mut reader = BufReader::new(file);
    let prefix = read_prefix(&mut reader)?;
    let (shape, descr) = checked_shape(&prefix.text)?;
    let descr = descr.unwrap_or_else(|| "(not a string)".to_string());
    let [n] = shape[..] else {
        return Err(NpyError::WrongArray {
            expected: "a 1-D uint32 array",
            descr,
            shape,
        });
    };
    if descr != "<u4" {
        return Err(NpyError::WrongArray {
            expected: "a 1-D uint32 array",
            descr,
            shape,
        });
    }
    let needed = n
        .checked_mul(4)
        .ok_or_else(|| NpyError::ShapeTooLarge(shape.clone()))?;
    let available = len.saturating_sub(prefix.bytes.len() as u64);
    if available < needed {
        return Err(NpyError::Truncated {
            section: "data",
            needed,
            available,
        });
    }
    if available > needed {
        return Err(NpyError::TrailingData {
            expected: needed,
            actual: Some(available),
        });
    }
    // The file's length bounds the allocation.
    let mut bytes = vec![0u8; needed as usize];
    let got = read_full(&mut reader, &mut bytes)?;
    if got < bytes.len() {
        return Err(NpyError::Truncated {
            section: "data",
            needed,
            available: got as u64,
        });
    }
    Ok(bytes
        .chunks_exact(4)
        .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect())
}
