//! The parameter-table reader against a real fat binary (committed, and
//! rebuilt with the real nvcc where the toolkit is installed), and against
//! damaged images and sections: refused or not read, never a panic.

use std::path::Path;
use std::process::Command;

use proptest::prelude::*;

use super::*;

/// `fixtures/param_shapes.cu` built by CUDA 13.0's nvcc (sm_80 SASS and
/// PTX, sm_90 SASS; see the `.cu` for the command).
const FIXTURE: &[u8] = include_bytes!("fixtures/param_shapes.fatbin");

/// Offsets and sizes of C parameters of these `(size, align)`s, as the C
/// ABI lays them out: each at the next multiple of its alignment.
fn c_layout(params: &[(usize, usize)]) -> Vec<ParamSlot> {
    let mut end = 0usize;
    params
        .iter()
        .map(|&(size, align)| {
            let offset = end.next_multiple_of(align);
            end = offset + size;
            ParamSlot { offset, size }
        })
        .collect()
}

const PTR: (usize, usize) = (8, 8);
const SIZE_T: (usize, usize) = (8, 8);
const INT: (usize, usize) = (4, 4);

/// What `param_shapes.cu` declares, kernel by kernel.
fn declared() -> Vec<(&'static str, Vec<ParamSlot>)> {
    // struct Desc { float; double; int32_t[3]; }: 4 + 4 padding + 8 + 12,
    // rounded up to its 8-byte alignment.
    let desc = (32, 8);
    let mut many = vec![INT; 10];
    many.extend([(8, 8), (1, 1)]);
    many.extend([INT; 6]);
    many.push(PTR);
    vec![
        ("ptrs", c_layout(&[PTR, PTR, INT])),
        ("sizes", c_layout(&[SIZE_T, PTR, (1, 1), SIZE_T, PTR])),
        ("by_struct", c_layout(&[desc, PTR, (2, 2)])),
        ("no_params", Vec::new()),
        ("many", c_layout(&many)),
        ("_Z5scaleIfEvPKT_PS0_S0_j", c_layout(&[PTR, PTR, INT, INT])),
    ]
}

/// Every declared kernel's table read from `image` equals its declaration,
/// from every cubin alone as from the whole image.
fn assert_tables(image: &[u8]) {
    let cubins = cubins(image).unwrap();
    assert_eq!(cubins.len(), 2, "sm_80 and sm_90");
    for (kernel, expected) in declared() {
        assert_eq!(
            kernel_params(image, kernel).unwrap().as_ref(),
            Some(&expected),
            "{kernel}"
        );
        for cubin in &cubins {
            assert_eq!(
                kernel_params(cubin, kernel).unwrap(),
                Some(expected.clone())
            );
        }
    }
}

#[test]
fn the_tables_of_a_real_image_are_what_the_source_declares() {
    assert_tables(FIXTURE);
    assert_eq!(kernel_params(FIXTURE, "not_there").unwrap(), None);
    // `scale` by its C++ name is not an entry: only the mangled one is.
    assert_eq!(kernel_params(FIXTURE, "scale").unwrap(), None);
}

#[test]
fn the_real_nvcc_builds_the_tables_the_source_declares() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let nvcc = root.join("target/cuda-toolkit/cuda/bin/nvcc");
    if !nvcc.is_file() {
        assert!(
            std::env::var_os("KILN_REQUIRE_TOOLKIT").is_none_or(|v| v != "1"),
            "KILN_REQUIRE_TOOLKIT=1 but there is no CUDA toolkit at {} (install one there)",
            nvcc.display()
        );
        // The GPU host has no toolkit: `not run:`, which its bundle allows.
        return eprintln!("not run: no CUDA toolkit at {}", nvcc.display());
    }
    let dir = std::env::temp_dir().join(format!("kiln-param-table-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let out = dir.join("param_shapes.fatbin");
    let status = Command::new(&nvcc)
        .args([
            "-fatbin",
            "-gencode",
            "arch=compute_80,code=[sm_80,compute_80]",
        ])
        .args(["-gencode", "arch=compute_90,code=sm_90"])
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("src/launch/fixtures/param_shapes.cu"))
        .arg("-o")
        .arg(&out)
        .status()
        .expect("nvcc runs");
    assert!(status.success(), "nvcc failed");
    let image = std::fs::read(&out).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    assert_tables(&image);
}

#[test]
fn compressed_or_ptx_only_images_have_no_table_to_read() {
    // The sm_80 cubin's entry is the first; its flags are the u64 at byte 40.
    let mut compressed = FIXTURE.to_vec();
    compressed[16 + 41] |= 0x80; // 0x8000: zstd
    assert_eq!(cubins(&compressed).unwrap().len(), 1);
    let mut none = FIXTURE.to_vec();
    for cubin_flags in entry_offsets(FIXTURE)
        .into_iter()
        .filter(|&at| u16_at(FIXTURE, at) == Some(KIND_CUBIN))
    {
        none[cubin_flags + 41] |= 0x20; // 0x2000: the older compression
    }
    assert!(cubins(&none).unwrap().is_empty());
    assert_eq!(kernel_params(&none, "ptrs").unwrap(), None);
    assert_eq!(kernel_params(&[], "ptrs").unwrap(), None);
}

/// Where each entry of the fixture's one container starts.
fn entry_offsets(image: &[u8]) -> Vec<usize> {
    let mut at = CONTAINER_HEADER;
    let mut out = Vec::new();
    while at < image.len() {
        out.push(at);
        let header = u32_at(image, at + 4).unwrap() as usize;
        at += header + u64_at(image, at + 8).unwrap() as usize;
    }
    out
}

#[test]
fn cubins_that_disagree_are_refused() {
    // `ptrs`' last parameter (`unsigned n`, 4 bytes) made 2 in the sm_90
    // cubin alone (8 would pass the parameters' total size, also refused):
    // its KPARAM_INFO record for ordinal 2 has size 4 << 18.
    let sm_90 = cubins(FIXTURE).unwrap()[1];
    let elf = ElfFile64::<LittleEndian>::parse(sm_90).unwrap();
    let (start, len) = elf
        .section_by_name(".nv.info.ptrs")
        .and_then(|s| s.file_range())
        .unwrap();
    let section = sm_90.as_ptr() as usize - FIXTURE.as_ptr() as usize + start as usize;
    let record = [4u8, 0x17, 12, 0, 0, 0, 0, 0, 2, 0, 0x10, 0];
    let at = section
        + FIXTURE[section..section + len as usize]
            .windows(record.len())
            .position(|w| w == record)
            .expect("ptrs' ordinal 2 record in the sm_90 cubin");
    let mut image = FIXTURE.to_vec();
    assert_eq!(u32_at(&image, at + 12).map(|v| v >> 18), Some(4));
    image[at + 14] = image[at + 14] & 0x03 | (2 << 2);
    let err = kernel_params(&image, "ptrs").unwrap_err();
    assert_eq!(
        err.to_string(),
        ".nv.info.ptrs is damaged: the cubins of the image give different tables"
    );
    let err = crate::Error::ParamTable {
        kernel: "ptrs",
        module: "param_shapes",
        source: err,
    };
    assert_eq!(
        err.to_string(),
        "cannot read the parameters of `ptrs` from module `param_shapes`: .nv.info.ptrs is \
         damaged: the cubins of the image give different tables; rebuild the module"
    );
}

#[test]
fn every_truncation_of_a_real_image_is_refused() {
    for len in 1..FIXTURE.len() {
        let err = kernel_params(&FIXTURE[..len], "ptrs");
        assert!(
            matches!(err, Err(ParamTableError::Fatbin { .. })),
            "{len}: {err:?}"
        );
    }
}

/// A record: format, attribute, then a u16 (SVAL: the size of `body`).
fn record(format: u8, attribute: u8, value: u16, body: &[u8]) -> Vec<u8> {
    let mut out = vec![format, attribute];
    out.extend(value.to_le_bytes());
    out.extend(body);
    out
}

fn kparam_record(ordinal: u16, offset: u16, size: u32) -> Vec<u8> {
    let mut body = 0u32.to_le_bytes().to_vec();
    body.extend(ordinal.to_le_bytes());
    body.extend(offset.to_le_bytes());
    body.extend((size << 18 | 0x1f000).to_le_bytes());
    record(FORMAT_SVAL, ATTR_KPARAM_INFO, 12, &body)
}

#[test]
fn damaged_sections_are_refused_each_with_its_reason() {
    let p0 = kparam_record(0, 0, 8);
    let p1 = kparam_record(1, 8, 4);
    let total = |n| record(3, ATTR_CBANK_PARAM_SIZE, n, &[]);
    let ok = [total(12), p1.clone(), p0.clone()].concat();
    assert_eq!(
        parse_nv_info(&ok),
        Ok(Some(vec![
            ParamSlot { offset: 0, size: 8 },
            ParamSlot { offset: 8, size: 4 }
        ]))
    );
    let cases: [(Vec<u8>, &str); 7] = [
        (
            ok[..ok.len() - 1].to_vec(),
            "a record runs past the section",
        ),
        ([ok.clone(), vec![4, 1]].concat(), "a truncated record"),
        ([ok.clone(), vec![4]].concat(), "a truncated record"),
        (
            [p0.clone(), p0.clone()].concat(),
            "two KPARAM_INFO records for one ordinal",
        ),
        (p1.clone(), "an ordinal without a KPARAM_INFO record"),
        (
            [p0.clone(), record(9, 1, 0, &[])].concat(),
            "a record of an unknown format",
        ),
        (
            [total(4), p0.clone()].concat(),
            "a parameter past the parameters' total size",
        ),
    ];
    for (section, why) in cases {
        assert_eq!(parse_nv_info(&section), Err(why), "{section:?}");
    }
    let short = record(FORMAT_SVAL, ATTR_KPARAM_INFO, 4, &[0; 4]);
    assert_eq!(
        parse_nv_info(&short),
        Err("a KPARAM_INFO record of under 12 bytes")
    );
}

#[test]
fn tables_in_a_layout_not_known_here_are_not_read() {
    let v2 = record(FORMAT_SVAL, ATTR_KPARAM_INFO_V2, 0, &[]);
    assert_eq!(
        parse_nv_info(&[kparam_record(0, 0, 8), v2].concat()),
        Ok(None)
    );
    // A total size with no parameter listed: the records are elsewhere.
    assert_eq!(
        parse_nv_info(&record(3, ATTR_CBANK_PARAM_SIZE, 8, &[])),
        Ok(None)
    );
    // No parameters, and none said: a kernel without parameters.
    assert_eq!(
        parse_nv_info(&record(1, 0x2a, 0, &[])),
        Ok(Some(Vec::new()))
    );
}

proptest! {
    #![proptest_config(ProptestConfig { failure_persistence: None, ..ProptestConfig::default() })]

    /// Bytes flipped anywhere in a real image never panic the reader; what
    /// it returns is an error, nothing, or a table.
    #[test]
    fn bit_flips_in_a_real_image_never_panic(
        flips in proptest::collection::vec((any::<prop::sample::Index>(), 0u8..8), 1..16),
    ) {
        let mut image = FIXTURE.to_vec();
        let len = image.len();
        for (at, bit) in &flips {
            image[at.index(len)] ^= 1 << bit;
        }
        for (kernel, _) in declared() {
            let _ = kernel_params(&image, kernel);
        }
    }

    /// Arbitrary sections never panic the `.nv.info` parser.
    #[test]
    fn arbitrary_sections_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
        let _ = parse_nv_info(&bytes);
    }
}

#[test]
fn kilns_own_kernels_have_the_tables_their_declarations_lay_out() {
    let built: Vec<_> = cuda_sys::modules::ALL
        .iter()
        .filter(|m| m.is_built())
        .collect();
    if built.is_empty() {
        assert!(
            std::env::var_os("KILN_REQUIRE_TOOLKIT").is_none_or(|v| v != "1"),
            "KILN_REQUIRE_TOOLKIT=1 but cuda-sys was built without GPU code"
        );
        return eprintln!("skipped: cuda-sys was built without GPU code (no CUDA toolkit)");
    }
    let mut checked = 0;
    for decl in cuda_sys::kernels::ALL {
        let Some(module) = built.iter().find(|m| m.has_kernel(decl.name)) else {
            continue;
        };
        let table = kernel_params(module.image, decl.name).unwrap();
        assert_eq!(
            table,
            Some(c_layout(decl.param_layout)),
            "{} in {}",
            decl.name,
            module.name
        );
        checked += 1;
    }
    assert!(checked > 0, "no declared kernel in cuda-sys's modules");
}

#[test]
fn concurrent_readers_of_one_image_agree() {
    let expected: Vec<_> = declared()
        .into_iter()
        .map(|(k, _)| kernel_params(FIXTURE, k).unwrap())
        .collect();
    std::thread::scope(|scope| {
        let readers: Vec<_> = (0..4)
            .map(|_| {
                scope.spawn(|| {
                    declared()
                        .into_iter()
                        .map(|(k, _)| kernel_params(FIXTURE, k).unwrap())
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        for reader in readers {
            assert_eq!(reader.join().unwrap(), expected);
        }
    });
}
