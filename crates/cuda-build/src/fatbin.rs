//! A reader of the CUDA fat binary container (what `nvcc -fatbin` and
//! `nvcc -dlink -fatbin` write), enough to list its entries and to refuse a
//! malformed image before it is embedded: a cached, prebuilt or freshly
//! built image must hold the archs the generated module declares.
//!
//! # The layout (little-endian; checked against CUDA 13.0's nvcc and cuobjdump)
//! A container is a 16-byte header: magic `0xBA55ED50` (u32), version 1
//! (u16), header size 16 (u16), then the size of what follows (u64). The
//! entries follow back to back and fill that size exactly; an image may hold
//! several containers one after another. Each entry starts with kind (u16:
//! 1 PTX, 2 ELF/SASS), a version (u16), its header's size (u32: 64, 72, 80
//! or 112 seen), its payload's size (u64), then at byte 28 the arch (u32,
//! `90` for sm_90) and at byte 40 its flags (u64: `0x8000` zstd-compressed,
//! `0x2000` the older compression, `0x100000` an `a` arch, `0x200000` an `f`
//! arch). The payload follows the entry's header.

use crate::arch::{Arch, Variant};

/// The first four bytes of every container.
pub(crate) const MAGIC: u32 = 0xBA55_ED50;
const VERSION: u16 = 1;
const HEADER_LEN: usize = 16;
/// The fields this reader uses end at byte 48; every entry seen is 64 or more.
const MIN_ENTRY_HEADER: u32 = 64;
/// Far above any entry header seen (112): a larger one is damage.
const MAX_ENTRY_HEADER: u32 = 4096;
const FLAG_COMPRESSED_ZSTD: u64 = 0x8000;
const FLAG_COMPRESSED_OLD: u64 = 0x2000;
const FLAG_ARCH_SPECIFIC: u64 = 0x10_0000;
const FLAG_FAMILY: u64 = 0x20_0000;
const ELF_MAGIC: &[u8; 4] = b"\x7fELF";

/// What an entry holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum EntryKind {
    /// PTX text, JIT-compiled by the driver (kind 1).
    Ptx,
    /// A cubin: SASS for one arch (kind 2).
    Sass,
    /// A kind this reader does not know; kept, never counted as code.
    Other(u16),
}

/// One entry of a fat binary.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Entry {
    pub(crate) kind: EntryKind,
    /// The arch, with the variant its flags say.
    pub(crate) arch: Arch,
    /// Whether the payload is compressed.
    #[allow(
        dead_code,
        reason = "read by the tests and by tools that report on images"
    )]
    pub(crate) compressed: bool,
}

/// Why bytes are not a usable fat binary.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FatbinError {
    /// Fewer bytes than a container header, at the start or after a container.
    #[error("{len} bytes at byte {offset} are too few for a fat binary header (16 bytes)")]
    TooShort {
        /// Where the header should start.
        offset: usize,
        /// How many bytes are left there.
        len: usize,
    },
    /// The magic number is wrong: not a fat binary.
    #[error("no fat binary magic at byte {offset} (found {found:#010x}, expected 0xba55ed50)")]
    Magic {
        /// Where the header starts.
        offset: usize,
        /// What is there instead.
        found: u32,
    },
    /// The container header's version or size is not the known one.
    #[error("fat binary header at byte {offset} has version {version} and size {size} (expected 1 and 16)")]
    Header {
        /// Where the header starts.
        offset: usize,
        /// Its version.
        version: u16,
        /// Its header size.
        size: u16,
    },
    /// The container says it is longer than the bytes there are.
    #[error("fat binary at byte {offset} declares {declared} bytes of entries but {available} follow (truncated)")]
    Truncated {
        /// Where the header starts.
        offset: usize,
        /// The entries' size it declares.
        declared: u64,
        /// The bytes after its header.
        available: usize,
    },
    /// A container with no entries.
    #[error("fat binary at byte {offset} holds no entries")]
    Empty {
        /// Where the header starts.
        offset: usize,
    },
    /// An entry's header is malformed or runs past its container.
    #[error("fat binary entry at byte {offset}: {problem}")]
    Entry {
        /// Where the entry starts.
        offset: usize,
        /// What is wrong with it.
        problem: &'static str,
    },
    /// The image lacks code the module declares.
    #[error("holds no {kind} for {arch} (it holds {holds})")]
    MissingArch {
        /// `SASS` or `PTX`.
        kind: &'static str,
        /// The arch (`sm_90`, `compute_90`).
        arch: String,
        /// What it holds instead, for the message.
        holds: String,
    },
}

fn u16_at(bytes: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([bytes[at], bytes[at + 1]])
}

fn u32_at(bytes: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap_or_default())
}

fn u64_at(bytes: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap_or_default())
}

/// The entries of every container of `image`, in order; an error for
/// anything but whole, well-formed containers filling the image exactly.
pub(crate) fn entries(image: &[u8]) -> Result<Vec<Entry>, FatbinError> {
    let mut found = Vec::new();
    let mut offset = 0;
    loop {
        let rest = &image[offset..];
        if rest.len() < HEADER_LEN {
            return Err(FatbinError::TooShort {
                offset,
                len: rest.len(),
            });
        }
        let magic = u32_at(rest, 0);
        if magic != MAGIC {
            return Err(FatbinError::Magic {
                offset,
                found: magic,
            });
        }
        let (version, size) = (u16_at(rest, 4), u16_at(rest, 6));
        if version != VERSION || usize::from(size) != HEADER_LEN {
            return Err(FatbinError::Header {
                offset,
                version,
                size,
            });
        }
        let declared = u64_at(rest, 8);
        let available = rest.len() - HEADER_LEN;
        let body_len = usize::try_from(declared)
            .ok()
            .filter(|&len| len <= available)
            .ok_or(FatbinError::Truncated {
                offset,
                declared,
                available,
            })?;
        if body_len == 0 {
            return Err(FatbinError::Empty { offset });
        }
        let body_start = offset + HEADER_LEN;
        container_entries(
            &image[body_start..body_start + body_len],
            body_start,
            &mut found,
        )?;
        offset = body_start + body_len;
        if offset == image.len() {
            return Ok(found);
        }
    }
}

/// Reads the entries of one container's body (which starts at `base` in
/// the image) into `found`.
fn container_entries(body: &[u8], base: usize, found: &mut Vec<Entry>) -> Result<(), FatbinError> {
    let mut at = 0;
    while at < body.len() {
        let offset = base + at;
        let bad = |problem| FatbinError::Entry { offset, problem };
        let rest = &body[at..];
        if rest.len() < MIN_ENTRY_HEADER as usize {
            return Err(bad("its header runs past the end of the container"));
        }
        let header_len = u32_at(rest, 4);
        if !(MIN_ENTRY_HEADER..=MAX_ENTRY_HEADER).contains(&header_len) {
            return Err(bad("its header size is not between 64 and 4096 bytes"));
        }
        let header_len = header_len as usize;
        let payload_len = u64_at(rest, 8);
        let end = usize::try_from(payload_len)
            .ok()
            .and_then(|len| len.checked_add(header_len))
            .filter(|&end| end <= rest.len())
            .ok_or(bad("its payload runs past the end of the container"))?;
        let flags = u64_at(rest, 40);
        let compressed = flags & (FLAG_COMPRESSED_ZSTD | FLAG_COMPRESSED_OLD) != 0;
        let kind = match u16_at(rest, 0) {
            1 => EntryKind::Ptx,
            2 => EntryKind::Sass,
            other => EntryKind::Other(other),
        };
        let payload = &rest[header_len..end];
        if kind == EntryKind::Sass && !compressed && !payload.starts_with(ELF_MAGIC) {
            return Err(bad("its uncompressed SASS payload is not an ELF file"));
        }
        let number = u32_at(rest, 28);
        if matches!(kind, EntryKind::Ptx | EntryKind::Sass) && !(10..10_000).contains(&number) {
            return Err(bad("its arch is not a GPU arch number"));
        }
        let variant = if flags & FLAG_ARCH_SPECIFIC != 0 {
            Variant::ArchSpecific
        } else if flags & FLAG_FAMILY != 0 {
            Variant::Family
        } else {
            Variant::Portable
        };
        found.push(Entry {
            kind,
            arch: Arch {
                major: number / 10,
                minor: number % 10,
                variant,
            },
            compressed,
        });
        at += end;
    }
    Ok(())
}

/// Checks that `image` is a well-formed fat binary holding SASS for every
/// arch of `sass` and PTX for every arch of `ptx`: what a generated module
/// declares of it.
pub(crate) fn check_archs(image: &[u8], sass: &[Arch], ptx: &[Arch]) -> Result<(), FatbinError> {
    let entries = entries(image)?;
    let has = |kind, arch: &Arch| entries.iter().any(|e| e.kind == kind && e.arch == *arch);
    let missing = sass
        .iter()
        .find(|a| !has(EntryKind::Sass, a))
        .map(|a| ("SASS", a.sm_name()))
        .or_else(|| {
            ptx.iter()
                .find(|a| !has(EntryKind::Ptx, a))
                .map(|a| ("PTX", a.compute_name()))
        });
    match missing {
        None => Ok(()),
        Some((kind, arch)) => Err(FatbinError::MissingArch {
            kind,
            arch,
            holds: describe(&entries),
        }),
    }
}

/// `sm_80 sm_90 compute_90`, for messages.
pub(crate) fn describe(entries: &[Entry]) -> String {
    let names: Vec<String> = entries
        .iter()
        .map(|e| match e.kind {
            EntryKind::Sass => e.arch.sm_name(),
            EntryKind::Ptx => e.arch.compute_name(),
            EntryKind::Other(kind) => format!("kind {kind}"),
        })
        .collect();
    if names.is_empty() {
        "nothing".to_string()
    } else {
        names.join(" ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    /// Images nvcc 13.0.88 wrote (`tests/fixtures/fatbin/saxpy.cu`), with
    /// what `cuobjdump --list-elf --list-ptx` lists of each.
    const REAL: [(&str, &[u8], &str); 5] = [
        (
            "-gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=[sm_90,compute_90]",
            include_bytes!("../tests/fixtures/fatbin/sm80_sm90_compute90.fatbin"),
            "sm_80 sm_90 compute_90",
        ),
        (
            "-Xfatbin -compress-all -gencode arch=compute_80,code=[sm_80,compute_80]",
            include_bytes!("../tests/fixtures/fatbin/sm80_compute80_compressed.fatbin"),
            "sm_80 compute_80",
        ),
        (
            "-gencode arch=compute_90a,code=[sm_90a,compute_90a]",
            include_bytes!("../tests/fixtures/fatbin/sm90a_compute90a.fatbin"),
            "sm_90a compute_90a",
        ),
        (
            "-gencode arch=compute_100f,code=[sm_100f,compute_100f]",
            include_bytes!("../tests/fixtures/fatbin/sm100f_compute100f.fatbin"),
            "sm_100f compute_100f",
        ),
        (
            "-rdc=true -c, then -dlink -fatbin -gencode arch=compute_80,code=sm_80",
            include_bytes!("../tests/fixtures/fatbin/dlink_sm80.fatbin"),
            "sm_80",
        ),
    ];

    fn arch(number: u32, variant: Variant) -> Arch {
        Arch {
            major: number / 10,
            minor: number % 10,
            variant,
        }
    }

    #[test]
    fn real_images_list_what_cuobjdump_lists() {
        for (made_by, image, listed) in REAL {
            let entries = entries(image).unwrap_or_else(|e| panic!("{made_by}: {e}"));
            assert_eq!(describe(&entries), listed, "{made_by}");
        }
        let compressed = entries(REAL[1].1).unwrap();
        assert!(compressed.iter().all(|e| e.compressed));
        assert!(!entries(REAL[0].1).unwrap()[0].compressed);
    }

    #[test]
    fn declared_archs_are_checked_by_kind_number_and_variant() {
        let image = REAL[0].1;
        let (sm80, sm90) = (arch(80, Variant::Portable), arch(90, Variant::Portable));
        assert_eq!(check_archs(image, &[sm80, sm90], &[sm90]), Ok(()));
        assert_eq!(check_archs(image, &[], &[]), Ok(()));
        let missing = check_archs(image, &[arch(75, Variant::Portable)], &[]).unwrap_err();
        assert_eq!(
            missing.to_string(),
            "holds no SASS for sm_75 (it holds sm_80 sm_90 compute_90)"
        );
        // PTX for 80 is not there, though SASS for it is.
        assert!(check_archs(image, &[], &[sm80]).is_err());
        // sm_90a is not sm_90.
        assert!(check_archs(image, &[arch(90, Variant::ArchSpecific)], &[]).is_err());
        let sm90a = arch(90, Variant::ArchSpecific);
        assert_eq!(check_archs(REAL[2].1, &[sm90a], &[sm90a]), Ok(()));
        assert!(check_archs(REAL[2].1, &[sm90], &[]).is_err());
    }

    /// Every prefix of every real image (a truncated file) is refused.
    #[test]
    fn every_truncation_is_refused() {
        for (made_by, image, _) in REAL {
            for len in 0..image.len() {
                assert!(entries(&image[..len]).is_err(), "{made_by}: {len} bytes");
            }
        }
    }

    /// A flipped bit in any field this reader checks is refused: the
    /// container header (magic, version, size, entries' size) and each
    /// entry's header and payload sizes, and a SASS payload's ELF magic.
    #[test]
    fn damaged_headers_are_refused() {
        let image = REAL[0].1;
        let entry = 16;
        let checked: Vec<usize> = (0..16)
            .chain(entry + 4..entry + 16)
            .chain(entry + 64..entry + 68)
            .collect();
        for at in checked {
            for bit in 0..8 {
                let mut damaged = image.to_vec();
                damaged[at] ^= 1 << bit;
                assert!(entries(&damaged).is_err(), "byte {at} bit {bit}");
            }
        }
    }

    #[test]
    fn trailing_bytes_and_empty_containers_are_refused_and_concatenations_read() {
        let image = REAL[0].1;
        let mut two = image.to_vec();
        two.extend_from_slice(REAL[2].1);
        assert_eq!(
            describe(&entries(&two).unwrap()),
            "sm_80 sm_90 compute_90 sm_90a compute_90a"
        );
        let mut trailing = image.to_vec();
        trailing.extend_from_slice(&[0; 8]);
        assert!(matches!(
            entries(&trailing),
            Err(FatbinError::TooShort { offset, len: 8 }) if offset == image.len()
        ));
        let mut empty = image[..16].to_vec();
        empty[8..16].fill(0);
        assert_eq!(entries(&empty), Err(FatbinError::Empty { offset: 0 }));
        assert!(matches!(
            entries(b"!<arch>\n"),
            Err(FatbinError::TooShort { .. })
        ));
        assert!(matches!(
            entries(b"fake output of a.cu for sm_80\n"),
            Err(FatbinError::Magic { .. })
        ));
    }

    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig { failure_persistence: None, ..ProptestConfig::default() })]

        /// Arbitrary bytes never panic the reader; what it accepts is well
        /// formed (starts with the magic, holds entries).
        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
            if let Ok(found) = entries(&bytes) {
                prop_assert_eq!(u32_at(&bytes, 0), MAGIC);
                prop_assert!(!found.is_empty());
            }
        }

        /// A real image with bytes overwritten anywhere never panics the
        /// reader; overwritten in a container or entry header field it
        /// checks, it is refused.
        #[test]
        fn mutated_real_images_never_panic_and_damaged_headers_are_refused(
            which in 0..REAL.len(),
            edits in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8),
            header_at in 0usize..16,
            header_byte in any::<u8>(),
        ) {
            let image = REAL[which].1;
            let mut mutated = image.to_vec();
            for (at, byte) in &edits {
                mutated[at.index(image.len())] = *byte;
            }
            let _ = entries(&mutated);
            let _ = check_archs(&mutated, &[Arch::new(8, 0)], &[Arch::new(9, 0)]);
            let mut damaged = image.to_vec();
            if damaged[header_at] != header_byte {
                damaged[header_at] = header_byte;
                prop_assert!(entries(&damaged).is_err(), "byte {} = {:#x}", header_at, header_byte);
            }
            let mut cut = image.to_vec();
            cut.truncate(edits.len() * 97 % image.len());
            prop_assert!(entries(&cut).is_err());
        }
    }

    /// With the toolkit `cargo xtask toolkit install` put in this checkout:
    /// images nvcc writes now read as cuobjdump lists them.
    #[test]
    fn fresh_real_images_read_as_cuobjdump_lists_them() {
        let bin = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/cuda-toolkit/cuda/bin");
        if !bin.join("nvcc").is_file() {
            eprintln!("skipped: no CUDA toolkit at {}", bin.display());
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/fatbin/saxpy.cu");
        let image = dir.path().join("k.fatbin");
        for gencode in [
            "arch=compute_75,code=[sm_75,compute_75]",
            "arch=compute_120,code=[sm_120,compute_120]",
            "arch=compute_90,code=compute_90",
        ] {
            let status = std::process::Command::new(bin.join("nvcc"))
                .args(["-fatbin", "-gencode", gencode, "-o"])
                .arg(&image)
                .arg(&source)
                .status()
                .unwrap();
            assert!(status.success(), "{gencode}");
            let listed = std::process::Command::new(bin.join("cuobjdump"))
                .args(["--list-elf", "--list-ptx"])
                .arg(&image)
                .output()
                .unwrap();
            // `ELF file    1: k.1.sm_75.cubin`, `PTX file    1: k.1.sm_75.ptx`.
            let names: Vec<String> = String::from_utf8_lossy(&listed.stdout)
                .lines()
                .filter_map(|line| {
                    let name = line.rsplit(": ").next()?;
                    let arch = name.split('.').nth(2)?;
                    Some(if name.ends_with(".ptx") {
                        arch.replace("sm_", "compute_")
                    } else {
                        arch.to_string()
                    })
                })
                .collect();
            let read = entries(&std::fs::read(&image).unwrap()).unwrap();
            assert_eq!(describe(&read), names.join(" "), "{gencode}");
        }
    }
}
