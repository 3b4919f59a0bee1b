//! A header edit rebuilds exactly its includers: the build manifest records,
//! per module, every header nvcc's depfile named (through macro headers and
//! arch-guarded families alike), and cuda-build recompiles a module when one
//! of those changes (`crates/cuda-build/tests/rebuild.rs`, with the real
//! nvcc too). Here: this tree's include graph as the manifest holds it.
//! Reads the build tree, so it is not bundled for the GPU host.

use std::collections::BTreeSet;

/// Each header and the modules that include it, directly or not.
const INCLUDERS: &[(&str, &[&str])] = &[
    (
        "strided.cuh",
        &[
            "affine", "binary", "cast", "indexing", "reduce", "ternary", "unary",
        ],
    ),
    (
        "dtype.cuh",
        &[
            "affine", "binary", "cast", "fill", "indexing", "reduce", "ternary", "unary",
        ],
    ),
    ("binary_macros.cuh", &["binary"]),
    ("moe/launch.cuh", &["moe"]),
];

#[test]
fn each_header_is_a_dependency_of_exactly_its_includers() {
    if !candle_patterns::CUDA_ENABLED {
        println!("skipped: CPU-only build (no CUDA toolkit at build time)");
        return;
    }
    let path = concat!(env!("OUT_DIR"), "/cp-manifest.toml");
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let manifest: toml::Table = text.parse().unwrap();
    let kernels = format!("{}/kernels/", env!("CARGO_MANIFEST_DIR"));
    let modules = manifest["modules"].as_array().unwrap();
    assert_eq!(modules.len(), 10, "nine fat binaries and the static moe");
    for (header, want) in INCLUDERS {
        let dependency = format!("{kernels}{header}");
        let got: BTreeSet<&str> = modules
            .iter()
            .filter(|m| {
                m["deps"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|d| d.as_str() == Some(&dependency))
            })
            .map(|m| m["name"].as_str().unwrap())
            .collect();
        assert_eq!(got, want.iter().copied().collect(), "{header}");
    }
    // No module depends on a header outside kernels/ and the toolkit.
    for m in modules {
        for dep in m["deps"].as_array().unwrap() {
            let dep = dep.as_str().unwrap();
            assert!(dep.starts_with(&kernels), "{}: {dep}", m["name"]);
        }
    }
}
