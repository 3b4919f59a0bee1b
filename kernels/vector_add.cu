// vector_add: the minimal end-to-end kernel. Grid-stride loop over float4 where
// the pointers allow it, so one launch shape serves every n.
#include "vector_add.h"

KILN_KERNEL(vector_add, const float *__restrict__ a, const float *__restrict__ b,
            float *__restrict__ c, uint32_t n) {
    const uint32_t stride = gridDim.x * blockDim.x;
    const uint32_t first = blockIdx.x * blockDim.x + threadIdx.x;
    const bool aligned = ((reinterpret_cast<uintptr_t>(a) | reinterpret_cast<uintptr_t>(b) |
                           reinterpret_cast<uintptr_t>(c)) & 15u) == 0;
    uint32_t tail_start = 0;
    if (aligned) {
        const uint32_t n4 = n / 4;
        const float4 *a4 = reinterpret_cast<const float4 *>(a);
        const float4 *b4 = reinterpret_cast<const float4 *>(b);
        float4 *c4 = reinterpret_cast<float4 *>(c);
        for (uint32_t i = first; i < n4; i += stride) {
            const float4 x = a4[i];
            const float4 y = b4[i];
            c4[i] = make_float4(x.x + y.x, x.y + y.y, x.z + y.z, x.w + y.w);
        }
        tail_start = n4 * 4;
    }
    for (uint32_t i = tail_start + first; i < n; i += stride) {
        c[i] = a[i] + b[i];
    }
}
