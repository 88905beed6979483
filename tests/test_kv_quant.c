/* Quantized KV caches (issue 15): q8_0 and q4_0 caches filled by
 * vkattn_cmd_kv_cache_append (which quantizes f32, f16 or bf16 K/V as it
 * writes) and read by vkattn_kv_attention (which dequantizes inside the
 * kernels): decode, split-KV with fixed and automatic splits, prefill on
 * empty and non-empty sequences, paged (blocks of 16 and 5) and contiguous,
 * MHA / GQA / MQA, head dims 32 to 256 (odd numbers of blocks too), q/out
 * in f32, f16 and bf16 - every
 * result against vkattn_ref_attention on the keys and values the reference
 * quantizer gives (vkattn_ref_quantize / _dequantize: the tolerance of q's
 * dtype), and, reported, against the unquantized values. Plus the sizes
 * (vkattn_kv_cache_memory), the tuner over a quantized cache, and the
 * refusals: head dims that are not whole blocks, inputs that are
 * not floats. And the MHA layer's steps writing such a cache. Every case on every kernel policy (the
 * texel ones fall back to storage inputs: blocks are read as words). */
#include "test_kv_util.h"

#include "ops/kvcache/kvcache.h" /* the pools, to compare their bytes */

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define Q8 VKATTN_DTYPE_Q8_0
#define Q4 VKATTN_DTYPE_Q4_0

typedef struct quant_case {
    uint32_t Hq, Hkv, D;
    vkattn_dtype cdt, src, qdt; /* cache, what appends give it, q and out */
    uint32_t block_size;        /* 0: contiguous */
    uint32_t capacity;
    uint32_t batch;
    uint32_t seqs[MAX_SEQ];
    uint32_t prior[MAX_SEQ];
    uint32_t T;
    uint32_t splits;
    bool merged;
} quant_case;

static const quant_case cases[] = {
    /* MHA decode, contiguous, ragged with a length-1 sequence */
    {2, 2, 64, Q8, F32, F32, 0, 80, 3, {2, 0, 1}, {0, 37, 64}, 1, 0, false},
    /* GQA 4 decode, paged 16, f16 in and out, merged output */
    {8, 2, 128, Q4, F16, F16, 16, 160, 4, {3, 1, 0, 2}, {0, 37, 16, 150}, 1, 0, true},
    /* GQA, paged 5, T = 2, bf16 in and out, 4 splits */
    {4, 2, 64, Q8, BF16, BF16, 5, 120, 3, {0, 2, 1}, {3, 101, 0}, 2, 4, false},
    /* MQA, T = 16, paged 5, 3 splits */
    {4, 1, 64, Q4, F32, F32, 5, 90, 3, {1, 2, 0}, {0, 9, 57}, 16, 3, true},
    /* prefill T = 40 on an empty and non-empty sequences, paged 16 */
    {4, 2, 64, Q8, F32, F16, 16, 120, 3, {0, 1, 2}, {0, 23, 48}, 40, 0, false},
    /* prefill T = 40, MHA, contiguous, head dim 128 */
    {3, 3, 128, Q4, F16, F32, 0, 64, 2, {1, 0}, {0, 17}, 40, 0, false},
    /* head dim 256 decode, GQA 2, paged 16, 3 splits */
    {4, 2, 256, Q8, F32, F32, 16, 48, 2, {0, 1}, {30, 1}, 1, 3, false},
    /* head dim 192 decode over 300 keys, automatic splits */
    {2, 1, 192, Q4, BF16, F32, 16, 320, 1, {0}, {299}, 1, 0, false},
    /* odd numbers of blocks per row (issue 29): head dim 32 decode, GQA 4,
     * paged 5, 2 splits; 96 prefill on a non-empty sequence, contiguous;
     * 96 decode over paged 7, f16 in and out; 160 (5 blocks) prefill */
    {8, 2, 32, Q8, F32, F32, 5, 64, 3, {2, 0, 1}, {0, 37, 13}, 1, 2, false},
    {8, 2, 32, Q4, F16, F32, 0, 64, 2, {0, 1}, {7, 30}, 1, 0, true},
    {4, 2, 96, Q4, F32, F32, 0, 80, 2, {1, 0}, {0, 21}, 24, 0, false},
    {4, 4, 96, Q8, F16, F16, 7, 90, 3, {0, 2, 1}, {44, 3, 70}, 1, 0, false},
    {2, 1, 160, Q8, BF16, BF16, 16, 64, 1, {0}, {11}, 19, 0, false},
};

static double tolerance(vkattn_dtype q)
{
    return q == F16 ? TEST_TOL_F16 : q == BF16 ? TEST_TOL_BF16 : TEST_TOL_F32;
}

static double max_abs_diff(const float *a, const float *b, size_t n)
{
    double m = 0;
    for (size_t i = 0; i < n; i++)
        m = fmax(m, fabs((double)a[i] - b[i]));
    return m;
}

static void run_case(test_gpu *g, const quant_case *c, uint32_t policy, uint64_t seed)
{
    vkattn_context *ctx = g->ctx;
    char what[200];
    snprintf(what, sizeof what, "%s Hq%u Hkv%u D%u cache:%s in:%s q:%s block%u B%u T%u splits%u",
             test_policies[policy].name, c->Hq, c->Hkv, c->D, vkattn_dtype_name(c->cdt),
             vkattn_dtype_name(c->src), vkattn_dtype_name(c->qdt), c->block_size, c->batch, c->T,
             c->splits);
    test_rng rng = test_rng_seed(seed);
    vkattn_kv_cache_desc d = {.num_kv_heads = c->Hkv,
                              .num_heads = c->Hq,
                              .head_dim = c->D,
                              .dtype = c->cdt,
                              .max_sequences = 4,
                              .capacity = c->capacity,
                              .block_size = c->block_size};
    kv_host h;
    kv_host_create(g, &d, &h);
    h.src = c->src;
    for (uint32_t b = 0; b < c->batch; b++) { /* two appends: the second starts inside a block */
        uint32_t first = c->prior[b] / 3;
        if (first)
            kv_append(ctx, &h, 1, &c->seqs[b], first, &rng);
        if (c->prior[b] - first)
            kv_append(ctx, &h, 1, &c->seqs[b], c->prior[b] - first, &rng);
    }
    kv_append(ctx, &h, c->batch, c->seqs, c->T, &rng);

    att_io io;
    att_io_create(ctx, &io, c->batch, c->Hq, c->T, c->D, c->qdt, c->merged, &rng);
    vkattn_kv_attention_args a = att_args(&h, &io, c->seqs, 0.0f, c->splits);
    TEST_OK(ctx, vkattn_kv_attention(ctx, &a));
    size_t n = (size_t)c->batch * c->Hq * c->T * c->D;
    float *got = malloc(n * sizeof *got), *want = malloc(n * sizeof *want),
          *exact = malloc(n * sizeof *exact);
    assert_true(got && want && exact);
    att_io_result(ctx, &io, got);
    kv_reference(&h, c->batch, c->seqs, c->Hq, c->T, 0.0f, io.q, want);
    test_assert_close(got, want, n, tolerance(c->qdt), what);
    /* the same reference on the values before quantization: the error the
     * cache's format costs (reported; bounded loosely) */
    float *qk = h.k, *qv = h.v;
    h.k = h.k0, h.v = h.v0;
    kv_reference(&h, c->batch, c->seqs, c->Hq, c->T, 0.0f, io.q, exact);
    h.k = qk, h.v = qv;
    double err = max_abs_diff(got, exact, n), bound = c->cdt == Q8 ? 0.05 : 0.35;
    if (policy == 0)
        print_message("    %s: max |error| against unquantized K/V %.4g\n", what, err);
    if (!(err <= bound))
        fail_msg("%s: error against unquantized K/V %g is above %g", what, err, bound);
    free(got);
    free(want);
    free(exact);
    att_io_destroy(&io);
    kv_host_destroy(&h);
    test_assert_no_validation_messages(ctx);
}

static void test_cases_match_reference(void **state)
{
    test_policy_suite *s = *state;
    for (uint32_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        for (uint32_t policy = 0; policy < TEST_POLICY_COUNT; policy++)
            if (s->gpu[policy])
                run_case(s->gpu[policy], &cases[i], policy, 300 + i);
}

/* The bytes the append writes are the reference quantizer's, bit for bit,
 * on rows made to hit every rule: zeros, a row of equal values, ties of
 * the rounding (q8_0: x * id = k + 0.5 rounds away from zero; q4_0:
 * x * id + 8.5 truncates), scales that are f16 subnormals, large values,
 * and random rows; K from f32, V from the same values (two pools). */
static void test_quantized_bytes(void **state)
{
    test_policy_suite *s = *state;
    enum { T = 8, HKV = 2, DMAX = 96 };
    /* 64: pairs of blocks per row; 96: rows of 3 blocks, every other one
     * starting halfway into a word shared with the row before */
    for (int q = 0; q < 4; q++)
        for (uint32_t policy = 0; policy < TEST_POLICY_COUNT; policy += 3) {
            if (!s->gpu[policy])
                continue;
            vkattn_context *ctx = s->gpu[policy]->ctx;
            const vkattn_dtype dt = q & 1 ? Q4 : Q8;
            const int D = q & 2 ? 96 : 64;
            float x[HKV * T * DMAX];
            test_rng rng = test_rng_seed(77 + q);
            for (int i = 0; i < HKV * T * D; i++) {
                int row = i / D, j = i % D;
                float r = test_rng_uniform(&rng, -1.0f, 1.0f);
                x[i] = row == 0   ? 0.0f
                       : row == 1 ? 0.7f
                       : row == 2 ? (j == 0 ? 127.0f : (float)(j % 9) - 4.5f) /* d = 1 */
                       : row == 3 ? (j == 5 ? -8.0f : (float)(j % 17) * 0.5f - 4.0f)
                       : row == 4 ? r * 1e-6f /* scale below f16's normals */
                       : row == 5 ? r * 3000.0f
                       : row == 6 ? (j < 32 ? 0.0f : r)
                                  : r;
            }
            vkattn_kv_cache_desc d = {
                .num_kv_heads = HKV, .head_dim = D, .dtype = dt, .max_sequences = 1, .capacity = T};
            vkattn_kv_cache *c;
            TEST_OK(ctx, vkattn_kv_cache_create(ctx, &d, &c));
            vkattn_buffer *b = test_buffer_with(ctx, x, sizeof x);
            int64_t shape[4] = {1, HKV, T, D};
            uint32_t seq = 0;
            vkattn_kv_append_args a = {c, 1, &seq, vkattn_tensor_make(b, 0, F32, 4, shape),
                                       vkattn_tensor_make(b, 0, F32, 4, shape)};
            VkCommandBuffer cmd;
            TEST_OK(ctx, vkattn_commands_begin(ctx, &cmd));
            TEST_OK(ctx, vkattn_cmd_kv_cache_append(ctx, cmd, &a));
            TEST_OK(ctx, vkattn_commands_submit(ctx));
            uint64_t bytes = vkattn_dtype_row_bytes(dt, (uint64_t)HKV * T * D);
            uint8_t want[HKV * T * DMAX / 32 * 34], got[2][sizeof want];
            char err[256] = "";
            if (vkattn_ref_quantize(dt, x, HKV * T * D, want, err, sizeof err) != VKATTN_SUCCESS)
                fail_msg("%s", err);
            TEST_OK(ctx, vkattn_buffer_download(c->k, 0, got[0], bytes));
            TEST_OK(ctx, vkattn_buffer_download(c->v, 0, got[1], bytes));
            for (int pool = 0; pool < 2; pool++)
                for (uint64_t i = 0; i < bytes; i++)
                    if (got[pool][i] != want[i])
                        fail_msg("%s %s pool: byte %llu (row %llu) is 0x%02x, the reference's "
                                 "0x%02x",
                                 test_policies[policy].name, vkattn_dtype_name(dt),
                                 (unsigned long long)i,
                                 (unsigned long long)(i / vkattn_dtype_row_bytes(dt, D)),
                                 got[pool][i], want[i]);
            vkattn_buffer_destroy(b);
            vkattn_kv_cache_destroy(c);
            test_assert_no_validation_messages(ctx);
        }
}

/* The layer's steps over quantized caches: a prefill of 5 tokens, then 3
 * decode steps (projection to scratch, quantizing append, attention over
 * the cache), with bias and RoPE, against vkattn_ref_mha over the whole
 * sequence with kv_cache_dtype set (K and V through the reference
 * quantizer). The GPU's K and V come from an f32 GEMM, the reference's
 * from double sums: a value within a rounding of a quantization boundary
 * may land one step apart, hence the tolerances (q8_0 2e-3, q4_0 2e-2;
 * these seeds meet them on both drivers). */
static void test_layer_steps(void **state)
{
    test_policy_suite *s = *state;
    enum { DM = 256, HQ = 4, HKV = 2, DH = 64, T = 8, PREFILL = 5 };
    test_rng rng = test_rng_seed(5);
    float *w = malloc(sizeof(float) * (size_t)(HQ + 2 * HKV) * DH * DM),
          *wo = malloc(sizeof(float) * (size_t)DM * HQ * DH), bias[(HQ + 2 * HKV) * DH], bo[DM],
          x[T * DM];
    assert_true(w && wo);
    for (size_t i = 0; i < (size_t)(HQ + 2 * HKV) * DH * DM; i++)
        w[i] = test_rng_uniform(&rng, -0.1f, 0.1f);
    for (size_t i = 0; i < (size_t)DM * HQ * DH; i++)
        wo[i] = test_rng_uniform(&rng, -0.1f, 0.1f);
    for (int i = 0; i < (HQ + 2 * HKV) * DH; i++)
        bias[i] = test_rng_uniform(&rng, -0.5f, 0.5f);
    for (int i = 0; i < DM; i++)
        bo[i] = test_rng_uniform(&rng, -0.5f, 0.5f);
    for (int i = 0; i < T * DM; i++)
        x[i] = test_rng_uniform(&rng, -1.0f, 1.0f);
    vkattn_mha_desc md = {.embed_dim = DM,
                          .num_heads = HQ,
                          .num_kv_heads = HKV,
                          .bias = true,
                          .rope = {.theta = 10000.0f}};
    vkattn_mha_weights mw = {.wqkv = w, .wo = wo, .bqkv = bias, .bo = bo};
    for (int q = 0; q < 2; q++)
        for (uint32_t policy = 0; policy < TEST_POLICY_COUNT; policy += 3) {
            if (!s->gpu[policy])
                continue;
            vkattn_context *ctx = s->gpu[policy]->ctx;
            const vkattn_dtype dt = q ? Q4 : Q8;
            vkattn_mha *m;
            TEST_OK(ctx, vkattn_mha_create(ctx, &md, &m));
            TEST_OK(ctx, vkattn_mha_set_weights(m, &mw));
            vkattn_kv_cache_desc cd = {.num_kv_heads = HKV,
                                       .num_heads = HQ,
                                       .head_dim = DH,
                                       .dtype = dt,
                                       .max_sequences = 1,
                                       .capacity = T,
                                       .block_size = q ? 4 : 0};
            vkattn_kv_cache *c;
            TEST_OK(ctx, vkattn_kv_cache_create(ctx, &cd, &c));
            vkattn_buffer *xb = test_buffer_with(ctx, x, sizeof x);
            vkattn_buffer *yb = test_buffer_with(ctx, NULL, sizeof x);
            uint32_t seq = 0;
            for (uint32_t t = 0; t < T; t = t ? t + 1 : PREFILL) {
                int64_t n = t ? 1 : PREFILL, shape[3] = {1, n, DM};
                vkattn_mha_step_args sa = {
                    .cache = c,
                    .batch = 1,
                    .sequences = &seq,
                    .x = vkattn_tensor_make(xb, (uint64_t)t * DM * 4, F32, 3, shape),
                    .y = vkattn_tensor_make(yb, (uint64_t)t * DM * 4, F32, 3, shape)};
                TEST_OK(ctx, vkattn_mha_step(m, &sa));
            }
            float got[T * DM], want[T * DM], exact[T * DM];
            TEST_OK(ctx, vkattn_buffer_download(yb, 0, got, sizeof got));
            int64_t shape[3] = {1, T, DM};
            vkattn_ref_mha_args ra = {.x = vkattn_host_tensor_make(x, F32, 3, shape),
                                      .y = vkattn_host_tensor_make(want, F32, 3, shape),
                                      .causal = true,
                                      .kv_cache_dtype = dt};
            char err[256] = "";
            if (vkattn_ref_mha(&md, &mw, &ra, err, sizeof err) != VKATTN_SUCCESS)
                fail_msg("%s", err);
            ra.kv_cache_dtype = F32;
            ra.y = vkattn_host_tensor_make(exact, F32, 3, shape);
            if (vkattn_ref_mha(&md, &mw, &ra, err, sizeof err) != VKATTN_SUCCESS)
                fail_msg("%s", err);
            char what[120];
            snprintf(what, sizeof what, "%s layer steps over a %s cache",
                     test_policies[policy].name, vkattn_dtype_name(dt));
            test_assert_close(got, want, T * DM, q ? 2e-2 : 2e-3, what);
            print_message("    %s: max |error| %.3g against the reference with the cache's "
                          "quantization, %.3g against none\n",
                          what, max_abs_diff(got, want, T * DM), max_abs_diff(got, exact, T * DM));
            vkattn_buffer_destroy(xb);
            vkattn_buffer_destroy(yb);
            vkattn_kv_cache_destroy(c);
            vkattn_mha_destroy(m);
            test_assert_no_validation_messages(ctx);
        }
    free(w);
    free(wo);
}

/* Per token: 2 (K and V) x Hkv x the bytes of a row of Dh values. */
static void test_memory(void **state)
{
    (void)state;
    vkattn_kv_cache_desc d = {
        .num_kv_heads = 8, .head_dim = 128, .max_sequences = 1, .capacity = 4096};
    uint64_t per[3], total[3];
    const vkattn_dtype dts[3] = {F16, Q8, Q4};
    for (int i = 0; i < 3; i++) {
        d.dtype = dts[i];
        char err[256] = "";
        if (vkattn_kv_cache_memory(&d, &per[i], &total[i], err, sizeof err) != VKATTN_SUCCESS)
            fail_msg("%s: %s", vkattn_dtype_name(dts[i]), err);
    }
    assert_int_equal(per[0], 2 * 8 * 128 * 2);
    assert_int_equal(per[1], 2 * 8 * 4 * 34); /* 47% of f16's bytes... */
    assert_int_equal(per[2], 2 * 8 * 4 * 18); /* ... and 28% */
    assert_true(total[1] < total[0] && total[2] < total[1]);
    assert_int_equal(vkattn_dtype_row_bytes(Q8, 128), 136);
    assert_int_equal(vkattn_dtype_row_bytes(Q4, 128), 72);
}

/* The split-count tuner over a quantized cache (f32 q and out). */
static void test_tune(void **state)
{
    test_policy_suite *s = *state;
    vkattn_context *ctx = test_policy_suite_first(s)->ctx;
    vkattn_kv_cache_desc d = {.num_kv_heads = 2,
                              .num_heads = 4,
                              .head_dim = 64,
                              .dtype = Q4,
                              .max_sequences = 1,
                              .capacity = 64,
                              .block_size = 16};
    vkattn_kv_cache *c;
    TEST_OK(ctx, vkattn_kv_cache_create(ctx, &d, &c));
    TEST_OK(ctx, vkattn_kv_attention_tune(ctx, &(vkattn_kv_attention_tune_args){c, 1, 1, 64}));
    vkattn_kv_cache_destroy(c);
    test_assert_no_validation_messages(ctx);
}

static void test_errors(void **state)
{
    test_policy_suite *s = *state;
    vkattn_context *ctx = test_policy_suite_first(s)->ctx;
    vkattn_kv_cache_desc d = {
        .num_kv_heads = 1, .head_dim = 80, .dtype = Q8, .max_sequences = 1, .capacity = 32};
    vkattn_kv_cache *c = (vkattn_kv_cache *)&d;
    TEST_FAILS(ctx, VKATTN_ERROR_INVALID_ARGUMENT, "desc->head_dim 80 does not suit a q8_0 cache",
               vkattn_kv_cache_create(ctx, &d, &c));
    assert_null(c);
    d.head_dim = 64;
    TEST_OK(ctx, vkattn_kv_cache_create(ctx, &d, &c));
    /* appends of u8 or of the cache's own dtype are no floats to quantize */
    vkattn_buffer *b = test_buffer_with(ctx, NULL, 4096);
    int64_t shape[4] = {1, 1, 2, 64};
    uint32_t seq = 0;
    const vkattn_dtype bad[2] = {VKATTN_DTYPE_U8, Q8};
    const char *says[2] = {"args->k.dtype is u8: a q8_0 cache quantizes f32, f16 or bf16 values",
                           "args->k.dtype is q8_0: quantized data has no element size"};
    for (int i = 0; i < 2; i++) {
        vkattn_kv_append_args a = {c, 1, &seq, vkattn_tensor_make(b, 0, bad[i], 4, shape),
                                   vkattn_tensor_make(b, 0, bad[i], 4, shape)};
        VkCommandBuffer cmd;
        TEST_OK(ctx, vkattn_commands_begin(ctx, &cmd));
        vkattn_result r = vkattn_cmd_kv_cache_append(ctx, cmd, &a);
        vkattn_commands_discard(ctx);
        if (r != VKATTN_ERROR_UNSUPPORTED_DTYPE || !strstr(vkattn_context_last_error(ctx), says[i]))
            fail_msg("append of %s: %s (%s), expected \"%s\"", vkattn_dtype_name(bad[i]),
                     vkattn_result_name(r), vkattn_context_last_error(ctx), says[i]);
    }
    uint32_t len = 1;
    TEST_OK(ctx, vkattn_kv_cache_length(c, 0, &len));
    assert_int_equal(len, 0);
    /* the reference's cache option takes the caches' dtypes only */
    vkattn_mha_desc md = {.embed_dim = 64, .num_heads = 1};
    float w[64 * 64] = {0}, xs[64] = {0}, ys[64];
    vkattn_mha_weights mw = {.wq = w, .wk = w, .wv = w, .wo = w};
    int64_t shape3[3] = {1, 1, 64};
    vkattn_ref_mha_args ra = {.x = vkattn_host_tensor_make(xs, F32, 3, shape3),
                              .y = vkattn_host_tensor_make(ys, F32, 3, shape3),
                              .kv_cache_dtype = VKATTN_DTYPE_U8};
    char err[256] = "";
    assert_int_equal(vkattn_ref_mha(&md, &mw, &ra, err, sizeof err),
                     VKATTN_ERROR_UNSUPPORTED_DTYPE);
    assert_non_null(strstr(err, "args->kv_cache_dtype u8 is not supported"));
    vkattn_buffer_destroy(b);
    vkattn_kv_cache_destroy(c);
    test_assert_no_validation_messages(ctx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_memory),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_quantized_bytes),
        cmocka_unit_test(test_cases_match_reference),
        cmocka_unit_test(test_tune),
        cmocka_unit_test(test_layer_steps),
    };
    return cmocka_run_group_tests(tests, test_policy_suite_setup, test_policy_suite_teardown);
}
