//! The search among the anchors for each one's nearest other anchor
//! ([`Neighbors`]), which maintenance reads: the points' assignment kernel
//! with the anchors as its points and `EXCLUDE_SELF`, on tensor cores when
//! the points' assignment runs there, on the first shard's device. Few
//! anchors ([`EXACT_MAX_WORK`]) take `anneal_neighbors_exact` instead, the
//! same bits in one launch.

use crate::bindings::kernels::{anneal_assign_f32, anneal_neighbors_exact};
use crate::bindings::types::{
    AnnealControl, KILN_ANNEAL_EXCLUDE_SELF as EXCLUDE_SELF, KILN_ANNEAL_NEIGHBORS_THREADS,
};
use gpu_core::{Backend, DeviceBuffer, Kernel, LaunchConfig, Stream};

use super::super::assign_tc::{TcAssign, TcJob};
use super::assign_config;
use super::readback::ReadBack;
use super::shard::AnchorViews;
use crate::error::AnnealError;

/// The most `m * m * d` (exact distances' products) for which the search
/// on the tensor-core path runs `anneal_neighbors_exact`: one launch of
/// exact distances on CUDA cores instead of the dozen launches of the f16
/// copies, bounds and lists (the same outputs, bit for bit: both are the
/// least exact distance, lowest index on ties). Measured on the H200
/// (BENCHMARKS.md, 2026-11-30): at 256 anchors of 128 (2^23) the exact
/// search took 13.8 us a pass where the dozen launches held the GPU about
/// 80; at 1024 of 128 (2^27) it took 106 us against about 75, and whole
/// runs at 2^27 to 2^30 were 1-5% slower with it.
pub const EXACT_MAX_WORK: u64 = 1 << 26;

/// The buffers and kernels of the search, allocated once for the run.
#[derive(Debug)]
pub(super) struct Neighbors {
    /// The SIMT kernel (used when `tc` is `None`).
    assign: Kernel<anneal_assign_f32>,
    /// The exact search for few anchors, where `tc` is `Some`.
    exact: Kernel<anneal_neighbors_exact>,
    /// The same search on tensor cores: the anchors are its points.
    tc: Option<TcAssign>,
    neighbors: DeviceBuffer<u32>,
    dist: DeviceBuffer<f32>,
    /// Where the results are read back, with one wait.
    back: ReadBack<u32, f32>,
    /// Never `done`: the control of the search.
    idle: DeviceBuffer<AnnealControl>,
}

impl Neighbors {
    /// For up to `max_anchors` anchors of dimension `d` on `stream`;
    /// `tensor_cores` when the points' assignment runs on them.
    pub(super) fn new(
        backend: &Backend,
        stream: &Stream,
        max_anchors: usize,
        d: usize,
        tensor_cores: bool,
    ) -> Result<Self, AnnealError> {
        Ok(Self {
            assign: backend.kernel()?,
            exact: backend.kernel()?,
            tc: if tensor_cores {
                TcAssign::new(backend, stream, max_anchors, d, max_anchors)?
            } else {
                None
            },
            neighbors: stream.alloc_zeros_local(max_anchors)?,
            dist: stream.alloc_zeros_local(max_anchors)?,
            idle: stream.alloc_zeros_local(1)?,
            back: ReadBack::new(stream, max_anchors, max_anchors)?,
        })
    }

    /// For each of the first `m` anchors of `on`, its nearest other anchor
    /// (`u32::MAX` when there is none) and their squared distance.
    pub(super) fn search(
        &mut self,
        on: AnchorViews<'_>,
        m: u32,
        d: u32,
    ) -> Result<(Vec<u32>, Vec<f32>), AnnealError> {
        self.enqueue(on, m, d)?;
        self.take(m)
    }

    /// What [`Neighbors::enqueue`] found for its `m` anchors, once it is done.
    pub(super) fn take(&self, m: u32) -> Result<(Vec<u32>, Vec<f32>), AnnealError> {
        self.back.take(m as usize, m as usize)
    }

    /// Enqueues [`Neighbors::search`] and the copies of its results on
    /// `on`'s stream, and returns at once: [`Neighbors::take`] reads them.
    pub(super) fn enqueue(
        &mut self,
        on: AnchorViews<'_>,
        m: u32,
        d: u32,
    ) -> Result<(), AnnealError> {
        let md = m as usize * d as usize;
        let AnchorViews {
            stream,
            anchors,
            norms,
            mut counts,
        } = on;
        let work = u64::from(m) * u64::from(m) * u64::from(d);
        if self.tc.is_some() && work <= EXACT_MAX_WORK {
            stream.launch(
                &self.exact,
                LaunchConfig {
                    grid: (m.max(1), 1, 1),
                    block: (KILN_ANNEAL_NEIGHBORS_THREADS, 1, 1),
                    shared_mem_bytes: 0,
                },
                (
                    anchors.slice(0..md)?,
                    norms.slice(0..m as usize)?,
                    m,
                    d,
                    self.neighbors.view_mut(),
                    self.dist.view_mut(),
                ),
            )?;
        } else if let Some(tc) = &mut self.tc {
            let anchors = anchors.slice(0..md)?;
            tc.prepare_points(stream, anchors.clone(), norms.slice(0..m as usize)?, m, d)?;
            tc.launch(
                stream,
                TcJob {
                    x: anchors.clone(),
                    x_norms: norms.slice(0..m as usize)?,
                    n: m,
                    d,
                    anchors,
                    anchor_norms: norms.slice(0..m as usize)?,
                    m,
                    flags: EXCLUDE_SELF,
                    control: self.idle.view(),
                    assign: self.neighbors.view_mut(),
                    dist: self.dist.view_mut(),
                    counts: counts.slice_mut(0..0)?,
                },
            )?;
        } else {
            stream.launch(
                &self.assign,
                assign_config(m),
                (
                    anchors.slice(0..md)?,
                    norms.clone(),
                    m,
                    d,
                    anchors.slice(0..md)?,
                    norms,
                    m,
                    EXCLUDE_SELF,
                    self.idle.view(),
                    self.neighbors.view_mut(),
                    self.dist.view_mut(),
                    counts,
                ),
            )?;
        }
        let m = m as usize;
        self.back
            .start(stream, self.neighbors.slice(0..m)?, self.dist.slice(0..m)?)
    }
}
