//! Tests of the `.npy` reader: what numpy writes, streams read in pieces,
//! one-line refusals of every malformed part, and property tests (arbitrary
//! bytes and mutated headers never panic and fail in one line).

use std::io::{self, Read};

use half::f16;
use proptest::prelude::*;

use super::*;

/// An npy file as numpy writes it: the preamble, `dict`, spaces and a
/// newline up to a multiple of 64 bytes, then `data`.
pub(crate) fn npy_bytes(major: u8, dict: &str, data: &[u8]) -> Vec<u8> {
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

pub(crate) fn dict(descr: &str, shape: &str) -> String {
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
    let m = from_bytes(&file).unwrap();
    assert_eq!((m.n, m.d), (2, 3));
    assert_eq!(
        m.data,
        NpyData::F32(vec![1.0, -2.5, 3.0, 0.5, 65504.0, -0.0])
    );
    // The helper pads the same way, so the other tests' files are laid out
    // as numpy's are.
    let data = f32_bytes(&[1.0, -2.5, 3.0, 0.5, 65504.0, -0.0]);
    assert_eq!(npy_bytes(1, &dict("<f4", "(2, 3)"), &data), file);
}

#[test]
fn reads_versions_2_and_3_and_big_endian() {
    let data = f32_bytes(&[1.0, 2.0]);
    for major in [2, 3] {
        let m = from_bytes(&npy_bytes(major, &dict("<f4", "(1, 2)"), &data)).unwrap();
        assert_eq!(m.data, NpyData::F32(vec![1.0, 2.0]), "version {major}");
    }
    let utf8 = "{'descr': '<f2', 'fortran_order': False, 'shape': (1, 1), 'note': 'é'}";
    let m = from_bytes(&npy_bytes(3, utf8, &[0x00, 0x3c])).unwrap();
    assert_eq!(m.data, NpyData::F16(vec![0x3c00]));
    let be: Vec<u8> = [1.5f32, -2.0]
        .iter()
        .flat_map(|v| v.to_be_bytes())
        .collect();
    let m = from_bytes(&npy_bytes(1, &dict(">f4", "(2, 1)"), &be)).unwrap();
    assert_eq!(m.data, NpyData::F32(vec![1.5, -2.0]));
}

#[test]
fn f16_round_trips_through_a_file() {
    let values = [
        0.0f32,
        -0.0,
        1.0,
        -2.5,
        65504.0,
        6.103_515_6e-5,
        5.960_464_5e-8,
    ];
    let bits: Vec<u16> = values.iter().map(|&v| f16::from_f32(v).to_bits()).collect();
    let data: Vec<u8> = bits.iter().flat_map(|b| b.to_le_bytes()).collect();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("f16.npy");
    std::fs::write(&path, npy_bytes(1, &dict("<f2", "(7, 1)"), &data)).unwrap();
    let m = read(&path).unwrap();
    assert_eq!((m.n, m.d), (7, 1));
    assert_eq!(m.data, NpyData::F16(bits));
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
    assert_eq!(
        read_from(Trickle(&file)).unwrap().data,
        NpyData::F32(values)
    );
    let err = read_from(Trickle(&file[..file.len() - 5])).unwrap_err();
    assert!(
        matches!(
            err,
            NpyError::Truncated {
                section: "data",
                needed: 1200,
                ..
            }
        ),
        "{err}"
    );
    let mut longer = file.clone();
    longer.push(0);
    let err = read_from(Trickle(&longer)).unwrap_err();
    assert!(
        matches!(err, NpyError::TrailingData { actual: None, .. }),
        "{err}"
    );
}

#[test]
fn a_pipe_is_read_to_its_end() {
    let file = npy_bytes(1, &dict("<f4", "(2, 2)"), &f32_bytes(&[1.0, 2.0, 3.0, 4.0]));
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("fifo");
    make_fifo(&fifo);
    let writer = {
        let fifo = fifo.clone();
        std::thread::spawn(move || std::fs::write(fifo, file).unwrap())
    };
    let m = read(&fifo).unwrap();
    writer.join().unwrap();
    assert_eq!(m.data, NpyData::F32(vec![1.0, 2.0, 3.0, 4.0]));
}

#[test]
fn empty_matrices_are_read_and_huge_partial_products_refused() {
    let m = from_bytes(&npy_bytes(1, &dict("<f4", "(0, 16)"), &[])).unwrap();
    assert_eq!((m.n, m.d), (0, 16));
    // Found by the property test: a zero dimension makes the product 0,
    // but npyz's strides multiply the others (which overflowed).
    check_rejected(
        &npy_bytes(1, &dict("<f4", "(0, 300000000000, 61490000)"), &[]),
        "too large",
    );
}

/// One rejected file and the message it must give.
#[track_caller]
fn check_rejected(file: &[u8], message: &str) {
    let err = from_bytes(file).unwrap_err().to_string();
    assert!(err.contains(message), "{err:?} does not say {message:?}");
    assert!(!err.contains('\n'), "{err:?}");
}

#[test]
fn rejects_inputs_that_are_not_npy() {
    check_rejected(
        b"PK\x03\x04 an npz archive",
        "it starts with PK\\x03\\x04 a instead",
    );
    check_rejected(b"", "not an npy file: it is empty");
    let mut file = npy_bytes(1, &dict("<f4", "(1, 1)"), &[0; 4]);
    file[6] = 4;
    check_rejected(&file, "npy format version 4.0 is not supported");
}

#[test]
fn rejects_other_dtypes_orders_and_shapes() {
    check_rejected(
        &npy_bytes(1, &dict("<f8", "(1, 1)"), &[0; 8]),
        "dtype '<f8' is not supported",
    );
    check_rejected(
        &npy_bytes(1, &dict("<i4", "(1, 1)"), &[0; 4]),
        "dtype '<i4'",
    );
    let structured =
        "{'descr': [('x', '<f4'), ('y', '<f4')], 'fortran_order': False, 'shape': (1, 1), }";
    check_rejected(&npy_bytes(1, structured, &[0; 8]), "is not supported");
    let object = "{'descr': '|O', 'fortran_order': False, 'shape': (1, 1), }";
    check_rejected(
        &npy_bytes(1, object, &[0; 8]),
        "dtype '|O' is not supported",
    );
    let fortran = "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }";
    check_rejected(&npy_bytes(1, fortran, &[0; 16]), "Fortran order");
    check_rejected(
        &npy_bytes(1, &dict("<f4", "(3,)"), &[0; 12]),
        "shape (3,) is not 2-D",
    );
    check_rejected(
        &npy_bytes(1, &dict("<f4", "(1, 2, 3)"), &[0; 24]),
        "shape (1, 2, 3)",
    );
    check_rejected(
        &npy_bytes(1, &dict("<f4", "()"), &[0; 4]),
        "shape () is not 2-D",
    );
}

#[test]
fn rejects_data_that_does_not_match_the_shape() {
    check_rejected(
        &npy_bytes(1, &dict("<f4", "(2, 3)"), &[0; 28]),
        "the data after the header is 28 bytes but the shape needs 24",
    );
    check_rejected(
        &npy_bytes(1, &dict("<f2", "(2, 3)"), &[0; 11]),
        "its data needs 12 bytes but only 11 are there",
    );
    check_rejected(
        &npy_bytes(1, &dict("<f4", "(4294967296, 4294967296)"), &[]),
        "shape (4294967296, 4294967296) is too large",
    );
    check_rejected(
        &npy_bytes(1, &dict("<f4", "(18446744073709551615, 3)"), &[]),
        "too large",
    );
    check_rejected(
        &npy_bytes(1, &dict("<f4", "(18446744073709551616, 1)"), &[]),
        "over 2^64",
    );
}

#[test]
fn rejects_truncated_and_malformed_headers() {
    let file = numpy_f32_fixture();
    check_rejected(
        &file[..9],
        "its preamble needs 10 bytes but only 9 are there",
    );
    check_rejected(
        &file[..60],
        "its header needs 118 bytes but only 50 are there",
    );
    for (header, reason) in [
        ("{'descr': '<f4', 'shape': (1, 1)}", "fortran_order"),
        (
            "{'descr': '<f4' 'fortran_order': False}",
            "the npy header is not valid",
        ),
        (
            "{'descr': '<f4', 'fortran_order': 0, 'shape': (1, 1)}",
            "not a bool",
        ),
        (
            "{'descr': '<f4', 'fortran_order': False, 'shape': (1, -1)}",
            "negative",
        ),
        ("['descr']", "it is not a dict"),
        ("{'descr': '<f4", "the npy header is not valid"),
    ] {
        check_rejected(&npy_bytes(1, header, &[]), reason);
    }
}

#[test]
fn deep_nesting_is_refused_without_recursion() {
    // The header that overflowed the stack of the old recursive parser.
    let deep = format!("{{'descr': {}", "[".repeat(20_000));
    check_rejected(&npy_bytes(1, &deep, &[]), "nest deeper than 8");
    // Brackets inside strings do not count.
    let quoted = format!(
        "{{'descr': '<f4', 'note': '{}', 'fortran_order': False, 'shape': (1, 1)}}",
        "[".repeat(100)
    );
    assert!(from_bytes(&npy_bytes(1, &quoted, &[0; 4])).is_ok());
    let huge = {
        let mut f = MAGIC.to_vec();
        f.extend([2, 0]);
        f.extend(u32::MAX.to_le_bytes());
        f
    };
    check_rejected(&huge, "over the 65536 accepted");
}

#[test]
fn the_deepest_header_accepted_parses_quickly() {
    // npyz's parser backtracks per level: the deepest nesting let through
    // must still parse (this test would run for hours otherwise).
    for open in ["(", "[", "{"] {
        let header = format!(
            "{{'descr': '<f4', 'fortran_order': False, 'shape': (1, 1), 'x': {}}}",
            open.repeat(MAX_NESTING - 1)
        );
        let err = from_bytes(&npy_bytes(1, &header, &[0; 4])).unwrap_err();
        assert!(err.to_string().contains("not valid"), "{err}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
        if let Err(e) = from_bytes(&bytes) {
            prop_assert!(!e.to_string().contains('\n'));
        }
        if let Err(e) = read_from(&bytes[..]) {
            prop_assert!(!e.to_string().contains('\n'));
        }
    }

    #[test]
    fn mutated_headers_never_panic(
        pos in 0usize..200,
        byte in any::<u8>(),
        cut in 0usize..300,
        shape in "\\((0|1|2|[0-9]{1,22}|-1)(, ?[0-9]{0,21}){0,3},?\\)",
        descr in "[<>|=]?[fiuOcSU]?[0-9]{0,3}",
    ) {
        let header = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}");
        let mut file = npy_bytes(1, &header, &[0; 64]);
        if pos < file.len() {
            file[pos] = byte;
        }
        for input in [&file[..], &file[..cut.min(file.len())]] {
            match from_bytes(input) {
                Ok(m) => prop_assert!(m.n.checked_mul(m.d).is_some()),
                Err(e) => prop_assert!(!e.to_string().contains('\n'), "{e}"),
            }
            if let Err(e) = read_from(Trickle(input)) {
                prop_assert!(!e.to_string().contains('\n'), "{e}");
            }
        }
    }
}

#[test]
fn bf16_is_read_as_numpy_and_other_writers_name_it() {
    let values = [1.0f32, -2.5, 3.0e38, 0.0];
    let bits: Vec<u16> = values
        .iter()
        .map(|&v| half::bf16::from_f32(v).to_bits())
        .collect();
    let data: Vec<u8> = bits.iter().flat_map(|b| b.to_le_bytes()).collect();
    for descr in ["<V2", "|V2", "bfloat16"] {
        let m = from_bytes(&npy_bytes(1, &dict(descr, "(2, 2)"), &data)).unwrap();
        assert_eq!(m.data, NpyData::BF16(bits.clone()), "{descr}");
    }
    // Double quotes, as some writers use.
    let quoted = "{\"descr\": \"bfloat16\", \"fortran_order\": False, \"shape\": (4, 1)}";
    let m = from_bytes(&npy_bytes(1, quoted, &data)).unwrap();
    assert_eq!(m.data, NpyData::BF16(bits.clone()));
    // Plain 2-byte integers are not bfloat16.
    check_rejected(
        &npy_bytes(1, &dict("<u2", "(2, 2)"), &data),
        "dtype '<u2' is not supported",
    );
    check_rejected(
        &npy_bytes(1, &dict("<V4", "(2, 2)"), &[0; 16]),
        "is not supported",
    );
}

/// Writes `bytes` to a temp file and maps (or reads) it.
fn shard_of(bytes: &[u8]) -> (tempfile::TempDir, NpyShard) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("x.npy");
    std::fs::write(&path, bytes).unwrap();
    let shard = map_or_read(open(&path).unwrap()).unwrap();
    (dir, shard)
}

#[test]
fn regular_files_are_mapped_and_others_read() {
    use crate::vocab::Points;
    let values = [1.0f32, -2.5, 3.0, 0.5, 65504.0, -0.0];
    let (_dir, shard) = shard_of(&npy_bytes(1, &dict("<f4", "(2, 3)"), &f32_bytes(&values)));
    assert!(shard.is_mapped());
    assert!(matches!(shard.points(), Points::F32(v) if v == values));
    let bits = [0x3c00u16, 0xc000, 0x7bff, 0];
    let data: Vec<u8> = bits.iter().flat_map(|b| b.to_le_bytes()).collect();
    for (descr, f16) in [("<f2", true), ("<V2", false)] {
        let (_dir, shard) = shard_of(&npy_bytes(1, &dict(descr, "(2, 2)"), &data));
        assert!(shard.is_mapped());
        match shard.points() {
            Points::F16(v) if f16 => assert_eq!(v, bits),
            Points::BF16(v) if !f16 => assert_eq!(v, bits),
            other => panic!("{descr}: {other:?}"),
        }
    }
    // Big-endian data is read and swapped.
    let be: Vec<u8> = values.iter().flat_map(|v| v.to_be_bytes()).collect();
    let (_dir, shard) = shard_of(&npy_bytes(1, &dict(">f4", "(2, 3)"), &be));
    assert!(!shard.is_mapped());
    assert!(matches!(shard.points(), Points::F32(v) if v == values));
    // A header whose length leaves the data unaligned: copied, same values.
    let dict = dict("<f4", "(2, 3)");
    let header_len = dict.len() + 2;
    let mut odd = MAGIC.to_vec();
    odd.extend([1, 0]);
    odd.extend((header_len as u16).to_le_bytes());
    odd.extend(dict.bytes());
    odd.extend(b" \n");
    assert_ne!(odd.len() % 4, 0);
    odd.extend(f32_bytes(&values));
    let (_dir, shard) = shard_of(&odd);
    assert!(!shard.is_mapped());
    assert!(matches!(shard.points(), Points::F32(v) if v == values));
}

#[test]
fn index_arrays_round_trip_and_other_arrays_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.npy");
    let values: Vec<u32> = (0..1000).map(|i| i * 7).collect();
    write_u32_vector(&mut std::fs::File::create(&path).unwrap(), &values).unwrap();
    assert_eq!(read_u32_vector(&path).unwrap(), values);
    // The header is padded to 64 bytes, as numpy pads it.
    assert_eq!((std::fs::read(&path).unwrap().len() - 4000) % 64, 0);
    let matrix = dir.path().join("m.npy");
    let anchors = [1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0];
    write_f32_matrix(&mut std::fs::File::create(&matrix).unwrap(), 3, 2, &anchors).unwrap();
    let m = read(&matrix).unwrap();
    assert_eq!((m.n, m.d, m.data), (3, 2, NpyData::F32(anchors.to_vec())));
    let err = read_u32_vector(&matrix).unwrap_err().to_string();
    assert_eq!(
        err,
        "expected a 1-D uint32 array but the file holds dtype <f4 of shape (3, 2)"
    );
    let signed = dir.path().join("i.npy");
    std::fs::write(&signed, npy_bytes(1, &dict("<i4", "(2,)"), &[0; 8])).unwrap();
    assert!(read_u32_vector(&signed)
        .unwrap_err()
        .to_string()
        .contains("<i4"));
    let short = dir.path().join("s.npy");
    std::fs::write(&short, npy_bytes(1, &dict("<u4", "(3,)"), &[0; 8])).unwrap();
    assert!(read_u32_vector(&short)
        .unwrap_err()
        .to_string()
        .contains("truncated"));
}

#[test]
fn a_matrix_of_the_wrong_size_is_an_error_not_a_panic() {
    for (rows, cols, values) in [(2, 2, 3), (usize::MAX, 2, 0), (1, 0, 1)] {
        let mut out = Vec::new();
        let err = write_f32_matrix(&mut out, rows, cols, &vec![0.0; values]).unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput, "{err}");
        assert!(out.is_empty(), "something was written");
    }
}

/// A regular file's chunk is read in pieces of at most [`shards`]'s read
/// piece, every byte given to the check once, big-endian data swapped
/// before the check sees it; one piece the check refuses makes the chunk
/// unclean, and a pipe's chunk is never called clean.
#[test]
fn read_checked_gives_every_piece_to_the_check_and_a_pipe_none() {
    use std::sync::Mutex;
    let (n, d) = (3000usize, 129usize); // 1.5 MiB of f32: two pieces and a part
    let values: Vec<f32> = (0..n * d).map(|i| i as f32).collect();
    let dir = tempfile::tempdir().unwrap();
    let (le, be) = (dir.path().join("le.npy"), dir.path().join("be.npy"));
    std::fs::write(
        &le,
        npy_bytes(1, &dict("<f4", &format!("({n}, {d})")), &f32_bytes(&values)),
    )
    .unwrap();
    let be_data: Vec<u8> = values.iter().flat_map(|v| v.to_be_bytes()).collect();
    std::fs::write(
        &be,
        npy_bytes(1, &dict(">f4", &format!("({n}, {d})")), &be_data),
    )
    .unwrap();
    for path in [&le, &be] {
        let mut chunks = Shards::open(&[path]).unwrap().into_chunks(n);
        let mut out = vec![0u8; chunks.chunk_bytes()];
        let seen = Mutex::new(Vec::new());
        let check = |piece: &[u8]| {
            let floats: &[f32] = bytemuck::cast_slice(piece);
            seen.lock().unwrap().push((floats[0], piece.len()));
            true
        };
        let (rows, clean) = chunks.read_checked(&mut out, &check).unwrap().unwrap();
        assert_eq!((rows.start, rows.rows, clean), (0, n, true));
        assert_eq!(bytemuck::cast_slice::<u8, f32>(&out), &values[..]);
        assert!(chunks.read_checked(&mut out, &check).is_none());
        let mut seen = seen.into_inner().unwrap();
        seen.sort_by(|a, b| a.0.total_cmp(&b.0));
        // Each piece starts where the one before ended, in values.
        let mut next = 0.0;
        for (first, len) in &seen {
            assert_eq!(*first, next, "{}", path.display());
            assert!(*len <= 1 << 20);
            next += (*len / 4) as f32;
        }
        assert_eq!(next as usize, n * d);
    }
    // One piece refused: the chunk is not clean.
    let mut chunks = Shards::open(&[&le]).unwrap().into_chunks(n);
    let mut out = vec![0u8; chunks.chunk_bytes()];
    let refuse_second = |piece: &[u8]| bytemuck::cast_slice::<u8, f32>(piece)[0] == 0.0;
    let (_, clean) = chunks
        .read_checked(&mut out, &refuse_second)
        .unwrap()
        .unwrap();
    assert!(!clean);
    // A buffer smaller than the chunk takes the rows it holds, and the next
    // read goes on from there; one that cannot hold a row is an error.
    let mut chunks = Shards::open(&[&le]).unwrap().into_chunks(n);
    let row = d * 4;
    let mut part = vec![0u8; 1000 * row + row / 2];
    let (rows, _) = chunks.read_checked(&mut part, &|_| true).unwrap().unwrap();
    assert_eq!((rows.start, rows.rows), (0, 1000));
    assert_eq!(&part[..1000 * row], f32_bytes(&values[..1000 * d]));
    let mut rest = vec![0u8; chunks.chunk_bytes()];
    let (rows, _) = chunks.read_checked(&mut rest, &|_| true).unwrap().unwrap();
    assert_eq!((rows.start, rows.rows), (1000, n - 1000));
    assert_eq!(&rest[..(n - 1000) * row], f32_bytes(&values[1000 * d..]));
    assert!(chunks.read_checked(&mut rest, &|_| true).is_none());
    // Rows of no values (d = 0) fit any buffer, an empty one too.
    let empty = dir.path().join("empty.npy");
    std::fs::write(&empty, npy_bytes(1, &dict("<f4", "(5, 0)"), &[])).unwrap();
    let mut chunks = Shards::open(&[&empty]).unwrap().into_chunks(2);
    let mut starts = Vec::new();
    while let Some(read) = chunks.read_checked(&mut [], &|_| true) {
        let (rows, _) = read.unwrap();
        starts.push((rows.start, rows.rows));
    }
    assert_eq!(starts, [(0, 2), (2, 2), (4, 1)]);
    let mut chunks = Shards::open(&[&le]).unwrap().into_chunks(n);
    let mut small = vec![0u8; row - 1];
    let err = chunks
        .read_checked(&mut small, &|_| true)
        .unwrap()
        .unwrap_err();
    assert!(
        matches!(err, ShardsError::Buffer { needed, given } if needed == row && given == row - 1),
        "{err}"
    );
}

/// A FIFO's chunk is read in order and never called clean: the check saw
/// none of it.
#[cfg(unix)]
#[test]
fn read_checked_calls_a_pipes_chunk_unclean() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("pipe.npy");
    make_fifo(&fifo);
    let bytes = npy_bytes(
        1,
        &dict("<f4", "(2, 3)"),
        &f32_bytes(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]),
    );
    let writer = {
        let fifo = fifo.clone();
        std::thread::spawn(move || std::fs::write(fifo, bytes).unwrap())
    };
    let mut chunks = Shards::open(&[&fifo]).unwrap().into_chunks(2);
    let mut out = vec![0u8; chunks.chunk_bytes()];
    let (rows, clean) = chunks.read_checked(&mut out, &|_| true).unwrap().unwrap();
    assert_eq!((rows.rows, clean), (2, false));
    assert_eq!(
        bytemuck::cast_slice::<u8, f32>(&out),
        &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
    );
    assert!(chunks.read_checked(&mut out, &|_| true).is_none());
    writer.join().unwrap();
}

/// Replaces `path` with a FIFO that nothing writes to (yet): what every
/// test of a reader of untrusted files plants.
pub(crate) fn make_fifo(path: &Path) {
    let _ = std::fs::remove_file(path);
    let status = std::process::Command::new("mkfifo").arg(path).status();
    assert!(
        status.is_ok_and(|s| s.success()),
        "mkfifo failed: a FIFO is what this test reads"
    );
}
