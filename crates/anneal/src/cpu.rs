//! The CPU engine: multi-threaded (rayon), its distance loop laid out like a
//! small GEMM. Distances are `|x|² + |c|² - 2 x·c` (as on the GPU): the
//! points are packed once into `k`-major groups of 12, the anchors once per
//! step into transposed blocks of 16; a tile of points × blocks keeps its dot
//! products in vector registers for the whole `k` loop, and its epilogue
//! folds the distances into per-lane running minima. The stats pass sums
//! each anchor's members in point order, in parallel over anchors. Hot loops
//! are compiled for AVX-512 or AVX2+FMA when the CPU has them (checked at
//! run time), else for the baseline target.

#[cfg(target_arch = "x86_64")]
mod avx2;
#[cfg(target_arch = "x86_64")]
mod avx512;
mod partial;
pub(crate) use partial::SumsLayout;

use rayon::prelude::*;

use crate::{
    engine::Engine,
    error::AnnealError,
    input::Problem,
    vocab::{AnchorStats, Points},
};

/// Anchors per block: one AVX-512 vector of f32.
const AB: usize = 16;
/// Rows per group of the packed rows: one AVX-512 tile, two AVX2 tiles,
/// three baseline tiles.
const GROUP: usize = 12;
/// Rows per rayon task, whole groups. At d = 128 its running minima (12
/// KiB) and the two anchor blocks of one AVX-512 sweep (16 KiB) stay in L1
/// while the task's rows (48 KiB) stream from L2 once per sweep.
const TASK: usize = 8 * GROUP;

/// The instruction set the hot loops run with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Isa {
    #[cfg(target_arch = "x86_64")]
    Avx512,
    #[cfg(target_arch = "x86_64")]
    Avx2,
    /// Whatever the build targets: the fallback, and the reference the
    /// others are tested against.
    Baseline,
}

impl Isa {
    /// The widest this CPU has.
    fn detect() -> Self {
        Self::available()[0]
    }

    /// Every one this CPU can run, widest first.
    fn available() -> Vec<Self> {
        let mut isas = Vec::new();
        #[cfg(target_arch = "x86_64")]
        {
            if std::arch::is_x86_feature_detected!("avx512f") {
                isas.push(Isa::Avx512);
            }
            if std::arch::is_x86_feature_detected!("avx2")
                && std::arch::is_x86_feature_detected!("fma")
            {
                isas.push(Isa::Avx2);
            }
        }
        isas.push(Isa::Baseline);
        isas
    }

    /// Anchor blocks one sweep takes: as many as the register tile holds.
    fn blocks_per_sweep(self) -> usize {
        match self {
            #[cfg(target_arch = "x86_64")]
            Isa::Avx512 => avx512::BLOCKS,
            _ => 1,
        }
    }
}

/// Anchors as the distance loop reads them: block `b` holds anchors
/// `16b..16b + 16` transposed, `at[(b·d + k)·16 + j]` being dimension `k` of
/// anchor `16b + j`. Padding anchors are zero with norm +inf: they never win.
#[derive(Debug, Default)]
struct Packed {
    d: usize,
    blocks: usize,
    at: Vec<f32>,
    norms: Vec<f32>,
}

impl Packed {
    /// Packs the first `m` rows of `anchors` (`m × d`), reusing the buffers.
    fn pack(&mut self, anchors: &[f32], m: usize, d: usize) {
        self.d = d;
        self.blocks = m.div_ceil(AB);
        self.at.clear();
        self.at.resize(self.blocks * d * AB, 0.0);
        self.norms.clear();
        self.norms.resize(self.blocks * AB, f32::INFINITY);
        for (a, row) in anchors.chunks_exact(d).take(m).enumerate() {
            let block = &mut self.at[a / AB * d * AB..][..d * AB];
            for (lane, v) in block.chunks_exact_mut(AB).zip(row) {
                lane[a % AB] = *v;
            }
            self.norms[a] = norm(row);
        }
    }

    /// Block `b`: its transposed values (`d × 16`) and its norms.
    #[inline(always)]
    fn block(&self, b: usize) -> (&[f32], &[f32; AB]) {
        let at = &self.at[b * self.d * AB..(b + 1) * self.d * AB];
        let norms = self.norms[b * AB..(b + 1) * AB]
            .try_into()
            .expect("a block has AB norms");
        (at, norms)
    }
}

/// Rows (the points, or the anchors looking for their neighbors) as the
/// distance loop reads them: groups of 12, each `k`-major, `values[(g·d +
/// k)·12 + r]` being dimension `k` of row `12g + r`, so a tile broadcasts
/// its rows' coordinates from one address plus constant offsets. The last
/// group is padded with zero rows, whose results are dropped.
#[derive(Debug, Default)]
struct Rows {
    count: usize,
    d: usize,
    values: Vec<f32>,
    /// `|row|²`, padded with zeros to whole groups.
    norms: Vec<f32>,
}

impl Rows {
    /// Packs `rows` (`count × d`), reusing the buffers.
    fn pack(&mut self, rows: &[f32], d: usize) {
        self.count = rows.len() / d;
        self.d = d;
        let padded = self.count.div_ceil(GROUP) * GROUP;
        self.values.clear();
        self.values.resize(padded * d, 0.0);
        self.norms.clear();
        self.norms.resize(padded, 0.0);
        self.values
            .par_chunks_mut(d * GROUP)
            .zip(self.norms.par_chunks_mut(GROUP))
            .zip(rows.par_chunks(d * GROUP))
            .for_each(|((group, norms), rows)| {
                for (r, (row, norm_out)) in rows.chunks_exact(d).zip(norms).enumerate() {
                    for (lane, v) in group.chunks_exact_mut(GROUP).zip(row) {
                        lane[r] = *v;
                    }
                    *norm_out = norm(row);
                }
            });
    }
}

/// `|x|²`, summed in order (the same on every instruction set).
fn norm(row: &[f32]) -> f32 {
    row.iter().map(|v| v * v).sum()
}

/// One assignment pass: the nearest packed anchor of every row.
#[derive(Debug, Clone, Copy)]
struct Query<'a> {
    rows: &'a Rows,
    anchors: &'a Packed,
    /// Skip anchor `i` for row `i` (the rows are the anchors themselves).
    exclude_self: bool,
}

/// The CPU engine.
#[derive(Debug)]
pub struct CpuEngine {
    isa: Isa,
    /// Row-major, for the stats.
    points: Vec<f32>,
    /// The same points packed for the distance loop (a second copy: the
    /// stats pass reads whole rows, the distance loop groups of 12).
    rows: Rows,
    /// The first point whose squared norm is not finite in f32 (the
    /// validation refuses such input; the engine refuses it again rather
    /// than compute wrong distances).
    overflow: Option<usize>,
    n: usize,
    d: usize,
    anchors: Vec<f32>,
    m: usize,
    packed: Packed,
    assign: Vec<u32>,
    dist: Vec<f32>,
    /// Point indices grouped by anchor, each group in point order; group
    /// `j` is `members[starts[j]..starts[j + 1]]`.
    members: Vec<u32>,
    starts: Vec<usize>,
    stats: AnchorStats,
}

impl CpuEngine {
    /// An engine holding `problem`'s points (converted to f32 once).
    pub fn new(problem: &Problem<'_>) -> Self {
        Self::with_isa(problem.points(), problem.n(), problem.d(), Isa::detect())
    }

    fn with_isa(points: Points<'_>, n: usize, d: usize, isa: Isa) -> Self {
        let points = points.to_f32();
        let mut rows = Rows::default();
        rows.pack(&points, d);
        let overflow = rows.norms[..n.min(rows.norms.len())]
            .iter()
            .position(|v| !v.is_finite());
        Self {
            isa,
            points,
            rows,
            overflow,
            n,
            d,
            anchors: Vec::new(),
            m: 0,
            packed: Packed::default(),
            assign: vec![0; n],
            dist: vec![0.0; n],
            members: vec![0; n],
            starts: Vec::new(),
            stats: AnchorStats {
                counts: Vec::new(),
                sumsq: Vec::new(),
            },
        }
    }

    /// Groups the points by their anchor (a counting sort, so each group is
    /// in point order) and counts the members.
    fn group_members(&mut self) -> Vec<u32> {
        let mut counts = vec![0u32; self.m];
        for &a in &self.assign {
            counts[a as usize] += 1;
        }
        self.starts.clear();
        self.starts.push(0);
        let mut total = 0;
        for &c in &counts {
            total += c as usize;
            self.starts.push(total);
        }
        let mut next = self.starts[..self.m].to_vec();
        for (i, &a) in self.assign.iter().enumerate() {
            self.members[next[a as usize]] = i as u32;
            next[a as usize] += 1;
        }
        counts
    }
}

/// Fills `assign` and `dist` (one entry per row of `query`).
fn nearest(isa: Isa, query: &Query<'_>, assign: &mut [u32], dist: &mut [f32]) {
    assign
        .par_chunks_mut(TASK)
        .zip(dist.par_chunks_mut(TASK))
        .enumerate()
        .for_each(|(task, (assign, dist))| nearest_task(isa, query, task * TASK, assign, dist));
}

/// The nearest anchor of rows `first..first + assign.len()`.
fn nearest_task(isa: Isa, query: &Query<'_>, first: usize, assign: &mut [u32], dist: &mut [f32]) {
    let padded = assign.len().div_ceil(GROUP) * GROUP;
    let d = query.rows.d;
    // Running minimum per (row, lane): lane j sees anchors j, 16 + j, ...
    // in increasing order, so a strict `<` keeps the lowest index.
    let mut best_d = [[f32::INFINITY; AB]; TASK];
    let mut best_i = [[u32::MAX; AB]; TASK];
    let mut sweep = Sweep {
        rows: &query.rows.values[first * d..(first + padded) * d],
        norms: &query.rows.norms[first..first + padded],
        d,
        own: query.exclude_self.then_some(first),
        best_d: &mut best_d[..padded],
        best_i: &mut best_i[..padded],
    };
    let blocks = query.anchors.blocks;
    let mut b = 0;
    while b < blocks {
        let take = isa.blocks_per_sweep().min(blocks - b);
        sweep.run(isa, query.anchors, b, take);
        b += take;
    }
    // With no finite distance (a NaN or overflowing input the validation
    // refuses, or a lone anchor looking for a neighbor) no lane holds an
    // anchor: a point still goes to anchor 0, so that `assign` is always an
    // index, and its distance says +inf; a neighbor query keeps `u32::MAX`.
    let fallback = if query.exclude_self { u32::MAX } else { 0 };
    for (((best_d, best_i), assign), dist) in best_d.iter().zip(&best_i).zip(assign).zip(dist) {
        // The lowest distance, then the lowest anchor among the lanes that
        // hold it; branch-free.
        let min = best_d.iter().copied().fold(f32::INFINITY, f32::min);
        let nearest = best_d
            .iter()
            .zip(best_i)
            .map(|(d, i)| if *d == min { *i } else { u32::MAX })
            .fold(u32::MAX, u32::min);
        *assign = if nearest == u32::MAX {
            fallback
        } else {
            nearest
        };
        *dist = min;
    }
}

/// A task's rows, passing over the anchor blocks a few at a time.
#[derive(Debug)]
struct Sweep<'a> {
    /// Whole groups of packed rows.
    rows: &'a [f32],
    /// `|row|²`, one per row of those groups.
    norms: &'a [f32],
    d: usize,
    /// With `exclude_self`: the index of the task's first row (row `r` of
    /// the task skips anchor `own + r`).
    own: Option<usize>,
    best_d: &'a mut [[f32; AB]],
    best_i: &'a mut [[u32; AB]],
}

impl Sweep<'_> {
    /// Folds the distances to blocks `b..b + take` into the running minima.
    fn run(&mut self, isa: Isa, anchors: &Packed, b: usize, take: usize) {
        match isa {
            #[cfg(target_arch = "x86_64")]
            // SAFETY: `Isa::Avx512` comes from `Isa::available`, which
            // checked that the CPU has AVX-512F.
            Isa::Avx512 => unsafe { avx512::sweep(self, anchors, b, take) },
            #[cfg(target_arch = "x86_64")]
            // SAFETY: `Isa::Avx2` comes from `Isa::available`, which checked
            // that the CPU has AVX2 and FMA.
            Isa::Avx2 => unsafe { avx2::sweep(self, anchors, b, take) },
            Isa::Baseline => {
                for b in b..b + take {
                    self.run_baseline(anchors, b);
                }
            }
        }
    }

    /// Groups of rows in the task.
    #[inline(always)]
    fn groups(&self) -> usize {
        self.norms.len() / GROUP
    }

    /// Group `g` of the task: `d × 12` values.
    #[inline(always)]
    fn group(&self, g: usize) -> &[f32] {
        &self.rows[g * self.d * GROUP..][..self.d * GROUP]
    }

    /// The anchor row `row` of the task may not take (`u32::MAX`: none).
    #[inline(always)]
    fn own(&self, row: usize) -> u32 {
        self.own.map_or(u32::MAX, |first| (first + row) as u32)
    }

    /// The portable sweep over block `b`: tiles of 4 rows.
    fn run_baseline(&mut self, anchors: &Packed, b: usize) {
        const P: usize = 4;
        let (at, anchor_norms) = anchors.block(b);
        for g in 0..self.groups() {
            for offset in (0..GROUP).step_by(P) {
                let acc = dots_baseline::<P>(self.group(g), offset, at);
                for (i, acc) in acc.iter().enumerate() {
                    let row = g * GROUP + offset + i;
                    let own = self.own(row);
                    let (best_d, best_i) = (&mut self.best_d[row], &mut self.best_i[row]);
                    for j in 0..AB {
                        let a = (b * AB + j) as u32;
                        let dd = (self.norms[row] + anchor_norms[j] - 2.0 * acc[j]).max(0.0);
                        let dd = if a == own { f32::INFINITY } else { dd };
                        let better = dd < best_d[j];
                        best_d[j] = if better { dd } else { best_d[j] };
                        best_i[j] = if better { a } else { best_i[j] };
                    }
                }
            }
        }
    }
}

/// Dot products of rows `offset..offset + P` of a packed group with the 16
/// anchors of a transposed block, summed in `k` order without fusing (the
/// baseline target may have no FMA instruction, and `mul_add` would be a
/// slow library call).
fn dots_baseline<const P: usize>(group: &[f32], offset: usize, at: &[f32]) -> [[f32; AB]; P] {
    let mut acc = [[0.0f32; AB]; P];
    for (x, c) in group.chunks_exact(GROUP).zip(at.chunks_exact(AB)) {
        for (acc, x) in acc.iter_mut().zip(&x[offset..offset + P]) {
            for (acc, c) in acc.iter_mut().zip(c) {
                *acc += x * c;
            }
        }
    }
    acc
}

/// One anchor's share of a step: its members' rows summed in point order
/// (f64), their distances summed, and the anchor moved toward their mean.
struct AnchorUpdate<'a> {
    points: &'a [f32],
    dist: &'a [f32],
    /// Point indices grouped by anchor, as in [`CpuEngine`].
    members: &'a [u32],
    starts: &'a [usize],
    d: usize,
    eta: f32,
}

impl AnchorUpdate<'_> {
    /// Moves `anchor` (anchor `j`) toward the mean of its members; returns
    /// the sum of their distances. `sums` is scratch of `d` values.
    fn apply(&self, isa: Isa, j: usize, anchor: &mut [f32], sums: &mut [f64]) -> f64 {
        match isa {
            #[cfg(target_arch = "x86_64")]
            // SAFETY: `Isa::Avx512` comes from `Isa::available`, which
            // checked that the CPU has AVX-512F.
            Isa::Avx512 => unsafe { self.apply_avx512(j, anchor, sums) },
            #[cfg(target_arch = "x86_64")]
            // SAFETY: `Isa::Avx2` comes from `Isa::available`, which checked
            // that the CPU has AVX2 and FMA.
            Isa::Avx2 => unsafe { self.apply_avx2(j, anchor, sums) },
            Isa::Baseline => self.apply_any(j, anchor, sums),
        }
    }

    /// # Safety
    /// The CPU must support AVX-512F.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f")]
    unsafe fn apply_avx512(&self, j: usize, anchor: &mut [f32], sums: &mut [f64]) -> f64 {
        self.apply_any(j, anchor, sums)
    }

    /// # Safety
    /// The CPU must support AVX2.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    unsafe fn apply_avx2(&self, j: usize, anchor: &mut [f32], sums: &mut [f64]) -> f64 {
        self.apply_any(j, anchor, sums)
    }

    #[inline(always)]
    fn apply_any(&self, j: usize, anchor: &mut [f32], sums: &mut [f64]) -> f64 {
        let d = self.d;
        let (start, end) = (self.starts[j], self.starts[j + 1]);
        sums.fill(0.0);
        let mut sumsq = 0.0f64;
        for &i in &self.members[start..end] {
            let i = i as usize;
            sumsq += f64::from(self.dist[i]);
            for (s, v) in sums.iter_mut().zip(&self.points[i * d..(i + 1) * d]) {
                *s += f64::from(*v);
            }
        }
        if end > start {
            let inv = 1.0 / (end - start) as f64;
            for (c, s) in anchor.iter_mut().zip(sums.iter()) {
                let mean = (s * inv) as f32;
                *c += self.eta * (mean - *c);
            }
        }
        sumsq
    }
}

impl Engine for CpuEngine {
    fn set_anchors(&mut self, anchors: &[f32], m: usize) -> Result<(), AnnealError> {
        self.anchors = crate::vocab::anchor_values(anchors, m, self.d)?.to_vec();
        self.m = m;
        Ok(())
    }

    fn step(&mut self, eta: f32) -> Result<f64, AnnealError> {
        if let Some(point) = self.overflow {
            return Err(AnnealError::NormOverflow { point });
        }
        let (d, m) = (self.d, self.m);
        self.packed.pack(&self.anchors, m, d);
        let query = Query {
            rows: &self.rows,
            anchors: &self.packed,
            exclude_self: false,
        };
        nearest(self.isa, &query, &mut self.assign, &mut self.dist);
        let counts = self.group_members();
        // Each anchor sums its members in point order: the same result on
        // every run and with any number of threads.
        let update = AnchorUpdate {
            points: &self.points,
            dist: &self.dist,
            members: &self.members,
            starts: &self.starts,
            d,
            eta,
        };
        let isa = self.isa;
        let mut sumsq = vec![0.0f64; m];
        self.anchors
            .par_chunks_mut(d)
            .zip(&mut sumsq)
            .enumerate()
            .for_each_init(
                || vec![0.0f64; d],
                |sums, (j, (anchor, sumsq))| {
                    *sumsq = update.apply(isa, j, anchor, sums);
                },
            );
        let energy = self.dist.iter().map(|v| f64::from(*v)).sum::<f64>() / self.n as f64;
        self.stats = AnchorStats { counts, sumsq };
        Ok(energy)
    }

    fn stats(&mut self) -> Result<AnchorStats, AnnealError> {
        Ok(self.stats.clone())
    }

    fn anchors(&mut self) -> Result<Vec<f32>, AnnealError> {
        Ok(self.anchors.clone())
    }

    fn anchor_neighbors(&mut self) -> Result<(Vec<u32>, Vec<f32>), AnnealError> {
        let (d, m) = (self.d, self.m);
        let mut rows = Rows::default();
        rows.pack(&self.anchors, d);
        self.packed.pack(&self.anchors, m, d);
        let query = Query {
            rows: &rows,
            anchors: &self.packed,
            exclude_self: true,
        };
        let mut neighbors = vec![0u32; m];
        let mut dist = vec![0.0f32; m];
        nearest(self.isa, &query, &mut neighbors, &mut dist);
        Ok((neighbors, dist))
    }

    fn assignments(&mut self) -> Result<Vec<u32>, AnnealError> {
        Ok(self.assign.clone())
    }
}

#[cfg(test)]
mod tests;
