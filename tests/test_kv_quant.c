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
 * refusals: inputs that are not floats; head dims that are not whole blocks
 * (80, 72, 40, 16) kept in rows zero-padded to whole blocks. And the MHA layer's steps writing such a cache. Every case on every kernel policy (the
 * texel ones fall back to storage inputs: blocks are read as words). */
#include "test_kv_quant_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define Q8 VKATTN_DTYPE_Q8_0
#define Q4 VKATTN_DTYPE_Q4_0

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
    /* head dims that are not whole blocks, rows zero-padded to them:
     * Phi-2's 80 (3 blocks) decode over paged 16, 2 splits, and prefill;
     * 72 (3 blocks), 40 (2), 16 (1) */
    {8, 2, 80, Q8, F32, F32, 16, 96, 2, {1, 0}, {40, 3}, 1, 2, false},
    {4, 4, 80, Q4, F16, F16, 0, 64, 2, {0, 1}, {0, 17}, 12, 0, false},
    {4, 1, 72, Q4, F32, F32, 5, 64, 2, {0, 1}, {9, 30}, 1, 0, false},
    {2, 2, 40, Q8, F32, F16, 7, 48, 1, {0}, {11}, 5, 0, false},
    {2, 1, 16, Q8, BF16, F32, 0, 48, 1, {0}, {20}, 1, 0, false},
};

static void test_quantized_bytes(void **state)
{
    const vkattn_dtype dts[2] = {Q8, Q4};
    quant_bytes_check(*state, dts, 2);
}

static void test_layer_steps(void **state)
{
    quant_layer_steps_check(*state, Q8, 0, 64, 2e-3);
    quant_layer_steps_check(*state, Q4, 4, 64, 2e-2);
}

static void test_cases_match_reference(void **state)
{
    test_policy_suite *s = *state;
    for (uint32_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        for (uint32_t policy = 0; policy < TEST_POLICY_COUNT; policy++)
            if (s->gpu[policy])
                quant_case_run(s->gpu[policy], &cases[i], policy, 300 + i,
                               cases[i].cdt == Q8 ? 0.05 : 0.35);
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
        .num_kv_heads = 1, .head_dim = 64, .dtype = Q8, .max_sequences = 1, .capacity = 32};
    vkattn_kv_cache *c = NULL;
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
