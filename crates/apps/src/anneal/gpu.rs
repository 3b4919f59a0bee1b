//! The GPU engine: every buffer allocated once for the run, points uploaded
//! once (f32 or f16), the anchors kept on the device. One step is five
//! launches (assign with counts, scan, scatter, reduce + update, the CUB sum
//! of the distances from the static-library module `reduce`) and one 4-byte
//! read of the energy; nothing is allocated per iteration. The assignment is
//! a fused distance + argmin: no `n × m` distance matrix exists anywhere.

use cuda_sys::kernels::{
    anneal_assign_f16, anneal_assign_f32, anneal_norms_f16, anneal_norms_f32,
    anneal_reduce_update_f16, anneal_reduce_update_f32, anneal_scan, anneal_scatter,
};
use gpu_core::{Backend, BackendKind, DeviceBuffer, Kernel, LaunchConfig, Stream};

use super::{AnchorStats, AnnealError, Engine, Points};

use cuda_sys::types::{KILN_ANNEAL_COUNT as COUNT, KILN_ANNEAL_EXCLUDE_SELF as EXCLUDE_SELF};

/// Points per block of `anneal_assign_*`.
const ASSIGN_TILE: u32 = 128;

#[derive(Debug)]
enum DevicePoints {
    F32(
        DeviceBuffer<f32>,
        Kernel<anneal_assign_f32>,
        Kernel<anneal_reduce_update_f32>,
    ),
    F16(
        DeviceBuffer<u16>,
        Kernel<anneal_assign_f16>,
        Kernel<anneal_reduce_update_f16>,
    ),
}

/// The GPU engine.
#[derive(Debug)]
pub struct GpuEngine {
    stream: Stream,
    points: DevicePoints,
    norms_f32: Kernel<anneal_norms_f32>,
    /// The anchors are f32 whatever the points are.
    anchor_assign: Kernel<anneal_assign_f32>,
    scan: Kernel<anneal_scan>,
    scatter: Kernel<anneal_scatter>,
    n: u32,
    d: u32,
    m: u32,
    point_norms: DeviceBuffer<f32>,
    anchors: DeviceBuffer<f32>,
    anchor_norms: DeviceBuffer<f32>,
    assign: DeviceBuffer<u32>,
    dist: DeviceBuffer<f32>,
    counts: DeviceBuffer<u32>,
    offsets: DeviceBuffer<u32>,
    cursor: DeviceBuffer<u32>,
    order: DeviceBuffer<u32>,
    sumsq: DeviceBuffer<f32>,
    neighbors: DeviceBuffer<u32>,
    neighbor_dist: DeviceBuffer<f32>,
    energy: DeviceBuffer<f32>,
    scratch: DeviceBuffer<u8>,
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

impl GpuEngine {
    /// Uploads the points and allocates every buffer of the run, for up to
    /// `max_anchors` anchors. `backend` must be the CUDA backend.
    pub fn new(
        backend: &Backend,
        points: Points<'_>,
        n: usize,
        d: usize,
        max_anchors: usize,
    ) -> Result<Self, AnnealError> {
        if backend.kind() != BackendKind::Cuda {
            return Err(AnnealError::Input(
                "the GPU engine needs the CUDA backend".into(),
            ));
        }
        let too_big = || {
            AnnealError::Input(format!(
                "n = {n}, d = {d} or max_anchors = {max_anchors} is over u32::MAX"
            ))
        };
        let (n32, d32) = (
            u32::try_from(n).map_err(|_| too_big())?,
            u32::try_from(d).map_err(|_| too_big())?,
        );
        u32::try_from(max_anchors).map_err(|_| too_big())?;
        // The context's default stream, as the other workloads use: one
        // stream, so cudarc needs no cross-stream event tracking.
        let stream = backend.default_stream();
        let mut point_norms = stream.alloc_zeros::<f32>(n)?;
        let points = match points {
            Points::F32(values) => {
                let buffer = stream.to_device(values)?;
                let norms: Kernel<anneal_norms_f32> = backend.kernel()?;
                stream.launch(
                    &norms,
                    norms_config(n32),
                    (buffer.view(), n32, d32, point_norms.view_mut()),
                )?;
                DevicePoints::F32(buffer, backend.kernel()?, backend.kernel()?)
            }
            Points::F16(values) => {
                let buffer = stream.to_device(values)?;
                let norms: Kernel<anneal_norms_f16> = backend.kernel()?;
                stream.launch(
                    &norms,
                    norms_config(n32),
                    (buffer.view(), n32, d32, point_norms.view_mut()),
                )?;
                DevicePoints::F16(buffer, backend.kernel()?, backend.kernel()?)
            }
        };
        let scratch_bytes = sum_scratch_bytes(n32)?;
        Ok(Self {
            points,
            norms_f32: backend.kernel()?,
            anchor_assign: backend.kernel()?,
            scan: backend.kernel()?,
            scatter: backend.kernel()?,
            n: n32,
            d: d32,
            m: 0,
            point_norms,
            anchors: stream.alloc_zeros(max_anchors * d)?,
            anchor_norms: stream.alloc_zeros(max_anchors)?,
            assign: stream.alloc_zeros(n)?,
            dist: stream.alloc_zeros(n)?,
            counts: stream.alloc_zeros(max_anchors)?,
            offsets: stream.alloc_zeros(max_anchors + 1)?,
            cursor: stream.alloc_zeros(max_anchors)?,
            order: stream.alloc_zeros(n)?,
            sumsq: stream.alloc_zeros(max_anchors)?,
            neighbors: stream.alloc_zeros(max_anchors)?,
            neighbor_dist: stream.alloc_zeros(max_anchors)?,
            energy: stream.alloc_zeros(1)?,
            scratch: stream.alloc_zeros(scratch_bytes.max(1))?,
            stream,
        })
    }

    fn md(&self) -> usize {
        self.m as usize * self.d as usize
    }

    /// Sum of the distances (CUB, on this stream), read back.
    fn energy(&mut self) -> Result<f64, AnnealError> {
        sum_f32(
            &self.stream,
            &self.dist,
            self.n,
            &mut self.energy,
            &mut self.scratch,
        )?;
        let sum = self.stream.to_host(&self.energy.view())?;
        Ok(f64::from(sum[0]) / f64::from(self.n))
    }
}

impl Engine for GpuEngine {
    fn set_anchors(&mut self, anchors: &[f32], m: usize) -> Result<(), AnnealError> {
        let m32 = u32::try_from(m)
            .map_err(|_| AnnealError::Input(format!("{m} anchors is over u32::MAX")))?;
        if m * self.d as usize > self.anchors.len() {
            return Err(AnnealError::Input(format!(
                "{m} anchors is over the run's maximum"
            )));
        }
        self.m = m32;
        let md = self.md();
        self.stream
            .copy_to_device(&anchors[..md], &mut self.anchors.slice_mut(0..md)?)?;
        self.stream.launch(
            &self.norms_f32,
            norms_config(m32),
            (
                self.anchors.slice(0..md)?,
                m32,
                self.d,
                self.anchor_norms.view_mut(),
            ),
        )?;
        Ok(())
    }

    fn step(&mut self, eta: f32) -> Result<f64, AnnealError> {
        let (n, d, m) = (self.n, self.d, self.m);
        let md = self.md();
        let s = &self.stream;
        match &self.points {
            DevicePoints::F32(points, assign, _) => s.launch(
                assign,
                assign_config(n),
                (
                    points.view(),
                    self.point_norms.view(),
                    n,
                    d,
                    self.anchors.slice(0..md)?,
                    self.anchor_norms.view(),
                    m,
                    COUNT,
                    self.assign.view_mut(),
                    self.dist.view_mut(),
                    self.counts.view_mut(),
                ),
            )?,
            DevicePoints::F16(points, assign, _) => s.launch(
                assign,
                assign_config(n),
                (
                    points.view(),
                    self.point_norms.view(),
                    n,
                    d,
                    self.anchors.slice(0..md)?,
                    self.anchor_norms.view(),
                    m,
                    COUNT,
                    self.assign.view_mut(),
                    self.dist.view_mut(),
                    self.counts.view_mut(),
                ),
            )?,
        }
        let single = LaunchConfig {
            grid: (1, 1, 1),
            block: (1024, 1, 1),
            shared_mem_bytes: 0,
        };
        s.launch(
            &self.scan,
            single,
            (
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
                self.assign.view(),
                n,
                self.offsets.view(),
                self.cursor.view_mut(),
                self.order.view_mut(),
            ),
        )?;
        let per_anchor = LaunchConfig {
            grid: (m.max(1), 1, 1),
            block: (128, 1, 1),
            shared_mem_bytes: 0,
        };
        match &self.points {
            DevicePoints::F32(points, _, update) => s.launch(
                update,
                per_anchor,
                (
                    points.view(),
                    self.order.view(),
                    self.offsets.view(),
                    self.dist.view(),
                    m,
                    d,
                    eta,
                    self.anchors.slice_mut(0..md)?,
                    self.anchor_norms.view_mut(),
                    self.sumsq.view_mut(),
                ),
            )?,
            DevicePoints::F16(points, _, update) => s.launch(
                update,
                per_anchor,
                (
                    points.view(),
                    self.order.view(),
                    self.offsets.view(),
                    self.dist.view(),
                    m,
                    d,
                    eta,
                    self.anchors.slice_mut(0..md)?,
                    self.anchor_norms.view_mut(),
                    self.sumsq.view_mut(),
                ),
            )?,
        }
        self.energy()
    }

    fn stats(&mut self) -> Result<AnchorStats, AnnealError> {
        let m = self.m as usize;
        let offsets = self.stream.to_host(&self.offsets.slice(0..=m)?)?;
        let sumsq = self.stream.to_host(&self.sumsq.slice(0..m)?)?;
        Ok(AnchorStats {
            counts: offsets.windows(2).map(|w| w[1] - w[0]).collect(),
            sumsq: sumsq.into_iter().map(f64::from).collect(),
        })
    }

    fn anchors(&mut self) -> Result<Vec<f32>, AnnealError> {
        let md = self.md();
        Ok(self.stream.to_host(&self.anchors.slice(0..md)?)?)
    }

    fn anchor_neighbors(&mut self) -> Result<(Vec<u32>, Vec<f32>), AnnealError> {
        let (m, d) = (self.m, self.d);
        let md = self.md();
        self.stream.launch(
            &self.anchor_assign,
            assign_config(m),
            (
                self.anchors.slice(0..md)?,
                self.anchor_norms.view(),
                m,
                d,
                self.anchors.slice(0..md)?,
                self.anchor_norms.view(),
                m,
                EXCLUDE_SELF,
                self.neighbors.view_mut(),
                self.neighbor_dist.view_mut(),
                self.counts.view_mut(),
            ),
        )?;
        let m = m as usize;
        let neighbors = self.stream.to_host(&self.neighbors.slice(0..m)?)?;
        Ok((
            neighbors,
            self.stream.to_host(&self.neighbor_dist.slice(0..m)?)?,
        ))
    }

    fn assignments(&mut self) -> Result<Vec<u32>, AnnealError> {
        Ok(self.stream.to_host(&self.assign.view())?)
    }
}

/// Bytes of scratch the CUB sum needs for `n` values.
#[cfg(cuda_enabled)]
fn sum_scratch_bytes(n: u32) -> Result<usize, AnnealError> {
    let mut bytes = 0usize;
    // SAFETY: `bytes` is a valid out-pointer; the call only computes a size.
    let status = unsafe { cuda_sys::host::kiln_sum_f32_scratch_bytes(n, &mut bytes) };
    runtime_status("kiln_sum_f32_scratch_bytes", status.0)?;
    Ok(bytes)
}

/// `out[0] = Σ values[..n]` on `stream`, through CUB (static-library module).
#[cfg(cuda_enabled)]
fn sum_f32(
    stream: &Stream,
    values: &DeviceBuffer<f32>,
    n: u32,
    out: &mut DeviceBuffer<f32>,
    scratch: &mut DeviceBuffer<u8>,
) -> Result<(), AnnealError> {
    let missing = || AnnealError::Input("the CUB sum needs device buffers on a CUDA stream".into());
    let raw_stream = stream.raw_stream().ok_or_else(missing)?;
    let input = values.view().raw_device_ptr(stream).ok_or_else(missing)?;
    let output = out.view_mut().raw_device_ptr(stream).ok_or_else(missing)?;
    let scratch_bytes = scratch.len();
    let scratch_ptr = scratch
        .view_mut()
        .raw_device_ptr(stream)
        .ok_or_else(missing)?;
    // SAFETY: `input` holds at least `n` f32 (the distance buffer has n), `output`
    // one f32, `scratch` `scratch_bytes` bytes, all live device memory of this
    // stream's context for the duration of the call, which only enqueues work
    // on `raw_stream`, the same stream every later use of them goes on.
    let status = unsafe {
        cuda_sys::host::kiln_sum_f32(
            input as *const f32,
            output as *mut f32,
            n,
            scratch_ptr as *mut std::ffi::c_void,
            scratch_bytes,
            raw_stream.cast(),
        )
    };
    runtime_status("kiln_sum_f32", status.0)
}

#[cfg(cuda_enabled)]
fn runtime_status(call: &'static str, status: i32) -> Result<(), AnnealError> {
    if status == 0 {
        Ok(())
    } else {
        Err(AnnealError::CudaRuntime { call, status })
    }
}

#[cfg(not(cuda_enabled))]
fn sum_scratch_bytes(_n: u32) -> Result<usize, AnnealError> {
    Err(AnnealError::Input(
        "this build has no GPU code (no CUDA toolkit at build time)".into(),
    ))
}

#[cfg(not(cuda_enabled))]
fn sum_f32(
    _stream: &Stream,
    _values: &DeviceBuffer<f32>,
    _n: u32,
    _out: &mut DeviceBuffer<f32>,
    _scratch: &mut DeviceBuffer<u8>,
) -> Result<(), AnnealError> {
    Err(AnnealError::Input(
        "this build has no GPU code (no CUDA toolkit at build time)".into(),
    ))
}
