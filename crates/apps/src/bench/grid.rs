//! The embedding grid of `apps bench`: the shapes users compress (sentence
//! and LLM embedding widths), 10 iterations, f32 and f16 input, on Gaussian
//! points as PyTorch's anchor script draws them (`torch.randn`), timed the
//! way [`super::anneal_figure`] times the seed shapes, with the useful
//! tensor work per second: `2·n·d·m` flops per iteration, `m` the anchors
//! of that iteration (maintenance changes it).

use rayon::prelude::*;

use crate::Rng;
use kiln_anneal::Output;

/// `(n, d, m)` of the grid, as `torch_anchor.py` runs it.
pub const SHAPES: [(usize, usize, usize); 4] = [
    (100_000, 384, 1024),
    (100_000, 768, 1024),
    (100_000, 1536, 1024),
    (1_000_000, 768, 4096),
];

/// Iterations of a grid run (`torch_kmeans10_*`).
pub const ITERATIONS: u32 = 10;

/// `n × d` standard normal values (Box-Muller on [`Rng`]), reproducible
/// from `seed` whatever the thread count.
pub fn gaussian_points(n: usize, d: usize, seed: u64) -> Vec<f32> {
    const ROWS: usize = 4096;
    let mut points = vec![0.0f32; n * d];
    if d == 0 {
        return points;
    }
    points
        .par_chunks_mut(ROWS * d)
        .enumerate()
        .for_each(|(block, values)| {
            let mut rng = Rng::new(seed ^ (block as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15));
            for pair in values.chunks_mut(2) {
                // u1 in (0, 1], u2 in [0, 1).
                let u1 = 1.0 - (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
                let u2 = (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
                let r = (-2.0 * u1.ln()).sqrt();
                let theta = std::f64::consts::TAU * u2;
                pair[0] = (r * theta.cos()) as f32;
                if let Some(second) = pair.get_mut(1) {
                    *second = (r * theta.sin()) as f32;
                }
            }
        });
    points
}

/// The distance flops of a run: `2·n·d·m` per iteration, `m` the anchors
/// that iteration assigned to (the initial `m`, changed by each maintenance
/// pass from the next iteration on).
pub fn assignment_flops(out: &Output, n: usize, d: usize, m: usize) -> f64 {
    let mut anchors = m as f64;
    let mut flops = 0.0;
    for it in 1..=out.iterations {
        flops += 2.0 * n as f64 * d as f64 * anchors;
        for &(at, merged, split) in &out.maintenance {
            if at == it {
                anchors += split as f64 - merged as f64;
            }
        }
    }
    flops
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gaussian_points_have_unit_spread_and_repeat() {
        let a = gaussian_points(10_000, 7, 3);
        assert_eq!(a, gaussian_points(10_000, 7, 3));
        assert_ne!(a, gaussian_points(10_000, 7, 4));
        let n = a.len() as f64;
        let mean = a.iter().map(|v| f64::from(*v)).sum::<f64>() / n;
        let var = a
            .iter()
            .map(|v| (f64::from(*v) - mean).powi(2))
            .sum::<f64>()
            / n;
        assert!(mean.abs() < 0.02, "mean {mean}");
        assert!((var - 1.0).abs() < 0.03, "variance {var}");
    }

    #[test]
    fn flops_follow_the_anchors_through_maintenance() {
        let out = Output {
            anchors: vec![],
            m: 9,
            assignments: vec![],
            iterations: 3,
            energy: 0.0,
            history: vec![],
            compression_ratio: 0.0,
            maintenance: vec![(1, 3, 2)],
        };
        // Iteration 1 with 10 anchors, then 9 for iterations 2 and 3.
        assert_eq!(assignment_flops(&out, 5, 4, 10), 2.0 * 5.0 * 4.0 * 28.0);
    }
}
