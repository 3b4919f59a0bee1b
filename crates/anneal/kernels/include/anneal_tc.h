/* anneal_tc: the anchor assignment of anneal.h on tensor cores, made exact.
 * Same outputs and flags as anneal_assign_f32/f16 (assign, dist, counts;
 * dist = max(|x|^2 + |c|^2 - 2 x.c, 0), ties to the lowest anchor index).
 * The f16 copies are of the inputs relative to a reference point r (the
 * points' mean), r_k = ref_sum[k] * ref_scale, so that the bound stays
 * tight on data far from the origin; the exact distances use the inputs.
 * half_state (KILN_ANNEAL_TC_STATE words, see the KILN_ANNEAL_TC_STATE_*
 * slots) carries the scale, the overflow flag and the largest norms:
 *   anneal_column_sums_* sums[k] += the column sums of x (the caller zeroes
 *                        sums; any grid: rows split over grid.y).
 *   anneal_absmax_*      half_state[ABSMAX] = max |x - r| as f32 bits
 *                        (atomicMax over the bits; the caller zeroes it).
 *   anneal_to_half_*     per row (one warp): dst (rows x dp f16, dp = d
 *                        rounded up to KILN_ANNEAL_TC_DP, zeros past d) =
 *                        (src - r) scaled by sigma, the power of two that puts
 *                        half_state[ABSMAX] in [2^12, 2^13); norms_c[2 row] =
 *                        |src - r|^2 + norms[row] - |src|^2 and
 *                        norms_c[2 row + 1] = |src - r| (sums in f64, so the
 *                        stored norm's own rounding carries into the centred
 *                        one); a value whose scaled magnitude rounds past the
 *                        f16 range sets half_state[OVERFLOW]; *norm_max = max
 *                        |src|^2 (f32 bits, atomicMax; the caller zeroes it).
 *   anneal_assign_tc_*   f16 mma.sync (f32 accumulate) on the scaled copies
 *                        xh and ch with a per-pair error bound (from the
 *                        centred norms x_norms_c, anchor_norms_c and the
 *                        largest norms) keeps each point's candidates (anchors whose
 *                        lower bound is within the best upper bound; the
 *                        centred norms are anneal_to_half_*'s pairs), then
 *                        the exact f32 distance of each, on the original x
 *                        and anchors, picks the winner. A point with more
 *                        than KILN_ANNEAL_TC_CANDIDATES candidates, or every
 *                        point while half_state[OVERFLOW] is set, is appended
 *                        to `unresolved` (atomicAdd on *unresolved_count,
 *                        which the caller zeroes) and gets no output here.
 *   anneal_assign_list_* the exact f32 distances of the points listed in
 *                        list[0..*list_count) to every anchor, spread over
 *                        the grid by (8 points, 64 anchors): best[i] (zero
 *                        before: the caller zeroes it once, and each finish
 *                        clears what its list wrote) = the complement of the
 *                        least (dist bits << 32 | anchor), by atomicMax;
 *                        then the block that arrives last (*arrived counts
 *                        the blocks; zero before, and that block zeroes it
 *                        again) writes each listed point's assign, dist and
 *                        count from best[i] (zero: no eligible anchor, then
 *                        assign = UINT32_MAX, dist = +inf) and sets best[i]
 *                        back to zero for the next list. With no point
 *                        listed no block does anything. It runs after the
 *                        tc kernel on its `unresolved` list, and returns at
 *                        once once `done` is set.
 * The "exact f32 distance" is one fixed computation shared by both kernels:
 * lane l of a warp sums fmaf(x[k], c[k], .) over k = l, l + 32, ... in
 * order from 0, the 32 partial sums are added by an xor butterfly (offsets
 * 16, 8, 4, 2, 1), and dist = fmaxf(fmaf(-2, dot, x_norm + c_norm), 0).
 * Below sm_80 (no f16 mma.m16n8k16, no cp.async) the tc kernels put every
 * point in `unresolved`. The assignment kernels return at once when
 * control->done is set (anneal.h).
 * The design, the error bound and the speed are in
 * crates/anneal/src/assign_tc.rs. */
#ifndef KILN_ANNEAL_TC_H
#define KILN_ANNEAL_TC_H
#include "kiln.h"
#include "anneal.h" /* KILN_ANNEAL_EXCLUDE_SELF, KILN_ANNEAL_COUNT */

/* Candidates kept per point before it is handed to the list kernel. */
#define KILN_ANNEAL_TC_CANDIDATES 8u
/* Points per block of anneal_assign_tc_*: grid ceil(n / 128), block
 * KILN_ANNEAL_TC_THREADS threads, KILN_ANNEAL_TC_SMEM bytes of dynamic shared
 * memory (past the 48 KiB default: the kernel must be allowed it first). */
#define KILN_ANNEAL_TC_TILE 128u
#define KILN_ANNEAL_TC_THREADS 128u
#define KILN_ANNEAL_TC_SMEM 95744u
/* anneal_assign_tc_slim_*: the same kernel with 64-anchor tiles (same grid
 * and block, KILN_ANNEAL_TC_SLIM_SMEM bytes, three blocks per SM), for small
 * d, where the epilogue bounds the kernel and more warps per SM hide it.
 * Same arguments and outputs. */
#define KILN_ANNEAL_TC_SLIM_SMEM 73216u
/* The f16 copies' row length is d rounded up to a multiple of this. */
#define KILN_ANNEAL_TC_DP 32u
/* half_state's words: the points' scale (max |x - r| bits), the points'
 * largest |x|^2, the anchors' overflow flag, the anchors' largest |c|^2 (f32
 * bits). The points' words are written once per run, the anchors' (from
 * OVERFLOW on) every assignment. */
#define KILN_ANNEAL_TC_STATE_ABSMAX 0u
#define KILN_ANNEAL_TC_STATE_POINT_NORM_MAX 1u
#define KILN_ANNEAL_TC_STATE_OVERFLOW 2u
#define KILN_ANNEAL_TC_STATE_ANCHOR_NORM_MAX 3u
#define KILN_ANNEAL_TC_STATE 4u
/* Block of anneal_assign_list_* (8 warps, 8 anchors each, per (8 points, 64
 * anchors) pair, grid-stride over the pairs: any grid). */
#define KILN_ANNEAL_LIST_THREADS 256u

KILN_KERNEL(anneal_column_sums_f32, const float *x, uint32_t rows, uint32_t d, float *sums);
KILN_KERNEL(anneal_column_sums_f16, const uint16_t *x, uint32_t rows, uint32_t d, float *sums);
KILN_KERNEL(anneal_absmax_f32, const float *x, uint32_t rows, uint32_t d, const float *ref_sum,
            float ref_scale, uint32_t *half_state);
KILN_KERNEL(anneal_absmax_f16, const uint16_t *x, uint32_t rows, uint32_t d,
            const float *ref_sum, float ref_scale, uint32_t *half_state);
KILN_KERNEL(anneal_to_half_f32, const float *src, const float *norms, uint32_t rows, uint32_t d,
            uint32_t dp, const float *ref_sum, float ref_scale, uint32_t *half_state,
            uint32_t *norm_max, uint16_t *dst, float *norms_c);
KILN_KERNEL(anneal_to_half_f16, const uint16_t *src, const float *norms, uint32_t rows,
            uint32_t d, uint32_t dp, const float *ref_sum, float ref_scale,
            uint32_t *half_state, uint32_t *norm_max, uint16_t *dst, float *norms_c);

KILN_KERNEL(anneal_assign_tc_f32, const float *x, const uint16_t *xh, const float *x_norms,
            const float *x_norms_c, uint32_t n, uint32_t d, uint32_t dp, const float *anchors,
            const uint16_t *ch, const float *anchor_norms, const float *anchor_norms_c,
            uint32_t m, uint32_t flags, const uint32_t *half_state,
            const AnnealControl *control, uint32_t *assign, float *dist, uint32_t *counts,
            uint32_t *unresolved, uint32_t *unresolved_count);
KILN_KERNEL(anneal_assign_tc_f16, const uint16_t *x, const uint16_t *xh, const float *x_norms,
            const float *x_norms_c, uint32_t n, uint32_t d, uint32_t dp, const float *anchors,
            const uint16_t *ch, const float *anchor_norms, const float *anchor_norms_c,
            uint32_t m, uint32_t flags, const uint32_t *half_state,
            const AnnealControl *control, uint32_t *assign, float *dist, uint32_t *counts,
            uint32_t *unresolved, uint32_t *unresolved_count);

KILN_KERNEL(anneal_assign_tc_slim_f32, const float *x, const uint16_t *xh, const float *x_norms,
            const float *x_norms_c, uint32_t n, uint32_t d, uint32_t dp, const float *anchors,
            const uint16_t *ch, const float *anchor_norms, const float *anchor_norms_c,
            uint32_t m, uint32_t flags, const uint32_t *half_state,
            const AnnealControl *control, uint32_t *assign, float *dist, uint32_t *counts,
            uint32_t *unresolved, uint32_t *unresolved_count);
KILN_KERNEL(anneal_assign_tc_slim_f16, const uint16_t *x, const uint16_t *xh, const float *x_norms,
            const float *x_norms_c, uint32_t n, uint32_t d, uint32_t dp, const float *anchors,
            const uint16_t *ch, const float *anchor_norms, const float *anchor_norms_c,
            uint32_t m, uint32_t flags, const uint32_t *half_state,
            const AnnealControl *control, uint32_t *assign, float *dist, uint32_t *counts,
            uint32_t *unresolved, uint32_t *unresolved_count);
KILN_KERNEL(anneal_assign_list_f32, const float *x, const float *x_norms, uint32_t d,
            const float *anchors, const float *anchor_norms, uint32_t m, uint32_t flags,
            const AnnealControl *control, const uint32_t *list, const uint32_t *list_count,
            uint64_t *best, uint32_t *assign, float *dist, uint32_t *counts, uint32_t *arrived);
KILN_KERNEL(anneal_assign_list_f16, const uint16_t *x, const float *x_norms, uint32_t d,
            const float *anchors, const float *anchor_norms, uint32_t m, uint32_t flags,
            const AnnealControl *control, const uint32_t *list, const uint32_t *list_count,
            uint64_t *best, uint32_t *assign, float *dist, uint32_t *counts, uint32_t *arrived);

/* Each of the m anchors' nearest other anchor by F, on CUDA cores (no f16
 * copies): neighbors[i] = argmin over j != i of F(i, j) (anchors as both
 * points and anchors, norms as both norms), ties to the lowest index, dist[i]
 * that F; (u32 max, +inf) when m == 1. The outputs of anneal_assign_tc_*
 * then anneal_assign_list_* with EXCLUDE_SELF on the same inputs, bit for
 * bit. Grid: m blocks of KILN_ANNEAL_NEIGHBORS_THREADS threads. */
#define KILN_ANNEAL_NEIGHBORS_THREADS 256u
KILN_KERNEL(anneal_neighbors_exact, const float *anchors, const float *norms, uint32_t m,
            uint32_t d, uint32_t *neighbors, float *dist);

#endif
