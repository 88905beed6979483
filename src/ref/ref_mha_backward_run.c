/* The computation of vkattn_ref_mha_backward, in double from the inputs
 * (see "MHA layer backward" in vkattn.h). The forward is recomputed:
 *     Q_lin = X Wq^T + bq, K_lin = C Wk^T + bk, V = C' Wv^T + bv,
 *     Q = RoPE(QK-norm(Q_lin)), K likewise, O = attention(Q, K, V),
 *     Y = O Wo^T + bo;
 * then, from dY:
 *     dWo = dY^T O, dbo = column sums of dY, dO = dY Wo,
 *     dQ, dK, dV, dsinks: attention's backward,
 *     dQ_lin, dK_lin: through RoPE and QK-norm (and the norm weights'),
 *     dWq = dQ_lin^T X, dbq = column sums of dQ_lin, likewise Wk, Wv,
 *     dX = dQ_lin Wq (+ dK_lin Wk and dV Wv where C, C' are X),
 *     dC = dK_lin Wk (+ dV Wv where C' is C), dC' = dV Wv.
 * Every activation is a dense double [rows, features] array; the outputs
 * are written only once everything is computed. */
#include "ref/ref_backward.h"

#include "spec/dtype.h"
#include "spec/error_text.h"

#include <stdlib.h>
#include <string.h>

/* The dense arrays of one run, carved from one allocation. */
typedef struct arrays {
    double *x, *c, *cv;                  /* inputs: C is x, C' is c when not given */
    double *wq, *wk, *wv, *wo;           /* weights */
    double *bq, *bk, *bv, *bo;           /* biases (zeros without) */
    double *qlin, *klin, *v, *q, *k, *o; /* activations */
    double *att;                         /* attention's scratch */
    double *dy, *dout, *dq, *dk, *dv;    /* backward activations (dq, dk: then of Q_lin, K_lin) */
    double *dx, *dc, *dcv;               /* inputs' gradients */
    double *g[VKA_GRADS];                /* parameters' gradients */
} arrays;

typedef struct part {
    double **at;
    size_t n;
} part;

typedef struct sizes {
    size_t rq, rk; /* rows of the queries' and keys' activations */
    size_t dm, dkv, dvin, qw, kw, vw, ow, dh, hq;
} sizes;

/* a * b, clearing *ok on overflow. */
static size_t mul(size_t a, size_t b, bool *ok)
{
    size_t r = 0;
    if (!vka_size_mul(a, b, &r))
        *ok = false;
    return r;
}

/* The arrays a run needs (the backward's only with dy), listed in `parts`;
 * returns how many. */
static int list_parts(const vka_ref_mha_bwd_plan *p, const sizes *s, arrays *a, part *parts,
                      bool *ok)
{
    int n = 0;
#define PART(ptr, count) (parts[n].at = &(ptr), parts[n++].n = (count))
    PART(a->x, mul(s->rq, s->dm, ok));
    if (!p->self)
        PART(a->c, mul(s->rk, s->dkv, ok));
    if (p->has_value)
        PART(a->cv, mul(s->rk, s->dvin, ok));
    PART(a->wq, mul(s->qw, s->dm, ok));
    PART(a->wk, mul(s->kw, s->dkv, ok));
    PART(a->wv, mul(s->vw, s->dvin, ok));
    PART(a->wo, mul(s->dm, s->ow, ok));
    PART(a->bq, s->qw);
    PART(a->bk, s->kw);
    PART(a->bv, s->vw);
    PART(a->bo, s->dm);
    PART(a->qlin, mul(s->rq, s->qw, ok));
    PART(a->klin, mul(s->rk, s->kw, ok));
    PART(a->v, mul(s->rk, s->vw, ok));
    PART(a->q, mul(s->rq, s->qw, ok));
    PART(a->k, mul(s->rk, s->kw, ok));
    PART(a->o, mul(s->rq, s->ow, ok));
    PART(a->att, vka_ref_mha_attention_scratch(&p->ap));
    if (p->dy.data) {
        PART(a->dy, mul(s->rq, s->dm, ok));
        PART(a->dout, mul(s->rq, s->ow, ok));
        PART(a->dq, mul(s->rq, s->qw, ok));
        PART(a->dk, mul(s->rk, s->kw, ok));
        PART(a->dv, mul(s->rk, s->vw, ok));
        PART(a->dx, mul(s->rq, s->dm, ok));
        if (!p->self)
            PART(a->dc, mul(s->rk, s->dkv, ok));
        if (p->has_value)
            PART(a->dcv, mul(s->rk, s->dvin, ok));
        PART(a->g[VKA_GRAD_WQ], mul(s->qw, s->dm, ok));
        PART(a->g[VKA_GRAD_WK], mul(s->kw, s->dkv, ok));
        PART(a->g[VKA_GRAD_WV], mul(s->vw, s->dvin, ok));
        PART(a->g[VKA_GRAD_WO], mul(s->dm, s->ow, ok));
        PART(a->g[VKA_GRAD_BQ], s->qw);
        PART(a->g[VKA_GRAD_BK], s->kw);
        PART(a->g[VKA_GRAD_BV], s->vw);
        PART(a->g[VKA_GRAD_BO], s->dm);
        PART(a->g[VKA_GRAD_Q_NORM], s->dh);
        PART(a->g[VKA_GRAD_K_NORM], s->dh);
        PART(a->g[VKA_GRAD_SINKS], s->hq);
    }
#undef PART
    return n;
}

/* n values of a layer array (weights->dtype as the layer keeps it; NULL:
 * zeros) widened. */
static void widen(const void *src, vkattn_dtype dt, size_t n, double *dst)
{
    for (size_t i = 0; i < n; i++)
        dst[i] = src ? vka_widen(src, dt, i) : 0.0;
}

/* The forward, recomputed into the arrays (y: the output, when asked). */
static void forward(const vka_ref_mha_bwd_plan *p, const sizes *s, arrays *a, double *y)
{
    const vka_mha_weight_views *w = &p->wv;
    const vkattn_mha_desc *d = &p->desc;
    const int64_t rq = (int64_t)s->rq, rk = (int64_t)s->rk;
    const int64_t Tq = p->x.shape[1], Tk = p->kv.shape[1];
    vka_ref_gather_dense(&p->x, a->x);
    if (!p->self)
        vka_ref_gather_dense(&p->kv, a->c);
    else
        a->c = a->x;
    if (p->has_value)
        vka_ref_gather_dense(&p->vin, a->cv);
    else
        a->cv = a->c;
    widen(w->wq, w->dtype, s->qw * s->dm, a->wq);
    widen(w->wk, w->dtype, s->kw * s->dkv, a->wk);
    widen(w->wv, w->dtype, s->vw * s->dvin, a->wv);
    widen(w->wo, w->dtype, s->dm * s->ow, a->wo);
    widen(w->bq, w->dtype, s->qw, a->bq);
    widen(w->bk, w->dtype, s->kw, a->bk);
    widen(w->bv, w->dtype, s->vw, a->bv);
    widen(w->bo, w->dtype, s->dm, a->bo);
    vka_ref_gemm_nt(a->x, a->wq, a->bq, rq, (int64_t)s->qw, (int64_t)s->dm, a->qlin);
    vka_ref_gemm_nt(a->c, a->wk, a->bk, rk, (int64_t)s->kw, (int64_t)s->dkv, a->klin);
    vka_ref_gemm_nt(a->cv, a->wv, a->bv, rk, (int64_t)s->vw, (int64_t)s->dvin, a->v);
    vka_ref_heads_forward(p, a->qlin, Tq, d->num_heads, w->q_norm, a->q);
    vka_ref_heads_forward(p, a->klin, Tk, d->num_kv_heads, w->k_norm, a->k);
    vka_ref_mha_attention_forward(&p->ap, a->q, a->k, a->v, a->o, a->att);
    if (y)
        vka_ref_gemm_nt(a->o, a->wo, a->bo, rq, (int64_t)s->dm, (int64_t)s->ow, y);
}

/* Every gradient, from dY, into the arrays. */
static void backward(const vka_ref_mha_bwd_plan *p, const sizes *s, arrays *a)
{
    const vka_mha_weight_views *w = &p->wv;
    const vkattn_mha_desc *d = &p->desc;
    const int64_t rq = (int64_t)s->rq, rk = (int64_t)s->rk;
    const int64_t Tq = p->x.shape[1], Tk = p->kv.shape[1];
    const int64_t dm = (int64_t)s->dm, dkv = (int64_t)s->dkv, dvin = (int64_t)s->dvin;
    const int64_t qw = (int64_t)s->qw, kw = (int64_t)s->kw, vw = (int64_t)s->vw,
                  ow = (int64_t)s->ow;
    double **g = a->g;
    vka_ref_gather_dense(&p->dy, a->dy);
    /* the output projection */
    vka_ref_gemm_tn(a->dy, a->o, rq, dm, ow, g[VKA_GRAD_WO]);
    vka_ref_col_sums(a->dy, rq, dm, g[VKA_GRAD_BO]);
    vka_ref_gemm_nn(a->dy, a->wo, rq, dm, ow, false, a->dout);
    /* attention, then the heads' norm and rotation */
    vka_ref_mha_attention_backward(&p->ap, a->q, a->k, a->v, a->dout, a->dq, a->dk, a->dv,
                                   g[VKA_GRAD_SINKS], a->att);
    memset(g[VKA_GRAD_Q_NORM], 0, s->dh * sizeof(double));
    memset(g[VKA_GRAD_K_NORM], 0, s->dh * sizeof(double));
    vka_ref_heads_backward(p, a->qlin, Tq, d->num_heads, w->q_norm, a->dq, g[VKA_GRAD_Q_NORM]);
    vka_ref_heads_backward(p, a->klin, Tk, d->num_kv_heads, w->k_norm, a->dk, g[VKA_GRAD_K_NORM]);
    /* the input projections */
    vka_ref_gemm_tn(a->dq, a->x, rq, qw, dm, g[VKA_GRAD_WQ]);
    vka_ref_gemm_tn(a->dk, a->c, rk, kw, dkv, g[VKA_GRAD_WK]);
    vka_ref_gemm_tn(a->dv, a->cv, rk, vw, dvin, g[VKA_GRAD_WV]);
    vka_ref_col_sums(a->dq, rq, qw, g[VKA_GRAD_BQ]);
    vka_ref_col_sums(a->dk, rk, kw, g[VKA_GRAD_BK]);
    vka_ref_col_sums(a->dv, rk, vw, g[VKA_GRAD_BV]);
    /* the inputs: the keys' share goes where C came from, the values'
     * where C' came from */
    double *dkeys = p->self ? a->dx : a->dc;
    double *dvalues = p->has_value ? a->dcv : dkeys;
    vka_ref_gemm_nn(a->dq, a->wq, rq, qw, dm, false, a->dx);
    vka_ref_gemm_nn(a->dk, a->wk, rk, kw, dkv, p->self, dkeys);
    vka_ref_gemm_nn(a->dv, a->wv, rk, vw, dvin, !p->has_value, dvalues);
}

vkattn_result vka_ref_mha_bwd_run(const vka_ref_mha_bwd_plan *p, double *y, char *error,
                                  size_t error_size)
{
    const vkattn_mha_desc *d = &p->desc;
    sizes s = {.rq = (size_t)(p->x.shape[0] * p->x.shape[1]),
               .rk = (size_t)(p->kv.shape[0] * p->kv.shape[1]),
               .dm = d->embed_dim,
               .dkv = d->kv_dim,
               .dvin = d->value_dim,
               .qw = vka_mha_q_width(d),
               .kw = vka_mha_k_width(d),
               .vw = vka_mha_v_width(d),
               .ow = vka_mha_o_width(d),
               .dh = d->head_dim,
               .hq = d->num_heads};
    arrays a;
    memset(&a, 0, sizeof a);
    part parts[48];
    bool ok = true;
    const int n = list_parts(p, &s, &a, parts, &ok);
    size_t total = 0;
    for (int i = 0; ok && i < n; i++) {
        ok = parts[i].n <= SIZE_MAX / sizeof(double) - total;
        total += parts[i].n;
    }
    double *mem = ok ? vka_ref_scratch(total, error, error_size) : NULL;
    if (!mem) {
        if (!ok)
            vka_error_format(error, error_size,
                             "the reference backward's temporaries overflow the address space");
        return VKATTN_ERROR_OUT_OF_HOST_MEMORY;
    }
    size_t at = 0;
    for (int i = 0; i < n; i++) {
        *parts[i].at = mem + at;
        at += parts[i].n;
    }
    forward(p, &s, &a, y);
    if (p->dy.data) {
        backward(p, &s, &a);
        /* everything is computed: now the outputs */
        if (p->dx.data)
            vka_ref_scatter_dense(&p->dx, a.dx);
        if (p->dkv.data)
            vka_ref_scatter_dense(&p->dkv, a.dc);
        if (p->dvalue.data)
            vka_ref_scatter_dense(&p->dvalue, a.dcv);
        for (int i = 0; i < VKA_GRADS; i++)
            if (p->grads[i].data)
                vka_ref_scatter_dense(&p->grads[i], a.g[i]);
    }
    free(mem);
    return VKATTN_SUCCESS;
}
