/* elementwise: y[i] = a * x[i] + b over seven dtypes, declared by one macro,
 * as vendored kernel libraries write their dtype families. The expansion is
 * what both nvcc and kiln's code generation read. */
#ifndef KT_ELEMENTWISE_H
#define KT_ELEMENTWISE_H
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stddef.h>
#include <stdint.h>

#include "kiln.h"

#define KT_AFFINE_DECL(T, SUFFIX) \
    KILN_KERNEL(affine_##SUFFIX, const T *x, T *y, T a, T b, size_t n)

#define KT_FOR_EACH_DTYPE(X) \
    X(float, f32)            \
    X(double, f64)           \
    X(__half, f16)           \
    X(__nv_bfloat16, bf16)   \
    X(int32_t, i32)          \
    X(uint32_t, u32)         \
    X(uint8_t, u8)

#define KT_DECLARE(T, SUFFIX) KT_AFFINE_DECL(T, SUFFIX);
KT_FOR_EACH_DTYPE(KT_DECLARE)
#undef KT_DECLARE

#endif
