/* The case list of vkattn-bench and how each case is prepared and recorded.
 * FLOPs count useful work only: a causal case counts the visible (query, key)
 * pairs (bottom-right aligned, as ../shared/peers/torch_cpu.py counts them;
 * with a sliding window only the pairs inside it, so the tiles it skips are
 * not work), decode counts 4 * B * Hq * L * D (L: the keys inside the
 * window). Bytes count what the op must read and write at least once
 * (decode: the K and V it reads). Backward cases count theirs in
 * bench_backward.c. */
#include "bench_cases.h"

#include "bench_common.h"
#include "bench_runner.h"

#include <stdlib.h>
#include <string.h>

#define F32 VKATTN_DTYPE_F32
#define F16 VKATTN_DTYPE_F16
#define BF16 VKATTN_DTYPE_BF16
#define Q8 VKATTN_DTYPE_Q8_0
#define Q4 VKATTN_DTYPE_Q4_0
#define FMA BENCH_LIMIT_FMA
#define READ BENCH_LIMIT_READ

/* Columns: name, kind, limit, B, Hq, Hkv, Tq, Tk, D|Dm, M, N, K, causal, bias,
 * activations dtype, K/V or weights dtype. */
/* clang-format off */
const bench_case bench_cases[] = {
    /* The QKV projection of 1024 tokens at Llama-3-8B width (x f32; W f32 or f16). */
    {"gemm_m1024_n6144_k4096", BENCH_LINEAR, FMA, 0, 0, 0, 0, 0, 0, 1024, 6144, 4096, false, false, F32, F32},
    {"gemm_m1024_n6144_k4096_f16", BENCH_LINEAR, FMA, 0, 0, 0, 0, 0, 0, 1024, 6144, 4096, false, false, F32, F16},
    /* ... with bf16 weights (the same peak fraction as f16 expected) and q8_0
     * weights (ggml's blocks: 34 bytes per 32 weights). */
    {"gemm_m1024_n6144_k4096_bf16", BENCH_LINEAR, FMA, 0, 0, 0, 0, 0, 0, 1024, 6144, 4096, false, false, F32,
     BF16},
    {"gemm_m1024_n6144_k4096_q8_0", BENCH_LINEAR, FMA, 0, 0, 0, 0, 0, 0, 1024, 6144, 4096, false, false, F32,
     Q8},
    /* The same for one token: a GEMV, bound by reading W. */
    {"gemv_m1_n6144_k4096", BENCH_LINEAR, READ, 0, 0, 0, 0, 0, 0, 1, 6144, 4096, false, false, F32, F32},
    {"gemv_m1_n6144_k4096_f16", BENCH_LINEAR, READ, 0, 0, 0, 0, 0, 0, 1, 6144, 4096, false, false, F32, F16},
    {"gemv_m1_n6144_k4096_q8_0", BENCH_LINEAR, READ, 0, 0, 0, 0, 0, 0, 1, 6144, 4096, false, false, F32, Q8},
    /* Causal prefill attention, Llama-3-8B heads (GQA 32/8, Dh 128), f16 Q/K/V/out. */
    {"attn_prefill_gqa_d128_t512", BENCH_ATTENTION, FMA, 1, 32, 8, 512, 512, 128, 0, 0, 0, true, false, F16, F16},
    {"attn_prefill_gqa_d128_t1024", BENCH_ATTENTION, FMA, 1, 32, 8, 1024, 1024, 128, 0, 0, 0, true, false, F16,
     F16},
    /* The same in f32. */
    {"attn_prefill_gqa_d128_t512_f32", BENCH_ATTENTION, FMA, 1, 32, 8, 512, 512, 128, 0, 0, 0, true, false, F32,
     F32},
    {"attn_prefill_gqa_d128_t1024_f32", BENCH_ATTENTION, FMA, 1, 32, 8, 1024, 1024, 128, 0, 0, 0, true, false,
     F32, F32},
    /* Causal MHA prefill, 32 heads of 64, f16. */
    {"attn_prefill_mha_d64_t1024", BENCH_ATTENTION, FMA, 1, 32, 32, 1024, 1024, 64, 0, 0, 0, true, false, F16,
     F16},
    /* Decode: one query per sequence over an f16 KV cache already holding Tk
     * tokens (split-KV); B = 1 or 8 sequences. */
    {"attn_decode_gqa_d128_kv1024", BENCH_DECODE, READ, 1, 32, 8, 1, 1024, 128, 0, 0, 0, true, false, F16, F16},
    {"attn_decode_gqa_d128_kv4096", BENCH_DECODE, READ, 1, 32, 8, 1, 4096, 128, 0, 0, 0, true, false, F16, F16},
    {"attn_decode_gqa_d128_kv1024_b8", BENCH_DECODE, READ, 8, 32, 8, 1, 1024, 128, 0, 0, 0, true, false, F16,
     F16},
    /* The B = 1, 4096-token decode over a bf16 cache (q bf16) and over
     * quantized ones (q8_0, q4_0: 53% and 28% of f16's bytes; q f16). */
    {"attn_decode_gqa_d128_kv4096_bf16", BENCH_DECODE, READ, 1, 32, 8, 1, 4096, 128, 0, 0, 0, true, false, BF16,
     BF16},
    {"attn_decode_gqa_d128_kv4096_q8_0", BENCH_DECODE, READ, 1, 32, 8, 1, 4096, 128, 0, 0, 0, true, false, F16,
     Q8},
    {"attn_decode_gqa_d128_kv4096_q4_0", BENCH_DECODE, READ, 1, 32, 8, 1, 4096, 128, 0, 0, 0, true, false, F16,
     Q4},
    /* ... and llama.cpp's other cache types (q4_1, q5_0, q5_1, iq4_nl: 31%,
     * 34%, 38% and 28% of f16's bytes), read through storage buffers */
    {"attn_decode_gqa_d128_kv4096_q4_1", BENCH_DECODE, READ, 1, 32, 8, 1, 4096, 128, 0, 0, 0, true, false, F16,
     VKATTN_DTYPE_Q4_1},
    {"attn_decode_gqa_d128_kv4096_q5_0", BENCH_DECODE, READ, 1, 32, 8, 1, 4096, 128, 0, 0, 0, true, false, F16,
     VKATTN_DTYPE_Q5_0},
    {"attn_decode_gqa_d128_kv4096_q5_1", BENCH_DECODE, READ, 1, 32, 8, 1, 4096, 128, 0, 0, 0, true, false, F16,
     VKATTN_DTYPE_Q5_1},
    {"attn_decode_gqa_d128_kv4096_iq4_nl", BENCH_DECODE, READ, 1, 32, 8, 1, 4096, 128, 0, 0, 0, true, false, F16,
     VKATTN_DTYPE_IQ4_NL},
    /* DeepSeek MLA's absorbed decode: 16 query heads over one KV head of
     * 4096 tokens, Dk 576 (latent 512 + rope 64), Dv 512, f16; through
     * vkattn_attention (Tq 1), as the KV cache keeps Dk = Dv <= 256. */
    {"attn_decode_mla_d576_kv4096", BENCH_ATTENTION, READ, 1, 16, 1, 1, 4096, 576, 0, 0, 0, false, false, F16,
     F16, .dv = 512},
    {"attn_decode_gqa_d128_kv4096_b8", BENCH_DECODE, READ, 8, 32, 8, 1, 4096, 128, 0, 0, 0, true, false, F16,
     F16},
    /* The B = 1, 4096-token decode over a paged cache (blocks of 16 tokens,
     * each sequence's blocks found through its block table). */
    {"attn_decode_gqa_d128_kv4096_paged16", BENCH_DECODE, READ, 1, 32, 8, 1, 4096, 128, 0, 0, 0, true, false,
     F16, F16, 16},
    /* A whole MHA layer (torch.nn.MultiheadAttention: biases, packed QKV
     * GEMM 512x3072x1024, attention, output GEMM 512x1024x1024), causal, f32. */
    {"layer_d1024_h16_t512", BENCH_LAYER, FMA, 1, 16, 16, 512, 512, 1024, 0, 0, 0, true, true, F32, F32},
    /* A Llama-3-8B attention layer's causal forward over a 512-token prompt:
     * Dm 4096, Hq 32, Hkv 8, Dh 128, no biases, f16 storage of weights and
     * activations (what a user runs at that size: half the bytes; fp32
     * accumulation): QKV GEMM 512x6144x4096, attention, output GEMM
     * 512x4096x4096. */
    {"layer_llama8b_prefill512", BENCH_LAYER, FMA, 1, 32, 8, 512, 512, 4096, 0, 0, 0, true, false, F16, F16},
    /* One decode step of that layer (vkattn_cmd_mha_step, f16): B = 1
     * sequence whose f16 KV cache already holds 1023 tokens; the step projects
     * the new token (QKV GEMV 6144x4096), appends its K/V (L = 1024 keys),
     * attends over them and projects the output (GEMV 4096x4096); after each
     * rep the sequence is truncated back to 1023. Bound by reading the
     * weights and the cache: FLOPs = 2 * (params of Wqkv + Wo) + 4 * Hq * Dh
     * * L; bytes = weights + K/V of the L tokens. */
    {"layer_llama8b_decode", BENCH_LAYER_STEP, READ, 1, 32, 8, 1, 1024, 4096, 0, 0, 0, true, false, F16, F16},
    /* The same step with q8_0 weights (desc.weight_dtype; activations and
     * cache f16): 53% of the f16 weights' bytes, target at most 0.8x its time. */
    {"layer_llama8b_decode_q8_0", BENCH_LAYER_STEP, READ, 1, 32, 8, 1, 1024, 4096, 0, 0, 0, true, false, F16,
     Q8},
    /* The same two with Llama 3's rotary embeddings (theta 500000, Llama 3.1
     * scaling 8, 1, 4, 8192; decode at positions 1023..), then also with
     * QK-norm (Qwen3, Gemma 3, OLMo 2): both in the projection's epilogue,
     * so each should cost at most 5% over the plain case above. */
    {"layer_llama8b_prefill512_rope", BENCH_LAYER, FMA, 1, 32, 8, 512, 512, 4096, 0, 0, 0, true, false, F16,
     F16, 0, BENCH_ROPE},
    {"layer_llama8b_decode_rope", BENCH_LAYER_STEP, READ, 1, 32, 8, 1, 1024, 4096, 0, 0, 0, true, false, F16,
     F16, 0, BENCH_ROPE},
    {"layer_llama8b_prefill512_rope_qknorm", BENCH_LAYER, FMA, 1, 32, 8, 512, 512, 4096, 0, 0, 0, true, false,
     F16, F16, 0, BENCH_ROPE | BENCH_QK_NORM},
    {"layer_llama8b_decode_rope_qknorm", BENCH_LAYER_STEP, READ, 1, 32, 8, 1, 1024, 4096, 0, 0, 0, true, false,
     F16, F16, 0, BENCH_ROPE | BENCH_QK_NORM},
    /* Sliding windows skip work: a 4096-token causal prefill with a window of
     * 1024 (Mistral-style), FLOPs of the visible pairs only, whose rate
     * should be at least 0.8 of the plain T 1024 case's; a decode step over a
     * cache of 32768 tokens with a window of 4096, which reads the last 4096
     * keys: at most 1.2x the time of the kv4096 case. */
    {"attn_prefill_gqa_d128_t4096_w1024", BENCH_ATTENTION, FMA, 1, 32, 8, 4096, 4096, 128, 0, 0, 0, true, false,
     F16, F16, .window = 1024},
    {"attn_decode_gqa_d128_kv32768_w4096", BENCH_DECODE, READ, 1, 32, 8, 1, 32768, 128, 0, 0, 0, true, false,
     F16, F16, .window = 4096},
    /* The T 1024 prefill and the kv 4096 decode with a softcap (50, Gemma 2),
     * sinks (gpt-oss) and ALiBi (max bias 8, BLOOM): the same FLOPs and
     * bytes as the plain cases, so the ratio of their times is the cost of
     * the modifier (target: at most 1.15x). */
    {"attn_prefill_gqa_d128_t1024_softcap", BENCH_ATTENTION, FMA, 1, 32, 8, 1024, 1024, 128, 0, 0, 0, true,
     false, F16, F16, .score_mods = BENCH_SOFTCAP},
    {"attn_prefill_gqa_d128_t1024_sinks", BENCH_ATTENTION, FMA, 1, 32, 8, 1024, 1024, 128, 0, 0, 0, true,
     false, F16, F16, .score_mods = BENCH_SINKS},
    {"attn_prefill_gqa_d128_t1024_alibi", BENCH_ATTENTION, FMA, 1, 32, 8, 1024, 1024, 128, 0, 0, 0, true,
     false, F16, F16, .score_mods = BENCH_ALIBI},
    {"attn_decode_gqa_d128_kv4096_softcap", BENCH_DECODE, READ, 1, 32, 8, 1, 4096, 128, 0, 0, 0, true, false,
     F16, F16, .score_mods = BENCH_SOFTCAP},
    {"attn_decode_gqa_d128_kv4096_sinks", BENCH_DECODE, READ, 1, 32, 8, 1, 4096, 128, 0, 0, 0, true, false,
     F16, F16, .score_mods = BENCH_SINKS},
    {"attn_decode_gqa_d128_kv4096_alibi", BENCH_DECODE, READ, 1, 32, 8, 1, 4096, 128, 0, 0, 0, true, false,
     F16, F16, .score_mods = BENCH_ALIBI},
    /* A prefill of 8 prompts of 16..512 tokens (Llama-3-8B heads), packed
     * (one pass per prompt over its own tokens) and padded to 512 (about
     * twice the tokens, 2.7x the causal pairs): the packed call's time
     * should be at most 0.6x the padded one's. FLOPs: the prompts' own
     * causal pairs in both. */
    {"attn_prefill_ragged8_packed", BENCH_ATTENTION, FMA, 8, 32, 8, 512, 512, 128, 0, 0, 0, true, false, F16,
     F16, .ragged = BENCH_RAGGED_PACKED},
    {"attn_prefill_ragged8_padded", BENCH_ATTENTION, FMA, 8, 32, 8, 512, 512, 128, 0, 0, 0, true, false, F16,
     F16, .ragged = BENCH_RAGGED_PADDED},
    /* Training (bench_backward.c): a forward and its backward timed apart on
     * the same inputs, the line's "bwd_over_fwd" the ratio of their medians.
     * Attention: the causal GQA prefill above, the forward with its LSE (the
     * backward reads it), the backward's dq, dk, dv in the inputs' dtype;
     * 4 query heads over 1 KV head at T 64 is the CI smoke run's. */
    {"attn_prefill_h4kv1_d128_t64_bwd", BENCH_ATTENTION_BWD, FMA, 1, 4, 1, 64, 64, 128, 0, 0, 0, true, false,
     F16, F16},
    {"attn_prefill_gqa_d128_t256_bwd", BENCH_ATTENTION_BWD, FMA, 1, 32, 8, 256, 256, 128, 0, 0, 0, true, false,
     F16, F16},
    {"attn_prefill_gqa_d128_t1024_bwd", BENCH_ATTENTION_BWD, FMA, 1, 32, 8, 1024, 1024, 128, 0, 0, 0, true,
     false, F16, F16},
    {"attn_prefill_gqa_d128_t1024_f32_bwd", BENCH_ATTENTION_BWD, FMA, 1, 32, 8, 1024, 1024, 128, 0, 0, 0, true,
     false, F32, F32},
    /* A whole layer (torch.nn.MultiheadAttention with GQA: biases, causal,
     * f32), Dm 1024, Hq 8, Hkv 2, Dh 128: vkattn_cmd_mha_forward, then
     * vkattn_cmd_mha_backward with dx and every weight and bias gradient;
     * Dm 256, Hq 4, Hkv 2, T 32 is the CI smoke run's. */
    {"layer_d256_h4kv2_t32_bwd", BENCH_LAYER_BWD, FMA, 1, 4, 2, 32, 32, 256, 0, 0, 0, true, true, F32, F32},
    {"layer_d1024_h8kv2_t256_bwd", BENCH_LAYER_BWD, FMA, 1, 8, 2, 256, 256, 1024, 0, 0, 0, true, true, F32,
     F32},
    {"layer_d1024_h8kv2_t1024_bwd", BENCH_LAYER_BWD, FMA, 1, 8, 2, 1024, 1024, 1024, 0, 0, 0, true, true, F32,
     F32},
};
/* clang-format on */
const size_t bench_case_count = sizeof bench_cases / sizeof bench_cases[0];

const bench_case *bench_case_find(const char *name)
{
    for (size_t i = 0; i < bench_case_count; i++)
        if (strcmp(bench_cases[i].name, name) == 0)
            return &bench_cases[i];
    return NULL;
}

/* Appends `tokens` random K/V tokens to every sequence (in chunks, one
 * submit each), so that decoding reads a filled cache. */
static void fill_cache(bench_runner *r, uint32_t tokens)
{
    const bench_case *c = r->c;
    const uint32_t chunk = 256, dh = c->kind == BENCH_LAYER_STEP ? c->d / c->hq : c->d;
    int64_t ks[4] = {c->b, c->hkv, chunk, dh};
    /* a quantized cache (no element size) quantizes the activations' dtype;
     * a layer's cache holds its activations */
    vkattn_dtype src =
        c->kind == BENCH_LAYER_STEP || !vkattn_dtype_size(c->data) ? c->act : c->data;
    vkattn_buffer *kv = bench_random_buffer(r, (uint64_t)c->b * c->hkv * chunk * dh, src, 11);
    for (uint32_t done = 0; done < tokens; done += chunk) {
        ks[2] = tokens - done < chunk ? tokens - done : chunk;
        vkattn_kv_append_args a = {.cache = r->cache,
                                   .batch = c->b,
                                   .sequences = r->sequences,
                                   .k = vkattn_tensor_make(kv, 0, src, 4, ks),
                                   .v = vkattn_tensor_make(kv, 0, src, 4, ks)};
        VkCommandBuffer cmd;
        BENCH_CHECK(r->ctx, vkattn_commands_begin(r->ctx, &cmd), "filling the KV cache");
        bench_cmd_barrier(r->ctx, cmd);
        BENCH_CHECK(r->ctx, vkattn_cmd_kv_cache_append(r->ctx, cmd, &a), "filling the KV cache");
        BENCH_CHECK(r->ctx, vkattn_commands_submit(r->ctx), "filling the KV cache");
    }
}

static void make_cache(bench_runner *r, uint32_t dh, uint32_t capacity, vkattn_dtype dtype)
{
    const bench_case *c = r->c;
    vkattn_kv_cache_desc cd = {.num_kv_heads = c->hkv,
                               .num_heads = c->hq,
                               .head_dim = dh,
                               .dtype = dtype,
                               .max_sequences = c->b,
                               .capacity = capacity,
                               .block_size = c->block};
    BENCH_CHECK(r->ctx, vkattn_kv_cache_create(r->ctx, &cd, &r->cache), "creating the KV cache");
    for (uint32_t b = 0; b < c->b; b++)
        r->sequences[b] = b;
}

/* A layer with deterministic small weights (their values do not matter for
 * speed; small keeps the activations finite in f16). */
static void make_layer(bench_runner *r)
{
    const bench_case *c = r->c;
    uint32_t dm = c->d, dh = dm / c->hq;
    vkattn_mha_desc desc = {.embed_dim = dm,
                            .num_heads = c->hq,
                            .num_kv_heads = c->hkv,
                            .bias = c->bias,
                            .dtype = c->act,
                            .weight_dtype = c->data != c->act ? c->data : c->act,
                            .qk_norm = (c->layer_opts & BENCH_QK_NORM) != 0};
    if (c->layer_opts & BENCH_ROPE)
        desc.rope = (vkattn_rope_desc){.theta = 500000.0f,
                                       .scaling = VKATTN_ROPE_SCALING_LLAMA3,
                                       .factor = 8.0f,
                                       .low_freq_factor = 1.0f,
                                       .high_freq_factor = 4.0f,
                                       .original_max_positions = 8192};
    uint64_t qkv_rows = (uint64_t)(c->hq + 2 * c->hkv) * dh, o_cols = (uint64_t)c->hq * dh;
    float *w = malloc(qkv_rows * dm * 4), *wo = malloc(dm * o_cols * 4);
    float *bias = calloc(qkv_rows + dm, 4), *norm = malloc(2 * dh * 4);
    if (!w || !wo || !bias || !norm)
        bench_die(NULL, "out of host memory");
    for (uint32_t i = 0; i < 2 * dh; i++)
        norm[i] = 0.75f + (float)((i * 40503u) % 512) / 1024.0f;
    for (uint64_t i = 0; i < qkv_rows * dm; i++)
        w[i] = (float)((i * 2654435761u) % 1000) * 1e-5f - 5e-3f;
    for (uint64_t i = 0; i < dm * o_cols; i++)
        wo[i] = (float)((i * 40503u) % 1000) * 1e-5f - 5e-3f;
    vkattn_mha_weights mw = {.wqkv = w,
                             .wo = wo,
                             .bqkv = bias,
                             .bo = bias + qkv_rows,
                             .q_norm = norm,
                             .k_norm = norm + dh};
    BENCH_CHECK(r->ctx, vkattn_mha_create(r->ctx, &desc, &r->layer), "creating the layer");
    BENCH_CHECK(r->ctx, vkattn_mha_set_weights(r->layer, &mw), "setting the layer's weights");
    free(w);
    free(wo);
    free(bias);
    free(norm);
    double weights = (double)qkv_rows * dm + (double)dm * o_cols;
    double tokens = (double)c->b * c->tq;
    r->flops = 2.0 * tokens * weights +
               4.0 * c->b * c->hq * dh * bench_visible_pairs(c->tq, c->tk, c->causal, 0);
    /* weights in their dtype (q8_0: 34 bytes per 32), activations in theirs */
    double weight_bytes = (double)vkattn_dtype_row_bytes(c->data, (uint64_t)weights);
    r->bytes = weight_bytes + 2.0 * tokens * dm * vkattn_dtype_size(c->act);
    int64_t xs[3] = {c->b, c->tq, dm};
    if (c->kind == BENCH_LAYER || c->kind == BENCH_LAYER_BWD) {
        BENCH_CHECK(r->ctx, vkattn_mha_reserve(r->layer, c->b, c->tq, c->tk), "reserving scratch");
        r->forward.x = bench_random_tensor(r, c->act, 3, xs, 8);
        r->forward.y = bench_random_tensor(r, c->act, 3, xs, 9);
        r->forward.causal = c->causal;
        return;
    }
    /* BENCH_LAYER_STEP: a cache of capacity L holding L - T tokens. */
    make_cache(r, dh, c->tk, c->act); /* the layer's activations */
    fill_cache(r, c->tk - c->tq);
    uint64_t scratch = 0;
    BENCH_CHECK(r->ctx, vkattn_mha_step_scratch_size(r->layer, c->b, c->tq, &scratch),
                "step scratch size");
    vkattn_mha_step_args *s = &r->step;
    if (scratch > 0) {
        vkattn_buffer_desc d = {.size = scratch};
        BENCH_CHECK(r->ctx, vkattn_buffer_create(r->ctx, &d, &s->scratch),
                    "creating the step scratch");
        r->buffers[r->nbuffers++] = s->scratch;
    }
    s->cache = r->cache;
    s->batch = c->b;
    s->sequences = r->sequences;
    s->x = bench_random_tensor(r, c->act, 3, xs, 8);
    s->y = bench_random_tensor(r, c->act, 3, xs, 9);
    r->bytes = weight_bytes + 2.0 * c->b * c->hkv * (double)c->tk * dh * vkattn_dtype_size(c->act);
}

/* The case's sinks tensor (f32 [Hq]) when it has BENCH_SINKS. */
static vkattn_tensor sinks_tensor(bench_runner *r)
{
    const bench_case *c = r->c;
    if (!(c->score_mods & BENCH_SINKS))
        return (vkattn_tensor){0};
    int64_t hs[1] = {c->hq};
    return bench_random_tensor(r, F32, 1, hs, 14);
}

/* The ragged cases' prompt lengths, 16..512 evenly spread (the longest
 * is the case's tq). */
static const uint32_t ragged_lengths[8] = {16, 87, 158, 229, 300, 371, 442, 512};

/* A ragged case: q, k, v and out of the prompts packed along one token
 * axis with their offsets, or (already made) B rows padded to the
 * longest. */
static void make_ragged(bench_runner *r)
{
    const bench_case *c = r->c;
    vkattn_attention_args *a = &r->attention;
    double pairs = 0;
    for (uint32_t i = 0; i < c->b; i++) {
        r->offsets[i + 1] = r->offsets[i] + (int32_t)ragged_lengths[i];
        pairs += bench_visible_pairs(ragged_lengths[i], ragged_lengths[i], true, 0);
    }
    const int64_t total = r->offsets[c->b];
    r->flops = 2.0 * c->hq * 2.0 * c->d * pairs;
    if (c->ragged == BENCH_RAGGED_PACKED) {
        int64_t qs[4] = {1, c->hq, total, c->d}, ks[4] = {1, c->hkv, total, c->d};
        a->q = bench_random_tensor(r, c->act, 4, qs, 1);
        a->k = bench_random_tensor(r, c->data, 4, ks, 2);
        a->v = bench_random_tensor(r, c->data, 4, ks, 3);
        a->out = bench_random_tensor(r, c->act, 4, qs, 4);
        a->sequences = c->b;
        a->q_offsets = r->offsets;
        r->bytes = (double)total * (2.0 * c->hq * c->d * (double)vkattn_dtype_size(c->act) +
                                    2.0 * c->hkv * c->d * (double)vkattn_dtype_size(c->data));
    }
    /* Padded: B rows of the longest prompt. Causal with the padding after
     * each prompt, a real query never sees a padding key, so no key padding
     * mask is needed for the prompts' rows (one would only cost more). */
}

bench_runner *bench_runner_create(vkattn_context *ctx, const bench_case *c)
{
    bench_runner *r = calloc(1, sizeof *r);
    if (!r)
        bench_die(NULL, "out of host memory");
    r->ctx = ctx;
    r->c = c;
    size_t as = vkattn_dtype_size(c->act), ds = vkattn_dtype_size(c->data);
    if (c->kind == BENCH_ATTENTION || c->kind == BENCH_ATTENTION_BWD) {
        uint32_t dv = c->dv ? c->dv : c->d;
        int64_t qs[4] = {c->b, c->hq, c->tq, c->d}, ks[4] = {c->b, c->hkv, c->tk, c->d},
                vs[4] = {c->b, c->hkv, c->tk, dv}, os[4] = {c->b, c->hq, c->tq, dv};
        double nq = (double)c->b * c->hq * c->tq * (c->d + dv),
               nk = (double)c->b * c->hkv * c->tk * (c->d + dv);
        if (c->ragged != BENCH_RAGGED_PACKED) { /* (make_ragged's own) */
            r->attention.q = bench_random_tensor(r, c->act, 4, qs, 1);
            r->attention.k = bench_random_tensor(r, c->data, 4, ks, 2);
            r->attention.v = bench_random_tensor(r, c->data, 4, vs, 3);
            r->attention.out = bench_random_tensor(r, c->act, 4, os, 4);
        }
        r->attention.causal = c->causal;
        r->attention.window = c->window;
        r->attention.softcap = c->score_mods & BENCH_SOFTCAP ? 50.0f : 0.0f;
        r->attention.alibi_max_bias = c->score_mods & BENCH_ALIBI ? 8.0f : 0.0f;
        r->attention.sinks = sinks_tensor(r);
        /* per pair: 2 Dk for the score, 2 Dv for the value */
        r->flops = 2.0 * c->b * c->hq * (c->d + dv) *
                   bench_visible_pairs(c->tq, c->tk, c->causal, c->window);
        r->bytes = nq * as + nk * ds;
        if (c->ragged)
            make_ragged(r);
    } else if (c->kind == BENCH_LINEAR) {
        int64_t xs[2] = {c->m, c->k}, ws[2] = {c->n, c->k}, ys[2] = {c->m, c->n};
        r->linear.x = bench_random_tensor(r, c->act, 2, xs, 5);
        r->linear.w = bench_random_tensor(r, c->data, 2, ws, 6);
        r->linear.y = bench_random_tensor(r, c->act, 2, ys, 7);
        r->flops = 2.0 * c->m * c->n * c->k;
        r->bytes = (double)c->m * c->k * as +
                   (double)vkattn_dtype_row_bytes(c->data, (uint64_t)c->n * c->k) +
                   (double)c->m * c->n * as;
    } else if (c->kind == BENCH_DECODE) {
        make_cache(r, c->d, c->tk, c->data);
        fill_cache(r, c->tk);
        int64_t qs[4] = {c->b, c->hq, 1, c->d};
        r->decode.cache = r->cache;
        r->decode.batch = c->b;
        r->decode.sequences = r->sequences;
        r->decode.q = bench_random_tensor(r, c->act, 4, qs, 12);
        r->decode.out = bench_random_tensor(r, c->act, 4, qs, 13);
        r->decode.window = c->window;
        r->decode.softcap = c->score_mods & BENCH_SOFTCAP ? 50.0f : 0.0f;
        r->decode.alibi_max_bias = c->score_mods & BENCH_ALIBI ? 8.0f : 0.0f;
        r->decode.sinks = sinks_tensor(r);
        double keys = c->window && c->window < c->tk ? c->window : c->tk; /* read */
        r->flops = 4.0 * c->b * c->hq * c->d * keys;
        r->bytes = 2.0 * c->b * c->hkv * keys * (double)vkattn_dtype_row_bytes(c->data, c->d);
    } else {
        make_layer(r);
    }
    if (bench_case_is_backward(c))
        bench_backward_prepare(r);
    return r;
}

void bench_runner_record(bench_runner *r, VkCommandBuffer cmd)
{
    vkattn_result res = VKATTN_ERROR_INVALID_ARGUMENT;
    switch (r->c->kind) {
    case BENCH_ATTENTION:
        res = vkattn_cmd_attention(r->ctx, cmd, &r->attention);
        break;
    case BENCH_LINEAR:
        res = vkattn_cmd_linear(r->ctx, cmd, &r->linear);
        break;
    case BENCH_LAYER:
        res = vkattn_cmd_mha_forward(r->layer, cmd, &r->forward);
        break;
    case BENCH_DECODE:
        res = vkattn_cmd_kv_attention(r->ctx, cmd, &r->decode);
        break;
    case BENCH_LAYER_STEP:
        res = vkattn_cmd_mha_step(r->layer, cmd, &r->step);
        break;
    case BENCH_ATTENTION_BWD:
    case BENCH_LAYER_BWD:
        res = bench_backward_record(r, cmd);
        break;
    }
    if (res != VKATTN_SUCCESS)
        bench_die(r->ctx, r->c->name);
}

bool bench_case_is_backward(const bench_case *c)
{
    return c->kind == BENCH_ATTENTION_BWD || c->kind == BENCH_LAYER_BWD;
}

void bench_runner_record_forward(bench_runner *r, VkCommandBuffer cmd)
{
    vkattn_result res = r->c->kind == BENCH_LAYER_BWD
                            ? vkattn_cmd_mha_forward(r->layer, cmd, &r->forward)
                            : vkattn_cmd_attention(r->ctx, cmd, &r->attention);
    if (res != VKATTN_SUCCESS)
        bench_die(r->ctx, r->c->name);
}

void bench_runner_after(bench_runner *r)
{
    if (r->c->kind != BENCH_LAYER_STEP)
        return;
    for (uint32_t b = 0; b < r->c->b; b++)
        BENCH_CHECK(r->ctx,
                    vkattn_kv_cache_truncate(r->cache, r->sequences[b], r->c->tk - r->c->tq),
                    "truncating the KV cache back");
}

double bench_runner_flops(const bench_runner *r) { return r->flops; }

double bench_runner_bytes(const bench_runner *r) { return r->bytes; }

double bench_runner_forward_flops(const bench_runner *r) { return r->forward_flops; }

void bench_runner_destroy(bench_runner *r)
{
    if (!r)
        return;
    for (int i = 0; i < r->nbuffers; i++)
        vkattn_buffer_destroy(r->buffers[i]);
    vkattn_mha_destroy(r->layer);
    vkattn_kv_cache_destroy(r->cache);
    free(r);
}

void bench_case_print_shape(const bench_case *c, FILE *f)
{
    const char *act = vkattn_dtype_name(c->act), *data = vkattn_dtype_name(c->data);
    const char *causal = c->causal ? "true" : "false";
    switch (c->kind) {
    case BENCH_LINEAR:
        fprintf(f, ", \"M\": %u, \"N\": %u, \"K\": %u, \"x\": \"%s\", \"w\": \"%s\"", c->m, c->n,
                c->k, act, data);
        break;
    case BENCH_ATTENTION:
    case BENCH_ATTENTION_BWD:
    case BENCH_DECODE:
        fprintf(f,
                ", \"B\": %u, \"Hq\": %u, \"Hkv\": %u, \"Tq\": %u, \"Tk\": %u, \"D\": %u, "
                "\"causal\": %s, "
                "\"dtype\": \"%s\", \"kv_dtype\": \"%s\"",
                c->b, c->hq, c->hkv, c->tq, c->tk, c->d, causal, act, data);
        if (c->block)
            fprintf(f, ", \"block_size\": %u", c->block);
        if (c->window)
            fprintf(f, ", \"window\": %u", c->window);
        if (c->ragged)
            fprintf(f, ", \"ragged\": \"%s\", \"prompts\": [16, 87, 158, 229, 300, 371, 442, 512]",
                    c->ragged == BENCH_RAGGED_PACKED ? "packed" : "padded to 512");
        if (c->score_mods & BENCH_SOFTCAP)
            fprintf(f, ", \"softcap\": 50");
        if (c->score_mods & BENCH_SINKS)
            fprintf(f, ", \"sinks\": true");
        if (c->score_mods & BENCH_ALIBI)
            fprintf(f, ", \"alibi_max_bias\": 8");
        break;
    case BENCH_LAYER:
    case BENCH_LAYER_BWD:
        fprintf(f,
                ", \"B\": %u, \"T\": %u, \"Dm\": %u, \"Hq\": %u, \"Hkv\": %u, \"Dh\": %u, "
                "\"causal\": %s, "
                "\"bias\": %s, \"dtype\": \"%s\"",
                c->b, c->tq, c->d, c->hq, c->hkv, c->d / c->hq, causal, c->bias ? "true" : "false",
                data);
        break;
    case BENCH_LAYER_STEP:
        fprintf(f,
                ", \"B\": %u, \"new_tokens\": %u, \"L\": %u, \"Dm\": %u, \"Hq\": %u, \"Hkv\": %u, "
                "\"Dh\": %u, "
                "\"bias\": %s, \"dtype\": \"%s\"",
                c->b, c->tq, c->tk, c->d, c->hq, c->hkv, c->d / c->hq, c->bias ? "true" : "false",
                data);
        break;
    }
    if (c->layer_opts & BENCH_ROPE)
        fprintf(f, ", \"rope\": \"llama3\", \"rope_theta\": 500000");
    if (c->layer_opts & BENCH_QK_NORM)
        fprintf(f, ", \"qk_norm\": true");
}

vkattn_result bench_runner_tune(bench_runner *r, vkattn_tune_progress_fn progress)
{
    const bench_case *c = r->c;
    switch (c->kind) {
    case BENCH_LINEAR:
        return vkattn_linear_tune(
            r->ctx, &(vkattn_linear_tune_args){c->m, c->n, c->k, c->act, c->data, progress});
    case BENCH_ATTENTION:
    case BENCH_ATTENTION_BWD: /* the forward's kernels (the backward has no tuner) */
        return vkattn_attention_tune(
            r->ctx, &(vkattn_attention_tune_args){c->b, c->hq, c->hkv, c->tq, c->tk, c->d,
                                                  c->causal, c->act, c->data, progress});
    case BENCH_LAYER:
    case BENCH_LAYER_BWD:
        return vkattn_mha_tune(r->layer, &(vkattn_mha_tune_args){c->b, c->tq, c->tk, progress});
    case BENCH_DECODE:
        return vkattn_kv_attention_tune(
            r->ctx, &(vkattn_kv_attention_tune_args){r->cache, c->b, 1, c->tk, progress});
    case BENCH_LAYER_STEP:
        return vkattn_mha_step_tune(
            r->layer, &(vkattn_mha_step_tune_args){r->cache, c->b, c->tq, c->tk, progress});
    }
    return VKATTN_ERROR_INVALID_ARGUMENT;
}
