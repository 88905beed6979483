/* Shared scaffolding of the KV-cache attention tests (see test_kv_util.h). */
#include "test_kv_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

/* Element d of token t of KV head g of sequence s in a mirror of rows of D
 * (the cache's head_dim for K, v_head_dim for V). */
static size_t kv_index(const kv_host *h, uint32_t D, uint32_t s, uint32_t g, uint32_t t, uint32_t d)
{
    return (((size_t)s * h->d.num_kv_heads + g) * h->d.capacity + t) * D + d;
}

void kv_host_create(test_gpu *g, const vkattn_kv_cache_desc *d, kv_host *h)
{
    memset(h, 0, sizeof *h);
    assert_true(d->max_sequences <= MAX_SEQ);
    TEST_OK(g->ctx, vkattn_kv_cache_create(g->ctx, d, &h->cache));
    h->d = *vkattn_kv_cache_config(h->cache);
    size_t rows = (size_t)d->max_sequences * d->num_kv_heads * d->capacity;
    size_t nk = rows * h->d.head_dim, nv = rows * h->d.v_head_dim;
    h->k = calloc(nk, sizeof *h->k);
    h->v = calloc(nv, sizeof *h->v);
    assert_true(h->k && h->v);
    if (kv_quantized(d->dtype)) {
        h->k0 = calloc(nk, sizeof *h->k0);
        h->v0 = calloc(nv, sizeof *h->v0);
        assert_true(h->k0 && h->v0);
    }
}

bool kv_quantized(vkattn_dtype dt)
{
    return vkattn_dtype_block_size(dt) == 32; /* the quantized dtypes' blocks */
}

/* x, rows of d values, quantized to the cache's blocks and dequantized, by
 * the reference: each row zero-padded to whole 32-value blocks, as the
 * cache keeps it. */
static void quantize_round_trip(vkattn_dtype dt, float *x, size_t n, uint32_t d)
{
    const uint32_t r = (d + 31) / 32 * 32;
    void *blocks = test_alloc(vkattn_dtype_row_bytes(dt, r));
    float *row = test_alloc((size_t)r * sizeof *row);
    char err[256] = "";
    for (size_t at = 0; at < n; at += d) {
        memset(row, 0, (size_t)r * sizeof *row);
        memcpy(row, x + at, (size_t)d * sizeof *row);
        if (vkattn_ref_quantize(dt, row, r, blocks, err, sizeof err) != VKATTN_SUCCESS ||
            vkattn_ref_dequantize(dt, blocks, r, row, err, sizeof err) != VKATTN_SUCCESS)
            fail_msg("reference quantizer: %s", err);
        memcpy(x + at, row, (size_t)d * sizeof *row);
    }
    free(blocks);
    free(row);
}

void kv_host_destroy(kv_host *h)
{
    vkattn_kv_cache_destroy(h->cache);
    free(h->k);
    free(h->v);
    free(h->k0);
    free(h->v0);
}

vkattn_buffer *kv_buffer_of(vkattn_context *ctx, const float *vals, size_t n, vkattn_dtype dt)
{
    size_t es = vkattn_dtype_size(dt), total = (n + 40) | 1;
    uint8_t *bytes = test_alloc(total * es);
    for (size_t i = 0; i < n; i++)
        test_store(bytes, dt, i, vals[i]);
    vkattn_buffer *b = test_buffer_with(ctx, bytes, total * es);
    free(bytes);
    return b;
}

void prepare_append(vkattn_context *ctx, kv_host *h, uint32_t batch, const uint32_t *seqs,
                    uint32_t T, test_rng *rng, pending_append *p)
{
    const uint32_t hkv = h->d.num_kv_heads;
    bool quant = kv_quantized(h->d.dtype);
    vkattn_dtype in = quant ? h->src : h->d.dtype; /* what the append reads */
    memcpy(p->seqs, seqs, batch * sizeof *seqs);
    vkattn_kv_append_args a = {.cache = h->cache, .batch = batch, .sequences = p->seqs};
    /* K (head_dim) then V (v_head_dim) */
    for (int kv = 0; kv < 2; kv++) {
        const uint32_t D = kv ? h->d.v_head_dim : h->d.head_dim;
        float *mirror = kv ? h->v : h->k, *mirror0 = kv ? h->v0 : h->k0;
        size_t n = (size_t)batch * hkv * T * D;
        float *x = malloc(n * sizeof *x);
        assert_non_null(x);
        for (size_t i = 0; i < n; i++)
            x[i] = test_rng_uniform(rng, -1.0f, 1.0f);
        test_round_to(in, x, n);
        vkattn_buffer *buf = kv_buffer_of(ctx, x, n, in);
        for (uint32_t b = 0; b < batch && quant; b++)
            for (uint32_t g = 0; g < hkv; g++)
                for (uint32_t t = 0; t < T; t++) {
                    size_t i = (((size_t)b * hkv + g) * T + t) * D;
                    size_t at = kv_index(h, D, seqs[b], g, h->len[seqs[b]] + t, 0);
                    memcpy(mirror0 + at, x + i, D * sizeof *x);
                }
        if (quant)
            quantize_round_trip(h->d.dtype, x, n, D);
        for (uint32_t b = 0; b < batch; b++)
            for (uint32_t g = 0; g < hkv; g++)
                for (uint32_t t = 0; t < T; t++)
                    for (uint32_t d = 0; d < D; d++) {
                        size_t i = (((size_t)b * hkv + g) * T + t) * D + d;
                        mirror[kv_index(h, D, seqs[b], g, h->len[seqs[b]] + t, d)] = x[i];
                    }
        int64_t shape[4] = {batch, hkv, T, D};
        if (kv)
            p->v = buf, a.v = vkattn_tensor_make(buf, 0, in, 4, shape);
        else
            p->k = buf, a.k = vkattn_tensor_make(buf, 0, in, 4, shape);
        free(x);
    }
    p->a = a;
    for (uint32_t b = 0; b < batch; b++)
        h->len[seqs[b]] += T;
}

void pending_free(pending_append *p)
{
    vkattn_buffer_destroy(p->k);
    vkattn_buffer_destroy(p->v);
}

void kv_append(vkattn_context *ctx, kv_host *h, uint32_t batch, const uint32_t *seqs, uint32_t T,
               test_rng *rng)
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

void kv_reference(const kv_host *h, uint32_t batch, const uint32_t *seqs, uint32_t Hq, uint32_t T,
                  float scale, float *q, float *want)
{
    const uint32_t hkv = h->d.num_kv_heads, D = h->d.head_dim, DV = h->d.v_head_dim;
    for (uint32_t b = 0; b < batch; b++) {
        uint32_t s = seqs[b], L = h->len[s];
        float *k = malloc((size_t)hkv * L * D * sizeof *k);
        float *v = malloc((size_t)hkv * L * DV * sizeof *v);
        assert_true(k && v);
        for (uint32_t g = 0; g < hkv; g++)
            for (uint32_t t = 0; t < L; t++) {
                memcpy(k + ((size_t)g * L + t) * D, h->k + kv_index(h, D, s, g, t, 0),
                       D * sizeof *k);
                memcpy(v + ((size_t)g * L + t) * DV, h->v + kv_index(h, DV, s, g, t, 0),
                       DV * sizeof *v);
            }
        int64_t qs[4] = {1, Hq, T, D}, ks[4] = {1, hkv, L, D}, vs[4] = {1, hkv, L, DV},
                os[4] = {1, Hq, T, DV};
        vkattn_ref_attention_args r = {0};
        r.q = vkattn_host_tensor_make(q + b * (size_t)Hq * T * D, VKATTN_DTYPE_F32, 4, qs);
        r.k = vkattn_host_tensor_make(k, VKATTN_DTYPE_F32, 4, ks);
        r.v = vkattn_host_tensor_make(v, VKATTN_DTYPE_F32, 4, vs);
        r.out = vkattn_host_tensor_make(want + b * (size_t)Hq * T * DV, VKATTN_DTYPE_F32, 4, os);
        r.causal = true;
        r.scale = scale;
        char err[256] = "";
        if (vkattn_ref_attention(&r, err, sizeof err) != VKATTN_SUCCESS)
            fail_msg("reference: %s", err);
        free(k);
        free(v);
    }
}

void att_io_create(vkattn_context *ctx, att_io *io, uint32_t batch, uint32_t Hq, uint32_t T,
                   uint32_t D, vkattn_dtype dt, bool merged, test_rng *rng)
{
    att_io_create2(ctx, io, batch, Hq, T, D, D, dt, merged, rng);
}

void att_io_create2(vkattn_context *ctx, att_io *io, uint32_t batch, uint32_t Hq, uint32_t T,
                    uint32_t D, uint32_t DV, vkattn_dtype dt, bool merged, test_rng *rng)
{
    memset(io, 0, sizeof *io);
    io->batch = batch, io->Hq = Hq, io->T = T, io->D = D, io->DV = DV, io->dt = dt;
    io->merged = merged;
    size_t n = (size_t)batch * Hq * T * D, no = (size_t)batch * Hq * T * DV;
    io->q = malloc(n * sizeof *io->q);
    float *nan = malloc(no * sizeof *nan);
    assert_true(io->q && nan);
    for (size_t i = 0; i < n; i++)
        io->q[i] = test_rng_uniform(rng, -1.0f, 1.0f);
    for (size_t i = 0; i < no; i++)
        nan[i] = NAN;
    test_round_to(dt, io->q, n);
    io->qb = kv_buffer_of(ctx, io->q, n, dt);
    io->ob = kv_buffer_of(ctx, nan, no, dt);
    free(nan);
    int64_t shape[4] = {batch, Hq, T, D}, oshape[4] = {batch, Hq, T, DV};
    io->qt = vkattn_tensor_make(io->qb, 0, dt, 4, shape);
    io->ot = vkattn_tensor_make(io->ob, 0, dt, 4, oshape);
    if (merged) {
        int64_t row = (int64_t)Hq * DV;
        io->ot.strides[0] = row * T, io->ot.strides[1] = DV, io->ot.strides[2] = row;
        io->ot.strides[3] = 1;
    }
}

void att_io_result(vkattn_context *ctx, const att_io *io, float *got)
{
    size_t n = (size_t)io->batch * io->Hq * io->T * io->DV;
    float *raw = malloc(n * sizeof *raw);
    assert_non_null(raw);
    test_download_as(ctx, io->ob, io->dt, raw, n);
    for (uint32_t b = 0; b < io->batch; b++)
        for (uint32_t h = 0; h < io->Hq; h++)
            for (uint32_t t = 0; t < io->T; t++)
                for (uint32_t d = 0; d < io->DV; d++) {
                    const int64_t *s = io->ot.strides;
                    got[(((size_t)b * io->Hq + h) * io->T + t) * io->DV + d] =
                        raw[b * s[0] + h * s[1] + t * s[2] + d];
                }
    free(raw);
}

void att_io_destroy(att_io *io)
{
    vkattn_buffer_destroy(io->qb);
    vkattn_buffer_destroy(io->ob);
    free(io->q);
}

vkattn_kv_attention_args att_args(kv_host *h, const att_io *io, const uint32_t *seqs, float scale,
                                  uint32_t splits)
{
    vkattn_kv_attention_args a = {.cache = h->cache,
                                  .batch = io->batch,
                                  .sequences = seqs,
                                  .q = io->qt,
                                  .out = io->ot,
                                  .scale = scale,
                                  .kv_splits = splits};
    return a;
}
