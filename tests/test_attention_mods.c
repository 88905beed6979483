/* vkattn_attention's score modifiers (sliding window, softcap, sinks, ALiBi,
 * top-left causal alignment) and LSE output against vkattn_ref_attention on
 * all four kernel policies: each alone and combined with masks, padding,
 * GQA/MQA, f16 and causal both ways; fully hidden rows; the weights kernel;
 * vkattn_attention_merge (two halves of the keys merged = the whole call);
 * the chunk helper with a window; and bad input (named errors, nothing
 * written: test_attention_mods_errors.c). */
#include "test_policy.h"
#include "test_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

enum { MASK_NONE, MASK_RANDOM, MASK_HIDE_ROWS };

typedef struct mod_case {
    uint32_t B, Hq, Hkv, Tq, Tk, D;
    vkattn_dtype dt; /* q, k, v, out */
    bool causal, top_left;
    uint32_t window;
    float softcap;
    bool sinks, slopes;
    float max_bias;
    bool lse;
    int mask;
    bool padding;
    int weights; /* 0, 3 or 4 */
} mod_case;

static void describe(const mod_case *c, uint32_t policy, char *buf, size_t size)
{
    snprintf(buf, size,
             "%s B%u Hq%u Hkv%u Tq%u Tk%u D%u %s causal%d%s window%u softcap%g sinks%d slopes%d "
             "max_bias%g lse%d mask%d pad%d weights%d",
             test_policies[policy].name, c->B, c->Hq, c->Hkv, c->Tq, c->Tk, c->D,
             vkattn_dtype_name(c->dt), c->causal, c->top_left ? "(top-left)" : "", c->window,
             (double)c->softcap, c->sinks, c->slopes, (double)c->max_bias, c->lse, c->mask,
             c->padding, c->weights);
}

static void assert_no_nan(const float *x, size_t n, const char *what)
{
    for (size_t i = 0; i < n; i++)
        if (isnan(x[i]))
            fail_msg("%s: element %zu is NaN", what, i);
}

/* Host data of a case, rounded to the device's dtypes. */
typedef struct case_data {
    float *q, *k, *v, *mask, *sinks, *slopes;
    uint8_t *pad;
    size_t nq, nk, nm, nl, nw;
    int64_t qs[4], ks[4], ms[4], ls[3], hs[1], ws[4], ps[2];
} case_data;

static void make_data(const mod_case *c, uint64_t seed, case_data *d)
{
    memset(d, 0, sizeof *d);
    test_rng rng = test_rng_seed(seed);
    d->nq = (size_t)c->B * c->Hq * c->Tq * c->D;
    d->nk = (size_t)c->B * c->Hkv * c->Tk * c->D;
    d->nm = (size_t)c->B * c->Hq * c->Tq * c->Tk;
    d->nl = (size_t)c->B * c->Hq * c->Tq;
    d->q = test_random_array(&rng, d->nq, 2.0f, c->dt); /* scores up to ~+-10 */
    d->k = test_random_array(&rng, d->nk, 2.0f, c->dt);
    d->v = test_random_array(&rng, d->nk, 1.0f, c->dt);
    int64_t qs[4] = {c->B, c->Hq, c->Tq, c->D}, ks[4] = {c->B, c->Hkv, c->Tk, c->D};
    int64_t ms[4] = {c->B, c->Hq, c->Tq, c->Tk}, ls[3] = {c->B, c->Hq, c->Tq};
    memcpy(d->qs, qs, sizeof qs), memcpy(d->ks, ks, sizeof ks), memcpy(d->ms, ms, sizeof ms);
    memcpy(d->ls, ls, sizeof ls);
    d->hs[0] = c->Hq;
    d->ps[0] = c->B, d->ps[1] = c->Tk;
    if (c->mask != MASK_NONE) {
        d->mask = malloc(d->nm * sizeof *d->mask);
        assert_non_null(d->mask);
        for (size_t i = 0; i < d->nm; i++) {
            float val = test_rng_uniform(&rng, -2.0f, 2.0f);
            bool hide_row = c->mask == MASK_HIDE_ROWS && (i / c->Tk) % 3 == 1;
            if (hide_row || test_rng_below(&rng, 100) < 15)
                val = -INFINITY;
            d->mask[i] = val;
        }
    }
    if (c->padding) {
        d->pad = malloc((size_t)c->B * c->Tk);
        assert_non_null(d->pad);
        for (size_t i = 0; i < (size_t)c->B * c->Tk; i++)
            d->pad[i] = test_rng_below(&rng, 100) < 25 ? 0 : 1;
    }
    if (c->sinks) {
        d->sinks = malloc(c->Hq * sizeof(float));
        assert_non_null(d->sinks);
        for (uint32_t h = 0; h < c->Hq; h++)
            d->sinks[h] = test_rng_uniform(&rng, -2.0f, 4.0f);
    }
    if (c->slopes) {
        d->slopes = malloc(c->Hq * sizeof(float));
        assert_non_null(d->slopes);
        for (uint32_t h = 0; h < c->Hq; h++)
            d->slopes[h] = test_rng_uniform(&rng, 0.0f, 0.5f);
    }
    if (c->weights) {
        int64_t ws[4] = {c->B, c->Hq, c->Tq, c->Tk};
        if (c->weights == 3)
            ws[1] = c->Tq, ws[2] = c->Tk;
        memcpy(d->ws, ws, sizeof ws);
        d->nw = c->weights == 3 ? (size_t)c->B * c->Tq * c->Tk : d->nm;
    }
}

static void free_data(case_data *d)
{
    free(d->q), free(d->k), free(d->v), free(d->mask), free(d->sinks), free(d->slopes);
    free(d->pad);
}

static void fill_nan(float *x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        x[i] = NAN;
}

static void run_case(test_gpu *g, uint32_t policy, const void *arg)
{
    const mod_case *c = arg;
    vkattn_context *ctx = g->ctx;
    char what[320];
    describe(c, policy, what, sizeof what);
    case_data d;
    make_data(c, 1000u + c->Tq * 7u + c->Tk + c->window, &d);

    float *want = malloc(d.nq * 4), *got = malloc(d.nq * 4);
    float *want_lse = malloc(d.nl * 4), *got_lse = malloc(d.nl * 4);
    float *want_w = malloc((d.nw + 1) * 4), *got_w = malloc((d.nw + 1) * 4);
    assert_true(want && got && want_lse && got_lse && want_w && got_w);
    fill_nan(want, d.nq), fill_nan(got, d.nq), fill_nan(want_lse, d.nl), fill_nan(got_lse, d.nl);
    fill_nan(want_w, d.nw + 1), fill_nan(got_w, d.nw + 1);

    vkattn_ref_attention_args r = {
        .q = vkattn_host_tensor_make(d.q, VKATTN_DTYPE_F32, 4, d.qs),
        .k = vkattn_host_tensor_make(d.k, VKATTN_DTYPE_F32, 4, d.ks),
        .v = vkattn_host_tensor_make(d.v, VKATTN_DTYPE_F32, 4, d.ks),
        .out = vkattn_host_tensor_make(want, VKATTN_DTYPE_F32, 4, d.qs),
        .causal = c->causal,
        .causal_align = c->top_left ? VKATTN_CAUSAL_TOP_LEFT : VKATTN_CAUSAL_BOTTOM_RIGHT,
        .window = c->window,
        .softcap = c->softcap,
        .alibi_max_bias = c->max_bias,
    };
    vkattn_buffer *bq = test_buffer_of(ctx, c->dt, d.q, d.nq);
    vkattn_buffer *bk = test_buffer_of(ctx, c->dt, d.k, d.nk);
    vkattn_buffer *bv = test_buffer_of(ctx, c->dt, d.v, d.nk);
    vkattn_buffer *bo = test_buffer_of(ctx, c->dt, got, d.nq);
    vkattn_buffer *bm = NULL, *bp = NULL, *bs = NULL, *ba = NULL, *bl = NULL, *bw = NULL;
    vkattn_attention_args a = {
        .q = vkattn_tensor_make(bq, 0, c->dt, 4, d.qs),
        .k = vkattn_tensor_make(bk, 0, c->dt, 4, d.ks),
        .v = vkattn_tensor_make(bv, 0, c->dt, 4, d.ks),
        .out = vkattn_tensor_make(bo, 0, c->dt, 4, d.qs),
        .causal = c->causal,
        .causal_align = r.causal_align,
        .window = c->window,
        .softcap = c->softcap,
        .alibi_max_bias = c->max_bias,
    };
    if (d.mask) {
        bm = test_buffer_of(ctx, VKATTN_DTYPE_F32, d.mask, d.nm);
        a.mask = vkattn_tensor_make(bm, 0, VKATTN_DTYPE_F32, 4, d.ms);
        r.mask = vkattn_host_tensor_make(d.mask, VKATTN_DTYPE_F32, 4, d.ms);
    }
    if (d.pad) {
        bp = test_buffer_with(ctx, d.pad, (uint64_t)c->B * c->Tk);
        a.key_padding = vkattn_tensor_make(bp, 0, VKATTN_DTYPE_U8, 2, d.ps);
        r.key_padding = vkattn_host_tensor_make(d.pad, VKATTN_DTYPE_U8, 2, d.ps);
    }
    if (d.sinks) {
        bs = test_buffer_of(ctx, VKATTN_DTYPE_F32, d.sinks, c->Hq);
        a.sinks = vkattn_tensor_make(bs, 0, VKATTN_DTYPE_F32, 1, d.hs);
        r.sinks = vkattn_host_tensor_make(d.sinks, VKATTN_DTYPE_F32, 1, d.hs);
    }
    if (d.slopes) {
        ba = test_buffer_of(ctx, VKATTN_DTYPE_F32, d.slopes, c->Hq);
        a.alibi_slopes = vkattn_tensor_make(ba, 0, VKATTN_DTYPE_F32, 1, d.hs);
        r.alibi_slopes = vkattn_host_tensor_make(d.slopes, VKATTN_DTYPE_F32, 1, d.hs);
    }
    if (c->lse) {
        bl = test_buffer_of(ctx, VKATTN_DTYPE_F32, got_lse, d.nl);
        a.lse = vkattn_tensor_make(bl, 0, VKATTN_DTYPE_F32, 3, d.ls);
        r.lse = vkattn_host_tensor_make(want_lse, VKATTN_DTYPE_F32, 3, d.ls);
    }
    if (c->weights) {
        bw = test_buffer_of(ctx, VKATTN_DTYPE_F32, got_w, d.nw);
        a.weights = vkattn_tensor_make(bw, 0, VKATTN_DTYPE_F32, (uint32_t)c->weights, d.ws);
        r.weights = vkattn_host_tensor_make(want_w, VKATTN_DTYPE_F32, (uint32_t)c->weights, d.ws);
    }
    char err[512] = "";
    if (vkattn_ref_attention(&r, err, sizeof err) != VKATTN_SUCCESS)
        fail_msg("reference failed on %s: %s", what, err);
    TEST_OK(ctx, vkattn_attention(ctx, &a));

    double tol = c->dt == VKATTN_DTYPE_F16 ? TEST_TOL_F16 : TEST_TOL_F32;
    test_download_as(ctx, bo, c->dt, got, d.nq);
    assert_no_nan(got, d.nq, what);
    test_assert_close(got, want, d.nq, tol, what);
    for (size_t i = 0; i < d.nq; i++)
        if (want[i] == 0.0f && got[i] != 0.0f)
            fail_msg("%s: out[%zu] is %g where the reference has an exact 0", what, i,
                     (double)got[i]);
    if (c->lse) {
        TEST_OK(ctx, vkattn_buffer_download(bl, 0, got_lse, d.nl * 4));
        test_assert_lse_close(got_lse, want_lse, d.nl, tol, what);
    }
    if (c->weights) {
        TEST_OK(ctx, vkattn_buffer_download(bw, 0, got_w, d.nw * 4));
        assert_no_nan(got_w, d.nw, what);
        test_assert_close(got_w, want_w, d.nw, tol, what);
    }
    TEST_DESTROY_BUFFERS(bq, bk, bv, bo, bm, bp, bs, ba, bl, bw);
    free(want), free(got), free(want_lse), free(got_lse), free(want_w), free(got_w);
    free_data(&d);
}

/* Runs every case on every policy. */
static void run_all(const mod_case *cases, size_t n)
{
    for (size_t i = 0; i < n; i++)
        test_for_each_policy(0, run_case, &cases[i]);
}

#define F32 VKATTN_DTYPE_F32
#define F16 VKATTN_DTYPE_F16

static void test_each_modifier_alone(void **state)
{
    (void)state;
    static const mod_case cases[] = {
        /* windows smaller and larger than the tiles, causal or not */
        {.B = 1,
         .Hq = 2,
         .Hkv = 2,
         .Tq = 37,
         .Tk = 37,
         .D = 32,
         .dt = F32,
         .causal = true,
         .window = 5},
        {.B = 1,
         .Hq = 2,
         .Hkv = 2,
         .Tq = 70,
         .Tk = 70,
         .D = 32,
         .dt = F32,
         .causal = true,
         .window = 40},
        {.B = 1, .Hq = 2, .Hkv = 1, .Tq = 20, .Tk = 53, .D = 16, .dt = F32, .window = 7},
        {.B = 1, .Hq = 2, .Hkv = 2, .Tq = 9, .Tk = 9, .D = 8, .dt = F32, .window = 1},
        {.B = 1, .Hq = 2, .Hkv = 2, .Tq = 6, .Tk = 11, .D = 8, .dt = F32, .window = 100},
        /* softcap small enough to bite */
        {.B = 2, .Hq = 2, .Hkv = 2, .Tq = 13, .Tk = 29, .D = 40, .dt = F32, .softcap = 2.5f},
        {.B = 1, .Hq = 1, .Hkv = 1, .Tq = 5, .Tk = 9, .D = 64, .dt = F32, .softcap = 0.01f},
        /* sinks, ALiBi by slopes and by max_bias (Hq 6: not a power of two) */
        {.B = 1, .Hq = 3, .Hkv = 3, .Tq = 11, .Tk = 21, .D = 24, .dt = F32, .sinks = true},
        {.B = 1, .Hq = 3, .Hkv = 1, .Tq = 11, .Tk = 21, .D = 24, .dt = F32, .slopes = true},
        {.B = 1, .Hq = 6, .Hkv = 2, .Tq = 12, .Tk = 12, .D = 16, .dt = F32, .max_bias = 8.0f},
        /* top-left causal, Tq < Tk and Tq > Tk */
        {.B = 1,
         .Hq = 2,
         .Hkv = 2,
         .Tq = 7,
         .Tk = 19,
         .D = 16,
         .dt = F32,
         .causal = true,
         .top_left = true},
        {.B = 1,
         .Hq = 2,
         .Hkv = 2,
         .Tq = 19,
         .Tk = 7,
         .D = 16,
         .dt = F32,
         .causal = true,
         .top_left = true},
        /* LSE alone, causal with rows that see nothing (Tq > Tk) */
        {.B = 2,
         .Hq = 2,
         .Hkv = 1,
         .Tq = 15,
         .Tk = 10,
         .D = 32,
         .dt = F32,
         .causal = true,
         .lse = true},
    };
    run_all(cases, sizeof cases / sizeof cases[0]);
}

static void test_modifiers_combined(void **state)
{
    (void)state;
    static const mod_case cases[] = {
        {.B = 2,
         .Hq = 4,
         .Hkv = 2,
         .Tq = 33,
         .Tk = 33,
         .D = 32,
         .dt = F32,
         .causal = true,
         .window = 9,
         .softcap = 4.0f,
         .sinks = true,
         .slopes = true,
         .lse = true,
         .mask = MASK_RANDOM,
         .padding = true},
        {.B = 1,
         .Hq = 4,
         .Hkv = 1,
         .Tq = 17,
         .Tk = 41,
         .D = 64,
         .dt = F16,
         .causal = true,
         .top_left = true,
         .window = 12,
         .softcap = 6.0f,
         .sinks = true,
         .max_bias = 4.0f,
         .lse = true},
        {.B = 2,
         .Hq = 2,
         .Hkv = 2,
         .Tq = 21,
         .Tk = 30,
         .D = 16,
         .dt = F16,
         .window = 6,
         .sinks = true,
         .lse = true,
         .padding = true},
        {.B = 1,
         .Hq = 4,
         .Hkv = 4,
         .Tq = 25,
         .Tk = 25,
         .D = 128,
         .dt = F32,
         .top_left = true,
         .window = 8,
         .slopes = true,
         .softcap = 3.0f,
         .lse = true,
         .mask = MASK_RANDOM},
        {.B = 1,
         .Hq = 8,
         .Hkv = 2,
         .Tq = 40,
         .Tk = 90,
         .D = 40,
         .dt = F16,
         .causal = true,
         .window = 33,
         .max_bias = 8.0f,
         .lse = true},
    };
    run_all(cases, sizeof cases / sizeof cases[0]);
}

static void test_fully_hidden_rows(void **state)
{
    (void)state;
    static const mod_case cases[] = {
        /* mask rows all -inf, with sinks and LSE: zeros and -inf */
        {.B = 1,
         .Hq = 2,
         .Hkv = 1,
         .Tq = 12,
         .Tk = 16,
         .D = 16,
         .dt = F32,
         .sinks = true,
         .lse = true,
         .mask = MASK_HIDE_ROWS,
         .softcap = 3.0f,
         .slopes = true},
        /* bottom-right causal with more queries than keys, windowed */
        {.B = 1,
         .Hq = 2,
         .Hkv = 2,
         .Tq = 20,
         .Tk = 8,
         .D = 32,
         .dt = F16,
         .causal = true,
         .window = 3,
         .sinks = true,
         .lse = true},
    };
    run_all(cases, sizeof cases / sizeof cases[0]);
}

static void test_weights_with_modifiers(void **state)
{
    (void)state;
    static const mod_case cases[] = {
        {.B = 1,
         .Hq = 2,
         .Hkv = 1,
         .Tq = 9,
         .Tk = 17,
         .D = 16,
         .dt = F32,
         .causal = true,
         .window = 4,
         .weights = 4},
        {.B = 1,
         .Hq = 2,
         .Hkv = 2,
         .Tq = 9,
         .Tk = 17,
         .D = 16,
         .dt = F32,
         .softcap = 2.0f,
         .weights = 4},
        {.B = 1,
         .Hq = 2,
         .Hkv = 2,
         .Tq = 9,
         .Tk = 17,
         .D = 16,
         .dt = F32,
         .sinks = true,
         .weights = 3},
        {.B = 1,
         .Hq = 3,
         .Hkv = 1,
         .Tq = 9,
         .Tk = 17,
         .D = 16,
         .dt = F32,
         .max_bias = 8.0f,
         .weights = 4},
        {.B = 2,
         .Hq = 2,
         .Hkv = 2,
         .Tq = 9,
         .Tk = 9,
         .D = 16,
         .dt = F16,
         .causal = true,
         .top_left = true,
         .slopes = true,
         .window = 5,
         .sinks = true,
         .lse = true,
         .mask = MASK_HIDE_ROWS,
         .weights = 4},
    };
    run_all(cases, sizeof cases / sizeof cases[0]);
}

/* ---- merge: attention over keys [0, h) and [h, Tk) merged by LSE equals
 * the call over all keys (and its LSE), f32, f16 and bf16, out-of-place and in
 * place. */

typedef struct merge_case {
    vkattn_dtype dt;
    bool in_place;
    float softcap;
    bool mask;
} merge_case;

static void run_merge(test_gpu *g, uint32_t policy, const void *arg)
{
    const merge_case *mc = arg;
    vkattn_context *ctx = g->ctx;
    const uint32_t B = 2, Hq = 4, Hkv = 2, Tq = 13, Tk = 45, D = 32, h = 19;
    mod_case c = {.B = B,
                  .Hq = Hq,
                  .Hkv = Hkv,
                  .Tq = Tq,
                  .Tk = Tk,
                  .D = D,
                  .dt = mc->dt,
                  .mask = mc->mask ? MASK_HIDE_ROWS : MASK_NONE};
    case_data d;
    make_data(&c, 77 + policy, &d);
    vkattn_dtype dt = mc->dt;
    vkattn_buffer *bq = test_buffer_of(ctx, dt, d.q, d.nq),
                  *bk = test_buffer_of(ctx, dt, d.k, d.nk);
    vkattn_buffer *bv = test_buffer_of(ctx, dt, d.v, d.nk);
    float *nan_out = malloc(d.nq * 4), *nan_lse = malloc(d.nl * 4);
    assert_true(nan_out && nan_lse);
    fill_nan(nan_out, d.nq), fill_nan(nan_lse, d.nl);
    vkattn_buffer *bo[3], *bl[3]; /* whole, first half, second half */
    for (int i = 0; i < 3; i++) {
        bo[i] = test_buffer_of(ctx, dt, nan_out, d.nq);
        bl[i] = test_buffer_of(ctx, VKATTN_DTYPE_F32, nan_lse, d.nl);
    }
    vkattn_buffer *bm = d.mask ? test_buffer_of(ctx, VKATTN_DTYPE_F32, d.mask, d.nm) : NULL;
    vkattn_attention_args whole = {
        .q = vkattn_tensor_make(bq, 0, dt, 4, d.qs),
        .k = vkattn_tensor_make(bk, 0, dt, 4, d.ks),
        .v = vkattn_tensor_make(bv, 0, dt, 4, d.ks),
        .out = vkattn_tensor_make(bo[0], 0, dt, 4, d.qs),
        .lse = vkattn_tensor_make(bl[0], 0, VKATTN_DTYPE_F32, 3, d.ls),
        .softcap = mc->softcap,
    };
    if (bm)
        whole.mask = vkattn_tensor_make(bm, 0, VKATTN_DTYPE_F32, 4, d.ms);
    TEST_OK(ctx, vkattn_attention(ctx, &whole));
    for (int part = 0; part < 2; part++) {
        vkattn_attention_args a = whole;
        int64_t k0 = part ? h : 0, n = part ? Tk - h : h;
        size_t es = vkattn_dtype_size(dt);
        a.k.offset += (uint64_t)k0 * D * es, a.k.shape[2] = n;
        a.v.offset += (uint64_t)k0 * D * es, a.v.shape[2] = n;
        if (bm)
            a.mask.offset += (uint64_t)k0 * 4, a.mask.shape[3] = n;
        a.out = vkattn_tensor_make(bo[1 + part], 0, dt, 4, d.qs);
        a.lse = vkattn_tensor_make(bl[1 + part], 0, VKATTN_DTYPE_F32, 3, d.ls);
        TEST_OK(ctx, vkattn_attention(ctx, &a));
    }
    vkattn_buffer *bmo = test_buffer_of(ctx, dt, nan_out, d.nq);
    vkattn_buffer *bml = test_buffer_of(ctx, VKATTN_DTYPE_F32, nan_lse, d.nl);
    vkattn_attention_merge_args m = {
        .out_a = vkattn_tensor_make(bo[1], 0, dt, 4, d.qs),
        .lse_a = vkattn_tensor_make(bl[1], 0, VKATTN_DTYPE_F32, 3, d.ls),
        .out_b = vkattn_tensor_make(bo[2], 0, dt, 4, d.qs),
        .lse_b = vkattn_tensor_make(bl[2], 0, VKATTN_DTYPE_F32, 3, d.ls),
        .out = vkattn_tensor_make(mc->in_place ? bo[1] : bmo, 0, dt, 4, d.qs),
        .lse = vkattn_tensor_make(mc->in_place ? bl[2] : bml, 0, VKATTN_DTYPE_F32, 3, d.ls),
    };
    TEST_OK(ctx, vkattn_attention_merge(ctx, &m));
    float *want = malloc(d.nq * 4), *got = malloc(d.nq * 4);
    float *want_lse = malloc(d.nl * 4), *got_lse = malloc(d.nl * 4);
    assert_true(want && got && want_lse && got_lse);
    test_download_as(ctx, bo[0], dt, want, d.nq);
    test_download_as(ctx, mc->in_place ? bo[1] : bmo, dt, got, d.nq);
    TEST_OK(ctx, vkattn_buffer_download(bl[0], 0, want_lse, d.nl * 4));
    TEST_OK(ctx, vkattn_buffer_download(mc->in_place ? bl[2] : bml, 0, got_lse, d.nl * 4));
    char what[128];
    snprintf(what, sizeof what, "merge of halves, %s %s%s softcap %g mask %d",
             test_policies[policy].name, vkattn_dtype_name(dt), mc->in_place ? " in place" : "",
             (double)mc->softcap, mc->mask);
    double tol = dt == VKATTN_DTYPE_F16    ? TEST_TOL_F16
                 : dt == VKATTN_DTYPE_BF16 ? TEST_TOL_BF16
                                           : TEST_TOL_F32;
    assert_no_nan(got, d.nq, what);
    test_assert_close(got, want, d.nq, tol, what);
    test_assert_lse_close(got_lse, want_lse, d.nl, tol, what);
    TEST_DESTROY_BUFFERS(bq, bk, bv, bo[0], bo[1], bo[2], bl[0], bl[1], bl[2], bm, bmo, bml);
    free(nan_out), free(nan_lse), free(want), free(got), free(want_lse), free(got_lse);
    free_data(&d);
}

static void test_merge_halves_equal_whole(void **state)
{
    (void)state;
    static const merge_case cases[] = {
        {F32, false, 0.0f, false},
        {F32, true, 3.0f, true},
        {F16, false, 0.0f, true},
        {F16, true, 0.0f, false},
        {VKATTN_DTYPE_BF16, false, 2.0f, true},
        {VKATTN_DTYPE_BF16, true, 0.0f, false},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        test_for_each_policy(0, run_merge, &cases[i]);
}

/* ---- the chunk helper with a window: chunks of query rows, each a call
 * of its own over fewer keys, give the whole call's output and LSE. */
static void run_chunks(test_gpu *g, uint32_t policy, const void *arg)
{
    const bool top_left = *(const bool *)arg;
    vkattn_context *ctx = g->ctx;
    const uint32_t Tq = 48, Tk = top_left ? 60 : 64, W = 10, D = 16;
    mod_case c = {.B = 1,
                  .Hq = 2,
                  .Hkv = 1,
                  .Tq = Tq,
                  .Tk = Tk,
                  .D = D,
                  .dt = F32,
                  .causal = true,
                  .top_left = top_left,
                  .window = W,
                  .slopes = true};
    case_data d;
    make_data(&c, 5 + policy, &d);
    float *nan_out = malloc(d.nq * 4), *nan_lse = malloc(d.nl * 4);
    assert_true(nan_out && nan_lse);
    fill_nan(nan_out, d.nq), fill_nan(nan_lse, d.nl);
    vkattn_buffer *bq = test_buffer_of(ctx, F32, d.q, d.nq),
                  *bk = test_buffer_of(ctx, F32, d.k, d.nk);
    vkattn_buffer *bv = test_buffer_of(ctx, F32, d.v, d.nk);
    vkattn_buffer *ba = test_buffer_of(ctx, F32, d.slopes, c.Hq);
    vkattn_buffer *bo[2], *bl[2];
    for (int i = 0; i < 2; i++) {
        bo[i] = test_buffer_of(ctx, F32, nan_out, d.nq);
        bl[i] = test_buffer_of(ctx, F32, nan_lse, d.nl);
    }
    vkattn_attention_args a = {
        .q = vkattn_tensor_make(bq, 0, F32, 4, d.qs),
        .k = vkattn_tensor_make(bk, 0, F32, 4, d.ks),
        .v = vkattn_tensor_make(bv, 0, F32, 4, d.ks),
        .out = vkattn_tensor_make(bo[0], 0, F32, 4, d.qs),
        .lse = vkattn_tensor_make(bl[0], 0, F32, 3, d.ls),
        .alibi_slopes = vkattn_tensor_make(ba, 0, F32, 1, d.hs),
        .causal = true,
        .causal_align = top_left ? VKATTN_CAUSAL_TOP_LEFT : VKATTN_CAUSAL_BOTTOM_RIGHT,
        .window = W,
    };
    TEST_OK(ctx, vkattn_attention(ctx, &a));
    vkattn_attention_args b = a;
    b.out = vkattn_tensor_make(bo[1], 0, F32, 4, d.qs);
    b.lse = vkattn_tensor_make(bl[1], 0, F32, 3, d.ls);
    double flops = 0;
    for (uint32_t q0 = 0; q0 < Tq; q0 += 16) {
        vkattn_attention_args chunk;
        char err[256];
        if (vkattn_attention_chunk(&b, q0, q0 + 16, &chunk, err, sizeof err) != VKATTN_SUCCESS)
            fail_msg("chunk [%u, %u): %s", q0, q0 + 16, err);
        /* the window cuts the keys before the chunk's first visible one */
        int64_t shift = top_left ? 0 : (int64_t)Tk - Tq;
        int64_t lo = (int64_t)q0 + shift - W + 1;
        if (lo > 0 && chunk.k.shape[2] > (int64_t)q0 + 16 + shift - lo)
            fail_msg("chunk [%u, %u) keeps %lld keys", q0, q0 + 16, (long long)chunk.k.shape[2]);
        TEST_OK(ctx, vkattn_attention(ctx, &chunk));
        flops += vkattn_attention_flops(&b, q0, q0 + 16);
    }
    /* visible pairs: the window's W keys per row, fewer at the start */
    double pairs = 0;
    for (uint32_t i = 0; i < Tq; i++) {
        int64_t pos = (int64_t)i + (top_left ? 0 : (int64_t)Tk - Tq);
        int64_t lo = pos - W + 1 < 0 ? 0 : pos - W + 1;
        pairs += (double)(pos + 1 - lo);
    }
    assert_true(fabs(flops - 4.0 * c.Hq * D * pairs) < 0.5);
    assert_true(fabs(vkattn_attention_flops(&a, 0, Tq) - flops) < 0.5);
    float *want = malloc(d.nq * 4), *got = malloc(d.nq * 4);
    float *want_lse = malloc(d.nl * 4), *got_lse = malloc(d.nl * 4);
    assert_true(want && got && want_lse && got_lse);
    TEST_OK(ctx, vkattn_buffer_download(bo[0], 0, want, d.nq * 4));
    TEST_OK(ctx, vkattn_buffer_download(bo[1], 0, got, d.nq * 4));
    TEST_OK(ctx, vkattn_buffer_download(bl[0], 0, want_lse, d.nl * 4));
    TEST_OK(ctx, vkattn_buffer_download(bl[1], 0, got_lse, d.nl * 4));
    char what[96];
    snprintf(what, sizeof what, "windowed chunks, %s, %s", test_policies[policy].name,
             top_left ? "top-left" : "bottom-right");
    assert_no_nan(got, d.nq, what);
    test_assert_close(got, want, d.nq, TEST_TOL_F32, what);
    test_assert_lse_close(got_lse, want_lse, d.nl, TEST_TOL_F32, what);
    TEST_DESTROY_BUFFERS(bq, bk, bv, ba, bo[0], bo[1], bl[0], bl[1]);
    free(nan_out), free(nan_lse), free(want), free(got), free(want_lse), free(got_lse);
    free_data(&d);
}

static void test_chunk_with_window(void **state)
{
    (void)state;
    static const bool aligns[2] = {false, true};
    for (int i = 0; i < 2; i++)
        test_for_each_policy(0, run_chunks, &aligns[i]);
}

/* ---- bad input: test_attention_mods_errors.c */
void test_bad_input(void **state);

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_each_modifier_alone),
        cmocka_unit_test(test_modifiers_combined),
        cmocka_unit_test(test_fully_hidden_rows),
        cmocka_unit_test(test_weights_with_modifiers),
        cmocka_unit_test(test_merge_halves_equal_whole),
        cmocka_unit_test(test_chunk_with_window),
        cmocka_unit_test(test_bad_input),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
