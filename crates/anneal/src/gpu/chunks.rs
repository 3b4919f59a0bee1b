//! [`ChunkAssigner`]: the encode's assignment of points to fixed anchors,
//! a chunk at a time, made once per encode. The anchors and their norms
//! are uploaded once; two point buffers let the upload of the next chunk
//! (on a stream of its own) overlap the assignment of the current one
//! (on the compute stream), and only the assignment kernels run: the
//! points' norms, the tensor-core copy of the points, the assignment (the
//! shard's path, [`super::assign::enqueue_assign`]), no statistics, no
//! update.
//!
//! # Stream order
//! Chunk `k` goes to buffer `k % 2`. Its upload waits for the event
//! recorded after the kernels of chunk `k - 2` (the last to read that
//! buffer); its kernels wait for the event recorded after its upload. The
//! buffers every chunk shares (norms, the f16 copy, the outputs) are used
//! on the compute stream only, in order, and the assignments are read back
//! on it, so chunk `k`'s are read before chunk `k + 1`'s kernels are
//! enqueued. A chunk uploaded from the caller's memory ([`ChunkAssigner::upload`])
//! may be reused once the call returns (it went through page-locked
//! staging); one uploaded from a [`Staged`] buffer
//! ([`ChunkAssigner::upload_staged`]) is copied by the device while the
//! host goes on, and the buffer waits for that copy when it is next
//! written or dropped.

use crate::bindings::kernels::{
    anneal_assign_f16, anneal_assign_f32, anneal_norms_f16, anneal_norms_f32, anneal_widen_bf16,
};
use crate::bindings::types::AnnealControl;
use gpu_core::{
    Backend, BackendKind, DeviceBuffer, Event, Kernel, LaunchConfig, PinnedBuffer, Stream,
};

use super::super::assign_tc::TcAssign;
use super::assign::{enqueue_assign, AssignArgs, AssignPoints};
use super::norms_config;
use super::upload::{copy_f16, copy_f32};
use crate::{
    error::AnnealError,
    input::{BF16_STAGING, LIST_BYTES},
    vocab::{Dtype, Points},
};

/// A chunk buffer: f16 points as they are, f32 and bf16 as f32.
#[derive(Debug)]
enum Buffer {
    F32(DeviceBuffer<f32>),
    F16(DeviceBuffer<u16>),
}

/// Bytes of device memory the encode's chunk assigner for chunks of `rows` points
/// of dimension `d` and `m` anchors allocates: two chunk buffers (f16 as
/// they are, f32 and bf16 as f32) and, for bf16, the staging buffer; the
/// tensor-core copy of one chunk (`d` rounded up to 32, f16) and its
/// reference point (`d` f32); per point of one chunk its norm, centred norms
/// (two f32), assignment, distance, unresolved entry, the list kernel's
/// packed best (32 bytes) and the wgmma kernel's candidate list
/// (72 bytes); the anchors, their norms, centred norms, counts
/// and f16 copy.
/// `None` when the figure overflows.
pub fn chunk_device_bytes(rows: usize, d: usize, m: usize, dtype: Dtype) -> Option<u64> {
    let (n, d, m) = (rows as u64, d as u64, m as u64);
    let values = n.checked_mul(d)?;
    let buffers = match dtype {
        Dtype::F16 => values.checked_mul(2 * 2)?,
        Dtype::F32 => values.checked_mul(4 * 2)?,
        Dtype::BF16 => values
            .checked_mul(4 * 2)?
            .checked_add(values.min(BF16_STAGING as u64) * 2)?,
    };
    let dp = d.div_ceil(32).max(1) * 32;
    let copy = n.checked_mul(dp)?.checked_mul(2)?.checked_add(d * 4)?;
    let per_point = n.checked_mul(32 + LIST_BYTES)?;
    let anchors = m.checked_mul(d.checked_mul(4)?.checked_add(dp * 2 + 16)?)?;
    buffers
        .checked_add(copy)?
        .checked_add(per_point)?
        .checked_add(anchors)
}

/// A chunk's host memory for [`ChunkAssigner::upload_staged`]: page-locked,
/// of the input's element type, so that its upload is a copy the device
/// makes while the host reads the next chunk.
#[derive(Debug)]
pub(crate) enum Staged {
    /// f32 values.
    F32(PinnedBuffer<f32>),
    /// f16 or bf16 bits.
    Half(PinnedBuffer<u16>, Dtype),
}

impl Staged {
    /// The memory to read a chunk into, once no copy reads it.
    pub(crate) fn bytes_mut(&mut self) -> Result<&mut [u8], AnnealError> {
        Ok(match self {
            Staged::F32(b) => bytemuck::cast_slice_mut(b.as_mut_slice()?),
            Staged::Half(b, _) => bytemuck::cast_slice_mut(b.as_mut_slice()?),
        })
    }

    /// Values it holds.
    pub(crate) fn len(&self) -> usize {
        match self {
            Staged::F32(b) => b.len(),
            Staged::Half(b, _) => b.len(),
        }
    }

    /// The first `values` values, as points.
    pub(crate) fn points(&self, values: usize) -> Result<Points<'_>, AnnealError> {
        let part = |len: usize| {
            (values <= len)
                .then_some(..values)
                .ok_or_else(|| AnnealError::internal("a staged chunk past its buffer"))
        };
        Ok(match self {
            Staged::F32(b) => Points::F32(&b.as_slice()?[part(b.len())?]),
            Staged::Half(b, Dtype::F16) => Points::F16(&b.as_slice()?[part(b.len())?]),
            Staged::Half(b, _) => Points::BF16(&b.as_slice()?[part(b.len())?]),
        })
    }
}

/// Allocates [`Staged`] buffers for one [`ChunkAssigner`]: a chunk of its
/// capacity and type each, or a smaller first one. Page-locking memory is
/// slow (about 2 GB/s), so the encode starts reading into a small buffer
/// while the whole-chunk ones are page-locked on threads of their own.
#[derive(Debug, Clone)]
pub(crate) struct StagedAlloc {
    stream: Stream,
    values: usize,
    dtype: Dtype,
}

impl StagedAlloc {
    /// Values of a whole chunk.
    pub(crate) fn chunk_values(&self) -> usize {
        self.values
    }

    /// One buffer of a whole chunk.
    pub(crate) fn alloc(&self) -> Result<Staged, AnnealError> {
        self.alloc_values(self.values)
    }

    /// One buffer of at most `bytes` (a whole chunk when that is less),
    /// holding whole rows of `d` values, at least one: the first buffer,
    /// small so that the first read starts at once.
    pub(crate) fn alloc_first(&self, bytes: usize, d: usize) -> Result<Staged, AnnealError> {
        let d = d.max(1);
        let rows = bytes / (d * self.dtype.size() as usize);
        self.alloc_values((rows.max(1) * d).min(self.values))
    }

    fn alloc_values(&self, values: usize) -> Result<Staged, AnnealError> {
        Ok(match self.dtype {
            Dtype::F32 => Staged::F32(self.stream.alloc_pinned(values)?),
            dtype => Staged::Half(self.stream.alloc_pinned(values)?, dtype),
        })
    }
}

/// The encode's assigner on one GPU: see the module's docs.
#[derive(Debug)]
pub(crate) struct ChunkAssigner {
    compute: Stream,
    upload: Stream,
    d: u32,
    m: u32,
    /// Rows per chunk at most.
    capacity: usize,
    dtype: Dtype,
    buffers: [Buffer; 2],
    /// bf16 values on their way to a chunk buffer (empty for other types).
    staging: DeviceBuffer<u16>,
    widen: Kernel<anneal_widen_bf16>,
    norms_f32: Kernel<anneal_norms_f32>,
    norms_f16: Kernel<anneal_norms_f16>,
    assign_f32: Kernel<anneal_assign_f32>,
    assign_f16: Kernel<anneal_assign_f16>,
    point_norms: DeviceBuffer<f32>,
    anchors: DeviceBuffer<f32>,
    anchor_norms: DeviceBuffer<f32>,
    /// Untouched: the kernels count nothing without `KILN_ANNEAL_COUNT`.
    counts: DeviceBuffer<u32>,
    /// Never `done`, so the kernels always run.
    control: DeviceBuffer<AnnealControl>,
    assign: DeviceBuffer<u32>,
    dist: DeviceBuffer<f32>,
    tc: Option<TcAssign>,
    /// Per buffer: recorded on the upload stream after its last upload.
    uploaded: [Option<Event>; 2],
    /// Per buffer: recorded on the compute stream after the last kernels
    /// that read it.
    assigned: [Option<Event>; 2],
    /// The buffer the next upload goes to.
    next: usize,
    /// Uploaded and not yet assigned: (buffer, rows).
    waiting: Option<(usize, u32)>,
    /// Assigned and not yet read back: rows.
    running: Option<u32>,
}

impl ChunkAssigner {
    /// Buffers for chunks of up to `capacity` rows of `dtype` points, with
    /// the `m × d` `anchors` uploaded and their norms computed. `backend`
    /// must be a CUDA backend.
    pub(crate) fn new(
        backend: &Backend,
        anchors: &[f32],
        m: usize,
        d: usize,
        capacity: usize,
        dtype: Dtype,
    ) -> Result<Self, AnnealError> {
        if backend.kind() != BackendKind::Cuda {
            return Err(AnnealError::NeedsCuda);
        }
        let over = |what, value| AnnealError::OverU32 { what, value };
        let capacity = capacity.max(1);
        u32::try_from(capacity).map_err(|_| over("n", capacity))?;
        let d32 = u32::try_from(d).map_err(|_| over("d", d))?;
        let m32 = u32::try_from(m).map_err(|_| over("max_anchors", m))?;
        let values = capacity
            .checked_mul(d)
            .ok_or(AnnealError::OverAddressSpace { n: capacity, d })?;
        if anchors.len() != m * d || m == 0 {
            return Err(AnnealError::AnchorValues {
                values: anchors.len(),
                m,
                d,
            });
        }
        let (compute, upload) = (backend.new_stream()?, backend.new_stream()?);
        let buffer = |_| -> Result<Buffer, AnnealError> {
            Ok(match dtype {
                Dtype::F16 => Buffer::F16(upload.alloc_zeros(values)?),
                Dtype::F32 | Dtype::BF16 => Buffer::F32(upload.alloc_zeros(values)?),
            })
        };
        let buffers = [buffer(0)?, buffer(1)?];
        let staging_len = if dtype == Dtype::BF16 {
            values.min(BF16_STAGING)
        } else {
            0
        };
        // The compute stream's own buffers are local to it (no CUDA event
        // per launch argument): only the two point buffers cross streams.
        let mut anchor_buffer = compute.alloc_zeros_local(m * d)?;
        compute.copy_to_device(anchors, &mut anchor_buffer.view_mut())?;
        let mut anchor_norms = compute.alloc_zeros_local(m)?;
        let norms_f32: Kernel<anneal_norms_f32> = backend.kernel()?;
        compute.launch(
            &norms_f32,
            norms_config(m32),
            (anchor_buffer.view(), m32, d32, anchor_norms.view_mut()),
        )?;
        // Each buffer is allocated (zeroed) on the stream that writes it
        // first; the other stream reaches it only through the events.
        let tc = TcAssign::new(backend, &compute, capacity, d, m)?;
        Ok(Self {
            staging: upload.alloc_zeros(staging_len)?,
            widen: backend.kernel()?,
            norms_f32,
            norms_f16: backend.kernel()?,
            assign_f32: backend.kernel()?,
            assign_f16: backend.kernel()?,
            point_norms: compute.alloc_zeros_local(capacity)?,
            anchors: anchor_buffer,
            anchor_norms,
            counts: compute.alloc_zeros_local(m)?,
            control: compute.alloc_zeros_local(1)?,
            assign: compute.alloc_zeros_local(capacity)?,
            dist: compute.alloc_zeros_local(capacity)?,
            tc,
            buffers,
            uploaded: [None, None],
            assigned: [None, None],
            next: 0,
            waiting: None,
            running: None,
            capacity,
            dtype,
            d: d32,
            m: m32,
            compute,
            upload,
        })
    }

    /// What allocates page-locked host memory for chunks of this
    /// assigner, for [`Self::upload_staged`], on any thread.
    pub(crate) fn staged_alloc(&self) -> StagedAlloc {
        StagedAlloc {
            stream: self.upload.clone(),
            values: self.capacity * self.d as usize,
            dtype: self.dtype,
        }
    }

    /// As [`Self::upload`], from page-locked memory: the first `rows` rows
    /// of `src` are copied by the device (bf16 through the staging buffer,
    /// widened there) while the host goes on; `src` waits for the copy when
    /// it is next written or dropped.
    pub(crate) fn upload_staged(&mut self, src: &Staged, rows: usize) -> Result<(), AnnealError> {
        let d = self.d as usize;
        let values = rows * d;
        if rows > self.capacity {
            return Err(AnnealError::OverCapacity {
                n: rows,
                d,
                capacity: self.capacity,
                capacity_d: d,
            });
        }
        let slot = self.begin_upload()?;
        let up = &self.upload;
        match (&mut self.buffers[slot], src) {
            (Buffer::F16(dst), Staged::Half(src, Dtype::F16)) if values <= src.len() => up
                .copy_to_device_async(src.slice(..values)?, dst.slice_mut(..values)?)?
                .join(up)?,
            (Buffer::F32(dst), Staged::F32(src)) if values <= src.len() => up
                .copy_to_device_async(src.slice(..values)?, dst.slice_mut(..values)?)?
                .join(up)?,
            (Buffer::F32(dst), Staged::Half(src, Dtype::BF16))
                if values <= src.len() && !self.staging.is_empty() =>
            {
                let step = self.staging.len();
                for at in (0..values).step_by(step) {
                    let count = step.min(values - at);
                    up.copy_to_device_async(
                        src.slice(at..at + count)?,
                        self.staging.slice_mut(..count)?,
                    )?
                    .join(up)?;
                    up.launch(
                        &self.widen,
                        LaunchConfig::for_elements(count as u32, 256),
                        (
                            self.staging.slice(..count)?,
                            dst.slice_mut(at..at + count)?,
                            count as u32,
                        ),
                    )?;
                }
            }
            _ => {
                return Err(AnnealError::internal(
                    "a staged chunk of another type or size than the assigner's",
                ))
            }
        }
        self.end_upload(slot, rows)
    }

    /// The buffer the next upload goes to, once the kernels that last read
    /// it are done (on the upload stream). Refused while a chunk waits for
    /// [`Self::launch`].
    fn begin_upload(&mut self) -> Result<usize, AnnealError> {
        if self.waiting.is_some() {
            return Err(AnnealError::internal(
                "a chunk uploaded before the last was assigned",
            ));
        }
        let slot = self.next;
        if let Some(event) = &self.assigned[slot] {
            self.upload.wait(event)?;
        }
        Ok(slot)
    }

    /// Marks buffer `slot` uploaded with `rows` rows, for [`Self::launch`].
    fn end_upload(&mut self, slot: usize, rows: usize) -> Result<(), AnnealError> {
        self.uploaded[slot] = Some(self.upload.record_event()?);
        self.waiting = Some((slot, rows as u32));
        self.next = 1 - slot;
        Ok(())
    }

    /// Enqueues the upload of `pieces` (one chunk, in row order, of the
    /// type this was made for) into the next buffer, after the kernels
    /// that last read it. Refused while a chunk waits for [`Self::launch`].
    pub(crate) fn upload(&mut self, pieces: &[Points<'_>]) -> Result<(), AnnealError> {
        let values: usize = pieces.iter().map(Points::len).sum();
        let d = self.d as usize;
        let rows = values / d;
        if rows * d != values || rows > self.capacity {
            return Err(AnnealError::OverCapacity {
                n: rows,
                d,
                capacity: self.capacity,
                capacity_d: d,
            });
        }
        let slot = self.begin_upload()?;
        match &mut self.buffers[slot] {
            Buffer::F16(buffer) => {
                copy_f16(&self.upload, pieces, &mut buffer.slice_mut(..values)?)?
            }
            Buffer::F32(buffer) => copy_f32(
                &self.upload,
                &self.widen,
                pieces,
                &mut buffer.slice_mut(..values)?,
                &mut self.staging.view_mut(),
            )?,
        }
        self.end_upload(slot, rows)
    }

    /// Enqueues the assignment of the chunk last uploaded, after its
    /// upload; `false` when none waits. Refused while the last chunk
    /// assigned was not read back ([`Self::read`]): they share the outputs.
    pub(crate) fn launch(&mut self) -> Result<bool, AnnealError> {
        let Some((slot, n)) = self.waiting else {
            return Ok(false);
        };
        if self.running.is_some() {
            return Err(AnnealError::internal(
                "a chunk assigned before the last was read",
            ));
        }
        if let Some(event) = &self.uploaded[slot] {
            self.compute.wait(event)?;
        }
        let (d, m, s) = (self.d, self.m, &self.compute);
        let values = n as usize * d as usize;
        let rows = n as usize;
        let norms = norms_config(n);
        let points = match &self.buffers[slot] {
            Buffer::F32(buffer) => {
                let x = buffer.slice(..values)?;
                let out = self.point_norms.slice_mut(..rows)?;
                s.launch(&self.norms_f32, norms, (x.clone(), n, d, out))?;
                if let Some(tc) = &mut self.tc {
                    tc.prepare_points(s, x.clone(), self.point_norms.slice(..rows)?, n, d)?;
                }
                AssignPoints::F32(x, &self.assign_f32)
            }
            Buffer::F16(buffer) => {
                let x = buffer.slice(..values)?;
                let out = self.point_norms.slice_mut(..rows)?;
                s.launch(&self.norms_f16, norms, (x.clone(), n, d, out))?;
                if let Some(tc) = &mut self.tc {
                    tc.prepare_points(s, x.clone(), self.point_norms.slice(..rows)?, n, d)?;
                }
                AssignPoints::F16(x, &self.assign_f16)
            }
        };
        let args = AssignArgs {
            x_norms: self.point_norms.slice(..rows)?,
            n,
            d,
            anchors: self.anchors.view(),
            anchor_norms: self.anchor_norms.view(),
            m,
            flags: 0,
            control: self.control.view(),
            assign: self.assign.slice_mut(..rows)?,
            dist: self.dist.slice_mut(..rows)?,
            counts: self.counts.view_mut(),
        };
        enqueue_assign(s, points, self.tc.as_mut(), args)?;
        self.assigned[slot] = Some(s.record_event()?);
        self.waiting = None;
        self.running = Some(n);
        Ok(true)
    }

    /// Waits for the chunk last assigned and replaces `out` with its
    /// assignments; `false` (and `out` left alone) when none was assigned.
    pub(crate) fn read(&mut self, out: &mut Vec<u32>) -> Result<bool, AnnealError> {
        let Some(n) = self.running.take() else {
            return Ok(false);
        };
        out.resize(n as usize, 0);
        self.compute
            .copy_to_host(&self.assign.slice(..n as usize)?, out)?;
        Ok(true)
    }
}

impl Drop for ChunkAssigner {
    /// Waits for both streams, so that no copy or kernel still uses a
    /// buffer when it is freed (after an error mid-chunk too).
    fn drop(&mut self) {
        // An error here was (or will be) reported by the call that failed.
        let _ = self.upload.synchronize();
        let _ = self.compute.synchronize();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_device_bytes_count_both_chunk_buffers_and_refuse_overflow() {
        let (rows, d, m) = (1000u64, 37u64, 131u64);
        let dp = 64;
        for (dtype, stored) in [(Dtype::F32, 4), (Dtype::F16, 2), (Dtype::BF16, 4)] {
            let fixed = chunk_device_bytes(0, 37, 131, dtype).unwrap();
            assert_eq!(fixed, m * (d * 4 + dp * 2 + 16) + d * 4, "{dtype:?}");
            let grown = chunk_device_bytes(1000, 37, 131, dtype).unwrap() - fixed;
            let staging = if dtype == Dtype::BF16 {
                rows * d * 2
            } else {
                0
            };
            // Two buffers, the f16 copy, 32 bytes a point and its list's 72.
            let per_chunk = 2 * rows * d * stored + staging + rows * dp * 2 + rows * (32 + 72);
            assert_eq!(grown, per_chunk, "{dtype:?}");
        }
        // bf16's staging stops growing at its bound.
        let big = BF16_STAGING * 4;
        let bf = chunk_device_bytes(big, 1, 1, Dtype::BF16).unwrap();
        let f32 = chunk_device_bytes(big, 1, 1, Dtype::F32).unwrap();
        assert_eq!(bf - f32, BF16_STAGING as u64 * 2);
        for (rows, d, m) in [
            (usize::MAX, 2, 1),
            (2, usize::MAX, 1),
            (1, 1, usize::MAX),
            (usize::MAX / 2, 1, 1),
        ] {
            assert_eq!(chunk_device_bytes(rows, d, m, Dtype::F32), None);
        }
    }

    #[test]
    fn the_assigner_refuses_the_cpu_a_bad_index_and_calls_out_of_order() {
        let cpu = Backend::cpu();
        let anchors = [0.0f32; 6];
        let err = ChunkAssigner::new(&cpu, &anchors, 2, 3, 10, Dtype::F32).unwrap_err();
        assert!(matches!(err, AnnealError::NeedsCuda), "{err:?}");
        let Some(gpu) = gpu_core::testing::cuda_backend(crate::modules::ALL) else {
            return;
        };
        for (values, m) in [(5, 2), (0, 0)] {
            let err = ChunkAssigner::new(&gpu, &anchors[..values], m, 3, 10, Dtype::F32);
            assert!(
                matches!(err, Err(AnnealError::AnchorValues { .. })),
                "{err:?}"
            );
        }
        let mut a = ChunkAssigner::new(&gpu, &anchors, 2, 3, 10, Dtype::F32).unwrap();
        let mut out = vec![7];
        // Nothing uploaded: nothing to launch or read, `out` untouched.
        assert!(!a.launch().unwrap());
        assert!(!a.read(&mut out).unwrap());
        assert_eq!(out, [7]);
        let rows = |n: usize| vec![1.0f32; n * 3];
        for (values, what) in [(rows(11), "over capacity"), (vec![1.0; 4], "ragged")] {
            let err = a.upload(&[Points::F32(&values)]).unwrap_err();
            assert!(
                matches!(err, AnnealError::OverCapacity { .. }),
                "{what}: {err:?}"
            );
        }
        let err = a.upload(&[Points::F16(&[0; 3])]).unwrap_err();
        assert!(matches!(err, AnnealError::Internal { .. }), "{err:?}");
        let (first, second) = (rows(10), rows(4));
        a.upload(&[Points::F32(&first)]).unwrap();
        let err = a.upload(&[Points::F32(&second)]).unwrap_err();
        assert!(matches!(err, AnnealError::Internal { .. }), "{err:?}");
        assert!(a.launch().unwrap());
        a.upload(&[Points::F32(&second)]).unwrap();
        assert!(matches!(a.launch(), Err(AnnealError::Internal { .. })));
        assert!(a.read(&mut out).unwrap());
        assert_eq!(out, [0; 10], "every point is as near anchor 0 as anchor 1");
        assert!(a.launch().unwrap());
        assert!(a.read(&mut out).unwrap());
        assert_eq!(out, [0; 4]);
    }
}
