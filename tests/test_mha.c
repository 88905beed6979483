/* The MHA layer on the device against vkattn_ref_mha: self- and cross-
 * attention, MHA/GQA/MQA, biases, packed and separate weights, masks, both
 * dtypes, caller scratch, the record form; and every bad input. */
#include "test_policy.h"
#include "test_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

typedef struct layer_case {
    uint32_t b, tq, tk, dm, dkv, hq, hkv, dh;
    bool bias, packed, cross, causal, padding, mask, weights, per_head;
    vkattn_dtype dtype;
    uint32_t dv; /* V's head dim; 0: dh */
} layer_case;

/* `n` values of dtype `dt` from `b`, as floats (malloc'd). */
static float *download_as(vkattn_context *ctx, vkattn_buffer *b, size_t n, vkattn_dtype dt)
{
    float *out = malloc(n * 4);
    assert_non_null(out);
    test_download_as(ctx, b, dt, out, n);
    return out;
}

/* Runs one configuration on the device and on the CPU and compares y (and
 * the attention weights when asked). `record`: through vkattn_cmd_mha_forward
 * with caller-provided scratch instead of vkattn_mha_forward. */
static void run_case(vkattn_context *ctx, const layer_case *c, uint64_t seed, bool record)
{
    test_rng rng = test_rng_seed(seed);
    const vkattn_dtype dt = c->dtype;
    uint32_t dkv = c->cross ? c->dkv : c->dm, tk = c->cross ? c->tk : c->tq;
    const uint32_t dv = c->dv ? c->dv : c->dh;
    size_t qw = (size_t)c->hq * c->dh, kvw = (size_t)c->hkv * c->dh, vw = (size_t)c->hkv * dv,
           ow = (size_t)c->hq * dv;
    float amp = 1.5f / sqrtf((float)c->dm);
    float *wq = test_random_array(&rng, qw * c->dm, amp, dt);
    float *wk = test_random_array(&rng, kvw * dkv, amp, dt),
          *wv = test_random_array(&rng, vw * dkv, amp, dt);
    float *wo = test_random_array(&rng, c->dm * ow, amp, dt);
    float *bq = test_random_array(&rng, qw, 0.2f, dt), *bk = test_random_array(&rng, kvw, 0.2f, dt),
          *bv = test_random_array(&rng, vw, 0.2f, dt),
          *bo = test_random_array(&rng, c->dm, 0.2f, dt);
    size_t nx = (size_t)c->b * c->tq * c->dm, nkv = (size_t)c->b * tk * dkv;
    float *x = test_random_array(&rng, nx, 1.0f, dt);
    float *kv = c->cross ? test_random_array(&rng, nkv, 1.0f, dt) : NULL;
    uint8_t *pad = NULL;
    float *mask = NULL;
    if (c->padding) { /* every sequence keeps at least one key unless the test wants it empty */
        pad = malloc((size_t)c->b * tk);
        for (size_t i = 0; i < (size_t)c->b * tk; i++)
            pad[i] = test_rng_below(&rng, 4) != 0;
    }
    if (c->mask) {
        mask = test_random_array(&rng, (size_t)c->tq * tk, 1.0f, VKATTN_DTYPE_F32);
        for (size_t i = 0; i < (size_t)c->tq * tk; i++)
            if (test_rng_below(&rng, 6) == 0)
                mask[i] = -INFINITY;
    }
    /* packed Wqkv when asked (needs Dkv == Dm) */
    float *wqkv = NULL, *bqkv = NULL;
    if (c->packed) {
        wqkv = malloc((qw + kvw + vw) * c->dm * 4);
        memcpy(wqkv, wq, qw * c->dm * 4);
        memcpy(wqkv + qw * c->dm, wk, kvw * c->dm * 4);
        memcpy(wqkv + (qw + kvw) * c->dm, wv, vw * c->dm * 4);
        bqkv = malloc((qw + kvw + vw) * 4);
        memcpy(bqkv, bq, qw * 4);
        memcpy(bqkv + qw, bk, kvw * 4);
        memcpy(bqkv + qw + kvw, bv, vw * 4);
    }
    vkattn_mha_desc desc = {.embed_dim = c->dm,
                            .num_heads = c->hq,
                            .num_kv_heads = c->hkv,
                            .head_dim = c->dh == c->dm / c->hq ? 0 : c->dh,
                            .v_head_dim = c->dv,
                            .kv_dim = c->cross ? dkv : 0,
                            .bias = c->bias,
                            .dtype = c->dtype};
    vkattn_mha_weights w = {.wo = wo, .bo = c->bias ? bo : NULL};
    if (c->packed) {
        w.wqkv = wqkv;
        w.bqkv = c->bias ? bqkv : NULL;
    } else {
        w.wq = wq, w.wk = wk, w.wv = wv;
        if (c->bias)
            w.bq = bq, w.bk = bk, w.bv = bv;
    }
    int64_t xs[3] = {c->b, c->tq, c->dm}, kvs[3] = {c->b, tk, dkv}, ps[2] = {c->b, tk},
            ms[2] = {c->tq, tk};
    int64_t ws[4] = {c->b, c->per_head ? c->hq : c->tq, c->per_head ? c->tq : tk, tk};
    uint32_t wrank = c->per_head ? 4 : 3;
    size_t nw = (size_t)ws[0] * ws[1] * ws[2] * (c->per_head ? (size_t)ws[3] : 1);

    float *ref_y = malloc(nx * 4), *ref_w = c->weights ? malloc(nw * 4) : NULL;
    vkattn_ref_mha_args ra = {.causal = c->causal};
    ra.x = vkattn_host_tensor_make(x, VKATTN_DTYPE_F32, 3, xs);
    if (kv)
        ra.kv = vkattn_host_tensor_make(kv, VKATTN_DTYPE_F32, 3, kvs);
    if (pad)
        ra.key_padding = vkattn_host_tensor_make(pad, VKATTN_DTYPE_U8, 2, ps);
    if (mask)
        ra.mask = vkattn_host_tensor_make(mask, VKATTN_DTYPE_F32, 2, ms);
    ra.y = vkattn_host_tensor_make(ref_y, VKATTN_DTYPE_F32, 3, xs);
    if (ref_w)
        ra.weights = vkattn_host_tensor_make(ref_w, VKATTN_DTYPE_F32, wrank, ws);
    char err[512];
    if (vkattn_ref_mha(&desc, &w, &ra, err, sizeof err) != VKATTN_SUCCESS)
        fail_msg("reference: %s", err);

    vkattn_mha *layer = test_mha_create(ctx, &desc, &w);
    vkattn_mha_forward_args fa = {.causal = c->causal};
    vkattn_buffer *bx = test_buffer_of(ctx, dt, x, nx),
                  *bkv = kv ? test_buffer_of(ctx, dt, kv, nkv) : NULL;
    vkattn_buffer *bpad = pad ? test_buffer_with(ctx, pad, (size_t)c->b * tk) : NULL;
    vkattn_buffer *bmask = mask ? test_buffer_with(ctx, mask, (size_t)c->tq * tk * 4) : NULL;
    vkattn_buffer *by = test_buffer_with(ctx, NULL, nx * vkattn_dtype_size(c->dtype));
    vkattn_buffer *bw = ref_w ? test_buffer_with(ctx, NULL, nw * 4) : NULL;
    fa.x = vkattn_tensor_make(bx, 0, c->dtype, 3, xs);
    if (bkv)
        fa.kv = vkattn_tensor_make(bkv, 0, c->dtype, 3, kvs);
    if (bpad)
        fa.key_padding = vkattn_tensor_make(bpad, 0, VKATTN_DTYPE_U8, 2, ps);
    if (bmask)
        fa.mask = vkattn_tensor_make(bmask, 0, VKATTN_DTYPE_F32, 2, ms);
    fa.y = vkattn_tensor_make(by, 0, c->dtype, 3, xs);
    if (bw)
        fa.weights = vkattn_tensor_make(bw, 0, VKATTN_DTYPE_F32, wrank, ws);
    vkattn_buffer *scratch = NULL;
    if (record) {
        uint64_t need = 0;
        TEST_OK(ctx, vkattn_mha_scratch_size(layer, c->b, c->tq, tk, &need));
        scratch = test_buffer_with(ctx, NULL, need + 512);
        fa.scratch = scratch;
        fa.scratch_offset = 512;
        VkCommandBuffer cmd;
        TEST_OK(ctx, vkattn_commands_begin(ctx, &cmd));
        TEST_OK(ctx, vkattn_cmd_mha_forward(layer, cmd, &fa));
        TEST_OK(ctx, vkattn_commands_submit(ctx));
    } else {
        TEST_OK(ctx, vkattn_mha_forward(layer, &fa));
    }
    float *gy = download_as(ctx, by, nx, c->dtype);
    char what[256];
    snprintf(what, sizeof what,
             "mha B%u Tq%u Tk%u Dm%u Dkv%u Hq%u Hkv%u Dh%u %s bias%d packed%d cross%d causal%d "
             "pad%d mask%d",
             c->b, c->tq, tk, c->dm, dkv, c->hq, c->hkv, c->dh, vkattn_dtype_name(c->dtype),
             c->bias, c->packed, c->cross, c->causal, c->padding, c->mask);
    double tol = c->dtype == VKATTN_DTYPE_F16 ? TEST_TOL_F16 : TEST_TOL_F32;
    test_assert_close(gy, ref_y, nx, tol, what);
    if (bw) {
        float *gw = download_as(ctx, bw, nw, VKATTN_DTYPE_F32);
        test_assert_close(gw, ref_w, nw, tol, what);
        free(gw);
    }
    TEST_DESTROY_BUFFERS(bx, bkv, bpad, bmask, by, bw, scratch);
    vkattn_mha_destroy(layer);
    float *hosts[] = {wq, wk, wv, wo, bq, bk, bv, bo, x, kv, mask, wqkv, bqkv, ref_y, ref_w, gy};
    for (size_t i = 0; i < sizeof hosts / sizeof hosts[0]; i++)
        free(hosts[i]);
    free(pad);
}

#define F32 VKATTN_DTYPE_F32
#define F16 VKATTN_DTYPE_F16
static const layer_case grid[] = {
    /* b tq tk dm dkv hq hkv dh  bias packed cross causal padding mask weights per_head dtype */
    {1, 7, 0, 32, 0, 4, 4, 8, true, true, false, false, false, false, false, false, F32},
    {2, 9, 0, 64, 0, 8, 2, 8, true, false, false, true, false, false, true, false, F32},
    {2, 5, 0, 64, 0, 4, 1, 16, false, false, false, true, true, false, false, false, F32},
    {1, 6, 11, 32, 24, 2, 2, 16, true, false, true, false, true, true, true, true, F32},
    {3, 4, 0, 48, 0, 6, 3, 8, true, true, false, true, false, true, false, false, F32},
    {1, 13, 0, 128, 0, 4, 4, 32, true, true, false, true, false, false, false, false, F16},
    {2, 8, 5, 64, 64, 8, 4, 8, true, false, true, false, true, false, true, false, F16},
    {1, 3, 0, 40, 0, 2, 1, 24, false, false, false, true, false, false, false, false, F16},
    /* head_dim different from embed_dim / heads */
    {1, 5, 0, 32, 0, 2, 2, 24, true, false, false, false, false, false, false, false, F32},
    /* 9..: V's head dim apart (dv, last): cross-attention 24 / 40 with padding
     * and averaged weights; MLA's absorbed 576 / 512, packed, causal; 21 / 5
     * (not multiples of 8) with a mask and per-head weights */
    {1, 6, 9, 32, 24, 2, 1, 24, true, false, true, false, true, false, true, false, F32, 40},
    {1, 5, 0, 64, 0, 2, 1, 576, true, true, false, true, false, false, false, false, F32, 512},
    {2, 7, 0, 42, 0, 2, 2, 21, true, false, false, true, false, true, true, true, F32, 5},
};

/* Grid cases by index: odd ones through the record form. */
static void run_grid_cases(test_gpu *g, const size_t *cases, size_t count)
{
    for (size_t n = 0; n < count; n++)
        run_case(g->ctx, &grid[cases[n]], 100 + cases[n], cases[n] % 2 == 1);
}

/* The grid by what its cases prove (together: every case once). */
static void test_layer_mha_matches_reference(void **state)
{
    static const size_t cases[] = {0, 8}; /* f32 self-attention, Hq == Hkv */
    run_grid_cases(*state, cases, sizeof cases / sizeof cases[0]);
}

static void test_layer_gqa_matches_reference(void **state)
{
    static const size_t cases[] = {1, 2, 4}; /* f32 self-attention, GQA and MQA, masks */
    run_grid_cases(*state, cases, sizeof cases / sizeof cases[0]);
}

static void test_layer_cross_attention_matches_reference(void **state)
{
    static const size_t cases[] = {3, 6};
    run_grid_cases(*state, cases, sizeof cases / sizeof cases[0]);
}

static void test_layer_head_dims_match_reference(void **state)
{
    static const size_t cases[] = {9, 10, 11};
    run_grid_cases(*state, cases, sizeof cases / sizeof cases[0]);
}

static void test_layer_f16_matches_reference(void **state)
{
    static const size_t cases[] = {5, 7}; /* f16 self-attention */
    run_grid_cases(*state, cases, sizeof cases / sizeof cases[0]);
}

/* The case in f32 through the forward call, in f16 through the record form. */
static void other_path(test_gpu *g, uint32_t policy, const void *c32)
{
    layer_case c16 = *(const layer_case *)c32;
    c16.dtype = VKATTN_DTYPE_F16;
    run_case(g->ctx, c32, 6 + policy, false);
    run_case(g->ctx, &c16, 16 + policy, true);
}

/* The other kernel families and bindings give the same layer. */
static void test_layer_other_paths(void **state)
{
    (void)state;
    const layer_case c32 = {2,
                            6,
                            0,
                            64,
                            0,
                            8,
                            2,
                            8,
                            true,
                            true,
                            false,
                            true,
                            true,
                            false,
                            false,
                            false,
                            VKATTN_DTYPE_F32};
    test_for_each_policy(1, other_path, &c32);
}

/* Every bad input named by the forward-pass issue, with its code. */
static void test_layer_errors(void **state)
{
    test_gpu *g = *state;
    vkattn_context *ctx = g->ctx;
    vkattn_mha *m = (vkattn_mha *)g;
    vkattn_mha_desc d = {.embed_dim = 32, .num_heads = 4, .num_kv_heads = 3};
    TEST_FAILS(ctx, VKATTN_ERROR_INVALID_ARGUMENT, "num_kv_heads", vkattn_mha_create(ctx, &d, &m));
    assert_null(m);
    d = (vkattn_mha_desc){.embed_dim = 30, .num_heads = 4};
    TEST_FAILS(ctx, VKATTN_ERROR_INVALID_ARGUMENT, "30", vkattn_mha_create(ctx, &d, &m));
    d = (vkattn_mha_desc){.embed_dim = 2320, .num_heads = 4}; /* head_dim 580 */
    TEST_FAILS(ctx, VKATTN_ERROR_INVALID_ARGUMENT, "580", vkattn_mha_create(ctx, &d, &m));
    d = (vkattn_mha_desc){.embed_dim = 32, .num_heads = 2, .v_head_dim = 577};
    TEST_FAILS(ctx, VKATTN_ERROR_INVALID_ARGUMENT, "desc->v_head_dim 577",
               vkattn_mha_create(ctx, &d, &m));
    d = (vkattn_mha_desc){.embed_dim = 0, .num_heads = 2};
    TEST_FAILS(ctx, VKATTN_ERROR_INVALID_ARGUMENT, "embed_dim", vkattn_mha_create(ctx, &d, &m));
    d = (vkattn_mha_desc){.embed_dim = 32, .num_heads = 2, .dtype = VKATTN_DTYPE_U8};
    TEST_FAILS(ctx, VKATTN_ERROR_UNSUPPORTED_DTYPE, "dtype", vkattn_mha_create(ctx, &d, &m));
    d = (vkattn_mha_desc){.embed_dim = 32, .num_heads = 2, .dtype = (vkattn_dtype)42};
    TEST_FAILS(ctx, VKATTN_ERROR_UNSUPPORTED_DTYPE, "dtype", vkattn_mha_create(ctx, &d, &m));

    d = (vkattn_mha_desc){.embed_dim = 32, .num_heads = 4, .num_kv_heads = 2};
    TEST_OK(ctx, vkattn_mha_create(ctx, &d, &m));
    int64_t xs[3] = {2, 5, 32};
    vkattn_buffer *b = test_buffer_with(ctx, NULL, 1 << 16);
    vkattn_mha_forward_args fa = {.x = vkattn_tensor_make(b, 0, VKATTN_DTYPE_F32, 3, xs),
                                  .y = vkattn_tensor_make(b, 4096, VKATTN_DTYPE_F32, 3, xs)};
    TEST_FAILS(ctx, VKATTN_ERROR_INVALID_ARGUMENT, "no weights", vkattn_mha_forward(m, &fa));
    vkattn_mha_weights none = {0};
    TEST_FAILS(ctx, VKATTN_ERROR_INVALID_ARGUMENT, "weights->wq", vkattn_mha_set_weights(m, &none));
    float *zeros = calloc(32 * 32 * 3, 4);
    vkattn_mha_weights w = {.wq = zeros, .wk = zeros, .wv = zeros, .wo = zeros};
    TEST_OK(ctx, vkattn_mha_set_weights(m, &w));
    TEST_OK(ctx, vkattn_mha_forward(m, &fa));

    vkattn_mha_forward_args bad;
#define CASE(code, needle, change) \
    TEST_FAILS_CHANGED(ctx, bad, fa, change, code, needle, vkattn_mha_forward(m, &bad))
    const vkattn_result SHAPE = VKATTN_ERROR_SHAPE_MISMATCH;
    int64_t ks[3] = {3, 7, 32}, mshape[2] = {5, 6}, m4[4] = {2, 3, 5, 5}, pshape[2] = {2, 4};
    CASE(SHAPE, "args->x.shape[2] is 16", bad.x.shape[2] = 16);
    CASE(SHAPE, "args->y.shape[0]", bad.y.shape[0] = 1);
    CASE(VKATTN_ERROR_INVALID_ARGUMENT, "args->x.shape[1] is 0", bad.x.shape[1] = 0);
    CASE(VKATTN_ERROR_UNSUPPORTED_DTYPE, "args->x.dtype", bad.x.dtype = VKATTN_DTYPE_F16);
    /* kv of batch 3 vs 2 */
    CASE(SHAPE, "args->kv.shape[0]", bad.kv = vkattn_tensor_make(b, 8192, VKATTN_DTYPE_F32, 3, ks));
    /* [Tq, Tk] with Tk 6 != 5 */
    CASE(SHAPE, "args->mask", bad.mask = vkattn_tensor_make(b, 12288, VKATTN_DTYPE_F32, 2, mshape));
    /* head dimension 3: neither 4 nor 1 */
    CASE(SHAPE, "args->mask", bad.mask = vkattn_tensor_make(b, 12288, VKATTN_DTYPE_F32, 4, m4));
    CASE(SHAPE, "args->key_padding",
         bad.key_padding = vkattn_tensor_make(b, 12288, VKATTN_DTYPE_U8, 2, pshape));
#undef CASE

    /* the record form never grows the layer's scratch */
    int64_t big[3] = {2, 40, 32};
    bad = fa;
    bad.x = vkattn_tensor_make(b, 0, VKATTN_DTYPE_F32, 3, big);
    bad.y = vkattn_tensor_make(b, 20480, VKATTN_DTYPE_F32, 3, big);
    VkCommandBuffer cmd;
    TEST_OK(ctx, vkattn_commands_begin(ctx, &cmd));
    TEST_FAILS(ctx, VKATTN_ERROR_OUT_OF_RANGE, "vkattn_mha_reserve",
               vkattn_cmd_mha_forward(m, cmd, &bad));
    vkattn_commands_discard(ctx);
    TEST_OK(ctx, vkattn_mha_reserve(m, 2, 40, 40));
    TEST_OK(ctx, vkattn_commands_begin(ctx, &cmd));
    TEST_OK(ctx, vkattn_cmd_mha_forward(m, cmd, &bad));
    TEST_OK(ctx, vkattn_commands_submit(ctx));

    vkattn_buffer_destroy(b);
    vkattn_mha_destroy(m);
    vkattn_mha_destroy(NULL);
    free(zeros);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_layer_mha_matches_reference),
        cmocka_unit_test(test_layer_gqa_matches_reference),
        cmocka_unit_test(test_layer_cross_attention_matches_reference),
        cmocka_unit_test(test_layer_head_dims_match_reference),
        cmocka_unit_test(test_layer_f16_matches_reference),
        cmocka_unit_test(test_layer_other_paths),
        cmocka_unit_test(test_layer_errors),
    };
    return cmocka_run_group_tests(tests, test_gpu_setup, test_gpu_teardown);
}
