/* GPU timestamps: a query pool with two queries per interval. */
#include "core/host.h"

struct vkattn_timer {
    vkattn_context *ctx;
    VkQueryPool pool;
    uint32_t intervals;
};

vkattn_result vkattn_timer_create(vkattn_context *ctx, uint32_t intervals, vkattn_timer **out)
{
    if (!ctx)
        return VKATTN_ERROR_INVALID_ARGUMENT;
    if (!out)
        return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT, "vkattn_timer_create: out is NULL");
    *out = NULL;
    if (intervals == 0 || intervals > 1u << 20)
        return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT, "intervals is %u: must be in 1..%u",
                        intervals, 1u << 20);
    if (!ctx->info.timestamps)
        return vka_fail(ctx, VKATTN_ERROR_UNSUPPORTED,
                        "device \"%s\" cannot write timestamps on its compute queue",
                        ctx->info.name);
    vkattn_timer *t = vka_alloc(ctx, sizeof *t);
    if (!t)
        return vka_fail(ctx, VKATTN_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
    t->ctx = ctx;
    t->intervals = intervals;
    VkQueryPoolCreateInfo qi = {
        .sType = VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO,
        .queryType = VK_QUERY_TYPE_TIMESTAMP,
        .queryCount = 2 * intervals,
    };
    VkResult vr = ctx->vk.vkCreateQueryPool(ctx->device, &qi, ctx->vk_allocator, &t->pool);
    if (vr != VK_SUCCESS) {
        vka_free(ctx, t);
        return vka_fail_vk(ctx, vr, "vkCreateQueryPool");
    }
    *out = t;
    return VKATTN_SUCCESS;
}

void vkattn_timer_destroy(vkattn_timer *t)
{
    if (!t)
        return;
    t->ctx->vk.vkDestroyQueryPool(t->ctx->device, t->pool, t->ctx->vk_allocator);
    vka_free(t->ctx, t);
}

static vkattn_result check_interval(vkattn_timer *t, VkCommandBuffer cmd, uint32_t i, bool need_cmd)
{
    if (!t)
        return VKATTN_ERROR_INVALID_ARGUMENT;
    if (need_cmd && !cmd)
        return vka_fail(t->ctx, VKATTN_ERROR_INVALID_ARGUMENT, "timer: cmd is NULL");
    if (i >= t->intervals)
        return vka_fail(t->ctx, VKATTN_ERROR_OUT_OF_RANGE,
                        "timer interval %u does not exist (the timer has %u)", i, t->intervals);
    return VKATTN_SUCCESS;
}

vkattn_result vkattn_cmd_timer_begin(vkattn_timer *t, VkCommandBuffer cmd, uint32_t i)
{
    vkattn_result r = check_interval(t, cmd, i, true);
    if (r != VKATTN_SUCCESS)
        return r;
    const vka_vk_table *vk = &t->ctx->vk;
    vk->vkCmdResetQueryPool(cmd, t->pool, 2 * i, 2);
    vk->vkCmdWriteTimestamp(cmd, VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, t->pool, 2 * i);
    return VKATTN_SUCCESS;
}

vkattn_result vkattn_cmd_timer_end(vkattn_timer *t, VkCommandBuffer cmd, uint32_t i)
{
    vkattn_result r = check_interval(t, cmd, i, true);
    if (r != VKATTN_SUCCESS)
        return r;
    t->ctx->vk.vkCmdWriteTimestamp(cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, t->pool, 2 * i + 1);
    return VKATTN_SUCCESS;
}

vkattn_result vkattn_timer_read_ms(vkattn_timer *t, uint32_t i, double *ms)
{
    vkattn_result r = check_interval(t, VK_NULL_HANDLE, i, false);
    if (r != VKATTN_SUCCESS)
        return r;
    if (!ms)
        return vka_fail(t->ctx, VKATTN_ERROR_INVALID_ARGUMENT, "vkattn_timer_read_ms: ms is NULL");
    vkattn_context *ctx = t->ctx;
    uint64_t ticks[2];
    VkResult vr = ctx->vk.vkGetQueryPoolResults(ctx->device, t->pool, 2 * i, 2, sizeof ticks, ticks,
                                                sizeof ticks[0], VK_QUERY_RESULT_64_BIT);
    if (vr == VK_NOT_READY)
        return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT,
                        "timer interval %u has no result: was its command buffer submitted "
                        "and completed?",
                        i);
    if (vr != VK_SUCCESS)
        return vka_fail_vk(ctx, vr, "vkGetQueryPoolResults");
    uint64_t elapsed = ticks[1] - ticks[0];
    if (ctx->timestamp_mask)
        elapsed &= ctx->timestamp_mask;
    *ms = (double)elapsed * ctx->info.timestamp_period_ns * 1e-6;
    return VKATTN_SUCCESS;
}
