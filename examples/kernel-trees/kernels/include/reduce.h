/* reduce: sums through a templated two-pass block reduction (cooperative
 * groups), called from the host. Built in static-library mode: the launcher
 * below runs `<<<>>>` launches with the CUDA runtime. */
#ifndef KT_REDUCE_H
#define KT_REDUCE_H
#include <stddef.h>
#include <stdint.h>

#include "kiln.h"

/* Elements of device scratch that kt_sum_* needs for n inputs. */
KILN_HOST_API size_t kt_sum_scratch_elems(size_t n);

/* *out = the sum of in[0..n); `scratch` holds kt_sum_scratch_elems(n) elements.
 * Device pointers, enqueued on `stream`. u32 sums wrap modulo 2^32. */
KILN_HOST_API kiln_cuda_error_t kt_sum_f32(const float *in, float *out, float *scratch, size_t n,
                                           cudaStream_t stream);
KILN_HOST_API kiln_cuda_error_t kt_sum_u32(const uint32_t *in, uint32_t *out, uint32_t *scratch,
                                           size_t n, cudaStream_t stream);

#endif
