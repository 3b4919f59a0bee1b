// hopper: sm_90a only. Built for any other arch this file fails to compile,
// which is how the fixture proves that the module's own `archs` are used.
#include "hopper.h"

#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
#error "hopper.cu is built for sm_90a only (kiln.toml: [modules.hopper] archs)"
#endif

KILN_KERNEL(hopper_axpo, const float *x, float *y, float a, size_t n) {
    // wgmma.fence exists only on sm_90a; with no wgmma in flight it is a no-op.
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
    const size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i < n) y[i] = fmaf(a, x[i], 1.0f);
}
