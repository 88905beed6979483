/* The MHA layer's forward pass:
 *   projection GEMM (epilogue writes Q, K, V head-split)
 *   -> attention (store merges the heads into O [B, Tq, Hq*Dv])
 *   -> output GEMM.
 * No separate split, merge or transpose pass: those are store patterns. */
#include "ops/mha/mha_internal.h"
#include "ops/attention/attention.h"
#include "ops/linear/linear.h"
#include "spec/attention_shapes.h"
#include "spec/mha_desc.h"
#include "spec/score_mods.h"

#include <string.h>

vka_mha_plan vka_mha_plan_scratch(const vkattn_mha *m, uint64_t b, uint64_t tq, uint64_t tk)
{
    vka_mha_plan p;
    uint64_t dk = m->d.head_dim, dv = m->d.v_head_dim, hq = m->d.num_heads, cursor = 0;
    p.q = vka_mha_place(&cursor, vka_mha_bytes(m, b, hq, tq, dk));
    p.k = vka_mha_place(&cursor, vka_mha_bytes(m, b, m->d.num_kv_heads, tk, dk));
    p.v = vka_mha_place(&cursor, vka_mha_bytes(m, b, m->d.num_kv_heads, tk, dv));
    p.o = vka_mha_place(&cursor, vka_mha_bytes(m, b, tq, hq, dv));
    uint64_t pos_bytes = 0;
    if (m->d.rope.theta != 0.0f && !vka_mul_u64(b * 4, tq, &pos_bytes))
        pos_bytes = VKA_MHA_TOO_LARGE;
    p.positions = pos_bytes ? vka_mha_place(&cursor, pos_bytes) : 0;
    vka_mha_place_rows(m, b, tq, &cursor, &p.rows);
    uint64_t lse_bytes = 0;
    if (!vka_mul_u64(b * 4 * hq, tq, &lse_bytes))
        lse_bytes = VKA_MHA_TOO_LARGE;
    p.lse = vka_mha_place(&cursor, lse_bytes);
    p.bytes = cursor;
    return p;
}

vkattn_result vkattn_mha_scratch_size(vkattn_mha *m, uint32_t batch, uint32_t q_len,
                                      uint32_t kv_len, uint64_t *bytes)
{
    if (!m)
        return VKATTN_ERROR_INVALID_ARGUMENT;
    if (!bytes || !batch || !q_len || !kv_len)
        return vka_fail(m->ctx, VKATTN_ERROR_INVALID_ARGUMENT, "vkattn_mha_scratch_size: %s",
                        !bytes ? "bytes is NULL" : "batch, q_len and kv_len must be >= 1");
    uint64_t need = vka_mha_plan_scratch(m, batch, q_len, kv_len).bytes;
    if (need == VKA_MHA_TOO_LARGE)
        return vka_fail(m->ctx, VKATTN_ERROR_OUT_OF_RANGE,
                        "vkattn_mha_scratch_size: batch %u x q_len %u (kv_len %u) needs more than "
                        "2^64 bytes of scratch",
                        batch, q_len, kv_len);
    *bytes = need;
    return VKATTN_SUCCESS;
}

vkattn_result vkattn_mha_reserve(vkattn_mha *m, uint32_t batch, uint32_t q_len, uint32_t kv_len)
{
    uint64_t need = 0;
    vkattn_result r = vkattn_mha_scratch_size(m, batch, q_len, kv_len, &need);
    return r != VKATTN_SUCCESS ? r : vka_mha_scratch_grow(m, need);
}

/* ---------------------------------------------------------------- forward */

static vka_shape_view view_of(const vkattn_tensor *t)
{
    vka_shape_view v = {t->buffer != NULL, t->dtype, t->rank, t->shape};
    return v;
}

/* A rank-4 tensor over the scratch with the given shape and strides. */
static vkattn_tensor scratch_tensor(const vkattn_mha *m, vkattn_buffer *buf, uint64_t offset,
                                    const int64_t shape[4], const int64_t strides[4])
{
    vkattn_tensor t = {.buffer = buf, .offset = offset, .dtype = m->d.dtype, .rank = 4};
    memcpy(t.shape, shape, sizeof t.shape);
    memcpy(t.strides, strides, sizeof t.strides);
    return t;
}

/* Checks x / kv / value / y against the layer; returns B, Tq, Tk. */
static vkattn_result check_io(vkattn_mha *m, const vkattn_mha_forward_args *a, bool need_y,
                              uint32_t *b, uint32_t *tq, uint32_t *tk)
{
    vkattn_context *ctx = m->ctx;
    const vkattn_mha_desc *d = &m->d;
    struct {
        const vkattn_tensor *t;
        const char *name;
        uint32_t width;
        const char *width_name;
    } io[4] = {{&a->x, "args->x", d->embed_dim, "embed_dim"},
               {&a->y, "args->y", d->embed_dim, "embed_dim"},
               {&a->kv, "args->kv", d->kv_dim, "kv_dim"},
               {&a->value, "args->value", d->value_dim, "value_dim"}};
    for (int i = 0; i < 4; i++) {
        const vkattn_tensor *t = io[i].t;
        if ((i >= 2 || (i == 1 && !need_y)) && !t->buffer)
            continue; /* self-attention; values from the keys' input; a backward's y */
        if (!t->buffer)
            return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT, "%s.buffer is NULL", io[i].name);
        if (t->rank != 3)
            return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT,
                            "%s.rank is %u: expected 3 ([B, T, %s])", io[i].name, t->rank,
                            io[i].width_name);
        char dt_text[VKA_DTYPE_TEXT];
        if (t->dtype != d->dtype)
            return vka_fail(ctx, VKATTN_ERROR_UNSUPPORTED_DTYPE,
                            "%s.dtype is %s but the layer's dtype is %s", io[i].name,
                            vka_dtype_text(t->dtype, dt_text), vkattn_dtype_name(d->dtype));
        for (int k = 0; k < 3; k++)
            if (t->shape[k] < 1 || t->shape[k] > UINT32_MAX)
                return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT,
                                "%s.shape[%d] is %lld: must be in 1..%u", io[i].name, k,
                                (long long)t->shape[k], UINT32_MAX);
        if (t->shape[2] != io[i].width)
            return vka_fail(ctx, VKATTN_ERROR_SHAPE_MISMATCH,
                            "%s.shape[2] is %lld but the layer's %s is %u", io[i].name,
                            (long long)t->shape[2], io[i].width_name, io[i].width);
        if (t->shape[0] != a->x.shape[0])
            return vka_fail(ctx, VKATTN_ERROR_SHAPE_MISMATCH,
                            "%s.shape[0] (batch) is %lld but args->x.shape[0] is %lld", io[i].name,
                            (long long)t->shape[0], (long long)a->x.shape[0]);
    }
    if (!a->kv.buffer && d->kv_dim != d->embed_dim)
        return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT,
                        "args->kv is NULL (self-attention) but the layer's kv_dim %u differs from "
                        "its embed_dim %u: pass C as args->kv",
                        d->kv_dim, d->embed_dim);
    if (!a->value.buffer && d->value_dim != d->kv_dim)
        return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT,
                        "args->value is NULL but the layer's value_dim %u differs from its kv_dim "
                        "%u: pass the values' input [B, Tk, %u] as args->value",
                        d->value_dim, d->kv_dim, d->value_dim);
    const vkattn_tensor *keys = a->kv.buffer ? &a->kv : &a->x;
    if (a->value.buffer && a->value.shape[1] != keys->shape[1])
        return vka_fail(ctx, VKATTN_ERROR_SHAPE_MISMATCH,
                        "args->value.shape[1] is %lld but %s.shape[1] (the keys' length) is %lld",
                        (long long)a->value.shape[1], a->kv.buffer ? "args->kv" : "args->x",
                        (long long)keys->shape[1]);
    if (a->y.buffer && a->y.shape[1] != a->x.shape[1])
        return vka_fail(ctx, VKATTN_ERROR_SHAPE_MISMATCH,
                        "args->y.shape[1] is %lld but args->x.shape[1] (q_len) is %lld",
                        (long long)a->y.shape[1], (long long)a->x.shape[1]);
    if ((a->kv.buffer || a->value.buffer) && m->heads_params)
        return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT,
                        "args->%s is given but the layer has %s: it is self-attention only",
                        a->kv.buffer ? "kv" : "value",
                        d->rope.theta != 0.0f ? "RoPE (desc->rope)" : "QK-norm (desc->qk_norm)");
    if (a->positions.buffer && d->rope.theta == 0.0f)
        return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT,
                        "args->positions is given but the layer has no RoPE (desc->rope.theta "
                        "is 0)");
    if (a->sequences)
        VKA_TRY(vka_mha_check_packed(m, a));
    *b = (uint32_t)a->x.shape[0];
    *tq = (uint32_t)a->x.shape[1];
    *tk = a->kv.buffer ? (uint32_t)a->kv.shape[1] : *tq;
    return VKATTN_SUCCESS;
}

/* Checks the attention part (masks, weights) exactly as the attention op
 * will, before anything is recorded. */
static vkattn_result check_attention(vkattn_mha *m, const vkattn_mha_forward_args *a, uint32_t b,
                                     uint32_t tq, uint32_t tk)
{
    const vkattn_mha_desc *d = &m->d;
    int64_t qs[4] = {b, d->num_heads, tq, d->head_dim},
            ks[4] = {b, d->num_kv_heads, tk, d->head_dim},
            vs[4] = {b, d->num_kv_heads, tk, d->v_head_dim},
            os[4] = {b, d->num_heads, tq, d->v_head_dim};
    vka_attention_shapes s = {
        .q = {true, d->dtype, 4, qs},
        .k = {true, d->dtype, 4, ks},
        .v = {true, d->dtype, 4, vs},
        .out = {true, d->dtype, 4, os},
        .mask = view_of(&a->mask),
        .key_padding = view_of(&a->key_padding),
        .weights = view_of(&a->weights),
        .handle_name = "buffer",
    };
    /* with appended rows the weights hold Tk + their count columns; the
     * checks see the caller's Tk */
    int64_t w_shape[VKATTN_MAX_RANK];
    const uint32_t extra = vka_mha_appended_count(d);
    if (a->weights.buffer && extra && (a->weights.rank == 3 || a->weights.rank == 4)) {
        const uint32_t last = a->weights.rank - 1;
        if (a->weights.shape[last] != (int64_t)tk + extra)
            return vka_fail(m->ctx, VKATTN_ERROR_SHAPE_MISMATCH,
                            "args->weights.shape[%u] is %lld but the layer attends to %u keys "
                            "plus %u appended row%s (desc.add_bias_kv / add_zero_attn): %u",
                            last, (long long)a->weights.shape[last], tk, extra,
                            extra > 1 ? "s" : "", tk + extra);
        memcpy(w_shape, a->weights.shape, sizeof w_shape);
        w_shape[last] = tk;
        s.weights.shape = w_shape;
    }
    char why[VKA_ERROR_MAX];
    vka_attention_dims dims;
    vkattn_tensor gate;
    /* (packed sequences: a head-mask row per sequence) */
    VKA_TRY(vka_att_check_head_mask(m->ctx, &a->head_mask, a->sequences ? a->sequences : b,
                                    d->num_heads, "args->head_mask", &gate));
    vkattn_result r = vka_bool_mask_check(a->bool_mask, "args->", why, sizeof why);
    if (r != VKATTN_SUCCESS)
        return vka_fail(m->ctx, r, "%s", why);
    r = vka_attention_check(&s, "args->", &dims, why, sizeof why);
    if (r == VKATTN_SUCCESS) { /* the layer's modifiers and the call's alignment */
        int64_t heads[1] = {d->num_heads};
        vka_shape_view per_head = {true, VKATTN_DTYPE_F32, 1, heads}, none = {0};
        vka_score_mods_args mods = {
            .causal_align = a->causal_align,
            .window = d->window,
            .softcap = d->softcap,
            .sinks = d->sinks ? per_head : none,
            .alibi_slopes = d->alibi ? per_head : none,
        };
        r = vka_score_mods_check(&mods, &dims, "args->", false, NULL, why, sizeof why);
    }
    /* q, k, v and out in the message are the layer's own projections */
    return r == VKATTN_SUCCESS ? r
                               : vka_fail(m->ctx, r,
                                          "%s (args->q/k/v/out here: the layer's [B, H, T, D] "
                                          "projections of args->x and args->kv)",
                                          why);
}

/* K = C Wk^T + bk and V = C' Wv^T + bv: one GEMM over Wk's and Wv's rows
 * when both come from `keys` and the rows are back to back, else one each. */
static vkattn_result record_kv_projection(vkattn_mha *m, VkCommandBuffer cmd,
                                          const vkattn_tensor *keys, const vkattn_tensor *values,
                                          vka_linear_segment seg_k, vka_linear_segment seg_v)
{
    const vkattn_mha_desc *d = &m->d;
    const vka_mha_weight_source *s = &m->src;
    uint64_t kw = vka_mha_k_width(d), vw = vka_mha_v_width(d);
    vkattn_tensor wk = {.buffer = s->kv,
                        .offset = s->off_kv,
                        .dtype = d->weight_dtype,
                        .rank = 2,
                        .shape = {(int64_t)kw, d->kv_dim}};
    vkattn_tensor bk = {.buffer = d->bias ? s->bkv : NULL,
                        .offset = s->off_bkv,
                        .dtype = vka_mha_bias_dtype(d),
                        .rank = 1,
                        .shape = {(int64_t)kw}};
    bool together = !values->buffer && s->v == s->kv && s->off_v == s->off_kv + vka_mha_wk_bytes(d);
    if (together) { /* Wk's rows, then Wv's: one [Hkv*(Dk + Dv), Dkv] matrix */
        wk.shape[0] += (int64_t)vw;
        bk.shape[0] += (int64_t)vw;
        vka_linear_segments_args p = {*keys, wk, bk, 2, {seg_k, seg_v}};
        return vka_cmd_linear_segments(m->ctx, cmd, &p);
    }
    vkattn_tensor wv = {.buffer = s->v,
                        .offset = s->off_v,
                        .dtype = d->weight_dtype,
                        .rank = 2,
                        .shape = {(int64_t)vw, d->value_dim}};
    vkattn_tensor bv = bk;
    bv.offset += kw * vkattn_dtype_size(vka_mha_bias_dtype(d));
    bv.shape[0] = (int64_t)vw;
    vka_linear_segments_args pk = {*keys, wk, bk, 1, {seg_k}};
    vka_linear_segments_args pv = {values->buffer ? *values : *keys, wv, bv, 1, {seg_v}};
    VKA_TRY(vka_cmd_linear_segments(m->ctx, cmd, &pk));
    return vka_cmd_linear_segments(m->ctx, cmd, &pv);
}

vkattn_result vka_mha_check_forward(vkattn_mha *m, const vkattn_mha_forward_args *a, bool need_y,
                                    uint32_t *b, uint32_t *tq, uint32_t *tk)
{
    VKA_TRY(check_io(m, a, need_y, b, tq, tk));
    VKA_TRY(check_attention(m, a, *b, *tq, *tk));
    if (!(a->dropout_p >= 0.0f && a->dropout_p < 1.0f))
        return vka_fail(m->ctx, VKATTN_ERROR_INVALID_ARGUMENT,
                        "args->dropout_p is %g: it must be in [0, 1)", (double)a->dropout_p);
    if (a->dropout_p > 0.0f && vka_mha_appends(&m->d))
        return vka_fail(m->ctx, VKATTN_ERROR_UNSUPPORTED,
                        "args->dropout_p is %g but the layer has add_bias_kv or add_zero_attn: "
                        "their rows are merged from passes of their own, which have no dropout",
                        (double)a->dropout_p);
    return VKATTN_SUCCESS;
}

vkattn_result vkattn_cmd_mha_forward(vkattn_mha *m, VkCommandBuffer cmd,
                                     const vkattn_mha_forward_args *a)
{
    VKA_TRY(vka_mha_check_record(m, "vkattn_cmd_mha_forward", cmd, a));
    uint32_t b, tq, tk;
    VKA_TRY(vka_mha_check_forward(m, a, true, &b, &tq, &tk));
    vka_mha_plan sp = vka_mha_plan_scratch(m, b, tq, tk);
    vkattn_buffer *sbuf;
    uint64_t base;
    VKA_TRY(vka_mha_scratch_pick(m, a->scratch, a->scratch_offset, sp.bytes, &sbuf, &base));
    vkattn_attention_args at;
    VKA_TRY(vka_mha_record_core(m, cmd, a, sbuf, base, &sp, false, &at));
    int64_t o_shape[3] = {b, tq, (int64_t)vka_mha_o_width(&m->d)};
    vkattn_tensor o = vkattn_tensor_make(sbuf, base + sp.o, m->d.dtype, 3, o_shape);
    return vka_mha_record_output(m, cmd, &o, &a->y);
}

vkattn_result vka_mha_record_core(vkattn_mha *m, VkCommandBuffer cmd,
                                  const vkattn_mha_forward_args *a, vkattn_buffer *sbuf,
                                  uint64_t base, const vka_mha_plan *plan, bool lse,
                                  vkattn_attention_args *at_out)
{
    vkattn_context *ctx = m->ctx;
    vkattn_result r;
    const vka_mha_plan sp = *plan;
    const uint32_t b = (uint32_t)a->x.shape[0], tq = (uint32_t)a->x.shape[1];
    const uint32_t tk = a->kv.buffer ? (uint32_t)a->kv.shape[1] : tq;
    const vkattn_mha_desc *d = &m->d;
    int64_t hq = d->num_heads, hkv = d->num_kv_heads, dk = d->head_dim, dv = d->v_head_dim;
    int64_t q_shape[4] = {b, hq, tq, dk}, k_shape[4] = {b, hkv, tk, dk},
            v_shape[4] = {b, hkv, tk, dv}, o_shape4[4] = {b, hq, tq, dv};
    int64_t q_strides[4] = {hq * tq * dk, tq * dk, dk, 1},
            k_strides[4] = {hkv * tk * dk, tk * dk, dk, 1},
            v_strides[4] = {hkv * tk * dv, tk * dv, dv, 1};
    vkattn_tensor q = scratch_tensor(m, sbuf, base + sp.q, q_shape, q_strides);
    vkattn_tensor k = scratch_tensor(m, sbuf, base + sp.k, k_shape, k_strides);
    vkattn_tensor v = scratch_tensor(m, sbuf, base + sp.v, v_shape, v_strides);
    /* O is [B, Tq, Hq*Dv]: seen by attention as [B, Hq, Tq, Dv] with merged strides */
    int64_t o_strides[4] = {tq * hq * dv, dv, hq * dv, 1};
    vkattn_tensor o_heads = scratch_tensor(m, sbuf, base + sp.o, o_shape4, o_strides);

    uint64_t qw = vka_mha_q_width(d), kw = vka_mha_k_width(d), vw = vka_mha_v_width(d);
    vkattn_tensor w_all = {.buffer = m->src.q,
                           .offset = m->src.off_q,
                           .dtype = d->weight_dtype,
                           .rank = 2,
                           .shape = {(int64_t)(qw + kw + vw), d->embed_dim}};
    vkattn_tensor b_all = {.buffer = d->bias ? m->src.bq : NULL,
                           .offset = m->src.off_bq,
                           .dtype = vka_mha_bias_dtype(d),
                           .rank = 1,
                           .shape = {(int64_t)(qw + kw + vw)}};
    vka_linear_segment seg_q = {(uint32_t)qw, (uint32_t)dk, q};
    vka_linear_segment seg_k = {(uint32_t)kw, (uint32_t)dk, k};
    vka_linear_segment seg_v = {(uint32_t)vw, (uint32_t)dv, v};

    vkattn_tensor positions = a->positions;
    if (vka_mha_packed_positions_needed(m, a))
        VKA_TRY(vka_mha_record_packed_positions(m, cmd, a, sbuf, base + sp.positions, &positions));
    if (!a->kv.buffer && !a->value.buffer && vka_mha_packed(d)) {
        /* self-attention: one GEMM over the packed Wqkv writes Q, K and V
         * (normed and rotated in its epilogue) */
        vka_linear_heads heads;
        bool has_heads = vka_mha_heads(m, VKA_POSITIONS_ROW, &positions, &heads);
        vka_linear_segments_args p = {a->x, w_all, b_all, 3, {seg_q, seg_k, seg_v}};
        p.heads = has_heads ? &heads : NULL;
        r = vka_cmd_linear_segments(ctx, cmd, &p);
    } else {
        vkattn_tensor wq = w_all, bq = b_all;
        wq.shape[0] = (int64_t)qw;
        bq.shape[0] = (int64_t)qw;
        vka_linear_segments_args pq = {a->x, wq, bq, 1, {seg_q}};
        r = vka_cmd_linear_segments(ctx, cmd, &pq);
        if (r == VKATTN_SUCCESS)
            r = record_kv_projection(m, cmd, a->kv.buffer ? &a->kv : &a->x, &a->value, seg_k,
                                     seg_v);
    }
    if (r != VKATTN_SUCCESS)
        return r;
    vka_cmd_compute_barrier(ctx, cmd);

    vkattn_attention_args at = {
        .q = q,
        .k = k,
        .v = v,
        .out = o_heads,
        .mask = a->mask,
        .key_padding = a->key_padding,
        .weights = a->weights,
        .causal = a->causal,
        .bool_mask = a->bool_mask,
        .scale = d->scale,
        .causal_align = a->causal_align,
        .window = d->window,
        .softcap = d->softcap,
        .head_mask = a->head_mask,
        .sequences = a->sequences,
        .q_offsets = a->q_offsets,
        .k_offsets = a->k_offsets,
        .dropout_p = a->dropout_p,
        .dropout_seed = a->dropout_seed,
    };
    vka_mha_mods(m, &at.sinks, &at.alibi_slopes);
    if (lse || a->dropout_p > 0.0f) { /* the backward's, and the dropout pass's */
        int64_t lse_shape[3] = {b, hq, tq};
        at.lse = vkattn_tensor_make(sbuf, base + sp.lse, VKATTN_DTYPE_F32, 3, lse_shape);
    }
    if (vka_mha_appends(d)) { /* the weights come after the rows' pass */
        at.weights = (vkattn_tensor){0};
        vka_mha_main_pass_mods(m, &q, sbuf, base, &sp.rows, &at.sinks, &at.lse);
    }
    r = vkattn_cmd_attention(ctx, cmd, &at);
    if (r != VKATTN_SUCCESS)
        return r;
    vka_cmd_compute_barrier(ctx, cmd);
    if (vka_mha_appends(d)) {
        VKA_TRY(vka_mha_record_bias_row(m, cmd, &q, &o_heads, &a->head_mask, sbuf, base, &sp.rows));
        vka_cmd_compute_barrier(ctx, cmd);
        if (a->weights.buffer) {
            at.weights = a->weights;
            VKA_TRY(vka_mha_record_appended_weights(m, cmd, &at, sbuf, base, &sp.rows));
            vka_cmd_compute_barrier(ctx, cmd);
        }
    }

    *at_out = at;
    return VKATTN_SUCCESS;
}

vkattn_result vka_mha_record_output(vkattn_mha *m, VkCommandBuffer cmd, const vkattn_tensor *o,
                                    const vkattn_tensor *y_in)
{
    const vkattn_mha_desc *d = &m->d;
    int64_t b = o->shape[0], tq = o->shape[1], qw = o->shape[2];
    vkattn_tensor wo = {.buffer = m->src.o,
                        .offset = m->src.off_o,
                        .dtype = d->weight_dtype,
                        .rank = 2,
                        .shape = {d->embed_dim, qw}};
    vkattn_tensor bo = {.buffer = d->bias ? m->src.bo : NULL,
                        .offset = m->src.off_bo,
                        .dtype = vka_mha_bias_dtype(d),
                        .rank = 1,
                        .shape = {d->embed_dim}};
    vkattn_tensor y = *y_in;
    if (y.strides[0] == 0 && y.strides[1] == 0 && y.strides[2] == 0)
        y = vkattn_tensor_make(y.buffer, y.offset, y.dtype, 3, y.shape);
    /* y [B, Tq, Dm] as the one segment's [B, 1, Tq, Dm] */
    vkattn_tensor y4 = {.buffer = y.buffer,
                        .offset = y.offset,
                        .dtype = y.dtype,
                        .rank = 4,
                        .shape = {b, 1, tq, d->embed_dim},
                        .strides = {y.strides[0], y.strides[0], y.strides[1], y.strides[2]}};
    vka_linear_segments_args po = {*o, wo, bo, 1, {{d->embed_dim, d->embed_dim, y4}}};
    return vka_cmd_linear_segments(m->ctx, cmd, &po);
}

static vkattn_result record_forward(vkattn_mha *m, VkCommandBuffer cmd, const void *args)
{
    return vkattn_cmd_mha_forward(m, cmd, args);
}

static vkattn_result grow_forward(vkattn_mha *m, const void *args)
{
    const vkattn_mha_forward_args *a = args;
    uint32_t b, tq, tk;
    if (a->scratch)
        return VKATTN_SUCCESS;
    VKA_TRY(check_io(m, a, true, &b, &tq, &tk));
    return vkattn_mha_reserve(m, b, tq, tk);
}

vkattn_result vkattn_mha_forward(vkattn_mha *m, const vkattn_mha_forward_args *a)
{
    return vka_mha_submit(m, "vkattn_mha_forward", a, grow_forward, record_forward);
}
