/* Attention over a KV cache (vkattn_kv_attention) against vkattn_ref_attention
 * run per sequence on the keys and values appended to it (gathered on the
 * host): MHA / GQA / MQA, contiguous and paged caches (block sizes 16 and 5),
 * ragged batches, decode (T <= 16, split-KV) and prefill (T = 40, on empty
 * and non-empty sequences), several head dims, f32, f16 and bf16 caches, split
 * counts that agree and repeat bit for bit, appends and attention recorded
 * into one command buffer, more queries than keys; the errors are in
 * test_kv_attention_errors.c.
 * Every case runs on both kernel families (subgroup and shared-memory),
 * texel inputs on some and storage inputs on others. */
#include "test_kv_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

/* ---- the grid of configurations */

typedef struct kv_case {
    uint32_t Hq, Hkv, D;
    vkattn_dtype cdt, qdt;
    uint32_t block_size; /* 0: contiguous */
    uint32_t capacity;
    uint32_t batch;
    uint32_t seqs[MAX_SEQ];  /* the step's sequences */
    uint32_t prior[MAX_SEQ]; /* tokens each holds before the step */
    uint32_t T;              /* new tokens = queries per sequence */
    uint32_t splits;
    bool merged;
    float scale;
    uint32_t DV; /* v's head dim; 0: D */
} kv_case;

static const kv_case grid[] = {
    /* MHA decode, contiguous, ragged with a length-1 sequence */
    {2, 2, 64, F32, F32, 0, 80, 3, {2, 0, 1}, {0, 37, 64}, 1, 0, false, 0.0f},
    /* GQA 4 decode, paged 16, f16 cache, merged output */
    {8, 2, 128, F16, F16, 16, 160, 4, {3, 1, 0, 2}, {0, 37, 16, 150}, 1, 0, true, 0.0f},
    /* GQA 8 (two KV heads), paged 5, T = 2, f32 q over an f16 cache */
    {16, 2, 32, F16, F32, 5, 120, 3, {0, 2, 1}, {3, 101, 0}, 2, 0, false, 0.3f},
    /* MQA, T = 16, head dim 40 (not a multiple of the subgroup's chunks), paged 5 */
    {4, 1, 40, F32, F32, 5, 90, 3, {1, 2, 0}, {0, 9, 57}, 16, 0, true, 0.0f},
    /* prefill T = 40: on an empty and on non-empty sequences (chunked), paged 16 */
    {4, 2, 64, F16, F16, 16, 120, 3, {0, 1, 2}, {0, 23, 48}, 40, 0, false, 0.0f},
    /* prefill T = 40 on MHA, contiguous, head dim 24, f16 q over an f32 cache */
    {3, 3, 24, F32, F16, 0, 64, 2, {1, 0}, {0, 17}, 40, 0, true, 0.2f},
    /* a large prefill (the subgroup family's large tiles): T = 40 x GQA 2 over
     * 270 keys, paged 16 */
    {2, 1, 32, F32, F32, 16, 300, 2, {1, 0}, {230, 5}, 40, 0, false, 0.0f},
    /* head dim 256 decode, GQA 2, paged 16 */
    {4, 2, 256, F16, F16, 16, 48, 2, {0, 1}, {30, 1}, 1, 3, false, 0.0f},
    /* head dim 8, GQA 4, T = 2, paged 5, explicit splits */
    {4, 1, 8, F32, F32, 5, 64, 3, {2, 0, 1}, {40, 0, 13}, 2, 7, false, 0.0f},
    /* bf16 (the texel policies' decode kernel reads it as rgba32ui texels):
     * a bf16 cache and q, GQA 4, paged 16 */
    {8, 2, 128, BF16, BF16, 16, 160, 3, {0, 1, 2}, {40, 3, 150}, 1, 0, false, 0.0f},
    /* ... with f32 q, contiguous, T = 2, 3 splits, merged output */
    {4, 2, 64, BF16, F32, 0, 80, 2, {1, 0}, {70, 10}, 2, 3, true, 0.0f},
    /* bf16 q over an f16 cache, MQA, paged 5 */
    {4, 1, 64, F16, BF16, 5, 90, 2, {0, 1}, {60, 33}, 1, 0, false, 0.0f},
    /* K and V of their own head dims (12..): DeepSeek's MLA absorbed (576 /
     * 512, one KV head), decode with automatic splits, f16, paged 16 */
    {8, 1, 576, F16, F16, 16, 160, 2, {0, 1}, {130, 45}, 1, 0, true, 0.0f, 512},
    /* ... and prefill over it, T = 20 */
    {4, 1, 576, F32, F32, 16, 80, 2, {1, 0}, {30, 0}, 20, 0, false, 0.0f, 512},
    /* MLA's non-absorbed 192 / 128, GQA 2, 3 splits, contiguous */
    {4, 2, 192, F32, F32, 0, 90, 2, {0, 1}, {70, 9}, 2, 3, false, 0.0f, 128},
    /* head dims that are not multiples of 8: PyTorch's 5 and 21, decode */
    {4, 2, 5, F32, F32, 5, 60, 2, {1, 0}, {40, 7}, 1, 0, false, 0.0f, 21},
    /* 203 / 203 prefill, f32, paged 16, merged output */
    {2, 1, 203, F32, F32, 16, 64, 2, {0, 1}, {20, 0}, 17, 0, true, 0.0f, 203},
    /* 15 / 64 (q read by elements, out by quads), f16, 2 splits */
    {4, 4, 15, F16, F16, 5, 60, 2, {0, 1}, {31, 2}, 2, 2, false, 0.3f, 64},
    /* 2 / 2, MQA, bf16 cache with f32 q, decode */
    {4, 1, 2, BF16, F32, 5, 40, 1, {2}, {25}, 1, 0, false, 0.0f, 2},
    /* quantized 576 / 512: q8_0, decode, paged 16 */
    {4, 1, 576, VKATTN_DTYPE_Q8_0, F32, 16, 96, 2, {0, 1}, {70, 18}, 1, 0, false, 0.0f, 512},
};

#define GRID_COUNT (sizeof grid / sizeof grid[0])

static void describe(const kv_case *c, uint32_t policy, char *buf, size_t size)
{
    snprintf(buf, size, "%s Hq%u Hkv%u D%u/%u cache:%s q:%s block%u B%u T%u splits%u%s",
             test_policies[policy].name, c->Hq, c->Hkv, c->D, c->DV ? c->DV : c->D,
             vkattn_dtype_name(c->cdt), vkattn_dtype_name(c->qdt), c->block_size, c->batch, c->T,
             c->splits, c->merged ? " merged" : "");
}

static double tolerance(vkattn_dtype a, vkattn_dtype b)
{
    if (a == BF16 || b == BF16)
        return TEST_TOL_BF16;
    return a == F16 || b == F16 ? TEST_TOL_F16 : TEST_TOL_F32;
}

static void run_case(test_gpu *g, const kv_case *c, uint32_t policy, uint64_t seed)
{
    vkattn_context *ctx = g->ctx;
    char what[200];
    describe(c, policy, what, sizeof what);
    test_rng rng = test_rng_seed(seed);
    const uint32_t DV = c->DV ? c->DV : c->D;
    vkattn_kv_cache_desc d = {.num_kv_heads = c->Hkv,
                              .num_heads = c->Hq,
                              .head_dim = c->D,
                              .v_head_dim = c->DV,
                              .dtype = c->cdt,
                              .max_sequences = 4,
                              .capacity = c->capacity,
                              .block_size = c->block_size};
    kv_host h;
    kv_host_create(g, &d, &h);
    /* History: each sequence alone, in two appends (the second starts
     * inside a block), then the step's append for the whole batch. */
    for (uint32_t b = 0; b < c->batch; b++) {
        uint32_t first = c->prior[b] / 3;
        if (first)
            kv_append(ctx, &h, 1, &c->seqs[b], first, &rng);
        if (c->prior[b] - first)
            kv_append(ctx, &h, 1, &c->seqs[b], c->prior[b] - first, &rng);
    }
    kv_append(ctx, &h, c->batch, c->seqs, c->T, &rng);

    att_io io;
    att_io_create2(ctx, &io, c->batch, c->Hq, c->T, c->D, DV, c->qdt, c->merged, &rng);
    vkattn_kv_attention_args a = att_args(&h, &io, c->seqs, c->scale, c->splits);
    TEST_OK(ctx, vkattn_kv_attention(ctx, &a));
    size_t n = (size_t)c->batch * c->Hq * c->T * DV;
    float *got = malloc(n * sizeof *got), *want = malloc(n * sizeof *want);
    assert_true(got && want);
    att_io_result(ctx, &io, got);
    kv_reference(&h, c->batch, c->seqs, c->Hq, c->T, c->scale, io.q, want);
    test_assert_close(got, want, n, tolerance(c->cdt, c->qdt), what);
    /* attention changes no length */
    for (uint32_t b = 0; b < c->batch; b++) {
        uint32_t len;
        TEST_OK(ctx, vkattn_kv_cache_length(h.cache, c->seqs[b], &len));
        assert_int_equal(len, c->prior[b] + c->T);
    }
    free(got);
    free(want);
    att_io_destroy(&io);
    kv_host_destroy(&h);
    test_assert_no_validation_messages(ctx);
}

/* Grid case i runs on one subgroup and one shared-memory policy, texel
 * inputs for even i, storage for odd i. */
static void run_grid_cases(test_policy_suite *s, const uint32_t *cases, size_t count)
{
    for (size_t n = 0; n < count; n++)
        for (uint32_t fam = 0, i = cases[n]; fam < 2; fam++) {
            uint32_t policy = (i % 2) + 2 * fam;
            if (s->gpu[policy])
                run_case(s->gpu[policy], &grid[i], policy, 100 + i);
        }
}

/* The grid by what its cases prove (together: every case once). */
static void test_decode_matches_reference(void **state)
{
    static const uint32_t cases[] = {0, 1, 2, 3}; /* MHA, GQA 4 and 8, MQA; T <= 16 */
    run_grid_cases(*state, cases, sizeof cases / sizeof cases[0]);
}

static void test_decode_fixed_splits_match_reference(void **state)
{
    static const uint32_t cases[] = {7, 8}; /* explicit kv_splits 3 and 7 */
    run_grid_cases(*state, cases, sizeof cases / sizeof cases[0]);
}

static void test_prefill_matches_reference(void **state)
{
    static const uint32_t cases[] = {4, 5, 6}; /* T = 40 on empty and non-empty sequences */
    run_grid_cases(*state, cases, sizeof cases / sizeof cases[0]);
}

/* bf16 caches and queries on every policy (the texel ones read bf16
 * through rgba32ui views in the decode kernel) */
static void test_bf16_matches_reference(void **state)
{
    test_policy_suite *s = *state;
    for (uint32_t i = 9; i < 12; i++)
        for (uint32_t policy = 0; policy < TEST_POLICY_COUNT; policy++)
            if (s->gpu[policy])
                run_case(s->gpu[policy], &grid[i], policy, 100 + i);
}

/* K and V of different head dims, head dims up to 576 and not multiples
 * of 8, on every policy */
static void test_head_dims_match_reference(void **state)
{
    test_policy_suite *s = *state;
    for (uint32_t i = 12; i < GRID_COUNT; i++)
        for (uint32_t policy = 0; policy < TEST_POLICY_COUNT; policy++)
            if (s->gpu[policy])
                run_case(s->gpu[policy], &grid[i], policy, 100 + i);
}

/* ---- split counts: all close to the reference and to each other; a fixed
 * count (and the automatic one) gives the same bits every run */

static void splits_on(test_gpu *g, uint32_t policy)
{
    vkattn_context *ctx = g->ctx;
    test_rng rng = test_rng_seed(7 + policy);
    vkattn_kv_cache_desc d = {.num_kv_heads = 2,
                              .num_heads = 8,
                              .head_dim = 64,
                              .dtype = policy % 2 ? F32 : F16,
                              .max_sequences = 4,
                              .capacity = 600,
                              .block_size = 16,
                              .num_blocks = 48};
    /* (48 blocks: within SwiftShader's 65536 texels, so its texel policies
     * run texel inputs too) */
    kv_host h;
    kv_host_create(g, &d, &h);
    const uint32_t seqs[3] = {1, 3, 0};
    kv_append(ctx, &h, 1, &seqs[0], 530, &rng);
    kv_append(ctx, &h, 1, &seqs[1], 77, &rng);
    kv_append(ctx, &h, 3, seqs, 2, &rng);
    att_io io;
    att_io_create(ctx, &io, 3, 8, 2, 64, d.dtype, false, &rng);
    size_t n = (size_t)3 * 8 * 2 * 64;
    float *want = malloc(n * sizeof *want), *got = malloc(n * sizeof *got);
    float *first = malloc(n * sizeof *first), *again = malloc(n * sizeof *again);
    assert_true(want && got && first && again);
    kv_reference(&h, 3, seqs, 8, 2, 0.0f, io.q, want);
    double tol = tolerance(d.dtype, d.dtype);
    const uint32_t counts[] = {1, 2, 7, 0, 32};
    for (size_t ci = 0; ci < sizeof counts / sizeof counts[0]; ci++) {
        char what[120];
        snprintf(what, sizeof what, "%s kv_splits %u", test_policies[policy].name, counts[ci]);
        vkattn_kv_attention_args a = att_args(&h, &io, seqs, 0.0f, counts[ci]);
        TEST_OK(ctx, vkattn_kv_attention(ctx, &a));
        att_io_result(ctx, &io, first);
        test_assert_close(first, want, n, tol, what);
        if (ci == 0)
            memcpy(got, first, n * sizeof *got);
        else
            test_assert_close(first, got, n, tol, what); /* vs one split */
        for (int rep = 0; rep < 2; rep++) {
            TEST_OK(ctx, vkattn_kv_attention(ctx, &a));
            att_io_result(ctx, &io, again);
            if (memcmp(first, again, n * sizeof *first) != 0)
                fail_msg("%s: run %d differs from the first", what, rep + 2);
        }
    }
    free(want), free(got), free(first), free(again);
    att_io_destroy(&io);
    kv_host_destroy(&h);
}

static void test_splits(void **state)
{
    test_policy_suite *s = *state;
    for (uint32_t p = 0; p < TEST_POLICY_COUNT; p++)
        if (s->gpu[p])
            splits_on(s->gpu[p], p);
}

/* ---- decode steps recorded into one command buffer: append, attention,
 * append, attention (split and not), with synchronization validation
 * watching the cache's internal buffers */

static void one_buffer_on(test_gpu *g, uint32_t policy)
{
    vkattn_context *ctx = g->ctx;
    test_rng rng = test_rng_seed(31 + policy);
    vkattn_kv_cache_desc d = test_kv_desc(2, 4, 32, 3, 300, 5);
    kv_host h;
    kv_host_create(g, &d, &h);
    const uint32_t seqs[2] = {2, 0};
    kv_append(ctx, &h, 2, seqs, 41, &rng);
    {
        /* two appends back to back in one command buffer */
        pending_append p0, p1;
        prepare_append(ctx, &h, 2, seqs, 3, &rng, &p0);
        prepare_append(ctx, &h, 1, &seqs[1], 2, &rng, &p1);
        VkCommandBuffer c0;
        TEST_OK(ctx, vkattn_commands_begin(ctx, &c0));
        TEST_OK(ctx, vkattn_cmd_kv_cache_append(ctx, c0, &p0.a));
        TEST_OK(ctx, vkattn_cmd_kv_cache_append(ctx, c0, &p1.a));
        TEST_OK(ctx, vkattn_commands_submit(ctx));
        pending_free(&p0);
        pending_free(&p1);
        test_assert_no_validation_messages(ctx);
    }
    const uint32_t steps = 3, splits[3] = {4, 1, 0};
    att_io io[3];
    pending_append ap[3];
    float *want[3];
    size_t n = (size_t)2 * 4 * 1 * 32;
    for (uint32_t st = 0; st < steps; st++) {
        prepare_append(ctx, &h, 2, seqs, 1, &rng, &ap[st]);
        att_io_create(ctx, &io[st], 2, 4, 1, 32, F32, st == 1, &rng);
        want[st] = malloc(n * sizeof(float));
        assert_non_null(want[st]);
        kv_reference(&h, 2, seqs, 4, 1, 0.0f, io[st].q, want[st]);
    }
    VkCommandBuffer cmd;
    TEST_OK(ctx, vkattn_commands_begin(ctx, &cmd));
    for (uint32_t st = 0; st < steps; st++) {
        TEST_OK(ctx, vkattn_cmd_kv_cache_append(ctx, cmd, &ap[st].a));
        vkattn_kv_attention_args a = att_args(&h, &io[st], seqs, 0.0f, splits[st]);
        TEST_OK(ctx, vkattn_cmd_kv_attention(ctx, cmd, &a));
    }
    TEST_OK(ctx, vkattn_commands_submit(ctx));
    float *got = malloc(n * sizeof *got);
    assert_non_null(got);
    for (uint32_t st = 0; st < steps; st++) {
        char what[80];
        snprintf(what, sizeof what, "%s step %u in one command buffer", test_policies[policy].name,
                 st);
        att_io_result(ctx, &io[st], got);
        test_assert_close(got, want[st], n, TEST_TOL_F32, what);
        att_io_destroy(&io[st]);
        pending_free(&ap[st]);
        free(want[st]);
    }
    free(got);
    kv_host_destroy(&h);
    test_assert_no_validation_messages(ctx);
}

static void test_one_command_buffer(void **state)
{
    test_policy_suite *s = *state;
    for (uint32_t p = 0; p < TEST_POLICY_COUNT; p++)
        if (s->gpu[p])
            one_buffer_on(s->gpu[p], p);
}

/* ---- attention alone over what a cache holds, more queries than keys in
 * one sequence: its first queries see no key and get zeros, never NaN */

static void test_more_queries_than_keys(void **state)
{
    test_policy_suite *s = *state;
    for (uint32_t policy = 0; policy < TEST_POLICY_COUNT; policy += 3) {
        test_gpu *g = s->gpu[policy];
        if (!g)
            continue;
        vkattn_context *ctx = g->ctx;
        test_rng rng = test_rng_seed(77);
        vkattn_kv_cache_desc d = test_kv_desc(1, 2, 16, 2, 32, 5);
        kv_host h;
        kv_host_create(g, &d, &h);
        const uint32_t seqs[2] = {1, 0};
        kv_append(ctx, &h, 1, &seqs[0], 2, &rng);
        kv_append(ctx, &h, 1, &seqs[1], 9, &rng);
        att_io io;
        att_io_create(ctx, &io, 2, 2, 4, 16, F32, false, &rng);
        for (uint32_t splits = 1; splits <= 3; splits += 2) {
            vkattn_kv_attention_args a = att_args(&h, &io, seqs, 0.0f, splits);
            TEST_OK(ctx, vkattn_kv_attention(ctx, &a));
            size_t n = (size_t)2 * 2 * 4 * 16;
            float got[2 * 2 * 4 * 16], want[2 * 2 * 4 * 16];
            att_io_result(ctx, &io, got);
            kv_reference(&h, 2, seqs, 2, 4, 0.0f, io.q, want);
            char what[80];
            snprintf(what, sizeof what, "%s T 4 over 2 keys, kv_splits %u",
                     test_policies[policy].name, splits);
            test_assert_close(got, want, n, TEST_TOL_F32, what);
            for (uint32_t hq = 0; hq < 2; hq++) /* sequence 1 (row 0): queries 0, 1 see nothing */
                for (uint32_t i = 0; i < 2; i++)
                    for (uint32_t e = 0; e < 16; e++)
                        assert_true(got[(hq * 4 + i) * 16 + e] == 0.0f);
        }
        att_io_destroy(&io);
        kv_host_destroy(&h);
        test_assert_no_validation_messages(ctx);
    }
}

/* ---- suite */

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kv_errors),
        cmocka_unit_test(test_decode_matches_reference),
        cmocka_unit_test(test_decode_fixed_splits_match_reference),
        cmocka_unit_test(test_prefill_matches_reference),
        cmocka_unit_test(test_bf16_matches_reference),
        cmocka_unit_test(test_head_dims_match_reference),
        cmocka_unit_test(test_splits),
        cmocka_unit_test(test_one_command_buffer),
        cmocka_unit_test(test_more_queries_than_keys),
    };
    return cmocka_run_group_tests(tests, test_policy_suite_setup, test_policy_suite_teardown);
}
