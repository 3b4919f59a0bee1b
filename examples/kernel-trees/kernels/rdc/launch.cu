// launch: the host launcher of the static rdc module (rdc_static only).
#include "rdc.h"

KILN_HOST_API kiln_cuda_error_t kt_rdc_round_trip(const float *x, float *tmp, float *y, size_t n,
                                                  cudaStream_t stream) {
    if (n == 0) return 0;
    const unsigned block = 256;
    const unsigned grid = static_cast<unsigned>((n + block - 1) / block);
    rdc_forward<<<grid, block, 0, stream>>>(x, tmp, n);
    rdc_backward<<<grid, block, 0, stream>>>(tmp, y, n);
    return static_cast<kiln_cuda_error_t>(cudaGetLastError());
}
