/* anneal: the GPU half of the anchor compression (crates/apps/src/anneal).
 * Points are row-major n x d, f32 or f16 (raw bits); anchors row-major
 * m x d f32. With the points sharded over several GPUs, each GPU runs the
 * same kernels on its shard. One iteration is:
 *   anneal_assign (fused distance + argmin, counts per anchor)
 *   -> anneal_scan (offsets of each anchor's members, each piece's anchor;
 *      zeroes the counts)
 *   -> kiln_sort_pairs_u32 (reduce.h, CUB) of (assign, anneal_iota's 0..n):
 *      the member lists, each in point order, so every sum below adds in
 *      the same order on every run (small problems: anneal_members, the
 *      same lists without the sort's launches)
 *   -> anneal_reduce (per piece of at most KILN_ANNEAL_PIECE members of one
 *      anchor: the sum of their points and of their distances, in f64)
 *   -> anneal_combine (per anchor: member count, its pieces added in order:
 *      the partial statistics of this shard, in f64)
 *   -> [several GPUs: NCCL all-reduces of the partials]
 *   -> anneal_update (anchor_j += eta * (mean_j - anchor_j), new norms)
 *   -> anneal_finish (energy from the per-anchor distance sums, history, the
 *      convergence test on the device)
 *   (one GPU, d <= 128: combine, update and finish in one launch,
 *   anneal_combine_update).
 * Pieces keep the work even when one anchor holds most points; f64 sums in
 * a fixed order make the statistics the same on every run and within f32
 * rounding of the CPU engine's (which sums in f64 too).
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

/* Members per piece of anneal_reduce. */
#define KILN_ANNEAL_PIECE 256u

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

/* offsets[j] = sum of counts[0..j) and pieces[j] = sum of
 * ceil(counts[i] / KILN_ANNEAL_PIECE) over i < j, for j <= m; owners[b] = j
 * for each piece pieces[j] <= b < pieces[j + 1] of anchor j < m (room for
 * ceil(n / KILN_ANNEAL_PIECE) + m); counts[j] = 0. One block of 1024
 * threads. */
KILN_KERNEL(anneal_scan, const AnnealControl *control, uint32_t *counts, uint32_t m,
            uint32_t *offsets, uint32_t *pieces, uint32_t *owners);

/* out[i] = i for i < n (the values the sort carries). */
KILN_KERNEL(anneal_iota, uint32_t n, uint32_t *out);

/* order[offsets[j] ..offsets[j + 1]) = the points i < n with assign[i] == j,
 * in point order, for j < m: what the sort of (assign, 0..n) leaves there.
 * One block of KILN_ANNEAL_MEMBERS_THREADS threads per anchor (grid.x >= m,
 * the blocks past m return), each reading every assignment: n x m reads,
 * for problems small enough that the sort's launches cost more
 * (crates/anneal/src/gpu/shard.rs). Returns at once once `done` is set. */
#define KILN_ANNEAL_MEMBERS_THREADS 256u
KILN_KERNEL(anneal_members, const uint32_t *assign, uint32_t n, const uint32_t *offsets,
            uint32_t m, const AnnealControl *control, uint32_t *order);

/* Piece b < pieces[m] is members order[offsets[j] + q * KILN_ANNEAL_PIECE ..]
 * (at most KILN_ANNEAL_PIECE of them, within anchor j's) with j = owners[b],
 * the anchor whose pieces[j] <= b < pieces[j + 1], and q = b - pieces[j]:
 * piece_sums[b*d .. b*d+d) = the sum of their points, piece_dist[b] = the
 * sum of their distances, both in f64, members in order. Block: 128 threads;
 * grid.x: at least pieces[m] (ceil(n / KILN_ANNEAL_PIECE) + m always is), the
 * blocks past it return; grid.y: any, block (b, y) summing the columns y *
 * 128 + i (i < 128), then every gridDim.y * 128 on (ceil(d / 128) keeps
 * enough loads in flight where the pieces are few and d is wide). */
KILN_KERNEL(anneal_reduce_f32, const float *x, const uint32_t *order, const uint32_t *offsets,
            const uint32_t *pieces, const uint32_t *owners, const float *dist, uint32_t m, uint32_t d,
            const AnnealControl *control, double *piece_sums, double *piece_dist);
KILN_KERNEL(anneal_reduce_f16, const uint16_t *x, const uint32_t *order, const uint32_t *offsets,
            const uint32_t *pieces, const uint32_t *owners, const float *dist, uint32_t m, uint32_t d,
            const AnnealControl *control, double *piece_sums, double *piece_dist);

/* The partial statistics of a shard, which all-reduces combine: one block
 * per anchor j < m: members[j] = its member count; partial[j*d .. j*d+d) =
 * the sum of its members' points and sumsq[j] = of their distances, its
 * pieces added in order (f64). Block: 128 threads; grid.y: any, the columns
 * split as anneal_reduce's. */
KILN_KERNEL(anneal_combine, const uint32_t *offsets, const uint32_t *pieces,
            const double *piece_sums, const double *piece_dist, uint32_t m, uint32_t d,
            const AnnealControl *control, uint32_t *members, double *partial, double *sumsq);

/* One block per anchor j < m: if members[j] > 0, mean = (float)(partial[j*d
 * + k] / members[j]) in f64, then anchor_j += eta * (mean - anchor_j) in f32
 * steps (no fused multiply-add, as the CPU engine); anchor_norms[j] =
 * |anchor_j|^2. Block: 128 threads. */
KILN_KERNEL(anneal_update, const double *partial, const uint32_t *members, uint32_t m, uint32_t d,
            float eta, const AnnealControl *control, float *anchors, float *anchor_norms);

/* One block of 256 threads: E = (sum of sumsq[0..m), fixed order) / n;
 * history[slot] = E; done = has_previous and (previous > 0 and |previous -
 * E| / previous < tol, or previous == 0 == E); previous = E; has_previous =
 * 1; iterations += 1. Nothing once done is set. */
KILN_KERNEL(anneal_finish, const double *sumsq, uint32_t m, uint64_t n, double tol, uint32_t slot,
            AnnealControl *control, double *history);

/* anneal_combine, anneal_update and anneal_finish in one launch, for a
 * shard alone (no sum over shards between the first two) and d <= 128:
 * block j < m does combine's and update's work on anchor j (the same
 * outputs, members, partial and sumsq included), and the last block to be
 * done (*arrived counts them; it zeroes it again, so *arrived is 0 before
 * and after every launch) runs finish on every block's sumsq. The same bits
 * as the three. Grid: m >= 1 blocks of 128 threads. */
KILN_KERNEL(anneal_combine_update, const uint32_t *offsets, const uint32_t *pieces,
            const double *piece_sums, const double *piece_dist, uint32_t m, uint32_t d,
            float eta, uint64_t n, double tol, uint32_t slot, AnnealControl *control,
            uint32_t *members, double *partial, double *sumsq, float *anchors,
            float *anchor_norms, double *history, uint32_t *arrived);

/* One row of the anchors after a maintenance pass (crates/anneal's
 * maintenance::Plan), from the anchors before it (`old`, rows of d): */
typedef struct AnnealRowOp {
    uint32_t kind;  /* KILN_ANNEAL_ROW_* */
    uint32_t src;   /* the old row it starts from */
    uint32_t other; /* MERGE: the old row merged into it */
    uint32_t dir;   /* SPLIT_*: its row of directions */
    double a;       /* MERGE: src's weight; SPLIT_*: the direction's scale */
    double b;       /* MERGE: other's weight */
} AnnealRowOp;
KILN_STATIC_ASSERT(sizeof(AnnealRowOp) == 32, "AnnealRowOp is 32 bytes");
KILN_STATIC_ASSERT(offsetof(AnnealRowOp, a) == 16, "AnnealRowOp.a at 16");
#define KILN_ANNEAL_ROW_COPY 0u        /* old[src] */
#define KILN_ANNEAL_ROW_MERGE 1u       /* (old[src] * a + old[other] * b) / (a + b) */
#define KILN_ANNEAL_ROW_SPLIT_PLUS 2u  /* old[src] + dir_k * a, k the row's dir */
#define KILN_ANNEAL_ROW_SPLIT_MINUS 3u /* old[src] - dir_k * a */

/* One block per new row r < rows: new_anchors[r] = ops[r] applied to
 * old_anchors, each value in f64 from the f32 inputs (and the f32
 * directions, rows of d) with correctly rounded steps in the order the
 * comments above write them (no fused multiply-add: the host's bits), then
 * rounded to f32. old_anchors and new_anchors must not overlap. Block: 128
 * threads. */
KILN_KERNEL(anneal_apply_rows, const float *old_anchors, uint32_t d, const AnnealRowOp *ops,
            uint32_t rows, const float *directions, float *new_anchors);

/* anchors[j] = x[rows[j]] (f32, widened from f16), j < m: the initial
 * anchors, gathered from the points on the device. One block per anchor,
 * 128 threads. */
KILN_KERNEL(anneal_gather_f32, const float *x, uint32_t n, uint32_t d, const uint32_t *rows,
            uint32_t m, float *anchors);
KILN_KERNEL(anneal_gather_f16, const uint16_t *x, uint32_t n, uint32_t d, const uint32_t *rows,
            uint32_t m, float *anchors);

/* out[i] = the bf16 bits in[i] widened to f32, i < n: a shift, exact for
 * every value (NaN payloads and signed zeros included). bf16 points are
 * uploaded as they are and widened on the device. Grid-stride. */
KILN_KERNEL(anneal_widen_bf16, const uint16_t *in, float *out, uint32_t n);

/* Every kernel taking a control returns at once when control->done is set,
 * so the outputs stay those of the last iteration run. */

#endif
