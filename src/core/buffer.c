/* Device buffers and moving bytes between them and the host: a plain memcpy
 * where device memory is host-visible (lavapipe, SwiftShader, integrated
 * GPUs), otherwise through a staging buffer and vkCmdCopyBuffer. */
#include "core/internal.h"

#include <string.h>

/* Upper bound of the staging buffer: larger transfers go in chunks. */
#define STAGING_MAX (16u << 20)

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

/* Creates a VkBuffer with memory of `type_hint` (or a compatible type). */
static vkattn_result make_buffer(vkattn_context *ctx, uint64_t size, VkBufferUsageFlags usage,
                                 uint32_t type_hint, VkBuffer *buffer, VkDeviceMemory *memory,
                                 bool *host_visible)
{
    VkBufferCreateInfo bci = {
        .sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
        .size = size,
        .usage = usage,
        .sharingMode = VK_SHARING_MODE_EXCLUSIVE,
    };
    VkResult vr = ctx->vk.vkCreateBuffer(ctx->device, &bci, ctx->vk_allocator, buffer);
    if (vr != VK_SUCCESS)
        return vka_fail_vk(ctx, vr, "vkCreateBuffer");
    VkMemoryRequirements req;
    ctx->vk.vkGetBufferMemoryRequirements(ctx->device, *buffer, &req);
    uint32_t type = type_hint;
    if (!(req.memoryTypeBits & (1u << type)))
        type = vka_find_memory_type(&ctx->memory, req.memoryTypeBits,
                                       ctx->memory.memoryTypes[type_hint].propertyFlags, 0);
    if (type == UINT32_MAX) {
        ctx->vk.vkDestroyBuffer(ctx->device, *buffer, ctx->vk_allocator);
        *buffer = VK_NULL_HANDLE;
        return vka_fail(ctx, VKATTN_ERROR_UNSUPPORTED, "no memory type fits a buffer of %llu bytes",
                           (unsigned long long)size);
    }
    VkMemoryAllocateInfo mai = {
        .sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
        .allocationSize = req.size,
        .memoryTypeIndex = type,
    };
    vr = ctx->vk.vkAllocateMemory(ctx->device, &mai, ctx->vk_allocator, memory);
    if (vr == VK_SUCCESS)
        vr = ctx->vk.vkBindBufferMemory(ctx->device, *buffer, *memory, 0);
    if (vr != VK_SUCCESS) {
        ctx->vk.vkDestroyBuffer(ctx->device, *buffer, ctx->vk_allocator);
        if (*memory)
            ctx->vk.vkFreeMemory(ctx->device, *memory, ctx->vk_allocator);
        *buffer = VK_NULL_HANDLE;
        *memory = VK_NULL_HANDLE;
        return vka_fail_vk(ctx, vr, "allocating buffer memory");
    }
    *host_visible = ctx->memory.memoryTypes[type].propertyFlags & VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT;
    return VKATTN_SUCCESS;
}

vkattn_result vkattn_buffer_create(vkattn_context *ctx, const vkattn_buffer_desc *desc,
                                   vkattn_buffer **out)
{
    if (!ctx)
        return VKATTN_ERROR_INVALID_ARGUMENT;
    if (!out)
        return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT, "vkattn_buffer_create: out is NULL");
    *out = NULL;
    if (!desc)
        return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT, "vkattn_buffer_create: desc is NULL");
    if (desc->size == 0)
        return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT, "desc->size is 0: buffers need at least 1 byte");
    if (desc->size > ctx->info.max_allocation_size)
        return vka_fail(ctx, VKATTN_ERROR_OUT_OF_RANGE,
                           "desc->size %llu exceeds the device's maxMemoryAllocationSize %llu",
                           (unsigned long long)desc->size,
                           (unsigned long long)ctx->info.max_allocation_size);
    vkattn_buffer *b = vka_alloc(ctx, sizeof *b);
    if (!b)
        return vka_fail(ctx, VKATTN_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
    b->ctx = ctx;
    b->size = desc->size;
    b->vk_size = vka_align_up(desc->size, 16);
    b->owned = true;
    b->texel_ok = true;
    b->transfer_ok = true;
    VkBufferUsageFlags usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT |
                               VK_BUFFER_USAGE_UNIFORM_TEXEL_BUFFER_BIT |
                               VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT |
                               desc->extra_usage;
    bool host_visible = false;
    vkattn_result r = make_buffer(ctx, b->vk_size, usage, ctx->buffer_memory_type, &b->buffer,
                                  &b->memory, &host_visible);
    if (r == VKATTN_SUCCESS && host_visible && ctx->buffers_mapped) {
        VkResult vr = ctx->vk.vkMapMemory(ctx->device, b->memory, 0, VK_WHOLE_SIZE, 0, &b->map);
        if (vr != VK_SUCCESS)
            r = vka_fail_vk(ctx, vr, "vkMapMemory");
    }
    if (r != VKATTN_SUCCESS) {
        vkattn_buffer_destroy(b);
        return r;
    }
    *out = b;
    return VKATTN_SUCCESS;
}

void vkattn_buffer_destroy(vkattn_buffer *b)
{
    if (!b)
        return;
    vkattn_context *ctx = b->ctx;
    if (b->buffer) {
        vka_descriptors_forget_buffer(ctx, b->buffer);
        if (b->owned)
            ctx->vk.vkDestroyBuffer(ctx->device, b->buffer, ctx->vk_allocator);
    }
    if (b->memory)
        ctx->vk.vkFreeMemory(ctx->device, b->memory, ctx->vk_allocator); /* unmaps too */
    vka_free(ctx, b);
}

uint64_t vkattn_buffer_size(const vkattn_buffer *b) { return b ? b->size : 0; }
VkBuffer vkattn_buffer_vk(const vkattn_buffer *b) { return b ? b->buffer : VK_NULL_HANDLE; }

/* --------------------------------------------------------------- staging */

static vkattn_result staging_reserve(vkattn_context *ctx, uint64_t size)
{
    if (ctx->staging_size >= size)
        return VKATTN_SUCCESS;
    vka_staging_destroy(ctx);
    bool host_visible = false;
    vkattn_result r = make_buffer(ctx, size,
                                  VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT,
                                  ctx->staging_memory_type, &ctx->staging, &ctx->staging_memory,
                                  &host_visible);
    if (r != VKATTN_SUCCESS)
        return r;
    VkResult vr = ctx->vk.vkMapMemory(ctx->device, ctx->staging_memory, 0, VK_WHOLE_SIZE, 0,
                                      &ctx->staging_map);
    if (vr != VK_SUCCESS) {
        vka_staging_destroy(ctx);
        return vka_fail_vk(ctx, vr, "vkMapMemory (staging)");
    }
    ctx->staging_size = size;
    return VKATTN_SUCCESS;
}

void vka_staging_destroy(vkattn_context *ctx)
{
    if (ctx->staging)
        ctx->vk.vkDestroyBuffer(ctx->device, ctx->staging, ctx->vk_allocator);
    if (ctx->staging_memory)
        ctx->vk.vkFreeMemory(ctx->device, ctx->staging_memory, ctx->vk_allocator);
    ctx->staging = VK_NULL_HANDLE;
    ctx->staging_memory = VK_NULL_HANDLE;
    ctx->staging_map = NULL;
    ctx->staging_size = 0;
}

/* One chunk through the staging buffer: copy and wait. */
static vkattn_result staged_copy(vkattn_context *ctx, vkattn_buffer *b, uint64_t offset,
                                 uint64_t size, bool to_device)
{
    VkCommandBuffer cmd;
    vkattn_result r = vkattn_commands_begin(ctx, &cmd);
    if (r != VKATTN_SUCCESS)
        return r;
    VkBufferCopy region = {
        .srcOffset = to_device ? 0 : offset,
        .dstOffset = to_device ? offset : 0,
        .size = size,
    };
    /* Host writes to the staging memory are made visible by the submission
     * itself; the barrier orders earlier device work on the buffer before the
     * copy and the copy before later work. */
    VkMemoryBarrier before = {
        .sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
        .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT,
        .dstAccessMask = VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT,
    };
    ctx->vk.vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
                                 VK_PIPELINE_STAGE_TRANSFER_BIT, 0, 1, &before, 0, NULL, 0, NULL);
    if (to_device)
        ctx->vk.vkCmdCopyBuffer(cmd, ctx->staging, b->buffer, 1, &region);
    else
        ctx->vk.vkCmdCopyBuffer(cmd, b->buffer, ctx->staging, 1, &region);
    VkMemoryBarrier after = {
        .sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
        .srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT,
        .dstAccessMask = to_device ? (VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT)
                                   : VK_ACCESS_HOST_READ_BIT,
    };
    ctx->vk.vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_TRANSFER_BIT,
                                 to_device ? VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT
                                           : VK_PIPELINE_STAGE_HOST_BIT,
                                 0, 1, &after, 0, NULL, 0, NULL);
    return vkattn_commands_submit(ctx);
}

static vkattn_result transfer_check(vkattn_buffer *b, uint64_t offset, const void *data,
                                    uint64_t size, const char *fn)
{
    if (!b)
        return VKATTN_ERROR_INVALID_ARGUMENT;
    vkattn_context *ctx = b->ctx;
    if (!data && size)
        return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT, "%s: data is NULL", fn);
    if (offset > b->size || size > b->size - offset)
        return vka_fail(ctx, VKATTN_ERROR_OUT_OF_RANGE,
                           "%s: offset %llu + size %llu exceeds the buffer size %llu", fn,
                           (unsigned long long)offset, (unsigned long long)size,
                           (unsigned long long)b->size);
    if (ctx->recording)
        return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT,
                           "%s: the context's command buffer is recording (between "
                           "vkattn_commands_begin and vkattn_commands_submit)", fn);
    if (!b->map && !b->transfer_ok)
        return vka_fail(ctx, VKATTN_ERROR_UNSUPPORTED,
                           "%s: this wrapped buffer has neither a mapped pointer nor transfer "
                           "src and dst usage, so vkattn cannot copy into or out of it", fn);
    return VKATTN_SUCCESS;
}

vkattn_result vkattn_buffer_upload(vkattn_buffer *b, uint64_t offset, const void *data, uint64_t size)
{
    vkattn_result r = transfer_check(b, offset, data, size, "vkattn_buffer_upload");
    if (r != VKATTN_SUCCESS || size == 0)
        return r;
    vkattn_context *ctx = b->ctx;
    if (b->map) {
        memcpy((char *)b->map + offset, data, size);
        return VKATTN_SUCCESS; /* coherent memory: visible at the next submit */
    }
    for (uint64_t done = 0; done < size;) {
        uint64_t chunk = vka_min_u64(size - done, STAGING_MAX);
        r = staging_reserve(ctx, chunk);
        if (r != VKATTN_SUCCESS)
            return r;
        memcpy(ctx->staging_map, (const char *)data + done, chunk);
        r = staged_copy(ctx, b, offset + done, chunk, true);
        if (r != VKATTN_SUCCESS)
            return r;
        done += chunk;
    }
    return VKATTN_SUCCESS;
}

vkattn_result vkattn_buffer_download(vkattn_buffer *b, uint64_t offset, void *data, uint64_t size)
{
    vkattn_result r = transfer_check(b, offset, data, size, "vkattn_buffer_download");
    if (r != VKATTN_SUCCESS || size == 0)
        return r;
    vkattn_context *ctx = b->ctx;
    if (b->map) {
        memcpy(data, (const char *)b->map + offset, size);
        return VKATTN_SUCCESS;
    }
    for (uint64_t done = 0; done < size;) {
        uint64_t chunk = vka_min_u64(size - done, STAGING_MAX);
        r = staging_reserve(ctx, chunk);
        if (r != VKATTN_SUCCESS)
            return r;
        r = staged_copy(ctx, b, offset + done, chunk, false);
        if (r != VKATTN_SUCCESS)
            return r;
        memcpy((char *)data + done, ctx->staging_map, chunk);
        done += chunk;
    }
    return VKATTN_SUCCESS;
}

vkattn_result vkattn_buffer_wrap(vkattn_context *ctx, const vkattn_buffer_wrap_desc *desc,
                                 vkattn_buffer **out)
{
    if (!ctx)
        return VKATTN_ERROR_INVALID_ARGUMENT;
    if (!out || !desc)
        return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT, "vkattn_buffer_wrap: %s is NULL",
                           !out ? "out" : "desc");
    *out = NULL;
    if (!desc->buffer)
        return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT, "desc->buffer is VK_NULL_HANDLE");
    if (desc->size == 0 || desc->size % 4)
        return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT,
                           "desc->size %llu: a wrapped buffer's size must be a positive multiple of 4 "
                           "(kernels access 32-bit words)", (unsigned long long)desc->size);
    if (!(desc->usage & VK_BUFFER_USAGE_STORAGE_BUFFER_BIT))
        return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT,
                           "desc->usage 0x%x lacks VK_BUFFER_USAGE_STORAGE_BUFFER_BIT", desc->usage);
    vkattn_buffer *b = vka_alloc(ctx, sizeof *b);
    if (!b)
        return vka_fail(ctx, VKATTN_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
    b->ctx = ctx;
    b->buffer = desc->buffer;
    b->size = b->vk_size = desc->size;
    b->map = desc->mapped;
    b->owned = false;
    b->texel_ok = desc->usage & VK_BUFFER_USAGE_UNIFORM_TEXEL_BUFFER_BIT;
    b->transfer_ok = (desc->usage & VK_BUFFER_USAGE_TRANSFER_SRC_BIT) &&
                     (desc->usage & VK_BUFFER_USAGE_TRANSFER_DST_BIT);
    *out = b;
    return VKATTN_SUCCESS;
}
