/* The KV cache object: its memory, lengths and block tables (see
 * kvcache.h); the desc rules are spec/kv_cache_desc.c's, the steps
 * kvcache_step.c's. */
#include "ops/kvcache/kvcache_internal.h"
#include "spec/kv_cache_desc.h"

#include <string.h>

/* Lengths 0, block tables empty (paged: every block free, low ids first;
 * contiguous: sequence s owns block s). */
static vkattn_result init_host_state(vkattn_kv_cache *c, uint64_t table_entries)
{
    vkattn_context *ctx = c->ctx;
    const uint32_t sequences = c->d.max_sequences, blocks = c->d.num_blocks;
    c->lengths = vka_alloc(ctx, (size_t)sequences * sizeof *c->lengths);
    c->tables = vka_alloc(ctx, (size_t)table_entries * sizeof *c->tables);
    c->free_blocks = c->paged ? vka_alloc(ctx, (size_t)blocks * sizeof *c->free_blocks) : NULL;
    if (!c->lengths || !c->tables || (c->paged && !c->free_blocks))
        return vka_fail(ctx, VKATTN_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
    for (uint64_t i = 0; i < table_entries; i++)
        c->tables[i] = UINT32_MAX;
    if (c->paged) {
        for (uint32_t i = 0; i < blocks; i++)
            c->free_blocks[i] = blocks - 1 - i;
        c->free_count = blocks;
    } else {
        for (uint32_t s = 0; s < sequences; s++)
            c->tables[s] = s;
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
    vka_kv_cache_sizes z;
    char why[VKA_ERROR_MAX];
    vkattn_result r = vka_kv_cache_desc_resolve(desc, &d, &z, why, sizeof why);
    if (r != VKATTN_SUCCESS)
        return vka_fail(ctx, r, "%s", why);
    /* blocks sharing words with their neighbours are appended through
     * atomics of device scope (kv_append_quant.comp) */
    const uint32_t odd_dim = z.k_row / 32 % 2 ? d.head_dim : d.v_head_dim;
    if (vka_dtype_is_quantized(d.dtype) && vka_quant_blocks_share_words(d.dtype) &&
        (z.k_row / 32 % 2 || z.v_row / 32 % 2) && !ctx->device_scope_atomics)
        return vka_fail(ctx, VKATTN_ERROR_UNSUPPORTED,
                        "desc: a %s cache of head dim %u (an odd number of 32-value blocks) is "
                        "written with device-scope atomics, which this device's enabled features "
                        "forbid (vulkanMemoryModel without vulkanMemoryModelDeviceScope): enable "
                        "vulkanMemoryModelDeviceScope, or use an even number of blocks",
                        vkattn_dtype_name(d.dtype), odd_dim);
    /* the kernels bind the step metadata (positions and block tables) whole */
    if (z.meta_bytes > ctx->info.max_storage_buffer_range)
        return vka_fail(ctx, VKATTN_ERROR_OUT_OF_RANGE,
                        "desc: the block tables of desc->max_sequences %u x %u blocks "
                        "(desc->capacity %u / desc->block_size %u) need %llu bytes of step "
                        "metadata, more than one binding of this device holds "
                        "(maxStorageBufferRange %llu)",
                        d.max_sequences, z.table_width, d.capacity, d.block_size,
                        (unsigned long long)z.meta_bytes,
                        (unsigned long long)ctx->info.max_storage_buffer_range);
    /* named here: the buffers' own message would name only a byte count */
    const uint64_t most = ctx->info.max_allocation_size;
    for (int i = 0; i < 2; i++) {
        uint64_t bytes = i ? z.v_pool_bytes : z.k_pool_bytes;
        uint32_t dim = i ? d.v_head_dim : d.head_dim, row = i ? z.v_row : z.k_row;
        if (bytes > most)
            return vka_fail(ctx, VKATTN_ERROR_OUT_OF_RANGE,
                            "desc: the %s pool is %llu bytes (%s %u x %s %u tokens x "
                            "desc->num_kv_heads %u x %llu bytes per %s %u row), more than one "
                            "allocation of this device holds (maxMemoryAllocationSize %llu)",
                            i ? "V" : "K", (unsigned long long)bytes,
                            d.block_size ? "desc->num_blocks" : "desc->max_sequences", d.num_blocks,
                            d.block_size ? "desc->block_size" : "desc->capacity", z.block_tokens,
                            d.num_kv_heads,
                            (unsigned long long)vkattn_dtype_row_bytes(d.dtype, row),
                            i ? "v_head_dim" : "head_dim", dim, (unsigned long long)most);
    }
    if (z.split_scratch_bytes > most)
        return vka_fail(ctx, VKATTN_ERROR_OUT_OF_RANGE,
                        "desc: the split-KV scratch of desc->max_sequences %u x desc->num_heads "
                        "%u x desc->v_head_dim %u is %llu bytes, more than one allocation of this "
                        "device holds (maxMemoryAllocationSize %llu)",
                        d.max_sequences, d.num_heads, d.v_head_dim,
                        (unsigned long long)z.split_scratch_bytes, (unsigned long long)most);
    vkattn_kv_cache *c = vka_alloc(ctx, sizeof *c);
    if (!c)
        return vka_fail(ctx, VKATTN_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
    c->ctx = ctx;
    c->d = d;
    c->paged = d.block_size != 0;
    c->d.block_size = z.block_tokens;
    c->table_width = z.table_width;
    c->k_row = z.k_row;
    c->v_row = z.v_row;
    c->k_block_bytes = z.k_block_bytes;
    c->v_block_bytes = z.v_block_bytes;
    c->k_pool_bytes = z.k_pool_bytes;
    c->v_pool_bytes = z.v_pool_bytes;
    /* device memory first: it checks the sizes against the device's limits
     * before the host tables are made */
    vkattn_buffer_desc k_pool = {.size = z.k_pool_bytes};
    vkattn_buffer_desc v_pool = {.size = z.v_pool_bytes};
    vkattn_buffer_desc meta = {.size = z.meta_bytes};
    vkattn_buffer_desc split = {.size = z.split_scratch_bytes};
    r = vkattn_buffer_create(ctx, &k_pool, &c->k);
    if (r == VKATTN_SUCCESS)
        r = vkattn_buffer_create(ctx, &v_pool, &c->v);
    if (r == VKATTN_SUCCESS)
        r = vkattn_buffer_create(ctx, &meta, &c->meta);
    if (r == VKATTN_SUCCESS)
        r = vkattn_buffer_create(ctx, &split, &c->split_scratch);
    if (r == VKATTN_SUCCESS)
        r = init_host_state(c, z.table_entries);
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
        return vka_fail(c->ctx, VKATTN_ERROR_INVALID_ARGUMENT,
                        "vkattn_kv_cache_length: length is NULL");
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
    /* a windowed cache must still hold the window of the next token */
    uint32_t first = vka_kv_first_key(length + 1, 1, c->d.window);
    if (c->paged && c->d.window && first < length &&
        c->tables[(size_t)sequence * c->table_width + first / c->d.block_size] == UINT32_MAX)
        return vka_fail(c->ctx, VKATTN_ERROR_OUT_OF_RANGE,
                        "vkattn_kv_cache_truncate: length %u of sequence %u needs its tokens "
                        "from %u on (the window %u of the next token), which the windowed cache "
                        "already gave back",
                        length, sequence, first, c->d.window);
    if (c->paged) {
        uint32_t keep = vka_blocks_for(c, length);
        uint32_t *row = c->tables + (size_t)sequence * c->table_width;
        /* (a windowed cache's released blocks are UINT32_MAX already) */
        for (uint32_t i = keep; i < vka_blocks_for(c, c->lengths[sequence]); i++) {
            if (row[i] == UINT32_MAX)
                continue;
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
