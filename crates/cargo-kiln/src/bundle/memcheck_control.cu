// cargo kiln bundle's memcheck positive control: one thread writes one
// element past the end of a device buffer. Under compute-sanitizer's
// memcheck this must be reported (run.sh fails otherwise), which proves the
// sanitizer is active on the GPU host. Run alone it exits 0 (the stray write
// lands in the allocator's padding), so only the sanitizer can tell.
#include <cstdio>
#include <cuda_runtime.h>

__global__ void write_past_the_end(int *buffer, int n) {
    if (threadIdx.x == 0 && blockIdx.x == 0) {
        buffer[n] = 42; // out of bounds: the buffer holds n elements
    }
}

int main() {
    const int n = 1000;
    int *buffer = nullptr;
    if (cudaMalloc(&buffer, n * sizeof(int)) != cudaSuccess) {
        std::fprintf(stderr, "memcheck control: cudaMalloc failed (no usable GPU?)\n");
        return 2;
    }
    write_past_the_end<<<1, 32>>>(buffer, n);
    cudaError_t err = cudaDeviceSynchronize();
    cudaFree(buffer);
    std::printf("memcheck control: kernel finished (%s)\n", cudaGetErrorString(err));
    return err == cudaSuccess ? 0 : 3;
}
