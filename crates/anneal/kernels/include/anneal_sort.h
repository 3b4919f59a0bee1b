/* anneal_sort: the anneal's stable radix sort of (anchor, point) pairs
 * through CUB, called from the host. Built in static-library mode
 * (kiln.toml): the host code uses CUB's device-wide API and the CUDA
 * runtime, so nvcc compiles it into a static library linked with the
 * static CUDA runtime. */
#ifndef KILN_ANNEAL_SORT_H
#define KILN_ANNEAL_SORT_H
#include "kiln.h"

/* Bytes of device scratch that anneal_sort_pairs_u32 needs for n pairs
 * whose keys are below 2^end_bit. */
KILN_HOST_API kiln_cuda_error_t anneal_sort_pairs_u32_scratch_bytes(uint32_t n, uint32_t end_bit,
                                                                    size_t *bytes);

/* (keys_out, values_out) = the n pairs (keys_in, values_in) sorted by the key
 * bits [0, end_bit), stably (pairs of equal keys keep their input order), on
 * `stream`. Every pointer is device memory of n values; `scratch` holds at
 * least anneal_sort_pairs_u32_scratch_bytes(n, end_bit) bytes. A radix sort:
 * the same output on every run, whatever the scheduling. Asynchronous. */
KILN_HOST_API kiln_cuda_error_t anneal_sort_pairs_u32(const uint32_t *keys_in, uint32_t *keys_out,
                                                      const uint32_t *values_in,
                                                      uint32_t *values_out, uint32_t n,
                                                      uint32_t end_bit, void *scratch,
                                                      size_t scratch_bytes, cudaStream_t stream);

#endif
