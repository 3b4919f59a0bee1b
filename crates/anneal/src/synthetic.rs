//! Reproducible synthetic points ([`synthetic_points`]), and any rows of
//! them made alone ([`synthetic_rows`]): the CLI's and the tests' data.

use crate::rng::Rng;

/// `n × d` points from a seeded mixture of `clusters` Gaussian-ish blobs
/// (uniform centers in [-1, 1), uniform noise of width `spread`): data with
/// structure for anchors to find, reproducible from `seed` (whatever the
/// thread count: each block of rows has its own generator).
pub fn synthetic_points(n: usize, d: usize, clusters: usize, spread: f32, seed: u64) -> Vec<f32> {
    synthetic_rows(d, clusters, spread, seed, 0..n)
}

/// Rows `rows` of [`synthetic_points`]' matrix, the same bits, made without
/// the others: one rank of several makes only its own rows.
pub fn synthetic_rows(
    d: usize,
    clusters: usize,
    spread: f32,
    seed: u64,
    rows: std::ops::Range<usize>,
) -> Vec<f32> {
    use rayon::prelude::*;
    // Rows per block of the whole matrix, each block with its generator.
    const ROWS: usize = 4096;
    let mut rng = Rng::new(seed);
    let clusters = clusters.max(1);
    let centers = rng.f32s(clusters * d);
    let mut points = vec![0.0f32; rows.len() * d];
    if d == 0 || rows.is_empty() {
        return points;
    }
    // The pieces of `points` in each block: the first may start mid-block.
    let head = (rows.start / ROWS + 1) * ROWS - rows.start;
    let (first, rest) = points.split_at_mut(head.min(rows.len()) * d);
    let pieces: Vec<(usize, usize, &mut [f32])> =
        std::iter::once((rows.start / ROWS, rows.start % ROWS, first))
            .chain(
                rest.chunks_mut(ROWS * d)
                    .enumerate()
                    .map(|(i, piece)| (rows.start / ROWS + 1 + i, 0, piece)),
            )
            .collect();
    pieces.into_par_iter().for_each(|(block, skip, piece)| {
        let mut rng = Rng::new(seed ^ (block as u64 + 1).wrapping_mul(0xA076_1D64_78BD_642F));
        // The rows of this block before the piece: one draw for the
        // cluster and d for the noise each.
        for _ in 0..skip * (d + 1) {
            rng.next_u64();
        }
        for row in piece.chunks_mut(d) {
            let c = (rng.next_u64() % clusters as u64) as usize;
            for (k, v) in row.iter_mut().enumerate() {
                *v = centers[c * d + k] + spread * rng.next_f32();
            }
        }
    });
    points
}
