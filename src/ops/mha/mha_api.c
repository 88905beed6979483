/* The MHA layer object: its desc, its weights on the device (one buffer in
 * the layer's dtype) and its own scratch, which the forward pass
 * (mha_forward.c) and the steps over a KV cache (mha_step.c) share. */
#include "ops/mha/mha_internal.h"
#include "spec/quant.h"
#include "spec/mha_desc.h"
#include "spec/rope.h"
#include "spec/score_mods.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The epilogue's parameters of a layer with QK-norm or RoPE: norm weights
 * (ones until set) and the angle table, f32. */
static vkattn_result create_heads_params(vkattn_mha *m)
{
    const vkattn_mha_desc *d = &m->d;
    bool rope = d->rope.theta != 0.0f;
    if (!rope && !d->qk_norm)
        return VKATTN_SUCCESS;
    uint64_t floats = 2ull * d->head_dim + (rope ? vka_rope_table_floats(&d->rope) : 0);
    float *host = vka_alloc(m->ctx, floats * 4);
    if (!host)
        return vka_fail(m->ctx, VKATTN_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
    for (uint32_t i = 0; i < 2 * d->head_dim; i++)
        host[i] = 1.0f;
    if (rope)
        vka_rope_table_fill(&d->rope, host + 2 * d->head_dim);
    vkattn_buffer_desc bd = {.size = floats * 4};
    vkattn_result r = vkattn_buffer_create(m->ctx, &bd, &m->heads_params);
    if (r == VKATTN_SUCCESS)
        r = vkattn_buffer_upload(m->heads_params, 0, host, floats * 4);
    vka_free(m->ctx, host);
    return r;
}

/* Sinks (zeros until set) and ALiBi slopes (the standard ones of
 * desc.alibi_max_bias until weights give others), f32. */
static vkattn_result create_mods_params(vkattn_mha *m)
{
    const vkattn_mha_desc *d = &m->d;
    if (!d->sinks && !d->alibi)
        return VKATTN_SUCCESS;
    m->off_slopes = vka_align_up(4ull * d->num_heads, VKA_MHA_PLACEMENT);
    uint64_t bytes = m->off_slopes + 4ull * d->num_heads;
    float *host = vka_alloc(m->ctx, bytes);
    if (!host)
        return vka_fail(m->ctx, VKATTN_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
    memset(host, 0, bytes);
    float *slopes = host + m->off_slopes / 4;
    for (uint32_t h = 0; d->alibi && h < d->num_heads; h++)
        slopes[h] = (float)vka_alibi_slope(d->num_heads, d->alibi_max_bias, h);
    vkattn_buffer_desc bd = {.size = bytes};
    vkattn_result r = vkattn_buffer_create(m->ctx, &bd, &m->mods_params);
    if (r == VKATTN_SUCCESS)
        r = vkattn_buffer_upload(m->mods_params, 0, host, bytes);
    vka_free(m->ctx, host);
    return r;
}

/* The appended rows' storage (see vkattn_mha): zero sinks, and the bias
 * rows (zeros until weights are set). */
static vkattn_result create_extras(vkattn_mha *m)
{
    const vkattn_mha_desc *d = &m->d;
    if (!vka_mha_appends(d))
        return VKATTN_SUCCESS;
    uint64_t cursor = 0;
    vka_mha_place(&cursor, 4ull * d->num_heads);
    m->off_bias_k = vka_mha_place(&cursor, (uint64_t)vka_mha_k_width(d) * m->esize);
    m->off_bias_v = vka_mha_place(&cursor, (uint64_t)vka_mha_v_width(d) * m->esize);
    uint32_t widest = d->head_dim > d->v_head_dim ? d->head_dim : d->v_head_dim;
    m->off_zero_row = vka_mha_place(&cursor, (uint64_t)widest * m->esize);
    void *host = vka_alloc(m->ctx, cursor);
    if (!host)
        return vka_fail(m->ctx, VKATTN_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
    memset(host, 0, cursor);
    vkattn_buffer_desc bd = {.size = cursor};
    vkattn_result r = vkattn_buffer_create(m->ctx, &bd, &m->extras);
    if (r == VKATTN_SUCCESS)
        r = vkattn_buffer_upload(m->extras, 0, host, cursor);
    vka_free(m->ctx, host);
    return r;
}

vkattn_result vka_mha_check_appended(vkattn_mha *m, const float *bias_k, const float *bias_v,
                                     const char *prefix)
{
    const float *rows[2] = {bias_k, bias_v};
    const char *names[2] = {"bias_k", "bias_v"};
    const uint32_t widths[2] = {vka_mha_k_width(&m->d), vka_mha_v_width(&m->d)};
    for (int t = 0; t < 2; t++)
        for (uint32_t i = 0; rows[t] && i < widths[t]; i++)
            if (!isfinite(rows[t][i]))
                return vka_fail(m->ctx, VKATTN_ERROR_INVALID_ARGUMENT,
                                "%s%s[%u] is %g: it must be finite", prefix, names[t], i,
                                (double)rows[t][i]);
    return VKATTN_SUCCESS;
}

vkattn_result vka_mha_upload_appended(vkattn_mha *m, const float *bias_k, const float *bias_v)
{
    const vkattn_mha_desc *d = &m->d;
    if (!d->add_bias_kv)
        return VKATTN_SUCCESS;
    const float *rows[2] = {bias_k, bias_v};
    const uint64_t widths[2] = {vka_mha_k_width(d), vka_mha_v_width(d)};
    const uint64_t at[2] = {m->off_bias_k, m->off_bias_v};
    void *host = vka_alloc(m->ctx, 4 * (widths[0] > widths[1] ? widths[0] : widths[1]));
    if (!host)
        return vka_fail(m->ctx, VKATTN_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
    vkattn_result r = VKATTN_SUCCESS;
    for (int t = 0; t < 2 && r == VKATTN_SUCCESS; t++) {
        for (uint64_t i = 0; i < widths[t]; i++) {
            float x = rows[t][i];
            if (d->dtype == VKATTN_DTYPE_F16)
                ((uint16_t *)host)[i] = vkattn_f32_to_f16(x);
            else if (d->dtype == VKATTN_DTYPE_BF16)
                ((uint16_t *)host)[i] = vkattn_f32_to_bf16(x);
            else
                ((float *)host)[i] = x;
        }
        r = vkattn_buffer_upload(m->extras, at[t], host, widths[t] * m->esize);
    }
    vka_free(m->ctx, host);
    return r;
}

void vka_mha_mods(const vkattn_mha *m, vkattn_tensor *sinks, vkattn_tensor *slopes)
{
    const vkattn_mha_desc *d = &m->d;
    int64_t heads[1] = {d->num_heads};
    memset(sinks, 0, sizeof *sinks);
    memset(slopes, 0, sizeof *slopes);
    if (d->sinks)
        *sinks = vkattn_tensor_make(m->mods_params, 0, VKATTN_DTYPE_F32, 1, heads);
    if (d->alibi)
        *slopes = vkattn_tensor_make(m->mods_params, m->off_slopes, VKATTN_DTYPE_F32, 1, heads);
}

bool vka_mha_heads(const vkattn_mha *m, vka_linear_positions source, const vkattn_tensor *positions,
                   vka_linear_heads *out)
{
    const vkattn_mha_desc *d = &m->d;
    memset(out, 0, sizeof *out);
    if (!m->heads_params)
        return false;
    bool rope = d->rope.theta != 0.0f;
    out->segments = 3u; /* Q and K */
    out->norm = d->qk_norm;
    out->eps = d->norm_eps;
    out->rope_dims = rope ? d->rope.dims : 0;
    out->rope_gptj = d->rope.style == VKATTN_ROPE_GPTJ;
    out->position_source = source;
    if (positions && positions->buffer) {
        out->position_source = VKA_POSITIONS_TENSOR;
        out->positions = *positions;
    }
    out->params = m->heads_params;
    return true;
}

void vka_mha_layout_of(const vkattn_mha_desc *d, vka_mha_layout *l)
{
    /* widths and dims are each below 2^32, so a matrix can pass 2^64
     * bytes: the sizes saturate (the offsets are used only when they fit) */
    uint64_t qw = vka_mha_q_width(d), kvw = vka_mha_k_width(d) + (uint64_t)vka_mha_v_width(d);
    uint64_t bes = vkattn_dtype_size(vka_mha_bias_dtype(d));
    uint64_t cursor = 0;
    if (vka_mha_packed(d)) { /* one [(Hq+Hkv)*Dk + Hkv*Dv, Dm] matrix */
        l->off_wq = vka_mha_place(&cursor, 0);
        l->off_wkv = l->off_wq + vka_mha_weight_bytes(d, qw, d->embed_dim);
        vka_mha_place(&cursor, vka_mha_weight_bytes(d, qw + kvw, d->embed_dim));
    } else { /* Wk's rows, then Wv's (of another width when value_dim differs) */
        uint64_t wk = vka_mha_wk_bytes(d), wv = vka_mha_wv_bytes(d);
        l->off_wq = vka_mha_place(&cursor, vka_mha_weight_bytes(d, qw, d->embed_dim));
        l->off_wkv = vka_mha_place(&cursor, wk > UINT64_MAX - wv ? UINT64_MAX : wk + wv);
    }
    l->off_wo = vka_mha_place(&cursor, vka_mha_weight_bytes(d, d->embed_dim, vka_mha_o_width(d)));
    l->off_bq = vka_mha_place(&cursor, 0);
    l->off_bkv = l->off_bq + qw * bes;
    vka_mha_place(&cursor, (qw + kvw) * bes);
    l->off_bo = vka_mha_place(&cursor, d->embed_dim * bes);
    l->bytes = cursor;
}

vkattn_result vkattn_mha_create(vkattn_context *ctx, const vkattn_mha_desc *desc, vkattn_mha **out)
{
    if (!ctx)
        return VKATTN_ERROR_INVALID_ARGUMENT;
    if (!out || !desc)
        return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT, "vkattn_mha_create: %s is NULL",
                        !out ? "out" : "desc");
    *out = NULL;
    vkattn_mha_desc d;
    char why[VKA_ERROR_MAX];
    vkattn_result r = vka_mha_resolve(desc, &d, why, sizeof why);
    if (r != VKATTN_SUCCESS)
        return vka_fail(ctx, r, "%s", why);
    vkattn_mha *m = vka_alloc(ctx, sizeof *m);
    if (!m)
        return vka_fail(ctx, VKATTN_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
    m->ctx = ctx;
    m->d = d;
    m->esize = vkattn_dtype_size(d.dtype);

    vka_mha_layout lay;
    vka_mha_layout_of(&d, &lay);
    m->off_wq = lay.off_wq, m->off_wkv = lay.off_wkv, m->off_wo = lay.off_wo;
    m->off_bq = lay.off_bq, m->off_bkv = lay.off_bkv, m->off_bo = lay.off_bo;
    const uint64_t cursor = lay.bytes;
    if (cursor > ctx->info.max_allocation_size) {
        vka_free(ctx, m);
        char need[48] = "more than 2^64";
        if (cursor != VKA_MHA_TOO_LARGE)
            snprintf(need, sizeof need, "%llu", (unsigned long long)cursor);
        return vka_fail(ctx, VKATTN_ERROR_OUT_OF_RANGE,
                        "desc: the weights of desc->embed_dim %u, desc->kv_dim %u, "
                        "desc->num_heads %u, desc->num_kv_heads %u, desc->head_dim %u and "
                        "desc->v_head_dim %u need %s bytes, more than one allocation of this "
                        "device holds (maxMemoryAllocationSize %llu)",
                        d.embed_dim, d.kv_dim, d.num_heads, d.num_kv_heads, d.head_dim,
                        d.v_head_dim, need, (unsigned long long)ctx->info.max_allocation_size);
    }
    m->weights_bytes = cursor;
    r = create_heads_params(m);
    if (r == VKATTN_SUCCESS)
        r = create_mods_params(m);
    if (r == VKATTN_SUCCESS)
        r = create_extras(m);
    if (r != VKATTN_SUCCESS) {
        vkattn_mha_destroy(m);
        return r;
    }
    *out = m;
    return VKATTN_SUCCESS;
}

void vkattn_mha_destroy(vkattn_mha *m)
{
    if (!m)
        return;
    vkattn_buffer_destroy(m->weights);
    vkattn_buffer_destroy(m->scratch);
    vkattn_buffer_destroy(m->heads_params);
    vkattn_buffer_destroy(m->mods_params);
    vkattn_buffer_destroy(m->extras);
    vka_free(m->ctx, m);
}

const vkattn_mha_desc *vkattn_mha_config(const vkattn_mha *m) { return m ? &m->d : NULL; }

/* Where set_weights converts: `staging` holds a matrix in the target
 * dtype, `widened` (q8_0 only) the same matrix in f32 before it is
 * quantized. */
typedef struct weight_upload {
    vkattn_mha *m;
    vkattn_dtype from;
    void *staging;
    float *widened;
} weight_upload;

/* Uploads `count` values (a matrix of rows of whole blocks for q8_0) from
 * src (NULL: zeros) at `offset`, stored as `to`: copied when the dtypes
 * agree, else each value converted once (rounded to nearest even, or
 * quantized per block as vkattn_ref_quantize does). `name` is the host
 * array in messages, src its element `first`. */
static vkattn_result upload(weight_upload *u, uint64_t offset, const void *src, vkattn_dtype to,
                            uint64_t count, const char *name, uint64_t first)
{
    vkattn_mha *m = u->m;
    uint64_t bytes = vkattn_dtype_row_bytes(to, count);
    vkattn_dtype from = u->from == VKATTN_DTYPE_Q8_0 && to != VKATTN_DTYPE_Q8_0
                            ? VKATTN_DTYPE_F32 /* biases beside q8_0 blocks */
                            : u->from;
    if (!src) {
        memset(u->staging, 0, bytes);
    } else if (from == to) {
        memcpy(u->staging, src, bytes);
    } else if (to == VKATTN_DTYPE_Q8_0) {
        float most = vka_quant_max_abs(to);
        for (uint64_t i = 0; i < count; i++) {
            float x = vka_widen(src, from, i);
            if (!(fabsf(x) <= most))
                return vka_fail(m->ctx, VKATTN_ERROR_INVALID_ARGUMENT,
                                "weights->%s[%llu] is %g: q8_0 weights quantize finite values of "
                                "magnitude at most %g",
                                name, (unsigned long long)(first + i), (double)x, (double)most);
            u->widened[i] = x;
        }
        for (uint64_t b = 0; b < count / VKA_QUANT_BLOCK; b++)
            vka_quantize_block(to, u->widened + b * VKA_QUANT_BLOCK,
                               (uint8_t *)u->staging + b * vka_quant_block_bytes(to));
    } else {
        for (uint64_t i = 0; i < count; i++) {
            float x = vka_widen(src, from, i);
            if (to == VKATTN_DTYPE_F16)
                ((uint16_t *)u->staging)[i] = vkattn_f32_to_f16(x);
            else if (to == VKATTN_DTYPE_BF16)
                ((uint16_t *)u->staging)[i] = vkattn_f32_to_bf16(x);
            else
                ((float *)u->staging)[i] = x;
        }
    }
    return vkattn_buffer_upload(m->weights, offset, u->staging, bytes);
}

vkattn_result vkattn_mha_set_weights(vkattn_mha *m, const vkattn_mha_weights *w)
{
    if (!m)
        return VKATTN_ERROR_INVALID_ARGUMENT;
    vkattn_context *ctx = m->ctx;
    if (!w)
        return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT, "vkattn_mha_set_weights: w is NULL");
    vka_mha_weight_views v;
    char why[VKA_ERROR_MAX];
    vkattn_result r = vka_mha_weights_check(&m->d, w, &v, why, sizeof why);
    if (r != VKATTN_SUCCESS)
        return vka_fail(ctx, r, "%s", why);
    const vkattn_mha_desc *d = &m->d;
    VKA_TRY(vka_mha_check_params(m, v.sinks, v.alibi_slopes, "weights->"));
    VKA_TRY(vka_mha_check_appended(m, v.bias_k, v.bias_v, "weights->"));
    if (!m->weights) { /* the layer's own storage, made on first use */
        vkattn_buffer_desc bd = {.size = m->weights_bytes};
        VKA_TRY(vkattn_buffer_create(ctx, &bd, &m->weights));
    }
    m->weights_set = false;
    uint64_t qw = vka_mha_q_width(d), kw = vka_mha_k_width(d), vw = vka_mha_v_width(d),
             ow = vka_mha_o_width(d);
    uint64_t largest = qw * d->embed_dim;
    if (kw * d->kv_dim > largest)
        largest = kw * d->kv_dim;
    if (vw * d->value_dim > largest)
        largest = vw * d->value_dim;
    if ((uint64_t)d->embed_dim * ow > largest)
        largest = (uint64_t)d->embed_dim * ow;
    /* f32 is the widest form a matrix takes on the host (q8_0: before it is
     * quantized into the staging) */
    bool q8 = d->weight_dtype == VKATTN_DTYPE_Q8_0;
    weight_upload u = {m, v.dtype, vka_alloc(ctx, largest * 4), NULL};
    if (q8 && u.staging)
        u.widened = vka_alloc(ctx, largest * 4);
    if (!u.staging || (q8 && !u.widened)) {
        vka_free(ctx, u.staging);
        return vka_fail(ctx, VKATTN_ERROR_OUT_OF_HOST_MEMORY, "out of host memory (%llu bytes)",
                        (unsigned long long)(largest * 4 * (q8 ? 2 : 1)));
    }
    vkattn_dtype wdt = d->weight_dtype, bdt = vka_mha_bias_dtype(d);
    uint64_t bes = vkattn_dtype_size(bdt);
    uint64_t off_wk = m->off_wkv, off_wv = m->off_wkv + vka_mha_wk_bytes(d);
    const char *wn[3] = {v.packed ? "wqkv" : "wq", v.packed ? "wqkv" : "wk",
                         v.packed ? "wqkv" : "wv"};
    uint64_t nq = qw * d->embed_dim, nk = kw * d->kv_dim, nv = vw * d->value_dim;
    r = upload(&u, m->off_wq, v.wq, wdt, nq, wn[0], 0);
    if (r == VKATTN_SUCCESS)
        r = upload(&u, off_wk, v.wk, wdt, nk, wn[1], v.packed ? nq : 0);
    if (r == VKATTN_SUCCESS)
        r = upload(&u, off_wv, v.wv, wdt, nv, wn[2], v.packed ? nq + nk : 0);
    if (r == VKATTN_SUCCESS)
        r = upload(&u, m->off_wo, v.wo, wdt, (uint64_t)d->embed_dim * ow, "wo", 0);
    if (r == VKATTN_SUCCESS && d->bias) {
        r = upload(&u, m->off_bq, v.bq, bdt, qw, "bq", 0);
        if (r == VKATTN_SUCCESS)
            r = upload(&u, m->off_bkv, v.bk, bdt, kw, "bk", 0);
        if (r == VKATTN_SUCCESS)
            r = upload(&u, m->off_bkv + kw * bes, v.bv, bdt, vw, "bv", 0);
        if (r == VKATTN_SUCCESS)
            r = upload(&u, m->off_bo, v.bo, bdt, d->embed_dim, "bo", 0);
    }
    vka_free(ctx, u.staging);
    vka_free(ctx, u.widened);
    if (r == VKATTN_SUCCESS)
        r = vka_mha_upload_params(m, v.q_norm, v.k_norm, v.sinks, v.alibi_slopes);
    if (r == VKATTN_SUCCESS)
        r = vka_mha_upload_appended(m, v.bias_k, v.bias_v);
    if (r == VKATTN_SUCCESS)
        vka_mha_use_own_weights(m);
    m->weights_set = r == VKATTN_SUCCESS;
    return r;
}

void vka_mha_use_own_weights(vkattn_mha *m)
{
    vkattn_buffer *w = m->weights;
    m->src = (vka_mha_weight_source){
        .q = w,
        .kv = w,
        .o = w,
        .bq = w,
        .bkv = w,
        .bo = w,
        .off_q = m->off_wq,
        .off_kv = m->off_wkv,
        .off_o = m->off_wo,
        .off_bq = m->off_bq,
        .off_bkv = m->off_bkv,
        .off_bo = m->off_bo,
        .v = w,
        .off_v = m->off_wkv + vka_mha_wk_bytes(&m->d),
    };
}

/* sinks and slopes are logits and factors: a NaN or infinity would poison
 * every row of its head. */
vkattn_result vka_mha_check_params(vkattn_mha *m, const float *sinks, const float *slopes,
                                   const char *prefix)
{
    const float *per_head[2] = {sinks, slopes};
    const char *per_head_name[2] = {"sinks", "alibi_slopes"};
    for (int t = 0; t < 2; t++)
        for (uint32_t h = 0; per_head[t] && h < m->d.num_heads; h++)
            if (!isfinite(per_head[t][h]))
                return vka_fail(m->ctx, VKATTN_ERROR_INVALID_ARGUMENT,
                                "%s%s[%u] is %g: it must be finite", prefix, per_head_name[t], h,
                                (double)per_head[t][h]);
    return VKATTN_SUCCESS;
}

vkattn_result vka_mha_upload_params(vkattn_mha *m, const float *q_norm, const float *k_norm,
                                    const float *sinks, const float *alibi_slopes)
{
    const vkattn_mha_desc *d = &m->d;
    vkattn_result r = VKATTN_SUCCESS;
    if (d->qk_norm) { /* f32 whatever the layer's dtype */
        r = vkattn_buffer_upload(m->heads_params, 0, q_norm, d->head_dim * 4ull);
        if (r == VKATTN_SUCCESS)
            r = vkattn_buffer_upload(m->heads_params, d->head_dim * 4ull, k_norm,
                                     d->head_dim * 4ull);
    }
    if (r == VKATTN_SUCCESS && sinks)
        r = vkattn_buffer_upload(m->mods_params, 0, sinks, 4ull * d->num_heads);
    if (r == VKATTN_SUCCESS && d->alibi) { /* given slopes, or back to the standard ones */
        float *slopes = vka_alloc(m->ctx, 4ull * d->num_heads);
        if (!slopes)
            r = vka_fail(m->ctx, VKATTN_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
        for (uint32_t h = 0; slopes && h < d->num_heads; h++)
            slopes[h] = alibi_slopes ? alibi_slopes[h]
                                     : (float)vka_alibi_slope(d->num_heads, d->alibi_max_bias, h);
        if (slopes)
            r = vkattn_buffer_upload(m->mods_params, m->off_slopes, slopes, 4ull * d->num_heads);
        vka_free(m->ctx, slopes);
    }
    return r;
}

/* ---------------------------------------------------------------- scratch */

vkattn_result vka_mha_scratch_grow(vkattn_mha *m, uint64_t need)
{
    if (m->scratch && vkattn_buffer_size(m->scratch) >= need)
        return VKATTN_SUCCESS;
    if (need > m->ctx->info.max_allocation_size)
        return vka_fail(m->ctx, VKATTN_ERROR_OUT_OF_RANGE,
                        "the layer's scratch for these sizes would be %llu bytes, more than one "
                        "allocation of this device holds (maxMemoryAllocationSize %llu): pass "
                        "args->scratch or use smaller batches",
                        (unsigned long long)need,
                        (unsigned long long)m->ctx->info.max_allocation_size);
    vkattn_buffer *bigger = NULL;
    vkattn_buffer_desc bd = {.size = need};
    vkattn_result r = vkattn_buffer_create(m->ctx, &bd, &bigger);
    if (r != VKATTN_SUCCESS)
        return r;
    vkattn_buffer_destroy(m->scratch);
    m->scratch = bigger;
    return VKATTN_SUCCESS;
}

vkattn_result vka_mha_scratch_pick(vkattn_mha *m, vkattn_buffer *caller, uint64_t offset,
                                   uint64_t bytes, vkattn_buffer **buf, uint64_t *base)
{
    vkattn_context *ctx = m->ctx;
    vkattn_buffer *sbuf = caller ? caller : m->scratch;
    uint64_t at = caller ? offset : 0;
    if (caller && caller->ctx != ctx)
        return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT,
                        "args->scratch belongs to another context");
    if (caller && at % VKA_MHA_PLACEMENT)
        return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT,
                        "args->scratch_offset %llu is not a multiple of %u", (unsigned long long)at,
                        VKA_MHA_PLACEMENT);
    if (bytes == VKA_MHA_TOO_LARGE)
        return vka_fail(ctx, VKATTN_ERROR_OUT_OF_RANGE,
                        "this call's sizes need more than 2^64 bytes of scratch");
    uint64_t have = sbuf && at <= vkattn_buffer_size(sbuf) ? vkattn_buffer_size(sbuf) - at : 0;
    if (have < bytes)
        return vka_fail(ctx, VKATTN_ERROR_OUT_OF_RANGE,
                        "%s has %llu bytes from its offset; this call needs %llu (the scratch-size "
                        "query says how much; vkattn_mha_reserve grows the layer's own)",
                        caller ? "args->scratch" : "the layer's scratch", (unsigned long long)have,
                        (unsigned long long)bytes);
    *buf = sbuf;
    *base = at;
    return VKATTN_SUCCESS;
}

/* ---------------------------------------------------------------- submit */

typedef struct layer_call {
    vkattn_mha *m;
    vka_mha_record_fn record;
    const void *args;
} layer_call;

static vkattn_result record_call(vkattn_context *ctx, VkCommandBuffer cmd, const void *job)
{
    (void)ctx;
    const layer_call *call = job;
    return call->record(call->m, cmd, call->args);
}

vkattn_result vka_mha_check_record(vkattn_mha *m, const char *fn, VkCommandBuffer cmd,
                                   const void *args)
{
    if (!m)
        return VKATTN_ERROR_INVALID_ARGUMENT;
    VKA_TRY(vka_check_entry(m->ctx, fn, true, cmd, args));
    if (!m->weights_set)
        return vka_fail(m->ctx, VKATTN_ERROR_INVALID_ARGUMENT,
                        "the layer has no weights yet (call vkattn_mha_set_weights)");
    return VKATTN_SUCCESS;
}

vkattn_result vka_mha_submit(vkattn_mha *m, const char *fn, const void *args, vka_mha_grow_fn grow,
                             vka_mha_record_fn record)
{
    if (!m)
        return VKATTN_ERROR_INVALID_ARGUMENT;
    VKA_TRY(vka_check_entry(m->ctx, fn, false, VK_NULL_HANDLE, args));
    VKA_TRY(grow(m, args)); /* recording never grows scratch: do it before */
    layer_call call = {m, record, args};
    return vka_submit_and_wait(m->ctx, record_call, &call);
}
