/* reduce: device-wide reductions through CUB, called from the host.
 * Built in static-library mode (kernels/kiln.toml): the host code below uses
 * CUB's device-wide API and the CUDA runtime, so it is compiled by nvcc into a
 * static library and linked with the static CUDA runtime. */
#ifndef KILN_REDUCE_H
#define KILN_REDUCE_H
#include "kiln.h"

/* Bytes of device scratch that kiln_sum_f32 needs for n inputs. */
KILN_HOST_API kiln_cuda_error_t kiln_sum_f32_scratch_bytes(uint32_t n, size_t *bytes);

/* *out = sum of in[0..n), computed on `stream`. `in` and `out` are device
 * pointers; `scratch` is a device buffer of at least
 * kiln_sum_f32_scratch_bytes(n) bytes. Asynchronous: returns once enqueued. */
KILN_HOST_API kiln_cuda_error_t kiln_sum_f32(const float *in, float *out, uint32_t n,
                                             void *scratch, size_t scratch_bytes,
                                             cudaStream_t stream);

#endif
