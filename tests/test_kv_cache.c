/* The KV cache object: memory reported before allocation, lengths, truncate,
 * the paged block pool, appending, and every error leaving the cache as it
 * was. (Attention over the cache: test_kv_attention; MHA steps: test_decode.) */
#include "test_util.h"

#include <stdlib.h>

static vkattn_kv_cache *make(vkattn_context *ctx, uint32_t block_size, uint32_t num_blocks)
{
    vkattn_kv_cache_desc d = test_kv_desc(2, 4, 16, 3, 40, block_size);
    d.num_blocks = num_blocks;
    vkattn_kv_cache *c = NULL;
    TEST_OK(ctx, vkattn_kv_cache_create(ctx, &d, &c));
    return c;
}

static void test_memory_before_allocation(void **state)
{
    (void)state;
    vkattn_kv_cache_desc d = {.num_kv_heads = 8,
                              .head_dim = 128,
                              .dtype = VKATTN_DTYPE_F16,
                              .max_sequences = 4,
                              .capacity = 4096};
    uint64_t per_token = 0, total = 0;
    char err[256];
    assert_int_equal(vkattn_kv_cache_memory(&d, &per_token, &total, err, sizeof err),
                     VKATTN_SUCCESS);
    assert_int_equal(per_token, 2 * 8 * 128 * 2); /* K and V, Hkv x Dh halves: 4 KiB per token */
    assert_true(total >= per_token * 4 * 4096);
    d.block_size = 16;
    d.num_blocks = 100;
    uint64_t paged_total = 0;
    assert_int_equal(vkattn_kv_cache_memory(&d, NULL, &paged_total, err, sizeof err),
                     VKATTN_SUCCESS);
    assert_true(paged_total >= per_token * 16 * 100 && paged_total < total);
    /* K and V of their own head dims; rows that are not multiples of 8 kept
     * padded to one (20 -> 24) */
    d.head_dim = 192;
    d.v_head_dim = 20;
    assert_int_equal(vkattn_kv_cache_memory(&d, &per_token, &total, err, sizeof err),
                     VKATTN_SUCCESS);
    assert_int_equal(per_token, 8 * (192 + 24) * 2);
    d.v_head_dim = 577;
    assert_int_equal(vkattn_kv_cache_memory(&d, &per_token, &total, err, sizeof err),
                     VKATTN_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(err, "desc->v_head_dim 577"));
    d.v_head_dim = 0;
    d.head_dim = 577;
    assert_int_equal(vkattn_kv_cache_memory(&d, &per_token, &total, err, sizeof err),
                     VKATTN_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(err, "desc->head_dim 577"));
    d.head_dim = 128;
    d.num_kv_heads = 3;
    d.num_heads = 8;
    assert_int_equal(vkattn_kv_cache_memory(&d, &per_token, &total, err, sizeof err),
                     VKATTN_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(err, "does not divide"));
}

static void test_create_errors(void **state)
{
    test_gpu *g = *state;
    vkattn_kv_cache *c = (vkattn_kv_cache *)g;
    vkattn_kv_cache_desc d = {.num_kv_heads = 2, .head_dim = 16, .max_sequences = 2};
    TEST_FAILS(g->ctx, VKATTN_ERROR_INVALID_ARGUMENT, "desc->capacity is 0",
               vkattn_kv_cache_create(g->ctx, &d, &c));
    assert_null(c);
    d.capacity = 8;
    d.dtype = VKATTN_DTYPE_U8;
    TEST_FAILS(g->ctx, VKATTN_ERROR_UNSUPPORTED_DTYPE, "desc->dtype",
               vkattn_kv_cache_create(g->ctx, &d, &c));
    TEST_FAILS(g->ctx, VKATTN_ERROR_INVALID_ARGUMENT, "desc is NULL",
               vkattn_kv_cache_create(g->ctx, NULL, &c));
    vkattn_kv_cache_destroy(NULL);
}

static void test_lengths_truncate_and_blocks(void **state)
{
    test_gpu *g = *state;
    vkattn_kv_cache *c = make(g->ctx, 8, 6);
    const vkattn_kv_cache_desc *d = vkattn_kv_cache_config(c);
    assert_int_equal(d->num_blocks, 6);
    assert_int_equal(vkattn_kv_cache_free_blocks(c), 6);
    uint32_t len = 99;
    TEST_OK(g->ctx, vkattn_kv_cache_length(c, 2, &len));
    assert_int_equal(len, 0);
    TEST_FAILS(g->ctx, VKATTN_ERROR_INVALID_ARGUMENT, "sequence 3 does not exist",
               vkattn_kv_cache_length(c, 3, &len));
    TEST_FAILS(g->ctx, VKATTN_ERROR_OUT_OF_RANGE, "length 1 is more",
               vkattn_kv_cache_truncate(c, 0, 1));

    /* append 17 tokens to sequence 1 and 3 to sequence 0: 3 + 1 blocks */
    size_t n = 2 * 2 * 24 * 16;
    float *data = calloc(n, 4);
    vkattn_buffer *k = test_buffer_with(g->ctx, data, n * 4),
                  *v = test_buffer_with(g->ctx, data, n * 4);
    uint32_t seqs[2] = {1, 0};
    vkattn_kv_append_args a = {.cache = c, .batch = 1, .sequences = seqs};
    int64_t one[4] = {1, 2, 17, 16};
    a.k = vkattn_tensor_make(k, 0, VKATTN_DTYPE_F32, 4, one);
    a.v = vkattn_tensor_make(v, 0, VKATTN_DTYPE_F32, 4, one);
    VkCommandBuffer cmd;
    TEST_OK(g->ctx, vkattn_commands_begin(g->ctx, &cmd));
    TEST_OK(g->ctx, vkattn_cmd_kv_cache_append(g->ctx, cmd, &a));
    int64_t three[4] = {1, 2, 3, 16};
    a.sequences = seqs + 1;
    a.k = vkattn_tensor_make(k, 0, VKATTN_DTYPE_F32, 4, three);
    a.v = vkattn_tensor_make(v, 0, VKATTN_DTYPE_F32, 4, three);
    TEST_OK(g->ctx, vkattn_cmd_kv_cache_append(g->ctx, cmd, &a));
    TEST_OK(g->ctx, vkattn_commands_submit(g->ctx));
    TEST_OK(g->ctx, vkattn_kv_cache_length(c, 1, &len));
    assert_int_equal(len, 17);
    TEST_OK(g->ctx, vkattn_kv_cache_length(c, 0, &len));
    assert_int_equal(len, 3);
    assert_int_equal(vkattn_kv_cache_free_blocks(c), 2);

    /* the pool is exhausted by a step needing 3 more blocks: nothing changes */
    a.batch = 2;
    a.sequences = seqs;
    int64_t big[4] = {2, 2, 24, 16}; /* sequence 1: 17 + 24 > 40 */
    a.k = vkattn_tensor_make(k, 0, VKATTN_DTYPE_F32, 4, big);
    a.v = vkattn_tensor_make(v, 0, VKATTN_DTYPE_F32, 4, big);
    TEST_OK(g->ctx, vkattn_commands_begin(g->ctx, &cmd));
    TEST_FAILS(g->ctx, VKATTN_ERROR_OUT_OF_RANGE, "capacity of 40",
               vkattn_cmd_kv_cache_append(g->ctx, cmd, &a));
    int64_t nine[4] = {2, 2, 9, 16}; /* seq 1: 17 -> 26 (+1 block), seq 0: 3 -> 12 (+1 block) */
    a.k = vkattn_tensor_make(k, 0, VKATTN_DTYPE_F32, 4, nine);
    a.v = vkattn_tensor_make(v, 0, VKATTN_DTYPE_F32, 4, nine);
    TEST_OK(g->ctx, vkattn_cmd_kv_cache_append(g->ctx, cmd, &a)); /* uses the last 2 blocks */
    assert_int_equal(vkattn_kv_cache_free_blocks(c), 0);
    int64_t seven[4] = {2, 2, 7, 16}; /* 26 -> 33 and 12 -> 19: one more block each */
    a.k = vkattn_tensor_make(k, 0, VKATTN_DTYPE_F32, 4, seven);
    a.v = vkattn_tensor_make(v, 0, VKATTN_DTYPE_F32, 4, seven);
    TEST_FAILS(g->ctx, VKATTN_ERROR_CACHE_FULL, "pool has 0 free",
               vkattn_cmd_kv_cache_append(g->ctx, cmd, &a));
    TEST_OK(g->ctx, vkattn_commands_submit(g->ctx));
    TEST_OK(g->ctx, vkattn_kv_cache_length(c, 1, &len));
    assert_int_equal(len, 26);
    TEST_OK(g->ctx, vkattn_kv_cache_length(c, 0, &len));
    assert_int_equal(len, 12);

    /* truncating gives whole blocks back */
    TEST_OK(g->ctx, vkattn_kv_cache_truncate(c, 1, 9)); /* 4 blocks -> 2 */
    assert_int_equal(vkattn_kv_cache_free_blocks(c), 2);
    TEST_OK(g->ctx, vkattn_kv_cache_truncate(c, 0, 0)); /* reset: 2 blocks back */
    assert_int_equal(vkattn_kv_cache_free_blocks(c), 4);
    TEST_OK(g->ctx, vkattn_kv_cache_length(c, 0, &len));
    assert_int_equal(len, 0);
    TEST_DESTROY_BUFFERS(k, v);
    vkattn_kv_cache_destroy(c);
    free(data);
}

/* Every append error: its code, its message, and the cache as it was. */
static void test_append_errors_leave_cache_unchanged(void **state)
{
    test_gpu *g = *state;
    for (int paged = 0; paged < 2; paged++) {
        vkattn_kv_cache *c = make(g->ctx, paged ? 8 : 0, 0);
        uint32_t free_before = vkattn_kv_cache_free_blocks(c);
        int64_t s[4] = {2, 2, 5, 16};
        vkattn_buffer *k = test_buffer_with(g->ctx, NULL, 2 * 2 * 5 * 16 * 4);
        uint32_t seqs[2] = {0, 2}, bad_seq[2] = {0, 7}, dup[2] = {1, 1};
        vkattn_kv_append_args a = {.cache = c,
                                   .batch = 2,
                                   .sequences = seqs,
                                   .k = vkattn_tensor_make(k, 0, VKATTN_DTYPE_F32, 4, s),
                                   .v = vkattn_tensor_make(k, 0, VKATTN_DTYPE_F32, 4, s)};
        VkCommandBuffer cmd;
        TEST_OK(g->ctx, vkattn_commands_begin(g->ctx, &cmd));
        vkattn_kv_append_args b;
#define CASE(code, needle, change)                         \
    TEST_FAILS_CHANGED(g->ctx, b, a, change, code, needle, \
                       vkattn_cmd_kv_cache_append(g->ctx, cmd, &b))
        const vkattn_result INV = VKATTN_ERROR_INVALID_ARGUMENT;
        CASE(INV, "sequences[1] is 7", b.sequences = bad_seq);
        CASE(INV, "both sequence 1", b.sequences = dup);
        CASE(INV, "sequences is NULL", b.sequences = NULL);
        CASE(VKATTN_ERROR_SHAPE_MISMATCH, "args->k.shape[1] is 1", b.k.shape[1] = 1);
        CASE(VKATTN_ERROR_UNSUPPORTED_DTYPE, "args->v.dtype is u8", b.v.dtype = VKATTN_DTYPE_U8);
        CASE(INV, "offset", (b.k.offset = 8, b.k.shape[0] = 1, b.v.shape[0] = 1, b.batch = 1));
        CASE(INV, "args->cache is NULL", b.cache = NULL);
#undef CASE
        vkattn_commands_discard(g->ctx);
        for (uint32_t q = 0; q < 3; q++) {
            uint32_t len = 1;
            TEST_OK(g->ctx, vkattn_kv_cache_length(c, q, &len));
            assert_int_equal(len, 0);
        }
        assert_int_equal(vkattn_kv_cache_free_blocks(c), free_before);
        vkattn_buffer_destroy(k);
        vkattn_kv_cache_destroy(c);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_memory_before_allocation),
        cmocka_unit_test(test_create_errors),
        cmocka_unit_test(test_lengths_truncate_and_blocks),
        cmocka_unit_test(test_append_errors_leave_cache_unchanged),
    };
    return cmocka_run_group_tests(tests, test_gpu_setup, test_gpu_teardown);
}
