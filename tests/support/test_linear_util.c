/* Shared pieces of the linear-op tests (see test_linear_util.h). */
#include "test_linear_util.h"

#include <stdlib.h>

void linear_reference(const float *x, const float *w, const float *b, float *y, int64_t M,
                      int64_t N, int64_t K)
{
    vkattn_ref_linear_args a = {
        vkattn_host_tensor_make((void *)x, VKATTN_DTYPE_F32, 2, (int64_t[]){M, K}),
        vkattn_host_tensor_make((void *)w, VKATTN_DTYPE_F32, 2, (int64_t[]){N, K}),
        {0},
        vkattn_host_tensor_make(y, VKATTN_DTYPE_F32, 2, (int64_t[]){M, N}),
    };
    if (b)
        a.b = vkattn_host_tensor_make((void *)b, VKATTN_DTYPE_F32, 1, (int64_t[]){N});
    char err[256] = "";
    if (vkattn_ref_linear(&a, err, sizeof err) != VKATTN_SUCCESS)
        fail_msg("vkattn_ref_linear: %s", err);
}

void linear_check_written(const uint8_t *got, const uint8_t *before, size_t bytes, vkattn_dtype dt,
                          const size_t *idx, const float *want, size_t n, const char *what)
{
    size_t es = vkattn_dtype_size(dt);
    uint8_t *written = test_alloc(bytes);
    float *vals = test_alloc(n * sizeof *vals);
    for (size_t i = 0; i < n; i++) {
        vals[i] = test_load(got, dt, idx[i]);
        memset(written + idx[i] * es, 1, es);
    }
    double tol = dt == VKATTN_DTYPE_F16    ? TEST_TOL_F16
                 : dt == VKATTN_DTYPE_BF16 ? TEST_TOL_BF16
                                           : TEST_TOL_F32;
    test_assert_close(vals, want, n, tol, what);
    for (size_t i = 0; i < bytes; i++)
        if (!written[i] && got[i] != before[i])
            fail_msg("%s: byte %zu outside the elements written changed (0x%02x -> 0x%02x)", what,
                     i, before[i], got[i]);
    free(written);
    free(vals);
}
