// launch.cuh: host-only helpers the launchers share (no device code), as
// candle's MoE launchers keep theirs: a grid for n elements, and one
// checked <<<>>> launch that returns the CUDA status as an int for the C ABI.
#pragma once
#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>

namespace cp {

// Blocks of `block` threads to cover `n` items of type T (at least one).
template <typename T> inline unsigned grid_for(const size_t n, const unsigned block) {
    const size_t blocks = (n + block - 1) / block;
    return blocks == 0 ? 1u : static_cast<unsigned>(blocks);
}

// Launches `kernel` and returns the launch's status (0 = cudaSuccess).
template <typename... Params, typename... Args>
inline int launch(void (*kernel)(Params...), const dim3 grid, const dim3 block,
                  const size_t shared, cudaStream_t stream, Args... args) {
    kernel<<<grid, block, shared, stream>>>(args...);
    return static_cast<int>(cudaGetLastError());
}

} // namespace cp
