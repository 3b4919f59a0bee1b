// sum: a templated block reduction with cooperative groups, explicitly
// instantiated for the dtypes the host launcher serves. Pass 1 reduces each
// block's grid-stride share into scratch[block]; pass 2 reduces scratch with
// one block.
#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>

#include "reduce.h"

namespace cg = cooperative_groups;

namespace {

constexpr unsigned kBlock = 256;
constexpr unsigned kMaxBlocks = 1024;

template <typename T>
__global__ void block_sum(const T *__restrict__ in, T *__restrict__ out, size_t n) {
    __shared__ T warp_sums[kBlock / 32];
    cg::thread_block block = cg::this_thread_block();
    cg::thread_block_tile<32> warp = cg::tiled_partition<32>(block);

    T acc = T(0);
    const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
    for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
        acc += in[i];
    }
    acc = cg::reduce(warp, acc, cg::plus<T>());
    if (warp.thread_rank() == 0) warp_sums[warp.meta_group_rank()] = acc;
    block.sync();
    if (warp.meta_group_rank() == 0) {
        T v = warp.thread_rank() < warp.meta_group_size() ? warp_sums[warp.thread_rank()] : T(0);
        v = cg::reduce(warp, v, cg::plus<T>());
        if (warp.thread_rank() == 0) out[blockIdx.x] = v;
    }
}

// Explicit instantiations: the launcher below is the only user.
template __global__ void block_sum<float>(const float *, float *, size_t);
template __global__ void block_sum<uint32_t>(const uint32_t *, uint32_t *, size_t);

unsigned blocks_for(size_t n) {
    const size_t blocks = (n + kBlock - 1) / kBlock;
    return static_cast<unsigned>(blocks == 0 ? 1 : (blocks < kMaxBlocks ? blocks : kMaxBlocks));
}

template <typename T>
cudaError_t sum(const T *in, T *out, T *scratch, size_t n, cudaStream_t stream) {
    const unsigned blocks = blocks_for(n);
    block_sum<T><<<blocks, kBlock, 0, stream>>>(in, scratch, n);
    block_sum<T><<<1, kBlock, 0, stream>>>(scratch, out, blocks);
    return cudaGetLastError();
}

}  // namespace

KILN_HOST_API size_t kt_sum_scratch_elems(size_t n) { return blocks_for(n); }

KILN_HOST_API kiln_cuda_error_t kt_sum_f32(const float *in, float *out, float *scratch, size_t n,
                                           cudaStream_t stream) {
    return static_cast<kiln_cuda_error_t>(sum(in, out, scratch, n, stream));
}

KILN_HOST_API kiln_cuda_error_t kt_sum_u32(const uint32_t *in, uint32_t *out, uint32_t *scratch,
                                           size_t n, cudaStream_t stream) {
    return static_cast<kiln_cuda_error_t>(sum(in, out, scratch, n, stream));
}
