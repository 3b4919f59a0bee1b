// affine.cu: out = inp * mul + add, with the scalars passed by value in the
// kernel's own dtype (a 2-byte __half among 8-byte size_t). `inp == nullptr`
// is in place, `info == nullptr` contiguous.
#include "dtype.cuh"
#include "strided.cuh"

#define AFFINE_OP(T, NAME)                                                                         \
    extern "C" __global__ void NAME(const size_t numel, const size_t num_dims, const size_t *info, \
                                    const T *inp, T *out, const T mul, const T add) {              \
        const bool dense = dense_operand(info, num_dims, 0);                                       \
        CP_FOR_EACH(i, numel) {                                                                    \
            const size_t src = operand_index(i, dense, info, num_dims, 0);                         \
            const acc_t<T> x = to_acc(inp != nullptr ? inp[src] : out[i]);                         \
            out[i] = from_acc<T>(x * to_acc(mul) + to_acc(add));                                   \
        }                                                                                          \
    }

AFFINE_OP(float, affine_f32)
AFFINE_OP(double, affine_f64)
#if __CUDA_ARCH__ >= 530
AFFINE_OP(__half, affine_f16)
#endif
#if __CUDA_ARCH__ >= 800
AFFINE_OP(__nv_bfloat16, affine_bf16)
#endif
AFFINE_OP(uint8_t, affine_u8)
AFFINE_OP(uint32_t, affine_u32)
AFFINE_OP(int64_t, affine_i64)
