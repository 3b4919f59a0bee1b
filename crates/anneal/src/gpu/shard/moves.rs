//! The anchors moved where they are ([`Shard::apply_plan`],
//! [`Shard::gather_anchors`]): a maintenance pass's plan applied on the
//! device (`anneal_apply_rows`, into a second anchor buffer that then takes
//! the first's place) and the initial anchors gathered from the points the
//! shard holds (`anneal_gather_*`), so that neither pass carries `m × d`
//! anchors through the host. Both give the host's bits:
//! [`crate::maintenance::Plan::apply`] and [`crate::initial_anchors`].

use crate::bindings::kernels::{anneal_apply_rows, anneal_gather_f16, anneal_gather_f32};
use crate::bindings::types::AnnealRowOp;
use gpu_core::{Backend, DeviceBuffer, Kernel};

use super::{per_anchor, Shard, ShardPoints};
use crate::error::AnnealError;
use crate::maintenance::Plan;

/// The kernels and buffers of the moves, allocated with the shard.
#[derive(Debug)]
pub(super) struct Moves {
    apply_rows: Kernel<anneal_apply_rows>,
    gather_f32: Kernel<anneal_gather_f32>,
    gather_f16: Kernel<anneal_gather_f16>,
    /// The anchors after a plan (`max_anchors × d`), swapped in.
    next: DeviceBuffer<f32>,
    /// The last plan's ops and directions, or the initial rows: kept until
    /// the next move, past the kernel that reads them.
    ops: Option<DeviceBuffer<AnnealRowOp>>,
    directions: Option<DeviceBuffer<f32>>,
    rows: Option<DeviceBuffer<u32>>,
}

impl Moves {
    pub(super) fn new(
        backend: &Backend,
        stream: &gpu_core::Stream,
        max_anchors: usize,
        d: usize,
    ) -> Result<Self, AnnealError> {
        Ok(Self {
            apply_rows: backend.kernel()?,
            gather_f32: backend.kernel()?,
            gather_f16: backend.kernel()?,
            next: stream.alloc_zeros_local(max_anchors * d)?,
            ops: None,
            directions: None,
            rows: None,
        })
    }
}

impl Shard {
    /// The anchors after `plan` (dimension `d`), computed on the device from
    /// the current ones, and their norms. The caller has checked the plan
    /// against the engine's anchors ([`Plan::check`], once for every shard:
    /// `Devices::apply_plan`).
    pub(in super::super) fn apply_plan(&mut self, plan: &Plan, d: u32) -> Result<(), AnnealError> {
        let m_new = plan.m_new() as u32;
        let ops = self.stream.to_device(&plan.rows)?;
        // A zero-length buffer is not allocated: one unused value.
        let directions = if plan.directions.is_empty() {
            self.stream.alloc_zeros_local(1)?
        } else {
            self.stream.to_device(&plan.directions)?
        };
        let moves = &mut self.moves;
        self.stream.launch(
            &moves.apply_rows,
            per_anchor(m_new),
            (
                self.anchors.view(),
                d,
                ops.view(),
                m_new,
                directions.view(),
                moves.next.view_mut(),
            ),
        )?;
        std::mem::swap(&mut self.anchors, &mut moves.next);
        moves.ops = Some(ops);
        moves.directions = Some(directions);
        self.anchors_changed(m_new, d)
    }

    /// The anchors `x[rows[j]]` of this shard's points (every row below
    /// its row count), and their norms.
    pub(in super::super) fn gather_anchors(
        &mut self,
        rows: &[u32],
        d: u32,
    ) -> Result<(), AnnealError> {
        if let Some(&row) = rows.iter().find(|&&r| r >= self.n) {
            return Err(AnnealError::internal(format!(
                "initial anchor row {row} past the shard's {} rows",
                self.n
            )));
        }
        let m = rows.len() as u32;
        let device_rows = self.stream.to_device(rows)?;
        let moves = &mut self.moves;
        let config = per_anchor(m);
        // The same arguments for either point type.
        macro_rules! gather {
            ($kernel:expr, $x:expr) => {
                self.stream.launch(
                    $kernel,
                    config,
                    (
                        $x.view(),
                        self.n,
                        d,
                        device_rows.view(),
                        m,
                        self.anchors.view_mut(),
                    ),
                )?
            };
        }
        match &self.points {
            ShardPoints::F32(x, _, _) => gather!(&moves.gather_f32, x),
            ShardPoints::F16(x, _, _) => gather!(&moves.gather_f16, x),
        }
        moves.rows = Some(device_rows);
        self.anchors_changed(m, d)
    }
}
