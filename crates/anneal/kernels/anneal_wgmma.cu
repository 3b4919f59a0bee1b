// anneal_wgmma: the exact anchor assignment of anneal_tc.cu on Hopper's
// warpgroup tensor-core instructions (wgmma.mma_async, f16 inputs, f32
// accumulate, both operands from shared memory), fed by a producer
// warpgroup through an mbarrier pipeline. Contract in anneal_wgmma.h; the
// bound and the refinement are anneal_tc.cu's (crates/anneal/src/assign_tc.rs).
#include "anneal_tc_device.cuh"
#include "anneal_wgmma.h"

namespace {

// The exact distance, the f16 scale, eps(d), the per-row epilogue and the
// refinement are anneal_tc.cu's (anneal_tc_device.cuh): the same bits.
using namespace kiln_tc;

constexpr int kBK = 64;          // halves of d per stage: one 128-byte swizzled row
constexpr int kNormSlots = 8;    // anchor-norm buffers, by anchor tile mod 8
// Entries of a point row's candidate list while the anchor tiles go by:
// twice the KILN_ANNEAL_TC_CANDIDATES the refinement takes, since the final
// bound prunes the list before it is written. A row overflows only when
// more than kWgK entries meet the bound of their moment, or more than kK
// survive the final one. (With kK here, 2.07% of offset 1M x 768 x 4096's
// points overflowed; with 16, 0.04-0.45%: H200, 2026-11-29. The entries
// cost a stage of the ring: 4, not 5, which alone was as fast.)
constexpr uint32_t kWgK = 2 * kK;
constexpr int kStages = 4;

// Block: one producer warpgroup (cp.async of the f16 tiles into 128-byte
// swizzled shared memory, and the anchor norms), CWG consumer warpgroups of
// 64 points each; consumer c's warp w owns points c*64 + w*16 .. +16 and meets
// every anchor, BN per anchor tile, so each point's state stays in one warp.
// The stage ring: full[s] completes when the producer's 128 threads' copies
// of stage s landed (cp.async.mbarrier.arrive.noinc) and their norm stores
// are released (mbarrier.arrive), 256 arrivals; empty[s] when every consumer
// warp's wgmma reading stage s is done, 4 * CWG arrivals.
template <int BN, int CWG, int STAGES>
struct WgShared {
    static constexpr int kBM = 64 * CWG;
    alignas(1024) uint16_t xs[STAGES][kBM * kBK];  // points x k, swizzled rows of 128 bytes
    alignas(1024) uint16_t cs[STAGES][BN * kBK];   // anchors x k, the same
    unsigned long long full[STAGES];
    unsigned long long empty[STAGES];
    uint32_t cand_j[kBM][kWgK];  // candidates per point: anchor index
    float cand_lb[kBM][kWgK];    //                       and lower bound
    float xn[kBM];             // |x|^2 of the block's points
    float rx[kBM];             // 2 eps(d) |x|
    float sx[kBM];             // the subnormal term of the point
    float cn[kNormSlots][BN];  // |c|^2 of an anchor tile
    float cq[kNormSlots][BN];  // |c| of an anchor tile
};
static_assert(sizeof(WgShared<128, 3, kStages>) + 1024 <= KILN_ANNEAL_WGMMA_SMEM,
              "anneal_wgmma.h's shared memory size");

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900 && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define KILN_WGMMA_ON 1

__device__ __forceinline__ uint32_t smem_addr(const void *p) {
    return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// 16 bytes global -> shared; src_bytes 0 writes zeros (the row's padding
// past dp within a 64-half stage).
__device__ __forceinline__ void cp_async16(uint32_t dst, const void *src, uint32_t src_bytes) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src),
                 "r"(src_bytes)
                 : "memory");
}
__device__ __forceinline__ void mbar_init(uint32_t bar, uint32_t count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_arrive(uint32_t bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}
// Arrives once every cp.async this thread issued so far has landed.
__device__ __forceinline__ void mbar_arrive_cp_async(uint32_t bar) {
    asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(bar) : "memory");
}
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity) {
    asm volatile(
        "{\n.reg .pred p;\nWAIT:\n"
        "mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n"
        "@!p bra WAIT;\n}\n" ::"r"(bar),
        "r"(parity)
        : "memory");
}

// Shared-memory matrix descriptor (PTX ISA, wgmma): start address, leading
// byte offset 16 (unused by K-major swizzled layouts), stride byte offset
// 1024 (one 8-row group of 128-byte rows), 128-byte swizzle.
__device__ __forceinline__ uint64_t smem_desc(uint32_t addr) {
    return static_cast<uint64_t>((addr & 0x3ffffu) >> 4) | (static_cast<uint64_t>(1) << 16) |
           (static_cast<uint64_t>(1024 >> 4) << 32) | (static_cast<uint64_t>(1) << 62);
}

__device__ __forceinline__ void wg_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wg_commit() {
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
template <int N>
__device__ __forceinline__ void wg_wait() {
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
template <uint32_t R>
__device__ __forceinline__ void reg_alloc() {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(R));
}
template <uint32_t R>
__device__ __forceinline__ void reg_dealloc() {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(R));
}

// wgmma m64n128k16, f32 += f16 x f16, both operands K-major in shared
// memory (128-byte swizzle); scale_d = 0 overwrites the accumulator.
__device__ __forceinline__ void wgmma_n128(float (&d)[64], uint64_t desc_a, uint64_t desc_b,
                                          uint32_t scale_d) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, %64, %65, p, 1, 1, 0, 0;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
          "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
          "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
          "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
          "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
          "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
          "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
        : "l"(desc_a), "l"(desc_b), "r"(scale_d));
}

template <int BN>
__device__ __forceinline__ void wgmma_bn(float (&d)[BN / 2], uint64_t a, uint64_t b, uint32_t s) {
    static_assert(BN == 128, "m64n128k16 only (256-anchor tiles: docs/bench/2026-11-27-wgmma)");
    wgmma_n128(d, a, b, s);
}
#endif

// Marks the lists of the block's points overflowed: the list kernel decides them.
__device__ __forceinline__ void mark_overflowed(uint32_t *__restrict__ lists, uint32_t p0,
                                                uint32_t rows, uint32_t n) {
    for (uint32_t r = threadIdx.x; r < rows; r += blockDim.x)
        if (p0 + r < n)
            lists[static_cast<size_t>(p0 + r) * KILN_ANNEAL_WGMMA_LIST_WORDS] = kOverflow;
}

template <int BN, int CWG, int STAGES, int CHUNK>
__device__ void assign_wgmma(const uint16_t *__restrict__ xh, const float *__restrict__ x_norms,
                             const float *__restrict__ x_norms_c, uint32_t n, uint32_t d,
                             uint32_t dp, const uint16_t *__restrict__ ch,
                             const float *__restrict__ anchor_norms_c, uint32_t m, uint32_t flags,
                             const uint32_t *__restrict__ half_state,
                             uint32_t *__restrict__ lists, float *__restrict__ dump) {
    using Shared = WgShared<BN, CWG, STAGES>;
    constexpr int kBM = Shared::kBM;
    // setmaxnreg moves registers only within the block's allocation at
    // launch: ptxas gives a kernel with setmaxnreg the launch bound's cap,
    // 64K / threads rounded down to 8 per thread. The producer keeps
    // kProducerRegs, the consumers share the rest (at most 232); asking for
    // more than the block holds would block setmaxnreg.inc forever.
    constexpr uint32_t kThreadsAll = 128u * (CWG + 1);
    constexpr uint32_t kEntryRegs = 65536u / kThreadsAll / 8u * 8u;
    constexpr uint32_t kProducerRegs = CWG >= 4 ? 24u : 40u;
    constexpr uint32_t kShare =
        (kEntryRegs * kThreadsAll - kProducerRegs * 128u) / (128u * CWG) / 8u * 8u;
    constexpr uint32_t kConsumerRegs = kShare > 232u ? 232u : kShare;
    static_assert(kConsumerRegs >= kEntryRegs, "setmaxnreg.inc never lowers");
    static_assert(kNormSlots > STAGES, "the producer never reaches a norm slot still read");
    static_assert(BN <= 128 * 2 && kBM <= 128 * 3, "one producer warpgroup");
    // CHUNK > 0: the products are summed CHUNK stages (CHUNK * kBK / 16
    // wgmma steps) at a time into a fresh accumulator, and the chunks' sums
    // added in f32 into a second register set, so the bound's accumulation
    // term is that of one chunk, not of all of d (tc_eps_chunked).
    static_assert(CHUNK >= 0, "stages per chunk");
    [[maybe_unused]] constexpr uint32_t kChunkSteps = CHUNK > 0 ? static_cast<uint32_t>(CHUNK * kBK / 16) : 0u;
    const uint32_t p0 = blockIdx.x * kBM;
    const int tid = threadIdx.x;
#ifdef KILN_WGMMA_ON
    constexpr int kNT = BN / 8;  // n8 column groups per accumulator row
    if (n == 0u) return;
    if (half_state[KILN_ANNEAL_TC_STATE_OVERFLOW] != 0u) {
        // An anchor left the f16 range: the list kernel decides every point.
        mark_overflowed(lists, p0, kBM, n);
        return;
    }
    extern __shared__ unsigned char smem_raw[];
    // The swizzle is a function of the address: tiles start on 1024 bytes.
    unsigned char *base = smem_raw + ((1024u - (smem_addr(smem_raw) & 1023u)) & 1023u);
    Shared &s = *reinterpret_cast<Shared *>(base);
    const bool exclude_self = (flags & KILN_ANNEAL_EXCLUDE_SELF) != 0;
    const int scale_exp = half_scale_exp(half_state[KILN_ANNEAL_TC_STATE_ABSMAX]);
    const float inv2 = pow2(-2 * scale_exp);
    const float neg2inv2 = -2.f * inv2;
    const float sub = 0x1p-23f * sqrtf(static_cast<float>(d)) * pow2(-scale_exp);
    // The point rows' data: s.xn, the centred |x'|^2 the epilogue reads (the
    // refinement reads the stored |x|^2 from x_norms), s.rx and s.sx.
    auto row_data = [&](int r) {
        const uint32_t p = p0 + r;
        s.xn[r] = p < n ? x_norms_c[2 * static_cast<size_t>(p)] : 0.f;
        const float xq = p < n ? x_norms_c[2 * static_cast<size_t>(p) + 1] : 0.f;
        s.rx[r] = 2.f * (CHUNK > 0 ? tc_eps_chunked(d, kChunkSteps) : tc_eps(d)) * xq;
        s.sx[r] = fmaf(sub, xq, static_cast<float>(d) * 0x1p-48f * inv2) +
                  (p < n ? tc_row_slack(d, x_norms[p], half_state) : 0.f);
    };
    // The chunked kernel makes them first, with every thread (its spills
    // are the audit's budget); the other, per consumer warpgroup below.
    if constexpr (CHUNK > 0)
        for (int r = tid; r < kBM; r += blockDim.x) row_data(r);
    if (tid == 0) {
        for (int st = 0; st < STAGES; ++st) {
            mbar_init(smem_addr(&s.full[st]), 256u);
            mbar_init(smem_addr(&s.empty[st]), 4u * CWG);
        }
    }
    __syncthreads();

    const uint32_t ktiles = dp / kBK + (dp % kBK != 0u);
    const uint32_t atiles = (m + BN - 1) / BN;
    const uint32_t total = atiles * ktiles;
    const int wg = tid / 128;
    const int wtid = tid % 128;

    if (wg == 0) {
        // Producer. Thread wtid copies chunk q = wtid % 8 (16 bytes) of rows
        // wtid / 8 + 16 r, stored at chunk q ^ (row % 8) of the row (the
        // 128-byte swizzle the descriptors name; row % 8 is the same for all r).
        reg_dealloc<kProducerRegs>();
        const int q = wtid % 8;
        const int row0 = wtid / 8;
        const uint32_t dst0 = row0 * 128 + ((q ^ (row0 % 8)) << 4);
        for (uint32_t step = 0; step < total; ++step) {
            const int st = static_cast<int>(step % STAGES);
            mbar_wait(smem_addr(&s.empty[st]), ((step / STAGES) & 1u) ^ 1u);
            const uint32_t tile = step / ktiles;
            const uint32_t k0 = (step - tile * ktiles) * kBK;
            const uint32_t k = k0 + 8 * q;
            const uint32_t kk = k < dp ? k : 0u;
            const uint32_t bytes = k < dp ? 16u : 0u;
            const uint32_t xs0 = smem_addr(&s.xs[st][0]) + dst0;
            const uint32_t cs0 = smem_addr(&s.cs[st][0]) + dst0;
#pragma unroll
            for (int r = 0; r < kBM / 16; ++r) {
                const uint32_t p = min(p0 + row0 + 16 * r, n - 1);
                cp_async16(xs0 + r * 2048, xh + static_cast<size_t>(p) * dp + kk, bytes);
            }
#pragma unroll
            for (int r = 0; r < BN / 16; ++r) {
                const uint32_t a = min(tile * BN + row0 + 16 * r, m - 1);
                cp_async16(cs0 + r * 2048, ch + static_cast<size_t>(a) * dp + kk, bytes);
            }
            mbar_arrive_cp_async(smem_addr(&s.full[st]));
            if (k0 == 0) {
                // This tile's norms, released to the consumers by the arrive
                // below; read in the tile's epilogue.
                for (int c = wtid; c < BN; c += 128) {
                    const uint32_t a = tile * BN + c;
                    const size_t at = 2 * static_cast<size_t>(a);
                    s.cn[tile % kNormSlots][c] = a < m ? anchor_norms_c[at] : 0.f;
                    s.cq[tile % kNormSlots][c] = a < m ? anchor_norms_c[at + 1] : 0.f;
                }
            }
            mbar_arrive(smem_addr(&s.full[st]));
        }
        asm volatile("cp.async.wait_all;\n" ::: "memory");
        return;
    }

    // Consumer warpgroup c = wg - 1: 64 points, rows c*64 + w*16 + h*8 + g
    // of this thread (w = warp in the group, g = lane / 4, h = 0, 1).
    // Registers: the producer's 40 per thread go to the consumers, within 64K.
    reg_alloc<kConsumerRegs>();
    const int c = wg - 1;
    // This warpgroup's 64 point rows' data, which only its epilogues read,
    // made while the producer's first stages load (the block waited for
    // their loads before the producer began: 11% of the kernel's stall
    // samples at 10K x 128 x 256 on the H200). Named barrier 1 + c: the
    // warpgroup's 128 threads.
    if constexpr (CHUNK == 0) {
        if (wtid < 64) row_data(c * 64 + wtid);
        asm volatile("bar.sync %0, 128;\n" ::"r"(1 + c) : "memory");
    }
    const uint32_t lane = tid % 32;
    const int w = wtid / 32;
    const int g = lane / 4;
    const int t = lane % 4;
    float upper[2] = {kInf, kInf};
    uint32_t listed[2] = {0, 0};
    float acc[BN / 2];
#pragma unroll
    for (int i = 0; i < BN / 2; ++i) acc[i] = 0.f;
    // The chunks' sum (CHUNK > 0); a one-element stand-in otherwise.
    float sum[CHUNK > 0 ? BN / 2 : 1];
#pragma unroll
    for (int i = 0; i < (CHUNK > 0 ? BN / 2 : 1); ++i) sum[i] = 0.f;

    uint32_t step = 0;
#pragma unroll 1
    for (uint32_t tile = 0; tile < atiles; ++tile) {
#pragma unroll 1
        for (uint32_t kt = 0; kt < ktiles; ++kt, ++step) {
            const int st = static_cast<int>(step % STAGES);
            mbar_wait(smem_addr(&s.full[st]), (step / STAGES) & 1u);
            // cp.async wrote the stage through the generic proxy; wgmma reads
            // it through the async proxy.
            asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
            wg_fence();
            const uint32_t xa = smem_addr(&s.xs[st][c * 64 * kBK]);
            const uint32_t ca = smem_addr(&s.cs[st][0]);
            // The first step of the tile (of each chunk) overwrites the accumulator.
            const uint32_t kc = CHUNK > 0 ? kt % static_cast<uint32_t>(CHUNK) : kt;
#pragma unroll
            for (int ks = 0; ks < kBK / 16; ++ks)
                wgmma_bn<BN>(acc, smem_desc(xa + ks * 32), smem_desc(ca + ks * 32),
                             (kc | static_cast<uint32_t>(ks)) != 0u ? 1u : 0u);
            wg_commit();
            // The previous stage's group is done: release its buffer.
            wg_wait<1>();
            if (kt > 0 && lane == 0) mbar_arrive(smem_addr(&s.empty[(step - 1) % STAGES]));
            if constexpr (CHUNK > 0) {
                if (kc == static_cast<uint32_t>(CHUNK) - 1u || kt + 1 == ktiles) {
                    // The chunk is complete: add it to the sum (the first
                    // chunk of a tile starts it), in chunk order.
                    wg_wait<0>();
#pragma unroll
                    for (int i = 0; i < BN / 2; ++i)
                        sum[i] = kt < static_cast<uint32_t>(CHUNK) ? acc[i] : sum[i] + acc[i];
                }
            }
        }
        wg_wait<0>();
        if (lane == 0) mbar_arrive(smem_addr(&s.empty[(step - 1) % STAGES]));
        // The tile's dot products: the chunks' sum, or the accumulator.
        float(&dots)[BN / 2] = *[&]() -> float(*)[BN / 2] {
            if constexpr (CHUNK > 0) return &sum; else return &acc;
        }();

        const uint32_t a0 = tile * BN;
        const int slot = static_cast<int>(tile % kNormSlots);
#ifdef KILN_WGMMA_DUMP
        if (dump != nullptr) {
#pragma unroll
            for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
                for (int i = 0; i < 4; ++i) {
                    const uint32_t p = p0 + c * 64 + w * 16 + (i / 2) * 8 + g;
                    const uint32_t a = a0 + nt * 8 + 2 * t + i % 2;
                    if (p < n && a < m) dump[static_cast<size_t>(p) * m + a] = dots[nt * 4 + i];
                }
        }
#endif
        // Uniform over the block: whether any pair of this tile can be
        // ineligible (an anchor past m, or with EXCLUDE_SELF a point's own
        // index among the tile's anchors). a0 < m: the differences cannot wrap.
        const bool checked_tile =
            m - a0 < static_cast<uint32_t>(BN) ||
            (exclude_self && (a0 >= p0 ? a0 - p0 < static_cast<uint32_t>(kBM)
                                       : p0 - a0 < static_cast<uint32_t>(BN)));
        // wgmma's accumulator layout is mma.m16n8's per n8 group: acc[4 nt + 2 h + c]
        // is row w * 16 + h * 8 + g, column nt * 8 + 2t + c.
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int row = c * 64 + w * 16 + h * 8 + g;
            auto v = [&](int i) -> float & { return dots[(i / 2) * 4 + 2 * h + i % 2]; };
            row_epilogue<2 * kNT, kWgK>(v, checked_tile, s.cn[slot], s.cq[slot], t, s.xn[row], s.rx[row],
                         s.sx[row], sub, neg2inv2, a0, m, exclude_self, p0 + row, p0 + row < n,
                         &upper[h], &listed[h], s.cand_j[row], s.cand_lb[row]);
        }
    }
    __syncwarp();  // every lane's list entries are visible to the warp

    // Each row's list goes to global memory for anneal_refine_lists_*: the
    // refinement's loads of points and anchors wait on memory, which a
    // kernel of its own hides with 40 warps an SM where this one has 16,
    // and the tensor pipe does not idle while a block refines. Upper bound
    // and count are the same in the row's 4 lanes; lane t writes entries t
    // and t + 4.
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        const int row = c * 64 + w * 16 + h * 8 + g;
        const uint32_t p = p0 + row;
        if (p >= n) continue;
        uint32_t *out = lists + static_cast<size_t>(p) * KILN_ANNEAL_WGMMA_LIST_WORDS;
        // The final bound prunes the list; more than kK left is an overflow.
        uint32_t count = listed[h];
        if (count <= kWgK) {
            if (t == 0) count = prune(s.cand_j[row], s.cand_lb[row], count, upper[h]);
            __syncwarp(0xfu << (4 * g));  // the quad: its compaction is visible
            count = __shfl_sync(0xfu << (4 * g), count, 0, 4);
        }
        if (count > kK) count = kOverflow;
        if (t == 0) {
            out[0] = count;
            out[1] = __float_as_uint(upper[h]);
        }
        if (count <= kK) {
            for (uint32_t i = t; i < count; i += 4) {
                out[2 + i] = s.cand_j[row][i];
                out[2 + kK + i] = __float_as_uint(s.cand_lb[row][i]);
            }
        }
    }
#else
    // Not sm_90a: no wgmma; every point goes to the exact list kernel.
    (void)xh; (void)x_norms; (void)x_norms_c; (void)d; (void)dp; (void)ch; (void)anchor_norms_c;
    (void)m; (void)flags; (void)half_state; (void)dump; (void)tid;
    mark_overflowed(lists, p0, kBM, n);
#endif
}

// One warp per point: the refinement of anneal_tc_device.cuh on the list
// anneal_assign_wgmma wrote (its count decides: an overflowed list, or one
// with no bounded anchor, goes to `unresolved`).
template <typename T>
__device__ void refine_lists(const T *__restrict__ x, const float *__restrict__ x_norms,
                             uint32_t n, uint32_t d, const float *__restrict__ anchors,
                             const float *__restrict__ anchor_norms, uint32_t flags,
                             const uint32_t *__restrict__ lists, uint32_t *__restrict__ assign_out,
                             float *__restrict__ dist_out, uint32_t *__restrict__ counts,
                             uint32_t *__restrict__ unresolved,
                             uint32_t *__restrict__ unresolved_count) {
    const uint32_t lane = threadIdx.x % 32u;
    const uint32_t p = blockIdx.x * (blockDim.x / 32u) + threadIdx.x / 32u;
    if (p >= n) return;  // uniform over the warp
    const uint32_t *list = lists + static_cast<size_t>(p) * KILN_ANNEAL_WGMMA_LIST_WORDS;
    refine_point(x, anchors, anchor_norms, d, flags, p, x_norms[p], list + 2,
                 reinterpret_cast<const float *>(list + 2 + kK), list[0],
                 __uint_as_float(list[1]), lane, assign_out, dist_out, counts, unresolved,
                 unresolved_count);
}

}  // namespace

// One entry point: BN anchors per tile, CWG consumer warpgroups, STAGES stages.
#define KILN_ANNEAL_WGMMA_ENTRY(name, BN, CWG, STAGES, CHUNK)                                  \
    extern "C" __global__ void __launch_bounds__(128 * (CWG + 1))                           \
        name(const uint16_t *xh, const float *x_norms, const float *x_norms_c, uint32_t n,     \
             uint32_t d, uint32_t dp, const uint16_t *ch, const float *anchor_norms_c,         \
             uint32_t m, uint32_t flags, const uint32_t *half_state,                           \
             const AnnealControl *control, uint32_t *lists) {                                  \
        if (control->done) return;                                                             \
        assign_wgmma<BN, CWG, STAGES, CHUNK>(xh, x_norms, x_norms_c, n, d, dp, ch,              \
                                             anchor_norms_c, m, flags, half_state, lists,      \
                                             KILN_WGMMA_DUMP_PTR);                             \
    }

#define KILN_ANNEAL_REFINE_ENTRY(name, T)                                                      \
    extern "C" __global__ void __launch_bounds__(KILN_ANNEAL_REFINE_THREADS)                   \
        name(const T *x, const float *x_norms, uint32_t n, uint32_t d, const float *anchors,   \
             const float *anchor_norms, uint32_t flags, const AnnealControl *control,          \
             const uint32_t *lists, uint32_t *assign_out, float *dist, uint32_t *counts,       \
             uint32_t *unresolved, uint32_t *unresolved_count) {                               \
        if (control->done) return;                                                             \
        refine_lists(x, x_norms, n, d, anchors, anchor_norms, flags, lists, assign_out, dist,  \
                     counts, unresolved, unresolved_count);                                    \
    }

#ifndef KILN_WGMMA_DUMP_PTR
#define KILN_WGMMA_DUMP_PTR nullptr
#endif

static_assert(KILN_ANNEAL_WGMMA_TILE == 192 && KILN_ANNEAL_WGMMA_THREADS == 512,
              "the entry points' shape: 3 consumer warpgroups");
static_assert(KILN_ANNEAL_WGMMA_LIST_WORDS == 2 + 2 * kK, "a list: count, bound, entries");
KILN_ANNEAL_WGMMA_ENTRY(anneal_assign_wgmma, 128, 3, kStages, 0)
KILN_ANNEAL_REFINE_ENTRY(anneal_refine_lists_f32, float)
KILN_ANNEAL_REFINE_ENTRY(anneal_refine_lists_f16, uint16_t)

// The chunked entry points (wide d): the same block, each consumer thread
// holding the accumulator and the chunks' sum (ptxas spills 248 bytes of
// them; still the fastest of the chunked shapes measured on the H200,
// docs/bench/2026-11-27-chunked: 2 consumer warpgroups of 6 stages without
// spills were 8-16% slower at d >= 1536).
static_assert(KILN_ANNEAL_WGMMA_CHUNK_DIMS == 4 * kBK, "chunks of 4 stages");
KILN_ANNEAL_WGMMA_ENTRY(anneal_assign_wgmma_chunked, 128, 3, kStages, 4)
