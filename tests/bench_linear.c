/* Throughput of the linear op on the default device (or VKATTN_DEVICE), with
 * GPU timestamps: median of 7 runs after a warm-up, each run interleaved
 * with an FMA-peak probe (shaders/linear_peak.comp) and a texel-buffer read of
 * W (shaders/linear_stream.comp), so the fractions of the moment's compute
 * peak and streaming rate can be read despite a noisy shared machine.
 *   bench_linear            the brief's shapes: 1024x6144x4096, 1x6144x4096
 *   bench_linear M N K      one shape (f32 and f16 weights)
 *   bench_linear qkv        an MHA step's packed QKV projection (Dm 4096, Hq 32,
 *                           Hkv 8, Dh 128: 6144x4096) for decode (B 1..8, T 1)
 *                           and prefill (T 1024), writing K and V head-split into
 *                           tensors or appending them into a paged KV cache
 * Not a test: built beside them, run by hand. */
#include "internal.h"
#include "kv_cache.h"
#include "linear.h"
#include "linear_peak_spv.h"
#include "linear_stream_spv.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RUNS 7

#define CHECK(expr)                                                                       \
    do {                                                                                  \
        vkattn_result r_ = (expr);                                                        \
        if (r_ != VKATTN_SUCCESS) {                                                       \
            fprintf(stderr, "%s: %s (%s)\n", #expr, vkattn_result_name(r_),               \
                    vkattn_context_last_error(ctx));                                      \
            exit(1);                                                                      \
        }                                                                                 \
    } while (0)

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

typedef struct peak {
    vkattn_kernel kernel;
    vkattn_spirv spirv;
    vkattn_pipeline *pipeline;
    vkattn_buffer *out;
} peak;

#define PEAK_GROUPS 256u
#define PEAK_ITERATIONS 2000u

static void peak_init(vkattn_context *ctx, peak *p)
{
    p->spirv = (vkattn_spirv){linear_peak_spv, sizeof linear_peak_spv};
    p->kernel = (vkattn_kernel){.name = "linear_peak", .spirv = &p->spirv, .binding_count = 1,
                                .bindings = {VKATTN_BINDING_STORAGE}, .push_size = 8};
    CHECK(vkattn_pipeline_get(ctx, &p->kernel, NULL, 0, &p->pipeline));
    vkattn_buffer_desc d = {.size = PEAK_GROUPS * 64 * 4};
    CHECK(vkattn_buffer_create(ctx, &d, &p->out));
}

/* GFLOP/s of the FMA probe, one run. */
static double peak_run(vkattn_context *ctx, peak *p, vkattn_timer *timer)
{
    struct {
        uint32_t iterations;
        float seed;
    } push = {PEAK_ITERATIONS, 0.5f};
    vkattn_binding b = {p->out, 0, PEAK_GROUPS * 64 * 4, VK_FORMAT_UNDEFINED};
    VkCommandBuffer cmd;
    CHECK(vkattn_commands_begin(ctx, &cmd));
    CHECK(vkattn_cmd_timer_begin(timer, cmd, 0));
    CHECK(vkattn_cmd_dispatch(ctx, cmd, p->pipeline, &b, &push, PEAK_GROUPS, 1, 1));
    CHECK(vkattn_cmd_timer_end(timer, cmd, 0));
    CHECK(vkattn_commands_submit(ctx));
    double ms;
    CHECK(vkattn_timer_read_ms(timer, 0, &ms));
    return (double)PEAK_GROUPS * 64 * PEAK_ITERATIONS * 16 * 12 * 2 / (ms * 1e6);
}

/* GB/s of a plain texel-buffer read of `bytes` of `b` as dtype (one run):
 * the streaming rate the GEMV is measured against. */
static double stream_run(vkattn_context *ctx, peak *p, vkattn_timer *timer, vkattn_buffer *b,
                         uint64_t bytes, vkattn_dtype dt)
{
    static vkattn_spirv spirv = {linear_stream_spv, sizeof linear_stream_spv};
    static const vkattn_kernel kernel = {.name = "linear_stream", .spirv = &spirv, .binding_count = 2,
                                         .bindings = {VKATTN_BINDING_TEXEL, VKATTN_BINDING_STORAGE},
                                         .push_size = 8};
    vkattn_pipeline *pipeline;
    CHECK(vkattn_pipeline_get(ctx, &kernel, NULL, 0, &pipeline));
    vkattn_binding bind[2] = {{0}, {p->out, 0, PEAK_GROUPS * 64 * 4, VK_FORMAT_UNDEFINED}};
    uint32_t first;
    CHECK(vkattn_bind_texel_window(ctx, b, 0, bytes, dt, &bind[0], &first));
    struct {
        uint32_t texels, invocations;
    } push = {(uint32_t)(bytes / (4 * vkattn_dtype_size(dt))), PEAK_GROUPS * 64};
    VkCommandBuffer cmd;
    CHECK(vkattn_commands_begin(ctx, &cmd));
    CHECK(vkattn_cmd_timer_begin(timer, cmd, 0));
    CHECK(vkattn_cmd_dispatch(ctx, cmd, pipeline, bind, &push, PEAK_GROUPS, 1, 1));
    CHECK(vkattn_cmd_timer_end(timer, cmd, 0));
    CHECK(vkattn_commands_submit(ctx));
    double ms;
    CHECK(vkattn_timer_read_ms(timer, 0, &ms));
    return (double)bytes / (ms * 1e6);
}

static vkattn_buffer *filled(vkattn_context *ctx, size_t count, vkattn_dtype dt)
{
    size_t es = vkattn_dtype_size(dt);
    uint8_t *host = malloc(count * es);
    uint32_t s = 12345;
    for (size_t i = 0; i < count; i++) {
        s = s * 1664525u + 1013904223u;
        float v = (float)(s >> 8) / 16777216.0f - 0.5f;
        if (dt == VKATTN_DTYPE_F32)
            memcpy(host + i * 4, &v, 4);
        else {
            uint16_t h = vkattn_f32_to_f16(v);
            memcpy(host + i * 2, &h, 2);
        }
    }
    vkattn_buffer_desc d = {.size = count * es};
    vkattn_buffer *b;
    CHECK(vkattn_buffer_create(ctx, &d, &b));
    CHECK(vkattn_buffer_upload(b, 0, host, count * es));
    free(host);
    return b;
}

static void bench(vkattn_context *ctx, peak *p, vkattn_timer *timer, int64_t M, int64_t N,
                  int64_t K, vkattn_dtype wdt)
{
    const vkattn_dtype f32 = VKATTN_DTYPE_F32;
    vkattn_buffer *bx = filled(ctx, (size_t)(M * K), f32), *bw = filled(ctx, (size_t)(N * K), wdt);
    vkattn_buffer *by = filled(ctx, (size_t)(M * N), f32);
    vkattn_linear_args a = {vkattn_tensor_make(bx, 0, f32, 2, (int64_t[]){M, K}),
                            vkattn_tensor_make(bw, 0, wdt, 2, (int64_t[]){N, K}),
                            {0},
                            vkattn_tensor_make(by, 0, f32, 2, (int64_t[]){M, N})};
    double t[RUNS], pk[RUNS], st[RUNS];
    uint64_t wbytes = (uint64_t)(N * K) * vkattn_dtype_size(wdt);
    bool stream = ctx->info.texel_inputs &&
                  wbytes / (4 * vkattn_dtype_size(wdt)) <= ctx->info.max_texel_buffer_elements;
    for (int i = -1; i < RUNS; i++) {
        VkCommandBuffer cmd;
        CHECK(vkattn_commands_begin(ctx, &cmd));
        CHECK(vkattn_cmd_timer_begin(timer, cmd, 1));
        CHECK(vkattn_cmd_linear(ctx, cmd, &a));
        CHECK(vkattn_cmd_timer_end(timer, cmd, 1));
        CHECK(vkattn_commands_submit(ctx));
        double ms;
        CHECK(vkattn_timer_read_ms(timer, 1, &ms));
        if (i >= 0) {
            t[i] = ms;
            pk[i] = peak_run(ctx, p, timer);
            st[i] = stream ? stream_run(ctx, p, timer, bw, wbytes, wdt) : 0.0;
        }
    }
    qsort(t, RUNS, sizeof t[0], cmp_double);
    qsort(pk, RUNS, sizeof pk[0], cmp_double);
    qsort(st, RUNS, sizeof st[0], cmp_double);
    double ms = t[RUNS / 2], flops = 2.0 * (double)M * (double)N * (double)K;
    double bytes = (double)N * (double)K * (double)vkattn_dtype_size(wdt) + 4.0 * (double)(M * K + M * N);
    double gflops = flops / (ms * 1e6);
    printf("{\"op\": \"linear\", \"M\": %lld, \"N\": %lld, \"K\": %lld, \"w\": \"%s\", "
           "\"ms\": %.3f, \"ms_min\": %.3f, \"ms_max\": %.3f, \"gflops\": %.2f, \"gbps\": %.2f, "
           "\"peak_gflops\": %.1f, \"of_peak\": %.3f, \"stream_gbps\": %.2f, \"of_stream\": %.3f}\n",
           (long long)M, (long long)N, (long long)K, vkattn_dtype_name(wdt), ms, t[0], t[RUNS - 1],
           gflops, bytes / (ms * 1e6), pk[RUNS / 2], gflops / pk[RUNS / 2], st[RUNS / 2],
           st[RUNS / 2] > 0 ? bytes / (ms * 1e6) / st[RUNS / 2] : 0.0);
    fflush(stdout);
    vkattn_buffer_destroy(bx);
    vkattn_buffer_destroy(bw);
    vkattn_buffer_destroy(by);
}

/* Median ms of RUNS recordings of `a` after a warm-up; with a cache, each run
 * records the step's metadata first (outside the timed interval) and the
 * sequences are truncated back afterwards. */
static double time_segments(vkattn_context *ctx, vkattn_timer *timer,
                            const vkattn_linear_segments_args *a, const uint32_t *sequences)
{
    double t[RUNS];
    vkattn_linear_segments_args run = *a;
    vkattn_linear_cache_dst cd = {0};
    vkattn_kv_cache *cache = a->cache ? a->cache->cache : NULL;
    if (cache) {
        cd = *a->cache;
        run.cache = &cd;
    }
    for (int i = -1; i < RUNS; i++) {
        VkCommandBuffer cmd;
        vkattn_binding meta;
        CHECK(vkattn_commands_begin(ctx, &cmd));
        if (cache) {
            vkattn_kv_step step;
            CHECK(vkattn_kv_step_check(cache, cd.batch, sequences, cd.new_tokens, "", &step));
            CHECK(vkattn_kv_step_record(&step, cmd, &meta));
            cd.meta = &meta;
        }
        CHECK(vkattn_cmd_timer_begin(timer, cmd, 1));
        CHECK(vkattn_cmd_linear_segments(ctx, cmd, &run));
        CHECK(vkattn_cmd_timer_end(timer, cmd, 1));
        CHECK(vkattn_commands_submit(ctx));
        for (uint32_t b = 0; cache && b < cd.batch; b++)
            CHECK(vkattn_kv_cache_truncate(cache, sequences[b], 0));
        double ms;
        CHECK(vkattn_timer_read_ms(timer, 1, &ms));
        if (i >= 0)
            t[i] = ms;
    }
    qsort(t, RUNS, sizeof t[0], cmp_double);
    return t[RUNS / 2];
}

/* The packed QKV projection of an MHA step: Q head-split into a tensor, K and
 * V either head-split into tensors or appended into a paged f32 KV cache
 * (block size 16). */
static void bench_qkv(vkattn_context *ctx, vkattn_timer *timer, uint32_t B, uint32_t T,
                      vkattn_dtype wdt, bool to_cache)
{
    const vkattn_dtype f32 = VKATTN_DTYPE_F32;
    const uint32_t dm = 4096, hq = 32, hkv = 8, dh = 128, n = (hq + 2 * hkv) * dh;
    const int64_t M = (int64_t)B * T;
    vkattn_buffer *bx = filled(ctx, (size_t)M * dm, f32), *bw = filled(ctx, (size_t)n * dm, wdt);
    vkattn_buffer *bq = filled(ctx, (size_t)M * hq * dh, f32);
    vkattn_buffer *bkv = filled(ctx, (size_t)M * 2 * hkv * dh, f32);
    vkattn_linear_segments_args a = {0};
    a.x = vkattn_tensor_make(bx, 0, f32, 3, (int64_t[]){B, T, dm});
    a.w = vkattn_tensor_make(bw, 0, wdt, 2, (int64_t[]){n, dm});
    a.segment_count = 3;
    a.segments[0] = (vkattn_linear_segment){hq * dh, dh,
                                            vkattn_tensor_make(bq, 0, f32, 4,
                                                               (int64_t[]){B, hq, T, dh})};
    vkattn_kv_cache *cache = NULL;
    uint32_t sequences[8] = {0, 1, 2, 3, 4, 5, 6, 7};
    vkattn_linear_cache_dst cd = {0};
    if (to_cache) {
        vkattn_kv_cache_desc desc = {.num_kv_heads = hkv, .num_heads = hq, .head_dim = dh,
                                     .max_sequences = B, .capacity = T, .block_size = 16};
        CHECK(vkattn_kv_cache_create(ctx, &desc, &cache));
        cd = (vkattn_linear_cache_dst){cache, NULL, B, T};
        a.cache = &cd;
        a.segments[1] = (vkattn_linear_segment){.columns = hkv * dh, .head_dim = dh,
                                                .target = VKATTN_LINEAR_TO_K_POOL};
        a.segments[2] = (vkattn_linear_segment){.columns = hkv * dh, .head_dim = dh,
                                                .target = VKATTN_LINEAR_TO_V_POOL};
    } else {
        int64_t shape[4] = {B, hkv, T, dh};
        uint64_t half = (uint64_t)M * hkv * dh * 4;
        a.segments[1] = (vkattn_linear_segment){hkv * dh, dh,
                                                vkattn_tensor_make(bkv, 0, f32, 4, shape)};
        a.segments[2] = (vkattn_linear_segment){hkv * dh, dh,
                                                vkattn_tensor_make(bkv, half, f32, 4, shape)};
    }
    double ms = time_segments(ctx, timer, &a, sequences);
    double gflops = 2.0 * (double)M * n * dm / (ms * 1e6);
    printf("{\"op\": \"qkv\", \"B\": %u, \"T\": %u, \"N\": %u, \"K\": %u, \"w\": \"%s\", "
           "\"kv\": \"%s\", \"ms\": %.3f, \"gflops\": %.2f}\n",
           B, T, n, dm, vkattn_dtype_name(wdt), to_cache ? "cache" : "tensors", ms, gflops);
    fflush(stdout);
    vkattn_kv_cache_destroy(cache);
    vkattn_buffer_destroy(bx);
    vkattn_buffer_destroy(bw);
    vkattn_buffer_destroy(bq);
    vkattn_buffer_destroy(bkv);
}

int main(int argc, char **argv)
{
    vkattn_context *ctx = NULL;
    vkattn_context_desc desc = {0};
    desc.device = getenv("VKATTN_DEVICE");
    if (vkattn_context_create(&desc, &ctx) != VKATTN_SUCCESS) {
        fprintf(stderr, "no context\n");
        return 1;
    }
    const vkattn_device_info *info = vkattn_context_device_info(ctx);
    fprintf(stderr, "device: %s (subgroup %u, %s kernels, %s inputs)\n", info->name,
            info->subgroup_size, info->subgroup_kernels ? "subgroup" : "shared-memory",
            info->texel_inputs ? "texel" : "storage");
    vkattn_timer *timer;
    CHECK(vkattn_timer_create(ctx, 2, &timer));
    peak p;
    peak_init(ctx, &p);
    const vkattn_dtype ws[2] = {VKATTN_DTYPE_F32, VKATTN_DTYPE_F16};
    if (argc == 2 && strcmp(argv[1], "qkv") == 0) {
        /* tensors and cache interleaved, so both see the same moment */
        static const uint32_t shapes[4][2] = {{1, 1}, {4, 1}, {8, 1}, {1, 1024}};
        for (int s = 0; s < 4; s++)
            for (int i = 0; i < 2; i++)
                for (int c = 0; c < 2; c++)
                    bench_qkv(ctx, timer, shapes[s][0], shapes[s][1], ws[i], c == 1);
    } else if (argc == 4) {
        for (int i = 0; i < 2; i++)
            bench(ctx, &p, timer, atoll(argv[1]), atoll(argv[2]), atoll(argv[3]), ws[i]);
    } else {
        for (int i = 0; i < 2; i++)
            bench(ctx, &p, timer, 1024, 6144, 4096, ws[i]);
        for (int i = 0; i < 2; i++)
            bench(ctx, &p, timer, 1, 6144, 4096, ws[i]);
    }
    vkattn_buffer_destroy(p.out);
    vkattn_timer_destroy(timer);
    vkattn_context_destroy(ctx);
    return 0;
}
