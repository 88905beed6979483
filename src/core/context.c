/* Context lifetime: standalone (own instance and device) or borrowed from
 * the host. Creation opens the device and initialises every subsystem in
 * order; destruction takes them down in reverse. */
#include "core/buffer.h"
#include "core/const_buffers.h"
#include "core/coopmat.h"
#include "core/descriptors.h"
#include "core/device.h"
#include "core/host.h"
#include "core/instance.h"
#include "core/memory.h"
#include "core/pipeline.h"
#include "core/pipeline_cache.h"
#include "core/selftest.h"
#include "core/submit.h"
#include "core/transfer.h"
#include "core/tuning_table.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* -------------------------------------------------------------- getters */

const vkattn_device_info *vkattn_context_device_info(const vkattn_context *ctx)
{
    return ctx ? &ctx->info : NULL;
}

void vkattn_context_vulkan_handles(const vkattn_context *ctx, vkattn_vulkan_handles *out)
{
    if (!ctx || !out)
        return;
    out->instance = ctx->instance;
    out->physical_device = ctx->physical_device;
    out->device = ctx->device;
    out->queue = ctx->queue;
    out->queue_family_index = ctx->queue_family;
    out->get_instance_proc_addr = ctx->vk.vkGetInstanceProcAddr;
    out->get_device_proc_addr = ctx->vk.vkGetDeviceProcAddr;
}

void vkattn_context_validation_counts(const vkattn_context *ctx, uint32_t *errors,
                                      uint32_t *warnings)
{
    if (errors)
        *errors = ctx ? atomic_load(&ctx->validation_errors) : 0;
    if (warnings)
        *warnings = ctx ? atomic_load(&ctx->validation_warnings) : 0;
}

/* --------------------------------------------------------------- device */

/* Features the context will use, as far as the device has them (standalone)
 * or as the host enabled them (borrowed). */
typedef struct feature_set {
    bool storage_16bit;
    bool fp16;
    bool subgroup_size_control;
    bool memory_model;
    bool memory_model_device_scope;
    bool maintenance4; /* LocalSizeId: the coopmat modules are SPIR-V 1.6 */
    bool coopmat;      /* VK_KHR_cooperative_matrix's feature (so the extension too) */
} feature_set;

static void features_from_chain(const VkPhysicalDeviceFeatures2 *chain, feature_set *f)
{
    memset(f, 0, sizeof *f);
    for (const VkBaseInStructure *s = (const VkBaseInStructure *)chain; s; s = s->pNext) {
        /* (not a case: older headers' VkStructureType lacks the value) */
        if ((int)s->sType == (int)VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_KHR)
            f->coopmat |=
                ((const VkPhysicalDeviceCooperativeMatrixFeaturesKHR *)s)->cooperativeMatrix;
        switch (s->sType) {
        case VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES:
            f->storage_16bit |=
                ((const VkPhysicalDeviceVulkan11Features *)s)->storageBuffer16BitAccess;
            break;
        case VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES:
            f->storage_16bit |=
                ((const VkPhysicalDevice16BitStorageFeatures *)s)->storageBuffer16BitAccess;
            break;
        case VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES:
            f->fp16 |= ((const VkPhysicalDeviceVulkan12Features *)s)->shaderFloat16;
            f->memory_model |= ((const VkPhysicalDeviceVulkan12Features *)s)->vulkanMemoryModel;
            f->memory_model_device_scope |=
                ((const VkPhysicalDeviceVulkan12Features *)s)->vulkanMemoryModelDeviceScope;
            break;
        case VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_MEMORY_MODEL_FEATURES:
            f->memory_model |=
                ((const VkPhysicalDeviceVulkanMemoryModelFeatures *)s)->vulkanMemoryModel;
            f->memory_model_device_scope |= ((const VkPhysicalDeviceVulkanMemoryModelFeatures *)s)
                                                ->vulkanMemoryModelDeviceScope;
            break;

        case VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_FLOAT16_INT8_FEATURES:
            f->fp16 |= ((const VkPhysicalDeviceShaderFloat16Int8Features *)s)->shaderFloat16;
            break;
        case VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_3_FEATURES: {
            const VkPhysicalDeviceVulkan13Features *v = (const VkPhysicalDeviceVulkan13Features *)s;
            f->subgroup_size_control |= v->subgroupSizeControl && v->computeFullSubgroups;
            f->maintenance4 |= v->maintenance4;
            break;
        }
        case VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_4_FEATURES:
            f->maintenance4 |= ((const VkPhysicalDeviceMaintenance4Features *)s)->maintenance4;
            break;
        case VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_FEATURES: {
            const VkPhysicalDeviceSubgroupSizeControlFeatures *v =
                (const VkPhysicalDeviceSubgroupSizeControlFeatures *)s;
            f->subgroup_size_control |= v->subgroupSizeControl && v->computeFullSubgroups;
            break;
        }
        default:
            break;
        }
    }
}

/* Restricts the capability record to what is enabled, so every later choice
 * (f16 path, subgroup size control) reads one place. */
static void apply_features(vkattn_device_info *info, const feature_set *f)
{
    info->storage_16bit = info->storage_16bit && f->storage_16bit;
    info->fp16_arithmetic = info->fp16_arithmetic && f->fp16;
    info->subgroup_size_control = info->subgroup_size_control && f->subgroup_size_control;
    info->f16_path = info->storage_16bit ? VKATTN_F16_NATIVE : VKATTN_F16_PACKED;
    if (vka_coopmat_offered(info) && !(f->coopmat && f->memory_model && f->maintenance4 &&
                                       info->fp16_arithmetic && info->storage_16bit)) {
        snprintf(info->coopmat_why, sizeof info->coopmat_why, "the device was created without %s",
                 !f->coopmat              ? "VK_KHR_cooperative_matrix's cooperativeMatrix feature"
                 : !f->memory_model       ? "vulkanMemoryModel"
                 : !info->fp16_arithmetic ? "shaderFloat16"
                                          : "storageBuffer16BitAccess");
        memset(&info->coopmat_shape, 0, sizeof info->coopmat_shape);
        info->coopmat_kernels = false;
    }
}

static vkattn_result create_device(vkattn_context *ctx)
{
    const vkattn_device_info *info = &ctx->info;
    uint32_t ts_bits = 0;
    ctx->queue_family = vka_device_compute_family(
        &ctx->vk, ctx->physical_device, ctx->flags & VKATTN_CONTEXT_ASYNC_COMPUTE, &ts_bits);
    if (ctx->queue_family == UINT32_MAX)
        return vka_fail(ctx, VKATTN_ERROR_UNSUPPORTED,
                        "device \"%s\" has no queue family with compute support", info->name);
    ctx->timestamp_mask = ts_bits >= 64 ? ~0ull : (1ull << ts_bits) - 1;

    VkPhysicalDeviceVulkan13Features f13 = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_3_FEATURES};
    VkPhysicalDeviceVulkan12Features f12 = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
    VkPhysicalDeviceVulkan11Features f11 = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES, .pNext = &f12};
    VkPhysicalDeviceFeatures2 features = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2,
                                          .pNext = &f11};
    bool has13 = info->api_version >= VK_API_VERSION_1_3;
    if (has13)
        f12.pNext = &f13;
    f11.storageBuffer16BitAccess = info->storage_16bit;
    f12.shaderFloat16 = info->fp16_arithmetic;
    f13.subgroupSizeControl = info->subgroup_size_control;
    f13.computeFullSubgroups = info->subgroup_size_control;
    /* the coopmat family: the extension, its feature and the memory model */
    bool coopmat = vka_coopmat_offered(info);
    VkPhysicalDeviceCooperativeMatrixFeaturesKHR fcm = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_KHR,
        .cooperativeMatrix = VK_TRUE};
    const char *extensions[] = {VK_KHR_COOPERATIVE_MATRIX_EXTENSION_NAME};
    if (coopmat) {
        f13.pNext = &fcm;
        f13.maintenance4 = VK_TRUE; /* required in Vulkan 1.3 */
        f12.vulkanMemoryModel = VK_TRUE;
        /* where offered: the quantized caches' appends use device-scope
         * atomics, which the memory model forbids without it */
        VkPhysicalDeviceVulkan12Features offered = {
            .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
        VkPhysicalDeviceFeatures2 query = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2,
                                           .pNext = &offered};
        ctx->vk.vkGetPhysicalDeviceFeatures2(ctx->physical_device, &query);
        f12.vulkanMemoryModelDeviceScope = offered.vulkanMemoryModelDeviceScope;
    }
    feature_set enabled;
    features_from_chain(&features, &enabled);
    apply_features(&ctx->info, &enabled);
    ctx->device_scope_atomics = !enabled.memory_model || enabled.memory_model_device_scope;

    float priority = 1.0f;
    VkDeviceQueueCreateInfo queue = {
        .sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
        .queueFamilyIndex = ctx->queue_family,
        .queueCount = 1,
        .pQueuePriorities = &priority,
    };
    VkDeviceCreateInfo dci = {
        .sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO,
        .pNext = &features,
        .queueCreateInfoCount = 1,
        .pQueueCreateInfos = &queue,
        .enabledExtensionCount = coopmat ? 1u : 0u,
        .ppEnabledExtensionNames = coopmat ? extensions : NULL,
    };
    VkResult vr =
        ctx->vk.vkCreateDevice(ctx->physical_device, &dci, ctx->vk_allocator, &ctx->device);
    if (vr != VK_SUCCESS)
        return vka_fail_vk(ctx, vr, "vkCreateDevice");
    const char *missing = vka_vk_load_device(&ctx->vk, ctx->device, NULL);
    if (missing)
        return vka_fail(ctx, VKATTN_ERROR_VULKAN, "device entry point %s not found", missing);
    ctx->vk.vkGetDeviceQueue(ctx->device, ctx->queue_family, 0, &ctx->queue);
    return VKATTN_SUCCESS;
}

static vkattn_result open_standalone(vkattn_context *ctx, const vkattn_context_desc *desc)
{
    VKA_TRY(vka_instance_create(ctx, desc->flags & VKATTN_CONTEXT_VALIDATION,
                                desc->get_instance_proc_addr));
    uint32_t count = 0;
    VkPhysicalDevice *pds = NULL;
    vkattn_device_info *infos = NULL;
    VKA_TRY(vka_device_enumerate(ctx, &pds, &infos, &count));
    char why[256] = "";
    uint32_t chosen = vka_device_choose(infos, count, desc->device, why, sizeof why);
    if (chosen != UINT32_MAX) {
        ctx->physical_device = pds[chosen];
        ctx->info = infos[chosen];
    }
    vka_free(ctx, pds);
    vka_free(ctx, infos);
    if (chosen == UINT32_MAX)
        return vka_fail(ctx, desc->device ? VKATTN_ERROR_DEVICE_NOT_FOUND : VKATTN_ERROR_NO_DEVICE,
                        "%s", why);
    return create_device(ctx);
}

static vkattn_result open_borrowed(vkattn_context *ctx, const vkattn_vulkan_borrow *b)
{
    if (!b->instance || !b->physical_device || !b->device)
        return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT,
                        "desc->borrow: instance, physical_device and device must all be set "
                        "(got %p, %p, %p)",
                        (void *)b->instance, (void *)b->physical_device, (void *)b->device);
    if (!b->get_instance_proc_addr)
        return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT,
                        "desc->borrow->get_instance_proc_addr is NULL");
    ctx->borrowed = true;
    ctx->instance = b->instance;
    ctx->physical_device = b->physical_device;
    ctx->device = b->device;
    ctx->vk_allocator = b->allocation_callbacks;
    ctx->vk.vkGetInstanceProcAddr = b->get_instance_proc_addr;
    const char *missing = vka_vk_load_instance(&ctx->vk, ctx->instance);
    if (missing)
        return vka_fail(ctx, VKATTN_ERROR_VULKAN, "instance entry point %s not found", missing);
    missing = vka_vk_load_device(&ctx->vk, ctx->device, b->get_device_proc_addr);
    if (missing)
        return vka_fail(ctx, VKATTN_ERROR_VULKAN, "device entry point %s not found", missing);

    vka_device_query(&ctx->vk, ctx->physical_device, 0, &ctx->info);
    if (!ctx->info.supported)
        return vka_fail(ctx, VKATTN_ERROR_UNSUPPORTED, "borrowed device \"%s\": %s", ctx->info.name,
                        ctx->info.unsupported_reason);
    uint32_t nfam = 0;
    ctx->vk.vkGetPhysicalDeviceQueueFamilyProperties(ctx->physical_device, &nfam, NULL);
    if (b->queue_family_index >= nfam)
        return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT,
                        "desc->borrow->queue_family_index %u: the device has %u queue families",
                        b->queue_family_index, nfam);
    VkQueueFamilyProperties fams[64];
    if (nfam > 64)
        nfam = 64;
    ctx->vk.vkGetPhysicalDeviceQueueFamilyProperties(ctx->physical_device, &nfam, fams);
    const VkQueueFamilyProperties *fam = &fams[b->queue_family_index];
    if (!(fam->queueFlags & VK_QUEUE_COMPUTE_BIT))
        return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT,
                        "desc->borrow->queue_family_index %u has no compute support",
                        b->queue_family_index);
    if (b->queue_index >= fam->queueCount)
        return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT,
                        "desc->borrow->queue_index %u: family %u has %u queues", b->queue_index,
                        b->queue_family_index, fam->queueCount);
    ctx->queue_family = b->queue_family_index;
    ctx->info.timestamps = ctx->info.timestamps && fam->timestampValidBits > 0;
    ctx->timestamp_mask =
        fam->timestampValidBits >= 64 ? ~0ull : (1ull << fam->timestampValidBits) - 1;
    ctx->vk.vkGetDeviceQueue(ctx->device, ctx->queue_family, b->queue_index, &ctx->queue);

    feature_set enabled;
    features_from_chain(b->enabled_features, &enabled);
    apply_features(&ctx->info, &enabled);
    ctx->device_scope_atomics = !enabled.memory_model || enabled.memory_model_device_scope;
    return VKATTN_SUCCESS;
}

vkattn_result vkattn_context_create(const vkattn_context_desc *desc, vkattn_context **out)
{
    static const vkattn_context_desc defaults = {0};
    if (!out)
        return VKATTN_ERROR_INVALID_ARGUMENT;
    *out = NULL;
    if (!desc)
        desc = &defaults;
    const vkattn_allocator *a = desc->allocator ? desc->allocator : &vka_default_allocator;
    if (!a->allocate || !a->free) {
        if (desc->log)
            desc->log(desc->log_user, VKATTN_LOG_ERROR,
                      "desc->allocator: allocate and free must both be set");
        return VKATTN_ERROR_INVALID_ARGUMENT;
    }
    vkattn_context *ctx = a->allocate(a->user, sizeof *ctx, 16);
    if (!ctx) {
        if (desc->log) /* no context yet to keep the message */
            desc->log(desc->log_user, VKATTN_LOG_ERROR,
                      "vkattn_context_create: out of host memory (the context itself)");
        return VKATTN_ERROR_OUT_OF_HOST_MEMORY;
    }
    memset(ctx, 0, sizeof *ctx);
    ctx->allocator = *a;
    if (!vka_lock_init(ctx)) {
        a->free(a->user, ctx);
        if (desc->log)
            desc->log(desc->log_user, VKATTN_LOG_ERROR,
                      "vkattn_context_create: the context's lock could not be created");
        return VKATTN_ERROR_OUT_OF_HOST_MEMORY;
    }
    ctx->log = desc->log;
    ctx->log_user = desc->log_user;
    ctx->flags = desc->flags;
    if (!desc->borrow)
        ctx->vk_allocator = desc->vulkan_allocator;

    vkattn_result r = desc->borrow ? open_borrowed(ctx, desc->borrow) : open_standalone(ctx, desc);
    if (r == VKATTN_SUCCESS && desc->borrow && (desc->flags & VKATTN_CONTEXT_VALIDATION))
        r = vka_messenger_attach(ctx);
    if (r == VKATTN_SUCCESS && (desc->flags & VKATTN_CONTEXT_SUBGROUP_KERNELS) &&
        (desc->flags & VKATTN_CONTEXT_NO_SUBGROUP_KERNELS))
        r = vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT,
                     "desc->flags: VKATTN_CONTEXT_SUBGROUP_KERNELS and "
                     "VKATTN_CONTEXT_NO_SUBGROUP_KERNELS contradict each other");
    if (r == VKATTN_SUCCESS)
        r = vka_memory_choose(ctx);
    if (r == VKATTN_SUCCESS)
        r = vka_submit_init(ctx);
    if (r == VKATTN_SUCCESS) /* before the pipeline cache, which may hold its result */
        r = vka_self_test_create(ctx);
    if (r == VKATTN_SUCCESS)
        r = vka_pipeline_cache_init(ctx, desc);
    if (r == VKATTN_SUCCESS)
        r = vka_pipelines_init(ctx);
    if (r == VKATTN_SUCCESS)
        r = vka_descriptors_init(ctx);
    if (r == VKATTN_SUCCESS)
        r = vka_tuning_init(ctx, desc);
    if (r == VKATTN_SUCCESS) /* last: it dispatches, and decides the kernels */
        r = vka_self_test_start(ctx);
    if (r != VKATTN_SUCCESS) {
        vkattn_context_destroy(ctx);
        return r;
    }
    vka_log(ctx, VKATTN_LOG_INFO,
            "vkattn %s on \"%s\" (%s, subgroup %u, f16 %s, %s inputs, %s kernels)",
            vkattn_version_string(), ctx->info.name, vkattn_device_type_name(ctx->info.type),
            ctx->info.subgroup_size,
            ctx->info.f16_path == VKATTN_F16_NATIVE ? "16-bit storage" : "packed in 32-bit",
            ctx->info.texel_inputs ? "texel-buffer" : "storage-buffer",
            ctx->info.subgroup_kernels ? "subgroup" : "shared-memory");
    *out = ctx;
    return VKATTN_SUCCESS;
}

void vkattn_context_destroy(vkattn_context *ctx)
{
    if (!ctx)
        return;
    if (ctx->device) {
        /* Only our own submissions are waited for: a borrowed queue may be
         * busy with the host's work, which is none of our business. */
        if (ctx->fence && ctx->recording)
            ctx->vk.vkEndCommandBuffer(ctx->command_buffer);
        vkattn_buffer_destroy(ctx->dummy);
        vka_const_buffers_destroy(ctx);
        vka_tuning_destroy(ctx);
        vka_self_test_destroy(ctx);
        vka_descriptors_destroy(ctx);
        vka_pipelines_destroy(ctx);
        vka_pipeline_cache_destroy(ctx);
        vka_staging_destroy(ctx);
        vka_submit_destroy(ctx);
        if (!ctx->borrowed)
            ctx->vk.vkDestroyDevice(ctx->device, ctx->vk_allocator);
    }
    if (ctx->messenger)
        ctx->vk.vkDestroyDebugUtilsMessengerEXT(ctx->instance, ctx->messenger, ctx->vk_allocator);
    if (ctx->instance && !ctx->borrowed)
        ctx->vk.vkDestroyInstance(ctx->instance, ctx->vk_allocator);
    vka_lock_destroy(ctx);
    vkattn_allocator a = ctx->allocator;
    a.free(a.user, ctx);
}
