// reduce: host-side CUB device-wide reductions (static-library link mode).
#include <cub/device/device_reduce.cuh>

#include "reduce.h"

KILN_HOST_API kiln_cuda_error_t kiln_sum_f32_scratch_bytes(uint32_t n, size_t *bytes) {
    *bytes = 0;
    return static_cast<kiln_cuda_error_t>(
        cub::DeviceReduce::Sum(nullptr, *bytes, static_cast<const float *>(nullptr),
                               static_cast<float *>(nullptr), static_cast<int>(n)));
}

KILN_HOST_API kiln_cuda_error_t kiln_sum_f32(const float *in, float *out, uint32_t n,
                                             void *scratch, size_t scratch_bytes,
                                             cudaStream_t stream) {
    size_t needed = 0;
    cudaError_t err = cub::DeviceReduce::Sum(nullptr, needed, in, out, static_cast<int>(n), stream);
    if (err != cudaSuccess) return static_cast<kiln_cuda_error_t>(err);
    if (scratch_bytes < needed) return static_cast<kiln_cuda_error_t>(cudaErrorInvalidValue);
    return static_cast<kiln_cuda_error_t>(
        cub::DeviceReduce::Sum(scratch, scratch_bytes, in, out, static_cast<int>(n), stream));
}
