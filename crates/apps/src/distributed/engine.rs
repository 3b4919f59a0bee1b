//! The anneal engine of one process of several ([`RankEngine`]): the CPU
//! engine over this rank's rows, its sums combined with the other ranks'
//! each step through a [`Communicator`]. Every rank runs the same driver
//! (`anneal::run_with`) on the same combined statistics; the anchors any
//! rank sets are rank 0's, broadcast, so rank 0's maintenance decides.

use crate::anneal::cpu::{CpuEngine, SumsLayout};
use crate::anneal::{self, AnchorStats, AnnealError, Engine, Problem};

use super::{Communicator, DistError};

/// One rank's engine: its rows on the CPU, the rest through `C`.
#[derive(Debug)]
pub struct RankEngine<C> {
    local: CpuEngine,
    comm: C,
    /// The rows this rank holds.
    rows: std::ops::Range<usize>,
    n: usize,
    d: usize,
    m: usize,
    stats: AnchorStats,
}

fn comm_error(e: DistError) -> AnnealError {
    AnnealError::Input(e.to_string())
}

impl<C: Communicator> RankEngine<C> {
    /// The engine of `problem` (from `anneal::validate_rows`: this rank's
    /// rows) over `comm`.
    pub fn new(problem: &Problem<'_>, comm: C) -> Self {
        let rows = problem.rows();
        Self {
            local: CpuEngine::for_rows(problem.points(), rows.len(), problem.d()),
            comm,
            rows,
            n: problem.n(),
            d: problem.d(),
            m: 0,
            stats: AnchorStats {
                counts: Vec::new(),
                sumsq: Vec::new(),
            },
        }
    }

    /// The communicator (to gather more after the run).
    pub fn comm(&mut self) -> &mut C {
        &mut self.comm
    }
}

impl<C: Communicator> Engine for RankEngine<C> {
    /// Each rank copies the initial anchors among its rows into an
    /// otherwise zero `m × d` matrix; their sum over the ranks is the
    /// matrix (each anchor comes from one rank; a `-0.0` coordinate comes
    /// out `+0.0`, which no distance tells apart).
    fn initial_anchors(&mut self, problem: &Problem<'_>) -> Result<Vec<f32>, AnnealError> {
        let (d, m) = (problem.d(), problem.m());
        let mut matrix = vec![0.0f64; m * d];
        let points = problem.points();
        for (j, row) in anneal::initial_rows(self.n, m, problem.params().seed)
            .into_iter()
            .enumerate()
        {
            if self.rows.contains(&row) {
                let local = row - self.rows.start;
                for (slot, v) in matrix[j * d..(j + 1) * d]
                    .iter_mut()
                    .zip(points.range_f32(local * d..(local + 1) * d))
                {
                    *slot = f64::from(v);
                }
            }
        }
        self.comm
            .all_reduce_sum(&mut matrix, "the initial anchors")
            .map_err(comm_error)?;
        Ok(matrix.into_iter().map(|v| v as f32).collect())
    }

    fn set_anchors(&mut self, anchors: &[f32], m: usize) -> Result<(), AnnealError> {
        let mut bytes: Vec<u8> = (m as u64).to_le_bytes().to_vec();
        bytes.extend(anchors[..m * self.d].iter().flat_map(|v| v.to_le_bytes()));
        self.comm
            .broadcast(&mut bytes, "setting the anchors")
            .map_err(comm_error)?;
        let (head, values) = bytes.split_at(8.min(bytes.len()));
        let m = u64::from_le_bytes(head.try_into().unwrap_or([0; 8])) as usize;
        if values.len() != m * self.d * 4 {
            return Err(AnnealError::Input(format!(
                "rank 0 sent {} bytes of anchors for {m} anchors of dimension {}",
                values.len(),
                self.d
            )));
        }
        let anchors: Vec<f32> = values
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes(b.try_into().expect("chunks of 4")))
            .collect();
        self.m = m;
        self.local.set_anchors(&anchors, m)
    }

    fn step(&mut self, eta: f32) -> Result<f64, AnnealError> {
        let layout = SumsLayout {
            m: self.m,
            d: self.d,
        };
        let mut sums = self.local.local_sums()?;
        self.comm
            .all_reduce_sum(&mut sums, "a step's statistics")
            .map_err(comm_error)?;
        self.local.move_anchors(&sums, eta);
        self.stats = layout.stats(&sums);
        Ok(layout.distance_sum(&sums) / self.n as f64)
    }

    fn stats(&mut self) -> Result<AnchorStats, AnnealError> {
        Ok(self.stats.clone())
    }

    fn anchors(&mut self) -> Result<Vec<f32>, AnnealError> {
        self.local.anchors()
    }

    fn anchor_neighbors(&mut self) -> Result<(Vec<u32>, Vec<f32>), AnnealError> {
        self.local.anchor_neighbors()
    }

    /// Every point's anchor on rank 0, in row order; nothing on the others.
    fn assignments(&mut self) -> Result<Vec<u32>, AnnealError> {
        let mine: Vec<u8> = self
            .local
            .assignments()?
            .iter()
            .flat_map(|a| a.to_le_bytes())
            .collect();
        let all = self
            .comm
            .gather(&mine, "gathering the assignments")
            .map_err(comm_error)?;
        Ok(all
            .iter()
            .flat_map(|bytes| bytes.chunks_exact(4))
            .map(|b| u32::from_le_bytes(b.try_into().expect("chunks of 4")))
            .collect())
    }
}
