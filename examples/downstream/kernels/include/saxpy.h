/* saxpy: y[i] = a * x[i] + y[i] for i < n (f32). The one source of truth for
 * the kernel's signature and its parameter struct, shared by the .cu file and
 * the Rust bindings (src/bindings.rs). */
#ifndef DOWNSTREAM_SAXPY_H
#define DOWNSTREAM_SAXPY_H
#include "kiln.h"

/* Passed by value: the scale and the element count. */
typedef struct SaxpyParams {
    float a;
    uint32_t n;
} SaxpyParams;

KILN_STATIC_ASSERT(sizeof(SaxpyParams) == 8, "SaxpyParams is 8 bytes");
KILN_STATIC_ASSERT(offsetof(SaxpyParams, n) == 4, "n at 4");

KILN_KERNEL(saxpy, SaxpyParams p, const float *x, float *y);

#endif
