// argsort.cu: row-wise argsort by a bitonic sort in shared memory, one block
// per row, the kernel a template on the order; the host launcher
// `cp_argsort_f32` picks the instantiation and the padded width.
#include "launch.cuh"

#include <float.h>

// dst[row, :] = the indices that sort x[row, :] (`ncols_pad` the next power
// of two >= ncols, one thread per padded column; padding sorts last).
template <bool ASCENDING>
__global__ void argsort_rows(const float *x, uint32_t *dst, const int ncols, const int ncols_pad) {
    extern __shared__ uint32_t idx[];
    const int col = threadIdx.x;
    const float *row = x + static_cast<size_t>(blockIdx.x) * ncols;
    idx[col] = col;
    __syncthreads();
    // Padding (index >= ncols) compares as past every real column.
    auto before = [&](const uint32_t a, const uint32_t b) {
        if (a >= static_cast<uint32_t>(ncols)) return false;
        if (b >= static_cast<uint32_t>(ncols)) return true;
        return ASCENDING ? row[a] < row[b] : row[a] > row[b];
    };
    for (int k = 2; k <= ncols_pad; k <<= 1) {
        for (int j = k >> 1; j > 0; j >>= 1) {
            const int partner = col ^ j;
            if (partner > col) {
                const bool up = (col & k) == 0;
                const uint32_t a = idx[col], b = idx[partner];
                if (up ? before(b, a) : before(a, b)) {
                    idx[col] = b;
                    idx[partner] = a;
                }
            }
            __syncthreads();
        }
    }
    if (col < ncols) dst[static_cast<size_t>(blockIdx.x) * ncols + col] = idx[col];
}

extern "C" int cp_argsort_f32(const float *x, uint32_t *dst, const int nrows, const int ncols,
                              const int ascending, cudaStream_t stream) {
    if (nrows <= 0 || ncols <= 0) return 0;
    int pad = 1;
    while (pad < ncols) pad <<= 1;
    if (pad > 1024) return static_cast<int>(cudaErrorInvalidValue);
    const size_t shared = static_cast<size_t>(pad) * sizeof(uint32_t);
    return ascending != 0
               ? cp::launch(argsort_rows<true>, dim3(nrows), dim3(pad), shared, stream, x, dst,
                            ncols, pad)
               : cp::launch(argsort_rows<false>, dim3(nrows), dim3(pad), shared, stream, x, dst,
                            ncols, pad);
}
