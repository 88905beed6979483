/* vkattn_mha_tune, vkattn_mha_step_tune: tune every op a layer's forward
 * pass or step with these sizes runs - its projection GEMMs and its
 * attention - through the ops' own tuners, so later calls of the same shape
 * class use the winners. */
#include "ops/mha/mha_internal.h"
#include "spec/mha_desc.h"

/* batch x tokens as a row count, or an error naming the caller's sizes. */
static vkattn_result row_count(vkattn_context *ctx, const char *fn, const char *what,
                               uint32_t batch, uint32_t tokens, uint32_t *rows)
{
    uint64_t n = (uint64_t)batch * tokens;
    if (n > UINT32_MAX)
        return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT,
                        "%s: args->batch %u x %s %u rows exceed 2^32 - 1", fn, batch, what, tokens);
    *rows = (uint32_t)n;
    return VKATTN_SUCCESS;
}

/* The caller's progress callback, passed on to each op's tuner. */
typedef struct progress_sink {
    vkattn_tune_progress_fn fn;
    void *user;
} progress_sink;

/* A projection of `rows` rows: y [rows, n] = x [rows, k] W^T in the layer's
 * dtype and weight dtype. */
static vkattn_result tune_projection(vkattn_mha *m, uint32_t rows, uint32_t n, uint32_t k,
                                     progress_sink p)
{
    vkattn_linear_tune_args a = {rows, n, k, m->d.dtype, m->d.weight_dtype, p.fn, p.user};
    return vkattn_linear_tune(m->ctx, &a);
}

/* The packed Q/K/V projection of self-attention (one GEMM) over `rows`. */
static vkattn_result tune_packed_projection(vkattn_mha *m, uint32_t rows, progress_sink p)
{
    const vkattn_mha_desc *d = &m->d;
    return tune_projection(m, rows, vka_mha_q_width(d) + vka_mha_k_width(d) + vka_mha_v_width(d),
                           d->embed_dim, p);
}

/* The output projection over `rows`. */
static vkattn_result tune_output_projection(vkattn_mha *m, uint32_t rows, progress_sink p)
{
    const vkattn_mha_desc *d = &m->d;
    return tune_projection(m, rows, d->embed_dim, vka_mha_o_width(d), p);
}

static vkattn_result tune_attention(vkattn_mha *m, const vkattn_mha_tune_args *a, bool causal)
{
    const vkattn_mha_desc *d = &m->d;
    vkattn_attention_tune_args at = {
        .batch = a->batch,
        .num_heads = d->num_heads,
        .num_kv_heads = d->num_kv_heads,
        .q_len = a->q_len,
        .kv_len = a->kv_len,
        .head_dim = d->head_dim,
        .v_head_dim = d->v_head_dim,
        .causal = causal,
        .q_dtype = d->dtype,
        .kv_dtype = d->dtype,
        .progress = a->progress,
        .progress_user = a->progress_user,
    };
    return vkattn_attention_tune(m->ctx, &at);
}

vkattn_result vkattn_mha_tune(vkattn_mha *m, const vkattn_mha_tune_args *args)
{
    if (!m)
        return VKATTN_ERROR_INVALID_ARGUMENT;
    vkattn_context *ctx = m->ctx;
    if (!args)
        return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT, "vkattn_mha_tune: args is NULL");
    if (!args->batch || !args->q_len || !args->kv_len)
        return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT,
                        "vkattn_mha_tune: args->batch %u, q_len %u and kv_len %u must all be >= 1",
                        args->batch, args->q_len, args->kv_len);
    const vkattn_mha_desc *d = &m->d;
    /* the layer's widths fit 32 bits (vka_mha_resolve checked them); the
     * row counts are the caller's products */
    uint32_t rows = 0, kv_rows = 0;
    VKA_TRY(row_count(ctx, "vkattn_mha_tune", "q_len", args->batch, args->q_len, &rows));
    VKA_TRY(row_count(ctx, "vkattn_mha_tune", "kv_len", args->batch, args->kv_len, &kv_rows));
    bool self = args->q_len == args->kv_len;
    progress_sink p = {args->progress, args->progress_user};
    if (self && vka_mha_packed(d)) {
        VKA_TRY(tune_packed_projection(m, rows, p));
    } else if (d->value_dim == d->kv_dim) {
        VKA_TRY(tune_projection(m, rows, vka_mha_q_width(d), d->embed_dim, p));
        VKA_TRY(tune_projection(m, kv_rows, vka_mha_k_width(d) + vka_mha_v_width(d), d->kv_dim, p));
    } else { /* K and V from inputs of their own widths */
        VKA_TRY(tune_projection(m, rows, vka_mha_q_width(d), d->embed_dim, p));
        VKA_TRY(tune_projection(m, kv_rows, vka_mha_k_width(d), d->kv_dim, p));
        VKA_TRY(tune_projection(m, kv_rows, vka_mha_v_width(d), d->value_dim, p));
    }
    /* both mask kinds of self-attention (decoders and encoders); cross-
     * attention is rarely causal */
    if (self)
        VKA_TRY(tune_attention(m, args, true));
    VKA_TRY(tune_attention(m, args, false));
    return tune_output_projection(m, rows, p);
}

vkattn_result vkattn_mha_step_tune(vkattn_mha *m, const vkattn_mha_step_tune_args *args)
{
    if (!m)
        return VKATTN_ERROR_INVALID_ARGUMENT;
    vkattn_context *ctx = m->ctx;
    if (!args)
        return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT, "vkattn_mha_step_tune: args is NULL");
    const uint32_t batch = args->batch, new_tokens = args->new_tokens, length = args->length;
    if (!batch || !new_tokens || length < new_tokens)
        return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT,
                        "vkattn_mha_step_tune: args->batch %u and new_tokens %u must be >= 1 and "
                        "length %u >= new_tokens",
                        batch, new_tokens, length);
    uint32_t rows = 0;
    VKA_TRY(row_count(ctx, "vkattn_mha_step_tune", "new_tokens", batch, new_tokens, &rows));
    VKA_TRY(vka_mha_check_cache(m, args->cache, "vkattn_mha_step_tune: args->cache"));
    /* attention over the cache first (where a choice exists: the split-KV
     * path): its scratch cache of `length` tokens is what fails on sizes
     * the device cannot hold, before anything is stored; then the packed
     * projection (its K/V segments append to the cache: they take the plain
     * GEMM's entry) and the output projection */
    if (new_tokens <= VKA_KV_DECODE_MAX_TOKENS) {
        vkattn_kv_attention_tune_args kv = {args->cache, batch,          new_tokens,
                                            length,      args->progress, args->progress_user};
        VKA_TRY(vkattn_kv_attention_tune(ctx, &kv));
    }
    progress_sink p = {args->progress, args->progress_user};
    VKA_TRY(tune_packed_projection(m, rows, p));
    return tune_output_projection(m, rows, p);
}
