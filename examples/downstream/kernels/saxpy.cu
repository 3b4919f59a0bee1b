// saxpy: y = a * x + y, grid-stride so that one launch shape serves every n.
#include "saxpy.h"

KILN_KERNEL(saxpy, SaxpyParams p, const float *__restrict__ x, float *__restrict__ y) {
    const uint32_t stride = gridDim.x * blockDim.x;
    for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < p.n; i += stride) {
        y[i] = fmaf(p.a, x[i], y[i]);
    }
}
