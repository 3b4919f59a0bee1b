//! The CPU reference (f64, rounded once) that the kernel is checked
//! against, the tolerance that check uses, and the first structure outside it.

use std::fmt;

use cuda_sys::types::BatchStats;

use super::BatchInput;

/// The CPU reference, the oracle every backend is compared with: a two-pass
/// centroid and radius of gyration accumulated in f64 and rounded once to
/// f32, so it is within half an ulp of the exact answer. An empty structure
/// gives centroid 0 and radius 0, as the kernel does.
pub fn reference(input: &BatchInput) -> Vec<BatchStats> {
    (0..input.descs().len())
        .map(|s| reference_one(input.atoms_of(s)))
        .collect()
}

fn reference_one(atoms: &[f32]) -> BatchStats {
    let n = atoms.len() / 3;
    if n == 0 {
        return BatchStats::default();
    }
    let mut c = [0f64; 3];
    for atom in atoms.chunks_exact(3) {
        for (c, &x) in c.iter_mut().zip(atom) {
            *c += f64::from(x);
        }
    }
    let c = c.map(|sum| sum / n as f64);
    let sq: f64 = atoms
        .chunks_exact(3)
        .map(|atom| {
            (0..3)
                .map(|k| (f64::from(atom[k]) - c[k]).powi(2))
                .sum::<f64>()
        })
        .sum();
    BatchStats {
        centroid: c.map(|v| v as f32),
        radius_of_gyration: (sq / n as f64).sqrt() as f32,
    }
}

/// The tolerance of [`first_mismatch`], relative to the structure's largest
/// coordinate magnitude `M`.
///
/// Why 1e-5: the kernel sums a structure's `n` atoms in f32, `k =
/// ceil(n / 256)` per thread and then a tree of 8 levels, so a centroid
/// component is off by at most about `(k + 9) u M` (`u = 2^-24`), and the
/// radius of gyration by at most about `(2k + 30) u M` (the centroid's error
/// enters it at most once more, plus its own summation). That is under
/// `1e-5 M` while `k <= 70`, i.e. for structures of up to ~18,000 atoms;
/// `random_input` stays under 4,100. The bound is relative to `M`, not to
/// the value itself, because a centroid near 0 is the difference of large
/// sums and has no relative accuracy to speak of.
pub const REL_TOL: f32 = 1e-5;

/// A structure whose statistics are outside the tolerance.
#[derive(Debug, Clone, PartialEq)]
pub struct Mismatch {
    /// Index of the structure.
    pub structure: usize,
    /// Atoms in it.
    pub n_atoms: u32,
    /// `"centroid.x"`, ..., `"radius_of_gyration"`.
    pub field: &'static str,
    /// What the backend computed.
    pub got: f32,
    /// What the reference says.
    pub want: f32,
    /// The allowed difference.
    pub tolerance: f32,
}

impl fmt::Display for Mismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "structure {} ({} atoms): {} is {} but the reference says {} (tolerance {})",
            self.structure, self.n_atoms, self.field, self.got, self.want, self.tolerance
        )
    }
}

/// The first structure where `got` differs from `want` by more than
/// `rel_tol` times the structure's largest coordinate magnitude, or where
/// the lengths differ (reported as structure `min(len)`).
pub fn first_mismatch(
    input: &BatchInput,
    got: &[BatchStats],
    want: &[BatchStats],
    rel_tol: f32,
) -> Option<Mismatch> {
    const FIELDS: [&str; 4] = [
        "centroid.x",
        "centroid.y",
        "centroid.z",
        "radius_of_gyration",
    ];
    let flat = |s: &BatchStats| {
        let [x, y, z] = s.centroid;
        [x, y, z, s.radius_of_gyration]
    };
    for (structure, (g, w)) in got.iter().zip(want).enumerate() {
        let scale = input
            .atoms_of(structure)
            .iter()
            .fold(0f32, |m, v| m.max(v.abs()));
        let tolerance = rel_tol * scale;
        for ((field, g), w) in FIELDS.iter().zip(flat(g)).zip(flat(w)) {
            // Written so that a NaN is a mismatch.
            let within = (g - w).abs() <= tolerance;
            if !within {
                return Some(Mismatch {
                    structure,
                    n_atoms: input.descs()[structure].n_atoms,
                    field,
                    got: g,
                    want: w,
                    tolerance,
                });
            }
        }
    }
    (got.len() != want.len()).then(|| Mismatch {
        structure: got.len().min(want.len()),
        n_atoms: 0,
        field: "length",
        got: got.len() as f32,
        want: want.len() as f32,
        tolerance: 0.0,
    })
}
