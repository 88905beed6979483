/* The host data of a test_mha_backward case (random inputs and weights
 * rounded to the layer's dtype, so the reference sees exactly what the
 * device holds) and its device buffers and args. */
#include "test_mha_backward.h"

#include <math.h>
#include <stdlib.h>

const char *const mbwd_names[MB_COUNT] = {
    "dx",       "dkv",      "dvalue",   "grads.wq", "grads.wk",     "grads.wv",     "grads.wo",
    "grads.bq", "grads.bk", "grads.bv", "grads.bo", "grads.q_norm", "grads.k_norm", "grads.sinks"};

static void set_grad(mbwd_data *d, int i, uint32_t rank, int64_t a, int64_t b, int64_t c)
{
    d->rank[i] = rank;
    d->shape[i][0] = a, d->shape[i][1] = b, d->shape[i][2] = c;
    d->n[i] = (size_t)a * (rank > 1 ? (size_t)b : 1) * (rank > 2 ? (size_t)c : 1);
    d->want[i] = test_alloc(d->n[i] * 4);
}

static vkattn_host_tensor host_grad(mbwd_data *d, int i)
{
    if (!d->n[i])
        return (vkattn_host_tensor){0};
    return vkattn_host_tensor_make(d->want[i], VKATTN_DTYPE_F32, d->rank[i], d->shape[i]);
}

void mbwd_make(const mbwd_case *c, uint64_t seed, mbwd_data *d)
{
    memset(d, 0, sizeof *d);
    test_rng rng = test_rng_seed(seed);
    const vkattn_dtype dt = c->dtype;
    const uint32_t tk = c->cross ? c->tk : c->tq, dv = c->dv ? c->dv : c->dh;
    const uint32_t dkv = c->cross ? c->dkv : c->dm, dvin = c->cross == 2 ? c->dvin : dkv;
    vkattn_mha_desc *desc = &d->desc;
    desc->embed_dim = c->dm, desc->num_heads = c->hq, desc->num_kv_heads = c->hkv;
    desc->head_dim = c->dh, desc->v_head_dim = dv;
    desc->kv_dim = dkv, desc->value_dim = dvin;
    desc->bias = c->bias, desc->dtype = dt, desc->scale = c->scale;
    if (c->rope) {
        desc->rope.theta = 10000.0f;
        desc->rope.style = c->gptj ? VKATTN_ROPE_GPTJ : VKATTN_ROPE_NEOX;
        desc->rope.dims = c->gptj ? c->dh / 2 : 0; /* partial rotation with GPT-J */
    }
    desc->qk_norm = c->qk_norm;
    desc->window = c->window, desc->softcap = c->softcap;
    desc->sinks = c->sinks, desc->alibi = c->alibi;
    const size_t qw = (size_t)c->hq * c->dh, kw = (size_t)c->hkv * c->dh, vw = (size_t)c->hkv * dv;
    const size_t ow = (size_t)c->hq * dv;
    const float amp = 1.5f / sqrtf((float)c->dm);
    d->wq = test_random_array(&rng, qw * c->dm, amp, dt);
    d->wk = test_random_array(&rng, kw * dkv, amp, dt);
    d->wv = test_random_array(&rng, vw * dvin, amp, dt);
    d->wo = test_random_array(&rng, (size_t)c->dm * ow, amp, dt);
    vkattn_mha_weights *w = &d->weights;
    w->wq = d->wq, w->wk = d->wk, w->wv = d->wv, w->wo = d->wo;
    if (c->bias) {
        d->bq = test_random_array(&rng, qw, 0.2f, dt),
        d->bk = test_random_array(&rng, kw, 0.2f, dt);
        d->bv = test_random_array(&rng, vw, 0.2f, dt);
        d->bo = test_random_array(&rng, c->dm, 0.2f, dt);
        w->bq = d->bq, w->bk = d->bk, w->bv = d->bv, w->bo = d->bo;
    }
    if (c->qk_norm) {
        d->qn = test_random_array(&rng, c->dh, 0.3f, VKATTN_DTYPE_F32);
        d->kn = test_random_array(&rng, c->dh, 0.3f, VKATTN_DTYPE_F32);
        for (uint32_t i = 0; i < c->dh; i++)
            d->qn[i] += 1.0f, d->kn[i] += 1.0f;
        w->q_norm = d->qn, w->k_norm = d->kn;
    }
    if (c->sinks) {
        d->sinks = test_random_array(&rng, c->hq, 1.0f, VKATTN_DTYPE_F32);
        w->sinks = d->sinks;
    }

    d->nx = (size_t)c->b * c->tq * c->dm;
    d->xs[0] = c->b, d->xs[1] = c->tq, d->xs[2] = c->dm;
    d->x = test_random_array(&rng, d->nx, 1.0f, dt);
    d->dy = test_random_array(&rng, d->nx, 1.0f, dt);
    d->want_y = test_alloc(d->nx * 4);
    vkattn_ref_mha_args *f = &d->ref.forward;
    f->x = vkattn_host_tensor_make(d->x, VKATTN_DTYPE_F32, 3, d->xs);
    f->y = vkattn_host_tensor_make(d->want_y, VKATTN_DTYPE_F32, 3, d->xs);
    d->ref.dy = vkattn_host_tensor_make(d->dy, VKATTN_DTYPE_F32, 3, d->xs);
    set_grad(d, MB_DX, 3, c->b, c->tq, c->dm);
    if (c->cross) {
        d->nkv = (size_t)c->b * tk * dkv;
        d->kvs[0] = c->b, d->kvs[1] = tk, d->kvs[2] = dkv;
        d->kv = test_random_array(&rng, d->nkv, 1.0f, dt);
        f->kv = vkattn_host_tensor_make(d->kv, VKATTN_DTYPE_F32, 3, d->kvs);
        set_grad(d, MB_DKV, 3, c->b, tk, dkv);
    }
    if (c->cross == 2) {
        d->nvalue = (size_t)c->b * tk * dvin;
        d->vs[0] = c->b, d->vs[1] = tk, d->vs[2] = dvin;
        d->value = test_random_array(&rng, d->nvalue, 1.0f, dt);
        f->value = vkattn_host_tensor_make(d->value, VKATTN_DTYPE_F32, 3, d->vs);
        set_grad(d, MB_DVALUE, 3, c->b, tk, dvin);
    }
    if (c->mask) { /* additive, a few keys hidden */
        d->ms[0] = c->tq, d->ms[1] = tk;
        d->mask = test_random_array(&rng, (size_t)c->tq * tk, 1.0f, VKATTN_DTYPE_F32);
        for (size_t i = 0; i < (size_t)c->tq * tk; i++)
            if (test_rng_below(&rng, 6) == 0)
                d->mask[i] = -INFINITY;
        f->mask = vkattn_host_tensor_make(d->mask, VKATTN_DTYPE_F32, 2, d->ms);
    }
    if (c->padding) { /* the last keys of each row padded, the first kept */
        d->ps[0] = c->b, d->ps[1] = tk;
        d->pad = test_alloc((size_t)c->b * tk);
        for (uint32_t b = 0; b < c->b; b++)
            for (uint32_t j = 0; j < tk; j++)
                d->pad[b * tk + j] = j == 0 || test_rng_below(&rng, 4) != 0;
        f->key_padding = vkattn_host_tensor_make(d->pad, VKATTN_DTYPE_U8, 2, d->ps);
    }
    if (c->positions) {
        d->positions = test_alloc((size_t)c->b * c->tq * 4);
        for (uint32_t b = 0; b < c->b; b++)
            for (uint32_t t = 0; t < c->tq; t++)
                d->positions[b * c->tq + t] = (int32_t)(3 + 2 * t + 5 * b);
        int64_t ps[2] = {c->b, c->tq};
        f->positions = vkattn_host_tensor_make(d->positions, VKATTN_DTYPE_I32, 2, ps);
    }
    f->causal = c->causal;
    f->causal_align = c->top_left ? VKATTN_CAUSAL_TOP_LEFT : VKATTN_CAUSAL_BOTTOM_RIGHT;
    f->dropout_p = c->dropout;
    f->dropout_seed = 0x1234abcd5678ull + seed;

    set_grad(d, MB_WQ, 2, (int64_t)qw, c->dm, 0);
    set_grad(d, MB_WK, 2, (int64_t)kw, dkv, 0);
    set_grad(d, MB_WV, 2, (int64_t)vw, dvin, 0);
    set_grad(d, MB_WO, 2, c->dm, (int64_t)ow, 0);
    if (c->bias) {
        set_grad(d, MB_BQ, 1, (int64_t)qw, 0, 0), set_grad(d, MB_BK, 1, (int64_t)kw, 0, 0);
        set_grad(d, MB_BV, 1, (int64_t)vw, 0, 0), set_grad(d, MB_BO, 1, c->dm, 0, 0);
    }
    if (c->qk_norm)
        set_grad(d, MB_QN, 1, c->dh, 0, 0), set_grad(d, MB_KN, 1, c->dh, 0, 0);
    if (c->sinks)
        set_grad(d, MB_SINKS, 1, c->hq, 0, 0);
    d->ref.dx = host_grad(d, MB_DX), d->ref.dkv = host_grad(d, MB_DKV);
    d->ref.dvalue = host_grad(d, MB_DVALUE);
    vkattn_ref_mha_grads *g = &d->ref.grads;
    g->wq = host_grad(d, MB_WQ), g->wk = host_grad(d, MB_WK), g->wv = host_grad(d, MB_WV);
    g->wo = host_grad(d, MB_WO), g->bq = host_grad(d, MB_BQ), g->bk = host_grad(d, MB_BK);
    g->bv = host_grad(d, MB_BV), g->bo = host_grad(d, MB_BO);
    g->q_norm = host_grad(d, MB_QN), g->k_norm = host_grad(d, MB_KN);
    g->sinks = host_grad(d, MB_SINKS);
}

void mbwd_free(mbwd_data *d)
{
    float *all[] = {d->wq, d->wk,    d->wv, d->wo, d->bq,    d->bk, d->bv,   d->bo,    d->qn,
                    d->kn, d->sinks, d->x,  d->kv, d->value, d->dy, d->mask, d->want_y};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        free(all[i]);
    for (int i = 0; i < MB_COUNT; i++)
        free(d->want[i]);
    free(d->pad), free(d->positions);
}

static vkattn_tensor device_grad(vkattn_context *ctx, const mbwd_data *d, mbwd_device *dev, int i)
{
    if (!d->n[i])
        return (vkattn_tensor){0};
    float *nan = test_alloc(d->n[i] * 4);
    for (size_t e = 0; e < d->n[i]; e++)
        nan[e] = NAN;
    dev->grad[i] = test_buffer_of(ctx, VKATTN_DTYPE_F32, nan, d->n[i]);
    free(nan);
    return vkattn_tensor_make(dev->grad[i], 0, VKATTN_DTYPE_F32, d->rank[i], d->shape[i]);
}

void mbwd_upload(vkattn_context *ctx, const mbwd_case *c, const mbwd_data *d, mbwd_device *dev)
{
    memset(dev, 0, sizeof *dev);
    const vkattn_dtype dt = c->dtype;
    vkattn_mha_forward_args *f = &dev->fwd;
    dev->x = test_buffer_of(ctx, dt, d->x, d->nx);
    dev->dy = test_buffer_of(ctx, dt, d->dy, d->nx);
    dev->y = test_buffer_of(ctx, dt, d->dy, d->nx);
    f->x = vkattn_tensor_make(dev->x, 0, dt, 3, d->xs);
    f->y = vkattn_tensor_make(dev->y, 0, dt, 3, d->xs);
    if (d->kv) {
        dev->kv = test_buffer_of(ctx, dt, d->kv, d->nkv);
        f->kv = vkattn_tensor_make(dev->kv, 0, dt, 3, d->kvs);
    }
    if (d->value) {
        dev->value = test_buffer_of(ctx, dt, d->value, d->nvalue);
        f->value = vkattn_tensor_make(dev->value, 0, dt, 3, d->vs);
    }
    if (d->mask) {
        dev->mask = test_buffer_of(ctx, VKATTN_DTYPE_F32, d->mask, (size_t)(d->ms[0] * d->ms[1]));
        f->mask = vkattn_tensor_make(dev->mask, 0, VKATTN_DTYPE_F32, 2, d->ms);
    }
    if (d->pad) {
        dev->pad = test_buffer_with(ctx, d->pad, (uint64_t)(d->ps[0] * d->ps[1]));
        f->key_padding = vkattn_tensor_make(dev->pad, 0, VKATTN_DTYPE_U8, 2, d->ps);
    }
    if (d->positions) {
        const int64_t ps[2] = {c->b, c->tq};
        dev->positions = test_buffer_with(ctx, d->positions, (uint64_t)c->b * c->tq * 4);
        f->positions = vkattn_tensor_make(dev->positions, 0, VKATTN_DTYPE_I32, 2, ps);
    }
    f->causal = c->causal;
    f->causal_align = d->ref.forward.causal_align;
    f->dropout_p = c->dropout;
    f->dropout_seed = d->ref.forward.dropout_seed;
    vkattn_mha_backward_args *b = &dev->bwd;
    b->forward = *f;
    b->dy = vkattn_tensor_make(dev->dy, 0, dt, 3, d->xs);
    b->dx = device_grad(ctx, d, dev, MB_DX);
    b->dkv = device_grad(ctx, d, dev, MB_DKV);
    b->dvalue = device_grad(ctx, d, dev, MB_DVALUE);
    vkattn_mha_grads *g = &b->grads;
    g->wq = device_grad(ctx, d, dev, MB_WQ), g->wk = device_grad(ctx, d, dev, MB_WK);
    g->wv = device_grad(ctx, d, dev, MB_WV), g->wo = device_grad(ctx, d, dev, MB_WO);
    g->bq = device_grad(ctx, d, dev, MB_BQ), g->bk = device_grad(ctx, d, dev, MB_BK);
    g->bv = device_grad(ctx, d, dev, MB_BV), g->bo = device_grad(ctx, d, dev, MB_BO);
    g->q_norm = device_grad(ctx, d, dev, MB_QN), g->k_norm = device_grad(ctx, d, dev, MB_KN);
    g->sinks = device_grad(ctx, d, dev, MB_SINKS);
}

void mbwd_device_free(mbwd_device *dev)
{
    TEST_DESTROY_BUFFERS(dev->x, dev->kv, dev->value, dev->dy, dev->y, dev->mask, dev->pad,
                         dev->positions);
    test_buffers_destroy(dev->grad, MB_COUNT);
}
