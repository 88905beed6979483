/* Raw Vulkan helpers of vkattn-bench (see bench_vk.h). */
#include "bench_vk.h"

#include "bench_common.h"

#include <stdio.h>
#include <stdlib.h>

void bench_vk_check(VkResult r, const char *what)
{
    if (r != VK_SUCCESS) {
        fprintf(stderr, "vkattn-bench: %s failed (VkResult %d)\n", what, (int)r);
        exit(1);
    }
}

void bench_vk_load(bench_vk *vk, const vkattn_context *ctx)
{
    vkattn_vulkan_handles h;
    vkattn_context_vulkan_handles(ctx, &h);
    vk->device = h.device;
#define LOAD(name)                                                             \
    do {                                                                       \
        vk->name = (PFN_vk##name)h.get_device_proc_addr(h.device, "vk" #name); \
        if (!vk->name)                                                         \
            bench_die(NULL, "the device has no vk" #name);                     \
    } while (0)
    LOAD(CreateShaderModule);
    LOAD(DestroyShaderModule);
    LOAD(CreateDescriptorSetLayout);
    LOAD(DestroyDescriptorSetLayout);
    LOAD(CreatePipelineLayout);
    LOAD(DestroyPipelineLayout);
    LOAD(CreateComputePipelines);
    LOAD(DestroyPipeline);
    LOAD(CreateDescriptorPool);
    LOAD(DestroyDescriptorPool);
    LOAD(AllocateDescriptorSets);
    LOAD(UpdateDescriptorSets);
    LOAD(CreateBufferView);
    LOAD(DestroyBufferView);
    LOAD(CmdBindPipeline);
    LOAD(CmdBindDescriptorSets);
    LOAD(CmdPushConstants);
    LOAD(CmdDispatch);
    LOAD(CmdPipelineBarrier);
#undef LOAD
}

void bench_kernel_create(const bench_vk *vk, bench_kernel *k, const bench_spirv *spirv,
                         const VkDescriptorType *types, uint32_t n, uint32_t push_size,
                         uint32_t spec0)
{
    VkShaderModuleCreateInfo mi = {.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO,
                                   .codeSize = spirv->size,
                                   .pCode = spirv->code};
    bench_vk_check(vk->CreateShaderModule(vk->device, &mi, NULL, &k->module),
                   "vkCreateShaderModule");
    VkDescriptorSetLayoutBinding b[2];
    for (uint32_t i = 0; i < n && i < 2; i++)
        b[i] = (VkDescriptorSetLayoutBinding){.binding = i,
                                              .descriptorType = types[i],
                                              .descriptorCount = 1,
                                              .stageFlags = VK_SHADER_STAGE_COMPUTE_BIT};
    VkDescriptorSetLayoutCreateInfo si = {.sType =
                                              VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO,
                                          .bindingCount = n < 2 ? n : 2,
                                          .pBindings = b};
    bench_vk_check(vk->CreateDescriptorSetLayout(vk->device, &si, NULL, &k->set_layout),
                   "vkCreateDescriptorSetLayout");
    VkPushConstantRange pr = {VK_SHADER_STAGE_COMPUTE_BIT, 0, push_size};
    VkPipelineLayoutCreateInfo li = {.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO,
                                     .setLayoutCount = 1,
                                     .pSetLayouts = &k->set_layout,
                                     .pushConstantRangeCount = 1,
                                     .pPushConstantRanges = &pr};
    bench_vk_check(vk->CreatePipelineLayout(vk->device, &li, NULL, &k->layout),
                   "vkCreatePipelineLayout");
    VkSpecializationMapEntry entry = {0, 0, sizeof spec0};
    VkSpecializationInfo spec = {1, &entry, sizeof spec0, &spec0};
    VkComputePipelineCreateInfo ci = {
        .sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO,
        .stage = {.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO,
                  .stage = VK_SHADER_STAGE_COMPUTE_BIT,
                  .module = k->module,
                  .pName = "main",
                  .pSpecializationInfo = &spec},
        .layout = k->layout};
    bench_vk_check(
        vk->CreateComputePipelines(vk->device, VK_NULL_HANDLE, 1, &ci, NULL, &k->pipeline),
        "vkCreateComputePipelines");
}

void bench_kernel_destroy(const bench_vk *vk, bench_kernel *k)
{
    vk->DestroyPipeline(vk->device, k->pipeline, NULL);
    vk->DestroyPipelineLayout(vk->device, k->layout, NULL);
    vk->DestroyDescriptorSetLayout(vk->device, k->set_layout, NULL);
    vk->DestroyShaderModule(vk->device, k->module, NULL);
}

VkDescriptorSet bench_kernel_allocate_set(const bench_vk *vk, const bench_kernel *k,
                                          VkDescriptorPool pool)
{
    VkDescriptorSetAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO,
                                      .descriptorPool = pool,
                                      .descriptorSetCount = 1,
                                      .pSetLayouts = &k->set_layout};
    VkDescriptorSet set;
    bench_vk_check(vk->AllocateDescriptorSets(vk->device, &ai, &set), "vkAllocateDescriptorSets");
    return set;
}
