//! Tests of the batch workload: refusals, the CPU body against the
//! reference, sub-view launches, random inputs.

use super::input::check_counts;
use super::*;
use crate::Rng;

fn desc(atom_offset: u32, n_atoms: u32) -> BatchStructureDesc {
    BatchStructureDesc {
        atom_offset,
        ca_offset: atom_offset,
        n_atoms,
        ..Default::default()
    }
}

#[test]
fn cpu_backend_matches_the_reference() {
    let backend = Backend::cpu();
    let input = random_input(&mut Rng::new(11), 40);
    let got = run(&backend, &input).unwrap();
    let want = reference(&input);
    assert_eq!(got.len(), 40);
    if let Some(m) = first_mismatch(&input, &got, &want, REL_TOL) {
        panic!("{m}");
    }
}

#[test]
fn batched_launches_into_sub_views_equal_one_launch() {
    let backend = Backend::cpu();
    let stream = backend.default_stream();
    let kernel = kernel(&backend).unwrap();
    let input = random_input(&mut Rng::new(5), 23);
    let whole = run_on(&stream, &kernel, &input).unwrap();
    for size in [1usize, 2, 7, 22, 23, 100] {
        let batched =
            run_batched(&stream, &kernel, &input, NonZeroUsize::new(size).unwrap()).unwrap();
        assert_eq!(batched, whole, "batch size {size}");
    }
}

#[test]
fn hand_computed_structures() {
    // Atoms at (0,0,0) and (2,0,0): centroid (1,0,0), rg 1. A lone atom:
    // itself and 0. An empty structure: zeros.
    let xyz = vec![0.0, 0.0, 0.0, 2.0, 0.0, 0.0, 5.0, -3.0, 1.0];
    let input = BatchInput::new(xyz, vec![desc(0, 2), desc(2, 1), desc(3, 0)]).unwrap();
    let want = [
        ([1.0, 0.0, 0.0], 1.0),
        ([5.0, -3.0, 1.0], 0.0),
        ([0.0, 0.0, 0.0], 0.0),
    ]
    .map(|(centroid, radius_of_gyration)| BatchStats {
        centroid,
        radius_of_gyration,
    });
    assert_eq!(reference(&input), want);
    assert_eq!(run(&Backend::cpu(), &input).unwrap(), want);
}

#[test]
fn no_structures_is_no_launch() {
    let input = BatchInput::new(vec![1.0; 6], vec![]).unwrap();
    assert_eq!(run(&Backend::cpu(), &input).unwrap(), vec![]);
}

#[test]
fn generated_sizes_cover_the_edges() {
    let input = random_input(&mut Rng::new(1), 64);
    let sizes: Vec<u32> = input.descs().iter().map(|d| d.n_atoms).collect();
    assert_eq!(sizes[..EDGE_SIZES.len()], EDGE_SIZES);
    assert!(sizes.iter().any(|&n| n > 4 * THREADS), "{sizes:?}");
    assert_eq!(random_input(&mut Rng::new(1), 64), input, "reproducible");
}

/// One rejected batch and the message it must give.
fn check_rejected(xyz: Vec<f32>, descs: Vec<BatchStructureDesc>, message: &str) {
    let err = BatchInput::new(xyz, descs).unwrap_err();
    assert_eq!(err.to_string(), message);
}

#[test]
fn rejects_xyz_that_is_not_whole_atoms() {
    check_rejected(
        vec![0.0; 7],
        vec![],
        "xyz holds 7 floats, not a multiple of 3; pass x, y, z for every atom",
    );
}

#[test]
fn rejects_atoms_past_the_end() {
    check_rejected(
        vec![0.0; 30],
        vec![desc(0, 10), desc(8, 3)],
        "structure 1: atoms 8..11 run past the 10 atoms in xyz; fix its atom_offset or n_atoms",
    );
}

#[test]
fn rejects_an_offset_sum_that_wraps_in_u32() {
    // 2 + (u32::MAX - 1) wraps to 0 in u32: it must not pass as in range.
    check_rejected(
        vec![0.0; 30],
        vec![desc(2, u32::MAX - 1)],
        "structure 0: atoms 2..4294967296 run past the 10 atoms in xyz; \
         fix its atom_offset or n_atoms",
    );
}

#[test]
fn rejects_c_alphas_past_the_end() {
    let mut d = desc(0, 10);
    d.ca_offset = 9;
    d.n_residues = 2;
    check_rejected(
        vec![0.0; 30],
        vec![desc(0, 1), d],
        "structure 1: 2 C-alpha atoms from ca_offset 9 run past the 10 atoms in xyz; \
         fix its ca_offset or n_residues",
    );
    d.ca_offset = u32::MAX;
    d.n_residues = 1;
    assert!(matches!(
        BatchInput::new(vec![0.0; 30], vec![d]),
        Err(BatchError::CaOutOfRange { .. })
    ));
}

#[test]
fn an_empty_structure_may_sit_at_the_end() {
    assert!(BatchInput::new(vec![0.0; 30], vec![desc(10, 0)]).is_ok());
    check_rejected(
        vec![0.0; 30],
        vec![desc(11, 0)],
        "structure 0: atoms 11..11 run past the 10 atoms in xyz; fix its atom_offset or n_atoms",
    );
}

#[test]
fn rejects_non_finite_coordinates() {
    let mut xyz = vec![0.0; 12];
    xyz[7] = f32::NAN;
    check_rejected(
        xyz.clone(),
        vec![desc(0, 1), desc(1, 3)],
        "structure 1: atom 2 has y = NaN; coordinates must be finite",
    );
    xyz[7] = 0.0;
    xyz[11] = f32::NEG_INFINITY;
    check_rejected(
        xyz,
        vec![desc(0, 2)],
        "atom 3 has z = -inf; coordinates must be finite",
    );
}

#[test]
fn rejects_counts_the_kernel_cannot_index() {
    // Checked on the lengths alone: 2^32 atoms would need 48 GiB to test.
    let atoms = u32::MAX as usize + 1;
    let err = check_counts(3 * atoms, 0).unwrap_err();
    assert_eq!(
        err.to_string(),
        "4294967296 atoms is more than the kernel can index (4294967295); split the batch"
    );
    let err = check_counts(0, atoms).unwrap_err();
    assert_eq!(
        err.to_string(),
        "4294967296 structures is more than the kernel can index (4294967295); \
         split the batch"
    );
    assert_eq!(
        check_counts(3 * (atoms - 1), atoms - 1),
        Ok((u32::MAX, u32::MAX))
    );
}

#[test]
fn cpu_body_skips_bad_descriptors_like_the_kernel() {
    // Built around the validation, as if a bad descriptor slipped through:
    // the kernel's guard treats it as empty.
    let out = block_stats(&[1.0; 6], 2, &desc(1, 5));
    assert_eq!(out, BatchStats::default());
}

#[test]
fn a_mismatch_names_the_structure_and_field() {
    let input = BatchInput::new(vec![10.0; 6], vec![desc(0, 2)]).unwrap();
    let want = reference(&input);
    let mut got = want.clone();
    got[0].radius_of_gyration = 6.0;
    let m = first_mismatch(&input, &got, &want, 0.5).unwrap();
    assert_eq!(
        m.to_string(),
        "structure 0 (2 atoms): radius_of_gyration is 6 but the reference says 0 \
         (tolerance 5)"
    );
    got[0].radius_of_gyration = 4.0;
    assert_eq!(first_mismatch(&input, &got, &want, 0.5), None);
    got[0].radius_of_gyration = f32::NAN;
    assert!(first_mismatch(&input, &got, &want, REL_TOL).is_some());
}
