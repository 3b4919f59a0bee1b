// binary.cu: the binary family over every dtype candle has it for.
#include "binary_macros.cuh"

BINARY_FAMILY(float, f32)
BINARY_FAMILY(double, f64)
#if __CUDA_ARCH__ >= 530
BINARY_FAMILY(__half, f16)
#endif
#if __CUDA_ARCH__ >= 800
BINARY_FAMILY(__nv_bfloat16, bf16)
#endif
BINARY_FAMILY(uint8_t, u8)
BINARY_FAMILY(uint32_t, u32)
BINARY_FAMILY(int64_t, i64)
