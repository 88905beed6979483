/* bfloat16: the host conversions (rounding to nearest even, NaN, inf,
 * every one of the 65536 values back and forth), and vkattn_attention
 * with bf16 q/out, k/v and masks in every pairing with f32 and f16, on all
 * four kernel policies, against the CPU reference on the same rounded
 * inputs; the kernels' rounding of the output bit for bit equal to the
 * host's; MHA weights given on the host in f16 or bf16; a whole bf16 layer
 * (forward, and steps through a bf16 KV cache). (The merge and RoPE ops'
 * bf16: test_attention_mods.c, test_rope.c.) */
#include "test_policy.h"
#include "test_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

static float from_bits(uint32_t x)
{
    float f;
    memcpy(&f, &x, 4);
    return f;
}

static void test_host_rounding(void **state)
{
    (void)state;
    static const struct {
        uint32_t f32;
        uint16_t bf16;
    } cases[] = {
        {0x3f800000u, 0x3f80u}, /* 1 */
        {0x3f808000u, 0x3f80u}, /* tie, even stays */
        {0x3f818000u, 0x3f82u}, /* tie, odd rounds up */
        {0x3f808001u, 0x3f81u}, /* above the tie */
        {0x3f807fffu, 0x3f80u}, /* below the tie */
        {0xbf818000u, 0xbf82u}, /* negative tie */
        {0x7f7fffffu, 0x7f80u}, /* the largest float rounds to inf */
        {0x7f7f7fffu, 0x7f7fu}, /* ... but not just below the tie */
        {0x7f800000u, 0x7f80u}, /* inf */
        {0xff800000u, 0xff80u}, /* -inf */
        {0x00000001u, 0x0000u}, /* the smallest subnormal: to zero */
        {0x00018000u, 0x0002u}, /* a subnormal tie, odd rounds up */
        {0x80000000u, 0x8000u}, /* -0 */
        {0x7fc00000u, 0x7fc0u}, /* quiet NaN */
        {0x7f800001u, 0x7fc0u}, /* signalling NaN with a low payload: quiet */
        {0xff812345u, 0xffc1u}, /* negative NaN keeps its sign and top bits */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint16_t got = vkattn_f32_to_bf16(from_bits(cases[i].f32));
        if (got != cases[i].bf16)
            fail_msg("vkattn_f32_to_bf16(0x%08x) = 0x%04x, want 0x%04x", cases[i].f32, got,
                     cases[i].bf16);
    }
    /* every bf16 value survives the round trip (NaNs stay NaN, quieted) */
    for (uint32_t h = 0; h < 65536u; h++) {
        float f = vkattn_bf16_to_f32((uint16_t)h);
        uint32_t bits;
        memcpy(&bits, &f, 4);
        assert_int_equal(bits, h << 16);
        uint16_t back = vkattn_f32_to_bf16(f);
        if (isnan(f))
            assert_int_equal(back, (uint16_t)(h | 0x40u));
        else
            assert_int_equal(back, (uint16_t)h);
    }
    assert_int_equal(vkattn_dtype_size(VKATTN_DTYPE_BF16), 2);
    assert_string_equal(vkattn_dtype_name(VKATTN_DTYPE_BF16), "bf16");
}

typedef struct bf16_case {
    vkattn_dtype q, kv, mask; /* mask VKATTN_DTYPE_U8 here: none */
    uint32_t B, Hq, Hkv, Tq, Tk, D;
    bool causal;
    int weights;
} bf16_case;

#define F32 VKATTN_DTYPE_F32
#define F16 VKATTN_DTYPE_F16
#define BF16 VKATTN_DTYPE_BF16
#define NONE VKATTN_DTYPE_U8

static void run_case(test_gpu *g, uint32_t policy, const void *arg)
{
    const bf16_case *c = arg;
    vkattn_context *ctx = g->ctx;
    char what[256];
    snprintf(what, sizeof what, "%s q %s kv %s mask %s B%u Hq%u Hkv%u Tq%u Tk%u D%u causal%d w%d",
             test_policies[policy].name, vkattn_dtype_name(c->q), vkattn_dtype_name(c->kv),
             c->mask == NONE ? "none" : vkattn_dtype_name(c->mask), c->B, c->Hq, c->Hkv, c->Tq,
             c->Tk, c->D, c->causal, c->weights);
    test_rng rng = test_rng_seed(900u + c->Tq + 3u * c->Tk + 7u * c->q + 11u * c->kv);
    size_t nq = (size_t)c->B * c->Hq * c->Tq * c->D, nk = (size_t)c->B * c->Hkv * c->Tk * c->D;
    size_t nm = (size_t)c->Tq * c->Tk, nw = (size_t)c->B * c->Hq * c->Tq * c->Tk;
    float *q = test_random_array(&rng, nq, 2.0f, c->q);
    float *k = test_random_array(&rng, nk, 2.0f, c->kv);
    float *v = test_random_array(&rng, nk, 1.0f, c->kv);
    float *mask = test_random_array(&rng, nm, 1.0f, c->mask == NONE ? F32 : c->mask);
    for (size_t i = 0; i < nm; i += 5)
        mask[i] = -INFINITY;
    float *want = malloc(nq * 4), *got = malloc(nq * 4);
    float *want_w = malloc(nw * 4), *got_w = malloc(nw * 4);
    assert_true(want && got && want_w && got_w);
    int64_t qs[4] = {c->B, c->Hq, c->Tq, c->D}, ks[4] = {c->B, c->Hkv, c->Tk, c->D};
    int64_t ms[2] = {c->Tq, c->Tk}, ws[4] = {c->B, c->Hq, c->Tq, c->Tk};
    vkattn_ref_attention_args r = {
        .q = vkattn_host_tensor_make(q, F32, 4, qs),
        .k = vkattn_host_tensor_make(k, F32, 4, ks),
        .v = vkattn_host_tensor_make(v, F32, 4, ks),
        .out = vkattn_host_tensor_make(want, F32, 4, qs),
        .causal = c->causal,
    };
    if (c->mask != NONE)
        r.mask = vkattn_host_tensor_make(mask, F32, 2, ms);
    if (c->weights)
        r.weights = vkattn_host_tensor_make(want_w, F32, 4, ws);
    char err[512];
    if (vkattn_ref_attention(&r, err, sizeof err) != VKATTN_SUCCESS)
        fail_msg("reference: %s", err);
    vkattn_buffer *bq = test_buffer_of(ctx, c->q, q, nq), *bk = test_buffer_of(ctx, c->kv, k, nk),
                  *bv = test_buffer_of(ctx, c->kv, v, nk);
    vkattn_buffer *bo = test_buffer_with(ctx, NULL, nq * vkattn_dtype_size(c->q));
    vkattn_buffer *bm = c->mask != NONE ? test_buffer_of(ctx, c->mask, mask, nm) : NULL;
    vkattn_buffer *bw = c->weights ? test_buffer_with(ctx, NULL, nw * 4) : NULL;
    vkattn_attention_args a = {
        .q = vkattn_tensor_make(bq, 0, c->q, 4, qs),
        .k = vkattn_tensor_make(bk, 0, c->kv, 4, ks),
        .v = vkattn_tensor_make(bv, 0, c->kv, 4, ks),
        .out = vkattn_tensor_make(bo, 0, c->q, 4, qs),
        .causal = c->causal,
    };
    if (bm)
        a.mask = vkattn_tensor_make(bm, 0, c->mask, 2, ms);
    if (bw)
        a.weights = vkattn_tensor_make(bw, 0, F32, 4, ws);
    TEST_OK(ctx, vkattn_attention(ctx, &a));
    test_download_as(ctx, bo, c->q, got, nq);
    double tol = c->q == BF16 ? TEST_TOL_BF16 : c->q == F16 ? TEST_TOL_F16 : TEST_TOL_F32;
    if (c->kv != F32 && c->q == F32)
        tol = TEST_TOL_F32; /* inputs are exact in f32: only the math differs */
    test_assert_close(got, want, nq, tol, what);
    if (bw) {
        TEST_OK(ctx, vkattn_buffer_download(bw, 0, got_w, nw * 4));
        test_assert_close(got_w, want_w, nw, TEST_TOL_F32, what);
    }

    /* The same call with an f32 output (q is exact in f32): the bf16 output
     * is that result rounded as vkattn_f32_to_bf16 rounds, bit for bit. */
    if (c->q == BF16) {
        vkattn_buffer *bq32 = test_buffer_of(ctx, F32, q, nq);
        vkattn_buffer *bo32 = test_buffer_with(ctx, NULL, nq * 4);
        vkattn_attention_args a32 = a;
        a32.q = vkattn_tensor_make(bq32, 0, F32, 4, qs);
        a32.out = vkattn_tensor_make(bo32, 0, F32, 4, qs);
        a32.weights = (vkattn_tensor){0};
        TEST_OK(ctx, vkattn_attention(ctx, &a32));
        float *o32 = malloc(nq * 4);
        uint16_t *raw = malloc(nq * 2);
        assert_true(o32 && raw);
        TEST_OK(ctx, vkattn_buffer_download(bo32, 0, o32, nq * 4));
        TEST_OK(ctx, vkattn_buffer_download(bo, 0, raw, nq * 2));
        for (size_t i = 0; i < nq; i++)
            if (raw[i] != vkattn_f32_to_bf16(o32[i]))
                fail_msg("%s: out[%zu] is bf16 0x%04x, the f32 result %.9g rounds to 0x%04x", what,
                         i, raw[i], (double)o32[i], vkattn_f32_to_bf16(o32[i]));
        free(o32), free(raw);
        TEST_DESTROY_BUFFERS(bq32, bo32);
    }
    TEST_DESTROY_BUFFERS(bq, bk, bv, bo, bm, bw);
    free(q), free(k), free(v), free(mask), free(want), free(got), free(want_w), free(got_w);
}

static void test_attention_bf16(void **state)
{
    (void)state;
    static const bf16_case cases[] = {
        {BF16, BF16, NONE, 2, 4, 2, 33, 47, 64, true, 0},
        {BF16, BF16, BF16, 1, 2, 2, 17, 29, 32, false, 4},
        {BF16, F32, NONE, 2, 2, 1, 9, 40, 16, true, 0},
        {F32, BF16, F32, 1, 4, 4, 21, 21, 128, true, 0},
        {BF16, F16, F16, 1, 2, 1, 12, 30, 32, false, 0},
        {F16, BF16, BF16, 2, 2, 2, 14, 19, 64, false, 4},
        {BF16, BF16, F32, 1, 8, 2, 70, 70, 64, true, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        test_for_each_policy(0, run_case, &cases[i]);
}

/* Host weights in f16 and bf16 (vkattn_mha_weights.dtype), packed and
 * split, into f32 and f16 layers: the same output, bit for bit, as the
 * same values given as f32; the reference likewise. */
static void run_weight_dtypes(test_gpu *g, uint32_t policy, const void *arg)
{
    (void)policy;
    const vkattn_dtype *layer_dt = arg;
    vkattn_context *ctx = g->ctx;
    enum { B = 2, T = 7, DM = 32, H = 4, HKV = 2, DH = 8 };
    const size_t nqkv = (size_t)(H + 2 * HKV) * DH * DM, nwo = (size_t)DM * H * DH;
    const size_t nb = (size_t)(H + 2 * HKV) * DH;
    test_rng rng = test_rng_seed(31u + *layer_dt);
    float *x = test_random_array(&rng, (size_t)B * T * DM, 1.0f, *layer_dt);
    for (int src = 0; src < 2; src++) {
        vkattn_dtype sdt = src ? BF16 : F16;
        /* values exact in the host dtype (and, for an f16 layer, in f16) */
        float *wqkv = test_random_array(&rng, nqkv, 0.3f, sdt),
              *wo = test_random_array(&rng, nwo, 0.3f, sdt);
        float *bqkv = test_random_array(&rng, nb, 0.1f, sdt),
              *bo = test_random_array(&rng, DM, 0.1f, sdt);
        test_round_to(*layer_dt, wqkv, nqkv), test_round_to(*layer_dt, wo, nwo);
        test_round_to(*layer_dt, bqkv, nb), test_round_to(*layer_dt, bo, DM);
        uint16_t *h[4];
        const float *f[4] = {wqkv, wo, bqkv, bo};
        const size_t n[4] = {nqkv, nwo, nb, DM};
        for (int i = 0; i < 4; i++) {
            h[i] = malloc(n[i] * 2);
            assert_non_null(h[i]);
            for (size_t e = 0; e < n[i]; e++)
                h[i][e] = sdt == F16 ? vkattn_f32_to_f16(f[i][e]) : vkattn_f32_to_bf16(f[i][e]);
        }
        vkattn_mha_desc d = {
            .embed_dim = DM, .num_heads = H, .num_kv_heads = HKV, .bias = true, .dtype = *layer_dt};
        vkattn_mha_weights w32 = {.wqkv = wqkv, .wo = wo, .bqkv = bqkv, .bo = bo};
        vkattn_mha_weights w16 = {.wqkv = (const float *)h[0],
                                  .wo = (const float *)h[1],
                                  .bqkv = (const float *)h[2],
                                  .bo = (const float *)h[3],
                                  .dtype = sdt};
        int64_t xs[3] = {B, T, DM};
        size_t nx = (size_t)B * T * DM, es = vkattn_dtype_size(*layer_dt);
        vkattn_buffer *bx = test_buffer_of(ctx, *layer_dt, x, nx);
        vkattn_buffer *by[2] = {test_buffer_with(ctx, NULL, nx * es),
                                test_buffer_with(ctx, NULL, nx * es)};
        const vkattn_mha_weights *ws[2] = {&w32, &w16};
        for (int i = 0; i < 2; i++) {
            vkattn_mha *layer = test_mha_create(ctx, &d, ws[i]);
            vkattn_mha_forward_args fa = {.x = vkattn_tensor_make(bx, 0, *layer_dt, 3, xs),
                                          .y = vkattn_tensor_make(by[i], 0, *layer_dt, 3, xs),
                                          .causal = true};
            TEST_OK(ctx, vkattn_mha_forward(layer, &fa));
            vkattn_mha_destroy(layer);
        }
        void *y0 = malloc(nx * es), *y1 = malloc(nx * es);
        assert_true(y0 && y1);
        TEST_OK(ctx, vkattn_buffer_download(by[0], 0, y0, nx * es));
        TEST_OK(ctx, vkattn_buffer_download(by[1], 0, y1, nx * es));
        if (memcmp(y0, y1, nx * es) != 0)
            fail_msg("%s layer: %s host weights give another output than the same values in f32",
                     vkattn_dtype_name(*layer_dt), vkattn_dtype_name(sdt));
        /* the reference reads the host dtype too (f32 layer: same values) */
        float *r0 = malloc(nx * 4), *r1 = malloc(nx * 4);
        assert_true(r0 && r1);
        d.dtype = F32;
        vkattn_ref_mha_args ra = {.x = vkattn_host_tensor_make(x, F32, 3, xs), .causal = true};
        char err[512];
        ra.y = vkattn_host_tensor_make(r0, F32, 3, xs);
        assert_int_equal(vkattn_ref_mha(&d, &w32, &ra, err, sizeof err), VKATTN_SUCCESS);
        ra.y = vkattn_host_tensor_make(r1, F32, 3, xs);
        if (vkattn_ref_mha(&d, &w16, &ra, err, sizeof err) != VKATTN_SUCCESS)
            fail_msg("reference with %s weights: %s", vkattn_dtype_name(sdt), err);
        assert_memory_equal(r0, r1, nx * 4);
        /* a dtype the host weights cannot have */
        vkattn_mha_weights bad = w16;
        bad.dtype = VKATTN_DTYPE_I32;
        assert_int_equal(vkattn_ref_mha(&d, &bad, &ra, err, sizeof err),
                         VKATTN_ERROR_UNSUPPORTED_DTYPE);
        assert_non_null(strstr(err, "weights->dtype i32"));
        d.dtype = *layer_dt;
        vkattn_mha *layer = NULL;
        TEST_OK(ctx, vkattn_mha_create(ctx, &d, &layer));
        assert_int_equal(vkattn_mha_set_weights(layer, &bad), VKATTN_ERROR_UNSUPPORTED_DTYPE);
        assert_non_null(strstr(vkattn_context_last_error(ctx), "weights->dtype i32"));
        vkattn_mha_destroy(layer);
        TEST_DESTROY_BUFFERS(bx, by[0], by[1]);
        free(y0), free(y1), free(r0), free(r1);
        for (int i = 0; i < 4; i++)
            free(h[i]);
        free(wqkv), free(wo), free(bqkv), free(bo);
    }
    free(x);
}

static void test_host_weight_dtypes(void **state)
{
    (void)state;
    static const vkattn_dtype layers[2] = {VKATTN_DTYPE_F32, VKATTN_DTYPE_F16};
    for (int i = 0; i < 2; i++)
        test_for_each_policy(TEST_POLICY_STORAGE_SHARED, run_weight_dtypes, &layers[i]);
}

/* A whole layer in bf16 (weights, activations, the KV cache): the forward
 * and a prefill + decode through a paged bf16 cache against vkattn_ref_mha
 * on the same bf16 weights and input, within bf16's tolerance although the
 * layer rounds to bf16 between its stages (Q/K/V, the attention output, y;
 * measured: max_rel 3.3e-3 on lavapipe). */

static void run_layer_bf16(test_gpu *g, uint32_t policy, const void *arg)
{
    (void)policy, (void)arg;
    vkattn_context *ctx = g->ctx;
    enum { T = 13, PREFILL = 10, DM = 64, H = 4, HKV = 2, DH = 16 };
    vkattn_mha_desc d = {.embed_dim = DM,
                         .num_heads = H,
                         .num_kv_heads = HKV,
                         .bias = true,
                         .dtype = BF16,
                         .rope = {.theta = 10000.0f}};
    test_rng rng = test_rng_seed(77);
    const size_t nq = (size_t)H * DH * DM, nkv = (size_t)HKV * DH * DM;
    float *wq = test_random_array(&rng, nq, 0.25f, BF16),
          *wk = test_random_array(&rng, nkv, 0.25f, BF16);
    float *wv = test_random_array(&rng, nkv, 0.25f, BF16),
          *wo = test_random_array(&rng, nq, 0.25f, BF16);
    float *bq = test_random_array(&rng, H * DH, 0.1f, BF16),
          *bo = test_random_array(&rng, DM, 0.1f, BF16);
    float *x = test_random_array(&rng, (size_t)T * DM, 1.0f, BF16);
    vkattn_mha_weights w = {.wq = wq, .wk = wk, .wv = wv, .wo = wo, .bq = bq, .bo = bo};
    int64_t xs[3] = {1, T, DM};
    float *want = malloc((size_t)T * DM * 4), *got = malloc((size_t)T * DM * 4);
    assert_true(want && got);
    vkattn_ref_mha_args ra = {.x = vkattn_host_tensor_make(x, F32, 3, xs),
                              .y = vkattn_host_tensor_make(want, F32, 3, xs),
                              .causal = true};
    char err[512];
    vkattn_mha_desc rd = d;
    rd.dtype = F32;
    if (vkattn_ref_mha(&rd, &w, &ra, err, sizeof err) != VKATTN_SUCCESS)
        fail_msg("reference: %s", err);
    vkattn_mha *layer = test_mha_create(ctx, &d, &w);
    vkattn_buffer *bx = test_buffer_of(ctx, BF16, x, (size_t)T * DM);
    vkattn_buffer *by = test_buffer_with(ctx, NULL, (size_t)T * DM * 2);
    vkattn_mha_forward_args fa = {.x = vkattn_tensor_make(bx, 0, BF16, 3, xs),
                                  .y = vkattn_tensor_make(by, 0, BF16, 3, xs),
                                  .causal = true};
    TEST_OK(ctx, vkattn_mha_forward(layer, &fa));
    test_download_as(ctx, by, BF16, got, (size_t)T * DM);
    test_assert_close(got, want, (size_t)T * DM, TEST_TOL_BF16, "bf16 layer forward");

    /* the same tokens through a paged bf16 cache: a prefill, then decode */
    vkattn_kv_cache_desc cd = test_kv_desc(HKV, H, DH, 1, 32, 8);
    cd.dtype = BF16;
    vkattn_kv_cache *cache = NULL;
    TEST_OK(ctx, vkattn_kv_cache_create(ctx, &cd, &cache));
    uint32_t seq = 0;
    for (uint32_t t0 = 0; t0 < T;) {
        uint32_t n = t0 == 0 ? PREFILL : 1;
        int64_t ss[3] = {1, n, DM};
        vkattn_mha_step_args a = {.cache = cache, .batch = 1, .sequences = &seq};
        a.x = vkattn_tensor_make(bx, (uint64_t)t0 * DM * 2, BF16, 3, ss);
        a.y = vkattn_tensor_make(by, (uint64_t)t0 * DM * 2, BF16, 3, ss);
        TEST_OK(ctx, vkattn_mha_step(layer, &a));
        t0 += n;
    }
    test_download_as(ctx, by, BF16, got, (size_t)T * DM);
    test_assert_close(got, want, (size_t)T * DM, TEST_TOL_BF16, "bf16 layer prefill + decode");
    vkattn_kv_cache_destroy(cache);
    vkattn_mha_destroy(layer);
    TEST_DESTROY_BUFFERS(bx, by);
    free(wq), free(wk), free(wv), free(wo), free(bq), free(bo), free(x), free(want), free(got);
}

static void test_layer_bf16(void **state)
{
    (void)state;
    test_for_each_policy(0, run_layer_bf16, NULL);
}

int main(void)
{
    const struct CMUnitTest cpu[] = {
        cmocka_unit_test(test_host_rounding),
    };
    const struct CMUnitTest gpu[] = {
        cmocka_unit_test(test_attention_bf16),
        cmocka_unit_test(test_host_weight_dtypes),
        cmocka_unit_test(test_layer_bf16),
    };
    int failed = cmocka_run_group_tests_name("bf16_host", cpu, NULL, NULL);
    return failed + cmocka_run_group_tests_name("bf16_gpu", gpu, test_gpu_setup, test_gpu_teardown);
}
