/* The finite-difference harness of the reference backward tests: a case's
 * tensors, L = sum(dout * out) through vkattn_ref_attention, and every
 * gradient of vkattn_ref_attention_backward against its 4-point central
 * difference. */
#include "test_reference_backward.h"

#include <math.h>
#include <stdlib.h>

#define F32 VKATTN_DTYPE_F32

float *bwd_values(test_rng *r, size_t n, float amp)
{
    float *x = test_alloc(n * sizeof *x);
    for (size_t i = 0; i < n; i++)
        x[i] = ldexpf(roundf(ldexpf(test_rng_uniform(r, -amp, amp), 20)), -20);
    return x;
}

/* A case's tensors and the forward call over them. */
typedef struct bwd_data {
    float *q, *k, *v, *dout, *out, *sinks, *slopes, *hm;
    void *mask;
    uint8_t *pad;
    size_t n[4]; /* elements of q, k, v, sinks */
    size_t nout;
    vkattn_ref_attention_args fwd;
} bwd_data;

/* The mask of `c` (rank, shape, dtype), with some hidden keys; dead rows
 * hide row 1 of the first (b, h) entirely. */
static void make_mask(const bwd_case *c, test_rng *r, bwd_data *d)
{
    const int64_t B = c->B, Hq = c->Hq, Tq = c->Tq, Tk = c->Tk;
    int64_t s[4];
    uint32_t rank;
    vkattn_dtype dt;
    switch (c->mask) {
    case BWD_MASK_ADD_F32:
        rank = 4, dt = F32, s[0] = B, s[1] = Hq, s[2] = Tq, s[3] = Tk;
        break;
    case BWD_MASK_ADD_F16:
        rank = 4, dt = VKATTN_DTYPE_F16, s[0] = B, s[1] = 1, s[2] = Tq, s[3] = Tk;
        break;
    case BWD_MASK_ADD_BF16:
        rank = 2, dt = VKATTN_DTYPE_BF16, s[0] = Tq, s[1] = Tk;
        break;
    case BWD_MASK_U8_ATTENDS:
        rank = 2, dt = VKATTN_DTYPE_U8, s[0] = Tq, s[1] = Tk;
        break;
    case BWD_MASK_U8_BLOCKS:
        rank = 3, dt = VKATTN_DTYPE_U8, s[0] = B * Hq, s[1] = Tq, s[2] = Tk;
        break;
    default:
        return;
    }
    size_t n = 1;
    for (uint32_t i = 0; i < rank; i++)
        n *= (size_t)s[i];
    d->mask = test_alloc(n * 4);
    const bool u8 = dt == VKATTN_DTYPE_U8;
    const bool blocks = c->mask == BWD_MASK_U8_BLOCKS;
    for (size_t x = 0; x < n; x++) {
        const bool hide = test_rng_below(r, 5) == 0;
        if (u8) {
            /* any nonzero counts: 1 or 9 */
            uint8_t set = (uint8_t)(1 + 8 * test_rng_below(r, 2));
            ((uint8_t *)d->mask)[x] = hide == blocks ? set : 0;
        } else {
            float val = hide ? -INFINITY : test_rng_uniform(r, -1.5f, 1.5f);
            if (dt == F32)
                ((float *)d->mask)[x] = val;
            else if (dt == VKATTN_DTYPE_F16)
                ((uint16_t *)d->mask)[x] = vkattn_f32_to_f16(val);
            else
                ((uint16_t *)d->mask)[x] = vkattn_f32_to_bf16(val);
        }
    }
    if (c->dead_rows) /* row 1 of mask entry 0: every key hidden */
        for (int64_t j = 0; j < Tk; j++) {
            size_t x = (size_t)(Tk + j);
            if (u8)
                ((uint8_t *)d->mask)[x] = blocks ? 1 : 0;
            else if (dt == F32)
                ((float *)d->mask)[x] = -INFINITY;
            else if (dt == VKATTN_DTYPE_F16)
                ((uint16_t *)d->mask)[x] = vkattn_f32_to_f16(-INFINITY);
            else
                ((uint16_t *)d->mask)[x] = vkattn_f32_to_bf16(-INFINITY);
        }
    d->fwd.mask = vkattn_host_tensor_make(d->mask, dt, rank, s);
    d->fwd.bool_mask = blocks ? VKATTN_BOOL_MASK_TRUE_BLOCKS : VKATTN_BOOL_MASK_TRUE_ATTENDS;
}

static void make_data(const bwd_case *c, bwd_data *d)
{
    memset(d, 0, sizeof *d);
    test_rng r = test_rng_seed(0x5eed + (uint64_t)c->Tq * 31 + (uint64_t)c->Tk);
    const int64_t B = c->B, Hq = c->Hq, Hkv = c->Hkv;
    int64_t qs[4] = {B, Hq, c->Tq, c->Dk}, ks[4] = {B, Hkv, c->Tk, c->Dk};
    int64_t vs[4] = {B, Hkv, c->Tk, c->Dv}, os[4] = {B, Hq, c->Tq, c->Dv};
    d->n[0] = (size_t)(B * Hq * c->Tq * c->Dk);
    d->n[1] = (size_t)(B * Hkv * c->Tk * c->Dk);
    d->n[2] = (size_t)(B * Hkv * c->Tk * c->Dv);
    d->nout = (size_t)(B * Hq * c->Tq * c->Dv);
    d->q = bwd_values(&r, d->n[0], 1.5f);
    d->k = bwd_values(&r, d->n[1], 1.5f);
    d->v = bwd_values(&r, d->n[2], 1.0f);
    d->dout = bwd_values(&r, d->nout, 1.0f);
    d->out = test_alloc(d->nout * 4);
    vkattn_ref_attention_args *a = &d->fwd;
    a->q = vkattn_host_tensor_make(d->q, F32, 4, qs);
    a->k = vkattn_host_tensor_make(d->k, F32, 4, ks);
    a->v = vkattn_host_tensor_make(d->v, F32, 4, vs);
    a->out = vkattn_host_tensor_make(d->out, F32, 4, os);
    a->causal = c->causal;
    a->causal_align = c->top_left ? VKATTN_CAUSAL_TOP_LEFT : VKATTN_CAUSAL_BOTTOM_RIGHT;
    a->window = c->window;
    a->softcap = c->softcap;
    a->scale = c->scale;
    a->dropout_p = c->dropout_p;
    a->dropout_seed = 0x9e3779b97f4a7c15ull;
    int64_t hs[1] = {Hq}, bh[2] = {B, Hq}, ps[2] = {B, c->Tk};
    if (c->sinks) {
        d->n[3] = (size_t)Hq;
        d->sinks = bwd_values(&r, d->n[3], 1.0f);
        a->sinks = vkattn_host_tensor_make(d->sinks, F32, 1, hs);
    }
    if (c->alibi == 1) {
        d->slopes = test_alloc((size_t)Hq * 4);
        for (int64_t h = 0; h < Hq; h++)
            d->slopes[h] = 0.05f + 0.15f * (float)h;
        a->alibi_slopes = vkattn_host_tensor_make(d->slopes, F32, 1, hs);
    } else if (c->alibi == 2) {
        a->alibi_max_bias = 4.0f;
    }
    if (c->head_mask) {
        static const float gates[4] = {1.0f, 0.5f, 0.0f, 1.5f};
        d->hm = test_alloc((size_t)(B * Hq) * 4);
        for (int64_t x = 0; x < B * Hq; x++)
            d->hm[x] = gates[(x + x / Hq) % 4];
        a->head_mask = vkattn_host_tensor_make(d->hm, F32, 2, bh);
    }
    if (c->key_padding) {
        d->pad = test_alloc((size_t)(B * c->Tk));
        for (int64_t x = 0; x < B * c->Tk; x++)
            d->pad[x] = test_rng_below(&r, 4) != 0;
        d->pad[0] = 1;    /* batch row 0 keeps a key */
        if (c->dead_rows) /* the last batch row is all padding */
            memset(d->pad + (B - 1) * c->Tk, 0, (size_t)c->Tk);
        a->key_padding = vkattn_host_tensor_make(d->pad, VKATTN_DTYPE_U8, 2, ps);
    }
    make_mask(c, &r, d);
}

static void free_data(bwd_data *d)
{
    free(d->q), free(d->k), free(d->v), free(d->dout), free(d->out), free(d->sinks);
    free(d->slopes), free(d->hm), free(d->mask), free(d->pad);
}

/* L = sum(dout * out) of one forward call. */
static double loss(bwd_data *d)
{
    char err[512] = "";
    if (vkattn_ref_attention(&d->fwd, err, sizeof err) != VKATTN_SUCCESS)
        fail_msg("forward: %s", err);
    double l = 0.0;
    for (size_t x = 0; x < d->nout; x++)
        l += (double)d->dout[x] * d->out[x];
    return l;
}

/* dL/dx at x (an input element) by the 4-point central difference. */
static double numeric(bwd_data *d, float *x)
{
    const float x0 = *x, h = 0x1p-7f;
    double l[4];
    const float at[4] = {x0 + h, x0 - h, x0 + 2 * h, x0 - 2 * h};
    for (int s = 0; s < 4; s++) {
        *x = at[s];
        l[s] = loss(d);
    }
    *x = x0;
    return (8.0 * (l[0] - l[1]) - (l[2] - l[3])) / (12.0 * (double)h);
}

void bwd_check_case(const bwd_case *c, bwd_errors *e)
{
    static const char *const names[4] = {"dq", "dk", "dv", "dsinks"};
    bwd_data d;
    make_data(c, &d);
    float *grad[4];
    for (int t = 0; t < 4; t++)
        grad[t] = test_alloc((d.n[t] ? d.n[t] : 1) * 4);
    vkattn_ref_attention_backward_args b = {.forward = d.fwd};
    int64_t os[4] = {c->B, c->Hq, c->Tq, c->Dv}, hs[1] = {c->Hq};
    b.forward.out = (vkattn_host_tensor){0}; /* not read */
    b.dout = vkattn_host_tensor_make(d.dout, F32, 4, os);
    b.dq = vkattn_host_tensor_make(grad[0], F32, 4, d.fwd.q.shape);
    b.dk = vkattn_host_tensor_make(grad[1], F32, 4, d.fwd.k.shape);
    b.dv = vkattn_host_tensor_make(grad[2], F32, 4, d.fwd.v.shape);
    if (c->sinks)
        b.dsinks = vkattn_host_tensor_make(grad[3], F32, 1, hs);
    char err[512] = "";
    if (vkattn_ref_attention_backward(&b, err, sizeof err) != VKATTN_SUCCESS)
        fail_msg("%s: backward: %s", c->name, err);
    float *input[4] = {d.q, d.k, d.v, d.sinks};
    memset(e, 0, sizeof *e);
    for (int t = 0; t < 4; t++) {
        double *fd = test_alloc((d.n[t] ? d.n[t] : 1) * sizeof *fd);
        for (size_t x = 0; x < d.n[t]; x++) {
            fd[x] = numeric(&d, &input[t][x]);
            if (!isfinite(grad[t][x]))
                fail_msg("%s: %s[%zu] is %g", c->name, names[t], x, (double)grad[t][x]);
            e->max[t] = fmax(e->max[t], fabs((double)grad[t][x]));
        }
        size_t worst = 0;
        for (size_t x = 0; x < d.n[t]; x++) {
            double err_x = fabs(fd[x] - grad[t][x]);
            if (err_x > e->err[t])
                e->err[t] = err_x, worst = x;
        }
        if (e->err[t] > BWD_REL_TOL * e->max[t] + BWD_ABS_TOL)
            fail_msg("%s: %s[%zu] is %.9g, the finite difference %.9g: error %.3g over the "
                     "tolerance %.3g (max |%s| %.3g)",
                     c->name, names[t], worst, (double)grad[t][worst], fd[worst], e->err[t],
                     BWD_REL_TOL * e->max[t] + BWD_ABS_TOL, names[t], e->max[t]);
        free(fd);
    }
    print_message("%-28s max|fd - analytic| (max|analytic|): dq %.2e (%.2f)  dk %.2e (%.2f)  "
                  "dv %.2e (%.2f)  dsinks %.2e (%.2f)\n",
                  c->name, e->err[0], e->max[0], e->err[1], e->max[1], e->err[2], e->max[2],
                  e->err[3], e->max[3]);
    for (int t = 0; t < 4; t++)
        free(grad[t]);
    free_data(&d);
}
