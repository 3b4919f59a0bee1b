/* anneal: the GPU half of the anchor compression (crates/apps/src/anneal).
 * Points are row-major n x d, f32 or f16 (raw bits); anchors row-major
 * m x d f32. With the points sharded over several GPUs, each GPU runs the
 * same kernels on its shard. One iteration is:
 *   anneal_assign (fused distance + argmin, counts per anchor)
 *   -> anneal_scan (offsets of each anchor's members; zeroes the counts)
 *   -> anneal_scatter (member lists)
 *   -> anneal_reduce (per anchor: member count, sum of the member points and
 *      of their distances: the partial statistics of this shard)
 *   -> kiln_sum_f32 (reduce.h, CUB) over the distances: the energy sum
 *   -> [several GPUs: one NCCL all-reduce of the partials]
 *   -> anneal_update (anchor_j += eta * (mean_j - anchor_j), new norms)
 *   -> anneal_finish (energy, history, the convergence test on the device).
 * So the host enqueues many iterations without reading anything back: once
 * anneal_finish has set `done`, every later kernel returns at once.
 * Distances are |x|^2 + |c|^2 - 2 x.c, clamped at 0, with the norms kept
 * beside the points and anchors. Ties go to the lowest anchor index. */
#ifndef KILN_ANNEAL_H
#define KILN_ANNEAL_H
#include "kiln.h"

/* State of the iterations on the device, written by the host before a run
 * of iterations and read back after it. */
typedef struct AnnealControl {
    double previous;       /* energy of the previous iteration, if has_previous */
    uint32_t has_previous; /* 0 at the start and after maintenance moved anchors */
    uint32_t done;         /* set by anneal_finish on convergence */
    uint32_t iterations;   /* iterations finished since the host wrote this */
    uint32_t pad;
} AnnealControl;
KILN_STATIC_ASSERT(sizeof(AnnealControl) == 24, "AnnealControl is 24 bytes");
KILN_STATIC_ASSERT(offsetof(AnnealControl, has_previous) == 8, "AnnealControl.has_previous at 8");
KILN_STATIC_ASSERT(offsetof(AnnealControl, iterations) == 16, "AnnealControl.iterations at 16");

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
            const AnnealControl *control, uint32_t *assign, float *dist, uint32_t *counts);
KILN_KERNEL(anneal_assign_f16, const uint16_t *x, const float *x_norms, uint32_t n, uint32_t d,
            const float *anchors, const float *anchor_norms, uint32_t m, uint32_t flags,
            const AnnealControl *control, uint32_t *assign, float *dist, uint32_t *counts);

/* offsets[j] = sum of counts[0..j) for j <= m; cursor[j] = 0; counts[j] = 0.
 * One block of 1024 threads. */
KILN_KERNEL(anneal_scan, const AnnealControl *control, uint32_t *counts, uint32_t m,
            uint32_t *offsets, uint32_t *cursor);

/* order[offsets[assign[i]] + k] = i, k the arrival order. */
KILN_KERNEL(anneal_scatter, const AnnealControl *control, const uint32_t *assign,
            uint32_t n, const uint32_t *offsets, uint32_t *cursor, uint32_t *order);

/* The partial statistics, one f32 buffer of m * d + m + 1 values: the sum of
 * each anchor's member points (m x d), then the sum of their distances (m),
 * then the energy sum (1). One all-reduce combines the shards' partials. */

/* One block per anchor j < m, members order[offsets[j]..offsets[j+1]):
 * members[j] = their count; partial[j*d .. j*d+d) = the sum of their points;
 * partial[m*d + j] = the sum of their distances. Block: 128 threads. */
KILN_KERNEL(anneal_reduce_f32, const float *x, const uint32_t *order, const uint32_t *offsets,
            const float *dist, uint32_t m, uint32_t d, const AnnealControl *control,
            uint32_t *members, float *partial);
KILN_KERNEL(anneal_reduce_f16, const uint16_t *x, const uint32_t *order, const uint32_t *offsets,
            const float *dist, uint32_t m, uint32_t d, const AnnealControl *control,
            uint32_t *members, float *partial);

/* One block per anchor j < m: if members[j] > 0, anchor_j += eta * (mean_j -
 * anchor_j) with mean_j = partial[j*d..] / members[j]; anchor_norms[j] =
 * |anchor_j|^2. Block: 128 threads. */
KILN_KERNEL(anneal_update, const float *partial, const uint32_t *members, uint32_t m, uint32_t d,
            float eta, const AnnealControl *control, float *anchors, float *anchor_norms);

/* One thread: E = partial[m*d + m] / n (f64); history[slot] = E; done =
 * has_previous and (previous > 0 and |previous - E| / previous < tol, or
 * previous == 0 == E); previous = E; has_previous = 1; iterations += 1.
 * Nothing once done is set. */
KILN_KERNEL(anneal_finish, const float *partial, uint32_t m, uint32_t d, uint64_t n, double tol,
            uint32_t slot, AnnealControl *control, double *history);

/* Every kernel taking a control returns at once when control->done is set,
 * so the outputs stay those of the last iteration run. */

#endif
