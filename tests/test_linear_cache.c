/* The projection GEMM appending K and V straight into a KV cache (the MHA
 * layer's steps), under the four kernel policies: contiguous and paged caches
 * (block sizes 16 and 5), ragged sequences already holding tokens, T = 1
 * (GEMV kernels) and T = 9 (GEMM kernels), Hkv 1/2/8, f32 and f16. The step's
 * metadata is recorded exactly as the layer does (vka_kv_step_check, then
 * vka_kv_step_record, then the GEMM). Every appended K/V element is
 * compared with the CPU reference, Q too, and every other byte of both pools
 * (earlier tokens, other sequences, unused blocks) must be unchanged. Also
 * every validation error of the cache targets. */
#include "test_linear_util.h"
#include "test_policy.h"
#include "test_util.h"

#include "ops/kvcache/kvcache.h"
#include "ops/linear/linear.h"

#include <stdio.h>
#include <stdlib.h>

/* ------------------------------------------------------------- helpers */

/* n values in [-1, 1), exactly representable in dt, as floats (in *values
 * unless NULL) and in a new buffer. */
static vkattn_buffer *random_tensor(vkattn_context *ctx, test_rng *r, size_t n, vkattn_dtype dt,
                                    float **values)
{
    float *v = test_random_array(r, n, 1.0f, dt);
    vkattn_buffer *b = test_buffer_of(ctx, dt, v, n);
    if (values)
        *values = v;
    else
        free(v);
    return b;
}

/* -------------------------------------------------- one cache append */

typedef struct cache_case {
    uint32_t block_size; /* 0: contiguous */
    uint32_t hkv, dh, dm, T;
    vkattn_dtype dt;  /* x, Q and the cache */
    vkattn_dtype wdt; /* W and b */
    bool bias;
} cache_case;

enum { MAX_SEQ = 4, CAPACITY = 40, BATCH = 3 };

/* Appends `tokens` random tokens to each of `sequences` with
 * vkattn_cmd_kv_cache_append (its own submission). */
static void prefill(vkattn_context *ctx, vkattn_kv_cache *c, const uint32_t *sequences,
                    uint32_t batch, uint32_t tokens, test_rng *rng)
{
    const vkattn_kv_cache_desc *d = vkattn_kv_cache_config(c);
    int64_t shape[4] = {batch, d->num_kv_heads, tokens, d->head_dim};
    size_t n = (size_t)batch * d->num_kv_heads * tokens * d->head_dim;
    vkattn_buffer *k = random_tensor(ctx, rng, n, d->dtype, NULL);
    vkattn_buffer *v = random_tensor(ctx, rng, n, d->dtype, NULL);
    vkattn_kv_append_args a = {c, batch, sequences, vkattn_tensor_make(k, 0, d->dtype, 4, shape),
                               vkattn_tensor_make(v, 0, d->dtype, 4, shape)};
    VkCommandBuffer cmd;
    TEST_OK(ctx, vkattn_commands_begin(ctx, &cmd));
    TEST_OK(ctx, vkattn_cmd_kv_cache_append(ctx, cmd, &a));
    TEST_OK(ctx, vkattn_commands_submit(ctx));
    vkattn_buffer_destroy(k);
    vkattn_buffer_destroy(v);
}

static void run_cache_case(vkattn_context *ctx, const cache_case *cc, uint64_t seed)
{
    test_rng rng = test_rng_seed(seed);
    const uint32_t hkv = cc->hkv, hq = 2 * cc->hkv, dh = cc->dh, T = cc->T;
    const int64_t N = (int64_t)(hq + 2 * hkv) * dh, K = cc->dm, M = (int64_t)BATCH * T;
    vkattn_kv_cache_desc desc = {.num_kv_heads = hkv,
                                 .num_heads = hq,
                                 .head_dim = dh,
                                 .dtype = cc->dt,
                                 .max_sequences = MAX_SEQ,
                                 .capacity = CAPACITY,
                                 .block_size = cc->block_size};
    vkattn_kv_cache *cache;
    TEST_OK(ctx, vkattn_kv_cache_create(ctx, &desc, &cache));

    /* Pools start with a byte pattern; then ragged sequences: 3 holds 20
     * tokens, 1 and 2 hold 7 (1 is not in the step), 0 is empty. */
    size_t es = vkattn_dtype_size(cc->dt), pool_bytes = (size_t)vkattn_buffer_size(cache->k);
    uint8_t *pattern = test_alloc(pool_bytes);
    for (size_t i = 0; i < pool_bytes; i++)
        pattern[i] = (uint8_t)(0x5A ^ (i * 13));
    TEST_OK(ctx, vkattn_buffer_upload(cache->k, 0, pattern, pool_bytes));
    TEST_OK(ctx, vkattn_buffer_upload(cache->v, 0, pattern, pool_bytes));
    prefill(ctx, cache, (const uint32_t[]){3, 1, 2}, 3, 7, &rng);
    prefill(ctx, cache, (const uint32_t[]){3}, 1, 13, &rng);
    uint8_t *k_before = test_alloc(pool_bytes), *v_before = test_alloc(pool_bytes);
    TEST_OK(ctx, vkattn_buffer_download(cache->k, 0, k_before, pool_bytes));
    TEST_OK(ctx, vkattn_buffer_download(cache->v, 0, v_before, pool_bytes));

    /* x [BATCH, T, Dm] for sequences {2, 0, 3}; the packed W and b */
    const uint32_t seqs[BATCH] = {2, 0, 3};
    uint32_t start[BATCH];
    for (int b = 0; b < BATCH; b++)
        TEST_OK(ctx, vkattn_kv_cache_length(cache, seqs[b], &start[b]));
    float *x, *w, *bias = NULL;
    vkattn_buffer *bx = random_tensor(ctx, &rng, (size_t)(M * K), cc->dt, &x);
    vkattn_buffer *bw = random_tensor(ctx, &rng, (size_t)(N * K), cc->wdt, &w);
    vkattn_buffer *bb = cc->bias ? random_tensor(ctx, &rng, (size_t)N, cc->wdt, &bias) : NULL;
    size_t q_elems = (size_t)BATCH * hq * T * dh;
    vkattn_buffer *bq = test_buffer_with(ctx, NULL, q_elems * es);

    vka_linear_cache_dst cdst = {cache, NULL, BATCH, T};
    vka_linear_segments_args a = {0};
    a.x = vkattn_tensor_make(bx, 0, cc->dt, 3, (int64_t[]){BATCH, T, K});
    a.w = vkattn_tensor_make(bw, 0, cc->wdt, 2, (int64_t[]){N, K});
    if (bb)
        a.b = vkattn_tensor_make(bb, 0, cc->wdt, 1, &N);
    a.segment_count = 3;
    a.segments[0] = (vka_linear_segment){
        hq * dh, dh, vkattn_tensor_make(bq, 0, cc->dt, 4, (int64_t[]){BATCH, hq, T, dh})};
    a.segments[1] =
        (vka_linear_segment){.columns = hkv * dh, .head_dim = dh, .target = VKA_LINEAR_TO_K_POOL};
    a.segments[2] =
        (vka_linear_segment){.columns = hkv * dh, .head_dim = dh, .target = VKA_LINEAR_TO_V_POOL};
    a.cache = &cdst;

    /* As the layer records a step: check, metadata, then the GEMM. */
    TEST_OK(ctx, vka_linear_segments_check(ctx, &a));
    vka_kv_step step;
    TEST_OK(ctx, vka_kv_step_check(cache, BATCH, seqs, T, "args->", &step));
    VkCommandBuffer cmd;
    vka_binding meta;
    TEST_OK(ctx, vkattn_commands_begin(ctx, &cmd));
    TEST_OK(ctx, vka_kv_step_record(&step, cmd, &meta));
    cdst.meta = &meta;
    TEST_OK(ctx, vka_cmd_linear_segments(ctx, cmd, &a));
    TEST_OK(ctx, vkattn_commands_submit(ctx));

    /* The reference and where each appended element must be. */
    float *y = test_alloc((size_t)(M * N) * sizeof *y);
    linear_reference(x, w, bias, y, M, N, K);
    size_t n_kv = (size_t)BATCH * T * hkv * dh;
    size_t *idx = test_alloc(n_kv * sizeof *idx);
    float *want_k = test_alloc(n_kv * sizeof *want_k), *want_v = test_alloc(n_kv * sizeof *want_v);
    float *want_q = test_alloc(q_elems * sizeof *want_q);
    uint32_t bs = cache->d.block_size, n = 0;
    for (uint32_t b = 0; b < BATCH; b++)
        for (uint32_t t = 0; t < T; t++) {
            uint32_t token = start[b] + t;
            uint32_t block = cache->tables[seqs[b] * cache->table_width + token / bs];
            assert_true(block < cache->d.num_blocks);
            const float *row = y + ((size_t)b * T + t) * (size_t)N;
            for (uint32_t h = 0; h < hq; h++)
                for (uint32_t e = 0; e < dh; e++)
                    want_q[(((size_t)b * hq + h) * T + t) * dh + e] = row[h * dh + e];
            for (uint32_t h = 0; h < hkv; h++)
                for (uint32_t e = 0; e < dh; e++, n++) {
                    idx[n] = (((size_t)block * hkv + h) * bs + token % bs) * dh + e;
                    want_k[n] = row[(hq + h) * dh + e];
                    want_v[n] = row[(hq + hkv + h) * dh + e];
                }
        }

    char what[200];
    snprintf(what, sizeof what, "cache %s block_size %u Hkv %u Dh %u Dm %u T %u w %s bias %d",
             vkattn_dtype_name(cc->dt), cc->block_size, hkv, dh, cc->dm, T,
             vkattn_dtype_name(cc->wdt), (int)cc->bias);
    size_t wl = strlen(what);
    uint8_t *got = test_alloc(pool_bytes);
    TEST_OK(ctx, vkattn_buffer_download(cache->k, 0, got, pool_bytes));
    snprintf(what + wl, sizeof what - wl, ": K");
    linear_check_written(got, k_before, pool_bytes, cc->dt, idx, want_k, n_kv, what);
    TEST_OK(ctx, vkattn_buffer_download(cache->v, 0, got, pool_bytes));
    snprintf(what + wl, sizeof what - wl, ": V");
    linear_check_written(got, v_before, pool_bytes, cc->dt, idx, want_v, n_kv, what);
    float *q = test_alloc(q_elems * sizeof *q);
    test_download_as(ctx, bq, cc->dt, q, q_elems);
    snprintf(what + wl, sizeof what - wl, ": Q");
    test_assert_close(q, want_q, q_elems, cc->dt == VKATTN_DTYPE_F16 ? TEST_TOL_F16 : TEST_TOL_F32,
                      what);
    /* the lengths moved by T, and only for the step's sequences */
    for (uint32_t b = 0; b < BATCH; b++) {
        uint32_t len;
        TEST_OK(ctx, vkattn_kv_cache_length(cache, seqs[b], &len));
        assert_int_equal(len, start[b] + T);
    }

    vkattn_kv_cache_destroy(cache);
    TEST_DESTROY_BUFFERS(bx, bw, bb, bq);
    free(pattern), free(k_before), free(v_before), free(x), free(w), free(bias), free(y);
    free(idx), free(want_k), free(want_v), free(want_q), free(got), free(q);
}

/* Every layout x T x dtype once (12 cases), the KV head counts spread over
 * them; W in the other dtype, no bias, or K not a multiple of 4 (scalar
 * loads) in some. */
static void test_cache_append(void **state)
{
    vkattn_context *ctx = ((test_gpu *)*state)->ctx;
    static const uint32_t layouts[3] = {0, 16, 5}, hkvs[3] = {1, 2, 8};
    for (uint32_t i = 0; i < 12; i++) {
        uint32_t layout = i % 3, long_step = (i / 3) % 2, f16 = i / 6;
        cache_case c = {
            .block_size = layouts[layout],
            .hkv = hkvs[(layout + long_step + 2 * f16) % 3],
            .dh = i % 4 == 3 ? 16 : 8,
            .dm = i % 5 == 4 ? 30 : 32,
            .T = long_step ? 9 : 1,
            .dt = f16 ? VKATTN_DTYPE_F16 : VKATTN_DTYPE_F32,
            .bias = i % 4 != 1,
        };
        c.wdt = i % 4 == 2 ? (f16 ? VKATTN_DTYPE_F32 : VKATTN_DTYPE_F16) : c.dt;
        run_cache_case(ctx, &c, 500 + i);
    }
}

/* The other policies: every layout, T, dtype and KV head count still, in
 * 6 cases of 4 kernels (GEMV and GEMM, f32 and f16), since each kernel
 * variant costs a pipeline compile (the pool code is the epilogue shared by
 * every input mode). */
static void test_cache_append_short(void **state)
{
    vkattn_context *ctx = ((test_gpu *)*state)->ctx;
    static const uint32_t layouts[3] = {0, 16, 5}, hkvs[6] = {1, 2, 8, 2, 8, 1};
    for (uint32_t i = 0; i < 6; i++) {
        cache_case c = {
            .block_size = layouts[i % 3],
            .hkv = hkvs[i],
            .dh = i == 4 ? 16 : 8,
            .dm = 32,
            .T = i % 2 ? 9 : 1,
            .dt = i < 3 ? VKATTN_DTYPE_F32 : VKATTN_DTYPE_F16,
            .bias = i != 2,
        };
        c.wdt = c.dt;
        run_cache_case(ctx, &c, 700 + i);
    }
}

/* ------------------------------------------------------------- errors */

/* Every validation failure of the cache targets, with its code and the
 * parameter it names; nothing is recorded. */
static void test_cache_errors(void **state)
{
    vkattn_context *ctx = ((test_gpu *)*state)->ctx;
    const vkattn_dtype F32 = VKATTN_DTYPE_F32, F16 = VKATTN_DTYPE_F16;
    const vkattn_result INV = VKATTN_ERROR_INVALID_ARGUMENT, SHAPE = VKATTN_ERROR_SHAPE_MISMATCH,
                        DT = VKATTN_ERROR_UNSUPPORTED_DTYPE;
    /* Hkv 2, Dh 8 (K/V segments of 16 columns), Hq 4; x [2, 3, 8] */
    vkattn_kv_cache_desc desc = {.num_kv_heads = 2,
                                 .num_heads = 4,
                                 .head_dim = 8,
                                 .max_sequences = 4,
                                 .capacity = 16,
                                 .block_size = 4};
    vkattn_kv_cache *cache;
    TEST_OK(ctx, vkattn_kv_cache_create(ctx, &desc, &cache));
    vkattn_buffer *buf = test_buffer_with(ctx, NULL, 1 << 16);
    const uint32_t seqs[2] = {1, 3};
    vka_kv_step step;
    TEST_OK(ctx, vka_kv_step_check(cache, 2, seqs, 3, "args->", &step));
    VkCommandBuffer cmd;
    vka_binding meta, wrong_meta;
    TEST_OK(ctx, vkattn_commands_begin(ctx, &cmd));
    TEST_OK(ctx, vka_kv_step_record(&step, cmd, &meta));
    TEST_OK(ctx, vkattn_commands_submit(ctx));
    wrong_meta = meta;
    wrong_meta.buffer = buf;

    vka_linear_cache_dst cd0 = {cache, &meta, 2, 3}, cd;
    vka_linear_segments_args s0 = {
        vkattn_tensor_make(buf, 0, F32, 3, (int64_t[]){2, 3, 8}),
        vkattn_tensor_make(buf, 1024, F32, 2, (int64_t[]){64, 8}),
        {0},
        3,
        {{32, 8, vkattn_tensor_make(buf, 4096, F32, 4, (int64_t[]){2, 4, 3, 8})},
         {16, 8, {0}, VKA_LINEAR_TO_K_POOL},
         {16, 8, {0}, VKA_LINEAR_TO_V_POOL}},
        &cd};
    vka_linear_segments_args s;
    /* each error both from the check alone and from the recording call */
#define CASE(code, needle, change)                                            \
    do {                                                                      \
        s = s0;                                                               \
        cd = cd0;                                                             \
        change;                                                               \
        TEST_FAILS(ctx, code, needle, vka_linear_segments_check(ctx, &s));    \
        TEST_OK(ctx, vkattn_commands_begin(ctx, &cmd));                       \
        TEST_FAILS(ctx, code, needle, vka_cmd_linear_segments(ctx, cmd, &s)); \
        vkattn_commands_discard(ctx);                                         \
    } while (0)
    s = s0;
    cd = cd0;
    TEST_OK(ctx, vka_linear_segments_check(ctx, &s));
    TEST_OK(ctx, vkattn_commands_begin(ctx, &cmd));
    TEST_OK(ctx, vka_cmd_linear_segments(ctx, cmd, &s));
    TEST_OK(ctx, vkattn_commands_submit(ctx));

    CASE(INV, "args->segments[1] targets the K pool but args->cache is NULL", s.cache = NULL);
    CASE(INV, "args->segments[1] targets the K pool but args->cache->cache is NULL",
         cd.cache = NULL);
    CASE(INV, "args->segments[2].target is 7", s.segments[2].target = (vka_linear_target)7);
    CASE(INV, "args->segments[2] targets the K pool, which an earlier segment writes already",
         s.segments[2].target = VKA_LINEAR_TO_K_POOL);
    CASE(INV, "args->segments[1].dst.buffer is set but the segment targets the K pool",
         s.segments[1].dst = s0.segments[0].dst);
    CASE(INV, "args->cache is set but no segment targets the K or V pool",
         (s.segment_count = 1, s.w.shape[0] = 32));
    CASE(INV, "args->cache->batch is 0", cd.batch = 0);
    CASE(INV, "args->cache->batch is 5: it must be 1..4", cd.batch = 5);
    CASE(INV, "args->cache->new_tokens is 0", cd.new_tokens = 0);
    CASE(INV, "args->cache->meta is not the cache's step metadata", cd.meta = &wrong_meta);
    CASE(SHAPE, "the batch of args->x is 2 but args->cache->batch is 1", cd.batch = 1);
    CASE(SHAPE, "the rows per batch of args->x are 3 but args->cache->new_tokens is 4",
         cd.new_tokens = 4);
    CASE(DT, "args->x.dtype f16 differs from the cache's dtype f32",
         (s.x.dtype = F16, s.segments[0].dst.dtype = F16));
    CASE(SHAPE,
         "args->segments[2] (V pool) has columns 8, head_dim 8 but the cache holds 2 KV "
         "heads x v_head_dim 8 (columns 16)",
         (s.segments[2].columns = 8, s.w.shape[0] = 56));
    CASE(SHAPE, "args->segments[1] (K pool) has columns 16, head_dim 4",
         s.segments[1].head_dim = 4);
    CASE(INV, "args->x lies in a pool of args->cache->cache", s.x.buffer = cache->k);
    CASE(INV, "args->segments[0].dst lies in a pool",
         (s.segments[0].dst.buffer = cache->v, s.segments[0].dst.offset = 0));
    /* the recording call needs the metadata */
    s = s0;
    cd = cd0;
    cd.meta = NULL;
    TEST_OK(ctx, vka_linear_segments_check(ctx, &s));
    TEST_OK(ctx, vkattn_commands_begin(ctx, &cmd));
    TEST_FAILS(ctx, INV, "args->cache->meta is NULL", vka_cmd_linear_segments(ctx, cmd, &s));
    vkattn_commands_discard(ctx);
    vkattn_kv_cache_destroy(cache);

    /* Pools larger than one binding: only where that is cheap to make
     * (lavapipe: 128 MiB). */
    uint64_t range = vkattn_context_device_info(ctx)->max_storage_buffer_range;
    if (range <= (128u << 20)) {
        vkattn_kv_cache_desc big = {.num_kv_heads = 1,
                                    .head_dim = 256,
                                    .max_sequences = 1,
                                    .capacity = (uint32_t)(range / 1024) + 1};
        TEST_OK(ctx, vkattn_kv_cache_create(ctx, &big, &cache));
        vka_linear_cache_dst bcd = {cache, NULL, 1, 1};
        vka_linear_segments_args bs = {vkattn_tensor_make(buf, 0, F32, 3, (int64_t[]){1, 1, 8}),
                                       vkattn_tensor_make(buf, 1024, F32, 2, (int64_t[]){256, 8}),
                                       {0},
                                       1,
                                       {{256, 256, {0}, VKA_LINEAR_TO_K_POOL}},
                                       &bcd};
        TEST_FAILS(ctx, VKATTN_ERROR_OUT_OF_RANGE,
                   "its K pool is 134218752 bytes, more than one binding",
                   vka_linear_segments_check(ctx, &bs));
        vkattn_kv_cache_destroy(cache);
    }
    vkattn_buffer_destroy(buf);
#undef CASE
}

/* -------------------------------------------------------------- groups */

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cache_append),
    };
    const struct CMUnitTest short_tests[] = {
        cmocka_unit_test(test_cache_append_short),
    };
    const struct CMUnitTest once[] = {
        cmocka_unit_test(test_cache_errors),
    };
    int failed =
        cmocka_run_group_tests_name("linear_cache_errors", once, test_gpu_setup, test_gpu_teardown);
    failed += test_policy_run_group("linear_cache", 0, tests, sizeof tests / sizeof tests[0]);
    for (uint32_t p = 1; p < TEST_POLICY_COUNT; p++)
        failed += test_policy_run_group("linear_cache", p, short_tests,
                                        sizeof short_tests / sizeof short_tests[0]);
    return failed;
}
