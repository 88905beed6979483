/* Errors of vkattn_kv_attention (and of the appends that fill a cache):
 * the code, a substring of the message naming the problem, and the cache's
 * lengths and free blocks unchanged after each. */
#include "test_kv_util.h"

#include <stdlib.h>

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

#define FAILS_UNCHANGED(code, needle, expr)  \
    do {                                     \
        snapshot before_ = snap(&h);         \
        TEST_FAILS(ctx, code, needle, expr); \
        assert_unchanged(&h, &before_);      \
    } while (0)

void test_kv_errors(void **state)
{
    test_policy_suite *s = *state;
    test_gpu *g = test_policy_suite_first(s);
    vkattn_context *ctx = g->ctx;
    test_rng rng = test_rng_seed(5);
    vkattn_kv_cache_desc d = test_kv_desc(2, 4, 16, 4, 40, 5);
    d.num_blocks = 12;
    kv_host h;
    kv_host_create(g, &d, &h);
    const uint32_t s01[2] = {0, 1};
    kv_append(ctx, &h, 2, s01, 7, &rng); /* sequences 0 and 1 hold 7; 2 and 3 are empty */
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
    FAILS_UNCHANGED(VKATTN_ERROR_INVALID_ARGUMENT, "are both sequence 1",
                    vkattn_kv_attention(ctx, &a));
    a = att_args(&h, &io1, &empty, 0.0f, 0);
    FAILS_UNCHANGED(VKATTN_ERROR_INVALID_ARGUMENT, "is empty", vkattn_kv_attention(ctx, &a));
    a = att_args(&h, &io1, &one, 0.0f, 0);
    a.batch = 2;
    FAILS_UNCHANGED(VKATTN_ERROR_SHAPE_MISMATCH, "args->batch is 2", vkattn_kv_attention(ctx, &a));
    a = att_args(&h, &io1, NULL, 0.0f, 0);
    FAILS_UNCHANGED(VKATTN_ERROR_INVALID_ARGUMENT, "sequences is NULL",
                    vkattn_kv_attention(ctx, &a));
    a = att_args(&h, &io1, &one, 0.0f, 0);
    a.cache = NULL;
    FAILS_UNCHANGED(VKATTN_ERROR_INVALID_ARGUMENT, "args->cache is NULL",
                    vkattn_kv_attention(ctx, &a));

    /* q/out against the cache */
    a = att_args(&h, &io1, &one, 0.0f, 0);
    a.q.shape[1] = 3, a.q.strides[0] = 0, a.q.strides[1] = 0, a.q.strides[2] = 0,
    a.q.strides[3] = 0;
    FAILS_UNCHANGED(VKATTN_ERROR_SHAPE_MISMATCH, "is not a multiple of the cache's num_kv_heads 2",
                    vkattn_kv_attention(ctx, &a));
    a = att_args(&h, &io1, &one, 0.0f, 0);
    a.q.shape[1] = 2, a.q.strides[0] = 0, a.q.strides[1] = 0, a.q.strides[2] = 0,
    a.q.strides[3] = 0;
    FAILS_UNCHANGED(VKATTN_ERROR_SHAPE_MISMATCH, "differs from the cache's num_heads 4",
                    vkattn_kv_attention(ctx, &a));
    a = att_args(&h, &io1, &one, 0.0f, 0);
    a.q.shape[3] = 8, a.q.strides[0] = 0, a.q.strides[1] = 0, a.q.strides[2] = 0,
    a.q.strides[3] = 0;
    FAILS_UNCHANGED(VKATTN_ERROR_SHAPE_MISMATCH,
                    "(head_dim) 8 differs from the cache's head_dim 16",
                    vkattn_kv_attention(ctx, &a));
    a = att_args(&h, &io2, s01, 0.0f, 0);
    a.out.shape[0] = 1, a.out.strides[0] = 0, a.out.strides[1] = 0, a.out.strides[2] = 0,
    a.out.strides[3] = 0;
    FAILS_UNCHANGED(VKATTN_ERROR_SHAPE_MISMATCH, "args->out.shape[0] is 1",
                    vkattn_kv_attention(ctx, &a));
    a = att_args(&h, &io1, &one, 0.0f, 0);
    a.out.dtype = F16;
    FAILS_UNCHANGED(VKATTN_ERROR_UNSUPPORTED_DTYPE, "they must be the same",
                    vkattn_kv_attention(ctx, &a));
    a = att_args(&h, &io1, &one, 0.0f, 0);
    a.q.dtype = VKATTN_DTYPE_U8;
    FAILS_UNCHANGED(VKATTN_ERROR_UNSUPPORTED_DTYPE, "args->q.dtype is u8: f32, f16 or bf16",
                    vkattn_kv_attention(ctx, &a));
    a = att_args(&h, &io1, &one, 0.0f, 0);
    a.q.offset = 8;
    FAILS_UNCHANGED(VKATTN_ERROR_INVALID_ARGUMENT, "multiple of 16 bytes",
                    vkattn_kv_attention(ctx, &a));
    a = att_args(&h, &io1, &one, 0.0f, 0);
    a.out = a.q;
    FAILS_UNCHANGED(VKATTN_ERROR_INVALID_ARGUMENT, "overlaps args->q",
                    vkattn_kv_attention(ctx, &a));
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
        vkattn_buffer *big = kv_buffer_of(ctx, zeros, 2 * 2 * 34 * 16, F32);
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
