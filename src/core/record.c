/* Recording helpers every op uses: the storage variant of a dtype, the
 * dummy binding of an absent optional input, dispatches (pipeline, cached
 * descriptor set, push constants) and the barrier between dependent
 * dispatches. Binding windows: windows.c. */
#include "core/record.h"

#include "core/buffer.h"
#include "core/descriptors.h"
#include "core/host.h"
#include "core/pipeline.h"

vkattn_result vka_cmd_dispatch(vkattn_context *ctx, VkCommandBuffer cmd, vka_pipeline *p,
                               const vka_binding *bindings, const void *push, uint32_t gx,
                               uint32_t gy, uint32_t gz)
{
    const uint32_t *max = ctx->info.max_workgroup_count;
    if (gx > max[0] || gy > max[1] || gz > max[2])
        return vka_fail(ctx, VKATTN_ERROR_OUT_OF_RANGE,
                        "kernel %s: grid %u x %u x %u exceeds the device's limit %u x %u x %u",
                        p->kernel->name, gx, gy, gz, max[0], max[1], max[2]);
    if (gx == 0 || gy == 0 || gz == 0)
        return VKATTN_SUCCESS;
    VkDescriptorSet set;
    vkattn_result r = vka_descriptor_set_get(ctx, p->set_layout, p->kernel, bindings, &set);
    if (r != VKATTN_SUCCESS)
        return r;
    ctx->vk.vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, p->pipeline);
    ctx->vk.vkCmdBindDescriptorSets(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, p->layout, 0, 1, &set, 0,
                                    NULL);
    if (p->kernel->push_size)
        ctx->vk.vkCmdPushConstants(cmd, p->layout, VK_SHADER_STAGE_COMPUTE_BIT, 0,
                                   p->kernel->push_size, push);
    ctx->vk.vkCmdDispatch(cmd, gx, gy, gz);
    return VKATTN_SUCCESS;
}

uint32_t vka_storage_kind(const vkattn_context *ctx, vkattn_dtype dtype)
{
    if (dtype == VKATTN_DTYPE_BF16)
        return VKA_STORAGE_BF16;
    if (dtype != VKATTN_DTYPE_F16)
        return VKA_STORAGE_F32;
    return ctx->info.f16_path == VKATTN_F16_NATIVE ? VKA_STORAGE_F16 : VKA_STORAGE_F16P;
}

vkattn_result vka_bind_dummy(vkattn_context *ctx, VkFormat format, vka_binding *out)
{
    vka_lock(ctx);
    vkattn_buffer *dummy = ctx->dummy;
    vka_unlock(ctx);
    if (!dummy) {
        /* created outside the lock (failures log); the first one in wins */
        vkattn_buffer_desc d = {.size = 256};
        vkattn_result r = vkattn_buffer_create(ctx, &d, &dummy);
        if (r != VKATTN_SUCCESS)
            return r;
        vka_lock(ctx);
        vkattn_buffer *loser = NULL;
        if (ctx->dummy)
            loser = dummy;
        else
            ctx->dummy = dummy;
        dummy = ctx->dummy;
        vka_unlock(ctx);
        vkattn_buffer_destroy(loser);
    }
    out->buffer = dummy;
    out->offset = 0;
    out->range = 256;
    out->format = format;
    return VKATTN_SUCCESS;
}

void vka_cmd_compute_barrier(vkattn_context *ctx, VkCommandBuffer cmd)
{
    VkMemoryBarrier mb = {
        .sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
        .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT,
        .dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT,
    };
    ctx->vk.vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                                 VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, 1, &mb, 0, NULL, 0, NULL);
}

void vka_cmd_update_words(vkattn_context *ctx, VkCommandBuffer cmd, VkBuffer buffer,
                          uint64_t offset, const uint32_t *data, uint64_t words)
{
    VkMemoryBarrier before = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                              .srcAccessMask =
                                  VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT,
                              .dstAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT};
    ctx->vk.vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                                 VK_PIPELINE_STAGE_TRANSFER_BIT, 0, 1, &before, 0, NULL, 0, NULL);
    for (uint64_t at = 0; at < words; at += 16384) {
        uint64_t n = words - at < 16384 ? words - at : 16384;
        ctx->vk.vkCmdUpdateBuffer(cmd, buffer, offset + at * 4, n * 4, data + at);
    }
    VkMemoryBarrier after = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                             .srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT,
                             .dstAccessMask = VK_ACCESS_SHADER_READ_BIT};
    ctx->vk.vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_TRANSFER_BIT,
                                 VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, 1, &after, 0, NULL, 0,
                                 NULL);
}
