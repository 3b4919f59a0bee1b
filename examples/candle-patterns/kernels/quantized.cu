// quantized.cu: candle's quantized.cu and fp8 patterns. GGUF q8_0 blocks
// travel as `const void *` / `void *` (the kernel casts them to its block
// type), a flag as `bool` by value, fp8 (e4m3) values by pointer and by
// value, and an fp8 family that only the sm_89+ device passes define (the
// sm_80 image lacks it; the sm_90 image and the compute_90 PTX hold it).
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <stddef.h>
#include <stdint.h>

#define QK8_0 32
typedef struct {
    __half d;
    int8_t qs[QK8_0];
} block_q8_0;
static_assert(sizeof(block_q8_0) == 34, "GGUF's q8_0 block is 34 bytes");

#define GRID_STRIDE(i, n)                                                                          \
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < (size_t)(n);                \
         i += (size_t)blockDim.x * gridDim.x)

// y[i] = d * qs[i % 32] of block i / 32, over `nb` blocks.
extern "C" __global__ void dequantize_block_q8_0_f32(const void *vx, float *y, const int nb) {
    const block_q8_0 *x = (const block_q8_0 *)vx;
    GRID_STRIDE(i, (size_t)nb * QK8_0) {
        const block_q8_0 *b = &x[i / QK8_0];
        y[i] = __half2float(b->d) * (float)b->qs[i % QK8_0];
    }
}

// One block of 32 per thread: d = amax / 127, qs = round(x / d).
extern "C" __global__ void quantize_q8_0(const float *x, void *vy, const int nb) {
    block_q8_0 *y = (block_q8_0 *)vy;
    GRID_STRIDE(b, nb) {
        float amax = 0.0f;
        for (int j = 0; j < QK8_0; j++) amax = fmaxf(amax, fabsf(x[b * QK8_0 + j]));
        const float d = amax / 127.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[b].d = __float2half(d);
        for (int j = 0; j < QK8_0; j++) y[b].qs[j] = (int8_t)roundf(x[b * QK8_0 + j] * id);
    }
}

// out[i] = on ? value : 0.
extern "C" __global__ void fill_flag_f32(float *out, const float value, const bool on,
                                         const size_t numel) {
    GRID_STRIDE(i, numel) { out[i] = on ? value : 0.0f; }
}

extern "C" __global__ void cast_fp8e4m3_f32(const size_t numel, const __nv_fp8_e4m3 *inp,
                                            float *out) {
    GRID_STRIDE(i, numel) { out[i] = float(inp[i]); }
}

#if __CUDA_ARCH__ >= 890
// out[i] = inp[i] * mul, rounded to e4m3 (saturating).
extern "C" __global__ void affine_fp8e4m3(const size_t numel, const __nv_fp8_e4m3 *inp,
                                          __nv_fp8_e4m3 *out, const __nv_fp8_e4m3 mul) {
    GRID_STRIDE(i, numel) { out[i] = __nv_fp8_e4m3(float(inp[i]) * float(mul)); }
}
#endif
