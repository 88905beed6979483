/* The context's own command buffer: the submit-and-wait convenience used by
 * the non-cmd functions, the CLI and tests. */
#include "core/submit.h"

#include "core/host.h"

vkattn_result vka_submit_init(vkattn_context *ctx)
{
    VkCommandPoolCreateInfo pci = {
        .sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
        .flags = VK_COMMAND_POOL_CREATE_TRANSIENT_BIT,
        .queueFamilyIndex = ctx->queue_family,
    };
    VkResult vr =
        ctx->vk.vkCreateCommandPool(ctx->device, &pci, ctx->vk_allocator, &ctx->command_pool);
    if (vr != VK_SUCCESS)
        return vka_fail_vk(ctx, vr, "vkCreateCommandPool");
    VkCommandBufferAllocateInfo cai = {
        .sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
        .commandPool = ctx->command_pool,
        .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
        .commandBufferCount = 1,
    };
    vr = ctx->vk.vkAllocateCommandBuffers(ctx->device, &cai, &ctx->command_buffer);
    if (vr != VK_SUCCESS)
        return vka_fail_vk(ctx, vr, "vkAllocateCommandBuffers");
    VkFenceCreateInfo fci = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    vr = ctx->vk.vkCreateFence(ctx->device, &fci, ctx->vk_allocator, &ctx->fence);
    if (vr != VK_SUCCESS)
        return vka_fail_vk(ctx, vr, "vkCreateFence");
    return VKATTN_SUCCESS;
}

void vka_submit_destroy(vkattn_context *ctx)
{
    if (ctx->fence)
        ctx->vk.vkDestroyFence(ctx->device, ctx->fence, ctx->vk_allocator);
    if (ctx->command_pool)
        ctx->vk.vkDestroyCommandPool(ctx->device, ctx->command_pool, ctx->vk_allocator);
    ctx->fence = VK_NULL_HANDLE;
    ctx->command_pool = VK_NULL_HANDLE;
}

vkattn_result vkattn_commands_begin(vkattn_context *ctx, VkCommandBuffer *cmd)
{
    if (!ctx)
        return VKATTN_ERROR_INVALID_ARGUMENT;
    if (!cmd)
        return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT, "vkattn_commands_begin: cmd is NULL");
    *cmd = VK_NULL_HANDLE;
    if (ctx->recording)
        return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT,
                        "vkattn_commands_begin: the context's command buffer is already "
                        "recording (call vkattn_commands_submit first)");
    VkResult vr = ctx->vk.vkResetCommandPool(ctx->device, ctx->command_pool, 0);
    if (vr != VK_SUCCESS)
        return vka_fail_vk(ctx, vr, "vkResetCommandPool");
    VkCommandBufferBeginInfo bi = {
        .sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
        .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT,
    };
    vr = ctx->vk.vkBeginCommandBuffer(ctx->command_buffer, &bi);
    if (vr != VK_SUCCESS)
        return vka_fail_vk(ctx, vr, "vkBeginCommandBuffer");
    ctx->recording = true;
    *cmd = ctx->command_buffer;
    return VKATTN_SUCCESS;
}

vkattn_result vkattn_commands_submit(vkattn_context *ctx)
{
    if (!ctx)
        return VKATTN_ERROR_INVALID_ARGUMENT;
    if (!ctx->recording)
        return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT,
                        "vkattn_commands_submit: no vkattn_commands_begin before it");
    ctx->recording = false;
    /* Device writes become visible to host reads after the fence wait only
     * through a barrier to the host stage. */
    VkMemoryBarrier to_host = {
        .sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
        .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT,
        .dstAccessMask = VK_ACCESS_HOST_READ_BIT,
    };
    ctx->vk.vkCmdPipelineBarrier(ctx->command_buffer, VK_PIPELINE_STAGE_ALL_COMMANDS_BIT,
                                 VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &to_host, 0, NULL, 0, NULL);
    VkResult vr = ctx->vk.vkEndCommandBuffer(ctx->command_buffer);
    if (vr != VK_SUCCESS)
        return vka_fail_vk(ctx, vr, "vkEndCommandBuffer");
    VkSubmitInfo si = {
        .sType = VK_STRUCTURE_TYPE_SUBMIT_INFO,
        .commandBufferCount = 1,
        .pCommandBuffers = &ctx->command_buffer,
    };
    vr = ctx->vk.vkQueueSubmit(ctx->queue, 1, &si, ctx->fence);
    if (vr != VK_SUCCESS)
        return vka_fail_vk(ctx, vr, "vkQueueSubmit");
    vr = ctx->vk.vkWaitForFences(ctx->device, 1, &ctx->fence, VK_TRUE, UINT64_MAX);
    VkResult reset = ctx->vk.vkResetFences(ctx->device, 1, &ctx->fence);
    if (vr != VK_SUCCESS)
        return vka_fail_vk(ctx, vr, "vkWaitForFences");
    if (reset != VK_SUCCESS)
        return vka_fail_vk(ctx, reset, "vkResetFences");
    return VKATTN_SUCCESS;
}

void vkattn_commands_discard(vkattn_context *ctx)
{
    if (!ctx || !ctx->recording)
        return;
    ctx->recording = false;
    ctx->vk.vkEndCommandBuffer(ctx->command_buffer);
    ctx->vk.vkResetCommandPool(ctx->device, ctx->command_pool, 0);
}

vkattn_result vka_commands_finish(vkattn_context *ctx, vkattn_result recorded)
{
    if (recorded != VKATTN_SUCCESS) {
        vkattn_commands_discard(ctx);
        return recorded;
    }
    return vkattn_commands_submit(ctx);
}

vkattn_result vka_submit_and_wait(vkattn_context *ctx, vka_record_fn record, const void *job)
{
    VkCommandBuffer cmd;
    vkattn_result r = vkattn_commands_begin(ctx, &cmd);
    if (r != VKATTN_SUCCESS)
        return r;
    return vka_commands_finish(ctx, record(ctx, cmd, job));
}

vkattn_result vka_op_record(vkattn_context *ctx, const char *fn, VkCommandBuffer cmd,
                            const void *args, vka_check_fn check, void *call, vka_record_fn record)
{
    VKA_TRY(vka_check_entry(ctx, fn, true, cmd, args));
    VKA_TRY(check(ctx, args, call));
    return record(ctx, cmd, call);
}

vkattn_result vka_op_submit(vkattn_context *ctx, const char *fn, const void *args,
                            vka_check_fn check, void *call, vka_record_fn record)
{
    VKA_TRY(vka_check_entry(ctx, fn, false, VK_NULL_HANDLE, args));
    VKA_TRY(check(ctx, args, call));
    return vka_submit_and_wait(ctx, record, call);
}
