/* Attention over a KV cache (vkattn_kv_attention) against vkattn_ref_attention
 * run per sequence on the keys and values appended to it (gathered on the
 * host): MHA / GQA / MQA, contiguous and paged caches (block sizes 16 and 5),
 * ragged batches, decode (T <= 16, split-KV) and prefill (T = 40, on empty
 * and non-empty sequences), several head dims, f32 and f16 caches, split
 * counts that agree and repeat bit for bit, appends and attention recorded
 * into one command buffer, and the errors (with the cache left unchanged).
 * Every case runs on both kernel families (subgroup and shared-memory),
 * texel inputs on some and storage inputs on others. */
#include "test_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

/* The four kernel policies. */
static const uint32_t policy_flags[4] = {
    0,
    VKATTN_CONTEXT_NO_TEXEL_BUFFERS,
    VKATTN_CONTEXT_NO_SUBGROUP_KERNELS,
    VKATTN_CONTEXT_NO_SUBGROUP_KERNELS | VKATTN_CONTEXT_NO_TEXEL_BUFFERS,
};
static const char *const policy_names[4] = {"subgroup+texel", "subgroup+storage", "shared+texel",
                                            "shared+storage"};

typedef struct suite {
    test_gpu *gpu[4];
} suite;

#define MAX_SEQ 8

/* ---- a cache and its host mirror */

typedef struct kv_host {
    vkattn_kv_cache *cache;
    vkattn_kv_cache_desc d;
    float *k, *v; /* [max_sequences][Hkv][capacity][D], values as stored (rounded) */
    uint32_t len[MAX_SEQ];
} kv_host;

static float round_to(vkattn_dtype dt, float v)
{
    return dt == VKATTN_DTYPE_F16 ? vkattn_f16_to_f32(vkattn_f32_to_f16(v)) : v;
}

static size_t kv_index(const kv_host *h, uint32_t s, uint32_t g, uint32_t t, uint32_t d)
{
    return (((size_t)s * h->d.num_kv_heads + g) * h->d.capacity + t) * h->d.head_dim + d;
}

static void kv_host_create(test_gpu *g, const vkattn_kv_cache_desc *d, kv_host *h)
{
    memset(h, 0, sizeof *h);
    assert_true(d->max_sequences <= MAX_SEQ);
    TEST_OK(g->ctx, vkattn_kv_cache_create(g->ctx, d, &h->cache));
    h->d = *vkattn_kv_cache_config(h->cache);
    size_t n = (size_t)d->max_sequences * d->num_kv_heads * d->capacity * d->head_dim;
    h->k = calloc(n, sizeof *h->k);
    h->v = calloc(n, sizeof *h->v);
    assert_true(h->k && h->v);
}

static void kv_host_destroy(kv_host *h)
{
    vkattn_kv_cache_destroy(h->cache);
    free(h->k);
    free(h->v);
}

/* A device buffer holding `n` values in `dt` (odd sizes with room behind:
 * lavapipe compiles extra variants for power-of-two buffers). */
static vkattn_buffer *buffer_of(vkattn_context *ctx, const float *vals, size_t n, vkattn_dtype dt)
{
    size_t es = vkattn_dtype_size(dt), total = (n + 40) | 1;
    uint8_t *bytes = calloc(total, es);
    assert_non_null(bytes);
    for (size_t i = 0; i < n; i++) {
        if (dt == VKATTN_DTYPE_F32) {
            memcpy(bytes + 4 * i, &vals[i], 4);
        } else {
            uint16_t x = vkattn_f32_to_f16(vals[i]);
            memcpy(bytes + 2 * i, &x, 2);
        }
    }
    vkattn_buffer *b = test_buffer_with(ctx, bytes, total * es);
    free(bytes);
    return b;
}

static void download(vkattn_context *ctx, vkattn_buffer *b, float *dst, size_t n, vkattn_dtype dt)
{
    size_t es = vkattn_dtype_size(dt);
    uint8_t *bytes = malloc(n * es);
    assert_non_null(bytes);
    TEST_OK(ctx, vkattn_buffer_download(b, 0, bytes, n * es));
    for (size_t i = 0; i < n; i++) {
        if (dt == VKATTN_DTYPE_F32) {
            memcpy(&dst[i], bytes + 4 * i, 4);
        } else {
            uint16_t x;
            memcpy(&x, bytes + 2 * i, 2);
            dst[i] = vkattn_f16_to_f32(x);
        }
    }
    free(bytes);
}

/* An append prepared on the host: T random tokens for each of `seqs`,
 * already in the host mirror (lengths advanced), and its input buffers
 * (buffers cannot be uploaded while the context's command buffer records). */
typedef struct pending_append {
    uint32_t seqs[MAX_SEQ];
    vkattn_buffer *k, *v;
    vkattn_kv_append_args a;
} pending_append;

static void prepare_append(vkattn_context *ctx, kv_host *h, uint32_t batch, const uint32_t *seqs,
                           uint32_t T, test_rng *rng, pending_append *p)
{
    const uint32_t hkv = h->d.num_kv_heads, D = h->d.head_dim;
    size_t n = (size_t)batch * hkv * T * D;
    float *k = malloc(n * sizeof *k), *v = malloc(n * sizeof *v);
    assert_true(k && v);
    for (uint32_t b = 0; b < batch; b++)
        for (uint32_t g = 0; g < hkv; g++)
            for (uint32_t t = 0; t < T; t++)
                for (uint32_t d = 0; d < D; d++) {
                    size_t i = (((size_t)b * hkv + g) * T + t) * D + d;
                    k[i] = round_to(h->d.dtype, test_rng_uniform(rng, -1.0f, 1.0f));
                    v[i] = round_to(h->d.dtype, test_rng_uniform(rng, -1.0f, 1.0f));
                    size_t at = kv_index(h, seqs[b], g, h->len[seqs[b]] + t, d);
                    h->k[at] = k[i];
                    h->v[at] = v[i];
                }
    memcpy(p->seqs, seqs, batch * sizeof *seqs);
    p->k = buffer_of(ctx, k, n, h->d.dtype);
    p->v = buffer_of(ctx, v, n, h->d.dtype);
    int64_t shape[4] = {batch, hkv, T, D};
    vkattn_kv_append_args a = {.cache = h->cache, .batch = batch, .sequences = p->seqs};
    a.k = vkattn_tensor_make(p->k, 0, h->d.dtype, 4, shape);
    a.v = vkattn_tensor_make(p->v, 0, h->d.dtype, 4, shape);
    p->a = a;
    for (uint32_t b = 0; b < batch; b++)
        h->len[seqs[b]] += T;
    free(k);
    free(v);
}

static void pending_free(pending_append *p)
{
    vkattn_buffer_destroy(p->k);
    vkattn_buffer_destroy(p->v);
}

static void append(vkattn_context *ctx, kv_host *h, uint32_t batch, const uint32_t *seqs,
                   uint32_t T, test_rng *rng)
{
    VkCommandBuffer cmd;
    pending_append p;
    prepare_append(ctx, h, batch, seqs, T, rng, &p);
    TEST_OK(ctx, vkattn_commands_begin(ctx, &cmd));
    TEST_OK(ctx, vkattn_cmd_kv_cache_append(ctx, cmd, &p.a));
    TEST_OK(ctx, vkattn_commands_submit(ctx));
    pending_free(&p);
    for (uint32_t b = 0; b < batch; b++) {
        uint32_t len = 0;
        TEST_OK(ctx, vkattn_kv_cache_length(h->cache, seqs[b], &len));
        assert_int_equal(len, h->len[seqs[b]]);
    }
}

/* The reference: q [B, Hq, T, D] (host, contiguous) over each sequence's
 * whole mirror, causal with Tq = T, Tk = its length; want [B, Hq, T, D]. */
static void reference(const kv_host *h, uint32_t batch, const uint32_t *seqs, uint32_t Hq,
                      uint32_t T, float scale, float *q, float *want)
{
    const uint32_t hkv = h->d.num_kv_heads, D = h->d.head_dim;
    for (uint32_t b = 0; b < batch; b++) {
        uint32_t s = seqs[b], L = h->len[s];
        size_t n = (size_t)hkv * L * D;
        float *k = malloc(n * sizeof *k), *v = malloc(n * sizeof *v);
        assert_true(k && v);
        for (uint32_t g = 0; g < hkv; g++)
            for (uint32_t t = 0; t < L; t++) {
                memcpy(k + ((size_t)g * L + t) * D, h->k + kv_index(h, s, g, t, 0), D * sizeof *k);
                memcpy(v + ((size_t)g * L + t) * D, h->v + kv_index(h, s, g, t, 0), D * sizeof *v);
            }
        int64_t qs[4] = {1, Hq, T, D}, ks[4] = {1, hkv, L, D};
        vkattn_ref_attention_args r = {0};
        size_t qb = (size_t)Hq * T * D;
        r.q = vkattn_host_tensor_make(q + b * qb, VKATTN_DTYPE_F32, 4, qs);
        r.k = vkattn_host_tensor_make(k, VKATTN_DTYPE_F32, 4, ks);
        r.v = vkattn_host_tensor_make(v, VKATTN_DTYPE_F32, 4, ks);
        r.out = vkattn_host_tensor_make(want + b * qb, VKATTN_DTYPE_F32, 4, qs);
        r.causal = true;
        r.scale = scale;
        char err[256] = "";
        if (vkattn_ref_attention(&r, err, sizeof err) != VKATTN_SUCCESS)
            fail_msg("reference: %s", err);
        free(k);
        free(v);
    }
}

/* q and out of one attention call on the device. out is [B, Hq, T, D], or
 * the MHA layer's merged [B, T, Hq*D] through strides; it starts as NaN. */
typedef struct att_io {
    uint32_t batch, Hq, T, D;
    vkattn_dtype dt;
    bool merged;
    float *q;         /* host [B, Hq, T, D], rounded to dt */
    vkattn_buffer *qb, *ob;
    vkattn_tensor qt, ot;
} att_io;

static void att_io_create(vkattn_context *ctx, att_io *io, uint32_t batch, uint32_t Hq, uint32_t T,
                          uint32_t D, vkattn_dtype dt, bool merged, test_rng *rng)
{
    memset(io, 0, sizeof *io);
    io->batch = batch, io->Hq = Hq, io->T = T, io->D = D, io->dt = dt, io->merged = merged;
    size_t n = (size_t)batch * Hq * T * D;
    io->q = malloc(n * sizeof *io->q);
    float *nan = malloc(n * sizeof *nan);
    assert_true(io->q && nan);
    for (size_t i = 0; i < n; i++) {
        io->q[i] = round_to(dt, test_rng_uniform(rng, -1.0f, 1.0f));
        nan[i] = NAN;
    }
    io->qb = buffer_of(ctx, io->q, n, dt);
    io->ob = buffer_of(ctx, nan, n, dt);
    free(nan);
    int64_t shape[4] = {batch, Hq, T, D};
    io->qt = vkattn_tensor_make(io->qb, 0, dt, 4, shape);
    io->ot = vkattn_tensor_make(io->ob, 0, dt, 4, shape);
    if (merged) {
        int64_t row = (int64_t)Hq * D;
        io->ot.strides[0] = row * T, io->ot.strides[1] = D, io->ot.strides[2] = row;
        io->ot.strides[3] = 1;
    }
}

/* The output in [B, Hq, T, D] order. */
static void att_io_result(vkattn_context *ctx, const att_io *io, float *got)
{
    size_t n = (size_t)io->batch * io->Hq * io->T * io->D;
    float *raw = malloc(n * sizeof *raw);
    assert_non_null(raw);
    download(ctx, io->ob, raw, n, io->dt);
    for (uint32_t b = 0; b < io->batch; b++)
        for (uint32_t h = 0; h < io->Hq; h++)
            for (uint32_t t = 0; t < io->T; t++)
                for (uint32_t d = 0; d < io->D; d++) {
                    const int64_t *s = io->ot.strides;
                    got[(((size_t)b * io->Hq + h) * io->T + t) * io->D + d] =
                        raw[b * s[0] + h * s[1] + t * s[2] + d];
                }
    free(raw);
}

static void att_io_destroy(att_io *io)
{
    vkattn_buffer_destroy(io->qb);
    vkattn_buffer_destroy(io->ob);
    free(io->q);
}

static vkattn_kv_attention_args att_args(kv_host *h, const att_io *io, const uint32_t *seqs,
                                         float scale, uint32_t splits)
{
    vkattn_kv_attention_args a = {.cache = h->cache, .batch = io->batch, .sequences = seqs,
                                  .q = io->qt, .out = io->ot, .scale = scale, .kv_splits = splits};
    return a;
}

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
} kv_case;

#define F32 VKATTN_DTYPE_F32
#define F16 VKATTN_DTYPE_F16

static const kv_case grid[] = {
    /* MHA decode, contiguous, ragged with a length-1 sequence */
    {2, 2, 64, F32, F32, 0, 80, 3, {2, 0, 1}, {0, 37, 64}, 1, 0, false, 0.0f},
    /* GQA 4 decode, paged 16, f16 cache, merged output */
    {8, 2, 128, F16, F16, 16, 160, 4, {3, 1, 0, 2}, {0, 37, 16, 150}, 1, 0, true, 0.0f},
    /* GQA 8, paged 5, T = 2, f32 q over an f16 cache */
    {8, 1, 32, F16, F32, 5, 120, 3, {0, 2, 1}, {3, 101, 0}, 2, 0, false, 0.3f},
    /* MQA, T = 16, head dim 40 (not a multiple of the subgroup's chunks), paged 5 */
    {4, 1, 40, F32, F32, 5, 90, 3, {1, 2, 0}, {0, 9, 57}, 16, 0, true, 0.0f},
    /* prefill T = 40: on an empty and on non-empty sequences (chunked), paged 16 */
    {4, 2, 64, F16, F16, 16, 120, 3, {0, 1, 2}, {0, 23, 48}, 40, 0, false, 0.0f},
    /* prefill T = 40 on MHA, contiguous, head dim 24, f16 q over an f32 cache */
    {3, 3, 24, F32, F16, 0, 64, 2, {1, 0}, {0, 17}, 40, 0, true, 0.2f},
    /* head dim 256 decode, GQA 2, paged 16 */
    {4, 2, 256, F16, F16, 16, 48, 2, {0, 1}, {30, 1}, 1, 3, false, 0.0f},
    /* head dim 8, GQA 4, T = 2, paged 5, explicit splits */
    {4, 1, 8, F32, F32, 5, 64, 3, {2, 0, 1}, {40, 0, 13}, 2, 7, false, 0.0f},
};

static void describe(const kv_case *c, uint32_t policy, char *buf, size_t size)
{
    snprintf(buf, size, "%s Hq%u Hkv%u D%u cache:%s q:%s block%u B%u T%u splits%u%s",
             policy_names[policy], c->Hq, c->Hkv, c->D, vkattn_dtype_name(c->cdt),
             vkattn_dtype_name(c->qdt), c->block_size, c->batch, c->T, c->splits,
             c->merged ? " merged" : "");
}

static double tolerance(vkattn_dtype a, vkattn_dtype b)
{
    return a == F16 || b == F16 ? TEST_TOL_F16 : TEST_TOL_F32;
}

static void run_case(test_gpu *g, const kv_case *c, uint32_t policy, uint64_t seed)
{
    vkattn_context *ctx = g->ctx;
    char what[200];
    describe(c, policy, what, sizeof what);
    test_rng rng = test_rng_seed(seed);
    vkattn_kv_cache_desc d = {.num_kv_heads = c->Hkv, .num_heads = c->Hq, .head_dim = c->D,
                              .dtype = c->cdt, .max_sequences = 4, .capacity = c->capacity,
                              .block_size = c->block_size};
    kv_host h;
    kv_host_create(g, &d, &h);
    /* History: each sequence alone, in two appends (the second starts
     * inside a block), then the step's append for the whole batch. */
    for (uint32_t b = 0; b < c->batch; b++) {
        uint32_t first = c->prior[b] / 3;
        if (first)
            append(ctx, &h, 1, &c->seqs[b], first, &rng);
        if (c->prior[b] - first)
            append(ctx, &h, 1, &c->seqs[b], c->prior[b] - first, &rng);
    }
    append(ctx, &h, c->batch, c->seqs, c->T, &rng);

    att_io io;
    att_io_create(ctx, &io, c->batch, c->Hq, c->T, c->D, c->qdt, c->merged, &rng);
    vkattn_kv_attention_args a = att_args(&h, &io, c->seqs, c->scale, c->splits);
    TEST_OK(ctx, vkattn_kv_attention(ctx, &a));
    size_t n = (size_t)c->batch * c->Hq * c->T * c->D;
    float *got = malloc(n * sizeof *got), *want = malloc(n * sizeof *want);
    assert_true(got && want);
    att_io_result(ctx, &io, got);
    reference(&h, c->batch, c->seqs, c->Hq, c->T, c->scale, io.q, want);
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

/* Case i runs on one subgroup and one shared-memory policy, texel inputs
 * for even i, storage for odd i. */
static void test_grid(void **state)
{
    suite *s = *state;
    for (uint32_t i = 0; i < sizeof grid / sizeof grid[0]; i++)
        for (uint32_t fam = 0; fam < 2; fam++) {
            uint32_t policy = (i % 2) + 2 * fam;
            run_case(s->gpu[policy], &grid[i], policy, 100 + i);
        }
}

/* ---- split counts: all close to the reference and to each other; a fixed
 * count (and the automatic one) gives the same bits every run */

static void splits_on(test_gpu *g, uint32_t policy)
{
    vkattn_context *ctx = g->ctx;
    test_rng rng = test_rng_seed(7 + policy);
    vkattn_kv_cache_desc d = {.num_kv_heads = 2, .num_heads = 8, .head_dim = 64,
                              .dtype = policy % 2 ? F32 : F16, .max_sequences = 4,
                              .capacity = 600, .block_size = 16, .num_blocks = 48};
    /* (48 blocks: within SwiftShader's 65536 texels, so its texel policies
     * run texel inputs too) */
    kv_host h;
    kv_host_create(g, &d, &h);
    const uint32_t seqs[3] = {1, 3, 0};
    append(ctx, &h, 1, &seqs[0], 530, &rng);
    append(ctx, &h, 1, &seqs[1], 77, &rng);
    append(ctx, &h, 3, seqs, 2, &rng);
    att_io io;
    att_io_create(ctx, &io, 3, 8, 2, 64, d.dtype, false, &rng);
    size_t n = (size_t)3 * 8 * 2 * 64;
    float *want = malloc(n * sizeof *want), *got = malloc(n * sizeof *got);
    float *first = malloc(n * sizeof *first), *again = malloc(n * sizeof *again);
    assert_true(want && got && first && again);
    reference(&h, 3, seqs, 8, 2, 0.0f, io.q, want);
    double tol = tolerance(d.dtype, d.dtype);
    const uint32_t counts[] = {1, 2, 7, 0, 32};
    for (size_t ci = 0; ci < sizeof counts / sizeof counts[0]; ci++) {
        char what[120];
        snprintf(what, sizeof what, "%s kv_splits %u", policy_names[policy], counts[ci]);
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
    suite *s = *state;
    for (uint32_t p = 0; p < 4; p++)
        splits_on(s->gpu[p], p);
}

/* ---- decode steps recorded into one command buffer: append, attention,
 * append, attention (split and not), with synchronization validation
 * watching the cache's internal buffers */

static void one_buffer_on(test_gpu *g, uint32_t policy)
{
    vkattn_context *ctx = g->ctx;
    test_rng rng = test_rng_seed(31 + policy);
    vkattn_kv_cache_desc d = {.num_kv_heads = 2, .num_heads = 4, .head_dim = 32,
                              .dtype = F32, .max_sequences = 3, .capacity = 300,
                              .block_size = 5};
    kv_host h;
    kv_host_create(g, &d, &h);
    const uint32_t seqs[2] = {2, 0};
    append(ctx, &h, 2, seqs, 41, &rng);
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
        reference(&h, 2, seqs, 4, 1, 0.0f, io[st].q, want[st]);
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
        snprintf(what, sizeof what, "%s step %u in one command buffer", policy_names[policy], st);
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
    suite *s = *state;
    for (uint32_t p = 0; p < 4; p++)
        one_buffer_on(s->gpu[p], p);
}

/* ---- attention alone over what a cache holds, more queries than keys in
 * one sequence: its first queries see no key and get zeros, never NaN */

static void test_more_queries_than_keys(void **state)
{
    suite *s = *state;
    for (uint32_t policy = 0; policy < 4; policy += 3) {
        test_gpu *g = s->gpu[policy];
        vkattn_context *ctx = g->ctx;
        test_rng rng = test_rng_seed(77);
        vkattn_kv_cache_desc d = {.num_kv_heads = 1, .num_heads = 2, .head_dim = 16, .dtype = F32,
                                  .max_sequences = 2, .capacity = 32, .block_size = 5};
        kv_host h;
        kv_host_create(g, &d, &h);
        const uint32_t seqs[2] = {1, 0};
        append(ctx, &h, 1, &seqs[0], 2, &rng);
        append(ctx, &h, 1, &seqs[1], 9, &rng);
        att_io io;
        att_io_create(ctx, &io, 2, 2, 4, 16, F32, false, &rng);
        for (uint32_t splits = 1; splits <= 3; splits += 2) {
            vkattn_kv_attention_args a = att_args(&h, &io, seqs, 0.0f, splits);
            TEST_OK(ctx, vkattn_kv_attention(ctx, &a));
            size_t n = (size_t)2 * 2 * 4 * 16;
            float got[2 * 2 * 4 * 16], want[2 * 2 * 4 * 16];
            att_io_result(ctx, &io, got);
            reference(&h, 2, seqs, 2, 4, 0.0f, io.q, want);
            char what[80];
            snprintf(what, sizeof what, "%s T 4 over 2 keys, kv_splits %u", policy_names[policy],
                     splits);
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

/* ---- errors: code, message, and the cache unchanged */

typedef struct snapshot {
    uint32_t len[MAX_SEQ];
    uint32_t free_blocks;
} snapshot;

static snapshot snap(const kv_host *h)
{
    snapshot s = {{0}, vkattn_kv_cache_free_blocks(h->cache)};
    for (uint32_t i = 0; i < h->d.max_sequences; i++)
        assert_int_equal(vkattn_kv_cache_length(h->cache, i, &s.len[i]), VKATTN_SUCCESS);
    return s;
}

static void assert_unchanged(const kv_host *h, const snapshot *before)
{
    snapshot now = snap(h);
    assert_memory_equal(&now, before, sizeof now);
}

#define FAILS_UNCHANGED(code, needle, expr)                                                  \
    do {                                                                                     \
        snapshot before_ = snap(&h);                                                         \
        TEST_FAILS(ctx, code, needle, expr);                                                 \
        assert_unchanged(&h, &before_);                                                      \
    } while (0)

static void test_errors(void **state)
{
    suite *s = *state;
    test_gpu *g = s->gpu[0];
    vkattn_context *ctx = g->ctx;
    test_rng rng = test_rng_seed(5);
    vkattn_kv_cache_desc d = {.num_kv_heads = 2, .num_heads = 4, .head_dim = 16, .dtype = F32,
                              .max_sequences = 4, .capacity = 40, .block_size = 5,
                              .num_blocks = 12};
    kv_host h;
    kv_host_create(g, &d, &h);
    const uint32_t s01[2] = {0, 1};
    append(ctx, &h, 2, s01, 7, &rng); /* sequences 0 and 1 hold 7; 2 and 3 are empty */
    att_io io1, io2, io16;
    att_io_create(ctx, &io1, 1, 4, 1, 16, F32, false, &rng);
    att_io_create(ctx, &io2, 2, 4, 1, 16, F32, false, &rng);
    att_io_create(ctx, &io16, 1, 4, 16, 16, F32, false, &rng);
    vkattn_kv_attention_args a;

    const uint32_t out_of_range = 4, dup[2] = {1, 1}, empty = 2, one = 1;
    a = att_args(&h, &io1, &out_of_range, 0.0f, 0);
    FAILS_UNCHANGED(VKATTN_ERROR_INVALID_ARGUMENT, "the cache holds sequences 0..3",
                    vkattn_kv_attention(ctx, &a));
    a = att_args(&h, &io2, dup, 0.0f, 0);
    FAILS_UNCHANGED(VKATTN_ERROR_INVALID_ARGUMENT, "are both sequence 1", vkattn_kv_attention(ctx, &a));
    a = att_args(&h, &io1, &empty, 0.0f, 0);
    FAILS_UNCHANGED(VKATTN_ERROR_INVALID_ARGUMENT, "is empty", vkattn_kv_attention(ctx, &a));
    a = att_args(&h, &io1, &one, 0.0f, 0);
    a.batch = 2;
    FAILS_UNCHANGED(VKATTN_ERROR_SHAPE_MISMATCH, "args->batch is 2", vkattn_kv_attention(ctx, &a));
    a = att_args(&h, &io1, NULL, 0.0f, 0);
    FAILS_UNCHANGED(VKATTN_ERROR_INVALID_ARGUMENT, "sequences is NULL", vkattn_kv_attention(ctx, &a));
    a = att_args(&h, &io1, &one, 0.0f, 0);
    a.cache = NULL;
    FAILS_UNCHANGED(VKATTN_ERROR_INVALID_ARGUMENT, "args->cache is NULL", vkattn_kv_attention(ctx, &a));

    /* q/out against the cache */
    a = att_args(&h, &io1, &one, 0.0f, 0);
    a.q.shape[1] = 3, a.q.strides[0] = 0, a.q.strides[1] = 0, a.q.strides[2] = 0, a.q.strides[3] = 0;
    FAILS_UNCHANGED(VKATTN_ERROR_SHAPE_MISMATCH, "is not a multiple of the cache's num_kv_heads 2",
                    vkattn_kv_attention(ctx, &a));
    a = att_args(&h, &io1, &one, 0.0f, 0);
    a.q.shape[1] = 2, a.q.strides[0] = 0, a.q.strides[1] = 0, a.q.strides[2] = 0, a.q.strides[3] = 0;
    FAILS_UNCHANGED(VKATTN_ERROR_SHAPE_MISMATCH, "differs from the cache's num_heads 4",
                    vkattn_kv_attention(ctx, &a));
    a = att_args(&h, &io1, &one, 0.0f, 0);
    a.q.shape[3] = 8, a.q.strides[0] = 0, a.q.strides[1] = 0, a.q.strides[2] = 0, a.q.strides[3] = 0;
    FAILS_UNCHANGED(VKATTN_ERROR_SHAPE_MISMATCH, "(head_dim) 8 differs from the cache's head_dim 16",
                    vkattn_kv_attention(ctx, &a));
    a = att_args(&h, &io2, s01, 0.0f, 0);
    a.out.shape[0] = 1, a.out.strides[0] = 0, a.out.strides[1] = 0, a.out.strides[2] = 0,
    a.out.strides[3] = 0;
    FAILS_UNCHANGED(VKATTN_ERROR_SHAPE_MISMATCH, "args->out.shape[0] is 1", vkattn_kv_attention(ctx, &a));
    a = att_args(&h, &io1, &one, 0.0f, 0);
    a.out.dtype = F16;
    FAILS_UNCHANGED(VKATTN_ERROR_UNSUPPORTED_DTYPE, "they must be the same", vkattn_kv_attention(ctx, &a));
    a = att_args(&h, &io1, &one, 0.0f, 0);
    a.q.offset = 8;
    FAILS_UNCHANGED(VKATTN_ERROR_INVALID_ARGUMENT, "multiple of 16 bytes", vkattn_kv_attention(ctx, &a));
    a = att_args(&h, &io1, &one, 0.0f, 0);
    a.out = a.q;
    FAILS_UNCHANGED(VKATTN_ERROR_INVALID_ARGUMENT, "overlaps args->q", vkattn_kv_attention(ctx, &a));
    /* split rows */
    a = att_args(&h, &io16, &one, 0.0f, 5);
    FAILS_UNCHANGED(VKATTN_ERROR_INVALID_ARGUMENT, "VKATTN_KV_MAX_SPLIT_ROWS",
                    vkattn_kv_attention(ctx, &a));
    a = att_args(&h, &io1, &one, 0.0f, 65);
    FAILS_UNCHANGED(VKATTN_ERROR_INVALID_ARGUMENT, "kv_splits 65", vkattn_kv_attention(ctx, &a));
    a = att_args(&h, &io16, &one, 0.0f, 4); /* 4 x 16 = 64 is allowed */
    TEST_OK(ctx, vkattn_kv_attention(ctx, &a));

    /* appends: past the capacity, past the pool (the cache stays as it was) */
    {
        VkCommandBuffer cmd;
        float *zeros = calloc(2 * 2 * 34 * 16, sizeof *zeros);
        assert_non_null(zeros);
        vkattn_buffer *big = buffer_of(ctx, zeros, 2 * 2 * 34 * 16, F32);
        free(zeros);
        int64_t shape[4] = {2, 2, 34, 16};
        vkattn_kv_append_args ap = {.cache = h.cache, .batch = 2, .sequences = s01};
        ap.k = ap.v = vkattn_tensor_make(big, 0, F32, 4, shape);
        TEST_OK(ctx, vkattn_commands_begin(ctx, &cmd));
        FAILS_UNCHANGED(VKATTN_ERROR_OUT_OF_RANGE, "exceed the cache's capacity of 40",
                        vkattn_cmd_kv_cache_append(ctx, cmd, &ap));
        /* 7 tokens hold 2 blocks of 5 per sequence, 8 of 12 are free; 26 more
         * tokens need 5 more blocks per sequence */
        shape[2] = 26;
        ap.k = ap.v = vkattn_tensor_make(big, 0, F32, 4, shape);
        FAILS_UNCHANGED(VKATTN_ERROR_CACHE_FULL, "needs 10 new blocks",
                        vkattn_cmd_kv_cache_append(ctx, cmd, &ap));
        vkattn_commands_discard(ctx);
        vkattn_buffer_destroy(big);
    }
    att_io_destroy(&io1);
    att_io_destroy(&io2);
    att_io_destroy(&io16);
    kv_host_destroy(&h);
    test_assert_no_validation_messages(ctx);
}

/* ---- suite */

static int suite_setup(void **state)
{
    suite *s = calloc(1, sizeof *s);
    assert_non_null(s);
    for (int p = 0; p < 4; p++)
        s->gpu[p] = test_gpu_open(policy_flags[p]);
    *state = s;
    return 0;
}

static int suite_teardown(void **state)
{
    suite *s = *state;
    for (int p = 0; p < 4; p++)
        test_gpu_close(s->gpu[p]);
    free(s);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_grid),
        cmocka_unit_test(test_splits),
        cmocka_unit_test(test_one_command_buffer),
        cmocka_unit_test(test_more_queries_than_keys),
    };
    return cmocka_run_group_tests(tests, suite_setup, suite_teardown);
}
