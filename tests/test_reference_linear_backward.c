/* CPU reference of the linear op's gradients (vkattn_ref_linear_backward)
 * against plain triple loops in double over the same (widened) values:
 * f32, f16 and bf16 inputs, rank-2 and rank-3 x, strided inputs and
 * outputs, outputs asked for alone; and its refusals. No device. */
#include "test_util.h"

#include <math.h>
#include <stdlib.h>

#define F32 VKATTN_DTYPE_F32

/* Values of dtype dt (f32, or f16 / bf16 bits) at `data`, element i. */
static double value_at(const void *data, vkattn_dtype dt, size_t i)
{
    if (dt == VKATTN_DTYPE_F16)
        return vkattn_f16_to_f32(((const uint16_t *)data)[i]);
    if (dt == VKATTN_DTYPE_BF16)
        return vkattn_bf16_to_f32(((const uint16_t *)data)[i]);
    return ((const float *)data)[i];
}

/* n random values in [-1, 1) stored as dt (malloc'd). */
static void *random_as(test_rng *r, vkattn_dtype dt, size_t n)
{
    void *p = test_alloc(n * 4);
    for (size_t i = 0; i < n; i++) {
        float v = test_rng_uniform(r, -1.0f, 1.0f);
        if (dt == VKATTN_DTYPE_F16)
            ((uint16_t *)p)[i] = vkattn_f32_to_f16(v);
        else if (dt == VKATTN_DTYPE_BF16)
            ((uint16_t *)p)[i] = vkattn_f32_to_bf16(v);
        else
            ((float *)p)[i] = v;
    }
    return p;
}

/* max |got - want| <= 1e-6 max |want| (the f32 rounding of the outputs,
 * 6e-8 relative, plus any order of the double sums), want not all 0. */
static void assert_matches(const float *got, const double *want, size_t n, const char *what)
{
    double err = 0.0, max = 0.0;
    for (size_t i = 0; i < n; i++) {
        err = fmax(err, fabs(got[i] - want[i]));
        max = fmax(max, fabs(want[i]));
    }
    if (!(max > 1e-3) || !(err <= 1e-6 * max))
        fail_msg("%s: max error %g against max |want| %g", what, err, max);
}

/* One case: x [M, K] (rank 3: [B, M / B, K]) of dtype xt, w [N, K] of wt,
 * x stored with `pad` extra elements per row (strides). */
static void check_case(int64_t B, int64_t T, int64_t K, int64_t N, uint32_t rank, vkattn_dtype xt,
                       vkattn_dtype wt, int64_t pad)
{
    test_rng r = test_rng_seed((uint64_t)(B * 1000 + T * 100 + K * 10 + N + pad));
    const int64_t M = B * T, xrow = K + pad;
    void *x = random_as(&r, xt, (size_t)(M * xrow)), *w = random_as(&r, wt, (size_t)(N * K));
    float *dy = random_as(&r, F32, (size_t)(M * N));
    float *dx = test_alloc((size_t)(M * K) * 4), *dw = test_alloc((size_t)(N * K) * 4);
    float *db = test_alloc((size_t)N * 4);
    int64_t xs3[3] = {B, T, K}, xs2[2] = {M, K}, ws[2] = {N, K};
    int64_t ys3[3] = {B, T, N}, ys2[2] = {M, N}, bs[1] = {N};
    vkattn_ref_linear_backward_args a = {0};
    a.forward.x = vkattn_host_tensor_make(x, xt, rank, rank == 3 ? xs3 : xs2);
    if (rank == 3)
        a.forward.x.strides[0] = T * xrow, a.forward.x.strides[1] = xrow,
        a.forward.x.strides[2] = 1;
    else
        a.forward.x.strides[0] = xrow, a.forward.x.strides[1] = 1;
    a.forward.w = vkattn_host_tensor_make(w, wt, 2, ws);
    a.dy = vkattn_host_tensor_make(dy, F32, rank, rank == 3 ? ys3 : ys2);
    a.dx = vkattn_host_tensor_make(dx, F32, rank, rank == 3 ? xs3 : xs2);
    a.dw = vkattn_host_tensor_make(dw, F32, 2, ws);
    a.db = vkattn_host_tensor_make(db, F32, 1, bs);
    char err[512] = "";
    if (vkattn_ref_linear_backward(&a, err, sizeof err) != VKATTN_SUCCESS)
        fail_msg("%s", err);

    double *wdx = test_alloc((size_t)(M * K) * 8), *wdw = test_alloc((size_t)(N * K) * 8);
    double *wdb = test_alloc((size_t)N * 8);
    for (int64_t m = 0; m < M; m++)
        for (int64_t k = 0; k < K; k++)
            for (int64_t n = 0; n < N; n++)
                wdx[m * K + k] += dy[m * N + n] * value_at(w, wt, (size_t)(n * K + k));
    for (int64_t n = 0; n < N; n++) {
        for (int64_t k = 0; k < K; k++)
            for (int64_t m = 0; m < M; m++)
                wdw[n * K + k] += dy[m * N + n] * value_at(x, xt, (size_t)(m * xrow + k));
        for (int64_t m = 0; m < M; m++)
            wdb[n] += dy[m * N + n];
    }
    assert_matches(dx, wdx, (size_t)(M * K), "dx");
    assert_matches(dw, wdw, (size_t)(N * K), "dw");
    assert_matches(db, wdb, (size_t)N, "db");

    /* each output alone gives the same values */
    float *alone = test_alloc((size_t)(N * K) * 4);
    vkattn_ref_linear_backward_args only = a;
    only.dx.data = only.db.data = NULL;
    only.dw.data = alone;
    assert_int_equal(vkattn_ref_linear_backward(&only, err, sizeof err), VKATTN_SUCCESS);
    assert_memory_equal(alone, dw, (size_t)(N * K) * 4);
    free(x), free(w), free(dy), free(dx), free(dw), free(db), free(wdx), free(wdw), free(wdb);
    free(alone);
}

static void test_f32(void **state)
{
    (void)state;
    check_case(1, 7, 5, 3, 2, F32, F32, 0);
    check_case(2, 3, 16, 9, 3, F32, F32, 0);
    check_case(3, 5, 8, 4, 3, F32, F32, 3);
    check_case(1, 1, 33, 1, 2, F32, F32, 1);
}

static void test_16_bit(void **state)
{
    (void)state;
    check_case(2, 4, 12, 6, 3, VKATTN_DTYPE_F16, VKATTN_DTYPE_F16, 0);
    check_case(1, 6, 10, 5, 2, VKATTN_DTYPE_BF16, VKATTN_DTYPE_BF16, 2);
    check_case(2, 3, 7, 4, 3, VKATTN_DTYPE_F16, VKATTN_DTYPE_BF16, 1);
    check_case(1, 5, 9, 3, 2, F32, VKATTN_DTYPE_F16, 0);
}

/* A transposed dw and a strided dx: written where the strides say. */
static void test_strided_outputs(void **state)
{
    (void)state;
    enum { M = 3, K = 4, N = 2 };
    float x[M * K], w[N * K], dy[M * N], dw[N * K], dwt[K * N], dx[M * K], dxw[M * (K + 2)];
    test_rng r = test_rng_seed(77);
    test_fill_uniform(&r, x, M * K, -1.0f, 1.0f);
    test_fill_uniform(&r, w, N * K, -1.0f, 1.0f);
    test_fill_uniform(&r, dy, M * N, -1.0f, 1.0f);
    for (int e = 0; e < M * (K + 2); e++)
        dxw[e] = 7.0f;
    int64_t xs[2] = {M, K}, ws[2] = {N, K}, ys[2] = {M, N};
    vkattn_ref_linear_backward_args a = {0};
    a.forward.x = vkattn_host_tensor_make(x, F32, 2, xs);
    a.forward.w = vkattn_host_tensor_make(w, F32, 2, ws);
    a.dy = vkattn_host_tensor_make(dy, F32, 2, ys);
    a.dx = vkattn_host_tensor_make(dx, F32, 2, xs);
    a.dw = vkattn_host_tensor_make(dw, F32, 2, ws);
    assert_int_equal(vkattn_ref_linear_backward(&a, NULL, 0), VKATTN_SUCCESS);
    a.dw.data = dwt, a.dw.strides[0] = 1, a.dw.strides[1] = N;
    a.dx.data = dxw, a.dx.strides[0] = K + 2;
    assert_int_equal(vkattn_ref_linear_backward(&a, NULL, 0), VKATTN_SUCCESS);
    for (int n = 0; n < N; n++)
        for (int k = 0; k < K; k++)
            assert_true(dwt[k * N + n] == dw[n * K + k]);
    for (int m = 0; m < M; m++)
        for (int k = 0; k < K + 2; k++)
            assert_true(dxw[m * (K + 2) + k] == (k < K ? dx[m * K + k] : 7.0f));
}

enum { EM = 4, EK = 6, EN = 3 };
static float ex[EM * EK], ew[EN * EK], edy[EM * EN], edx[EM * EK], edw[EN * EK], edb[EN];

static vkattn_ref_linear_backward_args good_args(void)
{
    int64_t xs[2] = {EM, EK}, ws[2] = {EN, EK}, ys[2] = {EM, EN}, bs[1] = {EN};
    vkattn_ref_linear_backward_args a = {0};
    a.forward.x = vkattn_host_tensor_make(ex, F32, 2, xs);
    a.forward.w = vkattn_host_tensor_make(ew, F32, 2, ws);
    a.dy = vkattn_host_tensor_make(edy, F32, 2, ys);
    a.dx = vkattn_host_tensor_make(edx, F32, 2, xs);
    a.dw = vkattn_host_tensor_make(edw, F32, 2, ws);
    a.db = vkattn_host_tensor_make(edb, F32, 1, bs);
    for (int e = 0; e < EM * EK; e++)
        edx[e] = 7.0f;
    for (int e = 0; e < EN * EK; e++)
        edw[e] = 7.0f;
    for (int e = 0; e < EN; e++)
        edb[e] = 7.0f;
    return a;
}

#define REFUSED(change, code, needle)                                                             \
    do {                                                                                          \
        vkattn_ref_linear_backward_args a = good_args();                                          \
        change;                                                                                   \
        char err[512] = "";                                                                       \
        vkattn_result r_ = vkattn_ref_linear_backward(&a, err, sizeof err);                       \
        if (r_ != (code))                                                                         \
            fail_msg("line %d: %s -> %s, expected %s (%s)", __LINE__, #change,                    \
                     vkattn_result_name(r_), vkattn_result_name(code), err);                      \
        if (!strstr(err, (needle)))                                                               \
            fail_msg("line %d: message \"%s\" does not mention \"%s\"", __LINE__, err, (needle)); \
        for (int e = 0; e < EM * EK; e++)                                                         \
            assert_true(edx[e] == 7.0f);                                                          \
        for (int e = 0; e < EN * EK; e++)                                                         \
            assert_true(edw[e] == 7.0f);                                                          \
        for (int e = 0; e < EN; e++)                                                              \
            assert_true(edb[e] == 7.0f);                                                          \
    } while (0)

static void test_refusals(void **state)
{
    (void)state;
    vkattn_ref_linear_backward_args ok = good_args();
    assert_int_equal(vkattn_ref_linear_backward(&ok, NULL, 0), VKATTN_SUCCESS);
    char msg[512] = "";
    assert_int_equal(vkattn_ref_linear_backward(NULL, msg, sizeof msg),
                     VKATTN_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(msg, "args is NULL"));
    int64_t y5[2] = {EM, 5}, x3[3] = {1, EM, EK}, w7[2] = {EN, 7}, b2[2] = {1, EN};
    REFUSED(a.forward.w.dtype = VKATTN_DTYPE_Q8_0, VKATTN_ERROR_UNSUPPORTED_DTYPE,
            "args->forward.w.dtype is q8_0: quantized weights are not trained");
    REFUSED(a.forward.x.dtype = VKATTN_DTYPE_U8, VKATTN_ERROR_UNSUPPORTED_DTYPE,
            "args->forward.x.dtype is u8: it must be f32, f16 or bf16");
    REFUSED(a.forward.x.data = NULL, VKATTN_ERROR_INVALID_ARGUMENT, "args->forward.x.data is NULL");
    REFUSED(a.forward.w.rank = 3, VKATTN_ERROR_INVALID_ARGUMENT,
            "args->forward.w.rank is 3: it must be 2 [N, K]");
    REFUSED(a.forward.w = vkattn_host_tensor_make(ew, F32, 2, w7), VKATTN_ERROR_SHAPE_MISMATCH,
            "args->forward.w.shape[1] is 7 but args->forward.x.shape[1] (K) is 6");
    REFUSED(a.dy.data = NULL, VKATTN_ERROR_INVALID_ARGUMENT, "args->dy.data is NULL");
    REFUSED(a.dy = vkattn_host_tensor_make(edy, F32, 2, y5), VKATTN_ERROR_SHAPE_MISMATCH,
            "args->dy.shape[1] is 5 but it must be 3");
    REFUSED(a.dy.dtype = VKATTN_DTYPE_F16, VKATTN_ERROR_UNSUPPORTED_DTYPE,
            "args->dy.dtype is f16: it must be f32");
    REFUSED(a.dx = vkattn_host_tensor_make(edx, F32, 3, x3), VKATTN_ERROR_SHAPE_MISMATCH,
            "args->dx.rank is 3 but it must be 2, as args->forward.x's");
    REFUSED(a.dw.dtype = VKATTN_DTYPE_BF16, VKATTN_ERROR_UNSUPPORTED_DTYPE,
            "args->dw.dtype is bf16: it must be f32");
    REFUSED(a.db = vkattn_host_tensor_make(edb, F32, 2, b2), VKATTN_ERROR_SHAPE_MISMATCH,
            "args->db.rank is 2 but it must be 1");
    REFUSED(a.dw.strides[0] = 0, VKATTN_ERROR_INVALID_ARGUMENT, "args->dw.strides[0] is 0");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_f32),
        cmocka_unit_test(test_16_bit),
        cmocka_unit_test(test_strided_outputs),
        cmocka_unit_test(test_refusals),
    };
    return cmocka_run_group_tests_name("reference linear backward", tests, NULL, NULL);
}
