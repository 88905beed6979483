/* vkattn_cmd_rope from four threads at once on one fresh context, each into
 * a command buffer of its own: two pairs of threads race to create the
 * same angle table (core/const_buffers.c: the first one in wins), and every
 * result still matches the reference. Submitted afterwards from one thread
 * (the queue is externally synchronized). */
#include "test_util.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>

int test_rope_threads_run(void);

enum { THREADS = 4, B = 1, H = 4, T = 16, D = 64, N = B * H * T * D };

typedef struct device_fns {
    PFN_vkCreateCommandPool create_pool;
    PFN_vkDestroyCommandPool destroy_pool;
    PFN_vkAllocateCommandBuffers allocate;
    PFN_vkBeginCommandBuffer begin;
    PFN_vkEndCommandBuffer end;
    PFN_vkCmdPipelineBarrier barrier;
    PFN_vkQueueSubmit submit;
    PFN_vkQueueWaitIdle wait_idle;
} device_fns;

typedef struct job {
    vkattn_context *ctx;
    const device_fns *fn;
    VkCommandBuffer cmd;
    vkattn_rope_args args;
    pthread_barrier_t *start;
    vkattn_result result;
} job;

/* Records the contract's barriers around one in-place rope. */
static void *record(void *arg)
{
    job *j = arg;
    VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
                                   .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT};
    pthread_barrier_wait(j->start);
    j->fn->begin(j->cmd, &bi);
    VkMemoryBarrier before = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                              .srcAccessMask = VK_ACCESS_HOST_WRITE_BIT,
                              .dstAccessMask =
                                  VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT};
    j->fn->barrier(j->cmd, VK_PIPELINE_STAGE_HOST_BIT, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, 1,
                   &before, 0, NULL, 0, NULL);
    j->result = vkattn_cmd_rope(j->ctx, j->cmd, &j->args);
    VkMemoryBarrier after = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                             .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT,
                             .dstAccessMask = VK_ACCESS_HOST_READ_BIT};
    j->fn->barrier(j->cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_PIPELINE_STAGE_HOST_BIT, 0, 1,
                   &after, 0, NULL, 0, NULL);
    j->fn->end(j->cmd);
    return NULL;
}

static void test_four_threads_two_tables(void **state)
{
    (void)state;
    test_gpu *g = test_gpu_open(0); /* fresh: no table cached yet */
    vkattn_context *ctx = g->ctx;
    vkattn_vulkan_handles h;
    vkattn_context_vulkan_handles(ctx, &h);
    device_fns fn = {
#define LOAD(name) (PFN_##name) h.get_device_proc_addr(h.device, #name)
        LOAD(vkCreateCommandPool),  LOAD(vkDestroyCommandPool), LOAD(vkAllocateCommandBuffers),
        LOAD(vkBeginCommandBuffer), LOAD(vkEndCommandBuffer),   LOAD(vkCmdPipelineBarrier),
        LOAD(vkQueueSubmit),        LOAD(vkQueueWaitIdle),
#undef LOAD
    };
    VkCommandPool pools[THREADS];
    job jobs[THREADS];
    vkattn_buffer *bufs[THREADS];
    float *host[THREADS];
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, THREADS);
    const int64_t shape[4] = {B, H, T, D};
    test_rng rng = test_rng_seed(77);
    for (int i = 0; i < THREADS; i++) {
        VkCommandPoolCreateInfo pci = {.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
                                       .queueFamilyIndex = h.queue_family_index};
        assert_int_equal(fn.create_pool(h.device, &pci, NULL, &pools[i]), VK_SUCCESS);
        VkCommandBufferAllocateInfo cai = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
                                           .commandPool = pools[i],
                                           .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
                                           .commandBufferCount = 1};
        memset(&jobs[i], 0, sizeof jobs[i]);
        assert_int_equal(fn.allocate(h.device, &cai, &jobs[i].cmd), VK_SUCCESS);
        host[i] = test_alloc(N * sizeof(float));
        test_fill_uniform(&rng, host[i], N, -1.0f, 1.0f);
        bufs[i] = test_buffer_with(ctx, host[i], N * sizeof(float));
        jobs[i].ctx = ctx;
        jobs[i].fn = &fn;
        jobs[i].start = &start;
        jobs[i].args.x = vkattn_tensor_make(bufs[i], 0, VKATTN_DTYPE_F32, 4, shape);
        jobs[i].args.rope.theta = i < 2 ? 10000.0f : 500000.0f; /* two tables */
        jobs[i].args.rope.style = (vkattn_rope_style)(i % 2);
        jobs[i].args.position_offset = (uint32_t)(i * 100000);
    }
    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++)
        assert_int_equal(pthread_create(&t[i], NULL, record, &jobs[i]), 0);
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    pthread_barrier_destroy(&start);
    for (int i = 0; i < THREADS; i++) {
        TEST_OK(ctx, jobs[i].result);
        VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO,
                           .commandBufferCount = 1,
                           .pCommandBuffers = &jobs[i].cmd};
        assert_int_equal(fn.submit(h.queue, 1, &si, VK_NULL_HANDLE), VK_SUCCESS);
    }
    assert_int_equal(fn.wait_idle(h.queue), VK_SUCCESS);
    float got[N];
    for (int i = 0; i < THREADS; i++) {
        TEST_OK(ctx, vkattn_buffer_download(bufs[i], 0, got, sizeof got));
        vkattn_ref_rope_args r;
        memset(&r, 0, sizeof r);
        r.x = vkattn_host_tensor_make(host[i], VKATTN_DTYPE_F32, 4, shape);
        r.out = r.x;
        r.rope = jobs[i].args.rope;
        r.position_offset = jobs[i].args.position_offset;
        char err[256];
        if (vkattn_ref_rope(&r, err, sizeof err) != VKATTN_SUCCESS)
            fail_msg("reference: %s", err);
        for (size_t k = 0; k < N; k++)
            if (!(fabs(got[k] - host[i][k]) <= 1e-5 * (1.0 + fabs(host[i][k]))))
                fail_msg("thread %d: element %zu is %.8g, expected %.8g", i, k, got[k], host[i][k]);
        fn.destroy_pool(h.device, pools[i], NULL);
        vkattn_buffer_destroy(bufs[i]);
        free(host[i]);
    }
    test_gpu_close(g);
}

int test_rope_threads_run(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_four_threads_two_tables)};
    return cmocka_run_group_tests_name("rope_threads", tests, NULL, NULL);
}
