// binary_macros.cuh: the macro of the binary family, apart from the ops as
// candle keeps it. Kernels take (numel, num_dims, dims_and_strides, lhs, rhs,
// out); the layout is dims, then lhs strides, then rhs strides, and nullptr
// means both operands are contiguous.
#pragma once
#include "dtype.cuh"
#include "strided.cuh"

#define BINARY_OP(T, NAME, EXPR)                                                                   \
    extern "C" __global__ void NAME(const size_t numel, const size_t num_dims,                     \
                                    const size_t *dims_and_strides, const T *lhs, const T *rhs,    \
                                    T *out) {                                                      \
        const bool lhs_dense = dense_operand(dims_and_strides, num_dims, 0);                       \
        const bool rhs_dense = dense_operand(dims_and_strides, num_dims, 1);                       \
        CP_FOR_EACH(i, numel) {                                                                    \
            const acc_t<T> x =                                                                     \
                to_acc(lhs[operand_index(i, lhs_dense, dims_and_strides, num_dims, 0)]);           \
            const acc_t<T> y =                                                                     \
                to_acc(rhs[operand_index(i, rhs_dense, dims_and_strides, num_dims, 1)]);           \
            out[i] = from_acc<T>(EXPR);                                                            \
        }                                                                                          \
    }

#define BINARY_FAMILY(T, SUFFIX)                                                                   \
    BINARY_OP(T, badd_##SUFFIX, x + y)                                                             \
    BINARY_OP(T, bsub_##SUFFIX, x - y)                                                             \
    BINARY_OP(T, bmul_##SUFFIX, x *y)                                                              \
    BINARY_OP(T, bdiv_##SUFFIX, x / y)                                                             \
    BINARY_OP(T, bminimum_##SUFFIX, min_of(x, y))                                                  \
    BINARY_OP(T, bmaximum_##SUFFIX, max_of(x, y))
