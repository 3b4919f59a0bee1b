// convert: the toolkit- and arch-guarded kernel. The native bf16 conversion
// needs sm_80 (cvt.rn.bf16.f32) and a toolkit with cuda_bf16.h (CUDA 11+,
// told by nvcc's predefined __CUDACC_VER_MAJOR__);
// every other arch in the fat binary gets the software fallback, which rounds
// the same way, so results are identical on every device.
#include "convert.h"

#if defined(__CUDACC_VER_MAJOR__) && __CUDACC_VER_MAJOR__ >= 11
#  include <cuda_bf16.h>
#  define KILN_HAVE_BF16_HEADER 1
#endif

namespace {
// Unreferenced in the sm_80+ passes, which take the native conversion.
[[maybe_unused]] __device__ __forceinline__ uint16_t bf16_bits_fallback(float x) {
    uint32_t bits = __float_as_uint(x);
    if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40u);  // quiet NaN
    const uint32_t rounding = 0x7fffu + ((bits >> 16) & 1u);
    return static_cast<uint16_t>((bits + rounding) >> 16);
}

__device__ __forceinline__ uint16_t bf16_bits(float x) {
#if defined(KILN_HAVE_BF16_HEADER) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    return __bfloat16_as_ushort(__float2bfloat16_rn(x));
#else
    return bf16_bits_fallback(x);
#endif
}
}  // namespace

KILN_KERNEL(f32_to_bf16, const float *__restrict__ in, uint16_t *__restrict__ out, uint32_t n) {
    const uint32_t stride = gridDim.x * blockDim.x;
    for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        out[i] = bf16_bits(in[i]);
    }
}

// bf16 is the top half of an f32: widening is a shift, exact for every
// value (NaN payloads and signed zeros included), no arch guard needed.
KILN_KERNEL(bf16_to_f32, const uint16_t *__restrict__ in, float *__restrict__ out, uint32_t n) {
    const uint32_t stride = gridDim.x * blockDim.x;
    for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        out[i] = __uint_as_float(static_cast<uint32_t>(in[i]) << 16);
    }
}
