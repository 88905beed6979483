/* llama.cpp's other KV cache types (issue 29): q4_1, q5_0, q5_1 and iq4_nl
 * caches filled by vkattn_cmd_kv_cache_append (quantizing f32, f16 or bf16
 * K/V as ggml's reference quantizers do) and read by vkattn_kv_attention
 * (dequantizing inside the kernels), as test_kv_quant.c checks q8_0 and
 * q4_0: decode, split-KV, prefill on empty and non-empty sequences, paged
 * and contiguous, MHA / GQA / MQA, head dims 32 to 256 (blocks of whole
 * words, 20 and 24 bytes, and blocks that share words with their
 * neighbours, 22 and 18 bytes, at odd and even numbers of blocks), q/out in
 * f32, f16 and bf16, and head dims that are not whole blocks (80, 48, 20:
 * rows zero-padded to whole blocks); the append's bytes against
 * vkattn_ref_quantize's; the layer's steps over each format (q5_0 at head
 * dim 80). Every case on every kernel policy. */
#include "test_kv_quant_util.h"

#define Q41 VKATTN_DTYPE_Q4_1
#define Q50 VKATTN_DTYPE_Q5_0
#define Q51 VKATTN_DTYPE_Q5_1
#define IQ4 VKATTN_DTYPE_IQ4_NL

static const quant_case cases[] = {
    /* q4_1: GQA 4 decode, paged 16, ragged; head dim 96 (3 blocks) prefill
     * on a non-empty sequence, contiguous, f16 in and out */
    {8, 2, 64, Q41, F32, F32, 16, 160, 3, {2, 0, 1}, {0, 37, 64}, 1, 0, false},
    {4, 2, 96, Q41, F16, F16, 0, 80, 2, {1, 0}, {0, 21}, 24, 0, false},
    /* q5_0: head dim 32 (one block sharing words), MQA, T = 16, paged 5, 3
     * splits; head dim 128 decode, contiguous, bf16 in and out, 2 splits */
    {4, 1, 32, Q50, F32, F32, 5, 90, 3, {1, 2, 0}, {0, 9, 57}, 16, 3, true},
    {4, 2, 128, Q50, BF16, BF16, 0, 64, 2, {0, 1}, {30, 1}, 1, 2, false},
    /* q5_1: head dim 256 decode, paged 16, 3 splits, f16 out; 160 prefill
     * T = 40 over paged 7 */
    {2, 2, 256, Q51, F32, F16, 16, 48, 2, {0, 1}, {30, 1}, 1, 3, false},
    {3, 3, 160, Q51, F16, F32, 7, 64, 2, {1, 0}, {0, 17}, 40, 0, false},
    /* iq4_nl: GQA 4 decode at 128, paged 16, merged; 96 prefill T = 40,
     * paged 5; 32 decode, contiguous, bf16 in */
    {8, 2, 128, IQ4, F16, F16, 16, 160, 4, {3, 1, 0, 2}, {0, 37, 16, 150}, 1, 0, true},
    {4, 2, 96, IQ4, F32, F32, 5, 120, 3, {0, 1, 2}, {0, 23, 48}, 40, 0, false},
    {8, 2, 32, IQ4, BF16, F32, 0, 64, 2, {0, 1}, {7, 30}, 1, 0, false},
    /* head dims that are not whole blocks, rows padded with zeros: Phi-2's
     * 80 (3 blocks) decode over paged 16 and prefill; 48 (2 blocks) and 20
     * (1 block; element-wise q and out) */
    {8, 2, 80, Q51, F32, F32, 16, 96, 2, {1, 0}, {40, 3}, 1, 2, false},
    {4, 4, 80, IQ4, F16, F16, 0, 64, 2, {0, 1}, {0, 17}, 12, 0, false},
    {4, 2, 48, Q50, F32, F32, 7, 64, 2, {0, 1}, {9, 30}, 5, 0, false},
    {2, 1, 20, Q41, F32, F32, 0, 48, 1, {0}, {11}, 3, 0, false},
};

static void test_cases_match_reference(void **state)
{
    test_policy_suite *s = *state;
    for (uint32_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        /* against unquantized K/V: 5-bit formats halve 4-bit ones' steps */
        double bound = cases[i].cdt == Q50 || cases[i].cdt == Q51 ? 0.2 : 0.35;
        for (uint32_t policy = 0; policy < TEST_POLICY_COUNT; policy++)
            if (s->gpu[policy])
                quant_case_run(s->gpu[policy], &cases[i], policy, 500 + i, bound);
    }
}

static void test_quantized_bytes(void **state)
{
    const vkattn_dtype dts[4] = {Q41, Q50, Q51, IQ4};
    quant_bytes_check(*state, dts, 4);
}

static void test_layer_steps(void **state)
{
    quant_layer_steps_check(*state, Q41, 0, 64, 2e-2);
    quant_layer_steps_check(*state, Q50, 16, 80, 2e-2);
    quant_layer_steps_check(*state, Q50, 4, 64, 2e-2);
    quant_layer_steps_check(*state, Q51, 3, 64, 2e-2);
    quant_layer_steps_check(*state, IQ4, 0, 64, 2e-2);
}

/* Per token: 2 (K and V) x Hkv x Dh / 32 blocks of the format's bytes. */
static void test_memory(void **state)
{
    (void)state;
    vkattn_kv_cache_desc d = {
        .num_kv_heads = 8, .head_dim = 128, .max_sequences = 1, .capacity = 4096};
    const vkattn_dtype dts[4] = {Q41, Q50, Q51, IQ4};
    const uint64_t block[4] = {20, 22, 24, 18};
    for (int i = 0; i < 4; i++) {
        d.dtype = dts[i];
        uint64_t per, total;
        char err[256] = "";
        if (vkattn_kv_cache_memory(&d, &per, &total, err, sizeof err) != VKATTN_SUCCESS)
            fail_msg("%s: %s", vkattn_dtype_name(dts[i]), err);
        assert_int_equal(per, 2 * 8 * 4 * block[i]);
    }
}

/* Head dims that are not whole blocks keep rows padded to whole blocks:
 * memory counts them (80: 3 blocks, 48: 2). */
static void test_errors(void **state)
{
    (void)state;
    const uint32_t dims[2] = {80, 48}, blocks[2] = {3, 2};
    for (int i = 0; i < 2; i++) {
        vkattn_kv_cache_desc d = {.num_kv_heads = 2,
                                  .head_dim = dims[i],
                                  .dtype = Q51,
                                  .max_sequences = 1,
                                  .capacity = 32};
        uint64_t per, total;
        char err[256] = "";
        assert_int_equal(vkattn_kv_cache_memory(&d, &per, &total, err, sizeof err), VKATTN_SUCCESS);
        assert_int_equal(per, 2 * 2 * blocks[i] * 24);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_memory),          cmocka_unit_test(test_errors),
        cmocka_unit_test(test_quantized_bytes), cmocka_unit_test(test_cases_match_reference),
        cmocka_unit_test(test_layer_steps),
    };
    return cmocka_run_group_tests(tests, test_policy_suite_setup, test_policy_suite_teardown);
}
