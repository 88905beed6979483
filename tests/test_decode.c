/* MHA steps over a KV cache: a prefill then one-token decode steps, for a
 * ragged batch of sequences at different positions, must equal one causal
 * forward over each whole sequence (CPU reference) - MHA, GQA 4 and 8, MQA,
 * contiguous and paged caches, f32 and f16, plain and modern layers (RoPE
 * styles and scalings, partial rotary dims, QK-norm, scale; their GPU
 * forward too, and a positions tensor past 32K), layers with score
 * modifiers (window, softcap, sinks, ALiBi) over plain and windowed caches,
 * caches of another dtype than the layer's. Plus determinism with a
 * fixed split count, and every step error leaving the cache unchanged. */
#include "test_policy.h"
#include "test_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#define NSEQ 3

/* The options of modern decoder layers (issue 13): RoPE, QK-norm, scale. */
typedef struct modern_opts {
    const char *name;
    vkattn_rope_desc rope;
    bool qk_norm;
    float scale;
} modern_opts;

static const modern_opts llama3 = {"llama3 rope",
                                   {.theta = 500000.0f,
                                    .scaling = VKATTN_ROPE_SCALING_LLAMA3,
                                    .factor = 8.0f,
                                    .low_freq_factor = 1.0f,
                                    .high_freq_factor = 4.0f,
                                    .original_max_positions = 8192},
                                   false,
                                   0.0f};
static const modern_opts qwen3 = {"qwen3 qk-norm + rope", {.theta = 1000000.0f}, true, 0.0f};
static const modern_opts gptj = {"gptj partial linear rope + qk-norm + scale",
                                 {.theta = 10000.0f,
                                  .dims = 8,
                                  .style = VKATTN_ROPE_GPTJ,
                                  .scaling = VKATTN_ROPE_SCALING_LINEAR,
                                  .factor = 2.0f},
                                 true,
                                 0.3f};

/* Score modifiers of the layer (issue 14), and the cache's window. */
typedef struct layer_mods {
    const char *name;
    uint32_t window;
    float softcap;
    bool sinks;
    bool alibi;            /* the standard slopes of desc.alibi_max_bias (0: 8)... */
    bool custom_slopes;    /* ...or weights->alibi_slopes */
    uint32_t cache_window; /* paged caches: blocks before it go back */
} layer_mods;

static const layer_mods mistral = {
    "mistral window 5, windowed cache", 5, 0, false, false, false, 5};
static const layer_mods mistral6 = {
    "window 4 over a cache of window 6", 4, 0, false, false, false, 6};
static const layer_mods gemma2 = {"gemma2 softcap 1 + window 7", 7, 1.0f, false, false, false, 0};
static const layer_mods gptoss = {
    "gpt-oss sinks + window 6, cache window 8", 6, 0, true, false, false, 8};
static const layer_mods bloom = {"bloom alibi (max bias 8)", 0, 0, false, true, false, 0};
static const layer_mods mixed = {
    "custom alibi slopes + sinks + softcap 2", 0, 2.0f, true, true, true, 0};

typedef struct decode_case {
    uint32_t hq, hkv, dh;
    uint32_t block_size; /* 0: contiguous */
    vkattn_dtype dtype;
    uint32_t kv_splits;
    const modern_opts *modern; /* NULL: a plain layer */
    const layer_mods *mods;    /* NULL: none */
    uint32_t dv;               /* V's head dim; 0: dh */
    vkattn_dtype cache_dtype;  /* 0: dtype; else any cache dtype */
} decode_case;

typedef struct layer_data {
    uint32_t dm;
    float *wqkv, *wo, *bqkv, *bo;
} layer_data;

static const uint32_t total_len[NSEQ] = {11, 17, 6};
static const uint32_t prompt_len[NSEQ] = {4, 12, 1};

/* Prefills every sequence with its prompt (one step each: different prompt
 * lengths), then decodes the ragged batch one token per step. Returns the
 * outputs of every position of every sequence: y[s] is [total_len[s], Dm]. */
static void run_steps(vkattn_context *ctx, vkattn_mha *layer, vkattn_kv_cache *cache,
                      float *const x[NSEQ], float *y[NSEQ], uint32_t dm, vkattn_dtype dt,
                      uint32_t kv_splits)
{
    size_t es = vkattn_dtype_size(dt);
    vkattn_buffer *bx = test_buffer_with(ctx, NULL, 32 * dm * es),
                  *by = test_buffer_with(ctx, NULL, 32 * dm * es);
    float *rows = malloc(32 * dm * 4);
    for (uint32_t s = 0; s < NSEQ; s++) {
        uint32_t seq = s, len = 99;
        int64_t shape[3] = {1, prompt_len[s], dm};
        test_upload_as(ctx, bx, dt, x[s], (size_t)prompt_len[s] * dm);
        vkattn_mha_step_args a = {.cache = cache,
                                  .batch = 1,
                                  .sequences = &seq,
                                  .x = vkattn_tensor_make(bx, 0, dt, 3, shape),
                                  .y = vkattn_tensor_make(by, 0, dt, 3, shape),
                                  .kv_splits = kv_splits};
        TEST_OK(ctx, vkattn_mha_step(layer, &a));
        test_download_as(ctx, by, dt, y[s], (size_t)prompt_len[s] * dm);
        TEST_OK(ctx, vkattn_kv_cache_length(cache, seq, &len));
        assert_int_equal(len, prompt_len[s]);
    }
    for (uint32_t pos = 1;; pos++) {
        uint32_t seqs[NSEQ], batch = 0;
        for (uint32_t s = 0; s < NSEQ; s++) {
            uint32_t len;
            TEST_OK(ctx, vkattn_kv_cache_length(cache, s, &len));
            if (len < total_len[s]) {
                memcpy(rows + (size_t)batch * dm, x[s] + (size_t)len * dm, dm * 4);
                seqs[batch++] = s;
            }
        }
        if (!batch)
            break;
        int64_t shape[3] = {batch, 1, dm};
        test_upload_as(ctx, bx, dt, rows, (size_t)batch * dm);
        vkattn_mha_step_args a = {.cache = cache,
                                  .batch = batch,
                                  .sequences = seqs,
                                  .x = vkattn_tensor_make(bx, 0, dt, 3, shape),
                                  .y = vkattn_tensor_make(by, 0, dt, 3, shape),
                                  .kv_splits = kv_splits};
        uint32_t before[NSEQ];
        for (uint32_t i = 0; i < batch; i++)
            TEST_OK(ctx, vkattn_kv_cache_length(cache, seqs[i], &before[i]));
        TEST_OK(ctx, vkattn_mha_step(layer, &a));
        test_download_as(ctx, by, dt, rows, (size_t)batch * dm);
        for (uint32_t i = 0; i < batch; i++)
            memcpy(y[seqs[i]] + (size_t)before[i] * dm, rows + (size_t)i * dm, dm * 4);
    }
    TEST_DESTROY_BUFFERS(bx, by);
    free(rows);
}

/* One causal forward of a sequence of `len` tokens against the reference. */
static void check_forward(vkattn_context *ctx, vkattn_mha *layer, const float *x, const float *ref,
                          uint32_t len, const decode_case *c)
{
    uint32_t dm = c->hq * c->dh, dv = c->dv ? c->dv : c->dh;
    vkattn_dtype dt = c->dtype;
    size_t n = (size_t)len * dm;
    vkattn_buffer *bx = test_buffer_of(ctx, dt, x, n),
                  *by = test_buffer_with(ctx, NULL, n * vkattn_dtype_size(dt));
    int64_t shape[3] = {1, len, dm};
    vkattn_mha_forward_args a = {.x = vkattn_tensor_make(bx, 0, dt, 3, shape),
                                 .y = vkattn_tensor_make(by, 0, dt, 3, shape),
                                 .causal = true};
    TEST_OK(ctx, vkattn_mha_forward(layer, &a));
    float *y = malloc(n * 4);
    test_download_as(ctx, by, dt, y, n);
    char what[160];
    snprintf(what, sizeof what, "forward Hq%u Hkv%u Dh%u/%u %s %s (%u tokens)", c->hq, c->hkv,
             c->dh, dv, vkattn_dtype_name(dt),
             c->modern ? c->modern->name
             : c->mods ? c->mods->name
                       : "plain",
             len);
    test_assert_close(y, ref, n, dt == VKATTN_DTYPE_F16 ? TEST_TOL_F16 : TEST_TOL_F32, what);
    free(y);
    TEST_DESTROY_BUFFERS(bx, by);
}

static void check_case(vkattn_context *ctx, const decode_case *c, uint64_t seed)
{
    test_rng r = test_rng_seed(seed);
    bool f16 = c->dtype == VKATTN_DTYPE_F16;
    const uint32_t dv = c->dv ? c->dv : c->dh;
    const vkattn_dtype cache_dt = c->cache_dtype ? c->cache_dtype : c->dtype;
    uint32_t dm = c->hq * c->dh, rows = (c->hq + c->hkv) * c->dh + c->hkv * dv;
    float amp = 1.5f / sqrtf((float)dm);
    float *wqkv = test_random_array(&r, (size_t)rows * dm, amp, c->dtype);
    float *wo = test_random_array(&r, (size_t)dm * c->hq * dv, amp, c->dtype);
    float *bqkv = test_random_array(&r, rows, 0.2f, c->dtype);
    float *bo = test_random_array(&r, dm, 0.2f, c->dtype);
    vkattn_mha_desc desc = {.embed_dim = dm,
                            .num_heads = c->hq,
                            .num_kv_heads = c->hkv,
                            .head_dim = c->dh,
                            .v_head_dim = dv,
                            .bias = true,
                            .dtype = c->dtype};
    vkattn_mha_weights w = {.wqkv = wqkv, .wo = wo, .bqkv = bqkv, .bo = bo};
    float norms[2 * 256];
    if (c->modern) {
        desc.rope = c->modern->rope;
        desc.qk_norm = c->modern->qk_norm;
        desc.scale = c->modern->scale;
        test_fill_uniform(&r, norms, 2 * c->dh, 0.5f, 1.5f);
        w.q_norm = norms;
        w.k_norm = norms + c->dh;
    }
    float sinks[64], slopes[64];
    if (c->mods) {
        desc.window = c->mods->window;
        desc.softcap = c->mods->softcap;
        desc.sinks = c->mods->sinks;
        desc.alibi = c->mods->alibi;
        test_fill_uniform(&r, sinks, c->hq, -1.0f, 2.0f);
        test_fill_uniform(&r, slopes, c->hq, 0.05f, 0.5f);
        w.sinks = c->mods->sinks ? sinks : NULL;
        w.alibi_slopes = c->mods->custom_slopes ? slopes : NULL;
    }
    float *x[NSEQ], *y[NSEQ], *ref[NSEQ], *fwd_ref[NSEQ];
    for (int s = 0; s < NSEQ; s++) {
        x[s] = test_random_array(&r, (size_t)total_len[s] * dm, 1.0f, c->dtype);
        y[s] = calloc((size_t)total_len[s] * dm, 4);
        ref[s] = malloc((size_t)total_len[s] * dm * 4);
        int64_t shape[3] = {1, total_len[s], dm};
        vkattn_ref_mha_args ra = {.x = vkattn_host_tensor_make(x[s], VKATTN_DTYPE_F32, 3, shape),
                                  .y = vkattn_host_tensor_make(ref[s], VKATTN_DTYPE_F32, 3, shape),
                                  .causal = true,
                                  .kv_cache_dtype = c->cache_dtype};
        float *fwd = NULL; /* a quantized cache's reference differs from the forward's */
        if (c->cache_dtype) {
            fwd = malloc((size_t)total_len[s] * dm * 4);
            vkattn_ref_mha_args fa = ra;
            fa.kv_cache_dtype = 0;
            fa.y = vkattn_host_tensor_make(fwd, VKATTN_DTYPE_F32, 3, shape);
            char e2[256];
            if (vkattn_ref_mha(&desc, &w, &fa, e2, sizeof e2) != VKATTN_SUCCESS)
                fail_msg("reference: %s", e2);
        }
        fwd_ref[s] = fwd;
        char err[256];
        if (vkattn_ref_mha(&desc, &w, &ra, err, sizeof err) != VKATTN_SUCCESS)
            fail_msg("reference: %s", err);
    }
    vkattn_mha *layer = test_mha_create(ctx, &desc, &w);
    if (c->modern || c->mods || c->dv) /* the full forward on the GPU too */
        for (int s = 0; s < NSEQ; s++)
            check_forward(ctx, layer, x[s], fwd_ref[s] ? fwd_ref[s] : ref[s], total_len[s], c);
    vkattn_kv_cache_desc cd = {.num_kv_heads = c->hkv,
                               .num_heads = c->hq,
                               .head_dim = c->dh,
                               .v_head_dim = dv,
                               .dtype = cache_dt,
                               .max_sequences = NSEQ + 1,
                               .capacity = 24,
                               .block_size = c->block_size,
                               .window = c->mods ? c->mods->cache_window : 0};
    vkattn_kv_cache *cache = NULL;
    TEST_OK(ctx, vkattn_kv_cache_create(ctx, &cd, &cache));
    run_steps(ctx, layer, cache, x, y, dm, c->dtype, c->kv_splits);
    char what[160];
    for (int s = 0; s < NSEQ; s++) {
        snprintf(what, sizeof what,
                 "decode Hq%u Hkv%u Dh%u/%u block %u %s cache %s splits %u %s: sequence %d", c->hq,
                 c->hkv, c->dh, dv, c->block_size, vkattn_dtype_name(c->dtype),
                 vkattn_dtype_name(cache_dt), c->kv_splits,
                 c->modern ? c->modern->name
                 : c->mods ? c->mods->name
                           : "plain",
                 s);
        test_assert_close(y[s], ref[s], (size_t)total_len[s] * dm,
                          f16 ? TEST_TOL_F16 : TEST_TOL_F32, what);
    }
    if (c->kv_splits) { /* a fixed split count: bit-identical when run again */
        float *again[NSEQ];
        for (int s = 0; s < NSEQ; s++) {
            TEST_OK(ctx, vkattn_kv_cache_truncate(cache, (uint32_t)s, 0));
            again[s] = calloc((size_t)total_len[s] * dm, 4);
        }
        run_steps(ctx, layer, cache, x, again, dm, c->dtype, c->kv_splits);
        for (int s = 0; s < NSEQ; s++) {
            assert_memory_equal(again[s], y[s], (size_t)total_len[s] * dm * 4);
            free(again[s]);
        }
    }
    for (int s = 0; s < NSEQ; s++)
        free(x[s]), free(y[s]), free(ref[s]), free(fwd_ref[s]);
    vkattn_kv_cache_destroy(cache);
    vkattn_mha_destroy(layer);
    free(wqkv), free(wo), free(bqkv), free(bo);
}

static const decode_case grid[] = {
    {4, 4, 16, 0, VKATTN_DTYPE_F32, 0},  /* MHA, contiguous */
    {8, 2, 16, 5, VKATTN_DTYPE_F32, 0},  /* GQA 4, paged (block 5) */
    {16, 2, 8, 4, VKATTN_DTYPE_F32, 2},  /* GQA 8, paged, 2 splits */
    {4, 1, 32, 0, VKATTN_DTYPE_F32, 7},  /* MQA, contiguous, 7 splits */
    {8, 2, 16, 16, VKATTN_DTYPE_F16, 0}, /* GQA 4, paged, f16 */
    {4, 1, 16, 0, VKATTN_DTYPE_F16, 1},  /* MQA, f16, 1 split */
    /* modern layers: RoPE, QK-norm, scale */
    {8, 2, 16, 0, VKATTN_DTYPE_F32, 0, &llama3}, /* 6: GQA 4, contiguous */
    {8, 2, 16, 5, VKATTN_DTYPE_F32, 0, &qwen3},  /* 7: GQA 4, paged */
    {4, 1, 32, 4, VKATTN_DTYPE_F32, 3, &gptj},   /* 8: MQA, paged, 3 splits */
    {8, 2, 16, 16, VKATTN_DTYPE_F16, 0, &qwen3}, /* 9: f16, paged */
    {16, 4, 8, 0, VKATTN_DTYPE_F32, 0, &llama3}, /* 10: Dh 8 */
    {2, 1, 128, 0, VKATTN_DTYPE_F16, 2, &gptj},  /* 11: Dh 128, f16 */
    /* score modifiers and windowed caches (issue 14) */
    {8, 2, 16, 4, VKATTN_DTYPE_F32, 0, NULL, &mistral},  /* 12: GQA 4, paged 4 */
    {8, 2, 16, 5, VKATTN_DTYPE_F16, 2, NULL, &mistral6}, /* 13: f16, paged 5, 2 splits */
    {8, 2, 16, 0, VKATTN_DTYPE_F32, 0, NULL, &gemma2},   /* 14: contiguous */
    {8, 2, 16, 4, VKATTN_DTYPE_F32, 3, &qwen3, &gptoss}, /* 15: + RoPE, 3 splits */
    {4, 4, 16, 0, VKATTN_DTYPE_F32, 0, NULL, &bloom},    /* 16: MHA */
    {4, 1, 32, 5, VKATTN_DTYPE_F16, 0, NULL, &mixed},    /* 17: MQA, f16 */
    /* head dims of their own for V, any size (issue 15) */
    {4, 2, 48, 5, VKATTN_DTYPE_F32, 2, NULL, NULL, 32},  /* 18: 48 / 32, paged, 2 splits */
    {4, 2, 5, 0, VKATTN_DTYPE_F32, 0, NULL, NULL, 21},   /* 19: 5 / 21, padded cache rows */
    {2, 1, 15, 4, VKATTN_DTYPE_F16, 0, NULL, NULL, 16},  /* 20: 15 / 16, f16, paged 4 */
    {4, 1, 64, 16, VKATTN_DTYPE_F32, 0, NULL, NULL, 128, /* 21: 64 / 128 over q8_0 */
     VKATTN_DTYPE_Q8_0},
    {4, 2, 24, 0, VKATTN_DTYPE_F32, 3, &qwen3, NULL, 16}, /* 22: RoPE + QK-norm on Dk 24 */
    /* caches of another dtype than the layer's (issue 29) */
    {8, 2, 16, 5, VKATTN_DTYPE_F32, 2, NULL, NULL, 0, VKATTN_DTYPE_F16},    /* 23: f32 over f16 */
    {4, 1, 32, 0, VKATTN_DTYPE_F32, 0, &qwen3, NULL, 0, VKATTN_DTYPE_BF16}, /* 24: over bf16 */
    {8, 2, 16, 4, VKATTN_DTYPE_F16, 0, NULL, NULL, 0, VKATTN_DTYPE_F32},    /* 25: f16 over f32 */
    {4, 2, 5, 0, VKATTN_DTYPE_F32, 0, NULL, NULL, 21, VKATTN_DTYPE_F16},    /* 26: padded rows */
    {8, 2, 16, 0, VKATTN_DTYPE_F16, 0, NULL, NULL, 0, VKATTN_DTYPE_BF16},   /* 27: f16 over bf16 */
    /* quantized caches at head dims of an odd number of blocks */
    {4, 1, 96, 0, VKATTN_DTYPE_F32, 0, &llama3, NULL, 0, VKATTN_DTYPE_Q4_0}, /* 28: 96, q4_0 */
    {8, 2, 32, 5, VKATTN_DTYPE_F16, 2, NULL, NULL, 0, VKATTN_DTYPE_Q8_0},    /* 29: 32, q8_0 */
};

static void check_grid_cases(test_gpu *g, const size_t *cases, size_t count)
{
    for (size_t n = 0; n < count; n++)
        check_case(g->ctx, &grid[cases[n]], 500 + cases[n]);
}

/* Layers keeping K and V in a cache of another dtype (converted or
 * quantized as they are appended; the reference rounds them the same way),
 * quantized ones at head dims of 3 blocks and 1. */
static void test_cache_dtype_of_its_own(void **state)
{
    static const size_t cases[] = {23, 24, 25, 26, 27, 28, 29};
    check_grid_cases(*state, cases, sizeof cases / sizeof cases[0]);
}

/* The grid by head sharing (together: every case once). */
static void test_mha_steps_match_forward(void **state)
{
    static const size_t cases[] = {0};
    check_grid_cases(*state, cases, sizeof cases / sizeof cases[0]);
}

static void test_gqa_steps_match_forward(void **state)
{
    static const size_t cases[] = {1, 2, 4};
    check_grid_cases(*state, cases, sizeof cases / sizeof cases[0]);
}

static void test_mqa_steps_match_forward(void **state)
{
    static const size_t cases[] = {3, 5};
    check_grid_cases(*state, cases, sizeof cases / sizeof cases[0]);
}

/* RoPE, QK-norm and scale in the forward and the steps. */
static void test_modern_steps_match_forward(void **state)
{
    static const size_t cases[] = {6, 7, 8, 9, 10, 11};
    check_grid_cases(*state, cases, sizeof cases / sizeof cases[0]);
}

/* Window, softcap, sinks and ALiBi of the layer, in its forward and steps
 * (windowed caches giving blocks back as they slide). */
static void test_mods_steps_match_forward(void **state)
{
    static const size_t cases[] = {12, 13, 14, 15, 16, 17};
    check_grid_cases(*state, cases, sizeof cases / sizeof cases[0]);
}

/* V's head dim apart from Q/K's, head dims that are not multiples of 8
 * (the cache's rows padded: K and V staged and appended), a quantized cache
 * of two head dims, RoPE and QK-norm on Dk. */
static void test_head_dims_steps_match_forward(void **state)
{
    static const size_t cases[] = {18, 19, 20, 21, 22};
    check_grid_cases(*state, cases, sizeof cases / sizeof cases[0]);
}

/* A positions tensor: a left-padded batch row and positions past 32K
 * (the angle tables keep fp32 exact there), forward against the reference. */
static void check_positions(test_gpu *g, uint32_t policy, const void *arg)
{
    (void)arg;
    vkattn_context *ctx = g->ctx;
    test_rng r = test_rng_seed(700 + policy);
    const uint32_t hq = 4, hkv = 2, dh = 32, dm = hq * dh, rows = (hq + 2 * hkv) * dh, t = 9;
    float amp = 1.5f / sqrtf((float)dm), norms[64];
    float *wqkv = test_random_array(&r, (size_t)rows * dm, amp, VKATTN_DTYPE_F32);
    float *wo = test_random_array(&r, (size_t)dm * dm, amp, VKATTN_DTYPE_F32);
    float *x = test_random_array(&r, 2 * t * dm, 1.0f, VKATTN_DTYPE_F32);
    float *y = malloc(2 * t * dm * 4), *ref = malloc(2 * t * dm * 4);
    test_fill_uniform(&r, norms, 2 * dh, 0.5f, 1.5f);
    vkattn_mha_desc desc = {.embed_dim = dm, .num_heads = hq, .num_kv_heads = hkv};
    desc.rope = llama3.rope;
    desc.qk_norm = true;
    vkattn_mha_weights w = {.wqkv = wqkv, .wo = wo, .q_norm = norms, .k_norm = norms + dh};
    /* row 0: 3 padding tokens at position 0, then 0..5; row 1: from 40000
     * on, then a jump to 16777210 (the largest positions) */
    int32_t pos[2 * 9] = {0, 0, 0, 0, 1, 2, 3, 4, 5};
    for (uint32_t i = 0; i < t; i++)
        pos[t + i] = i < 5 ? 40000 + (int32_t)i * 1000 : 16777210 + (int32_t)i - 5;
    int64_t shape[3] = {2, t, dm}, pshape[2] = {2, t};
    vkattn_ref_mha_args ra = {.x = vkattn_host_tensor_make(x, VKATTN_DTYPE_F32, 3, shape),
                              .y = vkattn_host_tensor_make(ref, VKATTN_DTYPE_F32, 3, shape),
                              .positions =
                                  vkattn_host_tensor_make(pos, VKATTN_DTYPE_I32, 2, pshape),
                              .causal = true};
    char err[256];
    if (vkattn_ref_mha(&desc, &w, &ra, err, sizeof err) != VKATTN_SUCCESS)
        fail_msg("reference: %s", err);
    vkattn_mha *layer = test_mha_create(ctx, &desc, &w);
    vkattn_buffer *bx = test_buffer_of(ctx, VKATTN_DTYPE_F32, x, 2 * t * dm),
                  *by = test_buffer_with(ctx, NULL, 2 * t * dm * 4),
                  *bp = test_buffer_with(ctx, pos, sizeof pos);
    vkattn_mha_forward_args a = {.x = vkattn_tensor_make(bx, 0, VKATTN_DTYPE_F32, 3, shape),
                                 .y = vkattn_tensor_make(by, 0, VKATTN_DTYPE_F32, 3, shape),
                                 .positions =
                                     vkattn_tensor_make(bp, 0, VKATTN_DTYPE_I32, 2, pshape),
                                 .causal = true};
    TEST_OK(ctx, vkattn_mha_forward(layer, &a));
    test_download_as(ctx, by, VKATTN_DTYPE_F32, y, 2 * t * dm);
    test_assert_close(y, ref, 2 * t * dm, TEST_TOL_F32, "forward with a positions tensor");

    /* the positions tensor's checks */
    vkattn_mha_forward_args bad = a;
    bad.positions.dtype = VKATTN_DTYPE_F32;
    TEST_FAILS(ctx, VKATTN_ERROR_UNSUPPORTED_DTYPE, "args->positions.dtype is f32",
               vkattn_mha_forward(layer, &bad));
    bad = a;
    bad.positions.shape[1] = t - 1;
    TEST_FAILS(ctx, VKATTN_ERROR_SHAPE_MISMATCH, "args->positions",
               vkattn_mha_forward(layer, &bad));
    bad = a;
    bad.kv = a.x;
    TEST_FAILS(ctx, VKATTN_ERROR_INVALID_ARGUMENT, "self-attention only",
               vkattn_mha_forward(layer, &bad));
    vkattn_mha_destroy(layer);
    desc.rope.theta = 0.0f; /* no RoPE: no positions */
    layer = test_mha_create(ctx, &desc, &w);
    TEST_FAILS(ctx, VKATTN_ERROR_INVALID_ARGUMENT, "no RoPE", vkattn_mha_forward(layer, &a));
    vkattn_mha_destroy(layer);
    w.k_norm = NULL;
    TEST_OK(ctx, vkattn_mha_create(ctx, &desc, &layer));
    TEST_FAILS(ctx, VKATTN_ERROR_INVALID_ARGUMENT, "weights->k_norm is NULL",
               vkattn_mha_set_weights(layer, &w));
    vkattn_mha_destroy(layer);
    desc.rope = llama3.rope;
    desc.rope.dims = 7;
    TEST_FAILS(ctx, VKATTN_ERROR_INVALID_ARGUMENT, "desc->rope.dims is 7",
               vkattn_mha_create(ctx, &desc, &layer));
    assert_null(layer);
    TEST_DESTROY_BUFFERS(bx, by, bp);
    free(wqkv), free(wo), free(x), free(y), free(ref);
}

static void test_forward_positions(void **state)
{
    (void)state;
    test_for_each_policy(0, check_positions, NULL);
}

static void other_path(test_gpu *g, uint32_t policy, const void *c)
{
    check_case(g->ctx, c, 599 + policy);
}

/* The other kernel families and bindings give the same steps. */
static void test_other_paths(void **state)
{
    (void)state;
    const decode_case c = {8, 2, 16, 5, VKATTN_DTYPE_F16, 0};
    test_for_each_policy(1, other_path, &c);
    const decode_case modern[2] = {{8, 2, 16, 5, VKATTN_DTYPE_F16, 0, &qwen3},
                                   {4, 1, 32, 0, VKATTN_DTYPE_F32, 2, &gptj}};
    for (int i = 0; i < 2; i++)
        test_for_each_policy(1, other_path, &modern[i]);
    /* score modifiers: a windowed Mistral-like layer, and every modifier */
    const decode_case mods[2] = {{8, 2, 16, 4, VKATTN_DTYPE_F32, 0, NULL, &mistral},
                                 {4, 1, 32, 5, VKATTN_DTYPE_F16, 2, NULL, &mixed}};
    for (int i = 0; i < 2; i++)
        test_for_each_policy(1, other_path, &mods[i]);
}

/* Step errors: their codes and messages, and the cache left as it was. */
static void test_step_errors(void **state)
{
    test_gpu *g = *state;
    vkattn_context *ctx = g->ctx;
    uint32_t dm = 32;
    vkattn_mha_desc desc = {.embed_dim = dm, .num_heads = 4, .num_kv_heads = 2};
    float *zeros = calloc(64 * 32, 4);
    vkattn_mha_weights w = {.wqkv = zeros, .wo = zeros};
    vkattn_mha *layer = test_mha_create(ctx, &desc, &w);
    vkattn_kv_cache_desc cd = {.num_kv_heads = 2,
                               .num_heads = 4,
                               .head_dim = 8,
                               .max_sequences = 2,
                               .capacity = 8,
                               .block_size = 4,
                               .num_blocks = 3};
    vkattn_kv_cache *cache = NULL;
    TEST_OK(ctx, vkattn_kv_cache_create(ctx, &cd, &cache));
    vkattn_buffer *b = test_buffer_with(ctx, NULL, 4096);
    uint32_t seq0 = 0, seq1 = 1, seq9 = 9, both[2] = {0, 1};
    int64_t six[3] = {1, 6, 32}, one[3] = {2, 1, 32}, three[3] = {1, 3, 32};
    vkattn_mha_step_args a = {.cache = cache,
                              .batch = 1,
                              .sequences = &seq0,
                              .x = vkattn_tensor_make(b, 0, VKATTN_DTYPE_F32, 3, six),
                              .y = vkattn_tensor_make(b, 2048, VKATTN_DTYPE_F32, 3, six)};
    TEST_OK(ctx, vkattn_mha_step(layer, &a)); /* sequence 0: 6 tokens, 2 blocks */
    assert_int_equal(vkattn_kv_cache_free_blocks(cache), 1);

    vkattn_mha_step_args bad = a;
    bad.x = vkattn_tensor_make(b, 0, VKATTN_DTYPE_F32, 3, three);
    bad.y = vkattn_tensor_make(b, 2048, VKATTN_DTYPE_F32, 3, three);
    TEST_FAILS(ctx, VKATTN_ERROR_OUT_OF_RANGE, "capacity of 8", vkattn_mha_step(layer, &bad));
    bad.sequences = &seq9;
    TEST_FAILS(ctx, VKATTN_ERROR_INVALID_ARGUMENT, "sequences[0] is 9",
               vkattn_mha_step(layer, &bad));
    bad.sequences = &seq1;
    bad.x = vkattn_tensor_make(b, 0, VKATTN_DTYPE_F32, 3, six); /* 6 tokens: 2 blocks, 1 free */
    bad.y = vkattn_tensor_make(b, 2048, VKATTN_DTYPE_F32, 3, six);
    TEST_FAILS(ctx, VKATTN_ERROR_CACHE_FULL, "1 free", vkattn_mha_step(layer, &bad));
    bad = a;
    bad.batch = 2;
    bad.sequences = both;
    bad.x = vkattn_tensor_make(b, 0, VKATTN_DTYPE_F32, 3, one);
    bad.y = vkattn_tensor_make(b, 2048, VKATTN_DTYPE_F32, 3, six); /* y's batch is 1 */
    TEST_FAILS(ctx, VKATTN_ERROR_SHAPE_MISMATCH, "args->y.shape[0]", vkattn_mha_step(layer, &bad));
    bad = a;
    bad.cache = NULL;
    TEST_FAILS(ctx, VKATTN_ERROR_INVALID_ARGUMENT, "args->cache is NULL",
               vkattn_mha_step(layer, &bad));
    vkattn_kv_cache_desc other = cd;
    other.head_dim = 16;
    vkattn_kv_cache *wrong = NULL;
    TEST_OK(ctx, vkattn_kv_cache_create(ctx, &other, &wrong));
    bad = a;
    bad.cache = wrong;
    TEST_FAILS(ctx, VKATTN_ERROR_SHAPE_MISMATCH, "head_dim 16", vkattn_mha_step(layer, &bad));

    uint32_t len = 0;
    TEST_OK(ctx, vkattn_kv_cache_length(cache, 0, &len));
    assert_int_equal(len, 6);
    TEST_OK(ctx, vkattn_kv_cache_length(cache, 1, &len));
    assert_int_equal(len, 0);
    assert_int_equal(vkattn_kv_cache_free_blocks(cache), 1);
    /* and the cache still works: a decode step for both sequences */
    bad = a;
    bad.batch = 2;
    bad.sequences = both;
    bad.x = vkattn_tensor_make(b, 0, VKATTN_DTYPE_F32, 3, one);
    bad.y = vkattn_tensor_make(b, 2048, VKATTN_DTYPE_F32, 3, one);
    TEST_OK(ctx, vkattn_mha_step(layer, &bad));
    TEST_OK(ctx, vkattn_kv_cache_length(cache, 1, &len));
    assert_int_equal(len, 1);
    vkattn_kv_cache_destroy(wrong);
    vkattn_kv_cache_destroy(cache);
    vkattn_buffer_destroy(b);
    vkattn_mha_destroy(layer);
    free(zeros);
}

/* The layer's modifiers against the cache and its weights: named errors,
 * nothing written, the cache unchanged. */
static void test_mods_step_errors(void **state)
{
    test_gpu *g = *state;
    vkattn_context *ctx = g->ctx;
    uint32_t dm = 32;
    float *zeros = calloc(64 * 32, 4), sinks[4] = {0, 1, 2, 3};
    vkattn_mha_weights w = {.wqkv = zeros, .wo = zeros};
    /* sinks without weights->sinks; NaN slopes */
    vkattn_mha_desc desc = {.embed_dim = dm, .num_heads = 4, .num_kv_heads = 2, .sinks = true};
    vkattn_mha *layer = NULL;
    TEST_OK(ctx, vkattn_mha_create(ctx, &desc, &layer));
    TEST_FAILS(ctx, VKATTN_ERROR_INVALID_ARGUMENT, "weights->sinks is NULL",
               vkattn_mha_set_weights(layer, &w));
    float nan_slopes[4] = {0.5f, NAN, 0.1f, 0.1f};
    vkattn_mha_weights wn = w;
    wn.sinks = sinks;
    wn.alibi_slopes = nan_slopes;
    vkattn_mha_destroy(layer);
    desc.alibi = true;
    TEST_OK(ctx, vkattn_mha_create(ctx, &desc, &layer));
    TEST_FAILS(ctx, VKATTN_ERROR_INVALID_ARGUMENT, "weights->alibi_slopes[1]",
               vkattn_mha_set_weights(layer, &wn));
    vkattn_mha_destroy(layer);

    /* a layer of window 0 or 6 over a cache of window 4 */
    vkattn_kv_cache_desc cd = {.num_kv_heads = 2,
                               .num_heads = 4,
                               .head_dim = 8,
                               .max_sequences = 2,
                               .capacity = 16,
                               .block_size = 4,
                               .window = 4};
    vkattn_kv_cache *cache = NULL;
    TEST_OK(ctx, vkattn_kv_cache_create(ctx, &cd, &cache));
    vkattn_buffer *b = test_buffer_with(ctx, NULL, 4096);
    uint32_t seq0 = 0;
    int64_t two[3] = {1, 2, 32};
    vkattn_mha_step_args a = {.cache = cache,
                              .batch = 1,
                              .sequences = &seq0,
                              .x = vkattn_tensor_make(b, 0, VKATTN_DTYPE_F32, 3, two),
                              .y = vkattn_tensor_make(b, 2048, VKATTN_DTYPE_F32, 3, two)};
    const uint32_t windows[2] = {0, 6};
    for (int i = 0; i < 2; i++) {
        vkattn_mha_desc wd = {.embed_dim = dm, .num_heads = 4, .num_kv_heads = 2};
        wd.window = windows[i];
        layer = test_mha_create(ctx, &wd, &w);
        uint32_t free_before = vkattn_kv_cache_free_blocks(cache), len = 99;
        TEST_FAILS(ctx, VKATTN_ERROR_INVALID_ARGUMENT, "the cache's window is 4",
                   vkattn_mha_step(layer, &a));
        TEST_OK(ctx, vkattn_kv_cache_length(cache, 0, &len));
        assert_int_equal(len, 0);
        assert_int_equal(vkattn_kv_cache_free_blocks(cache), free_before);
        vkattn_mha_destroy(layer);
    }
    /* a window of at most the cache's works, and gives blocks back */
    vkattn_mha_desc wd = {.embed_dim = dm, .num_heads = 4, .num_kv_heads = 2, .window = 3};
    layer = test_mha_create(ctx, &wd, &w);
    uint32_t total = vkattn_kv_cache_config(cache)->num_blocks;
    for (int i = 0; i < 6; i++) /* 12 tokens, steps of 2 */
        TEST_OK(ctx, vkattn_mha_step(layer, &a));
    /* the last step (tokens 10, 11) keeps from 10 - 4 + 1 = 7 on: blocks 1, 2 */
    assert_int_equal(vkattn_kv_cache_free_blocks(cache), total - 2);
    /* the layer's flops count windowed pairs only: 2 queries x 3 keys */
    double proj = vkattn_mha_step_flops(layer, 1, 2, 2);
    double windowed = vkattn_mha_step_flops(layer, 1, 2, 12);
    assert_true(fabs((windowed - proj) - 4.0 * 4 * 8 * (3 + 3 - 3)) < 1e-6);
    vkattn_mha_destroy(layer);
    vkattn_kv_cache_destroy(cache);
    vkattn_buffer_destroy(b);
    free(zeros);
    test_assert_no_validation_messages(ctx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mha_steps_match_forward),
        cmocka_unit_test(test_gqa_steps_match_forward),
        cmocka_unit_test(test_mqa_steps_match_forward),
        cmocka_unit_test(test_modern_steps_match_forward),
        cmocka_unit_test(test_mods_steps_match_forward),
        cmocka_unit_test(test_head_dims_steps_match_forward),
        cmocka_unit_test(test_cache_dtype_of_its_own),
        cmocka_unit_test(test_forward_positions),
        cmocka_unit_test(test_other_paths),
        cmocka_unit_test(test_step_errors),
        cmocka_unit_test(test_mods_step_errors),
    };
    return cmocka_run_group_tests(tests, test_gpu_setup, test_gpu_teardown);
}
