// anneal: assignment, per-anchor reduction and anchor update of the anchor
// compression (see anneal.h for the iteration, crates/apps/src/anneal for the
// algorithm). Every kernel has an f32 and an f16 (raw bits) point variant.
#include <cuda_fp16.h>

#include "anneal.h"
#include "anneal_device.cuh"

namespace {

__device__ __forceinline__ float load(const float *p, size_t i) { return p[i]; }
__device__ __forceinline__ float load(const uint16_t *p, size_t i) {
    return __half2float(__ushort_as_half(p[i]));
}

constexpr uint32_t kFullMask = 0xffffffffu;

// ---------------------------------------------------------------------------
// Norms: one warp per row.

template <typename T>
__device__ void norms(const T *__restrict__ x, uint32_t n, uint32_t d, float *__restrict__ out) {
    const uint32_t row = (blockIdx.x * blockDim.x + threadIdx.x) / 32;
    const uint32_t lane = threadIdx.x % 32;
    if (row >= n) return;  // whole warps leave together: row is per warp
    const size_t base = static_cast<size_t>(row) * d;
    float s = 0.f;
    for (uint32_t k = lane; k < d; k += 32) {
        const float v = load(x, base + k);
        s = fmaf(v, v, s);
    }
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(kFullMask, s, o);
    if (lane == 0) out[row] = s;
}

// ---------------------------------------------------------------------------
// Assign: a 128-point x 128-anchor tile per block of 256 threads, each thread
// an 8 x 8 register tile of dot products, d consumed 8 at a time through
// shared memory. Thread (ty, tx) owns points {ty*4 .. +3, 64 + ty*4 .. +3}
// and anchors {tx*4 .. +3, 64 + tx*4 .. +3} of the tile, so its shared reads
// are float4s that do not conflict.

constexpr int kTile = 128;
constexpr int kTk = 8;
constexpr int kAssignThreads = 256;
constexpr int kPad = 4;  // row stride 132 floats: stores conflict-free, float4-aligned

__device__ __forceinline__ uint32_t tile_row(int owner, int i) {
    return i < 4 ? owner * 4 + i : 64 + owner * 4 + (i - 4);
}

template <typename T>
__device__ void assign(const T *__restrict__ x, const float *__restrict__ x_norms, uint32_t n,
                       uint32_t d, const float *__restrict__ anchors,
                       const float *__restrict__ anchor_norms, uint32_t m, uint32_t flags,
                       const AnnealControl *__restrict__ control,
                       uint32_t *__restrict__ assign_out, float *__restrict__ dist_out,
                       uint32_t *__restrict__ counts) {
    if (control->done) return;  // whole grid leaves
    __shared__ __align__(16) float xs[kTk][kTile + kPad];
    __shared__ __align__(16) float cs[kTk][kTile + kPad];
    const int tid = threadIdx.x;
    const int tx = tid % 16;
    const int ty = tid / 16;
    const uint32_t p0 = blockIdx.x * kTile;
    const bool exclude_self = (flags & KILN_ANNEAL_EXCLUDE_SELF) != 0;

    float point_norm[8];
    float best_d[8];
    uint32_t best_j[8];
#pragma unroll
    for (int i = 0; i < 8; ++i) {
        const uint32_t p = p0 + tile_row(ty, i);
        point_norm[i] = p < n ? x_norms[p] : 0.f;
        best_d[i] = __int_as_float(0x7f800000);  // +inf
        best_j[i] = 0xffffffffu;
    }

    for (uint32_t a0 = 0; a0 < m; a0 += kTile) {
        float acc[8][8];
#pragma unroll
        for (int i = 0; i < 8; ++i)
#pragma unroll
            for (int j = 0; j < 8; ++j) acc[i][j] = 0.f;

        for (uint32_t k0 = 0; k0 < d; k0 += kTk) {
#pragma unroll
            for (int r = 0; r < (kTk * kTile) / kAssignThreads; ++r) {
                const int e = tid + r * kAssignThreads;
                const int kk = e % kTk;
                const int row = e / kTk;
                const uint32_t k = k0 + kk;
                const uint32_t p = p0 + row;
                const uint32_t a = a0 + row;
                xs[kk][row] = (p < n && k < d) ? load(x, static_cast<size_t>(p) * d + k) : 0.f;
                cs[kk][row] = (a < m && k < d) ? anchors[static_cast<size_t>(a) * d + k] : 0.f;
            }
            __syncthreads();
#pragma unroll
            for (int kk = 0; kk < kTk; ++kk) {
                const float4 xa = *reinterpret_cast<const float4 *>(&xs[kk][ty * 4]);
                const float4 xb = *reinterpret_cast<const float4 *>(&xs[kk][64 + ty * 4]);
                const float4 ca = *reinterpret_cast<const float4 *>(&cs[kk][tx * 4]);
                const float4 cb = *reinterpret_cast<const float4 *>(&cs[kk][64 + tx * 4]);
                const float xv[8] = {xa.x, xa.y, xa.z, xa.w, xb.x, xb.y, xb.z, xb.w};
                const float cv[8] = {ca.x, ca.y, ca.z, ca.w, cb.x, cb.y, cb.z, cb.w};
#pragma unroll
                for (int i = 0; i < 8; ++i)
#pragma unroll
                    for (int j = 0; j < 8; ++j) acc[i][j] = fmaf(xv[i], cv[j], acc[i][j]);
            }
            __syncthreads();
        }

        // Anchors in increasing index order per thread, so a strict `<`
        // keeps the lowest index among equal distances.
#pragma unroll
        for (int j = 0; j < 8; ++j) {
            const uint32_t a = a0 + tile_row(tx, j);
            if (a >= m) continue;
            const float anchor_norm = anchor_norms[a];
#pragma unroll
            for (int i = 0; i < 8; ++i) {
                const uint32_t p = p0 + tile_row(ty, i);
                if (exclude_self && a == p) continue;
                const float dd = fmaxf(point_norm[i] + anchor_norm - 2.f * acc[i][j], 0.f);
                if (dd < best_d[i]) {
                    best_d[i] = dd;
                    best_j[i] = a;
                }
            }
        }
    }

    // The 16 threads of one ty are 16 consecutive lanes of a warp: reduce
    // (distance, index) pairs among them, lowest index on ties.
#pragma unroll
    for (int i = 0; i < 8; ++i) {
        float bd = best_d[i];
        uint32_t bj = best_j[i];
        for (int o = 8; o > 0; o >>= 1) {
            const float od = __shfl_xor_sync(kFullMask, bd, o);
            const uint32_t oj = __shfl_xor_sync(kFullMask, bj, o);
            if (od < bd || (od == bd && oj < bj)) {
                bd = od;
                bj = oj;
            }
        }
        const uint32_t p = p0 + tile_row(ty, i);
        if (tx == 0 && p < n) {
            assign_out[p] = bj;
            dist_out[p] = bd;
            if ((flags & KILN_ANNEAL_COUNT) != 0 && bj < m) atomicAdd(&counts[bj], 1u);
        }
    }
}

// ---------------------------------------------------------------------------
// Reduce, update: blocks of 128 threads. Every sum adds in one fixed order.

constexpr int kReduceThreads = 128;
constexpr int kFinishThreads = 256;
constexpr uint32_t kPiece = KILN_ANNEAL_PIECE;
constexpr uint32_t kReduceBatch = 32;  // member loads in flight per thread

// The inclusive sum of `value` over lanes 0..lane of the warp.
template <typename V>
__device__ V warp_inclusive_sum(V value, uint32_t lane) {
    for (int o = 1; o < 32; o <<= 1) {
        const V t = __shfl_up_sync(kFullMask, value, o);
        if (lane >= static_cast<uint32_t>(o)) value += t;
    }
    return value;
}

template <typename V>
__device__ V block_sum(V value, V *scratch) {
    for (int o = 16; o > 0; o >>= 1) value += __shfl_xor_sync(kFullMask, value, o);
    if (threadIdx.x % 32 == 0) scratch[threadIdx.x / 32] = value;
    __syncthreads();
    V total = 0;
    if (threadIdx.x == 0) {
        for (int w = 0; w < static_cast<int>(blockDim.x / 32); ++w) total += scratch[w];
        scratch[0] = total;
    }
    __syncthreads();
    total = scratch[0];
    __syncthreads();
    return total;
}

template <typename T>
__device__ void reduce_pieces(const T *__restrict__ x, const uint32_t *__restrict__ order,
                              const uint32_t *__restrict__ offsets,
                              const uint32_t *__restrict__ pieces,
                              const uint32_t *__restrict__ owners, const float *__restrict__ dist,
                              uint32_t m, uint32_t d, const AnnealControl *__restrict__ control,
                              double *__restrict__ piece_sums, double *__restrict__ piece_dist) {
    __shared__ double scratch[kReduceThreads / 32];
    __shared__ uint32_t rows[kPiece];  // the piece's members, in order
    const uint32_t b = blockIdx.x;
    if (m == 0 || control->done || b >= pieces[m]) return;  // whole block leaves
    // The scan's table, where a search of pieces took 8 dependent loads at
    // m = 256 on the critical path of small problems.
    const uint32_t j = owners[b];
    const uint32_t begin = offsets[j] + (b - pieces[j]) * kPiece;
    const uint32_t count = min(begin + kPiece, offsets[j + 1]) - begin;
    // The member indices once, coalesced: the column loop below then has
    // one dependent load a member, not two (small problems are latency
    // bound here: H200, 10K x 128 x 256, 21 us a launch).
    for (uint32_t i = threadIdx.x; i < count; i += kReduceThreads) rows[i] = order[begin + i];
    __syncthreads();
    if (blockIdx.y == 0) {  // uniform over the block: block_sum's barriers
        double s = 0.0;
        for (uint32_t i = threadIdx.x; i < count; i += kReduceThreads)
            s += static_cast<double>(dist[rows[i]]);
        const double member_dist = block_sum(s, scratch);
        if (threadIdx.x == 0) piece_dist[b] = member_dist;
    }
    // Columns split over grid.y as well: with few pieces (few points, or
    // few anchors) and wide d, one block per piece walking all of d kept too
    // few loads in flight (H200, 50K x 2048 x 256: 545 us a launch for 410
    // MB of points, against 85 at the memory's speed).
    // The loads go out kReduceBatch at a time, unpredicated (so that all
    // are in flight before the first add waits; past count they read the
    // last member again), the next batch's before this batch's adds wait,
    // and the sum adds the members' in member order as before. (`#pragma
    // unroll 8` left count % 8 members to a loop of one load each, a round
    // trip to memory apiece: at 10K x 128 x 256, 39 members an anchor, 4
    // rounds of 8 and 7 of 1.)
    const uint32_t stride = gridDim.y * kReduceThreads;
    for (uint32_t k = blockIdx.y * kReduceThreads + threadIdx.x; k < d; k += stride) {
        auto batch = [&](uint32_t i0, float (&v)[kReduceBatch]) {
#pragma unroll
            for (uint32_t u = 0; u < kReduceBatch; ++u)
                v[u] = load(x, static_cast<size_t>(rows[min(i0 + u, count - 1)]) * d + k);
        };
        double acc = 0.0;
        float v[kReduceBatch];
        if (count > 0) batch(0, v);
        for (uint32_t i0 = 0; i0 < count; i0 += kReduceBatch) {
            float next[kReduceBatch];
            if (i0 + kReduceBatch < count) batch(i0 + kReduceBatch, next);
#pragma unroll
            for (uint32_t u = 0; u < kReduceBatch; ++u)
                if (i0 + u < count) acc += static_cast<double>(v[u]);
#pragma unroll
            for (uint32_t u = 0; u < kReduceBatch; ++u) v[u] = next[u];
        }
        piece_sums[static_cast<size_t>(b) * d + k] = acc;
    }
}

}  // namespace

KILN_KERNEL(anneal_norms_f32, const float *x, uint32_t n, uint32_t d, float *norms_out) {
    norms(x, n, d, norms_out);
}

KILN_KERNEL(anneal_norms_f16, const uint16_t *x, uint32_t n, uint32_t d, float *norms_out) {
    norms(x, n, d, norms_out);
}

extern "C" __global__ void __launch_bounds__(kAssignThreads)
    anneal_assign_f32(const float *x, const float *x_norms, uint32_t n, uint32_t d,
                      const float *anchors, const float *anchor_norms, uint32_t m, uint32_t flags,
                      const AnnealControl *control, uint32_t *assign_out, float *dist,
                      uint32_t *counts) {
    assign(x, x_norms, n, d, anchors, anchor_norms, m, flags, control, assign_out, dist, counts);
}

extern "C" __global__ void __launch_bounds__(kAssignThreads)
    anneal_assign_f16(const uint16_t *x, const float *x_norms, uint32_t n, uint32_t d,
                      const float *anchors, const float *anchor_norms, uint32_t m, uint32_t flags,
                      const AnnealControl *control, uint32_t *assign_out, float *dist,
                      uint32_t *counts) {
    assign(x, x_norms, n, d, anchors, anchor_norms, m, flags, control, assign_out, dist, counts);
}

KILN_KERNEL(anneal_scan, const AnnealControl *control, uint32_t *counts, uint32_t m,
            uint32_t *offsets, uint32_t *pieces, uint32_t *owners) {
    if (control->done) return;
    // One 64-bit scan of (pieces << 32 | count): both totals fit 32 bits
    // (counts add to n, pieces to at most n / kPiece + m), so the low half
    // never carries into the high one.
    __shared__ uint64_t warp_sums[32];
    __shared__ uint64_t carry;
    const uint32_t lane = threadIdx.x % 32;
    const uint32_t warp = threadIdx.x / 32;
    if (threadIdx.x == 0) carry = 0;
    __syncthreads();
    for (uint32_t base = 0; base < m; base += blockDim.x) {
        const uint32_t i = base + threadIdx.x;
        const uint32_t c = i < m ? counts[i] : 0u;
        const uint64_t v = (static_cast<uint64_t>((c + kPiece - 1) / kPiece) << 32) | c;
        const uint64_t s = warp_inclusive_sum(v, lane);
        if (lane == 31) warp_sums[warp] = s;
        __syncthreads();
        if (warp == 0) {
            const uint32_t warps = blockDim.x / 32;
            const uint64_t w =
                warp_inclusive_sum<uint64_t>(lane < warps ? warp_sums[lane] : 0u, lane);
            if (lane < warps) warp_sums[lane] = w;
        }
        __syncthreads();
        const uint64_t exclusive = carry + (warp > 0 ? warp_sums[warp - 1] : 0u) + s - v;
        if (i < m) {
            offsets[i] = static_cast<uint32_t>(exclusive);
            const uint32_t first = static_cast<uint32_t>(exclusive >> 32);
            pieces[i] = first;
            for (uint32_t b = first; b < first + static_cast<uint32_t>(v >> 32); ++b) owners[b] = i;
            counts[i] = 0;
        }
        __syncthreads();
        if (threadIdx.x == blockDim.x - 1) carry = exclusive + v;
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        offsets[m] = static_cast<uint32_t>(carry);
        pieces[m] = static_cast<uint32_t>(carry >> 32);
    }
}

KILN_KERNEL(anneal_members, const uint32_t *assign, uint32_t n, const uint32_t *offsets,
            uint32_t m, const AnnealControl *control, uint32_t *order) {
    constexpr uint32_t kThreads = KILN_ANNEAL_MEMBERS_THREADS;
    // Consecutive points a thread: four 16-byte loads in flight (at 10K
    // points, 3 round trips a block instead of 10 with one load).
    constexpr uint32_t kPer = 16;
    static_assert(kPer % 4 == 0 && kPer <= 32, "whole 16-byte loads, one mask word");
    __shared__ uint32_t warp_counts[kThreads / 32];
    const uint32_t j = blockIdx.x;
    if (j >= m || control->done) return;  // whole block leaves
    const uint32_t lane = threadIdx.x % 32;
    const uint32_t warp = threadIdx.x / 32;
    uint32_t at_block = offsets[j];
    const uint32_t end = offsets[j + 1];
    // Uniform over the block (at_block moves by the block's total): the
    // loop ends for every thread at once, after the last member.
    for (uint32_t start = 0; start < n && at_block < end; start += kThreads * kPer) {
        const uint32_t first = start + threadIdx.x * kPer;
        uint32_t mine = 0;  // bit k: point first + k is j's
        if (first + kPer <= n) {
            uint4 a[kPer / 4];
#pragma unroll
            for (uint32_t q = 0; q < kPer / 4; ++q)
                a[q] = *reinterpret_cast<const uint4 *>(assign + first + 4 * q);
#pragma unroll
            for (uint32_t q = 0; q < kPer / 4; ++q)
                mine |= ((a[q].x == j ? 1u : 0u) | (a[q].y == j ? 2u : 0u) |
                         (a[q].z == j ? 4u : 0u) | (a[q].w == j ? 8u : 0u))
                        << (4 * q);
        } else {
            for (uint32_t k = 0; k < kPer && first + k < n; ++k)
                if (assign[first + k] == j) mine |= 1u << k;
        }
        const uint32_t count = __popc(mine);
        const uint32_t inclusive = warp_inclusive_sum(count, lane);
        if (lane == 31) warp_counts[warp] = inclusive;
        __syncthreads();
        uint32_t before = 0, total = 0;
        for (uint32_t w = 0; w < kThreads / 32; ++w) {
            const uint32_t v = warp_counts[w];
            before += w < warp ? v : 0u;
            total += v;
        }
        uint32_t at = at_block + before + inclusive - count;
        for (uint32_t k = 0; k < kPer; ++k)
            if ((mine >> k) & 1u) order[at++] = first + k;
        at_block += total;
        __syncthreads();  // warp_counts is written again
    }
}

KILN_KERNEL(anneal_iota, uint32_t n, uint32_t *out) {
    const uint32_t stride = gridDim.x * blockDim.x;
    for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) out[i] = i;
}

extern "C" __global__ void __launch_bounds__(kReduceThreads)
    anneal_reduce_f32(const float *x, const uint32_t *order, const uint32_t *offsets,
                      const uint32_t *pieces, const uint32_t *owners, const float *dist,
                      uint32_t m, uint32_t d, const AnnealControl *control, double *piece_sums,
                      double *piece_dist) {
    reduce_pieces(x, order, offsets, pieces, owners, dist, m, d, control, piece_sums, piece_dist);
}

extern "C" __global__ void __launch_bounds__(kReduceThreads)
    anneal_reduce_f16(const uint16_t *x, const uint32_t *order, const uint32_t *offsets,
                      const uint32_t *pieces, const uint32_t *owners, const float *dist,
                      uint32_t m, uint32_t d, const AnnealControl *control, double *piece_sums,
                      double *piece_dist) {
    reduce_pieces(x, order, offsets, pieces, owners, dist, m, d, control, piece_sums, piece_dist);
}

// Anchor j's member count and distance sum, its pieces first..last added in
// order (by one thread).
__device__ void combine_counts(uint32_t j, uint32_t first, uint32_t last,
                               const uint32_t *__restrict__ offsets,
                               const double *__restrict__ piece_dist, uint32_t *__restrict__ members,
                               double *__restrict__ sumsq) {
    members[j] = offsets[j + 1] - offsets[j];
    double s = 0.0;
    for (uint32_t b = first; b < last; ++b) s += piece_dist[b];
    sumsq[j] = s;
}

// Column k of the anchor's member sum: its pieces first..last added in order.
__device__ double combine_column(uint32_t first, uint32_t last,
                                 const double *__restrict__ piece_sums, uint32_t d, uint32_t k) {
    double acc = 0.0;
    for (uint32_t b = first; b < last; ++b) acc += piece_sums[static_cast<size_t>(b) * d + k];
    return acc;
}

// The anchor value c moved by eta towards its members' mean (sum / count,
// count > 0: inv_count = 1 / count), as the CPU engine rounds: the mean in
// f64, then f32 steps.
__device__ float moved(float c, double sum, double inv_count, float eta) {
    const float mean = static_cast<float>(sum * inv_count);
    return __fadd_rn(c, __fmul_rn(eta, __fsub_rn(mean, c)));
}

// The sum of sumsq[0..m) in anneal_finish's order, in thread 0: kFinishThreads
// virtual threads v, each adding j = v, v + kFinishThreads, ... in turn; each
// virtual warp's butterfly; the warps' sums in warp order. A block of
// kFinishThreads threads, or of any multiple of 32 that divides it, computes
// the same bits (scratch: kFinishThreads / 32). Every thread calls it.
__device__ double finish_total(const double *sumsq, uint32_t m, double *scratch) {
    for (uint32_t v0 = 0; v0 < kFinishThreads; v0 += blockDim.x) {
        const uint32_t v = v0 + threadIdx.x;
        double s = 0.0;
        for (uint32_t j = v; j < m; j += kFinishThreads) s += __ldcg(&sumsq[j]);
        for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(kFullMask, s, o);
        if (v % 32 == 0) scratch[v / 32] = s;
    }
    __syncthreads();
    double total = 0.0;
    if (threadIdx.x == 0)
        for (uint32_t w = 0; w < kFinishThreads / 32; ++w) total += scratch[w];
    return total;
}

// anneal_finish's energy, test and count, by one thread, from the total.
__device__ void finish_control(double total, uint64_t n, double tol, uint32_t slot,
                               AnnealControl *control, double *history) {
    const double energy = total / static_cast<double>(n);
    history[slot] = energy;
    const double previous = control->previous;
    // The driver's test (crates/apps/src/anneal), operation for operation.
    const bool converged =
        control->has_previous != 0 &&
        ((previous > 0.0 && fabs(previous - energy) / previous < tol) ||
         (previous == 0.0 && energy == 0.0));
    control->done = converged ? 1u : 0u;
    control->previous = energy;
    control->has_previous = 1u;
    control->iterations += 1u;
}

extern "C" __global__ void __launch_bounds__(kReduceThreads)
    anneal_combine(const uint32_t *offsets, const uint32_t *pieces, const double *piece_sums,
                   const double *piece_dist, uint32_t m, uint32_t d, const AnnealControl *control,
                   uint32_t *members, double *partial, double *sumsq) {
    const uint32_t j = blockIdx.x;
    if (j >= m || control->done) return;  // whole block leaves
    const uint32_t first = pieces[j];
    const uint32_t last = pieces[j + 1];
    if (threadIdx.x == 0 && blockIdx.y == 0)
        combine_counts(j, first, last, offsets, piece_dist, members, sumsq);
    // Columns split over grid.y, as anneal_reduce's.
    const uint32_t stride = gridDim.y * kReduceThreads;
    for (uint32_t k = blockIdx.y * kReduceThreads + threadIdx.x; k < d; k += stride)
        partial[static_cast<size_t>(j) * d + k] = combine_column(first, last, piece_sums, d, k);
}

extern "C" __global__ void __launch_bounds__(kReduceThreads)
    anneal_update(const double *partial, const uint32_t *members, uint32_t m, uint32_t d,
                  float eta, const AnnealControl *control, float *anchors, float *anchor_norms) {
    __shared__ float scratch[kReduceThreads / 32];
    const uint32_t j = blockIdx.x;
    if (j >= m || control->done) return;  // whole block leaves
    const uint32_t count = members[j];
    const double inv_count = count > 0 ? 1.0 / static_cast<double>(count) : 0.0;
    float norm = 0.f;
    for (uint32_t k = threadIdx.x; k < d; k += kReduceThreads) {
        const size_t at = static_cast<size_t>(j) * d + k;
        float c = anchors[at];
        if (count > 0) c = moved(c, partial[at], inv_count, eta);
        anchors[at] = c;
        norm = fmaf(c, c, norm);
    }
    const float total = block_sum(norm, scratch);
    if (threadIdx.x == 0) anchor_norms[j] = total;
}

extern "C" __global__ void __launch_bounds__(kFinishThreads)
    anneal_finish(const double *sumsq, uint32_t m, uint64_t n, double tol, uint32_t slot,
                  AnnealControl *control, double *history) {
    __shared__ double scratch[kFinishThreads / 32];
    if (control->done) return;  // the whole block reads the same flag
    const double total = finish_total(sumsq, m, scratch);
    if (threadIdx.x == 0) finish_control(total, n, tol, slot, control, history);
}

// anneal_combine, anneal_update and anneal_finish in one launch, for one
// shard alone (nothing sums the partials between them) and d <= 128: block j
// combines and moves anchor j (combine's and update's work on the same
// columns, per thread, in the same order), and the block that arrives last
// (an atomic count, `arrived`, which it zeroes again) runs the finish.
extern "C" __global__ void __launch_bounds__(kReduceThreads)
    anneal_combine_update(const uint32_t *offsets, const uint32_t *pieces,
                          const double *piece_sums, const double *piece_dist, uint32_t m,
                          uint32_t d, float eta, uint64_t n, double tol, uint32_t slot,
                          AnnealControl *control, uint32_t *members, double *partial,
                          double *sumsq, float *anchors, float *anchor_norms, double *history,
                          uint32_t *arrived) {
    __shared__ float scratch[kReduceThreads / 32];
    __shared__ double totals[kFinishThreads / 32];
    const uint32_t j = blockIdx.x;
    // Every block reads done before any arrives, so before the last writes it.
    if (j >= m || control->done) return;  // whole block leaves
    const uint32_t first = pieces[j];
    const uint32_t last = pieces[j + 1];
    if (threadIdx.x == 0) combine_counts(j, first, last, offsets, piece_dist, members, sumsq);
    const uint32_t count = offsets[j + 1] - offsets[j];
    const double inv_count = count > 0 ? 1.0 / static_cast<double>(count) : 0.0;
    float norm = 0.f;
    for (uint32_t k = threadIdx.x; k < d; k += kReduceThreads) {
        const size_t at = static_cast<size_t>(j) * d + k;
        const double sum = combine_column(first, last, piece_sums, d, k);
        partial[at] = sum;
        float c = anchors[at];
        if (count > 0) c = moved(c, sum, inv_count, eta);
        anchors[at] = c;
        norm = fmaf(c, c, norm);
    }
    const float total = block_sum(norm, scratch);
    if (threadIdx.x == 0) anchor_norms[j] = total;
    if (!kiln_anneal::arrived_last(arrived)) return;  // sumsq[j] before the count
    const double energy_sum = finish_total(sumsq, m, totals);
    if (threadIdx.x == 0) {
        finish_control(energy_sum, n, tol, slot, control, history);
        *arrived = 0u;
    }
}

// Maintenance on the device: the new anchors from the old by the host's plan
// (crates/anneal/src/maintenance.rs), with the host's rounding: __dmul_rn,
// __dadd_rn and __ddiv_rn keep nvcc from fusing a multiply and an add.
constexpr int kRowThreads = 128;

extern "C" __global__ void __launch_bounds__(kRowThreads)
    anneal_apply_rows(const float *old_anchors, uint32_t d, const AnnealRowOp *ops, uint32_t rows,
                      const float *directions, float *new_anchors) {
    const uint32_t r = blockIdx.x;
    if (r >= rows) return;
    const AnnealRowOp op = ops[r];
    const float *src = old_anchors + static_cast<size_t>(op.src) * d;
    float *out = new_anchors + static_cast<size_t>(r) * d;
    for (uint32_t k = threadIdx.x; k < d; k += kRowThreads) {
        const double c = static_cast<double>(src[k]);
        double v = c;
        if (op.kind == KILN_ANNEAL_ROW_MERGE) {
            const double o = static_cast<double>(old_anchors[static_cast<size_t>(op.other) * d + k]);
            v = __ddiv_rn(__dadd_rn(__dmul_rn(c, op.a), __dmul_rn(o, op.b)), __dadd_rn(op.a, op.b));
        } else if (op.kind == KILN_ANNEAL_ROW_SPLIT_PLUS || op.kind == KILN_ANNEAL_ROW_SPLIT_MINUS) {
            const double u = static_cast<double>(directions[static_cast<size_t>(op.dir) * d + k]);
            const double step = __dmul_rn(u, op.a);
            v = op.kind == KILN_ANNEAL_ROW_SPLIT_PLUS ? __dadd_rn(c, step) : __dsub_rn(c, step);
        }
        out[k] = __double2float_rn(v);
    }
}

template <typename T>
__device__ void gather_rows(const T *x, uint32_t n, uint32_t d, const uint32_t *rows, uint32_t m,
                            float *anchors) {
    const uint32_t j = blockIdx.x;
    if (j >= m) return;
    const uint32_t row = rows[j];
    if (row >= n) return;  // the host checks: never
    const T *src = x + static_cast<size_t>(row) * d;
    float *out = anchors + static_cast<size_t>(j) * d;
    for (uint32_t k = threadIdx.x; k < d; k += kRowThreads) out[k] = load(src, k);
}

extern "C" __global__ void __launch_bounds__(kRowThreads)
    anneal_gather_f32(const float *x, uint32_t n, uint32_t d, const uint32_t *rows, uint32_t m,
                      float *anchors) {
    gather_rows(x, n, d, rows, m, anchors);
}

extern "C" __global__ void __launch_bounds__(kRowThreads)
    anneal_gather_f16(const uint16_t *x, uint32_t n, uint32_t d, const uint32_t *rows, uint32_t m,
                      float *anchors) {
    gather_rows(x, n, d, rows, m, anchors);
}

// bf16 is the top half of an f32: widening is a shift, no arch guard needed.
KILN_KERNEL(anneal_widen_bf16, const uint16_t *__restrict__ in, float *__restrict__ out,
            uint32_t n) {
    const uint32_t stride = gridDim.x * blockDim.x;
    for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        out[i] = __uint_as_float(static_cast<uint32_t>(in[i]) << 16);
    }
}
