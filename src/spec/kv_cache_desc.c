/* KV cache desc rules, without a context: defaults, checks and the memory
 * a cache needs (vkattn_kv_cache_memory answers before any device exists;
 * vkattn_kv_cache_create resolves the same way). */
#include "spec/kv_cache_desc.h"

#include "spec/dtype.h"

#include <stdio.h>

vkattn_result vka_kv_cache_desc_resolve(const vkattn_kv_cache_desc *in, vkattn_kv_cache_desc *d, char *error,
                             size_t error_size)
{
#define FAIL(...)                                      \
    do {                                               \
        if (error)                                     \
            snprintf(error, error_size, __VA_ARGS__);  \
        return VKATTN_ERROR_INVALID_ARGUMENT;          \
    } while (0)
    if (!in)
        FAIL("desc is NULL");
    *d = *in;
    if (!d->num_kv_heads)
        FAIL("desc->num_kv_heads is 0: it is required");
    if (!d->num_heads)
        d->num_heads = d->num_kv_heads;
    if (d->num_heads % d->num_kv_heads)
        FAIL("desc->num_kv_heads %u does not divide desc->num_heads %u", d->num_kv_heads, d->num_heads);
    if (!d->head_dim || d->head_dim % 8 || d->head_dim > 256)
        FAIL("desc->head_dim %u is not supported: it must be a multiple of 8 from 8 to 256", d->head_dim);
    if (!vka_dtype_is_float(d->dtype)) {
        char b[VKA_DTYPE_TEXT];
        if (error)
            snprintf(error, error_size, "desc->dtype %s is not supported: f32 or f16",
                     vka_dtype_text(d->dtype, b));
        return VKATTN_ERROR_UNSUPPORTED_DTYPE;
    }
    if (!d->max_sequences)
        FAIL("desc->max_sequences is 0: it is required");
    if (!d->capacity)
        FAIL("desc->capacity is 0: it is required");
    if (d->block_size) {
        uint32_t width = (d->capacity + d->block_size - 1) / d->block_size;
        if (!d->num_blocks) {
            uint64_t all = (uint64_t)width * d->max_sequences;
            if (all > UINT32_MAX - 1)
                FAIL("desc->max_sequences %u x %u blocks each is too many blocks: set desc->num_blocks",
                     d->max_sequences, width);
            d->num_blocks = (uint32_t)all;
        }
        if (d->num_blocks == UINT32_MAX)
            FAIL("desc->num_blocks %u is too many", d->num_blocks);
    } else {
        d->num_blocks = d->max_sequences;
    }
    return VKATTN_SUCCESS;
#undef FAIL
}

/* Split-KV partial results: per sequence, query head and split row, an
 * unnormalised output row of Dh floats plus its running max and sum. */
uint64_t vka_kv_cache_split_scratch_bytes(const vkattn_kv_cache_desc *d)
{
    return (uint64_t)d->max_sequences * d->num_heads * VKATTN_KV_MAX_SPLIT_ROWS * (d->head_dim + 2) * 4;
}

static uint64_t pool_bytes(const vkattn_kv_cache_desc *d)
{
    uint64_t block_tokens = d->block_size ? d->block_size : d->capacity;
    return (uint64_t)d->num_blocks * d->num_kv_heads * block_tokens * d->head_dim *
           vkattn_dtype_size(d->dtype);
}

vkattn_result vkattn_kv_cache_memory(const vkattn_kv_cache_desc *desc, uint64_t *bytes_per_token,
                                     uint64_t *total_bytes, char *error, size_t error_size)
{
    vkattn_kv_cache_desc d;
    vkattn_result r = vka_kv_cache_desc_resolve(desc, &d, error, error_size);
    if (r != VKATTN_SUCCESS)
        return r;
    if (bytes_per_token)
        *bytes_per_token = 2ull * d.num_kv_heads * d.head_dim * vkattn_dtype_size(d.dtype);
    if (total_bytes) {
        uint32_t width = d.block_size ? (d.capacity + d.block_size - 1) / d.block_size : 1;
        *total_bytes = 2 * pool_bytes(&d) + vka_kv_cache_split_scratch_bytes(&d) +
                       4ull * (2ull * d.max_sequences + (uint64_t)d.max_sequences * width);
    }
    return VKATTN_SUCCESS;
}

