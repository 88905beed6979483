/* Buffers: upload/download round trips from 1 byte to 64 MiB at odd offsets,
 * through mapped memory and through the staging path. */
#include "test_util.h"

#include <stdlib.h>

static void fill_pattern(uint8_t *p, size_t n, uint32_t seed)
{
    uint32_t x = seed * 2654435761u + 1;
    for (size_t i = 0; i < n; i++) {
        x = x * 1103515245u + 12345u;
        p[i] = (uint8_t)(x >> 16);
    }
}

/* Writes a background over the whole buffer, then `size` bytes at `offset`,
 * and checks both the range and that the bytes around it are unchanged. */
static void round_trip(vkattn_context *ctx, uint64_t size, uint64_t offset)
{
    uint64_t total = offset + size + 7;
    uint8_t *background = malloc(total), *data = malloc(size), *back = malloc(total);
    assert_non_null(background);
    assert_non_null(data);
    assert_non_null(back);
    fill_pattern(background, total, 1);
    fill_pattern(data, size, (uint32_t)size);
    vkattn_buffer *b = test_buffer_with(ctx, background, total);
    assert_int_equal(vkattn_buffer_size(b), total);
    assert_non_null(vkattn_buffer_vk(b));
    TEST_OK(ctx, vkattn_buffer_upload(b, offset, data, size));
    TEST_OK(ctx, vkattn_buffer_download(b, 0, back, total));
    if (memcmp(back, background, offset) != 0)
        fail_msg("size %llu offset %llu: bytes before the range changed", (unsigned long long)size,
                 (unsigned long long)offset);
    if (memcmp(back + offset, data, size) != 0)
        fail_msg("size %llu offset %llu: range differs", (unsigned long long)size,
                 (unsigned long long)offset);
    if (memcmp(back + offset + size, background + offset + size, 7) != 0)
        fail_msg("size %llu offset %llu: bytes after the range changed", (unsigned long long)size,
                 (unsigned long long)offset);
    /* a partial download at an odd offset */
    if (size > 2) {
        memset(back, 0, size);
        TEST_OK(ctx, vkattn_buffer_download(b, offset + 1, back, size - 2));
        assert_memory_equal(back, data + 1, size - 2);
    }
    vkattn_buffer_destroy(b);
    free(background), free(data), free(back);
}

static void sizes_and_offsets(vkattn_context *ctx)
{
    static const uint64_t sizes[] = {
        1, 2, 3, 4, 5, 15, 16, 17, 255, 4096, 65537, (1u << 20) + 3, (16u << 20) + 5, 64u << 20};
    static const uint64_t offsets[] = {0, 1, 3, 4093};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        for (size_t j = 0; j < sizeof offsets / sizeof offsets[0]; j++)
            if (sizes[i] < (8u << 20) || j < 2) /* the big ones twice only: time */
                round_trip(ctx, sizes[i], offsets[j]);
}

static void test_round_trips_mapped(void **state)
{
    (void)state;
    test_gpu *g = test_gpu_open(0);
    sizes_and_offsets(g->ctx);
    test_gpu_close(g);
}

static void test_round_trips_staged(void **state)
{
    (void)state;
    test_gpu *g = test_gpu_open(VKATTN_CONTEXT_TEST_FORCE_STAGING);
    sizes_and_offsets(g->ctx);
    test_gpu_close(g);
}

static void test_zero_length_and_bounds(void **state)
{
    test_gpu *g = *state;
    uint8_t bytes[64] = {0};
    vkattn_buffer *b = test_buffer_with(g->ctx, NULL, 64);
    TEST_OK(g->ctx, vkattn_buffer_upload(b, 64, bytes, 0)); /* empty range at the end */
    TEST_FAILS(g->ctx, VKATTN_ERROR_OUT_OF_RANGE, "offset 60 + size 5",
               vkattn_buffer_upload(b, 60, bytes, 5));
    TEST_FAILS(g->ctx, VKATTN_ERROR_OUT_OF_RANGE, "exceeds the buffer size 64",
               vkattn_buffer_download(b, 65, bytes, 0));
    TEST_FAILS(g->ctx, VKATTN_ERROR_OUT_OF_RANGE, "offset",
               vkattn_buffer_download(b, UINT64_MAX, bytes, 2)); /* no overflow */
    TEST_FAILS(g->ctx, VKATTN_ERROR_INVALID_ARGUMENT, "data is NULL",
               vkattn_buffer_upload(b, 0, NULL, 4));
    vkattn_buffer_destroy(b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trips_mapped),
        cmocka_unit_test(test_round_trips_staged),
        cmocka_unit_test(test_zero_length_and_bounds),
    };
    return cmocka_run_group_tests(tests, test_gpu_setup, test_gpu_teardown);
}
