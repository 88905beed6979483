/* What the parts of vkattn-bench share (bench_common.h). */
#include "bench_common.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

_Noreturn void bench_die(const vkattn_context *ctx, const char *what)
{
    fprintf(stderr, "vkattn-bench: %s%s%s\n", what, ctx ? ": " : "",
            ctx ? vkattn_context_last_error(ctx) : "");
    exit(1);
}

static int compare_doubles(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double bench_median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof v[0], compare_doubles);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

void bench_cmd_barrier(vkattn_context *ctx, VkCommandBuffer cmd)
{
    vkattn_vulkan_handles h;
    vkattn_context_vulkan_handles(ctx, &h);
    PFN_vkCmdPipelineBarrier barrier =
        (PFN_vkCmdPipelineBarrier)h.get_device_proc_addr(h.device, "vkCmdPipelineBarrier");
    if (!barrier)
        bench_die(NULL, "the device has no vkCmdPipelineBarrier");
    VkMemoryBarrier mb = {
        .sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
        .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT,
        .dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT |
                         VK_ACCESS_UNIFORM_READ_BIT | VK_ACCESS_TRANSFER_READ_BIT |
                         VK_ACCESS_TRANSFER_WRITE_BIT};
    VkPipelineStageFlags stages =
        VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT;
    barrier(cmd, stages, stages, 0, 1, &mb, 0, NULL, 0, NULL);
}

void bench_tune_progress(const vkattn_tune_progress *p, void *user)
{
    (void)user;
    if (isatty(STDERR_FILENO)) { /* \r and erase-to-end: redrawn in place */
        if (p->done)
            fprintf(stderr, "\r\033[Kvkattn-bench: tuned %s %s: %u candidates, best %.3f ms\n",
                    p->op, p->shape, p->count, (double)p->best_ms);
        else
            fprintf(stderr, "\r\033[Kvkattn-bench: tuning %s %s: candidate %u/%u", p->op, p->shape,
                    p->candidate, p->count);
        fflush(stderr);
    } else if (p->done) {
        fprintf(stderr, "vkattn-bench: tuned %s %s: %u candidates, best %.3f ms\n", p->op, p->shape,
                p->count, (double)p->best_ms);
    }
}
