/* convert: f32 -> bf16 (round to nearest even), stored as raw uint16_t bits.
 * On sm_80 and newer the hardware conversion is used; older archs take a
 * bit-exact software fallback (see convert.cu). bf16 -> f32 is exact (the
 * bits shifted into the top half), the same on every arch. */
#ifndef KILN_CONVERT_H
#define KILN_CONVERT_H
#include "kiln.h"

KILN_KERNEL(f32_to_bf16, const float *in, uint16_t *out, uint32_t n);
KILN_KERNEL(bf16_to_f32, const uint16_t *in, float *out, uint32_t n);

#endif
