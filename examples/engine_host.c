/* How an engine embeds vkattn, end to end:
 *
 *   1. it creates its own VkInstance and VkDevice (validation and
 *      synchronization validation on, its own VkAllocationCallbacks, the
 *      features it wants - timeline semaphores, 16-bit storage),
 *   2. lends them to vkattn (vkattn_vulkan_borrow),
 *   3. keeps its own VkBuffers and memory and gives vkattn views of them
 *      (vkattn_buffer_wrap) - inputs written and outputs read through its own
 *      mapping, no copies,
 *   4. records an attention layer's forward pass into its own command buffer
 *      between its own barriers (the synchronization contract in vkattn.h),
 *   5. submits with its own fence and timeline semaphore and waits on both,
 *   6. checks the result against vkattn's CPU reference.
 * Exit status 0 when the result matches and no validation message was seen.
 * Run by the test suite on every Vulkan implementation. */
#include <vkattn.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK_VK(call)                                                          \
    do {                                                                        \
        VkResult vr_ = (call);                                                  \
        if (vr_ != VK_SUCCESS) {                                                \
            fprintf(stderr, "engine: %s failed (%d)\n", #call, (int)vr_);       \
            exit(1);                                                            \
        }                                                                       \
    } while (0)

/* ------------------------------------------------ the engine's allocator */

typedef struct engine_memory {
    long live, total;
} engine_memory;

/* Blocks carry their size and alignment in front (for realloc and free). */
static void *VKAPI_CALL engine_alloc(void *user, size_t size, size_t alignment, VkSystemAllocationScope scope)
{
    (void)scope;
    engine_memory *m = user;
    if (alignment < 16)
        alignment = 16;
    char *base = aligned_alloc(alignment, (alignment + size + alignment - 1) / alignment * alignment);
    if (!base)
        return NULL;
    memcpy(base + alignment - 16, &size, sizeof size);
    memcpy(base + alignment - 8, &alignment, sizeof alignment);
    m->live++;
    m->total++;
    return base + alignment;
}

static void VKAPI_CALL engine_free(void *user, void *p)
{
    engine_memory *m = user;
    if (!p)
        return;
    size_t alignment;
    memcpy(&alignment, (char *)p - 8, sizeof alignment);
    m->live--;
    free((char *)p - alignment);
}

static void *VKAPI_CALL engine_realloc(void *user, void *old, size_t size, size_t alignment,
                                       VkSystemAllocationScope scope)
{
    if (!old)
        return engine_alloc(user, size, alignment, scope);
    if (!size) {
        engine_free(user, old);
        return NULL;
    }
    size_t old_size;
    memcpy(&old_size, (char *)old - 16, sizeof old_size);
    void *p = engine_alloc(user, size, alignment, scope);
    if (p) {
        memcpy(p, old, old_size < size ? old_size : size);
        engine_free(user, old);
    }
    return p;
}

/* ------------------------------------------------- the engine's messages */

static VKAPI_ATTR VkBool32 VKAPI_CALL engine_message(VkDebugUtilsMessageSeverityFlagBitsEXT severity,
                                                     VkDebugUtilsMessageTypeFlagsEXT types,
                                                     const VkDebugUtilsMessengerCallbackDataEXT *data,
                                                     void *user)
{
    (void)types;
    if (severity & (VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT)) {
        ++*(int *)user;
        fprintf(stderr, "engine: validation: %s\n", data->pMessage);
    }
    return VK_FALSE;
}

static void vkattn_message(void *user, vkattn_log_level level, const char *message)
{
    (void)user;
    if (level >= VKATTN_LOG_WARNING)
        fprintf(stderr, "engine: vkattn: %s\n", message);
}

/* ---------------------------------------------------- the engine's buffers */

typedef struct engine_buffer {
    VkBuffer buffer;
    VkDeviceMemory memory;
    void *map;
    VkDeviceSize size;
} engine_buffer;

static engine_buffer make_buffer(VkPhysicalDevice pd, VkDevice device, const VkAllocationCallbacks *cb,
                                 VkDeviceSize size)
{
    engine_buffer b = {.size = size};
    VkBufferCreateInfo bci = {
        .sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
        .size = size,
        /* texel usage lets vkattn read it through texel views (faster on CPU drivers) */
        .usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_UNIFORM_TEXEL_BUFFER_BIT,
    };
    CHECK_VK(vkCreateBuffer(device, &bci, cb, &b.buffer));
    VkMemoryRequirements req;
    vkGetBufferMemoryRequirements(device, b.buffer, &req);
    VkPhysicalDeviceMemoryProperties mp;
    vkGetPhysicalDeviceMemoryProperties(pd, &mp);
    VkMemoryPropertyFlags want = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
    uint32_t type = UINT32_MAX;
    for (uint32_t i = 0; i < mp.memoryTypeCount && type == UINT32_MAX; i++)
        if ((req.memoryTypeBits & (1u << i)) && (mp.memoryTypes[i].propertyFlags & want) == want)
            type = i;
    if (type == UINT32_MAX) {
        fprintf(stderr, "engine: no host-visible coherent memory\n");
        exit(1);
    }
    VkMemoryAllocateInfo mai = {.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO, .allocationSize = req.size,
                                .memoryTypeIndex = type};
    CHECK_VK(vkAllocateMemory(device, &mai, cb, &b.memory));
    CHECK_VK(vkBindBufferMemory(device, b.buffer, b.memory, 0));
    CHECK_VK(vkMapMemory(device, b.memory, 0, VK_WHOLE_SIZE, 0, &b.map));
    return b;
}

static void free_buffer(VkDevice device, const VkAllocationCallbacks *cb, engine_buffer *b)
{
    vkDestroyBuffer(device, b->buffer, cb);
    vkFreeMemory(device, b->memory, cb);
}

static vkattn_buffer *lend(vkattn_context *ctx, const engine_buffer *b)
{
    vkattn_buffer_wrap_desc wd = {
        .buffer = b->buffer,
        .size = b->size,
        .usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_UNIFORM_TEXEL_BUFFER_BIT,
        .mapped = b->map,
    };
    vkattn_buffer *out = NULL;
    if (vkattn_buffer_wrap(ctx, &wd, &out) != VKATTN_SUCCESS) {
        fprintf(stderr, "engine: wrap: %s\n", vkattn_context_last_error(ctx));
        exit(1);
    }
    return out;
}

static void fill(float *a, size_t n, float amplitude, unsigned seed)
{
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        a[i] = amplitude * ((float)(seed >> 8) / (float)(1 << 24) * 2.0f - 1.0f);
    }
}

int main(void)
{
    /* ---- 1. the engine's own Vulkan objects */
    engine_memory memory = {0};
    VkAllocationCallbacks cb = {.pUserData = &memory, .pfnAllocation = engine_alloc,
                                .pfnReallocation = engine_realloc, .pfnFree = engine_free};
    int messages = 0;
    VkDebugUtilsMessengerCreateInfoEXT mci = {
        .sType = VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT,
        .messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT,
        .messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT,
        .pfnUserCallback = engine_message,
        .pUserData = &messages,
    };
    VkValidationFeatureEnableEXT enables[] = {VK_VALIDATION_FEATURE_ENABLE_SYNCHRONIZATION_VALIDATION_EXT};
    VkValidationFeaturesEXT vf = {.sType = VK_STRUCTURE_TYPE_VALIDATION_FEATURES_EXT, .pNext = &mci,
                                  .enabledValidationFeatureCount = 1, .pEnabledValidationFeatures = enables};
    const char *layers[] = {"VK_LAYER_KHRONOS_validation"};
    const char *exts[] = {VK_EXT_DEBUG_UTILS_EXTENSION_NAME, VK_EXT_VALIDATION_FEATURES_EXTENSION_NAME};
    VkApplicationInfo app = {.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO, .pApplicationName = "engine",
                             .apiVersion = VK_API_VERSION_1_3};
    VkInstanceCreateInfo ici = {.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO, .pNext = &vf,
                                .pApplicationInfo = &app, .enabledLayerCount = 1, .ppEnabledLayerNames = layers,
                                .enabledExtensionCount = 2, .ppEnabledExtensionNames = exts};
    VkInstance instance;
    CHECK_VK(vkCreateInstance(&ici, &cb, &instance));
    PFN_vkCreateDebugUtilsMessengerEXT create_messenger =
        (PFN_vkCreateDebugUtilsMessengerEXT)vkGetInstanceProcAddr(instance, "vkCreateDebugUtilsMessengerEXT");
    PFN_vkDestroyDebugUtilsMessengerEXT destroy_messenger =
        (PFN_vkDestroyDebugUtilsMessengerEXT)vkGetInstanceProcAddr(instance, "vkDestroyDebugUtilsMessengerEXT");
    VkDebugUtilsMessengerEXT messenger;
    CHECK_VK(create_messenger(instance, &mci, &cb, &messenger));

    uint32_t count = 1;
    VkPhysicalDevice pd;
    VkResult vr = vkEnumeratePhysicalDevices(instance, &count, &pd);
    if ((vr != VK_SUCCESS && vr != VK_INCOMPLETE) || count == 0) {
        fprintf(stderr, "engine: no Vulkan device\n");
        return 1;
    }
    VkQueueFamilyProperties fams[16];
    uint32_t nf = 16, family = UINT32_MAX;
    vkGetPhysicalDeviceQueueFamilyProperties(pd, &nf, fams);
    for (uint32_t i = 0; i < nf && family == UINT32_MAX; i++)
        if (fams[i].queueFlags & VK_QUEUE_COMPUTE_BIT)
            family = i;
    VkPhysicalDeviceVulkan12Features s12 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
    VkPhysicalDeviceVulkan11Features s11 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES,
                                            .pNext = &s12};
    VkPhysicalDeviceFeatures2 supported = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, .pNext = &s11};
    vkGetPhysicalDeviceFeatures2(pd, &supported);
    if (!s12.timelineSemaphore) {
        fprintf(stderr, "engine: the device has no timeline semaphores\n");
        return 1;
    }
    /* what the engine enables; vkattn is told, and uses 16-bit storage only if on */
    VkPhysicalDeviceVulkan12Features f12 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES,
                                            .timelineSemaphore = VK_TRUE};
    VkPhysicalDeviceVulkan11Features f11 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES,
                                            .pNext = &f12,
                                            .storageBuffer16BitAccess = s11.storageBuffer16BitAccess};
    VkPhysicalDeviceFeatures2 features = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, .pNext = &f11};
    float priority = 1.0f;
    VkDeviceQueueCreateInfo qci = {.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
                                   .queueFamilyIndex = family, .queueCount = 1, .pQueuePriorities = &priority};
    VkDeviceCreateInfo dci = {.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO, .pNext = &features,
                              .queueCreateInfoCount = 1, .pQueueCreateInfos = &qci};
    VkDevice device;
    CHECK_VK(vkCreateDevice(pd, &dci, &cb, &device));
    VkQueue queue;
    vkGetDeviceQueue(device, family, 0, &queue);

    /* ---- 2. vkattn borrows them */
    vkattn_vulkan_borrow borrow = {
        .instance = instance, .physical_device = pd, .device = device, .queue_family_index = family,
        .get_instance_proc_addr = vkGetInstanceProcAddr, .get_device_proc_addr = vkGetDeviceProcAddr,
        .allocation_callbacks = &cb, .enabled_features = &features,
    };
    vkattn_context_desc desc = {.borrow = &borrow, .flags = VKATTN_CONTEXT_VALIDATION, .log = vkattn_message};
    vkattn_context *ctx = NULL;
    if (vkattn_context_create(&desc, &ctx) != VKATTN_SUCCESS) {
        fprintf(stderr, "engine: vkattn_context_create failed\n");
        return 1;
    }
    printf("engine: device \"%s\", vkattn %s\n", vkattn_context_device_info(ctx)->name, vkattn_version_string());

    /* a GQA layer: 64 wide, 8 query heads over 2 KV heads */
    const uint32_t dm = 64, tokens = 12, qkv_rows = (8 + 2 * 2) * 8;
    vkattn_mha_desc ld = {.embed_dim = dm, .num_heads = 8, .num_kv_heads = 2, .bias = true};
    float *wqkv = malloc(qkv_rows * dm * 4), *wo = malloc(dm * dm * 4), *bqkv = malloc(qkv_rows * 4),
          *bo = malloc(dm * 4), *x = malloc(tokens * dm * 4), *want = malloc(tokens * dm * 4);
    fill(wqkv, qkv_rows * dm, 0.25f, 1);
    fill(wo, dm * dm, 0.25f, 2);
    fill(bqkv, qkv_rows, 0.1f, 3);
    fill(bo, dm, 0.1f, 4);
    fill(x, tokens * dm, 1.0f, 5);
    vkattn_mha_weights w = {.wqkv = wqkv, .wo = wo, .bqkv = bqkv, .bo = bo};
    vkattn_mha *layer = NULL;
    uint64_t scratch_bytes = 0;
    if (vkattn_mha_create(ctx, &ld, &layer) || vkattn_mha_set_weights(layer, &w) ||
        vkattn_mha_scratch_size(layer, 1, tokens, tokens, &scratch_bytes)) {
        fprintf(stderr, "engine: layer: %s\n", vkattn_context_last_error(ctx));
        return 1;
    }

    /* ---- 3. the engine's buffers, lent to vkattn */
    engine_buffer ex = make_buffer(pd, device, &cb, tokens * dm * 4);
    engine_buffer ey = make_buffer(pd, device, &cb, tokens * dm * 4);
    engine_buffer es = make_buffer(pd, device, &cb, (scratch_bytes + 255) / 256 * 256);
    memcpy(ex.map, x, tokens * dm * 4); /* the engine writes its input itself */
    vkattn_buffer *bx = lend(ctx, &ex), *by = lend(ctx, &ey), *bs = lend(ctx, &es);
    int64_t shape[3] = {1, tokens, dm};
    vkattn_mha_forward_args fa = {.x = vkattn_tensor_make(bx, 0, VKATTN_DTYPE_F32, 3, shape),
                                  .y = vkattn_tensor_make(by, 0, VKATTN_DTYPE_F32, 3, shape),
                                  .causal = true, .scratch = bs};

    /* ---- 4. recorded into the engine's command buffer, between its barriers */
    VkCommandPoolCreateInfo pci = {.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO, .queueFamilyIndex = family};
    VkCommandPool pool;
    CHECK_VK(vkCreateCommandPool(device, &pci, &cb, &pool));
    VkCommandBufferAllocateInfo cai = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO, .commandPool = pool,
                                       .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY, .commandBufferCount = 1};
    VkCommandBuffer cmd;
    CHECK_VK(vkAllocateCommandBuffers(device, &cai, &cmd));
    VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
                                   .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT};
    CHECK_VK(vkBeginCommandBuffer(cmd, &bi));
    /* before: the host's writes of x visible to compute-shader reads */
    VkMemoryBarrier before = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER, .srcAccessMask = VK_ACCESS_HOST_WRITE_BIT,
                              .dstAccessMask = VK_ACCESS_SHADER_READ_BIT};
    vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_HOST_BIT, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, 1, &before, 0,
                         NULL, 0, NULL);
    if (vkattn_cmd_mha_forward(layer, cmd, &fa) != VKATTN_SUCCESS) {
        fprintf(stderr, "engine: record: %s\n", vkattn_context_last_error(ctx));
        return 1;
    }
    /* after: compute-shader writes of y visible to the host */
    VkMemoryBarrier after = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER, .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT,
                             .dstAccessMask = VK_ACCESS_HOST_READ_BIT};
    vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &after, 0,
                         NULL, 0, NULL);
    CHECK_VK(vkEndCommandBuffer(cmd));

    /* ---- 5. submitted with the engine's fence and timeline semaphore */
    VkSemaphoreTypeCreateInfo sti = {.sType = VK_STRUCTURE_TYPE_SEMAPHORE_TYPE_CREATE_INFO,
                                     .semaphoreType = VK_SEMAPHORE_TYPE_TIMELINE, .initialValue = 0};
    VkSemaphoreCreateInfo sci = {.sType = VK_STRUCTURE_TYPE_SEMAPHORE_CREATE_INFO, .pNext = &sti};
    VkSemaphore timeline;
    CHECK_VK(vkCreateSemaphore(device, &sci, &cb, &timeline));
    VkFenceCreateInfo fci = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    VkFence fence;
    CHECK_VK(vkCreateFence(device, &fci, &cb, &fence));
    uint64_t signal = 1;
    VkTimelineSemaphoreSubmitInfo tsi = {.sType = VK_STRUCTURE_TYPE_TIMELINE_SEMAPHORE_SUBMIT_INFO,
                                         .signalSemaphoreValueCount = 1, .pSignalSemaphoreValues = &signal};
    VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .pNext = &tsi, .commandBufferCount = 1,
                       .pCommandBuffers = &cmd, .signalSemaphoreCount = 1, .pSignalSemaphores = &timeline};
    CHECK_VK(vkQueueSubmit(queue, 1, &si, fence));
    VkSemaphoreWaitInfo wi = {.sType = VK_STRUCTURE_TYPE_SEMAPHORE_WAIT_INFO, .semaphoreCount = 1,
                              .pSemaphores = &timeline, .pValues = &signal};
    CHECK_VK(vkWaitSemaphores(device, &wi, UINT64_MAX));
    CHECK_VK(vkWaitForFences(device, 1, &fence, VK_TRUE, UINT64_MAX));

    /* ---- 6. checked against the CPU reference */
    vkattn_ref_mha_args ra = {.x = vkattn_host_tensor_make(x, VKATTN_DTYPE_F32, 3, shape),
                              .y = vkattn_host_tensor_make(want, VKATTN_DTYPE_F32, 3, shape), .causal = true};
    char err[256];
    if (vkattn_ref_mha(&ld, &w, &ra, err, sizeof err) != VKATTN_SUCCESS) {
        fprintf(stderr, "engine: reference: %s\n", err);
        return 1;
    }
    const float *y = ey.map;
    double max_err = 0, max_ref = 0;
    int nonfinite = 0;
    for (uint32_t i = 0; i < tokens * dm; i++) {
        nonfinite += !isfinite(y[i]);
        if (fabs((double)y[i] - want[i]) > max_err)
            max_err = fabs((double)y[i] - want[i]);
        if (fabs(want[i]) > max_ref)
            max_ref = fabs(want[i]);
    }
    double rel = max_err / (max_ref > 0 ? max_ref : 1);
    uint32_t v_errors = 0, v_warnings = 0;
    vkattn_context_validation_counts(ctx, &v_errors, &v_warnings);

    /* vkattn's objects first, then the context, then the engine's own */
    vkattn_buffer_destroy(bx);
    vkattn_buffer_destroy(by);
    vkattn_buffer_destroy(bs);
    vkattn_mha_destroy(layer);
    vkattn_context_destroy(ctx);
    vkDestroyFence(device, fence, &cb);
    vkDestroySemaphore(device, timeline, &cb);
    vkDestroyCommandPool(device, pool, &cb);
    free_buffer(device, &cb, &ex);
    free_buffer(device, &cb, &ey);
    free_buffer(device, &cb, &es);
    vkDestroyDevice(device, &cb);
    destroy_messenger(instance, messenger, &cb);
    vkDestroyInstance(instance, &cb);
    free(wqkv);
    free(wo);
    free(bqkv);
    free(bo);
    free(x);
    free(want);

    bool ok = rel <= 2e-4 && !nonfinite && messages == 0 && v_errors + v_warnings == 0 && memory.live == 0 &&
              memory.total > 0;
    printf("engine: forward of %u tokens recorded into the engine's command buffer: max relative error %.2e "
           "(tolerance 2e-4), %d validation messages, %ld Vulkan host allocations (%ld left)\n",
           tokens, rel, messages + (int)(v_errors + v_warnings), memory.total, memory.live);
    printf("engine: %s\n", ok ? "ok" : "FAILED");
    return ok ? 0 : 1;
}
