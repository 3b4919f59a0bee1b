//! What the CLI suites share: the built `apps` binary without KILN_BACKEND,
//! the check of a refusal (exit code, one line on stderr, no panic), and
//! `.npy` files laid out as numpy writes them.
#![allow(dead_code)]

use assert_cmd::cargo::cargo_bin;

pub(crate) fn apps() -> assert_cmd::Command {
    let mut cmd = assert_cmd::Command::new(cargo_bin("apps"));
    cmd.env_remove("KILN_BACKEND");
    cmd
}

/// Runs `args` and checks a refusal: exit `code`, one line on stderr that
/// contains `says`, no panic.
#[track_caller]
pub(crate) fn refused(args: &[&str], code: i32, says: &str) {
    let out = apps().args(args).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(code), "{args:?}: {stderr}");
    assert_eq!(stderr.trim_end().lines().count(), 1, "{args:?}: {stderr}");
    assert!(
        stderr.contains(says),
        "{args:?}: {stderr:?} does not say {says:?}"
    );
    assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
}

/// [`refused`] for a command line of plain words.
#[track_caller]
pub(crate) fn refused_line(args: &str, code: i32, says: &str) {
    refused(&args.split_whitespace().collect::<Vec<_>>(), code, says);
}

/// An `.npy` file of `rows × d` elements given as little-endian bytes.
pub(crate) fn npy(descr: &str, rows: usize, d: usize, data: &[u8]) -> Vec<u8> {
    let dict = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': ({rows}, {d}), }}");
    let unpadded = 10 + dict.len() + 1;
    let header_len = dict.len() + 1 + unpadded.next_multiple_of(64) - unpadded;
    let mut out = b"\x93NUMPY\x01\x00".to_vec();
    out.extend((header_len as u16).to_le_bytes());
    out.extend(dict.bytes());
    out.resize(10 + header_len - 1, b' ');
    out.push(b'\n');
    out.extend(data);
    out
}
