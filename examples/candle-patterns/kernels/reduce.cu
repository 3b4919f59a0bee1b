// reduce.cu: row reductions as C++ kernel templates with explicit
// instantiations, so the image holds mangled names
// (`_Z8fast_sumIfEvmmmPKmPKT_PS2_`), launched by name. One block per output
// element: each thread folds a strided slice in the accumulator type, warps
// fold with shuffles, then warp leaders through shared memory.
// (src_numel, el_to_sum_per_block, num_dims, info, src, dst): `info` is the
// layout of `src` (nullptr: contiguous); blockDim.x a multiple of 32, <= 1024.
#include "dtype.cuh"
#include "strided.cuh"

struct SumOp {
    template <typename A> __device__ static A identity() { return A(0); }
    template <typename A> __device__ static A fold(const A a, const A b) { return a + b; }
};

struct MaxOp {
    template <typename A> __device__ static A identity() { return lowest<A>(); }
    template <typename A> __device__ static A fold(const A a, const A b) { return max_of(a, b); }
};

// The fold of `v` over the 32 lanes of a warp, in every lane.
template <typename Op, typename A> __device__ __forceinline__ A warp_fold(A v) {
    for (int lane_mask = 16; lane_mask > 0; lane_mask >>= 1)
        v = Op::fold(v, __shfl_xor_sync(0xffffffffu, v, lane_mask));
    return v;
}

// The fold of `v` over the block; thread 0's value is the block's.
template <typename Op, typename A> __device__ A block_fold(A v) {
    __shared__ A per_warp[32];
    const unsigned warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    v = warp_fold<Op>(v);
    if (lane == 0) per_warp[warp] = v;
    __syncthreads();
    const unsigned warps = blockDim.x / 32;
    v = threadIdx.x < warps ? per_warp[threadIdx.x] : Op::template identity<A>();
    return warp == 0 ? warp_fold<Op>(v) : v;
}

template <typename Op, typename T>
__device__ void fold_rows(const size_t src_numel, const size_t el_to_sum_per_block,
                          const size_t num_dims, const size_t *info, const T *src, T *dst) {
    using A = acc_t<T>;
    const bool dense = dense_operand(info, num_dims, 0);
    const size_t start = static_cast<size_t>(blockIdx.x) * el_to_sum_per_block;
    const size_t stop = min(start + el_to_sum_per_block, src_numel);
    A acc = Op::template identity<A>();
    for (size_t i = start + threadIdx.x; i < stop; i += blockDim.x)
        acc = Op::fold(acc, to_acc(src[operand_index(i, dense, info, num_dims, 0)]));
    acc = block_fold<Op>(acc);
    if (threadIdx.x == 0) dst[blockIdx.x] = from_acc<T>(acc);
}

template <typename T>
__global__ void fast_sum(const size_t src_numel, const size_t el_to_sum_per_block,
                         const size_t num_dims, const size_t *info, const T *src, T *dst) {
    fold_rows<SumOp>(src_numel, el_to_sum_per_block, num_dims, info, src, dst);
}

template <typename T>
__global__ void fast_max(const size_t src_numel, const size_t el_to_sum_per_block,
                         const size_t num_dims, const size_t *info, const T *src, T *dst) {
    fold_rows<MaxOp>(src_numel, el_to_sum_per_block, num_dims, info, src, dst);
}

// Explicit instantiations: the kernels the image exports, by mangled name.
template __global__ void fast_sum<float>(size_t, size_t, size_t, const size_t *, const float *,
                                         float *);
template __global__ void fast_sum<double>(size_t, size_t, size_t, const size_t *, const double *,
                                          double *);
template __global__ void fast_sum<__half>(size_t, size_t, size_t, const size_t *, const __half *,
                                          __half *);
template __global__ void fast_sum<__nv_bfloat16>(size_t, size_t, size_t, const size_t *,
                                                 const __nv_bfloat16 *, __nv_bfloat16 *);
template __global__ void fast_max<float>(size_t, size_t, size_t, const size_t *, const float *,
                                         float *);
template __global__ void fast_max<__half>(size_t, size_t, size_t, const size_t *, const __half *,
                                          __half *);
