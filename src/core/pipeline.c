/* Compute pipelines: created lazily from embedded SPIR-V with specialization
 * constants and kept in the context (through its VkPipelineCache, see
 * pipeline_cache.c). */
#include "core/pipeline.h"

#include "core/host.h"

#include <stdlib.h>
#include <string.h>

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

vkattn_result vka_pipelines_init(vkattn_context *ctx)
{
    ctx->pipelines = vka_alloc(ctx, sizeof *ctx->pipelines);
    return ctx->pipelines ? VKATTN_SUCCESS
                          : vka_fail(ctx, VKATTN_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
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
}

uint32_t vkattn_context_pipeline_count(const vkattn_context *ctx)
{
    return ctx && ctx->pipelines ? ctx->pipelines->count : 0;
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
    VkResult vr =
        ctx->vk.vkCreateDescriptorSetLayout(ctx->device, &dsl, ctx->vk_allocator, &kl.set_layout);
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
            (!spec_count || memcmp(p->spec, spec, spec_count * sizeof *spec) == 0)) {
            *out = p;
            return VKATTN_SUCCESS;
        }
    }
    if (spec_count > VKA_MAX_SPEC || kernel->push_size > ctx->info.push_constant_bytes)
        return vka_fail(ctx, VKATTN_ERROR_UNSUPPORTED,
                        "kernel %s: %u specialization constants / %u push-constant bytes "
                        "exceed the limits (%u / %u)",
                        kernel->name, spec_count, kernel->push_size, VKA_MAX_SPEC,
                        ctx->info.push_constant_bytes);
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
    if (spec_count) /* (a kernel without constants may pass NULL) */
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
                .flags =
                    pin_subgroups ? VK_PIPELINE_SHADER_STAGE_CREATE_REQUIRE_FULL_SUBGROUPS_BIT : 0,
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

vkattn_result vka_pipeline_get(vkattn_context *ctx, const vka_kernel *kernel, const uint32_t *spec,
                               uint32_t spec_count, vka_pipeline **out)
{
    vka_lock(ctx);
    vkattn_result r = pipeline_get_locked(ctx, kernel, spec, spec_count, out);
    vka_unlock(ctx);
    return r;
}
