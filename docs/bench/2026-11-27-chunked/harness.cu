// Standalone check and timing of the chunked wgmma entry points (issue 28,
// wide d): on the same standard normal points, with anchors that are points
// (a run's first assignment) or means of n/m points each (later ones), every
// variant's outputs after the list kernels are compared bit for bit with
// anneal_assign_tc_f32's; then the whole assignment (tc kernel + list
// kernels) is timed with cudaEvents, and the points left to the list kernel
// counted. Build: build.sh. Run: ./harness n,d,m[,flags] ... (REPS, MEANS=1).
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

__device__ float *g_dump = nullptr;
#define KILN_WGMMA_DUMP 1
#define KILN_WGMMA_DUMP_PTR g_dump
#include "../../../kernels/anneal_wgmma.cu"

KILN_ANNEAL_WGMMA_ENTRY(wgc_2_6_c8, float, 128, 2, 6, 8)
KILN_ANNEAL_WGMMA_ENTRY(wgc_2_6_c2, float, 128, 2, 6, 2)
KILN_ANNEAL_WGMMA_ENTRY(wgc_3_5_c4, float, 128, 3, 5, 4)

#define CK(x)                                                                        \
    do {                                                                             \
        cudaError_t e_ = (x);                                                        \
        if (e_ != cudaSuccess) {                                                     \
            fprintf(stderr, "CUDA %s at %s:%d: %s\n", cudaGetErrorString(e_), __FILE__, \
                    __LINE__, #x);                                                   \
            exit(2);                                                                 \
        }                                                                            \
    } while (0)

__global__ void gen_normal(float *x, size_t count, uint64_t seed) {
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    for (; i < count; i += (size_t)gridDim.x * blockDim.x) {
        uint64_t z = (i + seed * 0x9E3779B97F4A7C15ull) * 0xBF58476D1CE4E5B9ull;
        z ^= z >> 31; z *= 0x94D049BB133111EBull; z ^= z >> 29;
        const double u1 = ((z >> 11) + 1) * (1.0 / 9007199254740993.0);
        uint64_t y = z * 0xD6E8FEB86659FD93ull; y ^= y >> 32;
        const double u2 = (y >> 11) * (1.0 / 9007199254740992.0);
        x[i] = (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
    }
}
__global__ void pick_rows(const float *x, uint32_t n, uint32_t d, uint32_t m, float *a) {
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    const size_t total = (size_t)m * d;
    for (; i < total; i += (size_t)gridDim.x * blockDim.x) {
        const size_t j = i / d, k = i % d;
        const size_t src = (j * (size_t)(n / m) + 7) % n;
        a[i] = x[src * d + k];
    }
}
__global__ void row_norms(const float *x, uint32_t rows, uint32_t d, float *out) {
    uint32_t r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows) return;
    float s = 0.f;
    for (uint32_t k = 0; k < d; ++k) s = fmaf(x[(size_t)r * d + k], x[(size_t)r * d + k], s);
    out[r] = s;
}
// Anchor j = the mean of points j, j + m, j + 2m, ... (n / m of them): what
// the anchors of a run look like after its first updates.
__global__ void mean_rows(const float *x, uint32_t n, uint32_t d, uint32_t m, float *a) {
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    const size_t total = (size_t)m * d;
    for (; i < total; i += (size_t)gridDim.x * blockDim.x) {
        const size_t j = i / d, k = i % d;
        double s = 0;
        uint32_t c = 0;
        for (size_t p = j; p < n; p += m, ++c) s += x[p * d + k];
        a[i] = (float)(s / (c ? c : 1));
    }
}

typedef void (*AssignFn)(const float *, const uint16_t *, const float *, uint32_t, uint32_t,
                         uint32_t, const float *, const uint16_t *, const float *, uint32_t,
                         uint32_t, const uint32_t *, const AnnealControl *, uint32_t *, float *,
                         uint32_t *, uint32_t *, uint32_t *);

struct Variant {
    const char *name;
    AssignFn fn;
    uint32_t tile, threads, smem;
};

static int sms = 0;
static uint32_t flags = KILN_ANNEAL_COUNT;
static bool means = false;

struct Bufs {
    uint32_t n, d, dp, m;
    float *x, *xn, *a, *an;
    uint16_t *xh, *ch;
    uint32_t *hs;
    AnnealControl *ctl;
    uint32_t *assign, *counts, *unres, *ucount;
    float *dist;
    unsigned long long *best;
};

struct Out {
    std::vector<uint32_t> assign, counts;
    std::vector<float> dist;
    uint32_t unresolved = 0;
};

// The whole assignment as kiln enqueues it: zero the count, the tc kernel,
// the list kernels.
static void assign_all(const Variant &v, Bufs &b, cudaStream_t s) {
    CK(cudaMemsetAsync(b.ucount, 0, 4, s));
    CK(cudaMemsetAsync(b.counts, 0, 4ull * b.m, s));
    CK(cudaMemsetAsync(b.best, 0, 8ull * b.n, s));
    const uint32_t grid = (b.n + v.tile - 1) / v.tile;
    v.fn<<<grid, v.threads, v.smem, s>>>(b.x, b.xh, b.xn, b.n, b.d, b.dp, b.a, b.ch, b.an, b.m,
                                         flags, b.hs, b.ctl, b.assign, b.dist, b.counts, b.unres,
                                         b.ucount);
    anneal_assign_list_f32<<<sms * 8, KILN_ANNEAL_LIST_THREADS, 0, s>>>(
        b.x, b.xn, b.d, b.a, b.an, b.m, flags, b.ctl, b.unres, b.ucount,
        reinterpret_cast<uint64_t *>(b.best));
    anneal_assign_list_finish<<<sms * 4, 256, 0, s>>>(b.ctl, b.unres, b.ucount,
                                                     reinterpret_cast<uint64_t *>(b.best), b.m,
                                                     flags, b.assign, b.dist, b.counts);
}

static Out run_once(const Variant &v, Bufs &b) {
    CK(cudaMemset(b.assign, 0xee, 4ull * b.n));
    CK(cudaMemset(b.dist, 0xee, 4ull * b.n));
    assign_all(v, b, 0);
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());
    Out o;
    CK(cudaMemcpy(&o.unresolved, b.ucount, 4, cudaMemcpyDeviceToHost));
    o.assign.resize(b.n);
    o.dist.resize(b.n);
    o.counts.resize(b.m);
    CK(cudaMemcpy(o.assign.data(), b.assign, 4ull * b.n, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(o.dist.data(), b.dist, 4ull * b.n, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(o.counts.data(), b.counts, 4ull * b.m, cudaMemcpyDeviceToHost));
    return o;
}

static bool same(const Out &a, const Out &b, const char *name, uint32_t n) {
    size_t da = 0, dd = 0, dc = 0;
    for (size_t i = 0; i < a.assign.size(); ++i) da += a.assign[i] != b.assign[i];
    for (size_t i = 0; i < a.dist.size(); ++i) dd += memcmp(&a.dist[i], &b.dist[i], 4) != 0;
    for (size_t i = 0; i < a.counts.size(); ++i) dc += a.counts[i] != b.counts[i];
    const bool ok = !da && !dd && !dc;
    printf("  %-12s assign_diff=%zu dist_diff=%zu counts_diff=%zu  listed %u (%.3f%%) -> %s\n",
           name, da, dd, dc, b.unresolved, 100.0 * b.unresolved / n, ok ? "IDENTICAL" : "DIFFERENT");
    return ok;
}

static void alloc(Bufs &b, uint32_t n, uint32_t d, uint32_t m) {
    b.n = n; b.d = d; b.m = m; b.dp = (d + 31) / 32 * 32;
    CK(cudaMalloc(&b.x, 4ull * n * d));
    CK(cudaMalloc(&b.xn, 4ull * n));
    CK(cudaMalloc(&b.a, 4ull * m * d));
    CK(cudaMalloc(&b.an, 4ull * m));
    CK(cudaMalloc(&b.xh, 2ull * n * b.dp));
    CK(cudaMalloc(&b.ch, 2ull * m * b.dp));
    CK(cudaMalloc(&b.hs, 8));
    CK(cudaMalloc(&b.ctl, sizeof(AnnealControl)));
    CK(cudaMemset(b.ctl, 0, sizeof(AnnealControl)));
    CK(cudaMalloc(&b.assign, 4ull * n));
    CK(cudaMalloc(&b.dist, 4ull * n));
    CK(cudaMalloc(&b.counts, 4ull * m));
    CK(cudaMalloc(&b.unres, 4ull * n));
    CK(cudaMalloc(&b.ucount, 4));
    CK(cudaMalloc(&b.best, 8ull * n));
}
static void release(Bufs &b) {
    cudaFree(b.x); cudaFree(b.xn); cudaFree(b.a); cudaFree(b.an); cudaFree(b.xh); cudaFree(b.ch);
    cudaFree(b.hs); cudaFree(b.ctl); cudaFree(b.assign); cudaFree(b.dist); cudaFree(b.counts);
    cudaFree(b.unres); cudaFree(b.ucount); cudaFree(b.best);
}

static void prepare(Bufs &b, uint64_t seed) {
    gen_normal<<<sms * 8, 256>>>(b.x, (size_t)b.n * b.d, seed);
    if (means)
        mean_rows<<<sms * 8, 256>>>(b.x, b.n, b.d, b.m, b.a);
    else
        pick_rows<<<sms * 8, 256>>>(b.x, b.n, b.d, b.m, b.a);
    row_norms<<<(b.n + 255) / 256, 256>>>(b.x, b.n, b.d, b.xn);
    row_norms<<<(b.m + 255) / 256, 256>>>(b.a, b.m, b.d, b.an);
    CK(cudaMemset(b.hs, 0, 8));
    anneal_absmax_f32<<<sms * 8, 256>>>(b.x, (uint64_t)b.n * b.d, b.hs);
    anneal_to_half_f32<<<sms * 8, 256>>>(b.x, b.n, b.d, b.dp, b.hs, b.xh);
    anneal_to_half_f32<<<sms * 8, 256>>>(b.a, b.m, b.d, b.dp, b.hs, b.ch);
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());
}

int main(int argc, char **argv) {
    setvbuf(stdout, nullptr, _IOLBF, 0);
    CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    printf("device %s cc %d.%d sms %d\n", prop.name, prop.major, prop.minor, sms);
    const int reps = getenv("REPS") ? atoi(getenv("REPS")) : 10;
    means = getenv("MEANS") != nullptr;
    std::vector<Variant> vs = {
        {"tc_wide", (AssignFn)anneal_assign_tc_f32, 128, 128, KILN_ANNEAL_TC_SMEM},
        {"wg_3_5", (AssignFn)anneal_assign_wgmma_f32, KILN_ANNEAL_WGMMA_TILE,
         KILN_ANNEAL_WGMMA_THREADS, KILN_ANNEAL_WGMMA_SMEM},
        {"wgc_2_6_c4", (AssignFn)anneal_assign_wgmma_chunked_f32, KILN_ANNEAL_WGMMA_CHUNKED_TILE,
         KILN_ANNEAL_WGMMA_CHUNKED_THREADS, KILN_ANNEAL_WGMMA_CHUNKED_SMEM},
        {"wgc_2_6_c8", (AssignFn)wgc_2_6_c8, 128, 384, (uint32_t)sizeof(WgShared<128, 2, 6>) + 1024},
        {"wgc_2_6_c2", (AssignFn)wgc_2_6_c2, 128, 384, (uint32_t)sizeof(WgShared<128, 2, 6>) + 1024},
        {"wgc_3_5_c4", (AssignFn)wgc_3_5_c4, 192, 512, (uint32_t)sizeof(WgShared<128, 3, 5>) + 1024},
    };
    for (auto &v : vs) {
        CK(cudaFuncSetAttribute((const void *)v.fn, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                v.smem));
        cudaFuncAttributes fa;
        CK(cudaFuncGetAttributes(&fa, (const void *)v.fn));
        printf("kernel %-12s regs %d smem %u threads %u\n", v.name, fa.numRegs, v.smem, v.threads);
    }
    int bad = 0;
    for (int ai = 1; ai < argc; ++ai) {
        uint32_t n, d, m, fl = 0;
        if (sscanf(argv[ai], "%u,%u,%u,%u", &n, &d, &m, &fl) < 3) continue;
        flags = KILN_ANNEAL_COUNT | fl;
        Bufs b;
        alloc(b, n, d, m);
        prepare(b, 1234 + ai);
        printf("SHAPE %u x %u x %u flags %u anchors %s\n", n, d, m, flags, means ? "means" : "points");
        const Out ref = run_once(vs[0], b);
        printf("  tc_wide listed %u (%.3f%%)\n", ref.unresolved, 100.0 * ref.unresolved / n);
        for (size_t i = 1; i < vs.size(); ++i) bad += !same(ref, run_once(vs[i], b), vs[i].name, n);
        cudaEvent_t e0, e1;
        CK(cudaEventCreate(&e0));
        CK(cudaEventCreate(&e1));
        for (int round = 0; round < 2; ++round)
            for (auto &v : vs) {
                assign_all(v, b, 0);
                CK(cudaEventRecord(e0));
                for (int r = 0; r < reps; ++r) assign_all(v, b, 0);
                CK(cudaEventRecord(e1));
                CK(cudaEventSynchronize(e1));
                float ms = 0;
                CK(cudaEventElapsedTime(&ms, e0, e1));
                const double per = ms / reps;
                if (round == 1)
                    printf("  TIME %-12s %.3f ms/assignment (tc + list)  %.1f TFLOP/s (2ndm)\n",
                           v.name, per, 2.0 * n * d * m / (per * 1e-3) / 1e12);
            }
        CK(cudaGetLastError());
        release(b);
    }
    printf("RESULT %s\n", bad ? "MISMATCH" : "ALL IDENTICAL");
    return bad ? 1 : 0;
}
