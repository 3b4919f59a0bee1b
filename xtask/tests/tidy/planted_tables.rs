//! The rules that read the tables, each shown to fail on a planted
//! violation: `unsafe-list` (every UNSAFE_ALLOWED entry an existing file
//! with unsafe code), `unsafe-contract` (the lib.rs list is exactly the
//! files with unsafe code) and the known circles of `import-circle`.

use crate::planted::{line_of, plant, plant_with, FAKE, LIB, MEMORY};
use crate::rules::{Rule, Violation};
use crate::{KnownCircle, Tables, TABLES_FILE};

fn rules_paths_lines(found: &[Violation]) -> Vec<(Rule, &str, usize)> {
    found
        .iter()
        .map(|v| (v.rule, v.path.as_str(), v.line))
        .collect()
}

#[test]
fn unsafe_list_entries_name_exactly_the_files_with_unsafe() {
    const LOOSE: Tables = Tables {
        unsafe_allowed: &[
            ("crates/gpu-core/src/ffi/driver.rs", "the FFI layer"),
            ("crates/gpu-core/src/launch.rs", "launch marshalling"),
            ("crates/cuda-sys/src/generated.rs", "generated"),
            ("crates/gpu-core/src/ffi/*.rs", "a glob"),
            (
                "crates/gpu-core/src/ffi/nccl.rs",
                "a file that is not there",
            ),
            ("crates/gpu-core/src/memory.rs", "a file with no unsafe"),
        ],
        ..FAKE
    };
    let found = plant_with(&LOOSE, &[]);
    let mut messages: Vec<&str> = found.iter().map(|v| v.message.as_str()).collect();
    messages.sort();
    assert_eq!(
        messages,
        [
            "UNSAFE_ALLOWED entry `crates/gpu-core/src/ffi/*.rs` is a pattern, not a file: name each file",
            "UNSAFE_ALLOWED entry `crates/gpu-core/src/ffi/nccl.rs` names no file: remove it, or fix the path",
            "UNSAFE_ALLOWED entry `crates/gpu-core/src/memory.rs` names a file with no unsafe code: remove it",
        ]
    );
    assert!(found
        .iter()
        .all(|v| v.rule == Rule::UnsafeList && v.path == TABLES_FILE));
    // A glob allows nothing: unsafe in a file it would match is reported.
    let plant = "//! Extra.\n\n/// # Safety\n/// None.\npub unsafe fn extra() {}\n";
    let found = plant_with(&LOOSE, &[("crates/gpu-core/src/ffi/extra.rs", plant)]);
    assert!(
        found
            .iter()
            .any(|v| v.rule == Rule::Unsafe && v.path.ends_with("extra.rs")),
        "{found:#?}"
    );
}

#[test]
fn unsafe_in_a_file_the_contract_does_not_list_fails() {
    const WITH_EXTRA: Tables = Tables {
        unsafe_allowed: &[
            ("crates/gpu-core/src/ffi/driver.rs", "the FFI layer"),
            (
                "crates/gpu-core/src/ffi/extra.rs",
                "allowed, but not in the contract",
            ),
            ("crates/gpu-core/src/launch.rs", "launch marshalling"),
            ("crates/cuda-sys/src/generated.rs", "generated"),
        ],
        ..FAKE
    };
    let path = "crates/gpu-core/src/ffi/extra.rs";
    let text = "//! Extra.\n\n/// # Safety\n/// None.\npub unsafe fn extra() {}\n";
    let found = plant_with(&WITH_EXTRA, &[(path, text)]);
    assert_eq!(
        rules_paths_lines(&found),
        [(Rule::UnsafeContract, path, line_of(text, "unsafe fn"))]
    );
}

#[test]
fn a_contract_listing_a_file_without_unsafe_fails() {
    let lib = LIB.replace(
        "`src/launch.rs` only",
        "`src/launch.rs` and `src/memory.rs` only",
    );
    let path = "crates/gpu-core/src/lib.rs";
    let found = plant(&[(path, &lib)]);
    assert_eq!(
        rules_paths_lines(&found),
        [(
            Rule::UnsafeContract,
            path,
            line_of(&lib, "src/memory.rs` only")
        )]
    );
    assert!(found[0].message.contains("`src/memory.rs`"), "{}", found[0]);
    // Paths outside the section (the examples' heading) are not the list.
    assert!(LIB.contains("# Examples\n//! None: `src/memory.rs`"));
}

#[test]
fn a_crate_root_without_its_contract_fails() {
    let lib = "//! A fake gpu-core, its contract gone.\n\nmod ffi;\nmod launch;\nmod memory;\nmod stream;\n";
    let found = plant(&[("crates/gpu-core/src/lib.rs", lib)]);
    let mut paths: Vec<&str> = found.iter().map(|v| v.path.as_str()).collect();
    paths.sort();
    assert_eq!(
        paths,
        [
            "crates/gpu-core/src/ffi/driver.rs",
            "crates/gpu-core/src/launch.rs",
            "crates/gpu-core/src/lib.rs"
        ]
    );
    assert!(found.iter().all(|v| v.rule == Rule::UnsafeContract));
}

#[test]
fn known_circles_pass_until_they_are_gone() {
    const KNOWN: Tables = Tables {
        known_circles: &[KnownCircle {
            krate: "crates/gpu-core/src",
            members: &["stream", "memory"],
            why: "being removed",
        }],
        ..FAKE
    };
    let memory = format!("{MEMORY}\nuse crate::Stream;\n");
    let path = "crates/gpu-core/src/memory.rs";
    assert!(plant_with(&KNOWN, &[(path, &memory)]).is_empty());
    // Another circle is still reported.
    let found = plant_with(
        &KNOWN,
        &[
            (path, &memory),
            ("crates/gpu-core/src/device.rs", "//! Devices.\n\npub struct D;\n\nfn f(_: crate::launch::FfiParam) {}\n"),
            ("crates/gpu-core/src/launch.rs", "//! Launch.\n\n/// # Safety\n/// None.\npub unsafe trait FfiParam {}\n\nfn g(_: crate::device::D) {}\n"),
        ],
    );
    assert_eq!(
        rules_paths_lines(&found),
        [(Rule::ImportCircle, "crates/gpu-core/src/device.rs", 5)]
    );
    // Once the circle is gone, its entry is a violation: the lead empties it.
    let found = plant_with(&KNOWN, &[]);
    assert_eq!(
        rules_paths_lines(&found),
        [(Rule::ImportCircle, TABLES_FILE, 1)]
    );
    assert!(
        found[0].message.contains("remove the entry"),
        "{}",
        found[0]
    );
}
