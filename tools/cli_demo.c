/* vkattn demo: real attention layers with random weights on the chosen
 * device, each checked against the CPU reference. The README's main job. */
#include "cli.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char help_text[] =
    "usage: vkattn demo [--tokens T] [device options]\n"
    "Runs two causal self-attention layers with seeded random weights on the device,\n"
    "in f32 and in f16 storage: GPT-2-small-shaped (Dm 768, 12 heads, MHA) and\n"
    "Llama-3-8B-shaped (Dm 4096, 32 query heads, 8 KV heads: GQA, Dh 128). Each is\n"
    "checked against the CPU reference (double accumulation); prints shape, GPU time\n"
    "(median of 3 after a warm-up) and max relative error. Exits 1 if any check fails.\n"
    "  --tokens T   sequence length (default 128)\n";

typedef struct layer_case {
    const char *name;
    uint32_t dm, hq, hkv;
} layer_case;

static float *random_array(size_t n, float amplitude, uint64_t *seed)
{
    float *a = malloc(n * sizeof *a);
    for (size_t i = 0; a && i < n; i++) {
        *seed ^= *seed << 13;
        *seed ^= *seed >> 7;
        *seed ^= *seed << 17;
        a[i] = amplitude * ((float)(*seed >> 40) / (float)(1u << 24) * 2.0f - 1.0f);
    }
    return a;
}

static void round_f16(float *a, size_t n)
{
    for (size_t i = 0; i < n; i++)
        a[i] = vkattn_f16_to_f32(vkattn_f32_to_f16(a[i]));
}

static int compare_doubles(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* One layer in one dtype: returns 0 when the check passes. */
static int run_case(vkattn_context *ctx, const layer_case *c, vkattn_dtype dtype, uint32_t tokens)
{
    const uint32_t dm = c->dm, dh = c->dm / c->hq, qw = c->hq * dh, kvw = c->hkv * dh;
    uint64_t seed = 0x5eed0000u + dm + c->hkv;
    size_t nwqkv = (size_t)(qw + 2 * kvw) * dm, nwo = (size_t)dm * qw, nx = (size_t)tokens * dm;
    float amp = 1.0f / sqrtf((float)dm);
    float *wqkv = random_array(nwqkv, amp * 1.7f, &seed), *wo = random_array(nwo, amp, &seed);
    float *bqkv = random_array(qw + 2 * kvw, 0.1f, &seed), *bo = random_array(dm, 0.1f, &seed);
    float *x = random_array(nx, 1.0f, &seed), *y = malloc(nx * 4), *ref = malloc(nx * 4);
    vkattn_mha *layer = NULL;
    vkattn_buffer *bx = NULL, *by = NULL;
    vkattn_timer *timer = NULL;
    int status = 1;
    if (!wqkv || !wo || !bqkv || !bo || !x || !y || !ref) {
        cli_error("out of memory");
        goto done;
    }
    if (dtype == VKATTN_DTYPE_F16) { /* the reference sees what the device stores */
        round_f16(wqkv, nwqkv);
        round_f16(wo, nwo);
        round_f16(bqkv, qw + 2 * kvw);
        round_f16(bo, dm);
        round_f16(x, nx);
    }
    vkattn_mha_desc desc = {.embed_dim = dm, .num_heads = c->hq, .num_kv_heads = c->hkv,
                            .bias = true, .dtype = dtype};
    vkattn_mha_weights w = {.wqkv = wqkv, .wo = wo, .bqkv = bqkv, .bo = bo};
    int64_t shape[3] = {1, tokens, dm};
    size_t es = vkattn_dtype_size(dtype);
    void *host = dtype == VKATTN_DTYPE_F16 ? malloc(nx * 2) : (void *)x;
    if (!host)
        goto done;
    if (dtype == VKATTN_DTYPE_F16)
        for (size_t i = 0; i < nx; i++)
            ((uint16_t *)host)[i] = vkattn_f32_to_f16(x[i]);
    vkattn_buffer_desc bd = {.size = nx * es};
    vkattn_result r = vkattn_mha_create(ctx, &desc, &layer);
    if (r == VKATTN_SUCCESS)
        r = vkattn_mha_set_weights(layer, &w);
    if (r == VKATTN_SUCCESS)
        r = vkattn_buffer_create(ctx, &bd, &bx);
    if (r == VKATTN_SUCCESS)
        r = vkattn_buffer_create(ctx, &bd, &by);
    if (r == VKATTN_SUCCESS)
        r = vkattn_buffer_upload(bx, 0, host, nx * es);
    if (host != x)
        free(host);
    if (r == VKATTN_SUCCESS)
        r = vkattn_mha_reserve(layer, 1, tokens, tokens);
    bool timed = vkattn_context_device_info(ctx)->timestamps;
    if (r == VKATTN_SUCCESS && timed)
        r = vkattn_timer_create(ctx, 1, &timer);
    vkattn_mha_forward_args fa = {.x = vkattn_tensor_make(bx, 0, dtype, 3, shape),
                                  .y = vkattn_tensor_make(by, 0, dtype, 3, shape), .causal = true};
    double ms[4] = {0};
    for (int run = 0; r == VKATTN_SUCCESS && run < 4; run++) { /* run 0: warm-up */
        VkCommandBuffer cmd;
        r = vkattn_commands_begin(ctx, &cmd);
        if (r != VKATTN_SUCCESS)
            break;
        if (timed)
            r = vkattn_cmd_timer_begin(timer, cmd, 0);
        if (r == VKATTN_SUCCESS)
            r = vkattn_cmd_mha_forward(layer, cmd, &fa);
        if (r == VKATTN_SUCCESS && timed)
            r = vkattn_cmd_timer_end(timer, cmd, 0);
        if (r != VKATTN_SUCCESS) {
            vkattn_commands_discard(ctx);
            break;
        }
        r = vkattn_commands_submit(ctx);
        if (r == VKATTN_SUCCESS && timed)
            r = vkattn_timer_read_ms(timer, 0, &ms[run]);
    }
    if (r != VKATTN_SUCCESS) {
        cli_error("%s: %s", c->name, vkattn_context_last_error(ctx));
        goto done;
    }
    uint16_t *raw = dtype == VKATTN_DTYPE_F16 ? malloc(nx * 2) : NULL;
    r = vkattn_buffer_download(by, 0, raw ? (void *)raw : (void *)y, nx * es);
    if (raw) {
        for (size_t i = 0; i < nx; i++)
            y[i] = vkattn_f16_to_f32(raw[i]);
        free(raw);
    }
    vkattn_ref_mha_args ra = {.x = vkattn_host_tensor_make(x, VKATTN_DTYPE_F32, 3, shape),
                              .y = vkattn_host_tensor_make(ref, VKATTN_DTYPE_F32, 3, shape), .causal = true};
    char err[512];
    if (r != VKATTN_SUCCESS || vkattn_ref_mha(&desc, &w, &ra, err, sizeof err) != VKATTN_SUCCESS) {
        cli_error("%s: %s", c->name, r != VKATTN_SUCCESS ? vkattn_context_last_error(ctx) : err);
        goto done;
    }
    double max_err = 0, max_ref = 0;
    size_t nonfinite = 0;
    for (size_t i = 0; i < nx; i++) {
        if (!isfinite(y[i]))
            nonfinite++;
        else if (fabs((double)y[i] - ref[i]) > max_err)
            max_err = fabs((double)y[i] - ref[i]);
        if (fabs(ref[i]) > max_ref)
            max_ref = fabs(ref[i]);
    }
    double rel = max_err / (max_ref > 0 ? max_ref : 1), tol = dtype == VKATTN_DTYPE_F16 ? 1.5e-2 : 2e-4;
    qsort(ms + 1, 3, sizeof ms[0], compare_doubles);
    double flops = 2.0 * tokens * dm * (qw + 2.0 * kvw) + 2.0 * tokens * qw * dm +
                   4.0 * c->hq * dh * (tokens * (tokens + 1.0) / 2);
    status = nonfinite || rel > tol;
    printf("%-28s %s  B=1 T=%-4u Dm=%-4u Hq=%-2u Hkv=%-2u Dh=%-3u causal  GPU %8.2f ms  %6.1f GFLOP/s  "
           "max rel error %.2e (tol %.1e)%s\n",
           c->name, vkattn_dtype_name(dtype), tokens, dm, c->hq, c->hkv, dh, ms[2],
           ms[2] > 0 ? flops / (ms[2] * 1e6) : 0.0, rel, tol,
           status ? (nonfinite ? "  FAILED: non-finite values" : "  FAILED") : "  ok");
done:
    vkattn_timer_destroy(timer);
    vkattn_buffer_destroy(bx);
    vkattn_buffer_destroy(by);
    vkattn_mha_destroy(layer);
    free(wqkv);
    free(wo);
    free(bqkv);
    free(bo);
    free(x);
    free(y);
    free(ref);
    return status;
}

int cli_demo(int argc, char **argv)
{
    cli_device_options o = {0};
    uint32_t tokens = 128;
    for (int i = 1; i < argc; i++) {
        int used = cli_parse_device_option(argc, argv, &i, &o);
        if (used < 0)
            return 2;
        if (used)
            continue;
        if (strcmp(argv[i], "--tokens") == 0 && i + 1 < argc) {
            char *end;
            unsigned long t = strtoul(argv[++i], &end, 10);
            if (*end || t == 0 || t > 8192) {
                cli_error("--tokens \"%s\": expected an integer in 1..8192", argv[i]);
                return 2;
            }
            tokens = (uint32_t)t;
        } else if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            printf("%s%s", help_text, cli_device_options_help);
            return 0;
        } else {
            cli_error("demo: unknown argument \"%s\" (see vkattn demo --help)", argv[i]);
            return 2;
        }
    }
    vkattn_context *ctx = cli_open(&o);
    if (!ctx)
        return 1;
    printf("device: %s\n", vkattn_context_device_info(ctx)->name);
    static const layer_case cases[] = {
        {"gpt2-small (MHA)", 768, 12, 12},
        {"llama-3-8b (GQA 32/8)", 4096, 32, 8},
    };
    int failed = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        for (int d = 0; d < 2; d++)
            failed += run_case(ctx, &cases[i], d ? VKATTN_DTYPE_F16 : VKATTN_DTYPE_F32, tokens);
    if (cli_close(ctx, &o))
        failed++;
    return failed ? 1 : 0;
}
