/* torch's add_bias_kv and add_zero_attn in the layer's recorded passes (the
 * forward and the steps): the zero row joins the main pass as a sink of
 * logit 0 (a score of 0 with no value); the bias row is attended in a pass
 * of its own, unmasked (every query sees it, whatever causal, the window or
 * the caller's masks say), over the layer's [Hkv, Dk] row read for every
 * batch row at batch stride 0, then merged into the main pass's output by
 * LSE. No key of either is written anywhere. */
#include "ops/mha/mha_internal.h"
#include "ops/attention/attention.h"

#include <string.h>

void vka_mha_place_rows(const vkattn_mha *m, uint64_t batch, uint64_t tokens, uint64_t *cursor,
                        vka_mha_rows_scratch *out)
{
    memset(out, 0, sizeof *out);
    if (!vka_mha_appends(&m->d))
        return;
    const uint64_t hq = m->d.num_heads;
    const uint64_t f[4] = {batch, hq, tokens, 4};
    uint64_t lse_bytes;
    if (!vka_product_u64(f, 4, &lse_bytes))
        lse_bytes = UINT64_MAX;
    out->lse_main = vka_mha_place(cursor, lse_bytes);
    if (!m->d.add_bias_kv)
        return;
    out->o_rows = vka_mha_place(cursor, vka_mha_bytes(m, batch, hq, tokens, m->d.v_head_dim));
    out->lse_rows = vka_mha_place(cursor, lse_bytes);
}

static vkattn_tensor lse_tensor(vkattn_buffer *sbuf, uint64_t offset, const vkattn_tensor *q)
{
    int64_t shape[3] = {q->shape[0], q->shape[1], q->shape[2]};
    return vkattn_tensor_make(sbuf, offset, VKATTN_DTYPE_F32, 3, shape);
}

void vka_mha_main_pass_mods(const vkattn_mha *m, const vkattn_tensor *q, vkattn_buffer *sbuf,
                            uint64_t base, const vka_mha_rows_scratch *rs, vkattn_tensor *sinks,
                            vkattn_tensor *lse)
{
    const vkattn_mha_desc *d = &m->d;
    memset(lse, 0, sizeof *lse);
    if (!vka_mha_appends(d))
        return;
    *lse = lse_tensor(sbuf, base + rs->lse_main, q);
    if (!d->add_bias_kv) {
        int64_t heads[1] = {d->num_heads};
        *sinks = vkattn_tensor_make(m->extras, 0, VKATTN_DTYPE_F32, 1, heads);
    }
}

vkattn_result vka_mha_record_bias_row(vkattn_mha *m, VkCommandBuffer cmd, const vkattn_tensor *q,
                                      const vkattn_tensor *out, const vkattn_tensor *head_mask,
                                      vkattn_buffer *sbuf, uint64_t base,
                                      const vka_mha_rows_scratch *rs)
{
    const vkattn_mha_desc *d = &m->d;
    if (!d->add_bias_kv)
        return VKATTN_SUCCESS;
    vkattn_context *ctx = m->ctx;
    const int64_t b = q->shape[0], hq = d->num_heads, t = q->shape[2];
    const int64_t hkv = d->num_kv_heads, dk = d->head_dim, dv = d->v_head_dim;
    int64_t heads[1] = {hq}, o_shape[4] = {b, hq, t, dv};
    vkattn_attention_args rows = {
        .q = *q,
        .k = {m->extras, m->off_bias_k, d->dtype, 4, {b, hkv, 1, dk}, {0, dk, dk, 1}},
        .v = {m->extras, m->off_bias_v, d->dtype, 4, {b, hkv, 1, dv}, {0, dv, dv, 1}},
        .out = vkattn_tensor_make(sbuf, base + rs->o_rows, d->dtype, 4, o_shape),
        .scale = d->scale,
        .softcap = d->softcap,
        .lse = lse_tensor(sbuf, base + rs->lse_rows, q),
        .head_mask = *head_mask,
    };
    if (d->add_zero_attn)
        rows.sinks = vkattn_tensor_make(m->extras, 0, VKATTN_DTYPE_F32, 1, heads);
    VKA_TRY(vkattn_cmd_attention(ctx, cmd, &rows));
    vka_cmd_compute_barrier(ctx, cmd);
    vkattn_attention_merge_args mg = {
        .out_a = *out,
        .lse_a = lse_tensor(sbuf, base + rs->lse_main, q),
        .out_b = rows.out,
        .lse_b = rows.lse,
        .out = *out,
        .lse = lse_tensor(sbuf, base + rs->lse_main, q),
    };
    return vkattn_cmd_attention_merge(ctx, cmd, &mg);
}

/* `w` (rank 3 or 4, the key dimension last) narrowed to `count` keys from
 * key `first`. */
static vkattn_tensor key_columns(const vkattn_tensor *w, int64_t first, int64_t count)
{
    vkattn_tensor v = *w;
    bool defaults = true;
    for (uint32_t d = 0; d < v.rank; d++)
        defaults = defaults && v.strides[d] == 0;
    if (defaults) { /* contiguous over the full shape */
        int64_t stride = 1;
        for (uint32_t d = v.rank; d-- > 0;) {
            v.strides[d] = stride;
            stride *= v.shape[d];
        }
    }
    const uint32_t last = v.rank - 1;
    v.offset += (uint64_t)(first * v.strides[last]) * 4u;
    v.shape[last] = count;
    return v;
}

vkattn_result vka_mha_record_appended_weights(vkattn_mha *m, VkCommandBuffer cmd,
                                              const vkattn_attention_args *main_pass,
                                              vkattn_buffer *sbuf, uint64_t base,
                                              const vka_mha_rows_scratch *rs)
{
    vkattn_context *ctx = m->ctx;
    const vkattn_mha_desc *d = &m->d;
    const vkattn_tensor *q = &main_pass->q;
    const int64_t b = q->shape[0], hkv = d->num_kv_heads, dk = d->head_dim, dv = d->v_head_dim;
    const int64_t tk = main_pass->k.shape[2];
    const vkattn_tensor total = lse_tensor(sbuf, base + rs->lse_main, q);
    /* the caller's keys: the main pass's call, its sinks (the zero row's)
     * held by the total */
    vkattn_attention_args at = *main_pass;
    at.weights = key_columns(&main_pass->weights, 0, tk);
    at.lse = total;
    at.sinks = (vkattn_tensor){0};
    VKA_TRY(vka_att_cmd_weights_given(ctx, cmd, &at));
    /* each appended row: one key, unmasked; the zero row's key and value
     * are a row of zeros (score 0) */
    int64_t col = tk;
    for (int row = 0; row < 2; row++) {
        bool bias = row == 0;
        if (bias ? !d->add_bias_kv : !d->add_zero_attn)
            continue;
        uint64_t k_off = bias ? m->off_bias_k : m->off_zero_row,
                 v_off = bias ? m->off_bias_v : m->off_zero_row;
        vkattn_attention_args one = {
            .q = *q,
            .k = {m->extras, k_off, d->dtype, 4, {b, hkv, 1, dk}, {0, bias ? dk : 0, dk, 1}},
            .v = {m->extras, v_off, d->dtype, 4, {b, hkv, 1, dv}, {0, bias ? dv : 0, dv, 1}},
            .out = main_pass->out, /* checked, not written */
            .weights = key_columns(&main_pass->weights, col++, 1),
            .scale = d->scale,
            .softcap = d->softcap,
            .lse = total,
            .head_mask = main_pass->head_mask,
        };
        VKA_TRY(vka_att_cmd_weights_given(ctx, cmd, &one));
    }
    return VKATTN_SUCCESS;
}
