/* vector_add: c[i] = a[i] + b[i] for i < n (f32). */
#ifndef KILN_VECTOR_ADD_H
#define KILN_VECTOR_ADD_H
#include "kiln.h"

KILN_KERNEL(vector_add, const float *a, const float *b, float *c, uint32_t n);

#endif
