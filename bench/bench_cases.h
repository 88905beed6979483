/* The named cases of vkattn-bench: what each one runs, through the public
 * API only, and how much useful work and memory traffic it represents. */
#ifndef BENCH_CASES_H
#define BENCH_CASES_H

#include "vkattn.h"

#include <stdio.h>

typedef enum bench_case_kind {
    BENCH_ATTENTION,  /* vkattn_cmd_attention on tensors (prefill) */
    BENCH_LINEAR,     /* vkattn_cmd_linear (GEMM, or GEMV for one row) */
    BENCH_LAYER,      /* vkattn_cmd_mha_forward: a whole MHA layer, self-attention */
    BENCH_DECODE,     /* vkattn_cmd_kv_attention: one query per sequence over a filled cache */
    BENCH_LAYER_STEP, /* vkattn_cmd_mha_step: one decode step of a layer over a filled cache */
    /* Training: a forward and its backward on the same inputs, timed apart
     * (the case's own time is the backward's) */
    BENCH_ATTENTION_BWD, /* vkattn_cmd_attention (with its LSE), vkattn_cmd_attention_backward */
    BENCH_LAYER_BWD,     /* vkattn_cmd_mha_forward, vkattn_cmd_mha_backward (dx, every weight) */
} bench_case_kind;

/* The kernel that bounds a case: FMA throughput (GEMM, prefill attention,
 * whole-layer forwards) or streaming reads (GEMV, decode). */
typedef enum bench_limit {
    BENCH_LIMIT_FMA,
    BENCH_LIMIT_READ,
} bench_limit;

/* What a layer case adds to the plain attention layer, as Llama 3 and
 * Qwen3 have it. */
typedef enum bench_layer_opts {
    BENCH_ROPE = 1,    /* RoPE theta 500000 with Llama 3.1 scaling (8, 1, 4, 8192) */
    BENCH_QK_NORM = 2, /* per-head RMSNorm of Q and K (weights near 1) */
} bench_layer_opts;

/* Score modifiers of an attention or decode case (see "attention semantics"
 * in include/vkattn/ops.h), as the models that use them set them. */
typedef enum bench_score_mods {
    BENCH_SOFTCAP = 1, /* logit softcap 50 (Gemma 2) */
    BENCH_SINKS = 2,   /* a sink logit per query head (gpt-oss), random in [-1, 1) */
    BENCH_ALIBI = 4,   /* ALiBi with the standard slopes of max bias 8 (BLOOM) */
} bench_score_mods;

/* A ragged batch of prompts (attention cases): B prompts of the lengths
 * bench_cases.c lists, causal self-attention, packed into one token axis
 * with their offsets (vkattn_attention_args.sequences), or padded to the
 * longest, as a framework without a packed form runs them (causal, the
 * padding after each prompt is never seen by its real queries). */
typedef enum bench_ragged {
    BENCH_NOT_RAGGED,
    BENCH_RAGGED_PACKED,
    BENCH_RAGGED_PADDED,
} bench_ragged;

typedef struct bench_case {
    const char *name;
    bench_case_kind kind;
    bench_limit limit;
    /* attention and decode: B, Hq, Hkv, Tq, Tk (decode: cache length), D;
     * layers: d = Dm (Dh = Dm / Hq), tq = new tokens, tk = keys seen */
    uint32_t b, hq, hkv, tq, tk, d;
    uint32_t m, n, k; /* linear: x [M, K], w [N, K] */
    bool causal;
    bool bias;              /* layers: projections with biases */
    vkattn_dtype act, data; /* activations (q/out, x/y); K/V or weights */
    uint32_t block;         /* decode: tokens per cache block (paged); 0: contiguous */
    unsigned layer_opts;    /* layers: bench_layer_opts bits */
    uint32_t window;        /* attention and decode: sliding window; 0: none */
    unsigned score_mods;    /* attention and decode: bench_score_mods bits */
    uint32_t dv;            /* attention: v's (and out's) head dim; 0: d */
    bench_ragged ragged;    /* attention: a ragged batch of prompts (tq, tk: the longest) */
} bench_case;

extern const bench_case bench_cases[];
extern const size_t bench_case_count;

/* NULL when there is no case of that name. */
const bench_case *bench_case_find(const char *name);
/* BENCH_ATTENTION_BWD or BENCH_LAYER_BWD: a forward timed beside the case. */
bool bench_case_is_backward(const bench_case *c);

/* A case ready to run: its buffers, layer, cache, filled before timing. */
typedef struct bench_runner bench_runner;

bench_runner *bench_runner_create(vkattn_context *ctx, const bench_case *c);
void bench_runner_destroy(bench_runner *r);
/* Records one repetition (without barriers or timestamps). */
void bench_runner_record(bench_runner *r, VkCommandBuffer cmd);
/* Backward cases: records one repetition of their forward (which writes
 * what the backward reads; the same inputs, outputs and LSE every time). */
void bench_runner_record_forward(bench_runner *r, VkCommandBuffer cmd);
/* After the repetition completed: undo its side effects (a step's cache
 * append is truncated back, so every rep sees the same cache). */
void bench_runner_after(bench_runner *r);
/* Runs the library's tuner for the case's ops and shape (vkattn_<op>_tune),
 * so the timed reps use the measured winners. */
/* The library's tuner for the case's shapes; progress: its callback or
 * NULL. */
vkattn_result bench_runner_tune(bench_runner *r, vkattn_tune_progress_fn progress);
/* Useful FLOPs and the bytes the op must move at least once, per rep. */
double bench_runner_flops(const bench_runner *r);
double bench_runner_bytes(const bench_runner *r);
/* Backward cases: their forward's useful FLOPs per rep (0 for others). */
double bench_runner_forward_flops(const bench_runner *r);

/* Appends the case's shape as JSON members (", \"M\": 1024, ..."). */
void bench_case_print_shape(const bench_case *c, FILE *f);

#endif
