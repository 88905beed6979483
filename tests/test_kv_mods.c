/* Score modifiers over a KV cache (vkattn_kv_attention): sliding window,
 * softcap, ALiBi (slopes and max bias), sinks and the LSE output, each alone
 * and combined, against vkattn_ref_attention per sequence - MHA / GQA /
 * MQA, f32 and f16 (and q8_0 / q4_0 caches), contiguous and paged caches, decode (split-KV, the sinks
 * and LSE joined in the combine pass) and prefill, long caches with windows
 * much shorter than them (tiles skipped); windowed caches giving blocks back
 * as the window slides (free counts rise, results still match, released
 * blocks reused by another sequence); bad input: named errors, nothing
 * written, the cache unchanged. Every case runs on every kernel policy. */
#include "test_kv_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

enum { ALIBI_NONE, ALIBI_SLOPES, ALIBI_MAX_BIAS };

typedef struct mods {
    uint32_t window;
    float softcap;
    bool sinks;
    int alibi; /* ALIBI_* */
    bool lse;
} mods;

typedef struct mods_case {
    const char *name;
    uint32_t Hq, Hkv, D;
    vkattn_dtype cdt, qdt;
    uint32_t block_size;   /* 0: contiguous */
    uint32_t cache_window; /* paged only; 0: keep everything */
    uint32_t capacity;
    uint32_t batch;
    uint32_t seqs[3], prior[3];
    uint32_t T, splits;
    float scale;
    mods m;
} mods_case;

static const mods_case cases[] = {
    /* each modifier alone, decode */
    {"window decode",
     4,
     2,
     32,
     F32,
     F32,
     16,
     0,
     400,
     2,
     {0, 2},
     {330, 40},
     1,
     0,
     0.0f,
     {64, 0, false, ALIBI_NONE, false}},
    {"softcap decode",
     4,
     4,
     32,
     F32,
     F32,
     0,
     0,
     200,
     2,
     {1, 0},
     {120, 7},
     1,
     0,
     1.0f,
     {0, 1.5f, false, ALIBI_NONE, false}},
    {"alibi slopes decode",
     8,
     2,
     16,
     F32,
     F32,
     5,
     0,
     200,
     2,
     {0, 1},
     {90, 150},
     2,
     0,
     0.0f,
     {0, 0, false, ALIBI_SLOPES, false}},
    {"alibi max bias decode",
     6,
     3,
     16,
     F32,
     F32,
     0,
     0,
     200,
     1,
     {1},
     {100},
     1,
     0,
     0.0f,
     {0, 0, false, ALIBI_MAX_BIAS, false}},
    {"sinks decode",
     4,
     1,
     32,
     F16,
     F16,
     16,
     0,
     300,
     3,
     {0, 1, 2},
     {0, 63, 200},
     1,
     0,
     0.0f,
     {0, 0, true, ALIBI_NONE, false}},
    {"lse decode",
     4,
     2,
     32,
     F32,
     F32,
     16,
     0,
     300,
     2,
     {2, 0},
     {250, 3},
     4,
     0,
     0.0f,
     {0, 0, false, ALIBI_NONE, true}},
    /* each alone, prefill (T = 24) */
    {"window prefill",
     4,
     2,
     32,
     F32,
     F32,
     16,
     0,
     400,
     2,
     {0, 1},
     {100, 0},
     24,
     0,
     0.0f,
     {10, 0, false, ALIBI_NONE, false}},
    {"softcap + lse prefill",
     2,
     1,
     16,
     F16,
     F32,
     0,
     0,
     200,
     2,
     {1, 0},
     {30, 0},
     24,
     0,
     1.0f,
     {0, 0.8f, false, ALIBI_NONE, true}},
    {"alibi + sinks prefill",
     4,
     2,
     16,
     F32,
     F32,
     5,
     0,
     200,
     1,
     {1},
     {60},
     24,
     0,
     0.0f,
     {0, 0, true, ALIBI_MAX_BIAS, false}},
    /* combined, split-KV: the sinks and the LSE in the combine pass */
    {"all, splits 3",
     8,
     2,
     32,
     F32,
     F32,
     16,
     0,
     400,
     2,
     {1, 0},
     {310, 45},
     2,
     3,
     0.0f,
     {48, 1.0f, true, ALIBI_SLOPES, true}},
    {"all, automatic splits, f16",
     4,
     1,
     32,
     F16,
     F16,
     0,
     0,
     600,
     2,
     {0, 1},
     {520, 260},
     1,
     0,
     0.0f,
     {100, 2.0f, true, ALIBI_MAX_BIAS, true}},
    {"window + sinks + lse, splits 7, windowed cache",
     4,
     2,
     32,
     F32,
     F32,
     16,
     64,
     400,
     2,
     {0, 1},
     {340, 20},
     1,
     7,
     0.0f,
     {64, 0, true, ALIBI_NONE, true}},
    {"window smaller than the cache's, prefill, windowed cache",
     4,
     2,
     16,
     F32,
     F32,
     8,
     32,
     200,
     1,
     {2},
     {90},
     8,
     0,
     0.0f,
     {20, 0.5f, false, ALIBI_SLOPES, true}},
    {"window 1, MQA",
     4,
     1,
     8,
     F32,
     F32,
     5,
     0,
     100,
     1,
     {0},
     {50},
     3,
     0,
     0.0f,
     {1, 0, true, ALIBI_NONE, true}},
    /* over quantized caches (the texel policy's kernel reads whole groups
     * of 8 blocks: keys before a window's first one in a group are masked) */
    {"all over q8_0, splits 3",
     8,
     2,
     64,
     VKATTN_DTYPE_Q8_0,
     F32,
     16,
     0,
     400,
     2,
     {1, 0},
     {310, 45},
     2,
     3,
     0.0f,
     {50, 1.0f, true, ALIBI_SLOPES, true}},
    {"softcap + alibi + lse over q4_0, head dim 128, automatic splits",
     4,
     1,
     128,
     VKATTN_DTYPE_Q4_0,
     F16,
     0,
     0,
     600,
     2,
     {0, 1},
     {520, 261},
     1,
     0,
     0.0f,
     {0, 1.5f, false, ALIBI_MAX_BIAS, true}},
    {"window + sinks over q8_0, pages of 4",
     4,
     2,
     64,
     VKATTN_DTYPE_Q8_0,
     F32,
     4,
     0,
     300,
     2,
     {0, 1},
     {101, 37},
     1,
     0,
     0.0f,
     {21, 0, true, ALIBI_NONE, false}},
};
#define CASE_COUNT (sizeof cases / sizeof cases[0])

static double tolerance(vkattn_dtype a, vkattn_dtype b)
{
    return a == F16 || b == F16 ? TEST_TOL_F16 : TEST_TOL_F32;
}

/* The host-side modifier tensors of a call. */
typedef struct mods_data {
    float sinks[16], slopes[16];
} mods_data;

static void mods_data_fill(mods_data *md, uint32_t Hq, test_rng *rng)
{
    for (uint32_t h = 0; h < Hq; h++) {
        md->sinks[h] = test_rng_uniform(rng, -1.0f, 3.0f);
        md->slopes[h] = test_rng_uniform(rng, 0.02f, 0.6f);
    }
}

#define MAX_BIAS 6.0f

/* vkattn_ref_attention per sequence over its host mirror, with the
 * modifiers; lse [B, Hq, T] (may be NULL). */
static void reference(const kv_host *h, const mods_case *c, const mods_data *md, const float *q,
                      float *want, float *lse)
{
    const uint32_t hkv = h->d.num_kv_heads, D = h->d.head_dim, Hq = c->Hq, T = c->T;
    for (uint32_t b = 0; b < c->batch; b++) {
        uint32_t s = c->seqs[b], L = h->len[s];
        size_t n = (size_t)hkv * L * D;
        float *k = malloc(n * sizeof *k + 1), *v = malloc(n * sizeof *v + 1);
        assert_true(k && v);
        for (uint32_t g = 0; g < hkv; g++)
            for (uint32_t t = 0; t < L; t++) {
                size_t at = (((size_t)s * hkv + g) * h->d.capacity + t) * D;
                memcpy(k + ((size_t)g * L + t) * D, h->k + at, D * sizeof *k);
                memcpy(v + ((size_t)g * L + t) * D, h->v + at, D * sizeof *v);
            }
        int64_t qs[4] = {1, Hq, T, D}, ks[4] = {1, hkv, L, D}, hs[1] = {Hq}, ls[3] = {1, Hq, T};
        size_t qb = (size_t)Hq * T * D;
        vkattn_ref_attention_args r = {0};
        r.q = vkattn_host_tensor_make((void *)(q + b * qb), F32, 4, qs);
        r.k = vkattn_host_tensor_make(k, F32, 4, ks);
        r.v = vkattn_host_tensor_make(v, F32, 4, ks);
        r.out = vkattn_host_tensor_make(want + b * qb, F32, 4, qs);
        r.causal = true;
        r.scale = c->scale;
        r.window = c->m.window;
        r.softcap = c->m.softcap;
        if (c->m.sinks)
            r.sinks = vkattn_host_tensor_make((void *)md->sinks, F32, 1, hs);
        if (c->m.alibi == ALIBI_SLOPES)
            r.alibi_slopes = vkattn_host_tensor_make((void *)md->slopes, F32, 1, hs);
        if (c->m.alibi == ALIBI_MAX_BIAS)
            r.alibi_max_bias = MAX_BIAS;
        if (lse)
            r.lse = vkattn_host_tensor_make(lse + (size_t)b * Hq * T, F32, 3, ls);
        char err[256] = "";
        if (vkattn_ref_attention(&r, err, sizeof err) != VKATTN_SUCCESS)
            fail_msg("reference: %s", err);
        free(k);
        free(v);
    }
}

/* Appends `tokens` to one sequence, in pieces of at most `piece` (a
 * windowed cache's default pool holds steps of up to a block). */
static void append_in_pieces(vkattn_context *ctx, kv_host *h, uint32_t seq, uint32_t tokens,
                             uint32_t piece, test_rng *rng)
{
    for (uint32_t done = 0; done < tokens;) {
        uint32_t n = tokens - done < piece ? tokens - done : piece;
        kv_append(ctx, h, 1, &seq, n, rng);
        done += n;
    }
}

/* The call's modifier tensors on the device, into `a`. */
typedef struct mods_buffers {
    vkattn_buffer *sinks, *slopes, *lse;
} mods_buffers;

static void mods_attach(vkattn_context *ctx, const mods_case *c, const mods_data *md,
                        mods_buffers *mb, vkattn_kv_attention_args *a)
{
    memset(mb, 0, sizeof *mb);
    int64_t hs[1] = {c->Hq}, ls[3] = {c->batch, c->Hq, c->T};
    a->window = c->m.window;
    a->softcap = c->m.softcap;
    if (c->m.sinks) {
        mb->sinks = kv_buffer_of(ctx, md->sinks, c->Hq, F32);
        a->sinks = vkattn_tensor_make(mb->sinks, 0, F32, 1, hs);
    }
    if (c->m.alibi == ALIBI_SLOPES) {
        mb->slopes = kv_buffer_of(ctx, md->slopes, c->Hq, F32);
        a->alibi_slopes = vkattn_tensor_make(mb->slopes, 0, F32, 1, hs);
    }
    if (c->m.alibi == ALIBI_MAX_BIAS)
        a->alibi_max_bias = MAX_BIAS;
    if (c->m.lse) {
        size_t n = (size_t)c->batch * c->Hq * c->T;
        float *nan = malloc(n * sizeof *nan);
        assert_non_null(nan);
        for (size_t i = 0; i < n; i++)
            nan[i] = NAN;
        mb->lse = kv_buffer_of(ctx, nan, n, F32);
        a->lse = vkattn_tensor_make(mb->lse, 0, F32, 3, ls);
        free(nan);
    }
}

static void mods_release(mods_buffers *mb) { TEST_DESTROY_BUFFERS(mb->sinks, mb->slopes, mb->lse); }

static void run_case(test_gpu *g, uint32_t policy, const void *arg)
{
    const mods_case *c = arg;
    vkattn_context *ctx = g->ctx;
    char what[200];
    snprintf(what, sizeof what, "%s: %s (Hq%u Hkv%u D%u cache %s q %s block %u)",
             test_policies[policy].name, c->name, c->Hq, c->Hkv, c->D, vkattn_dtype_name(c->cdt),
             vkattn_dtype_name(c->qdt), c->block_size);
    test_rng rng = test_rng_seed(900 + (uint64_t)(c - cases));
    vkattn_kv_cache_desc d = {.num_kv_heads = c->Hkv,
                              .num_heads = c->Hq,
                              .head_dim = c->D,
                              .dtype = c->cdt,
                              .max_sequences = 3,
                              .capacity = c->capacity,
                              .block_size = c->block_size,
                              .window = c->cache_window};
    kv_host h;
    kv_host_create(g, &d, &h);
    uint32_t piece = c->cache_window ? c->block_size : UINT32_MAX;
    for (uint32_t b = 0; b < c->batch; b++)
        append_in_pieces(ctx, &h, c->seqs[b], c->prior[b], piece, &rng);
    kv_append(ctx, &h, c->batch, c->seqs, c->T, &rng);

    mods_data md;
    mods_data_fill(&md, c->Hq, &rng);
    att_io io;
    att_io_create(ctx, &io, c->batch, c->Hq, c->T, c->D, c->qdt, false, &rng);
    vkattn_kv_attention_args a = att_args(&h, &io, c->seqs, c->scale, c->splits);
    mods_buffers mb;
    mods_attach(ctx, c, &md, &mb, &a);
    TEST_OK(ctx, vkattn_kv_attention(ctx, &a));

    size_t n = (size_t)c->batch * c->Hq * c->T * c->D, nl = (size_t)c->batch * c->Hq * c->T;
    float *got = malloc(n * sizeof *got), *want = malloc(n * sizeof *want);
    float *lse_want = malloc(nl * sizeof *lse_want), *lse_got = malloc(nl * sizeof *lse_got);
    assert_true(got && want && lse_want && lse_got);
    att_io_result(ctx, &io, got);
    reference(&h, c, &md, io.q, want, c->m.lse ? lse_want : NULL);
    test_assert_close(got, want, n, tolerance(c->cdt, c->qdt), what);
    if (c->m.lse) {
        test_download_as(ctx, mb.lse, F32, lse_got, nl);
        test_assert_lse_close(lse_got, lse_want, nl, tolerance(c->cdt, c->qdt), what);
    }
    free(got), free(want), free(lse_want), free(lse_got);
    mods_release(&mb);
    att_io_destroy(&io);
    kv_host_destroy(&h);
    test_assert_no_validation_messages(ctx);
}

/* Every case on every policy (the suite's contexts). */
static void run_cases(void **state, size_t first, size_t count)
{
    test_policy_suite *s = *state;
    for (size_t i = first; i < first + count && i < CASE_COUNT; i++)
        for (uint32_t p = 0; p < TEST_POLICY_COUNT; p++)
            if (s->gpu[p])
                run_case(s->gpu[p], p, &cases[i]);
}

static void test_each_modifier_decode(void **state) { run_cases(state, 0, 6); }

static void test_each_modifier_prefill(void **state) { run_cases(state, 6, 3); }

static void test_combined_and_split(void **state) { run_cases(state, 9, CASE_COUNT - 9); }

/* ---- a windowed cache over many decode steps: two sequences take turns,
 * so the blocks one gives back are soon the other's; every step's attention
 * (window = the cache's, sinks, LSE) matches the reference, and the pool's
 * free count comes back up as the window slides */

static void windowed_decode(test_gpu *g, uint32_t policy, const void *arg)
{
    (void)arg;
    vkattn_context *ctx = g->ctx;
    test_rng rng = test_rng_seed(77 + policy);
    const uint32_t W = 20, block = 4;
    vkattn_kv_cache_desc d = {.num_kv_heads = 2,
                              .num_heads = 4,
                              .head_dim = 16,
                              .dtype = policy % 2 ? F16 : F32,
                              .max_sequences = 2,
                              .capacity = 400,
                              .block_size = block,
                              .window = W};
    kv_host h;
    kv_host_create(g, &d, &h);
    /* the default pool of a windowed cache: (W - 1 + 2 block) / block + 1
     * blocks per sequence, far fewer than the 100 of its capacity */
    uint32_t per_seq = (W - 1 + 2 * block + block - 1) / block + 1;
    assert_int_equal(h.d.num_blocks, 2 * per_seq);
    mods_case c = {"windowed decode",
                   4,
                   2,
                   16,
                   d.dtype,
                   d.dtype,
                   block,
                   W,
                   400,
                   1,
                   {0},
                   {0},
                   1,
                   0,
                   0.0f,
                   {W, 0, true, ALIBI_NONE, true}};
    mods_data md;
    mods_data_fill(&md, 4, &rng);
    uint32_t lowest_free = UINT32_MAX, highest_later = 0;
    for (uint32_t step = 0; step < 140; step++) {
        uint32_t seq = step % 2;
        c.seqs[0] = seq;
        c.splits = step % 3; /* automatic, 1 and 2 splits */
        kv_append(ctx, &h, 1, &seq, 1, &rng);
        uint32_t free_now = vkattn_kv_cache_free_blocks(h.cache);
        if (step < 40 && free_now < lowest_free)
            lowest_free = free_now;
        if (step >= 40 && free_now > highest_later)
            highest_later = free_now;
        /* a sequence holds at most the W - 1 tokens before its last token
         * and that token: W tokens, over at most W / block + 1 blocks */
        assert_true(free_now + 2 * (W / block + 1) >= h.d.num_blocks);
        if (step % 7 != 0 && step < 130)
            continue;
        att_io io;
        att_io_create(ctx, &io, 1, 4, 1, 16, d.dtype, step % 2 == 0, &rng);
        vkattn_kv_attention_args a = att_args(&h, &io, c.seqs, 0.0f, c.splits);
        mods_buffers mb;
        mods_attach(ctx, &c, &md, &mb, &a);
        TEST_OK(ctx, vkattn_kv_attention(ctx, &a));
        float got[4 * 16], want[4 * 16], lg[4], lw[4];
        att_io_result(ctx, &io, got);
        reference(&h, &c, &md, io.q, want, lw);
        char what[120];
        snprintf(what, sizeof what, "%s windowed decode step %u (sequence %u, length %u)",
                 test_policies[policy].name, step, seq, h.len[seq]);
        test_assert_close(got, want, 4 * 16, tolerance(d.dtype, d.dtype), what);
        test_download_as(ctx, mb.lse, F32, lg, 4);
        test_assert_lse_close(lg, lw, 4, tolerance(d.dtype, d.dtype), what);
        mods_release(&mb);
        att_io_destroy(&io);
    }
    /* the pool never ran dry and blocks came back */
    assert_true(highest_later > 0);
    (void)lowest_free;
    /* truncating back to 0 gives every block back */
    TEST_OK(ctx, vkattn_kv_cache_truncate(h.cache, 0, 0));
    TEST_OK(ctx, vkattn_kv_cache_truncate(h.cache, 1, 0));
    assert_int_equal(vkattn_kv_cache_free_blocks(h.cache), h.d.num_blocks);
    kv_host_destroy(&h);
    test_assert_no_validation_messages(ctx);
}

static void test_windowed_cache_releases_blocks(void **state)
{
    test_policy_suite *s = *state;
    for (uint32_t p = 0; p < TEST_POLICY_COUNT; p++)
        if (s->gpu[p])
            windowed_decode(s->gpu[p], p, NULL);
}

/* Free blocks rise as a long sequence slides: after 200 single-token
 * appends with W 16, block 4, the sequence holds at most 6 blocks. */
static void test_windowed_free_count(void **state)
{
    test_gpu *g = test_policy_suite_first(*state);
    vkattn_context *ctx = g->ctx;
    test_rng rng = test_rng_seed(5);
    vkattn_kv_cache_desc d = test_kv_desc(1, 1, 8, 1, 300, 4);
    d.window = 16;
    d.num_blocks = 75; /* the whole capacity: free counts show the release */
    kv_host h;
    kv_host_create(g, &d, &h);
    uint32_t seq = 0;
    kv_append(ctx, &h, 1, &seq, 40, &rng); /* one append of 40: nothing before it */
    assert_int_equal(vkattn_kv_cache_free_blocks(h.cache), 75 - 10);
    kv_append(ctx, &h, 1, &seq, 1, &rng); /* token 40: keeps from 25 on (block 6) */
    assert_int_equal(vkattn_kv_cache_free_blocks(h.cache), 75 - 11 + 6);
    for (int i = 0; i < 200; i++)
        kv_append(ctx, &h, 1, &seq, 1, &rng);
    /* length 241: the last append (token 240) keeps 225.. : blocks 56..60 */
    assert_int_equal(vkattn_kv_cache_free_blocks(h.cache), 75 - 5);
    /* memory of a windowed pool by default: 7 blocks per sequence */
    vkattn_kv_cache_desc dd = d;
    dd.num_blocks = 0;
    uint64_t per_token = 0, total = 0, total_full = 0;
    char err[200];
    assert_int_equal(vkattn_kv_cache_memory(&dd, &per_token, &total, err, sizeof err),
                     VKATTN_SUCCESS);
    dd.window = 0;
    assert_int_equal(vkattn_kv_cache_memory(&dd, &per_token, &total_full, err, sizeof err),
                     VKATTN_SUCCESS);
    assert_true(total < total_full);
    kv_host_destroy(&h);
    test_assert_no_validation_messages(ctx);
}

/* ---- bad input: named errors, nothing written, the cache unchanged */

static void test_mods_errors(void **state)
{
    test_gpu *g = test_policy_suite_first(*state);
    vkattn_context *ctx = g->ctx;
    test_rng rng = test_rng_seed(11);
    /* a contiguous cache cannot give blocks back */
    vkattn_kv_cache_desc bad = test_kv_desc(2, 4, 16, 2, 64, 0);
    bad.window = 8;
    vkattn_kv_cache *none = NULL;
    TEST_FAILS(ctx, VKATTN_ERROR_INVALID_ARGUMENT, "desc->window",
               vkattn_kv_cache_create(ctx, &bad, &none));
    assert_null(none);

    vkattn_kv_cache_desc d = test_kv_desc(2, 4, 16, 2, 128, 4);
    d.window = 8;
    kv_host h;
    kv_host_create(g, &d, &h);
    const uint32_t seqs[2] = {0, 1};
    append_in_pieces(ctx, &h, 0, 40, 4, &rng);
    kv_append(ctx, &h, 2, seqs, 2, &rng);
    uint32_t free_before = vkattn_kv_cache_free_blocks(h.cache);

    att_io io;
    att_io_create(ctx, &io, 2, 4, 2, 16, F32, false, &rng);
    float sinks[8] = {0}, lse_init[64];
    for (int i = 0; i < 64; i++)
        lse_init[i] = NAN;
    vkattn_buffer *sb = kv_buffer_of(ctx, sinks, 8, F32),
                  *lb = kv_buffer_of(ctx, lse_init, 64, F32);
    int64_t h4[1] = {4}, h5[1] = {5}, l3[3] = {2, 4, 2}, l3bad[3] = {2, 4, 3}, h22[2] = {2, 2};
    vkattn_kv_attention_args good = att_args(&h, &io, seqs, 0.0f, 0), a;
    good.window = 8;
    good.sinks = vkattn_tensor_make(sb, 0, F32, 1, h4);
    good.lse = vkattn_tensor_make(lb, 0, F32, 3, l3);
    TEST_OK(ctx, vkattn_kv_attention(ctx, &good)); /* the good call works */
    /* fresh NaN outputs, to see that nothing is written below */
    vkattn_buffer_destroy(lb);
    lb = kv_buffer_of(ctx, lse_init, 64, F32);
    good.lse = vkattn_tensor_make(lb, 0, F32, 3, l3);
    vkattn_buffer_destroy(io.ob);
    {
        float nan[2 * 4 * 2 * 16];
        for (size_t i = 0; i < sizeof nan / sizeof nan[0]; i++)
            nan[i] = NAN;
        io.ob = kv_buffer_of(ctx, nan, sizeof nan / sizeof nan[0], F32);
        int64_t shape[4] = {2, 4, 2, 16};
        io.ot = vkattn_tensor_make(io.ob, 0, F32, 4, shape);
        good.out = io.ot;
    }

    TEST_FAILS_CHANGED(ctx, a, good, a.window = 9, VKATTN_ERROR_INVALID_ARGUMENT,
                       "the cache's window is 8", vkattn_kv_attention(ctx, &a));
    TEST_FAILS_CHANGED(ctx, a, good, a.window = 0, VKATTN_ERROR_INVALID_ARGUMENT,
                       "the cache's window is 8", vkattn_kv_attention(ctx, &a));
    TEST_FAILS_CHANGED(ctx, a, good, a.softcap = -1.0f, VKATTN_ERROR_INVALID_ARGUMENT,
                       "args->softcap", vkattn_kv_attention(ctx, &a));
    TEST_FAILS_CHANGED(ctx, a, good, a.softcap = NAN, VKATTN_ERROR_INVALID_ARGUMENT,
                       "args->softcap", vkattn_kv_attention(ctx, &a));
    TEST_FAILS_CHANGED(ctx, a, good, a.alibi_max_bias = -2.0f, VKATTN_ERROR_INVALID_ARGUMENT,
                       "args->alibi_max_bias", vkattn_kv_attention(ctx, &a));
    TEST_FAILS_CHANGED(ctx, a, good, a.sinks = vkattn_tensor_make(sb, 0, F32, 1, h5),
                       VKATTN_ERROR_SHAPE_MISMATCH, "args->sinks.shape[0]",
                       vkattn_kv_attention(ctx, &a));
    TEST_FAILS_CHANGED(ctx, a, good, a.sinks = vkattn_tensor_make(sb, 0, F16, 1, h4),
                       VKATTN_ERROR_UNSUPPORTED_DTYPE, "args->sinks.dtype",
                       vkattn_kv_attention(ctx, &a));
    TEST_FAILS_CHANGED(ctx, a, good, a.alibi_slopes = vkattn_tensor_make(sb, 0, F32, 2, h22),
                       VKATTN_ERROR_INVALID_ARGUMENT, "args->alibi_slopes.rank",
                       vkattn_kv_attention(ctx, &a));
    TEST_FAILS_CHANGED(
        ctx, a, good,
        (a.alibi_slopes = vkattn_tensor_make(sb, 0, F32, 1, h4), a.alibi_max_bias = 8.0f),
        VKATTN_ERROR_INVALID_ARGUMENT, "both given", vkattn_kv_attention(ctx, &a));
    TEST_FAILS_CHANGED(ctx, a, good, a.lse = vkattn_tensor_make(lb, 0, F32, 3, l3bad),
                       VKATTN_ERROR_SHAPE_MISMATCH, "args->lse.shape[2]",
                       vkattn_kv_attention(ctx, &a));
    /* 4 queries over sequence 0: the first one's window reaches token
     * 42 - 4 - 8 + 1 = 31, but the last append (token 40, window from 33)
     * kept only the blocks from token 32 on */
    att_io io3;
    att_io_create(ctx, &io3, 1, 4, 4, 16, F32, false, &rng);
    a = att_args(&h, &io3, seqs, 0.0f, 0);
    a.window = 8;
    TEST_FAILS(ctx, VKATTN_ERROR_OUT_OF_RANGE, "no longer holds key 31",
               vkattn_kv_attention(ctx, &a));
    /* truncating into what was given back */
    TEST_FAILS(ctx, VKATTN_ERROR_OUT_OF_RANGE, "already gave back",
               vkattn_kv_cache_truncate(h.cache, 0, 30));

    /* nothing written, the cache unchanged */
    float out[2 * 4 * 2 * 16], lse[64];
    test_download_as(ctx, io.ob, F32, out, 2 * 4 * 2 * 16);
    test_download_as(ctx, lb, F32, lse, 64);
    for (size_t i = 0; i < sizeof out / sizeof out[0]; i++)
        assert_true(isnan(out[i]));
    for (size_t i = 0; i < 64; i++)
        assert_true(isnan(lse[i]));
    assert_int_equal(vkattn_kv_cache_free_blocks(h.cache), free_before);
    for (uint32_t s = 0; s < 2; s++) {
        uint32_t len;
        TEST_OK(ctx, vkattn_kv_cache_length(h.cache, s, &len));
        assert_int_equal(len, h.len[s]);
    }
    /* and the good call still works after all that */
    TEST_OK(ctx, vkattn_kv_attention(ctx, &good));
    att_io_destroy(&io3);
    TEST_DESTROY_BUFFERS(sb, lb);
    att_io_destroy(&io);
    kv_host_destroy(&h);
    test_assert_no_validation_messages(ctx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_each_modifier_decode),
        cmocka_unit_test(test_each_modifier_prefill),
        cmocka_unit_test(test_combined_and_split),
        cmocka_unit_test(test_windowed_cache_releases_blocks),
        cmocka_unit_test(test_windowed_free_count),
        cmocka_unit_test(test_mods_errors),
    };
    return cmocka_run_group_tests(tests, test_policy_suite_setup, test_policy_suite_teardown);
}
