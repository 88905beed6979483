/* MHA steps over a KV cache: prefill and decode.
 *   metadata of the step (positions, block tables) -> projection GEMM whose
 *   epilogue writes Q to scratch and appends K, V into the cache -> attention
 *   over each sequence's cache (split-KV for few tokens) storing merged heads
 *   -> output GEMM.
 * The cache's host state advances when the step is recorded; a step that
 * fails after that point is rolled back, so a failed call changes nothing. */
#include "spec/dtype.h"
#include "spec/error_text.h"
#include "ops/attention/attention.h"
#include "ops/kvcache/kvcache.h"
#include "ops/linear/linear.h"
#include "ops/mha/mha_internal.h"
#include "spec/mha_desc.h"

#include <string.h>

/* Q [B, Hq, T, Dk] and O [B, T, Hq*Dv] in the layer's dtype, and K and V
 * [B, Hkv, T, Dk / Dv] (staged there on their way into a cache the
 * projection cannot write - quantized, of another dtype, or rows padded to
 * a multiple of 8 -
 * which the append fills; room for them is always part of the size, which
 * does not know the cache). */
typedef struct step_scratch {
    uint64_t q, o, k, v, bytes;
    vka_mha_rows_scratch rows; /* add_bias_kv */
} step_scratch;

static step_scratch plan(const vkattn_mha *m, uint64_t batch, uint64_t tokens)
{
    step_scratch s;
    const vkattn_mha_desc *d = &m->d;
    uint64_t cursor = 0;
    s.q = vka_mha_place(&cursor, vka_mha_bytes(m, batch, tokens, d->num_heads, d->head_dim));
    s.o = vka_mha_place(&cursor, vka_mha_bytes(m, batch, tokens, d->num_heads, d->v_head_dim));
    s.k = vka_mha_place(&cursor, vka_mha_bytes(m, batch, tokens, d->num_kv_heads, d->head_dim));
    s.v = vka_mha_place(&cursor, vka_mha_bytes(m, batch, tokens, d->num_kv_heads, d->v_head_dim));
    vka_mha_place_rows(m, batch, tokens, &cursor, &s.rows);
    s.bytes = cursor;
    return s;
}

vkattn_result vkattn_mha_step_scratch_size(vkattn_mha *m, uint32_t batch, uint32_t new_tokens,
                                           uint64_t *bytes)
{
    if (!m)
        return VKATTN_ERROR_INVALID_ARGUMENT;
    if (!bytes || !batch || !new_tokens)
        return vka_fail(m->ctx, VKATTN_ERROR_INVALID_ARGUMENT, "vkattn_mha_step_scratch_size: %s",
                        !bytes ? "bytes is NULL" : "batch and new_tokens must be >= 1");
    uint64_t need = plan(m, batch, new_tokens).bytes;
    if (need == VKA_MHA_TOO_LARGE)
        return vka_fail(m->ctx, VKATTN_ERROR_OUT_OF_RANGE,
                        "vkattn_mha_step_scratch_size: batch %u x new_tokens %u needs more than "
                        "2^64 bytes of scratch",
                        batch, new_tokens);
    *bytes = need;
    return VKATTN_SUCCESS;
}

/* The cache must hold what this layer projects. */
vkattn_result vka_mha_check_cache(vkattn_mha *m, const vkattn_kv_cache *c, const char *name)
{
    vkattn_context *ctx = m->ctx;
    const vkattn_mha_desc *d = &m->d;
    if (!c)
        return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT, "%s is NULL", name);
    if (c->ctx != ctx)
        return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT, "%s belongs to another context", name);
    if (c->d.num_kv_heads != d->num_kv_heads || c->d.head_dim != d->head_dim ||
        c->d.v_head_dim != d->v_head_dim || c->d.num_heads != d->num_heads)
        return vka_fail(ctx, VKATTN_ERROR_SHAPE_MISMATCH,
                        "%s holds %u KV heads x head_dim %u (v_head_dim %u) for %u query heads; "
                        "the layer has %u x %u (%u) for %u",
                        name, c->d.num_kv_heads, c->d.head_dim, c->d.v_head_dim, c->d.num_heads,
                        d->num_kv_heads, d->head_dim, d->v_head_dim, d->num_heads);
    if (!vka_mha_packed(d)) {
        bool k = d->kv_dim != d->embed_dim;
        return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT,
                        "steps are self-attention: the layer's %s %u must equal its embed_dim %u",
                        k ? "kv_dim" : "value_dim", k ? d->kv_dim : d->value_dim, d->embed_dim);
    }
    return VKATTN_SUCCESS;
}

/* The step's projection: segment 0 writes Q into the scratch, segments 1 and 2
 * append K and V into the cache's pools at the positions of the step's
 * metadata (or, with kv_stage, write them to the scratch for the append);
 * the epilogue norms and rotates Q and K (heads, when the layer has QK-norm
 * or RoPE). With meta NULL the arguments are only checked. */
static vka_linear_segments_args projection(vkattn_mha *m, const vkattn_tensor *x,
                                           const vkattn_tensor *q, const vka_linear_cache_dst *dst,
                                           const vka_linear_heads *heads,
                                           const vkattn_tensor *kv_stage)
{
    const vkattn_mha_desc *d = &m->d;
    uint64_t qw = vka_mha_q_width(d), kw = vka_mha_k_width(d), vw = vka_mha_v_width(d);
    vka_linear_segments_args p = {
        .x = *x,
        .w = {.buffer = m->src.q,
              .offset = m->src.off_q,
              .dtype = d->weight_dtype,
              .rank = 2,
              .shape = {(int64_t)(qw + kw + vw), d->embed_dim}},
        .b = {.buffer = d->bias ? m->src.bq : NULL,
              .offset = m->src.off_bq,
              .dtype = vka_mha_bias_dtype(d),
              .rank = 1,
              .shape = {(int64_t)(qw + kw + vw)}},
        .segment_count = 3,
        .segments = {{(uint32_t)qw, d->head_dim, *q, VKA_LINEAR_TO_DST},
                     {(uint32_t)kw, d->head_dim, {0}, VKA_LINEAR_TO_K_POOL},
                     {(uint32_t)vw, d->v_head_dim, {0}, VKA_LINEAR_TO_V_POOL}},
        .cache = dst,
        .heads = heads->segments ? heads : NULL,
    };
    if (kv_stage) /* K and V to scratch, appended after */
        for (int i = 0; i < 2; i++) {
            p.segments[1 + i].dst = kv_stage[i];
            p.segments[1 + i].target = VKA_LINEAR_TO_DST;
        }
    /* without RoPE positions from the cache nothing else needs it */
    if (kv_stage && !(p.heads && p.heads->position_source == VKA_POSITIONS_CACHE))
        p.cache = NULL;
    return p;
}

/* x and y: [batch, T, Dm] in the layer's dtype. */
static vkattn_result check_tokens(vkattn_mha *m, const vkattn_mha_step_args *a, uint32_t *tokens)
{
    vkattn_context *ctx = m->ctx;
    const vkattn_tensor *t[2] = {&a->x, &a->y};
    const char *name[2] = {"args->x", "args->y"};
    for (int i = 0; i < 2; i++) {
        if (!t[i]->buffer)
            return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT, "%s.buffer is NULL", name[i]);
        if (t[i]->rank != 3)
            return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT,
                            "%s.rank is %u: expected 3 ([batch, T, embed_dim])", name[i],
                            t[i]->rank);
        char b[VKA_DTYPE_TEXT];
        if (t[i]->dtype != m->d.dtype)
            return vka_fail(ctx, VKATTN_ERROR_UNSUPPORTED_DTYPE,
                            "%s.dtype is %s but the layer's dtype is %s", name[i],
                            vka_dtype_text(t[i]->dtype, b), vkattn_dtype_name(m->d.dtype));
        int64_t want[3] = {a->batch, a->x.shape[1], m->d.embed_dim};
        const char *what[3] = {"args->batch", "args->x.shape[1]", "the layer's embed_dim"};
        for (int k = 0; k < 3; k++)
            if (t[i]->shape[k] != want[k] || t[i]->shape[k] < 1 || t[i]->shape[k] > UINT32_MAX)
                return vka_fail(ctx,
                                t[i]->shape[k] < 1 ? VKATTN_ERROR_INVALID_ARGUMENT
                                                   : VKATTN_ERROR_SHAPE_MISMATCH,
                                "%s.shape[%d] is %lld but %s is %lld", name[i], k,
                                (long long)t[i]->shape[k], what[k], (long long)want[k]);
    }
    *tokens = (uint32_t)a->x.shape[1];
    return VKATTN_SUCCESS;
}

vkattn_result vkattn_cmd_mha_step(vkattn_mha *m, VkCommandBuffer cmd, const vkattn_mha_step_args *a)
{
    VKA_TRY(vka_mha_check_record(m, "vkattn_cmd_mha_step", cmd, a));
    vkattn_context *ctx = m->ctx;
    if (a->batch == 0)
        return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT, "args->batch is 0");
    vkattn_kv_cache *c = a->cache;
    uint32_t tokens = 0;
    vkattn_result r = vka_mha_check_cache(m, c, "args->cache");
    if (r == VKATTN_SUCCESS)
        r = check_tokens(m, a, &tokens);
    if (r != VKATTN_SUCCESS)
        return r;
    step_scratch sp = plan(m, a->batch, tokens);
    vkattn_buffer *sbuf;
    uint64_t base;
    VKA_TRY(vka_mha_scratch_pick(m, a->scratch, a->scratch_offset, sp.bytes, &sbuf, &base));

    const vkattn_mha_desc *d = &m->d;
    int64_t b = a->batch, hq = d->num_heads, dk = d->head_dim, dv = d->v_head_dim, t = tokens;
    vkattn_tensor q = {.buffer = sbuf,
                       .offset = base + sp.q,
                       .dtype = d->dtype,
                       .rank = 4,
                       .shape = {b, hq, t, dk},
                       .strides = {hq * t * dk, t * dk, dk, 1}};
    vkattn_tensor o_heads = {.buffer = sbuf,
                             .offset = base + sp.o,
                             .dtype = d->dtype,
                             .rank = 4,
                             .shape = {b, hq, t, dv},
                             .strides = {t * hq * dv, dv, hq * dv, 1}};
    /* A fixed split count serves decode steps; a step with more tokens (a
     * short prefill) uses as many of them as the split scratch holds - still a
     * fixed function of the arguments, so still deterministic. */
    uint32_t splits = a->kv_splits;
    if (splits && tokens <= VKATTN_KV_MAX_SPLIT_ROWS && splits * tokens > VKATTN_KV_MAX_SPLIT_ROWS)
        splits = VKATTN_KV_MAX_SPLIT_ROWS / tokens;
    vka_kv_attention_problem problem;
    r = vka_kv_attention_check(c, &q, &o_heads, d->scale, splits, "args->", &problem);
    if (r == VKATTN_SUCCESS) { /* the layer's modifiers ("args->window": the layer's) */
        vka_kv_mods_args mods = {.window = d->window, .softcap = d->softcap};
        vka_mha_mods(m, &mods.sinks, &mods.alibi_slopes);
        vka_mha_main_pass_mods(m, &q, sbuf, base, &sp.rows, &mods.sinks, &mods.lse);
        r = vka_kv_attention_check_mods(c, &mods, "the layer's ", &problem);
    }
    if (r == VKATTN_SUCCESS)
        r = vka_kv_attention_check_mask(c, &a->mask, "args->", &problem);
    vkattn_tensor gate;
    if (r == VKATTN_SUCCESS)
        r = vka_att_check_head_mask(ctx, &a->head_mask, a->batch, d->num_heads, "args->head_mask",
                                    &gate);
    if (r != VKATTN_SUCCESS)
        return r;
    vka_linear_cache_dst dst = {.cache = c, .meta = NULL, .batch = a->batch, .new_tokens = tokens};
    /* QK-norm and RoPE at each token's place in its sequence (cache length + t) */
    vka_linear_heads heads;
    vka_mha_heads(m, VKA_POSITIONS_CACHE, NULL, &heads);
    /* K and V go through the scratch and an append into a cache the
     * projection cannot write: quantized, of another dtype than the layer's,
     * or rows padded to a multiple of 8 */
    const bool staged =
        c->d.dtype != d->dtype || c->k_row != c->d.head_dim || c->v_row != c->d.v_head_dim;
    vkattn_tensor kv_stage[2];
    for (int i = 0; i < 2; i++) {
        int64_t dh = i ? dv : dk;
        kv_stage[i] = (vkattn_tensor){.buffer = sbuf,
                                      .offset = base + (i ? sp.v : sp.k),
                                      .dtype = d->dtype,
                                      .rank = 4,
                                      .shape = {b, d->num_kv_heads, t, dh},
                                      .strides = {d->num_kv_heads * t * dh, t * dh, dh, 1}};
    }
    vka_linear_segments_args proj =
        projection(m, &a->x, &q, &dst, &heads, staged ? kv_stage : NULL);
    r = vka_linear_segments_check(ctx, &proj);
    if (r != VKATTN_SUCCESS)
        return r;
    vka_kv_append_plan append;
    if (staged) {
        vkattn_tensor kr, vr;
        r = vka_kv_append_check(c, &kv_stage[0], &kv_stage[1], a->batch, "the step's K",
                                "the step's V", &kr, &vr);
        if (r == VKATTN_SUCCESS)
            r = vka_kv_append_prepare(ctx, c, &kr, &vr, a->batch, &append);
        if (r != VKATTN_SUCCESS)
            return r;
    }
    vka_kv_step step;
    r = vka_kv_step_check(c, a->batch, a->sequences, tokens, "args->", &step);
    vka_kv_attention_plan attention;
    if (r == VKATTN_SUCCESS)
        r = vka_kv_attention_prepare(ctx, c, &step, &problem, &attention);
    if (r != VKATTN_SUCCESS)
        return r;

    /* From here on the cache's host state moves: remember it to roll back. */
    uint32_t old_lengths[64], *saved = old_lengths;
    if (a->batch > 64 && !(saved = vka_alloc(ctx, a->batch * sizeof *saved)))
        return vka_fail(ctx, VKATTN_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
    for (uint32_t i = 0; i < a->batch; i++)
        saved[i] = c->lengths[a->sequences[i]];
    vka_binding meta;
    r = vka_kv_step_record(&step, cmd, &meta);
    if (r == VKATTN_SUCCESS) {
        dst.meta = &meta;
        r = vka_cmd_linear_segments(ctx, cmd, &proj);
    }
    if (r == VKATTN_SUCCESS && staged) {
        vka_cmd_compute_barrier(ctx, cmd);
        r = vka_kv_append_dispatch(ctx, cmd, &append, &meta);
    }
    if (r == VKATTN_SUCCESS) {
        vka_cmd_compute_barrier(ctx, cmd);
        r = vka_kv_attention_record(ctx, cmd, &attention, &meta);
    }
    if (r == VKATTN_SUCCESS && gate.buffer) /* (its own barrier first) */
        r = vka_att_record_head_gate(ctx, cmd, &o_heads, &gate);
    if (r == VKATTN_SUCCESS && m->d.add_bias_kv) {
        vka_cmd_compute_barrier(ctx, cmd);
        r = vka_mha_record_bias_row(m, cmd, &q, &o_heads, &a->head_mask, sbuf, base, &sp.rows);
    }
    if (r == VKATTN_SUCCESS) {
        vka_cmd_compute_barrier(ctx, cmd);
        int64_t o_shape[3] = {b, t, hq * dv};
        vkattn_tensor o = vkattn_tensor_make(sbuf, base + sp.o, d->dtype, 3, o_shape);
        r = vka_mha_record_output(m, cmd, &o, &a->y);
    }
    if (r != VKATTN_SUCCESS)
        for (uint32_t i = 0; i < a->batch; i++)
            vkattn_kv_cache_truncate(c, a->sequences[i], saved[i]);
    else
        vka_kv_step_release(&step); /* a windowed cache's old blocks */
    if (saved != old_lengths)
        vka_free(ctx, saved);
    return r;
}

static vkattn_result record_step(vkattn_mha *m, VkCommandBuffer cmd, const void *args)
{
    return vkattn_cmd_mha_step(m, cmd, args);
}

static vkattn_result grow_step(vkattn_mha *m, const void *args)
{
    const vkattn_mha_step_args *a = args;
    uint32_t tokens = 0;
    if (a->scratch)
        return VKATTN_SUCCESS;
    VKA_TRY(vka_mha_check_cache(m, a->cache, "args->cache"));
    if (a->batch == 0)
        return vka_fail(m->ctx, VKATTN_ERROR_INVALID_ARGUMENT, "args->batch is 0");
    VKA_TRY(check_tokens(m, a, &tokens));
    return vka_mha_scratch_grow(m, plan(m, a->batch, tokens).bytes);
}

vkattn_result vkattn_mha_step(vkattn_mha *m, const vkattn_mha_step_args *a)
{
    return vka_mha_submit(m, "vkattn_mha_step", a, grow_step, record_step);
}

double vkattn_mha_step_flops(const vkattn_mha *mha, uint32_t batch, uint32_t new_tokens,
                             uint32_t length)
{
    const vkattn_mha_desc *d = vkattn_mha_config(mha);
    if (!d || new_tokens > length)
        return 0;
    double t = (double)batch * new_tokens, dm = d->embed_dim, dk = d->head_dim, dv = d->v_head_dim;
    double proj =
        2.0 * t * dm *
            ((d->num_heads + (double)d->num_kv_heads) * dk + (double)d->num_kv_heads * dv) +
        2.0 * t * d->num_heads * dv * dm;
    /* query i of the step sees length - new_tokens + i + 1 keys, at most
     * the window's W */
    double pairs = 0;
    for (uint32_t i = 0; i < new_tokens; i++) {
        double seen = (double)length - new_tokens + i + 1;
        pairs += d->window && seen > d->window ? d->window : seen;
    }
    return proj + 2.0 * batch * d->num_heads * (dk + dv) * pairs;
}
