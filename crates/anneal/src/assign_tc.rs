//! The anchor assignment on tensor cores, made exact by refinement
//! (`kernels/anneal_tc.cu`, contract in `anneal_tc.h`): [`TcAssign`] enqueues
//! the f16 tensor-core kernel and the exact list kernel that finishes what it could not
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
//! - **f16 copies.** [`TcAssign::prepare_points`] makes, once per run, a
//!   copy of the points less their mean (**Centring**, below), scaled by
//!   `σ` and rounded to f16 (`anneal_to_half_*`),
//!   rows padded with zeros to `dp = ⌈d/32⌉·32` halves; every launch makes the
//!   same copy of the anchors. `σ` is the power of two that puts the points'
//!   largest centred magnitude in `[2^12, 2^13)` (`anneal_absmax_*`, an atomic max of
//!   the bits: the same on every run), so scaling is exact and f16's range
//!   has a factor 8 to spare for anchors; an anchor that still leaves it sets
//!   a flag that sends every point to the list kernel (exact, slow, correct).
//! - **Tile.** A block of 128 threads (4 warps) takes 128 points; warp `w`
//!   owns 32 of them and meets every anchor, 128 per anchor tile, so a
//!   point's state never leaves its warp. Per anchor tile a warp's 32 × 128
//!   dot products are 2 × 16 `mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32`
//!   accumulators (128 f32 per thread). `d` streams 32 halves at a time
//!   through a 4-stage `cp.async` pipeline (128 point rows and 128 anchor
//!   rows of 80 bytes per stage, so the 8 rows of an `ldmatrix` hit 32
//!   distinct banks); the pipeline runs over (anchor tile, stage) pairs
//!   without draining between anchor tiles. 93.5 KiB of dynamic shared
//!   memory (`KILN_ANNEAL_TC_SMEM`), 220-221 registers: two blocks (8 warps) per
//!   SM, so one block's epilogue runs beside the other's tensor work.
//!   Measured on the H100 (BENCHMARKS.md), against 64-anchor tiles: 23% less
//!   time at d = 768 and 28% at d = 1536, since every anchor tile reads the
//!   block's points again and with 64-anchor tiles more points were in
//!   flight than L2 holds; against one block of 256 points per SM: the same
//!   at d = 768, 6% less at d = 1536 and 10% less at 1M × 768 × 4096, 3%
//!   more at d = 384.
//! - **Slim tile.** `anneal_assign_tc_slim_*` is the same kernel with
//!   64-anchor tiles (`KILN_ANNEAL_TC_SLIM_SMEM`, 71.5 KiB; 140 registers):
//!   three blocks (12 warps) per SM instead of two. Where the epilogue's
//!   FP32 work bounds the kernel (small `d`: at 1M × 128 × 2048 the 128-anchor
//!   kernel issues in 42% of its slots with 2 warps per scheduler, ncu on the
//!   H200), more warps hide more of it; where few points leave a partial
//!   second wave of two-per-SM blocks, one wave of three fits. [`pick_tile`]
//!   chooses by shape, [`TILE_ENV`] or [`TcAssign::set_tile`] override. A
//!   point's result does not depend on the tile (its warp's refinement
//!   decides among candidates that both tiles' bounds admit), so both give
//!   the reference's bits; `tests/assign_tc.rs` runs every case with both.
//!   Tried and dropped (H200, 2026-11-26): 256 points per block (one block of
//!   8 warps per SM, a quarter less L2 traffic per FLOP), 4-10% slower at
//!   d = 768 to 4096 on that card. Tried and dropped (H200, 2026-11-27,
//!   BENCHMARKS.md; patches in `docs/bench/2026-11-27-h200-anneal/`):
//!   256-anchor tiles in one block of 8 warps (each point read half as
//!   often: L2 hit rate 61% -> 92%, DRAM a tenth), 9-20% slower; 64 × 64
//!   warp tiles (8 fragment loads per 32 mma instead of 10), up to 22%
//!   slower (even only at 100K × 1536); the next tile's anchor norms loaded
//!   a tile ahead with the refinement's loads unrolled 4 deep, 9-30% slower
//!   (long-scoreboard stalls doubled). The kernel is latency-bound at 2-3
//!   warps per scheduler (registers), not by L2 misses or fragment loads.
//! - **Hopper.** On compute capability 9.0, `anneal_assign_wgmma`
//!   (`kernels/anneal_wgmma.cu`, an sm_90a image; [`Tile::Wgmma`]) does the
//!   same work with `wgmma.mma_async.m64n128k16` (both operands from shared
//!   memory): a block of 512 threads is one producer warpgroup, which copies
//!   the f16 tiles with `cp.async` into 128-byte-swizzled shared memory (64
//!   halves of `d` per stage, 4 stages, zero fill past `dp`) and the anchor
//!   norms, signalling an mbarrier per stage, and three consumer warpgroups
//!   of 64 points each (64 accumulators a thread; `setmaxnreg` gives them
//!   152 registers, the producer 40), whose warps run this epilogue on
//!   their 16 points. It writes each point's candidate list and final `U`
//!   to global memory (`KILN_ANNEAL_WGMMA_LIST_WORDS` words a point), and
//!   `anneal_refine_lists_*`, one warp per point, runs the refinement below
//!   on them: the refinement waits on its loads of points and anchors, which
//!   a kernel of 48 registers hides with 40 warps an SM where the wgmma
//!   kernel has 16, and the tensor pipe no longer idles while a block
//!   refines (H200, 2026-11-29, the same bits: 6% less time for 10
//!   iterations at 1M × 128 × 2048, 8% at 1M × 64 × 2048 and 100K × 768 ×
//!   1024, 3-5% at 1M × 768 × 4096; the refinement was 24% of the wgmma
//!   kernel's stall samples). The lists cost 72 bytes a point. No TMA: a
//!   tensor map would be a new kernel argument. Its f32 accumulators are the same bits as mma.sync's
//!   (checked on every pair of normal and hostile f16 data at d = 80, 768,
//!   4096 on the H200), so the bound below holds unchanged, and its
//!   candidate lists, unresolved points and outputs equal the 128-anchor
//!   mma.sync kernel's. 1.4-1.9x faster than the better mma.sync tile on
//!   every shape measured (H200; 18.1 against 34.5 ms at 1M × 768 × 4096):
//!   `docs/bench/2026-11-27-wgmma/`.
//! - **Chunked (wide `d`).** `anneal_assign_wgmma_chunked`
//!   ([`Tile::WgmmaChunked`], the same block) starts a fresh accumulator
//!   every 4 stages (256 of `d`: the first `wgmma` of a chunk has
//!   `scale-d = 0`), waits for the chunk, and adds it in f32 to a second
//!   register set, in chunk order; the epilogue reads that sum. Its bound
//!   ([`eps_chunked`]) has the accumulation term of one chunk, not of all
//!   of `d`: at d = 4096 `eps` falls from 0.0063 to 0.0020, and on standard
//!   normal points the points left to the list kernel from 52-62% to
//!   0.5-0.6% (H200, docs/bench/2026-11-27-chunked: the assignment with
//!   its list kernels 11-13 times faster, the same bits). Below
//!   [`CHUNKED_MIN_D`] the plain kernel is faster (the sum spills 256
//!   bytes a thread, and the plain bound already leaves few points).
//! - **Epilogue, per anchor tile.** The 4 lanes of a quad hold one point row
//!   (32 anchors each). Each turns its dot products into `A = max(xn + cn -
//!   2·dot, 0)` (`dot` = accumulator · `σ⁻²`, exact) and the bound `e`
//!   below; the quad's least `A + e` lowers the row's upper bound `U`;
//!   anchors with `A - e ≤ U` join the row's candidate list in shared memory
//!   (`K = 8` entries of index and lower bound). A full list drops the
//!   entries whose lower bound is above the current `U`; if the new ones
//!   still do not fit, the point overflows. The wgmma kernels' lists hold
//!   16 while the tiles go by, and the final `U` prunes them before they
//!   are written: a point overflows when more than 16 entries meet the
//!   bound of their moment, or more than 8 the final one (on offset 1M ×
//!   768 × 4096 the points left to the list kernel fell from 2.07% to
//!   0.04-0.45% an iteration and the run from 247-252 to 178-182 ms, H200,
//!   BENCHMARKS.md 2026-11-29, sixth session). Only the last anchor tile (past
//!   `m`) and, with `EXCLUDE_SELF`, the tile that holds the block's own
//!   indices test each anchor's eligibility; the others skip the tests (the
//!   same values, fewer instructions per pair: the epilogue is what bounds
//!   the kernel at small `d`; 3.7% less kernel time at 1M × 128 × 2048 on
//!   the H200, BENCHMARKS.md 2026-11-26).
//! - **Refinement.** Per point, the warp computes `F` for every entry whose
//!   lower bound is within the final `U` (four anchors at a time, from global
//!   memory, on the original points and anchors, their norms loaded with
//!   their rows: one round trip, 1-4% less assignment time on the H200) and
//!   keeps the least, lowest index on ties. An overflowed point, or one with
//!   no bounded anchor, is appended to `unresolved` and gets no output from
//!   this kernel.
//! - **List kernels.** Every (8 listed points, 64 anchors) pair is one
//!   block's work (8 warps, 8 anchors each against the 8 points: 64 `F`s per
//!   lane, the same `F`, so each value loaded serves 8 products where one
//!   point per pair loaded 5 values per 4), grid-stride over the pairs
//!   with a fixed grid, the count read from device memory; a point's least
//!   `(F, index)` packs into one u64 (`F`'s bits, which order like `F` since
//!   `F ≥ +0`, then the index) taken by an atomic max of its complement, the
//!   same whatever order the blocks finish in; the block that arrives last
//!   (an atomic count) writes the outputs, and with no point listed no
//!   block does anything (one launch per assignment, where a second kernel
//!   cost about 3 us an iteration at 10K x 128 x 256 on the H200). A few
//!   listed points (typical: 0.01% of Gaussian points at d = 768) so cost
//!   microseconds, where one warp per point cost milliseconds.
//! - **Below sm_80** (no f16 `mma.m16n8k16` with `cp.async`; the sm_75 CI
//!   cell) the tc kernels list every point, so the list kernel does all the
//!   work, still exact.
//!
//! # The bound
//! **Centring.** The f16 copies hold `x' = fl(x - r)` and `c' = fl(c - r)`
//! for one reference point `r` (the points' mean, `anneal_column_sums_*`;
//! any `r` keeps the bound, the mean keeps it tight). Distances do not
//! change under a shift, so on points far from the origin (real embeddings
//! share one direction) the f16 term grows with the spread `|x'| |c'|`, not
//! with `|x| |c|`: at an offset of 8 in every dimension and unit spread that
//! is 65 times smaller. The exact distance `F` stays on the original inputs
//! and stored norms, so the outputs are the reference's bits whatever `r` is.
//! `anneal_to_half_*` makes, per row, the pair `(xn'', |x'|)` with `xn'' =
//! |x'|^2 + (xn - |x|^2)`, both sums in f64, rounded once to f32: the stored
//! norm's own rounding (`xn` against the true `|x|^2`, which `F` carries)
//! rides along, so it cancels against `F`'s as it did before centring.
//! `A = fl(xn'' + cn'') - 2 dot'` then approximates `G = xn + cn - 2 x·c`.
//!
//! With `u = 2^-24`, `S = ⌈d/16⌉` mma steps, `T = ⌈d/32⌉ + 5` (the f32
//! additions behind one exact dot product: `⌈d/32⌉` fmaf per lane and 5
//! butterfly adds) and `P' = Σ_k |x'_k c'_k| ≤ |x'| |c'|`:
//! 1. Rounding a scaled value to f16 is off by at most `2^-11` of it while it
//!    is a normal f16, and by at most `2^-25` (half the subnormal spacing)
//!    below; so the products are off by at most `(2^-10 + 2^-22) P'` plus
//!    `2^-25 √d (|x̃| + |c̃|) + d 2^-50` in scaled units (Cauchy-Schwarz on
//!    `Σ|x̃_k|`), i.e. `2^-25 √d (|x'| + |c'|) / σ + d 2^-50 / σ²` unscaled.
//! 2. f16 products are exact in f32; each mma step adds 16 of them to the
//!    accumulator with significands aligned to the largest and truncated
//!    (Fasi et al. 2021 for A100, Khattak & Mikaitis 2025 for H100): at most
//!    17 terms each off by `< 2^-23` of the largest, `≤ 2^-18` of the
//!    magnitudes summed so far per step, so `≤ S · 2^-18 · P'` (first order)
//!    over the chain.
//! 3. `A` against `G`: two f32 roundings (`≤ 3u (xn'' + cn'')`, since
//!    `2|dot'| ≤ xn' + cn'`), the pairs' rounding to f32 (`u` each) and the
//!    centring's roundings (`|x' - c'|^2` against `|x - c|^2`: `≤ 4u (xn' +
//!    cn')`): `8u (xn'' + cn'')`.
//! 4. `G` against `F`: `F`'s f32 dot product is off by `≤ T u |x| |c|`,
//!    doubled by the `-2`, and its two roundings by `≤ 3u (xn + cn)`. The
//!    clamp at 0 is 1-Lipschitz and never widens the gap.
//!
//! The kernel takes every term twice: [`eps`]`(d) = 2^-9 + S · 2^-16` (the
//! accumulation model, whose hardware details are the least documented, 4
//! times) and [`error_bound`] `e = 2 eps(d) |x'| |c'| + 2^-20 (xn'' +
//! cn'') + 2^-23 √d (|x'| + |c'|) / σ + d 2^-48 / σ² + row`, with the
//! point's [`row_slack`] `row = T 2^-22 √xn √cn_max + 6u (xn + cn_max)`,
//! where `cn_max` is the anchors' largest `|c|^2`: one value per point,
//! computed once, so the epilogue's instructions per pair are those of the
//! uncentred bound. The margin absorbs the f32 error of `e` itself and of
//! rounding `A ± e`. f16 keeps the 11 significant bits TF32 keeps, so the
//! bound, and the candidates it admits, are those of a TF32 kernel at twice
//! the tensor throughput. (Before centring, `F`'s dot product was bounded
//! by `(d + 8) u P`; `T u P` is the bound of the summation order that
//! `anneal_tc.h` pins.) Measured on an H200 (BENCHMARKS.md, 2026-11-29): at
//! an offset of 8 the list kernel's share falls from 99.9% to 0.00% at 1M ×
//! 128 × 2048.
//!
//! **Chunked.** A chunk of `C = 16` steps (256 of `d`) starts from zero, so
//! model 2 bounds its accumulation by `C · 2^-18 · P_c` (`P_c` its share of
//! `P`): `≤ C · 2^-18 · P` over the chunks. Adding the `⌈S / C⌉` chunk sums
//! in f32 costs at most `2^-24` of the magnitudes summed so far per
//! addition: `≤ ⌈S / C⌉ · 2^-24 · P`. [`eps_chunked`] takes the f16 input
//! term 1.25 times (`2^-10 + 2^-12`: the term is exact to first order, and
//! the f32 errors of the norms, of `e` and of `A ± e` that the margin must
//! absorb are below `2^-20` of it), the accumulation term 4 times (`C ·
//! 2^-16`, `C = min(S, 16)`) and the chunks' additions 4 times (`⌈S / C⌉ ·
//! 2^-22`); the rest of `e` is the plain kernel's.
//!
//! Why it is exact: if `e ≥ |A - F|` for every pair, the minimizer `j*` of
//! `F` has `A* - e* ≤ F* ≤ F(j_U) ≤ A(j_U) + e(j_U) = U` for whichever anchor
//! `j_U` set `U`, so `j*` passes every test against every `U` seen (they only
//! decrease); its entry is never dropped; the least `F` over the survivors
//! is the least over all anchors. For `d = 128`, `eps ≈ 1.06 · 2^-9`:
//! anchors whose approximate distance is within `≈ 0.008 |x'| |c'|` of the
//! best are refined.
//!
//! # Speed
//! Measured figures are in BENCHMARKS.md (the embedding grid and the seed
//! shapes, beside PyTorch). By the tile shape: per warp and 16 of `d`, 32
//! mma and 10 `ldmatrix.x4`; the block tile (128 points × 128 anchors) reads
//! 20 KB per 1 MFLOP (51 FLOP/byte). The epilogue adds ~16 FP32
//! instructions per (point, anchor) against `2d` tensor FLOP, and the
//! tensor pipe idles while it runs, so it weighs on small `d`. A bound
//! shared by a whole tile (its largest anchor norm) was tried: 10% faster on
//! Gaussian points, but one far anchor widens every point's window, and on
//! the benchmark's runs so many points overflowed to the list kernel that
//! whole runs took up to 17 times longer; the per-pair bound stays. Tried
//! and dropped on the H200 (2026-11-27, `docs/bench/2026-11-27-epilogue/`,
//! the assignment with its list kernels in a harness, the same bits every
//! time; patches there), each against this epilogue: the norms of a column
//! pair in one 16-byte load and `e` in two `fmaf`s (8% faster wgmma at 1M
//! × 128 × 2048, 6-8% slower at d = 768 to 2048); a first pass of
//! `a' = cn - 2 dot` whose quad minimum and a tile-wide `e` skip, by a warp
//! vote per column pair, the pairs that cannot join the list (5-20%
//! slower: the votes serialize a latency-bound epilogue); one `e` at the
//! tile's largest norm where the tile's norms lie within a factor 4 (7%
//! faster wgmma and 11% faster mma.sync at d = 128, 3-10% slower wgmma at
//! d = 768 to 2048, whether or not the path runs there). Two consumer
//! warpgroups with two accumulator sets each, the epilogue of one anchor
//! tile beside the next tile's first wgmmas, were 20-38% slower than the
//! three warpgroups of one set (the same bits), and refining two points at
//! a time 2-55% slower but at 10K × 128 × 256 (6% faster).
//!
//! # Use
//! [`TcAssign::new`] once per run (`None`: use the SIMT kernel), then
//! [`TcAssign::prepare_points`] once, then [`TcAssign::launch_f32`] /
//! [`TcAssign::launch_f16`] (the arguments of `anneal_assign_f32/f16`) or
//! [`TcAssign::launch`] with a [`TcJob`], generic over the point type, per
//! assignment: five or six enqueued operations (zero the unresolved count
//! and the overflow flag, the anchors' f16 copy, the tc kernel, on Hopper
//! the refinement, the list kernel), no synchronization.

use crate::bindings::types::KILN_ANNEAL_EXCLUDE_SELF;
use rayon::prelude::*;

use crate::error::AnnealError;

mod kernels;
mod launch;

pub use kernels::{
    AbsmaxParams, ColumnSumsParams, ListParams, RefineParams, TcKernels, TcParams, TcPoint,
    ToHalfParams, TypedKernels, TypedWgmma, WgmmaParams,
};
pub use launch::{padded_dim, Reference, TcAssign, TcJob};

/// The environment variable that turns the tensor-core path off (`0`).
pub const ENV: &str = "KILN_ANNEAL_TC";

/// The environment variable that, set to `1`, makes the GPU engine print
/// after every assignment how many points the tensor-core kernel left to the
/// list kernel (it waits for each: a diagnostic, not for timed runs).
pub const STATS_ENV: &str = "KILN_ANNEAL_TC_STATS";

/// The environment variable that picks the tc kernel: `128` (mma.sync, two
/// blocks per SM), `64` (mma.sync, three blocks per SM), `wgmma` or
/// `wgmma-chunked` (the Hopper kernels; refused where they cannot run) or
/// `auto` (the default: [`resolve_tile`]). All give the same bits.
pub const TILE_ENV: &str = "KILN_ANNEAL_TC_TILE";

/// The tc kernel: `anneal_assign_tc_*`, `_slim_*` or `anneal_assign_wgmma` (whose
/// lists `anneal_refine_lists_*` refines).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tile {
    /// By device and shape: [`resolve_tile`].
    Auto,
    /// mma.sync, 128 anchors per anchor tile.
    Wide,
    /// mma.sync, 64 anchors per anchor tile.
    Slim,
    /// wgmma (sm_90a, `kernels/anneal_wgmma.cu`): 3 warpgroups of 64 points
    /// per block, 128 anchors per anchor tile.
    Wgmma,
    /// The wgmma kernel summing its products 256 of `d` at a time
    /// (`anneal_assign_wgmma_chunked`): a bound that grows with the chunk,
    /// not with `d`, so that wide points stay off the list kernel.
    WgmmaChunked,
}

/// The module of the wgmma kernel.
pub const WGMMA_MODULE: &str = "anneal_wgmma";

/// Whether the wgmma kernel runs here: a device of compute capability 9.0
/// (sm_90a code runs on no other arch), and `modules` holds [`WGMMA_MODULE`]
/// built with SASS for 9.0 (kernels/kiln.toml builds it as sm_90a; its other
/// images are the fallback body, which lists every point).
pub fn wgmma_available(compute_capability: (u32, u32), modules: &[&gpu_core::FatbinImage]) -> bool {
    compute_capability == (9, 0)
        && modules
            .iter()
            .any(|m| m.name == WGMMA_MODULE && m.is_built() && m.sass.contains(&90))
}

/// The kernel a launch uses, given whether the wgmma kernels are here:
/// [`Tile::Wgmma`] and [`Tile::WgmmaChunked`] where they are, and
/// [`Tile::Auto`] takes the chunked one from [`CHUNKED_MIN_D`] and the other
/// below (the wgmma kernel is faster than both mma.sync tiles on every shape
/// measured on the H200: 1.4-1.9x, docs/bench/2026-11-27-wgmma); without
/// them, [`pick_tile`]'s mma.sync tile.
pub fn resolve_tile(tile: Tile, wgmma: bool, n: u32, d: u32, sms: u32) -> Tile {
    match tile {
        Tile::Auto if wgmma && d >= CHUNKED_MIN_D => Tile::WgmmaChunked,
        Tile::Auto | Tile::Wgmma if wgmma => Tile::Wgmma,
        Tile::WgmmaChunked if wgmma => Tile::WgmmaChunked,
        Tile::Wgmma | Tile::WgmmaChunked => pick_tile(Tile::Auto, n, d, sms),
        chosen => pick_tile(chosen, n, d, sms),
    }
}

/// The narrowest `d` at which [`Tile::Auto`] takes [`Tile::WgmmaChunked`].
/// Measured on the H200 (docs/bench/2026-11-27-chunked, the assignment with
/// its list kernels, the same bits): at d = 768 the chunked kernel took 11%
/// longer (its accumulator and sum spill; the plain bound leaves only 0.02%
/// of the points to the list kernel there), at d = 1536 14% less (1.1-1.4%
/// of the points listed against 0.004%), at d = 2048 6% less, at d = 4096
/// 11 to 13 times less (52-62% listed against 0.5-0.6%).
pub const CHUNKED_MIN_D: u32 = 1536;

/// The widest `d` at which [`Tile::Auto`] takes the 64-anchor tile.
pub const SLIM_MAX_D: u32 = 384;

/// `(points per block, threads, dynamic shared memory bytes)` of `tile`'s
/// kernel (anneal_tc.h, anneal_wgmma.h); [`Tile::Auto`] is resolved first
/// ([`resolve_tile`]) and stands for the 128-anchor tile here.
pub fn block_shape(tile: Tile) -> (u32, u32, u32) {
    use crate::bindings::types::*;
    match tile {
        Tile::Wgmma | Tile::WgmmaChunked => (
            KILN_ANNEAL_WGMMA_TILE,
            KILN_ANNEAL_WGMMA_THREADS,
            KILN_ANNEAL_WGMMA_SMEM,
        ),
        Tile::Slim => (
            KILN_ANNEAL_TC_TILE,
            KILN_ANNEAL_TC_THREADS,
            KILN_ANNEAL_TC_SLIM_SMEM,
        ),
        Tile::Wide | Tile::Auto => (
            KILN_ANNEAL_TC_TILE,
            KILN_ANNEAL_TC_THREADS,
            KILN_ANNEAL_TC_SMEM,
        ),
    }
}

/// The mma.sync tile a launch of `n` points of dimension `d` on `sms` SMs uses:
/// `tile` unless [`Tile::Auto`], which takes [`Tile::Slim`] up to
/// [`SLIM_MAX_D`] (the epilogue, not L2 traffic, bounds the kernel there,
/// and three blocks per SM hide more of it), or when its 128-point blocks
/// fit one wave of three per SM (few points: the 128-anchor tile's two
/// blocks per SM would leave a partial second wave), else [`Tile::Wide`].
/// Measured on the H200 (BENCHMARKS.md, 2026-11-26): 10% less time at
/// 1M × 128 × 2048, 100K × 384 × 1024 and 50K × 2048 × 256; 8% more at
/// 100K × 768 × 1024 (three waves either way).
pub fn pick_tile(tile: Tile, n: u32, d: u32, sms: u32) -> Tile {
    let blocks = u64::from(n.div_ceil(128));
    match tile {
        Tile::Auto if d <= SLIM_MAX_D || blocks <= 3 * u64::from(sms) => Tile::Slim,
        Tile::Auto => Tile::Wide,
        chosen => chosen,
    }
}

/// [`TILE_ENV`]'s value as a [`Tile`] (unset, empty or `auto`:
/// [`Tile::Auto`]); anything else is an error naming the values it takes.
pub fn tile_from_env(value: Option<&str>) -> Result<Tile, AnnealError> {
    let choices = [
        ("auto", Tile::Auto),
        ("128", Tile::Wide),
        ("64", Tile::Slim),
        ("wgmma", Tile::Wgmma),
        ("wgmma-chunked", Tile::WgmmaChunked),
    ];
    let expected = "64, 128, wgmma, wgmma-chunked or auto";
    crate::setting::choose(TILE_ENV, value, &choices, expected)
}

/// The lowest arch with f16 `mma.sync.m16n8k16` and `cp.async` (sm_80).
pub const MIN_ARCH: u32 = 80;

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

/// `eps(d)` of the bound on the centred f16 copies (module docs), as
/// `anneal_tc_device.cuh`'s `tc_eps` computes it in f32: the f16 input term
/// and the accumulation term, each taken twice. The exact distance's own
/// rounding is in [`row_slack`].
pub fn eps(d: u32) -> f32 {
    let steps = (d / 16 + u32::from(!d.is_multiple_of(16))) as f32;
    2f32.powi(-9) + steps * 2f32.powi(-16)
}

/// `eps` of the chunked wgmma kernel (module docs, **Chunked**), as
/// `anneal_tc_device.cuh`'s `tc_eps_chunked` computes it in f32 for chunks of
/// 16 steps.
pub fn eps_chunked(d: u32) -> f32 {
    const CHUNK_STEPS: u32 = crate::bindings::types::KILN_ANNEAL_WGMMA_CHUNK_DIMS / 16;
    let steps = d / 16 + u32::from(!d.is_multiple_of(16));
    let chunks = steps.div_ceil(CHUNK_STEPS);
    let within = steps.min(CHUNK_STEPS);
    2f32.powi(-10)
        + 2f32.powi(-12)
        + within as f32 * 2f32.powi(-16)
        + chunks as f32 * 2f32.powi(-22)
}

/// The f32 additions behind one exact distance: `⌈d/32⌉` fmaf per lane,
/// then 5 butterfly adds (`tc_sum_terms`).
pub fn sum_terms(d: u32) -> f32 {
    (d.div_ceil(32) + 5) as f32
}

/// The part of the bound that the exact distance adds for a point of stored
/// norm `xn`, with `cn_max` the anchors' largest `|c|^2` (`tc_row_slack`):
/// `F`'s dot product and its two roundings, taken twice.
pub fn row_slack(d: u32, xn: f32, cn_max: f32) -> f32 {
    let dot = sum_terms(d) * 2f32.powi(-22) * xn.sqrt() * cn_max.sqrt();
    (6.0 * 2f32.powi(-24)).mul_add(xn + cn_max, dot)
}

/// The bound `e` on `|A - F|` as the kernel computes it (module docs), for
/// a point and an anchor given as the pairs `anneal_to_half_*` makes (the
/// centred squared norm with the stored norm's rounding, the centred norm),
/// with `eps` from [`eps`] or [`eps_chunked`] and the point's
/// [`row_slack`]; without the subnormal term (which the scale makes
/// negligible for inputs in f16's normal range).
pub fn error_bound(eps: f32, (xn_c, xq): (f32, f32), (cn_c, cq): (f32, f32), row: f32) -> f32 {
    let rx = 2.0 * eps * xq;
    rx.mul_add(cq, (xn_c + cn_c).mul_add(2f32.powi(-20), row))
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

#[cfg(test)]
mod tests;
