/* Shared test scaffolding: a context on the device under test with the
 * validation layer on, a counting host allocator, seeded random data. */
#ifndef VKATTN_TEST_UTIL_H
#define VKATTN_TEST_UTIL_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "vkattn.h"

typedef struct test_gpu {
    vkattn_context *ctx;
    vkattn_allocator allocator;
    long live_allocations; /* host allocations not yet freed */
    long total_allocations;
    char impl[32]; /* VKATTN_TEST_IMPL: lavapipe, swiftshader, default */
} test_gpu;

/* Opens a context on the device under test (VK_ICD_FILENAMES is set per
 * implementation by ctest; VKATTN_DEVICE may narrow it) with validation and
 * `extra_flags`. Fails the test if that is impossible. */
test_gpu *test_gpu_open(uint32_t extra_flags);
/* Destroys the context, then asserts: zero validation errors and warnings,
 * every host allocation freed. */
void test_gpu_close(test_gpu *g);

/* cmocka group setup/teardown storing a test_gpu in *state. */
int test_gpu_setup(void **state);
int test_gpu_teardown(void **state);

/* The device's maxStorageBufferRange (bytes) when it is at most `limit`;
 * otherwise skips the test (cmocka's skip() does not return): tensors
 * beyond one binding are cheap to make only where the range is small
 * (lavapipe: 128 MiB). */
uint64_t test_binding_range_at_most(vkattn_context *ctx, uint64_t limit);

/* Asserts the context saw no validation message so far. */
void test_assert_no_validation_messages(vkattn_context *ctx);

/* Deterministic pseudo-random numbers (xorshift), uniform in [lo, hi). */
typedef struct test_rng {
    uint64_t s;
} test_rng;
test_rng test_rng_seed(uint64_t seed);
float test_rng_uniform(test_rng *r, float lo, float hi);
uint32_t test_rng_below(test_rng *r, uint32_t n);
void test_fill_uniform(test_rng *r, float *dst, size_t n, float lo, float hi);

/* GPU-vs-reference comparison. max_rel = max|got - want| / max|want| (the
 * largest error relative to the largest reference magnitude, so rows of tiny
 * values do not explode it); nmse = sum (got - want)^2 / sum want^2. NaN or
 * inf in `got` (where `want` is finite) makes both infinite. */
typedef struct test_error {
    double max_rel;
    double nmse;
    double max_abs;
    size_t worst; /* index of the largest absolute error */
    size_t nonfinite;
} test_error;
test_error test_compare(const float *got, const float *want, size_t n);
/* Tolerances on max_rel per storage dtype (fp32 accumulation always). */
#define TEST_TOL_F32 2e-4
#define TEST_TOL_F16 1.5e-2
/* bf16 keeps 8 significant bits: rounding an output costs up to 2^-9 */
#define TEST_TOL_BF16 1.5e-2
/* Fails the test with `what` and the figures when max_rel > tol or any
 * value is not finite. */
void test_assert_close(const float *got, const float *want, size_t n, double tol, const char *what);
/* Fails the test unless every LSE value matches: both -inf, or within
 * tol * (1 + |want|). */
void test_assert_lse_close(const float *got, const float *want, size_t n, double tol,
                           const char *what);

/* Zeroed memory of `bytes` bytes (at least one), asserted; free with free(). */
void *test_alloc(size_t bytes);

/* Element i of an array of dtype dt (f32, f16 or u8) at `bytes`, as a float,
 * and the store of v there (f16: rounded to nearest; u8: truncated). */
float test_load(const void *bytes, vkattn_dtype dt, size_t i);
void test_store(void *bytes, vkattn_dtype dt, size_t i, float v);

/* n values uniform in [-amp, amp), rounded to what dt holds (malloc'd). */
float *test_random_array(test_rng *r, size_t n, float amp, vkattn_dtype dt);

/* Values as a buffer of dtype `dt` holds them: f32 unchanged, f16 rounded
 * to the nearest half (so a reference can see exactly the device's inputs). */
void test_round_to(vkattn_dtype dt, float *x, size_t n);
/* Uploads n floats to the start of `b` as dtype dt (f16: rounded). */
void test_upload_as(vkattn_context *ctx, vkattn_buffer *b, vkattn_dtype dt, const float *src,
                    size_t n);
/* Downloads n elements of dtype dt from the start of `b` as floats. */
void test_download_as(vkattn_context *ctx, vkattn_buffer *b, vkattn_dtype dt, float *dst, size_t n);
/* A device buffer holding `bytes` bytes of `data` (asserts success). */
vkattn_buffer *test_buffer_with(vkattn_context *ctx, const void *data, uint64_t bytes);
/* A new buffer holding the n floats of `src` as dtype dt (f16: rounded). */
vkattn_buffer *test_buffer_of(vkattn_context *ctx, vkattn_dtype dt, const float *src, size_t n);
/* A new MHA layer of `desc` holding the weights `w` (asserts success). */
vkattn_mha *test_mha_create(vkattn_context *ctx, const vkattn_mha_desc *desc,
                            const vkattn_mha_weights *w);
/* Destroys the n buffers of `buffers` (NULLs allowed); TEST_DESTROY_BUFFERS
 * takes them as arguments. */
void test_buffers_destroy(vkattn_buffer *const *buffers, size_t n);
#define TEST_DESTROY_BUFFERS(...)                               \
    test_buffers_destroy((vkattn_buffer *const[]){__VA_ARGS__}, \
                         sizeof((vkattn_buffer *const[]){__VA_ARGS__}) / sizeof(vkattn_buffer *))
/* Asserts r == VKATTN_SUCCESS, printing the context's last error if not. */
#define TEST_OK(ctx, expr)                                               \
    do {                                                                 \
        vkattn_result test_r_ = (expr);                                  \
        if (test_r_ != VKATTN_SUCCESS)                                   \
            fail_msg("%s -> %s: %s", #expr, vkattn_result_name(test_r_), \
                     vkattn_context_last_error(ctx));                    \
    } while (0)
/* Asserts `expr` returns `code` and the last error mentions `needle`. */
#define TEST_FAILS(ctx, code, needle, expr)                                            \
    do {                                                                               \
        vkattn_result test_r_ = (expr);                                                \
        if (test_r_ != (code))                                                         \
            fail_msg("%s -> %s, expected %s (%s)", #expr, vkattn_result_name(test_r_), \
                     vkattn_result_name(code), vkattn_context_last_error(ctx));        \
        if (!strstr(vkattn_context_last_error(ctx), (needle)))                         \
            fail_msg("%s: message \"%s\" does not mention \"%s\"", #expr,              \
                     vkattn_context_last_error(ctx), (needle));                        \
    } while (0)
/* Resets `args` to `good`, makes `change` to it, and asserts that `call`
 * (which reads args) then returns `code` with a message containing `needle`. */
#define TEST_FAILS_CHANGED(ctx, args, good, change, code, needle, call) \
    do {                                                                \
        (args) = (good);                                                \
        change;                                                         \
        TEST_FAILS(ctx, code, needle, call);                            \
    } while (0)

/* An f32 KV cache desc, the shape the cache tests start from (num_blocks
 * 0: contiguous; set it for a paged cache). */
vkattn_kv_cache_desc test_kv_desc(uint32_t num_kv_heads, uint32_t num_heads, uint32_t head_dim,
                                  uint32_t max_sequences, uint32_t capacity, uint32_t block_size);

#endif
