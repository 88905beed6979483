/* The additive mask of attention over a KV cache (vkattn_kv_attention_args
 * .mask, vkattn_mha_step_args.mask): decode with split-KV (1, several and
 * automatic splits) and masks hiding some keys; trees of T = 5 and T = 16
 * speculative tokens over prefixes of 40-300 keys (each token sees the
 * prefix and its ancestors), rank 3 per-sequence masks over ragged lengths
 * and rank 2 shared ones, paged and contiguous caches, f32 and f16 caches,
 * queries and masks, GQA, free strides and offsets (columns past a
 * sequence's length and the gaps between rows hold NaN: never read);
 * combined with window, softcap, sinks, ALiBi and LSE; rows the mask hides
 * wholly (zeros, lse -inf); a prefill-sized call; an MHA layer step with a
 * tree mask against the reference MHA of the whole sequence; bad input:
 * named errors, nothing written, the cache unchanged. Every case runs on
 * every kernel policy, against vkattn_ref_attention per sequence with the
 * mask's [T, L] slice. */
#include "test_kv_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

enum { ALIBI_NONE, ALIBI_SLOPES, ALIBI_MAX_BIAS };
/* What the mask holds: random values with some keys hidden; a tree of
 * speculative tokens; the random one with row T / 2 wholly hidden. */
enum { PAT_RANDOM, PAT_TREE, PAT_HIDE_ROW };

typedef struct mask_case {
    const char *name;
    uint32_t Hq, Hkv, D;
    vkattn_dtype cdt, qdt, mdt; /* cache, q/out, mask */
    uint32_t block_size;        /* 0: contiguous */
    uint32_t batch;
    uint32_t seqs[3], prior[3];
    uint32_t T, splits;
    uint32_t rank;   /* 3: [B, T, K]; 2: [T, K] */
    int pattern;     /* PAT_* */
    bool strided;    /* element offset 3, key stride 2, padded rows */
    uint32_t window; /* score modifiers */
    float softcap;
    bool sinks;
    int alibi;
    bool lse;
} mask_case;

#define F F32
#define H F16
static const mask_case cases[] = {
    /* decode (T = 1), split-KV: one, several and automatic splits */
    {"decode, splits 1", 4, 2, 64, F, F, F, 16, 2, {0, 2}, {120, 37}, 1, 1, 3, PAT_RANDOM},
    {"decode, splits 4", 4, 2, 64, F, F, F, 16, 2, {0, 2}, {120, 37}, 1, 4, 3, PAT_RANDOM, true},
    {"decode, automatic splits, f16, rank 2",
     8,
     2,
     64,
     H,
     H,
     H,
     0,
     3,
     {2, 0, 1},
     {299, 64, 180},
     1,
     0,
     2,
     PAT_RANDOM},
    {"decode, splits 7, D 32, f16 mask",
     4,
     1,
     32,
     F,
     F,
     H,
     8,
     2,
     {1, 0},
     {250, 90},
     1,
     7,
     3,
     PAT_RANDOM,
     true},
    /* trees of speculative tokens */
    {"tree T5, paged, GQA 4",
     8,
     2,
     64,
     F,
     F,
     F,
     16,
     3,
     {0, 1, 2},
     {40, 150, 290},
     5,
     0,
     3,
     PAT_TREE},
    {"tree T5, contiguous, f16",
     8,
     2,
     64,
     H,
     H,
     H,
     0,
     3,
     {2, 0, 1},
     {45, 290, 120},
     5,
     0,
     3,
     PAT_TREE,
     true},
    {"tree T5, splits 1, D 32", 4, 2, 32, F, F, F, 16, 2, {1, 0}, {70, 200}, 5, 1, 3, PAT_TREE},
    {"tree T16, splits 4 (the largest split path)",
     4,
     2,
     64,
     F,
     F,
     F,
     16,
     2,
     {0, 1},
     {60, 200},
     16,
     4,
     3,
     PAT_TREE},
    {"tree T16, automatic splits, f16 cache, f32 mask",
     8,
     2,
     32,
     H,
     F,
     F,
     0,
     2,
     {1, 0},
     {280, 41},
     16,
     0,
     3,
     PAT_TREE,
     true},
    /* combined with the score modifiers */
    {"tree T5 + window + softcap + sinks + slopes + lse, splits 3",
     8,
     2,
     64,
     F,
     F,
     F,
     16,
     2,
     {0, 1},
     {100, 220},
     5,
     3,
     3,
     PAT_TREE,
     false,
     48,
     1.0f,
     true,
     ALIBI_SLOPES,
     true},
    {"tree T16 + all (max bias), f16",
     4,
     1,
     64,
     H,
     H,
     H,
     8,
     3,
     {0, 1, 2},
     {50, 130, 260},
     16,
     0,
     3,
     PAT_TREE,
     true,
     100,
     2.0f,
     true,
     ALIBI_MAX_BIAS,
     true},
    {"decode + all, splits 5",
     4,
     2,
     64,
     F,
     F,
     H,
     16,
     2,
     {1, 0},
     {300, 77},
     1,
     5,
     3,
     PAT_RANDOM,
     false,
     64,
     1.5f,
     true,
     ALIBI_SLOPES,
     true},
    {"decode + softcap + alibi + lse, splits 1, rank 2",
     4,
     2,
     64,
     F,
     F,
     F,
     0,
     2,
     {1, 0},
     {150, 60},
     1,
     1,
     2,
     PAT_RANDOM,
     false,
     0,
     0.8f,
     false,
     ALIBI_MAX_BIAS,
     true},
    /* rows the mask hides wholly: zeros and lse -inf */
    {"hidden row, T5, splits 3, sinks + lse",
     4,
     2,
     64,
     F,
     F,
     F,
     16,
     2,
     {0, 1},
     {80, 44},
     5,
     3,
     3,
     PAT_HIDE_ROW,
     false,
     0,
     0,
     true,
     ALIBI_NONE,
     true},
    {"hidden row, T1, splits 1, lse",
     4,
     2,
     64,
     F,
     F,
     F,
     0,
     2,
     {0, 1},
     {80, 44},
     1,
     1,
     3,
     PAT_HIDE_ROW,
     false,
     0,
     0,
     false,
     ALIBI_NONE,
     true},
    {"hidden row, T5, automatic splits, window + lse, f16",
     4,
     2,
     64,
     H,
     H,
     H,
     16,
     2,
     {1, 0},
     {100, 60},
     5,
     0,
     2,
     PAT_HIDE_ROW,
     true,
     30,
     0,
     false,
     ALIBI_NONE,
     true},
    /* prefill-sized: one pass, row tiles */
    {"prefill T24, rank 2 + window + lse",
     4,
     2,
     32,
     F,
     F,
     F,
     16,
     2,
     {0, 1},
     {30, 0},
     24,
     0,
     2,
     PAT_RANDOM,
     true,
     20,
     0,
     false,
     ALIBI_NONE,
     true},
    {"prefill T40 tree, f16", 4, 1, 64, H, H, H, 0, 1, {1}, {70}, 40, 0, 3, PAT_TREE},
};
#undef F
#undef H
#define CASE_COUNT (sizeof cases / sizeof cases[0])
#define MAX_BIAS 6.0f

static double tolerance(const mask_case *c)
{
    return c->cdt == F16 || c->qdt == F16 || c->mdt == F16 ? TEST_TOL_F16 : TEST_TOL_F32;
}

/* A mask on the host: values (rounded to its dtype) at element
 * off + b sb + i st + j sk of `vals`, NaN everywhere else. */
typedef struct host_mask {
    uint32_t rank, B, T, K;
    uint64_t off, sb, st, sk;
    size_t n;
    float *vals;
} host_mask;

static float mask_at(const host_mask *m, uint32_t b, uint32_t i, uint32_t j)
{
    return m->vals[m->off + (m->rank == 3 ? b * m->sb : 0) + i * m->st + j * m->sk];
}

static void mask_set(host_mask *m, uint32_t b, uint32_t i, uint32_t j, float v)
{
    m->vals[m->off + (m->rank == 3 ? b * m->sb : 0) + i * m->st + j * m->sk] = v;
}

/* Fills the mask of a call over sequences of lengths len[b] (after the
 * call's appends: the last T keys are the new tokens). */
static void host_mask_fill(host_mask *m, uint32_t rank, uint32_t B, uint32_t T, const uint32_t *len,
                           int pattern, bool strided, vkattn_dtype dt, test_rng *rng)
{
    memset(m, 0, sizeof *m);
    uint32_t max_len = 0;
    for (uint32_t b = 0; b < B; b++)
        max_len = len[b] > max_len ? len[b] : max_len;
    m->rank = rank, m->B = rank == 3 ? B : 1, m->T = T, m->K = max_len + 2;
    m->sk = strided ? 2 : 1;
    m->st = m->K * m->sk + (strided ? 3 : 0);
    m->sb = T * m->st + (strided ? 5 : 0);
    m->off = strided ? 3 : 0;
    m->n = m->off + (m->B - 1) * m->sb + (T - 1) * m->st + (m->K - 1) * m->sk + 1;
    m->vals = malloc(m->n * sizeof *m->vals);
    assert_non_null(m->vals);
    for (size_t e = 0; e < m->n; e++)
        m->vals[e] = NAN;
    for (uint32_t b = 0; b < m->B; b++) {
        /* rank 3: columns past the sequence's length stay NaN (never read);
         * rank 2: those past the longest */
        uint32_t L = rank == 3 ? len[b] : max_len;
        int parent[64];
        for (uint32_t i = 0; i < T && i < 64; i++)
            parent[i] = i == 0 ? -1 : (int)test_rng_below(rng, i + 1) - 1;
        for (uint32_t i = 0; i < T; i++)
            for (uint32_t j = 0; j < L; j++) {
                float v = test_rng_uniform(rng, -1.0f, 1.0f);
                if (pattern == PAT_TREE) {
                    /* the prefix is visible; of the tree's tokens, i's
                     * ancestors and itself */
                    uint32_t prefix = L - T;
                    if (j >= prefix) {
                        int k = (int)(j - prefix), a = (int)i;
                        while (a >= 0 && a != k)
                            a = a > k ? parent[a] : -1;
                        if (a != k)
                            v = -INFINITY;
                    }
                } else if (test_rng_below(rng, 4) == 0 || (pattern == PAT_HIDE_ROW && i == T / 2)) {
                    v = -INFINITY;
                }
                mask_set(m, b, i, j, v);
            }
    }
    test_round_to(dt, m->vals, m->n);
}

/* The [T, L] slice of batch row b, contiguous f32 (the reference's mask). */
static float *mask_slice(const host_mask *m, uint32_t b, uint32_t L)
{
    float *s = malloc((size_t)m->T * L * sizeof *s + 1);
    assert_non_null(s);
    for (uint32_t i = 0; i < m->T; i++)
        for (uint32_t j = 0; j < L; j++)
            s[(size_t)i * L + j] = mask_at(m, b, i, j);
    return s;
}

/* The mask on the device. */
static vkattn_tensor mask_tensor(vkattn_buffer *buf, const host_mask *m, vkattn_dtype dt)
{
    int64_t shape[3] = {m->B, m->T, m->K};
    vkattn_tensor t;
    if (m->rank == 3) {
        t = vkattn_tensor_make(buf, m->off * vkattn_dtype_size(dt), dt, 3, shape);
        t.strides[0] = (int64_t)m->sb, t.strides[1] = (int64_t)m->st, t.strides[2] = (int64_t)m->sk;
    } else {
        t = vkattn_tensor_make(buf, m->off * vkattn_dtype_size(dt), dt, 2, shape + 1);
        t.strides[0] = (int64_t)m->st, t.strides[1] = (int64_t)m->sk;
    }
    return t;
}

typedef struct mods_data {
    float sinks[16], slopes[16];
} mods_data;

/* vkattn_ref_attention per sequence with its mask slice; lse may be NULL. */
static void reference(const kv_host *h, const mask_case *c, const mods_data *md, const host_mask *m,
                      const float *q, float *want, float *lse)
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
        float *slice = mask_slice(m, b, L);
        int64_t qs[4] = {1, Hq, T, D}, ks[4] = {1, hkv, L, D}, hs[1] = {Hq}, ls[3] = {1, Hq, T},
                ms[2] = {T, L};
        size_t qb = (size_t)Hq * T * D;
        vkattn_ref_attention_args r = {0};
        r.q = vkattn_host_tensor_make((void *)(q + b * qb), F32, 4, qs);
        r.k = vkattn_host_tensor_make(k, F32, 4, ks);
        r.v = vkattn_host_tensor_make(v, F32, 4, ks);
        r.out = vkattn_host_tensor_make(want + b * qb, F32, 4, qs);
        r.mask = vkattn_host_tensor_make(slice, F32, 2, ms);
        r.causal = true;
        r.window = c->window;
        r.softcap = c->softcap;
        if (c->sinks)
            r.sinks = vkattn_host_tensor_make((void *)md->sinks, F32, 1, hs);
        if (c->alibi == ALIBI_SLOPES)
            r.alibi_slopes = vkattn_host_tensor_make((void *)md->slopes, F32, 1, hs);
        if (c->alibi == ALIBI_MAX_BIAS)
            r.alibi_max_bias = MAX_BIAS;
        if (lse)
            r.lse = vkattn_host_tensor_make(lse + (size_t)b * Hq * T, F32, 3, ls);
        char err[256] = "";
        if (vkattn_ref_attention(&r, err, sizeof err) != VKATTN_SUCCESS)
            fail_msg("reference: %s", err);
        free(k), free(v), free(slice);
    }
}

static vkattn_buffer *nan_buffer(vkattn_context *ctx, size_t n)
{
    float *nan = malloc(n * sizeof *nan);
    assert_non_null(nan);
    for (size_t i = 0; i < n; i++)
        nan[i] = NAN;
    vkattn_buffer *b = kv_buffer_of(ctx, nan, n, F32);
    free(nan);
    return b;
}

static void run_case(test_gpu *g, uint32_t policy, const void *arg)
{
    const mask_case *c = arg;
    vkattn_context *ctx = g->ctx;
    char what[240];
    snprintf(what, sizeof what, "%s: %s (Hq%u Hkv%u D%u cache %s q %s mask %s rank %u block %u)",
             test_policies[policy].name, c->name, c->Hq, c->Hkv, c->D, vkattn_dtype_name(c->cdt),
             vkattn_dtype_name(c->qdt), vkattn_dtype_name(c->mdt), c->rank, c->block_size);
    test_rng rng = test_rng_seed(4000 + (uint64_t)(c - cases));
    uint32_t capacity = 0;
    for (uint32_t b = 0; b < c->batch; b++)
        capacity = c->prior[b] + c->T > capacity ? c->prior[b] + c->T : capacity;
    vkattn_kv_cache_desc d = {.num_kv_heads = c->Hkv,
                              .num_heads = c->Hq,
                              .head_dim = c->D,
                              .dtype = c->cdt,
                              .max_sequences = 3,
                              .capacity = capacity + 3,
                              .block_size = c->block_size};
    kv_host h;
    kv_host_create(g, &d, &h);
    for (uint32_t b = 0; b < c->batch; b++)
        if (c->prior[b])
            kv_append(ctx, &h, 1, &c->seqs[b], c->prior[b], &rng);
    kv_append(ctx, &h, c->batch, c->seqs, c->T, &rng); /* the speculative tokens */

    uint32_t len[3];
    for (uint32_t b = 0; b < c->batch; b++)
        len[b] = h.len[c->seqs[b]];
    host_mask m;
    host_mask_fill(&m, c->rank, c->batch, c->T, len, c->pattern, c->strided, c->mdt, &rng);
    vkattn_buffer *mb = kv_buffer_of(ctx, m.vals, m.n, c->mdt);

    mods_data md;
    test_fill_uniform(&rng, md.sinks, c->Hq, -1.0f, 3.0f);
    test_fill_uniform(&rng, md.slopes, c->Hq, 0.02f, 0.6f);
    att_io io;
    att_io_create(ctx, &io, c->batch, c->Hq, c->T, c->D, c->qdt, policy % 2 == 1, &rng);
    vkattn_kv_attention_args a = att_args(&h, &io, c->seqs, 0.0f, c->splits);
    a.mask = mask_tensor(mb, &m, c->mdt);
    a.window = c->window;
    a.softcap = c->softcap;
    int64_t hs[1] = {c->Hq}, ls[3] = {c->batch, c->Hq, c->T};
    size_t n = (size_t)c->batch * c->Hq * c->T * c->D, nl = (size_t)c->batch * c->Hq * c->T;
    vkattn_buffer *sb = NULL, *slb = NULL, *lb = NULL;
    if (c->sinks) {
        sb = kv_buffer_of(ctx, md.sinks, c->Hq, F32);
        a.sinks = vkattn_tensor_make(sb, 0, F32, 1, hs);
    }
    if (c->alibi == ALIBI_SLOPES) {
        slb = kv_buffer_of(ctx, md.slopes, c->Hq, F32);
        a.alibi_slopes = vkattn_tensor_make(slb, 0, F32, 1, hs);
    }
    if (c->alibi == ALIBI_MAX_BIAS)
        a.alibi_max_bias = MAX_BIAS;
    if (c->lse) {
        lb = nan_buffer(ctx, nl);
        a.lse = vkattn_tensor_make(lb, 0, F32, 3, ls);
    }
    TEST_OK(ctx, vkattn_kv_attention(ctx, &a));

    float *got = malloc(n * sizeof *got), *want = malloc(n * sizeof *want);
    float *lse_want = malloc(nl * sizeof *lse_want), *lse_got = malloc(nl * sizeof *lse_got);
    assert_true(got && want && lse_want && lse_got);
    att_io_result(ctx, &io, got);
    reference(&h, c, &md, &m, io.q, want, c->lse ? lse_want : NULL);
    test_assert_close(got, want, n, tolerance(c), what);
    if (c->pattern == PAT_HIDE_ROW) /* the hidden row: exact zeros */
        for (uint32_t b = 0; b < c->batch; b++)
            for (uint32_t hq = 0; hq < c->Hq; hq++)
                for (uint32_t e = 0; e < c->D; e++)
                    if (got[(((size_t)b * c->Hq + hq) * c->T + c->T / 2) * c->D + e] != 0.0f)
                        fail_msg("%s: hidden row of batch row %u head %u is not zero", what, b, hq);
    if (c->lse) {
        test_download_as(ctx, lb, F32, lse_got, nl);
        test_assert_lse_close(lse_got, lse_want, nl, tolerance(c), what);
        if (c->pattern == PAT_HIDE_ROW)
            for (uint32_t b = 0; b < c->batch; b++)
                assert_true(isinf(lse_got[(size_t)b * c->Hq * c->T + c->T / 2]));
    }
    free(got), free(want), free(lse_want), free(lse_got), free(m.vals);
    TEST_DESTROY_BUFFERS(mb, sb, slb, lb);
    att_io_destroy(&io);
    kv_host_destroy(&h);
    test_assert_no_validation_messages(ctx);
}

static void run_cases(void **state, size_t first, size_t count)
{
    test_policy_suite *s = *state;
    for (size_t i = first; i < first + count && i < CASE_COUNT; i++)
        for (uint32_t p = 0; p < TEST_POLICY_COUNT; p++)
            if (s->gpu[p])
                run_case(s->gpu[p], p, &cases[i]);
}

static void test_decode_split(void **state) { run_cases(state, 0, 4); }

static void test_tree(void **state) { run_cases(state, 4, 5); }

static void test_tree_with_mods(void **state) { run_cases(state, 9, 4); }

static void test_hidden_rows(void **state) { run_cases(state, 13, 3); }

static void test_prefill(void **state) { run_cases(state, 16, 2); }

/* ---- an MHA layer: prefill steps, then one step of a tree of T tokens for
 * two sequences at once with a rank 3 mask, against the reference MHA of
 * each whole sequence with the [Ttotal, Ttotal] mask (zeros in the prefix
 * rows, the tree's row in the last T) */

#define STEP_T 5
static const uint32_t step_prefix[2] = {7, 19};

static void mha_tree_step(test_gpu *g, uint32_t policy, const void *arg)
{
    (void)arg;
    vkattn_context *ctx = g->ctx;
    test_rng r = test_rng_seed(500 + policy);
    const vkattn_dtype dt = policy >= 2 ? F16 : F32;
    const uint32_t hq = 4, hkv = 2, dh = 16, dm = hq * dh, rows = (hq + 2 * hkv) * dh;
    float amp = 1.5f / sqrtf((float)dm);
    float *wqkv = test_random_array(&r, (size_t)rows * dm, amp, dt);
    float *wo = test_random_array(&r, (size_t)dm * dm, amp, dt);
    float *bqkv = test_random_array(&r, rows, 0.2f, dt);
    float *bo = test_random_array(&r, dm, 0.2f, dt);
    vkattn_mha_desc desc = {
        .embed_dim = dm, .num_heads = hq, .num_kv_heads = hkv, .bias = true, .dtype = dt};
    vkattn_mha_weights w = {.wqkv = wqkv, .wo = wo, .bqkv = bqkv, .bo = bo};
    vkattn_mha *layer = test_mha_create(ctx, &desc, &w);
    vkattn_kv_cache_desc cd = {.num_kv_heads = hkv,
                               .num_heads = hq,
                               .head_dim = dh,
                               .dtype = dt,
                               .max_sequences = 2,
                               .capacity = 32,
                               .block_size = policy % 2 ? 4 : 0};
    vkattn_kv_cache *cache = NULL;
    TEST_OK(ctx, vkattn_kv_cache_create(ctx, &cd, &cache));
    size_t es = vkattn_dtype_size(dt);
    vkattn_buffer *bx = test_buffer_with(ctx, NULL, 64 * dm * es),
                  *by = test_buffer_with(ctx, NULL, 64 * dm * es);
    float *x[2];
    uint32_t total[2];
    for (uint32_t s = 0; s < 2; s++) {
        total[s] = step_prefix[s] + STEP_T;
        x[s] = test_random_array(&r, (size_t)total[s] * dm, 1.0f, dt);
        uint32_t seq = s;
        int64_t shape[3] = {1, step_prefix[s], dm};
        test_upload_as(ctx, bx, dt, x[s], (size_t)step_prefix[s] * dm);
        vkattn_mha_step_args a = {.cache = cache,
                                  .batch = 1,
                                  .sequences = &seq,
                                  .x = vkattn_tensor_make(bx, 0, dt, 3, shape),
                                  .y = vkattn_tensor_make(by, 0, dt, 3, shape)};
        TEST_OK(ctx, vkattn_mha_step(layer, &a));
    }
    /* the tree step: both sequences, T tokens each */
    host_mask m;
    host_mask_fill(&m, 3, 2, STEP_T, total, PAT_TREE, policy % 2 == 0, dt, &r);
    vkattn_buffer *mb = kv_buffer_of(ctx, m.vals, m.n, dt);
    float *rowsx = malloc((size_t)2 * STEP_T * dm * sizeof *rowsx);
    float *y = malloc((size_t)2 * STEP_T * dm * sizeof *y);
    assert_true(rowsx && y);
    for (uint32_t s = 0; s < 2; s++)
        memcpy(rowsx + (size_t)s * STEP_T * dm, x[s] + (size_t)step_prefix[s] * dm,
               (size_t)STEP_T * dm * sizeof *rowsx);
    test_upload_as(ctx, bx, dt, rowsx, (size_t)2 * STEP_T * dm);
    const uint32_t seqs[2] = {0, 1};
    int64_t shape[3] = {2, STEP_T, dm};
    vkattn_mha_step_args a = {.cache = cache,
                              .batch = 2,
                              .sequences = seqs,
                              .x = vkattn_tensor_make(bx, 0, dt, 3, shape),
                              .y = vkattn_tensor_make(by, 0, dt, 3, shape),
                              .kv_splits = policy % 3,
                              .mask = mask_tensor(mb, &m, dt)};
    TEST_OK(ctx, vkattn_mha_step(layer, &a));
    test_download_as(ctx, by, dt, y, (size_t)2 * STEP_T * dm);
    for (uint32_t s = 0; s < 2; s++) {
        uint32_t n = total[s], len = 0;
        TEST_OK(ctx, vkattn_kv_cache_length(cache, s, &len));
        assert_int_equal(len, n);
        float *full = calloc((size_t)n * n, sizeof *full), *ref = malloc((size_t)n * dm * 4);
        assert_true(full && ref);
        for (uint32_t i = 0; i < STEP_T; i++)
            for (uint32_t j = 0; j < n; j++)
                full[(size_t)(step_prefix[s] + i) * n + j] = mask_at(&m, s, i, j);
        int64_t xs[3] = {1, n, dm}, ms[2] = {n, n};
        vkattn_ref_mha_args ra = {.x = vkattn_host_tensor_make(x[s], F32, 3, xs),
                                  .y = vkattn_host_tensor_make(ref, F32, 3, xs),
                                  .mask = vkattn_host_tensor_make(full, F32, 2, ms),
                                  .causal = true};
        char err[256];
        if (vkattn_ref_mha(&desc, &w, &ra, err, sizeof err) != VKATTN_SUCCESS)
            fail_msg("reference: %s", err);
        char what[160];
        snprintf(what, sizeof what, "%s: MHA tree step %s, sequence %u (prefix %u)",
                 test_policies[policy].name, vkattn_dtype_name(dt), s, step_prefix[s]);
        test_assert_close(y + (size_t)s * STEP_T * dm, ref + (size_t)step_prefix[s] * dm,
                          (size_t)STEP_T * dm, dt == F16 ? TEST_TOL_F16 : TEST_TOL_F32, what);
        free(full), free(ref);
    }
    free(rowsx), free(y), free(m.vals), free(x[0]), free(x[1]);
    free(wqkv), free(wo), free(bqkv), free(bo);
    TEST_DESTROY_BUFFERS(bx, by, mb);
    vkattn_kv_cache_destroy(cache);
    vkattn_mha_destroy(layer);
    test_assert_no_validation_messages(ctx);
}

static void test_mha_step_tree(void **state)
{
    test_policy_suite *s = *state;
    for (uint32_t p = 0; p < TEST_POLICY_COUNT; p++)
        if (s->gpu[p])
            mha_tree_step(s->gpu[p], p, NULL);
}

/* ---- bad input: named errors, nothing written, the cache unchanged */

static void test_mask_errors(void **state)
{
    test_gpu *g = test_policy_suite_first(*state);
    vkattn_context *ctx = g->ctx;
    test_rng rng = test_rng_seed(21);
    vkattn_kv_cache_desc d = test_kv_desc(2, 4, 16, 2, 64, 4);
    kv_host h;
    kv_host_create(g, &d, &h);
    const uint32_t seqs[2] = {0, 1};
    uint32_t seq1 = 1;
    kv_append(ctx, &h, 2, seqs, 7, &rng);
    kv_append(ctx, &h, 1, &seq1, 3, &rng); /* lengths 7 and 10 */
    uint32_t free_before = vkattn_kv_cache_free_blocks(h.cache);

    att_io io;
    att_io_create(ctx, &io, 2, 4, 2, 16, F32, false, &rng);
    float zeros[64] = {0};
    vkattn_buffer *mb = kv_buffer_of(ctx, zeros, 64, F32), *lb = nan_buffer(ctx, 16);
    int64_t m3[3] = {2, 2, 10}, m2[2] = {2, 10}, m4[4] = {1, 2, 2, 10}, bad_t[3] = {2, 3, 10},
            bad_b[3] = {3, 2, 10}, short3[3] = {2, 2, 9}, short2[2] = {2, 6}, l3[3] = {2, 4, 2};
    vkattn_kv_attention_args good = att_args(&h, &io, seqs, 0.0f, 0), a;
    good.mask = vkattn_tensor_make(mb, 0, F32, 3, m3);
    good.lse = vkattn_tensor_make(lb, 0, F32, 3, l3);
    TEST_OK(ctx, vkattn_kv_attention(ctx, &good)); /* the good call works */
    vkattn_buffer_destroy(io.ob);
    vkattn_buffer_destroy(lb);
    io.ob = nan_buffer(ctx, 2 * 4 * 2 * 16);
    lb = nan_buffer(ctx, 16);
    int64_t os[4] = {2, 4, 2, 16};
    io.ot = good.out = vkattn_tensor_make(io.ob, 0, F32, 4, os);
    good.lse = vkattn_tensor_make(lb, 0, F32, 3, l3);

    TEST_FAILS_CHANGED(ctx, a, good, a.mask = vkattn_tensor_make(mb, 0, F32, 4, m4),
                       VKATTN_ERROR_INVALID_ARGUMENT, "args->mask.rank is 4",
                       vkattn_kv_attention(ctx, &a));
    TEST_FAILS_CHANGED(ctx, a, good, a.mask = vkattn_tensor_make(mb, 0, VKATTN_DTYPE_U8, 3, m3),
                       VKATTN_ERROR_UNSUPPORTED_DTYPE, "args->mask.dtype is u8",
                       vkattn_kv_attention(ctx, &a));
    TEST_FAILS_CHANGED(ctx, a, good, a.mask = vkattn_tensor_make(mb, 0, F32, 3, bad_t),
                       VKATTN_ERROR_SHAPE_MISMATCH, "args->mask.shape[1] (queries) 3",
                       vkattn_kv_attention(ctx, &a));
    TEST_FAILS_CHANGED(ctx, a, good, a.mask = vkattn_tensor_make(mb, 0, F32, 3, bad_b),
                       VKATTN_ERROR_SHAPE_MISMATCH, "args->mask.shape[0] (batch) 3",
                       vkattn_kv_attention(ctx, &a));
    TEST_FAILS_CHANGED(ctx, a, good, a.mask = vkattn_tensor_make(mb, 0, F32, 3, short3),
                       VKATTN_ERROR_SHAPE_MISMATCH,
                       "args->mask.shape[2] (keys) 9 is less than sequence 1's length 10",
                       vkattn_kv_attention(ctx, &a));
    TEST_FAILS_CHANGED(ctx, a, good, a.mask = vkattn_tensor_make(mb, 0, F32, 2, short2),
                       VKATTN_ERROR_SHAPE_MISMATCH,
                       "args->mask.shape[1] (keys) 6 is less than sequence 0's length 7",
                       vkattn_kv_attention(ctx, &a));
    TEST_FAILS_CHANGED(ctx, a, good, a.mask = vkattn_tensor_make(mb, 2, F32, 2, m2),
                       VKATTN_ERROR_INVALID_ARGUMENT, "args->mask.offset 2",
                       vkattn_kv_attention(ctx, &a));
    TEST_FAILS_CHANGED(ctx, a, good, a.mask = vkattn_tensor_make(io.ob, 0, F32, 2, m2),
                       VKATTN_ERROR_INVALID_ARGUMENT, "overlaps args->mask",
                       vkattn_kv_attention(ctx, &a));
    TEST_FAILS_CHANGED(ctx, a, good, a.mask = vkattn_tensor_make(lb, 0, F32, 2, m2),
                       VKATTN_ERROR_INVALID_ARGUMENT, "args->lse (bytes",
                       vkattn_kv_attention(ctx, &a));
    TEST_FAILS_CHANGED(
        ctx, a, good,
        (a.mask = vkattn_tensor_make(mb, 0, F32, 3, m3), a.mask.strides[0] = 1ll << 31),
        VKATTN_ERROR_OUT_OF_RANGE, "args->mask", vkattn_kv_attention(ctx, &a));

    /* nothing written, the cache unchanged */
    float out[2 * 4 * 2 * 16], lse[16];
    test_download_as(ctx, io.ob, F32, out, 2 * 4 * 2 * 16);
    test_download_as(ctx, lb, F32, lse, 16);
    for (size_t i = 0; i < sizeof out / sizeof out[0]; i++)
        assert_true(isnan(out[i]));
    for (size_t i = 0; i < 16; i++)
        assert_true(isnan(lse[i]));
    assert_int_equal(vkattn_kv_cache_free_blocks(h.cache), free_before);
    /* a rank 2 mask works, and the good call still does */
    a = good;
    a.mask = vkattn_tensor_make(mb, 0, F32, 2, m2);
    TEST_OK(ctx, vkattn_kv_attention(ctx, &a));
    TEST_OK(ctx, vkattn_kv_attention(ctx, &good));

    /* an MHA step: its mask counts the step's tokens */
    vkattn_mha_desc desc = {.embed_dim = 64, .num_heads = 4, .num_kv_heads = 2};
    float *wz = calloc(64 * 128, sizeof *wz);
    assert_non_null(wz);
    vkattn_mha_weights w = {.wqkv = wz, .wo = wz};
    vkattn_mha *layer = test_mha_create(ctx, &desc, &w);
    vkattn_buffer *bx = test_buffer_with(ctx, NULL, 4 * 64 * 4),
                  *by = test_buffer_with(ctx, NULL, 4 * 64 * 4);
    int64_t xs[3] = {2, 2, 64}, ok_step[3] = {2, 2, 12}, short_step[3] = {2, 2, 11};
    vkattn_mha_step_args sa = {.cache = h.cache,
                               .batch = 2,
                               .sequences = seqs,
                               .x = vkattn_tensor_make(bx, 0, F32, 3, xs),
                               .y = vkattn_tensor_make(by, 0, F32, 3, xs)},
                         bad;
    /* lengths after the step: 9 and 12 */
    TEST_FAILS_CHANGED(ctx, bad, sa, bad.mask = vkattn_tensor_make(mb, 0, F32, 3, short_step),
                       VKATTN_ERROR_SHAPE_MISMATCH,
                       "args->mask.shape[2] (keys) 11 is less than sequence 1's length 12",
                       vkattn_mha_step(layer, &bad));
    TEST_FAILS_CHANGED(ctx, bad, sa, bad.mask = vkattn_tensor_make(mb, 0, F32, 3, bad_t),
                       VKATTN_ERROR_SHAPE_MISMATCH, "args->mask.shape[1] (queries) 3",
                       vkattn_mha_step(layer, &bad));
    TEST_FAILS_CHANGED(ctx, bad, sa, bad.mask = vkattn_tensor_make(mb, 0, F16, 1, m2),
                       VKATTN_ERROR_INVALID_ARGUMENT, "args->mask.rank is 1",
                       vkattn_mha_step(layer, &bad));
    for (uint32_t s = 0; s < 2; s++) {
        uint32_t len;
        TEST_OK(ctx, vkattn_kv_cache_length(h.cache, s, &len));
        assert_int_equal(len, h.len[s]);
    }
    assert_int_equal(vkattn_kv_cache_free_blocks(h.cache), free_before);
    sa.mask = vkattn_tensor_make(mb, 0, F32, 3, ok_step);
    TEST_OK(ctx, vkattn_mha_step(layer, &sa));

    free(wz);
    vkattn_mha_destroy(layer);
    TEST_DESTROY_BUFFERS(mb, lb, bx, by);
    att_io_destroy(&io);
    kv_host_destroy(&h);
    test_assert_no_validation_messages(ctx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_decode_split),   cmocka_unit_test(test_tree),
        cmocka_unit_test(test_tree_with_mods), cmocka_unit_test(test_hidden_rows),
        cmocka_unit_test(test_prefill),        cmocka_unit_test(test_mha_step_tree),
        cmocka_unit_test(test_mask_errors),
    };
    return cmocka_run_group_tests(tests, test_policy_suite_setup, test_policy_suite_teardown);
}
