//! The wgpu engine (Cargo feature `wgpu`): the anneal on any GPU with
//! Vulkan, Metal or DX12, through WGSL compute shaders (`wgpu/*.wgsl`).
//!
//! The points are uploaded once as f32 (f16 and bf16 widened on the host),
//! split into chunks of rows that each fit the adapter's largest storage
//! binding. One step, per chunk: the tiled assignment (`assign.wgsl`), then
//! the partial statistics by a stable counting sort of the points by anchor
//! (`count`, `scan`, `starts`, `scatter`) and per-anchor sums of the members
//! in point order (`sums.wgsl`, compensated f32); then the update over the
//! chunks' sums in chunk order (`update.wgsl`) and the anchors' norms. No
//! sum depends on the order in which threads run, so a run gives the same
//! bits every time. The engine only computes: the driver
//! ([`super::run_with`]) makes every decision, as for the CPU and CUDA
//! engines.

use std::sync::mpsc;

use wgpu::util::DeviceExt;

mod device;

pub use device::{Adapters, WgpuDevice, WgpuError};

use crate::{engine::Engine, error::AnnealError, input::Problem, vocab::AnchorStats};

/// Rows per workgroup of `assign.wgsl`.
const ASSIGN_ROWS: usize = 128;
/// Points per segment of the counting sort.
const SEGMENT: usize = 4096;
/// Threads of the 1-D kernels.
const THREADS: usize = 256;
/// Dimensions per workgroup of `sums.wgsl` and `update.wgsl`.
const DIMS: usize = 64;

/// The compute pipelines, one per WGSL file.
#[derive(Debug)]
struct Pipelines {
    assign: wgpu::ComputePipeline,
    norms: wgpu::ComputePipeline,
    count: wgpu::ComputePipeline,
    scan: wgpu::ComputePipeline,
    starts: wgpu::ComputePipeline,
    scatter: wgpu::ComputePipeline,
    sums: wgpu::ComputePipeline,
    update: wgpu::ComputePipeline,
}

impl Pipelines {
    fn new(device: &wgpu::Device) -> Self {
        let make = |name: &str, source: &str| {
            let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
                label: Some(name),
                source: wgpu::ShaderSource::Wgsl(source.into()),
            });
            device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                label: Some(name),
                layout: None,
                module: &module,
                entry_point: Some("main"),
                compilation_options: Default::default(),
                cache: None,
            })
        };
        Self {
            assign: make("assign", include_str!("wgpu/assign.wgsl")),
            norms: make("norms", include_str!("wgpu/norms.wgsl")),
            count: make("count", include_str!("wgpu/count.wgsl")),
            scan: make("scan", include_str!("wgpu/scan.wgsl")),
            starts: make("starts", include_str!("wgpu/starts.wgsl")),
            scatter: make("scatter", include_str!("wgpu/scatter.wgsl")),
            sums: make("sums", include_str!("wgpu/sums.wgsl")),
            update: make("update", include_str!("wgpu/update.wgsl")),
        }
    }
}

/// Rows of the input held in one set of buffers.
#[derive(Debug)]
struct Chunk {
    rows: usize,
    segments: usize,
    points: wgpu::Buffer,
    norms: wgpu::Buffer,
    assign: wgpu::Buffer,
    dist: wgpu::Buffer,
    /// Members per (segment, anchor), then their prefixes.
    seg: wgpu::Buffer,
    /// The chunk's points grouped by anchor, in point order.
    members: wgpu::Buffer,
}

/// The wgpu engine.
#[derive(Debug)]
pub struct WgpuEngine {
    gpu: WgpuDevice,
    pipelines: Pipelines,
    chunks: Vec<Chunk>,
    anchors: wgpu::Buffer,
    anchor_norms: wgpu::Buffer,
    /// Per chunk and anchor: members, sums of member rows, of distances.
    counts: wgpu::Buffer,
    sums: wgpu::Buffer,
    sumsq: wgpu::Buffer,
    /// Each anchor's first slot in a chunk's member list.
    starts: wgpu::Buffer,
    /// Per anchor: members, distance sum (f32 bits), over every chunk.
    totals: wgpu::Buffer,
    neighbors: wgpu::Buffer,
    neighbor_dist: wgpu::Buffer,
    n: usize,
    d: usize,
    m: usize,
    max_anchors: usize,
    stats: AnchorStats,
}

/// A `u32` of a shader's parameters (sizes were checked to fit).
fn u(v: usize) -> u32 {
    u32::try_from(v).expect("sizes fit u32 (checked by validate)")
}

impl WgpuEngine {
    /// Uploads `problem`'s points and allocates every buffer of the run,
    /// for up to its `max_anchors` anchors.
    pub fn new(gpu: &WgpuDevice, problem: &Problem<'_>) -> Result<Self, AnnealError> {
        Self::with_chunk_rows(gpu, problem, usize::MAX)
    }

    /// The same with at most `chunk_rows` rows a chunk (beside the
    /// adapter's own limit): tests run the chunked path on small inputs.
    pub fn with_chunk_rows(
        gpu: &WgpuDevice,
        problem: &Problem<'_>,
        chunk_rows: usize,
    ) -> Result<Self, AnnealError> {
        let (n, d, max_anchors) = (problem.n(), problem.d(), problem.max_anchors());
        let limit = gpu.binding_limit();
        let too_large = |what, needed: u64| {
            AnnealError::from(WgpuError::TooLarge {
                what,
                needed,
                limit,
            })
        };
        let anchor_bytes = (max_anchors * d * 4) as u64;
        if anchor_bytes > limit {
            return Err(too_large("the anchors", anchor_bytes));
        }
        // Rows a chunk may hold: its points and its (segment, anchor)
        // counts each fit one binding.
        let by_points = (limit / (d as u64 * 4)) as usize;
        let by_counts = (limit / (max_anchors as u64 * 4)) as usize * SEGMENT;
        let mut rows = by_points.min(by_counts).min(chunk_rows).min(n).max(1);
        if rows > SEGMENT {
            rows -= rows % SEGMENT;
        }
        if by_points == 0 {
            return Err(too_large("one point", d as u64 * 4));
        }
        let chunk_count = n.div_ceil(rows);
        let partial_bytes = (chunk_count * max_anchors * d * 4) as u64;
        if partial_bytes > limit {
            return Err(too_large("the per-chunk anchor sums", partial_bytes));
        }
        let device = &gpu.device;
        let buffer = |label: &str, bytes: usize, usage: wgpu::BufferUsages| {
            device.create_buffer(&wgpu::BufferDescriptor {
                label: Some(label),
                size: bytes.max(4) as u64,
                usage,
                mapped_at_creation: false,
            })
        };
        let storage = wgpu::BufferUsages::STORAGE
            | wgpu::BufferUsages::COPY_DST
            | wgpu::BufferUsages::COPY_SRC;
        let pipelines = Pipelines::new(device);
        let points = problem.points();
        let mut chunks = Vec::with_capacity(chunk_count);
        for first in (0..n).step_by(rows) {
            let count = rows.min(n - first);
            let segments = count.div_ceil(SEGMENT);
            let chunk = Chunk {
                rows: count,
                segments,
                points: buffer("points", count * d * 4, storage),
                norms: buffer("point norms", count * 4, storage),
                assign: buffer("assign", count * 4, storage),
                dist: buffer("dist", count * 4, storage),
                seg: buffer("segment counts", segments * max_anchors * 4, storage),
                members: buffer("members", count * 4, storage),
            };
            // Widened to f32 a slab at a time, so that no host copy of the
            // whole chunk is made.
            let slab = (1 << 22) / d.max(1) + 1;
            for r in (0..count).step_by(slab) {
                let take = slab.min(count - r);
                let values = points.range_f32((first + r) * d..(first + r + take) * d);
                gpu.queue.write_buffer(
                    &chunk.points,
                    (r * d * 4) as u64,
                    bytemuck::cast_slice(&values),
                );
            }
            chunks.push(chunk);
        }
        let engine = Self {
            anchors: buffer("anchors", max_anchors * d * 4, storage),
            anchor_norms: buffer("anchor norms", max_anchors * 4, storage),
            counts: buffer("counts", chunk_count * max_anchors * 4, storage),
            sums: buffer("sums", chunk_count * max_anchors * d * 4, storage),
            sumsq: buffer("sumsq", chunk_count * max_anchors * 4, storage),
            starts: buffer("starts", max_anchors * 4, storage),
            totals: buffer("totals", 2 * max_anchors * 4, storage),
            neighbors: buffer("neighbors", max_anchors * 4, storage),
            neighbor_dist: buffer("neighbor dist", max_anchors * 4, storage),
            gpu: gpu.clone(),
            pipelines,
            chunks,
            n,
            d,
            m: 0,
            max_anchors,
            stats: AnchorStats {
                counts: Vec::new(),
                sumsq: Vec::new(),
            },
        };
        let mut encoder = engine.encoder();
        {
            let mut pass = encoder.begin_compute_pass(&Default::default());
            for chunk in &engine.chunks {
                engine.norms(&mut pass, &chunk.points, &chunk.norms, chunk.rows);
            }
        }
        engine.submit(encoder)?;
        Ok(engine)
    }

    /// Chunks the points are held in.
    pub fn chunks(&self) -> usize {
        self.chunks.len()
    }

    fn encoder(&self) -> wgpu::CommandEncoder {
        self.gpu
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor { label: None })
    }

    /// Submits `encoder` and waits for it.
    fn submit(&self, encoder: wgpu::CommandEncoder) -> Result<(), WgpuError> {
        self.gpu.queue.submit([encoder.finish()]);
        self.gpu
            .device
            .poll(wgpu::PollType::wait_indefinitely())
            .map_err(|e| WgpuError::Runtime(e.to_string()))?;
        self.gpu.check()
    }

    /// `(x, y)` workgroups for `groups` in all (2-D past the per-dimension
    /// limit; the shaders index `x + y * groups_x`).
    fn grid(&self, groups: usize) -> (u32, u32) {
        let most = self.gpu.limits.max_compute_workgroups_per_dimension as usize;
        let x = groups.clamp(1, most);
        (u(x), u(groups.div_ceil(x).max(1)))
    }

    /// One dispatch of `pipeline` with `params` (binding 0) and `buffers`
    /// (bindings 1, 2, ...).
    fn dispatch(
        &self,
        pass: &mut wgpu::ComputePass<'_>,
        pipeline: &wgpu::ComputePipeline,
        params: &[u32],
        buffers: &[&wgpu::Buffer],
        groups: (u32, u32, u32),
    ) {
        let device = &self.gpu.device;
        let uniform = device.create_buffer_init(&wgpu::util::BufferInitDescriptor {
            label: None,
            contents: bytemuck::cast_slice(params),
            usage: wgpu::BufferUsages::UNIFORM,
        });
        let mut entries = vec![wgpu::BindGroupEntry {
            binding: 0,
            resource: uniform.as_entire_binding(),
        }];
        for (i, b) in buffers.iter().enumerate() {
            entries.push(wgpu::BindGroupEntry {
                binding: i as u32 + 1,
                resource: b.as_entire_binding(),
            });
        }
        let group = device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: None,
            layout: &pipeline.get_bind_group_layout(0),
            entries: &entries,
        });
        pass.set_pipeline(pipeline);
        pass.set_bind_group(0, &group, &[]);
        pass.dispatch_workgroups(groups.0, groups.1, groups.2);
    }

    /// The squared norms of `rows` rows of `x`.
    fn norms(
        &self,
        pass: &mut wgpu::ComputePass<'_>,
        x: &wgpu::Buffer,
        out: &wgpu::Buffer,
        rows: usize,
    ) {
        let (gx, gy) = self.grid(rows.div_ceil(THREADS));
        self.dispatch(
            pass,
            &self.pipelines.norms,
            &[u(rows), u(self.d), gx, 0],
            &[x, out],
            (gx, gy, 1),
        );
    }

    /// The nearest of the `m` anchors of each of `rows` rows of `x`.
    fn assign(
        &self,
        pass: &mut wgpu::ComputePass<'_>,
        (x, x_norms): (&wgpu::Buffer, &wgpu::Buffer),
        rows: usize,
        exclude_self: bool,
        (assign, dist): (&wgpu::Buffer, &wgpu::Buffer),
    ) {
        let (gx, gy) = self.grid(rows.div_ceil(ASSIGN_ROWS));
        self.dispatch(
            pass,
            &self.pipelines.assign,
            &[
                u(rows),
                u(self.d),
                u(self.m),
                u32::from(exclude_self),
                gx,
                0,
                0,
                0,
            ],
            &[x, x_norms, &self.anchors, &self.anchor_norms, assign, dist],
            (gx, gy, 1),
        );
    }

    /// Chunk `c`'s assignment and partial statistics.
    fn chunk_partials(&self, pass: &mut wgpu::ComputePass<'_>, c: usize) {
        let chunk = &self.chunks[c];
        let (m, d) = (self.m, self.d);
        let offset = u(c * m);
        self.assign(
            pass,
            (&chunk.points, &chunk.norms),
            chunk.rows,
            false,
            (&chunk.assign, &chunk.dist),
        );
        let (gx, gy) = self.grid(chunk.rows.div_ceil(THREADS));
        self.dispatch(
            pass,
            &self.pipelines.count,
            &[u(chunk.rows), u(m), u(SEGMENT), gx],
            &[&chunk.assign, &chunk.seg],
            (gx, gy, 1),
        );
        let (gx, gy) = self.grid(m.div_ceil(THREADS));
        self.dispatch(
            pass,
            &self.pipelines.scan,
            &[u(m), u(chunk.segments), offset, 0],
            &[&chunk.seg, &self.counts],
            (gx, gy, 1),
        );
        self.dispatch(
            pass,
            &self.pipelines.starts,
            &[u(m), offset, 0, 0],
            &[&self.counts, &self.starts],
            (1, 1, 1),
        );
        let (gx, gy) = self.grid(chunk.segments);
        self.dispatch(
            pass,
            &self.pipelines.scatter,
            &[u(chunk.rows), u(m), u(SEGMENT), gx],
            &[&chunk.assign, &chunk.seg, &self.starts, &chunk.members],
            (gx, gy, 1),
        );
        let (gx, gy) = self.grid(m);
        self.dispatch(
            pass,
            &self.pipelines.sums,
            &[u(m), u(d), offset, gx],
            &[
                &chunk.points,
                &chunk.dist,
                &chunk.members,
                &self.starts,
                &self.counts,
                &self.sums,
                &self.sumsq,
            ],
            (gx, gy, u(d.div_ceil(DIMS))),
        );
    }

    /// Copies `len` values of `T` from the start of `buffer` to the host.
    fn read<T: bytemuck::Pod>(
        &self,
        buffer: &wgpu::Buffer,
        len: usize,
    ) -> Result<Vec<T>, WgpuError> {
        let bytes = (len * std::mem::size_of::<T>()) as u64;
        if bytes == 0 {
            return Ok(Vec::new());
        }
        let staging = self.gpu.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("read back"),
            size: bytes,
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let mut encoder = self.encoder();
        encoder.copy_buffer_to_buffer(buffer, 0, &staging, 0, bytes);
        self.gpu.queue.submit([encoder.finish()]);
        let (sender, receiver) = mpsc::channel();
        staging.map_async(wgpu::MapMode::Read, .., move |result| {
            // The receiver waits below; a send fails only if it is gone.
            let _ = sender.send(result);
        });
        self.gpu
            .device
            .poll(wgpu::PollType::wait_indefinitely())
            .map_err(|e| WgpuError::Runtime(e.to_string()))?;
        self.gpu.check()?;
        receiver
            .recv()
            .map_err(|e| WgpuError::Runtime(e.to_string()))?
            .map_err(|e| WgpuError::Runtime(e.to_string()))?;
        let view = staging
            .get_mapped_range(..)
            .map_err(|e| WgpuError::Runtime(e.to_string()))?;
        let values = bytemuck::pod_collect_to_vec(&view);
        drop(view);
        staging.unmap();
        Ok(values)
    }
}

impl Engine for WgpuEngine {
    fn set_anchors(&mut self, anchors: &[f32], m: usize) -> Result<(), AnnealError> {
        if m > self.max_anchors {
            return Err(AnnealError::TooManyAnchors {
                m,
                max: self.max_anchors,
            });
        }
        let values = crate::vocab::anchor_values(anchors, m, self.d)?;
        self.m = m;
        if !values.is_empty() {
            self.gpu
                .queue
                .write_buffer(&self.anchors, 0, bytemuck::cast_slice(values));
        }
        let mut encoder = self.encoder();
        {
            let mut pass = encoder.begin_compute_pass(&Default::default());
            self.norms(&mut pass, &self.anchors, &self.anchor_norms, m);
        }
        self.submit(encoder)?;
        Ok(())
    }

    fn step(&mut self, eta: f32) -> Result<f64, AnnealError> {
        let (m, d) = (self.m, self.d);
        let mut encoder = self.encoder();
        for chunk in &self.chunks {
            encoder.clear_buffer(&chunk.seg, 0, Some((chunk.segments * m * 4).max(4) as u64));
        }
        {
            let mut pass = encoder.begin_compute_pass(&Default::default());
            for c in 0..self.chunks.len() {
                self.chunk_partials(&mut pass, c);
            }
            let (gx, gy) = self.grid(m);
            self.dispatch(
                &mut pass,
                &self.pipelines.update,
                &[u(m), u(d), u(self.chunks.len()), gx, eta.to_bits(), 0, 0, 0],
                &[
                    &self.counts,
                    &self.sums,
                    &self.sumsq,
                    &self.anchors,
                    &self.totals,
                ],
                (gx, gy, u(d.div_ceil(DIMS))),
            );
            self.norms(&mut pass, &self.anchors, &self.anchor_norms, m);
        }
        self.gpu.queue.submit([encoder.finish()]);
        let totals: Vec<u32> = self.read(&self.totals, 2 * m)?;
        let counts: Vec<u32> = totals.iter().step_by(2).copied().collect();
        let sumsq: Vec<f64> = totals
            .iter()
            .skip(1)
            .step_by(2)
            .map(|b| f64::from(f32::from_bits(*b)))
            .collect();
        let energy = sumsq.iter().sum::<f64>() / self.n as f64;
        self.stats = AnchorStats { counts, sumsq };
        Ok(energy)
    }

    fn stats(&mut self) -> Result<AnchorStats, AnnealError> {
        Ok(self.stats.clone())
    }

    fn anchors(&mut self) -> Result<Vec<f32>, AnnealError> {
        Ok(self.read(&self.anchors, self.m * self.d)?)
    }

    fn anchor_neighbors(&mut self) -> Result<(Vec<u32>, Vec<f32>), AnnealError> {
        let m = self.m;
        let mut encoder = self.encoder();
        {
            let mut pass = encoder.begin_compute_pass(&Default::default());
            self.assign(
                &mut pass,
                (&self.anchors, &self.anchor_norms),
                m,
                true,
                (&self.neighbors, &self.neighbor_dist),
            );
        }
        self.submit(encoder)?;
        Ok((
            self.read(&self.neighbors, m)?,
            self.read(&self.neighbor_dist, m)?,
        ))
    }

    fn assignments(&mut self) -> Result<Vec<u32>, AnnealError> {
        let mut all = Vec::with_capacity(self.n);
        for chunk in &self.chunks {
            all.extend(self.read::<u32>(&chunk.assign, chunk.rows)?);
        }
        Ok(all)
    }
}
