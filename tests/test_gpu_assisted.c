/* The core ops once under the validation layer's GPU-assisted mode
 * (VKATTN_CONTEXT_VALIDATION_GPU_ASSISTED: the layer instruments every
 * shader and reports out-of-bounds storage and texel accesses), at small
 * shapes, on two kernel policies that cover both families and both input
 * paths between them (subgroup + texel, shared-memory + storage; the cases
 * alternate between the two) and in f32 and f16: attention (GQA, causal,
 * mask, key padding, weights, LSE, a head dim that is not a multiple of 8),
 * and an MHA layer's forward pass and its decode steps through a KV cache
 * (the linear op's GEMM and GEMV, the cache's append in f16 and q8_0, split
 * KV decode), each against the CPU reference; zero validation messages
 * (test_gpu_close). Instrumented shaders compile several times more slowly
 * on lavapipe, and a cold shader cache pays for each: the full suites take
 * minutes to hours this way (README.md), so CI runs this one
 * (tools/test.sh). */
#include "test_policy.h"
#include "test_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Attention [2, 4, 5, D] x [2, 2, 7, D] in `dt`, every option at once. */
static void attention_case(test_gpu *g, uint32_t policy, const void *arg)
{
    const vkattn_dtype dt = *(const vkattn_dtype *)arg;
    vkattn_context *ctx = g->ctx;
    for (uint32_t d = 20; d <= 64; d += 44) { /* 20: element-wise rows; 64: fast kernels */
        enum { B = 2, HQ = 4, HKV = 2, TQ = 5, TK = 7 };
        size_t nq = (size_t)B * HQ * TQ * d, nk = (size_t)B * HKV * TK * d;
        test_rng r = test_rng_seed(31 + d + policy);
        float *q = test_random_array(&r, nq, 1, dt), *k = test_random_array(&r, nk, 1, dt);
        float *v = test_random_array(&r, nk, 1, dt),
              *mask = test_random_array(&r, TQ * TK, 1, VKATTN_DTYPE_F32);
        uint8_t pad[B * TK];
        for (int i = 0; i < B * TK; i++)
            pad[i] = i != 3; /* batch 0 loses key 3 */
        float *o = test_alloc(nq * 4), *want = test_alloc(nq * 4);
        float *w = test_alloc((size_t)B * TQ * TK * 4),
              *want_w = test_alloc((size_t)B * TQ * TK * 4);
        float lse[B * HQ * TQ], want_lse[B * HQ * TQ];
        const int64_t qs[4] = {B, HQ, TQ, d}, ks[4] = {B, HKV, TK, d}, ms[2] = {TQ, TK},
                      ps[2] = {B, TK}, ws[3] = {B, TQ, TK}, ls[3] = {B, HQ, TQ};
        vkattn_buffer *bq = test_buffer_of(ctx, dt, q, nq), *bk = test_buffer_of(ctx, dt, k, nk);
        vkattn_buffer *bv = test_buffer_of(ctx, dt, v, nk), *bo = test_buffer_of(ctx, dt, o, nq);
        vkattn_buffer *bm = test_buffer_of(ctx, VKATTN_DTYPE_F32, mask, TQ * TK);
        vkattn_buffer *bp = test_buffer_with(ctx, pad, sizeof pad);
        vkattn_buffer *bw = test_buffer_of(ctx, VKATTN_DTYPE_F32, w, (size_t)B * TQ * TK);
        vkattn_buffer *bl = test_buffer_of(ctx, VKATTN_DTYPE_F32, lse, B * HQ * TQ);
        vkattn_attention_args a = {.q = vkattn_tensor_make(bq, 0, dt, 4, qs),
                                   .k = vkattn_tensor_make(bk, 0, dt, 4, ks),
                                   .v = vkattn_tensor_make(bv, 0, dt, 4, ks),
                                   .out = vkattn_tensor_make(bo, 0, dt, 4, qs),
                                   .mask = vkattn_tensor_make(bm, 0, VKATTN_DTYPE_F32, 2, ms),
                                   .key_padding = vkattn_tensor_make(bp, 0, VKATTN_DTYPE_U8, 2, ps),
                                   .weights = vkattn_tensor_make(bw, 0, VKATTN_DTYPE_F32, 3, ws),
                                   .lse = vkattn_tensor_make(bl, 0, VKATTN_DTYPE_F32, 3, ls),
                                   .causal = true};
        TEST_OK(ctx, vkattn_attention(ctx, &a));
        test_download_as(ctx, bo, dt, o, nq);
        test_download_as(ctx, bw, VKATTN_DTYPE_F32, w, (size_t)B * TQ * TK);
        test_download_as(ctx, bl, VKATTN_DTYPE_F32, lse, B * HQ * TQ);
        vkattn_ref_attention_args ra = {
            .q = vkattn_host_tensor_make(q, VKATTN_DTYPE_F32, 4, qs),
            .k = vkattn_host_tensor_make(k, VKATTN_DTYPE_F32, 4, ks),
            .v = vkattn_host_tensor_make(v, VKATTN_DTYPE_F32, 4, ks),
            .out = vkattn_host_tensor_make(want, VKATTN_DTYPE_F32, 4, qs),
            .mask = vkattn_host_tensor_make(mask, VKATTN_DTYPE_F32, 2, ms),
            .key_padding = vkattn_host_tensor_make(pad, VKATTN_DTYPE_U8, 2, ps),
            .weights = vkattn_host_tensor_make(want_w, VKATTN_DTYPE_F32, 3, ws),
            .lse = vkattn_host_tensor_make(want_lse, VKATTN_DTYPE_F32, 3, ls),
            .causal = true};
        char err[256], what[128];
        assert_int_equal(vkattn_ref_attention(&ra, err, sizeof err), VKATTN_SUCCESS);
        double tol = dt == VKATTN_DTYPE_F32 ? TEST_TOL_F32 : TEST_TOL_F16;
        snprintf(what, sizeof what, "attention %s d%u (%s)", vkattn_dtype_name(dt), d,
                 test_policies[policy].name);
        test_assert_close(o, want, nq, tol, what);
        test_assert_close(w, want_w, (size_t)B * TQ * TK, tol, what);
        test_assert_close(lse, want_lse, B * HQ * TQ, tol, what);
        TEST_DESTROY_BUFFERS(bq, bk, bv, bo, bm, bp, bw, bl);
        free(q), free(k), free(v), free(mask), free(o), free(want), free(w), free(want_w);
    }
}

typedef struct layer_kind {
    vkattn_dtype dtype, kv_dtype;
} layer_kind;

/* An MQA layer (Dm 128, 2 heads of 64: a q8_0 cache's head dim, 1 KV head,
 * biases) on 6 tokens: the
 * forward pass, then the same tokens as a prefill step of 4 and two decode
 * steps through a KV cache of kv_dtype, against the reference's causal
 * forward pass (with the cache's quantization). */
static void layer_case(test_gpu *g, uint32_t policy, const void *arg)
{
    const layer_kind *kind = arg;
    vkattn_context *ctx = g->ctx;
    enum { DM = 128, DH = 64, T = 6, PREFILL = 4 };
    vkattn_mha_desc desc = {
        .embed_dim = DM, .num_heads = 2, .num_kv_heads = 1, .bias = true, .dtype = kind->dtype};
    test_rng r = test_rng_seed(77 + policy);
    float *wq = test_random_array(&r, DM * DM, 0.2f, VKATTN_DTYPE_F32);
    float *wkv = test_random_array(&r, DH * DM, 0.2f, VKATTN_DTYPE_F32);
    float *wv = test_random_array(&r, DH * DM, 0.2f, VKATTN_DTYPE_F32);
    float *wo = test_random_array(&r, DM * DM, 0.2f, VKATTN_DTYPE_F32);
    float *bq = test_random_array(&r, DM, 0.1f, VKATTN_DTYPE_F32);
    float *bk = test_random_array(&r, DH, 0.1f, VKATTN_DTYPE_F32);
    float *bv = test_random_array(&r, DH, 0.1f, VKATTN_DTYPE_F32);
    float *bo = test_random_array(&r, DM, 0.1f, VKATTN_DTYPE_F32);
    float *x = test_random_array(&r, T * DM, 1, kind->dtype);
    vkattn_mha_weights w = {
        .wq = wq, .wk = wkv, .wv = wv, .wo = wo, .bq = bq, .bk = bk, .bv = bv, .bo = bo};
    vkattn_mha *layer = test_mha_create(ctx, &desc, &w);
    const int64_t xs[3] = {1, T, DM};
    float *y = test_alloc(T * DM * 4), *want = test_alloc(T * DM * 4);
    vkattn_buffer *bx = test_buffer_of(ctx, kind->dtype, x, T * DM);
    vkattn_buffer *by = test_buffer_of(ctx, kind->dtype, y, T * DM);
    vkattn_mha_forward_args fa = {.x = vkattn_tensor_make(bx, 0, kind->dtype, 3, xs),
                                  .y = vkattn_tensor_make(by, 0, kind->dtype, 3, xs),
                                  .causal = true};
    TEST_OK(ctx, vkattn_mha_forward(layer, &fa));
    test_download_as(ctx, by, kind->dtype, y, T * DM);
    vkattn_ref_mha_args ra = {.x = vkattn_host_tensor_make(x, VKATTN_DTYPE_F32, 3, xs),
                              .y = vkattn_host_tensor_make(want, VKATTN_DTYPE_F32, 3, xs),
                              .causal = true};
    char err[256], what[128];
    assert_int_equal(vkattn_ref_mha(&desc, &w, &ra, err, sizeof err), VKATTN_SUCCESS);
    double tol = kind->dtype == VKATTN_DTYPE_F32 ? TEST_TOL_F32 : TEST_TOL_F16;
    snprintf(what, sizeof what, "mha forward %s (%s)", vkattn_dtype_name(kind->dtype),
             test_policies[policy].name);
    test_assert_close(y, want, T * DM, tol, what);

    /* the steps */
    vkattn_kv_cache_desc cd = {.num_kv_heads = 1,
                               .num_heads = 2,
                               .head_dim = DH,
                               .dtype = kind->kv_dtype,
                               .max_sequences = 1,
                               .capacity = T};
    vkattn_kv_cache *cache = NULL;
    TEST_OK(ctx, vkattn_kv_cache_create(ctx, &cd, &cache));
    uint32_t seq = 0;
    size_t es = vkattn_dtype_size(kind->dtype);
    for (uint32_t t = 0; t < T; t = t ? t + 1 : PREFILL) {
        uint32_t n = t ? 1 : PREFILL;
        const int64_t ss[3] = {1, n, DM};
        vkattn_mha_step_args sa = {
            .cache = cache,
            .batch = 1,
            .sequences = &seq,
            .x = vkattn_tensor_make(bx, (uint64_t)t * DM * es, kind->dtype, 3, ss),
            .y = vkattn_tensor_make(by, (uint64_t)t * DM * es, kind->dtype, 3, ss),
            .kv_splits = 2};
        TEST_OK(ctx, vkattn_mha_step(layer, &sa));
    }
    test_download_as(ctx, by, kind->dtype, y, T * DM);
    if (kind->kv_dtype == VKATTN_DTYPE_Q8_0) {
        ra.kv_cache_dtype = VKATTN_DTYPE_Q8_0;
        assert_int_equal(vkattn_ref_mha(&desc, &w, &ra, err, sizeof err), VKATTN_SUCCESS);
    }
    snprintf(what, sizeof what, "mha steps %s, %s cache (%s)", vkattn_dtype_name(kind->dtype),
             vkattn_dtype_name(kind->kv_dtype), test_policies[policy].name);
    test_assert_close(y, want, T * DM, tol, what);
    vkattn_kv_cache_destroy(cache);
    vkattn_mha_destroy(layer);
    TEST_DESTROY_BUFFERS(bx, by);
    free(wq), free(wkv), free(wv), free(wo), free(bq), free(bk), free(bv), free(bo), free(x);
    free(y), free(want);
}

/* Policy 0 (subgroup + texel) for `family` 0, 3 (shared-memory + storage)
 * for 1: the cases alternate between them, so that each family and each
 * input path meets f32 and f16 in both ops while each case's instrumented
 * pipelines (the cost of this suite) compile for one policy, not two. */
static void on_family(int family, void (*run)(test_gpu *, uint32_t, const void *), const void *arg)
{
    const uint32_t p = family ? TEST_POLICY_STORAGE_SHARED : 0;
    if (!test_policy_selected(p))
        return;
    test_gpu *g = test_gpu_open(test_policy_flags(p));
    run(g, p, arg);
    test_gpu_close(g);
}

static void test_attention(void **state)
{
    (void)state;
    static const vkattn_dtype dts[2] = {VKATTN_DTYPE_F32, VKATTN_DTYPE_F16};
    for (int i = 0; i < 2; i++)
        on_family(i, attention_case, &dts[i]);
}

static void test_layer_and_steps(void **state)
{
    (void)state;
    static const layer_kind kinds[3] = {{VKATTN_DTYPE_F32, VKATTN_DTYPE_F32},
                                        {VKATTN_DTYPE_F16, VKATTN_DTYPE_F16},
                                        {VKATTN_DTYPE_F16, VKATTN_DTYPE_Q8_0}};
    for (int i = 0; i < 3; i++) /* f32 on 3, f16 on 0, the q8_0 cache on 3 */
        on_family(i != 1, layer_case, &kinds[i]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_attention),
        cmocka_unit_test(test_layer_and_steps),
    };
    return cmocka_run_group_tests_name("gpu_assisted", tests, NULL, NULL);
}
