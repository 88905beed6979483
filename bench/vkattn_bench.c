/* vkattn-bench: a fixed list of named cases, each timed with GPU timestamps
 * after a warm-up, one JSON line per case:
 *   {"case": ..., "device": ..., "ms": median, "ms_min", "ms_max", "reps",
 *    "gflops", "gbps", ...shape}
 * FLOPs count useful work only: a causal case counts the visible (query, key)
 * pairs. Bytes count what the op must read and write at least once.
 * Speed is never asserted: the machines are shared and noisy. */
#include "vkattn.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef enum case_kind { CASE_ATTENTION, CASE_LINEAR, CASE_LAYER, CASE_DECODE } case_kind;

typedef struct bench_case {
    const char *name;
    case_kind kind;
    uint32_t b, hq, hkv, tq, tk, d; /* attention; layer: d = embed_dim; decode: tk = cache length */
    uint32_t m, n, k;               /* linear */
    bool causal;
    vkattn_dtype qo_dtype, kv_dtype; /* attention; linear: activations, weights */
} bench_case;

#define F32 VKATTN_DTYPE_F32
#define F16 VKATTN_DTYPE_F16

static const bench_case cases[] = {
    {"attn_prefill_gqa_d128_t512", CASE_ATTENTION, 1, 32, 8, 512, 512, 128, 0, 0, 0, true, F16, F16},
    {"attn_prefill_gqa_d128_t1024", CASE_ATTENTION, 1, 32, 8, 1024, 1024, 128, 0, 0, 0, true, F16, F16},
    {"attn_prefill_gqa_d128_t512_f32", CASE_ATTENTION, 1, 32, 8, 512, 512, 128, 0, 0, 0, true, F32, F32},
    {"attn_prefill_gqa_d128_t1024_f32", CASE_ATTENTION, 1, 32, 8, 1024, 1024, 128, 0, 0, 0, true, F32, F32},
    {"attn_prefill_mha_d64_t1024", CASE_ATTENTION, 1, 32, 32, 1024, 1024, 64, 0, 0, 0, true, F16, F16},
    {"gemm_m1024_n6144_k4096", CASE_LINEAR, 0, 0, 0, 0, 0, 0, 1024, 6144, 4096, false, F32, F32},
    {"gemm_m1024_n6144_k4096_f16", CASE_LINEAR, 0, 0, 0, 0, 0, 0, 1024, 6144, 4096, false, F32, F16},
    {"gemv_m1_n6144_k4096", CASE_LINEAR, 0, 0, 0, 0, 0, 0, 1, 6144, 4096, false, F32, F32},
    {"gemv_m1_n6144_k4096_f16", CASE_LINEAR, 0, 0, 0, 0, 0, 0, 1, 6144, 4096, false, F32, F16},
    {"layer_d1024_h16_t512", CASE_LAYER, 1, 16, 16, 512, 512, 1024, 0, 0, 0, true, F32, F32},
    /* one query per sequence against an f16 KV cache (split-KV decoding) */
    {"attn_decode_gqa_d128_kv1024", CASE_DECODE, 1, 32, 8, 1, 1024, 128, 0, 0, 0, true, F16, F16},
    {"attn_decode_gqa_d128_kv4096", CASE_DECODE, 1, 32, 8, 1, 4096, 128, 0, 0, 0, true, F16, F16},
    {"attn_decode_gqa_d128_kv1024_b8", CASE_DECODE, 8, 32, 8, 1, 1024, 128, 0, 0, 0, true, F16, F16},
    {"attn_decode_gqa_d128_kv4096_b8", CASE_DECODE, 8, 32, 8, 1, 4096, 128, 0, 0, 0, true, F16, F16},
};

/* ------------------------------------------------------------ helpers */

static void die(vkattn_context *ctx, const char *what)
{
    fprintf(stderr, "vkattn-bench: %s: %s\n", what, ctx ? vkattn_context_last_error(ctx) : "");
    exit(1);
}

/* A buffer of n random values in [-1, 1) stored as dtype. */
static vkattn_buffer *random_buffer(vkattn_context *ctx, uint64_t n, vkattn_dtype dt, uint64_t seed)
{
    size_t es = vkattn_dtype_size(dt);
    void *host = malloc(n * es);
    if (!host)
        die(NULL, "out of memory");
    for (uint64_t i = 0; i < n; i++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        float v = (float)(seed >> 40) / (float)(1u << 24) * 2.0f - 1.0f;
        if (dt == F16)
            ((uint16_t *)host)[i] = vkattn_f32_to_f16(v);
        else
            ((float *)host)[i] = v;
    }
    vkattn_buffer *b = NULL;
    vkattn_buffer_desc d = {.size = n * es};
    if (vkattn_buffer_create(ctx, &d, &b) || vkattn_buffer_upload(b, 0, host, n * es))
        die(ctx, "creating a buffer");
    free(host);
    return b;
}

static int compare_doubles(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Visible (query, key) pairs of one head under bottom-right causality. */
static double visible_pairs(uint32_t tq, uint32_t tk, bool causal)
{
    if (!causal)
        return (double)tq * tk;
    double pairs = 0;
    for (uint32_t i = 0; i < tq; i++) {
        int64_t last = (int64_t)i + tk - tq; /* last visible key */
        pairs += last < 0 ? 0 : (double)(last + 1 > tk ? tk : last + 1);
    }
    return pairs;
}

/* What one case runs: record its work into cmd. */
typedef struct runner {
    case_kind kind;
    vkattn_attention_args attention;
    vkattn_linear_args linear;
    vkattn_mha *layer;
    vkattn_mha_forward_args forward;
    vkattn_kv_cache *cache;
    vkattn_kv_attention_args decode;
    uint32_t sequences[64];
    vkattn_buffer *buffers[8];
    int nbuffers;
} runner;

static vkattn_result record(vkattn_context *ctx, runner *r, VkCommandBuffer cmd)
{
    switch (r->kind) {
    case CASE_ATTENTION:
        return vkattn_cmd_attention(ctx, cmd, &r->attention);
    case CASE_LINEAR:
        return vkattn_cmd_linear(ctx, cmd, &r->linear);
    case CASE_LAYER:
        return vkattn_cmd_mha_forward(r->layer, cmd, &r->forward);
    case CASE_DECODE:
        return vkattn_cmd_kv_attention(ctx, cmd, &r->decode);
    }
    return VKATTN_ERROR_INVALID_ARGUMENT;
}

static vkattn_buffer *keep(runner *r, vkattn_buffer *b)
{
    r->buffers[r->nbuffers++] = b;
    return b;
}

/* A KV cache of B sequences holding `tk` random tokens each (appended in
 * chunks), and one query per sequence. Bytes: the K and V read once. */
static void prepare_decode(vkattn_context *ctx, const bench_case *c, runner *r, double *flops, double *bytes)
{
    vkattn_kv_cache_desc cd = {.num_kv_heads = c->hkv, .num_heads = c->hq, .head_dim = c->d,
                               .dtype = c->kv_dtype, .max_sequences = c->b, .capacity = c->tk};
    if (vkattn_kv_cache_create(ctx, &cd, &r->cache))
        die(ctx, "creating the KV cache");
    const uint32_t chunk = 256;
    int64_t ks[4] = {c->b, c->hkv, chunk, c->d};
    vkattn_buffer *kv = keep(r, random_buffer(ctx, (uint64_t)c->b * c->hkv * chunk * c->d, c->kv_dtype, 11));
    for (uint32_t b = 0; b < c->b; b++)
        r->sequences[b] = b;
    for (uint32_t done = 0; done < c->tk; done += chunk) {
        ks[2] = c->tk - done < chunk ? c->tk - done : chunk;
        vkattn_kv_append_args a = {.cache = r->cache, .batch = c->b, .sequences = r->sequences,
                                   .k = vkattn_tensor_make(kv, 0, c->kv_dtype, 4, ks),
                                   .v = vkattn_tensor_make(kv, 0, c->kv_dtype, 4, ks)};
        VkCommandBuffer cmd;
        if (vkattn_commands_begin(ctx, &cmd) || vkattn_cmd_kv_cache_append(ctx, cmd, &a) ||
            vkattn_commands_submit(ctx))
            die(ctx, "filling the KV cache");
    }
    int64_t qs[4] = {c->b, c->hq, 1, c->d};
    uint64_t nq = (uint64_t)c->b * c->hq * c->d;
    r->decode.cache = r->cache;
    r->decode.batch = c->b;
    r->decode.sequences = r->sequences;
    r->decode.q = vkattn_tensor_make(keep(r, random_buffer(ctx, nq, c->qo_dtype, 12)), 0, c->qo_dtype, 4, qs);
    r->decode.out = vkattn_tensor_make(keep(r, random_buffer(ctx, nq, c->qo_dtype, 13)), 0, c->qo_dtype, 4, qs);
    *flops = 4.0 * c->b * c->hq * c->d * (double)c->tk;
    *bytes = 2.0 * c->b * c->hkv * (double)c->tk * c->d * vkattn_dtype_size(c->kv_dtype);
}

/* Builds the inputs of a case; returns its useful FLOPs and minimum bytes. */
static void prepare(vkattn_context *ctx, const bench_case *c, runner *r, double *flops, double *bytes)
{
    memset(r, 0, sizeof *r);
    r->kind = c->kind;
    if (c->kind == CASE_ATTENTION) {
        int64_t qs[4] = {c->b, c->hq, c->tq, c->d}, ks[4] = {c->b, c->hkv, c->tk, c->d};
        uint64_t nq = (uint64_t)c->b * c->hq * c->tq * c->d, nk = (uint64_t)c->b * c->hkv * c->tk * c->d;
        vkattn_attention_args *a = &r->attention;
        a->q = vkattn_tensor_make(keep(r, random_buffer(ctx, nq, c->qo_dtype, 1)), 0, c->qo_dtype, 4, qs);
        a->k = vkattn_tensor_make(keep(r, random_buffer(ctx, nk, c->kv_dtype, 2)), 0, c->kv_dtype, 4, ks);
        a->v = vkattn_tensor_make(keep(r, random_buffer(ctx, nk, c->kv_dtype, 3)), 0, c->kv_dtype, 4, ks);
        a->out = vkattn_tensor_make(keep(r, random_buffer(ctx, nq, c->qo_dtype, 4)), 0, c->qo_dtype, 4, qs);
        a->causal = c->causal;
        *flops = 4.0 * c->b * c->hq * c->d * visible_pairs(c->tq, c->tk, c->causal);
        *bytes = 2.0 * nq * vkattn_dtype_size(c->qo_dtype) + 2.0 * nk * vkattn_dtype_size(c->kv_dtype);
    } else if (c->kind == CASE_LINEAR) {
        int64_t xs[2] = {c->m, c->k}, ws[2] = {c->n, c->k}, ys[2] = {c->m, c->n};
        vkattn_linear_args *l = &r->linear;
        l->x = vkattn_tensor_make(keep(r, random_buffer(ctx, (uint64_t)c->m * c->k, c->qo_dtype, 5)), 0,
                                  c->qo_dtype, 2, xs);
        l->w = vkattn_tensor_make(keep(r, random_buffer(ctx, (uint64_t)c->n * c->k, c->kv_dtype, 6)), 0,
                                  c->kv_dtype, 2, ws);
        l->y = vkattn_tensor_make(keep(r, random_buffer(ctx, (uint64_t)c->m * c->n, c->qo_dtype, 7)), 0,
                                  c->qo_dtype, 2, ys);
        *flops = 2.0 * c->m * c->n * c->k;
        *bytes = (double)c->m * c->k * vkattn_dtype_size(c->qo_dtype) +
                 (double)c->n * c->k * vkattn_dtype_size(c->kv_dtype) +
                 (double)c->m * c->n * vkattn_dtype_size(c->qo_dtype);
    } else if (c->kind == CASE_DECODE) {
        prepare_decode(ctx, c, r, flops, bytes);
    } else {
        uint32_t dm = c->d, dh = dm / c->hq;
        vkattn_mha_desc desc = {.embed_dim = dm, .num_heads = c->hq, .num_kv_heads = c->hkv,
                                .bias = true, .dtype = c->qo_dtype};
        uint64_t qkv_rows = (uint64_t)(c->hq + 2 * c->hkv) * dh;
        float *w = malloc(qkv_rows * dm * 4), *wo = malloc((uint64_t)dm * c->hq * dh * 4);
        float *bias = calloc(qkv_rows + dm, 4);
        if (!w || !wo || !bias)
            die(NULL, "out of memory");
        for (uint64_t i = 0; i < qkv_rows * dm; i++)
            w[i] = (float)((i * 2654435761u) % 1000) * 1e-5f - 5e-3f;
        for (uint64_t i = 0; i < (uint64_t)dm * c->hq * dh; i++)
            wo[i] = (float)((i * 40503u) % 1000) * 1e-5f - 5e-3f;
        vkattn_mha_weights mw = {.wqkv = w, .wo = wo, .bqkv = bias, .bo = bias + qkv_rows};
        if (vkattn_mha_create(ctx, &desc, &r->layer) || vkattn_mha_set_weights(r->layer, &mw) ||
            vkattn_mha_reserve(r->layer, c->b, c->tq, c->tq))
            die(ctx, "creating the layer");
        free(w);
        free(wo);
        free(bias);
        int64_t xs[3] = {c->b, c->tq, dm};
        uint64_t nx = (uint64_t)c->b * c->tq * dm;
        r->forward.x = vkattn_tensor_make(keep(r, random_buffer(ctx, nx, c->qo_dtype, 8)), 0, c->qo_dtype, 3, xs);
        r->forward.y = vkattn_tensor_make(keep(r, random_buffer(ctx, nx, c->qo_dtype, 9)), 0, c->qo_dtype, 3, xs);
        r->forward.causal = c->causal;
        double tokens = (double)c->b * c->tq;
        *flops = 2.0 * tokens * dm * qkv_rows + 2.0 * tokens * c->hq * dh * dm +
                 4.0 * c->b * c->hq * dh * visible_pairs(c->tq, c->tq, c->causal);
        *bytes = (qkv_rows * dm + (double)dm * c->hq * dh + 2.0 * nx) * vkattn_dtype_size(c->qo_dtype);
    }
}

static void release(runner *r)
{
    for (int i = 0; i < r->nbuffers; i++)
        vkattn_buffer_destroy(r->buffers[i]);
    vkattn_mha_destroy(r->layer);
    vkattn_kv_cache_destroy(r->cache);
}

static void run_case(vkattn_context *ctx, vkattn_timer *timer, const bench_case *c, int reps)
{
    runner r;
    double flops = 0, bytes = 0;
    prepare(ctx, c, &r, &flops, &bytes);
    double ms[64];
    for (int i = -1; i < reps; i++) { /* i == -1: warm-up (pipeline creation, caches) */
        VkCommandBuffer cmd;
        if (vkattn_commands_begin(ctx, &cmd) || vkattn_cmd_timer_begin(timer, cmd, 0) ||
            record(ctx, &r, cmd) || vkattn_cmd_timer_end(timer, cmd, 0) || vkattn_commands_submit(ctx))
            die(ctx, c->name);
        if (i >= 0 && vkattn_timer_read_ms(timer, 0, &ms[i]))
            die(ctx, "reading the timer");
    }
    qsort(ms, (size_t)reps, sizeof ms[0], compare_doubles);
    double med = reps % 2 ? ms[reps / 2] : 0.5 * (ms[reps / 2 - 1] + ms[reps / 2]);
    const vkattn_device_info *dev = vkattn_context_device_info(ctx);
    printf("{\"case\": \"%s\", \"device\": \"%s\", \"ms\": %.3f, \"ms_min\": %.3f, \"ms_max\": %.3f, "
           "\"reps\": %d, \"gflops\": %.2f, \"gbps\": %.2f",
           c->name, dev->name, med, ms[0], ms[reps - 1], reps, flops / med / 1e6, bytes / med / 1e6);
    if (c->kind == CASE_DECODE)
        printf(", \"tokens_per_s\": %.1f", c->b / (med * 1e-3));
    if (c->kind == CASE_LINEAR)
        printf(", \"M\": %u, \"N\": %u, \"K\": %u, \"x\": \"%s\", \"w\": \"%s\"}\n", c->m, c->n, c->k,
               vkattn_dtype_name(c->qo_dtype), vkattn_dtype_name(c->kv_dtype));
    else
        printf(", \"B\": %u, \"Hq\": %u, \"Hkv\": %u, \"Tq\": %u, \"Tk\": %u, \"%s\": %u, \"causal\": %s, "
               "\"dtype\": \"%s\"}\n",
               c->b, c->hq, c->hkv, c->tq, c->tk, c->kind == CASE_LAYER ? "Dm" : "D", c->d,
               c->causal ? "true" : "false", vkattn_dtype_name(c->qo_dtype));
    fflush(stdout);
    release(&r);
}

int main(int argc, char **argv)
{
    const char *only = NULL;
    int reps = 5;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--list") == 0) {
            for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++)
                printf("%s\n", cases[k].name);
            return 0;
        } else if (strcmp(argv[i], "--case") == 0 && i + 1 < argc) {
            only = argv[++i];
        } else if (strcmp(argv[i], "--reps") == 0 && i + 1 < argc) {
            reps = atoi(argv[++i]);
            if (reps < 1 || reps > 64) {
                fprintf(stderr, "vkattn-bench: --reps must be in 1..64\n");
                return 2;
            }
        } else {
            fprintf(stderr, "usage: vkattn-bench [--list] [--case NAME] [--reps N (default 5)]\n"
                            "One JSON line per case; device: $VKATTN_DEVICE or automatic.\n");
            return strcmp(argv[i], "--help") == 0 ? 0 : 2;
        }
    }
    bool found = !only;
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++)
        found = found || strcmp(cases[k].name, only) == 0;
    if (!found) {
        fprintf(stderr, "vkattn-bench: no case \"%s\" (see --list)\n", only);
        return 2;
    }
    vkattn_context_desc desc = {.device = getenv("VKATTN_DEVICE")};
    vkattn_context *ctx = NULL;
    vkattn_timer *timer = NULL;
    if (vkattn_context_create(&desc, &ctx) != VKATTN_SUCCESS)
        die(NULL, "no usable Vulkan device");
    if (vkattn_timer_create(ctx, 1, &timer) != VKATTN_SUCCESS)
        die(ctx, "timestamps");
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++)
        if (!only || strcmp(cases[k].name, only) == 0)
            run_case(ctx, timer, &cases[k], reps);
    vkattn_timer_destroy(timer);
    vkattn_context_destroy(ctx);
    return 0;
}
