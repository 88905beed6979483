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

#define CHECK_VK(call)                                                    \
    do {                                                                  \
        VkResult vr_ = (call);                                            \
        if (vr_ != VK_SUCCESS) {                                          \
            fprintf(stderr, "engine: %s failed (%d)\n", #call, (int)vr_); \
            exit(1);                                                      \
        }                                                                 \
    } while (0)

/* ------------------------------------------------ the engine's allocator */

typedef struct engine_memory {
    long live, total;
} engine_memory;

/* Blocks carry their size and alignment in front (for realloc and free). */
static void *VKAPI_CALL engine_alloc(void *user, size_t size, size_t alignment,
                                     VkSystemAllocationScope scope)
{
    (void)scope;
    engine_memory *m = user;
    if (alignment < 16)
        alignment = 16;
    char *base =
        aligned_alloc(alignment, (alignment + size + alignment - 1) / alignment * alignment);
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

static VKAPI_ATTR VkBool32 VKAPI_CALL engine_message(
    VkDebugUtilsMessageSeverityFlagBitsEXT severity, VkDebugUtilsMessageTypeFlagsEXT types,
    const VkDebugUtilsMessengerCallbackDataEXT *data, void *user)
{
    (void)types;
    if (severity & (VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT |
                    VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT)) {
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

static engine_buffer make_buffer(VkPhysicalDevice pd, VkDevice device,
                                 const VkAllocationCallbacks *cb, VkDeviceSize size)
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
    VkMemoryPropertyFlags want =
        VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
    uint32_t type = UINT32_MAX;
    for (uint32_t i = 0; i < mp.memoryTypeCount && type == UINT32_MAX; i++)
        if ((req.memoryTypeBits & (1u << i)) && (mp.memoryTypes[i].propertyFlags & want) == want)
            type = i;
    if (type == UINT32_MAX) {
        fprintf(stderr, "engine: no host-visible coherent memory\n");
        exit(1);
    }
    VkMemoryAllocateInfo mai = {.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
                                .allocationSize = req.size,
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

/* ------------------------------------------- 1. the engine's Vulkan objects */

/* What the engine owns. vkattn borrows the instance, device, allocator and
 * feature chain, so they stay put here until vkattn is gone. */
typedef struct engine {
    engine_memory memory;
    VkAllocationCallbacks cb;
    int messages; /* validation messages seen by the engine's messenger */
    VkInstance instance;
    VkDebugUtilsMessengerEXT messenger;
    PFN_vkDestroyDebugUtilsMessengerEXT destroy_messenger;
    VkPhysicalDevice pd;
    uint32_t family;
    /* what the engine enables; vkattn is told, and uses 16-bit storage only if on */
    VkPhysicalDeviceVulkan12Features f12;
    VkPhysicalDeviceVulkan11Features f11;
    VkPhysicalDeviceFeatures2 features;
    VkDevice device;
    VkQueue queue;
} engine;

/* An instance with the validation layer (synchronization validation on) and
 * the engine's messenger, through the engine's allocator. */
static void create_instance(engine *e)
{
    e->cb = (VkAllocationCallbacks){.pUserData = &e->memory,
                                    .pfnAllocation = engine_alloc,
                                    .pfnReallocation = engine_realloc,
                                    .pfnFree = engine_free};
    VkDebugUtilsMessengerCreateInfoEXT mci = {
        .sType = VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT,
        .messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT |
                           VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT,
        .messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT |
                       VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT,
        .pfnUserCallback = engine_message,
        .pUserData = &e->messages,
    };
    VkValidationFeatureEnableEXT enables[] = {
        VK_VALIDATION_FEATURE_ENABLE_SYNCHRONIZATION_VALIDATION_EXT};
    VkValidationFeaturesEXT vf = {.sType = VK_STRUCTURE_TYPE_VALIDATION_FEATURES_EXT,
                                  .pNext = &mci,
                                  .enabledValidationFeatureCount = 1,
                                  .pEnabledValidationFeatures = enables};
    const char *layers[] = {"VK_LAYER_KHRONOS_validation"};
    const char *exts[] = {VK_EXT_DEBUG_UTILS_EXTENSION_NAME,
                          VK_EXT_VALIDATION_FEATURES_EXTENSION_NAME};
    VkApplicationInfo app = {.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO,
                             .pApplicationName = "engine",
                             .apiVersion = VK_API_VERSION_1_3};
    VkInstanceCreateInfo ici = {.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO,
                                .pNext = &vf,
                                .pApplicationInfo = &app,
                                .enabledLayerCount = 1,
                                .ppEnabledLayerNames = layers,
                                .enabledExtensionCount = 2,
                                .ppEnabledExtensionNames = exts};
    CHECK_VK(vkCreateInstance(&ici, &e->cb, &e->instance));
    PFN_vkCreateDebugUtilsMessengerEXT create_messenger =
        (PFN_vkCreateDebugUtilsMessengerEXT)vkGetInstanceProcAddr(e->instance,
                                                                  "vkCreateDebugUtilsMessengerEXT");
    e->destroy_messenger = (PFN_vkDestroyDebugUtilsMessengerEXT)vkGetInstanceProcAddr(
        e->instance, "vkDestroyDebugUtilsMessengerEXT");
    CHECK_VK(create_messenger(e->instance, &mci, &e->cb, &e->messenger));
}

/* The first device, a compute queue, and the features the engine wants:
 * timeline semaphores, and 16-bit storage where the device has it. */
static void create_device(engine *e)
{
    uint32_t count = 1;
    VkResult vr = vkEnumeratePhysicalDevices(e->instance, &count, &e->pd);
    if ((vr != VK_SUCCESS && vr != VK_INCOMPLETE) || count == 0) {
        fprintf(stderr, "engine: no Vulkan device\n");
        exit(1);
    }
    VkQueueFamilyProperties fams[16];
    uint32_t nf = 16;
    e->family = UINT32_MAX;
    vkGetPhysicalDeviceQueueFamilyProperties(e->pd, &nf, fams);
    for (uint32_t i = 0; i < nf && e->family == UINT32_MAX; i++)
        if (fams[i].queueFlags & VK_QUEUE_COMPUTE_BIT)
            e->family = i;
    VkPhysicalDeviceVulkan12Features s12 = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
    VkPhysicalDeviceVulkan11Features s11 = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES, .pNext = &s12};
    VkPhysicalDeviceFeatures2 supported = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2,
                                           .pNext = &s11};
    vkGetPhysicalDeviceFeatures2(e->pd, &supported);
    if (!s12.timelineSemaphore) {
        fprintf(stderr, "engine: the device has no timeline semaphores\n");
        exit(1);
    }
    e->f12 = (VkPhysicalDeviceVulkan12Features){
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES,
        .timelineSemaphore = VK_TRUE};
    e->f11 = (VkPhysicalDeviceVulkan11Features){
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES,
        .pNext = &e->f12,
        .storageBuffer16BitAccess = s11.storageBuffer16BitAccess};
    e->features = (VkPhysicalDeviceFeatures2){.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2,
                                              .pNext = &e->f11};
    float priority = 1.0f;
    VkDeviceQueueCreateInfo qci = {.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
                                   .queueFamilyIndex = e->family,
                                   .queueCount = 1,
                                   .pQueuePriorities = &priority};
    VkDeviceCreateInfo dci = {.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO,
                              .pNext = &e->features,
                              .queueCreateInfoCount = 1,
                              .pQueueCreateInfos = &qci};
    CHECK_VK(vkCreateDevice(e->pd, &dci, &e->cb, &e->device));
    vkGetDeviceQueue(e->device, e->family, 0, &e->queue);
}

/* ----------------------------------------------------- 2. vkattn borrows them */

static vkattn_context *borrow_engine(engine *e)
{
    vkattn_vulkan_borrow borrow = {
        .instance = e->instance,
        .physical_device = e->pd,
        .device = e->device,
        .queue_family_index = e->family,
        .get_instance_proc_addr = vkGetInstanceProcAddr,
        .get_device_proc_addr = vkGetDeviceProcAddr,
        .allocation_callbacks = &e->cb,
        .enabled_features = &e->features,
    };
    vkattn_context_desc desc = {
        .borrow = &borrow, .flags = VKATTN_CONTEXT_VALIDATION, .log = vkattn_message};
    vkattn_context *ctx = NULL;
    if (vkattn_context_create(&desc, &ctx) != VKATTN_SUCCESS) {
        fprintf(stderr, "engine: vkattn_context_create failed\n");
        exit(1);
    }
    printf("engine: device \"%s\", vkattn %s\n", vkattn_context_device_info(ctx)->name,
           vkattn_version_string());
    return ctx;
}

/* The layer the engine runs: GQA, 64 wide, 8 query heads over 2 KV heads,
 * on 12 tokens; its weights and input on the host, and room for the CPU
 * reference's output. */
typedef struct example_layer {
    uint32_t dm, tokens;
    vkattn_mha_desc desc;
    float *wqkv, *wo, *bqkv, *bo, *x, *want;
} example_layer;

static vkattn_mha_weights layer_weights(const example_layer *l)
{
    return (vkattn_mha_weights){.wqkv = l->wqkv, .wo = l->wo, .bqkv = l->bqkv, .bo = l->bo};
}

/* The layer with seeded weights, and the scratch memory its forward pass
 * needs (which the engine provides, as it does all device memory here). */
static vkattn_mha *create_layer(vkattn_context *ctx, example_layer *l, uint64_t *scratch_bytes)
{
    const uint32_t dm = 64, tokens = 12, qkv_rows = (8 + 2 * 2) * 8;
    *l = (example_layer){.dm = dm, .tokens = tokens};
    l->desc = (vkattn_mha_desc){.embed_dim = dm, .num_heads = 8, .num_kv_heads = 2, .bias = true};
    l->wqkv = malloc(qkv_rows * dm * 4);
    l->wo = malloc(dm * dm * 4);
    l->bqkv = malloc(qkv_rows * 4);
    l->bo = malloc(dm * 4);
    l->x = malloc(tokens * dm * 4);
    l->want = malloc(tokens * dm * 4);
    fill(l->wqkv, qkv_rows * dm, 0.25f, 1);
    fill(l->wo, dm * dm, 0.25f, 2);
    fill(l->bqkv, qkv_rows, 0.1f, 3);
    fill(l->bo, dm, 0.1f, 4);
    fill(l->x, tokens * dm, 1.0f, 5);
    vkattn_mha_weights w = layer_weights(l);
    vkattn_mha *layer = NULL;
    if (vkattn_mha_create(ctx, &l->desc, &layer) || vkattn_mha_set_weights(layer, &w) ||
        vkattn_mha_scratch_size(layer, 1, tokens, tokens, scratch_bytes)) {
        fprintf(stderr, "engine: layer: %s\n", vkattn_context_last_error(ctx));
        exit(1);
    }
    return layer;
}

/* ------------------------------------------ 3. the engine's buffers, lent */

/* The engine's buffers for x, y and the scratch, and vkattn's views of them. */
typedef struct engine_io {
    engine_buffer x, y, scratch;
    vkattn_buffer *bx, *by, *bs;
} engine_io;

static void lend_buffers(engine *e, vkattn_context *ctx, const example_layer *l,
                         uint64_t scratch_bytes, engine_io *io)
{
    VkDeviceSize bytes = l->tokens * l->dm * 4;
    io->x = make_buffer(e->pd, e->device, &e->cb, bytes);
    io->y = make_buffer(e->pd, e->device, &e->cb, bytes);
    io->scratch = make_buffer(e->pd, e->device, &e->cb, (scratch_bytes + 255) / 256 * 256);
    memcpy(io->x.map, l->x, bytes); /* the engine writes its input itself */
    io->bx = lend(ctx, &io->x);
    io->by = lend(ctx, &io->y);
    io->bs = lend(ctx, &io->scratch);
}

/* --------- 4. recorded into the engine's command buffer, between its barriers */

static VkCommandBuffer record(engine *e, VkCommandPool *pool, vkattn_context *ctx,
                              vkattn_mha *layer, const vkattn_mha_forward_args *fa)
{
    VkCommandPoolCreateInfo pci = {.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
                                   .queueFamilyIndex = e->family};
    CHECK_VK(vkCreateCommandPool(e->device, &pci, &e->cb, pool));
    VkCommandBufferAllocateInfo cai = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
                                       .commandPool = *pool,
                                       .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
                                       .commandBufferCount = 1};
    VkCommandBuffer cmd;
    CHECK_VK(vkAllocateCommandBuffers(e->device, &cai, &cmd));
    VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
                                   .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT};
    CHECK_VK(vkBeginCommandBuffer(cmd, &bi));
    /* before: the host's writes of x visible to compute-shader reads */
    VkMemoryBarrier before = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                              .srcAccessMask = VK_ACCESS_HOST_WRITE_BIT,
                              .dstAccessMask = VK_ACCESS_SHADER_READ_BIT};
    vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_HOST_BIT, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0,
                         1, &before, 0, NULL, 0, NULL);
    if (vkattn_cmd_mha_forward(layer, cmd, fa) != VKATTN_SUCCESS) {
        fprintf(stderr, "engine: record: %s\n", vkattn_context_last_error(ctx));
        exit(1);
    }
    /* after: compute-shader writes of y visible to the host */
    VkMemoryBarrier after = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                             .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT,
                             .dstAccessMask = VK_ACCESS_HOST_READ_BIT};
    vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_PIPELINE_STAGE_HOST_BIT, 0,
                         1, &after, 0, NULL, 0, NULL);
    CHECK_VK(vkEndCommandBuffer(cmd));
    return cmd;
}

/* ------------ 5. submitted with the engine's fence and timeline semaphore */

static void submit_and_wait(engine *e, VkCommandBuffer cmd, VkSemaphore *timeline, VkFence *fence)
{
    VkSemaphoreTypeCreateInfo sti = {.sType = VK_STRUCTURE_TYPE_SEMAPHORE_TYPE_CREATE_INFO,
                                     .semaphoreType = VK_SEMAPHORE_TYPE_TIMELINE,
                                     .initialValue = 0};
    VkSemaphoreCreateInfo sci = {.sType = VK_STRUCTURE_TYPE_SEMAPHORE_CREATE_INFO, .pNext = &sti};
    CHECK_VK(vkCreateSemaphore(e->device, &sci, &e->cb, timeline));
    VkFenceCreateInfo fci = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    CHECK_VK(vkCreateFence(e->device, &fci, &e->cb, fence));
    uint64_t signal = 1;
    VkTimelineSemaphoreSubmitInfo tsi = {.sType = VK_STRUCTURE_TYPE_TIMELINE_SEMAPHORE_SUBMIT_INFO,
                                         .signalSemaphoreValueCount = 1,
                                         .pSignalSemaphoreValues = &signal};
    VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO,
                       .pNext = &tsi,
                       .commandBufferCount = 1,
                       .pCommandBuffers = &cmd,
                       .signalSemaphoreCount = 1,
                       .pSignalSemaphores = timeline};
    CHECK_VK(vkQueueSubmit(e->queue, 1, &si, *fence));
    VkSemaphoreWaitInfo wi = {.sType = VK_STRUCTURE_TYPE_SEMAPHORE_WAIT_INFO,
                              .semaphoreCount = 1,
                              .pSemaphores = timeline,
                              .pValues = &signal};
    CHECK_VK(vkWaitSemaphores(e->device, &wi, UINT64_MAX));
    CHECK_VK(vkWaitForFences(e->device, 1, fence, VK_TRUE, UINT64_MAX));
}

/* ------------------------------------ 6. checked against the CPU reference */

/* Max |y - want| / max |want| over the layer's output; *nonfinite counts the
 * values of y that are not finite. */
static double check_result(example_layer *l, const float *y, int *nonfinite)
{
    int64_t shape[3] = {1, l->tokens, l->dm};
    vkattn_ref_mha_args ra = {.x = vkattn_host_tensor_make(l->x, VKATTN_DTYPE_F32, 3, shape),
                              .y = vkattn_host_tensor_make(l->want, VKATTN_DTYPE_F32, 3, shape),
                              .causal = true};
    vkattn_mha_weights w = layer_weights(l);
    char err[256];
    if (vkattn_ref_mha(&l->desc, &w, &ra, err, sizeof err) != VKATTN_SUCCESS) {
        fprintf(stderr, "engine: reference: %s\n", err);
        exit(1);
    }
    const float *want = l->want;
    double max_err = 0, max_ref = 0;
    *nonfinite = 0;
    for (uint32_t i = 0; i < l->tokens * l->dm; i++) {
        *nonfinite += !isfinite(y[i]);
        if (fabs((double)y[i] - want[i]) > max_err)
            max_err = fabs((double)y[i] - want[i]);
        if (fabs(want[i]) > max_ref)
            max_ref = fabs(want[i]);
    }
    return max_err / (max_ref > 0 ? max_ref : 1);
}

int main(void)
{
    /* 1. the engine's own Vulkan objects */
    engine e = {0};
    create_instance(&e);
    create_device(&e);

    /* 2. vkattn borrows them; the layer is vkattn's */
    vkattn_context *ctx = borrow_engine(&e);
    example_layer l;
    uint64_t scratch_bytes = 0;
    vkattn_mha *layer = create_layer(ctx, &l, &scratch_bytes);

    /* 3. the engine's buffers, lent to vkattn */
    engine_io io;
    lend_buffers(&e, ctx, &l, scratch_bytes, &io);
    int64_t shape[3] = {1, l.tokens, l.dm};
    vkattn_mha_forward_args fa = {.x = vkattn_tensor_make(io.bx, 0, VKATTN_DTYPE_F32, 3, shape),
                                  .y = vkattn_tensor_make(io.by, 0, VKATTN_DTYPE_F32, 3, shape),
                                  .causal = true,
                                  .scratch = io.bs};

    /* 4. recorded into the engine's command buffer; 5. submitted and waited on */
    VkCommandPool pool;
    VkCommandBuffer cmd = record(&e, &pool, ctx, layer, &fa);
    VkSemaphore timeline;
    VkFence fence;
    submit_and_wait(&e, cmd, &timeline, &fence);

    /* 6. checked against the CPU reference, read through the engine's mapping */
    int nonfinite;
    double rel = check_result(&l, io.y.map, &nonfinite);
    uint32_t v_errors = 0, v_warnings = 0;
    vkattn_context_validation_counts(ctx, &v_errors, &v_warnings);

    /* vkattn's objects first, then the context, then the engine's own */
    vkattn_buffer_destroy(io.bx);
    vkattn_buffer_destroy(io.by);
    vkattn_buffer_destroy(io.bs);
    vkattn_mha_destroy(layer);
    vkattn_context_destroy(ctx);
    vkDestroyFence(e.device, fence, &e.cb);
    vkDestroySemaphore(e.device, timeline, &e.cb);
    vkDestroyCommandPool(e.device, pool, &e.cb);
    free_buffer(e.device, &e.cb, &io.x);
    free_buffer(e.device, &e.cb, &io.y);
    free_buffer(e.device, &e.cb, &io.scratch);
    vkDestroyDevice(e.device, &e.cb);
    e.destroy_messenger(e.instance, e.messenger, &e.cb);
    vkDestroyInstance(e.instance, &e.cb);
    free(l.wqkv);
    free(l.wo);
    free(l.bqkv);
    free(l.bo);
    free(l.x);
    free(l.want);

    bool ok = rel <= 2e-4 && !nonfinite && e.messages == 0 && v_errors + v_warnings == 0 &&
              e.memory.live == 0 && e.memory.total > 0;
    printf("engine: forward of %u tokens recorded into the engine's command buffer: max relative "
           "error %.2e (tolerance 2e-4), %d validation messages, %ld Vulkan host allocations (%ld "
           "left)\n",
           l.tokens, rel, e.messages + (int)(v_errors + v_warnings), e.memory.total, e.memory.live);
    printf("engine: %s\n", ok ? "ok" : "FAILED");
    return ok ? 0 : 1;
}
