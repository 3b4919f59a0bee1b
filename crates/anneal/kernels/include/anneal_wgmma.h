/* anneal_wgmma: anneal_tc.h's tensor-core assignment on Hopper's wgmma
 * (sm_90a only), in two kernels. anneal_assign_wgmma bounds every point
 * against every anchor from the f16 copies (anneal_to_half_*'s: xh and ch,
 * rows of dp halves, dp a multiple of KILN_ANNEAL_TC_DP) and writes, per
 * point p < n, its candidate list at lists + p * KILN_ANNEAL_WGMMA_LIST_WORDS:
 * word 0 the count (KILN_ANNEAL_TC_CANDIDATES + 1 once it overflowed, or
 * when an anchor left the f16 range), word 1 the final upper bound's f32
 * bits, then KILN_ANNEAL_TC_CANDIDATES anchor indices and as many lower
 * bounds' f32 bits, of which the first `count` are written. Grid
 * ceil(n / KILN_ANNEAL_WGMMA_TILE) blocks of KILN_ANNEAL_WGMMA_THREADS
 * threads, KILN_ANNEAL_WGMMA_SMEM bytes of dynamic shared memory (past the
 * 48 KiB default: the kernel must be allowed it first). Built for anything
 * but sm_90a, it marks every list overflowed.
 * anneal_refine_lists_f32/f16 then give each listed point, one warp each,
 * anneal_assign_tc's outputs with their meaning: assign, dist and counts of
 * every point it resolves (the exact f32 argmin over the candidates, ties
 * to the lowest anchor index), every other point appended to `unresolved`
 * (atomicAdd on *unresolved_count, which the caller zeroes) for
 * anneal_assign_list_* to finish. Grid ceil(n / 8) blocks of
 * KILN_ANNEAL_REFINE_THREADS threads.
 * Both return at once when control->done is set. */
#ifndef KILN_ANNEAL_WGMMA_H
#define KILN_ANNEAL_WGMMA_H
#include "kiln.h"
#include "anneal.h"
#include "anneal_tc.h"

#define KILN_ANNEAL_WGMMA_TILE 192u
#define KILN_ANNEAL_WGMMA_THREADS 512u
#define KILN_ANNEAL_WGMMA_SMEM 229376u

/* anneal_assign_wgmma_chunked: the same contract and launch shape,
 * for wide d. It sums the tensor-core products KILN_ANNEAL_WGMMA_CHUNK_DIMS
 * of d at a time into a fresh accumulator and adds the chunks' sums in f32,
 * so its error bound, and the candidates it admits, grow with the chunk,
 * not with d (crates/anneal/src/assign_tc.rs). */
#define KILN_ANNEAL_WGMMA_CHUNK_DIMS 256u

/* Words of one point's candidate list (2 + 2 KILN_ANNEAL_TC_CANDIDATES). */
#define KILN_ANNEAL_WGMMA_LIST_WORDS 18u
/* Threads of anneal_refine_lists_*'s blocks: a warp per point. */
#define KILN_ANNEAL_REFINE_THREADS 256u

KILN_KERNEL(anneal_assign_wgmma, const uint16_t *xh, const float *x_norms, const float *x_norms_c,
            uint32_t n, uint32_t d, uint32_t dp, const uint16_t *ch, const float *anchor_norms_c,
            uint32_t m, uint32_t flags, const uint32_t *half_state,
            const AnnealControl *control, uint32_t *lists);
KILN_KERNEL(anneal_assign_wgmma_chunked, const uint16_t *xh, const float *x_norms,
            const float *x_norms_c, uint32_t n, uint32_t d, uint32_t dp, const uint16_t *ch,
            const float *anchor_norms_c, uint32_t m, uint32_t flags,
            const uint32_t *half_state, const AnnealControl *control, uint32_t *lists);
KILN_KERNEL(anneal_refine_lists_f32, const float *x, const float *x_norms, uint32_t n, uint32_t d,
            const float *anchors, const float *anchor_norms, uint32_t flags,
            const AnnealControl *control, const uint32_t *lists, uint32_t *assign, float *dist,
            uint32_t *counts, uint32_t *unresolved, uint32_t *unresolved_count);
KILN_KERNEL(anneal_refine_lists_f16, const uint16_t *x, const float *x_norms, uint32_t n,
            uint32_t d, const float *anchors, const float *anchor_norms, uint32_t flags,
            const AnnealControl *control, const uint32_t *lists, uint32_t *assign, float *dist,
            uint32_t *counts, uint32_t *unresolved, uint32_t *unresolved_count);

#endif
