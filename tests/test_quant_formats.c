/* llama.cpp's q4_1, q5_0, q5_1 and iq4_nl blocks (src/spec/quant_formats.c,
 * issue 29): block sizes; blocks whose values the format holds exactly
 * (steps of a power of two from the minimum, around zero, or a power of two
 * times iq4_nl's levels) come back bit for bit, which checks every field's
 * place (the fifth bits of q5 above all); random blocks come back within
 * half a step (a step at q5_0's clipped end; iq4_nl: 20 steps of amax /
 * 127, its clipped end 14 more), plus the f16 rounding of the scale and
 * the minimum; all-zero
 * blocks come back as zeros. */
#include "spec/dtype.h"
#include "spec/quant.h"
#include "test_util.h"

#include <math.h>

static const char *const names[4] = {"q4_1", "q5_0", "q5_1", "iq4_nl"};
static const vkattn_dtype formats[4] = {VKATTN_DTYPE_Q4_1, VKATTN_DTYPE_Q5_0, VKATTN_DTYPE_Q5_1,
                                        VKATTN_DTYPE_IQ4_NL};
static const int8_t levels[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                  1,    13,   25,  38,  53,  69,  89,  113};

static void test_block_bytes(void **state)
{
    (void)state;
    const size_t want[4] = {20, 22, 24, 18};
    for (int f = 0; f < 4; f++) {
        assert_int_equal(vka_quant_block_bytes(formats[f]), want[f]);
        assert_int_equal(vkattn_dtype_row_bytes(formats[f], 96), 3 * want[f]);
        assert_string_equal(vkattn_dtype_name(formats[f]), names[f]);
    }
}

static void round_trip(int f, const float *x, float *y)
{
    uint8_t block[32];
    vka_quantize_block(formats[f], x, block);
    vka_dequantize_block(formats[f], block, y);
}

static void test_exact_blocks(void **state)
{
    (void)state;
    float x[32], y[32];
    for (int f = 0; f < 4; f++) {
        for (int j = 0; j < 32; j++) {
            int k = (j * 7) % 32;                           /* every step, out of order */
            x[j] = f == 0   ? (float)(k % 16) * 0.5f - 4.0f /* q4_1: 16 steps of 1/2 */
                   : f == 1 ? (float)(k - 16) * 0.25f       /* q5_0: -4 .. 3.75 */
                   : f == 2 ? (float)k * 0.125f + 1.0f      /* q5_1: 1 .. 4.875 */
                            : levels[k % 16] / 64.0f;       /* iq4_nl: levels / 64 */
        }
        round_trip(f, x, y);
        for (int j = 0; j < 32; j++)
            if (y[j] != x[j])
                fail_msg("%s: value %d is %.9g, sent %.9g", names[f], j, y[j], x[j]);
    }
}

static void test_random_blocks(void **state)
{
    (void)state;
    test_rng r = test_rng_seed(29);
    float x[32], y[32];
    for (int trial = 0; trial < 2000; trial++)
        for (int f = 0; f < 4; f++) {
            float scale = powf(2.0f, (float)(trial % 13) - 6.0f), shift = f % 2 ? 0.0f : scale;
            float lo = INFINITY, hi = -INFINITY, amax = 0.0f;
            for (int j = 0; j < 32; j++) {
                x[j] = test_rng_uniform(&r, -scale, scale) + shift;
                lo = fminf(lo, x[j]);
                hi = fmaxf(hi, x[j]);
                amax = fmaxf(amax, fabsf(x[j]));
            }
            round_trip(f, x, y);
            /* half a step (q5_0: a whole one, its levels -16 .. 15 clip
             * the end opposite the block's largest value; iq4_nl: 20 steps
             * of amax / 127, its clipped end 14 and the least-squares scale
             * a little below amax / 127), and
             * the f16 rounding of d (times the largest level) and of the
             * minimum */
            double half = f == 0   ? 0.5 * (hi - lo) / 15.0
                          : f == 1 ? amax / 16.0
                          : f == 2 ? 0.5 * (hi - lo) / 31.0
                                   : amax / 127.0 * 20.0;
            double bound = half + 2e-3 * (amax + (hi - lo));
            for (int j = 0; j < 32; j++)
                if (!(fabs((double)y[j] - x[j]) <= bound))
                    fail_msg("%s trial %d: value %d is %.9g, sent %.9g (bound %.3g)", names[f],
                             trial, j, y[j], x[j], bound);
        }
}

static void test_zero_blocks(void **state)
{
    (void)state;
    float x[32] = {0}, y[32];
    for (int f = 0; f < 4; f++) {
        for (int j = 0; j < 32; j++)
            y[j] = 1.0f;
        round_trip(f, x, y);
        for (int j = 0; j < 32; j++)
            if (y[j] != 0.0f)
                fail_msg("%s: value %d of a zero block is %g", names[f], j, y[j]);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_block_bytes),
        cmocka_unit_test(test_exact_blocks),
        cmocka_unit_test(test_random_blocks),
        cmocka_unit_test(test_zero_blocks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
