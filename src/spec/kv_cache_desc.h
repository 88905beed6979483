/* KV cache desc rules (kv_cache_desc.c). */
#ifndef VKA_KV_CACHE_DESC_H
#define VKA_KV_CACHE_DESC_H

#include "vkattn.h"

#include <stddef.h>
#include <stdint.h>

/* What a resolved desc needs, in bytes or entries; every product checked. */
typedef struct vka_kv_cache_sizes {
    uint32_t block_tokens;        /* block_size, or capacity for a contiguous cache */
    uint32_t table_width;         /* blocks a sequence can hold */
    uint64_t table_entries;       /* max_sequences x table_width (< 2^32) */
    uint32_t k_row, v_row;        /* elements of a token row of K / of V: the head
                                     dim, rounded up to 8 (zero-padded) unless quantized */
    uint64_t k_block_bytes;       /* one block of K */
    uint64_t v_block_bytes;       /* one block of V */
    uint64_t k_pool_bytes;        /* the K pool */
    uint64_t v_pool_bytes;        /* the V pool */
    uint64_t meta_bytes;          /* step metadata of max_sequences rows */
    uint64_t split_scratch_bytes; /* split-KV partial results: per sequence, query
                                     head and split row, Dv floats + max and sum */
} vka_kv_cache_sizes;

/* Copies `in` to `d` with defaults resolved (num_heads, v_head_dim, num_blocks) and
 * checks it, sizes included (`sizes` may be NULL); the message goes to
 * `error` (may be NULL). Codes: VKATTN_ERROR_INVALID_ARGUMENT,
 * _UNSUPPORTED_DTYPE, or _OUT_OF_RANGE for sizes past 2^64. */
vkattn_result vka_kv_cache_desc_resolve(const vkattn_kv_cache_desc *in, vkattn_kv_cache_desc *d,
                                        vka_kv_cache_sizes *sizes, char *error, size_t error_size);

#endif
