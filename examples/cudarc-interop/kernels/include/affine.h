/* affine: y[i] = scale * x[i] + offset for i < n (f32). The one source of
 * truth for the kernel's signature and its parameter struct, shared by the
 * .cu file and the Rust bindings (src/bindings.rs), where the struct
 * implements cudarc's DeviceRepr and is passed by value with plain cudarc. */
#ifndef CUDARC_INTEROP_AFFINE_H
#define CUDARC_INTEROP_AFFINE_H
#include "kiln.h"

/* Passed by value: the map and the element count. */
typedef struct AffineParams {
    float scale;
    float offset;
    uint32_t n;
} AffineParams;

KILN_STATIC_ASSERT(sizeof(AffineParams) == 12, "AffineParams is 12 bytes");
KILN_STATIC_ASSERT(offsetof(AffineParams, n) == 8, "n at 8");

KILN_KERNEL(affine, AffineParams p, const float *x, float *y);

#endif
