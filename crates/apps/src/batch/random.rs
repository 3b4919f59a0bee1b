//! Reproducible random batches: chain-like structures of edge and random
//! sizes with unowned atoms between some of them.

use cuda_sys::types::BatchStructureDesc;

use super::BatchInput;
use crate::Rng;

/// Sizes the first structures of [`random_input`] always have: empty, one
/// atom, and around multiples of the block so the stride loop runs 1 to 9
/// times with full and partial last rounds.
pub const EDGE_SIZES: [u32; 8] = [0, 1, 2, 255, 256, 257, 1000, 2305];

/// A reproducible batch of `n_structures` chain-like structures: the first
/// ones have the [`EDGE_SIZES`], the rest mostly 2 to 300 atoms with some up
/// to 4,096. Each is a random walk of 3.8 Å steps (the C-alpha spacing) from
/// a start within 50 Å of the origin; unused atoms sit between some
/// structures, so offsets are not simply cumulative.
pub fn random_input(rng: &mut Rng, n_structures: usize) -> BatchInput {
    let mut xyz = Vec::new();
    let mut descs = Vec::with_capacity(n_structures);
    for s in 0..n_structures {
        if rng.next_u64().is_multiple_of(4) {
            // A few atoms that no structure owns.
            let gap = 1 + rng.next_u64() % 5;
            xyz.extend(rng.f32s(3 * gap as usize).iter().map(|v| v * 100.0));
        }
        let n_atoms = EDGE_SIZES
            .get(s)
            .copied()
            .unwrap_or_else(|| random_size(rng));
        let atom_offset = (xyz.len() / 3) as u32;
        random_walk(rng, n_atoms, &mut xyz);
        descs.push(BatchStructureDesc {
            atom_offset,
            // Backbone order N, CA, C, O, side chain: CA is the second atom.
            ca_offset: atom_offset + u32::from(n_atoms > 1),
            n_atoms,
            n_residues: n_atoms.div_ceil(8),
            lineage_hash: rng.next_u64() as u32,
            country_id: rng.next_u64() as u8,
            _pad: [0; 3],
        });
    }
    BatchInput::new(xyz, descs).expect("generated batches are valid")
}

fn random_size(rng: &mut Rng) -> u32 {
    let r = rng.next_u64();
    let pick = |lo: u64, hi: u64| (lo + (r >> 8) % (hi - lo + 1)) as u32;
    match r % 8 {
        0 => pick(0, 1),
        1..=5 => pick(2, 300),
        6 => pick(301, 1500),
        _ => pick(1501, 4096),
    }
}

fn random_walk(rng: &mut Rng, n_atoms: u32, xyz: &mut Vec<f32>) {
    let mut p = [rng.next_f32(), rng.next_f32(), rng.next_f32()].map(|v| v * 50.0);
    for _ in 0..n_atoms {
        xyz.extend_from_slice(&p);
        let step = loop {
            let v = [rng.next_f32(), rng.next_f32(), rng.next_f32()];
            let len = v.iter().map(|c| c * c).sum::<f32>().sqrt();
            if (0.1..=1.0).contains(&len) {
                break v.map(|c| c * 3.8 / len);
            }
        };
        for (p, d) in p.iter_mut().zip(step) {
            *p += d;
        }
    }
}
