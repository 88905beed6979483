/* vkattn_attention's modifier, LSE and head-mask arguments when they are
 * wrong (a part of test_attention_mods): every bad input gets its code and a
 * message naming it, and nothing is written (outputs keep their NaN fill).
 * Run on the last policy (and the coopmat one where it runs). */
#include "test_policy.h"
#include "test_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#define F32 VKATTN_DTYPE_F32
#define F16 VKATTN_DTYPE_F16

static void fill_nan(float *x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        x[i] = NAN;
}

void test_bad_input(void **state);

/* ---- bad input: named errors, outputs untouched */

static void expect_untouched(vkattn_context *ctx, vkattn_buffer *b, size_t n, const char *what)
{
    float *x = malloc(n * 4);
    assert_non_null(x);
    TEST_OK(ctx, vkattn_buffer_download(b, 0, x, n * 4));
    for (size_t i = 0; i < n; i++)
        if (!isnan(x[i]))
            fail_msg("%s: element %zu was written (%g)", what, i, (double)x[i]);
    free(x);
}

static void run_bad_input(test_gpu *g, uint32_t policy, const void *arg)
{
    (void)policy, (void)arg;
    vkattn_context *ctx = g->ctx;
    const uint32_t Hq = 4, T = 8, D = 16;
    const size_t nq = (size_t)Hq * T * D, nl = (size_t)Hq * T;
    float *nan_buf = malloc(nq * 4 * 2);
    assert_non_null(nan_buf);
    fill_nan(nan_buf, nq * 2);
    int64_t qs[4] = {1, Hq, T, D}, ls[3] = {1, Hq, T}, hs[1] = {Hq}, bad_hs[1] = {Hq + 1};
    int64_t bad_ls[3] = {1, Hq, T + 1};
    vkattn_buffer *bq = test_buffer_of(ctx, F32, nan_buf, nq); /* values do not matter */
    vkattn_buffer *bo = test_buffer_of(ctx, F32, nan_buf, nq);
    vkattn_buffer *bl = test_buffer_of(ctx, F32, nan_buf, nl + 8);
    vkattn_buffer *bh = test_buffer_of(ctx, F32, nan_buf, 16);
    vkattn_attention_args good =
                              {
                                  .q = vkattn_tensor_make(bq, 0, F32, 4, qs),
                                  .k = vkattn_tensor_make(bq, 0, F32, 4, qs),
                                  .v = vkattn_tensor_make(bq, 0, F32, 4, qs),
                                  .out = vkattn_tensor_make(bo, 0, F32, 4, qs),
                                  .lse = vkattn_tensor_make(bl, 0, F32, 3, ls),
                              },
                          a;
    const vkattn_result INV = VKATTN_ERROR_INVALID_ARGUMENT;
    TEST_FAILS_CHANGED(ctx, a, good, a.softcap = -1.0f, INV, "args->softcap",
                       vkattn_attention(ctx, &a));
    TEST_FAILS_CHANGED(ctx, a, good, a.softcap = NAN, INV, "args->softcap",
                       vkattn_attention(ctx, &a));
    TEST_FAILS_CHANGED(ctx, a, good, a.alibi_max_bias = -2.0f, INV, "args->alibi_max_bias",
                       vkattn_attention(ctx, &a));
    TEST_FAILS_CHANGED(ctx, a, good, a.causal_align = (vkattn_causal_align)7, INV,
                       "args->causal_align", vkattn_attention(ctx, &a));
    TEST_FAILS_CHANGED(ctx, a, good, a.sinks = vkattn_tensor_make(bh, 0, F32, 1, bad_hs),
                       VKATTN_ERROR_SHAPE_MISMATCH, "args->sinks", vkattn_attention(ctx, &a));
    TEST_FAILS_CHANGED(ctx, a, good, a.sinks = vkattn_tensor_make(bh, 0, F16, 1, hs),
                       VKATTN_ERROR_UNSUPPORTED_DTYPE, "args->sinks", vkattn_attention(ctx, &a));
    TEST_FAILS_CHANGED(ctx, a, good, a.alibi_slopes = vkattn_tensor_make(bh, 0, F32, 1, bad_hs),
                       VKATTN_ERROR_SHAPE_MISMATCH, "args->alibi_slopes",
                       vkattn_attention(ctx, &a));
    TEST_FAILS_CHANGED(ctx, a, good, a.alibi_slopes = vkattn_tensor_make(bh, 0, F16, 1, hs),
                       VKATTN_ERROR_UNSUPPORTED_DTYPE, "args->alibi_slopes",
                       vkattn_attention(ctx, &a));
    TEST_FAILS_CHANGED(
        ctx, a, good,
        (a.alibi_slopes = vkattn_tensor_make(bh, 0, F32, 1, hs), a.alibi_max_bias = 8.0f), INV,
        "args->alibi_max_bias", vkattn_attention(ctx, &a));
    TEST_FAILS_CHANGED(ctx, a, good, a.lse = vkattn_tensor_make(bl, 0, F32, 3, bad_ls),
                       VKATTN_ERROR_SHAPE_MISMATCH, "args->lse", vkattn_attention(ctx, &a));
    TEST_FAILS_CHANGED(ctx, a, good, a.lse = vkattn_tensor_make(bl, 0, F16, 3, ls),
                       VKATTN_ERROR_UNSUPPORTED_DTYPE, "args->lse", vkattn_attention(ctx, &a));
    TEST_FAILS_CHANGED(ctx, a, good, a.lse = vkattn_tensor_make(bq, 0, F32, 3, ls), INV,
                       "args->lse", vkattn_attention(ctx, &a));
    expect_untouched(ctx, bo, nq, "out after refused calls");
    expect_untouched(ctx, bl, nl, "lse after refused calls");

    /* merge */
    vkattn_buffer *bo2 = test_buffer_of(ctx, F32, nan_buf, nq);
    vkattn_buffer *bl2 = test_buffer_of(ctx, F32, nan_buf, nl);
    vkattn_buffer *bmo = test_buffer_of(ctx, F32, nan_buf, nq);
    vkattn_buffer *bml = test_buffer_of(ctx, F32, nan_buf, nl);
    int64_t bad_qs[4] = {1, Hq, T, D + 4};
    vkattn_attention_merge_args mg =
                                    {
                                        .out_a = vkattn_tensor_make(bq, 0, F32, 4, qs),
                                        .lse_a = vkattn_tensor_make(bl, 0, F32, 3, ls),
                                        .out_b = vkattn_tensor_make(bo2, 0, F32, 4, qs),
                                        .lse_b = vkattn_tensor_make(bl2, 0, F32, 3, ls),
                                        .out = vkattn_tensor_make(bmo, 0, F32, 4, qs),
                                        .lse = vkattn_tensor_make(bml, 0, F32, 3, ls),
                                    },
                                m;
    TEST_FAILS_CHANGED(ctx, m, mg, m.out_b = vkattn_tensor_make(bo2, 0, F32, 4, bad_qs),
                       VKATTN_ERROR_SHAPE_MISMATCH, "args->out_b", vkattn_attention_merge(ctx, &m));
    TEST_FAILS_CHANGED(ctx, m, mg, m.out = vkattn_tensor_make(bmo, 0, F16, 4, qs),
                       VKATTN_ERROR_UNSUPPORTED_DTYPE, "args->out",
                       vkattn_attention_merge(ctx, &m));
    TEST_FAILS_CHANGED(ctx, m, mg, m.lse_b = vkattn_tensor_make(bl2, 0, F32, 3, bad_ls),
                       VKATTN_ERROR_SHAPE_MISMATCH, "args->lse_b", vkattn_attention_merge(ctx, &m));
    TEST_FAILS_CHANGED(ctx, m, mg, m.lse = vkattn_tensor_make(bml, 0, F16, 3, ls),
                       VKATTN_ERROR_UNSUPPORTED_DTYPE, "args->lse",
                       vkattn_attention_merge(ctx, &m));
    TEST_FAILS_CHANGED(ctx, m, mg, m.lse_a.buffer = NULL, INV, "args->lse_a",
                       vkattn_attention_merge(ctx, &m));
    /* out overlapping out_a without being it (shifted by a row) */
    TEST_FAILS_CHANGED(ctx, m, mg,
                       (m.out = vkattn_tensor_make(bq, 0, F32, 4, qs), m.out.shape[2] = T - 1,
                        m.out.offset = 4 * D, m.out_a.shape[2] = T - 1, m.out_b.shape[2] = T - 1,
                        m.lse_a.shape[2] = T - 1, m.lse_b.shape[2] = T - 1, m.lse.shape[2] = T - 1),
                       INV, "overlaps", vkattn_attention_merge(ctx, &m));
    /* lse on out_b's memory */
    TEST_FAILS_CHANGED(ctx, m, mg, m.lse = vkattn_tensor_make(bo2, 0, F32, 3, ls), INV, "overlaps",
                       vkattn_attention_merge(ctx, &m));
    expect_untouched(ctx, bmo, nq, "merge out after refused calls");
    expect_untouched(ctx, bml, nl, "merge lse after refused calls");
    TEST_DESTROY_BUFFERS(bq, bo, bl, bh, bo2, bl2, bmo, bml);
    free(nan_buf);
}

void test_bad_input(void **state)
{
    (void)state;
    test_for_each_policy(TEST_POLICY_STORAGE_SHARED, run_bad_input, NULL);
}
