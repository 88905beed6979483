/* Shared pieces of the CPU reference suite (test_reference*.c). */
#ifndef VKATTN_TEST_REFERENCE_H
#define VKATTN_TEST_REFERENCE_H

#include "test_util.h"

#include <stdbool.h>

/* Asserts `expr` (which may use the `err` buffer it declares) succeeds. */
#define REF_OK(expr)                                                                   \
    do {                                                                               \
        char err[512] = "";                                                            \
        vkattn_result ref_r_ = (expr);                                                 \
        if (ref_r_ != VKATTN_SUCCESS)                                                  \
            fail_msg("%s -> %s: %s", #expr, vkattn_result_name(ref_r_), err);          \
    } while (0)

/* Asserts `expr` returns `code` and its message (in `err`) contains `needle`. */
#define REF_FAILS(code, needle, expr)                                                  \
    do {                                                                               \
        char err[512] = "";                                                            \
        vkattn_result ref_r_ = (expr);                                                 \
        if (ref_r_ != (code))                                                          \
            fail_msg("line %d: %s -> %s, expected %s (%s)", __LINE__, #expr,           \
                     vkattn_result_name(ref_r_), vkattn_result_name(code), err);       \
        if (!strstr(err, (needle)))                                                    \
            fail_msg("line %d: message \"%s\" does not mention \"%s\"", __LINE__, err, \
                     (needle));                                                        \
    } while (0)

typedef struct ref_dims {
    int64_t B, Hq, Hkv, Tq, Tk, D;
} ref_dims;

/* calloc that asserts; free with free(). */
void *ref_alloc(size_t bytes);
/* n floats uniform in [-1, 1). */
float *ref_randf(test_rng *r, size_t n);
/* |got - want| <= tol * (1 + |want|) everywhere, no NaN. */
void ref_assert_close(const float *got, const float *want, size_t n, double tol,
                       const char *what);
/* Contiguous f32 q, k, v, out of `d`; everything else zero. */
void ref_attention_args(vkattn_ref_attention_args *a, const ref_dims *d, float *q, float *k,
                         float *v, float *out);
size_t ref_q_elems(const ref_dims *d);  /* B*Hq*Tq*D */
size_t ref_kv_elems(const ref_dims *d); /* B*Hkv*Tk*D */

/* test_reference_mha.c */
void test_linear_hand(void **state);
void test_linear_matches_loop(void **state);
void test_mha_self_matches_steps(void **state);
void test_mha_cross_matches_steps(void **state);
void test_mha_packed_equals_separate(void **state);
#define TEST_REFERENCE_LINEAR_MHA_TESTS                                                \
    cmocka_unit_test(test_linear_hand), cmocka_unit_test(test_linear_matches_loop),   \
        cmocka_unit_test(test_mha_self_matches_steps),                                 \
        cmocka_unit_test(test_mha_cross_matches_steps),                                \
        cmocka_unit_test(test_mha_packed_equals_separate)

/* test_reference_errors.c */
void test_attention_errors(void **state);
void test_linear_errors(void **state);
void test_mha_desc_errors(void **state);
void test_mha_args_errors(void **state);
#define TEST_REFERENCE_ERROR_TESTS                                                     \
    cmocka_unit_test(test_attention_errors), cmocka_unit_test(test_linear_errors),     \
        cmocka_unit_test(test_mha_desc_errors), cmocka_unit_test(test_mha_args_errors)

#endif
