// dtype.cuh: what one kernel body needs to serve every dtype of a family.
// Half types compute in float (`acc_t`), the others in themselves; the math
// is overloaded on the accumulator type, so an f32 kernel never touches f64
// (the audit would flag it) and an f64 kernel stays f64.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

template <typename T> struct AccOf { using type = T; };
template <> struct AccOf<__half> { using type = float; };
template <> struct AccOf<__nv_bfloat16> { using type = float; };
template <typename T> using acc_t = typename AccOf<T>::type;

template <typename T> __device__ __forceinline__ acc_t<T> to_acc(const T v) {
    return static_cast<acc_t<T>>(v);
}
template <typename T, typename A> __device__ __forceinline__ T from_acc(const A v) {
    return static_cast<T>(v);
}

__device__ __forceinline__ float exp_of(float a) { return expf(a); }
__device__ __forceinline__ double exp_of(double a) { return exp(a); }
__device__ __forceinline__ float log_of(float a) { return logf(a); }
__device__ __forceinline__ double log_of(double a) { return log(a); }
__device__ __forceinline__ float sqrt_of(float a) { return sqrtf(a); }
__device__ __forceinline__ double sqrt_of(double a) { return sqrt(a); }
__device__ __forceinline__ float tanh_of(float a) { return tanhf(a); }
__device__ __forceinline__ double tanh_of(double a) { return tanh(a); }
__device__ __forceinline__ float abs_of(float a) { return fabsf(a); }
__device__ __forceinline__ double abs_of(double a) { return fabs(a); }
__device__ __forceinline__ float max_of(float a, float b) { return fmaxf(a, b); }
__device__ __forceinline__ double max_of(double a, double b) { return fmax(a, b); }
__device__ __forceinline__ float min_of(float a, float b) { return fminf(a, b); }
__device__ __forceinline__ double min_of(double a, double b) { return fmin(a, b); }
// Integers: plain comparisons (promotion to int is undone by from_acc).
template <typename I> __device__ __forceinline__ I max_of(I a, I b) { return a < b ? b : a; }
template <typename I> __device__ __forceinline__ I min_of(I a, I b) { return b < a ? b : a; }

// A literal in the accumulator's precision (folded at compile time, so an
// f32 body holds no f64 instruction).
template <typename A> __device__ __forceinline__ A lit(const double v) {
    return static_cast<A>(v);
}

// The lowest value of the accumulator, the identity of max.
template <typename A> __device__ __forceinline__ A lowest();
template <> __device__ __forceinline__ float lowest<float>() { return -INFINITY; }
template <> __device__ __forceinline__ double lowest<double>() { return -INFINITY; }
