/* KV cache desc rules (kv_cache_desc.c). */
#ifndef VKA_KV_CACHE_DESC_H
#define VKA_KV_CACHE_DESC_H

#include "vkattn.h"

#include <stddef.h>
#include <stdint.h>

/* Copies `in` to `d` with defaults resolved (num_heads, num_blocks) and
 * checks it; the message goes to `error` (may be NULL). */
vkattn_result vka_kv_cache_desc_resolve(const vkattn_kv_cache_desc *in, vkattn_kv_cache_desc *d,
                                        char *error, size_t error_size);
/* Bytes of split-KV partial results a resolved desc needs: per sequence,
 * query head and split row, an unnormalised output row of Dh floats plus its
 * running max and sum. */
uint64_t vka_kv_cache_split_scratch_bytes(const vkattn_kv_cache_desc *d);

#endif
