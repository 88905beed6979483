/* Compute pipelines (pipeline.c): one per kernel and specialization
 * constants, created on first use and kept in the context. */
#ifndef VKA_PIPELINE_H
#define VKA_PIPELINE_H

#include "core/context.h"
#include "core/kernel.h"

typedef struct vka_pipeline {
    const vka_kernel *kernel;
    uint32_t spec[VKA_MAX_SPEC];
    uint32_t spec_count;
    VkPipeline pipeline;
    VkPipelineLayout layout; /* shared by all pipelines of the kernel */
    VkDescriptorSetLayout set_layout;
} vka_pipeline;

vkattn_result vka_pipelines_init(vkattn_context *ctx);
void vka_pipelines_destroy(vkattn_context *ctx);
/* The pipeline of `kernel` with these specialization constants (ids 0..n-1),
 * created on first use and cached. */
vkattn_result vka_pipeline_get(vkattn_context *ctx, const vka_kernel *kernel, const uint32_t *spec,
                               uint32_t spec_count, vka_pipeline **out);

#endif
