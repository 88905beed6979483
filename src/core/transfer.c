/* Moving bytes between the host and buffers: a plain memcpy where device
 * memory is host-visible (lavapipe, SwiftShader, integrated GPUs), otherwise
 * through a staging buffer and vkCmdCopyBuffer. */
#include "core/transfer.h"

#include "core/buffer.h"
#include "core/host.h"
#include "core/submit.h"
#include "spec/size_math.h"

#include <string.h>

/* Upper bound of the staging buffer: larger transfers go in chunks. */
#define STAGING_MAX (16u << 20)

/* --------------------------------------------------------------- staging */

static vkattn_result staging_reserve(vkattn_context *ctx, uint64_t size)
{
    if (ctx->staging_size >= size)
        return VKATTN_SUCCESS;
    vka_staging_destroy(ctx);
    bool host_visible = false;
    vkattn_result r = vka_buffer_make(
        ctx, size, VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT,
        ctx->staging_memory_type, &ctx->staging, &ctx->staging_memory, &host_visible);
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

/* One chunk between the staging buffer and a buffer. */
typedef struct staged_chunk {
    vkattn_buffer *b;
    uint64_t offset, size;
    bool to_device;
} staged_chunk;

static vkattn_result record_copy(vkattn_context *ctx, VkCommandBuffer cmd, const void *job)
{
    const staged_chunk *chunk = job;
    const vkattn_buffer *b = chunk->b;
    uint64_t offset = chunk->offset, size = chunk->size;
    bool to_device = chunk->to_device;
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
    ctx->vk.vkCmdPipelineBarrier(
        cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
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
    return VKATTN_SUCCESS;
}

/* One chunk through the staging buffer: copy and wait. */
static vkattn_result staged_copy(vkattn_context *ctx, vkattn_buffer *b, uint64_t offset,
                                 uint64_t size, bool to_device)
{
    staged_chunk chunk = {b, offset, size, to_device};
    return vka_submit_and_wait(ctx, record_copy, &chunk);
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
                        "vkattn_commands_begin and vkattn_commands_submit)",
                        fn);
    if (!b->map && !b->transfer_ok)
        return vka_fail(ctx, VKATTN_ERROR_UNSUPPORTED,
                        "%s: this wrapped buffer has neither a mapped pointer nor transfer "
                        "src and dst usage, so vkattn cannot copy into or out of it",
                        fn);
    return VKATTN_SUCCESS;
}

vkattn_result vkattn_buffer_upload(vkattn_buffer *b, uint64_t offset, const void *data,
                                   uint64_t size)
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
