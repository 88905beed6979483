/* vkattn-bench: the named cases of bench_cases.c, each timed with GPU
 * timestamps after a warm-up and interleaved with the limit kernel that bounds
 * it (bench_limits.c): rep i of the case, then rep i of the limit kernel, so
 * the host's drift (+-40% on shared CPU machines) hits both. One JSON line per
 * case:
 *   {"case", "device", "ms" (median), "ms_min", "ms_max", "reps", "gflops",
 *    "gbps", "peak_fraction", "limit", "limit_rate", ...shape}
 * peak_fraction = the case's rate / the median rate of its limit kernel in
 * this run: GFLOP/s over the FMA kernel's, or GB/s over the best read
 * binding's (the binding with the highest median). Backward cases time their
 * forward too, each rep forward, backward, limit kernel: "ms" and the rates
 * are the backward's, plus "fwd_ms" (median), "fwd_ms_min", "fwd_ms_max",
 * "fwd_gflops", "bwd_ms" (= ms) and "bwd_over_fwd" = bwd_ms / fwd_ms. Speed
 * is never asserted. */
#include "bench_cases.h"
#include "bench_common.h"
#include "bench_limits.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_REPS 1000
#define MAX_SELECTED 64

typedef struct options {
    const bench_case *selected[MAX_SELECTED];
    int nselected;
    int reps, warmup;
    uint64_t read_mb;
    bool peak, validate, tune, quiet;
    uint32_t context_flags; /* --no-texel-buffers, --kernels */
    const char *tuning;     /* tuning data file: loaded, and saved after --tune */
} options;

typedef struct bench {
    vkattn_context *ctx;
    vkattn_timer *timer;
    bench_limits *limits;
    char device[2 * VK_MAX_PHYSICAL_DEVICE_NAME_SIZE]; /* JSON-escaped */
    char driver[2 * VK_MAX_DRIVER_INFO_SIZE];          /* JSON-escaped driver_info */
    char kernels[64]; /* the context's families: "subgroup", "shared", "coopmat+shared", ... */
    const options *opt;
} bench;

/* Per-rep rates of the limit kernels of one run. */
typedef struct limit_samples {
    double fma[MAX_REPS];
    double read[BENCH_READ_BINDINGS][MAX_REPS];
} limit_samples;

static void json_escape(const char *s, char *out, size_t size)
{
    size_t o = 0;
    for (; *s && o + 3 < size; s++) {
        if (*s == '"' || *s == '\\')
            out[o++] = '\\';
        out[o++] = (unsigned char)*s < 0x20 ? ' ' : *s;
    }
    out[o] = '\0';
}

/* Runs the limit kernels of one rep and stores their rates at index i. */
static void limits_rep(bench *b, bool fma, bool read, limit_samples *s, int i)
{
    if (fma)
        s->fma[i] = bench_limits_fma(b->limits);
    for (int k = 0; read && k < BENCH_READ_BINDINGS; k++)
        s->read[k][i] = bench_limits_read(b->limits, (bench_read_binding)k);
}

/* The best read binding by median: its index and median GB/s (and every
 * binding's median in `medians`). */
static int best_read(bench *b, limit_samples *s, int reps, double *medians, double *best)
{
    int arg = 0;
    *best = 0;
    for (int k = 0; k < BENCH_READ_BINDINGS; k++) {
        medians[k] = bench_limits_has_read(b->limits, (bench_read_binding)k)
                         ? bench_median(s->read[k], reps)
                         : 0;
        if (medians[k] > *best) {
            *best = medians[k];
            arg = k;
        }
    }
    return arg;
}

static void run_peak(bench *b)
{
    int reps = b->opt->reps;
    limit_samples *s = calloc(1, sizeof *s);
    if (!s)
        bench_die(NULL, "out of host memory");
    for (int i = 0; i < reps; i++)
        limits_rep(b, true, true, s, i);
    double med[BENCH_READ_BINDINGS], best;
    int arg = best_read(b, s, reps, med, &best);
    double fma = bench_median(s->fma, reps);
    printf("{\"case\": \"peak\", \"device\": \"%s\", \"driver\": \"%s\", \"reps\": %d, "
           "\"fma_gflops\": %.2f, "
           "\"fma_gflops_min\": %.2f, \"fma_gflops_max\": %.2f, \"read_gbps\": %.3f, "
           "\"read_binding\": \"%s\", "
           "\"read_mb\": %.1f",
           b->device, b->driver, reps, fma, s->fma[0], s->fma[reps - 1], best,
           bench_limits_read_name(b->limits, (bench_read_binding)arg),
           (double)bench_limits_read_bytes(b->limits) / (1 << 20));
    for (int k = 0; k < BENCH_READ_BINDINGS; k++) {
        char config[64];
        bench_limits_read_config(b->limits, (bench_read_binding)k, config, sizeof config);
        if (bench_limits_has_read(b->limits, (bench_read_binding)k))
            printf(", \"%s_gbps\": %.3f, \"%s_pattern\": \"%s\"",
                   bench_limits_read_name(b->limits, (bench_read_binding)k), med[k],
                   bench_limits_read_name(b->limits, (bench_read_binding)k), config);
        else
            printf(", \"%s_gbps\": null", bench_limits_read_name(b->limits, (bench_read_binding)k));
    }
    printf("}\n");
    fflush(stdout);
    free(s);
}

/* One timed rep of the case (or of a backward case's forward): its GPU
 * milliseconds. */
static double case_rep(bench *b, bench_runner *r, bool forward)
{
    VkCommandBuffer cmd;
    double ms;
    BENCH_CHECK(b->ctx, vkattn_commands_begin(b->ctx, &cmd), "beginning a command buffer");
    bench_cmd_barrier(b->ctx, cmd);
    BENCH_CHECK(b->ctx, vkattn_cmd_timer_begin(b->timer, cmd, 0), "timer");
    if (forward)
        bench_runner_record_forward(r, cmd);
    else
        bench_runner_record(r, cmd);
    BENCH_CHECK(b->ctx, vkattn_cmd_timer_end(b->timer, cmd, 0), "timer");
    BENCH_CHECK(b->ctx, vkattn_commands_submit(b->ctx), "submitting a case");
    BENCH_CHECK(b->ctx, vkattn_timer_read_ms(b->timer, 0, &ms), "reading the timer");
    bench_runner_after(r);
    return ms;
}

static void run_case(bench *b, const bench_case *c)
{
    int reps = b->opt->reps;
    bool fma = c->limit == BENCH_LIMIT_FMA;
    bench_runner *r = bench_runner_create(b->ctx, c);
    if (b->opt->tune)
        BENCH_CHECK(b->ctx, bench_runner_tune(r, b->opt->quiet ? NULL : bench_tune_progress),
                    "tuning");
    bool backward = bench_case_is_backward(c);
    limit_samples *s = calloc(1, sizeof *s);
    double *ms = calloc(MAX_REPS, sizeof *ms), *fwd_ms = calloc(MAX_REPS, sizeof *fwd_ms);
    if (!s || !ms || !fwd_ms)
        bench_die(NULL, "out of host memory");
    /* i < 0: warm-up (pipelines, caches). A backward case's forward writes
     * what its backward reads. */
    for (int i = -b->opt->warmup; i < reps; i++) {
        double f = backward ? case_rep(b, r, true) : 0;
        double t = case_rep(b, r, false);
        limits_rep(b, fma, !fma, s, i < 0 ? 0 : i);
        if (i >= 0) {
            ms[i] = t;
            fwd_ms[i] = f;
        }
    }
    double med = bench_median(ms, reps), flops = bench_runner_flops(r),
           bytes = bench_runner_bytes(r);
    double gflops = flops / (med * 1e6), gbps = bytes / (med * 1e6), limit_rate, fraction;
    const char *limit_binding = NULL;
    if (fma) {
        limit_rate = bench_median(s->fma, reps);
        fraction = gflops / limit_rate;
    } else {
        double medians[BENCH_READ_BINDINGS];
        limit_binding = bench_limits_read_name(
            b->limits, (bench_read_binding)best_read(b, s, reps, medians, &limit_rate));
        fraction = limit_rate > 0 ? gbps / limit_rate : 0;
    }
    printf("{\"case\": \"%s\", \"device\": \"%s\", \"driver\": \"%s\", \"ms\": %.3f, \"ms_min\": "
           "%.3f, \"ms_max\": %.3f, "
           "\"reps\": %d, \"gflops\": %.2f, \"gbps\": %.3f, \"peak_fraction\": %.3f, \"limit\": "
           "\"%s\", "
           "\"limit_rate\": %.3f",
           c->name, b->device, b->driver, med, ms[0], ms[reps - 1], reps, gflops, gbps, fraction,
           fma ? "fma" : "read", limit_rate);
    if (limit_binding)
        printf(", \"limit_binding\": \"%s\"", limit_binding);
    printf(", \"kernels\": \"%s\"", b->kernels);
    if (c->kind == BENCH_DECODE || c->kind == BENCH_LAYER_STEP)
        printf(", \"tokens_per_s\": %.1f", c->b / (med * 1e-3));
    if (backward) {
        double fwd = bench_median(fwd_ms, reps);
        printf(", \"fwd_ms\": %.3f, \"fwd_ms_min\": %.3f, \"fwd_ms_max\": %.3f, "
               "\"fwd_gflops\": %.2f, \"bwd_ms\": %.3f, \"bwd_over_fwd\": %.3f",
               fwd, fwd_ms[0], fwd_ms[reps - 1], bench_runner_forward_flops(r) / (fwd * 1e6), med,
               med / fwd);
    }
    bench_case_print_shape(c, stdout);
    printf("}\n");
    fflush(stdout);
    free(fwd_ms);
    free(ms);
    free(s);
    bench_runner_destroy(r);
}

static int usage(FILE *f, int status)
{
    fprintf(
        f,
        "usage: vkattn-bench [--list] [--peak] [--case NAME[,NAME...]]... [--reps N] [--warmup N]\n"
        "                    [--read-mb N] [--validate] [--tune] [--tuning FILE] [--quiet]\n"
        "                    [--no-texel-buffers] [--kernels auto|subgroup|shared|coopmat]\n"
        "  --list       print the case names and exit\n"
        "  --peak       print the limit kernels' rates alone (with --case: then the cases)\n"
        "  --case       run these cases (repeatable; default: every case)\n"
        "  --reps       timed repetitions per case, interleaved with its limit kernel (default 7)\n"
        "  --warmup     untimed repetitions first (default 1)\n"
        "  --read-mb    size of the streaming-read buffer (default 64 on CPU drivers, 256 "
        "otherwise)\n"
        "  --validate   Khronos validation layer on; fail on any message (slow)\n"
        "  --tune       run the library's tuner for each case before timing it (progress on\n"
        "               stderr: a line redrawn per candidate on a terminal, else one per op)\n"
        "  --quiet      no progress lines\n"
        "  --no-texel-buffers     storage-buffer inputs only (VKATTN_CONTEXT_NO_TEXEL_BUFFERS)\n"
        "  --kernels K  the kernel family, as the vkattn tool's: auto (default: the device's\n"
        "               choice after its self-test), subgroup (VKATTN_CONTEXT_SUBGROUP_KERNELS)\n"
        "               shared (VKATTN_CONTEXT_NO_SUBGROUP_KERNELS) or coopmat\n"
        "               (VKATTN_CONTEXT_COOPMAT_KERNELS: the cooperative-matrix kernels for the\n"
        "               GEMMs and attention; the JSON lines' \"kernels\" says what ran)\n"
        "  --tuning F   start from the tuning data in file F (if it exists); with --tune, save to "
        "F\n"
        "One JSON line per case on stdout. Device: $VKATTN_DEVICE (index or name part) or "
        "automatic.\n");
    return status;
}

static bool parse_int(const char *s, long lo, long hi, long *out)
{
    char *end;
    long v = strtol(s, &end, 10);
    if (!*s || *end || v < lo || v > hi)
        return false;
    *out = v;
    return true;
}

/* Returns -1 to go on, else the exit status. */
static int parse(int argc, char **argv, options *o)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        long n;
        if (strcmp(a, "--list") == 0) {
            for (size_t k = 0; k < bench_case_count; k++)
                printf("%s\n", bench_cases[k].name);
            return 0;
        } else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            return usage(stdout, 0);
        } else if (strcmp(a, "--peak") == 0) {
            o->peak = true;
        } else if (strcmp(a, "--validate") == 0) {
            o->validate = true;
        } else if (strcmp(a, "--tune") == 0) {
            o->tune = true;
        } else if (strcmp(a, "--quiet") == 0) {
            o->quiet = true;
        } else if (strcmp(a, "--no-texel-buffers") == 0) {
            o->context_flags |= VKATTN_CONTEXT_NO_TEXEL_BUFFERS;
        } else if (strcmp(a, "--kernels") == 0 && v &&
                   (!strcmp(v, "auto") || !strcmp(v, "subgroup") || !strcmp(v, "shared") ||
                    !strcmp(v, "coopmat"))) {
            o->context_flags &=
                ~(uint32_t)(VKATTN_CONTEXT_SUBGROUP_KERNELS | VKATTN_CONTEXT_NO_SUBGROUP_KERNELS |
                            VKATTN_CONTEXT_COOPMAT_KERNELS);
            o->context_flags |= !strcmp(v, "subgroup")  ? VKATTN_CONTEXT_SUBGROUP_KERNELS
                                : !strcmp(v, "shared")  ? VKATTN_CONTEXT_NO_SUBGROUP_KERNELS
                                : !strcmp(v, "coopmat") ? VKATTN_CONTEXT_COOPMAT_KERNELS
                                                        : 0;
            i++;
        } else if (strcmp(a, "--tuning") == 0 && v) {
            o->tuning = v;
            i++;
        } else if (strcmp(a, "--case") == 0 && v) {
            for (const char *name = v; *name;) {
                size_t len = strcspn(name, ",");
                char one[128];
                snprintf(one, sizeof one, "%.*s", (int)(len < sizeof one ? len : sizeof one - 1),
                         name);
                name += len + (name[len] == ',');
                if (!one[0])
                    continue;
                const bench_case *c = bench_case_find(one);
                if (!c) {
                    fprintf(stderr, "vkattn-bench: no case \"%s\" (see --list)\n", one);
                    return 2;
                }
                if (o->nselected == MAX_SELECTED) {
                    fprintf(stderr, "vkattn-bench: more than %d cases asked for\n", MAX_SELECTED);
                    return 2;
                }
                o->selected[o->nselected++] = c;
            }
            i++;
        } else if (strcmp(a, "--reps") == 0 && v && parse_int(v, 1, MAX_REPS, &n)) {
            o->reps = (int)n;
            i++;
        } else if (strcmp(a, "--warmup") == 0 && v && parse_int(v, 0, 100, &n)) {
            o->warmup = (int)n;
            i++;
        } else if (strcmp(a, "--read-mb") == 0 && v && parse_int(v, 1, 1 << 16, &n)) {
            o->read_mb = (uint64_t)n;
            i++;
        } else {
            fprintf(stderr, "vkattn-bench: bad argument \"%s\"%s\n", a,
                    v || a[0] != '-' ? "" : " (missing value?)");
            return usage(stderr, 2);
        }
    }
    return -1;
}

static void log_message(void *user, vkattn_log_level level, const char *message)
{
    (void)user;
    if (level >= VKATTN_LOG_WARNING)
        fprintf(stderr, "vkattn-bench: [%s] %s\n", level == VKATTN_LOG_ERROR ? "error" : "warning",
                message);
}

int main(int argc, char **argv)
{
    options opt = {.reps = 7, .warmup = 1};
    int status = parse(argc, argv, &opt);
    if (status >= 0)
        return status;
    if (opt.tuning) { /* an unrelated file is neither used nor, after --tune, overwritten */
        FILE *f = fopen(opt.tuning, "rb");
        char head[16] = {0};
        size_t n = f ? fread(head, 1, sizeof head, f) : 0;
        if (f)
            fclose(f);
        size_t magic = strlen(VKATTN_TUNING_MAGIC);
        if (n && (n < magic || memcmp(head, VKATTN_TUNING_MAGIC, magic) != 0)) {
            fprintf(stderr, "vkattn-bench: --tuning \"%s\": not a vkattn tuning file\n",
                    opt.tuning);
            return 2;
        }
    }
    bench b = {.opt = &opt};
    vkattn_context_desc desc = {.device = getenv("VKATTN_DEVICE"),
                                .log = log_message,
                                .flags = (opt.validate ? VKATTN_CONTEXT_VALIDATION : 0) |
                                         opt.context_flags,
                                .tuning_path = opt.tuning};
    if (vkattn_context_create(&desc, &b.ctx) != VKATTN_SUCCESS)
        bench_die(NULL, "no usable Vulkan device (VKATTN_DEVICE picks one)");
    const vkattn_device_info *info = vkattn_context_device_info(b.ctx);
    json_escape(info->name, b.device, sizeof b.device);
    json_escape(info->driver_info, b.driver, sizeof b.driver);
    snprintf(b.kernels, sizeof b.kernels, "%s%s", info->coopmat_kernels ? "coopmat+" : "",
             info->subgroup_kernels ? "subgroup" : "shared");
    BENCH_CHECK(b.ctx, vkattn_timer_create(b.ctx, 1, &b.timer), "creating a timer");
    /* saved once now too: an unwritable --tuning path fails before minutes of tuning */
    if (opt.tune && opt.tuning)
        BENCH_CHECK(b.ctx, vkattn_context_save_tuning(b.ctx, opt.tuning),
                    "--tuning: saving the tuning data");
    if (!opt.read_mb) /* past the last-level cache (32 MiB L3 on this machine kind, 50+ MB on GPUs) */
        opt.read_mb = info->type == VKATTN_DEVICE_TYPE_CPU ? 64 : 256;
    b.limits = bench_limits_create(b.ctx, b.timer, opt.read_mb << 20);
    if (opt.peak)
        run_peak(&b);
    if (!opt.peak && opt.nselected == 0)
        for (size_t k = 0; k < bench_case_count; k++)
            run_case(&b, &bench_cases[k]);
    for (int k = 0; k < opt.nselected; k++)
        run_case(&b, opt.selected[k]);
    if (opt.tune && opt.tuning)
        BENCH_CHECK(b.ctx, vkattn_context_save_tuning(b.ctx, opt.tuning),
                    "--tuning: saving the tuning data");
    bench_limits_destroy(b.limits);
    vkattn_timer_destroy(b.timer);
    uint32_t errors = 0, warnings = 0;
    vkattn_context_validation_counts(b.ctx, &errors, &warnings);
    vkattn_context_destroy(b.ctx);
    if (errors || warnings) {
        fprintf(stderr, "vkattn-bench: %u validation errors, %u warnings\n", errors, warnings);
        return 1;
    }
    return 0;
}
