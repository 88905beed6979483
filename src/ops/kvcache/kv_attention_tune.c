/* Split-count tuning of decode attention over a KV cache.
 *
 * The split count is the decode path's main choice: too few splits leave
 * the device idle on short batches, too many add partial rows to combine.
 * The built-in choice (auto_splits in kv_attention_plan.c) targets a
 * workgroup count per device type; vkattn_tune_kv_attention times the
 * candidates on a scratch cache and stores the fastest split count per
 * shape class, which automatic calls (kv_splits 0) of that class then use.
 *
 * Tuning key (VKA_TUNE_KV_ATTENTION), values:
 *   0 head dim
 *   1 query heads per KV head, bucketed 1, 2, <=4, <=8, more
 *   2 new tokens per sequence, bucketed 1, 2, <=4, <=8, <=16
 *   3 cache length, bucketed <=256, <=1024, <=4096, <=16384, more
 *   4 sequences x KV heads (independent work), bucketed 1, <=4, <=16, <=64, more
 *   5 dtypes: 1 if q/out are f16, + 2 if the cache is f16
 *   6 1 if the cache is paged
 * Config words: 0 split count, 1-2 unused (0), 3 the version
 * (KV_CONFIG_VERSION: entries of another are not found). */
#include "ops/kvcache/kvcache_internal.h"
#include "core/tuner.h"
#include "core/tuning_table.h"

#include <string.h>

/* Raise when what a stored split count means changes. */
#define KV_CONFIG_VERSION 1u

static void kv_tuning_key(const vkattn_kv_cache *c, vkattn_dtype q_dtype, uint32_t batch,
                          uint32_t new_tokens, uint32_t length, vka_tuning_key *key)
{
    static const uint32_t groups[] = {1, 2, 4, 8};
    static const uint32_t tokens[] = {1, 2, 4, 8};
    static const uint32_t lens[] = {256, 1024, 4096, 16384};
    static const uint32_t work[] = {1, 4, 16, 64};
    memset(key, 0, sizeof *key);
    key->op = VKA_TUNE_KV_ATTENTION;
    key->values[0] = c->d.head_dim;
    key->values[1] = vka_tuning_bucket(c->d.num_heads / c->d.num_kv_heads, groups, 4);
    key->values[2] = vka_tuning_bucket(new_tokens, tokens, 4);
    key->values[3] = vka_tuning_bucket(length, lens, 4);
    key->values[4] = vka_tuning_bucket((uint64_t)batch * c->d.num_kv_heads, work, 4);
    key->values[5] = (q_dtype == VKATTN_DTYPE_F16) + 2u * (c->d.dtype == VKATTN_DTYPE_F16);
    key->values[6] = c->paged;
}

uint32_t vka_kv_tuned_splits(const vkattn_context *ctx, const vkattn_kv_cache *c,
                                vkattn_dtype q_dtype, uint32_t batch, uint32_t new_tokens,
                                uint32_t length)
{
    vka_tuning_key key;
    kv_tuning_key(c, q_dtype, batch, new_tokens, length, &key);
    vka_tuning_config cfg;
    if (!vka_tuning_find(ctx, &key, KV_CONFIG_VERSION, &cfg))
        return 0;
    uint32_t splits = cfg.words[0];
    /* a stored count this step cannot take is ignored, never an error */
    if (!splits || !new_tokens || splits > VKATTN_KV_MAX_SPLIT_ROWS / new_tokens || splits > length)
        return 0;
    return splits;
}

#define MAX_CANDIDATES 8

typedef struct tune_job {
    vkattn_kv_attention_args args;
    uint32_t splits[MAX_CANDIDATES];
} tune_job;

static vkattn_result record_candidate(vkattn_context *ctx, VkCommandBuffer cmd, void *user,
                                      uint32_t i)
{
    tune_job *job = user;
    vkattn_kv_attention_args a = job->args;
    a.kv_splits = job->splits[i];
    return vkattn_cmd_kv_attention(ctx, cmd, &a);
}

/* Fills every sequence of `scratch` with `length` tokens of random K/V. */
static vkattn_result fill(vkattn_context *ctx, vkattn_kv_cache *scratch, uint32_t batch,
                          const uint32_t *sequences, uint32_t length)
{
    const vkattn_kv_cache_desc *d = &scratch->d;
    int64_t shape[4] = {batch, d->num_kv_heads, length, d->head_dim};
    uint64_t n = (uint64_t)batch * d->num_kv_heads * length * d->head_dim;
    vkattn_buffer *bk = NULL, *bv = NULL;
    vkattn_result r = vka_tuner_random_buffer(ctx, n, d->dtype, 4, &bk);
    if (r == VKATTN_SUCCESS)
        r = vka_tuner_random_buffer(ctx, n, d->dtype, 5, &bv);
    VkCommandBuffer cmd;
    if (r == VKATTN_SUCCESS)
        r = vkattn_commands_begin(ctx, &cmd);
    if (r == VKATTN_SUCCESS) {
        vkattn_kv_append_args a = {scratch, batch, sequences,
                                   vkattn_tensor_make(bk, 0, d->dtype, 4, shape),
                                   vkattn_tensor_make(bv, 0, d->dtype, 4, shape)};
        r = vkattn_cmd_kv_cache_append(ctx, cmd, &a);
        r = vka_commands_finish(ctx, r);
    }
    vkattn_buffer_destroy(bk);
    vkattn_buffer_destroy(bv);
    return r;
}

vkattn_result vkattn_tune_kv_attention(vkattn_kv_cache *cache, uint32_t batch, uint32_t new_tokens,
                                       uint32_t length)
{
    if (!cache)
        return VKATTN_ERROR_INVALID_ARGUMENT;
    vkattn_context *ctx = cache->ctx;
    if (!batch || !new_tokens || new_tokens > VKA_KV_DECODE_MAX_TOKENS || length < new_tokens)
        return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT,
                           "vkattn_tune_kv_attention: batch %u must be >= 1, new_tokens %u within "
                           "1..%u (the split-KV decode path) and length %u >= new_tokens",
                           batch, new_tokens, VKA_KV_DECODE_MAX_TOKENS, length);
    /* A scratch cache like `cache`, holding exactly this shape. */
    vkattn_kv_cache_desc d = cache->d;
    d.max_sequences = batch;
    d.capacity = length;
    d.num_blocks = 0;
    vkattn_kv_cache *scratch = NULL;
    vkattn_buffer *bq = NULL, *bo = NULL;
    tune_job *job = vka_alloc(ctx, sizeof *job);
    uint32_t *sequences = vka_alloc(ctx, batch * sizeof *sequences);
    vkattn_result r = job && sequences
                          ? VKATTN_SUCCESS
                          : vka_fail(ctx, VKATTN_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
    for (uint32_t b = 0; r == VKATTN_SUCCESS && b < batch; b++)
        sequences[b] = b;
    if (r == VKATTN_SUCCESS)
        r = vkattn_kv_cache_create(ctx, &d, &scratch);
    if (r == VKATTN_SUCCESS)
        r = fill(ctx, scratch, batch, sequences, length);
    /* q and out in the cache's dtype, as the MHA layer's steps have them */
    int64_t qs[4] = {batch, d.num_heads, new_tokens, d.head_dim};
    uint64_t nq = (uint64_t)batch * d.num_heads * new_tokens * d.head_dim;
    if (r == VKATTN_SUCCESS)
        r = vka_tuner_random_buffer(ctx, nq, d.dtype, 6, &bq);
    if (r == VKATTN_SUCCESS) {
        vkattn_buffer_desc bd = {.size = nq * vkattn_dtype_size(d.dtype)};
        r = vkattn_buffer_create(ctx, &bd, &bo);
    }
    if (r == VKATTN_SUCCESS) {
        job->args = (vkattn_kv_attention_args){
            .cache = scratch, .batch = batch, .sequences = sequences,
            .q = vkattn_tensor_make(bq, 0, d.dtype, 4, qs),
            .out = vkattn_tensor_make(bo, 0, d.dtype, 4, qs),
        };
        /* powers of two the step can take (the automatic choice, which a
         * stored entry would steer, is not a candidate of its own) */
        uint32_t count = 0;
        for (uint32_t s = 1; count < MAX_CANDIDATES && s * new_tokens <= VKATTN_KV_MAX_SPLIT_ROWS &&
                             s <= length;
             s *= 2)
            job->splits[count++] = s;
        uint32_t best = 0;
        float best_ms = 0;
        r = vka_tuner_measure(ctx, count, 5, record_candidate, job, &best, &best_ms);
        if (r == VKATTN_SUCCESS) {
            vka_tuning_key key;
            kv_tuning_key(cache, d.dtype, batch, new_tokens, length, &key);
            vka_tuning_config cfg = {{job->splits[best]}};
            r = vka_tuning_set(ctx, &key, KV_CONFIG_VERSION, &cfg, best_ms);
        }
    }
    vkattn_buffer_destroy(bq);
    vkattn_buffer_destroy(bo);
    vkattn_kv_cache_destroy(scratch);
    vka_free(ctx, sequences);
    vka_free(ctx, job);
    return r;
}
