// batch_stats: one block per structure; each thread accumulates a strided
// share of the structure's atoms, then a block reduction in shared memory.
#include "batch.h"

namespace {
constexpr int kThreads = 256;

__device__ float block_sum(float value, float *scratch) {
    scratch[threadIdx.x] = value;
    __syncthreads();
    for (int width = kThreads / 2; width > 0; width /= 2) {
        if (threadIdx.x < width) scratch[threadIdx.x] += scratch[threadIdx.x + width];
        __syncthreads();
    }
    const float total = scratch[0];
    __syncthreads();
    return total;
}
}  // namespace

KILN_KERNEL(batch_stats, const float *__restrict__ xyz, uint32_t total_atoms,
            const BatchStructureDesc *__restrict__ descs, uint32_t n_structures,
            BatchStats *__restrict__ out) {
    __shared__ float scratch[kThreads];
    const uint32_t s = blockIdx.x;
    if (s >= n_structures) return;
    const BatchStructureDesc d = descs[s];
    // The host rejects descriptors outside the atom array; this guard keeps a
    // bad descriptor from reading out of bounds if one slips through.
    const bool valid = d.atom_offset <= total_atoms && d.n_atoms <= total_atoms - d.atom_offset;
    const uint32_t n = valid ? d.n_atoms : 0;
    const float *atoms = xyz + 3ull * d.atom_offset;

    float sx = 0.f, sy = 0.f, sz = 0.f;
    for (uint32_t i = threadIdx.x; i < n; i += kThreads) {
        sx += atoms[3 * i];
        sy += atoms[3 * i + 1];
        sz += atoms[3 * i + 2];
    }
    const float inv_n = n > 0 ? 1.f / static_cast<float>(n) : 0.f;
    const float cx = block_sum(sx, scratch) * inv_n;
    const float cy = block_sum(sy, scratch) * inv_n;
    const float cz = block_sum(sz, scratch) * inv_n;

    float sq = 0.f;
    for (uint32_t i = threadIdx.x; i < n; i += kThreads) {
        const float dx = atoms[3 * i] - cx, dy = atoms[3 * i + 1] - cy, dz = atoms[3 * i + 2] - cz;
        sq += dx * dx + dy * dy + dz * dz;
    }
    const float rg = sqrtf(block_sum(sq, scratch) * inv_n);
    if (threadIdx.x == 0) {
        BatchStats r;
        r.centroid[0] = cx;
        r.centroid[1] = cy;
        r.centroid[2] = cz;
        r.radius_of_gyration = rg;
        out[s] = r;
    }
}
