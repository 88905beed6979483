/* vkattn_kv_attention_tune: times the split counts a decode step can take
 * on a scratch cache like the caller's and stores the fastest for the step's
 * shape class (the key and the lookup: kv_attention_config.c). */
#include "ops/kvcache/kvcache_internal.h"
#include "core/tuner.h"
#include "core/tuning_table.h"

#include <stdio.h>
#include <string.h>

#define MAX_CANDIDATES 8

static vkattn_result record_candidate(vkattn_context *ctx, VkCommandBuffer cmd, const void *problem,
                                      const void *candidate)
{
    vkattn_kv_attention_args a = *(const vkattn_kv_attention_args *)problem;
    a.kv_splits = *(const uint32_t *)candidate;
    return vkattn_cmd_kv_attention(ctx, cmd, &a);
}

static vkattn_result record_append(vkattn_context *ctx, VkCommandBuffer cmd, const void *args)
{
    return vkattn_cmd_kv_cache_append(ctx, cmd, args);
}

/* Fills every sequence of `scratch` with `length` tokens of random K/V. */
static vkattn_result fill(vkattn_context *ctx, vkattn_kv_cache *scratch, uint32_t batch,
                          const uint32_t *sequences, uint32_t length)
{
    const vkattn_kv_cache_desc *d = &scratch->d;
    int64_t shape[4] = {batch, d->num_kv_heads, length, d->head_dim};
    uint64_t n; /* saturates past 2^64: the buffers then refuse it */
    vka_product_u64((const uint64_t[]){batch, d->num_kv_heads, length, d->head_dim}, 4, &n);
    vkattn_buffer *bk = NULL, *bv = NULL;
    vkattn_dtype dt = vka_kv_activation_dtype(d->dtype); /* a quantized cache quantizes f32 */
    vkattn_result r = vka_tuner_random_buffer(ctx, n, dt, 4, &bk);
    if (r == VKATTN_SUCCESS)
        r = vka_tuner_random_buffer(ctx, n, dt, 5, &bv);
    if (r == VKATTN_SUCCESS) {
        vkattn_kv_append_args a = {scratch, batch, sequences,
                                   vkattn_tensor_make(bk, 0, dt, 4, shape),
                                   vkattn_tensor_make(bv, 0, dt, 4, shape)};
        r = vka_submit_and_wait(ctx, record_append, &a);
    }
    vkattn_buffer_destroy(bk);
    vkattn_buffer_destroy(bv);
    return r;
}

vkattn_result vkattn_kv_attention_tune(vkattn_context *ctx,
                                       const vkattn_kv_attention_tune_args *args)
{
    if (!ctx)
        return VKATTN_ERROR_INVALID_ARGUMENT;
    if (!args || !args->cache)
        return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT, "vkattn_kv_attention_tune: %s is NULL",
                        !args ? "args" : "args->cache");
    vkattn_kv_cache *cache = args->cache;
    if (cache->ctx != ctx)
        return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT,
                        "vkattn_kv_attention_tune: args->cache belongs to another context");
    const uint32_t batch = args->batch, new_tokens = args->new_tokens, length = args->length;
    if (!batch || !new_tokens || new_tokens > VKA_KV_DECODE_MAX_TOKENS || length < new_tokens)
        return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT,
                        "vkattn_kv_attention_tune: args->batch %u must be >= 1, new_tokens %u "
                        "within 1..%u (the split-KV decode path) and length %u >= new_tokens",
                        batch, new_tokens, VKA_KV_DECODE_MAX_TOKENS, length);
    /* A scratch cache like `cache`, holding exactly this shape. */
    vkattn_kv_cache_desc d = cache->d;
    d.max_sequences = batch;
    d.capacity = length;
    d.num_blocks = 0;
    d.window = 0; /* the key's length is the keys a step reads (window or not) */
    vkattn_kv_cache *scratch = NULL;
    vkattn_buffer *bq = NULL, *bo = NULL;
    vkattn_kv_attention_args call;
    uint32_t splits[MAX_CANDIDATES];
    uint32_t *sequences = vka_alloc(ctx, batch * sizeof *sequences);
    vkattn_result r = sequences
                          ? VKATTN_SUCCESS
                          : vka_fail(ctx, VKATTN_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
    for (uint32_t b = 0; r == VKATTN_SUCCESS && b < batch; b++)
        sequences[b] = b;
    if (r == VKATTN_SUCCESS)
        r = vkattn_kv_cache_create(ctx, &d, &scratch);
    if (r == VKATTN_SUCCESS)
        r = fill(ctx, scratch, batch, sequences, length);
    /* q and out in the cache's dtype, as the MHA layer's steps have them
     * (f32 over a quantized cache) */
    vkattn_dtype qdt = vka_kv_activation_dtype(d.dtype);
    int64_t qs[4] = {batch, d.num_heads, new_tokens, d.head_dim};
    uint64_t nq, out_bytes; /* saturating, as above */
    vka_product_u64((const uint64_t[]){batch, d.num_heads, new_tokens, d.head_dim}, 4, &nq);
    vka_mul_u64(nq, vkattn_dtype_size(qdt), &out_bytes);
    if (r == VKATTN_SUCCESS)
        r = vka_tuner_random_buffer(ctx, nq, qdt, 6, &bq);
    if (r == VKATTN_SUCCESS) {
        vkattn_buffer_desc bd = {.size = out_bytes};
        r = vkattn_buffer_create(ctx, &bd, &bo);
    }
    if (r == VKATTN_SUCCESS) {
        call = (vkattn_kv_attention_args){
            .cache = scratch,
            .batch = batch,
            .sequences = sequences,
            .q = vkattn_tensor_make(bq, 0, qdt, 4, qs),
            .out = vkattn_tensor_make(bo, 0, qdt, 4, qs),
        };
        /* powers of two the step can take (the automatic choice, which a
         * stored entry would steer, is not a candidate of its own) */
        uint32_t count = 0;
        for (uint32_t s = 1;
             count < MAX_CANDIDATES && s * new_tokens <= VKATTN_KV_MAX_SPLIT_ROWS && s <= length;
             s *= 2)
            splits[count++] = s;
        uint32_t best = 0;
        float best_ms = 0;
        vka_tune_report report = {args->progress, args->progress_user, "kv_attention", ""};
        snprintf(report.shape, sizeof report.shape, "b=%u hq=%u hkv=%u t=%u length=%u d=%u %s",
                 batch, d.num_heads, d.num_kv_heads, new_tokens, length, d.head_dim,
                 vkattn_dtype_name(d.dtype));
        r = vka_tuner_measure(ctx, count, 5, record_candidate, &call, splits, sizeof splits[0],
                              &best, &best_ms, &report);
        if (r == VKATTN_SUCCESS) {
            vka_tuning_key key;
            vka_kv_tuning_key(cache, qdt, batch, new_tokens, length, &key);
            vka_tuning_config cfg = {{splits[best]}};
            r = vka_tuning_set(ctx, &key, VKA_KV_CONFIG_VERSION, &cfg, best_ms);
        }
    }
    vkattn_buffer_destroy(bq);
    vkattn_buffer_destroy(bo);
    vkattn_kv_cache_destroy(scratch);
    vka_free(ctx, sequences);
    return r;
}
