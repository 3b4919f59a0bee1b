// scale: defines kt_scale and rdc_forward, which calls kt_offset from
// offset.cu (resolved only by the device link).
#include "rdc.h"

__device__ float kt_scale(float v) { return 3.0f * v; }

KILN_KERNEL(rdc_forward, const float *x, float *y, size_t n) {
    const size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i < n) y[i] = kt_offset(kt_scale(x[i]));
}
