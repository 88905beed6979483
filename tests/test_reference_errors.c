/* CPU reference: every validation error returns its code and names the
 * parameter and values; outputs are untouched on failure, `error` on success. */
#include "test_reference.h"

#include <stdlib.h>

#define SENTINEL 123.0f

static void fill(float *p, size_t n, float value)
{
    for (size_t i = 0; i < n; i++)
        p[i] = value;
}

static void assert_untouched(const float *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != SENTINEL)
            fail_msg("output [%zu] was written (%g) by a failing call", i, p[i]);
}

/* ------------------------------------------------------------ attention */

/* B 2, Hq 8, Hkv 2, Tq 3, Tk 4, D 8, with every optional tensor. */
typedef struct attn_fixture {
    float q[384], k[128], v[128], out[384], mask[12], weights[24];
    uint8_t pad[8];
    vkattn_ref_attention_args a;
} attn_fixture;

static void test_attention_errors(void **state)
{
    (void)state;
    attn_fixture *f = test_alloc(sizeof *f);
    test_rng r = test_rng_seed(41);
    test_fill_uniform(&r, f->q, 384, -1, 1);
    test_fill_uniform(&r, f->k, 128, -1, 1);
    test_fill_uniform(&r, f->v, 128, -1, 1);
    fill(f->mask, 12, 0.0f);
    memset(f->pad, 1, sizeof f->pad);
    ref_dims d = {2, 8, 2, 3, 4, 8};
    ref_attention_args(&f->a, &d, f->q, f->k, f->v, f->out);
    int64_t ms[2] = {3, 4}, ps[2] = {2, 4}, ws[3] = {2, 3, 4};
    f->a.mask = vkattn_host_tensor_make(f->mask, VKATTN_DTYPE_F32, 2, ms);
    f->a.key_padding = vkattn_host_tensor_make(f->pad, VKATTN_DTYPE_U8, 2, ps);
    f->a.weights = vkattn_host_tensor_make(f->weights, VKATTN_DTYPE_F32, 3, ws);

    /* The base case is valid, and success leaves `error` alone. */
    char untouched[32] = "untouched";
    assert_int_equal(vkattn_ref_attention(&f->a, untouched, sizeof untouched), VKATTN_SUCCESS);
    assert_string_equal(untouched, "untouched");
    assert_int_equal(vkattn_ref_attention(&f->a, NULL, 0), VKATTN_SUCCESS);
    fill(f->out, 384, SENTINEL);
    fill(f->weights, 24, SENTINEL);

    const vkattn_ref_attention_args base = f->a;
    vkattn_ref_attention_args a;
#define CASE(code, needle, ...)                                             \
    do {                                                                    \
        a = base;                                                           \
        __VA_ARGS__;                                                        \
        REF_FAILS(code, needle, vkattn_ref_attention(&a, err, sizeof err)); \
        assert_untouched(f->out, 384);                                      \
        assert_untouched(f->weights, 24);                                   \
    } while (0)
    const vkattn_result INVALID = VKATTN_ERROR_INVALID_ARGUMENT;
    const vkattn_result SHAPE = VKATTN_ERROR_SHAPE_MISMATCH;
    const vkattn_result DTYPE = VKATTN_ERROR_UNSUPPORTED_DTYPE;
    REF_FAILS(INVALID, "args", vkattn_ref_attention(NULL, err, sizeof err));
    CASE(INVALID, "args->q.data is NULL", a.q.data = NULL);
    CASE(INVALID, "args->out.data is NULL", a.out.data = NULL);
    CASE(INVALID, "args->k.rank is 3", a.k.rank = 3);
    CASE(INVALID, "args->q.shape[2] is 0", a.q.shape[2] = 0);
    CASE(INVALID, "args->v.shape[0] is 4294967296", a.v.shape[0] = 1ll << 32);
    CASE(DTYPE, "args->q.dtype u8", a.q.dtype = VKATTN_DTYPE_U8);
    CASE(DTYPE, "args->k.dtype 19", a.k.dtype = (vkattn_dtype)19);
    CASE(DTYPE, "args->out.dtype f16 differs from args->q.dtype f32",
         a.out.dtype = VKATTN_DTYPE_F16);
    CASE(DTYPE, "args->v.dtype i32 is not supported", a.v.dtype = VKATTN_DTYPE_I32);
    CASE(SHAPE, "args->k.shape[0] (batch) 3 differs from args->q.shape[0] (batch) 2",
         a.k.shape[0] = 3);
    CASE(SHAPE, "args->v.shape[1] (num_kv_heads) 4 differs from args->k.shape[1]",
         a.v.shape[1] = 4);
    CASE(SHAPE, "args->k.shape[1] (num_kv_heads) 3 does not divide args->q.shape[1] (num_heads) 8",
         a.k.shape[1] = 3, a.v.shape[1] = 3);
    CASE(SHAPE, "args->v.shape[2] (kv_len) 5", a.v.shape[2] = 5);
    CASE(SHAPE, "args->k.shape[3] (head_dim) 16 differs from args->q.shape[3] (head_dim) 8",
         a.k.shape[3] = 16);
    CASE(SHAPE, "args->out.shape[2] (q_len) 2", a.out.shape[2] = 2);
    CASE(INVALID, "args->q.shape[3] (head_dim) 577",
         a.q.shape[3] = a.k.shape[3] = a.v.shape[3] = a.out.shape[3] = 577);
    CASE(INVALID, "args->q.shape[3] (head_dim) 584",
         a.q.shape[3] = a.k.shape[3] = a.v.shape[3] = a.out.shape[3] = 584);
    CASE(INVALID, "args->mask.rank is 1", a.mask.rank = 1);
    CASE(DTYPE, "args->mask.dtype i32", a.mask.dtype = VKATTN_DTYPE_I32);
    CASE(INVALID, "args->bool_mask is 5", a.bool_mask = (vkattn_bool_mask)5);
    CASE(SHAPE, "args->mask.shape[1] (kv_len) 5", a.mask.shape[1] = 5);
    CASE(SHAPE, "args->mask.shape[0] (q_len) 4", a.mask.shape[0] = 4);
    int64_t m4[4] = {1, 3, 3, 4};
    CASE(SHAPE, "args->mask.shape[1] (num_heads) 3 is neither 1 nor args->q.shape[1]",
         a.mask = vkattn_host_tensor_make(f->mask, VKATTN_DTYPE_F32, 4, m4));
    m4[0] = 3, m4[1] = 1;
    CASE(SHAPE, "args->mask.shape[0] (batch) 3",
         a.mask = vkattn_host_tensor_make(f->mask, VKATTN_DTYPE_F32, 4, m4));
    CASE(DTYPE, "args->key_padding.dtype f32", a.key_padding.dtype = VKATTN_DTYPE_F32);
    CASE(INVALID, "args->key_padding.rank is 1", a.key_padding.rank = 1);
    CASE(SHAPE, "args->key_padding.shape[1] (kv_len) 5", a.key_padding.shape[1] = 5);
    CASE(SHAPE, "args->key_padding.shape[0] (batch) 1", a.key_padding.shape[0] = 1);
    CASE(DTYPE, "args->weights.dtype f16", a.weights.dtype = VKATTN_DTYPE_F16);
    CASE(INVALID, "args->weights.rank is 2", a.weights.rank = 2);
    CASE(SHAPE, "args->weights.shape[2] (kv_len) 3", a.weights.shape[2] = 3);
    int64_t w4[4] = {2, 4, 3, 4};
    CASE(SHAPE, "args->weights.shape[1] (num_heads) 4",
         a.weights = vkattn_host_tensor_make(f->weights, VKATTN_DTYPE_F32, 4, w4));
    CASE(INVALID, "args->q.strides[1] is -8", a.q.strides[1] = -8);
    CASE(INVALID, "args->out.strides[2] is 0", a.out.strides[2] = 0);
    CASE(INVALID, "args->weights.strides[0] is 0", a.weights.strides[0] = 0);
    CASE(INVALID, "args->k.strides", a.k.strides[0] = INT64_MAX);
#undef CASE
    free(f);
}

/* ------------------------------------------------------------ linear */

static void test_linear_errors(void **state)
{
    (void)state;
    float x[12] = {0}, w[15] = {0}, b[5] = {0}, y[20];
    int64_t xs[3] = {2, 2, 3}, ws[2] = {5, 3}, ys[3] = {2, 2, 5};
    vkattn_ref_linear_args base = {0}, a;
    base.x = vkattn_host_tensor_make(x, VKATTN_DTYPE_F32, 3, xs);
    base.w = vkattn_host_tensor_make(w, VKATTN_DTYPE_F32, 2, ws);
    base.b = vkattn_host_tensor_make(b, VKATTN_DTYPE_F32, 1, &ws[0]);
    base.y = vkattn_host_tensor_make(y, VKATTN_DTYPE_F32, 3, ys);
    a = base;
    REF_OK(vkattn_ref_linear(&a, err, sizeof err));
    fill(y, 20, SENTINEL);
#define CASE(code, needle, ...)                                          \
    do {                                                                 \
        a = base;                                                        \
        __VA_ARGS__;                                                     \
        REF_FAILS(code, needle, vkattn_ref_linear(&a, err, sizeof err)); \
        assert_untouched(y, 20);                                         \
    } while (0)
    REF_FAILS(VKATTN_ERROR_INVALID_ARGUMENT, "args", vkattn_ref_linear(NULL, err, sizeof err));
    CASE(VKATTN_ERROR_INVALID_ARGUMENT, "args->x.data is NULL", a.x.data = NULL);
    CASE(VKATTN_ERROR_INVALID_ARGUMENT, "args->w.data is NULL", a.w.data = NULL);
    CASE(VKATTN_ERROR_INVALID_ARGUMENT, "args->y.data is NULL", a.y.data = NULL);
    CASE(VKATTN_ERROR_INVALID_ARGUMENT, "args->x.rank is 4", a.x.rank = 4);
    CASE(VKATTN_ERROR_INVALID_ARGUMENT, "args->w.rank is 1", a.w.rank = 1);
    CASE(VKATTN_ERROR_INVALID_ARGUMENT, "args->b.rank is 2", a.b.rank = 2);
    CASE(VKATTN_ERROR_INVALID_ARGUMENT, "args->x.shape[1] is 0", a.x.shape[1] = 0);
    CASE(VKATTN_ERROR_UNSUPPORTED_DTYPE, "args->x.dtype u8", a.x.dtype = VKATTN_DTYPE_U8);
    CASE(VKATTN_ERROR_UNSUPPORTED_DTYPE, "args->b.dtype u8", a.b.dtype = VKATTN_DTYPE_U8);
    CASE(VKATTN_ERROR_SHAPE_MISMATCH, "args->w.shape[1] 4 differs from args->x.shape[2] 3",
         a.w.shape[1] = 4);
    CASE(VKATTN_ERROR_SHAPE_MISMATCH, "args->b.shape[0] 4 differs from args->w.shape[0] 5",
         a.b.shape[0] = 4);
    CASE(VKATTN_ERROR_SHAPE_MISMATCH, "args->y.rank 2 differs from args->x.rank 3", a.y.rank = 2);
    CASE(VKATTN_ERROR_SHAPE_MISMATCH, "args->y.shape[2] 4 differs from args->w.shape[0] 5",
         a.y.shape[2] = 4);
    CASE(VKATTN_ERROR_SHAPE_MISMATCH, "args->y.shape[0] 1 differs from args->x.shape[0] 2",
         a.y.shape[0] = 1);
    CASE(VKATTN_ERROR_INVALID_ARGUMENT, "args->y.strides[1] is 0", a.y.strides[0] = 10,
         a.y.strides[1] = 0, a.y.strides[2] = 1);
#undef CASE
}

/* ------------------------------------------------------------ MHA */

/* Embed 16, 2 heads (Dh 8), self-attention on x [1, 3, 16]. */
typedef struct mha_fixture {
    float wq[256], wk[256], wv[256], wo[256], wqkv[768], bq[16], bqkv[48];
    float x[48], c[40], y[48], weights[18];
    vkattn_mha_desc desc;
    vkattn_mha_weights w;
    vkattn_ref_mha_args a;
} mha_fixture;

static mha_fixture *mha_fixture_make(void)
{
    mha_fixture *f = test_alloc(sizeof *f);
    test_rng r = test_rng_seed(42);
    test_fill_uniform(&r, f->x, 48, -1, 1);
    f->desc = (vkattn_mha_desc){.embed_dim = 16, .num_heads = 2};
    f->w.wq = f->wq, f->w.wk = f->wk, f->w.wv = f->wv, f->w.wo = f->wo;
    int64_t xs[3] = {1, 3, 16}, ws[3] = {1, 3, 3};
    f->a.x = vkattn_host_tensor_make(f->x, VKATTN_DTYPE_F32, 3, xs);
    f->a.y = vkattn_host_tensor_make(f->y, VKATTN_DTYPE_F32, 3, xs);
    f->a.weights = vkattn_host_tensor_make(f->weights, VKATTN_DTYPE_F32, 3, ws);
    REF_OK(vkattn_ref_mha(&f->desc, &f->w, &f->a, err, sizeof err));
    fill(f->y, 48, SENTINEL);
    fill(f->weights, 9, SENTINEL);
    return f;
}

#define MHA_CASE(code, needle, ...)                                              \
    do {                                                                         \
        vkattn_mha_desc desc = f->desc;                                          \
        vkattn_mha_weights w = f->w;                                             \
        vkattn_ref_mha_args a = f->a;                                            \
        (void)desc, (void)w, (void)a;                                            \
        __VA_ARGS__;                                                             \
        REF_FAILS(code, needle, vkattn_ref_mha(&desc, &w, &a, err, sizeof err)); \
        assert_untouched(f->y, 48);                                              \
        assert_untouched(f->weights, 9);                                         \
    } while (0)

static void test_mha_desc_errors(void **state)
{
    (void)state;
    mha_fixture *f = mha_fixture_make();
    const vkattn_result INVALID = VKATTN_ERROR_INVALID_ARGUMENT;
    REF_FAILS(INVALID, "desc", vkattn_ref_mha(NULL, &f->w, &f->a, err, sizeof err));
    REF_FAILS(INVALID, "weights is NULL", vkattn_ref_mha(&f->desc, NULL, &f->a, err, sizeof err));
    REF_FAILS(INVALID, "args", vkattn_ref_mha(&f->desc, &f->w, NULL, err, sizeof err));
    MHA_CASE(INVALID, "desc->embed_dim is 0", desc.embed_dim = 0);
    MHA_CASE(INVALID, "desc->num_heads is 0", desc.num_heads = 0);
    MHA_CASE(INVALID, "desc->num_kv_heads 3 does not divide desc->num_heads 2",
             desc.num_kv_heads = 3);
    MHA_CASE(INVALID, "desc->embed_dim 16 is not a multiple of desc->num_heads 3",
             desc.num_heads = 3);
    MHA_CASE(INVALID, "desc->head_dim 577", desc.head_dim = 577);
    MHA_CASE(INVALID, "desc->v_head_dim 600", desc.v_head_dim = 600);
    MHA_CASE(INVALID, "desc->head_dim 600 (desc->embed_dim 1200 / desc->num_heads 2)",
             desc.embed_dim = 1200);
    MHA_CASE(INVALID, "projection features", desc.num_heads = 1u << 30, desc.head_dim = 8);
    MHA_CASE(VKATTN_ERROR_UNSUPPORTED_DTYPE, "desc->dtype u8", desc.dtype = VKATTN_DTYPE_U8);
    MHA_CASE(INVALID, "weights->wk is NULL", w.wk = NULL);
    MHA_CASE(INVALID, "weights->wo is NULL", w.wo = NULL);
    MHA_CASE(INVALID, "weights->wqkv and weights->wq are both set", w.wqkv = f->wqkv);
    MHA_CASE(INVALID,
             "weights->wqkv needs desc->kv_dim (8) == desc->value_dim (8) == desc->embed_dim (16)",
             w.wq = w.wk = w.wv = NULL, w.wqkv = f->wqkv, desc.kv_dim = 8);
    MHA_CASE(INVALID, "weights->bqkv and weights->bq are both set", desc.bias = true,
             w.bqkv = f->bqkv, w.bq = f->bq);
    free(f);
}

static void test_mha_args_errors(void **state)
{
    (void)state;
    mha_fixture *f = mha_fixture_make();
    const vkattn_result INVALID = VKATTN_ERROR_INVALID_ARGUMENT;
    const vkattn_result SHAPE = VKATTN_ERROR_SHAPE_MISMATCH;
    int64_t cs[3] = {1, 5, 8};
    MHA_CASE(INVALID, "args->x.data is NULL", a.x.data = NULL);
    MHA_CASE(INVALID, "args->y.data is NULL", a.y.data = NULL);
    MHA_CASE(INVALID, "args->x.rank is 2", a.x.rank = 2);
    MHA_CASE(VKATTN_ERROR_UNSUPPORTED_DTYPE, "args->x.dtype f16", a.x.dtype = VKATTN_DTYPE_F16);
    MHA_CASE(SHAPE, "args->x.shape[2] 8 differs from desc->embed_dim 16", a.x.shape[2] = 8);
    MHA_CASE(INVALID, "args->kv.data is NULL (self-attention) but desc->kv_dim 8", desc.kv_dim = 8);
    MHA_CASE(SHAPE, "args->kv.shape[2] 8 differs from desc->kv_dim 16",
             a.kv = vkattn_host_tensor_make(f->c, VKATTN_DTYPE_F32, 3, cs));
    MHA_CASE(SHAPE, "args->kv.shape[0] 2 differs from args->x.shape[0]", desc.kv_dim = 8, cs[0] = 2,
             a.kv = vkattn_host_tensor_make(f->c, VKATTN_DTYPE_F32, 3, cs));
    MHA_CASE(SHAPE, "args->y.shape[1] 2 differs from args->x.shape[1] 3", a.y.shape[1] = 2);
    MHA_CASE(INVALID, "args->y.strides[0] is -1", a.y.strides[0] = -1);
    MHA_CASE(SHAPE, "args->weights.shape[2] (kv_len) 2", a.weights.shape[2] = 2);
    int64_t ms[2] = {3, 4};
    MHA_CASE(SHAPE, "args->mask.shape[1] (kv_len) 4",
             a.mask = vkattn_host_tensor_make(f->c, VKATTN_DTYPE_F32, 2, ms));
    uint8_t pad[3] = {1, 1, 1};
    int64_t ps[2] = {1, 3};
    MHA_CASE(VKATTN_ERROR_UNSUPPORTED_DTYPE, "args->key_padding.dtype f16",
             a.key_padding = vkattn_host_tensor_make(pad, VKATTN_DTYPE_F16, 2, ps));
    /* The valid cross-attention form of the last kv case succeeds. */
    cs[0] = 1;
    vkattn_mha_desc cross = f->desc;
    cross.kv_dim = 8;
    vkattn_ref_mha_args a = f->a;
    a.kv = vkattn_host_tensor_make(f->c, VKATTN_DTYPE_F32, 3, cs);
    a.weights.shape[2] = 5;
    float weights[15];
    a.weights.data = weights;
    REF_OK(vkattn_ref_mha(&cross, &f->w, &a, err, sizeof err));
    free(f);
}

int ref_run_error_tests(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_attention_errors),
        cmocka_unit_test(test_linear_errors),
        cmocka_unit_test(test_mha_desc_errors),
        cmocka_unit_test(test_mha_args_errors),
    };
    return cmocka_run_group_tests_name("reference_errors", tests, NULL, NULL);
}
