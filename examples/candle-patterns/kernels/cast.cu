// cast.cu: dtype conversions through the accumulator type (so f16 <-> bf16
// goes through float, as candle's does), strided input allowed.
#include "dtype.cuh"
#include "strided.cuh"

#define CAST_OP(S, D, NAME)                                                                        \
    extern "C" __global__ void NAME(const size_t numel, const size_t num_dims, const size_t *info, \
                                    const S *inp, D *out) {                                        \
        const bool dense = dense_operand(info, num_dims, 0);                                       \
        CP_FOR_EACH(i, numel) {                                                                    \
            out[i] = static_cast<D>(to_acc(inp[operand_index(i, dense, info, num_dims, 0)]));      \
        }                                                                                          \
    }

CAST_OP(float, __half, cast_f32_f16)
CAST_OP(__half, float, cast_f16_f32)
CAST_OP(float, __nv_bfloat16, cast_f32_bf16)
CAST_OP(__nv_bfloat16, float, cast_bf16_f32)
CAST_OP(__half, __nv_bfloat16, cast_f16_bf16)
CAST_OP(float, double, cast_f32_f64)
CAST_OP(double, float, cast_f64_f32)
CAST_OP(uint8_t, float, cast_u8_f32)
CAST_OP(uint32_t, float, cast_u32_f32)
CAST_OP(int64_t, float, cast_i64_f32)
CAST_OP(float, uint8_t, cast_f32_u8)
