//! The CPU engine: multi-threaded (rayon) and written so the distance loop
//! vectorizes. Distances are `|x|² + |c|² - 2 x·c` (as on the GPU), with the
//! dot products computed for 4 points × 16 anchors at a time against anchors
//! stored transposed in blocks of 16, so the inner loop is one vector FMA per
//! point across 16 anchors, with no horizontal sums. The hot function is
//! compiled for AVX-512 or AVX2+FMA when the CPU has them (checked at run
//! time), else for the baseline target.

use rayon::prelude::*;

use super::{AnchorStats, AnnealError, Engine, Points};

/// Points per block of the distance loop: 4 × 16 accumulators are 8 AVX2
/// registers (of 16), so they stay in registers with room for the operands.
const PB: usize = 4;
/// Anchors per block (one or two vectors).
const AB: usize = 16;
/// Points per rayon task.
const TASK: usize = 256;

/// The CPU engine.
#[derive(Debug)]
pub struct CpuEngine {
    points: Vec<f32>,
    norms: Vec<f32>,
    n: usize,
    d: usize,
    anchors: Vec<f32>,
    m: usize,
    assign: Vec<u32>,
    dist: Vec<f32>,
    stats: AnchorStats,
}

impl CpuEngine {
    /// An engine holding `points` (converted to f32 once).
    pub fn new(points: Points<'_>, n: usize, d: usize) -> Self {
        let points = points.to_f32();
        let norms = points
            .chunks(d)
            .map(|row| row.iter().map(|v| v * v).sum())
            .collect();
        Self {
            points,
            norms,
            n,
            d,
            anchors: Vec::new(),
            m: 0,
            assign: vec![0; n],
            dist: vec![0.0; n],
            stats: AnchorStats {
                counts: Vec::new(),
                sumsq: Vec::new(),
            },
        }
    }

    /// Nearest anchor of each row of `rows` (`count × d`, norms given) among
    /// `anchors` (`m × d`); `exclude_self` skips anchor `i` for row `i`.
    fn nearest(
        &self,
        rows: &[f32],
        row_norms: &[f32],
        anchors: &[f32],
        m: usize,
        exclude_self: bool,
    ) -> (Vec<u32>, Vec<f32>) {
        let d = self.d;
        let count = row_norms.len();
        let blocks = m.div_ceil(AB);
        // Anchors transposed per block of AB: at[b][k][j] = anchor b*AB + j, dim k.
        let mut transposed = vec![0.0f32; blocks * d * AB];
        let mut anchor_norms = vec![f32::INFINITY; blocks * AB];
        for a in 0..m {
            let (b, j) = (a / AB, a % AB);
            let row = &anchors[a * d..(a + 1) * d];
            for (k, v) in row.iter().enumerate() {
                transposed[(b * d + k) * AB + j] = *v;
            }
            anchor_norms[a] = row.iter().map(|v| v * v).sum();
        }
        let mut assign = vec![0u32; count];
        let mut dist = vec![0.0f32; count];
        assign
            .par_chunks_mut(TASK)
            .zip(dist.par_chunks_mut(TASK))
            .enumerate()
            .for_each(|(task, (assign, dist))| {
                let first = task * TASK;
                for (chunk, (assign, dist)) in
                    assign.chunks_mut(PB).zip(dist.chunks_mut(PB)).enumerate()
                {
                    let p0 = first + chunk * PB;
                    let rows_here = assign.len();
                    // Running minimum per (point, lane): lane j sees anchors
                    // j, AB + j, ... in increasing order, so a strict `<`
                    // keeps the lowest index; branch-free so it vectorizes.
                    // Padding anchors have norm +inf and never win.
                    let mut best_d = [[f32::INFINITY; AB]; PB];
                    let mut best_i = [[u32::MAX; AB]; PB];
                    for b in 0..blocks {
                        let at = &transposed[b * d * AB..(b + 1) * d * AB];
                        let norms: &[f32; AB] = anchor_norms[b * AB..(b + 1) * AB]
                            .try_into()
                            .expect("AB norms");
                        let acc = dots(&rows[p0 * d..(p0 + rows_here) * d], rows_here, d, at);
                        for i in 0..rows_here {
                            let point_norm = row_norms[p0 + i];
                            let own = if exclude_self {
                                (p0 + i) as u32
                            } else {
                                u32::MAX
                            };
                            for j in 0..AB {
                                let a = (b * AB + j) as u32;
                                let dd = (point_norm + norms[j] - 2.0 * acc[i][j]).max(0.0);
                                let dd = if a == own { f32::INFINITY } else { dd };
                                let better = dd < best_d[i][j];
                                best_d[i][j] = if better { dd } else { best_d[i][j] };
                                best_i[i][j] = if better { a } else { best_i[i][j] };
                            }
                        }
                    }
                    for i in 0..rows_here {
                        let mut best = (f32::INFINITY, u32::MAX);
                        for j in 0..AB {
                            let candidate = (best_d[i][j], best_i[i][j]);
                            if candidate.0 < best.0
                                || (candidate.0 == best.0 && candidate.1 < best.1)
                            {
                                best = candidate;
                            }
                        }
                        assign[i] = best.1;
                        dist[i] = best.0;
                    }
                }
            });
        (assign, dist)
    }
}

/// Dot products of up to `PB` rows with the `AB` anchors of one transposed
/// block, dispatched to the widest instruction set the CPU has.
fn dots(rows: &[f32], count: usize, d: usize, at: &[f32]) -> [[f32; AB]; PB] {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx512f") {
            // SAFETY: the CPU has AVX-512F, checked just above.
            return unsafe { dots_avx512(rows, count, d, at) };
        }
        if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
        {
            // SAFETY: the CPU has AVX2 and FMA, checked just above.
            return unsafe { dots_avx2(rows, count, d, at) };
        }
    }
    dots_generic::<false>(rows, count, d, at)
}

/// `FMA`: fuse with `mul_add`, only where the target has an FMA instruction
/// (elsewhere `mul_add` is a slow library call).
#[inline(always)]
fn dots_generic<const FMA: bool>(
    rows: &[f32],
    count: usize,
    d: usize,
    at: &[f32],
) -> [[f32; AB]; PB] {
    #[inline(always)]
    fn madd<const FMA: bool>(x: f32, c: f32, acc: f32) -> f32 {
        if FMA {
            x.mul_add(c, acc)
        } else {
            acc + x * c
        }
    }
    let mut acc = [[0.0f32; AB]; PB];
    if count == PB {
        // Zipped iterators: no bounds check in the hot loop.
        let (r0, rest) = rows.split_at(d);
        let (r1, rest) = rest.split_at(d);
        let (r2, rest) = rest.split_at(d);
        let r3 = &rest[..d];
        let [a0, a1, a2, a3] = &mut acc;
        for ((((c, x0), x1), x2), x3) in at.chunks_exact(AB).zip(r0).zip(r1).zip(r2).zip(r3) {
            for j in 0..AB {
                a0[j] = madd::<FMA>(*x0, c[j], a0[j]);
                a1[j] = madd::<FMA>(*x1, c[j], a1[j]);
                a2[j] = madd::<FMA>(*x2, c[j], a2[j]);
                a3[j] = madd::<FMA>(*x3, c[j], a3[j]);
            }
        }
    } else {
        for k in 0..d {
            let c = &at[k * AB..(k + 1) * AB];
            for (i, acc) in acc.iter_mut().enumerate().take(count) {
                let x = rows[i * d + k];
                for j in 0..AB {
                    acc[j] = madd::<FMA>(x, c[j], acc[j]);
                }
            }
        }
    }
    acc
}

/// # Safety
/// The CPU must support AVX-512F.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,fma")]
unsafe fn dots_avx512(rows: &[f32], count: usize, d: usize, at: &[f32]) -> [[f32; AB]; PB] {
    dots_generic::<true>(rows, count, d, at)
}

/// # Safety
/// The CPU must support AVX2 and FMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn dots_avx2(rows: &[f32], count: usize, d: usize, at: &[f32]) -> [[f32; AB]; PB] {
    dots_generic::<true>(rows, count, d, at)
}

impl Engine for CpuEngine {
    fn set_anchors(&mut self, anchors: &[f32], m: usize) -> Result<(), AnnealError> {
        self.anchors = anchors[..m * self.d].to_vec();
        self.m = m;
        Ok(())
    }

    fn step(&mut self, eta: f32) -> Result<f64, AnnealError> {
        let (d, m) = (self.d, self.m);
        let (assign, dist) = self.nearest(&self.points, &self.norms, &self.anchors, m, false);
        self.assign = assign;
        self.dist = dist;
        // Per-task partial sums, then a reduction in task order: the same
        // result on every run.
        // A few chunks per thread: each holds m × d partial sums.
        let chunk = self.n.div_ceil(4 * rayon::current_num_threads()).max(TASK);
        let partials: Vec<(Vec<f64>, Vec<u32>, Vec<f64>)> = self
            .points
            .par_chunks(chunk * d)
            .zip(self.assign.par_chunks(chunk))
            .zip(self.dist.par_chunks(chunk))
            .map(|((rows, assign), dist)| {
                let mut sums = vec![0.0f64; m * d];
                let mut counts = vec![0u32; m];
                let mut sumsq = vec![0.0f64; m];
                for ((row, a), dd) in rows.chunks(d).zip(assign).zip(dist) {
                    let a = *a as usize;
                    counts[a] += 1;
                    sumsq[a] += f64::from(*dd);
                    for (s, v) in sums[a * d..(a + 1) * d].iter_mut().zip(row) {
                        *s += f64::from(*v);
                    }
                }
                (sums, counts, sumsq)
            })
            .collect();
        let mut sums = vec![0.0f64; m * d];
        let mut counts = vec![0u32; m];
        let mut sumsq = vec![0.0f64; m];
        for (s, c, q) in &partials {
            sums.iter_mut().zip(s).for_each(|(a, b)| *a += b);
            counts.iter_mut().zip(c).for_each(|(a, b)| *a += b);
            sumsq.iter_mut().zip(q).for_each(|(a, b)| *a += b);
        }
        let energy = self.dist.iter().map(|v| f64::from(*v)).sum::<f64>() / self.n as f64;
        for j in 0..m {
            if counts[j] == 0 {
                continue;
            }
            let inv = 1.0 / f64::from(counts[j]);
            for k in 0..d {
                let c = &mut self.anchors[j * d + k];
                let mean = (sums[j * d + k] * inv) as f32;
                *c += eta * (mean - *c);
            }
        }
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
        let norms: Vec<f32> = self
            .anchors
            .chunks(self.d)
            .map(|r| r.iter().map(|v| v * v).sum())
            .collect();
        Ok(self.nearest(&self.anchors, &norms, &self.anchors, self.m, true))
    }

    fn assignments(&mut self) -> Result<Vec<u32>, AnnealError> {
        Ok(self.assign.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The straightforward distance, to check the blocked one against.
    fn brute(points: &[f32], anchors: &[f32], d: usize) -> Vec<(u32, f32)> {
        points
            .chunks(d)
            .map(|x| {
                let mut best = (u32::MAX, f32::INFINITY);
                for (j, c) in anchors.chunks(d).enumerate() {
                    let dd: f32 = x.iter().zip(c).map(|(a, b)| (a - b) * (a - b)).sum();
                    if dd < best.1 {
                        best = (j as u32, dd);
                    }
                }
                best
            })
            .collect()
    }

    #[test]
    fn blocked_assignment_matches_brute_force_for_awkward_shapes() {
        let mut rng = crate::Rng::new(11);
        for (n, d, m) in [(1, 1, 1), (7, 3, 5), (300, 17, 33), (513, 64, 40)] {
            let points = rng.f32s(n * d);
            let anchors = rng.f32s(m * d);
            let mut engine = CpuEngine::new(Points::F32(&points), n, d);
            engine.set_anchors(&anchors, m).unwrap();
            let (assign, dist) = engine.nearest(&engine.points, &engine.norms, &anchors, m, false);
            for (i, (a, dd)) in brute(&points, &anchors, d).into_iter().enumerate() {
                assert!(
                    (dist[i] - dd).abs() <= 1e-4 * dd.max(1.0),
                    "n={n} d={d} m={m} point {i}"
                );
                if assign[i] != a {
                    // A near tie may go either way under different rounding.
                    let other = brute(
                        &points[i * d..(i + 1) * d],
                        &anchors[assign[i] as usize * d..][..d],
                        d,
                    )[0]
                    .1;
                    assert!(
                        (other - dd).abs() <= 1e-4 * dd.max(1.0),
                        "n={n} d={d} m={m} point {i}"
                    );
                }
            }
        }
    }
}
