//! The end of an iteration on a shard: the anchors moved by their members'
//! means and the energy tested (`anneal_update`, `anneal_finish`), or, for a
//! shard alone (`KILN_ANNEAL_FUSE`), that with the combination of the
//! statistics in one launch (`anneal_combine_update`).

use gpu_core::LaunchConfig;

use super::{per_anchor, Shard};
use crate::error::AnnealError;

/// `anneal_finish`: one block of 256 threads.
const FINISH: LaunchConfig = LaunchConfig {
    grid: (1, 1, 1),
    block: (256, 1, 1),
    shared_mem_bytes: 0,
};

impl Shard {
    /// Whether this shard, `alone` in the run, combines and updates in one
    /// launch (`KILN_ANNEAL_FUSE`): then [`Shard::enqueue_partials`] and
    /// [`Shard::enqueue_update`] take `fused`.
    pub(in crate::gpu) fn fuses(&self, alone: bool, m: u32, d: u32) -> bool {
        self.fuse.fuses(alone, m, d)
    }

    /// Enqueues the update and the finish of one iteration (history
    /// `slot`); `fused`, with the combination ([`Shard::fuses`]).
    #[allow(clippy::too_many_arguments)] // the iteration's scalars
    pub(in crate::gpu) fn enqueue_update(
        &mut self,
        m: u32,
        d: u32,
        eta: f32,
        n_total: u64,
        tol: f64,
        slot: u32,
        fused: bool,
    ) -> Result<(), AnnealError> {
        let md = m as usize * d as usize;
        let s = &self.stream;
        if fused {
            s.launch(
                &self.combine_update,
                per_anchor(m),
                (
                    self.offsets.view(),
                    self.pieces.view(),
                    self.piece_sums.view(),
                    self.piece_dist.view(),
                    m,
                    d,
                    eta,
                    n_total,
                    tol,
                    slot,
                    self.control.view_mut(),
                    self.members.view_mut(),
                    self.partial.slice_mut(0..md)?,
                    self.sumsq.view_mut(),
                    self.anchors.slice_mut(0..md)?,
                    self.anchor_norms.view_mut(),
                    self.history.view_mut(),
                    self.arrived.view_mut(),
                ),
            )?;
            return Ok(());
        }
        s.launch(
            &self.update,
            per_anchor(m),
            (
                self.partial.slice(0..md)?,
                self.members.view(),
                m,
                d,
                eta,
                self.control.view(),
                self.anchors.slice_mut(0..md)?,
                self.anchor_norms.view_mut(),
            ),
        )?;
        s.launch(
            &self.finish,
            FINISH,
            (
                self.sumsq.view(),
                m,
                n_total,
                tol,
                slot,
                self.control.view_mut(),
                self.history.view_mut(),
            ),
        )?;
        Ok(())
    }
}
