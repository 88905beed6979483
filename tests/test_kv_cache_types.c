/* Every cache type at every head dim of issue 29's Done-when: f32, f16,
 * bf16, q8_0, q4_0, q4_1, q5_0, q5_1 and iq4_nl caches at head dims 32, 64,
 * 80 (rows of a quantized cache zero-padded to whole blocks), 96, 128 and
 * 256, each through a paged prefill (T = 7 over an earlier append, blocks
 * of 16) and a contiguous decode (GQA 2, 2 splits), filled by
 * vkattn_cmd_kv_cache_append from f32 K/V and read by vkattn_kv_attention,
 * against the reference on the values the cache holds (the reference
 * quantizer's, rows padded the same way) within q's tolerance, and against
 * the unquantized values within the format's bound. On the suite's first
 * policy, on lavapipe and SwiftShader (the coopmat family's reading of every
 * format: test_kv_quant, test_kv_quant_formats). */
#include "test_kv_quant_util.h"

static void test_every_type_and_head_dim(void **state)
{
    test_policy_suite *s = *state;
    static const vkattn_dtype types[] = {VKATTN_DTYPE_F32,  VKATTN_DTYPE_F16,  VKATTN_DTYPE_BF16,
                                         VKATTN_DTYPE_Q8_0, VKATTN_DTYPE_Q4_0, VKATTN_DTYPE_Q4_1,
                                         VKATTN_DTYPE_Q5_0, VKATTN_DTYPE_Q5_1, VKATTN_DTYPE_IQ4_NL};
    static const uint32_t dims[] = {32, 64, 80, 96, 128, 256};
    uint32_t policy = 0;
    while (policy < TEST_POLICY_COUNT && !s->gpu[policy])
        policy++;
    assert_true(policy < TEST_POLICY_COUNT);
    uint64_t seed = 900;
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++)
        for (size_t d = 0; d < sizeof dims / sizeof dims[0]; d++) {
            const vkattn_dtype dt = types[t];
            /* against unquantized K/V: 8-bit and float caches tight, 5-bit
             * formats half of 4-bit ones' steps */
            const double bound = dt == VKATTN_DTYPE_Q8_0                              ? 0.05
                                 : dt == VKATTN_DTYPE_Q5_0 || dt == VKATTN_DTYPE_Q5_1 ? 0.2
                                 : vkattn_dtype_block_size(dt) == 32                  ? 0.35
                                                                                      : 0.02;
            const quant_case prefill = {4,  2, dims[d], dt,  F32, F32, 16,
                                        48, 1, {0},     {9}, 7,   0,   false};
            const quant_case decode = {4,  2, dims[d], dt,      F32, F32, 0,
                                       48, 2, {1, 0},  {30, 5}, 1,   2,   false};
            quant_case_run(s->gpu[policy], &prefill, policy, seed++, bound);
            quant_case_run(s->gpu[policy], &decode, policy, seed++, bound);
        }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_type_and_head_dim),
    };
    return cmocka_run_group_tests(tests, test_policy_suite_setup, test_policy_suite_teardown);
}
