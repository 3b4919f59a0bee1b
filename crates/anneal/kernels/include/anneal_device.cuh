// Device helpers that more than one of kiln-anneal's modules use (device code
// only: no bindings are generated from this header).
#pragma once

#include <stdint.h>

namespace kiln_anneal {

// Whether this block is the grid's last to arrive at `arrived`, a counter
// that is zero when the launch starts and that every block of the grid
// reaches (a block that returns before it would leave the count short). Call
// it from every thread of the block: a barrier orders the block's writes
// before thread 0's fence and count, as cooperative groups' grid sync does,
// and the last block fences again before it reads what the others wrote. The
// last block zeroes `arrived` once it is done with it.
__device__ __forceinline__ bool arrived_last(uint32_t *arrived) {
    __shared__ bool last;
    __syncthreads();
    if (threadIdx.x == 0) {
        __threadfence();  // the block's writes before its count
        last = atomicAdd(arrived, 1u) == gridDim.x - 1u;
    }
    __syncthreads();
    if (last) __threadfence();  // every block's writes before this block's reads
    return last;
}

}  // namespace kiln_anneal
