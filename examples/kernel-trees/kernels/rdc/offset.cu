// offset: defines kt_offset and rdc_backward, which calls kt_scale from
// scale.cu (resolved only by the device link).
#include "rdc.h"

__device__ float kt_offset(float v) { return v + 1.0f; }

KILN_KERNEL(rdc_backward, const float *x, float *y, size_t n) {
    const size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i < n) y[i] = kt_scale(kt_offset(x[i]));
}
