/* MHA desc defaults and checks, shared by the CPU reference and the GPU layer. */
#include "spec/mha_desc.h"

#include "spec/attention_shapes.h"
#include "spec/dtype.h"
#include "spec/error_text.h"
#include "spec/rope.h"

#include <math.h>

/* weight_dtype: 0 (f32) means dtype's; f16, bf16 or q8_0 otherwise, q8_0
 * with every in_features a multiple of 64 (whole pairs of blocks). */
static vkattn_result resolve_weight_dtype(vkattn_mha_desc *d, char *error, size_t error_size)
{
    if (d->weight_dtype == VKATTN_DTYPE_F32)
        d->weight_dtype = d->dtype;
    vkattn_dtype w = d->weight_dtype;
    if (w != d->dtype && w != VKATTN_DTYPE_F16 && w != VKATTN_DTYPE_BF16 &&
        w != VKATTN_DTYPE_Q8_0) {
        char b[VKA_DTYPE_TEXT];
        vka_error_format(error, error_size,
                         "desc->weight_dtype %s is not supported: 0 (the dtype's), f16, bf16 or "
                         "q8_0",
                         vka_dtype_text(w, b));
        return VKATTN_ERROR_UNSUPPORTED_DTYPE;
    }
    if (w != VKATTN_DTYPE_Q8_0)
        return VKATTN_SUCCESS;
    const struct {
        uint64_t n;
        const char *what;
    } in[4] = {{d->embed_dim, "desc->embed_dim (Wq's in_features)"},
               {d->kv_dim, "desc->kv_dim (Wk's in_features)"},
               {d->value_dim, "desc->value_dim (Wv's in_features)"},
               {(uint64_t)d->num_heads * d->v_head_dim,
                "desc->num_heads x v_head_dim (Wo's in_features)"}};
    for (int i = 0; i < 4; i++)
        if (in[i].n % 64) {
            vka_error_format(error, error_size,
                             "desc->weight_dtype q8_0 needs in_features that are multiples of "
                             "64, but %s is %llu",
                             in[i].what, (unsigned long long)in[i].n);
            return VKATTN_ERROR_INVALID_ARGUMENT;
        }
    return VKATTN_SUCCESS;
}

/* add_bias_kv and add_zero_attn (torch's): the rows join through a pass of
 * their own merged by LSE, or, for the zero row alone, as a sink of logit
 * 0, so nothing may already use the sinks or give keys positions. */
static vkattn_result check_appended_rows(const vkattn_mha_desc *d, char *error, size_t error_size)
{
    if (!d->add_bias_kv && !d->add_zero_attn)
        return VKATTN_SUCCESS;
    const char *flag = d->add_bias_kv ? "add_bias_kv" : "add_zero_attn";
    const char *other = d->sinks                ? "sinks"
                        : d->alibi              ? "alibi"
                        : d->rope.theta != 0.0f ? "rope"
                        : d->qk_norm            ? "qk_norm"
                                                : NULL;
    if (other) {
        vka_error_format(error, error_size,
                         "desc->%s cannot be combined with desc->%s (torch's appended rows have "
                         "no position and take no sink)",
                         flag, other);
        return VKATTN_ERROR_INVALID_ARGUMENT;
    }
    if (d->add_bias_kv && d->v_head_dim % 4) {
        vka_error_format(error, error_size,
                         "desc->add_bias_kv needs a v_head_dim that is a multiple of 4 (the "
                         "bias row's result is merged by LSE), but desc->v_head_dim is %u",
                         d->v_head_dim);
        return VKATTN_ERROR_INVALID_ARGUMENT;
    }
    return VKATTN_SUCCESS;
}

/* The modern decoder options: scale, RoPE, QK-norm (see vkattn_mha_desc). */
static vkattn_result resolve_modern(vkattn_mha_desc *d, char *error, size_t error_size)
{
    if (!isfinite(d->scale) || d->scale < 0.0f) {
        vka_error_format(error, error_size,
                         "desc->scale is %g: it must be finite and > 0 (0: 1/sqrt(head_dim))",
                         (double)d->scale);
        return VKATTN_ERROR_INVALID_ARGUMENT;
    }
    if (d->scale == 0.0f)
        d->scale = (float)(1.0 / sqrt((double)d->head_dim));
    bool rope = d->rope.theta != 0.0f;
    if (rope)
        VKA_TRY(vka_rope_resolve(&d->rope, d->head_dim, "desc->rope", &d->rope, error, error_size));
    if (d->norm_eps == 0.0f)
        d->norm_eps = 1e-6f;
    if (!isfinite(d->norm_eps) || d->norm_eps < 0.0f) {
        vka_error_format(error, error_size,
                         "desc->norm_eps is %g: it must be finite and > 0 (0: 1e-6)",
                         (double)d->norm_eps);
        return VKATTN_ERROR_INVALID_ARGUMENT;
    }
    if (!isfinite(d->softcap) || d->softcap < 0.0f) {
        vka_error_format(error, error_size,
                         "desc->softcap is %g: it must be 0 (none) or finite > 0",
                         (double)d->softcap);
        return VKATTN_ERROR_INVALID_ARGUMENT;
    }
    if (d->alibi && d->alibi_max_bias == 0.0f)
        d->alibi_max_bias = 8.0f;
    if (!isfinite(d->alibi_max_bias) || d->alibi_max_bias < 0.0f) {
        vka_error_format(error, error_size,
                         "desc->alibi_max_bias is %g: it must be finite and > 0 (0: 8)",
                         (double)d->alibi_max_bias);
        return VKATTN_ERROR_INVALID_ARGUMENT;
    }
    if (!d->alibi)
        d->alibi_max_bias = 0.0f;
    /* the projection's epilogue norms and rotates pairs of dims */
    if ((rope || d->qk_norm) && d->head_dim % 2) {
        vka_error_format(error, error_size,
                         "desc->%s needs an even head_dim, but desc->head_dim is %u",
                         rope ? "rope" : "qk_norm", d->head_dim);
        return VKATTN_ERROR_INVALID_ARGUMENT;
    }
    if ((rope || d->qk_norm) && !vka_mha_packed(d)) {
        bool k = d->kv_dim != d->embed_dim;
        vka_error_format(error, error_size,
                         "desc->%s needs self-attention, but desc->%s %u differs from "
                         "desc->embed_dim %u",
                         rope ? "rope" : "qk_norm", k ? "kv_dim" : "value_dim",
                         k ? d->kv_dim : d->value_dim, d->embed_dim);
        return VKATTN_ERROR_INVALID_ARGUMENT;
    }
    return check_appended_rows(d, error, error_size);
}

vkattn_result vka_mha_resolve(const vkattn_mha_desc *in, vkattn_mha_desc *resolved, char *error,
                              size_t error_size)
{
    if (!in) {
        vka_error_format(error, error_size, "desc is NULL");
        return VKATTN_ERROR_INVALID_ARGUMENT;
    }
    vkattn_mha_desc d = *in;
    if (d.embed_dim == 0) {
        vka_error_format(error, error_size, "desc->embed_dim is 0: it is required");
        return VKATTN_ERROR_INVALID_ARGUMENT;
    }
    if (d.num_heads == 0) {
        vka_error_format(error, error_size, "desc->num_heads is 0: it is required");
        return VKATTN_ERROR_INVALID_ARGUMENT;
    }
    if (d.num_kv_heads == 0)
        d.num_kv_heads = d.num_heads;
    if (d.num_heads % d.num_kv_heads != 0) {
        vka_error_format(error, error_size,
                         "desc->num_kv_heads %u does not divide desc->num_heads %u", d.num_kv_heads,
                         d.num_heads);
        return VKATTN_ERROR_INVALID_ARGUMENT;
    }
    bool head_dim_default = d.head_dim == 0;
    if (head_dim_default) {
        if (d.embed_dim % d.num_heads != 0) {
            vka_error_format(error, error_size,
                             "desc->embed_dim %u is not a multiple of desc->num_heads %u, "
                             "so desc->head_dim cannot default to their quotient: set it",
                             d.embed_dim, d.num_heads);
            return VKATTN_ERROR_INVALID_ARGUMENT;
        }
        d.head_dim = d.embed_dim / d.num_heads;
    }
    if (d.head_dim > VKA_ATTENTION_HEAD_DIM_MAX) {
        char from[96] = "";
        if (head_dim_default)
            vka_error_format(from, sizeof from, " (desc->embed_dim %u / desc->num_heads %u)",
                             d.embed_dim, d.num_heads);
        vka_error_format(error, error_size,
                         "desc->head_dim %u%s is not supported: it must be from 1 to %u",
                         d.head_dim, from, VKA_ATTENTION_HEAD_DIM_MAX);
        return VKATTN_ERROR_INVALID_ARGUMENT;
    }
    if (d.v_head_dim == 0)
        d.v_head_dim = d.head_dim;
    if (d.v_head_dim > VKA_ATTENTION_HEAD_DIM_MAX) {
        vka_error_format(error, error_size,
                         "desc->v_head_dim %u is not supported: it must be from 1 to %u (0: "
                         "head_dim)",
                         d.v_head_dim, VKA_ATTENTION_HEAD_DIM_MAX);
        return VKATTN_ERROR_INVALID_ARGUMENT;
    }
    if (d.kv_dim == 0)
        d.kv_dim = d.embed_dim;
    if (d.value_dim == 0)
        d.value_dim = d.kv_dim;
    if (!vka_dtype_is_float(d.dtype) && d.dtype != VKATTN_DTYPE_BF16) {
        char b[VKA_DTYPE_TEXT];
        vka_error_format(error, error_size, "desc->dtype %s is not supported: f32, f16 or bf16",
                         vka_dtype_text(d.dtype, b));
        return VKATTN_ERROR_UNSUPPORTED_DTYPE;
    }
    VKA_TRY(resolve_weight_dtype(&d, error, error_size));
    /* The packed projection is the widest; every width must fit the uint32_t
     * sizes the kernels use. */
    uint64_t packed = ((uint64_t)d.num_heads + d.num_kv_heads) * d.head_dim +
                      (uint64_t)d.num_kv_heads * d.v_head_dim;
    uint64_t merged = (uint64_t)d.num_heads * d.v_head_dim;
    if (packed > UINT32_MAX || merged > UINT32_MAX) {
        vka_error_format(error, error_size,
                         "desc: (num_heads %u + num_kv_heads %u) * head_dim %u + num_kv_heads * "
                         "v_head_dim %u = %llu projection features exceed %lu",
                         d.num_heads, d.num_kv_heads, d.head_dim, d.v_head_dim,
                         (unsigned long long)packed, (unsigned long)UINT32_MAX);
        return VKATTN_ERROR_INVALID_ARGUMENT;
    }
    VKA_TRY(resolve_modern(&d, error, error_size));
    if (resolved)
        *resolved = d;
    return VKATTN_SUCCESS;
}

/* Both the packed `kind`qkv ("w" or "b") and its split part `split` are set. */
static vkattn_result packed_and_split(char *error, size_t error_size, const char *kind,
                                      const char *split)
{
    vka_error_format(error, error_size,
                     "weights->%sqkv and weights->%s are both set: give either the packed %sqkv "
                     "or %sq, %sk and %sv",
                     kind, split, kind, kind, kind, kind);
    return VKATTN_ERROR_INVALID_ARGUMENT;
}

vkattn_result vka_mha_weights_check(const vkattn_mha_desc *resolved,
                                    const vkattn_mha_weights *weights, vka_mha_weight_views *views,
                                    char *error, size_t error_size)
{
    if (!resolved) {
        vka_error_format(error, error_size, "desc is NULL");
        return VKATTN_ERROR_INVALID_ARGUMENT;
    }
    if (!weights) {
        vka_error_format(error, error_size, "weights is NULL");
        return VKATTN_ERROR_INVALID_ARGUMENT;
    }
    const vkattn_mha_weights *w = weights;
    size_t qw = vka_mha_q_width(resolved), kw = vka_mha_k_width(resolved);
    vka_mha_weight_views v = {0};
    bool q8 = w->dtype == VKATTN_DTYPE_Q8_0;
    if (w->dtype != VKATTN_DTYPE_F32 && w->dtype != VKATTN_DTYPE_F16 &&
        w->dtype != VKATTN_DTYPE_BF16 && !q8) {
        char b[VKA_DTYPE_TEXT];
        vka_error_format(error, error_size,
                         "weights->dtype %s is not supported: the host weights are f32, f16, bf16 "
                         "or q8_0",
                         vka_dtype_text(w->dtype, b));
        return VKATTN_ERROR_UNSUPPORTED_DTYPE;
    }
    if (q8 && resolved->weight_dtype != VKATTN_DTYPE_Q8_0) {
        char b[VKA_DTYPE_TEXT];
        vka_error_format(error, error_size,
                         "weights->dtype is q8_0 but desc->weight_dtype is %s: q8_0 blocks are "
                         "taken by a layer that keeps q8_0 weights",
                         vka_dtype_text(resolved->weight_dtype, b));
        return VKATTN_ERROR_UNSUPPORTED_DTYPE;
    }
    v.dtype = w->dtype;
    const size_t es = q8 ? 4 : vkattn_dtype_size(w->dtype); /* of a bias value */
    if (w->wqkv) {
        if (w->wq || w->wk || w->wv)
            return packed_and_split(error, error_size, "w", w->wq ? "wq" : w->wk ? "wk" : "wv");
        if (!vka_mha_packed(resolved)) {
            vka_error_format(error, error_size,
                             "weights->wqkv needs desc->kv_dim (%u) == desc->value_dim (%u) == "
                             "desc->embed_dim (%u): give wq, wk and wv instead",
                             resolved->kv_dim, resolved->value_dim, resolved->embed_dim);
            return VKATTN_ERROR_INVALID_ARGUMENT;
        }
        v.packed = true;
        v.wq = w->wqkv;
        /* rows back to back (q8_0: whole blocks) */
        v.wk = (const char *)v.wq + vkattn_dtype_row_bytes(w->dtype, qw * resolved->embed_dim);
        v.wv = (const char *)v.wk + vkattn_dtype_row_bytes(w->dtype, kw * resolved->embed_dim);
    } else {
        const char *missing = !w->wq ? "wq" : !w->wk ? "wk" : !w->wv ? "wv" : NULL;
        if (missing) {
            vka_error_format(error, error_size, "weights->%s is NULL: give wq, wk and wv, or wqkv",
                             missing);
            return VKATTN_ERROR_INVALID_ARGUMENT;
        }
        v.wq = w->wq;
        v.wk = w->wk;
        v.wv = w->wv;
    }
    if (!w->wo) {
        vka_error_format(error, error_size, "weights->wo is NULL: it is required");
        return VKATTN_ERROR_INVALID_ARGUMENT;
    }
    v.wo = w->wo;
    /* Without desc.bias the bias pointers are ignored, as documented. */
    if (resolved->bias) {
        if (w->bqkv) {
            if (w->bq || w->bk || w->bv)
                return packed_and_split(error, error_size, "b", w->bq ? "bq" : w->bk ? "bk" : "bv");
            v.bq = w->bqkv;
            v.bk = (const char *)v.bq + qw * es;
            v.bv = (const char *)v.bk + kw * es;
        } else {
            v.bq = w->bq;
            v.bk = w->bk;
            v.bv = w->bv;
        }
        v.bo = w->bo;
    }
    if (resolved->qk_norm && (!w->q_norm || !w->k_norm)) {
        vka_error_format(error, error_size,
                         "weights->%s is NULL but desc->qk_norm is set: give q_norm and k_norm "
                         "([head_dim %u] each)",
                         !w->q_norm ? "q_norm" : "k_norm", resolved->head_dim);
        return VKATTN_ERROR_INVALID_ARGUMENT;
    }
    if (resolved->sinks && !w->sinks) {
        vka_error_format(error, error_size,
                         "weights->sinks is NULL but desc->sinks is set: give one logit per "
                         "query head ([num_heads %u])",
                         resolved->num_heads);
        return VKATTN_ERROR_INVALID_ARGUMENT;
    }
    if (resolved->add_bias_kv && (!w->bias_k || !w->bias_v)) {
        vka_error_format(error, error_size,
                         "weights->%s is NULL but desc->add_bias_kv is set: give bias_k "
                         "([num_kv_heads * head_dim] = [%u]) and bias_v ([%u])",
                         !w->bias_k ? "bias_k" : "bias_v", vka_mha_k_width(resolved),
                         vka_mha_v_width(resolved));
        return VKATTN_ERROR_INVALID_ARGUMENT;
    }
    v.bias_k = resolved->add_bias_kv ? w->bias_k : NULL;
    v.bias_v = resolved->add_bias_kv ? w->bias_v : NULL;
    v.sinks = resolved->sinks ? w->sinks : NULL;
    v.alibi_slopes = resolved->alibi ? w->alibi_slopes : NULL;
    v.q_norm = resolved->qk_norm ? w->q_norm : NULL;
    v.k_norm = resolved->qk_norm ? w->k_norm : NULL;
    if (views)
        *views = v;
    return VKATTN_SUCCESS;
}

vkattn_result vkattn_mha_param_count(const vkattn_mha_desc *desc, vkattn_mha_param_counts *out,
                                     char *error, size_t error_size)
{
    vkattn_mha_desc d;
    VKA_TRY(vka_mha_resolve(desc, &d, error, error_size));
    if (!out) {
        vka_error_format(error, error_size, "out is NULL");
        return VKATTN_ERROR_INVALID_ARGUMENT;
    }
    /* each factor is below 2^32: the products fit 64 bits */
    vkattn_mha_param_counts c = {0};
    c.wq = (uint64_t)vka_mha_q_width(&d) * d.embed_dim;
    c.wk = (uint64_t)vka_mha_k_width(&d) * d.kv_dim;
    c.wv = (uint64_t)vka_mha_v_width(&d) * d.value_dim;
    c.wo = (uint64_t)d.embed_dim * vka_mha_o_width(&d);
    if (d.bias) {
        c.bq = vka_mha_q_width(&d);
        c.bk = vka_mha_k_width(&d);
        c.bv = vka_mha_v_width(&d);
        c.bo = d.embed_dim;
    }
    if (d.add_bias_kv) {
        c.bias_k = vka_mha_k_width(&d);
        c.bias_v = vka_mha_v_width(&d);
    }
    c.weights = c.wq + c.wk + c.wv + c.wo;
    c.biases = c.bq + c.bk + c.bv + c.bo + c.bias_k + c.bias_v;
    c.total = c.weights + c.biases;
    const vkattn_dtype bias_dtype =
        d.weight_dtype == VKATTN_DTYPE_Q8_0 ? VKATTN_DTYPE_F32 : d.weight_dtype;
    const uint64_t rows[4] = {vka_mha_q_width(&d), vka_mha_k_width(&d), vka_mha_v_width(&d),
                              d.embed_dim};
    const uint64_t cols[4] = {d.embed_dim, d.kv_dim, d.value_dim, vka_mha_o_width(&d)};
    for (int i = 0; i < 4; i++) /* q8_0: whole blocks per row */
        c.bytes += rows[i] * vkattn_dtype_row_bytes(d.weight_dtype, cols[i]);
    c.bytes += (c.bq + c.bk + c.bv + c.bo) * vkattn_dtype_size(bias_dtype);
    c.bytes += (c.bias_k + c.bias_v) * vkattn_dtype_size(d.dtype);
    *out = c;
    return VKATTN_SUCCESS;
}
