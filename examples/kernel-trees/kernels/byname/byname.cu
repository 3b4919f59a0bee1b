// byname: kernels with no header, as a vendored .cu often has. Rust launches
// them by name, with the argument list checked against what the driver
// reports for each parameter (count and size), and typed, through the
// declarations codegen reads from this file (all but byname_fill_span, whose
// struct no header declares).
#include <stddef.h>
#include <stdint.h>

struct Span {
    uint32_t start;
    uint32_t len;
};

// out[i] = value + i for i < n.
extern "C" __global__ void byname_iota(uint32_t *out, uint32_t value, size_t n) {
    const size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i < n) out[i] = value + static_cast<uint32_t>(i);
}

// out[span.start + i] = fill for i < span.len: a struct passed by value.
extern "C" __global__ void byname_fill_span(uint32_t *out, Span span, uint32_t fill) {
    const uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < span.len) out[span.start + i] = fill;
}

// out[index ? index[i] : i] = value for i < n: an optional pointer, as
// vendored kernels take a layout that is null when the data is contiguous
// (launched with gpu_core::Arg::null() for `index`).
extern "C" __global__ void byname_scatter(uint32_t *out, const uint32_t *index, uint32_t value,
                                          size_t n) {
    const size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i < n) out[index != nullptr ? index[i] : i] = value;
}

// out[i] = value for i < n: a template, explicitly instantiated for the
// dtypes the crate launches (typed as byname_fill_float / byname_fill_uint32_t
// under their mangled names).
template <typename T>
__global__ void byname_fill(T *out, T value, size_t n) {
    const size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i < n) out[i] = value;
}

template __global__ void byname_fill<float>(float *, float, size_t);
template __global__ void byname_fill<uint32_t>(uint32_t *, uint32_t, size_t);
