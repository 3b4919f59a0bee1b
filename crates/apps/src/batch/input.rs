//! A batch as the kernel takes it, checked once: every descriptor inside the
//! atom array, every coordinate finite, every count within the kernel's
//! `uint32_t` parameters; and the refusals, one line each.

use cuda_sys::types::BatchStructureDesc;

/// Why a batch was refused before launch.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum BatchError {
    /// `xyz` does not hold whole atoms.
    #[error("xyz holds {len} floats, not a multiple of 3; pass x, y, z for every atom")]
    XyzNotTriples {
        /// Floats in `xyz`.
        len: usize,
    },
    /// More atoms than the kernel's `uint32_t total_atoms` can count.
    #[error(
        "{atoms} atoms is more than the kernel can index ({}); split the batch",
        u32::MAX
    )]
    TooManyAtoms {
        /// Atoms in `xyz`.
        atoms: usize,
    },
    /// More structures than the kernel's `uint32_t n_structures` can count.
    #[error(
        "{structures} structures is more than the kernel can index ({}); split the batch",
        u32::MAX
    )]
    TooManyStructures {
        /// Descriptors given.
        structures: usize,
    },
    /// A structure's atoms run past the end of the atom array.
    #[error(
        "structure {structure}: atoms {atom_offset}..{} run past the {total_atoms} atoms \
         in xyz; fix its atom_offset or n_atoms",
        u64::from(*.atom_offset) + u64::from(*.n_atoms)
    )]
    AtomsOutOfRange {
        /// Index of the descriptor.
        structure: usize,
        /// Its `atom_offset`.
        atom_offset: u32,
        /// Its `n_atoms`.
        n_atoms: u32,
        /// Atoms in `xyz`.
        total_atoms: u32,
    },
    /// A structure's C-alpha atoms run past the end of the atom array.
    #[error(
        "structure {structure}: {n_residues} C-alpha atoms from ca_offset {ca_offset} run \
         past the {total_atoms} atoms in xyz; fix its ca_offset or n_residues"
    )]
    CaOutOfRange {
        /// Index of the descriptor.
        structure: usize,
        /// Its `ca_offset`.
        ca_offset: u32,
        /// Its `n_residues`.
        n_residues: u32,
        /// Atoms in `xyz`.
        total_atoms: u32,
    },
    /// A coordinate is NaN or infinite.
    #[error(
        "{}atom {atom} has {axis} = {value}; coordinates must be finite",
        structure_prefix(*.structure)
    )]
    NonFinite {
        /// The first structure holding the atom, if any does.
        structure: Option<usize>,
        /// Index of the atom.
        atom: usize,
        /// `'x'`, `'y'` or `'z'`.
        axis: char,
        /// The value found.
        value: f32,
    },
}

/// `"structure {s}: "` when the atom lies in one, else nothing.
fn structure_prefix(structure: Option<usize>) -> String {
    structure.map_or(String::new(), |s| format!("structure {s}: "))
}

/// A batch that [`BatchInput::new`] checked: every descriptor lies inside the
/// atom array, every coordinate is finite and every count fits the kernel's
/// `uint32_t` parameters, so a launch never reads out of bounds.
#[derive(Debug, Clone, PartialEq)]
pub struct BatchInput {
    xyz: Vec<f32>,
    descs: Vec<BatchStructureDesc>,
    total_atoms: u32,
    n_structures: u32,
}

impl BatchInput {
    /// Checks a batch: `xyz` holds x, y, z per atom; structure `i` is atoms
    /// `atom_offset..atom_offset + n_atoms` and has `n_residues` C-alpha
    /// atoms at or after `ca_offset`, so `ca_offset + n_residues` must not
    /// pass the end either (C-alphas may be interleaved with other atoms or
    /// stored apart; only the bound is checked). Empty structures are fine.
    pub fn new(xyz: Vec<f32>, descs: Vec<BatchStructureDesc>) -> Result<Self, BatchError> {
        let (total_atoms, n_structures) = check_counts(xyz.len(), descs.len())?;
        for (structure, d) in descs.iter().enumerate() {
            check_desc(structure, d, total_atoms)?;
        }
        check_finite(&xyz, &descs)?;
        Ok(Self {
            xyz,
            descs,
            total_atoms,
            n_structures,
        })
    }

    /// Coordinates, x, y, z per atom.
    pub fn xyz(&self) -> &[f32] {
        &self.xyz
    }

    /// One descriptor per structure.
    pub fn descs(&self) -> &[BatchStructureDesc] {
        &self.descs
    }

    /// Atoms in `xyz`.
    pub fn total_atoms(&self) -> u32 {
        self.total_atoms
    }

    /// Structures in the batch.
    pub fn n_structures(&self) -> u32 {
        self.n_structures
    }

    /// The coordinates of structure `s`.
    pub fn atoms_of(&self, s: usize) -> &[f32] {
        let d = &self.descs[s];
        let start = 3 * d.atom_offset as usize;
        &self.xyz[start..start + 3 * d.n_atoms as usize]
    }

    /// The atoms and descriptors back.
    pub fn into_parts(self) -> (Vec<f32>, Vec<BatchStructureDesc>) {
        (self.xyz, self.descs)
    }
}

pub(super) fn check_counts(xyz_len: usize, structures: usize) -> Result<(u32, u32), BatchError> {
    if !xyz_len.is_multiple_of(3) {
        return Err(BatchError::XyzNotTriples { len: xyz_len });
    }
    let atoms = xyz_len / 3;
    let total_atoms = u32::try_from(atoms).map_err(|_| BatchError::TooManyAtoms { atoms })?;
    let n_structures =
        u32::try_from(structures).map_err(|_| BatchError::TooManyStructures { structures })?;
    Ok((total_atoms, n_structures))
}

fn check_desc(
    structure: usize,
    d: &BatchStructureDesc,
    total_atoms: u32,
) -> Result<(), BatchError> {
    // u64 sums cannot overflow, where `atom_offset + n_atoms` in u32 could
    // wrap to a small, plausible value.
    let total = u64::from(total_atoms);
    if u64::from(d.atom_offset) + u64::from(d.n_atoms) > total {
        return Err(BatchError::AtomsOutOfRange {
            structure,
            atom_offset: d.atom_offset,
            n_atoms: d.n_atoms,
            total_atoms,
        });
    }
    if u64::from(d.ca_offset) + u64::from(d.n_residues) > total {
        return Err(BatchError::CaOutOfRange {
            structure,
            ca_offset: d.ca_offset,
            n_residues: d.n_residues,
            total_atoms,
        });
    }
    Ok(())
}

fn check_finite(xyz: &[f32], descs: &[BatchStructureDesc]) -> Result<(), BatchError> {
    let Some(i) = xyz.iter().position(|v| !v.is_finite()) else {
        return Ok(());
    };
    let atom = i / 3;
    let structure = descs.iter().position(|d| {
        let start = d.atom_offset as usize;
        (start..start + d.n_atoms as usize).contains(&atom)
    });
    Err(BatchError::NonFinite {
        structure,
        atom,
        axis: ['x', 'y', 'z'][i % 3],
        value: xyz[i],
    })
}
