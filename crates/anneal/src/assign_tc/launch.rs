//! [`TcAssign`]: the tensor-core assignment's kernels, buffers and launches
//! (the design and the bound are in the parent module's docs).

use crate::bindings::types::{
    AnnealControl, KILN_ANNEAL_COUNT, KILN_ANNEAL_LIST_THREADS, KILN_ANNEAL_REFINE_THREADS,
    KILN_ANNEAL_TC_DP, KILN_ANNEAL_TC_STATE, KILN_ANNEAL_TC_STATE_ANCHOR_NORM_MAX,
    KILN_ANNEAL_TC_STATE_OVERFLOW, KILN_ANNEAL_TC_STATE_POINT_NORM_MAX,
    KILN_ANNEAL_WGMMA_LIST_WORDS,
};
use gpu_core::GpuRepr;
use gpu_core::{Backend, DeviceBuffer, DeviceView, DeviceViewMut, LaunchConfig, Stream};

use super::kernels::{TcKernels, TcPoint};
use super::{
    block_shape, resolve_tile, tc_wanted, tile_from_env, AnnealError, Tile, ENV, TILE_ENV,
};

/// Blocks of the list kernels per SM (8 warps each): their grid is fixed,
/// since the number of listed points is known only on the device.
const LIST_BLOCKS_PER_SM: u32 = 8;

/// Threads of `anneal_column_sums_*`'s blocks (anneal_tc.cu).
const COLUMN_SUM_THREADS: u32 = 256;

/// The points [`TcAssign::prepare_points`] converted: their device address,
/// values and shape, and the address of their norms.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Prepared {
    address: u64,
    len: usize,
    n: u32,
    d: u32,
    norms: u64,
}

/// The reference point the f16 copies are taken relative to (the parent
/// module's **Centring**): every choice gives the reference's bits; only the
/// bound's width, and so the share of points left to the list kernel,
/// depends on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Reference {
    /// The points' mean (the default): the bound grows with the points'
    /// spread, not with their distance from the origin.
    #[default]
    Mean,
    /// The origin: the copies are the inputs themselves, and the bound grows
    /// with `|x| |c|` (for comparison, and for tests that need a wide bound).
    Origin,
}

/// The tensor-core assignment's kernels and buffers, made once per run.
#[derive(Debug)]
pub struct TcAssign {
    kernels: TcKernels,
    /// Points the tc kernel left to the list kernel (capacity `n`).
    unresolved: DeviceBuffer<u32>,
    /// How many: `unresolved_count[0]`.
    unresolved_count: DeviceBuffer<u32>,
    /// The list kernel's least (distance, anchor) per listed point, packed
    /// and complemented (anneal_tc.h).
    best: DeviceBuffer<u64>,
    /// The list kernel's blocks that are done (its last zeroes it).
    list_arrived: DeviceBuffer<u32>,
    /// Where the wgmma kernels run: each point's candidate list, which
    /// `anneal_refine_lists_*` refines (`KILN_ANNEAL_WGMMA_LIST_WORDS` words
    /// a point, anneal_wgmma.h); one word otherwise.
    lists: DeviceBuffer<u32>,
    list_grid: u32,
    /// The scaled f16 copy of the points less the reference point, `n × dp`.
    xh: DeviceBuffer<u16>,
    /// The scaled f16 copy of the anchors less the reference point,
    /// `max_anchors × dp`.
    ch: DeviceBuffer<u16>,
    /// The points' column sums: the reference point is `ref_sum / n`.
    ref_sum: DeviceBuffer<f32>,
    /// `1 / n` of the prepared points, as the kernels scale `ref_sum` (0
    /// with [`Reference::Origin`]).
    ref_scale: f32,
    /// What the copies are taken relative to ([`TcAssign::set_reference`]).
    reference: Reference,
    /// Per point, then per anchor, the pair `(|x - r|^2` with the stored
    /// norm's rounding, `|x - r|)` (`anneal_to_half_*`).
    x_norms_c: DeviceBuffer<f32>,
    anchor_norms_c: DeviceBuffer<f32>,
    /// The scale, the overflow flag and the largest norms
    /// (`KILN_ANNEAL_TC_STATE` words, anneal_tc.h).
    half_state: DeviceBuffer<u32>,
    /// The dimension the copies were made for.
    d: u32,
    /// The device's SMs (grids of the per-row and column-sum kernels).
    sms: u32,
    /// The tc kernel's anchor tile ([`TILE_ENV`], or [`TcAssign::set_tile`]).
    tile: Tile,
    prepared: Option<Prepared>,
}

/// One assignment's arguments: those of `anneal_assign_f32/f16`, points of
/// type `T`.
#[derive(Debug)]
pub struct TcJob<'a, T: GpuRepr> {
    /// Points, row-major `n × d`: the ones [`TcAssign::prepare_points`] was
    /// given last, unchanged since.
    pub x: DeviceView<'a, T>,
    /// `|x_i|^2`, `n` of them.
    pub x_norms: DeviceView<'a, f32>,
    /// Points.
    pub n: u32,
    /// Dimension.
    pub d: u32,
    /// Anchors, row-major `m × d`.
    pub anchors: DeviceView<'a, f32>,
    /// `|c_j|^2`, `m` of them.
    pub anchor_norms: DeviceView<'a, f32>,
    /// Anchors.
    pub m: u32,
    /// `KILN_ANNEAL_EXCLUDE_SELF`, `KILN_ANNEAL_COUNT`.
    pub flags: u32,
    /// The run's control: both kernels return at once when it is `done`.
    pub control: DeviceView<'a, AnnealControl>,
    /// Each point's anchor (`u32::MAX` when none is eligible).
    pub assign: DeviceViewMut<'a, u32>,
    /// Each point's distance to it.
    pub dist: DeviceViewMut<'a, f32>,
    /// Members per anchor, added to with `KILN_ANNEAL_COUNT`.
    pub counts: DeviceViewMut<'a, u32>,
}

/// `launch_f32` and `launch_f16`: [`TcAssign::launch`] for one point type,
/// with one argument per kernel parameter as `anneal_assign_f32/f16` take.
macro_rules! typed_launch {
    ($(#[$doc:meta])* $name:ident, $point:ty) => {
        $(#[$doc])*
        #[allow(clippy::too_many_arguments)] // one per kernel parameter, as in the header
        pub fn $name(
            &mut self,
            stream: &Stream,
            x: DeviceView<'_, $point>,
            x_norms: DeviceView<'_, f32>,
            n: u32,
            d: u32,
            anchors: DeviceView<'_, f32>,
            anchor_norms: DeviceView<'_, f32>,
            m: u32,
            flags: u32,
            control: DeviceView<'_, AnnealControl>,
            assign: DeviceViewMut<'_, u32>,
            dist: DeviceViewMut<'_, f32>,
            counts: DeviceViewMut<'_, u32>,
        ) -> Result<(), AnnealError> {
            let job = TcJob {
                x,
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
                counts,
            };
            self.launch(stream, job)
        }
    };
}

/// Row length of the f16 copies: `d` rounded up to `KILN_ANNEAL_TC_DP`.
pub fn padded_dim(d: u32) -> u32 {
    d.div_ceil(KILN_ANNEAL_TC_DP).max(1) * KILN_ANNEAL_TC_DP
}

/// `anneal_absmax_*`'s and `anneal_to_half_*`'s launch for `rows` rows: one
/// warp per row, 8 rows per block of 256 threads, at most 8 blocks per SM
/// (grid-stride).
fn rows_config(rows: u32, sms: u32) -> LaunchConfig {
    let blocks = rows.div_ceil(8).clamp(1, sms.max(1) * 8);
    LaunchConfig {
        grid: (blocks, 1, 1),
        block: (256, 1, 1),
        shared_mem_bytes: 0,
    }
}

impl TcAssign {
    /// The kernels and buffers for up to `n` points of dimension `d` and up
    /// to `max_anchors` anchors, or `None` where the tensor-core path does
    /// not apply: the CPU backend, a device below sm_80, or [`ENV`]`=0`.
    pub fn new(
        backend: &Backend,
        stream: &Stream,
        n: usize,
        d: usize,
        max_anchors: usize,
    ) -> Result<Option<Self>, AnnealError> {
        let Some(device) = backend.device() else {
            return Ok(None);
        };
        if !tc_wanted(device.arch(), std::env::var(ENV).ok().as_deref()) {
            return Ok(None);
        }
        let over = |what, value| AnnealError::OverU32 { what, value };
        u32::try_from(n).map_err(|_| over("n", n))?;
        let d32 = u32::try_from(d).map_err(|_| over("d", d))?;
        let dp = padded_dim(d32) as usize;
        let tile = tile_from_env(std::env::var(TILE_ENV).ok().as_deref())?;
        let list_grid = device.sm_count.max(1) * LIST_BLOCKS_PER_SM;
        let kernels = TcKernels::load(backend, device.compute_capability)?;
        if matches!(tile, Tile::Wgmma | Tile::WgmmaChunked) && kernels.wgmma.is_none() {
            return Err(AnnealError::BadSetting {
                var: TILE_ENV,
                value: if tile == Tile::Wgmma {
                    "wgmma"
                } else {
                    "wgmma-chunked"
                }
                .into(),
                expected: "64, 128 or auto here (the wgmma kernels need compute capability \
                           9.0 and kernels built with the anneal_wgmma module)",
            });
        }
        let list_words = if kernels.wgmma.is_some() {
            n.max(1)
                .checked_mul(KILN_ANNEAL_WGMMA_LIST_WORDS as usize)
                .ok_or_else(|| over("n", n))?
        } else {
            1
        };
        Ok(Some(Self {
            kernels,
            unresolved: stream.alloc_zeros_local(n.max(1))?,
            unresolved_count: stream.alloc_zeros_local(1)?,
            best: stream.alloc_zeros_local(n.max(1))?,
            list_arrived: stream.alloc_zeros_local(1)?,
            lists: stream.alloc_zeros_local(list_words)?,
            list_grid,
            xh: stream.alloc_zeros_local(n.max(1) * dp)?,
            ch: stream.alloc_zeros_local(max_anchors.max(1) * dp)?,
            ref_sum: stream.alloc_zeros_local(d.max(1))?,
            ref_scale: 0.0,
            reference: Reference::Mean,
            x_norms_c: stream.alloc_zeros_local(2 * n.max(1))?,
            anchor_norms_c: stream.alloc_zeros_local(2 * max_anchors.max(1))?,
            half_state: stream.alloc_zeros_local(KILN_ANNEAL_TC_STATE as usize)?,
            d: d32,
            sms: device.sm_count,
            tile,
            prepared: None,
        }))
    }

    /// Sets the tc kernel for later launches ([`Tile::Auto`]: by device
    /// and shape, [`resolve_tile`]; [`Tile::Wgmma`] where it cannot run: as
    /// Auto); every kernel gives the same bits.
    pub fn set_tile(&mut self, tile: Tile) {
        self.tile = tile;
    }

    /// Sets the reference point of the next [`Self::prepare_points`] (and so
    /// of the launches on those points); [`Reference::Mean`] by default.
    pub fn set_reference(&mut self, reference: Reference) {
        self.reference = reference;
    }

    /// Whether the wgmma kernel runs here ([`super::wgmma_available`], and the
    /// backend was handed its module).
    pub fn has_wgmma(&self) -> bool {
        self.kernels.wgmma.is_some()
    }

    /// The points the last launch left to the list kernel: the first
    /// `unresolved_count()[0]` entries, in no particular order.
    pub fn unresolved(&self) -> &DeviceBuffer<u32> {
        &self.unresolved
    }

    /// One value: how many points the last launch left to the list kernel.
    pub fn unresolved_count(&self) -> &DeviceBuffer<u32> {
        &self.unresolved_count
    }

    /// Makes the scaled f16 copy of `x` (`n × d`, with `x_norms` its
    /// `|x_i|^2` as the launches get them) less the points' mean, which
    /// every later [`Self::launch`] on these points reads: once per run,
    /// since the points do not change. Enqueued on `stream`, no
    /// synchronization.
    pub fn prepare_points<T: TcPoint>(
        &mut self,
        stream: &Stream,
        x: DeviceView<'_, T>,
        x_norms: DeviceView<'_, f32>,
        n: u32,
        d: u32,
    ) -> Result<(), AnnealError> {
        let dp = padded_dim(d);
        if d != self.d || n as usize > self.unresolved.len() {
            return Err(AnnealError::OverCapacity {
                n: n as usize,
                d: d as usize,
                capacity: self.unresolved.len(),
                capacity_d: self.d as usize,
            });
        }
        let values = n as usize * d as usize;
        if x.len() < values {
            return Err(AnnealError::ShortBuffer {
                what: "the points",
                len: x.len(),
                needed: values,
            });
        }
        if x_norms.len() < n as usize {
            return Err(AnnealError::ShortBuffer {
                what: "the points' norms",
                len: x_norms.len(),
                needed: n as usize,
            });
        }
        let sms = self.sms;
        let kernels = T::kernels(&self.kernels);
        stream.memset_zeros(&mut self.half_state.view_mut())?;
        stream.memset_zeros(&mut self.ref_sum.view_mut())?;
        // The reference point: the mean, with rows split over grid.y so that
        // the grid fills the device (any r keeps the bound; the mean keeps
        // it tight).
        self.ref_scale = match self.reference {
            Reference::Mean if n > 0 => 1.0 / n as f32,
            Reference::Mean | Reference::Origin => 0.0,
        };
        if self.ref_scale != 0.0 {
            let column_blocks = d.div_ceil(COLUMN_SUM_THREADS).max(1);
            let row_blocks = (sms.max(1) * 8)
                .div_ceil(column_blocks)
                .clamp(1, n.div_ceil(64).max(1));
            stream.launch(
                kernels.column_sums,
                LaunchConfig {
                    grid: (column_blocks, row_blocks, 1),
                    block: (COLUMN_SUM_THREADS, 1, 1),
                    shared_mem_bytes: 0,
                },
                (x.slice(..)?, n, d, self.ref_sum.view_mut()),
            )?;
        }
        stream.launch(
            kernels.absmax,
            rows_config(n, sms),
            (
                x.slice(..)?,
                n,
                d,
                self.ref_sum.view(),
                self.ref_scale,
                self.half_state.view_mut(),
            ),
        )?;
        let (mut scale, mut norm_max) = self
            .half_state
            .split_at_mut(KILN_ANNEAL_TC_STATE_POINT_NORM_MAX as usize)?;
        stream.launch(
            kernels.to_half,
            rows_config(n, sms),
            (
                x.slice(..)?,
                x_norms.slice(..)?,
                n,
                d,
                dp,
                self.ref_sum.view(),
                self.ref_scale,
                scale.reborrow(),
                norm_max.slice_mut(..1)?,
                self.xh.view_mut(),
                self.x_norms_c.view_mut(),
            ),
        )?;
        self.prepared = Some(Prepared {
            address: x.raw_device_ptr(stream).unwrap_or(0),
            len: x.len(),
            n,
            d,
            norms: x_norms.raw_device_ptr(stream).unwrap_or(0),
        });
        Ok(())
    }

    typed_launch!(
        /// [`Self::launch`] for f32 points.
        launch_f32,
        f32
    );

    typed_launch!(
        /// [`Self::launch`] for f16 points (raw IEEE half bits).
        launch_f16,
        u16
    );

    /// Enqueues the assignment on `stream`: the anchors' f16 copy, the tc
    /// kernel and the list kernel of point type `T`. No host
    /// synchronization, no allocation. Views too short for `n`, `d` and `m`,
    /// `n` over the capacity this was made for, or points other than the
    /// ones [`Self::prepare_points`] converted are refused before anything
    /// is enqueued.
    pub fn launch<T: TcPoint>(
        &mut self,
        stream: &Stream,
        job: TcJob<'_, T>,
    ) -> Result<(), AnnealError> {
        let TcJob {
            x,
            x_norms,
            n,
            d,
            anchors,
            anchor_norms,
            m,
            flags,
            control,
            mut assign,
            mut dist,
            mut counts,
        } = job;
        let counted = if flags & KILN_ANNEAL_COUNT != 0 { m } else { 0 };
        let dp = padded_dim(d);
        check_lengths(
            self.unresolved.len(),
            (n, d, m),
            &[
                ("x", x.len(), n as usize * d as usize),
                ("x_norms", x_norms.len(), n as usize),
                ("anchors", anchors.len(), m as usize * d as usize),
                ("anchor_norms", anchor_norms.len(), m as usize),
                ("assign", assign.len(), n as usize),
                ("dist", dist.len(), n as usize),
                ("counts", counts.len(), counted as usize),
                ("the f16 anchors", self.ch.len(), m as usize * dp as usize),
            ],
        )?;
        let points = Prepared {
            address: x.raw_device_ptr(stream).unwrap_or(0),
            len: x.len(),
            n,
            d,
            norms: x_norms.raw_device_ptr(stream).unwrap_or(0),
        };
        if self.prepared != Some(points) {
            return Err(AnnealError::NotPrepared { n, d });
        }
        let sms = self.sms;
        let kernels = T::kernels(&self.kernels);
        stream.memset_zeros(&mut self.unresolved_count.view_mut())?;
        // The anchors' copy, and its overflow flag and largest norm afresh.
        stream.memset_zeros(
            &mut self
                .half_state
                .slice_mut(KILN_ANNEAL_TC_STATE_OVERFLOW as usize..)?,
        )?;
        let (mut scale, mut norm_max) = self
            .half_state
            .split_at_mut(KILN_ANNEAL_TC_STATE_ANCHOR_NORM_MAX as usize)?;
        stream.launch(
            &self.kernels.to_half_f32,
            rows_config(m, sms),
            (
                anchors.slice(..)?,
                anchor_norms.slice(..)?,
                m,
                d,
                dp,
                self.ref_sum.view(),
                self.ref_scale,
                scale.reborrow(),
                norm_max.reborrow(),
                self.ch.view_mut(),
                self.anchor_norms_c.view_mut(),
            ),
        )?;
        let chosen = resolve_tile(self.tile, kernels.wg.is_some(), n, d, sms);
        let (per_block, threads, shared) = block_shape(chosen);
        let tile = LaunchConfig {
            grid: (n.div_ceil(per_block).max(1), 1, 1),
            block: (threads, 1, 1),
            shared_mem_bytes: shared,
        };
        match (chosen, kernels.wg) {
            (Tile::Wgmma | Tile::WgmmaChunked, Some(wg)) => {
                // The candidate lists, then their refinement (anneal_wgmma.h).
                let bounds = (
                    self.xh.view(),
                    x_norms.slice(..)?,
                    self.x_norms_c.view(),
                    n,
                    d,
                    dp,
                    self.ch.view(),
                    self.anchor_norms_c.view(),
                    m,
                    flags,
                    self.half_state.view(),
                    control.clone(),
                    self.lists.view_mut(),
                );
                if chosen == Tile::Wgmma {
                    stream.launch(wg.plain, tile, bounds)?;
                } else {
                    stream.launch(wg.chunked, tile, bounds)?;
                }
                let warps = KILN_ANNEAL_REFINE_THREADS / 32;
                let refine = LaunchConfig {
                    grid: (n.div_ceil(warps).max(1), 1, 1),
                    block: (KILN_ANNEAL_REFINE_THREADS, 1, 1),
                    shared_mem_bytes: 0,
                };
                stream.launch(
                    wg.refine,
                    refine,
                    (
                        x.slice(..)?,
                        x_norms.slice(..)?,
                        n,
                        d,
                        anchors.slice(..)?,
                        anchor_norms.slice(..)?,
                        flags,
                        control.clone(),
                        self.lists.view(),
                        assign.reborrow(),
                        dist.reborrow(),
                        counts.reborrow(),
                        self.unresolved.view_mut(),
                        self.unresolved_count.view_mut(),
                    ),
                )?;
            }
            _ => {
                // The mma.sync kernels refine in place: anneal_assign_f32/f16's
                // arguments (anneal_tc.h).
                let params = (
                    x.slice(..)?,
                    self.xh.view(),
                    x_norms.slice(..)?,
                    self.x_norms_c.view(),
                    n,
                    d,
                    dp,
                    anchors.slice(..)?,
                    self.ch.view(),
                    anchor_norms.slice(..)?,
                    self.anchor_norms_c.view(),
                    m,
                    flags,
                    self.half_state.view(),
                    control.clone(),
                    assign.reborrow(),
                    dist.reborrow(),
                    counts.reborrow(),
                    self.unresolved.view_mut(),
                    self.unresolved_count.view_mut(),
                );
                if chosen == Tile::Slim {
                    stream.launch(kernels.tc_slim, tile, params)?;
                } else {
                    stream.launch(kernels.tc, tile, params)?;
                }
            }
        }
        let per_pair = LaunchConfig {
            grid: (self.list_grid, 1, 1),
            block: (KILN_ANNEAL_LIST_THREADS, 1, 1),
            shared_mem_bytes: 0,
        };
        // `best` is zero between assignments (allocated zeroed; the list
        // kernel's last block clears what it wrote), and so is its count
        // of blocks.
        stream.launch(
            kernels.list,
            per_pair,
            (
                x,
                x_norms,
                d,
                anchors,
                anchor_norms,
                m,
                flags,
                control,
                self.unresolved.view(),
                self.unresolved_count.view(),
                self.best.view_mut(),
                assign,
                dist,
                counts,
                self.list_arrived.view_mut(),
            ),
        )?;
        Ok(())
    }
}

/// Refuses views too short for the kernels' reads and writes (they index by
/// `n`, `d` and `m`, not by the views' lengths): `(name, length, needed)`.
fn check_lengths(
    capacity: usize,
    (n, d, _m): (u32, u32, u32),
    views: &[(&'static str, usize, usize)],
) -> Result<(), AnnealError> {
    if n as usize > capacity {
        return Err(AnnealError::OverCapacity {
            n: n as usize,
            d: d as usize,
            capacity,
            capacity_d: d as usize,
        });
    }
    match views.iter().find(|(_, len, need)| len < need) {
        Some(&(what, len, needed)) => Err(AnnealError::ShortBuffer { what, len, needed }),
        None => Ok(()),
    }
}
