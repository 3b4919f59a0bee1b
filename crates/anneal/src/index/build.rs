//! An index made from a finished run ([`Index::from_run`]): the anchors and
//! assignments of its [`Output`], the energy recomputed over the stored
//! anchors, and the metadata of where and how it ran.

use super::{
    energy, input_hash, Index, IndexError, IndexMeta, InputFile, InputRecord, MaintenanceRecord,
    HASH_ALGORITHM, SCHEMA, VERSION,
};
use crate::{input::Problem, vocab::Output};

/// Where a run ran, as its index records it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunRecord {
    /// `"cpu"`, `"cuda"` or `"wgpu"`.
    pub backend: &'static str,
    /// The GPU's name, or the CPU's threads.
    pub device: String,
    /// GPUs the points were spread over (0: the CPU).
    pub gpus: u32,
    /// Processes the run was spread over (1: one process).
    pub world_size: u32,
}

impl Index {
    /// The index of `out`, a run over all of `problem`'s points (in one
    /// process of several, the whole input's problem: the energy and the
    /// hash are over every row); `files`: where the points came from
    /// (empty for points given in memory).
    pub fn from_run(
        out: &Output,
        problem: &Problem<'_>,
        run: &RunRecord,
        files: Vec<InputFile>,
    ) -> Result<Self, IndexError> {
        let (points, n, d) = (problem.points(), problem.n(), problem.d());
        let anchors = crate::vocab::anchor_values(&out.anchors, out.m, d)
            .map_err(|e| IndexError::Invalid {
                message: e.to_string(),
            })?
            .to_vec();
        let energy = energy(points, d, &anchors, &out.assignments)?;
        Ok(Index {
            meta: IndexMeta {
                schema: SCHEMA.to_string(),
                version: VERSION,
                n: n as u64,
                d: d as u64,
                m: out.m as u64,
                iterations: out.iterations,
                energy_history: out.history.clone(),
                energy,
                params: problem.params().clone(),
                seed: problem.params().seed,
                maintenance: out
                    .maintenance
                    .iter()
                    .map(|&(iteration, merged, split)| MaintenanceRecord {
                        iteration,
                        merged: merged as u64,
                        split: split as u64,
                    })
                    .collect(),
                backend: run.backend.to_string(),
                device: run.device.clone(),
                gpus: run.gpus,
                world_size: run.world_size,
                kiln_version: env!("CARGO_PKG_VERSION").to_string(),
                input: InputRecord {
                    dtype: points.dtype().name().to_string(),
                    hash_algorithm: HASH_ALGORITHM.to_string(),
                    hash: input_hash(points, n, d),
                    files,
                },
            },
            anchors,
            assignments: out.assignments.clone(),
        })
    }
}
