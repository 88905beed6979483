/* CPU reference: linear against hand values and a plain loop; the MHA layer
 * against the same computation done step by step here (linear, explicit
 * head split, attention, explicit merge, linear). */
#include "test_reference.h"

#include <math.h>
#include <stdlib.h>

/* ------------------------------------------------------------ linear */

static void test_linear_hand(void **state)
{
    (void)state;
    float x[4] = {1, 2, 3, 4};       /* [2, 2] */
    float w[6] = {1, 0, 1, 1, 0, 2}; /* [3, 2] */
    float b[3] = {0.5f, 0, -1};
    float y[6], yt[6];
    int64_t xs[2] = {2, 2}, ws[2] = {3, 2}, bs[1] = {3}, ys[2] = {2, 3};
    vkattn_ref_linear_args a = {0};
    a.x = vkattn_host_tensor_make(x, VKATTN_DTYPE_F32, 2, xs);
    a.w = vkattn_host_tensor_make(w, VKATTN_DTYPE_F32, 2, ws);
    a.b = vkattn_host_tensor_make(b, VKATTN_DTYPE_F32, 1, bs);
    a.y = vkattn_host_tensor_make(y, VKATTN_DTYPE_F32, 2, ys);
    REF_OK(vkattn_ref_linear(&a, err, sizeof err));
    const float want[6] = {1.5f, 3, 3, 3.5f, 7, 7};
    ref_assert_close(y, want, 6, 0.0, "y");

    /* No bias; w as f16 (exact for these values); y stored transposed
     * ([N, M] memory seen as [M, N] through strides). */
    uint16_t w16[6];
    for (int i = 0; i < 6; i++)
        w16[i] = vkattn_f32_to_f16(w[i]);
    a.w.data = w16, a.w.dtype = VKATTN_DTYPE_F16;
    a.b.data = NULL;
    a.y.data = yt, a.y.strides[0] = 1, a.y.strides[1] = 2;
    REF_OK(vkattn_ref_linear(&a, err, sizeof err));
    const float want_t[6] = {1, 3, 3, 7, 4, 8}; /* y^T of [[1,3,4],[3,7,8]] */
    ref_assert_close(yt, want_t, 6, 0.0, "y^T");
}

/* Rank-3 x with enough in_features that w is converted in several blocks. */
static void test_linear_matches_loop(void **state)
{
    (void)state;
    test_rng r = test_rng_seed(21);
    const int64_t B = 2, T = 3, K = 1024, N = 150;
    float *x = ref_randf(&r, (size_t)(B * T * K)), *w = ref_randf(&r, (size_t)(N * K));
    float *b = ref_randf(&r, (size_t)N), *y = test_alloc((size_t)(B * T * N) * 4);
    float *want = test_alloc((size_t)(B * T * N) * 4);
    int64_t xs[3] = {B, T, K}, ws[2] = {N, K}, ys[3] = {B, T, N};
    vkattn_ref_linear_args a = {0};
    a.x = vkattn_host_tensor_make(x, VKATTN_DTYPE_F32, 3, xs);
    a.w = vkattn_host_tensor_make(w, VKATTN_DTYPE_F32, 2, ws);
    a.b = vkattn_host_tensor_make(b, VKATTN_DTYPE_F32, 1, &N);
    a.y = vkattn_host_tensor_make(y, VKATTN_DTYPE_F32, 3, ys);
    REF_OK(vkattn_ref_linear(&a, err, sizeof err));
    for (int64_t m = 0; m < B * T; m++)
        for (int64_t n = 0; n < N; n++) {
            double s = b[n];
            for (int64_t c = 0; c < K; c++)
                s += (double)x[m * K + c] * w[n * K + c];
            want[m * N + n] = (float)s;
        }
    ref_assert_close(y, want, (size_t)(B * T * N), 1e-6, "y");
    free(x), free(w), free(b), free(y), free(want);
}

/* ------------------------------------------------------------ MHA */

typedef struct layer {
    vkattn_mha_desc desc;         /* as given to vkattn_ref_mha */
    int64_t Hq, Hkv, Dh, Dm, Dkv; /* resolved by hand */
    float *wq, *wk, *wv, *wo, *bq, *bk, *bv, *bo;
} layer;

static void layer_init(layer *l, test_rng *r, const vkattn_mha_desc *desc, int64_t Hkv, int64_t Dh,
                       int64_t Dkv)
{
    memset(l, 0, sizeof *l);
    l->desc = *desc;
    l->Hq = desc->num_heads, l->Hkv = Hkv, l->Dh = Dh, l->Dm = desc->embed_dim, l->Dkv = Dkv;
    size_t qw = (size_t)(l->Hq * Dh), kvw = (size_t)(Hkv * Dh);
    l->wq = ref_randf(r, qw * (size_t)l->Dm);
    l->wk = ref_randf(r, kvw * (size_t)Dkv);
    l->wv = ref_randf(r, kvw * (size_t)Dkv);
    l->wo = ref_randf(r, (size_t)l->Dm * qw);
    l->bq = ref_randf(r, qw);
    l->bk = ref_randf(r, kvw);
    l->bv = ref_randf(r, kvw);
    l->bo = ref_randf(r, (size_t)l->Dm);
}

static void layer_free(layer *l)
{
    free(l->wq), free(l->wk), free(l->wv), free(l->wo);
    free(l->bq), free(l->bk), free(l->bv), free(l->bo);
}

static vkattn_mha_weights layer_weights(const layer *l)
{
    vkattn_mha_weights w = {0};
    w.wq = l->wq, w.wk = l->wk, w.wv = l->wv, w.wo = l->wo;
    w.bq = l->bq, w.bk = l->bk, w.bv = l->bv, w.bo = l->bo;
    return w;
}

/* dst = src W^T (+ b) through vkattn_ref_linear, rank 3 [B, T, K] -> [B, T, N]. */
static void linear_step(const float *src, int64_t B, int64_t T, int64_t K, const float *w,
                        const float *b, int64_t N, float *dst)
{
    int64_t xs[3] = {B, T, K}, ws[2] = {N, K}, ys[3] = {B, T, N};
    vkattn_ref_linear_args a = {0};
    a.x = vkattn_host_tensor_make((void *)src, VKATTN_DTYPE_F32, 3, xs);
    a.w = vkattn_host_tensor_make((void *)w, VKATTN_DTYPE_F32, 2, ws);
    a.b = vkattn_host_tensor_make((void *)b, VKATTN_DTYPE_F32, 1, &N);
    a.y = vkattn_host_tensor_make(dst, VKATTN_DTYPE_F32, 3, ys);
    REF_OK(vkattn_ref_linear(&a, err, sizeof err));
}

/* [B, T, H*Dh] <-> [B, H, T, Dh] by explicit copies. */
static void split_heads(const float *src, int64_t B, int64_t T, int64_t H, int64_t Dh, float *dst,
                        bool merge)
{
    for (int64_t b = 0; b < B; b++)
        for (int64_t t = 0; t < T; t++)
            for (int64_t h = 0; h < H; h++)
                for (int64_t e = 0; e < Dh; e++) {
                    size_t rows = (size_t)(((b * T + t) * H + h) * Dh + e);
                    size_t heads = (size_t)(((b * H + h) * T + t) * Dh + e);
                    if (merge)
                        dst[rows] = src[heads];
                    else
                        dst[heads] = src[rows];
                }
}

/* The layer step by step. `c` is x for self-attention. The masks and
 * weights of `m` are used as they are; its q/k/v/out are filled in here. */
static void mha_by_steps(const layer *l, const float *x, int64_t B, int64_t Tq, const float *c,
                         int64_t Tk, vkattn_ref_attention_args *m, float *y)
{
    bool bias = l->desc.bias;
    size_t nq = (size_t)(B * Tq * l->Hq * l->Dh), nkv = (size_t)(B * Tk * l->Hkv * l->Dh);
    float *qf = test_alloc(nq * 4), *kf = test_alloc(nkv * 4), *vf = test_alloc(nkv * 4);
    float *q = test_alloc(nq * 4), *k = test_alloc(nkv * 4), *v = test_alloc(nkv * 4);
    float *o = test_alloc(nq * 4), *om = test_alloc(nq * 4);
    linear_step(x, B, Tq, l->Dm, l->wq, bias ? l->bq : NULL, l->Hq * l->Dh, qf);
    linear_step(c, B, Tk, l->Dkv, l->wk, bias ? l->bk : NULL, l->Hkv * l->Dh, kf);
    linear_step(c, B, Tk, l->Dkv, l->wv, bias ? l->bv : NULL, l->Hkv * l->Dh, vf);
    split_heads(qf, B, Tq, l->Hq, l->Dh, q, false);
    split_heads(kf, B, Tk, l->Hkv, l->Dh, k, false);
    split_heads(vf, B, Tk, l->Hkv, l->Dh, v, false);
    ref_dims d = {B, l->Hq, l->Hkv, Tq, Tk, l->Dh};
    vkattn_ref_attention_args a;
    ref_attention_args(&a, &d, q, k, v, o);
    a.mask = m->mask, a.key_padding = m->key_padding, a.weights = m->weights;
    a.causal = m->causal;
    REF_OK(vkattn_ref_attention(&a, err, sizeof err));
    split_heads(o, B, Tq, l->Hq, l->Dh, om, true);
    linear_step(om, B, Tq, l->Hq * l->Dh, l->wo, bias ? l->bo : NULL, l->Dm, y);
    free(qf), free(kf), free(vf), free(q), free(k), free(v), free(o), free(om);
}

static void test_mha_self_matches_steps(void **state)
{
    (void)state;
    test_rng r = test_rng_seed(31);
    vkattn_mha_desc desc = {.embed_dim = 32, .num_heads = 4, .num_kv_heads = 2, .bias = true};
    layer l;
    layer_init(&l, &r, &desc, 2, 8, 32); /* head_dim 32 / 4 */
    const int64_t B = 2, T = 5;
    float *x = ref_randf(&r, (size_t)(B * T * 32));
    float *y = test_alloc((size_t)(B * T * 32) * 4), *want = test_alloc((size_t)(B * T * 32) * 4);
    float w[50], want_w[50];
    uint8_t pad[10] = {1, 1, 1, 0, 1, 1, 1, 1, 1, 1};
    int64_t xs[3] = {B, T, 32}, ps[2] = {B, T}, ws[3] = {B, T, T};
    vkattn_ref_mha_args a = {0};
    a.x = vkattn_host_tensor_make(x, VKATTN_DTYPE_F32, 3, xs);
    a.y = vkattn_host_tensor_make(y, VKATTN_DTYPE_F32, 3, xs);
    a.key_padding = vkattn_host_tensor_make(pad, VKATTN_DTYPE_U8, 2, ps);
    a.weights = vkattn_host_tensor_make(w, VKATTN_DTYPE_F32, 3, ws);
    a.causal = true;
    vkattn_mha_weights lw = layer_weights(&l);
    REF_OK(vkattn_ref_mha(&desc, &lw, &a, err, sizeof err));

    vkattn_ref_attention_args m = {0};
    m.key_padding = a.key_padding;
    m.weights = vkattn_host_tensor_make(want_w, VKATTN_DTYPE_F32, 3, ws);
    m.causal = true;
    mha_by_steps(&l, x, B, T, x, T, &m, want);
    ref_assert_close(y, want, (size_t)(B * T * 32), 1e-6, "y");
    ref_assert_close(w, want_w, 50, 1e-7, "weights");
    assert_true(fabsf(y[0]) > 1e-4f && fabsf(y[0] - y[32]) > 1e-6f);
    assert_float_equal(w[3], 0.0, 0.0); /* query 0 cannot see key 3 (causal, padded) */
    free(x), free(y), free(want);
    layer_free(&l);
}

/* Cross-attention: Dkv != Dm, Tk != Tq, explicit head_dim with Hq*Dh != Dm,
 * MQA, no bias, a broadcast rank-4 mask and rank-4 weights. */
static void test_mha_cross_matches_steps(void **state)
{
    (void)state;
    test_rng r = test_rng_seed(32);
    vkattn_mha_desc desc = {
        .embed_dim = 32, .num_heads = 4, .num_kv_heads = 1, .head_dim = 16, .kv_dim = 24};
    layer l;
    layer_init(&l, &r, &desc, 1, 16, 24);
    const int64_t B = 2, Tq = 3, Tk = 7;
    float *x = ref_randf(&r, (size_t)(B * Tq * 32)), *c = ref_randf(&r, (size_t)(B * Tk * 24));
    float *mask = ref_randf(&r, (size_t)(4 * Tq * Tk));
    size_t ny = (size_t)(B * Tq * 32), nw = (size_t)(B * 4 * Tq * Tk);
    float *y = test_alloc(ny * 4), *want = test_alloc(ny * 4);
    float *w = test_alloc(nw * 4), *want_w = test_alloc(nw * 4);
    int64_t xs[3] = {B, Tq, 32}, cs[3] = {B, Tk, 24}, ms[4] = {1, 4, Tq, Tk},
            ws[4] = {B, 4, Tq, Tk};
    vkattn_ref_mha_args a = {0};
    a.x = vkattn_host_tensor_make(x, VKATTN_DTYPE_F32, 3, xs);
    a.kv = vkattn_host_tensor_make(c, VKATTN_DTYPE_F32, 3, cs);
    a.y = vkattn_host_tensor_make(y, VKATTN_DTYPE_F32, 3, xs);
    a.mask = vkattn_host_tensor_make(mask, VKATTN_DTYPE_F32, 4, ms);
    a.weights = vkattn_host_tensor_make(w, VKATTN_DTYPE_F32, 4, ws);
    vkattn_mha_weights lw = layer_weights(&l); /* biases set but desc.bias is false */
    REF_OK(vkattn_ref_mha(&desc, &lw, &a, err, sizeof err));
    vkattn_ref_attention_args m = {0};
    m.mask = a.mask;
    m.weights = vkattn_host_tensor_make(want_w, VKATTN_DTYPE_F32, 4, ws);
    mha_by_steps(&l, x, B, Tq, c, Tk, &m, want);
    ref_assert_close(y, want, ny, 1e-6, "y");
    ref_assert_close(w, want_w, nw, 1e-7, "weights");
    assert_true(fabsf(y[0] - y[32]) > 1e-6f);
    free(x), free(c), free(mask), free(y), free(want), free(w), free(want_w);
    layer_free(&l);
}

/* Packed wqkv/bqkv (rows of wq, then wk, then wv) == separate weights, for
 * self and cross attention; NULL biases with desc.bias == no bias. */
static void test_mha_packed_equals_separate(void **state)
{
    (void)state;
    test_rng r = test_rng_seed(33);
    vkattn_mha_desc desc = {.embed_dim = 16, .num_heads = 2, .num_kv_heads = 1, .bias = true};
    layer l;
    layer_init(&l, &r, &desc, 1, 8, 16);
    size_t nq = 16 * 16, nkv = 8 * 16;
    float *wqkv = test_alloc((nq + 2 * nkv) * 4), bqkv[32];
    memcpy(wqkv, l.wq, nq * 4);
    memcpy(wqkv + nq, l.wk, nkv * 4);
    memcpy(wqkv + nq + nkv, l.wv, nkv * 4);
    memcpy(bqkv, l.bq, 16 * 4);
    memcpy(bqkv + 16, l.bk, 8 * 4);
    memcpy(bqkv + 24, l.bv, 8 * 4);
    const int64_t B = 1, Tq = 4, Tk = 6;
    float *x = ref_randf(&r, (size_t)(B * Tq * 16)), *c = ref_randf(&r, (size_t)(B * Tk * 16));
    float y1[64], y2[64];
    int64_t xs[3] = {B, Tq, 16}, cs[3] = {B, Tk, 16};
    for (int cross = 0; cross < 2; cross++) {
        vkattn_ref_mha_args a = {0};
        a.x = vkattn_host_tensor_make(x, VKATTN_DTYPE_F32, 3, xs);
        if (cross)
            a.kv = vkattn_host_tensor_make(c, VKATTN_DTYPE_F32, 3, cs);
        a.y = vkattn_host_tensor_make(y1, VKATTN_DTYPE_F32, 3, xs);
        a.causal = !cross;
        vkattn_mha_weights sep = layer_weights(&l), packed = {0};
        packed.wqkv = wqkv, packed.bqkv = bqkv, packed.wo = l.wo, packed.bo = l.bo;
        REF_OK(vkattn_ref_mha(&desc, &sep, &a, err, sizeof err));
        a.y.data = y2;
        REF_OK(vkattn_ref_mha(&desc, &packed, &a, err, sizeof err));
        ref_assert_close(y1, y2, 64, 0.0, "y packed");
        /* Packed weights with separate biases give the same too. */
        packed.bqkv = NULL, packed.bq = l.bq, packed.bk = l.bk, packed.bv = l.bv;
        REF_OK(vkattn_ref_mha(&desc, &packed, &a, err, sizeof err));
        ref_assert_close(y1, y2, 64, 0.0, "y packed, separate biases");

        /* desc.bias with every bias NULL == desc.bias false. */
        vkattn_mha_desc nobias = desc;
        nobias.bias = false;
        vkattn_mha_weights nulls = layer_weights(&l);
        nulls.bq = nulls.bk = nulls.bv = nulls.bo = NULL;
        a.y.data = y1;
        REF_OK(vkattn_ref_mha(&desc, &nulls, &a, err, sizeof err));
        a.y.data = y2;
        REF_OK(vkattn_ref_mha(&nobias, &sep, &a, err, sizeof err));
        ref_assert_close(y1, y2, 64, 0.0, "y without biases");
        /* ... and differs from the biased result. */
        float y3[64];
        a.y.data = y3;
        REF_OK(vkattn_ref_mha(&desc, &sep, &a, err, sizeof err));
        assert_true(fabsf(y3[0] - y1[0]) > 1e-5f);
    }
    free(wqkv), free(x), free(c);
    layer_free(&l);
}

int ref_run_linear_mha_tests(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_linear_hand),
        cmocka_unit_test(test_linear_matches_loop),
        cmocka_unit_test(test_mha_self_matches_steps),
        cmocka_unit_test(test_mha_cross_matches_steps),
        cmocka_unit_test(test_mha_packed_equals_separate),
    };
    return cmocka_run_group_tests_name("reference_linear_mha", tests, NULL, NULL);
}
