/* A ragged prefill into the KV cache in one call: packed K/V appended with
 * offsets (vkattn_kv_append_args.offsets) and packed queries attended over
 * the cache (vkattn_kv_attention_args.q_offsets), on contiguous and paged
 * f32 and f16 caches, against the per-sequence CPU reference over the
 * cache's host mirror; the refusals, with the cache unchanged. */
#include "test_kv_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

typedef struct packed_kv_case {
    vkattn_dtype dt;
    uint32_t block; /* 0: contiguous */
    uint32_t batch, seqs[MAX_SEQ], tokens[MAX_SEQ];
    uint32_t before; /* tokens each sequence holds before (an ordinary append) */
} packed_kv_case;

/* Appends the case's packed tokens, mirrored on the host (rounded to the
 * cache's dtype). */
static void packed_append(vkattn_context *ctx, kv_host *h, const packed_kv_case *c,
                          const int32_t *offsets, test_rng *rng)
{
    const uint32_t hkv = h->d.num_kv_heads, dk = h->d.head_dim, dv = h->d.v_head_dim;
    const int64_t total = offsets[c->batch];
    float *k = test_random_array(rng, (size_t)hkv * total * dk, 1.0f, h->d.dtype);
    float *v = test_random_array(rng, (size_t)hkv * total * dv, 1.0f, h->d.dtype);
    for (uint32_t b = 0; b < c->batch; b++) {
        uint32_t s = c->seqs[b], len = h->len[s];
        for (uint32_t hh = 0; hh < hkv; hh++)
            for (int32_t t = offsets[b]; t < offsets[b + 1]; t++) {
                size_t at =
                    ((size_t)s * hkv + hh) * h->d.capacity + len + (uint32_t)(t - offsets[b]);
                memcpy(h->k + at * dk, k + ((size_t)hh * total + t) * dk, dk * 4);
                memcpy(h->v + at * dv, v + ((size_t)hh * total + t) * dv, dv * 4);
            }
        h->len[s] += (uint32_t)(offsets[b + 1] - offsets[b]);
    }
    int64_t ks[4] = {1, hkv, total, dk}, vs[4] = {1, hkv, total, dv};
    vkattn_buffer *kb = kv_buffer_of(ctx, k, (size_t)hkv * total * dk, F32);
    vkattn_buffer *vb = kv_buffer_of(ctx, v, (size_t)hkv * total * dv, F32);
    vkattn_kv_append_args a = {.cache = h->cache,
                               .batch = c->batch,
                               .sequences = c->seqs,
                               .k = vkattn_tensor_make(kb, 0, F32, 4, ks),
                               .v = vkattn_tensor_make(vb, 0, F32, 4, vs),
                               .offsets = offsets};
    VkCommandBuffer cmd;
    TEST_OK(ctx, vkattn_commands_begin(ctx, &cmd));
    TEST_OK(ctx, vkattn_cmd_kv_cache_append(ctx, cmd, &a));
    TEST_OK(ctx, vkattn_commands_submit(ctx));
    for (uint32_t b = 0; b < c->batch; b++) {
        uint32_t len = 0;
        TEST_OK(ctx, vkattn_kv_cache_length(h->cache, c->seqs[b], &len));
        assert_int_equal(len, h->len[c->seqs[b]]);
    }
    TEST_DESTROY_BUFFERS(kb, vb);
    free(k), free(v);
}

static void run_case(test_gpu *g, uint32_t policy, const void *arg)
{
    const packed_kv_case *c = arg;
    vkattn_context *ctx = g->ctx;
    const uint32_t Hq = 4, Hkv = 2, D = 32;
    char what[160];
    snprintf(what, sizeof what, "%s %s block %u batch %u before %u", test_policies[policy].name,
             vkattn_dtype_name(c->dt), c->block, c->batch, c->before);
    vkattn_kv_cache_desc d = test_kv_desc(Hkv, Hq, D, MAX_SEQ, 96, c->block);
    d.dtype = c->dt;
    if (c->block)
        d.num_blocks = MAX_SEQ * 96 / c->block;
    kv_host h;
    kv_host_create(g, &d, &h);
    test_rng rng = test_rng_seed(41u + c->block + c->before);
    if (c->before)
        kv_append(ctx, &h, c->batch, c->seqs, c->before, &rng);
    int32_t offsets[MAX_SEQ + 1] = {0};
    for (uint32_t b = 0; b < c->batch; b++)
        offsets[b + 1] = offsets[b] + (int32_t)c->tokens[b];
    packed_append(ctx, &h, c, offsets, &rng);

    /* packed queries: each sequence's new tokens, over all it holds */
    const int64_t total = offsets[c->batch];
    float *q = test_random_array(&rng, (size_t)Hq * total * D, 1.0f, c->dt);
    float *got = test_alloc((size_t)Hq * total * D * 4),
          *want = test_alloc((size_t)Hq * total * D * 4);
    for (size_t i = 0; i < (size_t)Hq * total * D; i++)
        got[i] = NAN;
    int64_t qs[4] = {1, Hq, total, D};
    vkattn_buffer *qb = kv_buffer_of(ctx, q, (size_t)Hq * total * D, c->dt);
    vkattn_buffer *ob = kv_buffer_of(ctx, got, (size_t)Hq * total * D, c->dt);
    vkattn_kv_attention_args a = {.cache = h.cache,
                                  .batch = c->batch,
                                  .sequences = c->seqs,
                                  .q = vkattn_tensor_make(qb, 0, c->dt, 4, qs),
                                  .out = vkattn_tensor_make(ob, 0, c->dt, 4, qs),
                                  .q_offsets = offsets};
    TEST_OK(ctx, vkattn_kv_attention(ctx, &a));
    float *all = test_alloc((size_t)Hq * total * D * 4);
    test_download_as(ctx, ob, c->dt, all, (size_t)Hq * total * D);
    for (uint32_t b = 0; b < c->batch; b++) {
        uint32_t n = c->tokens[b];
        if (!n)
            continue;
        float *qb_host = test_alloc((size_t)Hq * n * D * 4),
              *wb = test_alloc((size_t)Hq * n * D * 4);
        for (uint32_t hh = 0; hh < Hq; hh++)
            memcpy(qb_host + (size_t)hh * n * D, q + ((size_t)hh * total + offsets[b]) * D,
                   (size_t)n * D * 4);
        kv_reference(&h, 1, &c->seqs[b], Hq, n, 0.0f, qb_host, wb);
        for (uint32_t hh = 0; hh < Hq; hh++)
            memcpy(want + ((size_t)hh * total + offsets[b]) * D, wb + (size_t)hh * n * D,
                   (size_t)n * D * 4);
        free(qb_host), free(wb);
    }
    for (size_t i = 0; i < (size_t)Hq * total * D; i++)
        if (isnan(all[i]))
            fail_msg("%s: out[%zu] is NaN", what, i);
    test_assert_close(all, want, (size_t)Hq * total * D, c->dt == F16 ? TEST_TOL_F16 : TEST_TOL_F32,
                      what);
    TEST_DESTROY_BUFFERS(qb, ob);
    free(q), free(got), free(want), free(all);
    kv_host_destroy(&h);
}

static void test_packed_prefill(void **state)
{
    (void)state;
    static const packed_kv_case cases[] = {
        /* a first prefill of ragged prompts (one empty), contiguous */
        {.dt = F32, .batch = 3, .seqs = {2, 0, 1}, .tokens = {5, 0, 17}},
        /* after tokens already there, paged (blocks of 16 crossed) */
        {.dt = F32, .block = 16, .batch = 3, .seqs = {1, 3, 0}, .tokens = {9, 20, 1}, .before = 7},
        {.dt = F16, .block = 8, .batch = 2, .seqs = {4, 2}, .tokens = {13, 3}, .before = 2},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        test_for_each_policy(0, run_case, &cases[i]);
}

static void test_packed_refusals(void **state)
{
    test_gpu *g = *state;
    vkattn_context *ctx = g->ctx;
    vkattn_kv_cache_desc d = test_kv_desc(2, 4, 32, MAX_SEQ, 16, 8);
    d.num_blocks = 3; /* 24 tokens in all */
    kv_host h;
    kv_host_create(g, &d, &h);
    float *x = test_alloc(2 * 20 * 32 * 4);
    int64_t ks[4] = {1, 2, 20, 32};
    vkattn_buffer *b = kv_buffer_of(ctx, x, 2 * 20 * 32, F32);
    uint32_t seqs[3] = {0, 1, 2}, twice[3] = {0, 1, 0};
    int32_t offsets[4] = {0, 8, 12, 20}, decreasing[4] = {0, 8, 6, 20},
            long_one[4] = {0, 17, 18, 20};
    vkattn_kv_append_args good = {.cache = h.cache,
                                  .batch = 3,
                                  .sequences = seqs,
                                  .k = vkattn_tensor_make(b, 0, F32, 4, ks),
                                  .v = vkattn_tensor_make(b, 0, F32, 4, ks),
                                  .offsets = offsets},
                          a;
    VkCommandBuffer cmd;
    TEST_OK(ctx, vkattn_commands_begin(ctx, &cmd));
    TEST_FAILS_CHANGED(ctx, a, good, a.offsets = decreasing, VKATTN_ERROR_INVALID_ARGUMENT,
                       "args->offsets[2] is 6, less than args->offsets[1] (8)",
                       vkattn_cmd_kv_cache_append(ctx, cmd, &a));
    TEST_FAILS_CHANGED(ctx, a, good, a.sequences = twice, VKATTN_ERROR_INVALID_ARGUMENT,
                       "args->sequences[0] and [2] are both sequence 0",
                       vkattn_cmd_kv_cache_append(ctx, cmd, &a));
    TEST_FAILS_CHANGED(ctx, a, good, a.offsets = long_one, VKATTN_ERROR_OUT_OF_RANGE,
                       "sequence 0 holds 0 tokens; 17 more exceed the cache's capacity of 16",
                       vkattn_cmd_kv_cache_append(ctx, cmd, &a));
    /* 8 + 4 + 8 tokens take 1 + 1 + 1 blocks: fits; 3 more rows of 8 would not */
    int32_t full[4] = {0, 9, 12, 20};
    TEST_FAILS_CHANGED(ctx, a, good, a.offsets = full, VKATTN_ERROR_CACHE_FULL,
                       "the packed append needs 4 new blocks of 8 tokens but the pool has 3 free",
                       vkattn_cmd_kv_cache_append(ctx, cmd, &a));
    TEST_OK(ctx, vkattn_commands_submit(ctx));
    for (uint32_t s = 0; s < 3; s++) {
        uint32_t len = 1;
        TEST_OK(ctx, vkattn_kv_cache_length(h.cache, s, &len));
        assert_int_equal(len, 0);
    }
    assert_int_equal(vkattn_kv_cache_free_blocks(h.cache), 3);
    TEST_DESTROY_BUFFERS(b);
    free(x);
    kv_host_destroy(&h);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_packed_prefill),
        cmocka_unit_test_setup_teardown(test_packed_refusals, test_gpu_setup, test_gpu_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
