/* The reference quantizers (vkattn_ref_quantize, _dequantize): ggml's q8_0
 * and q4_0 layouts and formulas, checked byte for byte against a second,
 * independent transcription of ggml's quantize_row_q8_0_ref /
 * quantize_row_q4_0_ref written here (f32 arithmetic, one statement per
 * rounding), on edge blocks - zeros, equal values, +-max, ties, tiny values
 * whose scale is an f16 subnormal or zero - and random ones; the round trip
 * within half a step (d / 2) of every value; hand-built blocks for the
 * layouts; and the refusals (NaN, inf, scales f16 cannot hold, n not a
 * whole number of blocks, other dtypes) with nothing written. */
#include "test_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#define Q8 VKATTN_DTYPE_Q8_0
#define Q4 VKATTN_DTYPE_Q4_0

/* ggml's formulas once more, for one block of 32 (separate statements:
 * no contraction across them under ISO C). */
static void expect_block(vkattn_dtype dt, const float *x, uint8_t *out)
{
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < 32; j++)
        if (amax < fabsf(x[j])) {
            amax = fabsf(x[j]);
            max = x[j];
        }
    float d = dt == Q8 ? amax / 127.0f : max / -8.0f;
    float id = d != 0.0f ? 1.0f / d : 0.0f;
    uint16_t h = vkattn_f32_to_f16(d);
    out[0] = (uint8_t)h;
    out[1] = (uint8_t)(h >> 8);
    for (int j = 0; j < (dt == Q8 ? 32 : 16); j++) {
        if (dt == Q8) {
            float v = x[j] * id;
            out[2 + j] = (uint8_t)(int8_t)roundf(v);
        } else {
            float a = x[j] * id;
            float b = x[j + 16] * id;
            float sa = a + 8.5f;
            float sb = b + 8.5f;
            int qa = (int8_t)sa, qb = (int8_t)sb;
            out[2 + j] = (uint8_t)((qa < 15 ? qa : 15) | (qb < 15 ? qb : 15) << 4);
        }
    }
}

enum { BLOCKS = 12, N = BLOCKS * 32 };

static void edge_values(float *x, uint64_t seed, float limit)
{
    test_rng rng = test_rng_seed(seed);
    for (int i = 0; i < N; i++) {
        int b = i / 32, j = i % 32;
        float r = test_rng_uniform(&rng, -1.0f, 1.0f);
        x[i] = b == 0   ? 0.0f                                             /* zeros */
               : b == 1 ? 0.3f                                             /* equal */
               : b == 2 ? -0.3f                                            /* equal, negative */
               : b == 3 ? (j == 7 ? 127.0f : (float)(j % 9) - 4.5f)        /* ties, d = 1 */
               : b == 4 ? (j == 3 ? -8.0f : (float)(j % 17) * 0.5f - 4.0f) /* q4 ties */
               : b == 5 ? r * 1e-4f                                        /* f16-subnormal d */
               : b == 6 ? r * 1e-9f                                        /* d rounds to 0 */
               : b == 7 ? (j == 0 ? limit : -limit * r)                    /* near the limit */
               : b == 8 ? (j == 31 ? -2.0f : (j == 30 ? 2.0f : r))         /* +-max, tie on |x| */
               : b == 9 ? 1.0e-40f * (float)(j - 16)                       /* f32 denormals */
                        : r;
    }
}

static void test_against_ggml(void **state)
{
    (void)state;
    float x[N], y[N];
    uint8_t got[BLOCKS * 34], want[BLOCKS * 34];
    char err[256];
    for (int q = 0; q < 2; q++)
        for (uint64_t seed = 1; seed <= 20; seed++) {
            vkattn_dtype dt = q ? Q4 : Q8;
            uint32_t bb = q ? 18 : 34;
            edge_values(x, seed, q ? 500000.0f : 8000000.0f); /* scales near 65504 */
            for (int b = 0; b < BLOCKS; b++)
                expect_block(dt, x + 32 * b, want + bb * b);
            if (vkattn_ref_quantize(dt, x, N, got, err, sizeof err) != VKATTN_SUCCESS)
                fail_msg("%s", err);
            for (uint32_t i = 0; i < BLOCKS * bb; i++)
                if (got[i] != want[i])
                    fail_msg("%s seed %llu: byte %u (block %u) 0x%02x, ggml's 0x%02x",
                             vkattn_dtype_name(dt), (unsigned long long)seed, i, i / bb, got[i],
                             want[i]);
            /* the round trip: within half a step of each value (the
             * largest-magnitude value of a q4_0 block lands on -8 d) */
            if (vkattn_ref_dequantize(dt, got, N, y, err, sizeof err) != VKATTN_SUCCESS)
                fail_msg("%s", err);
            for (int i = 0; i < N; i++) {
                const uint8_t *blk = got + bb * (i / 32);
                double d = fabs(vkattn_f16_to_f32((uint16_t)(blk[0] | blk[1] << 8)));
                /* half a step, and the f16 rounding of d: relative 2^-11, or for
                 * a subnormal (or zero) d absolute 2^-25 for each of up to 127 steps */
                double slack = d * 0.5 + fabs(x[i]) * 2e-3 + 127.0 * ldexp(1.0, -25);
                if (q && fabs(y[i] - x[i]) > d + slack) /* q4_0 clamps at 15: up to d */
                    fail_msg("q4_0: element %d %g -> %g (d %g)", i, x[i], y[i], d);
                if (!q && fabs(y[i] - x[i]) > slack)
                    fail_msg("q8_0: element %d %g -> %g (d %g)", i, x[i], y[i], d);
            }
            assert_true(y[0] == 0.0f && y[32] == y[33]); /* zeros; equal values stay equal */
        }
}

/* The layouts on hand-made blocks. */
static void test_layouts(void **state)
{
    (void)state;
    uint8_t q8[34] = {0x00, 0x3c}; /* d = 1.0 */
    uint8_t q4[18] = {0x00, 0x40}; /* d = 2.0 */
    for (int j = 0; j < 32; j++)
        q8[2 + j] = (uint8_t)(int8_t)(j - 16);
    for (int j = 0; j < 16; j++)
        q4[2 + j] = (uint8_t)(j | (15 - j) << 4);
    float y[32];
    TEST_OK(NULL, vkattn_ref_dequantize(Q8, q8, 32, y, NULL, 0));
    for (int j = 0; j < 32; j++)
        assert_true(y[j] == (float)(j - 16));
    TEST_OK(NULL, vkattn_ref_dequantize(Q4, q4, 32, y, NULL, 0));
    for (int j = 0; j < 16; j++) {
        assert_true(y[j] == 2.0f * (float)(j - 8));      /* low nibble: value j */
        assert_true(y[j + 16] == 2.0f * (float)(7 - j)); /* high nibble: value j + 16 */
    }
    assert_int_equal(vkattn_dtype_block_size(Q8), 32);
    assert_int_equal(vkattn_dtype_block_size(VKATTN_DTYPE_F16), 1);
    assert_int_equal(vkattn_dtype_block_size((vkattn_dtype)99), 0);
    assert_int_equal(vkattn_dtype_size(Q4), 0);
    assert_int_equal(vkattn_dtype_row_bytes(Q8, 64), 68);
    assert_int_equal(vkattn_dtype_row_bytes(Q4, 64), 36);
    assert_int_equal(vkattn_dtype_row_bytes(Q4, 48), 0);
    assert_int_equal(vkattn_dtype_row_bytes(VKATTN_DTYPE_BF16, 48), 96);
    assert_string_equal(vkattn_dtype_name(Q8), "q8_0");
    assert_string_equal(vkattn_dtype_name(Q4), "q4_0");
}

static void test_refusals(void **state)
{
    (void)state;
    float x[64] = {0};
    uint8_t out[68];
    char err[256];
    static const struct {
        vkattn_dtype dt;
        uint64_t n;
        int bad_at;
        float bad;
        vkattn_result r;
        const char *says;
    } cases[] = {
        {Q8, 64, 40, NAN, VKATTN_ERROR_INVALID_ARGUMENT, "element 40 is NaN"},
        {Q4, 64, 3, -INFINITY, VKATTN_ERROR_INVALID_ARGUMENT, "element 3 is infinite"},
        {Q8, 64, 9, 1e7f, VKATTN_ERROR_INVALID_ARGUMENT,
         "element 9 is 1e+07: the block scale "
         "would overflow f16"},
        {Q4, 64, 1, 600000.0f, VKATTN_ERROR_INVALID_ARGUMENT, "would overflow f16"},
        /* the minimum itself is stored (q4_1, q5_1); q5_0 steps max / 16;
         * iq4_nl's least-squares scale stays below amax * 7 / 127 */
        {VKATTN_DTYPE_Q4_1, 64, 2, -70000.0f, VKATTN_ERROR_INVALID_ARGUMENT,
         "element 2 is -70000: the block scale would overflow f16 (|x| at most 65504 for q4_1)"},
        {VKATTN_DTYPE_Q5_1, 64, 5, 65505.0f, VKATTN_ERROR_INVALID_ARGUMENT,
         "at most 65504 for q5_1"},
        {VKATTN_DTYPE_Q5_0, 64, 7, 1.1e6f, VKATTN_ERROR_INVALID_ARGUMENT,
         "at most 1.04806e+06 for q5_0"},
        {VKATTN_DTYPE_IQ4_NL, 64, 8, 1.2e6f, VKATTN_ERROR_INVALID_ARGUMENT,
         "at most 1.17907e+06 for iq4_nl"},
        {Q8, 40, -1, 0, VKATTN_ERROR_INVALID_ARGUMENT,
         "n 40 is not a multiple of the block "
         "size 32"},
        {VKATTN_DTYPE_F16, 64, -1, 0, VKATTN_ERROR_UNSUPPORTED_DTYPE,
         "dtype f16 is not quantized (q8_0, q4_0, q4_1, q5_0, q5_1, iq4_nl)"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        for (int i = 0; i < 64; i++)
            x[i] = 0.25f;
        if (cases[c].bad_at >= 0)
            x[cases[c].bad_at] = cases[c].bad;
        memset(out, 0xa5, sizeof out);
        vkattn_result r = vkattn_ref_quantize(cases[c].dt, x, cases[c].n, out, err, sizeof err);
        if (r != cases[c].r || !strstr(err, cases[c].says))
            fail_msg("case %zu: %s \"%s\", expected \"%s\"", c, vkattn_result_name(r), err,
                     cases[c].says);
        for (size_t i = 0; i < sizeof out; i++)
            assert_int_equal(out[i], 0xa5); /* nothing written */
    }
    float y[32];
    assert_int_equal(vkattn_ref_dequantize(Q8, out, 33, y, err, sizeof err),
                     VKATTN_ERROR_INVALID_ARGUMENT);
    assert_int_equal(vkattn_ref_dequantize(Q8, NULL, 32, y, err, sizeof err),
                     VKATTN_ERROR_INVALID_ARGUMENT);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_against_ggml),
        cmocka_unit_test(test_layouts),
        cmocka_unit_test(test_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
