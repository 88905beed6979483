/* Shared pieces of the score-modifier reference tests
 * (test_reference_mods*.c). */
#ifndef VKATTN_TEST_REFERENCE_MODS_H
#define VKATTN_TEST_REFERENCE_MODS_H

#include "test_reference.h"

/* What mods_naive applies, as the header's "attention semantics" say. */
typedef struct mods_spec {
    bool causal, top_left;
    uint32_t window;       /* 0: none */
    double scale, softcap; /* softcap 0: none */
    const float *sinks;    /* [Hq] or NULL */
    const double *slopes;  /* [Hq] or NULL */
    const float *mask;     /* additive, [B, Hq, Tq, Tk] or NULL */
    const uint8_t *pad;    /* [B, Tk] (1: token) or NULL */
} mods_spec;

/* Attention with the modifiers over contiguous f32 tensors, written from
 * the formulas with plain loops in double: out [B, Hq, Tq, D], w (may be
 * NULL) [B, Hq, Tq, Tk] per head, lse (may be NULL) [B, Hq, Tq]. */
void mods_naive(const ref_dims *d, const float *q, const float *k, const float *v,
                const mods_spec *m, float *out, float *w, float *lse);
/* The standard ALiBi slope of head h, written as powers of two. */
double mods_alibi_formula(int64_t heads, double max_bias, int64_t h);
/* got == want where want is -inf, else within tol * (1 + |want|). */
void mods_assert_lse(const float *got, const float *want, size_t n, double tol);

/* The MHA layer's modifiers and every bad input (test_reference_mods_errors.c);
 * returns the number of failed tests. */
int mods_run_layer_and_error_tests(void);

#endif
