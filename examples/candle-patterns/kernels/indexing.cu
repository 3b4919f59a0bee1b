// indexing.cu: index_select and gather along one dimension of a tensor seen
// as (left, dim, right). A device template does the work; a macro stamps
// the extern "C" entry points per (index type, dtype), as candle's do.
#include "dtype.cuh"
#include "strided.cuh"

// out[l, j, r] = inp[l, ids[j], r]; `info` is the layout of `inp` (nullptr:
// contiguous).
template <typename I, typename T>
__device__ void index_select(const size_t numel, const size_t num_dims, const size_t *info,
                             const I *ids, const T *inp, T *out, const size_t left_size,
                             const size_t src_dim_size, const size_t ids_dim_size,
                             const size_t right_size) {
    const bool dense = dense_operand(info, num_dims, 0);
    CP_FOR_EACH(i, numel) {
        const size_t left = i / (ids_dim_size * right_size);
        const size_t j = i / right_size % ids_dim_size;
        const size_t right = i % right_size;
        const size_t src = (left * src_dim_size + static_cast<size_t>(ids[j])) * right_size + right;
        out[i] = inp[operand_index(src, dense, info, num_dims, 0)];
    }
}

// out[l, j, r] = inp[l, ids[l, j, r], r]: ids shaped like out.
template <typename I, typename T>
__device__ void gather(const size_t numel, const I *ids, const T *inp, T *out,
                       const size_t left_size, const size_t src_dim_size,
                       const size_t ids_dim_size, const size_t right_size) {
    CP_FOR_EACH(i, numel) {
        const size_t left = i / (ids_dim_size * right_size);
        const size_t right = i % right_size;
        out[i] = inp[(left * src_dim_size + static_cast<size_t>(ids[i])) * right_size + right];
    }
}

#define INDEX_OPS(I, T, ISUFFIX, TSUFFIX)                                                          \
    extern "C" __global__ void is_##ISUFFIX##_##TSUFFIX(                                           \
        const size_t numel, const size_t num_dims, const size_t *info, const I *ids,               \
        const T *inp, T *out, const size_t left_size, const size_t src_dim_size,                   \
        const size_t ids_dim_size, const size_t right_size) {                                      \
        index_select(numel, num_dims, info, ids, inp, out, left_size, src_dim_size, ids_dim_size,  \
                     right_size);                                                                  \
    }                                                                                              \
    extern "C" __global__ void gather_##ISUFFIX##_##TSUFFIX(                                       \
        const size_t numel, const I *ids, const T *inp, T *out, const size_t left_size,            \
        const size_t src_dim_size, const size_t ids_dim_size, const size_t right_size) {           \
        gather(numel, ids, inp, out, left_size, src_dim_size, ids_dim_size, right_size);           \
    }

INDEX_OPS(uint32_t, float, u32, f32)
INDEX_OPS(uint32_t, __half, u32, f16)
INDEX_OPS(uint32_t, uint32_t, u32, u32)
INDEX_OPS(int64_t, float, i64, f32)
INDEX_OPS(int64_t, __half, i64, f16)
INDEX_OPS(int64_t, uint32_t, i64, u32)
