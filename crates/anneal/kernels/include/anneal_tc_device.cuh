// anneal_tc_device.cuh: the device code that anneal_tc.cu (mma.sync) and
// anneal_wgmma.cu (wgmma) share, so that both tensor-core kernels compute the
// same bits: the exact f32 distance (anneal_tc.h pins its order), the f16
// scale, the error bound's eps(d), and the per-row epilogue (bounds of one
// anchor tile, then the row's candidate list) and refinement, which differ
// between the kernels only in where a row's dot products come from. The
// bound is derived in crates/anneal/src/assign_tc.rs.
#ifndef KILN_ANNEAL_TC_DEVICE_CUH
#define KILN_ANNEAL_TC_DEVICE_CUH
#include <cuda_fp16.h>

#include "anneal_tc.h"

namespace kiln_tc {

inline constexpr uint32_t kFullMask = 0xffffffffu;
inline constexpr float kInf = __builtin_huge_valf();
inline constexpr uint32_t kNone = 0xffffffffu;
inline constexpr uint32_t kK = KILN_ANNEAL_TC_CANDIDATES;
inline constexpr uint32_t kOverflow = kK + 1;  // a row's list length once it overflowed
// f32 slack of the centred norms' combination (see assign_tc.rs): 2^-20 (|x'|^2 + |c'|^2).
inline constexpr float kCombineSlack = 0x1p-20f;
// sigma's exponent is clamped to +-60: a tiny maximum clamps sigma at 2^60.
inline constexpr int kMaxScaleExp = 60;

__device__ __forceinline__ float load(const float *p, size_t i) { return p[i]; }
__device__ __forceinline__ float load(const uint16_t *p, size_t i) {
    return __half2float(__ushort_as_half(p[i]));
}

// The exact f32 distance (anneal_tc.h): lane l sums k = l, l + 32, ... with
// fmaf from 0, an xor butterfly adds the partial sums (every lane ends with
// the same bits: a + b == b + a), then max(fmaf(-2, dot, xn + cn), 0). B
// anchors at once, for memory parallelism; each anchor's sum is the same
// whatever B and its slot.
template <int B, typename T>
__device__ __forceinline__ void exact_dots(const T *__restrict__ xrow,
                                           const float *__restrict__ anchors,
                                           const uint32_t (&j)[B], uint32_t d, uint32_t lane,
                                           float (&dot)[B]) {
    const float *c[B];
#pragma unroll
    for (int b = 0; b < B; ++b) {
        c[b] = anchors + static_cast<size_t>(j[b]) * d;
        dot[b] = 0.f;
    }
    for (uint32_t k = lane; k < d; k += 32) {
        const float xv = load(xrow, k);
#pragma unroll
        for (int b = 0; b < B; ++b) dot[b] = fmaf(xv, c[b][k], dot[b]);
    }
#pragma unroll
    for (int b = 0; b < B; ++b)
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) dot[b] += __shfl_xor_sync(kFullMask, dot[b], o);
}

__device__ __forceinline__ float exact_dist(float xn, float cn, float dot) {
    return fmaxf(fmaf(-2.f, dot, __fadd_rn(xn, cn)), 0.f);
}

// sigma's exponent from the bits of max |x| (a non-negative finite f32).
__device__ __forceinline__ int half_scale_exp(uint32_t absmax_bits) {
    if (absmax_bits == 0u) return 0;
    const int e = static_cast<int>((absmax_bits >> 23) & 0xffu) - 127;  // -127: subnormal
    return max(-kMaxScaleExp, min(kMaxScaleExp, 12 - e));
}

__device__ __forceinline__ float pow2(int e) { return __int_as_float((e + 127) << 23); }

// The bound's eps(d) on the centred f16 copies (assign_tc.rs derives it):
// f16 rounding of both inputs and ceil(d/16) tensor-core accumulation steps
// (mma.m16n8k16 and wgmma.m64nNk16 both add 16 products per step), each taken
// twice. The exact distance's own rounding is in tc_row_slack.
__device__ __forceinline__ float tc_eps(uint32_t d) {
    const float steps = static_cast<float>(d / 16u + (d % 16u != 0u));
    return 0x1p-9f + steps * 0x1p-16f;
}

// eps(d) of a kernel that sums its tensor-core products in chunks of
// `chunk_steps` steps (16 products each) into a fresh accumulator and adds
// the chunks' sums in f32 (anneal_wgmma.cu's chunked entry points; the bound
// is derived in assign_tc.rs): f16 rounding of both inputs taken 1.25 times,
// min(steps, chunk_steps) accumulation steps taken 4 times (each chunk's
// steps add at most 2^-18 of that chunk's magnitudes), and the chunks' f32
// additions (at most 2^-24 of all the magnitudes each) taken 4 times.
__device__ __forceinline__ float tc_eps_chunked(uint32_t d, uint32_t chunk_steps) {
    const uint32_t steps = d / 16u + (d % 16u != 0u);
    const uint32_t chunks = (steps + chunk_steps - 1u) / chunk_steps;
    const uint32_t within = steps < chunk_steps ? steps : chunk_steps;
    return 0x1p-10f + 0x1p-12f + static_cast<float>(within) * 0x1p-16f +
           static_cast<float>(chunks) * 0x1p-22f;
}

// The f32 additions of one exact distance: ceil(d/32) fmaf per lane, then 5
// butterfly adds (anneal_tc.h).
__device__ __forceinline__ float tc_sum_terms(uint32_t d) {
    return static_cast<float>(d / 32u + (d % 32u != 0u) + 5u);
}

// The part of the bound that the exact distance F adds for a point of stored
// norm xn (assign_tc.rs): F's f32 dot product (tc_sum_terms u of |x| |c|,
// doubled by the -2) and its two roundings, with |c| at the anchors' largest
// (half_state[ANCHOR_NORM_MAX]), taken twice.
__device__ __forceinline__ float tc_row_slack(uint32_t d, float xn, const uint32_t *half_state) {
    const float cn_max = __uint_as_float(half_state[KILN_ANNEAL_TC_STATE_ANCHOR_NORM_MAX]);
    const float dot = tc_sum_terms(d) * 0x1p-22f * sqrtf(xn) * sqrtf(cn_max);
    return fmaf(6.f * 0x1p-24f, xn + cn_max, dot);
}

// Keeps the entries of one point's list whose lower bound is still within u.
__device__ __forceinline__ uint32_t prune(uint32_t *cand_j, float *cand_lb, uint32_t count,
                                          float u) {
    uint32_t kept = 0;
    for (uint32_t i = 0; i < count; ++i) {
        const float lb = cand_lb[i];
        if (lb <= u) {
            cand_j[kept] = cand_j[i];
            cand_lb[kept] = lb;
            ++kept;
        }
    }
    return kept;
}

// One point row's epilogue for one anchor tile, by the 4 lanes of a quad
// (t = lane % 4): v(2 nt + c), a reference to the kernel's accumulator
// register, holds the dot product of the row and tile column nt * 8 + 2t +
// c (anchor a0 + that column), for nt < N / 2. (An accessor, not a copy into
// an array: a copy changed ptxas's allocation of the mma.sync kernel and cost
// it 8-15% on the H200.) Each becomes its lower
// bound A - e (+inf where the anchor is ineligible: past m, or with
// EXCLUDE_SELF the point p itself, tested only when `checked`); the quad's
// least A + e lowers *upper; the anchors whose lower bound is within it join
// the row's list (cand_j, cand_lb: K entries, *listed of them, K + 1 once
// it overflowed), pruned by the current bound when full. cn, cq: the tile's
// |c|^2 and |c|. Called by every lane of the warp (shuffles), `live` false
// for rows past n or already overflowed.
template <int N, uint32_t K = kK, typename Acc>
__device__ __forceinline__ void row_epilogue(Acc &&v, bool checked, const float *cn,
                                             const float *cq, uint32_t t, float xn, float rx,
                                             float sx, float sub, float neg2inv2, uint32_t a0,
                                             uint32_t m, bool exclude_self, uint32_t p,
                                             bool live, float *upper, uint32_t *listed,
                                             uint32_t *cand_j, float *cand_lb) {
    float best_upper = kInf;
    // `checked` is uniform over the block, and the unchecked tiles skip the
    // tests (the same values, fewer instructions per pair: the epilogue is
    // what bounds the kernels at small d).
#define KILN_TC_PAIR(test)                                                                     \
    {                                                                                          \
        const int col = nt * 8 + 2 * static_cast<int>(t) + c;                                  \
        const float q = cq[col];                                                               \
        const float sum = xn + cn[col];                                                        \
        const float approx = fmaxf(fmaf(neg2inv2, v(2 * nt + c), sum), 0.f);                   \
        const float err = fmaf(rx, q, fmaf(sum, kCombineSlack, fmaf(sub, q, sx)));             \
        const uint32_t a = a0 + col;                                                           \
        const bool eligible = !(test) || (a < m && !(exclude_self && a == p));                 \
        if (eligible) best_upper = fminf(best_upper, approx + err);                            \
        v(2 * nt + c) = eligible ? approx - err : kInf;                                        \
    }
    if (checked) {
#pragma unroll
        for (int nt = 0; nt < N / 2; ++nt)
#pragma unroll
            for (int c = 0; c < 2; ++c) KILN_TC_PAIR(true)
    } else {
#pragma unroll
        for (int nt = 0; nt < N / 2; ++nt)
#pragma unroll
            for (int c = 0; c < 2; ++c) KILN_TC_PAIR(false)
    }
#undef KILN_TC_PAIR
    best_upper = fminf(best_upper, __shfl_xor_sync(kFullMask, best_upper, 1));
    best_upper = fminf(best_upper, __shfl_xor_sync(kFullMask, best_upper, 2));
    *upper = fminf(*upper, best_upper);

    live = live && *listed <= K;
    static_assert(N <= 32, "one mask word per row and lane");
    uint32_t mask = 0;
#pragma unroll
    for (int i = 0; i < N; ++i)
        if (live && v(i) <= *upper) mask |= 1u << i;
    if (!__any_sync(kFullMask, mask != 0)) return;

    // Slots of this lane's new entries: a scan over the quad.
    const uint32_t mine = __popc(mask);
    uint32_t through = mine;
    uint32_t up = __shfl_up_sync(kFullMask, through, 1, 4);
    if (t >= 1) through += up;
    up = __shfl_up_sync(kFullMask, through, 2, 4);
    if (t >= 2) through += up;
    const uint32_t added = __shfl_sync(kFullMask, through, 3, 4);
    const bool full = live && *listed + added > K;
    if (__any_sync(kFullMask, full)) {
        __syncwarp();  // the quad's earlier entries are visible
        uint32_t kept = *listed;
        if (full && t == 0) kept = prune(cand_j, cand_lb, kept, *upper);
        *listed = __shfl_sync(kFullMask, kept, 0, 4);
        __syncwarp();  // compaction done before new entries land
    }
    if (live) {
        if (*listed + added > K) {
            *listed = K + 1;
        } else {
            uint32_t slot = *listed + through - mine;
#pragma unroll
            for (int i = 0; i < N; ++i) {
                if ((mask >> i) & 1u) {
                    cand_j[slot] = a0 + (i / 2) * 8 + 2 * t + i % 2;
                    cand_lb[slot] = v(i);
                    ++slot;
                }
            }
            *listed += added;
        }
    }
}

// The refinement of point p by its warp (every lane): lane i < count holds
// list entry i; survivors (lower bound within the final upper bound u) get
// the exact distance, four at a time; the least wins, ties to the lowest
// index. An overflowed point (count > kK), or one with no bounded anchor,
// goes to `unresolved` for the list kernel.
template <typename T>
__device__ __forceinline__ void refine_point(const T *__restrict__ x,
                                             const float *__restrict__ anchors,
                                             const float *__restrict__ anchor_norms, uint32_t d,
                                             uint32_t flags, uint32_t p, float xn,
                                             const uint32_t *cand_j, const float *cand_lb,
                                             uint32_t count, float u, uint32_t lane,
                                             uint32_t *__restrict__ assign_out,
                                             float *__restrict__ dist_out,
                                             uint32_t *__restrict__ counts,
                                             uint32_t *__restrict__ unresolved,
                                             uint32_t *__restrict__ unresolved_count) {
    float best = kInf;
    uint32_t best_j = kNone;
    if (count >= 1 && count <= kK) {
        uint32_t my_j = 0;
        float my_lb = kInf;
        if (lane < count) {
            my_j = cand_j[lane];
            my_lb = cand_lb[lane];
        }
        uint32_t alive = __ballot_sync(kFullMask, lane < count && my_lb <= u);
        const T *xrow = x + static_cast<size_t>(p) * d;
        while (alive != 0) {
            uint32_t js[4];
            bool use[4];
#pragma unroll
            for (int b = 0; b < 4; ++b) {
                use[b] = alive != 0;
                const int src = use[b] ? __ffs(alive) - 1 : 0;
                js[b] = __shfl_sync(kFullMask, my_j, src);
                alive &= alive - 1;
            }
#pragma unroll
            for (int b = 1; b < 4; ++b)
                if (!use[b]) js[b] = js[0];
            // The norms' loads go out with the dots' (H200: 1-4% less time
            // for the assignment than loading each norm after its dot).
            float cn[4];
#pragma unroll
            for (int b = 0; b < 4; ++b) cn[b] = anchor_norms[js[b]];
            float dots[4];
            exact_dots<4>(xrow, anchors, js, d, lane, dots);
#pragma unroll
            for (int b = 0; b < 4; ++b) {
                if (!use[b]) continue;
                const float f = exact_dist(xn, cn[b], dots[b]);
                if (f < best || (f == best && js[b] < best_j)) {
                    best = f;
                    best_j = js[b];
                }
            }
        }
    }
    if (lane == 0) {
        if (best_j != kNone) {
            assign_out[p] = best_j;
            dist_out[p] = best;
            if ((flags & KILN_ANNEAL_COUNT) != 0) atomicAdd(&counts[best_j], 1u);
        } else {
            // Overflowed, or no anchor could be bounded (none eligible, or
            // non-finite input): the list kernel decides.
            unresolved[atomicAdd(unresolved_count, 1u)] = p;
        }
    }
}

// The refinement of every point a warp owns (x_norms: the stored |x|^2 of
// every point, which the exact distance reads): lane 4 gg of the warp holds,
// in upper[r] and listed[r], the final upper bound and list length of the
// block row row_of(r, gg), for r < R and gg < 8; each row's point (p0 +
// row, when below n) goes through refine_point, one at a time.
template <int R, typename T, typename RowOf>
__device__ __forceinline__ void refine_rows(
    RowOf row_of, const float (&upper)[R], const uint32_t (&listed)[R], uint32_t p0, uint32_t n,
    const T *__restrict__ x, const float *__restrict__ anchors,
    const float *__restrict__ anchor_norms, uint32_t d, uint32_t flags,
    const float *__restrict__ x_norms,
    const uint32_t (*cand_j)[kK], const float (*cand_lb)[kK], uint32_t lane,
    uint32_t *__restrict__ assign_out, float *__restrict__ dist_out,
    uint32_t *__restrict__ counts, uint32_t *__restrict__ unresolved,
    uint32_t *__restrict__ unresolved_count) {
#pragma unroll
    for (int r = 0; r < R; ++r) {
#pragma unroll 1
        for (int gg = 0; gg < 8; ++gg) {
            const int row = row_of(r, gg);
            const uint32_t p = p0 + row;
            const float u = __shfl_sync(kFullMask, upper[r], 4 * gg);
            const uint32_t count = __shfl_sync(kFullMask, listed[r], 4 * gg);
            if (p >= n) continue;  // uniform over the warp
            refine_point(x, anchors, anchor_norms, d, flags, p, x_norms[p], cand_j[row],
                         cand_lb[row], count, u, lane, assign_out, dist_out, counts, unresolved,
                         unresolved_count);
        }
    }
}

}  // namespace kiln_tc

#endif
