/* vkattn_mha_get_weights: the layer's projection weights back on the host,
 * as the device holds them (its own buffer or the caller's tensors), and
 * torch's bias_k/bias_v rows from the layer's extras buffer. */
#include "ops/mha/mha_internal.h"
#include "spec/mha_desc.h"

/* Where the recorded passes read each matrix and bias (m->src), in bytes. */
static void sources(const vkattn_mha *m, vkattn_buffer *buf[8], uint64_t off[8], uint64_t size[8])
{
    const vkattn_mha_desc *d = &m->d;
    const vka_mha_weight_source *s = &m->src;
    const uint64_t qw = vka_mha_q_width(d), kw = vka_mha_k_width(d), vw = vka_mha_v_width(d);
    const uint64_t bes = vkattn_dtype_size(vka_mha_bias_dtype(d));
    vkattn_buffer *b[8] = {s->q, s->kv, s->v, s->o, s->bq, s->bkv, s->bkv, s->bo};
    const uint64_t o[8] = {
        s->off_q, s->off_kv, s->off_v, s->off_o, s->off_bq, s->off_bkv, s->off_bkv + kw * bes,
        s->off_bo};
    const uint64_t n[8] = {vka_mha_weight_bytes(d, qw, d->embed_dim),
                           vka_mha_wk_bytes(d),
                           vka_mha_wv_bytes(d),
                           vka_mha_weight_bytes(d, d->embed_dim, vka_mha_o_width(d)),
                           qw * bes,
                           kw * bes,
                           vw * bes,
                           d->embed_dim * bes};
    for (int i = 0; i < 8; i++)
        buf[i] = b[i], off[i] = o[i], size[i] = n[i];
}

vkattn_result vkattn_mha_get_weights(vkattn_mha *m, const vkattn_mha_weight_copy *dst)
{
    if (!m)
        return VKATTN_ERROR_INVALID_ARGUMENT;
    if (!dst)
        return vka_fail(m->ctx, VKATTN_ERROR_INVALID_ARGUMENT,
                        "vkattn_mha_get_weights: dst is NULL");
    if (!m->weights_set)
        return vka_fail(m->ctx, VKATTN_ERROR_INVALID_ARGUMENT,
                        "the layer has no weights yet (call vkattn_mha_set_weights)");
    vkattn_buffer *buf[8];
    uint64_t off[8], size[8];
    sources(m, buf, off, size);
    void *const to[8] = {dst->wq, dst->wk, dst->wv, dst->wo, dst->bq, dst->bk, dst->bv, dst->bo};
    for (int i = 0; i < 8; i++) {
        if (!to[i] || (i >= 4 && !m->d.bias))
            continue;
        VKA_TRY(vkattn_buffer_download(buf[i], off[i], to[i], size[i]));
    }
    if (m->d.add_bias_kv) { /* torch's bias_k, bias_v: the extras buffer, in d.dtype */
        if (dst->bias_k)
            VKA_TRY(vkattn_buffer_download(m->extras, m->off_bias_k, dst->bias_k,
                                           vka_mha_k_width(&m->d) * m->esize));
        if (dst->bias_v)
            VKA_TRY(vkattn_buffer_download(m->extras, m->off_bias_v, dst->bias_v,
                                           vka_mha_v_width(&m->d) * m->esize));
    }
    return VKATTN_SUCCESS;
}
