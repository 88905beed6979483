/* Compute pipelines: created lazily from embedded SPIR-V with specialization
 * constants, kept in the context, backed by a VkPipelineCache that can be
 * loaded from and saved to a file or bytes. */
#include "core/internal.h"

#include <stdlib.h>
#include <string.h>

struct vka_pipeline {
    const vka_kernel *kernel;
    uint32_t spec[VKA_MAX_SPEC];
    uint32_t spec_count;
    VkPipeline pipeline;
    VkPipelineLayout layout;        /* shared by all pipelines of the kernel */
    VkDescriptorSetLayout set_layout;
};

/* Layout objects of one kernel (every specialization shares them). */
typedef struct kernel_layout {
    const vka_kernel *kernel;
    VkDescriptorSetLayout set_layout;
    VkPipelineLayout layout;
} kernel_layout;

struct vka_pipeline_registry {
    vka_pipeline **items;
    uint32_t count, capacity;
    kernel_layout *layouts;
    uint32_t layout_count, layout_capacity;
};

/* ----------------------------------------------------------- cache data */

/* Accepts only cache data written by this very device and driver; anything
 * else is ignored (drivers should do that too, but a bad blob must never
 * reach one). */
static bool cache_data_matches(vkattn_context *ctx, const void *data, size_t size)
{
    VkPhysicalDeviceProperties p;
    ctx->vk.vkGetPhysicalDeviceProperties(ctx->physical_device, &p);
    VkPipelineCacheHeaderVersionOne h;
    if (size < sizeof h)
        return false;
    memcpy(&h, data, sizeof h);
    return h.headerSize >= sizeof h && h.headerVersion == VK_PIPELINE_CACHE_HEADER_VERSION_ONE &&
           h.vendorID == p.vendorID && h.deviceID == p.deviceID &&
           memcmp(h.pipelineCacheUUID, p.pipelineCacheUUID, VK_UUID_SIZE) == 0;
}

/* Larger files are not pipeline caches of this project's few pipelines
 * (tens of MiB at most): refused rather than read (a wrong path naming a
 * model file is not loaded whole first). */
#define PIPELINE_CACHE_MAX_BYTES ((size_t)256 << 20)

vkattn_result vka_pipelines_init(vkattn_context *ctx, const vkattn_context_desc *desc)
{
    ctx->pipelines = vka_alloc(ctx, sizeof *ctx->pipelines);
    if (!ctx->pipelines)
        return vka_fail(ctx, VKATTN_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");

    const void *initial = desc->pipeline_cache_data;
    size_t initial_size = desc->pipeline_cache_data ? desc->pipeline_cache_size : 0;
    void *from_file = NULL;
    if (!initial && desc->pipeline_cache_path) {
        /* missing (the first run): quietly empty; there but unreadable (a
         * directory, too large): a warning, as for tuning files */
        vka_file_read got = vka_read_file(ctx, desc->pipeline_cache_path, PIPELINE_CACHE_MAX_BYTES,
                                                &from_file, &initial_size);
        if (got != VKA_FILE_OK || !initial_size) {
            vka_free(ctx, from_file);
            from_file = NULL;
            initial_size = 0;
        }
        initial = from_file;
        if (got == VKA_FILE_UNREADABLE)
            vka_log(ctx, VKATTN_LOG_WARNING, "pipeline cache \"%s\" could not be read; starting empty",
                       desc->pipeline_cache_path);
        else if (!from_file)
            vka_log(ctx, VKATTN_LOG_INFO, "pipeline cache \"%s\" not read; starting empty",
                       desc->pipeline_cache_path);
    }
    if (initial && !cache_data_matches(ctx, initial, initial_size)) {
        vka_log(ctx, VKATTN_LOG_INFO,
                   "pipeline cache data (%zu bytes) is from another device or driver; ignored",
                   initial_size);
        initial = NULL;
        initial_size = 0;
    }
    VkPipelineCacheCreateInfo ci = {
        .sType = VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO,
        .initialDataSize = initial ? initial_size : 0,
        .pInitialData = initial,
    };
    VkResult vr = ctx->vk.vkCreatePipelineCache(ctx->device, &ci, ctx->vk_allocator, &ctx->pipeline_cache);
    vka_free(ctx, from_file);
    if (vr != VK_SUCCESS)
        return vka_fail_vk(ctx, vr, "vkCreatePipelineCache");
    return VKATTN_SUCCESS;
}

void vka_pipelines_destroy(vkattn_context *ctx)
{
    vka_pipeline_registry *reg = ctx->pipelines;
    if (reg) {
        for (uint32_t i = 0; i < reg->count; i++) {
            ctx->vk.vkDestroyPipeline(ctx->device, reg->items[i]->pipeline, ctx->vk_allocator);
            vka_free(ctx, reg->items[i]);
        }
        for (uint32_t i = 0; i < reg->layout_count; i++) {
            ctx->vk.vkDestroyPipelineLayout(ctx->device, reg->layouts[i].layout, ctx->vk_allocator);
            ctx->vk.vkDestroyDescriptorSetLayout(ctx->device, reg->layouts[i].set_layout,
                                                 ctx->vk_allocator);
        }
        vka_free(ctx, reg->items);
        vka_free(ctx, reg->layouts);
        vka_free(ctx, reg);
        ctx->pipelines = NULL;
    }
    if (ctx->pipeline_cache)
        ctx->vk.vkDestroyPipelineCache(ctx->device, ctx->pipeline_cache, ctx->vk_allocator);
    ctx->pipeline_cache = VK_NULL_HANDLE;
}

uint32_t vkattn_context_pipeline_count(const vkattn_context *ctx)
{
    return ctx && ctx->pipelines ? ctx->pipelines->count : 0;
}

vkattn_result vkattn_context_pipeline_cache_data(vkattn_context *ctx, void *data, size_t *size)
{
    if (!ctx)
        return VKATTN_ERROR_INVALID_ARGUMENT;
    if (!size)
        return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT,
                           "vkattn_context_pipeline_cache_data: size is NULL");
    VkResult vr = ctx->vk.vkGetPipelineCacheData(ctx->device, ctx->pipeline_cache, size, data);
    if (vr == VK_INCOMPLETE)
        return vka_fail(ctx, VKATTN_ERROR_OUT_OF_RANGE,
                           "vkattn_context_pipeline_cache_data: *size is too small for the cache");
    return vr == VK_SUCCESS ? VKATTN_SUCCESS : vka_fail_vk(ctx, vr, "vkGetPipelineCacheData");
}

vkattn_result vkattn_context_save_pipeline_cache(vkattn_context *ctx, const char *path)
{
    if (!ctx)
        return VKATTN_ERROR_INVALID_ARGUMENT;
    if (!path || !*path)
        return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT,
                           "vkattn_context_save_pipeline_cache: path is empty");
    size_t size = 0;
    vkattn_result r = vkattn_context_pipeline_cache_data(ctx, NULL, &size);
    if (r != VKATTN_SUCCESS)
        return r;
    void *data = vka_alloc(ctx, size ? size : 1);
    if (!data)
        return vka_fail(ctx, VKATTN_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
    r = vkattn_context_pipeline_cache_data(ctx, data, &size);
    if (r == VKATTN_SUCCESS && !vka_write_file(path, data, size))
        r = vka_fail(ctx, VKATTN_ERROR_IO, "cannot write pipeline cache \"%s\"", path);
    vka_free(ctx, data);
    return r;
}

/* ------------------------------------------------------------ pipelines */

static bool grow(vkattn_context *ctx, void **items, uint32_t *capacity, size_t item_size)
{
    uint32_t cap = *capacity ? *capacity * 2 : 16;
    void *bigger = vka_alloc(ctx, cap * item_size);
    if (!bigger)
        return false;
    if (*items)
        memcpy(bigger, *items, *capacity * item_size);
    vka_free(ctx, *items);
    *items = bigger;
    *capacity = cap;
    return true;
}

static vkattn_result kernel_layout_get(vkattn_context *ctx, const vka_kernel *kernel,
                                       kernel_layout **out)
{
    vka_pipeline_registry *reg = ctx->pipelines;
    for (uint32_t i = 0; i < reg->layout_count; i++)
        if (reg->layouts[i].kernel == kernel) {
            *out = &reg->layouts[i];
            return VKATTN_SUCCESS;
        }
    if (reg->layout_count == reg->layout_capacity &&
        !grow(ctx, (void **)&reg->layouts, &reg->layout_capacity, sizeof *reg->layouts))
        return vka_fail(ctx, VKATTN_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");

    VkDescriptorSetLayoutBinding b[VKA_MAX_BINDINGS];
    for (uint32_t i = 0; i < kernel->binding_count; i++)
        b[i] = (VkDescriptorSetLayoutBinding){
            .binding = i,
            .descriptorType = kernel->bindings[i] == VKA_BINDING_TEXEL
                                  ? VK_DESCRIPTOR_TYPE_UNIFORM_TEXEL_BUFFER
                                  : VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
            .descriptorCount = 1,
            .stageFlags = VK_SHADER_STAGE_COMPUTE_BIT,
        };
    kernel_layout kl = {.kernel = kernel};
    VkDescriptorSetLayoutCreateInfo dsl = {
        .sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO,
        .bindingCount = kernel->binding_count,
        .pBindings = b,
    };
    VkResult vr = ctx->vk.vkCreateDescriptorSetLayout(ctx->device, &dsl, ctx->vk_allocator, &kl.set_layout);
    if (vr != VK_SUCCESS)
        return vka_fail_vk(ctx, vr, "vkCreateDescriptorSetLayout");
    VkPushConstantRange pcr = {
        .stageFlags = VK_SHADER_STAGE_COMPUTE_BIT,
        .offset = 0,
        .size = kernel->push_size,
    };
    VkPipelineLayoutCreateInfo pl = {
        .sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO,
        .setLayoutCount = 1,
        .pSetLayouts = &kl.set_layout,
        .pushConstantRangeCount = kernel->push_size ? 1 : 0,
        .pPushConstantRanges = &pcr,
    };
    vr = ctx->vk.vkCreatePipelineLayout(ctx->device, &pl, ctx->vk_allocator, &kl.layout);
    if (vr != VK_SUCCESS) {
        ctx->vk.vkDestroyDescriptorSetLayout(ctx->device, kl.set_layout, ctx->vk_allocator);
        return vka_fail_vk(ctx, vr, "vkCreatePipelineLayout");
    }
    reg->layouts[reg->layout_count] = kl;
    *out = &reg->layouts[reg->layout_count++];
    return VKATTN_SUCCESS;
}

static vkattn_result pipeline_get_locked(vkattn_context *ctx, const vka_kernel *kernel,
                                         const uint32_t *spec, uint32_t spec_count,
                                         vka_pipeline **out)
{
    vka_pipeline_registry *reg = ctx->pipelines;
    for (uint32_t i = 0; i < reg->count; i++) {
        vka_pipeline *p = reg->items[i];
        if (p->kernel == kernel && p->spec_count == spec_count &&
            memcmp(p->spec, spec, spec_count * sizeof *spec) == 0) {
            *out = p;
            return VKATTN_SUCCESS;
        }
    }
    if (spec_count > VKA_MAX_SPEC || kernel->push_size > ctx->info.push_constant_bytes)
        return vka_fail(ctx, VKATTN_ERROR_UNSUPPORTED,
                           "kernel %s: %u specialization constants / %u push-constant bytes "
                           "exceed the limits (%u / %u)", kernel->name, spec_count,
                           kernel->push_size, VKA_MAX_SPEC, ctx->info.push_constant_bytes);
    kernel_layout *kl = NULL;
    vkattn_result r = kernel_layout_get(ctx, kernel, &kl);
    if (r != VKATTN_SUCCESS)
        return r;
    if (reg->count == reg->capacity &&
        !grow(ctx, (void **)&reg->items, &reg->capacity, sizeof *reg->items))
        return vka_fail(ctx, VKATTN_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
    vka_pipeline *p = vka_alloc(ctx, sizeof *p);
    if (!p)
        return vka_fail(ctx, VKATTN_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
    p->kernel = kernel;
    p->spec_count = spec_count;
    memcpy(p->spec, spec, spec_count * sizeof *spec);
    p->layout = kl->layout;
    p->set_layout = kl->set_layout;

    VkSpecializationMapEntry entries[VKA_MAX_SPEC];
    for (uint32_t i = 0; i < spec_count; i++)
        entries[i] = (VkSpecializationMapEntry){i, i * 4u, 4};
    VkSpecializationInfo si = {
        .mapEntryCount = spec_count,
        .pMapEntries = entries,
        .dataSize = spec_count * 4u,
        .pData = p->spec,
    };
    VkShaderModuleCreateInfo smi = {
        .sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO,
        .codeSize = kernel->spirv->size,
        .pCode = kernel->spirv->code,
    };
    VkShaderModule module;
    VkResult vr = ctx->vk.vkCreateShaderModule(ctx->device, &smi, ctx->vk_allocator, &module);
    if (vr != VK_SUCCESS) {
        vka_free(ctx, p);
        return vka_fail_vk(ctx, vr, "vkCreateShaderModule");
    }
    VkPipelineShaderStageRequiredSubgroupSizeCreateInfo required = {
        .sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_REQUIRED_SUBGROUP_SIZE_CREATE_INFO,
        .requiredSubgroupSize = ctx->info.subgroup_size,
    };
    bool pin_subgroups = kernel->full_subgroups && ctx->info.subgroup_size_control;
    VkComputePipelineCreateInfo cpi = {
        .sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO,
        .stage =
            {
                .sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO,
                .pNext = pin_subgroups ? &required : NULL,
                .flags = pin_subgroups ? VK_PIPELINE_SHADER_STAGE_CREATE_REQUIRE_FULL_SUBGROUPS_BIT : 0,
                .stage = VK_SHADER_STAGE_COMPUTE_BIT,
                .module = module,
                .pName = "main",
                .pSpecializationInfo = spec_count ? &si : NULL,
            },
        .layout = kl->layout,
    };
    vr = ctx->vk.vkCreateComputePipelines(ctx->device, ctx->pipeline_cache, 1, &cpi,
                                          ctx->vk_allocator, &p->pipeline);
    ctx->vk.vkDestroyShaderModule(ctx->device, module, ctx->vk_allocator);
    if (vr != VK_SUCCESS) {
        vka_free(ctx, p);
        return vka_fail_vk(ctx, vr, "vkCreateComputePipelines");
    }
    reg->items[reg->count++] = p;
    *out = p;
    return VKATTN_SUCCESS;
}

vkattn_result vka_pipeline_get(vkattn_context *ctx, const vka_kernel *kernel,
                                  const uint32_t *spec, uint32_t spec_count, vka_pipeline **out)
{
    vka_lock(ctx);
    vkattn_result r = pipeline_get_locked(ctx, kernel, spec, spec_count, out);
    vka_unlock(ctx);
    return r;
}

vkattn_result vka_cmd_dispatch(vkattn_context *ctx, VkCommandBuffer cmd,
                                  vka_pipeline *p, const vka_binding *bindings,
                                  const void *push, uint32_t gx, uint32_t gy, uint32_t gz)
{
    const uint32_t *max = ctx->info.max_workgroup_count;
    if (gx > max[0] || gy > max[1] || gz > max[2])
        return vka_fail(ctx, VKATTN_ERROR_OUT_OF_RANGE,
                           "kernel %s: grid %u x %u x %u exceeds the device's limit %u x %u x %u",
                           p->kernel->name, gx, gy, gz, max[0], max[1], max[2]);
    if (gx == 0 || gy == 0 || gz == 0)
        return VKATTN_SUCCESS;
    VkDescriptorSet set;
    vkattn_result r = vka_descriptor_set_get(ctx, p->set_layout, p->kernel, bindings, &set);
    if (r != VKATTN_SUCCESS)
        return r;
    ctx->vk.vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, p->pipeline);
    ctx->vk.vkCmdBindDescriptorSets(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, p->layout, 0, 1, &set, 0, NULL);
    if (p->kernel->push_size)
        ctx->vk.vkCmdPushConstants(cmd, p->layout, VK_SHADER_STAGE_COMPUTE_BIT, 0,
                                   p->kernel->push_size, push);
    ctx->vk.vkCmdDispatch(cmd, gx, gy, gz);
    return VKATTN_SUCCESS;
}

vkattn_result vka_bind_window(vkattn_context *ctx, const vkattn_buffer *buffer, uint64_t offset,
                                 uint64_t bytes, size_t element_size, vka_binding *out,
                                 uint32_t *first_element)
{
    uint64_t align = ctx->info.min_storage_buffer_offset_alignment;
    if (align < 16)
        align = 16;
    uint64_t start = vka_align_down(offset, align);
    uint64_t range = vka_align_up(offset - start + bytes, 4);
    if (range > buffer->vk_size - start)
        range = buffer->vk_size - start;
    if (range > ctx->info.max_storage_buffer_range)
        return vka_fail(ctx, VKATTN_ERROR_OUT_OF_RANGE,
                           "a binding of %llu bytes exceeds the device's maxStorageBufferRange %llu",
                           (unsigned long long)range,
                           (unsigned long long)ctx->info.max_storage_buffer_range);
    out->buffer = buffer;
    out->offset = start;
    out->range = range;
    out->format = VK_FORMAT_UNDEFINED;
    *first_element = (uint32_t)((offset - start) / element_size);
    return VKATTN_SUCCESS;
}

uint32_t vka_storage_kind(const vkattn_context *ctx, vkattn_dtype dtype)
{
    if (dtype != VKATTN_DTYPE_F16)
        return VKA_STORAGE_F32;
    return ctx->info.f16_path == VKATTN_F16_NATIVE ? VKA_STORAGE_F16 : VKA_STORAGE_F16P;
}

vkattn_result vka_bind_texel_window(vkattn_context *ctx, const vkattn_buffer *buffer,
                                       uint64_t offset, uint64_t bytes, vkattn_dtype dtype,
                                       vka_binding *out, uint32_t *first_element)
{
    size_t esize = vkattn_dtype_size(dtype);
    uint64_t texel = 4 * esize;
    uint64_t align = ctx->info.min_texel_buffer_offset_alignment;
    if (align < texel)
        align = texel;
    if (dtype == VKATTN_DTYPE_U8 || !esize)
        return vka_fail(ctx, VKATTN_ERROR_UNSUPPORTED, "no texel format for dtype %d", (int)dtype);
    if (!buffer->texel_ok)
        return vka_fail(ctx, VKATTN_ERROR_UNSUPPORTED,
                           "the buffer has no VK_BUFFER_USAGE_UNIFORM_TEXEL_BUFFER_BIT usage");
    uint64_t start = vka_align_down(offset, align);
    if ((offset - start) % texel)
        return vka_fail(ctx, VKATTN_ERROR_UNSUPPORTED,
                           "offset %llu is not on a %llu-byte texel", (unsigned long long)offset,
                           (unsigned long long)texel);
    uint64_t range = vka_align_up(offset - start + bytes, texel);
    if (range > buffer->vk_size - start)
        range = vka_align_down(buffer->vk_size - start, texel);
    if (range / texel > ctx->info.max_texel_buffer_elements)
        return vka_fail(ctx, VKATTN_ERROR_UNSUPPORTED,
                           "a texel binding of %llu texels exceeds maxTexelBufferElements %llu",
                           (unsigned long long)(range / texel),
                           (unsigned long long)ctx->info.max_texel_buffer_elements);
    out->buffer = buffer;
    out->offset = start;
    out->range = range;
    out->format = dtype == VKATTN_DTYPE_F16 ? VK_FORMAT_R16G16B16A16_SFLOAT
                                            : VK_FORMAT_R32G32B32A32_SFLOAT;
    *first_element = (uint32_t)((offset - start) / esize);
    return VKATTN_SUCCESS;
}

vkattn_result vka_bind_dummy(vkattn_context *ctx, VkFormat format, vka_binding *out)
{
    vka_lock(ctx);
    vkattn_buffer *dummy = ctx->dummy;
    vka_unlock(ctx);
    if (!dummy) {
        /* created outside the lock (failures log); the first one in wins */
        vkattn_buffer_desc d = {.size = 256};
        vkattn_result r = vkattn_buffer_create(ctx, &d, &dummy);
        if (r != VKATTN_SUCCESS)
            return r;
        vka_lock(ctx);
        vkattn_buffer *loser = NULL;
        if (ctx->dummy)
            loser = dummy;
        else
            ctx->dummy = dummy;
        dummy = ctx->dummy;
        vka_unlock(ctx);
        vkattn_buffer_destroy(loser);
    }
    out->buffer = dummy;
    out->offset = 0;
    out->range = 256;
    out->format = format;
    return VKATTN_SUCCESS;
}
