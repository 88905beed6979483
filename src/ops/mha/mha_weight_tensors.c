/* vkattn_mha_set_weight_tensors: the layer reads its projection weights
 * from the caller's device tensors (no copy, nothing uploaded but the small
 * per-head parameters). Each tensor is checked against the layer's shapes
 * and dtypes and must be laid out as the layer's own buffer is: rows
 * contiguous, Q, K and V rows one packed matrix in a self-attention layer. */
#include "core/tensor.h"
#include "ops/mha/mha_internal.h"
#include "spec/mha_desc.h"

/* A weight or bias tensor of the layer: resolved, of `dtype`, rank
 * `rank`, shape {rows, cols} (bias: {rows}), contiguous, at an offset the
 * linear op takes. */
static vkattn_result check_tensor(vkattn_mha *m, const vkattn_tensor *t, const char *name,
                                  vkattn_dtype dtype, uint32_t rank, uint64_t rows, uint64_t cols,
                                  vkattn_buffer **buf, uint64_t *offset)
{
    vkattn_context *ctx = m->ctx;
    uint64_t align = dtype == VKATTN_DTYPE_Q8_0 ? vka_linear_block_align(ctx) : 16;
    vkattn_tensor r;
    VKA_TRY(vka_tensor_resolve_blocks(ctx, t, name, align, &r));
    char b1[VKA_DTYPE_TEXT], b2[VKA_DTYPE_TEXT];
    if (r.dtype != dtype)
        return vka_fail(ctx, VKATTN_ERROR_UNSUPPORTED_DTYPE,
                        "%s.dtype is %s but the layer keeps %s there (desc.weight_dtype)", name,
                        vka_dtype_text(r.dtype, b1), vka_dtype_text(dtype, b2));
    bool shape_ok = r.rank == rank && (uint64_t)r.shape[0] == rows &&
                    (rank == 1 || (uint64_t)r.shape[1] == cols);
    if (!shape_ok)
        return vka_fail(ctx, VKATTN_ERROR_SHAPE_MISMATCH,
                        "%s is rank %u [%lld, %lld]: the layer needs %s [%llu%s%llu]", name, r.rank,
                        (long long)r.shape[0], (long long)(r.rank > 1 ? r.shape[1] : 0),
                        rank == 1 ? "rank 1" : "rank 2", (unsigned long long)rows,
                        rank == 1 ? "" : ", ", rank == 1 ? 0ull : (unsigned long long)cols);
    if (!vka_tensor_is_contiguous(&r))
        return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT,
                        "%s must be contiguous (rows back to back, as torch.nn.Linear keeps them)",
                        name);
    if (r.offset % align)
        return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT,
                        "%s.offset %llu is not a multiple of %llu bytes", name,
                        (unsigned long long)r.offset, (unsigned long long)align);
    *buf = r.buffer;
    *offset = r.offset;
    return VKATTN_SUCCESS;
}

vkattn_result vkattn_mha_set_weight_tensors(vkattn_mha *m, const vkattn_mha_weight_tensors *t)
{
    if (!m)
        return VKATTN_ERROR_INVALID_ARGUMENT;
    vkattn_context *ctx = m->ctx;
    if (!t)
        return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT,
                        "vkattn_mha_set_weight_tensors: t is NULL");
    const vkattn_mha_desc *d = &m->d;
    uint64_t qw = vka_mha_q_width(d), kvw = vka_mha_k_width(d) + (uint64_t)vka_mha_v_width(d),
             ow = vka_mha_o_width(d);
    vkattn_dtype wdt = d->weight_dtype, bdt = vka_mha_bias_dtype(d);
    bool packed = vka_mha_packed(d), apart = d->value_dim != d->kv_dim;
    const char *missing = NULL;
    if (packed && (t->wq.buffer || t->wkv.buffer || t->wk.buffer || t->wv.buffer))
        return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT,
                        "t->%s is set but the layer is self-attention (kv_dim == value_dim == "
                        "embed_dim): give its Q, K and V rows as one packed t->wqkv",
                        t->wq.buffer    ? "wq"
                        : t->wkv.buffer ? "wkv"
                        : t->wk.buffer  ? "wk"
                                        : "wv");
    if (!packed && t->wqkv.buffer)
        return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT,
                        "t->wqkv is set but desc.kv_dim %u, value_dim %u and embed_dim %u are not "
                        "all equal: give t->wq and %s",
                        d->kv_dim, d->value_dim, d->embed_dim,
                        apart ? "t->wk and t->wv" : "t->wkv (Wk's rows, then Wv's)");
    if (!packed && !apart && (t->wk.buffer || t->wv.buffer))
        return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT,
                        "t->%s is set but the layer's kv_dim equals its value_dim (%u): give Wk's "
                        "rows, then Wv's, as one t->wkv",
                        t->wk.buffer ? "wk" : "wv", d->kv_dim);
    if (apart && t->wkv.buffer)
        return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT,
                        "t->wkv is set but desc.kv_dim %u differs from value_dim %u: give t->wk "
                        "and t->wv",
                        d->kv_dim, d->value_dim);
    missing = packed  ? (!t->wqkv.buffer ? "wqkv" : NULL)
              : apart ? (!t->wq.buffer   ? "wq"
                         : !t->wk.buffer ? "wk"
                         : !t->wv.buffer ? "wv"
                                         : NULL)
                      : (!t->wq.buffer    ? "wq"
                         : !t->wkv.buffer ? "wkv"
                                          : NULL);
    if (!missing && !t->wo.buffer)
        missing = "wo";
    if (!missing && d->bias)
        missing = packed ? (!t->bqkv.buffer ? "bqkv" : NULL)
                         : (!t->bq.buffer    ? "bq"
                            : !t->bkv.buffer ? "bkv"
                                             : NULL);
    if (!missing && d->bias && !t->bo.buffer)
        missing = "bo";
    if (missing)
        return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT, "t->%s.buffer is NULL: it is required",
                        missing);
    vka_mha_weight_source s = {0};
    if (packed) {
        VKA_TRY(
            check_tensor(m, &t->wqkv, "t->wqkv", wdt, 2, qw + kvw, d->embed_dim, &s.q, &s.off_q));
        s.kv = s.q;
        s.off_kv = s.off_q + vka_mha_weight_bytes(d, qw, d->embed_dim);
    } else if (apart) {
        VKA_TRY(check_tensor(m, &t->wq, "t->wq", wdt, 2, qw, d->embed_dim, &s.q, &s.off_q));
        VKA_TRY(check_tensor(m, &t->wk, "t->wk", wdt, 2, vka_mha_k_width(d), d->kv_dim, &s.kv,
                             &s.off_kv));
        VKA_TRY(check_tensor(m, &t->wv, "t->wv", wdt, 2, vka_mha_v_width(d), d->value_dim, &s.v,
                             &s.off_v));
    } else {
        VKA_TRY(check_tensor(m, &t->wq, "t->wq", wdt, 2, qw, d->embed_dim, &s.q, &s.off_q));
        VKA_TRY(check_tensor(m, &t->wkv, "t->wkv", wdt, 2, kvw, d->kv_dim, &s.kv, &s.off_kv));
    }
    if (!apart) { /* Wv's rows right after Wk's */
        s.v = s.kv;
        s.off_v = s.off_kv + vka_mha_wk_bytes(d);
    }
    VKA_TRY(check_tensor(m, &t->wo, "t->wo", wdt, 2, d->embed_dim, ow, &s.o, &s.off_o));
    if (d->bias) {
        if (packed) {
            VKA_TRY(check_tensor(m, &t->bqkv, "t->bqkv", bdt, 1, qw + kvw, 0, &s.bq, &s.off_bq));
            s.bkv = s.bq;
            s.off_bkv = s.off_bq + qw * vkattn_dtype_size(bdt);
        } else {
            VKA_TRY(check_tensor(m, &t->bq, "t->bq", bdt, 1, qw, 0, &s.bq, &s.off_bq));
            VKA_TRY(check_tensor(m, &t->bkv, "t->bkv", bdt, 1, kvw, 0, &s.bkv, &s.off_bkv));
        }
        VKA_TRY(check_tensor(m, &t->bo, "t->bo", bdt, 1, d->embed_dim, 0, &s.bo, &s.off_bo));
    }
    const char *param =
        d->qk_norm && (!t->q_norm || !t->k_norm)       ? (!t->q_norm ? "q_norm" : "k_norm")
        : d->sinks && !t->sinks                        ? "sinks"
        : d->add_bias_kv && (!t->bias_k || !t->bias_v) ? (!t->bias_k ? "bias_k" : "bias_v")
                                                       : NULL;
    if (param)
        return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT,
                        "t->%s is NULL but the layer's desc needs it (desc.%s)", param,
                        param[0] == 'b'   ? "add_bias_kv"
                        : param[0] == 's' ? "sinks"
                                          : "qk_norm");
    const float *sinks = d->sinks ? t->sinks : NULL, *slopes = d->alibi ? t->alibi_slopes : NULL;
    VKA_TRY(vka_mha_check_params(m, sinks, slopes, "t->"));
    const float *bias_k = d->add_bias_kv ? t->bias_k : NULL,
                *bias_v = d->add_bias_kv ? t->bias_v : NULL;
    VKA_TRY(vka_mha_check_appended(m, bias_k, bias_v, "t->"));
    m->weights_set = false; /* from here on the old weights are no longer whole */
    VKA_TRY(vka_mha_upload_params(m, t->q_norm, t->k_norm, sinks, slopes));
    VKA_TRY(vka_mha_upload_appended(m, bias_k, bias_v));
    m->src = s;
    m->weights_set = true;
    /* the layer's own copy, if any, is no longer read */
    vkattn_buffer_destroy(m->weights);
    m->weights = NULL;
    return VKATTN_SUCCESS;
}
