//! What an index kept of the points: each point's squared distance to its
//! stored anchor, in f64, summed in a fixed order (so the energy recomputed
//! from an index is the same on every machine and thread count), the
//! reconstruction error and the anchors' spread.

use rayon::prelude::*;
use serde::Serialize;

use super::{Index, IndexError};
use crate::vocab::Points;

/// Rows per block of the error passes: fixed, so the sum's order (and so
/// its value) does not depend on the thread count.
pub(super) const BLOCK: usize = 4096;

/// The squared distance of every point to its assigned anchor, in f64, in
/// parallel by blocks of rows (each block's values converted to f32 once).
fn squared_errors(points: Points<'_>, d: usize, anchors: &[f32], assignments: &[u32]) -> Vec<f64> {
    let mut errors = vec![0f64; assignments.len()];
    errors
        .par_chunks_mut(BLOCK)
        .zip(assignments.par_chunks(BLOCK))
        .enumerate()
        .for_each(|(b, (out, assigned))| {
            let start = b * BLOCK * d;
            let rows = points.range_f32(start..start + assigned.len() * d);
            for ((e, row), &a) in out.iter_mut().zip(rows.chunks_exact(d)).zip(assigned) {
                let anchor = &anchors[a as usize * d..(a as usize + 1) * d];
                *e = row
                    .iter()
                    .zip(anchor)
                    .map(|(&x, &c)| {
                        let diff = f64::from(x) - f64::from(c);
                        diff * diff
                    })
                    .sum();
            }
        });
    errors
}

/// The mean of `errors`, summed by blocks in order.
fn mean_by_blocks(errors: &[f64]) -> f64 {
    if errors.is_empty() {
        return 0.0;
    }
    let total: f64 = errors.chunks(BLOCK).map(|b| b.iter().sum::<f64>()).sum();
    total / errors.len() as f64
}

/// The mean squared distance of each point to its assigned anchor, in f64,
/// summed in a fixed order: the same value on every machine. Refused when
/// the shapes do not agree (`d` of 0, anchors not whole rows, an
/// assignment past them, points not one row per assignment).
pub fn energy(
    points: Points<'_>,
    d: usize,
    anchors: &[f32],
    assignments: &[u32],
) -> Result<f64, IndexError> {
    check_shapes(points.len(), d, anchors, assignments)?;
    Ok(mean_by_blocks(&squared_errors(
        points,
        d,
        anchors,
        assignments,
    )))
}

/// Refuses what [`squared_errors`] cannot measure: `d` of 0, anchors that
/// are not whole rows, an assignment past the anchors, points that are not
/// one row per assignment.
fn check_shapes(
    values: usize,
    d: usize,
    anchors: &[f32],
    assignments: &[u32],
) -> Result<(), IndexError> {
    let invalid = |message: String| Err(IndexError::Invalid { message });
    if d == 0 || !anchors.len().is_multiple_of(d) {
        return invalid(format!("{} anchor values for d = {d}", anchors.len()));
    }
    let m = anchors.len() / d;
    if let Some((point, a)) = assignments
        .iter()
        .enumerate()
        .find(|(_, &a)| a as usize >= m)
    {
        return invalid(format!(
            "point {point} is assigned to anchor {a}, but there are {m} anchors"
        ));
    }
    if assignments.len().checked_mul(d) != Some(values) {
        return Err(IndexError::InputMismatch {
            what: format!(
                "{values} values are not {} points of dimension {d}",
                assignments.len()
            ),
        });
    }
    Ok(())
}

/// What an index kept of the points: the reconstruction error (each point
/// replaced by its anchor) and the anchors' spread.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Reconstruction {
    /// Mean squared error over the points (the energy, recomputed).
    pub mse: f64,
    /// The largest squared error, and its point.
    pub max_squared_error: f64,
    /// The point with the largest squared error.
    pub max_point: u64,
    /// `index.json`'s `energy`.
    pub stored_energy: f64,
    /// `|mse - stored_energy| / stored_energy` (0 when both are 0).
    pub energy_relative_difference: f64,
    /// Mean squared distance of an anchor's members to it: min, median,
    /// max (over the anchors with members).
    pub anchor_mse: Spread,
}

/// Min, median and max of a set of values.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Spread {
    /// Smallest.
    pub min: f64,
    /// Median (the lower middle of an even count).
    pub median: f64,
    /// Largest.
    pub max: f64,
}

impl Spread {
    /// Of `values` (all zero when empty).
    fn of(mut values: Vec<f64>) -> Self {
        if values.is_empty() {
            return Self {
                min: 0.0,
                median: 0.0,
                max: 0.0,
            };
        }
        values.sort_by(f64::total_cmp);
        Self {
            min: values[0],
            median: values[(values.len() - 1) / 2],
            max: values[values.len() - 1],
        }
    }
}

/// Members per anchor (min, median, max over all anchors) and the anchors
/// holding none: what the index alone says. Refused for an index that
/// [`Index::read`] would refuse.
pub fn member_spread(index: &Index) -> Result<(Spread, u64), IndexError> {
    index.check()?;
    let mut counts = vec![0u64; index.meta.m as usize];
    for &a in &index.assignments {
        counts[a as usize] += 1;
    }
    let empty = counts.iter().filter(|&&c| c == 0).count() as u64;
    Ok((
        Spread::of(counts.iter().map(|&c| c as f64).collect()),
        empty,
    ))
}

impl Reconstruction {
    /// Measures `index` against `points` (checked by [`Index::check_input`]
    /// to be the index's own; refused here when the index is one
    /// [`Index::read`] would refuse or the points are not `n × d` values).
    pub fn measure(index: &Index, points: Points<'_>) -> Result<Self, IndexError> {
        index.check()?;
        let meta = &index.meta;
        let (d, m) = (meta.d as usize, meta.m as usize);
        check_shapes(points.len(), d, &index.anchors, &index.assignments)?;
        let errors = squared_errors(points, d, &index.anchors, &index.assignments);
        let mse = mean_by_blocks(&errors);
        let (max_point, max_squared_error) = errors
            .iter()
            .copied()
            .enumerate()
            .max_by(|a, b| a.1.total_cmp(&b.1))
            .unwrap_or((0, 0.0));
        let mut counts = vec![0u64; m];
        let mut sums = vec![0f64; m];
        for (&a, &e) in index.assignments.iter().zip(&errors) {
            counts[a as usize] += 1;
            sums[a as usize] += e;
        }
        let stored = meta.energy;
        let diff = (mse - stored).abs();
        Ok(Self {
            mse,
            max_squared_error,
            max_point: max_point as u64,
            stored_energy: stored,
            energy_relative_difference: if diff == 0.0 {
                0.0
            } else {
                diff / stored.abs()
            },
            anchor_mse: Spread::of(
                counts
                    .iter()
                    .zip(&sums)
                    .filter(|(&c, _)| c > 0)
                    .map(|(&c, &s)| s / c as f64)
                    .collect(),
            ),
        })
    }
}
