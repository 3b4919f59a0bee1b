// anneal_sort: host-side CUB radix sort of (key, value) pairs (static-library
// link mode), the members of each anchor in point order.
#include <cub/device/device_radix_sort.cuh>

#include "anneal_sort.h"

KILN_HOST_API kiln_cuda_error_t anneal_sort_pairs_u32_scratch_bytes(uint32_t n, uint32_t end_bit,
                                                                    size_t *bytes) {
    *bytes = 0;
    return static_cast<kiln_cuda_error_t>(cub::DeviceRadixSort::SortPairs(
        nullptr, *bytes, static_cast<const uint32_t *>(nullptr), static_cast<uint32_t *>(nullptr),
        static_cast<const uint32_t *>(nullptr), static_cast<uint32_t *>(nullptr),
        static_cast<int>(n), 0, static_cast<int>(end_bit)));
}

KILN_HOST_API kiln_cuda_error_t anneal_sort_pairs_u32(const uint32_t *keys_in, uint32_t *keys_out,
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
