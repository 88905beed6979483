/* Shared pieces of the reference backward tests (test_reference_backward*.c). */
#ifndef VKATTN_TEST_REFERENCE_BACKWARD_H
#define VKATTN_TEST_REFERENCE_BACKWARD_H

#include "test_util.h"

#include <stdbool.h>

typedef enum bwd_mask {
    BWD_MASK_NONE,
    BWD_MASK_ADD_F32,    /* additive f32 [B, Hq, Tq, Tk], some -inf */
    BWD_MASK_ADD_F16,    /* additive f16 [B, 1, Tq, Tk] */
    BWD_MASK_ADD_BF16,   /* additive bf16 [Tq, Tk] */
    BWD_MASK_U8_ATTENDS, /* u8 [Tq, Tk], nonzero: visible */
    BWD_MASK_U8_BLOCKS,  /* u8 [Hq, Tq, Tk], nonzero: hidden */
} bwd_mask;

/* One finite-difference case: the forward's shape and modifiers. */
typedef struct bwd_case {
    const char *name;
    int64_t B, Hq, Hkv, Tq, Tk, Dk, Dv;
    bool causal, top_left;
    uint32_t window;
    float softcap, scale; /* scale 0: 1/sqrt(Dk) */
    bwd_mask mask;
    bool key_padding;
    int alibi; /* 0: none, 1: slopes tensor, 2: alibi_max_bias */
    bool sinks, head_mask;
    bool dead_rows; /* make some rows see no key (mask row, padded batch row) */
    float dropout_p;
} bwd_case;

/* The worst |finite difference - analytic| of each gradient, and the
 * largest analytic magnitude it is judged against. */
typedef struct bwd_errors {
    double err[4], max[4]; /* dq, dk, dv, dsinks */
} bwd_errors;

/* Tolerance: max |fd - analytic| <= BWD_REL_TOL * max |analytic| + BWD_ABS_TOL
 * per gradient tensor. The differences are 4-point (error O(h^4)) with
 * h = 2^-7 on inputs that are multiples of 2^-20, so every x +- h, x +- 2h
 * is exact in f32; what is left is out's f32 rounding: up to 8e-5 of max|analytic|
 * seen (dsinks of "dead rows u8 + padding"), most cases below 3e-5. */
#define BWD_REL_TOL 1e-3
#define BWD_ABS_TOL 1e-6

/* Runs case `c` (analytic gradients from vkattn_ref_attention_backward,
 * numeric ones from vkattn_ref_attention), fills `e`, and fails the test
 * when a gradient is off or not finite. (test_reference_backward_fd.c) */
void bwd_check_case(const bwd_case *c, bwd_errors *e);

/* Every case's group of tests (test_reference_backward_cases.c and
 * test_reference_backward_errors.c); each returns its failures. */
int bwd_run_case_tests(void);
int bwd_run_error_tests(void);

/* n values uniform in [-amp, amp), multiples of 2^-20 (malloc'd).
 * (test_reference_backward_fd.c) */
float *bwd_values(test_rng *r, size_t n, float amp);

#endif
