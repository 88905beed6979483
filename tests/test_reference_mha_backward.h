/* Shared pieces of the MHA layer reference backward tests
 * (test_reference_mha_backward*.c). */
#ifndef VKATTN_TEST_REFERENCE_MHA_BACKWARD_H
#define VKATTN_TEST_REFERENCE_MHA_BACKWARD_H

#include "test_util.h"

#include <stdbool.h>

typedef enum mbw_mask {
    MBW_MASK_NONE,
    MBW_MASK_ADD,     /* additive f32 [B, Hq, Tq, Tk], some -inf */
    MBW_MASK_ADD_2D,  /* additive f32 [Tq, Tk], one row all -inf (a dead row) */
    MBW_MASK_ATTENDS, /* u8 [Tq, Tk], nonzero: visible */
    MBW_MASK_BLOCKS,  /* u8 [B*Hq, Tq, Tk], nonzero: hidden (bool_mask TRUE_BLOCKS) */
} mbw_mask;

/* One layer and call. Self-attention unless `cross` (forward.kv [B, Tk,
 * Dkv]); `value` adds forward.value [B, Tk, Dvin]. */
typedef struct mbw_case {
    const char *name;
    int64_t B, Tq, Tk;            /* Tk: cross-attention or a value input (else Tq) */
    uint32_t Dm, Hq, Hkv, Dk, Dv; /* Dk 0: Dm / Hq; Dv 0: Dk */
    uint32_t Dkv, Dvin;           /* kv_dim, value_dim (0: the desc's defaults) */
    bool cross, value;
    bool bias, packed; /* packed: wqkv (and bqkv) */
    bool qk_norm;
    float norm_eps;
    vkattn_rope_desc rope;
    bool positions; /* forward.positions: a left-padded batch's */
    bool causal, top_left;
    mbw_mask mask;
    bool key_padding;
    uint32_t window;
    float softcap, scale;
    int alibi; /* 0: none, 1: weights->alibi_slopes, 2: the standard slopes */
    bool sinks;
    float dropout_p;
} mbw_case;

/* Tolerance of the finite differences: per gradient tensor,
 *     max |fd - analytic| <= MBW_REL_TOL * max |analytic| + MBW_ABS_TOL.
 * L = sum(y * dy) comes from the double forward (vka_ref_mha_forward_double:
 * no f32 step between the inputs and y), differenced by 4 points (error
 * O(h^4)) with h = 2^-8 on inputs that are multiples of 2^-20, so every
 * x +- h, x +- 2h is exact in f32. What is left is h^4 f^(5) / 30 (about
 * 1e-11 for these sizes), double rounding (about 1e-13), and the f32
 * rounding of the analytic gradients the backward writes (2^-24 = 6e-8 of
 * an element): the largest error seen is 6e-8 of max |analytic|. */
#define MBW_REL_TOL 2e-7
#define MBW_ABS_TOL 1e-10

/* The double forward against vkattn_ref_mha (which keeps Q, K, V and O in
 * f32 between its steps: a few f32 roundings of relative 6e-8; 9e-8 seen):
 * max |y_ref - y_double| <= MBW_FWD_TOL * max |y_double|. */
#define MBW_FWD_TOL 1e-6

/* The worst error of a case, relative to the largest analytic magnitude
 * of its gradient tensor, over every gradient. */
typedef struct mbw_result {
    double worst_rel;     /* max over tensors of err / max|analytic| */
    const char *worst_of; /* the tensor it was found in */
    double fwd_rel;       /* the forward's check */
} mbw_result;

/* Runs a case: the forward against vkattn_ref_mha, every gradient of
 * vkattn_ref_mha_backward against finite differences; fails the test on
 * any error over the tolerance or a gradient that is all zero.
 * (test_reference_mha_backward_fd.c) */
void mbw_check_case(const mbw_case *c, mbw_result *r);

/* Test groups; each returns its failures. */
int mbw_run_case_tests(void);  /* test_reference_mha_backward_cases.c */
int mbw_run_error_tests(void); /* test_reference_mha_backward_errors.c */

/* n values uniform in [-amp, amp), multiples of 2^-20 (malloc'd). */
float *mbw_values(test_rng *r, size_t n, float amp);

#endif
