/* Descriptor sets cached by content (descriptors.c). */
#ifndef VKA_DESCRIPTORS_H
#define VKA_DESCRIPTORS_H

#include "core/context.h"
#include "core/kernel.h"

vkattn_result vka_descriptors_init(vkattn_context *ctx);
void vka_descriptors_destroy(vkattn_context *ctx);
/* A descriptor set holding exactly these bindings for `layout`. Sets are
 * written once and never changed, so one set serves any number of command
 * buffers; they live until a buffer they reference is destroyed. */
vkattn_result vka_descriptor_set_get(vkattn_context *ctx, VkDescriptorSetLayout layout,
                                     const vka_kernel *kernel, const vka_binding *bindings,
                                     VkDescriptorSet *out);
/* Drops every cached set and view that references `buffer`. */
void vka_descriptors_forget_buffer(vkattn_context *ctx, VkBuffer buffer);

#endif
