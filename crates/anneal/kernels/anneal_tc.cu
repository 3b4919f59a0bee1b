// anneal_tc: the anchor assignment on tensor cores (f16 mma.sync, f32
// accumulate) with exact refinement, and the exact list assignment that
// finishes the points it could not resolve. Contract in anneal_tc.h; design,
// error bound and speed estimate in crates/anneal/src/assign_tc.rs.
#include "anneal_device.cuh"
#include "anneal_tc_device.cuh"

namespace {

// The exact distance, the f16 scale, eps(d), the per-row epilogue and the
// refinement are shared with anneal_wgmma.cu (anneal_tc_device.cuh).
using namespace kiln_tc;

// ---------------------------------------------------------------------------
// List: every (group of 8 listed points, chunk of 64 anchors) pair is one
// block's work, grid-stride, so a handful of listed points still spreads over
// the whole GPU; warp w of the block takes anchors chunk*64 + w*8 .. +8
// against the group's 8 points: 64 exact dot products per lane (the order of
// exact_dots: lane l sums k = l, l + 32, ... with fmaf from 0, then the xor
// butterfly), so each anchor value loaded serves 8 points and each point
// value 8 anchors (one point per pair loaded 5 values per 4 fmaf; here 16
// per 64). Each pair's exact distance is packed with its anchor index as
// (bits of dist) << 32 | index, which orders like (dist, index) since dist >=
// +0; the warp's least per point goes into best[i] by an atomic max of the
// complement (0, the zeroed start, means none yet). The max is the same
// whatever order the atomics land in. The block that arrives last then
// writes each listed point's outputs.

constexpr uint32_t kListChunk = 64;
constexpr uint32_t kListGroup = 8;   // listed points per work item
constexpr int kListAnchors = 8;      // anchors per warp
static_assert(KILN_ANNEAL_LIST_THREADS == 32 * (kListChunk / kListAnchors), "8 anchors per warp");

template <typename T>
__device__ void assign_list(const T *__restrict__ x, const float *__restrict__ x_norms, uint32_t d,
                            const float *__restrict__ anchors,
                            const float *__restrict__ anchor_norms, uint32_t m, uint32_t flags,
                            const uint32_t *__restrict__ list,
                            const uint32_t *__restrict__ list_count,
                            unsigned long long *__restrict__ best) {
    const uint32_t lane = threadIdx.x % 32;
    const uint32_t warp = threadIdx.x / 32;
    const bool exclude_self = (flags & KILN_ANNEAL_EXCLUDE_SELF) != 0;
    const uint32_t chunks = (m + kListChunk - 1) / kListChunk;
    const uint32_t count = *list_count;
    if (chunks == 0 || count == 0) return;
    const uint32_t groups = (count + kListGroup - 1) / kListGroup;
    // The pair (group, chunk) walks item = group * chunks + chunk by
    // gridDim.x, in 32-bit steps.
    uint32_t gi = blockIdx.x / chunks;
    uint32_t chunk = blockIdx.x % chunks;
    for (; gi < groups; gi += (chunk + gridDim.x) / chunks, chunk = (chunk + gridDim.x) % chunks) {
        const uint32_t j0 = chunk * kListChunk + warp * kListAnchors;
        if (j0 >= m) continue;  // uniform over the warp
        uint32_t p[kListGroup];
        const T *xrow[kListGroup];
#pragma unroll
        for (uint32_t q = 0; q < kListGroup; ++q) {
            p[q] = list[min(gi * kListGroup + q, count - 1)];
            xrow[q] = x + static_cast<size_t>(p[q]) * d;
        }
        const float *c[kListAnchors];
#pragma unroll
        for (int b = 0; b < kListAnchors; ++b)
            c[b] = anchors + static_cast<size_t>(min(j0 + b, m - 1)) * d;
        float dot[kListGroup][kListAnchors];
#pragma unroll
        for (uint32_t q = 0; q < kListGroup; ++q)
#pragma unroll
            for (int b = 0; b < kListAnchors; ++b) dot[q][b] = 0.f;
        for (uint32_t k = lane; k < d; k += 32) {
            float xv[kListGroup];
            float cv[kListAnchors];
#pragma unroll
            for (uint32_t q = 0; q < kListGroup; ++q) xv[q] = load(xrow[q], k);
#pragma unroll
            for (int b = 0; b < kListAnchors; ++b) cv[b] = c[b][k];
#pragma unroll
            for (uint32_t q = 0; q < kListGroup; ++q)
#pragma unroll
                for (int b = 0; b < kListAnchors; ++b) dot[q][b] = fmaf(xv[q], cv[b], dot[q][b]);
        }
#pragma unroll
        for (uint32_t q = 0; q < kListGroup; ++q)
#pragma unroll
            for (int b = 0; b < kListAnchors; ++b)
#pragma unroll
                for (int o = 16; o > 0; o >>= 1)
                    dot[q][b] += __shfl_xor_sync(kFullMask, dot[q][b], o);
#pragma unroll
        for (uint32_t q = 0; q < kListGroup; ++q) {
            const uint32_t i = gi * kListGroup + q;
            const float xn = x_norms[p[q]];
            unsigned long long mine = 0;  // complement of the least packed pair
#pragma unroll
            for (int b = 0; b < kListAnchors; ++b) {
                const uint32_t j = j0 + b;
                if (j >= m || (exclude_self && j == p[q])) continue;
                const float f = exact_dist(xn, anchor_norms[j], dot[q][b]) + 0.f;  // -0 -> +0
                const unsigned long long packed =
                    (static_cast<unsigned long long>(__float_as_uint(f)) << 32) | j;
                mine = max(mine, ~packed);
            }
            if (lane == q && i < count && mine != 0) atomicMax(&best[i], mine);
        }
    }
}

// Each listed point's outputs from best (which it zeroes again for the next
// list), by one block: the one that arrives last of the list kernel's.
__device__ void assign_list_finish(const uint32_t *__restrict__ list,
                                   const uint32_t *__restrict__ list_count,
                                   unsigned long long *__restrict__ best, uint32_t m,
                                   uint32_t flags, uint32_t *__restrict__ assign_out,
                                   float *__restrict__ dist_out, uint32_t *__restrict__ counts) {
    const uint32_t count = *list_count;
    for (uint32_t i = threadIdx.x; i < count; i += blockDim.x) {
        const uint32_t p = list[i];
        // Past L1: the other blocks' atomics are in L2.
        const unsigned long long found = __ldcg(&best[i]);
        best[i] = 0;  // zero again for the next list
        const unsigned long long packed = ~found;
        if (found == 0) {  // no eligible anchor
            assign_out[p] = kNone;
            dist_out[p] = kInf;
            continue;
        }
        const uint32_t j = static_cast<uint32_t>(packed & 0xffffffffu);
        assign_out[p] = j;
        dist_out[p] = __uint_as_float(static_cast<uint32_t>(packed >> 32));
        if ((flags & KILN_ANNEAL_COUNT) != 0 && j < m) atomicAdd(&counts[j], 1u);
    }
}

// The list kernel, then, in the block that arrives last (`arrived` counts
// them and is zeroed again by that block), the finish. Nothing at all, not
// even the count, when no point is listed: every block reads the same count.
// (With no anchor the finish still runs: each listed point gets no anchor.)
template <typename T>
__device__ void assign_list_then_finish(const T *__restrict__ x, const float *__restrict__ x_norms,
                                        uint32_t d, const float *__restrict__ anchors,
                                        const float *__restrict__ anchor_norms, uint32_t m,
                                        uint32_t flags, const uint32_t *__restrict__ list,
                                        const uint32_t *__restrict__ list_count,
                                        unsigned long long *__restrict__ best,
                                        uint32_t *__restrict__ assign_out,
                                        float *__restrict__ dist_out,
                                        uint32_t *__restrict__ counts, uint32_t *arrived) {
    if (*list_count == 0) return;  // whole grid leaves
    assign_list(x, x_norms, d, anchors, anchor_norms, m, flags, list, list_count, best);
    if (!kiln_anneal::arrived_last(arrived)) return;  // the block's atomics on best first
    assign_list_finish(list, list_count, best, m, flags, assign_out, dist_out, counts);
    if (threadIdx.x == 0) *arrived = 0u;
}

// ---------------------------------------------------------------------------
// The f16 copies, of the inputs relative to r = ref_sum * ref_scale (the
// points' mean: on data far from the origin the bound then grows with the
// spread, not with the offset). sigma is a power of two, so scaling is
// exact; it puts the points' largest centred magnitude in [2^12, 2^13),
// leaving a factor 8 below the f16 maximum for anchors (which are weighted
// means of points, but splits move them a little outside). A tiny maximum
// clamps sigma at 2^60.

constexpr uint32_t kSumThreads = 256;

template <typename T>
__device__ void column_sums(const T *__restrict__ x, uint32_t rows, uint32_t d,
                            float *__restrict__ sums) {
    const uint32_t k = blockIdx.x * kSumThreads + threadIdx.x;
    if (k >= d) return;
    const uint32_t per = (rows + gridDim.y - 1u) / gridDim.y;
    const uint32_t first = blockIdx.y * per;
    const uint32_t last = min(rows, first + per);
    float s = 0.f;
    for (uint32_t r = first; r < last; ++r) s += load(x, static_cast<size_t>(r) * d + k);
    if (first < last) atomicAdd(&sums[k], s);  // any order: r only has to be shared
}

__device__ __forceinline__ float centred(float v, const float *__restrict__ ref_sum,
                                         float ref_scale, uint32_t k) {
    return __fsub_rn(v, __fmul_rn(ref_sum[k], ref_scale));
}

// One warp per row (grid-stride over rows), as to_half reads them.
template <typename T>
__device__ void absmax(const T *__restrict__ x, uint32_t rows, uint32_t d,
                       const float *__restrict__ ref_sum, float ref_scale,
                       uint32_t *__restrict__ state) {
    uint32_t best = 0;
    const uint32_t lane = threadIdx.x % 32;
    const uint32_t warps = gridDim.x * (blockDim.x / 32);
    for (uint32_t row = (blockIdx.x * blockDim.x + threadIdx.x) / 32; row < rows; row += warps) {
        const size_t base = static_cast<size_t>(row) * d;
        for (uint32_t k = lane; k < d; k += 32)
            best = max(best, __float_as_uint(fabsf(centred(load(x, base + k), ref_sum, ref_scale, k))));
    }
    for (int o = 16; o > 0; o >>= 1) best = max(best, __shfl_xor_sync(kFullMask, best, o));
    if (lane == 0)  // order-free: the max is exact
        atomicMax(&state[KILN_ANNEAL_TC_STATE_ABSMAX], best);
}

// One warp per row (grid-stride over rows): the centred copy, and the pair
// (|x - r|^2 + norms[row] - |x|^2, |x - r|) with both sums in f64, so that
// the centred norm carries the stored norm's own rounding (anneal_tc.h).
template <typename T>
__device__ void to_half(const T *__restrict__ src, const float *__restrict__ norms, uint32_t rows,
                        uint32_t d, uint32_t dp, const float *__restrict__ ref_sum,
                        float ref_scale, uint32_t *__restrict__ state,
                        uint32_t *__restrict__ norm_max, uint16_t *__restrict__ dst,
                        float *__restrict__ norms_c) {
    const float sigma = pow2(half_scale_exp(state[KILN_ANNEAL_TC_STATE_ABSMAX]));
    const uint32_t lane = threadIdx.x % 32;
    const uint32_t warps = gridDim.x * (blockDim.x / 32);
    bool overflow = false;
    uint32_t max_bits = 0;
    for (uint32_t row = (blockIdx.x * blockDim.x + threadIdx.x) / 32; row < rows; row += warps) {
        const size_t base = static_cast<size_t>(row) * d;
        double own = 0.0, own_c = 0.0;
        for (uint32_t k = lane; k < dp; k += 32) {
            float v = 0.f;
            if (k < d) {
                const float raw = load(src, base + k);
                own = fma(static_cast<double>(raw), static_cast<double>(raw), own);
                v = centred(raw, ref_sum, ref_scale, k);
                own_c = fma(static_cast<double>(v), static_cast<double>(v), own_c);
            }
            const __half h = __float2half_rn(v * sigma);
            overflow |= __hisinf(h) != 0;
            dst[static_cast<size_t>(row) * dp + k] = __half_as_ushort(h);
        }
        for (int o = 16; o > 0; o >>= 1) {
            own += __shfl_xor_sync(kFullMask, own, o);
            own_c += __shfl_xor_sync(kFullMask, own_c, o);
        }
        if (lane == 0) {
            const float stored = norms[row];
            norms_c[2 * static_cast<size_t>(row)] =
                static_cast<float>(own_c + (static_cast<double>(stored) - own));
            norms_c[2 * static_cast<size_t>(row) + 1] = static_cast<float>(sqrt(own_c));
            // NaN (a non-finite input) orders above +inf: the bound is NaN,
            // and every point goes to the list kernel.
            const float own32 = static_cast<float>(own);
            max_bits = max(max_bits, isnan(stored) ? 0x7fc00000u : __float_as_uint(own32));
        }
    }
    if (lane == 0 && max_bits != 0u) atomicMax(norm_max, max_bits);
    if (__any_sync(kFullMask, overflow) && lane == 0)
        state[KILN_ANNEAL_TC_STATE_OVERFLOW] = 1u;  // every writer writes 1
}

// ---------------------------------------------------------------------------
// Tensor cores. A block of 4 warps takes 128 points (two blocks per SM);
// warp w owns points w*32 .. w*32+31 and meets every anchor, 128 per anchor
// tile, so each point's state stays inside one warp. Per anchor tile the
// warp's 32 x 128 dot products are 2 (m16) x 16 (n8) mma.sync.m16n8k16 f16
// accumulators (128 f32 per thread) on the scaled f16 copies, which stream
// through a 4-stage cp.async pipeline, 32 halves of d per stage, fragments
// read by ldmatrix.
// The pipeline runs over (anchor tile, k stage) pairs without draining
// between anchor tiles; the epilogue of a tile runs while the next tile's
// first stages are in flight.
//
// Fragments of mma.m16n8k16 (g = lane / 4, t = lane % 4), PTX ISA:
//   A (16 x 16, row): a0 (g, 2t..), a1 (g + 8, 2t..), a2 (g, 2t + 8..), a3 (g + 8, 2t + 8..)
//   B (16 x 8, col):  b0 (k 2t.., n g), b1 (k 2t + 8.., n g)
//   C (16 x 8):       c0 (g, 2t), c1 (g, 2t + 1), c2 (g + 8, 2t), c3 (g + 8, 2t + 1)
// so the 4 lanes of a quad hold one point row (16 of the 64 anchors each).

constexpr int kThreads = KILN_ANNEAL_TC_THREADS;
constexpr int kBM = KILN_ANNEAL_TC_TILE;  // points per block
constexpr int kBK = 32;                   // halves of d per stage
constexpr int kStages = 4;
constexpr int kRow = kBK + 8;  // 80-byte rows: 8 ldmatrix rows hit 32 distinct banks
constexpr int kNormSlots = 4;  // anchor-norm buffers, by anchor tile mod 4
static_assert(kBM == kThreads, "one thread per point row initialises the row data");
static_assert(kBM == 32 * (kThreads / 32), "each warp owns 32 points");
static_assert(KILN_ANNEAL_TC_DP % kBK == 0, "a stage never crosses a row's padding");

template <int kBN>
struct TcShared {
    uint16_t xs[kStages][kBM][kRow];  // points x k, scaled f16
    uint16_t cs[kStages][kBN][kRow];  // anchors x k, scaled f16
    uint32_t cand_j[kBM][kK];         // candidates per point: anchor index
    float cand_lb[kBM][kK];           //                       and lower bound
    float xn[kBM];                    // |x|^2 of the block's points
    float rx[kBM];                    // 2 eps(d) |x|
    float sx[kBM];                    // the subnormal term of the point
    float cn[kNormSlots][kBN];        // |c|^2 of an anchor tile
    float cq[kNormSlots][kBN];        // |c| of an anchor tile
};
static_assert(sizeof(TcShared<128>) <= KILN_ANNEAL_TC_SMEM, "anneal_tc.h's shared memory size");
static_assert(sizeof(TcShared<64>) <= KILN_ANNEAL_TC_SLIM_SMEM,
              "anneal_tc.h's shared memory size of the 64-anchor tile");

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
__device__ __forceinline__ uint32_t smem_addr(const void *p) {
    return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void cp_async16(void *dst, const void *src) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(smem_addr(dst)), "l"(src));
}

__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }

template <int N>
__device__ __forceinline__ void cp_async_wait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const void *p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(smem_addr(p)));
}

__device__ __forceinline__ void mma_f16(float (&c)[4], const uint32_t (&a)[4], uint32_t b0,
                                        uint32_t b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

#endif

template <int BN, typename T>
__device__ void assign_tc(const T *__restrict__ x, const uint16_t *__restrict__ xh,
                          const float *__restrict__ x_norms, const float *__restrict__ x_norms_c,
                          uint32_t n, uint32_t d, uint32_t dp,
                          const float *__restrict__ anchors, const uint16_t *__restrict__ ch,
                          const float *__restrict__ anchor_norms,
                          const float *__restrict__ anchor_norms_c, uint32_t m, uint32_t flags,
                          const uint32_t *__restrict__ half_state,
                          uint32_t *__restrict__ assign_out, float *__restrict__ dist_out,
                          uint32_t *__restrict__ counts, uint32_t *__restrict__ unresolved,
                          uint32_t *__restrict__ unresolved_count) {
    constexpr int kBN = BN;       // anchors per anchor tile
    constexpr int kNT = kBN / 8;  // n8 tiles per warp
    static_assert(kBN <= kThreads && kNT % 2 == 0, "one thread per anchor row; n16 pairs");
    const uint32_t p0 = blockIdx.x * kBM;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    if (n == 0u) return;
    if (half_state[KILN_ANNEAL_TC_STATE_OVERFLOW] != 0u) {
        // An anchor left the f16 range: the bound does not hold; the list
        // kernel decides every point.
        const uint32_t p = p0 + threadIdx.x;
        if (p < n) unresolved[atomicAdd(unresolved_count, 1u)] = p;
        return;
    }
    extern __shared__ __align__(16) unsigned char smem_raw[];
    TcShared<BN> &s = *reinterpret_cast<TcShared<BN> *>(smem_raw);
    const int tid = threadIdx.x;
    const uint32_t lane = tid % 32;
    const int warp = tid / 32;
    const int g = lane / 4;
    const int t = lane % 4;
    const bool exclude_self = (flags & KILN_ANNEAL_EXCLUDE_SELF) != 0;
    // acc * inv2 is the dot product of the unscaled inputs (exact: a power of
    // two, in f32's normal range for |scale exponent| <= 60).
    const int scale_exp = half_scale_exp(half_state[KILN_ANNEAL_TC_STATE_ABSMAX]);
    const float inv2 = pow2(-2 * scale_exp);
    const float neg2inv2 = -2.f * inv2;
    // The subnormal term (assign_tc.rs): 2^-23 sqrt(d) (|x| + |c|) / sigma +
    // d 2^-48 / sigma^2, split into a point part and an anchor part.
    const float sub = 0x1p-23f * sqrtf(static_cast<float>(d)) * pow2(-scale_exp);
    {
        // s.xn: the centred |x'|^2 the epilogue reads (the refinement reads
        // the stored |x|^2 from x_norms).
        const uint32_t p = p0 + tid;
        s.xn[tid] = p < n ? x_norms_c[2 * static_cast<size_t>(p)] : 0.f;
        const float xq = p < n ? x_norms_c[2 * static_cast<size_t>(p) + 1] : 0.f;
        s.rx[tid] = 2.f * tc_eps(d) * xq;
        s.sx[tid] = fmaf(sub, xq, static_cast<float>(d) * 0x1p-48f * inv2) +
                    (p < n ? tc_row_slack(d, x_norms[p], half_state) : 0.f);
    }

    const uint32_t ktiles = dp / kBK;
    const uint32_t atiles = (m + kBN - 1) / kBN;
    const uint32_t total = atiles * ktiles;
    // Issues the loads of pipeline step `step` (anchor tile step / ktiles,
    // stage step % ktiles) into buffer step % kStages; rows past n or m read
    // the last row (their results are never used). Always commits a group.
    auto issue = [&](uint32_t step) {
        if (step < total) {
            const uint32_t tile = step / ktiles;
            const uint32_t k0 = (step - tile * ktiles) * kBK;
            const int buf = static_cast<int>(step % kStages);
#pragma unroll
            for (int r = 0; r < kBM * 4 / kThreads; ++r) {
                const int e = tid + r * kThreads;
                const int row = e / 4;
                const int q = e % 4;
                const uint32_t p = min(p0 + row, n - 1);
                cp_async16(&s.xs[buf][row][8 * q], xh + static_cast<size_t>(p) * dp + k0 + 8 * q);
            }
#pragma unroll
            for (int r = 0; r < kBN * 4 / kThreads; ++r) {
                const int e = tid + r * kThreads;
                const int row = e / 4;
                const int q = e % 4;
                const uint32_t a = min(tile * kBN + row, m - 1);
                cp_async16(&s.cs[buf][row][8 * q], ch + static_cast<size_t>(a) * dp + k0 + 8 * q);
            }
            if (k0 == 0 && tid < kBN) {
                // This tile's norms: read by its epilogue, at least one
                // barrier later; slot reuse is 4 tiles apart.
                const uint32_t a = tile * kBN + tid;
                s.cn[tile % kNormSlots][tid] = a < m ? anchor_norms_c[2 * static_cast<size_t>(a)] : 0.f;
                s.cq[tile % kNormSlots][tid] =
                    a < m ? anchor_norms_c[2 * static_cast<size_t>(a) + 1] : 0.f;
            }
        }
        cp_async_commit();
    };

    // Per point row r = mt * 2 + h of this thread (rows warp*32 + mt*16 +
    // h*8 + g), equal across its quad: the best upper bound so far and the
    // length of its candidate list (kOverflow once it overflowed).
    float upper[4];
    uint32_t listed[4];
#pragma unroll
    for (int r = 0; r < 4; ++r) {
        upper[r] = kInf;
        listed[r] = 0;
    }
    float acc[2][kNT][4];

#pragma unroll
    for (int st = 0; st < kStages - 1; ++st) issue(st);

    uint32_t tile = 0;
    uint32_t kt = 0;
#pragma unroll 1
    for (uint32_t step = 0; step < total; ++step) {
        cp_async_wait<kStages - 2>();
        __syncthreads();  // stage `step` landed; every warp is done with step - 1's buffer
        issue(step + kStages - 1);
        if (kt == 0) {
#pragma unroll
            for (int mt = 0; mt < 2; ++mt)
#pragma unroll
                for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
                    for (int i = 0; i < 4; ++i) acc[mt][nt][i] = 0.f;
        }
        const int buf = static_cast<int>(step % kStages);
#pragma unroll
        for (int ks = 0; ks < kBK; ks += 16) {
            uint32_t af[2][4];
#pragma unroll
            for (int mt = 0; mt < 2; ++mt)
                ldmatrix_x4(af[mt], &s.xs[buf][warp * 32 + mt * 16 + (lane % 16)][ks + (lane / 16) * 8]);
#pragma unroll
            for (int np = 0; np < kNT / 2; ++np) {
                uint32_t bf[4];
                ldmatrix_x4(bf, &s.cs[buf][np * 16 + (lane % 8) + (lane / 16) * 8]
                                     [ks + ((lane / 8) % 2) * 8]);
#pragma unroll
                for (int mt = 0; mt < 2; ++mt) {
                    mma_f16(acc[mt][2 * np], af[mt], bf[0], bf[1]);
                    mma_f16(acc[mt][2 * np + 1], af[mt], bf[2], bf[3]);
                }
            }
        }
        if (++kt < ktiles) continue;
        kt = 0;
        const uint32_t a0 = tile * kBN;
        const int slot = static_cast<int>(tile % kNormSlots);
        ++tile;
        // Uniform over the block: whether any pair of this tile can be
        // ineligible (an anchor past m, or with EXCLUDE_SELF a point's own
        // index among the tile's anchors). a0 < m: the differences cannot wrap.
        const bool checked_tile =
            m - a0 < static_cast<uint32_t>(kBN) ||
            (exclude_self && (a0 >= p0 ? a0 - p0 < static_cast<uint32_t>(kBM)
                                       : p0 - a0 < static_cast<uint32_t>(kBN)));

        // Epilogue, per point row (anneal_tc_device.cuh): the row's 32
        // accumulators of this lane become lower bounds, the quad's least
        // upper bound lowers the row's, and the anchors within it join the
        // row's list.
#pragma unroll
        for (int mt = 0; mt < 2; ++mt) {
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const int r = mt * 2 + h;
                const int row = warp * 32 + mt * 16 + h * 8 + g;
                auto v = [&](int i) -> float & { return acc[mt][i / 2][2 * h + i % 2]; };
                row_epilogue<2 * kNT>(v, checked_tile, s.cn[slot], s.cq[slot], t, s.xn[row], s.rx[row],
                             s.sx[row], sub, neg2inv2, a0, m, exclude_self, p0 + row,
                             p0 + row < n, &upper[r], &listed[r], s.cand_j[row],
                             s.cand_lb[row]);
            }
        }
    }
    cp_async_wait<0>();
    // s.xn (even when m == 0) and every list entry are visible to all lanes.
    __syncthreads();

    // Refinement, one point at a time per warp (anneal_tc_device.cuh).
    refine_rows(
        [&](int r, int gg) { return warp * 32 + (r / 2) * 16 + (r % 2) * 8 + gg; }, upper, listed,
        p0, n, x, anchors, anchor_norms, d, flags, x_norms, s.cand_j, s.cand_lb, lane, assign_out,
        dist_out, counts, unresolved, unresolved_count);
#else
    // No f16 mma.m16n8k16 or cp.async below sm_80: every point goes to the
    // exact list kernel.
    (void)x;
    (void)xh;
    (void)x_norms;
    (void)x_norms_c;
    (void)d;
    (void)dp;
    (void)anchors;
    (void)ch;
    (void)anchor_norms;
    (void)anchor_norms_c;
    (void)m;
    (void)flags;
    (void)half_state;
    (void)assign_out;
    (void)dist_out;
    (void)counts;
    const uint32_t p = p0 + threadIdx.x;
    if (threadIdx.x < kBM && p < n) unresolved[atomicAdd(unresolved_count, 1u)] = p;
#endif
}

}  // namespace

// The entry points of point type T (float, or uint16_t for f16 bits):
// anneal_column_sums_*, anneal_absmax_*, anneal_to_half_*, anneal_assign_tc_*,
// anneal_assign_list_*;
// nvcc checks each against its KILN_KERNEL declaration in anneal_tc.h.
// One tc entry point: BN anchors per anchor tile, `blocks` resident per SM.
#define KILN_ANNEAL_TC_ENTRY(name, T, BN, blocks)                                              \
    extern "C" __global__ void __launch_bounds__(kThreads, blocks)                             \
        name(const T *x, const uint16_t *xh, const float *x_norms, const float *x_norms_c,     \
             uint32_t n, uint32_t d, uint32_t dp, const float *anchors, const uint16_t *ch,    \
             const float *anchor_norms, const float *anchor_norms_c, uint32_t m,               \
             uint32_t flags, const uint32_t *half_state,                                       \
             const AnnealControl *control, uint32_t *assign_out, float *dist,                  \
             uint32_t *counts, uint32_t *unresolved, uint32_t *unresolved_count) {             \
        if (control->done) return; /* whole grid leaves */                                     \
        assign_tc<BN>(x, xh, x_norms, x_norms_c, n, d, dp, anchors, ch, anchor_norms,          \
                      anchor_norms_c, m, flags,                                                \
                      half_state, assign_out, dist, counts, unresolved, unresolved_count);     \
    }

#define KILN_ANNEAL_TC_ENTRIES(suffix, T)                                                      \
    extern "C" __global__ void __launch_bounds__(kSumThreads)                                  \
        anneal_column_sums_##suffix(const T *x, uint32_t rows, uint32_t d, float *sums) {      \
        column_sums(x, rows, d, sums);                                                         \
    }                                                                                          \
    KILN_KERNEL(anneal_absmax_##suffix, const T *x, uint32_t rows, uint32_t d,                 \
                const float *ref_sum, float ref_scale, uint32_t *half_state) {                 \
        absmax(x, rows, d, ref_sum, ref_scale, half_state);                                    \
    }                                                                                          \
    KILN_KERNEL(anneal_to_half_##suffix, const T *src, const float *norms, uint32_t rows,      \
                uint32_t d, uint32_t dp, const float *ref_sum, float ref_scale,                \
                uint32_t *half_state, uint32_t *norm_max, uint16_t *dst, float *norms_c) {     \
        to_half(src, norms, rows, d, dp, ref_sum, ref_scale, half_state, norm_max, dst,        \
                norms_c);                                                                      \
    }                                                                                          \
    KILN_ANNEAL_TC_ENTRY(anneal_assign_tc_##suffix, T, 128, 2)                                 \
    KILN_ANNEAL_TC_ENTRY(anneal_assign_tc_slim_##suffix, T, 64, 3)                             \
    extern "C" __global__ void __launch_bounds__(KILN_ANNEAL_LIST_THREADS)                     \
        anneal_assign_list_##suffix(const T *x, const float *x_norms, uint32_t d,              \
                                    const float *anchors, const float *anchor_norms,           \
                                    uint32_t m, uint32_t flags, const AnnealControl *control,  \
                                    const uint32_t *list, const uint32_t *list_count,          \
                                    uint64_t *best, uint32_t *assign, float *dist,             \
                                    uint32_t *counts, uint32_t *arrived) {                     \
        if (control->done) return;                                                             \
        assign_list_then_finish(x, x_norms, d, anchors, anchor_norms, m, flags, list,          \
                                list_count, reinterpret_cast<unsigned long long *>(best),      \
                                assign, dist, counts, arrived);                                \
    }

KILN_ANNEAL_TC_ENTRIES(f32, float)
KILN_ANNEAL_TC_ENTRIES(f16, uint16_t)

// Each anchor's nearest other anchor by the exact distance, on CUDA cores:
// block i takes anchor i, its warps every KILN_ANNEAL_NEIGHBORS_THREADS / 32
// -th batch of kNearBatch anchors (exact_dots, F's pinned order), and the
// least (F, index) pair packed as the list kernel packs it, whose minimum is
// the same whichever warp meets which anchor.
constexpr int kNearBatch = 8;
constexpr uint32_t kNearWarps = KILN_ANNEAL_NEIGHBORS_THREADS / 32;

extern "C" __global__ void __launch_bounds__(KILN_ANNEAL_NEIGHBORS_THREADS)
    anneal_neighbors_exact(const float *anchors, const float *norms, uint32_t m, uint32_t d,
                           uint32_t *neighbors, float *dist) {
    __shared__ unsigned long long warp_best[kNearWarps];
    const uint32_t i = blockIdx.x;
    if (i >= m) return;  // whole block leaves
    const uint32_t lane = threadIdx.x % 32;
    const uint32_t warp = threadIdx.x / 32;
    const float *row = anchors + static_cast<size_t>(i) * d;
    const float xn = norms[i];
    unsigned long long best = ~0ull;  // none eligible yet
    for (uint32_t j0 = warp * kNearBatch; j0 < m; j0 += kNearWarps * kNearBatch) {
        uint32_t js[kNearBatch];
#pragma unroll
        for (int b = 0; b < kNearBatch; ++b) js[b] = min(j0 + b, m - 1);
        float dot[kNearBatch];
        exact_dots<kNearBatch>(row, anchors, js, d, lane, dot);
#pragma unroll
        for (int b = 0; b < kNearBatch; ++b) {
            const uint32_t j = j0 + b;
            if (j >= m || j == i) continue;
            const float f = exact_dist(xn, norms[j], dot[b]) + 0.f;  // -0 -> +0
            best = min(best, (static_cast<unsigned long long>(__float_as_uint(f)) << 32) | j);
        }
    }
    if (lane == 0) warp_best[warp] = best;
    __syncthreads();
    if (threadIdx.x == 0) {
        for (uint32_t w = 0; w < kNearWarps; ++w) best = min(best, warp_best[w]);
        const bool none = best == ~0ull;
        neighbors[i] = none ? kNone : static_cast<uint32_t>(best & 0xffffffffu);
        dist[i] = none ? kInf : __uint_as_float(static_cast<uint32_t>(best >> 32));
    }
}
