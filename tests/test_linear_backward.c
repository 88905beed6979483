/* vkattn_linear_backward against sums in double over the same rounded
 * inputs: dx = dy W, dw = dy^T x, db = column sums of dy, elementwise within
 * 1e-5 (max error over the largest reference value; the inputs are exact
 * in every dtype, the sums f32), NaN fails. Shapes that end mid-tile, rank
 * 2 and 3, f32 / f16 / bf16 inputs, strided rows, accumulate (adds to what
 * the outputs held), a sum over more rows than one dispatch takes (it is
 * cut in pieces: lavapipe ends a shader loop after 65535 iterations), two
 * runs giving the same bits; bad input by name. */
#include "test_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

typedef struct lin_case {
    uint32_t B, T, K, N;
    vkattn_dtype x_dt, w_dt, dy_dt;
    uint32_t x_pad; /* extra elements per row of x (a strided x) */
    bool accumulate;
    double tol; /* 0: 1e-5 */
} lin_case;

static void reference(const lin_case *c, const float *x, const float *w, const float *dy,
                      const float *prior, float *dx, float *dw, float *db)
{
    const size_t M = (size_t)c->B * c->T, K = c->K, N = c->N, xs = K + c->x_pad;
    const double keep = c->accumulate ? 1.0 : 0.0;
    for (size_t m = 0; m < M; m++)
        for (size_t k = 0; k < K; k++) {
            double s = 0;
            for (size_t n = 0; n < N; n++)
                s += (double)dy[m * N + n] * w[n * K + k];
            dx[m * K + k] = (float)(s + keep * prior[m * K + k]);
        }
    for (size_t n = 0; n < N; n++)
        for (size_t k = 0; k < K; k++) {
            double s = 0;
            for (size_t m = 0; m < M; m++)
                s += (double)dy[m * N + n] * x[m * xs + k];
            dw[n * K + k] = (float)(s + keep * prior[n * K + k]);
        }
    for (size_t n = 0; n < N; n++) {
        double s = 0;
        for (size_t m = 0; m < M; m++)
            s += dy[m * N + n];
        db[n] = (float)(s + keep * prior[n]);
    }
}

static void run_case(test_gpu *g, const lin_case *c)
{
    vkattn_context *ctx = g->ctx;
    char what[200];
    snprintf(what, sizeof what, "B%u T%u K%u N%u x %s w %s dy %s pad%u acc%d", c->B, c->T, c->K,
             c->N, vkattn_dtype_name(c->x_dt), vkattn_dtype_name(c->w_dt),
             vkattn_dtype_name(c->dy_dt), c->x_pad, c->accumulate);
    test_rng rng = test_rng_seed(4100u + c->K * 3u + c->N);
    const size_t M = (size_t)c->B * c->T, xs = c->K + c->x_pad;
    float *x = test_random_array(&rng, M * xs, 1.0f, c->x_dt);
    float *w = test_random_array(&rng, (size_t)c->N * c->K, 0.5f, c->w_dt);
    float *dy = test_random_array(&rng, M * c->N, 1.0f, c->dy_dt);
    const size_t nmax = M * c->K > (size_t)c->N * c->K ? M * c->K : (size_t)c->N * c->K;
    float *prior = test_random_array(&rng, nmax, 1.0f, VKATTN_DTYPE_F32);
    float *want[3] = {test_alloc(M * c->K * 4), test_alloc((size_t)c->N * c->K * 4),
                      test_alloc(c->N * 4)};
    float *got[3] = {test_alloc(M * c->K * 4), test_alloc((size_t)c->N * c->K * 4),
                     test_alloc(c->N * 4)};
    const size_t n[3] = {M * c->K, (size_t)c->N * c->K, c->N};
    reference(c, x, w, dy, prior, want[0], want[1], want[2]);

    vkattn_buffer *bx = test_buffer_of(ctx, c->x_dt, x, M * xs);
    vkattn_buffer *bw = test_buffer_of(ctx, c->w_dt, w, (size_t)c->N * c->K);
    vkattn_buffer *bdy = test_buffer_of(ctx, c->dy_dt, dy, M * c->N);
    vkattn_buffer *bo[3];
    for (int i = 0; i < 3; i++)
        bo[i] = test_buffer_of(ctx, VKATTN_DTYPE_F32, prior, n[i]);
    vkattn_linear_backward_args a = {.accumulate = c->accumulate};
    const uint32_t rank = c->B > 1 ? 3 : 2;
    const int64_t xs3[3] = {c->B, c->T, c->K}, ys3[3] = {c->B, c->T, c->N};
    const int64_t xs2[2] = {(int64_t)M, c->K}, ys2[2] = {(int64_t)M, c->N};
    const int64_t ws[2] = {c->N, c->K}, bs[1] = {c->N};
    a.forward.x = vkattn_tensor_make(bx, 0, c->x_dt, rank, rank == 3 ? xs3 : xs2);
    if (c->x_pad) {
        a.forward.x.strides[rank - 1] = 1;
        a.forward.x.strides[rank - 2] = (int64_t)xs;
        if (rank == 3)
            a.forward.x.strides[0] = (int64_t)(c->T * xs);
    }
    a.forward.w = vkattn_tensor_make(bw, 0, c->w_dt, 2, ws);
    a.dy = vkattn_tensor_make(bdy, 0, c->dy_dt, rank, rank == 3 ? ys3 : ys2);
    a.dx = vkattn_tensor_make(bo[0], 0, VKATTN_DTYPE_F32, rank, rank == 3 ? xs3 : xs2);
    a.dw = vkattn_tensor_make(bo[1], 0, VKATTN_DTYPE_F32, 2, ws);
    a.db = vkattn_tensor_make(bo[2], 0, VKATTN_DTYPE_F32, 1, bs);
    TEST_OK(ctx, vkattn_linear_backward(ctx, &a));
    static const char *const names[3] = {"dx", "dw", "db"};
    for (int i = 0; i < 3; i++) {
        test_download_as(ctx, bo[i], VKATTN_DTYPE_F32, got[i], n[i]);
        char label[260];
        snprintf(label, sizeof label, "%s of %s", names[i], what);
        test_assert_close(got[i], want[i], n[i], c->tol ? c->tol : 1e-5, label);
    }
    if (!c->accumulate) { /* the same bits again */
        TEST_OK(ctx, vkattn_linear_backward(ctx, &a));
        float *again = test_alloc(n[1] * 4);
        test_download_as(ctx, bo[1], VKATTN_DTYPE_F32, again, n[1]);
        if (memcmp(again, got[1], n[1] * 4) != 0)
            fail_msg("%s: a second run gave other bits", what);
        free(again);
    }
    TEST_DESTROY_BUFFERS(bx, bw, bdy, bo[0], bo[1], bo[2]);
    for (int i = 0; i < 3; i++)
        free(want[i]), free(got[i]);
    free(x), free(w), free(dy), free(prior);
    test_assert_no_validation_messages(ctx);
}

#define F32 VKATTN_DTYPE_F32
#define F16 VKATTN_DTYPE_F16
#define BF16 VKATTN_DTYPE_BF16

static void test_cases(void **state)
{
    static const lin_case cases[] = {
        {1, 1, 1, 1, F32, F32, F32, 0, false},
        {1, 37, 19, 23, F32, F32, F32, 0, false},
        {2, 33, 64, 96, F32, F32, F32, 0, false},
        {3, 17, 65, 31, F16, F16, F16, 0, false},
        {2, 9, 40, 70, BF16, BF16, BF16, 0, false},
        {1, 70, 48, 33, F32, BF16, F16, 5, true},
        {2, 129, 130, 66, F16, F32, F32, 3, true},
        /* dw and db sum 100000 and 600000 rows (two pieces); one f32 sum of
         * 600000 terms of either sign rounds to about 1e-4 of its value */
        {1, 100000, 1, 2, F32, F32, F32, 0, false, 0},
        {1, 600000, 1, 2, F32, F32, F32, 0, false, 1e-3},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        run_case(*state, &cases[i]);
}

static void test_errors(void **state)
{
    test_gpu *g = *state;
    vkattn_context *ctx = g->ctx;
    float zeros[64] = {0};
    vkattn_buffer *b = test_buffer_of(ctx, F32, zeros, 64);
    vkattn_buffer *o = test_buffer_of(ctx, F32, zeros, 64);
    const int64_t xs[2] = {2, 4}, ws[2] = {3, 4}, ys[2] = {2, 3};
    vkattn_linear_backward_args good = {0};
    good.forward.x = vkattn_tensor_make(b, 0, F32, 2, xs);
    good.forward.w = vkattn_tensor_make(b, 64, F32, 2, ws);
    good.dy = vkattn_tensor_make(b, 128, F32, 2, ys);
    good.dx = vkattn_tensor_make(o, 0, F32, 2, xs);
    good.dw = vkattn_tensor_make(o, 64, F32, 2, ws);
    TEST_OK(ctx, vkattn_linear_backward(ctx, &good));
    vkattn_linear_backward_args x;
    const vkattn_result INV = VKATTN_ERROR_INVALID_ARGUMENT, SHP = VKATTN_ERROR_SHAPE_MISMATCH;
    const vkattn_result DT = VKATTN_ERROR_UNSUPPORTED_DTYPE;
#define CALL vkattn_linear_backward(ctx, &x)
    TEST_FAILS(ctx, INV, "args is NULL", vkattn_linear_backward(ctx, NULL));
    TEST_FAILS_CHANGED(ctx, x, good, x.dy.buffer = NULL, INV, "args->dy.buffer is NULL", CALL);
    TEST_FAILS_CHANGED(ctx, x, good, x.dy.shape[1] = 4, SHP, "args->dy's last dimension is 4",
                       CALL);
    TEST_FAILS_CHANGED(ctx, x, good, x.forward.w.shape[1] = 3, SHP, "args->forward.w.shape[1]",
                       CALL);
    TEST_FAILS_CHANGED(ctx, x, good, x.forward.w.dtype = VKATTN_DTYPE_Q8_0, DT,
                       "args->forward.w.dtype is q8_0", CALL);
    TEST_FAILS_CHANGED(ctx, x, good, x.dx.dtype = F16, DT, "args->dx.dtype is f16", CALL);
    TEST_FAILS_CHANGED(ctx, x, good, x.dw.shape[0] = 2, SHP, "args->dw.shape[0] is 2", CALL);
    TEST_FAILS_CHANGED(ctx, x, good, x.dw.offset = 0, INV, "args->dw", CALL);
    TEST_FAILS_CHANGED(ctx, x, good, x.dx.buffer = b, INV, "args->dx", CALL);
#undef CALL
    TEST_DESTROY_BUFFERS(b, o);
    test_assert_no_validation_messages(ctx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cases),
        cmocka_unit_test(test_errors),
    };
    return cmocka_run_group_tests(tests, test_gpu_setup, test_gpu_teardown);
}
