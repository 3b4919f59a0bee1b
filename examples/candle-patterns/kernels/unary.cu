// unary.cu: one macro stamps an extern "C" kernel per (op, dtype), the way
// candle's unary family is written. Every kernel takes
// (numel, num_dims, info, inp, out): `info == nullptr` is a contiguous
// input, `inp == nullptr` updates `out` in place.
#include "dtype.cuh"
#include "strided.cuh"

#define UNARY_OP(T, NAME, EXPR)                                                                    \
    extern "C" __global__ void NAME(const size_t numel, const size_t num_dims, const size_t *info, \
                                    const T *inp, T *out) {                                        \
        const bool dense = dense_operand(info, num_dims, 0);                                       \
        CP_FOR_EACH(i, numel) {                                                                    \
            const size_t src = operand_index(i, dense, info, num_dims, 0);                         \
            const acc_t<T> x = to_acc(inp != nullptr ? inp[src] : out[i]);                         \
            out[i] = from_acc<T>(EXPR);                                                            \
        }                                                                                          \
    }

// tanh-approximated GELU, in the accumulator's precision.
template <typename A> __device__ __forceinline__ A gelu_of(const A x) {
    const A inner = lit<A>(0.7978845608028654) * (x + lit<A>(0.044715) * x * x * x);
    return lit<A>(0.5) * x * (lit<A>(1.0) + tanh_of(inner));
}

#define UNARY_FLOAT_FAMILY(T, SUFFIX)                                                              \
    UNARY_OP(T, ucopy_##SUFFIX, x)                                                                 \
    UNARY_OP(T, uneg_##SUFFIX, -x)                                                                 \
    UNARY_OP(T, uexp_##SUFFIX, exp_of(x))                                                          \
    UNARY_OP(T, ulog_##SUFFIX, log_of(x))                                                          \
    UNARY_OP(T, usqr_##SUFFIX, x *x)                                                               \
    UNARY_OP(T, usqrt_##SUFFIX, sqrt_of(x))                                                        \
    UNARY_OP(T, uabs_##SUFFIX, abs_of(x))                                                          \
    UNARY_OP(T, urecip_##SUFFIX, lit<acc_t<T>>(1.0) / x)                                           \
    UNARY_OP(T, urelu_##SUFFIX, max_of(x, lit<acc_t<T>>(0.0)))                                     \
    UNARY_OP(T, ugelu_##SUFFIX, gelu_of(x))

UNARY_FLOAT_FAMILY(float, f32)
UNARY_FLOAT_FAMILY(double, f64)

// The half types only where the arch has them, as candle guards them.
#if __CUDA_ARCH__ >= 530
UNARY_FLOAT_FAMILY(__half, f16)
#endif
#if __CUDA_ARCH__ >= 800
UNARY_FLOAT_FAMILY(__nv_bfloat16, bf16)
#endif

// The integer dtypes have the copy alone (a strided gather or a copy).
UNARY_OP(uint8_t, ucopy_u8, x)
UNARY_OP(uint32_t, ucopy_u32, x)
UNARY_OP(int64_t, ucopy_i64, x)
