/* API abuse, the layers: every size field of the KV cache and MHA descs
 * and the MHA scratch-size queries at 0, 1, 2^31 and 2^32 - 1, and KV
 * attention's scale (outside review D1, D2: KV cache sizes that wrapped;
 * D7: scratch sizes past 2^64; D9). See test_api_limits.c. */
#include "test_api_limits.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

/* ------------------------------------------------------------ KV cache */

typedef struct kv_case {
    size_t field; /* offsetof a uint32_t field of vkattn_kv_cache_desc */
    uint32_t value;
    bool paged;           /* from the paged base desc (block_size 4) */
    vkattn_result memory; /* from vkattn_kv_cache_memory */
    vkattn_result create; /* from vkattn_kv_cache_create */
    const char *needle;   /* in both messages */
    const char *label;
} kv_case;

#define KV(f, v, paged, mem, cr, needle)                                                    \
    {                                                                                       \
        offsetof(vkattn_kv_cache_desc, f), (v), (paged), (mem), (cr), (needle), #f " = " #v \
    }

void test_kv_cache_desc_limits(void **state)
{
    test_gpu *g = *state;
    const vkattn_result OK = VKATTN_SUCCESS, BAD = VKATTN_ERROR_INVALID_ARGUMENT;
    const uint32_t MAX = UINT32_MAX;
    const kv_case cases[] = {
        KV(capacity, 0, 0, BAD, BAD, "desc->capacity is 0"),
        KV(capacity, 1, 0, OK, OK, NULL),
        /* D1: capacity + capacity - 1 wrapped: zero-width tables, heap overflow */
        KV(capacity, P31 + 1, 0, OK, ANY_ERROR, "desc->capacity"),
        KV(capacity, MAX, 0, OK, ANY_ERROR, "desc->capacity"),
        KV(capacity, P31 + 1, 1, OK, ANY_ERROR, "desc->capacity"),
        /* D2: (0xffffffff + 2 - 1) / 2 wrapped to 0-wide block tables */
        KV(capacity, MAX, 1, OK, ANY_ERROR, "desc->capacity"),
        KV(block_size, 1, 1, OK, OK, NULL),
        KV(block_size, P31, 1, OK, ANY_ERROR, "desc->block_size"),
        KV(block_size, MAX, 1, OK, ANY_ERROR, "desc->block_size"),
        KV(num_blocks, 1, 1, OK, OK, NULL),
        KV(num_blocks, P31, 1, OK, ANY_ERROR, "desc->num_blocks"),
        KV(num_blocks, MAX, 1, BAD, BAD, "desc->num_blocks"),
        KV(max_sequences, 0, 0, BAD, BAD, "desc->max_sequences is 0"),
        KV(max_sequences, 1, 0, OK, OK, NULL),
        KV(max_sequences, P31, 0, OK, ANY_ERROR, "desc->max_sequences"),
        KV(max_sequences, MAX, 0, BAD, BAD, "desc->max_sequences"),
        KV(max_sequences, MAX, 1, BAD, BAD, "desc->max_sequences"),
        KV(num_kv_heads, 0, 0, BAD, BAD, "desc->num_kv_heads is 0"),
        KV(num_kv_heads, P31, 0, BAD, BAD, "desc->num_kv_heads"), /* does not divide 2 */
        KV(num_heads, 1, 0, BAD, BAD, "desc->num_heads 1"),
        KV(num_heads, P31, 0, OK, ANY_ERROR, "desc->num_heads"),
        KV(num_heads, MAX, 0, BAD, BAD, "desc->num_heads"),
        KV(head_dim, 0, 0, BAD, BAD, "desc->head_dim 0"),
        KV(head_dim, 1, 0, OK, OK, NULL),
        KV(head_dim, 577, 0, BAD, BAD, "desc->head_dim 577"),
        KV(v_head_dim, 577, 0, BAD, BAD, "desc->v_head_dim 577"),
        KV(v_head_dim, MAX, 1, BAD, BAD, "desc->v_head_dim 4294967295"),
        KV(head_dim, P31, 0, BAD, BAD, "desc->head_dim 2147483648"),
        KV(head_dim, MAX, 0, BAD, BAD, "desc->head_dim 4294967295"),
    };
    const vkattn_kv_cache_desc base = {
        .num_kv_heads = 2, .num_heads = 2, .head_dim = 8, .max_sequences = 2, .capacity = 16};
    int bad = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const kv_case *c = &cases[i];
        vkattn_kv_cache_desc d = base;
        d.block_size = c->paged ? 4 : 0;
        d.num_blocks = c->paged ? 16 : 0;
        memcpy((char *)&d + c->field, &c->value, sizeof c->value);
        char label[96], error[512] = "";
        snprintf(label, sizeof label, "%s (%s): memory", c->label,
                 c->paged ? "paged" : "contiguous");
        uint64_t per_token = 0, total = 0;
        bad += limits_expect(label,
                             vkattn_kv_cache_memory(&d, &per_token, &total, error, sizeof error),
                             c->memory, c->needle, error);
        snprintf(label, sizeof label, "%s (%s): create", c->label,
                 c->paged ? "paged" : "contiguous");
        vkattn_kv_cache *cache = (vkattn_kv_cache *)&d; /* must be reset to NULL */
        vkattn_result r = vkattn_kv_cache_create(g->ctx, &d, &cache);
        bad += limits_expect(label, r, c->create, c->needle, vkattn_context_last_error(g->ctx));
        if (r != VKATTN_SUCCESS && cache) {
            print_error("  %s: *out is not NULL after a failure\n", label);
            bad++;
        }
        if (r == VKATTN_SUCCESS)
            vkattn_kv_cache_destroy(cache);
    }
    if (bad)
        fail_msg("%d KV cache desc cases misbehaved", bad);
}

/* ------------------------------------------------- KV attention scale */

void test_kv_attention_scale(void **state)
{
    test_gpu *g = *state;
    vkattn_context *ctx = g->ctx;
    vkattn_kv_cache_desc d = {.num_kv_heads = 1, .head_dim = 8, .max_sequences = 1, .capacity = 8};
    vkattn_kv_cache *cache = NULL;
    TEST_OK(ctx, vkattn_kv_cache_create(ctx, &d, &cache));
    int64_t shape[4] = {1, 1, 1, 8};
    vkattn_buffer *q = test_buffer_with(ctx, NULL, 32), *out = limits_sentinel_buffer(ctx, 32);
    uint32_t seq = 0;
    vkattn_kv_attention_args a = {.cache = cache,
                                  .batch = 1,
                                  .sequences = &seq,
                                  .q = vkattn_tensor_make(q, 0, VKATTN_DTYPE_F32, 4, shape),
                                  .out = vkattn_tensor_make(out, 0, VKATTN_DTYPE_F32, 4, shape)};
    const float scales[] = {NAN, INFINITY, -INFINITY};
    for (int i = 0; i < 3; i++) {
        a.scale = scales[i];
        TEST_FAILS(ctx, VKATTN_ERROR_INVALID_ARGUMENT, "args->scale", vkattn_kv_attention(ctx, &a));
        assert_int_equal(limits_sentinel_intact(ctx, out, "kv attention scale"), 0);
    }
    TEST_DESTROY_BUFFERS(q, out);
    vkattn_kv_cache_destroy(cache);

    /* the CPU reference refuses what the GPU refuses */
    float data[4 * 8] = {0}, res[8];
    memset(res, SENTINEL, sizeof res);
    vkattn_ref_attention_args r = {
        .q = vkattn_host_tensor_make(data, VKATTN_DTYPE_F32, 4, shape),
        .k = vkattn_host_tensor_make(data + 8, VKATTN_DTYPE_F32, 4, shape),
        .v = vkattn_host_tensor_make(data + 16, VKATTN_DTYPE_F32, 4, shape),
        .out = vkattn_host_tensor_make(res, VKATTN_DTYPE_F32, 4, shape),
    };
    for (int i = 0; i < 3; i++) {
        char error[256] = "";
        r.scale = scales[i];
        assert_int_equal(vkattn_ref_attention(&r, error, sizeof error),
                         VKATTN_ERROR_INVALID_ARGUMENT);
        assert_non_null(strstr(error, "args->scale"));
        for (int j = 0; j < (int)sizeof res; j++)
            assert_int_equal(((unsigned char *)res)[j], SENTINEL);
    }
}

/* ----------------------------------------------------------- MHA layer */

typedef struct mha_case {
    size_t field; /* offsetof a uint32_t field of vkattn_mha_desc */
    uint32_t value;
    vkattn_result want;
    const char *needle;
    const char *label;
} mha_case;

#define MHA(f, v, want, needle)                                          \
    {                                                                    \
        offsetof(vkattn_mha_desc, f), (v), (want), (needle), #f " = " #v \
    }

void test_mha_desc_limits(void **state)
{
    test_gpu *g = *state;
    vkattn_context *ctx = g->ctx;
    const vkattn_result OK = VKATTN_SUCCESS, BAD = VKATTN_ERROR_INVALID_ARGUMENT;
    const uint32_t MAX = UINT32_MAX;
    const mha_case cases[] = {
        MHA(embed_dim, 0, BAD, "desc->embed_dim is 0"),
        MHA(embed_dim, 1, OK, NULL),
        MHA(embed_dim, P31, ANY_ERROR, "desc->embed_dim 2147483648"),
        MHA(embed_dim, MAX, ANY_ERROR, "desc->embed_dim 4294967295"),
        MHA(num_heads, 0, BAD, "desc->num_heads is 0"),
        MHA(num_heads, 1, OK, NULL), /* head_dim 16 / 1 */
        MHA(num_heads, P31, BAD, "desc->embed_dim 16"),
        MHA(num_heads, MAX, BAD, "desc->num_heads 4294967295"),
        MHA(num_kv_heads, 1, OK, NULL),
        MHA(num_kv_heads, P31, BAD, "desc->num_kv_heads 2147483648"),
        MHA(num_kv_heads, MAX, BAD, "desc->num_kv_heads 4294967295"),
        MHA(head_dim, 1, OK, NULL),
        MHA(head_dim, 577, BAD, "desc->head_dim 577"),
        MHA(v_head_dim, 577, BAD, "desc->v_head_dim 577"),
        MHA(v_head_dim, MAX, BAD, "desc->v_head_dim 4294967295"),
        MHA(head_dim, P31, BAD, "desc->head_dim 2147483648"),
        MHA(head_dim, MAX, BAD, "desc->head_dim 4294967295"),
        MHA(kv_dim, 1, OK, NULL),
        MHA(kv_dim, P31, ANY_ERROR, "desc->kv_dim 2147483648"),
        MHA(kv_dim, MAX, ANY_ERROR, "desc->kv_dim 4294967295"),
    };
    const vkattn_mha_desc base = {.embed_dim = 16, .num_heads = 2, .head_dim = 8};
    int bad = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        vkattn_mha_desc d = base;
        if (cases[i].field == offsetof(vkattn_mha_desc, num_heads))
            d.head_dim = 0; /* the quotient */
        memcpy((char *)&d + cases[i].field, &cases[i].value, sizeof cases[i].value);
        vkattn_mha *m = (vkattn_mha *)&d;
        vkattn_result r = vkattn_mha_create(ctx, &d, &m);
        char label[96];
        snprintf(label, sizeof label, "mha_create: %s", cases[i].label);
        bad +=
            limits_expect(label, r, cases[i].want, cases[i].needle, vkattn_context_last_error(ctx));
        if (r == VKATTN_SUCCESS)
            vkattn_mha_destroy(m);
        else if (m)
            bad += limits_expect("mha_create: *out reset", VKATTN_ERROR_VULKAN, VKATTN_SUCCESS, "",
                                 "");
    }

    /* weights past 2^64 bytes (the products wrapped) */
    vkattn_mha_desc wide = {.embed_dim = UINT32_MAX, .num_heads = 1u << 27, .head_dim = 8};
    vkattn_mha *m = (vkattn_mha *)&wide;
    bad += limits_expect("mha_create: embed_dim 2^32 - 1, num_heads 2^27",
                         vkattn_mha_create(ctx, &wide, &m), ANY_ERROR, "desc->embed_dim 4294967295",
                         vkattn_context_last_error(ctx));
    if (m)
        bad += limits_expect("mha_create: *out reset", VKATTN_ERROR_VULKAN, VKATTN_SUCCESS, "", "");

    /* the scratch-size queries: D7, a size past 2^64 wrapped */
    TEST_OK(ctx, vkattn_mha_create(ctx, &base, &m));
    const struct {
        uint32_t b, tq, tk;
        vkattn_result want;
        const char *needle;
    } sizes[] = {
        {0, 1, 1, BAD, "batch"},
        {1, 0, 1, BAD, "q_len"},
        {1, 1, 0, BAD, "kv_len"},
        {1, 1, 1, OK, NULL},
        {MAX, MAX, MAX, VKATTN_ERROR_OUT_OF_RANGE, "batch 4294967295 x q_len 4294967295"},
        {MAX, 1, MAX, VKATTN_ERROR_OUT_OF_RANGE, "kv_len 4294967295"},
        {P31, P31, 1, VKATTN_ERROR_OUT_OF_RANGE, "batch 2147483648"},
    };
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        uint64_t bytes = 0;
        char label[96];
        snprintf(label, sizeof label, "mha_scratch_size(%u, %u, %u)", sizes[i].b, sizes[i].tq,
                 sizes[i].tk);
        bad += limits_expect(
            label, vkattn_mha_scratch_size(m, sizes[i].b, sizes[i].tq, sizes[i].tk, &bytes),
            sizes[i].want, sizes[i].needle, vkattn_context_last_error(ctx));
        if (sizes[i].want != OK)
            bad += limits_expect(label, vkattn_mha_reserve(m, sizes[i].b, sizes[i].tq, sizes[i].tk),
                                 sizes[i].want, sizes[i].needle, vkattn_context_last_error(ctx));
    }
    uint64_t bytes = 0;
    TEST_OK(ctx, vkattn_mha_scratch_size(m, MAX, 1, 1, &bytes));
    assert_true(bytes >= 4ull * MAX * 16 * 4); /* q, k, v and o of 16 floats per row */
    bad += limits_expect("mha_reserve(2^32 - 1, 1, 1)", vkattn_mha_reserve(m, MAX, 1, 1), ANY_ERROR,
                         "scratch", vkattn_context_last_error(ctx));
    bad += limits_expect("mha_step_scratch_size(2^32 - 1, 2^32 - 1)",
                         vkattn_mha_step_scratch_size(m, MAX, MAX, &bytes), ANY_ERROR, "4294967295",
                         vkattn_context_last_error(ctx));
    bad +=
        limits_expect("mha_step_scratch_size(0, 1)", vkattn_mha_step_scratch_size(m, 0, 1, &bytes),
                      BAD, "batch", vkattn_context_last_error(ctx));
    vkattn_mha_destroy(m);
    if (bad)
        fail_msg("%d MHA cases misbehaved", bad);
}
