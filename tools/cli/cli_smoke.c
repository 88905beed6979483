/* vkattn smoke: a small real dispatch on the chosen device, checked on the CPU. */
#include "cli.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char help_text[] =
    "usage: vkattn smoke [--elements N] [device options]\n"
    "Uploads N random floats (default 1048576), converts them on the device to f16\n"
    "with a scale of 0.5 and back to f32, checks every value against the host's\n"
    "conversion and prints the GPU time. Exits 1 on any mismatch.\n";

static int parse_option(void *user, int argc, char **argv, int *i)
{
    long *n = user;
    if (strcmp(argv[*i], "--elements") == 0 && *i + 1 >= argc) {
        cli_error("smoke: --elements needs a value (see vkattn smoke --help)");
        return 2;
    }
    if (strcmp(argv[*i], "--elements") == 0) {
        char *end;
        *n = strtol(argv[++*i], &end, 10);
        if (*end || *n <= 0 || *n > (1l << 28)) {
            cli_error("--elements \"%s\": expected an integer in 1..%ld", argv[*i], 1l << 28);
            return 2;
        }
        return 0;
    }
    cli_error("smoke: unknown argument \"%s\" (see vkattn smoke --help)", argv[*i]);
    return 2;
}

static void fill_random(float *host, long n)
{
    uint32_t seed = 12345;
    for (long i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        host[i] = ((float)(seed >> 8) / (float)(1 << 24) - 0.5f) * 200.0f;
    }
}

/* Records f32 -> f16 (x0.5) -> f32 in place in b32 (b16 between), timed when
 * `timer` is not NULL, and submits it. Nonzero on failure (the context's last
 * error says why). */
static int convert_round_trip(vkattn_context *ctx, vkattn_buffer *b32, vkattn_buffer *b16, long n,
                              vkattn_timer *timer)
{
    int64_t shape[1] = {n};
    vkattn_convert_args down = {vkattn_tensor_make(b32, 0, VKATTN_DTYPE_F32, 1, shape),
                                vkattn_tensor_make(b16, 0, VKATTN_DTYPE_F16, 1, shape), 0.5f};
    vkattn_convert_args up = {down.dst, down.src, 0.0f};
    VkCommandBuffer cmd;
    if (vkattn_commands_begin(ctx, &cmd))
        return 1;
    if ((timer && vkattn_cmd_timer_begin(timer, cmd, 0)) || vkattn_cmd_convert(ctx, cmd, &down)) {
        vkattn_commands_discard(ctx);
        return 1;
    }
    /* the second pass reads what the first wrote */
    VkMemoryBarrier mb = {VK_STRUCTURE_TYPE_MEMORY_BARRIER, NULL, VK_ACCESS_SHADER_WRITE_BIT,
                          VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT};
    vkattn_vulkan_handles h;
    vkattn_context_vulkan_handles(ctx, &h);
    PFN_vkCmdPipelineBarrier barrier =
        (PFN_vkCmdPipelineBarrier)h.get_device_proc_addr(h.device, "vkCmdPipelineBarrier");
    barrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, 1,
            &mb, 0, NULL, 0, NULL);
    if (vkattn_cmd_convert(ctx, cmd, &up) || (timer && vkattn_cmd_timer_end(timer, cmd, 0))) {
        vkattn_commands_discard(ctx);
        return 1;
    }
    return vkattn_commands_submit(ctx) != VKATTN_SUCCESS;
}

/* Values of `back` that differ from the host's own round trip of `host`;
 * *max_err is the largest difference (infinite for a NaN). */
static long count_mismatches(const float *host, const float *back, long n, double *max_err)
{
    long bad = 0;
    *max_err = 0;
    for (long i = 0; i < n; i++) {
        float want = vkattn_f16_to_f32(vkattn_f32_to_f16(host[i] * 0.5f));
        double err = fabs((double)back[i] - want);
        if (err > *max_err || isnan(back[i]))
            *max_err = isnan(back[i]) ? INFINITY : err;
        bad += back[i] != want;
    }
    return bad;
}

/* The round trip on the device, checked; 0 when every value matches. */
static int run(vkattn_context *ctx, long n)
{
    const vkattn_device_info *dev = vkattn_context_device_info(ctx);
    float *host = malloc(n * sizeof *host), *back = malloc(n * sizeof *back);
    vkattn_buffer *b32 = NULL, *b16 = NULL;
    vkattn_timer *timer = NULL;
    int status = 1;
    if (!host || !back)
        goto done;
    fill_random(host, n);
    vkattn_buffer_desc bd32 = {.size = (uint64_t)n * 4}, bd16 = {.size = (uint64_t)n * 2};
    if (vkattn_buffer_create(ctx, &bd32, &b32) || vkattn_buffer_create(ctx, &bd16, &b16) ||
        vkattn_buffer_upload(b32, 0, host, (uint64_t)n * 4))
        goto done;
    bool timed = dev->timestamps && vkattn_timer_create(ctx, 1, &timer) == VKATTN_SUCCESS;
    if (convert_round_trip(ctx, b32, b16, n, timed ? timer : NULL) ||
        vkattn_buffer_download(b32, 0, back, (uint64_t)n * 4))
        goto done;
    double max_err, ms = 0;
    long bad = count_mismatches(host, back, n, &max_err);
    if (timed)
        vkattn_timer_read_ms(timer, 0, &ms);
    printf("smoke on \"%s\": %ld elements f32 -> f16 (x0.5) -> f32, %s f16 path: "
           "%ld mismatches, max error %.3g, GPU %.3f ms\n",
           dev->name, n, dev->f16_path == VKATTN_F16_NATIVE ? "native" : "packed", bad, max_err,
           ms);
    status = bad ? 1 : 0;
done:
    if (status && vkattn_context_last_error(ctx)[0])
        cli_error("smoke failed: %s", vkattn_context_last_error(ctx));
    free(host);
    free(back);
    vkattn_timer_destroy(timer);
    vkattn_buffer_destroy(b32);
    vkattn_buffer_destroy(b16);
    return status;
}

int cli_smoke(int argc, char **argv)
{
    cli_device_options o = {0};
    long n = 1 << 20;
    int code = cli_parse_args(argc, argv, &o, help_text, parse_option, &n);
    if (code != CLI_ARGS_OK)
        return code;
    vkattn_context *ctx = cli_stage_device_outputs(&o, "smoke") == 0 ? cli_open(&o) : NULL;
    if (!ctx)
        return cli_close(NULL, &o, 1);
    return cli_close(ctx, &o, run(ctx, n));
}
