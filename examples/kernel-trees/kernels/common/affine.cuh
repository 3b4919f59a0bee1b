// affine.cuh: the arithmetic of the elementwise family, shared by every dtype.
// Floating types compute in their own precision with one rounding per fused
// multiply-add (half types go through float, as the CPU reference does);
// integer types wrap modulo 2^bits (computed unsigned, so no signed overflow).
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

namespace kt {

template <typename T> struct Affine;

template <> struct Affine<float> {
    static __device__ __forceinline__ float apply(float a, float x, float b) { return fmaf(a, x, b); }
};
template <> struct Affine<double> {
    static __device__ __forceinline__ double apply(double a, double x, double b) { return fma(a, x, b); }
};
template <> struct Affine<__half> {
    static __device__ __forceinline__ __half apply(__half a, __half x, __half b) {
        return __float2half_rn(fmaf(__half2float(a), __half2float(x), __half2float(b)));
    }
};
template <> struct Affine<__nv_bfloat16> {
    static __device__ __forceinline__ __nv_bfloat16 apply(__nv_bfloat16 a, __nv_bfloat16 x,
                                                          __nv_bfloat16 b) {
        return __float2bfloat16_rn(fmaf(__bfloat162float(a), __bfloat162float(x), __bfloat162float(b)));
    }
};

// Integers: the product and sum wrap, as Rust's wrapping_mul / wrapping_add.
template <typename T, typename U> struct AffineInt {
    static __device__ __forceinline__ T apply(T a, T x, T b) {
        return static_cast<T>(static_cast<U>(static_cast<U>(a) * static_cast<U>(x)) + static_cast<U>(b));
    }
};
template <> struct Affine<int32_t> : AffineInt<int32_t, uint32_t> {};
template <> struct Affine<uint32_t> : AffineInt<uint32_t, uint32_t> {};
template <> struct Affine<uint8_t> : AffineInt<uint8_t, uint32_t> {};

// A grid-stride loop over size_t indices, so n may exceed 2^32.
template <typename T>
__device__ __forceinline__ void affine(const T *__restrict__ x, T *__restrict__ y, T a, T b, size_t n) {
    const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
    for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
        y[i] = Affine<T>::apply(a, x[i], b);
    }
}

}  // namespace kt
