// strided.cuh: the layout helpers every elementwise family shares, in the
// shape candle's kernels take them. A layout is `info`: `num_dims` sizes
// followed by `num_dims` strides per operand (in elements); `info == nullptr`
// says every operand is contiguous, so a caller with dense tensors passes no
// layout at all.
#pragma once
#include <stddef.h>
#include <stdint.h>

// Whether `strides` describe a row-major dense walk over `dims` (a dimension
// of size 1 may have any stride).
__device__ __forceinline__ bool is_contiguous(const size_t num_dims, const size_t *dims,
                                              const size_t *strides) {
    size_t expected = 1;
    for (size_t k = num_dims; k-- > 0;) {
        if (dims[k] > 1 && strides[k] != expected) return false;
        expected *= dims[k];
    }
    return true;
}

// The offset of the `i`-th element (row-major order over `dims`) in a buffer
// laid out with `strides`.
__device__ __forceinline__ size_t get_strided_index(size_t i, const size_t num_dims,
                                                    const size_t *dims, const size_t *strides) {
    size_t offset = 0;
    for (size_t k = num_dims; k-- > 0;) {
        offset += (i % dims[k]) * strides[k];
        i /= dims[k];
    }
    return offset;
}

// Where operand `operand`'s strides start in `info` (dims come first).
__device__ __forceinline__ const size_t *strides_of(const size_t *info, const size_t num_dims,
                                                    const unsigned operand) {
    return info == nullptr ? nullptr : info + num_dims * (1 + operand);
}

// Whether operand `operand` is read densely: no layout, or a dense one.
__device__ __forceinline__ bool dense_operand(const size_t *info, const size_t num_dims,
                                              const unsigned operand) {
    return info == nullptr || is_contiguous(num_dims, info, strides_of(info, num_dims, operand));
}

// The element `i` of operand `operand`: itself when dense, else through its strides.
__device__ __forceinline__ size_t operand_index(const size_t i, const bool dense,
                                                const size_t *info, const size_t num_dims,
                                                const unsigned operand) {
    return dense ? i : get_strided_index(i, num_dims, info, strides_of(info, num_dims, operand));
}

// A grid-stride loop over `numel` elements: any launch shape covers them all.
#define CP_FOR_EACH(i, numel)                                                                      \
    for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < (numel);     \
         i += static_cast<size_t>(blockDim.x) * gridDim.x)
