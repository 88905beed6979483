/* Memory types: which one a buffer of given needs uses, and the context's
 * choice for its buffers and its staging memory. */
#include "core/memory.h"

#include "core/host.h"

uint32_t vka_find_memory_type(const VkPhysicalDeviceMemoryProperties *mp, uint32_t bits,
                              VkMemoryPropertyFlags required, VkMemoryPropertyFlags preferred)
{
    uint32_t fallback = UINT32_MAX;
    for (uint32_t i = 0; i < mp->memoryTypeCount; i++) {
        VkMemoryPropertyFlags f = mp->memoryTypes[i].propertyFlags;
        if (!(bits & (1u << i)) || (f & required) != required)
            continue;
        if ((f & preferred) == preferred)
            return i;
        if (fallback == UINT32_MAX)
            fallback = i;
    }
    return fallback;
}

/* Memory types for buffers and staging, and whether buffers can be mapped. */
vkattn_result vka_memory_choose(vkattn_context *ctx)
{
    ctx->vk.vkGetPhysicalDeviceMemoryProperties(ctx->physical_device, &ctx->memory);
    const VkMemoryPropertyFlags local = VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT;
    const VkMemoryPropertyFlags host =
        VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
    ctx->staging_memory_type =
        vka_find_memory_type(&ctx->memory, ~0u, host, VK_MEMORY_PROPERTY_HOST_CACHED_BIT);
    uint32_t unified = vka_find_memory_type(&ctx->memory, ~0u, local | host, 0);
    if (unified != UINT32_MAX && !(ctx->flags & VKATTN_CONTEXT_TEST_FORCE_STAGING)) {
        ctx->buffer_memory_type = unified;
        ctx->buffers_mapped = true;
    } else {
        ctx->buffer_memory_type = vka_find_memory_type(&ctx->memory, ~0u, 0, local);
        ctx->buffers_mapped = false;
    }
    if (ctx->buffer_memory_type == UINT32_MAX || ctx->staging_memory_type == UINT32_MAX)
        return vka_fail(ctx, VKATTN_ERROR_UNSUPPORTED,
                        "device \"%s\" has no host-visible coherent memory type", ctx->info.name);
    return VKATTN_SUCCESS;
}
