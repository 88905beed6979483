/* The tuner: every candidate configuration it may pick computes the same
 * result as the CPU reference (so tuning can only change speed), the
 * vkattn_<op>_tune calls store an entry for their op and shape class, later
 * calls use it, and bad arguments are named. Uses internal interfaces
 * (candidates and recording with a given configuration). */
#include "test_kv_util.h"
#include "test_util.h"

#include "ops/attention/attention_internal.h"
#include "ops/kvcache/kvcache_internal.h"
#include "ops/linear/linear_internal.h"
#include "core/tuning_table.h"

#include <math.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The context's tuning data as text (caller frees). */
static char *tuning_text(vkattn_context *ctx)
{
    size_t n = 0;
    TEST_OK(ctx, vkattn_context_tuning_data(ctx, NULL, &n));
    char *text = calloc(1, n + 1);
    TEST_OK(ctx, vkattn_context_tuning_data(ctx, text, &n));
    return text;
}

/* Entries of op `op` (the first number of an entry line). */
static int entries_of(vkattn_context *ctx, unsigned op)
{
    char *text = tuning_text(ctx);
    int count = 0;
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        unsigned first = 0;
        if (line[0] >= '0' && line[0] <= '9' && sscanf(line, "%u", &first) == 1 && first == op)
            count++;
    }
    free(text);
    return count;
}

/* Fills the output with NaN (all bits set, in f32 and f16): a candidate
 * that leaves any element unwritten fails the comparison. */
static void poison(vkattn_context *ctx, vkattn_buffer *b, uint64_t bytes)
{
    uint8_t *ones = malloc(bytes);
    memset(ones, 0xff, bytes);
    TEST_OK(ctx, vkattn_buffer_upload(b, 0, ones, bytes));
    free(ones);
}

/* Submits the context's command buffer after a recording call returned
 * `recorded`; discards it and fails when that is an error. */
static void submit_recorded(test_gpu *g, vkattn_result recorded)
{
    if (recorded != VKATTN_SUCCESS) {
        vkattn_commands_discard(g->ctx);
        TEST_OK(g->ctx, recorded);
    }
    TEST_OK(g->ctx, vkattn_commands_submit(g->ctx));
}

/* ------------------------------------------------------------------ linear */

/* y = x W^T + b for rows m (a GEMM shape and a GEMV shape), every candidate. */
static void check_linear_candidates(test_gpu *g, uint32_t m, vkattn_dtype xdt, vkattn_dtype wdt)
{
    const uint32_t n = 40, k = 72;
    test_rng rng = test_rng_seed(11 + m);
    /* x and y in x's dtype, W and the bias in W's (the reference sees the
     * rounded inputs) */
    float *x = test_random_array(&rng, (size_t)m * k, 1.0f, xdt);
    float *w = test_random_array(&rng, (size_t)n * k, 1.0f, wdt);
    float *b = test_random_array(&rng, n, 1.0f, wdt);
    float *want = malloc(sizeof(float) * m * n), *got = malloc(sizeof(float) * m * n);
    size_t xes = vkattn_dtype_size(xdt);
    vkattn_buffer *bx = test_buffer_of(g->ctx, xdt, x, (size_t)m * k);
    vkattn_buffer *bw = test_buffer_of(g->ctx, wdt, w, (size_t)n * k);
    vkattn_buffer *bb = test_buffer_of(g->ctx, wdt, b, n);
    vkattn_buffer *by = test_buffer_with(g->ctx, NULL, (uint64_t)m * n * xes);
    int64_t xs[2] = {m, k}, ws[2] = {n, k}, bs[1] = {n}, ys[2] = {m, n};
    vkattn_ref_linear_args ra = {vkattn_host_tensor_make(x, VKATTN_DTYPE_F32, 2, xs),
                                 vkattn_host_tensor_make(w, VKATTN_DTYPE_F32, 2, ws),
                                 vkattn_host_tensor_make(b, VKATTN_DTYPE_F32, 1, bs),
                                 vkattn_host_tensor_make(want, VKATTN_DTYPE_F32, 2, ys)};
    assert_int_equal(vkattn_ref_linear(&ra, NULL, 0), VKATTN_SUCCESS);
    vkattn_linear_args a = {
        vkattn_tensor_make(bx, 0, xdt, 2, xs), vkattn_tensor_make(bw, 0, wdt, 2, ws),
        vkattn_tensor_make(bb, 0, wdt, 1, bs), vkattn_tensor_make(by, 0, xdt, 2, ys)};
    vka_linear_problem p;
    TEST_OK(g->ctx, vka_linear_problem_plain(g->ctx, &a, &p));
    vka_linear_config cands[16];
    uint32_t count = vka_linear_config_candidates(g->ctx, &p, cands, 16);
    assert_true(count >= 1);
    /* the reference sees the rounded inputs: the output's dtype sets the
     * tolerance (f16 weights under f32 activations accumulate and store f32) */
    double tol = xdt == VKATTN_DTYPE_F16 ? TEST_TOL_F16 : TEST_TOL_F32;
    for (uint32_t i = 0; i < count; i++) {
        const vka_linear_config *c = &cands[i];
        poison(g->ctx, by, (uint64_t)m * n * xes);
        VkCommandBuffer cmd;
        TEST_OK(g->ctx, vkattn_commands_begin(g->ctx, &cmd));
        submit_recorded(g, vka_linear_record(g->ctx, cmd, &p, c));
        test_download_as(g->ctx, by, xdt, got, (size_t)m * n);
        char what[128];
        snprintf(what, sizeof what, "linear m %u x %s w %s candidate family %u input %u preset %u",
                 m, vkattn_dtype_name(xdt), vkattn_dtype_name(wdt), c->family, c->input, c->preset);
        test_assert_close(got, want, (size_t)m * n, tol, what);
    }
    TEST_DESTROY_BUFFERS(bx, bw, bb, by);
    free(x), free(w), free(b), free(want), free(got);
}

static void test_linear_candidates_match_reference(void **state)
{
    test_gpu *g = *state;
    check_linear_candidates(g, 33, VKATTN_DTYPE_F32, VKATTN_DTYPE_F32); /* GEMM families */
    check_linear_candidates(g, 33, VKATTN_DTYPE_F32,
                            VKATTN_DTYPE_F16); /* f16 weights, packed reads */
    check_linear_candidates(g, 2, VKATTN_DTYPE_F16, VKATTN_DTYPE_F16); /* GEMV families */
    check_linear_candidates(g, 1, VKATTN_DTYPE_F32, VKATTN_DTYPE_F16); /* decode's GEMV */
    test_assert_no_validation_messages(g->ctx);
}

/* --------------------------------------------------------------- attention */

/* Every attention candidate against the CPU reference at head dim `d`,
 * optionally with an additive [Tq, Tk] mask (some keys -inf) and key padding
 * (batch 1 hides its last keys): masks and head dim select other
 * specializations of each kernel. */
static void check_attention_candidates(test_gpu *g, vkattn_dtype dt, bool causal, uint32_t d,
                                       bool masks)
{
    enum { B = 2, HQ = 4, HKV = 2, TQ = 19, TK = 27 };
    const uint32_t D = d;
    const size_t nq = (size_t)B * HQ * TQ * D, nk = (size_t)B * HKV * TK * D;
    test_rng rng = test_rng_seed(5 + d);
    /* q, k, v as dt holds them (the reference sees the rounded inputs) */
    float *q = test_random_array(&rng, nq, 1.0f, dt), *k = test_random_array(&rng, nk, 1.0f, dt);
    float *v = test_random_array(&rng, nk, 1.0f, dt);
    float *want = malloc(sizeof(float) * nq), *got = malloc(sizeof(float) * nq);
    float mask[TQ * TK];
    uint8_t pad[B * TK];
    test_fill_uniform(&rng, mask, TQ * TK, -2, 2);
    for (uint32_t i = 0; i < TQ * TK; i++)
        if (i % 7 == 3)
            mask[i] = -INFINITY;
    for (uint32_t i = 0; i < B * TK; i++)
        pad[i] = !(i >= TK && i % TK >= TK - 5);
    size_t es = vkattn_dtype_size(dt);
    vkattn_buffer *bq = test_buffer_of(g->ctx, dt, q, nq), *bk = test_buffer_of(g->ctx, dt, k, nk);
    vkattn_buffer *bv = test_buffer_of(g->ctx, dt, v, nk),
                  *bo = test_buffer_with(g->ctx, NULL, nq * es);
    vkattn_buffer *bm = test_buffer_with(g->ctx, mask, sizeof mask);
    vkattn_buffer *bp = test_buffer_with(g->ctx, pad, sizeof pad);
    int64_t qs[4] = {B, HQ, TQ, D}, ks[4] = {B, HKV, TK, D}, ms[2] = {TQ, TK}, ps[2] = {B, TK};
    vkattn_ref_attention_args r = {.q = vkattn_host_tensor_make(q, VKATTN_DTYPE_F32, 4, qs),
                                   .k = vkattn_host_tensor_make(k, VKATTN_DTYPE_F32, 4, ks),
                                   .v = vkattn_host_tensor_make(v, VKATTN_DTYPE_F32, 4, ks),
                                   .out = vkattn_host_tensor_make(want, VKATTN_DTYPE_F32, 4, qs),
                                   .causal = causal};
    vkattn_attention_args a = {.q = vkattn_tensor_make(bq, 0, dt, 4, qs),
                               .k = vkattn_tensor_make(bk, 0, dt, 4, ks),
                               .v = vkattn_tensor_make(bv, 0, dt, 4, ks),
                               .out = vkattn_tensor_make(bo, 0, dt, 4, qs),
                               .causal = causal};
    if (masks) {
        r.mask = vkattn_host_tensor_make(mask, VKATTN_DTYPE_F32, 2, ms);
        r.key_padding = vkattn_host_tensor_make(pad, VKATTN_DTYPE_U8, 2, ps);
        a.mask = vkattn_tensor_make(bm, 0, VKATTN_DTYPE_F32, 2, ms);
        a.key_padding = vkattn_tensor_make(bp, 0, VKATTN_DTYPE_U8, 2, ps);
    }
    assert_int_equal(vkattn_ref_attention(&r, NULL, 0), VKATTN_SUCCESS);
    vka_att_problem p;
    TEST_OK(g->ctx, vka_att_validate(g->ctx, &a, &p));
    vka_att_config cands[16];
    uint32_t count = vka_att_config_candidates(g->ctx, &p, cands, 16);
    assert_true(count >= 1);
    for (uint32_t i = 0; i < count; i++) {
        const vka_att_config *c = &cands[i];
        poison(g->ctx, bo, nq * es);
        VkCommandBuffer cmd;
        TEST_OK(g->ctx, vkattn_commands_begin(g->ctx, &cmd));
        submit_recorded(g, vka_att_record_with(g->ctx, cmd, &p, c));
        test_download_as(g->ctx, bo, dt, got, nq);
        char what[128];
        snprintf(what, sizeof what, "attention %s D %u%s%s candidate family %u texel %d preset %u",
                 dt == VKATTN_DTYPE_F16 ? "f16" : "f32", D, causal ? " causal" : "",
                 masks ? " mask+padding" : "", c->family, c->texel, c->preset);
        test_assert_close(got, want, nq, dt == VKATTN_DTYPE_F16 ? TEST_TOL_F16 : TEST_TOL_F32,
                          what);
    }
    TEST_DESTROY_BUFFERS(bq, bk, bv, bo, bm, bp);
    free(q), free(k), free(v), free(want), free(got);
}

static void test_attention_candidates_match_reference(void **state)
{
    test_gpu *g = *state;
    check_attention_candidates(g, VKATTN_DTYPE_F32, true, 32, false);
    check_attention_candidates(g, VKATTN_DTYPE_F16, false, 32, false);
    /* the benchmarked head dim with f16 K/V, and the masked kernels */
    check_attention_candidates(g, VKATTN_DTYPE_F16, true, 128, true);
    check_attention_candidates(g, VKATTN_DTYPE_F32, false, 64, true);
    test_assert_no_validation_messages(g->ctx);
}

/* ----------------------------------------------------------------- tuners */

static void test_tuners_store_entries(void **state)
{
    test_gpu *g = *state;
    int linear0 = entries_of(g->ctx, VKA_TUNE_LINEAR),
        attention0 = entries_of(g->ctx, VKA_TUNE_ATTENTION),
        kv0 = entries_of(g->ctx, VKA_TUNE_KV_ATTENTION);
    TEST_OK(g->ctx,
            vkattn_linear_tune(g->ctx, &(vkattn_linear_tune_args){24, 48, 64, VKATTN_DTYPE_F32,
                                                                  VKATTN_DTYPE_F32}));
    assert_int_equal(entries_of(g->ctx, VKA_TUNE_LINEAR), linear0 + 1);
    /* the same shape class again replaces, never adds */
    TEST_OK(g->ctx,
            vkattn_linear_tune(g->ctx, &(vkattn_linear_tune_args){24, 48, 64, VKATTN_DTYPE_F32,
                                                                  VKATTN_DTYPE_F32}));
    assert_int_equal(entries_of(g->ctx, VKA_TUNE_LINEAR), linear0 + 1);
    TEST_OK(g->ctx, vkattn_attention_tune(
                        g->ctx, &(vkattn_attention_tune_args){1, 4, 2, 16, 16, 32, true,
                                                              VKATTN_DTYPE_F32, VKATTN_DTYPE_F16}));
    assert_int_equal(entries_of(g->ctx, VKA_TUNE_ATTENTION), attention0 + 1);

    vkattn_kv_cache_desc cd = {.num_kv_heads = 2,
                               .num_heads = 8,
                               .head_dim = 32,
                               .dtype = VKATTN_DTYPE_F32,
                               .max_sequences = 1,
                               .capacity = 8};
    vkattn_kv_cache *cache = NULL;
    TEST_OK(g->ctx, vkattn_kv_cache_create(g->ctx, &cd, &cache));
    TEST_OK(g->ctx,
            vkattn_kv_attention_tune(g->ctx, &(vkattn_kv_attention_tune_args){cache, 2, 1, 96}));
    assert_int_equal(entries_of(g->ctx, VKA_TUNE_KV_ATTENTION), kv0 + 1);
    uint32_t len = 1;
    TEST_OK(g->ctx, vkattn_kv_cache_length(cache, 0, &len));
    assert_int_equal(len, 0); /* the cache itself is not touched */
    vkattn_kv_cache_destroy(cache);

    /* the layer tunes its projections and both mask kinds of attention */
    vkattn_mha_desc md = {.embed_dim = 64, .num_heads = 4, .num_kv_heads = 2};
    vkattn_mha *mha = NULL;
    TEST_OK(g->ctx, vkattn_mha_create(g->ctx, &md, &mha));
    int linear1 = entries_of(g->ctx, VKA_TUNE_LINEAR),
        attention1 = entries_of(g->ctx, VKA_TUNE_ATTENTION);
    TEST_OK(g->ctx, vkattn_mha_tune(mha, &(vkattn_mha_tune_args){1, 12, 12}));
    assert_true(entries_of(g->ctx, VKA_TUNE_LINEAR) >= linear1 + 1);
    assert_int_equal(entries_of(g->ctx, VKA_TUNE_ATTENTION), attention1 + 2);

    vkattn_mha_destroy(mha);

    /* a decode step of 2 sequences: its two projections (2 rows; N 512 and
     * 256 are different classes) and its split count */
    vkattn_mha_desc sm = {.embed_dim = 256, .num_heads = 4, .num_kv_heads = 2};
    TEST_OK(g->ctx, vkattn_mha_create(g->ctx, &sm, &mha));
    vkattn_kv_cache_desc sd = {
        .num_kv_heads = 2, .num_heads = 4, .head_dim = 64, .max_sequences = 2, .capacity = 40};
    TEST_OK(g->ctx, vkattn_kv_cache_create(g->ctx, &sd, &cache));
    int linear2 = entries_of(g->ctx, VKA_TUNE_LINEAR),
        kv2 = entries_of(g->ctx, VKA_TUNE_KV_ATTENTION);
    TEST_OK(g->ctx, vkattn_mha_step_tune(mha, &(vkattn_mha_step_tune_args){cache, 2, 1, 40}));
    assert_int_equal(entries_of(g->ctx, VKA_TUNE_LINEAR), linear2 + 2);
    assert_int_equal(entries_of(g->ctx, VKA_TUNE_KV_ATTENTION), kv2 + 1);
    /* a prefill step longer than the split-KV path: projections only */
    int linear3 = entries_of(g->ctx, VKA_TUNE_LINEAR);
    TEST_OK(g->ctx, vkattn_mha_step_tune(mha, &(vkattn_mha_step_tune_args){cache, 1, 33, 33}));
    assert_int_equal(entries_of(g->ctx, VKA_TUNE_LINEAR), linear3 + 2);
    assert_int_equal(entries_of(g->ctx, VKA_TUNE_KV_ATTENTION), kv2 + 1);
    TEST_OK(g->ctx, vkattn_kv_cache_length(cache, 0, &len));
    assert_int_equal(len, 0);
    vkattn_kv_cache_destroy(cache);
    vkattn_mha_destroy(mha);
    test_assert_no_validation_messages(g->ctx);
}

/* The tuned split count is stored (under the key the automatic choice of
 * kv_attention_config.c looks up), and decoding with the automatic choice and with
 * every count the tuner may pick (powers of two up to the length) matches
 * the CPU reference. */
static void test_tuned_kv_splits_match_reference(void **state)
{
    test_gpu *g = *state;
    enum { HKV = 2, HQ = 8, D = 32, L = 70, B = 2 };
    vkattn_kv_cache_desc cd = {.num_kv_heads = HKV,
                               .num_heads = HQ,
                               .head_dim = D,
                               .dtype = VKATTN_DTYPE_F32,
                               .max_sequences = B,
                               .capacity = 80};
    kv_host h;
    kv_host_create(g, &cd, &h);
    const uint32_t seqs[B] = {0, 1};
    test_rng rng = test_rng_seed(9);
    kv_append(g->ctx, &h, B, seqs, L, &rng);
    TEST_OK(g->ctx,
            vkattn_kv_attention_tune(g->ctx, &(vkattn_kv_attention_tune_args){h.cache, B, 1, L}));
    vka_tuning_key key;
    vka_kv_tuning_key(h.cache, VKATTN_DTYPE_F32, B, 1, L, &key);
    vka_tuning_config stored;
    assert_true(vka_tuning_find(g->ctx, &key, VKA_KV_CONFIG_VERSION, &stored));
    uint32_t tuned = stored.words[0];
    assert_true(tuned >= 1 && tuned <= L && (tuned & (tuned - 1)) == 0);

    att_io io;
    att_io_create(g->ctx, &io, B, HQ, 1, D, VKATTN_DTYPE_F32, false, &rng);
    const size_t nq = (size_t)B * HQ * D;
    float *want = malloc(sizeof(float) * nq), *got = malloc(sizeof(float) * nq);
    kv_reference(&h, B, seqs, HQ, 1, 0.0f, io.q, want);
    /* 0: automatic (the tuned count), then the candidates */
    for (uint32_t splits = 0; splits <= L; splits = splits ? 2 * splits : 1) {
        vkattn_kv_attention_args a = att_args(&h, &io, seqs, 0.0f, splits);
        TEST_OK(g->ctx, vkattn_kv_attention(g->ctx, &a));
        att_io_result(g->ctx, &io, got);
        char what[64];
        snprintf(what, sizeof what, "decode, kv_splits %u (tuned %u)", splits, tuned);
        test_assert_close(got, want, nq, TEST_TOL_F32, what);
    }
    att_io_destroy(&io);
    kv_host_destroy(&h);
    free(want), free(got);
    test_assert_no_validation_messages(g->ctx);
}

/* A stored entry steers later calls of its shape class: the linear op takes
 * a stored non-default candidate (also for a problem appending to a KV
 * cache), and an entry of another config version is ignored for the
 * built-in choice. */
static void test_stored_linear_entry_is_used(void **state)
{
    test_gpu *g = *state;
    int64_t xs[2] = {20, 64}, ws[2] = {48, 64}, bs[1] = {48}, ys[2] = {20, 48};
    vkattn_buffer *bx = test_buffer_with(g->ctx, NULL, 20 * 64 * 4);
    vkattn_buffer *bw = test_buffer_with(g->ctx, NULL, 48 * 64 * 4);
    vkattn_buffer *bb = test_buffer_with(g->ctx, NULL, 48 * 4);
    vkattn_buffer *by = test_buffer_with(g->ctx, NULL, 20 * 48 * 4);
    vkattn_linear_args a = {vkattn_tensor_make(bx, 0, VKATTN_DTYPE_F32, 2, xs),
                            vkattn_tensor_make(bw, 0, VKATTN_DTYPE_F32, 2, ws),
                            vkattn_tensor_make(bb, 0, VKATTN_DTYPE_F32, 1, bs),
                            vkattn_tensor_make(by, 0, VKATTN_DTYPE_F32, 2, ys)};
    vka_linear_problem p;
    TEST_OK(g->ctx, vka_linear_problem_plain(g->ctx, &a, &p));
    vka_linear_config def, cands[16], got;
    vka_linear_config_default(g->ctx, &p, &def);
    uint32_t count = vka_linear_config_candidates(g->ctx, &p, cands, 16);
    assert_true(count >= 2);
    vka_linear_config other = cands[count - 1];
    assert_memory_not_equal(&other, &def, sizeof def);
    vka_tuning_key key = {.op = VKA_TUNE_LINEAR};
    vka_linear_tuning_key(&p, key.values);
    vka_tuning_config cfg = {{other.family, other.input, other.preset}};
    TEST_OK(g->ctx, vka_tuning_set(g->ctx, &key, LINEAR_CONFIG_VERSION, &cfg, 1.0f));
    vka_linear_config_choose(g->ctx, &p, &got);
    assert_memory_equal(&got, &other, sizeof got);
    /* a projection that appends to a KV cache's pools (an MHA step's) takes
     * the plain GEMM's entry: that is what vkattn_linear_tune and
     * vkattn_mha_step_tune time */
    vka_linear_problem pooled = p;
    pooled.pool_segments = 6; /* segments 1 and 2: K and V */
    vka_linear_config_choose(g->ctx, &pooled, &got);
    assert_memory_equal(&got, &other, sizeof got);
    TEST_OK(g->ctx, vka_tuning_set(g->ctx, &key, LINEAR_CONFIG_VERSION + 1, &cfg, 1.0f));
    vka_linear_config_choose(g->ctx, &p, &got);
    assert_memory_equal(&got, &def, sizeof got);
    TEST_DESTROY_BUFFERS(bx, bw, bb, by);
    test_assert_no_validation_messages(g->ctx);
}

static bool same_att_config(const vka_att_config *a, const vka_att_config *b)
{
    return a->family == b->family && a->texel == b->texel && a->preset == b->preset;
}

/* The same for attention (its words carry ATT_CONFIG_VERSION). */
static void test_stored_attention_entry_is_used(void **state)
{
    test_gpu *g = *state;
    int64_t qs[4] = {1, 4, 9, 32}, ks[4] = {1, 2, 9, 32};
    vkattn_buffer *bq = test_buffer_with(g->ctx, NULL, 4 * 9 * 32 * 4);
    vkattn_buffer *bkv = test_buffer_with(g->ctx, NULL, 2 * 9 * 32 * 4);
    vkattn_buffer *bo = test_buffer_with(g->ctx, NULL, 4 * 9 * 32 * 4);
    vkattn_attention_args a = {.q = vkattn_tensor_make(bq, 0, VKATTN_DTYPE_F32, 4, qs),
                               .k = vkattn_tensor_make(bkv, 0, VKATTN_DTYPE_F32, 4, ks),
                               .v = vkattn_tensor_make(bkv, 0, VKATTN_DTYPE_F32, 4, ks),
                               .out = vkattn_tensor_make(bo, 0, VKATTN_DTYPE_F32, 4, qs)};
    vka_att_problem ap;
    TEST_OK(g->ctx, vka_att_validate(g->ctx, &a, &ap));
    vka_att_config def, cands[16], got;
    vka_att_config_default(g->ctx, &ap, &def);
    uint32_t count = vka_att_config_candidates(g->ctx, &ap, cands, 16);
    assert_true(count >= 2);
    vka_att_config other = cands[count - 1];
    assert_false(same_att_config(&other, &def));
    vka_tuning_key key = {.op = VKA_TUNE_ATTENTION};
    vka_att_tuning_key(&ap, key.values);
    vka_tuning_config cfg = {{other.family, other.texel, other.preset}};
    TEST_OK(g->ctx, vka_tuning_set(g->ctx, &key, ATT_CONFIG_VERSION, &cfg, 1.0f));
    vka_att_config_choose(g->ctx, &ap, &got);
    assert_true(same_att_config(&got, &other));
    /* written before the version word existed */
    TEST_OK(g->ctx, vka_tuning_set(g->ctx, &key, 0, &cfg, 1.0f));
    vka_att_config_choose(g->ctx, &ap, &got);
    assert_true(same_att_config(&got, &def));
    TEST_DESTROY_BUFFERS(bq, bkv, bo);
    test_assert_no_validation_messages(g->ctx);
}

static void test_tuner_errors(void **state)
{
    test_gpu *g = *state;
    TEST_FAILS(g->ctx, VKATTN_ERROR_INVALID_ARGUMENT, "m 0",
               vkattn_linear_tune(g->ctx, &(vkattn_linear_tune_args){0, 8, 8, VKATTN_DTYPE_F32,
                                                                     VKATTN_DTYPE_F32}));
    TEST_FAILS(g->ctx, VKATTN_ERROR_UNSUPPORTED_DTYPE,
               "x_dtype f32 and w_dtype 77 (not a vkattn_dtype)",
               vkattn_linear_tune(g->ctx, &(vkattn_linear_tune_args){8, 8, 8, VKATTN_DTYPE_F32,
                                                                     (vkattn_dtype)77}));
    TEST_FAILS(g->ctx, VKATTN_ERROR_INVALID_ARGUMENT, "kv_len 0",
               vkattn_attention_tune(g->ctx, &(vkattn_attention_tune_args){1, 4, 2, 8, 0, 32, false,
                                                                           VKATTN_DTYPE_F32,
                                                                           VKATTN_DTYPE_F32}));
    /* shapes the op rejects are rejected by its tuner, with the op's message */
    TEST_FAILS(g->ctx, VKATTN_ERROR_SHAPE_MISMATCH, "does not divide",
               vkattn_attention_tune(g->ctx, &(vkattn_attention_tune_args){1, 4, 3, 8, 8, 32, false,
                                                                           VKATTN_DTYPE_F32,
                                                                           VKATTN_DTYPE_F32}));
    vkattn_kv_cache_desc cd = {
        .num_kv_heads = 1, .head_dim = 16, .max_sequences = 1, .capacity = 8};
    vkattn_kv_cache *cache = NULL;
    TEST_OK(g->ctx, vkattn_kv_cache_create(g->ctx, &cd, &cache));
    TEST_FAILS(
        g->ctx, VKATTN_ERROR_INVALID_ARGUMENT, "new_tokens 17",
        vkattn_kv_attention_tune(g->ctx, &(vkattn_kv_attention_tune_args){cache, 1, 17, 64}));
    TEST_FAILS(g->ctx, VKATTN_ERROR_INVALID_ARGUMENT, "args->cache is NULL",
               vkattn_kv_attention_tune(g->ctx, &(vkattn_kv_attention_tune_args){NULL, 1, 1, 1}));
    assert_int_equal(
        vkattn_kv_attention_tune(NULL, &(vkattn_kv_attention_tune_args){cache, 1, 1, 1}),
        VKATTN_ERROR_INVALID_ARGUMENT);
    TEST_FAILS(g->ctx, VKATTN_ERROR_INVALID_ARGUMENT, "vkattn_linear_tune: args is NULL",
               vkattn_linear_tune(g->ctx, NULL));
    assert_int_equal(vkattn_mha_tune(NULL, &(vkattn_mha_tune_args){1, 1, 1}),
                     VKATTN_ERROR_INVALID_ARGUMENT);
    vkattn_mha_desc md = {.embed_dim = 64, .num_heads = 4, .num_kv_heads = 2};
    vkattn_mha *mha = NULL;
    TEST_OK(g->ctx, vkattn_mha_create(g->ctx, &md, &mha));
    TEST_FAILS(g->ctx, VKATTN_ERROR_INVALID_ARGUMENT, "batch 65536 x q_len 65536",
               vkattn_mha_tune(mha, &(vkattn_mha_tune_args){65536, 65536, 1}));
    /* steps: sizes, and a cache the layer cannot step over */
    vkattn_kv_cache_desc sd = {
        .num_kv_heads = 2, .num_heads = 4, .head_dim = 16, .max_sequences = 1, .capacity = 8};
    vkattn_kv_cache *step_cache = NULL;
    TEST_OK(g->ctx, vkattn_kv_cache_create(g->ctx, &sd, &step_cache));
    assert_int_equal(vkattn_mha_step_tune(NULL, &(vkattn_mha_step_tune_args){step_cache, 1, 1, 1}),
                     VKATTN_ERROR_INVALID_ARGUMENT);
    TEST_FAILS(g->ctx, VKATTN_ERROR_INVALID_ARGUMENT, "new_tokens 0",
               vkattn_mha_step_tune(mha, &(vkattn_mha_step_tune_args){step_cache, 1, 0, 8}));
    TEST_FAILS(g->ctx, VKATTN_ERROR_INVALID_ARGUMENT, "length 3 >= new_tokens",
               vkattn_mha_step_tune(mha, &(vkattn_mha_step_tune_args){step_cache, 1, 4, 3}));
    TEST_FAILS(
        g->ctx, VKATTN_ERROR_INVALID_ARGUMENT, "batch 65536 x new_tokens 65536",
        vkattn_mha_step_tune(mha, &(vkattn_mha_step_tune_args){step_cache, 65536, 65536, 65536}));
    TEST_FAILS(g->ctx, VKATTN_ERROR_INVALID_ARGUMENT, "args->cache is NULL",
               vkattn_mha_step_tune(mha, &(vkattn_mha_step_tune_args){NULL, 1, 1, 8}));
    TEST_FAILS(g->ctx, VKATTN_ERROR_SHAPE_MISMATCH, "cache holds 1 KV heads x head_dim 16",
               vkattn_mha_step_tune(mha, &(vkattn_mha_step_tune_args){cache, 1, 1, 8}));
    vkattn_kv_cache_destroy(step_cache);
    vkattn_kv_cache_destroy(cache);
    vkattn_mha_destroy(mha);
    test_assert_no_validation_messages(g->ctx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_linear_candidates_match_reference),
        cmocka_unit_test(test_attention_candidates_match_reference),
        cmocka_unit_test(test_tuners_store_entries),
        cmocka_unit_test(test_tuned_kv_splits_match_reference),
        cmocka_unit_test(test_stored_linear_entry_is_used),
        cmocka_unit_test(test_stored_attention_entry_is_used),
        cmocka_unit_test(test_tuner_errors),
    };
    return cmocka_run_group_tests(tests, test_gpu_setup, test_gpu_teardown);
}
