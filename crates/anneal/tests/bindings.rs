//! kiln-anneal builds its own kernels, as a user's crate does: the committed
//! `src/bindings.rs` is what `cargo kiln codegen` makes of the headers as
//! they are now (checked without libclang), the crate exports its modules
//! (`kiln_anneal::modules::ALL`) built the way this build was, and the
//! sort's static library links.

use std::path::Path;

#[test]
fn committed_bindings_match_the_headers() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    if let Err(message) = cuda_build::bindings::check_committed(
        &root.join("src/bindings.rs"),
        &root.join("kernels/include"),
        "cargo kiln codegen",
    ) {
        panic!("{message}");
    }
}

#[test]
fn the_crate_exports_its_own_modules() {
    let names: Vec<&str> = kiln_anneal::modules::ALL.iter().map(|m| m.name).collect();
    assert_eq!(
        names,
        ["anneal", "anneal_tc", "anneal_wgmma"],
        "anneal_sort is a static library"
    );
    for module in kiln_anneal::modules::ALL {
        assert_eq!(
            module.is_built(),
            kiln_anneal::CUDA_ENABLED,
            "{}",
            module.name
        );
        if module.is_built() {
            assert!(!module.sass.is_empty(), "{}", module.name);
            assert!(!module.kernels.is_empty(), "{}", module.name);
        }
    }
    // kiln.toml's per-module archs (`sm_75,sm_80,sm_90a`) replace the build's
    // for anneal_wgmma whatever the build was asked for: its sm_90a image is
    // SASS for 90, its PTX the highest plain arch's.
    if kiln_anneal::modules::ANNEAL_WGMMA.is_built() {
        assert_eq!(kiln_anneal::modules::ANNEAL_WGMMA.sass, [75, 80, 90]);
        assert_eq!(kiln_anneal::modules::ANNEAL_WGMMA.ptx, [80]);
    }
    // Every kernel the anneal launches is declared by its own bindings and
    // lives in one of its own images.
    if kiln_anneal::CUDA_ENABLED {
        for decl in kiln_anneal::kernels::ALL {
            assert!(
                kiln_anneal::modules::ALL
                    .iter()
                    .any(|m| m.kernels.contains(&decl.name)),
                "{} is in none of kiln-anneal's images",
                decl.name
            );
        }
    }
}
