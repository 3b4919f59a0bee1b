// reduce: host-side CUB device-wide reductions and sorts (static-library link
// mode).
#include <cub/device/device_radix_sort.cuh>
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

KILN_HOST_API kiln_cuda_error_t kiln_sort_pairs_u32_scratch_bytes(uint32_t n, uint32_t end_bit,
                                                                  size_t *bytes) {
    *bytes = 0;
    return static_cast<kiln_cuda_error_t>(cub::DeviceRadixSort::SortPairs(
        nullptr, *bytes, static_cast<const uint32_t *>(nullptr), static_cast<uint32_t *>(nullptr),
        static_cast<const uint32_t *>(nullptr), static_cast<uint32_t *>(nullptr),
        static_cast<int>(n), 0, static_cast<int>(end_bit)));
}

KILN_HOST_API kiln_cuda_error_t kiln_sort_pairs_u32(const uint32_t *keys_in, uint32_t *keys_out,
                                                    const uint32_t *values_in,
                                                    uint32_t *values_out, uint32_t n,
                                                    uint32_t end_bit, void *scratch,
                                                    size_t scratch_bytes, cudaStream_t stream) {
    size_t needed = 0;
    cudaError_t err = cub::DeviceRadixSort::SortPairs(nullptr, needed, keys_in, keys_out,
                                                      values_in, values_out, static_cast<int>(n),
                                                      0, static_cast<int>(end_bit), stream);
    if (err != cudaSuccess) return static_cast<kiln_cuda_error_t>(err);
    if (scratch_bytes < needed) return static_cast<kiln_cuda_error_t>(cudaErrorInvalidValue);
    return static_cast<kiln_cuda_error_t>(cub::DeviceRadixSort::SortPairs(
        scratch, scratch_bytes, keys_in, keys_out, values_in, values_out, static_cast<int>(n), 0,
        static_cast<int>(end_bit), stream));
}
