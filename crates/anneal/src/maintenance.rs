//! The maintenance pass: merge anchors that crowd each other, split anchors
//! that hold too much. Decided on the host for every engine ([`plan`]), on
//! statistics the engine computed, so all make the same decisions from the
//! same numbers; the decisions read no anchor value, so the [`Plan`] (one
//! [`AnnealRowOp`] per new anchor, and the split directions) is applied
//! where the anchors are: by [`Plan::apply`] on the host, or by the GPU
//! engine's `anneal_apply_rows` on the device, with the same bits.
//!
//! 1. **Merge**, anchors `k = 0..m` in order: with `j` its nearest other
//!    anchor, if neither was merged in this pass and their squared distance
//!    is below `merge_frac · E`, the lower index keeps the count-weighted mean
//!    of the two (weights `max(count, 1)`), takes both counts and member
//!    distances, and the higher index is removed.
//! 2. **Split**, surviving anchors in order, skipping those just merged: an
//!    anchor with `count >= 2` and either `count > split_load · n / m_alive`
//!    or `sumsq / count > split_var · E` becomes two anchors at `c ± δ`, where
//!    `δ` is a unit direction drawn from [`crate::Rng`] seeded with
//!    `seed ^ (iteration << 32) ^ j`, scaled by `0.5 · sqrt(sumsq / count /
//!    d)`; the new anchor goes after all survivors. Splits stop when the total
//!    reaches `max_anchors`.

use crate::bindings::types::{
    AnnealRowOp, KILN_ANNEAL_ROW_COPY, KILN_ANNEAL_ROW_MERGE, KILN_ANNEAL_ROW_SPLIT_MINUS,
    KILN_ANNEAL_ROW_SPLIT_PLUS,
};

use crate::rng::Rng;
use crate::{
    error::AnnealError,
    vocab::{AnchorStats, Params},
};

/// What a pass decided, without the anchors' values: the decisions read
/// only the statistics and the neighbours, so an engine can apply a plan
/// where its anchors are (the GPU, with `anneal_apply_rows`) and only the
/// plan travels. [`Plan::apply`] is the same on the host, bit for bit.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// Anchors before the pass.
    pub m: usize,
    /// One op per new anchor, in order: `rows.len()` anchors after it.
    pub rows: Vec<AnnealRowOp>,
    /// The split directions, `split × d` (each value one draw of
    /// [`crate::Rng::next_f32`]).
    pub directions: Vec<f32>,
    /// Anchors merged away.
    pub merged: usize,
    /// Anchors split in two.
    pub split: usize,
}

impl Plan {
    /// Anchors after the pass.
    pub fn m_new(&self) -> usize {
        self.rows.len()
    }

    /// Refuses a plan that would read past `m` anchors of dimension `d`
    /// (or whose sizes disagree), or write more than `capacity` anchors:
    /// every op's rows and direction are checked, so neither
    /// [`Plan::apply`] nor the GPU's `anneal_apply_rows` reads out of bounds.
    pub fn check(&self, m: usize, d: usize, capacity: usize) -> Result<(), AnnealError> {
        let bad = |what| Err(AnnealError::BadPlan { what });
        if self.m != m {
            return bad("made for another number of anchors");
        }
        if self.m_new() > capacity {
            return bad("more anchors than the engine holds");
        }
        if Some(self.directions.len()) != self.split.checked_mul(d) {
            return bad("the directions are not split x d values");
        }
        for op in &self.rows {
            let ok = (op.src as usize) < m
                && match op.kind {
                    KILN_ANNEAL_ROW_COPY => true,
                    KILN_ANNEAL_ROW_MERGE => (op.other as usize) < m,
                    KILN_ANNEAL_ROW_SPLIT_PLUS | KILN_ANNEAL_ROW_SPLIT_MINUS => {
                        (op.dir as usize) < self.split
                    }
                    _ => false,
                };
            if !ok {
                return bad("an op reads past the anchors or the directions, or has no kind");
            }
        }
        Ok(())
    }

    /// The anchors after the pass, from `anchors` (`m × d` values) before
    /// it: f64 steps from the f32 values, rounded to f32 once; a plan that
    /// does not fit them ([`Plan::check`]) is an error.
    pub fn apply(&self, anchors: &[f32], d: usize) -> Result<Vec<f32>, AnnealError> {
        let m = anchors.len().checked_div(d).unwrap_or(0);
        self.check(m, d, usize::MAX)?;
        let row = |j: u32| &anchors[j as usize * d..(j as usize + 1) * d];
        let mut out = Vec::with_capacity(self.rows.len() * d);
        for op in &self.rows {
            let src = row(op.src);
            match op.kind {
                KILN_ANNEAL_ROW_MERGE => {
                    let other = row(op.other);
                    out.extend(src.iter().zip(other).map(|(a, b)| {
                        ((f64::from(*a) * op.a + f64::from(*b) * op.b) / (op.a + op.b)) as f32
                    }));
                }
                KILN_ANNEAL_ROW_SPLIT_PLUS | KILN_ANNEAL_ROW_SPLIT_MINUS => {
                    let dir = &self.directions[op.dir as usize * d..(op.dir as usize + 1) * d];
                    let plus = op.kind == KILN_ANNEAL_ROW_SPLIT_PLUS;
                    out.extend(src.iter().zip(dir).map(|(c, u)| {
                        let step = f64::from(*u) * op.a;
                        (if plus {
                            f64::from(*c) + step
                        } else {
                            f64::from(*c) - step
                        }) as f32
                    }));
                }
                _ => out.extend_from_slice(src),
            }
        }
        Ok(out)
    }
}

/// What [`plan`] looks at: no anchor value.
#[derive(Debug, Clone, Copy)]
pub struct PlanInput<'a> {
    /// Dimension.
    pub d: usize,
    /// Stats of the last assignment.
    pub stats: &'a AnchorStats,
    /// Each anchor's nearest other anchor (`u32::MAX`: none).
    pub neighbors: &'a [u32],
    /// Squared distance to it.
    pub neighbor_dist: &'a [f32],
    /// Energy of the last assignment.
    pub energy: f64,
    /// Points.
    pub n: usize,
    /// The iteration (for the split directions' seed).
    pub iteration: u32,
    /// Cap on the anchors.
    pub max_anchors: usize,
}

/// Decides one pass (module docs); `None` when nothing changes. Refused
/// when the statistics and neighbours are not of the same `m` anchors.
pub fn plan(input: PlanInput<'_>, params: &Params) -> Result<Option<Plan>, AnnealError> {
    let d = input.d;
    let m = input.stats.counts.len();
    for (what, len) in [
        ("stats.sumsq", input.stats.sumsq.len()),
        ("neighbors", input.neighbors.len()),
        ("neighbor_dist", input.neighbor_dist.len()),
    ] {
        if len != m {
            return Err(AnnealError::PlanInput { what, len, m });
        }
    }
    let mut counts: Vec<u64> = input.stats.counts.iter().map(|&c| u64::from(c)).collect();
    let mut sumsq = input.stats.sumsq.clone();
    let mut removed = vec![false; m];
    // The anchor a kept one was merged with, with both weights.
    let mut merged_with: Vec<Option<(u32, f64, f64)>> = vec![None; m];
    let merge_below = f64::from(params.merge_frac) * input.energy;
    let mut merged = 0;
    for k in 0..m {
        let j = input.neighbors[k] as usize;
        if j >= m
            || j == k
            || removed[k]
            || removed[j]
            || merged_with[k].is_some()
            || merged_with[j].is_some()
        {
            continue;
        }
        if f64::from(input.neighbor_dist[k]) >= merge_below {
            continue;
        }
        let (keep, drop) = (k.min(j), k.max(j));
        let (wk, wd) = (counts[keep].max(1) as f64, counts[drop].max(1) as f64);
        merged_with[keep] = Some((drop as u32, wk, wd));
        counts[keep] += counts[drop];
        sumsq[keep] += sumsq[drop];
        removed[drop] = true;
        merged += 1;
    }

    let alive = m - merged;
    let mean_load = input.n as f64 / alive as f64;
    let mut rows = Vec::with_capacity(alive);
    let mut children = Vec::new();
    let mut directions: Vec<f32> = Vec::new();
    let mut draws = vec![0f32; d];
    let op = |kind, src: usize, other: u32, dir: u32, a: f64, b: f64| AnnealRowOp {
        kind,
        src: src as u32,
        other,
        dir,
        a,
        b,
    };
    for j in 0..m {
        if removed[j] {
            continue;
        }
        let count = counts[j];
        let spread = if count > 0 {
            sumsq[j] / count as f64
        } else {
            0.0
        };
        let overloaded = count as f64 > f64::from(params.split_load) * mean_load;
        let scattered = spread > f64::from(params.split_var) * input.energy;
        let room = alive + children.len() < input.max_anchors;
        if let Some((other, wk, wd)) = merged_with[j] {
            rows.push(op(KILN_ANNEAL_ROW_MERGE, j, other, 0, wk, wd));
        } else if count >= 2 && (overloaded || scattered) && room {
            let mut rng = Rng::new(params.seed ^ (u64::from(input.iteration) << 32) ^ j as u64);
            draws.iter_mut().for_each(|u| *u = rng.next_f32());
            let length = draws
                .iter()
                .map(|&v| f64::from(v) * f64::from(v))
                .sum::<f64>()
                .sqrt()
                .max(f64::MIN_POSITIVE);
            let scale = 0.5 * (spread / d as f64).sqrt() / length;
            let dir = children.len() as u32;
            directions.extend_from_slice(&draws);
            rows.push(op(KILN_ANNEAL_ROW_SPLIT_MINUS, j, 0, dir, scale, 0.0));
            children.push(op(KILN_ANNEAL_ROW_SPLIT_PLUS, j, 0, dir, scale, 0.0));
        } else {
            rows.push(op(KILN_ANNEAL_ROW_COPY, j, 0, 0, 0.0, 0.0));
        }
    }
    if merged == 0 && children.is_empty() {
        return Ok(None);
    }
    let split = children.len();
    rows.extend(children);
    Ok(Some(Plan {
        m,
        rows,
        directions,
        merged,
        split,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stats(counts: &[u32], sumsq: &[f64]) -> AnchorStats {
        AnchorStats {
            counts: counts.to_vec(),
            sumsq: sumsq.to_vec(),
        }
    }

    /// The pass on the host: the plan applied to `anchors`, with its sizes.
    fn run(
        anchors: &[f32],
        input: PlanInput<'_>,
        params: &Params,
    ) -> Option<(Vec<f32>, usize, usize, usize)> {
        let plan = plan(input, params).unwrap()?;
        Some((
            plan.apply(anchors, input.d).unwrap(),
            plan.m_new(),
            plan.merged,
            plan.split,
        ))
    }

    #[test]
    fn close_anchors_merge_count_weighted_into_the_lower_index() {
        let anchors = [0.0, 0.0, 0.1, 0.0, 5.0, 5.0];
        let s = stats(&[3, 1, 4], &[3.0, 1.0, 4.0]);
        let input = PlanInput {
            d: 2,
            stats: &s,
            neighbors: &[1, 0, 1],
            neighbor_dist: &[0.01, 0.01, 40.0],
            energy: 1.0,
            n: 8,
            iteration: 5,
            max_anchors: 6,
        };
        let params = Params {
            split_load: 100.0,
            split_var: 100.0,
            ..Params::default()
        };
        let (anchors, m, merged, split) = run(&anchors, input, &params).unwrap();
        assert_eq!((m, merged, split), (2, 1, 0));
        assert!((anchors[0] - 0.025).abs() < 1e-6, "{anchors:?}");
        assert_eq!(&anchors[2..], &[5.0, 5.0]);
    }

    #[test]
    fn overloaded_anchors_split_symmetrically_within_the_cap() {
        let anchors = [1.0, 1.0, 9.0, 9.0];
        let s = stats(&[90, 10], &[90.0, 10.0]);
        let input = PlanInput {
            d: 2,
            stats: &s,
            neighbors: &[1, 0],
            neighbor_dist: &[128.0, 128.0],
            energy: 1.0,
            n: 100,
            iteration: 5,
            max_anchors: 3,
        };
        // n / m = 50 points per anchor; 90 > 1.5 * 50.
        let params = Params {
            split_load: 1.5,
            ..Params::default()
        };
        let capped = PlanInput {
            max_anchors: 2,
            ..input
        };
        let (moved, m, merged, split) = run(&anchors, input, &params).unwrap();
        assert_eq!((m, merged, split), (3, 0, 1));
        let (a, child) = (&moved[0..2], &moved[4..6]);
        assert!((a[0] + child[0] - 2.0).abs() < 1e-5 && (a[1] + child[1] - 2.0).abs() < 1e-5);
        assert_ne!(a, child);
        assert_eq!(&moved[2..4], &[9.0, 9.0]);
        assert_eq!(run(&anchors, capped, &params), None);
    }

    /// The pass as it was written before plans (in place on the host's
    /// anchors): [`plan`] + [`Plan::apply`] must give its bits.
    fn written_in_place(
        anchors: Vec<f32>,
        input: PlanInput<'_>,
        params: &Params,
    ) -> Option<(Vec<f32>, usize, usize, usize)> {
        let d = input.d;
        let m = input.stats.counts.len();
        let mut anchors = anchors;
        anchors.truncate(m * d);
        let mut counts: Vec<u64> = input.stats.counts.iter().map(|&c| u64::from(c)).collect();
        let mut sumsq = input.stats.sumsq.clone();
        let mut removed = vec![false; m];
        let mut touched = vec![false; m];
        let merge_below = f64::from(params.merge_frac) * input.energy;
        let mut merged = 0;
        for k in 0..m {
            let j = input.neighbors[k] as usize;
            if j >= m || j == k || removed[k] || removed[j] || touched[k] || touched[j] {
                continue;
            }
            if f64::from(input.neighbor_dist[k]) >= merge_below {
                continue;
            }
            let (keep, drop) = (k.min(j), k.max(j));
            let (wk, wd) = (counts[keep].max(1) as f64, counts[drop].max(1) as f64);
            // `keep < drop`: the kept anchor's row is in the first half.
            let (head, tail) = anchors.split_at_mut(drop * d);
            let kept = &mut head[keep * d..(keep + 1) * d];
            for (a, b) in kept.iter_mut().zip(&tail[..d]) {
                *a = ((f64::from(*a) * wk + f64::from(*b) * wd) / (wk + wd)) as f32;
            }
            counts[keep] += counts[drop];
            sumsq[keep] += sumsq[drop];
            removed[drop] = true;
            touched[keep] = true;
            merged += 1;
        }

        let alive = m - merged;
        let mean_load = input.n as f64 / alive as f64;
        // Survivors are written at `kept` (<= j), in order.
        let mut kept = 0;
        let mut children: Vec<f32> = Vec::new();
        let mut direction = vec![0f64; d];
        let mut split = 0;
        for j in 0..m {
            if removed[j] {
                continue;
            }
            let anchor = &mut anchors[j * d..(j + 1) * d];
            let count = counts[j];
            let spread = if count > 0 {
                sumsq[j] / count as f64
            } else {
                0.0
            };
            let overloaded = count as f64 > f64::from(params.split_load) * mean_load;
            let scattered = spread > f64::from(params.split_var) * input.energy;
            let room = alive + split < input.max_anchors;
            if !touched[j] && count >= 2 && (overloaded || scattered) && room {
                let mut rng = Rng::new(params.seed ^ (u64::from(input.iteration) << 32) ^ j as u64);
                direction
                    .iter_mut()
                    .for_each(|u| *u = f64::from(rng.next_f32()));
                let length = direction
                    .iter()
                    .map(|v| v * v)
                    .sum::<f64>()
                    .sqrt()
                    .max(f64::MIN_POSITIVE);
                let scale = 0.5 * (spread / d as f64).sqrt() / length;
                children.extend(
                    anchor
                        .iter()
                        .zip(&direction)
                        .map(|(c, u)| (f64::from(*c) + u * scale) as f32),
                );
                for (c, u) in anchor.iter_mut().zip(&direction) {
                    *c = (f64::from(*c) - u * scale) as f32;
                }
                split += 1;
            }
            if kept != j {
                anchors.copy_within(j * d..(j + 1) * d, kept * d);
            }
            kept += 1;
        }
        if merged == 0 && split == 0 {
            return None;
        }
        let m_new = alive + split;
        anchors.truncate(kept * d);
        anchors.extend_from_slice(&children);
        Some((anchors, m_new, merged, split))
    }

    #[test]
    fn a_plan_applied_gives_the_in_place_pass_bit_for_bit() {
        let mut rng = Rng::new(5);
        let mut changed = 0;
        for trial in 0..200u32 {
            let m = 1 + (rng.next_u64() % 40) as usize;
            let d = 1 + (rng.next_u64() % 20) as usize;
            let anchors: Vec<f32> = rng.f32s(m * d).iter().map(|v| v * 10.0).collect();
            let counts: Vec<u32> = (0..m).map(|_| (rng.next_u64() % 30) as u32).collect();
            let sumsq: Vec<f64> = counts
                .iter()
                .map(|&c| f64::from(c) * f64::from(rng.next_f32().abs()) * 3.0)
                .collect();
            let s = stats(&counts, &sumsq);
            let neighbors: Vec<u32> = (0..m)
                .map(|_| match rng.next_u64() % 8 {
                    0 => u32::MAX,
                    _ => (rng.next_u64() % m as u64) as u32,
                })
                .collect();
            let neighbor_dist: Vec<f32> = (0..m).map(|_| rng.next_f32().abs()).collect();
            let input = PlanInput {
                d,
                stats: &s,
                neighbors: &neighbors,
                neighbor_dist: &neighbor_dist,
                energy: 1.0,
                n: 20 * m,
                iteration: trial,
                max_anchors: m + (rng_cap(trial) % (m as u32 + 1)) as usize,
            };
            let params = Params {
                merge_frac: 0.3,
                split_load: 1.5,
                split_var: 1.2,
                ..Params::default()
            };
            let expected = written_in_place(anchors.clone(), input, &params);
            let got = run(&anchors, input, &params);
            let bits = |r: &Option<(Vec<f32>, usize, usize, usize)>| {
                r.as_ref().map(|(a, m, merged, split)| {
                    let a: Vec<u32> = a.iter().map(|v| v.to_bits()).collect();
                    (a, *m, *merged, *split)
                })
            };
            assert_eq!(bits(&got), bits(&expected), "trial {trial}");
            changed += usize::from(expected.is_some_and(|r| r.2 > 0 && r.3 > 0));
        }
        assert!(changed > 20, "only {changed} trials both merged and split");
    }

    proptest::proptest! {
        /// Statistics and neighbours of any lengths: a plan (or none) when
        /// they are of the same anchors, a typed refusal otherwise, never
        /// an index out of bounds.
        #[test]
        fn plan_inputs_of_other_lengths_are_refused_not_a_panic(
            m in 0usize..6,
            sums in 0usize..6,
            near in 0usize..6,
            dists in 0usize..6,
            d in 0usize..3,
        ) {
            let stats = stats(&vec![3; m], &vec![1.0; sums]);
            let neighbors: Vec<u32> = (0..near as u32).map(|k| (k + 1) % 6).collect();
            let input = PlanInput {
                d,
                stats: &stats,
                neighbors: &neighbors,
                neighbor_dist: &vec![0.0; dists],
                energy: 1.0,
                n: 3 * m,
                iteration: 1,
                max_anchors: 2 * m,
            };
            let params = Params { merge_frac: 0.5, ..Params::default() };
            let result = plan(input, &params);
            proptest::prop_assert_eq!(result.is_ok(), sums == m && near == m && dists == m);
            if let Err(e) = result {
                proptest::prop_assert!(matches!(e, AnnealError::PlanInput { .. }), "{}", e);
            }
        }
    }

    #[test]
    fn a_plan_that_does_not_fit_its_anchors_is_an_error_not_a_panic() {
        let op = |kind, src, other, dir| AnnealRowOp {
            kind,
            src,
            other,
            dir,
            a: 1.0,
            b: 1.0,
        };
        let good = Plan {
            m: 3,
            rows: vec![
                op(KILN_ANNEAL_ROW_MERGE, 0, 2, 0),
                op(KILN_ANNEAL_ROW_SPLIT_MINUS, 1, 0, 0),
                op(KILN_ANNEAL_ROW_SPLIT_PLUS, 1, 0, 0),
            ],
            directions: vec![0.5; 4],
            merged: 1,
            split: 1,
        };
        let anchors = vec![1.0f32; 3 * 4];
        assert_eq!(good.apply(&anchors, 4).unwrap().len(), 3 * 4);
        assert!(good.check(3, 4, 3).is_ok());
        let mut bad = Vec::new();
        for (i, edit) in [
            op(KILN_ANNEAL_ROW_COPY, 3, 0, 0),
            op(KILN_ANNEAL_ROW_MERGE, 0, 3, 0),
            op(KILN_ANNEAL_ROW_SPLIT_PLUS, 0, 0, 1),
            op(7, 0, 0, 0),
            op(KILN_ANNEAL_ROW_COPY, u32::MAX, 0, 0),
        ]
        .into_iter()
        .enumerate()
        {
            let mut plan = good.clone();
            plan.rows[i % 3] = edit;
            bad.push(plan);
        }
        let mut short = good.clone();
        short.directions.pop();
        bad.push(short);
        let mut huge_split = good.clone();
        huge_split.split = usize::MAX;
        bad.push(huge_split);
        for plan in &bad {
            let err = plan.apply(&anchors, 4).unwrap_err().to_string();
            assert!(err.starts_with("maintenance plan: "), "{err}");
            assert!(!err.contains('\n'), "{err}");
        }
        // Made for other anchors: fewer rows than the plan reads, or more
        // new anchors than the engine holds.
        assert!(good.apply(&anchors[..2 * 4], 4).is_err());
        assert!(good.apply(&[], 4).is_err());
        assert!(good.apply(&anchors, 0).is_err());
        assert!(good.check(3, 4, 2).is_err());
        assert!(good.check(4, 4, 9).is_err());
    }

    fn rng_cap(trial: u32) -> u32 {
        trial.wrapping_mul(2_654_435_761) >> 7
    }
}
