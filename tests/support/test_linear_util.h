/* Shared pieces of the linear-op tests (test_linear.c, test_linear_cache.c):
 * the CPU reference over contiguous f32 matrices, and the check of an output
 * buffer element by element and byte by byte around what was written. */
#ifndef VKATTN_TEST_LINEAR_UTIL_H
#define VKATTN_TEST_LINEAR_UTIL_H

#include "test_util.h"

/* y [M, N] = x [M, K] w^T + b (b [N], or NULL: no bias) by the CPU
 * reference. */
void linear_reference(const float *x, const float *w, const float *b, float *y, int64_t M,
                      int64_t N, int64_t K);

/* A buffer of `bytes` bytes of dtype dt as downloaded after the op (`got`)
 * and as it was before (`before`): element idx[i] must be close to want[i]
 * (the tolerance of dt), for i < n; every other byte must be unchanged. */
void linear_check_written(const uint8_t *got, const uint8_t *before, size_t bytes, vkattn_dtype dt,
                          const size_t *idx, const float *want, size_t n, const char *what);

#endif
