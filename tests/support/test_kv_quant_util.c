/* Shared cases of the quantized-cache tests (test_kv_quant_util.h). */
#include "test_kv_quant_util.h"

#include "ops/kvcache/kvcache.h" /* the pools, to compare their bytes */

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static double tolerance(vkattn_dtype q)
{
    return q == F16 ? TEST_TOL_F16 : q == BF16 ? TEST_TOL_BF16 : TEST_TOL_F32;
}

static double max_abs_diff(const float *a, const float *b, size_t n)
{
    double m = 0;
    for (size_t i = 0; i < n; i++)
        m = fmax(m, fabs((double)a[i] - b[i]));
    return m;
}

void quant_case_run(test_gpu *g, const quant_case *c, uint32_t policy, uint64_t seed, double bound)
{
    vkattn_context *ctx = g->ctx;
    char what[200];
    snprintf(what, sizeof what, "%s Hq%u Hkv%u D%u cache:%s in:%s q:%s block%u B%u T%u splits%u",
             test_policies[policy].name, c->Hq, c->Hkv, c->D, vkattn_dtype_name(c->cdt),
             vkattn_dtype_name(c->src), vkattn_dtype_name(c->qdt), c->block_size, c->batch, c->T,
             c->splits);
    test_rng rng = test_rng_seed(seed);
    vkattn_kv_cache_desc d = {.num_kv_heads = c->Hkv,
                              .num_heads = c->Hq,
                              .head_dim = c->D,
                              .dtype = c->cdt,
                              .max_sequences = 4,
                              .capacity = c->capacity,
                              .block_size = c->block_size};
    kv_host h;
    kv_host_create(g, &d, &h);
    h.src = c->src;
    for (uint32_t b = 0; b < c->batch; b++) { /* two appends: the second starts inside a block */
        uint32_t first = c->prior[b] / 3;
        if (first)
            kv_append(ctx, &h, 1, &c->seqs[b], first, &rng);
        if (c->prior[b] - first)
            kv_append(ctx, &h, 1, &c->seqs[b], c->prior[b] - first, &rng);
    }
    kv_append(ctx, &h, c->batch, c->seqs, c->T, &rng);

    att_io io;
    att_io_create(ctx, &io, c->batch, c->Hq, c->T, c->D, c->qdt, c->merged, &rng);
    vkattn_kv_attention_args a = att_args(&h, &io, c->seqs, 0.0f, c->splits);
    TEST_OK(ctx, vkattn_kv_attention(ctx, &a));
    size_t n = (size_t)c->batch * c->Hq * c->T * c->D;
    float *got = malloc(n * sizeof *got), *want = malloc(n * sizeof *want),
          *exact = malloc(n * sizeof *exact);
    assert_true(got && want && exact);
    att_io_result(ctx, &io, got);
    kv_reference(&h, c->batch, c->seqs, c->Hq, c->T, 0.0f, io.q, want);
    test_assert_close(got, want, n, tolerance(c->qdt), what);
    /* the same reference on the values before quantization: the error the
     * cache's format costs (reported; bounded loosely) */
    float *qk = h.k, *qv = h.v;
    if (h.k0) /* (a float cache's mirror holds the values rounded to it) */
        h.k = h.k0, h.v = h.v0;
    kv_reference(&h, c->batch, c->seqs, c->Hq, c->T, 0.0f, io.q, exact);
    h.k = qk, h.v = qv;
    double err = max_abs_diff(got, exact, n);
    if (policy == 0)
        print_message("    %s: max |error| against unquantized K/V %.4g\n", what, err);
    if (!(err <= bound))
        fail_msg("%s: error against unquantized K/V %g is above %g", what, err, bound);
    free(got);
    free(want);
    free(exact);
    att_io_destroy(&io);
    kv_host_destroy(&h);
    test_assert_no_validation_messages(ctx);
}

/* The bytes the append writes are the reference quantizer's, bit for bit,
 * on rows made to hit every rule: zeros, a row of equal values, ties of
 * the rounding (q8_0: x * id = k + 0.5 rounds away from zero; q4_0:
 * x * id + 8.5 truncates), scales that are f16 subnormals, large values,
 * and random rows; K from f32, V from the same values (two pools). */
void quant_bytes_check(test_policy_suite *s, const vkattn_dtype *dtypes, int n)
{
    enum { T = 8, HKV = 2, DMAX = 96 };
    /* 64: pairs of blocks per row; 96: rows of 3 blocks, every other one
     * starting halfway into a word shared with the row before */
    for (int q = 0; q < 2 * n; q++)
        for (uint32_t policy = 0; policy < TEST_POLICY_COUNT; policy += 3) {
            if (!s->gpu[policy])
                continue;
            vkattn_context *ctx = s->gpu[policy]->ctx;
            const vkattn_dtype dt = dtypes[q / 2];
            const int D = q & 1 ? 96 : 64;
            float x[HKV * T * DMAX];
            test_rng rng = test_rng_seed(77 + q);
            for (int i = 0; i < HKV * T * D; i++) {
                int row = i / D, j = i % D;
                float r = test_rng_uniform(&rng, -1.0f, 1.0f);
                x[i] = row == 0   ? 0.0f
                       : row == 1 ? 0.7f
                       : row == 2 ? (j == 0 ? 127.0f : (float)(j % 9) - 4.5f) /* d = 1 */
                       : row == 3 ? (j == 5 ? -8.0f : (float)(j % 17) * 0.5f - 4.0f)
                       : row == 4 ? r * 1e-6f /* scale below f16's normals */
                       : row == 5 ? r * 3000.0f
                       : row == 6 ? (j < 32 ? 0.0f : r)
                                  : r;
            }
            vkattn_kv_cache_desc d = {
                .num_kv_heads = HKV, .head_dim = D, .dtype = dt, .max_sequences = 1, .capacity = T};
            vkattn_kv_cache *c;
            TEST_OK(ctx, vkattn_kv_cache_create(ctx, &d, &c));
            vkattn_buffer *b = test_buffer_with(ctx, x, sizeof x);
            int64_t shape[4] = {1, HKV, T, D};
            uint32_t seq = 0;
            vkattn_kv_append_args a = {c, 1, &seq, vkattn_tensor_make(b, 0, F32, 4, shape),
                                       vkattn_tensor_make(b, 0, F32, 4, shape)};
            VkCommandBuffer cmd;
            TEST_OK(ctx, vkattn_commands_begin(ctx, &cmd));
            TEST_OK(ctx, vkattn_cmd_kv_cache_append(ctx, cmd, &a));
            TEST_OK(ctx, vkattn_commands_submit(ctx));
            uint64_t bytes = vkattn_dtype_row_bytes(dt, (uint64_t)HKV * T * D);
            uint8_t want[HKV * T * DMAX / 32 * 34], got[2][sizeof want];
            char err[256] = "";
            if (vkattn_ref_quantize(dt, x, HKV * T * D, want, err, sizeof err) != VKATTN_SUCCESS)
                fail_msg("%s", err);
            TEST_OK(ctx, vkattn_buffer_download(c->k, 0, got[0], bytes));
            TEST_OK(ctx, vkattn_buffer_download(c->v, 0, got[1], bytes));
            for (int pool = 0; pool < 2; pool++)
                for (uint64_t i = 0; i < bytes; i++)
                    if (got[pool][i] != want[i])
                        fail_msg("%s %s pool: byte %llu (row %llu) is 0x%02x, the reference's "
                                 "0x%02x",
                                 test_policies[policy].name, vkattn_dtype_name(dt),
                                 (unsigned long long)i,
                                 (unsigned long long)(i / vkattn_dtype_row_bytes(dt, D)),
                                 got[pool][i], want[i]);
            vkattn_buffer_destroy(b);
            vkattn_kv_cache_destroy(c);
            test_assert_no_validation_messages(ctx);
        }
}

/* The layer's steps over quantized caches: a prefill of 5 tokens, then 3
 * decode steps (projection to scratch, quantizing append, attention over
 * the cache), with bias and RoPE, against vkattn_ref_mha over the whole
 * sequence with kv_cache_dtype set (K and V through the reference
 * quantizer). The GPU's K and V come from an f32 GEMM, the reference's
 * from double sums: a value within a rounding of a quantization boundary
 * may land one step apart, hence the callers' tolerances (q8_0 2e-3, the
 * 4- and 5-bit formats 2e-2: the seeds meet them on both drivers). */
void quant_layer_steps_check(test_policy_suite *s, vkattn_dtype dt, uint32_t block_size,
                             uint32_t head_dim, double tol)
{
    enum { HQ = 4, HKV = 2, T = 8, PREFILL = 5 };
    const int DH = (int)head_dim, DM = HQ * DH;
    test_rng rng = test_rng_seed(5);
    float *w = malloc(sizeof(float) * (size_t)(HQ + 2 * HKV) * DH * DM),
          *wo = malloc(sizeof(float) * (size_t)DM * HQ * DH),
          *bias = malloc(sizeof(float) * (size_t)(HQ + 2 * HKV) * DH),
          *bo = malloc(sizeof(float) * (size_t)DM), *x = malloc(sizeof(float) * (size_t)T * DM),
          *got = malloc(sizeof(float) * (size_t)T * DM),
          *want = malloc(sizeof(float) * (size_t)T * DM),
          *exact = malloc(sizeof(float) * (size_t)T * DM);
    assert_true(w && wo && bias && bo && x && got && want && exact);
    for (size_t i = 0; i < (size_t)(HQ + 2 * HKV) * DH * DM; i++)
        w[i] = test_rng_uniform(&rng, -0.1f, 0.1f);
    for (size_t i = 0; i < (size_t)DM * HQ * DH; i++)
        wo[i] = test_rng_uniform(&rng, -0.1f, 0.1f);
    for (int i = 0; i < (HQ + 2 * HKV) * DH; i++)
        bias[i] = test_rng_uniform(&rng, -0.5f, 0.5f);
    for (int i = 0; i < DM; i++)
        bo[i] = test_rng_uniform(&rng, -0.5f, 0.5f);
    for (int i = 0; i < T * DM; i++)
        x[i] = test_rng_uniform(&rng, -1.0f, 1.0f);
    vkattn_mha_desc md = {.embed_dim = DM,
                          .num_heads = HQ,
                          .num_kv_heads = HKV,
                          .bias = true,
                          .rope = {.theta = 10000.0f}};
    vkattn_mha_weights mw = {.wqkv = w, .wo = wo, .bqkv = bias, .bo = bo};
    for (uint32_t policy = 0; policy < TEST_POLICY_COUNT; policy += 3) {
        if (!s->gpu[policy])
            continue;
        vkattn_context *ctx = s->gpu[policy]->ctx;
        vkattn_mha *m;
        TEST_OK(ctx, vkattn_mha_create(ctx, &md, &m));
        TEST_OK(ctx, vkattn_mha_set_weights(m, &mw));
        vkattn_kv_cache_desc cd = {.num_kv_heads = HKV,
                                   .num_heads = HQ,
                                   .head_dim = DH,
                                   .dtype = dt,
                                   .max_sequences = 1,
                                   .capacity = T,
                                   .block_size = block_size};
        vkattn_kv_cache *c;
        TEST_OK(ctx, vkattn_kv_cache_create(ctx, &cd, &c));
        vkattn_buffer *xb = test_buffer_with(ctx, x, sizeof(float) * (size_t)T * DM);
        vkattn_buffer *yb = test_buffer_with(ctx, NULL, sizeof(float) * (size_t)T * DM);
        uint32_t seq = 0;
        for (uint32_t t = 0; t < T; t = t ? t + 1 : PREFILL) {
            int64_t n = t ? 1 : PREFILL, shape[3] = {1, n, DM};
            vkattn_mha_step_args sa = {
                .cache = c,
                .batch = 1,
                .sequences = &seq,
                .x = vkattn_tensor_make(xb, (uint64_t)t * DM * 4, F32, 3, shape),
                .y = vkattn_tensor_make(yb, (uint64_t)t * DM * 4, F32, 3, shape)};
            TEST_OK(ctx, vkattn_mha_step(m, &sa));
        }
        TEST_OK(ctx, vkattn_buffer_download(yb, 0, got, sizeof(float) * (size_t)T * DM));
        int64_t shape[3] = {1, T, DM};
        vkattn_ref_mha_args ra = {.x = vkattn_host_tensor_make(x, F32, 3, shape),
                                  .y = vkattn_host_tensor_make(want, F32, 3, shape),
                                  .causal = true,
                                  .kv_cache_dtype = dt};
        char err[256] = "";
        if (vkattn_ref_mha(&md, &mw, &ra, err, sizeof err) != VKATTN_SUCCESS)
            fail_msg("%s", err);
        ra.kv_cache_dtype = F32;
        ra.y = vkattn_host_tensor_make(exact, F32, 3, shape);
        if (vkattn_ref_mha(&md, &mw, &ra, err, sizeof err) != VKATTN_SUCCESS)
            fail_msg("%s", err);
        char what[120];
        snprintf(what, sizeof what, "%s layer steps over a %s cache, head dim %d",
                 test_policies[policy].name, vkattn_dtype_name(dt), DH);
        test_assert_close(got, want, T * DM, tol, what);
        print_message("    %s: max |error| %.3g against the reference with the cache's "
                      "quantization, %.3g against none\n",
                      what, max_abs_diff(got, want, T * DM), max_abs_diff(got, exact, T * DM));
        vkattn_buffer_destroy(xb);
        vkattn_buffer_destroy(yb);
        vkattn_kv_cache_destroy(c);
        vkattn_mha_destroy(m);
        test_assert_no_validation_messages(ctx);
    }
    free(w), free(wo), free(bias), free(bo), free(x), free(got), free(want), free(exact);
}
