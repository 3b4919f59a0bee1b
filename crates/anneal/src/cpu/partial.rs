//! The CPU engine split at its sums, for one process of several: the
//! assignment and each anchor's sums over this process's rows
//! ([`CpuEngine::local_sums`]), then the anchors moved by the sums of all
//! processes ([`CpuEngine::move_anchors`]). The sums are the ones
//! [`CpuEngine::step`](super::Engine::step) makes (each anchor's members in
//! point order, in f64), so one process's result differs from one
//! process's of the whole input only by the order in which the processes'
//! sums are added.

use rayon::prelude::*;

use super::{CpuEngine, Isa};
use crate::{
    error::AnnealError,
    vocab::{AnchorStats, Points},
};

/// Where the parts of [`CpuEngine::local_sums`]' vector are, for `m`
/// anchors of dimension `d`: the point sums (`m × d`), the distance sums
/// (`m`), the member counts (`m`, exact in f64 below 2^53), the sum of every
/// distance (1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SumsLayout {
    /// Anchors.
    pub(crate) m: usize,
    /// Dimensions.
    pub(crate) d: usize,
}

impl SumsLayout {
    /// Values in the vector.
    pub(crate) fn len(&self) -> usize {
        self.m * self.d + 2 * self.m + 1
    }

    fn sumsq(&self) -> std::ops::Range<usize> {
        self.m * self.d..self.m * self.d + self.m
    }

    fn counts(&self) -> std::ops::Range<usize> {
        self.m * self.d + self.m..self.m * self.d + 2 * self.m
    }

    /// The statistics the driver reads, from summed vectors.
    pub(crate) fn stats(&self, sums: &[f64]) -> AnchorStats {
        AnchorStats {
            counts: sums[self.counts()].iter().map(|&c| c as u32).collect(),
            sumsq: sums[self.sumsq()].to_vec(),
        }
    }

    /// The sum of every distance, from a summed vector.
    pub(crate) fn distance_sum(&self, sums: &[f64]) -> f64 {
        sums[self.len() - 1]
    }
}

impl CpuEngine {
    /// An engine over some rows of the input (`points`: `rows × d`).
    pub(crate) fn for_rows(points: Points<'_>, rows: usize, d: usize) -> Self {
        Self::with_isa(points, rows, d, Isa::detect())
    }

    /// Assigns this engine's rows to the current anchors and returns their
    /// sums ([`SumsLayout`]); the anchors do not move.
    pub(crate) fn local_sums(&mut self) -> Result<Vec<f64>, AnnealError> {
        if let Some(point) = self.overflow {
            return Err(AnnealError::NormOverflow { point });
        }
        let (d, m) = (self.d, self.m);
        self.packed.pack(&self.anchors, m, d);
        let query = super::Query {
            rows: &self.rows,
            anchors: &self.packed,
            exclude_self: false,
        };
        super::nearest(self.isa, &query, &mut self.assign, &mut self.dist);
        let counts = self.group_members();
        let layout = SumsLayout { m, d };
        let mut out = vec![0.0f64; layout.len()];
        let (sums, rest) = out.split_at_mut(m * d);
        let (sumsq, rest) = rest.split_at_mut(m);
        let (points, dist) = (&self.points, &self.dist);
        let (members, starts) = (&self.members, &self.starts);
        // Each anchor's members in point order, as `AnchorUpdate` sums them.
        sums.par_chunks_mut(d.max(1))
            .zip(sumsq.par_iter_mut())
            .enumerate()
            .for_each(|(j, (sums, sumsq))| {
                for &i in &members[starts[j]..starts[j + 1]] {
                    let i = i as usize;
                    *sumsq += f64::from(dist[i]);
                    for (s, v) in sums.iter_mut().zip(&points[i * d..(i + 1) * d]) {
                        *s += f64::from(*v);
                    }
                }
            });
        for (slot, c) in rest[..m].iter_mut().zip(&counts) {
            *slot = f64::from(*c);
        }
        rest[m] = self.dist.iter().map(|v| f64::from(*v)).sum::<f64>();
        Ok(out)
    }

    /// Moves each anchor with members toward their mean by `eta`, from the
    /// sums of every process ([`SumsLayout`]), as the one-process step does.
    pub(crate) fn move_anchors(&mut self, sums: &[f64], eta: f32) {
        let (d, m) = (self.d, self.m);
        let layout = SumsLayout { m, d };
        let counts = &sums[layout.counts()];
        self.anchors
            .par_chunks_mut(d.max(1))
            .zip(sums[..m * d].par_chunks(d.max(1)))
            .zip(counts.par_iter())
            .for_each(|((anchor, sums), &count)| {
                if count > 0.0 {
                    let inv = 1.0 / count;
                    for (c, s) in anchor.iter_mut().zip(sums) {
                        let mean = (s * inv) as f32;
                        *c += eta * (mean - *c);
                    }
                }
            });
    }
}
