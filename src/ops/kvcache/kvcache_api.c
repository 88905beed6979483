/* The KV cache object: memory, lengths, block tables and the per-step
 * metadata (see kv_cache.h). */
#include "spec/dtype.h"
#include "spec/error_text.h"
#include "ops/kvcache/kvcache.h"

#include <stdio.h>
#include <string.h>

/* Resolves defaults and checks a desc without a context. */
static vkattn_result resolve(const vkattn_kv_cache_desc *in, vkattn_kv_cache_desc *d, char *error,
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
static uint64_t split_scratch_bytes(const vkattn_kv_cache_desc *d)
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
    vkattn_result r = resolve(desc, &d, error, error_size);
    if (r != VKATTN_SUCCESS)
        return r;
    if (bytes_per_token)
        *bytes_per_token = 2ull * d.num_kv_heads * d.head_dim * vkattn_dtype_size(d.dtype);
    if (total_bytes) {
        uint32_t width = d.block_size ? (d.capacity + d.block_size - 1) / d.block_size : 1;
        *total_bytes = 2 * pool_bytes(&d) + split_scratch_bytes(&d) +
                       4ull * (2ull * d.max_sequences + (uint64_t)d.max_sequences * width);
    }
    return VKATTN_SUCCESS;
}

vkattn_result vkattn_kv_cache_create(vkattn_context *ctx, const vkattn_kv_cache_desc *desc,
                                     vkattn_kv_cache **out)
{
    if (!ctx)
        return VKATTN_ERROR_INVALID_ARGUMENT;
    if (!out)
        return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT, "vkattn_kv_cache_create: out is NULL");
    *out = NULL;
    vkattn_kv_cache_desc d;
    char why[VKA_ERROR_MAX];
    vkattn_result r = resolve(desc, &d, why, sizeof why);
    if (r != VKATTN_SUCCESS)
        return vka_fail(ctx, r, "%s", why);
    vkattn_kv_cache *c = vka_alloc(ctx, sizeof *c);
    if (!c)
        return vka_fail(ctx, VKATTN_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
    c->ctx = ctx;
    c->d = d;
    c->paged = d.block_size != 0;
    if (!c->paged)
        c->d.block_size = d.capacity;
    c->table_width = (d.capacity + c->d.block_size - 1) / c->d.block_size;
    c->block_bytes = (uint64_t)d.num_kv_heads * c->d.block_size * d.head_dim * vkattn_dtype_size(d.dtype);
    size_t table_words = (size_t)d.max_sequences * c->table_width;
    c->lengths = vka_alloc(ctx, d.max_sequences * sizeof *c->lengths);
    c->tables = vka_alloc(ctx, table_words * sizeof *c->tables);
    c->free_blocks = c->paged ? vka_alloc(ctx, (size_t)d.num_blocks * sizeof *c->free_blocks) : NULL;
    if (!c->lengths || !c->tables || (c->paged && !c->free_blocks)) {
        vkattn_kv_cache_destroy(c);
        return vka_fail(ctx, VKATTN_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
    }
    for (size_t i = 0; i < table_words; i++)
        c->tables[i] = UINT32_MAX;
    if (c->paged) {
        /* a stack handing out low block ids first */
        for (uint32_t i = 0; i < d.num_blocks; i++)
            c->free_blocks[i] = d.num_blocks - 1 - i;
        c->free_count = d.num_blocks;
    } else {
        for (uint32_t s = 0; s < d.max_sequences; s++)
            c->tables[s] = s;
    }
    vkattn_buffer_desc pool = {.size = c->block_bytes * d.num_blocks};
    vkattn_buffer_desc meta = {.size = 4 * vka_kv_meta_words(c, d.max_sequences)};
    vkattn_buffer_desc split = {.size = split_scratch_bytes(&d)};
    r = vkattn_buffer_create(ctx, &pool, &c->k);
    if (r == VKATTN_SUCCESS)
        r = vkattn_buffer_create(ctx, &pool, &c->v);
    if (r == VKATTN_SUCCESS)
        r = vkattn_buffer_create(ctx, &meta, &c->meta);
    if (r == VKATTN_SUCCESS)
        r = vkattn_buffer_create(ctx, &split, &c->split_scratch);
    if (r != VKATTN_SUCCESS) {
        vkattn_kv_cache_destroy(c);
        return r;
    }
    *out = c;
    return VKATTN_SUCCESS;
}

void vkattn_kv_cache_destroy(vkattn_kv_cache *c)
{
    if (!c)
        return;
    vkattn_buffer_destroy(c->k);
    vkattn_buffer_destroy(c->v);
    vkattn_buffer_destroy(c->meta);
    vkattn_buffer_destroy(c->split_scratch);
    vka_free(c->ctx, c->lengths);
    vka_free(c->ctx, c->tables);
    vka_free(c->ctx, c->free_blocks);
    vka_free(c->ctx, c);
}

const vkattn_kv_cache_desc *vkattn_kv_cache_config(const vkattn_kv_cache *c)
{
    return c ? &c->d : NULL;
}

static vkattn_result check_sequence(const vkattn_kv_cache *c, uint32_t sequence, const char *fn)
{
    if (sequence >= c->d.max_sequences)
        return vka_fail(c->ctx, VKATTN_ERROR_INVALID_ARGUMENT,
                           "%s: sequence %u does not exist (the cache holds sequences 0..%u)", fn,
                           sequence, c->d.max_sequences - 1);
    return VKATTN_SUCCESS;
}

vkattn_result vkattn_kv_cache_length(const vkattn_kv_cache *c, uint32_t sequence, uint32_t *length)
{
    if (!c)
        return VKATTN_ERROR_INVALID_ARGUMENT;
    vkattn_result r = check_sequence(c, sequence, "vkattn_kv_cache_length");
    if (r != VKATTN_SUCCESS)
        return r;
    if (!length)
        return vka_fail(c->ctx, VKATTN_ERROR_INVALID_ARGUMENT, "vkattn_kv_cache_length: length is NULL");
    *length = c->lengths[sequence];
    return VKATTN_SUCCESS;
}

vkattn_result vkattn_kv_cache_truncate(vkattn_kv_cache *c, uint32_t sequence, uint32_t length)
{
    if (!c)
        return VKATTN_ERROR_INVALID_ARGUMENT;
    vkattn_result r = check_sequence(c, sequence, "vkattn_kv_cache_truncate");
    if (r != VKATTN_SUCCESS)
        return r;
    if (length > c->lengths[sequence])
        return vka_fail(c->ctx, VKATTN_ERROR_OUT_OF_RANGE,
                           "vkattn_kv_cache_truncate: length %u is more than sequence %u holds (%u)",
                           length, sequence, c->lengths[sequence]);
    if (c->paged) {
        uint32_t keep = (length + c->d.block_size - 1) / c->d.block_size;
        uint32_t *row = c->tables + (size_t)sequence * c->table_width;
        for (uint32_t i = keep; i < c->table_width && row[i] != UINT32_MAX; i++) {
            c->free_blocks[c->free_count++] = row[i];
            row[i] = UINT32_MAX;
        }
    }
    c->lengths[sequence] = length;
    return VKATTN_SUCCESS;
}

uint32_t vkattn_kv_cache_free_blocks(const vkattn_kv_cache *c)
{
    return c && c->paged ? c->free_count : 0;
}

/* ------------------------------------------------------------------ steps */

vkattn_result vka_kv_step_check(vkattn_kv_cache *c, uint32_t batch, const uint32_t *sequences,
                                   uint32_t new_tokens, const char *what, vka_kv_step *step)
{
    vkattn_context *ctx = c->ctx;
    if (batch == 0 || !sequences)
        return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT, "%s%s", what,
                           batch == 0 ? "batch is 0" : "sequences is NULL");
    memset(step, 0, sizeof *step);
    uint32_t blocks = 0;
    for (uint32_t b = 0; b < batch; b++) {
        uint32_t s = sequences[b];
        if (s >= c->d.max_sequences)
            return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT,
                               "%ssequences[%u] is %u: the cache holds sequences 0..%u", what, b, s,
                               c->d.max_sequences - 1);
        for (uint32_t e = 0; e < b; e++)
            if (sequences[e] == s)
                return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT,
                                   "%ssequences[%u] and [%u] are both sequence %u", what, e, b, s);
        uint32_t len = c->lengths[s];
        if (new_tokens == 0 && len == 0)
            return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT,
                               "%ssequences[%u]: sequence %u is empty: there is nothing to attend to",
                               what, b, s);
        if ((uint64_t)len + new_tokens > c->d.capacity)
            return vka_fail(ctx, VKATTN_ERROR_OUT_OF_RANGE,
                               "%ssequences[%u]: sequence %u holds %u tokens; %u more exceed the "
                               "cache's capacity of %u", what, b, s, len, new_tokens, c->d.capacity);
        uint32_t after = len + new_tokens;
        if (after > step->max_length)
            step->max_length = after;
        if (c->paged)
            blocks += (after + c->d.block_size - 1) / c->d.block_size -
                      (len + c->d.block_size - 1) / c->d.block_size;
    }
    if (c->paged && blocks > c->free_count)
        return vka_fail(ctx, VKATTN_ERROR_CACHE_FULL,
                           "KV cache full: the step for %ssequences needs %u new blocks of %u tokens but "
                           "the pool has %u free (of %u)",
                           what, blocks, c->d.block_size, c->free_count, c->d.num_blocks);
    step->cache = c;
    step->batch = batch;
    step->sequences = sequences;
    step->new_tokens = new_tokens;
    step->blocks_needed = blocks;
    return VKATTN_SUCCESS;
}

vkattn_result vka_kv_step_record(const vka_kv_step *step, VkCommandBuffer cmd, vka_binding *meta)
{
    vkattn_kv_cache *c = step->cache;
    vkattn_context *ctx = c->ctx;
    uint64_t words = vka_kv_meta_words(c, step->batch);
    uint32_t *data = vka_alloc(ctx, words * 4);
    if (!data)
        return vka_fail(ctx, VKATTN_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
    /* apply the step to the host state (it was checked: this cannot fail) */
    for (uint32_t b = 0; b < step->batch; b++) {
        uint32_t s = step->sequences[b], len = c->lengths[s], after = len + step->new_tokens;
        uint32_t *row = c->tables + (size_t)s * c->table_width;
        if (c->paged)
            for (uint32_t i = (len + c->d.block_size - 1) / c->d.block_size;
                 i < (after + c->d.block_size - 1) / c->d.block_size; i++)
                row[i] = c->free_blocks[--c->free_count];
        c->lengths[s] = after;
        data[b] = len;
        data[step->batch + b] = after;
        memcpy(data + 2 * step->batch + (size_t)b * c->table_width, row, c->table_width * 4);
    }
    /* earlier steps' reads of the metadata -> this update -> this step's reads */
    VkMemoryBarrier before = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                              .srcAccessMask = VK_ACCESS_SHADER_READ_BIT,
                              .dstAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT};
    ctx->vk.vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_PIPELINE_STAGE_TRANSFER_BIT,
                                 0, 1, &before, 0, NULL, 0, NULL);
    /* vkCmdUpdateBuffer takes at most 65536 bytes per call */
    for (uint64_t at = 0; at < words; at += 16384) {
        uint64_t n = vka_min_u64(words - at, 16384);
        ctx->vk.vkCmdUpdateBuffer(cmd, c->meta->buffer, at * 4, n * 4, data + at);
    }
    VkMemoryBarrier after = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                             .srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT,
                             .dstAccessMask = VK_ACCESS_SHADER_READ_BIT};
    ctx->vk.vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                                 0, 1, &after, 0, NULL, 0, NULL);
    vka_free(ctx, data);
    meta->buffer = c->meta;
    meta->offset = 0;
    meta->range = vka_align_up(words * 4, 16);
    if (meta->range > c->meta->vk_size)
        meta->range = c->meta->vk_size;
    meta->format = VK_FORMAT_UNDEFINED;
    return VKATTN_SUCCESS;
}
