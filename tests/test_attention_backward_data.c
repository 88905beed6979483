/* The cases' host data and forward args of test_attention_backward (and
 * its errors file): random inputs rounded to the case's dtype, masks,
 * padding, sinks and slopes. */
#include "test_attention_backward.h"

#include <math.h>
#include <stdlib.h>

void bwd_make_data(const bwd_case *c, uint64_t seed, bwd_data *d)
{
    memset(d, 0, sizeof *d);
    test_rng rng = test_rng_seed(seed);
    d->nq = (size_t)c->B * c->Hq * c->Tq * c->Dk;
    d->nk = (size_t)c->B * c->Hkv * c->Tk * c->Dk;
    d->nv = (size_t)c->B * c->Hkv * c->Tk * c->Dv;
    d->no = (size_t)c->B * c->Hq * c->Tq * c->Dv;
    d->nm = (size_t)c->B * c->Hq * c->Tq * c->Tk;
    d->nl = (size_t)c->B * c->Hq * c->Tq;
    d->q = test_random_array(&rng, d->nq, 1.5f, c->dt);
    d->k = test_random_array(&rng, d->nk, 1.5f, c->dt);
    d->v = test_random_array(&rng, d->nv, 1.0f, c->dt);
    d->dout = test_random_array(&rng, d->no, 1.0f, c->dt);
    int64_t qs[4] = {c->B, c->Hq, c->Tq, c->Dk}, ks[4] = {c->B, c->Hkv, c->Tk, c->Dk};
    int64_t vs[4] = {c->B, c->Hkv, c->Tk, c->Dv}, os[4] = {c->B, c->Hq, c->Tq, c->Dv};
    int64_t ms[4] = {c->B, c->Hq, c->Tq, c->Tk}, ls[3] = {c->B, c->Hq, c->Tq};
    memcpy(d->qs, qs, sizeof qs), memcpy(d->ks, ks, sizeof ks), memcpy(d->vs, vs, sizeof vs);
    memcpy(d->os, os, sizeof os), memcpy(d->ms, ms, sizeof ms), memcpy(d->ls, ls, sizeof ls);
    d->hs[0] = c->Hq;
    d->ps[0] = c->B, d->ps[1] = c->Tk;
    if (c->mask == BWD_MASK_FLOAT || c->mask == BWD_MASK_HIDE_ROW) {
        d->mask = test_alloc(d->nm * sizeof *d->mask);
        for (size_t i = 0; i < d->nm; i++) {
            float val = test_rng_uniform(&rng, -1.0f, 1.0f);
            if (test_rng_below(&rng, 100) < 15 || (c->mask == BWD_MASK_HIDE_ROW && i / c->Tk == 1))
                val = -INFINITY;
            d->mask[i] = val;
        }
    } else if (c->mask != BWD_MASK_NONE) {
        d->bmask = test_alloc(d->nm);
        for (size_t i = 0; i < d->nm; i++)
            d->bmask[i] = test_rng_below(&rng, 100) < 70;
    }
    if (c->padding) {
        d->pad = test_alloc((size_t)c->B * c->Tk);
        for (size_t i = 0; i < (size_t)c->B * c->Tk; i++)
            d->pad[i] = test_rng_below(&rng, 100) < 25 ? 0 : 1;
        d->pad[0] = 1;
    }
    if (c->sinks) {
        d->sinks = test_alloc(c->Hq * sizeof(float));
        for (uint32_t h = 0; h < c->Hq; h++)
            d->sinks[h] = test_rng_uniform(&rng, -1.0f, 2.0f);
    }
    if (c->slopes) {
        d->slopes = test_alloc(c->Hq * sizeof(float));
        for (uint32_t h = 0; h < c->Hq; h++)
            d->slopes[h] = test_rng_uniform(&rng, 0.0f, 0.5f);
    }
}

void bwd_free_data(bwd_data *d)
{
    free(d->q), free(d->k), free(d->v), free(d->dout), free(d->mask), free(d->bmask);
    free(d->pad), free(d->sinks), free(d->slopes);
}

/* The forward's args of a case on the device and on the host (tensors the
 * caller fills in: q, k, v, out, lse; masks and modifiers here). */
void bwd_forward_args(const bwd_case *c, const bwd_data *d, vkattn_context *ctx, bwd_buffers *bb,
                      vkattn_attention_args *a, vkattn_ref_attention_args *r)
{
    memset(a, 0, sizeof *a);
    memset(r, 0, sizeof *r);
    a->causal = r->causal = c->causal;
    a->causal_align = r->causal_align =
        c->top_left ? VKATTN_CAUSAL_TOP_LEFT : VKATTN_CAUSAL_BOTTOM_RIGHT;
    a->window = r->window = c->window;
    a->softcap = r->softcap = c->softcap;
    a->alibi_max_bias = r->alibi_max_bias = c->max_bias;
    a->scale = r->scale = c->scale;
    a->dropout_p = r->dropout_p = c->dropout;
    a->dropout_seed = r->dropout_seed = 0x5eed0000u + c->Tq;
    a->bool_mask = r->bool_mask =
        c->mask == BWD_MASK_BLOCKS ? VKATTN_BOOL_MASK_TRUE_BLOCKS : VKATTN_BOOL_MASK_TRUE_ATTENDS;
    if (d->mask) {
        bb->mask = test_buffer_of(ctx, VKATTN_DTYPE_F32, d->mask, d->nm);
        a->mask = vkattn_tensor_make(bb->mask, 0, VKATTN_DTYPE_F32, 4, d->ms);
        r->mask = vkattn_host_tensor_make(d->mask, VKATTN_DTYPE_F32, 4, d->ms);
    } else if (d->bmask) {
        bb->mask = test_buffer_with(ctx, d->bmask, d->nm);
        a->mask = vkattn_tensor_make(bb->mask, 0, VKATTN_DTYPE_U8, 4, d->ms);
        r->mask = vkattn_host_tensor_make(d->bmask, VKATTN_DTYPE_U8, 4, d->ms);
    }
    if (d->pad) {
        bb->pad = test_buffer_with(ctx, d->pad, (uint64_t)c->B * c->Tk);
        a->key_padding = vkattn_tensor_make(bb->pad, 0, VKATTN_DTYPE_U8, 2, d->ps);
        r->key_padding = vkattn_host_tensor_make(d->pad, VKATTN_DTYPE_U8, 2, d->ps);
    }
    if (d->sinks) {
        bb->sinks = test_buffer_of(ctx, VKATTN_DTYPE_F32, d->sinks, c->Hq);
        a->sinks = vkattn_tensor_make(bb->sinks, 0, VKATTN_DTYPE_F32, 1, d->hs);
        r->sinks = vkattn_host_tensor_make(d->sinks, VKATTN_DTYPE_F32, 1, d->hs);
    }
    if (d->slopes) {
        bb->slopes = test_buffer_of(ctx, VKATTN_DTYPE_F32, d->slopes, c->Hq);
        a->alibi_slopes = vkattn_tensor_make(bb->slopes, 0, VKATTN_DTYPE_F32, 1, d->hs);
        r->alibi_slopes = vkattn_host_tensor_make(d->slopes, VKATTN_DTYPE_F32, 1, d->hs);
    }
}
