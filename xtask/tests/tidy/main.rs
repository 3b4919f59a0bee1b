//! The tidy test: the invariants ARCHITECTURE.md states, checked over the
//! workspace's sources as rust-analyzer's `xtask/src/tidy.rs` does. Each rule
//! is a named check configured in the tables below, and each is shown to fail
//! on a violation planted in a fake tree (`planted.rs`). Files are parsed
//! (`tree.rs`) and checked (`rules.rs`); nothing is built.

mod graph;
mod planted;
mod planted_tables;
mod rules;
mod tree;

use std::collections::BTreeMap;
use std::path::Path;

use rules::Violation;
use tree::SourceFile;

// ---- configuration: the tables the rules read ----

/// Folders walked for `.rs` files (`target/` and dot-folders skipped).
const SOURCE_ROOTS: &[&str] = &["crates", "xtask", "examples"];

/// This file: where violations of the tables themselves are reported.
const TABLES_FILE: &str = "xtask/tests/tidy/main.rs";

/// Rule `unsafe`: the files where `unsafe` code (blocks, fns, impls, traits,
/// extern blocks, `unsafe` inside macros) may appear, each named exactly
/// (rule `unsafe-list`: no globs, every entry an existing file with unsafe
/// code in it).
const UNSAFE_ALLOWED: &[(&str, &str)] = &[
    (
        "crates/gpu-core/src/ffi/mod.rs",
        "gpu-core's FFI layer: the driver's raw handles",
    ),
    (
        "crates/gpu-core/src/ffi/driver.rs",
        "gpu-core's FFI layer: driver calls over raw handles",
    ),
    (
        "crates/gpu-core/src/ffi/nccl.rs",
        "gpu-core's FFI layer: NCCL loaded at run time, its calls",
    ),
    (
        "crates/gpu-core/src/ffi/nccl/rank.rs",
        "gpu-core's FFI layer: NCCL's communicator of one rank of many",
    ),
    (
        "crates/gpu-core/src/launch/marshal.rs",
        "launch-argument marshalling: `unsafe trait FfiParam`, the checked launch",
    ),
    (
        "crates/kiln-abi/src/lib.rs",
        "the ABI vocabulary: `unsafe trait KernelDecl` / `GpuRepr`",
    ),
    (
        "crates/cuda-sys/src/generated.rs",
        "generated extern fns and `unsafe impl`s of kiln's kernels",
    ),
    (
        "crates/anneal/src/bindings.rs",
        "generated extern fns and `unsafe impl`s of the anneal's kernels (cargo kiln codegen)",
    ),
    (
        "crates/anneal/src/cpu.rs",
        "the AVX module's root: dispatch to target_feature fns",
    ),
    ("crates/anneal/src/cpu/avx2.rs", "AVX2 intrinsics"),
    ("crates/anneal/src/cpu/avx512.rs", "AVX-512 intrinsics"),
    (
        "crates/anneal/src/npy/map.rs",
        "memmap2's `Mmap::map` of the .npy input (the file must not change under the map)",
    ),
    (
        "crates/anneal/src/gpu/sort.rs",
        "the CUB sort: host fns of a static-library module over the C ABI",
    ),
    (
        "crates/apps/src/bench/launch.rs",
        "the raw cudarc launch that gpu-core's typed launch is measured against",
    ),
    (
        "crates/cuda-build/src/parallel.rs",
        "`jobserver::Client::from_env` (cargo's jobserver fds)",
    ),
    (
        "crates/cuda-build/src/codegen/child.rs",
        "codegen's trial parse in a forked child (fork, setrlimit, poll, waitpid)",
    ),
    (
        "crates/cuda-build/src/codegen/scan.rs",
        "codegen's libclang walk (clang-sys FFI): macro-expansion locations bindgen does not expose",
    ),
    (
        "crates/cuda-build/src/codegen/source_walk.rs",
        "codegen's libclang walk of `.cu` sources (clang-sys FFI): kernel definitions, explicit instantiations",
    ),
    (
        "crates/cuda-build/src/codegen/source_templates.rs",
        "codegen's token scan for explicit instantiations of kernel templates (clang-sys FFI)",
    ),
    (
        "crates/cuda-build/src/codegen/source_types.rs",
        "codegen's mapping of libclang's parameter types (clang-sys FFI)",
    ),
    (
        "examples/downstream/src/bindings.rs",
        "generated: `unsafe impl KernelDecl` / `GpuRepr`",
    ),
    (
        "examples/kernel-trees/src/bindings.rs",
        "generated: `unsafe impl KernelDecl` / `GpuRepr`, the host launchers' extern fns",
    ),
    (
        "examples/cudarc-interop/src/bindings.rs",
        "generated: `unsafe impl KernelDecl` / `GpuRepr` / cudarc's `DeviceRepr`",
    ),
    (
        "examples/cudarc-interop/src/lib.rs",
        "the plain cudarc launch: the caller promises the kernel's argument list",
    ),
    (
        "examples/kernel-trees/src/host.rs",
        "calls the static modules' host launchers over the C ABI",
    ),
    (
        "examples/kernel-trees/tests/byname.rs",
        "`Args::new` of launches by name: the caller promises each argument's kind",
    ),
    (
        "examples/candle-patterns/src/moe.rs",
        "calls the static module's host launchers over the C ABI",
    ),
    (
        "examples/candle-patterns/src/bindings.rs",
        "generated from the sources: `unsafe impl KernelDecl`",
    ),
    (
        "examples/candle-patterns/tests/by_name/indexing.rs",
        "`Args::new` of wrong lists, refused before the GPU",
    ),
    (
        "crates/gpu-core/tests/common/mod.rs",
        "the test kernel declared by hand (`unsafe impl KernelDecl`)",
    ),
    (
        "crates/gpu-core/tests/gpu.rs",
        "kernels declared by hand; launches by name under test",
    ),
    (
        "crates/gpu-core/tests/local.rs",
        "`Args::new` of a launch by name of stream-local buffers",
    ),
    (
        "crates/gpu-core/tests/backends.rs",
        "a kernel of bool and fp8 parameters declared by hand (`unsafe impl KernelDecl`)",
    ),
    (
        "crates/gpu-core/tests/ui/wrong_count.rs",
        "compile-fail fixture: a kernel declared by hand",
    ),
    (
        "crates/gpu-core/tests/ui/wrong_element_type.rs",
        "compile-fail fixture: a kernel declared by hand",
    ),
    (
        "crates/gpu-core/tests/ui/wrong_mutability.rs",
        "compile-fail fixture: a kernel declared by hand",
    ),
    (
        "crates/gpu-core/tests/ui/wrong_scalar_type.rs",
        "compile-fail fixture: a kernel declared by hand",
    ),
    (
        "crates/cuda-sys/tests/bindings.rs",
        "calls the generated extern fns to test them",
    ),
];

/// Rule `unsafe-contract`: crates whose `lib.rs` states where their unsafe
/// code is, as (lib.rs, its `src/` folder): the backticked `src/…rs` paths
/// of its `# Unsafe contract` section are exactly the files of that folder
/// with unsafe code.
const UNSAFE_CONTRACTS: &[(&str, &str)] = &[("crates/gpu-core/src/lib.rs", "crates/gpu-core/src")];

/// Rule `import-circle`: circles known and being removed elsewhere, as
/// (crate, the circle's modules, why); each must still be a circle (an entry
/// that is not is a violation). Empty: kiln has no import circle.
const KNOWN_CIRCLES: &[KnownCircle] = &[];

/// A circle the rule lets pass until it is removed.
#[derive(Debug)]
pub(crate) struct KnownCircle {
    /// The crate (its `src/` folder, or a binary's root).
    pub(crate) krate: &'static str,
    /// Every module of the circle.
    pub(crate) members: &'static [&'static str],
    /// Why it is here.
    pub(crate) why: &'static str,
}

/// The tables the rules read that the planted tests replace with their own
/// (the fake tree has other files).
#[derive(Debug)]
pub(crate) struct Tables {
    pub(crate) unsafe_allowed: &'static [(&'static str, &'static str)],
    pub(crate) unsafe_contracts: &'static [(&'static str, &'static str)],
    pub(crate) known_circles: &'static [KnownCircle],
}

/// The workspace's tables.
const WORKSPACE: Tables = Tables {
    unsafe_allowed: UNSAFE_ALLOWED,
    unsafe_contracts: UNSAFE_CONTRACTS,
    known_circles: KNOWN_CIRCLES,
};

/// Rule `ffi-upward`: FFI layers as (crate `src/` folder, top-level module);
/// their files name nothing of the crate outside that module.
const FFI_LAYERS: &[(&str, &str)] = &[("crates/gpu-core/src", "ffi")];

/// Rule `tool-names`: library sources whose strings and docs users read:
/// every crate under `crates/` but [`TOOL_CRATES`]
/// (`every_crate_is_a_library_or_a_tool`).
const TOOL_NAME_FREE: &[&str] = &[
    "crates/kiln-abi/src/**",
    "crates/gpu-core/src/**",
    "crates/cuda-build/src/**",
    "crates/cuda-sys/src/**",
    "crates/anneal/src/**",
    "crates/kiln-output/src/**",
    "crates/bench-schema/src/**",
];

/// The crates whose job is a command line (the apps binary, cargo-kiln's
/// commands and the library they share): they name kiln's commands.
const TOOL_CRATES: &[&str] = &["crates/apps", "crates/cargo-kiln"];

/// Rule `tool-names`: kiln's xtask and its commands, the apps binary's
/// commands and flags, matched as whole words in string literals and doc
/// comments (plain comments are free). `apps` alone is an English word.
const TOOL_NAMES: &[&str] = &[
    "cargo xtask",
    "xtask",
    "ci-cpu",
    "ptx-audit",
    "gpu-bundle",
    "-p apps",
    "apps vadd",
    "apps batch",
    "apps anneal",
    "apps bench",
    "apps launch",
    "apps rank",
    "apps encode",
    "apps decode",
    "--gpus",
    "--backend",
    "--structures",
    "--shape",
    "--npy",
    "--iters",
    "--reps",
    "--tol",
    "--large",
    "--small",
    "--compare",
    "--quick",
    "--seed",
];

/// Rule `module-doc`: files that must open with a `//!` doc. Blank lines and
/// plain `//` comments (a licence, an `@generated` marker) may come first;
/// attributes come after the doc. Generated files are exempt. Libraries,
/// binaries, build scripts and tests alike: every file says what it is for.
const MODULE_DOC_REQUIRED: &[&str] = &["crates/**", "xtask/**", "examples/**"];

/// Rule `module-doc`: files that need no `//!` doc, and why.
const MODULE_DOC_EXEMPT: &[(&str, &str)] = &[(
    "crates/gpu-core/tests/ui/*.rs",
    "trybuild compile-fail fixtures: their .stderr files pin line numbers",
)];

/// Rule `line-cap`: the most lines a hand-written file under SOURCE_ROOTS has.
const LINE_CAP: usize = 650;

/// Rule `line-cap`: hand-written files allowed past the cap, and why.
const LINE_CAP_EXEMPT: &[(&str, &str)] = &[];

/// A file is generated when one of its first 5 lines holds one of these.
const GENERATED_MARKERS: &[&str] = &["@generated", "automatically generated by rust-bindgen"];

/// Every rule over the tree at `root`, with `tables`: the files read and
/// what they violate.
fn tidy(root: &Path, tables: &Tables) -> (Vec<SourceFile>, Vec<Violation>) {
    let files = tree::load(root);
    type Check = fn(&[SourceFile], &Tables) -> Vec<Violation>;
    let checks: [Check; 9] = [
        rules::check_parse,
        rules::check_unsafe,
        rules::check_unsafe_list,
        rules::check_unsafe_contract,
        rules::check_ffi_upward,
        graph::check_import_circles,
        rules::check_tool_names,
        rules::check_module_docs,
        rules::check_line_cap,
    ];
    let mut found: Vec<Violation> = checks
        .iter()
        .flat_map(|check| check(&files, tables))
        .collect();
    found.sort();
    (files, found)
}

/// The crates under `crates/` that are neither tool-name free nor tools,
/// given the folders there.
fn unclassified_crates(crates: &[String]) -> Vec<String> {
    crates
        .iter()
        .filter(|c| {
            !TOOL_CRATES.contains(&c.as_str())
                && !TOOL_NAME_FREE.contains(&format!("{c}/src/**").as_str())
        })
        .cloned()
        .collect()
}

/// Every crate is a library whose strings and docs name no binary of kiln's
/// (rule `tool-names`) or a tool listed as one: a new crate is classified
/// here before it is merged.
#[test]
fn every_crate_is_a_library_or_a_tool() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask sits in the workspace");
    let mut crates: Vec<String> = std::fs::read_dir(root.join("crates"))
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.path().join("Cargo.toml").is_file())
        .map(|e| format!("crates/{}", e.file_name().to_string_lossy()))
        .collect();
    crates.sort();
    assert!(crates.contains(&"crates/anneal".to_string()), "{crates:?}");
    assert_eq!(unclassified_crates(&crates), Vec::<String>::new());
    assert_eq!(
        unclassified_crates(&["crates/new-lib".to_string()]),
        ["crates/new-lib"]
    );
}

#[test]
fn tidy_workspace() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask sits in the workspace");
    let (files, found) = tidy(root, &WORKSPACE);
    assert!(
        files.iter().any(|f| f.path == "xtask/tests/tidy/main.rs"),
        "the walk of {} missed this very file",
        root.display()
    );
    let mut report = String::new();
    for v in &found {
        report += &format!("{v}\n");
    }
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    found
        .iter()
        .for_each(|v| *counts.entry(v.rule.name()).or_default() += 1);
    println!(
        "{report}{} files read; violations by rule: {counts:?}",
        files.len()
    );
    assert!(
        found.is_empty(),
        "{} tidy violation(s):\n{report}",
        found.len()
    );
}
