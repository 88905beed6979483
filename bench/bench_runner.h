/* Inside a case runner: what bench_cases.c (the forward cases) and
 * bench_backward.c (the backward cases, which reuse a forward case's
 * inputs) share. vkattn_bench.c sees only bench_cases.h. */
#ifndef BENCH_RUNNER_H
#define BENCH_RUNNER_H

#include "bench_cases.h"

struct bench_runner {
    vkattn_context *ctx;
    const bench_case *c;
    double flops, bytes;
    double forward_flops; /* backward cases: their forward's */
    vkattn_attention_args attention;
    vkattn_linear_args linear;
    vkattn_mha *layer;
    vkattn_mha_forward_args forward;
    vkattn_kv_cache *cache;
    vkattn_kv_attention_args decode;
    vkattn_mha_step_args step;
    vkattn_attention_backward_args attention_backward;
    vkattn_mha_backward_args layer_backward;
    uint32_t sequences[64];
    int32_t offsets[9]; /* a packed ragged case's */
    vkattn_buffer *buffers[16];
    int nbuffers;
};

/* A buffer of n random values in [-1, 1) stored as dt (q8_0: quantized,
 * n whole blocks), owned by r. (bench_data.c, as the two below) */
vkattn_buffer *bench_random_buffer(bench_runner *r, uint64_t n, vkattn_dtype dt, uint64_t seed);
/* A tensor of random values in [-1, 1) stored as dt, its buffer owned by r. */
vkattn_tensor bench_random_tensor(bench_runner *r, vkattn_dtype dt, uint32_t rank,
                                  const int64_t *shape, uint64_t seed);

/* Visible (query, key) pairs of one head under bottom-right causality and
 * a sliding window (0: none). */
double bench_visible_pairs(uint32_t tq, uint32_t tk, bool causal, uint32_t window);

/* Backward cases (bench_backward.c), after the forward case's inputs are
 * made (r->attention, or r->layer and r->forward): adds what the backward
 * needs (the forward's LSE, dout or dy, the gradients) and sets r->flops,
 * r->bytes (the backward's) and r->forward_flops. */
void bench_backward_prepare(bench_runner *r);
vkattn_result bench_backward_record(bench_runner *r, VkCommandBuffer cmd);

#endif
