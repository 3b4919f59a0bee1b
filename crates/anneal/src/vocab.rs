//! The anneal's vocabulary, the crate's ground floor: the points
//! ([`Points`], [`Dtype`]), the knobs ([`Params`]), what a run produces
//! ([`Output`], [`AnchorStats`], [`Steps`]) and the stopping test
//! ([`converged`]). It imports only the errors; every other module builds
//! on it, and the crate's root re-exports it.

use crate::error::AnnealError;

/// The element type of the points (as the input files hold them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dtype {
    /// float32.
    F32,
    /// float16.
    F16,
    /// bfloat16 (the top half of a float32).
    BF16,
}

impl Dtype {
    /// Bytes per element.
    pub fn size(self) -> u64 {
        match self {
            Self::F32 => 4,
            Self::F16 | Self::BF16 => 2,
        }
    }

    /// The name users know it by (`"float32"`).
    pub fn name(self) -> &'static str {
        match self {
            Self::F32 => "float32",
            Self::F16 => "float16",
            Self::BF16 => "bfloat16",
        }
    }
}

/// Points to compress: row-major `n × d`, f32, f16 or bf16 (raw bits).
///
/// One slice, or several row-contiguous parts of one element type read as
/// one matrix ([`Points::Parts`]: `.npy` shards, each memory-mapped, so that
/// nothing is copied to join them). Consumers read the values through
/// [`Points::pieces`], which yields flat slices whatever the layout.
#[derive(Debug, Clone, Copy)]
pub enum Points<'a> {
    /// f32 values.
    F32(&'a [f32]),
    /// f16 values as raw bits (the GPU keeps them as f16).
    F16(&'a [u16]),
    /// bf16 values as raw bits (the GPU converts them to f32, exactly).
    BF16(&'a [u16]),
    /// Parts concatenated by rows, in order: each a slice variant above (no
    /// nesting), all of one element type, each holding whole rows
    /// ([`validate`](crate::validate) checks all three).
    Parts(&'a [Points<'a>]),
}

impl<'a> Points<'a> {
    /// Values in the buffer (over all parts).
    pub fn len(&self) -> usize {
        match self {
            Points::F32(v) => v.len(),
            Points::F16(v) | Points::BF16(v) => v.len(),
            Points::Parts(parts) => parts.iter().map(Points::len).sum(),
        }
    }

    /// Whether there are no values.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The element type (of the first part, for [`Points::Parts`]; f32 when
    /// there is none).
    pub fn dtype(&self) -> Dtype {
        match self {
            Points::F32(_) => Dtype::F32,
            Points::F16(_) => Dtype::F16,
            Points::BF16(_) => Dtype::BF16,
            Points::Parts(parts) => parts.first().map_or(Dtype::F32, Points::dtype),
        }
    }

    /// The flat slices (never [`Points::Parts`]) holding values
    /// `range`, in order; empty pieces are left out.
    pub fn pieces(&self, range: std::ops::Range<usize>) -> Vec<Points<'a>> {
        let one = |p: Points<'a>, r: std::ops::Range<usize>| match p {
            Points::F32(v) => Points::F32(&v[r]),
            Points::F16(v) => Points::F16(&v[r]),
            Points::BF16(v) => Points::BF16(&v[r]),
            Points::Parts(_) => unreachable!("parts do not nest"),
        };
        let parts: &[Points<'a>] = match self {
            Points::Parts(parts) => parts,
            flat => {
                return vec![one(*flat, range)]
                    .into_iter()
                    .filter(|p| !p.is_empty())
                    .collect()
            }
        };
        let mut out = Vec::new();
        let mut start = 0;
        for part in parts {
            let end = start + part.len();
            let (lo, hi) = (range.start.max(start), range.end.min(end));
            if lo < hi {
                out.push(one(*part, lo - start..hi - start));
            }
            start = end;
        }
        out
    }

    /// Value `i` as f32.
    pub fn get(&self, i: usize) -> f32 {
        match self {
            Points::F32(v) => v[i],
            Points::F16(v) => half::f16::from_bits(v[i]).to_f32(),
            Points::BF16(v) => half::bf16::from_bits(v[i]).to_f32(),
            Points::Parts(_) => self.range_f32(i..i + 1)[0],
        }
    }

    /// Every value as f32.
    pub fn to_f32(&self) -> Vec<f32> {
        self.range_f32(0..self.len())
    }

    /// Values `range` as f32.
    pub fn range_f32(&self, range: std::ops::Range<usize>) -> Vec<f32> {
        let mut out = Vec::with_capacity(range.len());
        for piece in self.pieces(range) {
            match piece {
                Points::F32(v) => out.extend_from_slice(v),
                Points::F16(v) => out.extend(v.iter().map(|b| half::f16::from_bits(*b).to_f32())),
                Points::BF16(v) => out.extend(v.iter().map(|b| half::bf16::from_bits(*b).to_f32())),
                Points::Parts(_) => unreachable!("pieces are flat"),
            }
        }
        out
    }
}

/// Every knob of the algorithm (as the anneal index records them).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Params {
    /// Iterations at most.
    pub max_iters: u32,
    /// Stop when the relative energy change is below this (0: never early).
    pub tol: f64,
    /// Initial temperature.
    pub t0: f32,
    /// `T ← T · cooling` after each iteration, in `(0, 1]`.
    pub cooling: f32,
    /// Run maintenance every this many iterations (0: never).
    pub maintain_every: u32,
    /// Merge anchors whose squared distance is below `merge_frac · E`.
    pub merge_frac: f32,
    /// Split anchors holding more than `split_load · n / m` points.
    pub split_load: f32,
    /// Split anchors whose mean member distance exceeds `split_var · E`.
    pub split_var: f32,
    /// Anchors at most after splits (0: twice the initial `m`).
    pub max_anchors: usize,
    /// Seed of the initial anchors and the split directions.
    pub seed: u64,
}

impl Default for Params {
    /// 30 iterations, `tol = 1e-4`, `t0 = 1` (first step `η = 0.5`),
    /// `cooling = 0.8`, maintenance every 5 iterations with `merge_frac =
    /// 0.05`, `split_load = 3`, `split_var = 4`, up to twice the initial
    /// anchors, seed 0.
    fn default() -> Self {
        Self {
            max_iters: 30,
            tol: 1e-4,
            t0: 1.0,
            cooling: 0.8,
            maintain_every: 5,
            merge_frac: 0.05,
            split_load: 3.0,
            split_var: 4.0,
            max_anchors: 0,
            seed: 0,
        }
    }
}

/// What a run produced.
#[derive(Debug, Clone, PartialEq)]
pub struct Output {
    /// Final anchors, row-major `m_final × d`.
    pub anchors: Vec<f32>,
    /// Anchors at the end.
    pub m: usize,
    /// Each point's anchor in the last assignment.
    pub assignments: Vec<u32>,
    /// Iterations run.
    pub iterations: u32,
    /// Energy (mean squared distance to the assigned anchor) of the last
    /// assignment.
    pub energy: f64,
    /// Energy after each iteration.
    pub history: Vec<f64>,
    /// `m_final / n`.
    pub compression_ratio: f64,
    /// Maintenance passes that changed the anchors: `(iteration, merged, split)`.
    pub maintenance: Vec<(u32, usize, usize)>,
}

/// Per-anchor statistics of the last assignment.
#[derive(Debug, Clone, PartialEq)]
pub struct AnchorStats {
    /// Members per anchor.
    pub counts: Vec<u32>,
    /// Sum of member distances per anchor.
    pub sumsq: Vec<f64>,
}

/// The driver's stopping test: the relative energy change against the
/// previous iteration is under `tol` (never without a previous iteration).
/// The GPU's `anneal_finish` kernel computes exactly this, in f64.
pub fn converged(previous: Option<f64>, energy: f64, tol: f64) -> bool {
    previous.is_some_and(|p| p > 0.0 && ((p - energy).abs() / p) < tol)
        || (previous == Some(0.0) && energy == 0.0)
}

/// What [`Engine::run_steps`](crate::Engine::run_steps) ran.
#[derive(Debug, Clone, PartialEq)]
pub struct Steps {
    /// The energy of each iteration run, in order.
    pub energies: Vec<f64>,
    /// Whether the last one met [`converged`] (then no more were run).
    pub converged: bool,
}

/// What a maintenance pass reads from the engine: the last step's
/// [`AnchorStats`] and each anchor's nearest other anchor
/// ([`Engine::anchor_neighbors`](crate::Engine::anchor_neighbors)).
#[derive(Debug, Clone, PartialEq)]
pub struct MaintenanceInputs {
    /// [`Engine::stats`](crate::Engine::stats).
    pub stats: AnchorStats,
    /// Each anchor's nearest other anchor (`u32::MAX` when there is none).
    pub neighbors: Vec<u32>,
    /// Their squared distances.
    pub neighbor_dist: Vec<f32>,
}

/// The first `m × d` values of `anchors` (what [`Engine::set_anchors`]
/// reads), or [`AnnealError::AnchorValues`] when there are fewer.
pub(crate) fn anchor_values(anchors: &[f32], m: usize, d: usize) -> Result<&[f32], AnnealError> {
    m.checked_mul(d)
        .and_then(|md| anchors.get(..md))
        .ok_or(AnnealError::AnchorValues {
            values: anchors.len(),
            m,
            d,
        })
}
