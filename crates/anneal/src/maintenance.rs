//! The maintenance pass: merge anchors that crowd each other, split anchors
//! that hold too much. Runs on the host for both backends, on statistics the
//! backend computed, so both make the same decisions from the same numbers.
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

use super::{AnchorStats, Params};
use crate::rng::Rng;

/// What maintenance looks at.
#[derive(Debug)]
pub struct Input<'a> {
    /// Current anchors, `m × d`: the pass works in this buffer and returns
    /// it as [`Result::anchors`].
    pub anchors: Vec<f32>,
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

/// A maintenance pass that changed something.
#[derive(Debug, Clone, PartialEq)]
pub struct Result {
    /// The new anchors, `m × d`.
    pub anchors: Vec<f32>,
    /// Their number.
    pub m: usize,
    /// Anchors merged away.
    pub merged: usize,
    /// Anchors split in two.
    pub split: usize,
}

/// Runs one pass; `None` when nothing changes. The anchors stay in the
/// input's buffer throughout (merged and split in place, the survivors
/// moved down over the removed, the new anchors appended: no copy, no
/// allocation per anchor): a pass runs on the host between two GPU runs,
/// so its time is the run's.
pub fn run(input: Input<'_>, params: &Params) -> Option<Result> {
    let d = input.d;
    let m = input.stats.counts.len();
    let mut anchors = input.anchors;
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
    Some(Result {
        anchors,
        m: m_new,
        merged,
        split,
    })
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

    #[test]
    fn close_anchors_merge_count_weighted_into_the_lower_index() {
        let anchors = [0.0, 0.0, 0.1, 0.0, 5.0, 5.0];
        let s = stats(&[3, 1, 4], &[3.0, 1.0, 4.0]);
        let input = Input {
            anchors: anchors.to_vec(),
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
        let r = run(input, &params).unwrap();
        assert_eq!((r.m, r.merged, r.split), (2, 1, 0));
        assert!((r.anchors[0] - 0.025).abs() < 1e-6, "{:?}", r.anchors);
        assert_eq!(&r.anchors[2..], &[5.0, 5.0]);
    }

    #[test]
    fn overloaded_anchors_split_symmetrically_within_the_cap() {
        let anchors = [1.0, 1.0, 9.0, 9.0];
        let s = stats(&[90, 10], &[90.0, 10.0]);
        let input = Input {
            anchors: anchors.to_vec(),
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
        let capped = Input {
            anchors: anchors.to_vec(),
            max_anchors: 2,
            ..input
        };
        let r = run(input, &params).unwrap();
        assert_eq!((r.m, r.merged, r.split), (3, 0, 1));
        let (a, child) = (&r.anchors[0..2], &r.anchors[4..6]);
        assert!((a[0] + child[0] - 2.0).abs() < 1e-5 && (a[1] + child[1] - 2.0).abs() < 1e-5);
        assert_ne!(a, child);
        assert_eq!(&r.anchors[2..4], &[9.0, 9.0]);
        assert_eq!(run(capped, &params), None);
    }
}
