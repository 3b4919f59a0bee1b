/* anneal_tc: the anchor assignment of anneal.h on tensor cores, made exact.
 * Same outputs and flags as anneal_assign_f32/f16 (assign, dist, counts;
 * dist = max(|x|^2 + |c|^2 - 2 x.c, 0), ties to the lowest anchor index):
 *   anneal_assign_tc_*   TF32 mma.sync distances with a per-point error bound
 *                        keep each point's candidates (anchors whose lower
 *                        bound is within the best upper bound), then the
 *                        exact f32 distance of each picks the winner. A point
 *                        with more than KILN_ANNEAL_TC_CANDIDATES candidates
 *                        is appended to `unresolved` (atomicAdd on
 *                        *unresolved_count, which the caller zeroes) and gets
 *                        no output from this kernel.
 *   anneal_assign_list_* the exact f32 assignment of the points listed in
 *                        list[0..*list_count): run after the tc kernel on its
 *                        `unresolved` list.
 * The "exact f32 distance" is one fixed computation shared by both kernels:
 * lane l of a warp sums fmaf(x[k], c[k], .) over k = l, l + 32, ... in
 * order from 0, the 32 partial sums are added by an xor butterfly (offsets
 * 16, 8, 4, 2, 1), and dist = fmaxf(fmaf(-2, dot, x_norm + c_norm), 0).
 * Below sm_80 (no TF32 mma) the tc kernels put every point in `unresolved`.
 * Both return at once when control->done is set (anneal.h).
 * The design, the error bound and the speed estimate are in
 * crates/apps/src/anneal/assign_tc.rs. */
#ifndef KILN_ANNEAL_TC_H
#define KILN_ANNEAL_TC_H
#include "kiln.h"
#include "anneal.h" /* KILN_ANNEAL_EXCLUDE_SELF, KILN_ANNEAL_COUNT */

/* Candidates kept per point before it is handed to the list kernel. */
#define KILN_ANNEAL_TC_CANDIDATES 8u
/* Points per block of anneal_assign_tc_*: grid ceil(n / 128), block
 * KILN_ANNEAL_TC_THREADS threads. */
#define KILN_ANNEAL_TC_TILE 128u
#define KILN_ANNEAL_TC_THREADS 128u
/* Block of anneal_assign_list_* (one warp per listed point, grid-stride over
 * the list: any grid). */
#define KILN_ANNEAL_LIST_THREADS 256u

KILN_KERNEL(anneal_assign_tc_f32, const float *x, const float *x_norms, uint32_t n, uint32_t d,
            const float *anchors, const float *anchor_norms, uint32_t m, uint32_t flags,
            const AnnealControl *control, uint32_t *assign, float *dist, uint32_t *counts,
            uint32_t *unresolved, uint32_t *unresolved_count);
KILN_KERNEL(anneal_assign_tc_f16, const uint16_t *x, const float *x_norms, uint32_t n, uint32_t d,
            const float *anchors, const float *anchor_norms, uint32_t m, uint32_t flags,
            const AnnealControl *control, uint32_t *assign, float *dist, uint32_t *counts,
            uint32_t *unresolved, uint32_t *unresolved_count);

KILN_KERNEL(anneal_assign_list_f32, const float *x, const float *x_norms, uint32_t d,
            const float *anchors, const float *anchor_norms, uint32_t m, uint32_t flags,
            const AnnealControl *control, const uint32_t *list, const uint32_t *list_count,
            uint32_t *assign, float *dist, uint32_t *counts);
KILN_KERNEL(anneal_assign_list_f16, const uint16_t *x, const float *x_norms, uint32_t d,
            const float *anchors, const float *anchor_norms, uint32_t m, uint32_t flags,
            const AnnealControl *control, const uint32_t *list, const uint32_t *list_count,
            uint32_t *assign, float *dist, uint32_t *counts);

#endif
