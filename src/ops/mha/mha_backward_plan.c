/* The MHA layer's backward: its scratch (after the forward's) and every
 * check of a call, before anything is recorded (see "MHA layer backward"
 * in vkattn/ops.h; recording: mha_backward.c). */
#include "ops/mha/mha_backward.h"
#include "core/tensor.h"

#include <string.h>

/* Bytes of f32 [a, b, c] (saturating). */
static uint64_t f32_bytes(uint64_t a, uint64_t b, uint64_t c)
{
    const uint64_t f[4] = {a, b, c, 4};
    uint64_t n;
    return vka_product_u64(f, 4, &n) ? n : VKA_MHA_TOO_LARGE;
}

vka_mha_bwd_plan vka_mha_bwd_plan_scratch(const vkattn_mha *m, uint64_t b, uint64_t tq, uint64_t tk)
{
    const vkattn_mha_desc *d = &m->d;
    vka_mha_bwd_plan p;
    memset(&p, 0, sizeof p);
    p.fwd = vka_mha_plan_scratch(m, b, tq, tk);
    uint64_t cursor = p.fwd.bytes;
    const uint64_t hq = d->num_heads, hkv = d->num_kv_heads, dk = d->head_dim, dv = d->v_head_dim;
    const uint64_t qw = vka_mha_q_width(d), kw = vka_mha_k_width(d), vw = vka_mha_v_width(d);
    p.d_o = vka_mha_place(&cursor, vka_mha_bytes(m, b, tq, hq, dv));
    p.dq = vka_mha_place(&cursor, f32_bytes(b * hq, tq, dk));
    p.dk = vka_mha_place(&cursor, f32_bytes(b * hkv, tk, dk));
    p.dv = vka_mha_place(&cursor, f32_bytes(b * hkv, tk, dv));
    p.dq_lin = vka_mha_place(&cursor, f32_bytes(b, tq, qw));
    p.dk_lin = vka_mha_place(&cursor, f32_bytes(b, tk, kw));
    p.dv_lin = vka_mha_place(&cursor, f32_bytes(b, tk, vw));
    if (d->qk_norm) {
        p.q_lin = vka_mha_place(&cursor, f32_bytes(b, tq, qw));
        p.k_lin = vka_mha_place(&cursor, f32_bytes(b, tk, kw));
        p.q_part = vka_mha_place(&cursor, f32_bytes(b, tq, qw));
        p.k_part = vka_mha_place(&cursor, f32_bytes(b, tk, kw));
    }
    p.dsinks = vka_mha_place(&cursor, f32_bytes(1, 1, hq));
    p.bytes = p.fwd.bytes == VKA_MHA_TOO_LARGE ? VKA_MHA_TOO_LARGE : cursor;
    return p;
}

vkattn_result vkattn_mha_backward_scratch_size(vkattn_mha *m, uint32_t batch, uint32_t q_len,
                                               uint32_t kv_len, uint64_t *bytes)
{
    if (!m)
        return VKATTN_ERROR_INVALID_ARGUMENT;
    if (!bytes || !batch || !q_len || !kv_len)
        return vka_fail(m->ctx, VKATTN_ERROR_INVALID_ARGUMENT,
                        "vkattn_mha_backward_scratch_size: %s",
                        !bytes ? "bytes is NULL" : "batch, q_len and kv_len must be >= 1");
    uint64_t need = vka_mha_bwd_plan_scratch(m, batch, q_len, kv_len).bytes;
    if (need == VKA_MHA_TOO_LARGE)
        return vka_fail(m->ctx, VKATTN_ERROR_OUT_OF_RANGE,
                        "vkattn_mha_backward_scratch_size: batch %u x q_len %u (kv_len %u) needs "
                        "more than 2^64 bytes of scratch",
                        batch, q_len, kv_len);
    *bytes = need;
    return VKATTN_SUCCESS;
}

vkattn_result vkattn_mha_reserve_backward(vkattn_mha *m, uint32_t batch, uint32_t q_len,
                                          uint32_t kv_len)
{
    uint64_t need = 0;
    vkattn_result r = vkattn_mha_backward_scratch_size(m, batch, q_len, kv_len, &need);
    return r != VKATTN_SUCCESS ? r : vka_mha_scratch_grow(m, need);
}

/* ----------------------------------------------------------------- checks */

/* `t` (rank 3 [B, T, C], checked by the forward's checks or here) as rows. */
static vkattn_result rows_of(vkattn_context *ctx, const vkattn_tensor *in, const char *name,
                             vka_mha_rows *out)
{
    vkattn_tensor t;
    VKA_TRY(vka_tensor_resolve(ctx, in, name, &t));
    if (t.strides[2] != 1 && t.shape[2] > 1)
        return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT,
                        "%s.strides[2] is %lld: the last dimension must be contiguous", name,
                        (long long)t.strides[2]);
    if (t.shape[0] > 1 && t.strides[0] != t.shape[1] * t.strides[1])
        return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT,
                        "%s.strides[0] is %lld: the backward reads [B, T, C] as B*T rows, so it "
                        "must be shape[1] * strides[1] = %lld",
                        name, (long long)t.strides[0], (long long)(t.shape[1] * t.strides[1]));
    out->buffer = t.buffer;
    out->offset = t.offset;
    out->dtype = t.dtype;
    out->row_stride = (uint64_t)t.strides[1];
    return VKATTN_SUCCESS;
}

/* An optional f32 output of `like`'s shape [B, T, C]. */
static vkattn_result output_rows(vkattn_context *ctx, const vkattn_tensor *t, const char *name,
                                 const vkattn_tensor *like, const char *like_name,
                                 vka_mha_rows *out)
{
    memset(out, 0, sizeof *out);
    if (!t->buffer)
        return VKATTN_SUCCESS;
    if (!like->buffer)
        return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT, "%s is given without %s", name,
                        like_name);
    if (t->rank != 3)
        return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT, "%s.rank is %u: it must be 3, as %s's",
                        name, t->rank, like_name);
    VKA_TRY(vka_tensor_check_shape_as(ctx, t, name, like, like_name));
    if (t->dtype != VKATTN_DTYPE_F32) {
        char b[VKA_DTYPE_TEXT];
        return vka_fail(ctx, VKATTN_ERROR_UNSUPPORTED_DTYPE,
                        "%s.dtype is %s: the layer's gradients are f32", name,
                        vka_dtype_text(t->dtype, b));
    }
    vkattn_tensor r;
    VKA_TRY(vka_tensor_resolve(ctx, t, name, &r));
    VKA_TRY(vka_tensor_check_output(ctx, &r, name));
    return rows_of(ctx, t, name, out);
}

/* A weight gradient: absent, or f32 contiguous [rows, cols] (cols 0: [rows]),
 * allowed only when the layer has it (`has`, else `why` says what it lacks). */
static vkattn_result check_grad(vkattn_context *ctx, const vkattn_tensor *t, const char *name,
                                bool has, const char *why, uint64_t rows, uint64_t cols,
                                const char *meaning, vkattn_tensor *out)
{
    memset(out, 0, sizeof *out);
    if (!t->buffer)
        return VKATTN_SUCCESS;
    if (!has)
        return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT, "%s is given but the layer has %s",
                        name, why);
    const uint32_t rank = cols ? 2 : 1;
    const int64_t want[2] = {(int64_t)rows, (int64_t)cols};
    if (t->rank != rank)
        return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT, "%s.rank is %u: it must be %u (%s)",
                        name, t->rank, rank, meaning);
    for (uint32_t d = 0; d < rank; d++)
        if (t->shape[d] != want[d])
            return vka_fail(ctx, VKATTN_ERROR_SHAPE_MISMATCH,
                            "%s.shape[%u] is %lld but the layer's is %lld (%s)", name, d,
                            (long long)t->shape[d], (long long)want[d], meaning);
    if (t->dtype != VKATTN_DTYPE_F32) {
        char b[VKA_DTYPE_TEXT];
        return vka_fail(ctx, VKATTN_ERROR_UNSUPPORTED_DTYPE,
                        "%s.dtype is %s: the layer's gradients are f32", name,
                        vka_dtype_text(t->dtype, b));
    }
    VKA_TRY(vka_tensor_resolve(ctx, t, name, out));
    if (!vka_tensor_is_contiguous(out))
        return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT,
                        "%s is strided: the weights' gradients are written contiguous (leave "
                        "the strides 0)",
                        name);
    return vka_tensor_check_output(ctx, out, name);
}

static vkattn_result check_grads(vkattn_mha *m, const vkattn_mha_grads *g, vkattn_mha_grads *out)
{
    vkattn_context *ctx = m->ctx;
    const vkattn_mha_desc *d = &m->d;
    const uint64_t qw = vka_mha_q_width(d), kw = vka_mha_k_width(d), vw = vka_mha_v_width(d);
    const uint64_t ow = vka_mha_o_width(d);
    const bool b = d->bias;
    const char *nb = "no biases (desc.bias)";
    VKA_TRY(check_grad(ctx, &g->wq, "args->grads.wq", true, "", qw, d->embed_dim, "Wq [Hq*Dk, Dm]",
                       &out->wq));
    VKA_TRY(check_grad(ctx, &g->wk, "args->grads.wk", true, "", kw, d->kv_dim, "Wk [Hkv*Dk, Dkv]",
                       &out->wk));
    VKA_TRY(check_grad(ctx, &g->wv, "args->grads.wv", true, "", vw, d->value_dim,
                       "Wv [Hkv*Dv, Dvin]", &out->wv));
    VKA_TRY(check_grad(ctx, &g->wo, "args->grads.wo", true, "", d->embed_dim, ow, "Wo [Dm, Hq*Dv]",
                       &out->wo));
    VKA_TRY(check_grad(ctx, &g->bq, "args->grads.bq", b, nb, qw, 0, "bq [Hq*Dk]", &out->bq));
    VKA_TRY(check_grad(ctx, &g->bk, "args->grads.bk", b, nb, kw, 0, "bk [Hkv*Dk]", &out->bk));
    VKA_TRY(check_grad(ctx, &g->bv, "args->grads.bv", b, nb, vw, 0, "bv [Hkv*Dv]", &out->bv));
    VKA_TRY(check_grad(ctx, &g->bo, "args->grads.bo", b, nb, d->embed_dim, 0, "bo [Dm]", &out->bo));
    const char *nn = "no QK-norm (desc.qk_norm)";
    VKA_TRY(check_grad(ctx, &g->q_norm, "args->grads.q_norm", d->qk_norm, nn, d->head_dim, 0,
                       "[Dh]", &out->q_norm));
    VKA_TRY(check_grad(ctx, &g->k_norm, "args->grads.k_norm", d->qk_norm, nn, d->head_dim, 0,
                       "[Dh]", &out->k_norm));
    VKA_TRY(check_grad(ctx, &g->sinks, "args->grads.sinks", d->sinks, "no sinks (desc.sinks)",
                       d->num_heads, 0, "[Hq]", &out->sinks));
    /* no two gradients share a byte */
    const vkattn_tensor *all[11] = {&out->wq,     &out->wk,     &out->wv,   &out->wo,
                                    &out->bq,     &out->bk,     &out->bv,   &out->bo,
                                    &out->q_norm, &out->k_norm, &out->sinks};
    static const char *const names[11] = {
        "args->grads.wq",     "args->grads.wk",     "args->grads.wv",   "args->grads.wo",
        "args->grads.bq",     "args->grads.bk",     "args->grads.bv",   "args->grads.bo",
        "args->grads.q_norm", "args->grads.k_norm", "args->grads.sinks"};
    for (int i = 0; i < 11; i++)
        for (int j = i + 1; j < 11; j++)
            if (all[i]->buffer && all[j]->buffer)
                VKA_TRY(vka_tensor_check_disjoint(ctx, all[i], names[i], all[j], names[j]));
    return VKATTN_SUCCESS;
}

vkattn_result vka_mha_bwd_check(vkattn_mha *m, const vkattn_mha_backward_args *a,
                                vka_mha_bwd_call *c)
{
    vkattn_context *ctx = m->ctx;
    const vkattn_mha_desc *d = &m->d;
    memset(c, 0, sizeof *c);
    const vkattn_mha_forward_args *f = &a->forward;
    if (d->weight_dtype == VKATTN_DTYPE_Q8_0)
        return vka_fail(ctx, VKATTN_ERROR_UNSUPPORTED,
                        "the layer's weight_dtype is q8_0: quantized weights have no backward "
                        "(train f32, f16 or bf16 weights)");
    if (vka_mha_appends(d))
        return vka_fail(ctx, VKATTN_ERROR_UNSUPPORTED,
                        "the layer has add_bias_kv or add_zero_attn: the backward does not take "
                        "them yet");
    if (f->sequences)
        return vka_fail(ctx, VKATTN_ERROR_UNSUPPORTED,
                        "args->forward.sequences is %u: packed sequences have no backward yet",
                        f->sequences);
    if (f->head_mask.buffer)
        return vka_fail(ctx, VKATTN_ERROR_UNSUPPORTED,
                        "args->forward.head_mask is given: the layer's backward has no head mask "
                        "yet");
    if (f->weights.buffer)
        return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT,
                        "args->forward.weights is given: the backward takes none (leave its "
                        "buffer NULL)");
    VKA_TRY(vka_mha_check_forward(m, f, false, &c->b, &c->tq, &c->tk));
    if (!a->dy.buffer)
        return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT,
                        "args->dy.buffer is NULL: it is required");
    const int64_t want[3] = {c->b, c->tq, d->embed_dim};
    if (a->dy.rank != 3)
        return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT,
                        "args->dy.rank is %u: it must be 3 [B, Tq, Dm], as y's", a->dy.rank);
    for (uint32_t i = 0; i < 3; i++)
        if (a->dy.shape[i] != want[i])
            return vka_fail(ctx, VKATTN_ERROR_SHAPE_MISMATCH,
                            "args->dy.shape[%u] is %lld: it must be %lld ([B, Tq, Dm], y's shape)",
                            i, (long long)a->dy.shape[i], (long long)want[i]);
    if (a->dy.dtype != d->dtype) {
        char b1[VKA_DTYPE_TEXT], b2[VKA_DTYPE_TEXT];
        return vka_fail(ctx, VKATTN_ERROR_UNSUPPORTED_DTYPE,
                        "args->dy.dtype is %s but the layer's dtype is %s",
                        vka_dtype_text(a->dy.dtype, b1), vka_dtype_text(d->dtype, b2));
    }
    VKA_TRY(rows_of(ctx, &a->dy, "args->dy", &c->dy));
    VKA_TRY(rows_of(ctx, &f->x, "args->forward.x", &c->x));
    if (f->kv.buffer)
        VKA_TRY(rows_of(ctx, &f->kv, "args->forward.kv", &c->keys));
    else
        c->keys = c->x;
    if (f->value.buffer)
        VKA_TRY(rows_of(ctx, &f->value, "args->forward.value", &c->values));
    else
        c->values = c->keys;
    VKA_TRY(output_rows(ctx, &a->dx, "args->dx", &f->x, "args->forward.x", &c->dx));
    VKA_TRY(output_rows(ctx, &a->dkv, "args->dkv", &f->kv, "args->forward.kv", &c->dkv));
    VKA_TRY(
        output_rows(ctx, &a->dvalue, "args->dvalue", &f->value, "args->forward.value", &c->dvalue));
    VKA_TRY(check_grads(m, &a->grads, &c->grads));
    /* the outputs share no byte with each other or with the inputs */
    const vkattn_tensor *outs[3] = {&a->dx, &a->dkv, &a->dvalue};
    static const char *const out_names[3] = {"args->dx", "args->dkv", "args->dvalue"};
    const vkattn_tensor *ins[4] = {&f->x, &f->kv, &f->value, &a->dy};
    static const char *const in_names[4] = {"args->forward.x", "args->forward.kv",
                                            "args->forward.value", "args->dy"};
    const vkattn_mha_grads *g = &c->grads;
    const vkattn_tensor *gr[11] = {&g->wq, &g->wk, &g->wv,     &g->wo,     &g->bq,   &g->bk,
                                   &g->bv, &g->bo, &g->q_norm, &g->k_norm, &g->sinks};
    static const char *const grad_names[11] = {
        "args->grads.wq",     "args->grads.wk",     "args->grads.wv",   "args->grads.wo",
        "args->grads.bq",     "args->grads.bk",     "args->grads.bv",   "args->grads.bo",
        "args->grads.q_norm", "args->grads.k_norm", "args->grads.sinks"};
    for (int o = 0; o < 3; o++) {
        if (!outs[o]->buffer)
            continue;
        vkattn_tensor ro, ri;
        VKA_TRY(vka_tensor_resolve(ctx, outs[o], out_names[o], &ro));
        for (int i = 0; i < 4; i++)
            if (ins[i]->buffer) {
                VKA_TRY(vka_tensor_resolve(ctx, ins[i], in_names[i], &ri));
                VKA_TRY(vka_tensor_check_disjoint(ctx, &ro, out_names[o], &ri, in_names[i]));
            }
        for (int o2 = o + 1; o2 < 3; o2++)
            if (outs[o2]->buffer) {
                VKA_TRY(vka_tensor_resolve(ctx, outs[o2], out_names[o2], &ri));
                VKA_TRY(vka_tensor_check_disjoint(ctx, &ro, out_names[o], &ri, out_names[o2]));
            }
        for (int i = 0; i < 11; i++)
            if (gr[i]->buffer)
                VKA_TRY(vka_tensor_check_disjoint(ctx, &ro, out_names[o], gr[i], grad_names[i]));
    }
    /* nor do the weights' gradients with the inputs */
    for (int i = 0; i < 4; i++) {
        if (!ins[i]->buffer)
            continue;
        vkattn_tensor ri;
        VKA_TRY(vka_tensor_resolve(ctx, ins[i], in_names[i], &ri));
        for (int k = 0; k < 11; k++)
            if (gr[k]->buffer)
                VKA_TRY(vka_tensor_check_disjoint(ctx, gr[k], grad_names[k], &ri, in_names[i]));
    }
    return VKATTN_SUCCESS;
}
