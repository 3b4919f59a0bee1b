// affine: y = scale * x + offset, grid-stride so that one launch shape serves every n.
#include "affine.h"

KILN_KERNEL(affine, AffineParams p, const float *__restrict__ x, float *__restrict__ y) {
    const uint32_t stride = gridDim.x * blockDim.x;
    for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < p.n; i += stride) {
        y[i] = fmaf(p.scale, x[i], p.offset);
    }
}
