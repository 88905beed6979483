/* The CPU reference of RoPE (vkattn_ref_rope) against values computed here
 * by hand from the formulas in vkattn/ops.h ("rotary positions"): both
 * pairings, partial rotary, linear and Llama 3 frequency scaling, and the
 * refusals, each leaving the output untouched. */
#include "test_reference.h"

#include <math.h>
#include <stdio.h>

#define PI 3.14159265358979323846

/* Args over contiguous f32 x and out [B, H, T, D] (out may be x). */
static vkattn_ref_rope_args rope_args(float *x, float *out, int64_t B, int64_t H, int64_t T,
                                      int64_t D, float theta)
{
    const int64_t shape[4] = {B, H, T, D};
    vkattn_ref_rope_args a;
    memset(&a, 0, sizeof a);
    a.x = vkattn_host_tensor_make(x, VKATTN_DTYPE_F32, 4, shape);
    a.out = vkattn_host_tensor_make(out, VKATTN_DTYPE_F32, 4, shape);
    a.rope.theta = theta;
    return a;
}

/* |got - want| <= 1e-6 (1 + |want|) for each of n values. */
static void assert_near(const float *got, const double *want, size_t n, const char *what)
{
    for (size_t i = 0; i < n; i++)
        if (!(fabs(got[i] - want[i]) <= 1e-6 * (1.0 + fabs(want[i]))))
            fail_msg("%s: element %zu is %.9g, expected %.9g", what, i, got[i], want[i]);
}

/* D = R = 4, NEOX, position 1, theta 10000: inv_freq = {1, 0.01}; dim 0
 * pairs with dim 2 (angle 1), dim 1 with dim 3 (angle 0.01). */
static void test_neox_position_one(void **state)
{
    (void)state;
    float x[4] = {1, 2, 3, 4}, out[4];
    vkattn_ref_rope_args a = rope_args(x, out, 1, 1, 1, 4, 10000.0f);
    a.position_offset = 1;
    REF_OK(vkattn_ref_rope(&a, err, sizeof err));
    double want[4] = {1 * cos(1.0) - 3 * sin(1.0), 2 * cos(0.01) - 4 * sin(0.01),
                      1 * sin(1.0) + 3 * cos(1.0), 2 * sin(0.01) + 4 * cos(0.01)};
    assert_near(out, want, 4, "NEOX at position 1");
}

/* GPTJ pairs neighbours: (0, 1) at angle p, (2, 3) at angle p / 100; at
 * position 3 of a sequence (offset 2, t = 1). */
static void test_gptj_pairing(void **state)
{
    (void)state;
    float x[8] = {9, 9, 9, 9, 1, 2, 3, 4}, out[8];
    vkattn_ref_rope_args a = rope_args(x, out, 1, 1, 2, 4, 10000.0f);
    a.rope.style = VKATTN_ROPE_GPTJ;
    a.position_offset = 2;
    REF_OK(vkattn_ref_rope(&a, err, sizeof err));
    double a0 = 3.0, a1 = 0.03;
    double want[4] = {1 * cos(a0) - 2 * sin(a0), 1 * sin(a0) + 2 * cos(a0),
                      3 * cos(a1) - 4 * sin(a1), 3 * sin(a1) + 4 * cos(a1)};
    assert_near(out + 4, want, 4, "GPTJ at position 3");
    double first[4] = {9 * cos(2.0) - 9 * sin(2.0), 9 * sin(2.0) + 9 * cos(2.0),
                       9 * cos(0.02) - 9 * sin(0.02), 9 * sin(0.02) + 9 * cos(0.02)};
    assert_near(out, first, 4, "GPTJ at position 2");
}

/* R = 4 of D = 6: the frequencies are those of R (theta^(-2i/4)) and dims
 * 4, 5 pass through unchanged; in place. */
static void test_partial_rotary(void **state)
{
    (void)state;
    float x[6] = {1, 2, 3, 4, 5.5f, -6.25f};
    vkattn_ref_rope_args a = rope_args(x, x, 1, 1, 1, 6, 10000.0f);
    a.rope.dims = 4;
    a.position_offset = 7;
    REF_OK(vkattn_ref_rope(&a, err, sizeof err));
    double a0 = 7.0, a1 = 0.07;
    double want[6] = {1 * cos(a0) - 3 * sin(a0),
                      2 * cos(a1) - 4 * sin(a1),
                      1 * sin(a0) + 3 * cos(a0),
                      2 * sin(a1) + 4 * cos(a1),
                      5.5,
                      -6.25};
    assert_near(x, want, 6, "partial rotary, in place");
    assert_true(x[4] == 5.5f && x[5] == -6.25f);
}

/* LINEAR divides positions by the factor: factor 4 at position 8 is NONE
 * at position 2, bit for bit (the factor is a power of two). */
static void test_linear_scaling(void **state)
{
    (void)state;
    test_rng rng = test_rng_seed(5);
    float x[32], scaled[32], plain[32];
    test_fill_uniform(&rng, x, 32, -1.0f, 1.0f);
    vkattn_ref_rope_args a = rope_args(x, scaled, 1, 1, 1, 32, 10000.0f);
    a.rope.scaling = VKATTN_ROPE_SCALING_LINEAR;
    a.rope.factor = 4.0f;
    a.position_offset = 8;
    REF_OK(vkattn_ref_rope(&a, err, sizeof err));
    a = rope_args(x, plain, 1, 1, 1, 32, 10000.0f);
    a.position_offset = 2;
    REF_OK(vkattn_ref_rope(&a, err, sizeof err));
    assert_memory_equal(scaled, plain, sizeof plain);
}

/* HF's _compute_llama3_parameters, written again here from its source. */
static double llama3_inv_freq(int i, int dims)
{
    const double theta = 500000, factor = 8, low = 1, high = 4, orig = 8192;
    double f = 1.0 / pow(theta, 2.0 * i / dims);
    double wavelen = 2 * PI / f;
    if (wavelen < orig / high)
        return f;
    if (wavelen > orig / low)
        return f / factor;
    double smooth = (orig / wavelen - low) / (high - low);
    return (1 - smooth) * f / factor + smooth * f;
}

/* Llama 3.1 scaling (theta 500000, factor 8, low 1, high 4, original 8192)
 * on D = 128: the pair (1, 0) of frequency i at position p becomes
 * (cos, sin)(p inv_freq[i]). i = 0 and 20 keep their frequency, 29..34 are
 * smoothed, 40 and 63 are divided by 8. */
static void test_llama3_frequencies(void **state)
{
    (void)state;
    enum { D = 128 };
    float x[D], out[D];
    memset(x, 0, sizeof x);
    for (int i = 0; i < D / 2; i++)
        x[i] = 1.0f; /* NEOX: x of pair i is dim i, y is dim i + 64 */
    vkattn_ref_rope_args a = rope_args(x, out, 1, 1, 1, D, 500000.0f);
    a.rope.scaling = VKATTN_ROPE_SCALING_LLAMA3;
    a.rope.factor = 8.0f;
    a.rope.low_freq_factor = 1.0f;
    a.rope.high_freq_factor = 4.0f;
    a.rope.original_max_positions = 8192;
    a.position_offset = 1000;
    REF_OK(vkattn_ref_rope(&a, err, sizeof err));
    const int checked[] = {0, 20, 29, 31, 34, 40, 63};
    for (size_t k = 0; k < sizeof checked / sizeof checked[0]; k++) {
        int i = checked[k];
        double angle = 1000.0 * llama3_inv_freq(i, D);
        double want[2] = {cos(angle), sin(angle)};
        float got[2] = {out[i], out[i + D / 2]};
        char what[64];
        snprintf(what, sizeof what, "Llama 3 frequency %d", i);
        assert_near(got, want, 2, what);
    }
    /* the regimes differ: smoothing is neither the plain nor the /8 value */
    double f31 = 1.0 / pow(500000.0, 62.0 / 128);
    assert_true(llama3_inv_freq(31, D) < f31 && llama3_inv_freq(31, D) > f31 / 8);
}

/* A negative position is refused with its element named; out untouched. */
static void test_negative_position_refused(void **state)
{
    (void)state;
    float x[2 * 4 * 8], out[2 * 4 * 8];
    for (size_t i = 0; i < 64; i++)
        x[i] = (float)i, out[i] = -777.0f;
    int32_t pos[2][4] = {{0, 1, 2, 3}, {5, 6, 7, 8}};
    const int64_t pshape[2] = {2, 4};
    vkattn_ref_rope_args a = rope_args(x, out, 2, 1, 4, 8, 10000.0f);
    a.positions = vkattn_host_tensor_make(pos, VKATTN_DTYPE_I32, 2, pshape);
    REF_OK(vkattn_ref_rope(&a, err, sizeof err));
    for (size_t i = 0; i < 64; i++)
        out[i] = -777.0f;
    pos[1][3] = -2;
    REF_FAILS(VKATTN_ERROR_INVALID_ARGUMENT, "args->positions[1, 3] is -2",
              vkattn_ref_rope(&a, err, sizeof err));
    pos[1][3] = VKATTN_ROPE_MAX_POSITION + 1;
    REF_FAILS(VKATTN_ERROR_INVALID_ARGUMENT, "args->positions[1, 3] is 16777216",
              vkattn_ref_rope(&a, err, sizeof err));
    pos[1][3] = VKATTN_ROPE_MAX_POSITION; /* the largest is fine */
    for (size_t i = 0; i < 64; i++)
        assert_true(out[i] == -777.0f);
    REF_OK(vkattn_ref_rope(&a, err, sizeof err));
}

/* The other refusals, each named, each leaving out as it was. */
static void test_refusals(void **state)
{
    (void)state;
    float x[64], out[64];
    for (size_t i = 0; i < 64; i++)
        x[i] = 1.0f, out[i] = -777.0f;
    int32_t pos[8] = {0};
    float fpos[8] = {0};
    const int64_t pshape[2] = {2, 4}, bad_pshape[2] = {2, 3};
    const vkattn_ref_rope_args good = rope_args(x, out, 2, 1, 4, 8, 10000.0f);
    vkattn_ref_rope_args a;
#define REFUSED(change, code, needle)                                  \
    do {                                                               \
        a = good;                                                      \
        change;                                                        \
        REF_FAILS(code, needle, vkattn_ref_rope(&a, err, sizeof err)); \
    } while (0)
    REF_FAILS(VKATTN_ERROR_INVALID_ARGUMENT, "args is NULL",
              vkattn_ref_rope(NULL, err, sizeof err));
    REFUSED(a.rope.dims = 3, VKATTN_ERROR_INVALID_ARGUMENT, "args->rope.dims is 3");
    REFUSED(a.rope.dims = 10, VKATTN_ERROR_INVALID_ARGUMENT, "args->rope.dims is 10");
    REFUSED(a.rope.theta = 0.0f, VKATTN_ERROR_INVALID_ARGUMENT, "args->rope.theta is 0");
    REFUSED(a.rope.theta = -2.0f, VKATTN_ERROR_INVALID_ARGUMENT, "args->rope.theta is -2");
    REFUSED(a.rope.theta = NAN, VKATTN_ERROR_INVALID_ARGUMENT, "args->rope.theta is nan");
    REFUSED((a.rope.scaling = VKATTN_ROPE_SCALING_LINEAR, a.rope.factor = NAN),
            VKATTN_ERROR_INVALID_ARGUMENT, "args->rope.factor is nan");
    REFUSED((a.rope.scaling = VKATTN_ROPE_SCALING_LLAMA3, a.rope.factor = 8,
             a.rope.low_freq_factor = 4, a.rope.high_freq_factor = 4,
             a.rope.original_max_positions = 8192),
            VKATTN_ERROR_INVALID_ARGUMENT, "args->rope.low_freq_factor");
    REFUSED(a.rope.reserved[3] = 1.0f, VKATTN_ERROR_INVALID_ARGUMENT, "args->rope.reserved[3]");
    REFUSED(a.positions = vkattn_host_tensor_make(pos, VKATTN_DTYPE_I32, 2, bad_pshape),
            VKATTN_ERROR_SHAPE_MISMATCH, "args->positions.shape");
    REFUSED(a.positions = vkattn_host_tensor_make(pos, VKATTN_DTYPE_I32, 1, pshape),
            VKATTN_ERROR_INVALID_ARGUMENT, "args->positions.rank");
    REFUSED(a.positions = vkattn_host_tensor_make(fpos, VKATTN_DTYPE_F32, 2, pshape),
            VKATTN_ERROR_UNSUPPORTED_DTYPE, "args->positions.dtype");
    REFUSED(a.x.dtype = VKATTN_DTYPE_I32, VKATTN_ERROR_UNSUPPORTED_DTYPE, "args->x.dtype");
    REFUSED(a.x.rank = 3, VKATTN_ERROR_INVALID_ARGUMENT, "args->x.rank");
    REFUSED(a.out.shape[2] = 3, VKATTN_ERROR_SHAPE_MISMATCH, "args->out.shape[2]");
    REFUSED(a.out.data = NULL, VKATTN_ERROR_INVALID_ARGUMENT, "args->out.data");
    REFUSED(a.position_offset = VKATTN_ROPE_MAX_POSITION - 2, VKATTN_ERROR_INVALID_ARGUMENT,
            "args->position_offset");
    REFUSED(a.out.data = x + 1, VKATTN_ERROR_INVALID_ARGUMENT, "args->out overlaps args->x");
#undef REFUSED
    for (size_t i = 0; i < 64; i++)
        assert_true(out[i] == -777.0f && x[i] == 1.0f);
    a = good;
    a.position_offset = VKATTN_ROPE_MAX_POSITION - 3; /* the last row at the maximum */
    REF_OK(vkattn_ref_rope(&a, err, sizeof err));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_neox_position_one),  cmocka_unit_test(test_gptj_pairing),
        cmocka_unit_test(test_partial_rotary),     cmocka_unit_test(test_linear_scaling),
        cmocka_unit_test(test_llama3_frequencies), cmocka_unit_test(test_negative_position_refused),
        cmocka_unit_test(test_refusals),
    };
    return cmocka_run_group_tests_name("reference_rope", tests, NULL, NULL);
}
