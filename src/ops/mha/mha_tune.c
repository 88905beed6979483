/* vkattn_mha_tune, vkattn_mha_tune_step: tune every op a layer's forward
 * pass or step with these sizes runs - its projection GEMMs and its
 * attention - through the ops' own tuners, so later calls of the same shape
 * class use the winners. */
#include "ops/kvcache/kvcache.h"
#include "spec/mha_desc.h"
#include "ops/mha/mha_internal.h"

/* batch x tokens as a row count, or an error naming the caller's sizes. */
static vkattn_result row_count(vkattn_context *ctx, const char *fn, const char *what, uint32_t batch,
                               uint32_t tokens, uint32_t *rows)
{
    uint64_t n = (uint64_t)batch * tokens;
    if (n > UINT32_MAX)
        return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT, "%s: batch %u x %s %u rows exceed 2^32 - 1",
                           fn, batch, what, tokens);
    *rows = (uint32_t)n;
    return VKATTN_SUCCESS;
}

/* The packed Q/K/V projection of self-attention (one GEMM) over `rows`. */
static vkattn_result tune_packed_projection(vkattn_mha *m, uint32_t rows)
{
    const vkattn_mha_desc *d = &m->d;
    return vkattn_tune_linear(m->ctx, rows, vka_mha_q_width(d) + 2 * vka_mha_kv_width(d), d->embed_dim,
                              d->dtype, d->dtype);
}

/* The output projection over `rows`. */
static vkattn_result tune_output_projection(vkattn_mha *m, uint32_t rows)
{
    const vkattn_mha_desc *d = &m->d;
    return vkattn_tune_linear(m->ctx, rows, d->embed_dim, vka_mha_q_width(d), d->dtype, d->dtype);
}

vkattn_result vkattn_mha_tune(vkattn_mha *m, uint32_t batch, uint32_t q_len, uint32_t kv_len)
{
    if (!m)
        return VKATTN_ERROR_INVALID_ARGUMENT;
    vkattn_context *ctx = m->ctx;
    if (!batch || !q_len || !kv_len)
        return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT,
                           "vkattn_mha_tune: batch %u, q_len %u and kv_len %u must all be >= 1", batch, q_len,
                           kv_len);
    const vkattn_mha_desc *d = &m->d;
    /* the layer's widths fit 32 bits (vka_mha_resolve checked them); the
     * row counts are the caller's products */
    uint32_t rows = 0, kv_rows = 0;
    vkattn_result r = row_count(ctx, "vkattn_mha_tune", "q_len", batch, q_len, &rows);
    if (r == VKATTN_SUCCESS)
        r = row_count(ctx, "vkattn_mha_tune", "kv_len", batch, kv_len, &kv_rows);
    if (r != VKATTN_SUCCESS)
        return r;
    if (q_len == kv_len && d->kv_dim == d->embed_dim) {
        /* self-attention: the packed projection */
        r = tune_packed_projection(m, rows);
    } else {
        r = vkattn_tune_linear(ctx, rows, vka_mha_q_width(d), d->embed_dim, d->dtype, d->dtype);
        if (r == VKATTN_SUCCESS)
            r = vkattn_tune_linear(ctx, kv_rows, 2 * vka_mha_kv_width(d), d->kv_dim, d->dtype, d->dtype);
    }
    /* both mask kinds of self-attention (decoders and encoders); cross-
     * attention is rarely causal */
    if (r == VKATTN_SUCCESS && q_len == kv_len)
        r = vkattn_tune_attention(ctx, batch, d->num_heads, d->num_kv_heads, q_len, kv_len, d->head_dim, true,
                                  d->dtype, d->dtype);
    if (r == VKATTN_SUCCESS)
        r = vkattn_tune_attention(ctx, batch, d->num_heads, d->num_kv_heads, q_len, kv_len, d->head_dim, false,
                                  d->dtype, d->dtype);
    if (r == VKATTN_SUCCESS)
        r = tune_output_projection(m, rows);
    return r;
}

vkattn_result vkattn_mha_tune_step(vkattn_mha *m, vkattn_kv_cache *cache, uint32_t batch,
                                   uint32_t new_tokens, uint32_t length)
{
    if (!m)
        return VKATTN_ERROR_INVALID_ARGUMENT;
    vkattn_context *ctx = m->ctx;
    if (!batch || !new_tokens || length < new_tokens)
        return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT,
                           "vkattn_mha_tune_step: batch %u and new_tokens %u must be >= 1 and length %u "
                           ">= new_tokens",
                           batch, new_tokens, length);
    uint32_t rows = 0;
    vkattn_result r = row_count(ctx, "vkattn_mha_tune_step", "new_tokens", batch, new_tokens, &rows);
    if (r == VKATTN_SUCCESS)
        r = vka_mha_check_cache(m, cache, "vkattn_mha_tune_step: cache");
    if (r != VKATTN_SUCCESS)
        return r;
    /* attention over the cache first (where a choice exists: the split-KV
     * path): its scratch cache of `length` tokens is what fails on sizes
     * the device cannot hold, before anything is stored; then the packed
     * projection (its K/V segments append to the cache: they take the plain
     * GEMM's entry) and the output projection */
    if (new_tokens <= VKA_KV_DECODE_MAX_TOKENS)
        r = vkattn_tune_kv_attention(cache, batch, new_tokens, length);
    if (r == VKATTN_SUCCESS)
        r = tune_packed_projection(m, rows);
    if (r == VKATTN_SUCCESS)
        r = tune_output_projection(m, rows);
    return r;
}
