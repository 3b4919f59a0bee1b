/* kiln.h: the conventions every kernel header uses.
 *
 * A header declares each kernel once, with KILN_KERNEL(name, params...). The
 * same line means three things:
 *   - under nvcc: `extern "C" __global__ void name(params)`, so the .cu file's
 *     definition must match it exactly (C linkage cannot overload: a mismatch
 *     is a compile error);
 *   - under bindgen (KILN_BINDGEN): a host prototype `kiln_kernel__name`, which
 *     kiln's code generation turns into a typed kernel declaration for Rust;
 *   - in any other C or C++ compiler: nothing callable.
 * Host-side functions of static-library modules are plain prototypes marked
 * KILN_HOST_API.
 */
#ifndef KILN_H
#define KILN_H

#include <stdint.h>
#if defined(KILN_BINDGEN)
/* bindgen may run on a libclang without its resource headers (the PyPI
 * wheel); clang predefines the type, and bindgen maps size_t to usize. A
 * header that included <stddef.h> first keeps its offsetof. */
typedef __SIZE_TYPE__ size_t;
#  ifndef offsetof
#    define offsetof(type, field) __builtin_offsetof(type, field)
#  endif
#else
#  include <stddef.h>
#endif

#if defined(__CUDACC__)
#  define KILN_KERNEL(name, ...) extern "C" __global__ void name(__VA_ARGS__)
#elif defined(KILN_BINDGEN)
#  define KILN_KERNEL(name, ...) void kiln_kernel__##name(__VA_ARGS__)
#else
#  define KILN_KERNEL(name, ...) typedef int kiln_kernel_not_callable_from_host__##name
#endif

#ifdef __cplusplus
#  define KILN_HOST_API extern "C"
#  define KILN_STATIC_ASSERT(cond, msg) static_assert(cond, msg)
#  define KILN_ALIGNOF(type) alignof(type)
#else
#  define KILN_ALIGNOF(type) _Alignof(type)
#  define KILN_HOST_API
#  define KILN_STATIC_ASSERT(cond, msg) _Static_assert(cond, msg)
#endif

/* The CUDA runtime's stream type, spelled as the runtime spells it, so that
 * host APIs can take a stream without including cuda_runtime.h in C. */
#if !defined(__CUDACC__)
typedef struct CUstream_st *cudaStream_t;
#endif

/* A cudaError_t value returned across the C ABI (0 is success). */
typedef int32_t kiln_cuda_error_t;

#endif /* KILN_H */
