/* The context's VkPipelineCache (pipeline_cache.c). */
#ifndef VKA_PIPELINE_CACHE_H
#define VKA_PIPELINE_CACHE_H

#include "core/context.h"

/* Creates the cache from desc->pipeline_cache_data or _path (data of
 * another device or driver, or a file that cannot be read: empty). */
vkattn_result vka_pipeline_cache_init(vkattn_context *ctx, const vkattn_context_desc *desc);
void vka_pipeline_cache_destroy(vkattn_context *ctx);

/* Whether `data` starts with a pipeline cache header of this very device
 * and driver (vendor, device, pipelineCacheUUID) that fits in `size` bytes:
 * anything else is never handed to the driver. */
bool vka_pipeline_cache_header_matches(const VkPhysicalDeviceProperties *p, const void *data,
                                       size_t size);

#endif
