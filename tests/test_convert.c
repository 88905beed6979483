/* The convert kernel (workgroup size and work per invocation are
 * specialization constants) against the host: every dtype pair (bf16 too), odd sizes and
 * offsets (packed-f16 words shared with neighbours), recording into a command
 * buffer of our own with timestamps, and tensors larger than one binding. */
#include "test_util.h"

#include <math.h>
#include <stdlib.h>

/* Converts n elements from src (dtype s, at element offset so) to dst (dtype d,
 * element offset do_) with `scale`, then checks the result exactly and that
 * the bytes around the destination are untouched. */
static void check_convert(vkattn_context *ctx, vkattn_dtype s, vkattn_dtype d, int64_t n,
                          int64_t so, int64_t do_, float scale)
{
    size_t ss = vkattn_dtype_size(s), ds = vkattn_dtype_size(d);
    size_t src_bytes = (size_t)(so + n) * ss, dst_bytes = (size_t)(do_ + n + 3) * ds;
    uint8_t *src = malloc(src_bytes), *dst0 = malloc(dst_bytes), *dst = malloc(dst_bytes);
    assert_non_null(src);
    assert_non_null(dst0);
    assert_non_null(dst);
    test_rng rng = test_rng_seed((uint64_t)(n * 31 + so * 7 + do_));
    for (size_t i = 0; i < src_bytes / ss; i++)
        test_store(src, s, i, test_rng_uniform(&rng, -300.0f, 300.0f));
    for (size_t i = 0; i < dst_bytes; i++)
        dst0[i] = (uint8_t)(0xA5 ^ i);
    vkattn_buffer *bs = test_buffer_with(ctx, src, src_bytes),
                  *bd = test_buffer_with(ctx, dst0, dst_bytes);
    vkattn_convert_args args = {vkattn_tensor_make(bs, (uint64_t)so * ss, s, 1, &n),
                                vkattn_tensor_make(bd, (uint64_t)do_ * ds, d, 1, &n), scale};
    TEST_OK(ctx, vkattn_convert(ctx, &args));
    TEST_OK(ctx, vkattn_buffer_download(bd, 0, dst, dst_bytes));
    float sc = scale == 0.0f ? 1.0f : scale;
    for (int64_t i = 0; i < n; i++) {
        float want = test_load(src, s, (size_t)(so + i)) * sc;
        if (d == VKATTN_DTYPE_F16 || d == VKATTN_DTYPE_BF16) {
            uint16_t got = ((uint16_t *)dst)[do_ + i];
            uint16_t exp =
                d == VKATTN_DTYPE_F16 ? vkattn_f32_to_f16(want) : vkattn_f32_to_bf16(want);
            if (got != exp)
                fail_msg("%s->%s n=%lld offsets %lld/%lld: element %lld = 0x%04x, expected 0x%04x",
                         vkattn_dtype_name(s), vkattn_dtype_name(d), (long long)n, (long long)so,
                         (long long)do_, (long long)i, got, exp);
        } else {
            float got = ((float *)dst)[do_ + i];
            if (got != want)
                fail_msg("%s->%s n=%lld: element %lld = %g, expected %g", vkattn_dtype_name(s),
                         vkattn_dtype_name(d), (long long)n, (long long)i, got, want);
        }
    }
    if (memcmp(dst, dst0, (size_t)do_ * ds) != 0)
        fail_msg("bytes before the destination changed (offset %lld)", (long long)do_);
    if (memcmp(dst + (do_ + n) * ds, dst0 + (do_ + n) * ds, 3 * ds) != 0)
        fail_msg("bytes after the destination changed (n %lld, offset %lld)", (long long)n,
                 (long long)do_);
    TEST_DESTROY_BUFFERS(bs, bd);
    free(src), free(dst0), free(dst);
}

/* One dtype pair over odd sizes and offsets (the scale alternating between
 * the default and -0.375). */
static void check_sizes_offsets(test_gpu *g, vkattn_dtype s, vkattn_dtype d)
{
    const int64_t sizes[] = {1, 2, 3, 7, 64, 255, 256, 257, 511, 512, 513, 4099, 100003};
    const int64_t offsets[] = {0, 1, 3};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        for (size_t j = 0; j < 3; j++)
            check_convert(g->ctx, s, d, sizes[i], offsets[j], offsets[(j + i) % 3],
                          i % 2 ? 0.0f : -0.375f);
}

static void test_f32_copy_sizes_offsets(void **state)
{
    check_sizes_offsets(*state, VKATTN_DTYPE_F32, VKATTN_DTYPE_F32);
}

static void test_f32_to_f16_sizes_offsets(void **state)
{
    check_sizes_offsets(*state, VKATTN_DTYPE_F32, VKATTN_DTYPE_F16);
}

static void test_f16_to_f32_sizes_offsets(void **state)
{
    check_sizes_offsets(*state, VKATTN_DTYPE_F16, VKATTN_DTYPE_F32);
}

static void test_f16_copy_sizes_offsets(void **state)
{
    check_sizes_offsets(*state, VKATTN_DTYPE_F16, VKATTN_DTYPE_F16);
}

/* The same tensor as source and destination. */
/* bf16 against every other dtype, both ways, and onto itself: rounded to
 * nearest even bit for bit as vkattn_f32_to_bf16 does. */
static void test_bf16_sizes_offsets(void **state)
{
    const vkattn_dtype f32 = VKATTN_DTYPE_F32, f16 = VKATTN_DTYPE_F16, bf16 = VKATTN_DTYPE_BF16;
    check_sizes_offsets(*state, f32, bf16);
    check_sizes_offsets(*state, bf16, f32);
    check_sizes_offsets(*state, f16, bf16);
    check_sizes_offsets(*state, bf16, f16);
    check_sizes_offsets(*state, bf16, bf16);
}

static void test_in_place(void **state)
{
    test_gpu *g = *state;
    int64_t n = 1001;
    float host[1001];
    for (int i = 0; i < n; i++)
        host[i] = (float)i - 500.0f;
    vkattn_buffer *b = test_buffer_with(g->ctx, host, sizeof host);
    vkattn_tensor t = vkattn_tensor_make(b, 0, VKATTN_DTYPE_F32, 1, &n);
    vkattn_convert_args args = {t, t, 4.0f};
    TEST_OK(g->ctx, vkattn_convert(g->ctx, &args));
    float back[1001];
    TEST_OK(g->ctx, vkattn_buffer_download(b, 0, back, sizeof back));
    for (int i = 0; i < n; i++)
        assert_true(back[i] == 4.0f * host[i]);
    vkattn_buffer_destroy(b);
}

/* Record into a command buffer of our own, between our own barriers, timed. */
static void test_record_into_own_command_buffer(void **state)
{
    test_gpu *g = *state;
    vkattn_vulkan_handles h;
    vkattn_context_vulkan_handles(g->ctx, &h);
    PFN_vkGetDeviceProcAddr gdpa = h.get_device_proc_addr;
#define LOAD(name) PFN_##name name = (PFN_##name)gdpa(h.device, #name)
    LOAD(vkCreateCommandPool);
    LOAD(vkDestroyCommandPool);
    LOAD(vkAllocateCommandBuffers);
    LOAD(vkBeginCommandBuffer);
    LOAD(vkEndCommandBuffer);
    LOAD(vkQueueSubmit);
    LOAD(vkQueueWaitIdle);
    LOAD(vkCmdPipelineBarrier);
#undef LOAD
    VkCommandPoolCreateInfo pci = {.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
                                   .queueFamilyIndex = h.queue_family_index};
    VkCommandPool pool;
    assert_int_equal(vkCreateCommandPool(h.device, &pci, NULL, &pool), VK_SUCCESS);
    VkCommandBufferAllocateInfo cai = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
                                       .commandPool = pool,
                                       .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
                                       .commandBufferCount = 1};
    VkCommandBuffer cmd;
    assert_int_equal(vkAllocateCommandBuffers(h.device, &cai, &cmd), VK_SUCCESS);

    int64_t n = 65536 + 5;
    float *host = malloc(n * 4), *back = malloc(n * 4);
    test_rng rng = test_rng_seed(9);
    test_fill_uniform(&rng, host, (size_t)n, -1.0f, 1.0f);
    vkattn_buffer *a = test_buffer_with(g->ctx, host, n * 4),
                  *half = test_buffer_with(g->ctx, NULL, n * 2),
                  *c = test_buffer_with(g->ctx, NULL, n * 4);
    vkattn_convert_args down = {vkattn_tensor_make(a, 0, VKATTN_DTYPE_F32, 1, &n),
                                vkattn_tensor_make(half, 0, VKATTN_DTYPE_F16, 1, &n), 1.0f};
    vkattn_convert_args up = {down.dst, vkattn_tensor_make(c, 0, VKATTN_DTYPE_F32, 1, &n), 1.0f};
    vkattn_timer *timer = NULL;
    bool timed = vkattn_context_device_info(g->ctx)->timestamps;
    if (timed)
        TEST_OK(g->ctx, vkattn_timer_create(g->ctx, 2, &timer));

    VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
                                   .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT};
    assert_int_equal(vkBeginCommandBuffer(cmd, &bi), VK_SUCCESS);
    /* host writes (the uploads) -> compute reads: the contract's "before" */
    VkMemoryBarrier before = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                              .srcAccessMask = VK_ACCESS_HOST_WRITE_BIT,
                              .dstAccessMask = VK_ACCESS_SHADER_READ_BIT};
    vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_HOST_BIT, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0,
                         1, &before, 0, NULL, 0, NULL);
    if (timed)
        TEST_OK(g->ctx, vkattn_cmd_timer_begin(timer, cmd, 1));
    TEST_OK(g->ctx, vkattn_cmd_convert(g->ctx, cmd, &down));
    /* our barrier between two vkattn ops: compute writes -> compute reads */
    VkMemoryBarrier between = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                               .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT,
                               .dstAccessMask = VK_ACCESS_SHADER_READ_BIT};
    vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                         VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, 1, &between, 0, NULL, 0, NULL);
    TEST_OK(g->ctx, vkattn_cmd_convert(g->ctx, cmd, &up));
    if (timed)
        TEST_OK(g->ctx, vkattn_cmd_timer_end(timer, cmd, 1));
    /* the contract's "after": compute writes -> host reads */
    VkMemoryBarrier after = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                             .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT,
                             .dstAccessMask = VK_ACCESS_HOST_READ_BIT};
    vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_PIPELINE_STAGE_HOST_BIT, 0,
                         1, &after, 0, NULL, 0, NULL);
    assert_int_equal(vkEndCommandBuffer(cmd), VK_SUCCESS);
    VkSubmitInfo si = {
        .sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .commandBufferCount = 1, .pCommandBuffers = &cmd};
    assert_int_equal(vkQueueSubmit(h.queue, 1, &si, VK_NULL_HANDLE), VK_SUCCESS);
    assert_int_equal(vkQueueWaitIdle(h.queue), VK_SUCCESS);

    TEST_OK(g->ctx, vkattn_buffer_download(c, 0, back, n * 4));
    for (int64_t i = 0; i < n; i++)
        assert_true(back[i] == vkattn_f16_to_f32(vkattn_f32_to_f16(host[i])));
    if (timed) {
        double ms = -1;
        TEST_OK(g->ctx, vkattn_timer_read_ms(timer, 1, &ms));
        assert_true(ms > 0.0 && ms < 60000.0);
        /* interval 0 was never recorded */
        TEST_FAILS(g->ctx, VKATTN_ERROR_INVALID_ARGUMENT, "interval 0",
                   vkattn_timer_read_ms(timer, 0, &ms));
    }
    vkattn_timer_destroy(timer);
    vkDestroyCommandPool(h.device, pool, NULL);
    TEST_DESTROY_BUFFERS(a, half, c);
    free(host);
    free(back);
}

/* A tensor larger than maxStorageBufferRange is processed in windows. Only
 * where that range is small enough to exceed cheaply (lavapipe: 128 MiB). */
static void test_larger_than_one_binding(void **state)
{
    test_gpu *g = *state;
    uint64_t range = test_binding_range_at_most(g->ctx, 128u << 20);
    int64_t n = (int64_t)(range / 4) + (int64_t)(range / 16) + 3; /* 1.25 ranges of f32 */
    float *host = malloc(n * 4);
    uint16_t *back = malloc(n * 2);
    assert_non_null(host);
    assert_non_null(back);
    for (int64_t i = 0; i < n; i++)
        host[i] = (float)(i % 4093) - 2000.5f;
    vkattn_buffer *a = test_buffer_with(g->ctx, host, n * 4),
                  *b = test_buffer_with(g->ctx, NULL, n * 2);
    vkattn_convert_args args = {vkattn_tensor_make(a, 0, VKATTN_DTYPE_F32, 1, &n),
                                vkattn_tensor_make(b, 0, VKATTN_DTYPE_F16, 1, &n), 0.5f};
    TEST_OK(g->ctx, vkattn_convert(g->ctx, &args));
    TEST_OK(g->ctx, vkattn_buffer_download(b, 0, back, n * 2));
    for (int64_t i = 0; i < n; i++)
        if (back[i] != vkattn_f32_to_f16(host[i] * 0.5f))
            fail_msg("element %lld of %lld differs", (long long)i, (long long)n);
    TEST_DESTROY_BUFFERS(a, b);
    free(host);
    free(back);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_f32_copy_sizes_offsets),
        cmocka_unit_test(test_f32_to_f16_sizes_offsets),
        cmocka_unit_test(test_f16_to_f32_sizes_offsets),
        cmocka_unit_test(test_f16_copy_sizes_offsets),
        cmocka_unit_test(test_bf16_sizes_offsets),
        cmocka_unit_test(test_in_place),
        cmocka_unit_test(test_record_into_own_command_buffer),
        cmocka_unit_test(test_larger_than_one_binding),
    };
    return cmocka_run_group_tests(tests, test_gpu_setup, test_gpu_teardown);
}
