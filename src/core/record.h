/* Recording helpers (record.c). */
#ifndef VKA_RECORD_H
#define VKA_RECORD_H

#include "core/context.h"
#include "core/kernel.h"
#include "core/pipeline.h"

/* Binds pipeline, descriptors (cached by content) and push constants, then
 * records vkCmdDispatch. */
vkattn_result vka_cmd_dispatch(vkattn_context *ctx, VkCommandBuffer cmd,
                                  vka_pipeline *pipeline, const vka_binding *bindings,
                                  const void *push, uint32_t gx, uint32_t gy, uint32_t gz);

/* A binding of the context's small dummy buffer, for an absent optional input
 * (`format` VK_FORMAT_UNDEFINED for a storage binding). */
vkattn_result vka_bind_dummy(vkattn_context *ctx, VkFormat format, vka_binding *out);

/* How a dtype is stored for the kernels on this device (the variant to pick). */
enum { VKA_STORAGE_F32 = 0, VKA_STORAGE_F16 = 1, VKA_STORAGE_F16P = 2 };
uint32_t vka_storage_kind(const vkattn_context *ctx, vkattn_dtype dtype);

/* Global barrier: compute-shader writes -> compute-shader reads/writes. */
void vka_cmd_compute_barrier(vkattn_context *ctx, VkCommandBuffer cmd);

#endif
