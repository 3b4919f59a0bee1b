/* rdc: two translation units that call each other's __device__ functions,
 * linked by separate compilation (nvcc -dc, then a device link). Built twice
 * from the same sources: as a loadable image (rdc_fatbin) and as a static
 * library with a host launcher (rdc_static). */
#ifndef KT_RDC_H
#define KT_RDC_H
#include <stddef.h>

#include "kiln.h"

#if defined(__CUDACC__)
/* Defined in rdc/scale.cu: 3 * v. */
extern __device__ float kt_scale(float v);
/* Defined in rdc/offset.cu: v + 1. */
extern __device__ float kt_offset(float v);
#endif

/* y[i] = kt_offset(kt_scale(x[i])) = 3 x + 1; defined in scale.cu, calls offset.cu. */
KILN_KERNEL(rdc_forward, const float *x, float *y, size_t n);
/* y[i] = kt_scale(kt_offset(x[i])) = 3 (x + 1); defined in offset.cu, calls scale.cu. */
KILN_KERNEL(rdc_backward, const float *x, float *y, size_t n);

/* rdc_static only: runs rdc_forward then rdc_backward on the result, so
 * y[i] = 3 (3 x + 1 + 1), on `stream`. */
KILN_HOST_API kiln_cuda_error_t kt_rdc_round_trip(const float *x, float *tmp, float *y, size_t n,
                                                  cudaStream_t stream);

#endif
