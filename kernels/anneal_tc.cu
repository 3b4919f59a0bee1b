// anneal_tc: the anchor assignment on tensor cores (TF32 mma.sync, FP32
// accumulate) with exact refinement, and the exact list assignment that
// finishes the points it could not resolve. Contract in anneal_tc.h; design,
// error bound and speed estimate in crates/apps/src/anneal/assign_tc.rs.
#include <cuda_fp16.h>

#include "anneal_tc.h"

namespace {

constexpr uint32_t kFullMask = 0xffffffffu;
constexpr float kInf = __builtin_huge_valf();
constexpr uint32_t kNone = 0xffffffffu;

__device__ __forceinline__ float load(const float *p, size_t i) { return p[i]; }
__device__ __forceinline__ float load(const uint16_t *p, size_t i) {
    return __half2float(__ushort_as_half(p[i]));
}

// ---------------------------------------------------------------------------
// The exact f32 distance, one computation for both kernels (anneal_tc.h):
// lane l sums k = l, l + 32, ... with fmaf from 0, an xor butterfly adds the
// partial sums (every lane ends with the same bits: a + b == b + a), then
// max(fmaf(-2, dot, xn + cn), 0). B anchors at once, for memory parallelism;
// each anchor's sum is the same whatever B and its slot.

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

// ---------------------------------------------------------------------------
// List: one warp per listed point, grid-stride over the list, anchors four at
// a time in increasing index order (strict `<` keeps the lowest index).

template <typename T>
__device__ void assign_list(const T *__restrict__ x, const float *__restrict__ x_norms, uint32_t d,
                            const float *__restrict__ anchors,
                            const float *__restrict__ anchor_norms, uint32_t m, uint32_t flags,
                            const uint32_t *__restrict__ list,
                            const uint32_t *__restrict__ list_count,
                            uint32_t *__restrict__ assign_out, float *__restrict__ dist_out,
                            uint32_t *__restrict__ counts) {
    const uint32_t lane = threadIdx.x % 32;
    const uint32_t warps = gridDim.x * (blockDim.x / 32);
    const bool exclude_self = (flags & KILN_ANNEAL_EXCLUDE_SELF) != 0;
    const uint32_t count = *list_count;
    for (uint32_t i = (blockIdx.x * blockDim.x + threadIdx.x) / 32; i < count; i += warps) {
        const uint32_t p = list[i];
        const float xn = x_norms[p];
        const T *xrow = x + static_cast<size_t>(p) * d;
        float best = kInf;
        uint32_t best_j = kNone;
        for (uint32_t j0 = 0; j0 < m; j0 += 4) {
            uint32_t js[4];
#pragma unroll
            for (int b = 0; b < 4; ++b) js[b] = min(j0 + b, m - 1);
            float dots[4];
            exact_dots<4>(xrow, anchors, js, d, lane, dots);
#pragma unroll
            for (int b = 0; b < 4; ++b) {
                const uint32_t j = j0 + b;
                if (j >= m || (exclude_self && j == p)) continue;
                const float f = exact_dist(xn, anchor_norms[j], dots[b]);
                if (f < best) {
                    best = f;
                    best_j = j;
                }
            }
        }
        if (lane == 0) {
            assign_out[p] = best_j;
            dist_out[p] = best;
            if ((flags & KILN_ANNEAL_COUNT) != 0 && best_j < m) atomicAdd(&counts[best_j], 1u);
        }
    }
}

// ---------------------------------------------------------------------------
// Tensor cores. A block of 4 warps takes 128 points; warp w owns points
// w*32 .. w*32+31 and meets every anchor, 64 per anchor tile, so each point's
// state stays inside one warp. Per anchor tile the warp's 32 x 64 dot
// products are 2 (m16) x 8 (n8) mma.sync.m16n8k8 TF32 accumulators (64 f32
// per thread), d consumed 32 at a time through shared memory, where points
// and anchors land already rounded to TF32 (cvt.rna).
//
// mma.m16n8k8 fragments (g = lane / 4, t = lane % 4), PTX ISA:
//   A (16 x 8, row): a0 (g, t), a1 (g + 8, t), a2 (g, t + 4), a3 (g + 8, t + 4)
//   B (8 x 8, col):  b0 (k t, n g), b1 (k t + 4, n g)
//   C (16 x 8):      c0 (g, 2t), c1 (g, 2t + 1), c2 (g + 8, 2t), c3 (g + 8, 2t + 1)
// so the 4 lanes of a quad hold one point row (16 of the 64 anchors each).

constexpr int kThreads = KILN_ANNEAL_TC_THREADS;
constexpr int kBM = KILN_ANNEAL_TC_TILE;  // points per block
constexpr int kBN = 64;                   // anchors per anchor tile
constexpr int kBK = 32;                   // d per shared stage
constexpr int kStride = kBK + 4;          // fragment reads (4g + t) hit 32 distinct banks
constexpr uint32_t kK = KILN_ANNEAL_TC_CANDIDATES;
static_assert(kBM == kThreads, "one thread per point row initialises the row data");
static_assert(kBM == 32 * (kThreads / 32), "each warp owns 32 points");

struct TcShared {
    uint32_t xs[kBM][kStride];  // points x k, TF32 bits
    uint32_t cs[kBN][kStride];  // anchors x k, TF32 bits
    float cn[kBN];              // |c|^2 of the anchor tile
    float cq[kBN];              // |c| of the anchor tile
    float xn[kBM];              // |x|^2 of the block's points
    float rx[kBM];              // 2 eps(d) |x|
    uint32_t cand_j[kBM][kK];   // candidates per point: anchor index
    float cand_lb[kBM][kK];     //                       and lower bound
};
static_assert(sizeof(TcShared) <= 48 * 1024, "static shared memory limit");

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
constexpr uint32_t kOverflow = kK + 1;  // a row's list length once it overflowed
// f32 slack of the norms' combination (see assign_tc.rs): 2^-20 (|x|^2 + |c|^2).
constexpr float kCombineSlack = 0x1p-20f;

__device__ __forceinline__ uint32_t to_tf32(float v) {
    uint32_t r;
    asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(v));
    return r;
}

__device__ __forceinline__ void mma_tf32(float (&c)[4], const uint32_t (&a)[4], uint32_t b0,
                                         uint32_t b1) {
    asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// The bound's eps(d) (assign_tc.rs derives it): TF32 rounding of both
// inputs, ceil(d/8) tensor-core accumulation steps, the f32 refinement's own
// rounding, each taken twice.
__device__ __forceinline__ float tc_eps(uint32_t d) {
    const float steps = static_cast<float>(d / 8u + (d % 8u != 0u));
    return 0x1p-9f + steps * 0x1p-17f + (static_cast<float>(d) + 8.f) * 0x1p-23f;
}

// Rows whose 4 consecutive values can be read as one vector: d a multiple of
// 4 and the base aligned to 4 elements (every row start then is too).
template <typename T>
__device__ __forceinline__ bool rows_vectorizable(const T *p, uint32_t d) {
    return d % 4u == 0u && reinterpret_cast<uintptr_t>(p) % (4 * sizeof(T)) == 0;
}

__device__ __forceinline__ void load4(const float *p, size_t i, float (&v)[4]) {
    const float4 q = *reinterpret_cast<const float4 *>(p + i);
    v[0] = q.x;
    v[1] = q.y;
    v[2] = q.z;
    v[3] = q.w;
}
__device__ __forceinline__ void load4(const uint16_t *p, size_t i, float (&v)[4]) {
    const uint2 q = *reinterpret_cast<const uint2 *>(p + i);
    v[0] = __half2float(__ushort_as_half(static_cast<unsigned short>(q.x & 0xffffu)));
    v[1] = __half2float(__ushort_as_half(static_cast<unsigned short>(q.x >> 16)));
    v[2] = __half2float(__ushort_as_half(static_cast<unsigned short>(q.y & 0xffffu)));
    v[3] = __half2float(__ushort_as_half(static_cast<unsigned short>(q.y >> 16)));
}

// Rows [row0, row0 + ROWS) x columns [k0, k0 + kBK) of a row-major rows x d
// matrix into dst as TF32 bits, zero outside the matrix.
template <int ROWS, typename T>
__device__ __forceinline__ void stage(uint32_t (*dst)[kStride], const T *__restrict__ src,
                                      uint32_t row0, uint32_t rows, uint32_t d, uint32_t k0,
                                      bool vec) {
    if (vec) {
        // 8 threads per row, 4 values each: one 128-byte row segment per 8 lanes.
#pragma unroll
        for (int r = 0; r < ROWS * kBK / 4 / kThreads; ++r) {
            const int e = threadIdx.x + r * kThreads;
            const int row = e / (kBK / 4);
            const int q = e % (kBK / 4);
            const uint32_t gr = row0 + row;
            const uint32_t k = k0 + 4 * q;
            float v[4] = {0.f, 0.f, 0.f, 0.f};
            if (gr < rows && k < d) load4(src, static_cast<size_t>(gr) * d + k, v);
            uint4 w;
            w.x = to_tf32(v[0]);
            w.y = to_tf32(v[1]);
            w.z = to_tf32(v[2]);
            w.w = to_tf32(v[3]);
            *reinterpret_cast<uint4 *>(&dst[row][4 * q]) = w;
        }
    } else {
        // A warp per row segment of 32 values.
#pragma unroll 8
        for (int r = 0; r < ROWS * kBK / kThreads; ++r) {
            const int e = threadIdx.x + r * kThreads;
            const int row = e / kBK;
            const int kk = e % kBK;
            const uint32_t gr = row0 + row;
            const uint32_t k = k0 + kk;
            const float v = (gr < rows && k < d) ? load(src, static_cast<size_t>(gr) * d + k) : 0.f;
            dst[row][kk] = to_tf32(v);
        }
    }
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
#endif

template <typename T>
__device__ void assign_tc(const T *__restrict__ x, const float *__restrict__ x_norms, uint32_t n,
                          uint32_t d, const float *__restrict__ anchors,
                          const float *__restrict__ anchor_norms, uint32_t m, uint32_t flags,
                          uint32_t *__restrict__ assign_out, float *__restrict__ dist_out,
                          uint32_t *__restrict__ counts, uint32_t *__restrict__ unresolved,
                          uint32_t *__restrict__ unresolved_count) {
    const uint32_t p0 = blockIdx.x * kBM;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    __shared__ __align__(16) TcShared s;
    const int tid = threadIdx.x;
    const uint32_t lane = tid % 32;
    const int warp = tid / 32;
    const int g = lane / 4;
    const int t = lane % 4;
    const bool exclude_self = (flags & KILN_ANNEAL_EXCLUDE_SELF) != 0;
    const bool vec_x = rows_vectorizable(x, d);
    const bool vec_c = rows_vectorizable(anchors, d);
    {
        const uint32_t p = p0 + tid;
        const float xn = p < n ? x_norms[p] : 0.f;
        s.xn[tid] = xn;
        s.rx[tid] = 2.f * tc_eps(d) * sqrtf(xn);
    }

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

#pragma unroll 1
    for (uint32_t a0 = 0; a0 < m; a0 += kBN) {
        __syncthreads();  // the previous tile's epilogue is done with cn, cq
        if (tid < kBN) {
            const uint32_t a = a0 + tid;
            const float cn = a < m ? anchor_norms[a] : 0.f;
            s.cn[tid] = cn;
            s.cq[tid] = sqrtf(cn);
        }
        __syncthreads();

        float acc[2][8][4];
#pragma unroll
        for (int mt = 0; mt < 2; ++mt)
#pragma unroll
            for (int nt = 0; nt < 8; ++nt)
#pragma unroll
                for (int i = 0; i < 4; ++i) acc[mt][nt][i] = 0.f;

#pragma unroll 1
        for (uint32_t k0 = 0; k0 < d; k0 += kBK) {
            stage<kBM>(s.xs, x, p0, n, d, k0, vec_x);
            stage<kBN>(s.cs, anchors, a0, m, d, k0, vec_c);
            __syncthreads();
#pragma unroll
            for (int ks = 0; ks < kBK; ks += 8) {
                uint32_t af[2][4];
#pragma unroll
                for (int mt = 0; mt < 2; ++mt) {
                    const int r = warp * 32 + mt * 16 + g;
                    af[mt][0] = s.xs[r][ks + t];
                    af[mt][1] = s.xs[r + 8][ks + t];
                    af[mt][2] = s.xs[r][ks + t + 4];
                    af[mt][3] = s.xs[r + 8][ks + t + 4];
                }
#pragma unroll
                for (int nt = 0; nt < 8; ++nt) {
                    const uint32_t b0 = s.cs[nt * 8 + g][ks + t];
                    const uint32_t b1 = s.cs[nt * 8 + g][ks + t + 4];
#pragma unroll
                    for (int mt = 0; mt < 2; ++mt) mma_tf32(acc[mt][nt], af[mt], b0, b1);
                }
            }
            __syncthreads();
        }

        // Epilogue, per point row: bounds of the 16 anchors this lane holds,
        // the quad's best upper bound, then the anchors whose lower bound is
        // within it join the row's list (pruned by the current bound when full).
#pragma unroll
        for (int mt = 0; mt < 2; ++mt) {
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const int r = mt * 2 + h;
                const int row = warp * 32 + mt * 16 + h * 8 + g;
                const uint32_t p = p0 + row;
                const float xn = s.xn[row];
                const float rx = s.rx[row];
                float best_upper = kInf;
#pragma unroll
                for (int nt = 0; nt < 8; ++nt) {
#pragma unroll
                    for (int c = 0; c < 2; ++c) {
                        const int col = nt * 8 + 2 * t + c;
                        const uint32_t a = a0 + col;
                        const float sum = xn + s.cn[col];
                        const float approx = fmaxf(fmaf(-2.f, acc[mt][nt][2 * h + c], sum), 0.f);
                        const float err = fmaf(rx, s.cq[col], sum * kCombineSlack);
                        const bool eligible = a < m && !(exclude_self && a == p);
                        if (eligible) best_upper = fminf(best_upper, approx + err);
                        // The accumulator is done: it keeps the lower bound.
                        acc[mt][nt][2 * h + c] = eligible ? approx - err : kInf;
                    }
                }
                best_upper = fminf(best_upper, __shfl_xor_sync(kFullMask, best_upper, 1));
                best_upper = fminf(best_upper, __shfl_xor_sync(kFullMask, best_upper, 2));
                upper[r] = fminf(upper[r], best_upper);

                const bool live = p < n && listed[r] <= kK;
                uint32_t mask = 0;
#pragma unroll
                for (int nt = 0; nt < 8; ++nt)
#pragma unroll
                    for (int c = 0; c < 2; ++c)
                        if (live && acc[mt][nt][2 * h + c] <= upper[r]) mask |= 1u << (2 * nt + c);
                if (!__any_sync(kFullMask, mask != 0)) continue;

                // Slots of this lane's new entries: a scan over the quad.
                const uint32_t mine = __popc(mask);
                uint32_t through = mine;
                uint32_t up = __shfl_up_sync(kFullMask, through, 1, 4);
                if (t >= 1) through += up;
                up = __shfl_up_sync(kFullMask, through, 2, 4);
                if (t >= 2) through += up;
                const uint32_t added = __shfl_sync(kFullMask, through, 3, 4);
                const bool full = live && listed[r] + added > kK;
                if (__any_sync(kFullMask, full)) {
                    __syncwarp();  // the quad's earlier entries are visible
                    uint32_t kept = listed[r];
                    if (full && t == 0) kept = prune(s.cand_j[row], s.cand_lb[row], kept, upper[r]);
                    listed[r] = __shfl_sync(kFullMask, kept, 0, 4);
                    __syncwarp();  // compaction done before new entries land
                }
                if (live) {
                    if (listed[r] + added > kK) {
                        listed[r] = kOverflow;
                    } else {
                        uint32_t slot = listed[r] + through - mine;
#pragma unroll
                        for (int nt = 0; nt < 8; ++nt) {
#pragma unroll
                            for (int c = 0; c < 2; ++c) {
                                if ((mask >> (2 * nt + c)) & 1u) {
                                    s.cand_j[row][slot] = a0 + nt * 8 + 2 * t + c;
                                    s.cand_lb[row][slot] = acc[mt][nt][2 * h + c];
                                    ++slot;
                                }
                            }
                        }
                        listed[r] += added;
                    }
                }
            }
        }
    }
    // s.xn (even when m == 0) and every list entry are visible to all lanes.
    __syncthreads();

    // Refinement, one point at a time per warp: lane i < count holds entry i;
    // survivors (lower bound within the final upper bound) get the exact
    // distance, four at a time; the least wins, ties to the lowest index.
#pragma unroll
    for (int r = 0; r < 4; ++r) {
#pragma unroll 1
        for (int gg = 0; gg < 8; ++gg) {
            const int row = warp * 32 + (r / 2) * 16 + (r % 2) * 8 + gg;
            const uint32_t p = p0 + row;
            const float u = __shfl_sync(kFullMask, upper[r], 4 * gg);
            const uint32_t count = __shfl_sync(kFullMask, listed[r], 4 * gg);
            if (p >= n) continue;  // uniform over the warp
            float best = kInf;
            uint32_t best_j = kNone;
            if (count >= 1 && count <= kK) {
                uint32_t my_j = 0;
                float my_lb = kInf;
                if (lane < count) {
                    my_j = s.cand_j[row][lane];
                    my_lb = s.cand_lb[row][lane];
                }
                uint32_t alive = __ballot_sync(kFullMask, lane < count && my_lb <= u);
                const T *xrow = x + static_cast<size_t>(p) * d;
                const float xn = s.xn[row];
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
                    float dots[4];
                    exact_dots<4>(xrow, anchors, js, d, lane, dots);
#pragma unroll
                    for (int b = 0; b < 4; ++b) {
                        if (!use[b]) continue;
                        const float f = exact_dist(xn, anchor_norms[js[b]], dots[b]);
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
                    // Overflowed, or no anchor could be bounded (none
                    // eligible, or non-finite input): the list kernel decides.
                    unresolved[atomicAdd(unresolved_count, 1u)] = p;
                }
            }
        }
    }
#else
    // No TF32 mma below sm_80: every point goes to the exact list kernel.
    (void)x;
    (void)x_norms;
    (void)d;
    (void)anchors;
    (void)anchor_norms;
    (void)m;
    (void)flags;
    (void)assign_out;
    (void)dist_out;
    (void)counts;
    const uint32_t p = p0 + threadIdx.x;
    if (threadIdx.x < kBM && p < n) unresolved[atomicAdd(unresolved_count, 1u)] = p;
#endif
}

}  // namespace

// The entry points anneal_assign_tc_f32, anneal_assign_list_f32 (T = float)
// and anneal_assign_tc_f16, anneal_assign_list_f16 (T = uint16_t, f16 bits);
// nvcc checks each against its KILN_KERNEL declaration in anneal_tc.h.
#define KILN_ANNEAL_TC_ENTRIES(suffix, T)                                                      \
    extern "C" __global__ void __launch_bounds__(kThreads) anneal_assign_tc_##suffix(           \
        const T *x, const float *x_norms, uint32_t n, uint32_t d, const float *anchors,        \
        const float *anchor_norms, uint32_t m, uint32_t flags, const AnnealControl *control,   \
        uint32_t *assign_out, float *dist, uint32_t *counts, uint32_t *unresolved,             \
        uint32_t *unresolved_count) {                                                          \
        if (control->done) return; /* whole grid leaves */                                     \
        assign_tc(x, x_norms, n, d, anchors, anchor_norms, m, flags, assign_out, dist, counts, \
                  unresolved, unresolved_count);                                               \
    }                                                                                          \
    extern "C" __global__ void __launch_bounds__(KILN_ANNEAL_LIST_THREADS)                     \
        anneal_assign_list_##suffix(const T *x, const float *x_norms, uint32_t d,              \
                                    const float *anchors, const float *anchor_norms,           \
                                    uint32_t m, uint32_t flags, const AnnealControl *control,  \
                                    const uint32_t *list, const uint32_t *list_count,          \
                                    uint32_t *assign_out, float *dist, uint32_t *counts) {     \
        if (control->done) return;                                                             \
        assign_list(x, x_norms, d, anchors, anchor_norms, m, flags, list, list_count,          \
                    assign_out, dist, counts);                                                 \
    }

KILN_ANNEAL_TC_ENTRIES(f32, float)
KILN_ANNEAL_TC_ENTRIES(f16, uint16_t)
