/* Shared pieces of the CPU reference suite (test_reference*.c). */
#ifndef VKATTN_TEST_REFERENCE_H
#define VKATTN_TEST_REFERENCE_H

#include "test_util.h"

#include <stdbool.h>

/* Asserts `expr` (which may use the `err` buffer it declares) returns `code`
 * with a message (in `err`) that contains `needle`. */
#define REF_RETURNS(code, needle, expr)                                                           \
    do {                                                                                          \
        char err[512] = "";                                                                       \
        vkattn_result ref_r_ = (expr);                                                            \
        if (ref_r_ != (code))                                                                     \
            fail_msg("line %d: %s -> %s, expected %s (%s)", __LINE__, #expr,                      \
                     vkattn_result_name(ref_r_), vkattn_result_name(code), err);                  \
        if (!strstr(err, (needle)))                                                               \
            fail_msg("line %d: message \"%s\" does not mention \"%s\"", __LINE__, err, (needle)); \
    } while (0)
/* Asserts `expr` succeeds. */
#define REF_OK(expr) REF_RETURNS(VKATTN_SUCCESS, "", expr)
/* Asserts `expr` fails with `code` and a message containing `needle`. */
#define REF_FAILS(code, needle, expr) REF_RETURNS(code, needle, expr)

typedef struct ref_dims {
    int64_t B, Hq, Hkv, Tq, Tk, D;
} ref_dims;

/* n floats uniform in [-1, 1). */
float *ref_randf(test_rng *r, size_t n);
/* |got - want| <= tol * (1 + |want|) everywhere, no NaN. */
void ref_assert_close(const float *got, const float *want, size_t n, double tol, const char *what);
/* Contiguous f32 q, k, v, out of `d`; everything else zero. */
void ref_attention_args(vkattn_ref_attention_args *a, const ref_dims *d, float *q, float *k,
                        float *v, float *out);
size_t ref_q_elems(const ref_dims *d);  /* B*Hq*Tq*D */
size_t ref_kv_elems(const ref_dims *d); /* B*Hkv*Tk*D */

/* The other files' tests, each file's run as one cmocka group; they return
 * the number of failed tests. */
int ref_run_linear_mha_tests(void); /* test_reference_mha.c */
int ref_run_error_tests(void);      /* test_reference_errors.c */

#endif
