// fill.cu: fill a buffer with one value, and copy a 2-D block between
// row-strided buffers; no layout helper, so strided.cuh's edits leave this
// module alone.
#include "dtype.cuh"

#define FILL_OPS(T, SUFFIX)                                                                        \
    extern "C" __global__ void fill_##SUFFIX(T *buf, const T value, const size_t numel) {          \
        for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < numel;    \
             i += static_cast<size_t>(blockDim.x) * gridDim.x)                                     \
            buf[i] = value;                                                                        \
    }                                                                                              \
    extern "C" __global__ void copy2d_##SUFFIX(const T *src, T *dst, const uint32_t rows,          \
                                               const uint32_t cols, const uint32_t src_stride,     \
                                               const uint32_t dst_stride) {                        \
        const uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;                                  \
        if (i >= rows * cols) return;                                                              \
        const uint32_t r = i / cols, c = i % cols;                                                 \
        dst[r * dst_stride + c] = src[r * src_stride + c];                                         \
    }

FILL_OPS(float, f32)
FILL_OPS(double, f64)
FILL_OPS(__half, f16)
FILL_OPS(__nv_bfloat16, bf16)
FILL_OPS(uint8_t, u8)
FILL_OPS(uint32_t, u32)
FILL_OPS(int64_t, i64)
