// ternary.cu: where_I_T(numel, num_dims, info, ids, t, f, out): out[i] =
// ids[i] != 0 ? t[i] : f[i]. The layout is dims, then the strides of ids, t
// and f; nullptr means all three are contiguous.
#include "dtype.cuh"
#include "strided.cuh"

#define WHERE_OP(I, T, NAME)                                                                       \
    extern "C" __global__ void NAME(const size_t numel, const size_t num_dims, const size_t *info, \
                                    const I *ids, const T *t, const T *f, T *out) {                \
        const bool ids_dense = dense_operand(info, num_dims, 0);                                   \
        const bool t_dense = dense_operand(info, num_dims, 1);                                     \
        const bool f_dense = dense_operand(info, num_dims, 2);                                     \
        CP_FOR_EACH(i, numel) {                                                                    \
            const bool pick = ids[operand_index(i, ids_dense, info, num_dims, 0)] != 0;            \
            out[i] = pick ? t[operand_index(i, t_dense, info, num_dims, 1)]                        \
                          : f[operand_index(i, f_dense, info, num_dims, 2)];                       \
        }                                                                                          \
    }

#define WHERE_FAMILY(I, ISUFFIX)                                                                   \
    WHERE_OP(I, float, where_##ISUFFIX##_f32)                                                      \
    WHERE_OP(I, double, where_##ISUFFIX##_f64)                                                     \
    WHERE_OP(I, __half, where_##ISUFFIX##_f16)                                                     \
    WHERE_OP(I, __nv_bfloat16, where_##ISUFFIX##_bf16)

WHERE_FAMILY(uint8_t, u8)
WHERE_FAMILY(uint32_t, u32)
WHERE_FAMILY(int64_t, i64)
