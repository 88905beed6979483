/* The MHA layer keeping its weights in another dtype than its activations
 * (desc.weight_dtype f16, bf16, q8_0), from host weights in f32, bf16 or
 * q8_0 blocks, against vkattn_ref_mha (which converts the weights as the
 * layer does): the forward (packed self-attention, cross-attention with
 * separate weights) and steps over a KV cache (a prompt, then one token
 * decoded), under every kernel policy; and the refusals. */
#include "test_policy.h"
#include "test_util.h"

#include "vkattn/reference.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

typedef struct wd_case {
    vkattn_dtype dtype, weight_dtype, host; /* activations, weights kept, weights given */
    bool cross, bias;
} wd_case;

enum { B = 1, TQ = 5, TK = 7, DM = 128, DKV = 64, HQ = 4, HKV = 2, DH = 32 };

/* A host weight array of n values in `host` dtype (f32, bf16 or q8_0) from
 * f32 values; malloc'd. */
static void *host_array(const float *v, size_t n, vkattn_dtype host)
{
    if (host == VKATTN_DTYPE_F32) {
        float *out = test_alloc(n * 4);
        memcpy(out, v, n * 4);
        return out;
    }
    if (host == VKATTN_DTYPE_BF16) {
        uint16_t *out = test_alloc(n * 2);
        for (size_t i = 0; i < n; i++)
            out[i] = vkattn_f32_to_bf16(v[i]);
        return out;
    }
    uint8_t *out = test_alloc(vkattn_dtype_row_bytes(host, n));
    char err[256];
    if (vkattn_ref_quantize(host, v, n, out, err, sizeof err) != VKATTN_SUCCESS)
        fail_msg("%s", err);
    return out;
}

static double tol_of(vkattn_dtype dt)
{
    return dt == VKATTN_DTYPE_F32 ? TEST_TOL_F32 : TEST_TOL_F16;
}

static void run_case(vkattn_context *ctx, const wd_case *c, uint64_t seed)
{
    test_rng rng = test_rng_seed(seed);
    uint32_t dkv = c->cross ? DKV : DM, tk = c->cross ? TK : TQ;
    size_t qw = HQ * DH, kvw = HKV * DH;
    float amp = 1.5f / sqrtf((float)DM);
    /* self-attention gets one packed wqkv (rows of wq, wk, wv) */
    size_t nw[4] = {qw * DM, kvw * dkv, kvw * dkv, DM * qw}, nb[4] = {qw, kvw, kvw, DM};
    float *wf[4], *bf[4];
    void *wh[4], *bh[4];
    vkattn_dtype bias_host = c->host == VKATTN_DTYPE_Q8_0 ? VKATTN_DTYPE_F32 : c->host;
    for (int i = 0; i < 4; i++) {
        wf[i] = test_random_array(&rng, nw[i], amp, VKATTN_DTYPE_F32);
        bf[i] = test_random_array(&rng, nb[i], 0.2f, VKATTN_DTYPE_F32);
        wh[i] = host_array(wf[i], nw[i], c->host);
        bh[i] = host_array(bf[i], nb[i], bias_host);
    }
    void *wqkv = NULL;
    if (!c->cross) {
        float *all = test_alloc((qw + 2 * kvw) * DM * 4);
        memcpy(all, wf[0], nw[0] * 4);
        memcpy(all + nw[0], wf[1], nw[1] * 4);
        memcpy(all + nw[0] + nw[1], wf[2], nw[2] * 4);
        wqkv = host_array(all, (qw + 2 * kvw) * DM, c->host);
        free(all);
    }
    vkattn_mha_desc desc = {.embed_dim = DM,
                            .num_heads = HQ,
                            .num_kv_heads = HKV,
                            .head_dim = DH,
                            .kv_dim = c->cross ? DKV : 0,
                            .bias = c->bias,
                            .dtype = c->dtype,
                            .weight_dtype = c->weight_dtype};
    vkattn_mha_weights w = {.wo = wh[3], .bo = bh[3], .dtype = c->host};
    if (c->cross)
        w.wq = wh[0], w.wk = wh[1], w.wv = wh[2];
    else
        w.wqkv = wqkv;
    w.bq = bh[0], w.bk = bh[1], w.bv = bh[2];

    size_t nx = (size_t)B * TQ * DM, nkv = (size_t)B * tk * dkv;
    float *x = test_random_array(&rng, nx, 1.0f, c->dtype);
    float *kv = c->cross ? test_random_array(&rng, nkv, 1.0f, c->dtype) : NULL;
    int64_t xs[3] = {B, TQ, DM}, kvs[3] = {B, tk, dkv};
    float *ref = test_alloc(nx * 4);
    vkattn_ref_mha_args ra = {.causal = !c->cross};
    ra.x = vkattn_host_tensor_make(x, VKATTN_DTYPE_F32, 3, xs);
    if (kv)
        ra.kv = vkattn_host_tensor_make(kv, VKATTN_DTYPE_F32, 3, kvs);
    ra.y = vkattn_host_tensor_make(ref, VKATTN_DTYPE_F32, 3, xs);
    char err[512];
    if (vkattn_ref_mha(&desc, &w, &ra, err, sizeof err) != VKATTN_SUCCESS)
        fail_msg("reference: %s", err);

    char what[160];
    snprintf(what, sizeof what, "layer %s weights %s from %s %s bias %d",
             vkattn_dtype_name(c->dtype), vkattn_dtype_name(c->weight_dtype),
             vkattn_dtype_name(c->host), c->cross ? "cross" : "self causal", (int)c->bias);
    vkattn_mha *layer = test_mha_create(ctx, &desc, &w);
    size_t es = vkattn_dtype_size(c->dtype);
    vkattn_buffer *bx = test_buffer_of(ctx, c->dtype, x, nx),
                  *bkv = kv ? test_buffer_of(ctx, c->dtype, kv, nkv) : NULL,
                  *by = test_buffer_with(ctx, NULL, nx * es);
    vkattn_mha_forward_args fa = {.causal = !c->cross,
                                  .x = vkattn_tensor_make(bx, 0, c->dtype, 3, xs),
                                  .y = vkattn_tensor_make(by, 0, c->dtype, 3, xs)};
    if (bkv)
        fa.kv = vkattn_tensor_make(bkv, 0, c->dtype, 3, kvs);
    TEST_OK(ctx, vkattn_mha_forward(layer, &fa));
    float *got = test_alloc(nx * 4);
    test_download_as(ctx, by, c->dtype, got, nx);
    test_assert_close(got, ref, nx, tol_of(c->dtype), what);

    if (!c->cross) { /* steps: the prompt's first TQ - 1 tokens, then the last one */
        vkattn_kv_cache_desc cd = test_kv_desc(HKV, HQ, DH, 1, 16, 0);
        cd.dtype = c->dtype;
        vkattn_kv_cache *cache = NULL;
        TEST_OK(ctx, vkattn_kv_cache_create(ctx, &cd, &cache));
        uint32_t seq = 0;
        for (uint32_t t0 = 0, n = TQ - 1; t0 < TQ; t0 += n, n = TQ - t0) {
            int64_t shape[3] = {1, n, DM};
            vkattn_mha_step_args a = {.cache = cache,
                                      .batch = 1,
                                      .sequences = &seq,
                                      .x = vkattn_tensor_make(bx, t0 * DM * es, c->dtype, 3, shape),
                                      .y =
                                          vkattn_tensor_make(by, t0 * DM * es, c->dtype, 3, shape)};
            TEST_OK(ctx, vkattn_mha_step(layer, &a));
        }
        test_download_as(ctx, by, c->dtype, got, nx);
        char steps[200];
        snprintf(steps, sizeof steps, "%s: steps", what);
        test_assert_close(got, ref, nx, tol_of(c->dtype), steps);
        vkattn_kv_cache_destroy(cache);
    }
    TEST_DESTROY_BUFFERS(bx, bkv, by);
    vkattn_mha_destroy(layer);
    for (int i = 0; i < 4; i++)
        free(wf[i]), free(bf[i]), free(wh[i]), free(bh[i]);
    free(wqkv), free(x), free(kv), free(ref), free(got);
}

#define F32 VKATTN_DTYPE_F32
#define F16 VKATTN_DTYPE_F16
#define BF16 VKATTN_DTYPE_BF16
#define Q8 VKATTN_DTYPE_Q8_0

static void test_weight_dtypes(void **state)
{
    test_gpu *g = *state;
    static const wd_case cases[] = {
        {F32, Q8, F32, false, true},  {F32, Q8, Q8, true, true},     {F32, Q8, BF16, false, false},
        {F16, Q8, F32, true, true},   {F16, Q8, Q8, false, true},    {BF16, Q8, BF16, false, true},
        {F32, F16, F32, false, true}, {F32, BF16, BF16, true, true}, {F16, BF16, F32, false, true},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        run_case(g->ctx, &cases[i], 900 + i);
}

/* Refusals name the parameter and create or change nothing. */
static void test_errors(void **state)
{
    vkattn_context *ctx = ((test_gpu *)*state)->ctx;
    vkattn_mha *layer = NULL;
    vkattn_mha_desc d = {.embed_dim = 96, .num_heads = 3, .weight_dtype = Q8};
    TEST_FAILS(ctx, VKATTN_ERROR_INVALID_ARGUMENT,
               "desc->weight_dtype q8_0 needs in_features that are multiples of 64, but "
               "desc->embed_dim (Wq's in_features) is 96",
               vkattn_mha_create(ctx, &d, &layer));
    assert_null(layer);
    d = (vkattn_mha_desc){.embed_dim = 64, .num_heads = 2, .weight_dtype = VKATTN_DTYPE_Q4_0};
    TEST_FAILS(ctx, VKATTN_ERROR_UNSUPPORTED_DTYPE,
               "desc->weight_dtype q4_0 is not supported: 0 (the dtype's), f16, bf16 or q8_0",
               vkattn_mha_create(ctx, &d, &layer));
    d.weight_dtype = BF16;
    TEST_OK(ctx, vkattn_mha_create(ctx, &d, &layer));
    uint8_t blocks[64 * 64 / 32 * 34] = {0};
    float wo[64 * 64] = {0};
    vkattn_mha_weights w = {.wqkv = (const float *)blocks, .wo = wo, .dtype = Q8};
    TEST_FAILS(ctx, VKATTN_ERROR_UNSUPPORTED_DTYPE,
               "weights->dtype is q8_0 but desc->weight_dtype is bf16",
               vkattn_mha_set_weights(layer, &w));
    vkattn_mha_destroy(layer);
    d.weight_dtype = Q8;
    TEST_OK(ctx, vkattn_mha_create(ctx, &d, &layer));
    float *wqkv = calloc(3 * 64 * 64, 4);
    wqkv[4100] = NAN;
    w = (vkattn_mha_weights){.wqkv = wqkv, .wo = wo};
    TEST_FAILS(ctx, VKATTN_ERROR_INVALID_ARGUMENT,
               "weights->wqkv[4100] is nan: q8_0 weights quantize finite values",
               vkattn_mha_set_weights(layer, &w));
    free(wqkv);
    vkattn_mha_destroy(layer);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_weight_dtypes),
    };
    const struct CMUnitTest once[] = {
        cmocka_unit_test(test_errors),
    };
    int failed = cmocka_run_group_tests_name("mha_weight_dtypes_errors", once, test_gpu_setup,
                                             test_gpu_teardown);
    for (uint32_t p = 0; p < TEST_POLICY_COUNT; p++)
        failed +=
            test_policy_run_group("mha_weight_dtypes", p, tests, sizeof tests / sizeof tests[0]);
    return failed;
}
