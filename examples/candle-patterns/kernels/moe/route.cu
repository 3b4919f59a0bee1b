// route.cu: the routing step of a mixture of experts, as candle's MoE host
// code has it: count the tokens sent to each expert (atomics), then each
// expert's first slot (an exclusive scan in one block). Two kernels, one
// host launcher.
#include "launch.cuh"

__global__ void count_tokens(const uint32_t *expert_ids, const size_t n, const uint32_t num_experts,
                             uint32_t *counts) {
    for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
         i += static_cast<size_t>(blockDim.x) * gridDim.x) {
        const uint32_t e = expert_ids[i];
        if (e < num_experts) atomicAdd(&counts[e], 1u);
    }
}

// offsets[e] = sum of counts[0..e]; one block of num_experts (<= 1024) threads.
__global__ void exclusive_scan(const uint32_t *counts, uint32_t *offsets,
                               const uint32_t num_experts) {
    extern __shared__ uint32_t sums[];
    const uint32_t e = threadIdx.x;
    sums[e] = counts[e];
    __syncthreads();
    for (uint32_t step = 1; step < num_experts; step <<= 1) {
        const uint32_t add = e >= step ? sums[e - step] : 0;
        __syncthreads();
        sums[e] += add;
        __syncthreads();
    }
    offsets[e] = sums[e] - counts[e];
}

// Ids >= num_experts are dropped (counted nowhere).
extern "C" int cp_moe_expert_offsets(const uint32_t *expert_ids, const size_t n,
                                     const uint32_t num_experts, uint32_t *counts,
                                     uint32_t *offsets, cudaStream_t stream) {
    if (num_experts == 0) return 0;
    if (num_experts > 1024) return static_cast<int>(cudaErrorInvalidValue);
    cudaError_t status = cudaMemsetAsync(counts, 0, num_experts * sizeof(uint32_t), stream);
    if (status != cudaSuccess) return static_cast<int>(status);
    // The grid-stride loop covers any n; 1024 blocks keep the atomics busy.
    const unsigned block = 256;
    const unsigned needed = cp::grid_for<uint32_t>(n, block);
    const unsigned grid = needed > 1024 ? 1024 : needed;
    if (n > 0) {
        const int launched = cp::launch(count_tokens, dim3(grid), dim3(block), 0, stream,
                                        expert_ids, n, num_experts, counts);
        if (launched != 0) return launched;
    }
    return cp::launch(exclusive_scan, dim3(1), dim3(num_experts),
                      num_experts * sizeof(uint32_t), stream, counts, offsets, num_experts);
}
