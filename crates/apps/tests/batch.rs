//! batch_stats on the GPU against the CPU reference. On a machine without a
//! usable GPU each test says why it skips.

use std::num::NonZeroUsize;

use apps::batch::{self, BatchInput, REL_TOL};
use apps::Rng;
use cuda_sys::types::BatchStructureDesc;
use gpu_core::{Backend, BackendKind};

fn cuda_or_skip() -> Option<Backend> {
    gpu_core::testing::cuda_backend(cuda_sys::modules::ALL)
}

/// The GPU's f32 block reduction against the f64 reference, within
/// [`REL_TOL`] of each structure's largest coordinate: the summation error
/// bound in its docs holds for the generated sizes (up to 4,096 atoms, i.e.
/// 16 atoms per thread) with a margin of several times (the CPU backend,
/// which rounds like the kernel, passes at 3e-7), and nvcc's fused
/// multiply-adds round once where the bound counts two roundings.
#[test]
fn batch_stats_on_the_gpu_matches_the_cpu_reference() {
    let Some(backend) = cuda_or_skip() else {
        return;
    };
    assert_eq!(backend.kind(), BackendKind::Cuda);
    let stream = backend.default_stream();
    let kernel = batch::kernel(&backend).unwrap();
    for (seed, structures) in [(1u64, 8usize), (2, 300), (3, 2000)] {
        let input = batch::random_input(&mut Rng::new(seed), structures);
        let got = batch::run_on(&stream, &kernel, &input).unwrap();
        if let Some(m) = batch::first_mismatch(&input, &got, &batch::reference(&input), REL_TOL) {
            panic!("seed {seed}: {m}");
        }
    }
}

#[test]
fn gpu_launches_into_sub_views_of_one_buffer_equal_one_launch() {
    let Some(backend) = cuda_or_skip() else {
        return;
    };
    let stream = backend.default_stream();
    let kernel = batch::kernel(&backend).unwrap();
    let input = batch::random_input(&mut Rng::new(9), 500);
    let whole = batch::run_on(&stream, &kernel, &input).unwrap();
    // Every block computes its structure alone, so the split cannot change a bit.
    for size in [1usize, 7, 128, 499] {
        let batched =
            batch::run_batched(&stream, &kernel, &input, NonZeroUsize::new(size).unwrap()).unwrap();
        assert_eq!(batched, whole, "batch size {size}");
    }
}

#[test]
fn gpu_gives_zeros_for_empty_structures_and_the_atom_for_one() {
    let Some(backend) = cuda_or_skip() else {
        return;
    };
    let desc = |atom_offset, n_atoms| BatchStructureDesc {
        atom_offset,
        ca_offset: atom_offset,
        n_atoms,
        ..Default::default()
    };
    // An empty structure at the very end of the array, as well as in the middle.
    let input = BatchInput::new(
        vec![1.5, -2.0, 3.25, 7.0, 8.0, 9.0],
        vec![desc(0, 0), desc(1, 1), desc(2, 0)],
    )
    .unwrap();
    let got = batch::run(&backend, &input).unwrap();
    assert_eq!(got, batch::reference(&input));
    assert_eq!(got[1].centroid, [7.0, 8.0, 9.0]);
    assert_eq!(got[0].radius_of_gyration, 0.0);
}

#[test]
fn auto_backend_computes_the_batch() {
    let backend = Backend::auto(cuda_sys::modules::ALL).unwrap();
    let input = batch::random_input(&mut Rng::new(4), 12);
    let got = batch::run(&backend, &input).unwrap();
    assert_eq!(
        batch::first_mismatch(&input, &got, &batch::reference(&input), REL_TOL),
        None
    );
}
