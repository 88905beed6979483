/* Physical devices: capabilities, the automatic choice, vkattn_list_devices. */
#include "core/device.h"

#include "core/coopmat.h"
#include "core/host.h"
#include "core/instance.h"
#include "core/memory.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *vkattn_device_type_name(vkattn_device_type type)
{
    switch (type) {
    case VKATTN_DEVICE_TYPE_INTEGRATED_GPU:
        return "integrated GPU";
    case VKATTN_DEVICE_TYPE_DISCRETE_GPU:
        return "discrete GPU";
    case VKATTN_DEVICE_TYPE_VIRTUAL_GPU:
        return "virtual GPU";
    case VKATTN_DEVICE_TYPE_CPU:
        return "CPU";
    default:
        return "other";
    }
}

static vkattn_device_type type_from_vk(VkPhysicalDeviceType t)
{
    switch (t) {
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU:
        return VKATTN_DEVICE_TYPE_INTEGRATED_GPU;
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU:
        return VKATTN_DEVICE_TYPE_DISCRETE_GPU;
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU:
        return VKATTN_DEVICE_TYPE_VIRTUAL_GPU;
    case VK_PHYSICAL_DEVICE_TYPE_CPU:
        return VKATTN_DEVICE_TYPE_CPU;
    default:
        return VKATTN_DEVICE_TYPE_OTHER;
    }
}

uint32_t vka_device_compute_family(const vka_vk_table *vk, VkPhysicalDevice pd, bool compute_only,
                                   uint32_t *timestamp_bits)
{
    VkQueueFamilyProperties fams[64];
    uint32_t n = 0;
    vk->vkGetPhysicalDeviceQueueFamilyProperties(pd, &n, NULL);
    if (n > 64)
        n = 64;
    vk->vkGetPhysicalDeviceQueueFamilyProperties(pd, &n, fams);
    /* Rank: compute-only when asked, then timestamps, then the lowest index. */
    uint32_t best = UINT32_MAX, best_rank = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (!(fams[i].queueFlags & VK_QUEUE_COMPUTE_BIT) || fams[i].queueCount == 0)
            continue;
        uint32_t rank = 1 + (fams[i].timestampValidBits > 0) +
                        2 * (compute_only && !(fams[i].queueFlags & VK_QUEUE_GRAPHICS_BIT));
        if (rank > best_rank) {
            best = i;
            best_rank = rank;
        }
    }
    *timestamp_bits = best == UINT32_MAX ? 0 : fams[best].timestampValidBits;
    return best;
}

bool vka_device_has_extension(const vka_vk_table *vk, VkPhysicalDevice pd, const char *name)
{
    uint32_t n = 0;
    if (vk->vkEnumerateDeviceExtensionProperties(pd, NULL, &n, NULL) != VK_SUCCESS || n == 0)
        return false;
    /* malloc: the query runs without a context's allocator too
     * (vkattn_list_devices), and the list is too big for the stack */
    VkExtensionProperties *props = malloc(n * sizeof *props);
    if (!props)
        return false;
    VkResult vr = vk->vkEnumerateDeviceExtensionProperties(pd, NULL, &n, props);
    bool found = false;
    for (uint32_t i = 0; (vr == VK_SUCCESS || vr == VK_INCOMPLETE) && i < n && !found; i++)
        found = strcmp(props[i].extensionName, name) == 0;
    free(props);
    return found;
}

void vka_device_query(const vka_vk_table *vk, VkPhysicalDevice pd, uint32_t index,
                      vkattn_device_info *info)
{
    memset(info, 0, sizeof *info);
    info->index = index;

    VkPhysicalDeviceProperties basic;
    vk->vkGetPhysicalDeviceProperties(pd, &basic);
    info->api_version = basic.apiVersion;
    snprintf(info->name, sizeof info->name, "%s", basic.deviceName);
    info->type = type_from_vk(basic.deviceType);
    info->vendor_id = basic.vendorID;
    info->device_id = basic.deviceID;
    if (basic.apiVersion < VK_API_VERSION_1_2) {
        snprintf(info->unsupported_reason, sizeof info->unsupported_reason,
                 "Vulkan %u.%u device; vkattn needs Vulkan 1.2",
                 VK_API_VERSION_MAJOR(basic.apiVersion), VK_API_VERSION_MINOR(basic.apiVersion));
        return;
    }

    bool has13 = basic.apiVersion >= VK_API_VERSION_1_3;
    VkPhysicalDeviceSubgroupSizeControlProperties ssc = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_PROPERTIES};
    VkPhysicalDeviceVulkan12Properties p12 = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_PROPERTIES,
        .pNext = has13 ? &ssc : NULL};
    VkPhysicalDeviceVulkan11Properties p11 = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_PROPERTIES, .pNext = &p12};
    VkPhysicalDeviceProperties2 props = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2,
                                         .pNext = &p11};
    vk->vkGetPhysicalDeviceProperties2(pd, &props);

    bool has_coopmat = vka_device_has_extension(vk, pd, VK_KHR_COOPERATIVE_MATRIX_EXTENSION_NAME);
    VkPhysicalDeviceCooperativeMatrixFeaturesKHR fcm = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_KHR};
    VkPhysicalDeviceVulkan13Features f13 = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_3_FEATURES,
        .pNext = has_coopmat ? &fcm : NULL};
    VkPhysicalDeviceVulkan12Features f12 = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES,
        .pNext = has13 ? &f13 : NULL};
    VkPhysicalDeviceVulkan11Features f11 = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES, .pNext = &f12};
    VkPhysicalDeviceFeatures2 feats = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2,
                                       .pNext = &f11};
    vk->vkGetPhysicalDeviceFeatures2(pd, &feats);

    const VkPhysicalDeviceLimits *l = &props.properties.limits;
    snprintf(info->driver_name, sizeof info->driver_name, "%s", p12.driverName);
    snprintf(info->driver_info, sizeof info->driver_info, "%s", p12.driverInfo);
    info->driver_id = (uint32_t)p12.driverID;
    info->driver_version = basic.driverVersion;
    info->subgroup_size = p11.subgroupSize;
    info->subgroup_size_min = has13 && ssc.minSubgroupSize ? ssc.minSubgroupSize : p11.subgroupSize;
    info->subgroup_size_max = has13 && ssc.maxSubgroupSize ? ssc.maxSubgroupSize : p11.subgroupSize;
    bool compute_subgroups = p11.subgroupSupportedStages & VK_SHADER_STAGE_COMPUTE_BIT;
    info->subgroup_shuffle =
        compute_subgroups && (p11.subgroupSupportedOperations & VK_SUBGROUP_FEATURE_SHUFFLE_BIT);
    info->subgroup_arithmetic =
        compute_subgroups && (p11.subgroupSupportedOperations & VK_SUBGROUP_FEATURE_ARITHMETIC_BIT);
    info->subgroup_size_control = has13 && f13.subgroupSizeControl && f13.computeFullSubgroups &&
                                  (ssc.requiredSubgroupSizeStages & VK_SHADER_STAGE_COMPUTE_BIT);
    info->max_shared_memory = l->maxComputeSharedMemorySize;
    info->max_workgroup_invocations = l->maxComputeWorkGroupInvocations;
    for (int i = 0; i < 3; i++) {
        info->max_workgroup_size[i] = l->maxComputeWorkGroupSize[i];
        info->max_workgroup_count[i] = l->maxComputeWorkGroupCount[i];
    }
    info->fp16_arithmetic = f12.shaderFloat16;
    info->storage_16bit = f11.storageBuffer16BitAccess;
    info->f16_path = info->storage_16bit ? VKATTN_F16_NATIVE : VKATTN_F16_PACKED;
    info->max_storage_buffer_range = l->maxStorageBufferRange;
    info->max_texel_buffer_elements = l->maxTexelBufferElements;
    info->min_storage_buffer_offset_alignment = l->minStorageBufferOffsetAlignment;
    info->min_texel_buffer_offset_alignment = l->minTexelBufferOffsetAlignment;
    info->max_allocation_size = p11.maxMemoryAllocationSize;
    info->push_constant_bytes = l->maxPushConstantsSize;
    info->timestamp_period_ns = l->timestampPeriod;

    VkPhysicalDeviceMemoryProperties mp;
    vk->vkGetPhysicalDeviceMemoryProperties(pd, &mp);
    for (uint32_t i = 0; i < mp.memoryHeapCount; i++)
        if ((mp.memoryHeaps[i].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT) &&
            mp.memoryHeaps[i].size > info->device_local_bytes)
            info->device_local_bytes = mp.memoryHeaps[i].size;
    const VkMemoryPropertyFlags unified = VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT |
                                          VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT |
                                          VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
    info->unified_memory = vka_find_memory_type(&mp, ~0u, unified, 0) != UINT32_MAX;

    /* Texel-buffer inputs need rgba32f and rgba16f uniform texel buffers. */
    VkFormatProperties f32p, f16p;
    vk->vkGetPhysicalDeviceFormatProperties(pd, VK_FORMAT_R32G32B32A32_SFLOAT, &f32p);
    vk->vkGetPhysicalDeviceFormatProperties(pd, VK_FORMAT_R16G16B16A16_SFLOAT, &f16p);
    info->texel_inputs = (f32p.bufferFeatures & VK_FORMAT_FEATURE_UNIFORM_TEXEL_BUFFER_BIT) &&
                         (f16p.bufferFeatures & VK_FORMAT_FEATURE_UNIFORM_TEXEL_BUFFER_BIT);
    /* Subgroup kernels where they measured fastest (CPU drivers: shared
     * memory is plain memory there, shuffles are register moves). */
    info->subgroup_kernels =
        info->subgroup_shuffle && info->subgroup_arithmetic && info->type == VKATTN_DEVICE_TYPE_CPU;

    vka_coopmat_query(vk, pd, has13 && has_coopmat && fcm.cooperativeMatrix, f12.vulkanMemoryModel,
                      info);
    if (vka_coopmat_offered(info) && !info->subgroup_size_control &&
        info->type != VKATTN_DEVICE_TYPE_CPU) {
        snprintf(info->coopmat_why, sizeof info->coopmat_why,
                 "the coopmat kernels need a pinned subgroup size (subgroup size control)");
        memset(&info->coopmat_shape, 0, sizeof info->coopmat_shape);
    }
    /* matrix units: GPUs only (CPU drivers emulate them slower than their
     * scalar kernels run; docs/kernels.md) */
    info->coopmat_kernels = vka_coopmat_offered(info) && info->type != VKATTN_DEVICE_TYPE_CPU;

    uint32_t ts_bits = 0;
    uint32_t family = vka_device_compute_family(vk, pd, false, &ts_bits);
    info->timestamps = family != UINT32_MAX && ts_bits > 0 && l->timestampPeriod > 0;

    if (family == UINT32_MAX)
        snprintf(info->unsupported_reason, sizeof info->unsupported_reason,
                 "no queue family with compute support");
    else if (!compute_subgroups ||
             !(p11.subgroupSupportedOperations & VK_SUBGROUP_FEATURE_BASIC_BIT))
        snprintf(info->unsupported_reason, sizeof info->unsupported_reason,
                 "no subgroup operations in compute shaders");
    else
        info->supported = true;
}

/* Automatic choice: device type first, then the capabilities that make
 * kernels faster (16-bit storage, wider subgroups), then enumeration order. */
static int type_rank(vkattn_device_type t)
{
    switch (t) {
    case VKATTN_DEVICE_TYPE_DISCRETE_GPU:
        return 4;
    case VKATTN_DEVICE_TYPE_INTEGRATED_GPU:
        return 3;
    case VKATTN_DEVICE_TYPE_VIRTUAL_GPU:
        return 2;
    case VKATTN_DEVICE_TYPE_CPU:
        return 1;
    default:
        return 0;
    }
}

static bool better(const vkattn_device_info *a, const vkattn_device_info *b)
{
    if (type_rank(a->type) != type_rank(b->type))
        return type_rank(a->type) > type_rank(b->type);
    if (a->storage_16bit != b->storage_16bit)
        return a->storage_16bit;
    return a->subgroup_size > b->subgroup_size;
}

static bool contains_nocase(const char *hay, const char *needle)
{
    size_t n = strlen(needle);
    for (; *hay; hay++) {
        size_t i = 0;
        while (i < n && hay[i] &&
               tolower((unsigned char)hay[i]) == tolower((unsigned char)needle[i]))
            i++;
        if (i == n)
            return true;
    }
    return n == 0;
}

uint32_t vka_device_choose(const vkattn_device_info *infos, uint32_t count, const char *selector,
                           char *why, size_t why_size)
{
    if (selector && *selector) {
        char *end = NULL;
        unsigned long idx = strtoul(selector, &end, 10);
        bool numeric = isdigit((unsigned char)selector[0]) && end && *end == '\0';
        for (uint32_t i = 0; i < count; i++) {
            bool match = numeric ? (idx == i) : contains_nocase(infos[i].name, selector);
            if (!match)
                continue;
            if (!infos[i].supported) {
                snprintf(why, why_size, "device %s (\"%s\") is not usable: %s", selector,
                         infos[i].name, infos[i].unsupported_reason);
                return UINT32_MAX;
            }
            return i;
        }
        if (numeric)
            snprintf(why, why_size, "device index %s does not exist: there %s %u Vulkan device%s",
                     selector, count == 1 ? "is" : "are", count, count == 1 ? "" : "s");
        else
            snprintf(why, why_size, "no Vulkan device name contains \"%s\" (%u device%s listed)",
                     selector, count, count == 1 ? "" : "s");
        return UINT32_MAX;
    }
    uint32_t best = UINT32_MAX;
    for (uint32_t i = 0; i < count; i++)
        if (infos[i].supported && (best == UINT32_MAX || better(&infos[i], &infos[best])))
            best = i;
    if (best == UINT32_MAX)
        snprintf(why, why_size, "none of the %u Vulkan device%s is usable (see `vkattn info`)",
                 count, count == 1 ? "" : "s");
    return best;
}

static vkattn_result no_device(vkattn_context *ctx)
{
    return vka_fail(ctx, VKATTN_ERROR_NO_DEVICE,
                    "no Vulkan device: the loader found no driver (install "
                    "mesa-vulkan-drivers for lavapipe, or a GPU driver)");
}

vkattn_result vka_device_enumerate(vkattn_context *ctx, VkPhysicalDevice **pds_out,
                                   vkattn_device_info **infos_out, uint32_t *count)
{
    *pds_out = NULL;
    *infos_out = NULL;
    *count = 0;
    /* A device can appear between the count and the list (VK_INCOMPLETE):
     * ask again, a few times. */
    for (int attempt = 0; attempt < 4; attempt++) {
        uint32_t n = 0;
        VkResult vr = ctx->vk.vkEnumeratePhysicalDevices(ctx->instance, &n, NULL);
        if (vr != VK_SUCCESS && vr != VK_INCOMPLETE)
            return vka_fail_vk(ctx, vr, "vkEnumeratePhysicalDevices");
        if (n == 0)
            return no_device(ctx);
        VkPhysicalDevice *pds = vka_alloc(ctx, n * sizeof *pds);
        if (!pds)
            return vka_fail(ctx, VKATTN_ERROR_OUT_OF_HOST_MEMORY,
                            "out of host memory listing devices");
        uint32_t got = n;
        vr = ctx->vk.vkEnumeratePhysicalDevices(ctx->instance, &got, pds);
        if (vr == VK_SUCCESS && got > 0 && got <= n) {
            vkattn_device_info *infos = vka_alloc(ctx, got * sizeof *infos);
            if (!infos) {
                vka_free(ctx, pds);
                return vka_fail(ctx, VKATTN_ERROR_OUT_OF_HOST_MEMORY,
                                "out of host memory listing devices");
            }
            for (uint32_t i = 0; i < got; i++)
                vka_device_query(&ctx->vk, pds[i], i, &infos[i]);
            *pds_out = pds;
            *infos_out = infos;
            *count = got;
            return VKATTN_SUCCESS;
        }
        vka_free(ctx, pds);
        if (vr == VK_SUCCESS)
            return no_device(ctx); /* the devices went away between the calls */
        if (vr != VK_INCOMPLETE)
            return vka_fail_vk(ctx, vr, "vkEnumeratePhysicalDevices");
    }
    return vka_fail(ctx, VKATTN_ERROR_VULKAN,
                    "vkEnumeratePhysicalDevices returned VK_INCOMPLETE 4 times: the list of "
                    "devices keeps changing");
}

vkattn_result vkattn_list_devices(const char *device, vkattn_device_info *infos, uint32_t capacity,
                                  uint32_t *count, uint32_t *chosen, vkattn_log_fn log,
                                  void *log_user)
{
    if (!count) {
        if (log)
            log(log_user, VKATTN_LOG_ERROR, "vkattn_list_devices: count is NULL");
        return VKATTN_ERROR_INVALID_ARGUMENT;
    }
    *count = 0;
    if (chosen)
        *chosen = UINT32_MAX;
    /* A throwaway context holds the instance, so errors and the function
     * table work exactly as in a real one. */
    vkattn_context tmp;
    memset(&tmp, 0, sizeof tmp);
    tmp.allocator = vka_default_allocator;
    tmp.log = log;
    tmp.log_user = log_user; /* no lock: the throwaway is never shared */
    vkattn_result r = vka_instance_create(&tmp, false, NULL);
    uint32_t n = 0;
    VkPhysicalDevice *pds = NULL;
    vkattn_device_info *all = NULL;
    if (r == VKATTN_SUCCESS)
        r = vka_device_enumerate(&tmp, &pds, &all, &n);
    if (r == VKATTN_SUCCESS) {
        *count = n;
        for (uint32_t i = 0; infos && i < n && i < capacity; i++)
            infos[i] = all[i];
        if (chosen) {
            char why[256];
            *chosen = vka_device_choose(all, n, device, why, sizeof why);
        }
    }
    vka_free(&tmp, pds);
    vka_free(&tmp, all);
    if (tmp.instance)
        tmp.vk.vkDestroyInstance(tmp.instance, NULL);
    return r;
}
