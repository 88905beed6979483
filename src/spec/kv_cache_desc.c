/* KV cache desc rules, without a context: defaults, checks and every size a
 * cache needs, computed once and overflow-checked (vkattn_kv_cache_memory
 * answers before any device exists; vkattn_kv_cache_create resolves the
 * same way). */
#include "spec/kv_cache_desc.h"

#include "spec/attention_shapes.h"
#include "spec/dtype.h"
#include "spec/error_text.h"
#include "spec/size_math.h"

/* Elements a cache keeps per token row of a head dim: whole 32-value
 * blocks when quantized (the values past the head dim quantized as zeros),
 * else the head dim zero-padded to a multiple of 8 (the kernels read rows
 * by quads and octets). */
static uint32_t row_elements(vkattn_dtype dtype, uint32_t head_dim)
{
    return vka_dtype_is_quantized(dtype) ? (head_dim + 31) / 32 * 32
                                         : vka_head_dim_padded(head_dim);
}

/* Fills `z` from a resolved desc; false when a size does not fit 64 bits. */
static bool compute_sizes(const vkattn_kv_cache_desc *d, vka_kv_cache_sizes *z)
{
    z->block_tokens = d->block_size;
    z->table_width = (uint32_t)vka_ceil_div_u64(d->capacity, d->block_size);
    z->table_entries = (uint64_t)d->max_sequences * z->table_width;
    z->k_row = row_elements(d->dtype, d->head_dim);
    z->v_row = row_elements(d->dtype, d->v_head_dim);
    /* a token row: its elements * size, or / 32 quantized blocks */
    const uint64_t k_block[] = {d->num_kv_heads, d->block_size, 1,
                                vkattn_dtype_row_bytes(d->dtype, z->k_row)};
    const uint64_t v_block[] = {d->num_kv_heads, d->block_size, 1,
                                vkattn_dtype_row_bytes(d->dtype, z->v_row)};
    const uint64_t scratch[] = {d->max_sequences, d->num_heads, VKATTN_KV_MAX_SPLIT_ROWS,
                                (uint64_t)d->v_head_dim + 2, 4};
    bool ok = vka_product_u64(k_block, 4, &z->k_block_bytes) &&
              vka_product_u64(v_block, 4, &z->v_block_bytes) &&
              vka_mul_u64(z->k_block_bytes, d->num_blocks, &z->k_pool_bytes) &&
              vka_mul_u64(z->v_block_bytes, d->num_blocks, &z->v_pool_bytes) &&
              vka_product_u64(scratch, 5, &z->split_scratch_bytes);
    /* a quantized pool: blocks of 34, 18 or 22 bytes may end halfway into a
     * word, and the word readers read whole words, one past a block that
     * ends so: up to the next word, and one more */
    ok = ok && z->k_pool_bytes < UINT64_MAX - 8 && z->v_pool_bytes < UINT64_MAX - 8;
    if (ok && vka_dtype_is_quantized(d->dtype)) {
        z->k_pool_bytes = (z->k_pool_bytes | 3) + 5;
        z->v_pool_bytes = (z->v_pool_bytes | 3) + 5;
    }
    /* start and length per sequence, then its block table (fits: checked
     * against UINT32_MAX entries by the caller) */
    z->meta_bytes = 4 * (2ull * d->max_sequences + z->table_entries);
    return ok;
}

/* A head dim of the desc (`name`: "head_dim" or "v_head_dim"): 1 to 576
 * (a quantized cache pads its rows to whole blocks: row_elements). */
static vkattn_result check_head_dim(uint32_t value, const char *name, char *error,
                                    size_t error_size)
{
    if (!value || value > VKA_ATTENTION_HEAD_DIM_MAX) {
        vka_error_format(error, error_size, "desc->%s %u is not supported: it must be from 1 to %u",
                         name, value, VKA_ATTENTION_HEAD_DIM_MAX);
        return VKATTN_ERROR_INVALID_ARGUMENT;
    }
    return VKATTN_SUCCESS;
}

vkattn_result vka_kv_cache_desc_resolve(const vkattn_kv_cache_desc *in, vkattn_kv_cache_desc *d,
                                        vka_kv_cache_sizes *sizes, char *error, size_t error_size)
{
    if (!in) {
        vka_error_format(error, error_size, "desc is NULL");
        return VKATTN_ERROR_INVALID_ARGUMENT;
    }
    *d = *in;
    const char *missing = !d->num_kv_heads    ? "num_kv_heads"
                          : !d->max_sequences ? "max_sequences"
                          : !d->capacity      ? "capacity"
                                              : NULL;
    if (missing) {
        vka_error_format(error, error_size, "desc->%s is 0: it is required", missing);
        return VKATTN_ERROR_INVALID_ARGUMENT;
    }
    if (!d->num_heads)
        d->num_heads = d->num_kv_heads;
    if (d->num_heads % d->num_kv_heads) {
        vka_error_format(error, error_size,
                         "desc->num_kv_heads %u does not divide desc->num_heads %u",
                         d->num_kv_heads, d->num_heads);
        return VKATTN_ERROR_INVALID_ARGUMENT;
    }
    if (!vka_dtype_is_float(d->dtype) && d->dtype != VKATTN_DTYPE_BF16 &&
        !vka_dtype_is_quantized(d->dtype)) {
        char b[VKA_DTYPE_TEXT];
        vka_error_format(error, error_size,
                         "desc->dtype %s is not supported: f32, f16, bf16, q8_0 or q4_0",
                         vka_dtype_text(d->dtype, b));
        return VKATTN_ERROR_UNSUPPORTED_DTYPE;
    }
    if (!d->v_head_dim)
        d->v_head_dim = d->head_dim;
    VKA_TRY(check_head_dim(d->head_dim, "head_dim", error, error_size));
    VKA_TRY(check_head_dim(d->v_head_dim, "v_head_dim", error, error_size));
    /* A contiguous cache is one block of `capacity` tokens per sequence. */
    bool paged = d->block_size != 0;
    uint32_t block_tokens = paged ? d->block_size : d->capacity;
    uint64_t width = vka_ceil_div_u64(d->capacity, block_tokens);
    uint64_t entries = width * d->max_sequences; /* < 2^64: both < 2^32 */
    /* block ids and table positions are 32-bit on the GPU */
    if (entries > UINT32_MAX - 1) {
        vka_error_format(error, error_size,
                         "desc->max_sequences %u x %llu blocks each (desc->capacity %u / "
                         "desc->block_size %u) is too many block-table entries (at most %u)",
                         d->max_sequences, (unsigned long long)width, d->capacity, d->block_size,
                         UINT32_MAX - 1);
        return VKATTN_ERROR_INVALID_ARGUMENT;
    }
    /* A contiguous cache holds every token in place: there is nothing a
     * window could give back, so a window there is refused, not ignored. */
    if (d->window && !paged) {
        vka_error_format(error, error_size,
                         "desc->window is %u but desc->block_size is 0: a windowed cache must be "
                         "paged (a contiguous one cannot give blocks back)",
                         d->window);
        return VKATTN_ERROR_INVALID_ARGUMENT;
    }
    if (!paged) {
        d->num_blocks = d->max_sequences;
    } else if (!d->num_blocks && d->window) {
        /* a sequence holds the W - 1 tokens before its last step's first
         * token, that step's tokens and the next step's before the release:
         * W - 1 + 2 block_size tokens for steps of up to block_size tokens,
         * spanning one block more than they fill */
        uint64_t tokens = (uint64_t)d->window - 1 + 2ull * d->block_size;
        uint64_t per = vka_ceil_div_u64(tokens, d->block_size) + 1;
        if (per > width)
            per = width;
        d->num_blocks = (uint32_t)(per * d->max_sequences); /* <= entries */
    } else if (!d->num_blocks) {
        d->num_blocks = (uint32_t)entries;
    } else if (d->num_blocks == UINT32_MAX) {
        vka_error_format(error, error_size, "desc->num_blocks %u is too many", d->num_blocks);
        return VKATTN_ERROR_INVALID_ARGUMENT;
    }
    vkattn_kv_cache_desc resolved = *d;
    resolved.block_size = block_tokens;
    vka_kv_cache_sizes z;
    if (!compute_sizes(&resolved, &z)) {
        vka_error_format(error, error_size,
                         "desc: %u blocks of %u KV heads x %u tokens x head_dim %u (or the split "
                         "scratch of %u sequences x %u heads) exceed 2^64 bytes",
                         d->num_blocks, d->num_kv_heads, block_tokens,
                         d->head_dim > d->v_head_dim ? d->head_dim : d->v_head_dim,
                         d->max_sequences, d->num_heads);
        return VKATTN_ERROR_OUT_OF_RANGE;
    }
    if (sizes)
        *sizes = z;
    return VKATTN_SUCCESS;
}

vkattn_result vkattn_kv_cache_memory(const vkattn_kv_cache_desc *desc, uint64_t *bytes_per_token,
                                     uint64_t *total_bytes, char *error, size_t error_size)
{
    vkattn_kv_cache_desc d;
    vka_kv_cache_sizes z;
    VKA_TRY(vka_kv_cache_desc_resolve(desc, &d, &z, error, error_size));
    uint64_t total = 0;
    bool ok = vka_add_u64(z.k_pool_bytes, z.v_pool_bytes, &total) &&
              vka_add_u64(total, z.split_scratch_bytes, &total) &&
              vka_add_u64(total, z.meta_bytes, &total);
    if (!ok) {
        vka_error_format(error, error_size, "desc: the cache's memory exceeds 2^64 bytes");
        return VKATTN_ERROR_OUT_OF_RANGE;
    }
    if (bytes_per_token) /* < 2^64: Hkv < 2^32, rows <= 576 elements */
        *bytes_per_token = (uint64_t)d.num_kv_heads * (vkattn_dtype_row_bytes(d.dtype, z.k_row) +
                                                       vkattn_dtype_row_bytes(d.dtype, z.v_row));
    if (total_bytes)
        *total_bytes = total;
    return VKATTN_SUCCESS;
}
