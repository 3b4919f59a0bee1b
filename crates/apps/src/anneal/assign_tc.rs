//! The anchor assignment on tensor cores, made exact by refinement
//! (`kernels/anneal_tc.cu`, contract in `anneal_tc.h`): [`TcAssign`] enqueues
//! the TF32 kernel and the exact list kernel that finishes what it could not
//! resolve; [`reference()`] is what both compute, on the CPU, bit for bit.
//!
//! # What it computes
//! The outputs of `anneal_assign_f32/f16` (assign, dist, counts; flags
//! `EXCLUDE_SELF` and `COUNT`), decided by one fixed exact f32 distance
//! `F(i, j)` ([`exact_dist`], whose summation order `anneal_tc.h` pins):
//! `assign[i] = argmin_j F(i, j)`, ties to the lowest index, `dist[i]` that
//! minimum. The SIMT kernel computes the same up to its own rounding order.
//!
//! # Design
//! - **Tile.** A block of 128 threads (4 warps) takes 128 points; warp `w`
//!   owns 32 of them and meets every anchor, 64 per anchor tile, so a point's
//!   state never leaves its warp. Per anchor tile a warp's 32 × 64 dot
//!   products are 2 × 8 `mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32`
//!   accumulators (64 f32 per thread). `d` is staged 32 at a time through
//!   shared memory (points 128 × 36 and anchors 64 × 36 words, rounded to
//!   TF32 by `cvt.rna` as they land; the 36-word stride makes fragment reads
//!   conflict-free), with 16-byte (f32) or 8-byte (f16) loads when `d % 4 ==
//!   0` and the base is aligned, scalar loads otherwise; zeros pad `d`, `n`
//!   and `m`. Static shared memory: 37,376 bytes (under the 48 KiB static
//!   limit: no dynamic-smem attribute needed).
//! - **Epilogue, per anchor tile.** The 4 lanes of a quad hold one point row
//!   (16 anchors each). Each turns its dot products into `A = max(xn + cn -
//!   2·dot, 0)` and the bound `e` below; the quad's least `A + e` lowers the
//!   row's upper bound `U`; anchors with `A - e ≤ U` join the row's candidate
//!   list in shared memory (`K = 8` entries of index and lower bound). A full
//!   list drops the entries whose lower bound is above the current `U`; if
//!   the new ones still do not fit, the point overflows.
//! - **Refinement.** Per point, the warp computes `F` for every entry whose
//!   lower bound is within the final `U` (four anchors at a time, from global
//!   memory) and keeps the least, lowest index on ties. An overflowed point,
//!   or one with no bounded anchor (none eligible, or non-finite input), is
//!   appended to `unresolved` and gets no output from this kernel.
//! - **List kernel.** One warp per listed point, every anchor, four at a time,
//!   the same `F`; grid-stride over the list with a fixed grid, the count read
//!   from device memory.
//! - **Below sm_80** (no TF32 mma; the sm_75 CI cell) the tc kernels list
//!   every point, so the list kernel does all the work, still exact.
//!
//! # The bound
//! With `u = 2^-24`, `S = ⌈d/8⌉` mma steps and `P = Σ_k |x_k c_k| ≤ |x| |c|`,
//! against the exact dot product `s` of the inputs:
//! 1. `cvt.rna` rounds each input to 11 significant bits (relative error
//!    `≤ 2^-11`; f16 points are exact), so the products are off by at most
//!    `(2^-10 + 2^-22) P`.
//! 2. TF32 products are exact in f32; each mma step adds 8 of them to the
//!    accumulator with significands aligned to the largest and truncated
//!    (Fasi et al. 2021 for A100, Khattak & Mikaitis 2025 for H100): at most
//!    9 terms each off by `< 2^-23` of the largest, plus normalization,
//!    `≤ 16 · 2^-23 = 2^-19` of the magnitudes summed so far per step, so
//!    `≤ S · 2^-19 · P` (first order) over the chain.
//! 3. `F`'s f32 dot product (`⌈d/32⌉` fmaf per lane, then 5 adds) is off by
//!    `≤ (d + 8) u P`.
//! 4. `xn + cn - 2·dot` costs two f32 roundings in `A` and in `F`, each
//!    `≤ 3u (xn + cn)` since `2|dot| ≤ xn + cn`; the clamp at 0 is
//!    1-Lipschitz and never widens the gap.
//!
//! So `|A - F| ≤ 2 [(2^-10 + 2^-22) + S · 2^-19 + (d + 8) u] P + 6u (xn + cn)`.
//! The kernel uses [`eps`]`(d) = 2^-9 + S · 2^-17 + (d + 8) · 2^-23` and
//! [`error_bound`] `e = 2 eps(d) √xn √cn + 2^-20 (xn + cn)`: about twice the
//! input term and the refinement term, four times the accumulation model
//! (whose hardware details are the least documented), and 2.7 times the
//! combination term. The margin absorbs the f32 error of the norms (`√xn`
//! stands for `|x|`), of `e` itself, and of rounding `A ± e`.
//!
//! Why it is exact: if `e ≥ |A - F|` for every pair, the minimizer `j*` of
//! `F` has `A* - e* ≤ F* ≤ F(j_U) ≤ A(j_U) + e(j_U) = U` for whichever anchor
//! `j_U` set `U`, so `j*` passes every test against every `U` seen (they only
//! decrease); its entry is never dropped; the least `F` over the survivors
//! is the least over all anchors. For `d = 128`, `eps ≈ 1.04 · 2^-9`:
//! anchors whose approximate distance is within `≈ 0.008 |x| |c|` of the best
//! are refined.
//!
//! # Expected speed (an estimate from the tile shape, not a measurement)
//! The SIMT kernel reaches about 20 TFLOP/s on the H100 (BENCHMARKS.md).
//! Here, per warp and k-step of 8: 16 mma and 24 shared loads (8 A, 16 B
//! fragment words); per 32-wide stage a thread issues 12 vector global loads,
//! 12 vector shared stores and 48 `cvt`, with 2 block barriers. H100 dense
//! TF32 is ~495 TFLOP/s through `wgmma`; `mma.sync` reaches about half of
//! that. The block tile (128 points × 64 anchors) reads 24 KB from L2 per
//! 524 kFLOP (21 FLOP/byte), which at ~5.5 TB/s of L2 caps it near 115
//! TFLOP/s; registers (128 on sm_90, 162 on sm_80) allow 4 (sm_90) or 3
//! (sm_80) blocks per SM. The epilogue adds ~10 FP32 instructions per
//! (point, anchor) against `2d` tensor FLOP. Expected: 60-110 TFLOP/s for `d
//! = 128`, 3-5× the SIMT kernel, i.e. ~150-260 ms of assignment for 1M × 128
//! × 2048 × 30 iterations — provided few points are unresolved: the list
//! kernel reads all `m·d` anchor values per listed point (~1 MB of L2 at
//! `m = 2048`), so every 1% of 1M points listed costs ~2 ms per iteration.
//! A CPU model of the candidate logic (TF32-rounded inputs, exact
//! accumulation; not committed) on the benchmark's synthetic data (3,000
//! points, `d = 128`, `m = 2048`, `m / 2` clusters) listed no point and
//! refined 1.4 anchors per point on average, lists reaching 8 at times;
//! tight clusters of more than 8 anchors far from the origin (as in
//! anchor-to-anchor neighbours of a converged run) list most of their points.
//! What to measure first: the unresolved fraction on real embeddings.
//!
//! # Use
//! [`TcAssign::new`] once per run (`None`: use the SIMT kernel), then
//! [`TcAssign::launch_f32`] / [`TcAssign::launch_f16`] (the arguments of
//! `anneal_assign_f32/f16`) or [`TcAssign::launch`] with a [`TcJob`], generic
//! over the point type, per assignment: three enqueued operations (zero the
//! unresolved count, tc kernel, list kernel), no synchronization.

use cuda_sys::kernels::{
    anneal_assign_list_f16, anneal_assign_list_f32, anneal_assign_tc_f16, anneal_assign_tc_f32,
};
use cuda_sys::types::{
    AnnealControl, KILN_ANNEAL_COUNT, KILN_ANNEAL_EXCLUDE_SELF, KILN_ANNEAL_LIST_THREADS,
    KILN_ANNEAL_TC_THREADS, KILN_ANNEAL_TC_TILE,
};
use cuda_sys::{GpuRepr, KernelDecl};
use gpu_core::{Backend, DeviceBuffer, DeviceView, DeviceViewMut, Kernel, LaunchConfig, Stream};
use rayon::prelude::*;

use super::AnnealError;

/// The environment variable that turns the tensor-core path off (`0`).
pub const ENV: &str = "KILN_ANNEAL_TC";

/// The lowest arch with TF32 `mma.sync` (sm_80).
pub const MIN_ARCH: u32 = 80;

/// Blocks of the list kernel per SM (8 warps each): its grid is fixed, since
/// the number of listed points is known only on the device.
const LIST_BLOCKS_PER_SM: u32 = 4;

/// Parameter tuple of `anneal_assign_tc_*` for points of type `T`.
pub type TcParams<T> = (
    *const T,
    *const f32,
    u32,
    u32,
    *const f32,
    *const f32,
    u32,
    u32,
    *const AnnealControl,
    *mut u32,
    *mut f32,
    *mut u32,
    *mut u32,
    *mut u32,
);

/// Parameter tuple of `anneal_assign_list_*` for points of type `T`.
pub type ListParams<T> = (
    *const T,
    *const f32,
    u32,
    *const f32,
    *const f32,
    u32,
    u32,
    *const AnnealControl,
    *const u32,
    *const u32,
    *mut u32,
    *mut f32,
    *mut u32,
);

/// Whether to use the tensor-core path on a device of `arch` with
/// [`ENV`] set to `env`: sm_80 or newer, unless `env` is `0`, `off` or
/// `false`.
pub fn tc_wanted(arch: u32, env: Option<&str>) -> bool {
    let off = env.is_some_and(|v| {
        let v = v.trim();
        v == "0" || v.eq_ignore_ascii_case("off") || v.eq_ignore_ascii_case("false")
    });
    arch >= MIN_ARCH && !off
}

/// `eps(d)` of the bound (module docs), as `anneal_tc.cu`'s `tc_eps`
/// computes it in f32.
pub fn eps(d: u32) -> f32 {
    let steps = (d / 8 + u32::from(!d.is_multiple_of(8))) as f32;
    2f32.powi(-9) + steps * 2f32.powi(-17) + (d as f32 + 8.0) * 2f32.powi(-23)
}

/// The bound `e` on `|A - F|` for a point of squared norm `xn` and an anchor
/// of squared norm `cn`, as the kernel computes it (module docs).
pub fn error_bound(d: u32, xn: f32, cn: f32) -> f32 {
    let rx = 2.0 * eps(d) * xn.sqrt();
    rx.mul_add(cn.sqrt(), (xn + cn) * 2f32.powi(-20))
}

/// The exact f32 distance both kernels compute, bit for bit: lane `l` of 32
/// sums `x[k]·c[k]` (fused) over `k = l, l + 32, ...` from 0, an xor
/// butterfly adds the 32 partial sums, then `max(fma(-2, dot, xn + cn), 0)`.
pub fn exact_dist(x: &[f32], c: &[f32], xn: f32, cn: f32) -> f32 {
    let mut lanes = [0f32; 32];
    for (k, (xv, cv)) in x.iter().zip(c).enumerate() {
        lanes[k % 32] = xv.mul_add(*cv, lanes[k % 32]);
    }
    // Every lane of the butterfly ends with the same bits; lane 0's are these.
    let mut offset = 16;
    while offset > 0 {
        let before = lanes;
        for (l, value) in lanes.iter_mut().enumerate() {
            *value = before[l] + before[l ^ offset];
        }
        offset /= 2;
    }
    (-2f32).mul_add(lanes[0], xn + cn).max(0.0)
}

/// What `anneal_assign_tc_*` followed by `anneal_assign_list_*` writes, on
/// the CPU: for each of the `x_norms.len()` points (`x` row-major, f16 points
/// converted to f32, which is exact) the least [`exact_dist`] over the
/// `anchor_norms.len()` anchors, lowest index on ties, skipping anchor `i`
/// for point `i` with `KILN_ANNEAL_EXCLUDE_SELF`; `(u32::MAX, +inf)` when no
/// anchor is eligible.
pub fn reference(
    x: &[f32],
    x_norms: &[f32],
    d: usize,
    anchors: &[f32],
    anchor_norms: &[f32],
    flags: u32,
) -> (Vec<u32>, Vec<f32>) {
    let exclude_self = flags & KILN_ANNEAL_EXCLUDE_SELF != 0;
    let nearest = |i: usize| {
        let row = &x[i * d..(i + 1) * d];
        let mut best = (u32::MAX, f32::INFINITY);
        for (j, cn) in anchor_norms.iter().enumerate() {
            if exclude_self && i == j {
                continue;
            }
            let f = exact_dist(row, &anchors[j * d..(j + 1) * d], x_norms[i], *cn);
            if f < best.1 {
                best = (j as u32, f);
            }
        }
        best
    };
    (0..x_norms.len()).into_par_iter().map(nearest).unzip()
}

/// A point type the tensor-core kernels read: `f32`, or `u16` for f16 points
/// (raw IEEE half bits). Picks the kernel pair of that type.
pub trait TcPoint: GpuRepr {
    /// `anneal_assign_tc_*` for this type.
    type Tc: KernelDecl<Params = TcParams<Self>>;
    /// `anneal_assign_list_*` for this type.
    type List: KernelDecl<Params = ListParams<Self>>;
    /// The two kernels, from `all`.
    fn kernels(all: &TcKernels) -> (&Kernel<Self::Tc>, &Kernel<Self::List>);
}

impl TcPoint for f32 {
    type Tc = anneal_assign_tc_f32;
    type List = anneal_assign_list_f32;
    fn kernels(all: &TcKernels) -> (&Kernel<Self::Tc>, &Kernel<Self::List>) {
        (&all.tc_f32, &all.list_f32)
    }
}

impl TcPoint for u16 {
    type Tc = anneal_assign_tc_f16;
    type List = anneal_assign_list_f16;
    fn kernels(all: &TcKernels) -> (&Kernel<Self::Tc>, &Kernel<Self::List>) {
        (&all.tc_f16, &all.list_f16)
    }
}

/// The four kernels, both point types.
#[derive(Debug)]
pub struct TcKernels {
    tc_f32: Kernel<anneal_assign_tc_f32>,
    list_f32: Kernel<anneal_assign_list_f32>,
    tc_f16: Kernel<anneal_assign_tc_f16>,
    list_f16: Kernel<anneal_assign_list_f16>,
}

/// The tensor-core assignment's kernels and scratch, made once per run.
#[derive(Debug)]
pub struct TcAssign {
    kernels: TcKernels,
    /// Points the tc kernel left to the list kernel (capacity `n`).
    unresolved: DeviceBuffer<u32>,
    /// How many: `unresolved_count[0]`.
    unresolved_count: DeviceBuffer<u32>,
    list_grid: u32,
}

/// One assignment's arguments: those of `anneal_assign_f32/f16`, points of
/// type `T`.
#[derive(Debug)]
pub struct TcJob<'a, T: GpuRepr> {
    /// Points, row-major `n × d`.
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

impl TcAssign {
    /// The kernels and scratch for up to `n` points, or `None` where the
    /// tensor-core path does not apply: the CPU backend, a device below sm_80,
    /// or [`ENV`]`=0`.
    pub fn new(backend: &Backend, stream: &Stream, n: usize) -> Result<Option<Self>, AnnealError> {
        let Some(device) = backend.device() else {
            return Ok(None);
        };
        if !tc_wanted(device.arch(), std::env::var(ENV).ok().as_deref()) {
            return Ok(None);
        }
        let n32 = u32::try_from(n)
            .map_err(|_| AnnealError::Input(format!("n = {n} is over u32::MAX")))?;
        let warps_per_block = KILN_ANNEAL_LIST_THREADS / 32;
        let list_grid = n32
            .div_ceil(warps_per_block)
            .clamp(1, device.sm_count.max(1) * LIST_BLOCKS_PER_SM);
        Ok(Some(Self {
            kernels: TcKernels {
                tc_f32: backend.kernel()?,
                list_f32: backend.kernel()?,
                tc_f16: backend.kernel()?,
                list_f16: backend.kernel()?,
            },
            unresolved: stream.alloc_zeros(n.max(1))?,
            unresolved_count: stream.alloc_zeros(1)?,
            list_grid,
        }))
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

    /// Enqueues the assignment on `stream`: zeroes the unresolved count, then
    /// launches the tc kernel and the list kernel of point type `T`. No host
    /// synchronization, no allocation. Views too short for `n`, `d` and `m`,
    /// or `n` over the capacity this was made for, are refused before
    /// anything is enqueued.
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
            ],
        )?;
        let (tc, list) = T::kernels(&self.kernels);
        stream.memset_zeros(&mut self.unresolved_count.view_mut())?;
        let tile = LaunchConfig {
            grid: (n.div_ceil(KILN_ANNEAL_TC_TILE).max(1), 1, 1),
            block: (KILN_ANNEAL_TC_THREADS, 1, 1),
            shared_mem_bytes: 0,
        };
        stream.launch(
            tc,
            tile,
            (
                x.slice(..)?,
                x_norms.slice(..)?,
                n,
                d,
                anchors.slice(..)?,
                anchor_norms.slice(..)?,
                m,
                flags,
                control.clone(),
                assign.reborrow(),
                dist.reborrow(),
                counts.reborrow(),
                self.unresolved.view_mut(),
                self.unresolved_count.view_mut(),
            ),
        )?;
        let per_point = LaunchConfig {
            grid: (self.list_grid, 1, 1),
            block: (KILN_ANNEAL_LIST_THREADS, 1, 1),
            shared_mem_bytes: 0,
        };
        stream.launch(
            list,
            per_point,
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
                assign,
                dist,
                counts,
            ),
        )?;
        Ok(())
    }
}

/// Refuses views too short for the kernels' reads and writes (they index by
/// `n`, `d` and `m`, not by the views' lengths): `(name, length, needed)`.
fn check_lengths(
    capacity: usize,
    (n, d, m): (u32, u32, u32),
    views: &[(&str, usize, usize)],
) -> Result<(), AnnealError> {
    if n as usize > capacity {
        return Err(AnnealError::Input(format!(
            "{n} points is over the {capacity} this TcAssign was made for"
        )));
    }
    match views.iter().find(|(_, len, need)| len < need) {
        Some((what, len, need)) => Err(AnnealError::Input(format!(
            "the tensor-core assignment of {n} x {d} points to {m} anchors needs {need} values in \
             {what}, got {len}"
        ))),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tc_path_needs_sm_80_and_can_be_turned_off() {
        assert!(tc_wanted(80, None));
        assert!(tc_wanted(90, Some("1")));
        assert!(!tc_wanted(75, None));
        assert!(!tc_wanted(86, Some("0")));
        assert!(!tc_wanted(90, Some(" OFF ")));
        assert!(!tc_wanted(90, Some("false")));
    }

    #[test]
    fn exact_dist_is_the_distance_to_f32_rounding() {
        let mut rng = crate::rng::Rng::new(7);
        for d in [0usize, 1, 3, 31, 32, 33, 130, 257] {
            let (x, c) = (rng.f32s(d), rng.f32s(d));
            let norm = |v: &[f32]| v.iter().map(|a| a * a).sum::<f32>();
            let (xn, cn) = (norm(&x), norm(&c));
            let exact: f64 = x
                .iter()
                .zip(&c)
                .map(|(a, b)| (f64::from(*a) - f64::from(*b)).powi(2))
                .sum();
            let f = f64::from(exact_dist(&x, &c, xn, cn));
            let scale = f64::from(xn + cn) + exact;
            assert!((f - exact).abs() <= 1e-5 * scale.max(1e-30), "d = {d}");
        }
    }

    #[test]
    fn reference_breaks_ties_low_and_can_exclude_self() {
        // Anchors 1 and 2 are the same point: equal distances go to 1.
        let anchors = [5.0f32, 0.0, 1.0, 1.0, 1.0, 1.0];
        let anchor_norms = [25.0f32, 2.0, 2.0];
        let x = [1.0f32, 1.0, 5.0, 0.0];
        let x_norms = [2.0f32, 25.0];
        let (assign, dist) = reference(&x, &x_norms, 2, &anchors, &anchor_norms, 0);
        assert_eq!(assign, [1, 0]);
        assert_eq!(dist, [0.0, 0.0]);
        // Point 0 may not take anchor 0; point 1 may not take anchor 1.
        let (assign, _) = reference(
            &anchors[..4],
            &anchor_norms[..2],
            2,
            &anchors[..4],
            &anchor_norms[..2],
            KILN_ANNEAL_EXCLUDE_SELF,
        );
        assert_eq!(assign, [1, 0]);
        let (assign, dist) = reference(&x[..2], &x_norms[..1], 2, &[], &[], 0);
        assert_eq!((assign[0], dist[0]), (u32::MAX, f32::INFINITY));
    }

    /// TF32 with round-to-nearest (ties away), as `cvt.rna.tf32.f32`.
    fn tf32(v: f32) -> f32 {
        let bits = v.to_bits().wrapping_add(1 << 12) & !0x1fff;
        f32::from_bits(bits)
    }

    /// The bound covers TF32 input rounding plus the refinement's rounding,
    /// with the accumulation done exactly (f64): the terms the hardware does
    /// not decide. Inputs sit just off TF32 midpoints, where rounding is
    /// largest and all of one sign.
    #[test]
    fn bound_covers_tf32_rounding_with_room() {
        let mut rng = crate::rng::Rng::new(11);
        let mut worst = 0f64;
        for d in [1usize, 8, 37, 128, 384, 1024] {
            for trial in 0..50 {
                let mid = |v: f32| f32::from_bits((v.to_bits() & !0x1fff) | 0x0fff);
                let offset = if trial % 2 == 0 { 3.0 } else { 0.0 };
                let x: Vec<f32> = rng.f32s(d).iter().map(|v| mid(v.abs() + offset)).collect();
                let c: Vec<f32> = rng.f32s(d).iter().map(|v| mid(v.abs() + offset)).collect();
                let norm = |v: &[f32]| v.iter().fold(0f32, |s, a| a.mul_add(*a, s));
                let (xn, cn) = (norm(&x), norm(&c));
                let dot_tf32: f64 = x
                    .iter()
                    .zip(&c)
                    .map(|(a, b)| f64::from(tf32(*a)) * f64::from(tf32(*b)))
                    .sum();
                let approx = (-2f32).mul_add(dot_tf32 as f32, xn + cn).max(0.0);
                let f = exact_dist(&x, &c, xn, cn);
                let gap = f64::from((approx - f).abs());
                let e = f64::from(error_bound(d as u32, xn, cn));
                assert!(gap <= e, "d = {d}: |A - F| = {gap:e} over e = {e:e}");
                worst = worst.max(gap / e);
            }
        }
        println!("worst |A - F| / e = {worst:.3}");
        // Near half the bound: the input term is taken about twice.
        assert!(worst > 0.2 && worst <= 0.55, "worst |A - F| / e = {worst}");
    }
}
