/* Decode over a KV cache on the default device (or VKATTN_DEVICE), with GPU
 * timestamps: one query per sequence, Hq 32, Hkv 8, Dh 128, f16 cache, batch
 * 1 and 8, cache lengths 1024 and 4096, contiguous and paged (blocks of 16)
 * caches; median of 7 runs after 2 warm-ups. Prints ms, tokens/s (sequences
 * decoded per second) and the effective bandwidth (bytes of K and V read /
 * time), beside the rate of a plain rgba16f texel-buffer read of as many bytes
 * (shaders/linear_stream.comp) run interleaved with it, so the fraction of
 * the moment's streaming rate can be read despite a noisy shared machine.
 *   bench_kv_attention              automatic split count
 *   bench_kv_attention S1 S2 ...    these kv_splits values (0: automatic)
 *   BENCH_PREFILL=T                 instead: T queries over a cache of T
 *                                   tokens (a prefill's attention), GFLOP/s
 * Not a test: built beside them, run by hand. */
#include "internal.h"
#include "linear_stream_spv.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RUNS 7
#define WARMUP 2
#define HQ 32
#define HKV 8
#define DH 128
#define CHUNK 512 /* tokens per append while filling */

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

/* A buffer of n random f16 values in [-1, 1). */
static vkattn_buffer *random_f16(vkattn_context *ctx, size_t n, uint32_t *seed)
{
    uint16_t *h = malloc(n * 2);
    if (!h)
        exit(1);
    for (size_t i = 0; i < n; i++) {
        *seed = *seed * 1664525u + 1013904223u;
        h[i] = vkattn_f32_to_f16((float)(*seed >> 8) / 8388608.0f - 1.0f);
    }
    vkattn_buffer *b;
    vkattn_buffer_desc d = {.size = n * 2};
    CHECK(vkattn_buffer_create(ctx, &d, &b));
    CHECK(vkattn_buffer_upload(b, 0, h, n * 2));
    free(h);
    return b;
}

/* GB/s of a texel-buffer read of the first `bytes` of `b` (f16), one run. */
static double stream_run(vkattn_context *ctx, vkattn_timer *timer, vkattn_buffer *b, uint64_t bytes,
                         vkattn_buffer *out)
{
    static vkattn_spirv spirv = {linear_stream_spv, sizeof linear_stream_spv};
    static const vkattn_kernel kernel = {.name = "linear_stream", .spirv = &spirv, .binding_count = 2,
                                         .bindings = {VKATTN_BINDING_TEXEL, VKATTN_BINDING_STORAGE},
                                         .push_size = 8};
    vkattn_pipeline *pipeline;
    CHECK(vkattn_pipeline_get(ctx, &kernel, NULL, 0, &pipeline));
    vkattn_binding bind[2] = {{0}, {out, 0, 256 * 64 * 4, VK_FORMAT_UNDEFINED}};
    uint32_t first;
    CHECK(vkattn_bind_texel_window(ctx, b, 0, bytes, VKATTN_DTYPE_F16, &bind[0], &first));
    struct {
        uint32_t texels, invocations;
    } push = {(uint32_t)(bytes / 8), 256 * 64};
    VkCommandBuffer cmd;
    CHECK(vkattn_commands_begin(ctx, &cmd));
    CHECK(vkattn_cmd_timer_begin(timer, cmd, 0));
    CHECK(vkattn_cmd_dispatch(ctx, cmd, pipeline, bind, &push, 256, 1, 1));
    CHECK(vkattn_cmd_timer_end(timer, cmd, 0));
    CHECK(vkattn_commands_submit(ctx));
    double ms;
    CHECK(vkattn_timer_read_ms(timer, 0, &ms));
    return (double)bytes / (ms * 1e6);
}

static void bench(vkattn_context *ctx, vkattn_timer *timer, uint32_t batch, uint32_t len,
                  uint32_t block_size, const uint32_t *splits, int nsplits, uint32_t tokens)
{
    vkattn_kv_cache_desc d = {.num_kv_heads = HKV, .num_heads = HQ, .head_dim = DH,
                              .dtype = VKATTN_DTYPE_F16, .max_sequences = batch,
                              .capacity = len, .block_size = block_size};
    vkattn_kv_cache *cache;
    CHECK(vkattn_kv_cache_create(ctx, &d, &cache));
    uint32_t seqs[8], seed = 1;
    for (uint32_t b = 0; b < batch; b++)
        seqs[b] = b;
    /* fill every sequence to `len` tokens */
    vkattn_buffer *kv = random_f16(ctx, (size_t)batch * HKV * CHUNK * DH, &seed);
    for (uint32_t done = 0; done < len; done += CHUNK) {
        uint32_t t = len - done < CHUNK ? len - done : CHUNK;
        int64_t shape[4] = {batch, HKV, t, DH};
        vkattn_kv_append_args a = {.cache = cache, .batch = batch, .sequences = seqs};
        a.k = a.v = vkattn_tensor_make(kv, 0, VKATTN_DTYPE_F16, 4, shape);
        VkCommandBuffer cmd;
        CHECK(vkattn_commands_begin(ctx, &cmd));
        CHECK(vkattn_cmd_kv_cache_append(ctx, cmd, &a));
        CHECK(vkattn_commands_submit(ctx));
    }
    int64_t qshape[4] = {batch, HQ, tokens, DH};
    vkattn_buffer *q = random_f16(ctx, (size_t)batch * HQ * tokens * DH, &seed);
    vkattn_buffer *out = random_f16(ctx, (size_t)batch * HQ * tokens * DH, &seed);
    /* causal: query i of T sees len - T + i + 1 keys; 4 flops per key and dim */
    double flops = 4.0 * batch * HQ * DH * ((double)tokens * (len - tokens) + tokens * (tokens + 1.0) / 2);
    double bytes = 2.0 * batch * len * HKV * DH * 2; /* K and V, f16 */
    /* the streaming probe reads as many bytes (within one texel window) */
    uint64_t probe_bytes = (uint64_t)bytes;
    if (probe_bytes / 8 > ctx->info.max_texel_buffer_elements)
        probe_bytes = ctx->info.max_texel_buffer_elements * 8;
    vkattn_buffer *probe = random_f16(ctx, probe_bytes / 2, &seed);
    vkattn_buffer *probe_out = random_f16(ctx, 256 * 64 * 2, &seed);
    for (int s = 0; s < nsplits; s++) {
        vkattn_kv_attention_args a = {.cache = cache, .batch = batch, .sequences = seqs,
                                      .kv_splits = splits[s]};
        a.q = vkattn_tensor_make(q, 0, VKATTN_DTYPE_F16, 4, qshape);
        a.out = vkattn_tensor_make(out, 0, VKATTN_DTYPE_F16, 4, qshape);
        double ms[RUNS], gbs[RUNS], ratio[RUNS];
        for (int run = 0; run < WARMUP + RUNS; run++) {
            double stream = stream_run(ctx, timer, probe, probe_bytes, probe_out);
            VkCommandBuffer cmd;
            CHECK(vkattn_commands_begin(ctx, &cmd));
            CHECK(vkattn_cmd_timer_begin(timer, cmd, 0));
            CHECK(vkattn_cmd_kv_attention(ctx, cmd, &a));
            CHECK(vkattn_cmd_timer_end(timer, cmd, 0));
            CHECK(vkattn_commands_submit(ctx));
            if (run >= WARMUP) {
                int i = run - WARMUP;
                CHECK(vkattn_timer_read_ms(timer, 0, &ms[i]));
                gbs[i] = bytes / (ms[i] * 1e6);
                ratio[i] = gbs[i] / stream;
            }
        }
        qsort(ms, RUNS, sizeof ms[0], cmp_double);
        qsort(gbs, RUNS, sizeof gbs[0], cmp_double);
        qsort(ratio, RUNS, sizeof ratio[0], cmp_double);
        double med = ms[RUNS / 2];
        if (tokens > 1)
            printf("B=%u T=%u L=%-5u %-10s %8.3f ms  %6.2f GFLOP/s  (ms min %.3f, max %.3f)\n", batch,
                   tokens, len, block_size ? "paged16" : "contiguous", med, flops / (med * 1e6),
                   ms[0], ms[RUNS - 1]);
        else
            printf("B=%u L=%-5u %-10s kv_splits=%-3u %8.3f ms  %9.1f tokens/s  %6.2f GB/s  %4.2f "
                   "of stream  (ms min %.3f, max %.3f)\n",
                   batch, len, block_size ? "paged16" : "contiguous", splits[s], med,
                   batch * 1000.0 / med, gbs[RUNS / 2], ratio[RUNS / 2], ms[0], ms[RUNS - 1]);
        fflush(stdout);
    }
    vkattn_buffer_destroy(kv);
    vkattn_buffer_destroy(probe);
    vkattn_buffer_destroy(probe_out);
    vkattn_buffer_destroy(q);
    vkattn_buffer_destroy(out);
    vkattn_kv_cache_destroy(cache);
}

int main(int argc, char **argv)
{
    vkattn_context *ctx;
    vkattn_context_desc desc = {.device = getenv("VKATTN_DEVICE")};
    vkattn_result r = vkattn_context_create(&desc, &ctx);
    if (r != VKATTN_SUCCESS) {
        fprintf(stderr, "vkattn_context_create: %s\n", vkattn_result_name(r));
        return 1;
    }
    const vkattn_device_info *info = vkattn_context_device_info(ctx);
    printf("device: %s (subgroup %u, texel inputs %d, subgroup kernels %d)\n", info->name,
           info->subgroup_size, info->texel_inputs, info->subgroup_kernels);
    uint32_t splits[16] = {0};
    int nsplits = 1;
    if (argc > 1) {
        nsplits = argc - 1 < 16 ? argc - 1 : 16;
        for (int i = 0; i < nsplits; i++)
            splits[i] = (uint32_t)atoi(argv[i + 1]);
    }
    vkattn_timer *timer;
    CHECK(vkattn_timer_create(ctx, 1, &timer));
    const uint32_t batches[2] = {1, 8}, lens[2] = {1024, 4096}, blocks[2] = {0, 16};
    const char *prefill = getenv("BENCH_PREFILL");
    if (prefill) {
        uint32_t t = (uint32_t)atoi(prefill);
        for (int ki = 0; ki < 2; ki++)
            bench(ctx, timer, 1, t, blocks[ki], splits, 1, t);
        vkattn_timer_destroy(timer);
        vkattn_context_destroy(ctx);
        return 0;
    }
    const char *only = getenv("BENCH_BLOCK"); /* "0" or "16": one layout only */
    const char *only_b = getenv("BENCH_B"), *only_l = getenv("BENCH_L");
    for (int bi = 0; bi < 2; bi++)
        for (int li = 0; li < 2; li++)
            for (int ki = 0; ki < 2; ki++) {
                if ((only && (uint32_t)atoi(only) != blocks[ki]) ||
                    (only_b && (uint32_t)atoi(only_b) != batches[bi]) ||
                    (only_l && (uint32_t)atoi(only_l) != lens[li]))
                    continue;
                bench(ctx, timer, batches[bi], lens[li], blocks[ki], splits, nsplits, 1);
            }
    vkattn_timer_destroy(timer);
    vkattn_context_destroy(ctx);
    return 0;
}
