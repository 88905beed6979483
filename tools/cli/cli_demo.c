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

/* One case's host arrays: seeded random weights and input (rounded to f16
 * when the device stores f16: the reference sees what the device does), and
 * room for the device's result and the reference's. */
typedef struct case_data {
    float *wqkv, *wo, *bqkv, *bo, *x, *y, *ref;
    size_t nwqkv, nwo, nbqkv, nx;
} case_data;

/* The case's device objects. */
typedef struct case_device {
    vkattn_mha *layer;
    vkattn_buffer *bx, *by;
    vkattn_timer *timer; /* NULL: the device has no timestamps */
} case_device;

static int make_data(case_data *d, const layer_case *c, vkattn_dtype dtype, uint32_t tokens)
{
    const uint32_t dm = c->dm, dh = c->dm / c->hq, qw = c->hq * dh, kvw = c->hkv * dh;
    uint64_t seed = 0x5eed0000u + dm + c->hkv;
    d->nwqkv = (size_t)(qw + 2 * kvw) * dm;
    d->nwo = (size_t)dm * qw;
    d->nbqkv = qw + 2 * kvw;
    d->nx = (size_t)tokens * dm;
    float amp = 1.0f / sqrtf((float)dm);
    d->wqkv = random_array(d->nwqkv, amp * 1.7f, &seed);
    d->wo = random_array(d->nwo, amp, &seed);
    d->bqkv = random_array(d->nbqkv, 0.1f, &seed);
    d->bo = random_array(dm, 0.1f, &seed);
    d->x = random_array(d->nx, 1.0f, &seed);
    d->y = malloc(d->nx * 4);
    d->ref = malloc(d->nx * 4);
    if (!d->wqkv || !d->wo || !d->bqkv || !d->bo || !d->x || !d->y || !d->ref) {
        cli_error("out of memory");
        return -1;
    }
    if (dtype == VKATTN_DTYPE_F16) {
        round_f16(d->wqkv, d->nwqkv);
        round_f16(d->wo, d->nwo);
        round_f16(d->bqkv, d->nbqkv);
        round_f16(d->bo, dm);
        round_f16(d->x, d->nx);
    }
    return 0;
}

static void free_data(case_data *d)
{
    free(d->wqkv);
    free(d->wo);
    free(d->bqkv);
    free(d->bo);
    free(d->x);
    free(d->y);
    free(d->ref);
}

/* The layer, its input uploaded (`host`: x as the device stores it) and its
 * output buffer, ready for `tokens` tokens; the timer when `timed`. */
static vkattn_result setup(vkattn_context *ctx, case_device *g, const vkattn_mha_desc *desc,
                           const vkattn_mha_weights *w, const void *host, size_t bytes,
                           uint32_t tokens, bool timed)
{
    vkattn_buffer_desc bd = {.size = bytes};
    vkattn_result r = vkattn_mha_create(ctx, desc, &g->layer);
    if (r == VKATTN_SUCCESS)
        r = vkattn_mha_set_weights(g->layer, w);
    if (r == VKATTN_SUCCESS)
        r = vkattn_buffer_create(ctx, &bd, &g->bx);
    if (r == VKATTN_SUCCESS)
        r = vkattn_buffer_create(ctx, &bd, &g->by);
    if (r == VKATTN_SUCCESS)
        r = vkattn_buffer_upload(g->bx, 0, host, bytes);
    if (r == VKATTN_SUCCESS)
        r = vkattn_mha_reserve(g->layer, 1, tokens, tokens);
    if (r == VKATTN_SUCCESS && timed)
        r = vkattn_timer_create(ctx, 1, &g->timer);
    return r;
}

/* Run 0 warms up, runs 1 to 3 are timed into ms[1..3] (when the device has
 * timestamps). */
static vkattn_result timed_runs(vkattn_context *ctx, const case_device *g,
                                const vkattn_mha_forward_args *fa, double ms[4])
{
    vkattn_result r = VKATTN_SUCCESS;
    for (int run = 0; r == VKATTN_SUCCESS && run < 4; run++) {
        VkCommandBuffer cmd;
        r = vkattn_commands_begin(ctx, &cmd);
        if (r != VKATTN_SUCCESS)
            break;
        if (g->timer)
            r = vkattn_cmd_timer_begin(g->timer, cmd, 0);
        if (r == VKATTN_SUCCESS)
            r = vkattn_cmd_mha_forward(g->layer, cmd, fa);
        if (r == VKATTN_SUCCESS && g->timer)
            r = vkattn_cmd_timer_end(g->timer, cmd, 0);
        if (r != VKATTN_SUCCESS) {
            vkattn_commands_discard(ctx);
            break;
        }
        r = vkattn_commands_submit(ctx);
        if (r == VKATTN_SUCCESS && g->timer)
            r = vkattn_timer_read_ms(g->timer, 0, &ms[run]);
    }
    return r;
}

/* The result as f32 into y. */
static vkattn_result download(vkattn_buffer *by, float *y, size_t n, vkattn_dtype dtype)
{
    uint16_t *raw = dtype == VKATTN_DTYPE_F16 ? malloc(n * 2) : NULL;
    vkattn_result r =
        vkattn_buffer_download(by, 0, raw ? (void *)raw : (void *)y, n * vkattn_dtype_size(dtype));
    if (raw) {
        for (size_t i = 0; i < n; i++)
            y[i] = vkattn_f16_to_f32(raw[i]);
        free(raw);
    }
    return r;
}

/* Max |y - ref| / max |ref|, and how many of y are not finite. */
static double max_rel_error(const float *y, const float *ref, size_t n, size_t *nonfinite)
{
    double max_err = 0, max_ref = 0;
    *nonfinite = 0;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(y[i]))
            ++*nonfinite;
        else if (fabs((double)y[i] - ref[i]) > max_err)
            max_err = fabs((double)y[i] - ref[i]);
        if (fabs(ref[i]) > max_ref)
            max_ref = fabs(ref[i]);
    }
    return max_err / (max_ref > 0 ? max_ref : 1);
}

/* The case's line: shape, median GPU time, throughput, error; 0 when the
 * check passes. */
static int report(const layer_case *c, vkattn_dtype dtype, uint32_t tokens, double ms[4],
                  const case_data *d)
{
    const uint32_t dm = c->dm, dh = c->dm / c->hq, qw = c->hq * dh, kvw = c->hkv * dh;
    size_t nonfinite;
    double rel = max_rel_error(d->y, d->ref, d->nx, &nonfinite);
    double tol = dtype == VKATTN_DTYPE_F16 ? 1.5e-2 : 2e-4;
    qsort(ms + 1, 3, sizeof ms[0], compare_doubles);
    double flops = 2.0 * tokens * dm * (qw + 2.0 * kvw) + 2.0 * tokens * qw * dm +
                   4.0 * c->hq * dh * (tokens * (tokens + 1.0) / 2);
    int status = nonfinite || rel > tol;
    printf("%-28s %s  B=1 T=%-4u Dm=%-4u Hq=%-2u Hkv=%-2u Dh=%-3u causal  GPU %8.2f ms  %6.1f "
           "GFLOP/s  "
           "max rel error %.2e (tol %.1e)%s\n",
           c->name, vkattn_dtype_name(dtype), tokens, dm, c->hq, c->hkv, dh, ms[2],
           ms[2] > 0 ? flops / (ms[2] * 1e6) : 0.0, rel, tol,
           status ? (nonfinite ? "  FAILED: non-finite values" : "  FAILED") : "  ok");
    return status;
}

/* The layer on the device, timed; its result against the CPU reference. */
static int run_layer(vkattn_context *ctx, case_device *g, const layer_case *c, vkattn_dtype dtype,
                     uint32_t tokens, const case_data *d)
{
    vkattn_mha_desc desc = {.embed_dim = c->dm,
                            .num_heads = c->hq,
                            .num_kv_heads = c->hkv,
                            .bias = true,
                            .dtype = dtype};
    vkattn_mha_weights w = {.wqkv = d->wqkv, .wo = d->wo, .bqkv = d->bqkv, .bo = d->bo};
    int64_t shape[3] = {1, tokens, c->dm};
    size_t bytes = d->nx * vkattn_dtype_size(dtype);
    /* x as the device stores it */
    void *host = dtype == VKATTN_DTYPE_F16 ? malloc(d->nx * 2) : (void *)d->x;
    if (!host)
        return 1;
    if (dtype == VKATTN_DTYPE_F16)
        for (size_t i = 0; i < d->nx; i++)
            ((uint16_t *)host)[i] = vkattn_f32_to_f16(d->x[i]);
    bool timed = vkattn_context_device_info(ctx)->timestamps;
    vkattn_result r = setup(ctx, g, &desc, &w, host, bytes, tokens, timed);
    if (host != d->x)
        free(host);
    vkattn_mha_forward_args fa = {.x = vkattn_tensor_make(g->bx, 0, dtype, 3, shape),
                                  .y = vkattn_tensor_make(g->by, 0, dtype, 3, shape),
                                  .causal = true};
    double ms[4] = {0};
    if (r == VKATTN_SUCCESS)
        r = timed_runs(ctx, g, &fa, ms);
    if (r != VKATTN_SUCCESS) {
        cli_error("%s: %s", c->name, vkattn_context_last_error(ctx));
        return 1;
    }
    r = download(g->by, d->y, d->nx, dtype);
    vkattn_ref_mha_args ra = {.x = vkattn_host_tensor_make(d->x, VKATTN_DTYPE_F32, 3, shape),
                              .y = vkattn_host_tensor_make(d->ref, VKATTN_DTYPE_F32, 3, shape),
                              .causal = true};
    char err[512];
    if (r != VKATTN_SUCCESS || vkattn_ref_mha(&desc, &w, &ra, err, sizeof err) != VKATTN_SUCCESS) {
        cli_error("%s: %s", c->name, r != VKATTN_SUCCESS ? vkattn_context_last_error(ctx) : err);
        return 1;
    }
    return report(c, dtype, tokens, ms, d);
}

/* One layer in one dtype: returns 0 when the check passes. */
static int run_case(vkattn_context *ctx, const layer_case *c, vkattn_dtype dtype, uint32_t tokens)
{
    case_data d = {0};
    case_device g = {0};
    int status =
        make_data(&d, c, dtype, tokens) != 0 ? 1 : run_layer(ctx, &g, c, dtype, tokens, &d);
    vkattn_timer_destroy(g.timer);
    vkattn_buffer_destroy(g.bx);
    vkattn_buffer_destroy(g.by);
    vkattn_mha_destroy(g.layer);
    free_data(&d);
    return status;
}

static int parse_option(void *user, int argc, char **argv, int *i)
{
    uint32_t *tokens = user;
    if (strcmp(argv[*i], "--tokens") == 0 && *i + 1 >= argc) {
        cli_error("demo: --tokens needs a value (see vkattn demo --help)");
        return 2;
    }
    if (strcmp(argv[*i], "--tokens") == 0) {
        char *end;
        unsigned long t = strtoul(argv[++*i], &end, 10);
        if (*end || t == 0 || t > 8192) {
            cli_error("--tokens \"%s\": expected an integer in 1..8192", argv[*i]);
            return 2;
        }
        *tokens = (uint32_t)t;
        return 0;
    }
    cli_error("demo: unknown argument \"%s\" (see vkattn demo --help)", argv[*i]);
    return 2;
}

int cli_demo(int argc, char **argv)
{
    cli_device_options o = {0};
    uint32_t tokens = 128;
    int code = cli_parse_args(argc, argv, &o, help_text, parse_option, &tokens);
    if (code != CLI_ARGS_OK)
        return code;
    vkattn_context *ctx = cli_stage_device_outputs(&o, "demo") == 0 ? cli_open(&o) : NULL;
    if (!ctx)
        return cli_close(NULL, &o, 1);
    printf("device: %s\n", vkattn_context_device_info(ctx)->name);
    static const layer_case cases[] = {
        {"gpt2-small (MHA)", 768, 12, 12},
        {"llama-3-8b (GQA 32/8)", 4096, 32, 8},
    };
    int failed = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        for (int d = 0; d < 2; d++)
            failed += run_case(ctx, &cases[i], d ? VKATTN_DTYPE_F16 : VKATTN_DTYPE_F32, tokens);
    return cli_close(ctx, &o, failed ? 1 : 0);
}
