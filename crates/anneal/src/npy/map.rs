//! A `.npy` shard's data in memory: memory-mapped where the file allows it
//! (a regular little-endian file), so that a run holds no copy of the
//! points of its own; read into a buffer otherwise (pipes, big-endian data).

use std::fs::File;
use std::io::BufReader;

use memmap2::Mmap;

use super::{Dtype, NpyData, NpyError, NpyInput};
use crate::vocab::Points;

/// One `.npy` input's `(n, d)` matrix, mapped or read.
#[derive(Debug)]
pub struct NpyShard {
    /// Rows.
    pub n: usize,
    /// Columns.
    pub d: usize,
    /// The element type.
    pub dtype: Dtype,
    data: Data,
}

#[derive(Debug)]
enum Data {
    /// The file's pages; the data is `map[offset..offset + len]`, aligned
    /// for its element type.
    Mapped {
        map: Mmap,
        offset: usize,
        len: usize,
    },
    /// Read into memory (converted to the host's byte order by npyz).
    Read(NpyData),
}

/// Maps `input`'s data where it is a regular little-endian file (on a
/// little-endian host), else reads it (the header has been read and
/// checked by [`super::open`]).
pub fn map_or_read(input: NpyInput<BufReader<File>>) -> Result<NpyShard, NpyError> {
    let (n, d, dtype) = (input.n, input.d, input.dtype);
    if !mappable(&input) {
        let matrix = input.read()?;
        return Ok(NpyShard {
            n,
            d,
            dtype,
            data: Data::Read(matrix.data),
        });
    }
    let (offset, len) = (input.data_offset as usize, input.data_bytes() as usize);
    let file = input.reader.into_inner();
    // SAFETY: the map is only read, through `&[u8]`. Like every reader of a
    // mapped file, it relies on no other process truncating or rewriting
    // the file while the run reads it (the data would change under it, or a
    // read past a truncated end would raise SIGBUS); the length is checked
    // once more here against what the header promised.
    let map = unsafe { Mmap::map(&file) }.map_err(NpyError::Io)?;
    let available = map.len().saturating_sub(offset);
    if available != len {
        return Err(if available < len {
            NpyError::Truncated {
                section: "data",
                needed: len as u64,
                available: available as u64,
            }
        } else {
            NpyError::TrailingData {
                expected: len as u64,
                actual: Some(available as u64),
            }
        });
    }
    let data = if aligned(&map[offset..], dtype) {
        Data::Mapped { map, offset, len }
    } else {
        // A header whose length is not a multiple of the element size
        // (numpy pads it to 64 bytes): copy, converting each element.
        Data::Read(copy_unaligned(&map[offset..], dtype))
    };
    Ok(NpyShard { n, d, dtype, data })
}

fn aligned(bytes: &[u8], dtype: Dtype) -> bool {
    match dtype {
        Dtype::F32 => bytemuck::try_cast_slice::<u8, f32>(bytes).is_ok(),
        Dtype::F16 | Dtype::BF16 => bytemuck::try_cast_slice::<u8, u16>(bytes).is_ok(),
    }
}

fn copy_unaligned(bytes: &[u8], dtype: Dtype) -> NpyData {
    let u16s = || {
        bytes
            .chunks_exact(2)
            .map(|b| u16::from_le_bytes([b[0], b[1]]))
            .collect()
    };
    match dtype {
        Dtype::F32 => NpyData::F32(
            bytes
                .chunks_exact(4)
                .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                .collect(),
        ),
        Dtype::F16 => NpyData::F16(u16s()),
        Dtype::BF16 => NpyData::BF16(u16s()),
    }
}

impl NpyShard {
    /// The values, row-major, borrowed from the map or the buffer.
    pub fn points(&self) -> Points<'_> {
        match &self.data {
            Data::Mapped { map, offset, len } => {
                let bytes = &map[*offset..*offset + *len];
                // Alignment and length were checked when the map was made.
                match self.dtype {
                    Dtype::F32 => Points::F32(bytemuck::cast_slice(bytes)),
                    Dtype::F16 => Points::F16(bytemuck::cast_slice(bytes)),
                    Dtype::BF16 => Points::BF16(bytemuck::cast_slice(bytes)),
                }
            }
            Data::Read(NpyData::F32(v)) => Points::F32(v),
            Data::Read(NpyData::F16(v)) => Points::F16(v),
            Data::Read(NpyData::BF16(v)) => Points::BF16(v),
        }
    }

    /// Whether the data is the file's mapped pages (no copy).
    pub fn is_mapped(&self) -> bool {
        matches!(self.data, Data::Mapped { .. })
    }
}

/// Bytes of host memory that reading (not mapping) `input`'s data would
/// take: 0 where [`map_or_read`] maps it.
pub fn read_bytes<R>(input: &NpyInput<R>) -> u64 {
    if mappable(input) && input.data_offset.is_multiple_of(input.dtype.size()) {
        0
    } else {
        input.n as u64 * input.d as u64 * input.dtype.size()
    }
}

/// A regular file (its length known) of little-endian data, on a
/// little-endian host.
fn mappable<R>(input: &NpyInput<R>) -> bool {
    input.data_len.is_some() && !input.big_endian && cfg!(target_endian = "little")
}
