/* anneal_wgmma: anneal_tc.h's tensor-core assignment on Hopper's wgmma
 * (sm_90a only). anneal_assign_wgmma_f32/f16 take the arguments of
 * anneal_assign_tc_f32/f16 and write the same outputs with the same meaning:
 * assign, dist and counts of every point they resolve (the exact f32
 * argmin, ties to the lowest anchor index), every other point appended to
 * `unresolved` (atomicAdd on *unresolved_count, which the caller zeroes) for
 * anneal_assign_list_* to finish. The f16 copies xh and ch are
 * anneal_to_half_*'s (rows of dp halves, dp a multiple of
 * KILN_ANNEAL_TC_DP). Grid ceil(n / KILN_ANNEAL_WGMMA_TILE) blocks of
 * KILN_ANNEAL_WGMMA_THREADS threads, KILN_ANNEAL_WGMMA_SMEM bytes of dynamic
 * shared memory (past the 48 KiB default: the kernel must be allowed it
 * first). Built for anything but sm_90a, the kernels put every point in
 * `unresolved`. They return at once when control->done is set. */
#ifndef KILN_ANNEAL_WGMMA_H
#define KILN_ANNEAL_WGMMA_H
#include "kiln.h"
#include "anneal.h"
#include "anneal_tc.h"

#define KILN_ANNEAL_WGMMA_TILE 192u
#define KILN_ANNEAL_WGMMA_THREADS 512u
#define KILN_ANNEAL_WGMMA_SMEM 229376u

/* anneal_assign_wgmma_chunked_f32/f16: the same contract and launch shape,
 * for wide d. They sum the tensor-core products KILN_ANNEAL_WGMMA_CHUNK_DIMS
 * of d at a time into a fresh accumulator and add the chunks' sums in f32,
 * so their error bound, and the candidates it admits, grow with the chunk,
 * not with d (crates/anneal/src/assign_tc.rs). */
#define KILN_ANNEAL_WGMMA_CHUNK_DIMS 256u

KILN_KERNEL(anneal_assign_wgmma_f32, const float *x, const uint16_t *xh, const float *x_norms,
            const float *x_norms_c, uint32_t n, uint32_t d, uint32_t dp, const float *anchors,
            const uint16_t *ch, const float *anchor_norms, const float *anchor_norms_c,
            uint32_t m, uint32_t flags, const uint32_t *half_state,
            const AnnealControl *control, uint32_t *assign, float *dist, uint32_t *counts,
            uint32_t *unresolved, uint32_t *unresolved_count);
KILN_KERNEL(anneal_assign_wgmma_f16, const uint16_t *x, const uint16_t *xh, const float *x_norms,
            const float *x_norms_c, uint32_t n, uint32_t d, uint32_t dp, const float *anchors,
            const uint16_t *ch, const float *anchor_norms, const float *anchor_norms_c,
            uint32_t m, uint32_t flags, const uint32_t *half_state,
            const AnnealControl *control, uint32_t *assign, float *dist, uint32_t *counts,
            uint32_t *unresolved, uint32_t *unresolved_count);
KILN_KERNEL(anneal_assign_wgmma_chunked_f32, const float *x, const uint16_t *xh, const float *x_norms,
            const float *x_norms_c, uint32_t n, uint32_t d, uint32_t dp, const float *anchors,
            const uint16_t *ch, const float *anchor_norms, const float *anchor_norms_c,
            uint32_t m, uint32_t flags, const uint32_t *half_state,
            const AnnealControl *control, uint32_t *assign, float *dist, uint32_t *counts,
            uint32_t *unresolved, uint32_t *unresolved_count);
KILN_KERNEL(anneal_assign_wgmma_chunked_f16, const uint16_t *x, const uint16_t *xh, const float *x_norms,
            const float *x_norms_c, uint32_t n, uint32_t d, uint32_t dp, const float *anchors,
            const uint16_t *ch, const float *anchor_norms, const float *anchor_norms_c,
            uint32_t m, uint32_t flags, const uint32_t *half_state,
            const AnnealControl *control, uint32_t *assign, float *dist, uint32_t *counts,
            uint32_t *unresolved, uint32_t *unresolved_count);

#endif
