#include "test_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sanitizer_pin.h"

static void *counting_allocate(void *user, size_t size, size_t alignment)
{
    test_gpu *g = user;
    void *p = NULL;
    if (alignment < sizeof(void *))
        alignment = sizeof(void *);
    if (posix_memalign(&p, alignment, size ? size : 1) != 0)
        return NULL;
    g->live_allocations++;
    g->total_allocations++;
    return p;
}

static void counting_free(void *user, void *memory)
{
    test_gpu *g = user;
    if (!memory)
        return;
    g->live_allocations--;
    free(memory);
}

static void on_log(void *user, vkattn_log_level level, const char *message)
{
    (void)user;
    if (level >= VKATTN_LOG_WARNING)
        fprintf(stderr, "[vkattn %s] %s\n", level == VKATTN_LOG_ERROR ? "error" : "warning",
                message);
}

test_gpu *test_gpu_open(uint32_t extra_flags)
{
    vkattn_pin_vulkan_libraries();
    test_gpu *g = calloc(1, sizeof *g);
    assert_non_null(g);
    const char *impl = getenv("VKATTN_TEST_IMPL");
    snprintf(g->impl, sizeof g->impl, "%s", impl ? impl : "default");
    g->allocator = (vkattn_allocator){counting_allocate, counting_free, g};
    vkattn_context_desc desc = {0};
    desc.device = getenv("VKATTN_DEVICE");
    if (desc.device && !*desc.device)
        desc.device = NULL;
    desc.flags = VKATTN_CONTEXT_VALIDATION | extra_flags;
    /* the CI stage that runs the core suites once with GPU-assisted
     * validation (tools/test.sh) */
    const char *gpu_av = getenv("VKATTN_TEST_GPU_ASSISTED");
    if (gpu_av && strcmp(gpu_av, "1") == 0)
        desc.flags |= VKATTN_CONTEXT_VALIDATION_GPU_ASSISTED;
    desc.log = on_log;
    desc.allocator = &g->allocator;
    vkattn_result r = vkattn_context_create(&desc, &g->ctx);
    if (r != VKATTN_SUCCESS)
        fail_msg("vkattn_context_create on %s: %s", g->impl, vkattn_result_name(r));
    return g;
}

void test_assert_no_validation_messages(vkattn_context *ctx)
{
    uint32_t errors = 99, warnings = 99;
    vkattn_context_validation_counts(ctx, &errors, &warnings);
    if (errors || warnings)
        fail_msg("validation layer reported %u errors and %u warnings", errors, warnings);
}

void test_gpu_close(test_gpu *g)
{
    if (!g)
        return;
    uint32_t errors = 99, warnings = 99;
    vkattn_context_validation_counts(g->ctx, &errors, &warnings);
    vkattn_context_destroy(g->ctx);
    long live = g->live_allocations;
    char impl[sizeof g->impl];
    snprintf(impl, sizeof impl, "%s", g->impl);
    free(g);
    /* Not fail_msg: this runs as a group teardown too, whose failure cmocka
     * prints but leaves out of the exit status, so the test would pass. */
    if (errors || warnings || live) {
        fprintf(stderr,
                "FAILED on %s: the validation layer reported %u errors and %u warnings; "
                "%ld host allocations leaked by the context\n",
                impl, errors, warnings, live);
        exit(1);
    }
}

int test_gpu_setup(void **state)
{
    *state = test_gpu_open(0);
    return 0;
}

int test_gpu_teardown(void **state)
{
    test_gpu_close(*state);
    return 0;
}

uint64_t test_binding_range_at_most(vkattn_context *ctx, uint64_t limit)
{
    uint64_t range = vkattn_context_device_info(ctx)->max_storage_buffer_range;
    if (range > limit)
        skip();
    return range;
}

test_rng test_rng_seed(uint64_t seed)
{
    test_rng r = {seed * 0x9E3779B97F4A7C15ull + 0x632BE59BD9B4E019ull};
    if (!r.s)
        r.s = 1;
    return r;
}

static uint64_t next(test_rng *r)
{
    r->s ^= r->s << 13;
    r->s ^= r->s >> 7;
    r->s ^= r->s << 17;
    return r->s;
}

float test_rng_uniform(test_rng *r, float lo, float hi)
{
    return lo + (hi - lo) * (float)((next(r) >> 40) * (1.0 / 16777216.0));
}

uint32_t test_rng_below(test_rng *r, uint32_t n) { return (uint32_t)(next(r) % n); }

void test_fill_uniform(test_rng *r, float *dst, size_t n, float lo, float hi)
{
    for (size_t i = 0; i < n; i++)
        dst[i] = test_rng_uniform(r, lo, hi);
}

void *test_alloc(size_t bytes)
{
    void *p = calloc(1, bytes ? bytes : 1);
    assert_non_null(p);
    return p;
}

float test_load(const void *bytes, vkattn_dtype dt, size_t i)
{
    const uint8_t *b = bytes;
    if (dt == VKATTN_DTYPE_F32) {
        float v;
        memcpy(&v, b + 4 * i, 4);
        return v;
    }
    if (dt == VKATTN_DTYPE_F16 || dt == VKATTN_DTYPE_BF16) {
        uint16_t h;
        memcpy(&h, b + 2 * i, 2);
        return dt == VKATTN_DTYPE_F16 ? vkattn_f16_to_f32(h) : vkattn_bf16_to_f32(h);
    }
    return b[i];
}

void test_store(void *bytes, vkattn_dtype dt, size_t i, float v)
{
    uint8_t *b = bytes;
    if (dt == VKATTN_DTYPE_F32) {
        memcpy(b + 4 * i, &v, 4);
    } else if (dt == VKATTN_DTYPE_F16 || dt == VKATTN_DTYPE_BF16) {
        uint16_t h = dt == VKATTN_DTYPE_F16 ? vkattn_f32_to_f16(v) : vkattn_f32_to_bf16(v);
        memcpy(b + 2 * i, &h, 2);
    } else {
        b[i] = (uint8_t)v;
    }
}

float *test_random_array(test_rng *r, size_t n, float amp, vkattn_dtype dt)
{
    float *a = malloc((n ? n : 1) * sizeof *a);
    assert_non_null(a);
    test_fill_uniform(r, a, n, -amp, amp);
    test_round_to(dt, a, n);
    return a;
}

vkattn_buffer *test_buffer_with(vkattn_context *ctx, const void *data, uint64_t bytes)
{
    vkattn_buffer *b = NULL;
    vkattn_buffer_desc d = {.size = bytes};
    TEST_OK(ctx, vkattn_buffer_create(ctx, &d, &b));
    if (data)
        TEST_OK(ctx, vkattn_buffer_upload(b, 0, data, bytes));
    return b;
}

void test_round_to(vkattn_dtype dt, float *x, size_t n)
{
    if (dt == VKATTN_DTYPE_F16)
        for (size_t i = 0; i < n; i++)
            x[i] = vkattn_f16_to_f32(vkattn_f32_to_f16(x[i]));
    if (dt == VKATTN_DTYPE_BF16)
        for (size_t i = 0; i < n; i++)
            x[i] = vkattn_bf16_to_f32(vkattn_f32_to_bf16(x[i]));
}

void test_upload_as(vkattn_context *ctx, vkattn_buffer *b, vkattn_dtype dt, const float *src,
                    size_t n)
{
    if (dt == VKATTN_DTYPE_F32) {
        TEST_OK(ctx, vkattn_buffer_upload(b, 0, src, n * 4));
        return;
    }
    uint16_t *h = malloc(n * 2 + 2);
    assert_non_null(h);
    for (size_t i = 0; i < n; i++)
        h[i] = dt == VKATTN_DTYPE_BF16 ? vkattn_f32_to_bf16(src[i]) : vkattn_f32_to_f16(src[i]);
    TEST_OK(ctx, vkattn_buffer_upload(b, 0, h, n * 2));
    free(h);
}

void test_download_as(vkattn_context *ctx, vkattn_buffer *b, vkattn_dtype dt, float *dst, size_t n)
{
    if (dt == VKATTN_DTYPE_F32) {
        TEST_OK(ctx, vkattn_buffer_download(b, 0, dst, n * 4));
        return;
    }
    uint16_t *h = malloc(n * 2 + 2);
    assert_non_null(h);
    TEST_OK(ctx, vkattn_buffer_download(b, 0, h, n * 2));
    for (size_t i = 0; i < n; i++)
        dst[i] = dt == VKATTN_DTYPE_BF16 ? vkattn_bf16_to_f32(h[i]) : vkattn_f16_to_f32(h[i]);
    free(h);
}

vkattn_buffer *test_buffer_of(vkattn_context *ctx, vkattn_dtype dt, const float *src, size_t n)
{
    vkattn_buffer *b = test_buffer_with(ctx, NULL, n * vkattn_dtype_size(dt));
    test_upload_as(ctx, b, dt, src, n);
    return b;
}

vkattn_mha *test_mha_create(vkattn_context *ctx, const vkattn_mha_desc *desc,
                            const vkattn_mha_weights *w)
{
    vkattn_mha *layer = NULL;
    TEST_OK(ctx, vkattn_mha_create(ctx, desc, &layer));
    TEST_OK(ctx, vkattn_mha_set_weights(layer, w));
    return layer;
}

void test_buffers_destroy(vkattn_buffer *const *buffers, size_t n)
{
    for (size_t i = 0; i < n; i++)
        vkattn_buffer_destroy(buffers[i]);
}

test_error test_compare(const float *got, const float *want, size_t n)
{
    test_error e = {0};
    double max_want = 0, sum_err2 = 0, sum_want2 = 0;
    for (size_t i = 0; i < n; i++) {
        double w = want[i], g = got[i];
        if (!isfinite(g) && isfinite(w)) {
            e.nonfinite++;
            continue;
        }
        double d = fabs(g - w);
        if (d > e.max_abs) {
            e.max_abs = d;
            e.worst = i;
        }
        if (fabs(w) > max_want)
            max_want = fabs(w);
        sum_err2 += d * d;
        sum_want2 += w * w;
    }
    e.max_rel = e.max_abs / (max_want > 1e-30 ? max_want : 1e-30);
    e.nmse = sum_want2 > 0 ? sum_err2 / sum_want2 : sum_err2;
    if (e.nonfinite)
        e.max_rel = e.nmse = INFINITY;
    return e;
}

void test_assert_close(const float *got, const float *want, size_t n, double tol, const char *what)
{
    test_error e = test_compare(got, want, n);
    if (e.nonfinite || !(e.max_rel <= tol))
        fail_msg("%s: max_rel %.3g (tolerance %.3g), nmse %.3g, %zu non-finite; worst at %zu: "
                 "got %.9g, want %.9g",
                 what, e.max_rel, tol, e.nmse, e.nonfinite, e.worst, got[e.worst], want[e.worst]);
}

vkattn_kv_cache_desc test_kv_desc(uint32_t num_kv_heads, uint32_t num_heads, uint32_t head_dim,
                                  uint32_t max_sequences, uint32_t capacity, uint32_t block_size)
{
    vkattn_kv_cache_desc d = {.num_kv_heads = num_kv_heads,
                              .num_heads = num_heads,
                              .head_dim = head_dim,
                              .dtype = VKATTN_DTYPE_F32,
                              .max_sequences = max_sequences,
                              .capacity = capacity,
                              .block_size = block_size};
    return d;
}

void test_assert_lse_close(const float *got, const float *want, size_t n, double tol,
                           const char *what)
{
    for (size_t i = 0; i < n; i++) {
        if (isinf(want[i]) && want[i] < 0) {
            if (!(isinf(got[i]) && got[i] < 0))
                fail_msg("%s: lse[%zu] is %g, want -inf", what, i, (double)got[i]);
            continue;
        }
        double err = fabs((double)got[i] - want[i]) / (1.0 + fabs((double)want[i]));
        if (!(err <= tol))
            fail_msg("%s: lse[%zu] is %.8g, want %.8g (error %.3g > %.3g)", what, i, (double)got[i],
                     (double)want[i], err, tol);
    }
}
