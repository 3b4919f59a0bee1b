//! batch_stats: many molecular structures packed in one atom array, each
//! described by a `BatchStructureDesc`; one launch computes every structure's
//! centroid and radius of gyration. Inputs are validated before any launch.

use std::fmt;
use std::num::NonZeroUsize;
use std::time::Instant;

use cuda_sys::kernels::batch_stats;
use cuda_sys::types::{BatchStats, BatchStructureDesc};
use gpu_core::{Backend, BackendKind, DeviceBuffer, Error, Kernel, LaunchConfig, Stream};

use crate::Rng;

/// Threads per block: `kThreads` in `kernels/batch.cu`.
pub const THREADS: u32 = 256;

/// Why a batch was refused before launch.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum BatchError {
    /// `xyz` does not hold whole atoms.
    XyzNotTriples {
        /// Floats in `xyz`.
        len: usize,
    },
    /// More atoms than the kernel's `uint32_t total_atoms` can count.
    TooManyAtoms {
        /// Atoms in `xyz`.
        atoms: usize,
    },
    /// More structures than the kernel's `uint32_t n_structures` can count.
    TooManyStructures {
        /// Descriptors given.
        structures: usize,
    },
    /// A structure's atoms run past the end of the atom array.
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

impl fmt::Display for BatchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Self::XyzNotTriples { len } => write!(
                f,
                "xyz holds {len} floats, not a multiple of 3; pass x, y, z for every atom"
            ),
            Self::TooManyAtoms { atoms } => write!(
                f,
                "{atoms} atoms is more than the kernel can index ({}); split the batch",
                u32::MAX
            ),
            Self::TooManyStructures { structures } => write!(
                f,
                "{structures} structures is more than the kernel can index ({}); split the batch",
                u32::MAX
            ),
            Self::AtomsOutOfRange {
                structure,
                atom_offset,
                n_atoms,
                total_atoms,
            } => write!(
                f,
                "structure {structure}: atoms {atom_offset}..{} run past the {total_atoms} atoms \
                 in xyz; fix its atom_offset or n_atoms",
                u64::from(atom_offset) + u64::from(n_atoms)
            ),
            Self::CaOutOfRange {
                structure,
                ca_offset,
                n_residues,
                total_atoms,
            } => write!(
                f,
                "structure {structure}: {n_residues} C-alpha atoms from ca_offset {ca_offset} run \
                 past the {total_atoms} atoms in xyz; fix its ca_offset or n_residues"
            ),
            Self::NonFinite {
                structure,
                atom,
                axis,
                value,
            } => {
                if let Some(s) = structure {
                    write!(f, "structure {s}: ")?;
                }
                write!(
                    f,
                    "atom {atom} has {axis} = {value}; coordinates must be finite"
                )
            }
        }
    }
}

impl std::error::Error for BatchError {}

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

fn check_counts(xyz_len: usize, structures: usize) -> Result<(u32, u32), BatchError> {
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

/// The CPU reference, the oracle every backend is compared with: a two-pass
/// centroid and radius of gyration accumulated in f64 and rounded once to
/// f32, so it is within half an ulp of the exact answer. An empty structure
/// gives centroid 0 and radius 0, as the kernel does.
pub fn reference(input: &BatchInput) -> Vec<BatchStats> {
    (0..input.descs.len())
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

/// The kernel body for gpu-core's CPU backend. It follows `batch.cu` step by
/// step in f32 (256 strided lanes, the same halving tree, the same guard on
/// bad descriptors) so that the CPU backend rounds like the GPU, up to the
/// fused multiply-adds nvcc forms.
fn cpu_body(
    config: &LaunchConfig,
    (xyz, total_atoms, descs, n_structures, out): (
        &[f32],
        u32,
        &[BatchStructureDesc],
        u32,
        &mut [BatchStats],
    ),
) {
    for s in 0..config.grid.0.min(n_structures) as usize {
        out[s] = block_stats(xyz, total_atoms, &descs[s]);
    }
}

/// One block of `batch_stats`.
fn block_stats(xyz: &[f32], total_atoms: u32, d: &BatchStructureDesc) -> BatchStats {
    let valid = d.atom_offset <= total_atoms && d.n_atoms <= total_atoms - d.atom_offset;
    let n = if valid { d.n_atoms } else { 0 };
    let start = if valid { 3 * d.atom_offset as usize } else { 0 };
    let atoms = &xyz[start..start + 3 * n as usize];
    let lane = |i: usize| i % THREADS as usize;

    let mut sums = [[0f32; THREADS as usize]; 3];
    for (i, atom) in atoms.chunks_exact(3).enumerate() {
        for k in 0..3 {
            sums[k][lane(i)] += atom[k];
        }
    }
    let inv_n = if n > 0 { 1.0 / n as f32 } else { 0.0 };
    let c = sums.map(|lanes| block_sum(lanes) * inv_n);

    let mut sq = [0f32; THREADS as usize];
    for (i, atom) in atoms.chunks_exact(3).enumerate() {
        let (dx, dy, dz) = (atom[0] - c[0], atom[1] - c[1], atom[2] - c[2]);
        sq[lane(i)] += dx * dx + dy * dy + dz * dz;
    }
    BatchStats {
        centroid: c,
        radius_of_gyration: (block_sum(sq) * inv_n).sqrt(),
    }
}

/// `block_sum` in `batch.cu`: halve the active width until one lane is left.
fn block_sum(mut lanes: [f32; THREADS as usize]) -> f32 {
    let mut width = lanes.len() / 2;
    while width > 0 {
        for i in 0..width {
            lanes[i] += lanes[i + width];
        }
        width /= 2;
    }
    lanes[0]
}

/// The kernel on `backend`.
pub fn kernel(backend: &Backend) -> Result<Kernel<batch_stats>, Error> {
    backend.kernel_with_cpu::<batch_stats>(cpu_body)
}

/// The launch shape: one block of [`THREADS`] per structure.
pub fn config(n_structures: u32) -> LaunchConfig {
    LaunchConfig {
        grid: (n_structures, 1, 1),
        block: (THREADS, 1, 1),
        shared_mem_bytes: 0,
    }
}

/// A batch on the device: the atoms, the descriptors and one output buffer
/// for every structure.
#[derive(Debug)]
pub struct DeviceBatch {
    xyz: DeviceBuffer<f32>,
    descs: DeviceBuffer<BatchStructureDesc>,
    out: DeviceBuffer<BatchStats>,
    total_atoms: u32,
}

impl DeviceBatch {
    /// Copies `input` to `stream`'s device and allocates the output.
    pub fn upload(stream: &Stream, input: &BatchInput) -> Result<Self, Error> {
        Ok(Self {
            xyz: stream.to_device(&input.xyz)?,
            descs: stream.to_device(&input.descs)?,
            out: stream.alloc_zeros(input.descs.len())?,
            total_atoms: input.total_atoms,
        })
    }

    /// Launches `batch_stats` over structures `start..end`, writing their
    /// slots of the shared output buffer (a sub-view of it; the kernel indexes
    /// descriptors and outputs from the start of the views it gets, and atoms
    /// by absolute offset in the whole array).
    pub fn launch(
        &mut self,
        stream: &Stream,
        kernel: &Kernel<batch_stats>,
        range: std::ops::Range<usize>,
    ) -> Result<(), Error> {
        let count = range.len();
        if count == 0 {
            // A grid of zero blocks is not a valid launch, and there is nothing to do.
            return Ok(());
        }
        let n = u32::try_from(count).map_err(|_| Error::SizeOverflow {
            len: count,
            elem_size: std::mem::size_of::<BatchStructureDesc>(),
        })?;
        stream.launch(
            kernel,
            config(n),
            (
                self.xyz.view(),
                self.total_atoms,
                self.descs.slice(range.clone())?,
                n,
                self.out.slice_mut(range)?,
            ),
        )
    }

    /// The output buffer, copied back.
    pub fn results(&self, stream: &Stream) -> Result<Vec<BatchStats>, Error> {
        stream.to_host(&self.out.view())
    }
}

/// Every structure's statistics on `backend`'s default stream.
pub fn run(backend: &Backend, input: &BatchInput) -> Result<Vec<BatchStats>, Error> {
    run_on(&backend.default_stream(), &kernel(backend)?, input)
}

/// Every structure's statistics on `stream`, in one launch when the grid
/// limit allows.
pub fn run_on(
    stream: &Stream,
    kernel: &Kernel<batch_stats>,
    input: &BatchInput,
) -> Result<Vec<BatchStats>, Error> {
    run_batched(stream, kernel, input, NonZeroUsize::MAX)
}

/// Every structure's statistics on `stream`, launching once per
/// `batch_size` structures (fewer where the grid limit is lower), each
/// launch writing its sub-view of one output buffer.
pub fn run_batched(
    stream: &Stream,
    kernel: &Kernel<batch_stats>,
    input: &BatchInput,
    batch_size: NonZeroUsize,
) -> Result<Vec<BatchStats>, Error> {
    let grid_limit = kernel.limits().max_grid_dim[0].max(1) as usize;
    let step = batch_size.get().min(grid_limit);
    let mut batch = DeviceBatch::upload(stream, input)?;
    let n = input.descs.len();
    for start in (0..n).step_by(step) {
        batch.launch(stream, kernel, start..n.min(start + step))?;
    }
    batch.results(stream)
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
/// [`random_input`] stays under 4,100. The bound is relative to `M`, not to
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
                    n_atoms: input.descs[structure].n_atoms,
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

/// What one timed run measured.
#[derive(Debug, Clone, Copy)]
pub struct Timing {
    /// Median time of one launch over the whole batch, in milliseconds.
    pub median_ms: f64,
    /// Atoms (in structures) processed per second at that time.
    pub atoms_per_s: f64,
}

/// Times `reps` one-launch runs over a device-resident batch (after one
/// warm-up): device events on CUDA, the wall clock on the CPU.
pub fn time(
    stream: &Stream,
    kernel: &Kernel<batch_stats>,
    input: &BatchInput,
    reps: usize,
) -> Result<Timing, Error> {
    let mut batch = DeviceBatch::upload(stream, input)?;
    let all = 0..input.descs.len();
    let mut samples = Vec::with_capacity(reps);
    for rep in 0..=reps {
        let ms = if stream.backend().kind() == BackendKind::Cuda {
            let start = stream.record_event()?;
            batch.launch(stream, kernel, all.clone())?;
            let end = stream.record_event()?;
            end.synchronize()?;
            f64::from(start.elapsed_ms(&end)?)
        } else {
            let started = Instant::now();
            batch.launch(stream, kernel, all.clone())?;
            started.elapsed().as_secs_f64() * 1e3
        };
        if rep > 0 {
            samples.push(ms);
        }
    }
    samples.sort_by(f64::total_cmp);
    let median_ms = samples.get(samples.len() / 2).copied().unwrap_or(f64::NAN);
    let atoms: u64 = input.descs.iter().map(|d| u64::from(d.n_atoms)).sum();
    Ok(Timing {
        median_ms,
        atoms_per_s: atoms as f64 / (median_ms * 1e-3),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
