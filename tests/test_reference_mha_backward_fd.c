/* The finite-difference harness of the MHA layer's reference backward: a
 * case's layer and inputs, L = sum(y * dy) through the double forward
 * (vka_ref_mha_forward_double, itself checked against vkattn_ref_mha), and
 * every gradient of vkattn_ref_mha_backward against its 4-point central
 * difference, element by element. */
#include "test_reference_mha_backward.h"

#include "ref/ref_backward.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define F32 VKATTN_DTYPE_F32

float *mbw_values(test_rng *r, size_t n, float amp)
{
    float *x = test_alloc(n * sizeof *x);
    for (size_t i = 0; i < n; i++)
        x[i] = ldexpf(roundf(ldexpf(test_rng_uniform(r, -amp, amp), 20)), -20);
    return x;
}

/* An input that gets a gradient: its values and where the analytic
 * gradient of each went. */
typedef struct param {
    const char *name;
    float *x, *grad;
    size_t n;
} param;

enum { MAX_PARAMS = 16 };

typedef struct mbw_data {
    vkattn_mha_desc desc;
    vkattn_mha_weights w;
    vkattn_ref_mha_args fwd;
    int64_t B, Tq, Tk;
    size_t dm, dkv, dvin, qw, kw, vw, ow, dk;
    float *x, *kv, *value, *dy, *y;
    float *wqkv, *bqkv, *wo, *bo, *qn, *kn, *sinks, *slopes; /* wq|wk|wv rows back to back */
    void *mask;
    uint8_t *pad;
    int32_t *pos;
    double *yd; /* the double forward's output */
    /* the analytic gradients: gw, gb as wqkv's and bqkv's layout */
    float *gx, *gkv, *gvalue, *gw, *gb, *gwo, *gbo, *gqn, *gkn, *gsinks;
    param params[MAX_PARAMS];
    int nparams;
} mbw_data;

static void make_mask(const mbw_case *c, test_rng *r, mbw_data *d)
{
    const int64_t B = d->B, Hq = c->Hq, Tq = d->Tq, Tk = d->Tk;
    int64_t s[4];
    uint32_t rank;
    vkattn_dtype dt = F32;
    switch (c->mask) {
    case MBW_MASK_ADD:
        rank = 4, s[0] = B, s[1] = Hq, s[2] = Tq, s[3] = Tk;
        break;
    case MBW_MASK_ADD_2D:
        rank = 2, s[0] = Tq, s[1] = Tk;
        break;
    case MBW_MASK_ATTENDS:
        rank = 2, dt = VKATTN_DTYPE_U8, s[0] = Tq, s[1] = Tk;
        break;
    case MBW_MASK_BLOCKS:
        rank = 3, dt = VKATTN_DTYPE_U8, s[0] = B * Hq, s[1] = Tq, s[2] = Tk;
        break;
    default:
        return;
    }
    size_t n = 1;
    for (uint32_t i = 0; i < rank; i++)
        n *= (size_t)s[i];
    d->mask = test_alloc(n * 4);
    const bool blocks = c->mask == MBW_MASK_BLOCKS;
    for (size_t e = 0; e < n; e++) {
        const bool hide = test_rng_below(r, 4) == 0;
        if (dt == VKATTN_DTYPE_U8) /* any nonzero counts: 1 or 9 */
            ((uint8_t *)d->mask)[e] = hide == blocks ? (uint8_t)(1 + 8 * test_rng_below(r, 2)) : 0;
        else
            ((float *)d->mask)[e] = hide ? -INFINITY : test_rng_uniform(r, -1.0f, 1.0f);
    }
    if (c->mask == MBW_MASK_ADD_2D) /* row 1 sees nothing: zeros, no gradient */
        for (int64_t j = 0; j < Tk; j++)
            ((float *)d->mask)[Tk + j] = -INFINITY;
    d->fwd.mask = vkattn_host_tensor_make(d->mask, dt, rank, s);
    d->fwd.bool_mask = blocks ? VKATTN_BOOL_MASK_TRUE_BLOCKS : VKATTN_BOOL_MASK_TRUE_ATTENDS;
}

static void add_param(mbw_data *d, const char *name, float *x, float *grad, size_t n)
{
    assert_true(d->nparams < MAX_PARAMS);
    d->params[d->nparams++] = (param){name, x, grad, n};
}

static void make_layer(const mbw_case *c, test_rng *r, mbw_data *d)
{
    vkattn_mha_desc *ds = &d->desc;
    ds->embed_dim = c->Dm;
    ds->num_heads = c->Hq;
    ds->num_kv_heads = c->Hkv;
    ds->head_dim = c->Dk;
    ds->v_head_dim = c->Dv;
    ds->kv_dim = c->Dkv;
    ds->value_dim = c->Dvin;
    ds->bias = c->bias;
    ds->scale = c->scale;
    ds->rope = c->rope;
    ds->qk_norm = c->qk_norm;
    ds->norm_eps = c->norm_eps;
    ds->window = c->window;
    ds->softcap = c->softcap;
    ds->sinks = c->sinks;
    ds->alibi = c->alibi != 0;
    d->dk = c->Dk ? c->Dk : c->Dm / c->Hq;
    const size_t dv = c->Dv ? c->Dv : d->dk;
    d->dm = c->Dm;
    d->dkv = c->Dkv ? c->Dkv : c->Dm;
    d->dvin = c->Dvin ? c->Dvin : d->dkv;
    d->qw = c->Hq * d->dk;
    d->kw = c->Hkv * d->dk;
    d->vw = c->Hkv * dv;
    d->ow = c->Hq * dv;
    const size_t nwq = d->qw * d->dm, nwk = d->kw * d->dkv, nwv = d->vw * d->dvin;
    const size_t nb = d->qw + d->kw + d->vw;
    d->wqkv = mbw_values(r, nwq + nwk + nwv, 0.6f);
    d->wo = mbw_values(r, d->dm * d->ow, 0.6f);
    d->gw = test_alloc((nwq + nwk + nwv) * 4);
    d->gwo = test_alloc(d->dm * d->ow * 4);
    vkattn_mha_weights *w = &d->w;
    if (c->packed) {
        w->wqkv = d->wqkv;
        add_param(d, "wqkv", d->wqkv, d->gw, nwq + nwk + nwv);
    } else {
        w->wq = d->wqkv, w->wk = d->wqkv + nwq, w->wv = d->wqkv + nwq + nwk;
        add_param(d, "wq", d->wqkv, d->gw, nwq);
        add_param(d, "wk", d->wqkv + nwq, d->gw + nwq, nwk);
        add_param(d, "wv", d->wqkv + nwq + nwk, d->gw + nwq + nwk, nwv);
    }
    w->wo = d->wo;
    add_param(d, "wo", d->wo, d->gwo, d->dm * d->ow);
    if (c->bias) {
        d->bqkv = mbw_values(r, nb, 0.3f);
        d->bo = mbw_values(r, d->dm, 0.3f);
        d->gb = test_alloc(nb * 4);
        d->gbo = test_alloc(d->dm * 4);
        if (c->packed) {
            w->bqkv = d->bqkv;
            add_param(d, "bqkv", d->bqkv, d->gb, nb);
        } else {
            w->bq = d->bqkv, w->bk = d->bqkv + d->qw, w->bv = d->bqkv + d->qw + d->kw;
            add_param(d, "bq", d->bqkv, d->gb, d->qw);
            add_param(d, "bk", d->bqkv + d->qw, d->gb + d->qw, d->kw);
            add_param(d, "bv", d->bqkv + d->qw + d->kw, d->gb + d->qw + d->kw, d->vw);
        }
        w->bo = d->bo;
        add_param(d, "bo", d->bo, d->gbo, d->dm);
    }
    if (c->qk_norm) {
        d->qn = mbw_values(r, d->dk, 0.5f);
        d->kn = mbw_values(r, d->dk, 0.5f);
        for (size_t e = 0; e < d->dk; e++)
            d->qn[e] += 1.0f, d->kn[e] += 1.0f;
        d->gqn = test_alloc(d->dk * 4);
        d->gkn = test_alloc(d->dk * 4);
        w->q_norm = d->qn, w->k_norm = d->kn;
        add_param(d, "q_norm", d->qn, d->gqn, d->dk);
        add_param(d, "k_norm", d->kn, d->gkn, d->dk);
    }
    if (c->sinks) {
        d->sinks = mbw_values(r, c->Hq, 1.0f);
        d->gsinks = test_alloc(c->Hq * 4);
        w->sinks = d->sinks;
        add_param(d, "sinks", d->sinks, d->gsinks, c->Hq);
    }
    if (c->alibi == 1) {
        d->slopes = test_alloc(c->Hq * 4);
        for (uint32_t h = 0; h < c->Hq; h++)
            d->slopes[h] = 0.1f + 0.2f * (float)h;
        w->alibi_slopes = d->slopes;
    }
}

static void make_data(const mbw_case *c, mbw_data *d)
{
    memset(d, 0, sizeof *d);
    test_rng r = test_rng_seed(0x3bd + (uint64_t)c->Tq * 131 + (uint64_t)c->Dm * 7 + c->Hq);
    make_layer(c, &r, d);
    d->B = c->B, d->Tq = c->Tq, d->Tk = c->cross ? c->Tk : c->Tq;
    const int64_t B = d->B, Tq = d->Tq, Tk = d->Tk;
    vkattn_ref_mha_args *a = &d->fwd;
    int64_t xs[3] = {B, Tq, (int64_t)d->dm}, ks[3] = {B, Tk, (int64_t)d->dkv};
    int64_t vs[3] = {B, Tk, (int64_t)d->dvin};
    const size_t nx = (size_t)(B * Tq) * d->dm, nk = (size_t)(B * Tk) * d->dkv,
                 nv = (size_t)(B * Tk) * d->dvin;
    d->x = mbw_values(&r, nx, 1.0f);
    d->dy = mbw_values(&r, nx, 1.0f);
    d->y = test_alloc(nx * 4);
    d->yd = test_alloc(nx * sizeof(double));
    d->gx = test_alloc(nx * 4);
    a->x = vkattn_host_tensor_make(d->x, F32, 3, xs);
    a->y = vkattn_host_tensor_make(d->y, F32, 3, xs);
    add_param(d, "x", d->x, d->gx, nx);
    if (c->cross) {
        d->kv = mbw_values(&r, nk, 1.0f);
        d->gkv = test_alloc(nk * 4);
        a->kv = vkattn_host_tensor_make(d->kv, F32, 3, ks);
        add_param(d, "kv", d->kv, d->gkv, nk);
    }
    if (c->value) {
        d->value = mbw_values(&r, nv, 1.0f);
        d->gvalue = test_alloc(nv * 4);
        a->value = vkattn_host_tensor_make(d->value, F32, 3, vs);
        add_param(d, "value", d->value, d->gvalue, nv);
    }
    a->causal = c->causal;
    a->causal_align = c->top_left ? VKATTN_CAUSAL_TOP_LEFT : VKATTN_CAUSAL_BOTTOM_RIGHT;
    a->dropout_p = c->dropout_p;
    a->dropout_seed = 0x243f6a8885a308d3ull;
    if (c->key_padding) {
        int64_t ps[2] = {B, Tk};
        d->pad = test_alloc((size_t)(B * Tk));
        for (int64_t e = 0; e < B * Tk; e++)
            d->pad[e] = test_rng_below(&r, 4) != 0;
        a->key_padding = vkattn_host_tensor_make(d->pad, VKATTN_DTYPE_U8, 2, ps);
    }
    if (c->positions) { /* batch row b left-padded by b tokens, from 2b */
        int64_t ps[2] = {B, Tq};
        d->pos = test_alloc((size_t)(B * Tq) * 4);
        for (int64_t b = 0; b < B; b++)
            for (int64_t t = 0; t < Tq; t++)
                d->pos[b * Tq + t] = (int32_t)((t >= b ? t - b : 0) + 2 * b);
        a->positions = vkattn_host_tensor_make(d->pos, VKATTN_DTYPE_I32, 2, ps);
    }
    make_mask(c, &r, d);
}

static void free_data(mbw_data *d)
{
    void *all[] = {d->x,   d->kv,  d->value, d->dy,  d->y,     d->wqkv,   d->bqkv,
                   d->wo,  d->bo,  d->qn,    d->kn,  d->sinks, d->slopes, d->mask,
                   d->pad, d->pos, d->yd,    d->gx,  d->gkv,   d->gvalue, d->gw,
                   d->gb,  d->gwo, d->gbo,   d->gqn, d->gkn,   d->gsinks};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        free(all[i]);
}

/* L = sum(y * dy) through the double forward. */
static double loss(mbw_data *d)
{
    char err[512] = "";
    if (vka_ref_mha_forward_double(&d->desc, &d->w, &d->fwd, d->yd, err, sizeof err) !=
        VKATTN_SUCCESS)
        fail_msg("double forward: %s", err);
    double l = 0.0;
    const size_t n = (size_t)(d->B * d->Tq) * d->dm;
    for (size_t e = 0; e < n; e++)
        l += d->yd[e] * d->dy[e];
    return l;
}

/* dL/dx at the input element x, 4-point central difference. */
static double numeric(mbw_data *d, float *x)
{
    const float x0 = *x, h = 0x1p-8f;
    const float at[4] = {x0 + h, x0 - h, x0 + 2 * h, x0 - 2 * h};
    double l[4];
    for (int s = 0; s < 4; s++) {
        *x = at[s];
        l[s] = loss(d);
    }
    *x = x0;
    return (8.0 * (l[0] - l[1]) - (l[2] - l[3])) / (12.0 * (double)h);
}

/* The backward call asking for every gradient the case has. */
static void analytic(const mbw_case *c, mbw_data *d)
{
    vkattn_ref_mha_backward_args b = {.forward = d->fwd};
    b.forward.y = (vkattn_host_tensor){0}; /* not read */
    b.dy = d->fwd.x;
    b.dy.data = d->dy;
    b.dx = d->fwd.x;
    b.dx.data = d->gx;
    if (c->cross) {
        b.dkv = d->fwd.kv;
        b.dkv.data = d->gkv;
    }
    if (c->value) {
        b.dvalue = d->fwd.value;
        b.dvalue.data = d->gvalue;
    }
    int64_t sq[2] = {(int64_t)d->qw, (int64_t)d->dm}, sk[2] = {(int64_t)d->kw, (int64_t)d->dkv};
    int64_t sv[2] = {(int64_t)d->vw, (int64_t)d->dvin}, so[2] = {(int64_t)d->dm, (int64_t)d->ow};
    vkattn_ref_mha_grads *g = &b.grads;
    g->wq = vkattn_host_tensor_make(d->gw, F32, 2, sq);
    g->wk = vkattn_host_tensor_make(d->gw + d->qw * d->dm, F32, 2, sk);
    g->wv = vkattn_host_tensor_make(d->gw + d->qw * d->dm + d->kw * d->dkv, F32, 2, sv);
    g->wo = vkattn_host_tensor_make(d->gwo, F32, 2, so);
    if (c->bias) {
        g->bq = vkattn_host_tensor_make(d->gb, F32, 1, &sq[0]);
        g->bk = vkattn_host_tensor_make(d->gb + d->qw, F32, 1, &sk[0]);
        g->bv = vkattn_host_tensor_make(d->gb + d->qw + d->kw, F32, 1, &sv[0]);
        g->bo = vkattn_host_tensor_make(d->gbo, F32, 1, &so[0]);
    }
    int64_t dh = (int64_t)d->dk, hq = c->Hq;
    if (c->qk_norm) {
        g->q_norm = vkattn_host_tensor_make(d->gqn, F32, 1, &dh);
        g->k_norm = vkattn_host_tensor_make(d->gkn, F32, 1, &dh);
    }
    if (c->sinks)
        g->sinks = vkattn_host_tensor_make(d->gsinks, F32, 1, &hq);
    char err[512] = "";
    if (vkattn_ref_mha_backward(&d->desc, &d->w, &b, err, sizeof err) != VKATTN_SUCCESS)
        fail_msg("%s: backward: %s", c->name, err);
}

/* The double forward against vkattn_ref_mha; returns the relative error. */
static double check_forward(const mbw_case *c, mbw_data *d)
{
    char err[512] = "";
    if (vkattn_ref_mha(&d->desc, &d->w, &d->fwd, err, sizeof err) != VKATTN_SUCCESS)
        fail_msg("%s: vkattn_ref_mha: %s", c->name, err);
    loss(d);
    double e = 0.0, m = 0.0;
    const size_t n = (size_t)(d->B * d->Tq) * d->dm;
    for (size_t i = 0; i < n; i++) {
        e = fmax(e, fabs(d->y[i] - d->yd[i]));
        m = fmax(m, fabs(d->yd[i]));
    }
    if (!(m > 1e-3) || !(e <= MBW_FWD_TOL * m))
        fail_msg("%s: double forward vs vkattn_ref_mha: err %g, max |y| %g", c->name, e, m);
    return e / m;
}

void mbw_check_case(const mbw_case *c, mbw_result *res)
{
    mbw_data d;
    make_data(c, &d);
    memset(res, 0, sizeof *res);
    res->fwd_rel = check_forward(c, &d);
    analytic(c, &d);
    for (int p = 0; p < d.nparams; p++) {
        const param *pr = &d.params[p];
        double err = 0.0, max = 0.0;
        size_t worst = 0;
        for (size_t e = 0; e < pr->n; e++) {
            const double an = pr->grad[e], fd = numeric(&d, &pr->x[e]);
            if (!isfinite(an) || !isfinite(fd))
                fail_msg("%s: d%s[%zu] not finite: analytic %g, numeric %g", c->name, pr->name, e,
                         an, fd);
            if (fabs(fd - an) > err)
                err = fabs(fd - an), worst = e;
            max = fmax(max, fabs(an));
        }
        /* Softmax ignores what every score of a row shares: bk adds
         * dot(q_i, bk) to each, so dbk is 0 unless QK-norm or RoPE come
         * between (its differences are then checked against 0). Every
         * other gradient must be nonzero: a case cannot pass by computing
         * nothing. */
        const bool zero_ok = !strcmp(pr->name, "bk") && !c->qk_norm && c->rope.theta == 0.0f;
        if (!zero_ok && !(max > 1e-4))
            fail_msg("%s: d%s is all (near) zero: max %g", c->name, pr->name, max);
        if (zero_ok)
            max = 1.0; /* judged as absolute errors */
        if (!(err <= MBW_REL_TOL * max + MBW_ABS_TOL))
            fail_msg("%s: d%s[%zu] off by %g (max |d%s| %g, tolerance %g)", c->name, pr->name,
                     worst, err, pr->name, max, MBW_REL_TOL * max + MBW_ABS_TOL);
        if (err / max > res->worst_rel)
            res->worst_rel = err / max, res->worst_of = pr->name;
    }
    free_data(&d);
}
