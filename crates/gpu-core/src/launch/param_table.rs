//! Each kernel's parameter table, read from the cubins of its embedded fat
//! binary: the `EIATTR_KPARAM_INFO` records of the ELF section
//! `.nv.info.<kernel>`, the table the driver itself lays a launch's
//! parameters out from. Reading it needs no driver call, so a launch by name
//! is checked on any driver and nothing fails under compute-sanitizer.
//!
//! # The layout (little-endian; checked against CUDA 13.0's nvcc and `cuobjdump -elf`)
//! A fat binary is containers of entries (see cuda-build's `fatbin.rs`): an
//! entry of kind 2 is a cubin, an ELF64 file, whose flags `0x8000` or
//! `0x2000` say it is compressed. In a cubin, `.nv.info.<kernel>` is a list
//! of records: a format byte and an attribute byte, then for format 4
//! (`EIFMT_SVAL`) a `u16` size and that many bytes, for formats 1 to 3
//! (`EIFMT_NVAL`, `_BVAL`, `_HVAL`) a `u16` value. Attribute `0x17`
//! (`EIATTR_KPARAM_INFO`, format 4, 12 bytes) is one parameter: `u32`
//! index, `u16` ordinal, `u16` offset, then a `u32` whose top 14 bits are
//! its size; attribute `0x19` (`EIATTR_CBANK_PARAM_SIZE`, format 3) is the
//! parameters' total size. A kernel without parameters has no `0x17` record.

use object::read::elf::ElfFile64;
use object::{LittleEndian, Object, ObjectSection};

use crate::error::ParamTableError;

const FATBIN_MAGIC: u32 = 0xBA55_ED50;
const ELF_MAGIC: &[u8; 4] = b"\x7fELF";
const CONTAINER_HEADER: usize = 16;
/// The entry header fields read here end at byte 48.
const MIN_ENTRY_HEADER: usize = 48;
const KIND_CUBIN: u16 = 2;
const COMPRESSED: u64 = 0x8000 | 0x2000;

const FORMAT_NVAL: u8 = 1;
const FORMAT_SVAL: u8 = 4;
const ATTR_KPARAM_INFO: u8 = 0x17;
const ATTR_CBANK_PARAM_SIZE: u8 = 0x19;
/// `EIATTR_KPARAM_INFO_V2`, whose layout is not known here: a table that
/// has one is not read (the caller falls back to the driver).
const ATTR_KPARAM_INFO_V2: u8 = 0x45;

/// One parameter: where it sits in the parameter buffer, and its size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ParamSlot {
    pub(crate) offset: usize,
    pub(crate) size: usize,
}

fn u16_at(bytes: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_le_bytes(bytes.get(at..at + 2)?.try_into().ok()?))
}

fn u32_at(bytes: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(bytes.get(at..at + 4)?.try_into().ok()?))
}

fn u64_at(bytes: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(bytes.get(at..at + 8)?.try_into().ok()?))
}

/// The uncompressed cubins of `image` (a fat binary, or one cubin), in
/// order; compressed ones are skipped (their tables cannot be read here).
pub(crate) fn cubins(image: &[u8]) -> Result<Vec<&[u8]>, ParamTableError> {
    if image.starts_with(ELF_MAGIC) {
        return Ok(vec![image]);
    }
    let damaged = |offset, problem| ParamTableError::Fatbin { offset, problem };
    let mut found = Vec::new();
    let mut at = 0;
    while at < image.len() {
        if u32_at(image, at) != Some(FATBIN_MAGIC) {
            return Err(damaged(at, "no fat binary magic"));
        }
        let (Some(1), Some(16), Some(len)) = (
            u16_at(image, at + 4),
            u16_at(image, at + 6),
            u64_at(image, at + 8),
        ) else {
            return Err(damaged(at, "an unknown container header"));
        };
        let start = at + CONTAINER_HEADER;
        let body = usize::try_from(len)
            .ok()
            .and_then(|len| image.get(start..start.checked_add(len)?))
            .ok_or_else(|| damaged(at, "the container runs past the image"))?;
        let mut entry = 0;
        while entry < body.len() {
            let header = u32_at(body, entry + 4).map_or(0, |h| h as usize);
            let (Some(kind), Some(size), Some(flags)) = (
                u16_at(body, entry),
                u64_at(body, entry + 8),
                u64_at(body, entry + 40),
            ) else {
                return Err(damaged(start + entry, "a truncated entry header"));
            };
            let payload = usize::try_from(size)
                .ok()
                .filter(|_| header >= MIN_ENTRY_HEADER)
                .and_then(|size| {
                    let from = entry.checked_add(header)?;
                    body.get(from..from.checked_add(size)?)
                })
                .ok_or_else(|| damaged(start + entry, "an entry runs past its container"))?;
            if kind == KIND_CUBIN && flags & COMPRESSED == 0 {
                found.push(payload);
            }
            entry += header + payload.len();
        }
        at = start + body.len();
    }
    Ok(found)
}

/// `kernel`'s parameters from the cubins of `image` that have its
/// `.nv.info` section; `None` when none has a table read here (no cubin,
/// compressed cubins only, or a layout not known here): then only the
/// driver can say. The layout is the C ABI's, not the arch's, so every
/// cubin's table must be the same: two that differ are damage.
pub(crate) fn kernel_params(
    image: &[u8],
    kernel: &str,
) -> Result<Option<Vec<ParamSlot>>, ParamTableError> {
    let section = format!(".nv.info.{kernel}");
    let damaged = |problem| ParamTableError::NvInfo {
        kernel: kernel.to_string(),
        problem,
    };
    let mut found: Option<Vec<ParamSlot>> = None;
    for cubin in cubins(image)? {
        let elf = ElfFile64::<LittleEndian>::parse(cubin).map_err(|e| ParamTableError::Elf {
            problem: e.to_string(),
        })?;
        let Some(info) = elf.section_by_name(&section) else {
            continue;
        };
        let data = info.data().map_err(|e| ParamTableError::Elf {
            problem: e.to_string(),
        })?;
        let Some(table) = parse_nv_info(data).map_err(damaged)? else {
            continue;
        };
        match &found {
            Some(first) if *first != table => {
                return Err(damaged("the cubins of the image give different tables"))
            }
            Some(_) => {}
            None => found = Some(table),
        }
    }
    Ok(found)
}

/// The parameters a `.nv.info.<kernel>` section lists, by ordinal; `None`
/// for a table in a layout not known here.
pub(crate) fn parse_nv_info(data: &[u8]) -> Result<Option<Vec<ParamSlot>>, &'static str> {
    let mut by_ordinal: Vec<Option<ParamSlot>> = Vec::new();
    let mut total: Option<usize> = None;
    let mut at = 0;
    while at < data.len() {
        let (format, attribute) = (data[at], data.get(at + 1).copied());
        let value = u16_at(data, at + 2).ok_or("a truncated record")?;
        let attribute = attribute.ok_or("a truncated record")?;
        at += 4;
        match format {
            FORMAT_SVAL => {
                let body = data
                    .get(at..at + usize::from(value))
                    .ok_or("a record runs past the section")?;
                at += body.len();
                if attribute == ATTR_KPARAM_INFO {
                    let slot = kparam(body).ok_or("a KPARAM_INFO record of under 12 bytes")?;
                    let ordinal = usize::from(u16_at(body, 4).unwrap_or_default());
                    if by_ordinal.len() <= ordinal {
                        by_ordinal.resize(ordinal + 1, None);
                    }
                    if by_ordinal[ordinal].replace(slot).is_some() {
                        return Err("two KPARAM_INFO records for one ordinal");
                    }
                }
            }
            FORMAT_NVAL..FORMAT_SVAL if attribute == ATTR_CBANK_PARAM_SIZE => {
                total = Some(usize::from(value));
            }
            FORMAT_NVAL..FORMAT_SVAL => {}
            _ => return Err("a record of an unknown format"),
        }
        if attribute == ATTR_KPARAM_INFO_V2 {
            return Ok(None);
        }
    }
    let params: Vec<ParamSlot> = by_ordinal
        .into_iter()
        .collect::<Option<_>>()
        .ok_or("an ordinal without a KPARAM_INFO record")?;
    let end = params.iter().map(|p| p.offset + p.size).max().unwrap_or(0);
    match total {
        Some(total) if end > total => Err("a parameter past the parameters' total size"),
        // Parameters the records do not list: a table not read here.
        Some(total) if params.is_empty() && total > 0 => Ok(None),
        _ => Ok(Some(params)),
    }
}

/// One `EIATTR_KPARAM_INFO` record's offset and size.
fn kparam(body: &[u8]) -> Option<ParamSlot> {
    let offset = usize::from(u16_at(body, 6)?);
    let size = (u32_at(body, 8)? >> 18) as usize;
    Some(ParamSlot { offset, size })
}

#[cfg(test)]
#[path = "param_table_tests.rs"]
mod tests;
