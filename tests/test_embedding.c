/* What an engine embedding vkattn relies on: tensors over its own VkBuffers,
 * its VkAllocationCallbacks, async compute, chunking a pass over frames, and
 * threads (two contexts at once; two threads recording one layer). */
#include "test_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <threads.h>

/* ------------------------------------------------------------ helpers */

static float *rnd(test_rng *r, size_t n)
{
    float *a = malloc(n * 4);
    test_fill_uniform(r, a, n, -1.0f, 1.0f);
    return a;
}

/* CPU reference of an attention call on host arrays of the given shapes. */
static void reference(const float *q, const float *k, const float *v, float *out,
                      const int64_t qs[4], const int64_t ks[4], bool causal)
{
    vkattn_ref_attention_args ra = {
        .q = vkattn_host_tensor_make((void *)q, VKATTN_DTYPE_F32, 4, qs),
        .k = vkattn_host_tensor_make((void *)k, VKATTN_DTYPE_F32, 4, ks),
        .v = vkattn_host_tensor_make((void *)v, VKATTN_DTYPE_F32, 4, ks),
        .out = vkattn_host_tensor_make(out, VKATTN_DTYPE_F32, 4, qs),
        .causal = causal,
    };
    char err[256];
    if (vkattn_ref_attention(&ra, err, sizeof err) != VKATTN_SUCCESS)
        fail_msg("reference: %s", err);
}

/* --------------------------------------------------- the host's buffers */

typedef struct host_buffer {
    VkBuffer buffer;
    VkDeviceMemory memory;
    void *map;
} host_buffer;

/* A buffer the way an engine makes one: its own usage flags, its own
 * host-visible memory, mapped. */
static host_buffer host_buffer_make(vkattn_context *ctx, VkDeviceSize size,
                                    VkBufferUsageFlags usage)
{
    vkattn_vulkan_handles h;
    vkattn_context_vulkan_handles(ctx, &h);
    PFN_vkGetDeviceProcAddr gdpa = h.get_device_proc_addr;
    PFN_vkCreateBuffer create = (PFN_vkCreateBuffer)gdpa(h.device, "vkCreateBuffer");
    PFN_vkGetBufferMemoryRequirements reqs =
        (PFN_vkGetBufferMemoryRequirements)gdpa(h.device, "vkGetBufferMemoryRequirements");
    PFN_vkAllocateMemory allocate = (PFN_vkAllocateMemory)gdpa(h.device, "vkAllocateMemory");
    PFN_vkBindBufferMemory bind = (PFN_vkBindBufferMemory)gdpa(h.device, "vkBindBufferMemory");
    PFN_vkMapMemory map = (PFN_vkMapMemory)gdpa(h.device, "vkMapMemory");
    PFN_vkGetPhysicalDeviceMemoryProperties props =
        (PFN_vkGetPhysicalDeviceMemoryProperties)h.get_instance_proc_addr(
            h.instance, "vkGetPhysicalDeviceMemoryProperties");
    host_buffer b = {0};
    VkBufferCreateInfo bci = {
        .sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO, .size = size, .usage = usage};
    assert_int_equal(create(h.device, &bci, NULL, &b.buffer), VK_SUCCESS);
    VkMemoryRequirements mr;
    reqs(h.device, b.buffer, &mr);
    VkPhysicalDeviceMemoryProperties mp;
    props(h.physical_device, &mp);
    uint32_t type = UINT32_MAX;
    VkMemoryPropertyFlags want =
        VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
    for (uint32_t i = 0; i < mp.memoryTypeCount && type == UINT32_MAX; i++)
        if ((mr.memoryTypeBits & (1u << i)) && (mp.memoryTypes[i].propertyFlags & want) == want)
            type = i;
    assert_true(type != UINT32_MAX);
    VkMemoryAllocateInfo mai = {.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
                                .allocationSize = mr.size,
                                .memoryTypeIndex = type};
    assert_int_equal(allocate(h.device, &mai, NULL, &b.memory), VK_SUCCESS);
    assert_int_equal(bind(h.device, b.buffer, b.memory, 0), VK_SUCCESS);
    assert_int_equal(map(h.device, b.memory, 0, VK_WHOLE_SIZE, 0, &b.map), VK_SUCCESS);
    return b;
}

static void host_buffer_free(vkattn_context *ctx, host_buffer *b)
{
    vkattn_vulkan_handles h;
    vkattn_context_vulkan_handles(ctx, &h);
    ((PFN_vkDestroyBuffer)h.get_device_proc_addr(h.device, "vkDestroyBuffer"))(h.device, b->buffer,
                                                                               NULL);
    ((PFN_vkFreeMemory)h.get_device_proc_addr(h.device, "vkFreeMemory"))(h.device, b->memory, NULL);
}

/* Attention in place on the host's buffer: storage usage only (no texel
 * views possible), data written and read through the host's mapping. */
static void test_tensors_on_host_buffers(void **state)
{
    test_gpu *g = *state;
    int64_t qs[4] = {1, 4, 9, 32}, ks[4] = {1, 2, 13, 32};
    size_t nq = 4 * 9 * 32, nk = 2 * 13 * 32;
    test_rng r = test_rng_seed(77);
    float *q = rnd(&r, nq), *k = rnd(&r, nk), *v = rnd(&r, nk), *want = malloc(nq * 4);
    reference(q, k, v, want, qs, ks, true);
    host_buffer hb = host_buffer_make(g->ctx, 65536, VK_BUFFER_USAGE_STORAGE_BUFFER_BIT);
    vkattn_buffer_wrap_desc wd = {.buffer = hb.buffer,
                                  .size = 65536,
                                  .usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT,
                                  .mapped = hb.map};
    vkattn_buffer *b = NULL;
    TEST_OK(g->ctx, vkattn_buffer_wrap(g->ctx, &wd, &b));
    assert_int_equal(vkattn_buffer_size(b), 65536);
    assert_ptr_equal(vkattn_buffer_vk(b), hb.buffer);
    /* the host writes q directly; vkattn uploads k and v through the mapping */
    memcpy(hb.map, q, nq * 4);
    TEST_OK(g->ctx, vkattn_buffer_upload(b, 8192, k, nk * 4));
    TEST_OK(g->ctx, vkattn_buffer_upload(b, 16384, v, nk * 4));
    vkattn_attention_args a = {.q = vkattn_tensor_make(b, 0, VKATTN_DTYPE_F32, 4, qs),
                               .k = vkattn_tensor_make(b, 8192, VKATTN_DTYPE_F32, 4, ks),
                               .v = vkattn_tensor_make(b, 16384, VKATTN_DTYPE_F32, 4, ks),
                               .out = vkattn_tensor_make(b, 32768, VKATTN_DTYPE_F32, 4, qs),
                               .causal = true};
    TEST_OK(g->ctx, vkattn_attention(g->ctx, &a));
    test_assert_close((const float *)((const char *)hb.map + 32768), want, nq, TEST_TOL_F32,
                      "attention on a host buffer");
    vkattn_buffer_destroy(b); /* forgets the buffer; the host's stays valid */
    memset(hb.map, 0, 16);

    /* without a mapping or transfer usage vkattn cannot copy: a clear error */
    wd.mapped = NULL;
    TEST_OK(g->ctx, vkattn_buffer_wrap(g->ctx, &wd, &b));
    TEST_FAILS(g->ctx, VKATTN_ERROR_UNSUPPORTED, "neither a mapped pointer",
               vkattn_buffer_upload(b, 0, q, 16));
    vkattn_buffer_destroy(b);
    wd.usage = VK_BUFFER_USAGE_UNIFORM_TEXEL_BUFFER_BIT;
    TEST_FAILS(g->ctx, VKATTN_ERROR_INVALID_ARGUMENT, "STORAGE_BUFFER",
               vkattn_buffer_wrap(g->ctx, &wd, &b));
    wd.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT;
    wd.size = 65535;
    TEST_FAILS(g->ctx, VKATTN_ERROR_INVALID_ARGUMENT, "multiple of 4",
               vkattn_buffer_wrap(g->ctx, &wd, &b));
    host_buffer_free(g->ctx, &hb);
    free(q), free(k), free(v), free(want);
}

/* ------------------------------------------- allocation callbacks, queue */

typedef struct vk_counts {
    long allocations, frees, live;
} vk_counts;

/* Blocks carry their size in a header (for realloc), `alignment` bytes before
 * the pointer handed out (alignment is a power of two, at least 16 here). */
static void *VKAPI_CALL vk_alloc(void *user, size_t size, size_t alignment,
                                 VkSystemAllocationScope scope)
{
    (void)scope;
    vk_counts *c = user;
    if (alignment < 16)
        alignment = 16;
    char *base = NULL;
    if (posix_memalign((void **)&base, alignment, alignment + (size ? size : 1)))
        return NULL;
    memcpy(base + alignment - 16, &size, sizeof size);
    memcpy(base + alignment - 8, &alignment, sizeof alignment);
    c->allocations++;
    c->live++;
    return base + alignment;
}

static void VKAPI_CALL vk_free(void *user, void *p)
{
    vk_counts *c = user;
    if (!p)
        return;
    size_t alignment;
    memcpy(&alignment, (char *)p - 8, sizeof alignment);
    c->frees++;
    c->live--;
    free((char *)p - alignment);
}

static void *VKAPI_CALL vk_realloc(void *user, void *old, size_t size, size_t alignment,
                                   VkSystemAllocationScope scope)
{
    if (!old)
        return vk_alloc(user, size, alignment, scope);
    if (!size) {
        vk_free(user, old);
        return NULL;
    }
    size_t old_size;
    memcpy(&old_size, (char *)old - 16, sizeof old_size);
    void *p = vk_alloc(user, size, alignment, scope);
    if (p) {
        memcpy(p, old, old_size < size ? old_size : size);
        vk_free(user, old);
    }
    return p;
}

/* A standalone context passes the host's callbacks to every Vulkan call. */
static void test_vulkan_allocation_callbacks(void **state)
{
    (void)state;
    vk_counts counts = {0};
    VkAllocationCallbacks cb = {.pUserData = &counts,
                                .pfnAllocation = vk_alloc,
                                .pfnReallocation = vk_realloc,
                                .pfnFree = vk_free};
    vkattn_context_desc desc = {.vulkan_allocator = &cb,
                                .device = getenv("VKATTN_DEVICE"),
                                .flags = VKATTN_CONTEXT_ASYNC_COMPUTE};
    vkattn_context *ctx = NULL;
    assert_int_equal(vkattn_context_create(&desc, &ctx), VKATTN_SUCCESS);
    int64_t n = 1000;
    float x[1000];
    for (int i = 0; i < n; i++)
        x[i] = (float)i;
    vkattn_buffer *b = test_buffer_with(ctx, x, sizeof x);
    vkattn_convert_args c = {vkattn_tensor_make(b, 0, VKATTN_DTYPE_F32, 1, &n),
                             vkattn_tensor_make(b, 0, VKATTN_DTYPE_F32, 1, &n), 3.0f};
    TEST_OK(ctx, vkattn_convert(ctx, &c));
    TEST_OK(ctx, vkattn_buffer_download(b, 0, x, sizeof x));
    assert_true(x[999] == 2997.0f);
    vkattn_buffer_destroy(b);
    vkattn_context_destroy(ctx);
    assert_true(counts.allocations > 0);
    /* what the driver allocated through us, it gave back */
    assert_int_equal(counts.live, 0);
}

/* ----------------------------------------------------------- frame budget */

/* A causal GQA call cut into three pieces, each recorded and submitted on its
 * own (as on three frames), writes what the whole call writes. */
static void test_attention_in_chunks(void **state)
{
    test_gpu *g = *state;
    const int64_t shapes[2][2] = {{17, 17}, {11, 29}}; /* Tq = Tk, and a query tail over a prefix */
    for (int s = 0; s < 2; s++) {
        int64_t tq = shapes[s][0], tk = shapes[s][1];
        int64_t qs[4] = {2, 8, tq, 16}, ks[4] = {2, 2, tk, 16};
        size_t nq = (size_t)(2 * 8 * tq * 16), nk = (size_t)(2 * 2 * tk * 16);
        test_rng r = test_rng_seed(500 + (uint64_t)s);
        float *q = rnd(&r, nq), *k = rnd(&r, nk), *v = rnd(&r, nk), *want = malloc(nq * 4),
              *got = malloc(nq * 4);
        reference(q, k, v, want, qs, ks, true);
        vkattn_buffer *bq = test_buffer_with(g->ctx, q, nq * 4),
                      *bk = test_buffer_with(g->ctx, k, nk * 4),
                      *bv = test_buffer_with(g->ctx, v, nk * 4),
                      *bo = test_buffer_with(g->ctx, NULL, nq * 4);
        vkattn_attention_args whole = {.q = vkattn_tensor_make(bq, 0, VKATTN_DTYPE_F32, 4, qs),
                                       .k = vkattn_tensor_make(bk, 0, VKATTN_DTYPE_F32, 4, ks),
                                       .v = vkattn_tensor_make(bv, 0, VKATTN_DTYPE_F32, 4, ks),
                                       .out = vkattn_tensor_make(bo, 0, VKATTN_DTYPE_F32, 4, qs),
                                       .causal = true};
        uint32_t bounds[4] = {0, 4, 9, (uint32_t)tq};
        double total = 0;
        for (int c = 0; c < 3; c++) {
            vkattn_attention_args piece;
            char err[256];
            if (vkattn_attention_chunk(&whole, bounds[c], bounds[c + 1], &piece, err, sizeof err))
                fail_msg("chunk: %s", err);
            total += vkattn_attention_flops(&whole, bounds[c], bounds[c + 1]);
            TEST_OK(g->ctx, vkattn_attention(g->ctx, &piece));
        }
        assert_true(fabs(total - vkattn_attention_flops(&whole, 0, (uint32_t)tq)) < 1);
        TEST_OK(g->ctx, vkattn_buffer_download(bo, 0, got, nq * 4));
        test_assert_close(got, want, nq, TEST_TOL_F32, "attention in three chunks");

        /* what chunks cannot do, they say */
        vkattn_attention_args piece;
        char err[256] = "";
        assert_int_equal(vkattn_attention_chunk(&whole, 5, 5, &piece, err, sizeof err),
                         VKATTN_ERROR_INVALID_ARGUMENT);
        assert_non_null(strstr(err, "[5, 5)"));
        whole.weights = whole.out;
        assert_int_equal(vkattn_attention_chunk(&whole, 0, 3, &piece, err, sizeof err),
                         VKATTN_ERROR_INVALID_ARGUMENT);
        assert_non_null(strstr(err, "weights"));
        vkattn_buffer *bufs[] = {bq, bk, bv, bo};
        for (int i = 0; i < 4; i++)
            vkattn_buffer_destroy(bufs[i]);
        free(q), free(k), free(v), free(want), free(got);
    }
}

/* --------------------------------------------------------------- threads */

typedef struct own_context_job {
    uint64_t seed;
    int failures;
    char error[256];
} own_context_job;

/* A thread with a context of its own runs attention repeatedly. */
static int own_context_thread(void *arg)
{
    own_context_job *job = arg;
    vkattn_context_desc desc = {.device = getenv("VKATTN_DEVICE"),
                                .flags = VKATTN_CONTEXT_VALIDATION};
    vkattn_context *ctx = NULL;
    if (vkattn_context_create(&desc, &ctx) != VKATTN_SUCCESS) {
        job->failures++;
        return 0;
    }
    int64_t qs[4] = {1, 4, 12, 32}, ks[4] = {1, 2, 12, 32};
    size_t nq = 4 * 12 * 32, nk = 2 * 12 * 32;
    test_rng r = test_rng_seed(job->seed);
    float *q = rnd(&r, nq), *k = rnd(&r, nk), *v = rnd(&r, nk), *want = malloc(nq * 4),
          *got = malloc(nq * 4);
    vkattn_ref_attention_args ra = {.q = vkattn_host_tensor_make(q, VKATTN_DTYPE_F32, 4, qs),
                                    .k = vkattn_host_tensor_make(k, VKATTN_DTYPE_F32, 4, ks),
                                    .v = vkattn_host_tensor_make(v, VKATTN_DTYPE_F32, 4, ks),
                                    .out = vkattn_host_tensor_make(want, VKATTN_DTYPE_F32, 4, qs),
                                    .causal = true};
    vkattn_ref_attention(&ra, NULL, 0);
    vkattn_buffer *b = NULL;
    vkattn_buffer_desc bd = {.size = 65536};
    vkattn_result res = vkattn_buffer_create(ctx, &bd, &b);
    if (!res)
        res = vkattn_buffer_upload(b, 0, q, nq * 4);
    if (!res)
        res = vkattn_buffer_upload(b, 8192, k, nk * 4);
    if (!res)
        res = vkattn_buffer_upload(b, 16384, v, nk * 4);
    vkattn_attention_args a = {.q = vkattn_tensor_make(b, 0, VKATTN_DTYPE_F32, 4, qs),
                               .k = vkattn_tensor_make(b, 8192, VKATTN_DTYPE_F32, 4, ks),
                               .v = vkattn_tensor_make(b, 16384, VKATTN_DTYPE_F32, 4, ks),
                               .out = vkattn_tensor_make(b, 32768, VKATTN_DTYPE_F32, 4, qs),
                               .causal = true};
    for (int i = 0; i < 5 && !res; i++) {
        memset(got, 0, nq * 4);
        res = vkattn_attention(ctx, &a);
        if (!res)
            res = vkattn_buffer_download(b, 32768, got, nq * 4);
        test_error e = test_compare(got, want, nq);
        if (!res && (e.nonfinite || e.max_rel > TEST_TOL_F32)) {
            snprintf(job->error, sizeof job->error, "run %d: max_rel %g", i, e.max_rel);
            job->failures++;
        }
    }
    if (res) {
        snprintf(job->error, sizeof job->error, "%s", vkattn_context_last_error(ctx));
        job->failures++;
    }
    uint32_t errors = 0, warnings = 0;
    vkattn_buffer_destroy(b);
    vkattn_context_validation_counts(ctx, &errors, &warnings);
    job->failures += (int)(errors + warnings);
    vkattn_context_destroy(ctx);
    free(q), free(k), free(v), free(want), free(got);
    return 0;
}

static void test_two_threads_two_contexts(void **state)
{
    (void)state;
    own_context_job jobs[2] = {{.seed = 1}, {.seed = 2}};
    thrd_t t[2];
    for (int i = 0; i < 2; i++)
        assert_int_equal(thrd_create(&t[i], own_context_thread, &jobs[i]), thrd_success);
    for (int i = 0; i < 2; i++)
        thrd_join(t[i], NULL);
    for (int i = 0; i < 2; i++)
        if (jobs[i].failures)
            fail_msg("thread %d: %d failures (%s)", i, jobs[i].failures, jobs[i].error);
}

typedef struct record_job {
    vkattn_context *ctx;
    vkattn_mha *layer;
    vkattn_mha_forward_args args; /* each thread: its own x, y and scratch */
    VkCommandPool pool;
    VkCommandBuffer cmd;
    vkattn_result result;
} record_job;

/* Records 10 forwards of the shared layer, with the barriers the header's
 * contract asks of the caller before, between and after them. */
static int record_thread(void *arg)
{
    record_job *job = arg;
    vkattn_vulkan_handles h;
    vkattn_context_vulkan_handles(job->ctx, &h);
    PFN_vkGetDeviceProcAddr gdpa = h.get_device_proc_addr;
    PFN_vkBeginCommandBuffer begin =
        (PFN_vkBeginCommandBuffer)gdpa(h.device, "vkBeginCommandBuffer");
    PFN_vkEndCommandBuffer end = (PFN_vkEndCommandBuffer)gdpa(h.device, "vkEndCommandBuffer");
    PFN_vkCmdPipelineBarrier barrier =
        (PFN_vkCmdPipelineBarrier)gdpa(h.device, "vkCmdPipelineBarrier");
    VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
    if (begin(job->cmd, &bi) != VK_SUCCESS) {
        job->result = VKATTN_ERROR_VULKAN;
        return 0;
    }
    VkMemoryBarrier before = {VK_STRUCTURE_TYPE_MEMORY_BARRIER, NULL, VK_ACCESS_HOST_WRITE_BIT,
                              VK_ACCESS_SHADER_READ_BIT};
    VkMemoryBarrier between = {VK_STRUCTURE_TYPE_MEMORY_BARRIER, NULL,
                               VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT,
                               VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT};
    VkMemoryBarrier after = {VK_STRUCTURE_TYPE_MEMORY_BARRIER, NULL, VK_ACCESS_SHADER_WRITE_BIT,
                             VK_ACCESS_HOST_READ_BIT};
    barrier(job->cmd, VK_PIPELINE_STAGE_HOST_BIT, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, 1,
            &before, 0, NULL, 0, NULL);
    for (int i = 0; i < 10 && job->result == VKATTN_SUCCESS; i++) {
        if (i)
            barrier(job->cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                    VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, 1, &between, 0, NULL, 0, NULL);
        job->result = vkattn_cmd_mha_forward(job->layer, job->cmd, &job->args);
    }
    barrier(job->cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_PIPELINE_STAGE_HOST_BIT, 0, 1,
            &after, 0, NULL, 0, NULL);
    end(job->cmd);
    return 0;
}

/* Two threads record forwards of one layer (one context) into their own
 * command buffers at the same time; both are then submitted and checked
 * against the CPU reference. */
static void test_two_threads_record_one_layer(void **state)
{
    test_gpu *g = *state;
    vkattn_context *ctx = g->ctx;
    vkattn_vulkan_handles h;
    vkattn_context_vulkan_handles(ctx, &h);
#define LOAD(name) PFN_##name name = (PFN_##name)h.get_device_proc_addr(h.device, #name)
    LOAD(vkCreateCommandPool);
    LOAD(vkDestroyCommandPool);
    LOAD(vkAllocateCommandBuffers);
    LOAD(vkQueueSubmit);
    LOAD(vkQueueWaitIdle);
#undef LOAD
    uint32_t dm = 64;
    vkattn_mha_desc desc = {.embed_dim = dm, .num_heads = 8, .num_kv_heads = 2, .bias = true};
    test_rng r = test_rng_seed(31);
    float *wqkv = rnd(&r, 96 * 64), *wo = rnd(&r, 64 * 64), *bqkv = rnd(&r, 96), *bo = rnd(&r, 64);
    for (int i = 0; i < 96 * 64; i++)
        wqkv[i] *= 0.2f;
    vkattn_mha_weights w = {.wqkv = wqkv, .wo = wo, .bqkv = bqkv, .bo = bo};
    vkattn_mha *layer = test_mha_create(ctx, &desc, &w);
    int64_t xs[3] = {1, 10, dm};
    size_t nx = 10 * 64;
    record_job jobs[2];
    float *x[2], *want[2];
    thrd_t t[2];
    for (int i = 0; i < 2; i++) {
        x[i] = rnd(&r, nx);
        want[i] = malloc(nx * 4);
        vkattn_ref_mha_args ra = {.x = vkattn_host_tensor_make(x[i], VKATTN_DTYPE_F32, 3, xs),
                                  .y = vkattn_host_tensor_make(want[i], VKATTN_DTYPE_F32, 3, xs),
                                  .causal = i == 0};
        assert_int_equal(vkattn_ref_mha(&desc, &w, &ra, NULL, 0), VKATTN_SUCCESS);
        uint64_t scratch = 0;
        TEST_OK(ctx, vkattn_mha_scratch_size(layer, 1, 10, 10, &scratch));
        memset(&jobs[i], 0, sizeof jobs[i]);
        jobs[i].ctx = ctx;
        jobs[i].layer = layer;
        jobs[i].args.x =
            vkattn_tensor_make(test_buffer_with(ctx, x[i], nx * 4), 0, VKATTN_DTYPE_F32, 3, xs);
        jobs[i].args.y =
            vkattn_tensor_make(test_buffer_with(ctx, NULL, nx * 4), 0, VKATTN_DTYPE_F32, 3, xs);
        jobs[i].args.scratch = test_buffer_with(ctx, NULL, scratch);
        jobs[i].args.causal = i == 0; /* different pipelines too */
        VkCommandPoolCreateInfo pci = {.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
                                       .queueFamilyIndex = h.queue_family_index};
        assert_int_equal(vkCreateCommandPool(h.device, &pci, NULL, &jobs[i].pool), VK_SUCCESS);
        VkCommandBufferAllocateInfo cai = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
                                           .commandPool = jobs[i].pool,
                                           .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
                                           .commandBufferCount = 1};
        assert_int_equal(vkAllocateCommandBuffers(h.device, &cai, &jobs[i].cmd), VK_SUCCESS);
    }
    for (int i = 0; i < 2; i++)
        assert_int_equal(thrd_create(&t[i], record_thread, &jobs[i]), thrd_success);
    for (int i = 0; i < 2; i++)
        thrd_join(t[i], NULL);
    for (int i = 0; i < 2; i++) {
        if (jobs[i].result != VKATTN_SUCCESS)
            fail_msg("thread %d: %s: %s", i, vkattn_result_name(jobs[i].result),
                     vkattn_context_last_error(ctx));
        VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO,
                           .commandBufferCount = 1,
                           .pCommandBuffers = &jobs[i].cmd};
        assert_int_equal(vkQueueSubmit(h.queue, 1, &si, VK_NULL_HANDLE), VK_SUCCESS);
        assert_int_equal(vkQueueWaitIdle(h.queue), VK_SUCCESS);
        float *got = malloc(nx * 4);
        TEST_OK(ctx, vkattn_buffer_download(jobs[i].args.y.buffer, 0, got, nx * 4));
        test_assert_close(got, want[i], nx, TEST_TOL_F32,
                          i ? "layer recorded by thread 1" : "layer recorded by thread 0");
        free(got);
    }
    for (int i = 0; i < 2; i++) {
        vkDestroyCommandPool(h.device, jobs[i].pool, NULL);
        TEST_DESTROY_BUFFERS(jobs[i].args.x.buffer, jobs[i].args.y.buffer, jobs[i].args.scratch);
        free(x[i]);
        free(want[i]);
    }
    vkattn_mha_destroy(layer);
    free(wqkv), free(wo), free(bqkv), free(bo);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tensors_on_host_buffers),
        cmocka_unit_test(test_vulkan_allocation_callbacks),
        cmocka_unit_test(test_attention_in_chunks),
        cmocka_unit_test(test_two_threads_two_contexts),
        cmocka_unit_test(test_two_threads_record_one_layer),
    };
    return cmocka_run_group_tests(tests, test_gpu_setup, test_gpu_teardown);
}
