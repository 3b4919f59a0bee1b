/* anneal: the GPU half of the anchor compression (crates/apps/src/anneal).
 * Points are row-major n x d, f32 or f16 (raw bits); anchors row-major
 * m x d f32. One iteration is:
 *   anneal_assign (fused distance + argmin, counts per anchor)
 *   -> anneal_scan (offsets of each anchor's members; zeroes the counts)
 *   -> anneal_scatter (member lists)
 *   -> anneal_reduce_update (per anchor: mean of members, sum of member
 *      distances, move the anchor toward the mean by eta, new squared norm)
 *   -> kiln_sum_f32 (reduce.h, CUB) over the distances: the energy.
 * Distances are |x|^2 + |c|^2 - 2 x.c, clamped at 0, with the norms kept
 * beside the points and anchors. Ties go to the lowest anchor index. */
#ifndef KILN_ANNEAL_H
#define KILN_ANNEAL_H
#include "kiln.h"

/* Flags of anneal_assign. */
#define KILN_ANNEAL_EXCLUDE_SELF 1u /* skip anchor i for point i (anchor-to-anchor neighbours) */
#define KILN_ANNEAL_COUNT 2u        /* atomically count each anchor's members into counts */

/* norms[i] = |x_i|^2. */
KILN_KERNEL(anneal_norms_f32, const float *x, uint32_t n, uint32_t d, float *norms);
KILN_KERNEL(anneal_norms_f16, const uint16_t *x, uint32_t n, uint32_t d, float *norms);

/* For each point i < n: assign[i] = argmin_j dist(x_i, c_j), dist[i] = that
 * distance. Block: 256 threads; grid: ceil(n / 128). */
KILN_KERNEL(anneal_assign_f32, const float *x, const float *x_norms, uint32_t n, uint32_t d,
            const float *anchors, const float *anchor_norms, uint32_t m, uint32_t flags,
            uint32_t *assign, float *dist, uint32_t *counts);
KILN_KERNEL(anneal_assign_f16, const uint16_t *x, const float *x_norms, uint32_t n, uint32_t d,
            const float *anchors, const float *anchor_norms, uint32_t m, uint32_t flags,
            uint32_t *assign, float *dist, uint32_t *counts);

/* offsets[j] = sum of counts[0..j) for j <= m; cursor[j] = 0; counts[j] = 0.
 * One block of 1024 threads. */
KILN_KERNEL(anneal_scan, uint32_t *counts, uint32_t m, uint32_t *offsets, uint32_t *cursor);

/* order[offsets[assign[i]] + k] = i, k the arrival order. */
KILN_KERNEL(anneal_scatter, const uint32_t *assign, uint32_t n, const uint32_t *offsets,
            uint32_t *cursor, uint32_t *order);

/* One block per anchor j < m: with its members order[offsets[j]..offsets[j+1]),
 * sumsq[j] = sum of their dist; if it has members, anchor_j += eta * (mean -
 * anchor_j); anchor_norms[j] = |anchor_j|^2. Block: 128 threads. */
KILN_KERNEL(anneal_reduce_update_f32, const float *x, const uint32_t *order,
            const uint32_t *offsets, const float *dist, uint32_t m, uint32_t d, float eta,
            float *anchors, float *anchor_norms, float *sumsq);
KILN_KERNEL(anneal_reduce_update_f16, const uint16_t *x, const uint32_t *order,
            const uint32_t *offsets, const float *dist, uint32_t m, uint32_t d, float eta,
            float *anchors, float *anchor_norms, float *sumsq);

#endif
