/* hopper: a module built for sm_90a alone (kiln.toml gives it its own archs):
 * it uses an instruction only the arch-specific target has. */
#ifndef KT_HOPPER_H
#define KT_HOPPER_H
#include <stddef.h>

#include "kiln.h"

/* y[i] = a * x[i] + 1, after a warpgroup MMA fence (sm_90a only). */
KILN_KERNEL(hopper_axpo, const float *x, float *y, float a, size_t n);

#endif
