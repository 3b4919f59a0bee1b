// elementwise: the definitions of the family declared in elementwise.h, one
// macro expansion per dtype over the shared template in common/affine.cuh.
#include "../common/affine.cuh"
#include "elementwise.h"

#define KT_DEFINE(T, SUFFIX) \
    KT_AFFINE_DECL(T, SUFFIX) { kt::affine<T>(x, y, a, b, n); }
KT_FOR_EACH_DTYPE(KT_DEFINE)
#undef KT_DEFINE
