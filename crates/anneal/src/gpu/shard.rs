//! One GPU's part of an engine ([`Shard`]): its rows of the points, every
//! buffer of the iteration, and the kernels of one iteration, enqueued
//! without reading anything back. Its buffers are its own: the engines see
//! them through its methods, and the collectives through [`Partials`].

use std::ops::Range;
use std::time::Instant;

use crate::bindings::kernels::{
    anneal_combine, anneal_combine_update, anneal_finish, anneal_iota, anneal_members,
    anneal_norms_f32, anneal_scan, anneal_update,
};
use crate::bindings::types::{
    AnnealControl, KILN_ANNEAL_COUNT as COUNT, KILN_ANNEAL_MEMBERS_THREADS,
    KILN_ANNEAL_PIECE as PIECE,
};
use gpu_core::{
    Backend, BackendKind, DeviceBuffer, DeviceView, DeviceViewMut, Kernel, LaunchConfig, Stream,
};

use super::super::assign_tc::TcAssign;
use super::assign::{enqueue_assign, AssignArgs, AssignPoints};
use super::fuse::{Fuse, FUSE_ENV};
use super::readback::ReadBack;
use super::sort::{sort_pairs_u32, sort_scratch_bytes, MembersBy, SortOut, MEMBERS_ENV};
use super::{norms_config, RUN};
use crate::{
    engine::SetupParts,
    error::AnnealError,
    vocab::{AnchorStats, Dtype, Points, Steps},
};

mod moves;
mod points;
mod update;

use points::{upload_points, ShardPoints};

/// One GPU's part: its rows of the points and every buffer of the iteration.
#[derive(Debug)]
pub(super) struct Shard {
    stream: Stream,
    /// Where its setup went.
    setup: SetupParts,
    points: ShardPoints,
    norms_f32: Kernel<anneal_norms_f32>,
    scan: Kernel<anneal_scan>,
    combine: Kernel<anneal_combine>,
    update: Kernel<anneal_update>,
    finish: Kernel<anneal_finish>,
    /// The three above in one launch, where [`Fuse`] says, and the count
    /// of its blocks that are done (zeroed by the last).
    combine_update: Kernel<anneal_combine_update>,
    fuse: Fuse,
    arrived: DeviceBuffer<u32>,
    /// Rows of this shard.
    n: u32,
    point_norms: DeviceBuffer<f32>,
    anchors: DeviceBuffer<f32>,
    anchor_norms: DeviceBuffer<f32>,
    assign: DeviceBuffer<u32>,
    dist: DeviceBuffer<f32>,
    counts: DeviceBuffer<u32>,
    offsets: DeviceBuffer<u32>,
    /// First piece of each anchor's members, and each piece's anchor
    /// (anneal.h).
    pieces: DeviceBuffer<u32>,
    owners: DeviceBuffer<u32>,
    /// Per piece: the sum of its points (`d` each) and of its distances.
    piece_sums: DeviceBuffer<f64>,
    piece_dist: DeviceBuffer<f64>,
    /// `0..n`, the values the sort carries.
    iota: DeviceBuffer<u32>,
    /// The sorted keys (assignments), which nothing reads.
    sorted: DeviceBuffer<u32>,
    /// Where `read_run` and `stats` read into.
    run_back: ReadBack<AnnealControl, f64>,
    stats_back: ReadBack<u32, f64>,
    /// Lists the members by scan ([`MembersBy`]), for small problems.
    gather: Kernel<anneal_members>,
    members_by: MembersBy,
    /// The points in anchor order, each anchor's in point order.
    order: DeviceBuffer<u32>,
    /// Members per anchor (this shard's, then all shards' after the
    /// all-reduce).
    members: DeviceBuffer<u32>,
    /// Point sums per anchor (`m × d`), this shard's, then all shards'.
    partial: DeviceBuffer<f64>,
    /// Distance sums per anchor (`m`), likewise.
    sumsq: DeviceBuffer<f64>,
    control: DeviceBuffer<AnnealControl>,
    history: DeviceBuffer<f64>,
    scratch: DeviceBuffer<u8>,
    /// The tensor-core assignment (sm_80+, unless `KILN_ANNEAL_TC=0`); the
    /// SIMT kernel otherwise.
    tc: Option<TcAssign>,
    /// Maintenance's plans and the initial anchors, applied on the device.
    moves: moves::Moves,
}

/// Blocks over `d` of the statistics' kernels (`anneal_reduce`,
/// `anneal_combine`): 128 columns each, within grid.y's limit (anneal.h).
fn column_blocks(d: u32) -> u32 {
    d.div_ceil(128).clamp(1, 65_535)
}

fn per_anchor(m: u32) -> LaunchConfig {
    LaunchConfig {
        grid: (m.max(1), 1, 1),
        block: (128, 1, 1),
        shared_mem_bytes: 0,
    }
}

impl Shard {
    /// `pieces`: this shard's rows, as flat slices of one element type
    /// (several when its rows span input files), uploaded in order.
    pub(super) fn new(
        backend: &Backend,
        pieces: &[Points<'_>],
        d: usize,
        max_anchors: usize,
    ) -> Result<Self, AnnealError> {
        let begun = Instant::now();
        let n = pieces.iter().map(Points::len).sum::<usize>() / d;
        let (n32, d32) = (n as u32, d as u32);
        // A stream of its own per GPU (NCCL runs on it too).
        let stream = if backend.kind() == BackendKind::Cuda {
            backend.new_stream()?
        } else {
            backend.default_stream()
        };
        let dtype = pieces.first().map_or(Dtype::F32, Points::dtype);
        // The points are uploaded on a thread of their own (the host's
        // copies into page-locked memory, bound by its memory) while this
        // one allocates the run's buffers (bound by the driver).
        std::thread::scope(|scope| {
            let upload = scope.spawn(|| upload_points(backend, &stream, pieces, n * d, dtype));
            let mut point_norms = stream.alloc_zeros_local::<f32>(n)?;
            let scratch_bytes = sort_scratch_bytes(n32)?;
            let max_pieces = n.div_ceil(PIECE as usize) + max_anchors;
            let mut tc = TcAssign::new(backend, &stream, n, d, max_anchors)?;
            let mut iota = stream.alloc_zeros_local(n)?;
            let iota_kernel: Kernel<anneal_iota> = backend.kernel()?;
            let anchors = stream.alloc_zeros_local(max_anchors * d)?;
            let anchor_norms = stream.alloc_zeros_local(max_anchors)?;
            let assign = stream.alloc_zeros_local(n)?;
            let dist = stream.alloc_zeros_local(n)?;
            let counts = stream.alloc_zeros_local(max_anchors)?;
            let offsets = stream.alloc_zeros_local(max_anchors + 1)?;
            let first_pieces = stream.alloc_zeros_local(max_anchors + 1)?;
            let piece_sums = stream.alloc_zeros_local(max_pieces * d)?;
            let piece_dist = stream.alloc_zeros_local(max_pieces)?;
            let owners = stream.alloc_zeros_local(max_pieces)?;
            let sorted = stream.alloc_zeros_local(n)?;
            let order = stream.alloc_zeros_local(n)?;
            let members = stream.alloc_zeros_local(max_anchors)?;
            let partial = stream.alloc_zeros_local(max_anchors * d)?;
            let sumsq = stream.alloc_zeros_local(max_anchors)?;
            let control = stream.alloc_zeros_local(1)?;
            let history = stream.alloc_zeros_local(RUN)?;
            let scratch = stream.alloc_zeros_local(scratch_bytes.max(1))?;
            let moves = moves::Moves::new(backend, &stream, max_anchors, d)?;
            let members_by = MembersBy::from_env(std::env::var(MEMBERS_ENV).ok().as_deref())?;
            let fuse = Fuse::from_env(std::env::var(FUSE_ENV).ok().as_deref())?;
            let arrived = stream.alloc_zeros_local(1)?;
            let run_back = ReadBack::new(&stream, 1, RUN)?;
            let stats_back = ReadBack::new(&stream, max_anchors, max_anchors)?;
            let (points, upload) = upload
                .join()
                .map_err(|_| AnnealError::internal("the points' upload panicked"))??;
            let started = Instant::now();
            points.norms(&stream, n32, d32, &mut point_norms)?;
            match (&mut tc, &points) {
                (Some(tc), ShardPoints::F32(x, _, _)) => {
                    tc.prepare_points(&stream, x.view(), point_norms.view(), n32, d32)?
                }
                (Some(tc), ShardPoints::F16(x, _, _)) => {
                    tc.prepare_points(&stream, x.view(), point_norms.view(), n32, d32)?
                }
                (None, _) => {}
            }
            stream.launch(
                &iota_kernel,
                LaunchConfig::for_elements(n32, 256),
                (n32, iota.view_mut()),
            )?;
            // The norms and the tensor-core copy are done once this
            // returns: the wait is the preparation's, what is left of the
            // whole the buffers'.
            stream.synchronize()?;
            let prepare = started.elapsed().as_secs_f64();
            let setup = SetupParts {
                upload,
                prepare,
                buffers: (begun.elapsed().as_secs_f64() - upload - prepare).max(0.0),
            };
            Ok(Self {
                tc,
                points,
                norms_f32: backend.kernel()?,
                scan: backend.kernel()?,
                combine: backend.kernel()?,
                update: backend.kernel()?,
                finish: backend.kernel()?,
                combine_update: backend.kernel()?,
                fuse,
                arrived,
                n: n32,
                point_norms,
                anchors,
                anchor_norms,
                assign,
                dist,
                counts,
                offsets,
                pieces: first_pieces,
                owners,
                piece_sums,
                piece_dist,
                iota,
                sorted,
                gather: backend.kernel()?,
                members_by,
                run_back,
                stats_back,
                order,
                members,
                partial,
                sumsq,
                control,
                history,
                scratch,
                moves,
                setup,
                stream: stream.clone(),
            })
        })
    }

    /// Copies `m × d` anchors from the host and computes their norms.
    pub(super) fn set_anchors(
        &mut self,
        anchors: &[f32],
        m: u32,
        d: u32,
    ) -> Result<(), AnnealError> {
        self.upload_anchors(anchors, m, d)?;
        self.anchors_changed(m, d)
    }

    /// Copies `m × d` anchors from the host, without their norms.
    pub(super) fn upload_anchors(
        &mut self,
        anchors: &[f32],
        m: u32,
        d: u32,
    ) -> Result<(), AnnealError> {
        let md = m as usize * d as usize;
        self.stream
            .copy_to_device(&anchors[..md], &mut self.anchors.slice_mut(0..md)?)?;
        Ok(())
    }

    /// The norms of the first `m` anchors, after they changed on the device.
    pub(super) fn anchors_changed(&mut self, m: u32, d: u32) -> Result<(), AnnealError> {
        let md = m as usize * d as usize;
        self.stream.launch(
            &self.norms_f32,
            norms_config(m),
            (
                self.anchors.slice(0..md)?,
                m,
                d,
                self.anchor_norms.view_mut(),
            ),
        )?;
        Ok(())
    }

    /// Enqueues assign, scan, sort, the partial statistics and (unless
    /// `fused`: [`Shard::enqueue_update`] does) their combination by anchor
    /// of one iteration.
    pub(super) fn enqueue_partials(
        &mut self,
        m: u32,
        d: u32,
        fused: bool,
    ) -> Result<(), AnnealError> {
        let n = self.n;
        let md = m as usize * d as usize;
        let s = &self.stream;
        let points = match &self.points {
            ShardPoints::F32(points, assign, _) => AssignPoints::F32(points.view(), assign),
            ShardPoints::F16(points, assign, _) => AssignPoints::F16(points.view(), assign),
        };
        let args = AssignArgs {
            x_norms: self.point_norms.view(),
            n,
            d,
            anchors: self.anchors.view(),
            anchor_norms: self.anchor_norms.view(),
            m,
            flags: COUNT,
            control: self.control.view(),
            assign: self.assign.view_mut(),
            dist: self.dist.view_mut(),
            counts: self.counts.view_mut(),
        };
        enqueue_assign(s, points, self.tc.as_mut(), args)?;
        let single_block = LaunchConfig {
            grid: (1, 1, 1),
            block: (1024, 1, 1),
            shared_mem_bytes: 0,
        };
        s.launch(
            &self.scan,
            single_block,
            (
                self.control.view(),
                self.counts.view_mut(),
                m,
                self.offsets.view_mut(),
                self.pieces.view_mut(),
                self.owners.view_mut(),
            ),
        )?;
        if self.members_by.scans(n, m) {
            s.launch(
                &self.gather,
                LaunchConfig {
                    grid: (m.max(1), 1, 1),
                    block: (KILN_ANNEAL_MEMBERS_THREADS, 1, 1),
                    shared_mem_bytes: 0,
                },
                (
                    self.assign.view(),
                    n,
                    self.offsets.view(),
                    m,
                    self.control.view(),
                    self.order.view_mut(),
                ),
            )?;
        } else {
            // Keys below m: the bits of m - 1 (at least one).
            let end_bit = (32 - (m.max(2) - 1).leading_zeros()).max(1);
            sort_pairs_u32(
                s,
                (self.assign.view(), self.iota.view()),
                n,
                end_bit,
                SortOut {
                    keys: self.sorted.view_mut(),
                    values: self.order.view_mut(),
                },
                self.scratch.view_mut(),
            )?;
        }
        macro_rules! reduce_args {
            ($points:expr) => {
                (
                    $points.view(),
                    self.order.view(),
                    self.offsets.view(),
                    self.pieces.view(),
                    self.owners.view(),
                    self.dist.view(),
                    m,
                    d,
                    self.control.view(),
                    self.piece_sums.view_mut(),
                    self.piece_dist.view_mut(),
                )
            };
        }
        // Enough blocks for any split of n points over m anchors; those past
        // the pieces there are return at once.
        // And the columns over grid.y.
        let pieces = LaunchConfig {
            grid: (n.div_ceil(PIECE) + m, column_blocks(d), 1),
            block: (128, 1, 1),
            shared_mem_bytes: 0,
        };
        match &self.points {
            ShardPoints::F32(points, _, reduce) => {
                s.launch(reduce, pieces, reduce_args!(points))?
            }
            ShardPoints::F16(points, _, reduce) => {
                s.launch(reduce, pieces, reduce_args!(points))?
            }
        }
        if fused {
            return Ok(());
        }
        s.launch(
            &self.combine,
            LaunchConfig {
                grid: (m.max(1), column_blocks(d), 1),
                ..per_anchor(m)
            },
            (
                self.offsets.view(),
                self.pieces.view(),
                self.piece_sums.view(),
                self.piece_dist.view(),
                m,
                d,
                self.control.view(),
                self.members.view_mut(),
                self.partial.slice_mut(0..md)?,
                self.sumsq.view_mut(),
            ),
        )?;
        Ok(())
    }

    /// Waits for the last assignment and prints how many points it left to
    /// the list kernel ([`super::super::assign_tc::STATS_ENV`]).
    pub(super) fn print_unresolved(&self) -> Result<(), AnnealError> {
        if let Some(tc) = &self.tc {
            let count = self.stream.to_host(&tc.unresolved_count().view())?[0];
            eprintln!(
                "tc: {count} of {} points ({:.2}%) left to the list kernel",
                self.n,
                100.0 * f64::from(count) / f64::from(self.n.max(1))
            );
        }
        Ok(())
    }

    /// Where its setup went.
    pub(super) fn setup_parts(&self) -> SetupParts {
        self.setup
    }

    /// The stream this shard's work goes on (NCCL's too).
    pub(super) fn stream(&self) -> &Stream {
        &self.stream
    }

    /// Rows of the points this shard holds.
    pub(super) fn rows(&self) -> usize {
        self.n as usize
    }

    /// Whether its assignment runs on tensor cores (then the search among
    /// the anchors does too).
    pub(super) fn uses_tensor_cores(&self) -> bool {
        self.tc.is_some()
    }

    /// The first `md` anchor values, for a collective to write.
    pub(super) fn anchors_mut(&mut self, md: usize) -> Result<DeviceViewMut<'_, f32>, AnnealError> {
        Ok(self.anchors.slice_mut(0..md)?)
    }

    /// The last step's assignments of this shard's rows `rows`, on the
    /// device (for a send).
    pub(super) fn assignments(
        &self,
        rows: Range<usize>,
    ) -> Result<DeviceView<'_, u32>, AnnealError> {
        Ok(self.assign.slice(rows)?)
    }

    /// The last step's assignments of this shard's rows `rows`, copied
    /// into `out` (as long as `rows`).
    pub(super) fn assignments_into(
        &self,
        rows: Range<usize>,
        out: &mut [u32],
    ) -> Result<(), AnnealError> {
        self.stream.copy_to_host(&self.assign.slice(rows)?, out)?;
        Ok(())
    }

    /// The per-anchor sums of the first `m` anchors, for a collective to
    /// sum over the shards.
    pub(super) fn partials_mut(&mut self, m: usize, d: usize) -> Result<Partials<'_>, AnnealError> {
        Ok(Partials {
            sums: self.partial.slice_mut(0..m * d)?,
            sumsq: self.sumsq.slice_mut(0..m)?,
            members: self.members.slice_mut(0..m)?,
        })
    }

    /// The anchors, for a search among them (every buffer at its full
    /// size: the search takes the parts it reads).
    pub(super) fn anchor_views(&mut self) -> AnchorViews<'_> {
        AnchorViews {
            stream: &self.stream,
            anchors: self.anchors.view(),
            norms: self.anchor_norms.view(),
            counts: self.counts.view_mut(),
        }
    }

    /// Starts a run of iterations from `control` (the device's convergence
    /// state).
    pub(super) fn start_run(&mut self, control: AnnealControl) -> Result<(), AnnealError> {
        self.stream
            .copy_to_device(&[control], &mut self.control.view_mut())?;
        Ok(())
    }

    /// Waits for the run and reads what it did: the energy of each
    /// iteration it ran, and whether the last converged.
    pub(super) fn read_run(&mut self) -> Result<Steps, AnnealError> {
        let (state, mut energies) =
            self.run_back
                .read(&self.stream, self.control.view(), self.history.view())?;
        let state = state[0];
        energies.truncate(state.iterations as usize);
        Ok(Steps {
            energies,
            converged: state.done != 0,
        })
    }

    /// The member counts and distance sums of the first `m` anchors.
    pub(super) fn stats(&mut self, m: usize) -> Result<AnchorStats, AnnealError> {
        self.start_stats(m)?;
        self.take_stats(m)
    }

    /// Enqueues the copies of [`Shard::stats`] and returns at once:
    /// [`Shard::take_stats`] waits for them.
    pub(super) fn start_stats(&mut self, m: usize) -> Result<(), AnnealError> {
        self.stats_back.start(
            &self.stream,
            self.members.slice(0..m)?,
            self.sumsq.slice(0..m)?,
        )
    }

    /// What [`Shard::start_stats`] copied (for the same `m`).
    pub(super) fn take_stats(&self, m: usize) -> Result<AnchorStats, AnnealError> {
        let (counts, sumsq) = self.stats_back.take(m, m)?;
        Ok(AnchorStats { counts, sumsq })
    }

    /// The first `md` anchor values.
    pub(super) fn anchors(&self, md: usize) -> Result<Vec<f32>, AnnealError> {
        Ok(self.stream.to_host(&self.anchors.slice(0..md)?)?)
    }

    /// The first `out.len()` anchor values, into `out`.
    pub(super) fn anchors_into(&self, out: &mut [f32]) -> Result<(), AnnealError> {
        let md = out.len();
        self.stream.copy_to_host(&self.anchors.slice(0..md)?, out)?;
        Ok(())
    }
}

/// A shard's per-anchor sums of one step, which a collective adds over the
/// shards (or ranks) in place: afterwards every shard holds the totals.
pub(super) struct Partials<'a> {
    /// Point sums per anchor (`m × d`).
    pub(super) sums: DeviceViewMut<'a, f64>,
    /// Distance sums per anchor (`m`).
    pub(super) sumsq: DeviceViewMut<'a, f64>,
    /// Members per anchor (`m`).
    pub(super) members: DeviceViewMut<'a, u32>,
}

/// A shard's anchors on its device, for the search among them
/// ([`super::neighbors::Neighbors`]).
pub(super) struct AnchorViews<'a> {
    pub(super) stream: &'a Stream,
    /// Every anchor slot (`max_anchors × d`).
    pub(super) anchors: DeviceView<'a, f32>,
    /// Their norms (`max_anchors`).
    pub(super) norms: DeviceView<'a, f32>,
    /// The member counts, which the search's kernel takes and leaves alone
    /// (it counts nothing).
    pub(super) counts: DeviceViewMut<'a, u32>,
}
