/* Steps over a KV cache: checking a step against the cache's lengths,
 * capacity and free blocks, and applying it - the host state advances and
 * the step's metadata (positions, block tables) is recorded for the
 * kernels (see kvcache.h). */
#include "ops/kvcache/kvcache_internal.h"

#include <string.h>

vkattn_result vka_kv_step_check(vkattn_kv_cache *c, uint32_t batch, const uint32_t *sequences,
                                uint32_t new_tokens, const char *what, vka_kv_step *step)
{
    vkattn_context *ctx = c->ctx;
    if (batch == 0 || !sequences)
        return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT, "%s%s", what,
                        batch == 0 ? "batch is 0" : "sequences is NULL");
    memset(step, 0, sizeof *step);
    uint64_t blocks = 0; /* up to batch x table_width: past 2^32 */
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
                            "cache's capacity of %u",
                            what, b, s, len, new_tokens, c->d.capacity);
        uint32_t after = len + new_tokens;
        if (after > step->max_length)
            step->max_length = after;
        if (c->paged)
            blocks += vka_blocks_for(c, after) - vka_blocks_for(c, len);
    }
    if (c->paged && blocks > c->free_count)
        return vka_fail(
            ctx, VKATTN_ERROR_CACHE_FULL,
            "KV cache full: the step for %ssequences needs %llu new blocks of %u tokens but "
            "the pool has %u free (of %u)",
            what, (unsigned long long)blocks, c->d.block_size, c->free_count, c->d.num_blocks);
    step->cache = c;
    step->batch = batch;
    step->sequences = sequences;
    step->new_tokens = new_tokens;
    step->blocks_needed = (uint32_t)blocks;
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
            for (uint32_t i = vka_blocks_for(c, len); i < vka_blocks_for(c, after); i++)
                row[i] = c->free_blocks[--c->free_count];
        c->lengths[s] = after;
        data[b] = len;
        data[step->batch + b] = after;
        memcpy(data + 2 * step->batch + (size_t)b * c->table_width, row, c->table_width * 4);
    }
    /* earlier steps' reads of the metadata -> this update -> this step's reads */
    vka_cmd_update_words(ctx, cmd, c->meta->buffer, 0, data, words);
    vka_free(ctx, data);
    meta->buffer = c->meta;
    meta->offset = 0;
    meta->range = vka_align_up(words * 4, 16);
    if (meta->range > c->meta->vk_size)
        meta->range = c->meta->vk_size;
    meta->format = VK_FORMAT_UNDEFINED;
    return VKATTN_SUCCESS;
}

void vka_kv_step_release(const vka_kv_step *step)
{
    vkattn_kv_cache *c = step->cache;
    if (!c->paged || !c->d.window || !step->new_tokens)
        return;
    for (uint32_t b = 0; b < step->batch; b++) {
        uint32_t s = step->sequences[b];
        uint32_t before = c->lengths[s] - step->new_tokens;
        /* the window of token `before` starts at before - W + 1 */
        uint32_t keep = vka_kv_first_key(before + 1, 1, c->d.window);
        uint32_t *row = c->tables + (size_t)s * c->table_width;
        for (uint32_t i = keep / c->d.block_size; i-- > 0;) {
            if (row[i] == UINT32_MAX)
                break; /* released by an earlier step, and all before it */
            c->free_blocks[c->free_count++] = row[i];
            row[i] = UINT32_MAX;
        }
    }
}
