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
    n: usize,
    d: usize,
    m: usize,
    stats: AnchorStats,
}

pub(super) fn comm_error(e: DistError) -> AnnealError {
    AnnealError::Input(e.to_string())
}

impl<C: Communicator> RankEngine<C> {
    /// The engine of `problem` (from `anneal::validate_rows`: this rank's
    /// rows) over `comm`.
    pub fn new(problem: &Problem<'_>, comm: C) -> Self {
        Self {
            local: CpuEngine::for_rows(problem.points(), problem.rows().len(), problem.d()),
            comm,
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
    fn initial_anchors(&mut self, problem: &Problem<'_>) -> Result<Vec<f32>, AnnealError> {
        initial_anchors(&mut self.comm, problem)
    }

    fn set_anchors(&mut self, anchors: &[f32], m: usize) -> Result<(), AnnealError> {
        let (anchors, m) = broadcast_anchors(&mut self.comm, anchors, m, self.d)?;
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
        let mine = self.local.assignments()?;
        gather_assignments(&mut self.comm, &mine)
    }
}

/// The initial anchors of `problem` (this rank's rows of it), assembled
/// over the ranks: each copies the anchors among its rows into an
/// otherwise zero `m × d` matrix, and their sum is the matrix (each anchor
/// comes from one rank; a `-0.0` coordinate comes out `+0.0`, which no
/// distance tells apart).
pub(super) fn initial_anchors<C: Communicator>(
    comm: &mut C,
    problem: &Problem<'_>,
) -> Result<Vec<f32>, AnnealError> {
    let (n, d, m, rows) = (problem.n(), problem.d(), problem.m(), problem.rows());
    let mut matrix = vec![0.0f64; m * d];
    let points = problem.points();
    for (j, row) in anneal::initial_rows(n, m, problem.params().seed)
        .into_iter()
        .enumerate()
    {
        if rows.contains(&row) {
            let local = row - rows.start;
            for (slot, v) in matrix[j * d..(j + 1) * d]
                .iter_mut()
                .zip(points.range_f32(local * d..(local + 1) * d))
            {
                *slot = f64::from(v);
            }
        }
    }
    comm.all_reduce_sum(&mut matrix, "the initial anchors")
        .map_err(comm_error)?;
    Ok(matrix.into_iter().map(|v| v as f32).collect())
}

/// Rank 0's `m` anchors (`m × d`) on every rank: the anchors every rank
/// sets are rank 0's, so rank 0's maintenance decides.
pub(super) fn broadcast_anchors<C: Communicator>(
    comm: &mut C,
    anchors: &[f32],
    m: usize,
    d: usize,
) -> Result<(Vec<f32>, usize), AnnealError> {
    let mut bytes: Vec<u8> = (m as u64).to_le_bytes().to_vec();
    bytes.extend(anchors[..m * d].iter().flat_map(|v| v.to_le_bytes()));
    comm.broadcast(&mut bytes, "setting the anchors")
        .map_err(comm_error)?;
    let (head, values) = bytes.split_at(8.min(bytes.len()));
    let m = u64::from_le_bytes(head.try_into().unwrap_or([0; 8])) as usize;
    if values.len() != m * d * 4 {
        return Err(AnnealError::Input(format!(
            "rank 0 sent {} bytes of anchors for {m} anchors of dimension {d}",
            values.len()
        )));
    }
    let anchors = values
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes(b.try_into().expect("chunks of 4")))
        .collect();
    Ok((anchors, m))
}

/// Every rank's assignments on rank 0, in rank (so row) order; empty on
/// the others.
pub(super) fn gather_assignments<C: Communicator>(
    comm: &mut C,
    mine: &[u32],
) -> Result<Vec<u32>, AnnealError> {
    let bytes: Vec<u8> = mine.iter().flat_map(|a| a.to_le_bytes()).collect();
    let all = comm
        .gather(&bytes, "gathering the assignments")
        .map_err(comm_error)?;
    Ok(all
        .iter()
        .flat_map(|bytes| bytes.chunks_exact(4))
        .map(|b| u32::from_le_bytes(b.try_into().expect("chunks of 4")))
        .collect())
}
