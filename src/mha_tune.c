/* vkattn_mha_tune, vkattn_mha_tune_step: tune every op a layer's forward
 * pass or step with these sizes runs - its projection GEMMs and its
 * attention - through the ops' own tuners, so later calls of the same shape
 * class use the winners. */
#include "kv_attention.h"
#include "mha_internal.h"

vkattn_result vkattn_mha_tune(vkattn_mha *m, uint32_t batch, uint32_t q_len, uint32_t kv_len)
{
    if (!m)
        return VKATTN_ERROR_INVALID_ARGUMENT;
    vkattn_context *ctx = m->ctx;
    if (!batch || !q_len || !kv_len)
        return vkattn_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT,
                           "vkattn_mha_tune: batch %u, q_len %u and kv_len %u must all be >= 1", batch, q_len,
                           kv_len);
    const vkattn_mha_desc *d = &m->d;
    uint32_t qw = d->num_heads * d->head_dim, kvw = d->num_kv_heads * d->head_dim;
    /* the layer's widths fit 32 bits (vkattn_mha_resolve checked them); the
     * row counts are the caller's products */
    uint64_t rows64 = (uint64_t)batch * q_len, kv_rows64 = (uint64_t)batch * kv_len;
    if (rows64 > UINT32_MAX || kv_rows64 > UINT32_MAX)
        return vkattn_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT,
                           "vkattn_mha_tune: batch %u x q_len %u or x kv_len %u rows exceed 2^32 - 1", batch,
                           q_len, kv_len);
    uint32_t rows = (uint32_t)rows64, kv_rows = (uint32_t)kv_rows64;
    vkattn_result r;
    if (q_len == kv_len && d->kv_dim == d->embed_dim) {
        /* self-attention: the packed projection */
        r = vkattn_tune_linear(ctx, rows, qw + 2 * kvw, d->embed_dim, d->dtype, d->dtype);
    } else {
        r = vkattn_tune_linear(ctx, rows, qw, d->embed_dim, d->dtype, d->dtype);
        if (r == VKATTN_SUCCESS)
            r = vkattn_tune_linear(ctx, kv_rows, 2 * kvw, d->kv_dim, d->dtype, d->dtype);
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
        r = vkattn_tune_linear(ctx, rows, d->embed_dim, qw, d->dtype, d->dtype);
    return r;
}

vkattn_result vkattn_mha_tune_step(vkattn_mha *m, vkattn_kv_cache *cache, uint32_t batch,
                                   uint32_t new_tokens, uint32_t length)
{
    if (!m)
        return VKATTN_ERROR_INVALID_ARGUMENT;
    vkattn_context *ctx = m->ctx;
    if (!batch || !new_tokens || length < new_tokens)
        return vkattn_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT,
                           "vkattn_mha_tune_step: batch %u and new_tokens %u must be >= 1 and length %u "
                           ">= new_tokens",
                           batch, new_tokens, length);
    uint64_t rows64 = (uint64_t)batch * new_tokens;
    if (rows64 > UINT32_MAX)
        return vkattn_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT,
                           "vkattn_mha_tune_step: batch %u x new_tokens %u rows exceed 2^32 - 1", batch,
                           new_tokens);
    vkattn_result r = vkattn_mha_check_cache(m, cache, "cache");
    if (r != VKATTN_SUCCESS)
        return r;
    const vkattn_mha_desc *d = &m->d;
    uint32_t qw = d->num_heads * d->head_dim, kvw = d->num_kv_heads * d->head_dim;
    uint32_t rows = (uint32_t)rows64;
    /* the packed projection (its K/V segments append to the cache: they take
     * the plain GEMM's entry), attention over the cache where a choice
     * exists (the split-KV path), the output projection */
    r = vkattn_tune_linear(ctx, rows, qw + 2 * kvw, d->embed_dim, d->dtype, d->dtype);
    if (r == VKATTN_SUCCESS && new_tokens <= VKATTN_KV_DECODE_MAX_TOKENS)
        r = vkattn_tune_kv_attention(cache, batch, new_tokens, length);
    if (r == VKATTN_SUCCESS)
        r = vkattn_tune_linear(ctx, rows, d->embed_dim, qw, d->dtype, d->dtype);
    return r;
}
