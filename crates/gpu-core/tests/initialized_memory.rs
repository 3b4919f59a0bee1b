//! gpu-core hands out only initialized device memory (`alloc_zeros`, or a
//! copy from the host), and nothing that feeds NCCL allocates otherwise:
//! so compute-sanitizer's initcheck can never report a read of a kiln
//! buffer, and the uninitialized reads it reports inside NCCL's kernels are
//! of NCCL's own buffers (the GPU bundle suppresses those, and only those:
//! `xtask/src/bundle/nccl-suppressions.xml`). Checked on the sources of
//! gpu-core and of apps, whose engines hand NCCL its buffers.

use std::path::{Path, PathBuf};

/// Calls that allocate device memory without initializing it: cudarc's
/// `alloc` (not `alloc_zeros`) and the driver's and runtime's allocators.
const UNINITIALIZED: &[&str] = &[
    ".alloc::<",
    ".alloc(",
    "cuMemAlloc(",
    "cuMemAlloc_v2(",
    "cuMemAllocAsync(",
    "cudaMalloc(",
    "cudaMallocAsync(",
];

/// `(file, line number, line)` of each uninitialized allocation in `text`.
fn findings(file: &Path, text: &str) -> Vec<String> {
    text.lines()
        .enumerate()
        .filter(|(_, line)| {
            let code = line.split("//").next().unwrap_or("");
            UNINITIALIZED.iter().any(|call| code.contains(call))
        })
        .map(|(i, line)| format!("{}:{}: {}", file.display(), i + 1, line.trim()))
        .collect()
}

fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            sources(&path, out);
        } else if path
            .extension()
            .is_some_and(|e| e == "rs" || e == "cu" || e == "cuh")
        {
            out.push(path);
        }
    }
}

#[test]
fn no_source_that_feeds_nccl_allocates_uninitialized_device_memory() {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut files = Vec::new();
    for dir in ["gpu-core/src", "apps/src"] {
        sources(&crates.join(dir), &mut files);
    }
    assert!(files.len() > 20, "found only {} sources", files.len());
    let found: Vec<String> = files
        .iter()
        .flat_map(|f| findings(f, &std::fs::read_to_string(f).unwrap()))
        .collect();
    assert!(
        found.is_empty(),
        "uninitialized device allocations (use alloc_zeros, or a copy from the host):\n{}",
        found.join("\n")
    );
}

/// The check finds what it looks for: a planted allocation of each kind,
/// and not the zeroed one or an allocator named in a comment or message.
#[test]
fn the_scan_finds_a_planted_uninitialized_allocation() {
    let file = Path::new("planted.rs");
    let planted = "let a = unsafe { stream.alloc::<f32>(n) }?;\n\
                   let b = unsafe { stream.alloc(n) }?;\n\
                   cudaMalloc(&p, bytes);\n";
    assert_eq!(findings(file, planted).len(), 3);
    let clean = "let a = stream.alloc_zeros::<f32>(n)?;\n\
                 // cudaMalloc(&p, bytes) would not be initialized\n\
                 .map_err(oom_or(\"cuMemAlloc\", bytes))?;\n";
    assert_eq!(findings(file, clean), Vec::<String>::new());
}
