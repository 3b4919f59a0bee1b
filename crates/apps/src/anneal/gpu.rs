//! The GPU engine, on one GPU or sharded over several.
//!
//! Every buffer is allocated once for the run and the points are uploaded
//! once (f32 or f16; bf16 widened to f32 on the device), split into one
//! contiguous shard per GPU, each read straight from the caller's parts
//! (memory-mapped files: no host copy). One iteration
//! is, on every GPU: the fused distance + argmin of its shard (no `n × m`
//! distance matrix exists anywhere), the per-anchor partial statistics (member
//! counts, sums of member points and of their distances) and the CUB sum of
//! the distances (the static-library module `reduce`); with several GPUs one
//! NCCL all-reduce then combines the partials, and every GPU applies the same
//! update, so the anchors stay identical without a broadcast. Then
//! `anneal_finish` records the energy and runs the convergence test on the
//! device.
//!
//! So [`Engine::run_steps`] enqueues all the iterations up to the next
//! maintenance pass without reading anything back, and reads the energies
//! once at the end: after convergence the remaining kernels return at once.
//! Nothing is allocated per iteration. On sm_80 and newer the assignment
//! runs on tensor cores with exact refinement ([`super::assign_tc`]), unless
//! `KILN_ANNEAL_TC=0` asks for the SIMT kernel.

use cuda_sys::kernels::{
    anneal_assign_f16, anneal_assign_f32, anneal_finish, anneal_norms_f16, anneal_norms_f32,
    anneal_reduce_f16, anneal_reduce_f32, anneal_scan, anneal_scatter, anneal_update,
};
use cuda_sys::types::AnnealControl;
use gpu_core::{
    Backend, BackendKind, Collective, DeviceBuffer, DeviceViewMut, Kernel, LaunchConfig, Stream,
};

mod sum;
mod upload;

use super::assign_tc::{TcAssign, TcJob};
use super::{AnchorStats, AnnealError, Dtype, Engine, Points, Problem, Steps};
use sum::{sum_f32, sum_scratch_bytes};
use upload::{upload_f16, upload_f32};

use cuda_sys::types::{KILN_ANNEAL_COUNT as COUNT, KILN_ANNEAL_EXCLUDE_SELF as EXCLUDE_SELF};

/// Points per block of `anneal_assign_*`.
const ASSIGN_TILE: u32 = 128;
/// Iterations enqueued between two read-backs at most (the history buffer).
const RUN: usize = 64;

/// A shard's points and the kernels that read them.
#[derive(Debug)]
enum ShardPoints {
    F32(
        DeviceBuffer<f32>,
        Kernel<anneal_assign_f32>,
        Kernel<anneal_reduce_f32>,
    ),
    F16(
        DeviceBuffer<u16>,
        Kernel<anneal_assign_f16>,
        Kernel<anneal_reduce_f16>,
    ),
}

/// One GPU's part: its rows of the points and every buffer of the iteration.
#[derive(Debug)]
struct Shard {
    stream: Stream,
    points: ShardPoints,
    norms_f32: Kernel<anneal_norms_f32>,
    scan: Kernel<anneal_scan>,
    scatter: Kernel<anneal_scatter>,
    update: Kernel<anneal_update>,
    finish: Kernel<anneal_finish>,
    /// Rows of this shard.
    n: u32,
    point_norms: DeviceBuffer<f32>,
    anchors: DeviceBuffer<f32>,
    anchor_norms: DeviceBuffer<f32>,
    assign: DeviceBuffer<u32>,
    dist: DeviceBuffer<f32>,
    counts: DeviceBuffer<u32>,
    offsets: DeviceBuffer<u32>,
    cursor: DeviceBuffer<u32>,
    order: DeviceBuffer<u32>,
    /// Members per anchor (this shard's, then all shards' after the
    /// all-reduce).
    members: DeviceBuffer<u32>,
    /// Point sums (`m × d`), distance sums (`m`), energy sum (1): see anneal.h.
    partial: DeviceBuffer<f32>,
    control: DeviceBuffer<AnnealControl>,
    history: DeviceBuffer<f64>,
    scratch: DeviceBuffer<u8>,
    /// The tensor-core assignment (sm_80+, unless `KILN_ANNEAL_TC=0`); the
    /// SIMT kernel otherwise.
    tc: Option<TcAssign>,
}

/// The GPU engine.
#[derive(Debug)]
pub struct GpuEngine {
    shards: Vec<Shard>,
    /// Present with more than one shard.
    collective: Option<Collective>,
    /// Anchor-to-anchor nearest neighbours, on shard 0.
    anchor_assign: Kernel<anneal_assign_f32>,
    neighbors: DeviceBuffer<u32>,
    neighbor_dist: DeviceBuffer<f32>,
    /// Never `done`: the control of the neighbour search.
    idle: DeviceBuffer<AnnealControl>,
    n: usize,
    d: u32,
    m: u32,
}

fn assign_config(rows: u32) -> LaunchConfig {
    LaunchConfig {
        grid: (rows.div_ceil(ASSIGN_TILE).max(1), 1, 1),
        block: (256, 1, 1),
        shared_mem_bytes: 0,
    }
}

fn norms_config(rows: u32) -> LaunchConfig {
    // One warp per row.
    LaunchConfig::for_elements(rows.saturating_mul(32), 256)
}

fn per_anchor(m: u32) -> LaunchConfig {
    LaunchConfig {
        grid: (m.max(1), 1, 1),
        block: (128, 1, 1),
        shared_mem_bytes: 0,
    }
}

const SINGLE_THREAD: LaunchConfig = LaunchConfig {
    grid: (1, 1, 1),
    block: (1, 1, 1),
    shared_mem_bytes: 0,
};

impl Shard {
    /// `pieces`: this shard's rows, as flat slices of one element type
    /// (several when its rows span input files), uploaded in order.
    fn new(
        backend: &Backend,
        pieces: &[Points<'_>],
        d: usize,
        max_anchors: usize,
    ) -> Result<Self, AnnealError> {
        let n = pieces.iter().map(Points::len).sum::<usize>() / d;
        let (n32, d32) = (n as u32, d as u32);
        // A stream of its own per GPU (NCCL runs on it too).
        let stream = if backend.kind() == BackendKind::Cuda {
            backend.new_stream()?
        } else {
            backend.default_stream()
        };
        let mut point_norms = stream.alloc_zeros::<f32>(n)?;
        let dtype = pieces.first().map_or(Dtype::F32, Points::dtype);
        let points = if dtype == Dtype::F16 {
            let buffer = upload_f16(&stream, pieces, n * d)?;
            let norms: Kernel<anneal_norms_f16> = backend.kernel()?;
            stream.launch(
                &norms,
                norms_config(n32),
                (buffer.view(), n32, d32, point_norms.view_mut()),
            )?;
            ShardPoints::F16(buffer, backend.kernel()?, backend.kernel()?)
        } else {
            let buffer = upload_f32(backend, &stream, pieces, n * d)?;
            let norms: Kernel<anneal_norms_f32> = backend.kernel()?;
            stream.launch(
                &norms,
                norms_config(n32),
                (buffer.view(), n32, d32, point_norms.view_mut()),
            )?;
            ShardPoints::F32(buffer, backend.kernel()?, backend.kernel()?)
        };
        let scratch_bytes = sum_scratch_bytes(n32)?;
        Ok(Self {
            tc: TcAssign::new(backend, &stream, n)?,
            points,
            norms_f32: backend.kernel()?,
            scan: backend.kernel()?,
            scatter: backend.kernel()?,
            update: backend.kernel()?,
            finish: backend.kernel()?,
            n: n32,
            point_norms,
            anchors: stream.alloc_zeros(max_anchors * d)?,
            anchor_norms: stream.alloc_zeros(max_anchors)?,
            assign: stream.alloc_zeros(n)?,
            dist: stream.alloc_zeros(n)?,
            counts: stream.alloc_zeros(max_anchors)?,
            offsets: stream.alloc_zeros(max_anchors + 1)?,
            cursor: stream.alloc_zeros(max_anchors)?,
            order: stream.alloc_zeros(n)?,
            members: stream.alloc_zeros(max_anchors)?,
            partial: stream.alloc_zeros(max_anchors * d + max_anchors + 1)?,
            control: stream.alloc_zeros(1)?,
            history: stream.alloc_zeros(RUN)?,
            scratch: stream.alloc_zeros(scratch_bytes.max(1))?,
            stream,
        })
    }

    fn set_anchors(&mut self, anchors: &[f32], m: u32, d: u32) -> Result<(), AnnealError> {
        let md = m as usize * d as usize;
        self.stream
            .copy_to_device(&anchors[..md], &mut self.anchors.slice_mut(0..md)?)?;
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

    /// Enqueues assign, scan, scatter, the partial statistics and the
    /// energy sum of one iteration.
    fn enqueue_partials(&mut self, m: u32, d: u32) -> Result<(), AnnealError> {
        let n = self.n;
        let md = m as usize * d as usize;
        let s = &self.stream;
        // The same arguments for either point type and either kernel.
        macro_rules! tc_job {
            ($points:expr) => {
                TcJob {
                    x: $points.view(),
                    x_norms: self.point_norms.view(),
                    n,
                    d,
                    anchors: self.anchors.slice(0..md)?,
                    anchor_norms: self.anchor_norms.slice(0..m as usize)?,
                    m,
                    flags: COUNT,
                    control: self.control.view(),
                    assign: self.assign.view_mut(),
                    dist: self.dist.view_mut(),
                    counts: self.counts.slice_mut(0..m as usize)?,
                }
            };
        }
        macro_rules! simt_args {
            ($points:expr) => {
                (
                    $points.view(),
                    self.point_norms.view(),
                    n,
                    d,
                    self.anchors.slice(0..md)?,
                    self.anchor_norms.view(),
                    m,
                    COUNT,
                    self.control.view(),
                    self.assign.view_mut(),
                    self.dist.view_mut(),
                    self.counts.view_mut(),
                )
            };
        }
        match (&self.points, &mut self.tc) {
            (ShardPoints::F32(points, _, _), Some(tc)) => tc.launch(s, tc_job!(points))?,
            (ShardPoints::F16(points, _, _), Some(tc)) => tc.launch(s, tc_job!(points))?,
            (ShardPoints::F32(points, assign, _), None) => {
                s.launch(assign, assign_config(n), simt_args!(points))?
            }
            (ShardPoints::F16(points, assign, _), None) => {
                s.launch(assign, assign_config(n), simt_args!(points))?
            }
        }
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
                self.cursor.view_mut(),
            ),
        )?;
        let scatter = LaunchConfig {
            grid: (n.div_ceil(256).clamp(1, 4096), 1, 1),
            block: (256, 1, 1),
            shared_mem_bytes: 0,
        };
        s.launch(
            &self.scatter,
            scatter,
            (
                self.control.view(),
                self.assign.view(),
                n,
                self.offsets.view(),
                self.cursor.view_mut(),
                self.order.view_mut(),
            ),
        )?;
        let partial_len = md + m as usize;
        macro_rules! reduce_args {
            ($points:expr) => {
                (
                    $points.view(),
                    self.order.view(),
                    self.offsets.view(),
                    self.dist.view(),
                    m,
                    d,
                    self.control.view(),
                    self.members.view_mut(),
                    self.partial.view_mut(),
                )
            };
        }
        match &self.points {
            ShardPoints::F32(points, _, reduce) => {
                s.launch(reduce, per_anchor(m), reduce_args!(points))?
            }
            ShardPoints::F16(points, _, reduce) => {
                s.launch(reduce, per_anchor(m), reduce_args!(points))?
            }
        }
        sum_f32(
            s,
            self.dist.view(),
            n,
            self.partial.slice_mut(partial_len..=partial_len)?,
            self.scratch.view_mut(),
        )
    }

    /// Enqueues the update and the finish of one iteration (history `slot`).
    fn enqueue_update(
        &mut self,
        m: u32,
        d: u32,
        eta: f32,
        n_total: u64,
        tol: f64,
        slot: u32,
    ) -> Result<(), AnnealError> {
        let md = m as usize * d as usize;
        let s = &self.stream;
        s.launch(
            &self.update,
            per_anchor(m),
            (
                self.partial.view(),
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
            SINGLE_THREAD,
            (
                self.partial.view(),
                m,
                d,
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

impl GpuEngine {
    /// Uploads `problem`'s points and allocates every buffer of the run,
    /// for up to its `max_anchors` anchors, on one GPU. `backend` must be
    /// the CUDA backend.
    pub fn new(backend: &Backend, problem: &Problem<'_>) -> Result<Self, AnnealError> {
        Self::sharded(std::slice::from_ref(backend), problem)
    }

    /// The same over several GPUs (one CUDA backend each, distinct devices):
    /// the points are split into as many contiguous shards (at most one per
    /// point), combined each iteration by NCCL.
    pub fn sharded(backends: &[Backend], problem: &Problem<'_>) -> Result<Self, AnnealError> {
        if backends.is_empty() || backends.iter().any(|b| b.kind() != BackendKind::Cuda) {
            return Err(AnnealError::Input(
                "the GPU engine needs CUDA backends".into(),
            ));
        }
        // Sizes fit u32: `validate` checked them.
        let (points, n, d) = (problem.points(), problem.n(), problem.d());
        let (d32, max_anchors) = (d as u32, problem.max_anchors());
        let k = backends.len().min(n);
        let mut shards = Vec::with_capacity(k);
        for (r, backend) in backends[..k].iter().enumerate() {
            let rows = (r * n / k) * d..((r + 1) * n / k) * d;
            shards.push(Shard::new(backend, &points.pieces(rows), d, max_anchors)?);
        }
        let collective = if k > 1 {
            let streams: Vec<Stream> = shards.iter().map(|s| s.stream.clone()).collect();
            Some(Collective::new(&streams)?)
        } else {
            None
        };
        let first = &shards[0].stream;
        Ok(Self {
            anchor_assign: backends[0].kernel()?,
            neighbors: first.alloc_zeros(max_anchors)?,
            neighbor_dist: first.alloc_zeros(max_anchors)?,
            idle: first.alloc_zeros(1)?,
            shards,
            collective,
            n,
            d: d32,
            m: 0,
        })
    }

    /// GPUs the points are spread over.
    pub fn gpus(&self) -> usize {
        self.shards.len()
    }

    fn md(&self) -> usize {
        self.m as usize * self.d as usize
    }

    /// Sums every shard's partials into every shard's (NCCL).
    fn all_reduce(&mut self) -> Result<(), AnnealError> {
        let Some(collective) = &self.collective else {
            return Ok(());
        };
        let (m, len) = (self.m as usize, self.md() + self.m as usize + 1);
        let mut partials = self
            .shards
            .iter_mut()
            .map(|s| s.partial.slice_mut(0..len))
            .collect::<Result<Vec<DeviceViewMut<'_, f32>>, _>>()?;
        collective.all_reduce_sum(&mut partials)?;
        drop(partials);
        let mut members = self
            .shards
            .iter_mut()
            .map(|s| s.members.slice_mut(0..m))
            .collect::<Result<Vec<DeviceViewMut<'_, u32>>, _>>()?;
        collective.all_reduce_sum(&mut members)?;
        Ok(())
    }

    /// Runs up to [`RUN`] iterations on the device and reads their energies.
    fn run_on_device(
        &mut self,
        etas: &[f32],
        tol: f64,
        previous: Option<f64>,
    ) -> Result<Steps, AnnealError> {
        let control = AnnealControl {
            previous: previous.unwrap_or(0.0),
            has_previous: u32::from(previous.is_some()),
            done: 0,
            iterations: 0,
            pad: 0,
        };
        for shard in &mut self.shards {
            shard
                .stream
                .copy_to_device(&[control], &mut shard.control.view_mut())?;
        }
        let (m, d, n_total) = (self.m, self.d, self.n as u64);
        for (slot, &eta) in etas.iter().enumerate() {
            for shard in &mut self.shards {
                shard.enqueue_partials(m, d)?;
            }
            self.all_reduce()?;
            for shard in &mut self.shards {
                shard.enqueue_update(m, d, eta, n_total, tol, slot as u32)?;
            }
        }
        let first = &self.shards[0];
        let state = first.stream.to_host(&first.control.view())?[0];
        let ran = state.iterations as usize;
        let energies = first.stream.to_host(&first.history.slice(0..ran)?)?;
        Ok(Steps {
            energies,
            converged: state.done != 0,
        })
    }
}

impl Engine for GpuEngine {
    fn set_anchors(&mut self, anchors: &[f32], m: usize) -> Result<(), AnnealError> {
        let m32 = u32::try_from(m)
            .map_err(|_| AnnealError::Input(format!("{m} anchors is over u32::MAX")))?;
        if m * self.d as usize > self.shards[0].anchors.len() {
            return Err(AnnealError::Input(format!(
                "{m} anchors is over the run's maximum"
            )));
        }
        self.m = m32;
        for shard in &mut self.shards {
            shard.set_anchors(anchors, m32, self.d)?;
        }
        Ok(())
    }

    fn step(&mut self, eta: f32) -> Result<f64, AnnealError> {
        let steps = self.run_on_device(&[eta], 0.0, None)?;
        Ok(steps.energies[0])
    }

    fn run_steps(
        &mut self,
        etas: &[f32],
        tol: f64,
        previous: Option<f64>,
    ) -> Result<Steps, AnnealError> {
        let mut all = Steps {
            energies: Vec::with_capacity(etas.len()),
            converged: false,
        };
        let mut previous = previous;
        for run in etas.chunks(RUN) {
            let steps = self.run_on_device(run, tol, previous)?;
            all.energies.extend(&steps.energies);
            if steps.converged {
                all.converged = true;
                break;
            }
            previous = all.energies.last().copied();
        }
        Ok(all)
    }

    fn stats(&mut self) -> Result<AnchorStats, AnnealError> {
        let (m, md) = (self.m as usize, self.md());
        let first = &self.shards[0];
        let counts = first.stream.to_host(&first.members.slice(0..m)?)?;
        let sumsq = first.stream.to_host(&first.partial.slice(md..md + m)?)?;
        Ok(AnchorStats {
            counts,
            sumsq: sumsq.into_iter().map(f64::from).collect(),
        })
    }

    fn anchors(&mut self) -> Result<Vec<f32>, AnnealError> {
        let md = self.md();
        let first = &self.shards[0];
        Ok(first.stream.to_host(&first.anchors.slice(0..md)?)?)
    }

    fn anchor_neighbors(&mut self) -> Result<(Vec<u32>, Vec<f32>), AnnealError> {
        let (m, d) = (self.m, self.d);
        let md = self.md();
        let first = &mut self.shards[0];
        first.stream.launch(
            &self.anchor_assign,
            assign_config(m),
            (
                first.anchors.slice(0..md)?,
                first.anchor_norms.view(),
                m,
                d,
                first.anchors.slice(0..md)?,
                first.anchor_norms.view(),
                m,
                EXCLUDE_SELF,
                self.idle.view(),
                self.neighbors.view_mut(),
                self.neighbor_dist.view_mut(),
                first.counts.view_mut(),
            ),
        )?;
        let m = m as usize;
        let neighbors = first.stream.to_host(&self.neighbors.slice(0..m)?)?;
        Ok((
            neighbors,
            first.stream.to_host(&self.neighbor_dist.slice(0..m)?)?,
        ))
    }

    fn assignments(&mut self) -> Result<Vec<u32>, AnnealError> {
        let mut all = Vec::with_capacity(self.n);
        for shard in &self.shards {
            all.extend(shard.stream.to_host(&shard.assign.view())?);
        }
        Ok(all)
    }
}
