/* Raw Vulkan for vkattn-bench's own kernels: a per-device function table
 * loaded through the context's handles (vkattn_context_vulkan_handles) and
 * compute pipelines made from SPIR-V embedded in the bench. Failures end the
 * program with a message. */
#ifndef BENCH_VK_H
#define BENCH_VK_H

#include "bench_spirv_type.h"
#include "vkattn.h"

typedef struct bench_vk {
    VkDevice device;
    PFN_vkCreateShaderModule CreateShaderModule;
    PFN_vkDestroyShaderModule DestroyShaderModule;
    PFN_vkCreateDescriptorSetLayout CreateDescriptorSetLayout;
    PFN_vkDestroyDescriptorSetLayout DestroyDescriptorSetLayout;
    PFN_vkCreatePipelineLayout CreatePipelineLayout;
    PFN_vkDestroyPipelineLayout DestroyPipelineLayout;
    PFN_vkCreateComputePipelines CreateComputePipelines;
    PFN_vkDestroyPipeline DestroyPipeline;
    PFN_vkCreateDescriptorPool CreateDescriptorPool;
    PFN_vkDestroyDescriptorPool DestroyDescriptorPool;
    PFN_vkAllocateDescriptorSets AllocateDescriptorSets;
    PFN_vkUpdateDescriptorSets UpdateDescriptorSets;
    PFN_vkCreateBufferView CreateBufferView;
    PFN_vkDestroyBufferView DestroyBufferView;
    PFN_vkCmdBindPipeline CmdBindPipeline;
    PFN_vkCmdBindDescriptorSets CmdBindDescriptorSets;
    PFN_vkCmdPushConstants CmdPushConstants;
    PFN_vkCmdDispatch CmdDispatch;
    PFN_vkCmdPipelineBarrier CmdPipelineBarrier;
} bench_vk;

void bench_vk_load(bench_vk *vk, const vkattn_context *ctx);
/* Ends the program when r is not VK_SUCCESS. */
void bench_vk_check(VkResult r, const char *what);

/* One compute pipeline: bindings 0..n-1 of the given types (n <= 2), one
 * push-constant range, specialization constant 0 = spec0 (ignored by
 * shaders without it). */
typedef struct bench_kernel {
    VkShaderModule module;
    VkDescriptorSetLayout set_layout;
    VkPipelineLayout layout;
    VkPipeline pipeline;
} bench_kernel;

void bench_kernel_create(const bench_vk *vk, bench_kernel *k, const bench_spirv *spirv,
                         const VkDescriptorType *types, uint32_t n, uint32_t push_size,
                         uint32_t spec0);
void bench_kernel_destroy(const bench_vk *vk, bench_kernel *k);
VkDescriptorSet bench_kernel_allocate_set(const bench_vk *vk, const bench_kernel *k,
                                          VkDescriptorPool pool);

#endif
