/* CPU reference: the MHA layer's score modifiers (against the same steps
 * done here), and every bad modifier, LSE and merge input: its code, a
 * message naming it, and outputs left untouched. */
#include "test_reference_mods.h"

#include <math.h>
#include <stdlib.h>

#define SENTINEL 123.0f

static void fill(float *p, size_t n, float value)
{
    for (size_t i = 0; i < n; i++)
        p[i] = value;
}

static void assert_untouched(const float *p, size_t n, const char *what)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != SENTINEL)
            fail_msg("%s[%zu] was written (%g) by a failing call", what, i, p[i]);
}

/* ------------------------------------------------------------ attention */

/* B 2, Hq 8, Hkv 2, Tq 3, Tk 4, D 8, with sinks, slopes, LSE and weights. */
typedef struct mods_fixture {
    float q[384], k[128], v[128], out[384], weights[192], lse[48];
    float sinks[9], slopes[16];
} mods_fixture;

static void test_attention_mods_errors(void **state)
{
    (void)state;
    mods_fixture *f = test_alloc(sizeof *f);
    test_rng r = test_rng_seed(1403);
    test_fill_uniform(&r, f->q, 384, -1, 1);
    test_fill_uniform(&r, f->k, 128, -1, 1);
    test_fill_uniform(&r, f->v, 128, -1, 1);
    test_fill_uniform(&r, f->sinks, 9, -1, 1);
    test_fill_uniform(&r, f->slopes, 16, 0, 1);
    ref_dims d = {2, 8, 2, 3, 4, 8};
    vkattn_ref_attention_args base;
    ref_attention_args(&base, &d, f->q, f->k, f->v, f->out);
    int64_t ws[4] = {2, 8, 3, 4}, ls[3] = {2, 8, 3}, hs[1] = {8};
    base.weights = vkattn_host_tensor_make(f->weights, VKATTN_DTYPE_F32, 4, ws);
    base.lse = vkattn_host_tensor_make(f->lse, VKATTN_DTYPE_F32, 3, ls);
    base.sinks = vkattn_host_tensor_make(f->sinks, VKATTN_DTYPE_F32, 1, hs);
    base.alibi_slopes = vkattn_host_tensor_make(f->slopes, VKATTN_DTYPE_F32, 1, hs);
    base.causal = true;
    base.window = 2;
    base.softcap = 5.0f;
    REF_OK(vkattn_ref_attention(&base, err, sizeof err));

    /* Accepted: any window (uint), top-left (not the KV path), max bias
     * instead of slopes, a tiny softcap. */
    vkattn_ref_attention_args a = base;
    a.window = UINT32_MAX;
    a.causal_align = VKATTN_CAUSAL_TOP_LEFT;
    REF_OK(vkattn_ref_attention(&a, err, sizeof err));
    a.alibi_slopes.data = NULL;
    a.alibi_max_bias = 8.0f;
    a.softcap = 1e-30f;
    a.window = 1;
    REF_OK(vkattn_ref_attention(&a, err, sizeof err));

    fill(f->out, 384, SENTINEL);
    fill(f->weights, 192, SENTINEL);
    fill(f->lse, 48, SENTINEL);
#define CASE(code, needle, ...)                                             \
    do {                                                                    \
        a = base;                                                           \
        __VA_ARGS__;                                                        \
        REF_FAILS(code, needle, vkattn_ref_attention(&a, err, sizeof err)); \
        assert_untouched(f->out, 384, "out");                               \
        assert_untouched(f->weights, 192, "weights");                       \
        assert_untouched(f->lse, 48, "lse");                                \
    } while (0)
    const vkattn_result INVALID = VKATTN_ERROR_INVALID_ARGUMENT;
    const vkattn_result SHAPE = VKATTN_ERROR_SHAPE_MISMATCH;
    const vkattn_result DTYPE = VKATTN_ERROR_UNSUPPORTED_DTYPE;
    CASE(INVALID, "args->causal_align is 2", a.causal_align = (vkattn_causal_align)2);
    CASE(INVALID, "args->softcap is -1: it must be 0 (none) or finite > 0", a.softcap = -1.0f);
    CASE(INVALID, "args->softcap is nan", a.softcap = NAN);
    CASE(INVALID, "args->softcap is inf", a.softcap = INFINITY);
    CASE(INVALID, "args->alibi_max_bias is -2", a.alibi_slopes.data = NULL,
         a.alibi_max_bias = -2.0f);
    CASE(INVALID, "args->alibi_max_bias is nan", a.alibi_slopes.data = NULL,
         a.alibi_max_bias = NAN);
    CASE(INVALID, "args->alibi_slopes and args->alibi_max_bias 8 are both given",
         a.alibi_max_bias = 8.0f);
    CASE(SHAPE, "args->sinks.shape[0] is 9", a.sinks.shape[0] = 9);
    CASE(INVALID, "args->sinks.rank is 2", a.sinks.rank = 2, a.sinks.shape[1] = 1);
    CASE(DTYPE, "args->sinks.dtype is f16", a.sinks.dtype = VKATTN_DTYPE_F16);
    CASE(SHAPE, "args->alibi_slopes.shape[0] is 4", a.alibi_slopes.shape[0] = 4);
    CASE(INVALID, "args->alibi_slopes.rank is 0", a.alibi_slopes.rank = 0);
    CASE(DTYPE, "args->alibi_slopes.dtype is u8", a.alibi_slopes.dtype = VKATTN_DTYPE_U8);
    CASE(INVALID, "args->sinks.strides[0] is -1", a.sinks.strides[0] = -1);
    CASE(SHAPE, "args->lse.shape[2] is 4", a.lse.shape[2] = 4);
    CASE(SHAPE, "args->lse.shape[1] is 2", a.lse.shape[1] = 2);
    CASE(INVALID, "args->lse.rank is 4", a.lse.rank = 4, a.lse.shape[3] = 1);
    CASE(DTYPE, "args->lse.dtype is f16", a.lse.dtype = VKATTN_DTYPE_F16);
    CASE(INVALID, "args->lse.strides[1] is 0", a.lse.strides[0] = 3, a.lse.strides[1] = 0,
         a.lse.strides[2] = 1);
    /* values of the host data, named by element */
    f->slopes[3] = NAN;
    CASE(INVALID, "args->alibi_slopes[3] is nan: it must be finite", (void)0);
    f->slopes[3] = 0.5f;
    f->slopes[7] = -INFINITY;
    CASE(INVALID, "args->alibi_slopes[7] is -inf", (void)0);
    f->slopes[7] = 0.5f;
    f->sinks[5] = INFINITY;
    CASE(INVALID, "args->sinks[5] is inf", (void)0);
    f->sinks[5] = 0.0f;
    f->sinks[0] = NAN;
    CASE(INVALID, "args->sinks[0] is nan", (void)0);
    /* a strided tensor is read through its strides: with stride 2, element
     * 1 is memory index 2 */
    f->sinks[0] = 0.0f;
    f->slopes[2] = NAN;
    CASE(INVALID, "args->alibi_slopes[1] is nan", a.alibi_slopes.strides[0] = 2);
    CASE(INVALID, "args->alibi_slopes[2] is nan", (void)0);
#undef CASE
    free(f);
}

/* ------------------------------------------------------------ merge */

static void test_merge_errors(void **state)
{
    (void)state;
    enum { N = 2 * 3 * 4 * 8, R = 2 * 3 * 4 };
    float oa[N] = {0}, ob[N] = {0}, out[N], la[R] = {0}, lb[R] = {0}, lse[R];
    int64_t os[4] = {2, 3, 4, 8}, ls[3] = {2, 3, 4};
    vkattn_ref_attention_merge_args base = {0}, a;
    base.out_a = vkattn_host_tensor_make(oa, VKATTN_DTYPE_F32, 4, os);
    base.out_b = vkattn_host_tensor_make(ob, VKATTN_DTYPE_F32, 4, os);
    base.lse_a = vkattn_host_tensor_make(la, VKATTN_DTYPE_F32, 3, ls);
    base.lse_b = vkattn_host_tensor_make(lb, VKATTN_DTYPE_F32, 3, ls);
    base.out = vkattn_host_tensor_make(out, VKATTN_DTYPE_F32, 4, os);
    base.lse = vkattn_host_tensor_make(lse, VKATTN_DTYPE_F32, 3, ls);
    char untouched[16] = "untouched";
    assert_int_equal(vkattn_ref_attention_merge(&base, untouched, sizeof untouched),
                     VKATTN_SUCCESS);
    assert_string_equal(untouched, "untouched");
    for (int i = 0; i < R; i++)
        assert_float_equal(lse[i], log(2.0), 1e-7);
    fill(out, N, SENTINEL);
    fill(lse, R, SENTINEL);
#define CASE(code, needle, ...)                                                   \
    do {                                                                          \
        a = base;                                                                 \
        __VA_ARGS__;                                                              \
        REF_FAILS(code, needle, vkattn_ref_attention_merge(&a, err, sizeof err)); \
        assert_untouched(out, N, "out");                                          \
        assert_untouched(lse, R, "lse");                                          \
    } while (0)
    const vkattn_result INVALID = VKATTN_ERROR_INVALID_ARGUMENT;
    const vkattn_result SHAPE = VKATTN_ERROR_SHAPE_MISMATCH;
    const vkattn_result DTYPE = VKATTN_ERROR_UNSUPPORTED_DTYPE;
    REF_FAILS(INVALID, "args is NULL", vkattn_ref_attention_merge(NULL, err, sizeof err));
    CASE(INVALID, "args->out_b.data is NULL", a.out_b.data = NULL);
    CASE(INVALID, "args->lse_a.data is NULL", a.lse_a.data = NULL);
    CASE(INVALID, "args->out.data is NULL", a.out.data = NULL);
    CASE(INVALID, "args->lse_a.rank is 2: it must be f32 [B, Hq, Tq]", a.lse_a.rank = 2);
    CASE(INVALID, "args->out_a.rank is 3", a.out_a.rank = 3);
    CASE(INVALID, "args->out_a.shape[0] is 0", a.out_a.shape[0] = 0);
    CASE(DTYPE, "args->lse_b.dtype is f16", a.lse_b.dtype = VKATTN_DTYPE_F16);
    CASE(DTYPE, "args->out_a.dtype is u8: it must be f32, f16 or bf16",
         a.out_a.dtype = VKATTN_DTYPE_U8);
    CASE(DTYPE, "args->out.dtype f16 differs from args->out_a.dtype f32",
         a.out.dtype = VKATTN_DTYPE_F16);
    CASE(SHAPE, "args->out_b.shape[3] (head_dim) 16 differs from args->out_a.shape[3] 8",
         a.out_b.shape[3] = 16);
    CASE(SHAPE, "args->lse_b.shape[2] (queries) 5 differs from args->out_a.shape[2] 4",
         a.lse_b.shape[2] = 5);
    CASE(SHAPE, "args->lse.shape[1] (heads) 1", a.lse.shape[1] = 1);
    CASE(SHAPE, "args->out.shape[0] (batch) 1", a.out.shape[0] = 1);
    CASE(INVALID, "args->out.strides[2] is 0", a.out.strides[2] = 0);
    CASE(INVALID, "args->lse_b.strides[0] is -3", a.lse_b.strides[0] = -3);
    /* an output that is an input must be the same tensor */
    CASE(INVALID, "args->lse is args->lse_a's memory with other strides", a.lse.data = la,
         a.lse.strides[0] = 12, a.lse.strides[1] = 1, a.lse.strides[2] = 3);
#undef CASE
}

/* ------------------------------------------------------------ MHA layer */

typedef struct layer_case {
    int64_t B, Tq, Tk; /* Tk 0: self-attention */
    bool causal, top_left, sinks, custom_slopes, per_head;
    uint32_t window;
    float softcap;
} layer_case;

/* The layer with the desc's modifiers and args->causal_align equals its
 * steps done here: linear Q, K, V; attention with the same modifiers over
 * head views; linear out. Both keep Q, K, V, O in f32, so they agree to
 * the bit. */
static void check_layer(const layer_case *c, test_rng *r)
{
    const int64_t Dm = 32, H = 4, Hkv = 2, Dh = 8, Dkv = c->Tk ? 24 : 32;
    const int64_t B = c->B, Tq = c->Tq, Tk = c->Tk ? c->Tk : c->Tq;
    float *x = ref_randf(r, (size_t)(B * Tq * Dm)), *kvx = ref_randf(r, (size_t)(B * Tk * Dkv));
    float *wq = ref_randf(r, (size_t)(H * Dh * Dm)), *wk = ref_randf(r, (size_t)(Hkv * Dh * Dkv));
    float *wv = ref_randf(r, (size_t)(Hkv * Dh * Dkv)), *wo = ref_randf(r, (size_t)(Dm * H * Dh));
    float sinks[4] = {0.5f, -1.0f, 2.0f, 0.0f}, slopes[4] = {0.3f, 0.1f, 0.7f, 0.02f};
    vkattn_mha_desc desc = {.embed_dim = (uint32_t)Dm,
                            .num_heads = (uint32_t)H,
                            .num_kv_heads = (uint32_t)Hkv,
                            .head_dim = (uint32_t)Dh,
                            .kv_dim = (uint32_t)Dkv,
                            .dtype = VKATTN_DTYPE_F32,
                            .window = c->window,
                            .softcap = c->softcap,
                            .sinks = c->sinks,
                            .alibi = true}; /* alibi_max_bias 0: 8 */
    vkattn_mha_weights w = {.wq = wq, .wk = wk, .wv = wv, .wo = wo};
    w.sinks = c->sinks ? sinks : NULL;
    w.alibi_slopes = c->custom_slopes ? slopes : NULL;
    const size_t ny = (size_t)(B * Tq * Dm), nw = (size_t)(B * (c->per_head ? H : 1) * Tq * Tk);
    float *y = test_alloc(ny * 4), *want_y = test_alloc(ny * 4);
    float *wts = test_alloc(nw * 4), *want_w = test_alloc(nw * 4);
    int64_t xs[3] = {B, Tq, Dm}, cs[3] = {B, Tk, Dkv};
    int64_t ws4[4] = {B, H, Tq, Tk}, ws3[3] = {B, Tq, Tk};
    vkattn_ref_mha_args ma = {.causal = c->causal};
    ma.causal_align = c->top_left ? VKATTN_CAUSAL_TOP_LEFT : VKATTN_CAUSAL_BOTTOM_RIGHT;
    ma.x = vkattn_host_tensor_make(x, VKATTN_DTYPE_F32, 3, xs);
    if (c->Tk)
        ma.kv = vkattn_host_tensor_make(kvx, VKATTN_DTYPE_F32, 3, cs);
    ma.y = vkattn_host_tensor_make(y, VKATTN_DTYPE_F32, 3, xs);
    ma.weights = c->per_head ? vkattn_host_tensor_make(wts, VKATTN_DTYPE_F32, 4, ws4)
                             : vkattn_host_tensor_make(wts, VKATTN_DTYPE_F32, 3, ws3);
    REF_OK(vkattn_ref_mha(&desc, &w, &ma, err, sizeof err));

    /* the steps */
    const float *c_in = c->Tk ? kvx : x;
    float *Q = test_alloc((size_t)(B * Tq * H * Dh) * 4),
          *K = test_alloc((size_t)(B * Tk * Hkv * Dh) * 4);
    float *V = test_alloc((size_t)(B * Tk * Hkv * Dh) * 4),
          *O = test_alloc((size_t)(B * Tq * H * Dh) * 4);
    const struct {
        const float *in, *w;
        float *out;
        int64_t t, k, n;
    } lin[3] = {{x, wq, Q, Tq, Dm, H * Dh},
                {c_in, wk, K, Tk, Dkv, Hkv * Dh},
                {c_in, wv, V, Tk, Dkv, Hkv * Dh}};
    for (int s = 0; s < 3; s++) {
        vkattn_ref_linear_args la = {0};
        int64_t is[3] = {B, lin[s].t, lin[s].k}, wsh[2] = {lin[s].n, lin[s].k},
                os[3] = {B, lin[s].t, lin[s].n};
        la.x = vkattn_host_tensor_make((void *)lin[s].in, VKATTN_DTYPE_F32, 3, is);
        la.w = vkattn_host_tensor_make((void *)lin[s].w, VKATTN_DTYPE_F32, 2, wsh);
        la.y = vkattn_host_tensor_make(lin[s].out, VKATTN_DTYPE_F32, 3, os);
        REF_OK(vkattn_ref_linear(&la, err, sizeof err));
    }
    vkattn_ref_attention_args a = {0};
    int64_t qs[4] = {B, H, Tq, Dh}, ks[4] = {B, Hkv, Tk, Dh}, hs[1] = {H}, ls[3] = {B, H, Tq};
    a.q = vkattn_host_tensor_make(Q, VKATTN_DTYPE_F32, 4, qs);
    a.out = vkattn_host_tensor_make(O, VKATTN_DTYPE_F32, 4, qs);
    a.k = vkattn_host_tensor_make(K, VKATTN_DTYPE_F32, 4, ks);
    a.v = vkattn_host_tensor_make(V, VKATTN_DTYPE_F32, 4, ks);
    const int64_t qst[4] = {Tq * H * Dh, Dh, H * Dh, 1}, kst[4] = {Tk * Hkv * Dh, Dh, Hkv * Dh, 1};
    memcpy(a.q.strides, qst, sizeof qst), memcpy(a.out.strides, qst, sizeof qst);
    memcpy(a.k.strides, kst, sizeof kst), memcpy(a.v.strides, kst, sizeof kst);
    a.weights = ma.weights;
    a.weights.data = want_w;
    a.causal = c->causal;
    a.causal_align = ma.causal_align;
    a.scale = (float)(1.0 / sqrt((double)Dh));
    a.window = c->window;
    a.softcap = c->softcap;
    if (c->sinks)
        a.sinks = vkattn_host_tensor_make(sinks, VKATTN_DTYPE_F32, 1, hs);
    if (c->custom_slopes)
        a.alibi_slopes = vkattn_host_tensor_make(slopes, VKATTN_DTYPE_F32, 1, hs);
    else
        a.alibi_max_bias = 8.0f;
    float *lse = test_alloc((size_t)(B * H * Tq) * 4);
    a.lse = vkattn_host_tensor_make(lse, VKATTN_DTYPE_F32, 3, ls);
    REF_OK(vkattn_ref_attention(&a, err, sizeof err));
    vkattn_ref_linear_args lo = {0};
    int64_t oxs[3] = {B, Tq, H * Dh}, wos[2] = {Dm, H * Dh};
    lo.x = vkattn_host_tensor_make(O, VKATTN_DTYPE_F32, 3, oxs);
    lo.w = vkattn_host_tensor_make(wo, VKATTN_DTYPE_F32, 2, wos);
    lo.y = vkattn_host_tensor_make(want_y, VKATTN_DTYPE_F32, 3, xs);
    REF_OK(vkattn_ref_linear(&lo, err, sizeof err));
    ref_assert_close(y, want_y, ny, 0.0, "layer y vs its steps");
    ref_assert_close(wts, want_w, nw, 0.0, "layer weights vs its steps");
    /* a sink makes a row's weights sum below 1 */
    double row = 0.0;
    for (int64_t j = 0; j < Tk; j++)
        row += wts[(size_t)((Tq - 1) * Tk + j)];
    assert_true(c->sinks ? row < 0.999 : fabs(row - 1.0) < 1e-6);
    free(x), free(kvx), free(wq), free(wk), free(wv), free(wo), free(y), free(want_y);
    free(wts), free(want_w), free(Q), free(K), free(V), free(O), free(lse);
}

static void test_mha_mods_match_steps(void **state)
{
    (void)state;
    test_rng r = test_rng_seed(1404);
    const layer_case cases[] = {
        /* cross-attention, top-left causal (Tq != Tk), window, softcap,
         * sinks, standard slopes */
        {2, 3, 7, true, true, true, false, true, 3, 1.5f},
        /* self-attention, non-causal window, custom slopes, head mean */
        {1, 6, 0, false, false, false, true, false, 2, 0.0f},
        /* self-attention, bottom-right causal, sinks, custom slopes */
        {2, 5, 0, true, false, true, true, false, 0, 4.0f},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
        check_layer(&cases[c], &r);
}

/* The layer's modifier errors name the desc, weights or args field. */
static void test_mha_mods_errors(void **state)
{
    (void)state;
    test_rng r = test_rng_seed(1405);
    float *x = ref_randf(&r, 2 * 3 * 16), *wq = ref_randf(&r, 256), *wk = ref_randf(&r, 256);
    float *wv = ref_randf(&r, 256), *wo = ref_randf(&r, 256), y[96];
    float sinks[2] = {0.1f, 0.2f}, slopes[2] = {0.5f, 0.25f};
    vkattn_mha_desc desc = {.embed_dim = 16,
                            .num_heads = 2,
                            .dtype = VKATTN_DTYPE_F32,
                            .window = 2,
                            .softcap = 3.0f,
                            .sinks = true,
                            .alibi = true};
    vkattn_mha_weights w = {
        .wq = wq, .wk = wk, .wv = wv, .wo = wo, .sinks = sinks, .alibi_slopes = slopes};
    int64_t xs[3] = {2, 3, 16};
    vkattn_ref_mha_args args = {.causal = true, .causal_align = VKATTN_CAUSAL_TOP_LEFT};
    args.x = vkattn_host_tensor_make(x, VKATTN_DTYPE_F32, 3, xs);
    args.y = vkattn_host_tensor_make(y, VKATTN_DTYPE_F32, 3, xs);
    REF_OK(vkattn_ref_mha(&desc, &w, &args, err, sizeof err));
    fill(y, 96, SENTINEL);
    vkattn_mha_desc d;
    vkattn_mha_weights ww;
    vkattn_ref_mha_args aa;
#define CASE(code, needle, ...)                                                 \
    do {                                                                        \
        d = desc, ww = w, aa = args;                                            \
        __VA_ARGS__;                                                            \
        REF_FAILS(code, needle, vkattn_ref_mha(&d, &ww, &aa, err, sizeof err)); \
        assert_untouched(y, 96, "y");                                           \
    } while (0)
    const vkattn_result INVALID = VKATTN_ERROR_INVALID_ARGUMENT;
    CASE(INVALID, "desc->softcap is nan", d.softcap = NAN);
    CASE(INVALID, "desc->softcap is -3", d.softcap = -3.0f);
    CASE(INVALID, "desc->alibi_max_bias is -1", d.alibi_max_bias = -1.0f);
    CASE(INVALID, "weights->sinks is NULL but desc->sinks is set", ww.sinks = NULL);
    CASE(INVALID, "weights->sinks[1] is nan", sinks[1] = NAN);
    sinks[1] = 0.2f;
    CASE(INVALID, "weights->alibi_slopes[0] is inf", slopes[0] = INFINITY);
    slopes[0] = 0.5f;
    CASE(INVALID, "args->causal_align is 7", aa.causal_align = (vkattn_causal_align)7);
#undef CASE
    /* Without desc.sinks / desc.alibi the weights' arrays are ignored, even
     * holding NaN. */
    sinks[0] = NAN, slopes[0] = NAN;
    desc.sinks = false, desc.alibi = false;
    REF_OK(vkattn_ref_mha(&desc, &w, &args, err, sizeof err));
    for (int i = 0; i < 96; i++)
        assert_false(isnan(y[i]));
    free(x), free(wq), free(wk), free(wv), free(wo);
}

int mods_run_layer_and_error_tests(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_attention_mods_errors),
        cmocka_unit_test(test_merge_errors),
        cmocka_unit_test(test_mha_mods_match_steps),
        cmocka_unit_test(test_mha_mods_errors),
    };
    return cmocka_run_group_tests_name("reference_score_mods_layer_errors", tests, NULL, NULL);
}
