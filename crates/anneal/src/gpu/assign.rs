//! The enqueue of one assignment (each point's nearest anchor), shared by
//! a shard's iteration and the encode's chunks so that both take the same
//! path to the same kernels: the tensor-core kernel with its exact list
//! kernel ([`TcAssign`]) where it applies, the SIMT kernel otherwise.

use crate::bindings::kernels::{anneal_assign_f16, anneal_assign_f32};
use crate::bindings::types::AnnealControl;
use gpu_core::{DeviceView, DeviceViewMut, Kernel, Stream};

use super::super::assign_tc::{TcAssign, TcJob};
use super::assign_config;
use crate::error::AnnealError;

/// The points to assign (`n × d`, the ones the [`TcAssign`] was last
/// prepared on), with the SIMT kernel of their type.
pub(super) enum AssignPoints<'a> {
    F32(DeviceView<'a, f32>, &'a Kernel<anneal_assign_f32>),
    F16(DeviceView<'a, u16>, &'a Kernel<anneal_assign_f16>),
}

/// The rest of the arguments of `anneal_assign_f32/f16`.
pub(super) struct AssignArgs<'a> {
    /// `|x_i|^2`, `n` of them.
    pub(super) x_norms: DeviceView<'a, f32>,
    pub(super) n: u32,
    pub(super) d: u32,
    /// Every anchor slot; the first `m × d` values are read.
    pub(super) anchors: DeviceView<'a, f32>,
    /// Every anchor norm slot; the first `m` are read.
    pub(super) anchor_norms: DeviceView<'a, f32>,
    pub(super) m: u32,
    pub(super) flags: u32,
    pub(super) control: DeviceView<'a, AnnealControl>,
    pub(super) assign: DeviceViewMut<'a, u32>,
    pub(super) dist: DeviceViewMut<'a, f32>,
    /// At least `m` slots.
    pub(super) counts: DeviceViewMut<'a, u32>,
}

/// Enqueues the assignment of `points` on `stream`: on tensor cores with
/// `tc`, else the SIMT kernel. No synchronization.
pub(super) fn enqueue_assign(
    stream: &Stream,
    points: AssignPoints<'_>,
    tc: Option<&mut TcAssign>,
    args: AssignArgs<'_>,
) -> Result<(), AnnealError> {
    let AssignArgs {
        x_norms,
        n,
        d,
        anchors,
        anchor_norms,
        m,
        flags,
        control,
        assign,
        dist,
        mut counts,
    } = args;
    let md = m as usize * d as usize;
    // The same arguments for either point type and either kernel.
    macro_rules! tc_job {
        ($x:expr) => {
            TcJob {
                x: $x,
                x_norms,
                n,
                d,
                anchors: anchors.slice(0..md)?,
                anchor_norms: anchor_norms.slice(0..m as usize)?,
                m,
                flags,
                control,
                assign,
                dist,
                counts: counts.slice_mut(0..m as usize)?,
            }
        };
    }
    macro_rules! simt_args {
        ($x:expr) => {
            (
                $x,
                x_norms,
                n,
                d,
                anchors.slice(0..md)?,
                anchor_norms,
                m,
                flags,
                control,
                assign,
                dist,
                counts,
            )
        };
    }
    match (points, tc) {
        (AssignPoints::F32(x, _), Some(tc)) => tc.launch(stream, tc_job!(x)),
        (AssignPoints::F16(x, _), Some(tc)) => tc.launch(stream, tc_job!(x)),
        (AssignPoints::F32(x, kernel), None) => {
            Ok(stream.launch(kernel, assign_config(n), simt_args!(x))?)
        }
        (AssignPoints::F16(x, kernel), None) => {
            Ok(stream.launch(kernel, assign_config(n), simt_args!(x))?)
        }
    }
}
