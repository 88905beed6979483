/* vkattn_attention's validation: every bad input gets its code and a message
 * naming the parameter and the values, nothing is recorded (not even a
 * pipeline created) before the checks pass, and a good call still works
 * afterwards. */
#include "test_util.h"

#include <stdlib.h>

typedef struct fixture {
    test_gpu *g;
    vkattn_buffer *buf;  /* q, k, v, mask, padding live here */
    vkattn_buffer *obuf; /* out and weights live here */
    vkattn_attention_args good;
} fixture;

/* B 2, Hq 4, Hkv 2, Tq 3, Tk 5, D 8, f32; mask [Tq, Tk]; padding; weights rank 3. */
enum { B = 2, HQ = 4, HKV = 2, TQ = 3, TK = 5, D = 8 };
#define Q_ELEMS (B * HQ * TQ * D)
#define KV_ELEMS (B * HKV * TK * D)

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    assert_non_null(f);
    f->g = test_gpu_open(0);
    vkattn_context *ctx = f->g->ctx;
    uint64_t bytes = 4 * (Q_ELEMS + 2 * KV_ELEMS + TQ * TK) + B * TK + 64;
    float *zeros = calloc(bytes, 1);
    assert_non_null(zeros);
    uint8_t *ones = (uint8_t *)zeros + 4 * (Q_ELEMS + 2 * KV_ELEMS + TQ * TK);
    memset(ones, 1, B * TK);
    f->buf = test_buffer_with(ctx, zeros, bytes);
    f->obuf = test_buffer_with(ctx, NULL, 4 * (Q_ELEMS + B * TQ * TK));
    free(zeros);
    int64_t qs[4] = {B, HQ, TQ, D}, ks[4] = {B, HKV, TK, D}, ms[2] = {TQ, TK}, ps[2] = {B, TK};
    int64_t ws[3] = {B, TQ, TK};
    uint64_t off = 0;
    f->good.q = vkattn_tensor_make(f->buf, off, VKATTN_DTYPE_F32, 4, qs);
    off += 4 * Q_ELEMS;
    f->good.k = vkattn_tensor_make(f->buf, off, VKATTN_DTYPE_F32, 4, ks);
    off += 4 * KV_ELEMS;
    f->good.v = vkattn_tensor_make(f->buf, off, VKATTN_DTYPE_F32, 4, ks);
    off += 4 * KV_ELEMS;
    f->good.mask = vkattn_tensor_make(f->buf, off, VKATTN_DTYPE_F32, 2, ms);
    off += 4 * TQ * TK;
    f->good.key_padding = vkattn_tensor_make(f->buf, off, VKATTN_DTYPE_U8, 2, ps);
    f->good.out = vkattn_tensor_make(f->obuf, 0, VKATTN_DTYPE_F32, 4, qs);
    f->good.weights = vkattn_tensor_make(f->obuf, 4 * Q_ELEMS, VKATTN_DTYPE_F32, 3, ws);
    f->good.causal = true;
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    TEST_DESTROY_BUFFERS(f->buf, f->obuf);
    test_gpu_close(f->g);
    free(f);
    return 0;
}

/* Asserts the call fails with `code` / `needle` in both forms, creating no
 * pipeline. */
#define FAILS(f, a, code, needle)                                               \
    do {                                                                        \
        vkattn_context *ctx_ = (f)->g->ctx;                                     \
        uint32_t pipelines_ = vkattn_context_pipeline_count(ctx_);              \
        TEST_FAILS(ctx_, code, needle, vkattn_attention(ctx_, &(a)));           \
        VkCommandBuffer cmd_;                                                   \
        TEST_OK(ctx_, vkattn_commands_begin(ctx_, &cmd_));                      \
        TEST_FAILS(ctx_, code, needle, vkattn_cmd_attention(ctx_, cmd_, &(a))); \
        TEST_OK(ctx_, vkattn_commands_submit(ctx_)); /* nothing was recorded */ \
        assert_int_equal(vkattn_context_pipeline_count(ctx_), pipelines_);      \
    } while (0)

/* FAILS for the good call with `change` made to its arguments (`a`). */
#define FAILS_WITH(f, code, needle, change)  \
    do {                                     \
        vkattn_attention_args a = (f)->good; \
        change;                              \
        FAILS(f, a, code, needle);           \
    } while (0)

#define INVALID VKATTN_ERROR_INVALID_ARGUMENT
#define SHAPE VKATTN_ERROR_SHAPE_MISMATCH
#define DTYPE VKATTN_ERROR_UNSUPPORTED_DTYPE

static void test_null_arguments(void **state)
{
    fixture *f = *state;
    vkattn_context *ctx = f->g->ctx;
    assert_int_equal(vkattn_attention(NULL, &f->good), VKATTN_ERROR_INVALID_ARGUMENT);
    assert_int_equal(vkattn_cmd_attention(NULL, VK_NULL_HANDLE, &f->good),
                     VKATTN_ERROR_INVALID_ARGUMENT);
    TEST_FAILS(ctx, VKATTN_ERROR_INVALID_ARGUMENT, "args is NULL", vkattn_attention(ctx, NULL));
    TEST_FAILS(ctx, VKATTN_ERROR_INVALID_ARGUMENT, "cmd is NULL",
               vkattn_cmd_attention(ctx, VK_NULL_HANDLE, &f->good));
    VkCommandBuffer cmd;
    TEST_OK(ctx, vkattn_commands_begin(ctx, &cmd));
    TEST_FAILS(ctx, VKATTN_ERROR_INVALID_ARGUMENT, "args is NULL",
               vkattn_cmd_attention(ctx, cmd, NULL));
    TEST_OK(ctx, vkattn_commands_submit(ctx));
    FAILS_WITH(f, INVALID, "args->q.buffer is NULL", a.q.buffer = NULL);
    FAILS_WITH(f, INVALID, "args->out.buffer is NULL", a.out.buffer = NULL);
}

static void test_shapes(void **state)
{
    fixture *f = *state;
    FAILS_WITH(f, INVALID, "args->q.rank is 2: q is rank 4: [B, H, T, D], or rank 3", a.q.rank = 2);
    FAILS_WITH(f, INVALID, "args->k.shape[2] is 0", a.k.shape[2] = 0);
    FAILS_WITH(f, INVALID, "(head_dim) 577 is not supported",
               a.q.shape[3] = a.k.shape[3] = a.v.shape[3] = a.out.shape[3] = 577);
    FAILS_WITH(f, INVALID, "(head_dim) 584",
               a.q.shape[3] = a.k.shape[3] = a.v.shape[3] = a.out.shape[3] = 584);
    FAILS_WITH(f, SHAPE, "(num_kv_heads) 2 does not divide", a.q.shape[1] = a.out.shape[1] = 3);
    FAILS_WITH(f, SHAPE, "args->k.shape[0] (batch) 1", a.k.shape[0] = 1);
    FAILS_WITH(f, SHAPE, "args->v.shape[2] (kv_len) 4", a.v.shape[2] = 4);
    FAILS_WITH(f, SHAPE, "args->out.shape[2] (q_len) 2", a.out.shape[2] = 2);
    FAILS_WITH(f, INVALID, "args->mask.rank is 1", a.mask.rank = 1);
    FAILS_WITH(f, SHAPE, "args->mask.shape[1] (kv_len) 4", a.mask.shape[1] = 4);
    int64_t m4[4] = {3, 1, TQ, TK};
    FAILS_WITH(f, SHAPE, "args->mask.shape[0] (batch) 3 is neither 1 nor",
               (a.mask = vkattn_tensor_make(f->buf, a.mask.offset, VKATTN_DTYPE_F16, 4, m4)));
    FAILS_WITH(f, SHAPE, "args->key_padding.shape[1] (kv_len) 6", a.key_padding.shape[1] = 6);
    FAILS_WITH(f, INVALID, "args->weights.rank is 2", a.weights.rank = 2);
    FAILS_WITH(f, SHAPE, "args->weights.shape[1] (q_len) 4", a.weights.shape[1] = 4);
}

static void test_dtypes(void **state)
{
    fixture *f = *state;
    FAILS_WITH(f, DTYPE, "args->q.dtype u8 is not supported", a.q.dtype = VKATTN_DTYPE_U8);
    FAILS_WITH(f, DTYPE, "args->out.dtype f16 differs from args->q.dtype f32",
               a.out.dtype = VKATTN_DTYPE_F16);
    FAILS_WITH(f, DTYPE,
               "args->v.dtype i32 is not supported: v is f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, "
               "q5_1 or iq4_nl",
               a.v.dtype = VKATTN_DTYPE_I32);
    FAILS_WITH(f, DTYPE, "args->mask.dtype i32", a.mask.dtype = VKATTN_DTYPE_I32);
    FAILS_WITH(f, INVALID, "args->bool_mask is 5", a.bool_mask = (vkattn_bool_mask)5);
    FAILS_WITH(f, DTYPE, "args->key_padding.dtype f32", a.key_padding.dtype = VKATTN_DTYPE_F32);
    FAILS_WITH(f, DTYPE, "args->weights.dtype f16", a.weights.dtype = VKATTN_DTYPE_F16);
    FAILS_WITH(f, DTYPE, "args->k.dtype 19",
               (a.k.dtype = (vkattn_dtype)19, a.v.dtype = (vkattn_dtype)19));
}

static void test_memory_and_strides(void **state)
{
    fixture *f = *state;
    FAILS_WITH(f, INVALID, "args->q.offset 2 is not a multiple of the f32", a.q.offset = 2);
    FAILS_WITH(f, INVALID, "args->k.offset 776 is not a multiple of 16 bytes", a.k.offset += 8);
    FAILS_WITH(f, VKATTN_ERROR_OUT_OF_RANGE, "args->v spans bytes", a.v.offset = 1600);
    FAILS_WITH(f, INVALID, "args->k.strides[3] is 2: the last dimension of args->k",
               (a.k.strides[3] = 2, a.k.strides[2] = 16, a.k.strides[1] = 16, a.k.strides[0] = 16));
    FAILS_WITH(f, INVALID, "args->v.strides[2] is 10: the strides of args->v must be",
               (a.v.strides[2] = 10, a.v.strides[1] = 20, a.v.strides[0] = 40, a.v.strides[3] = 1));
    FAILS_WITH(f, INVALID, "args->q.strides[1] is -24", a.q.strides[1] = -24);
    FAILS_WITH(f, INVALID, "args->out.strides[1] is 0 while args->out.shape[1] is 4",
               a.out.strides[1] = 0);
    FAILS_WITH(f, INVALID, "args->weights.strides[0] is 0", a.weights.strides[0] = 0);
    FAILS_WITH(f, INVALID, "args->mask.offset 1",
               (a.mask.offset = 1, a.mask.dtype = VKATTN_DTYPE_F16));

    /* another context's buffer */
    test_gpu *other = test_gpu_open(0);
    vkattn_buffer *ob = test_buffer_with(other->ctx, NULL, 4096);
    FAILS_WITH(f, INVALID, "args->v.buffer belongs to another context", a.v.buffer = ob);
    vkattn_buffer_destroy(ob);
    test_gpu_close(other);
}

static void test_overlaps(void **state)
{
    fixture *f = *state;
    FAILS_WITH(f, INVALID, "args->out (bytes 64..832) overlaps args->q",
               (a.out.buffer = f->buf, a.out.offset = f->good.q.offset + 64));
    FAILS_WITH(f, INVALID, "args->out (bytes 0..768) overlaps args->mask",
               (a.mask.buffer = f->obuf, a.mask.offset = 0));
    FAILS_WITH(f, INVALID, "args->weights (bytes 768..888) overlaps args->key_padding",
               (a.key_padding.buffer = f->obuf, a.key_padding.offset = 4 * Q_ELEMS + 8));
    FAILS_WITH(f, INVALID, "args->weights (bytes 0..120) overlaps args->q",
               (a.weights.buffer = f->buf, a.weights.offset = 0));
    FAILS_WITH(f, INVALID, "overlaps args->out", a.weights.offset = 4 * Q_ELEMS - 4);
    /* inputs may share memory with each other: k and v the same range */
    vkattn_attention_args a = f->good;
    a.v = a.k;
    TEST_OK(f->g->ctx, vkattn_attention(f->g->ctx, &a));
}

/* One head's keys beyond one binding (only where the range is small enough
 * to exceed cheaply: lavapipe's 128 MiB). */
static void test_head_too_large(void **state)
{
    fixture *f = *state;
    vkattn_context *ctx = f->g->ctx;
    uint64_t range = test_binding_range_at_most(ctx, 256ull << 20);
    /* 2 keys range / 4 + 64 f32 elements apart: one head spans > range */
    int64_t key_stride = (int64_t)(range / 4) + 64;
    vkattn_buffer_desc d = {.size = (uint64_t)key_stride * 4 + 4096};
    vkattn_buffer *big = NULL;
    TEST_OK(ctx, vkattn_buffer_create(ctx, &d, &big));
    int64_t ks[4] = {1, 1, 2, D}, qs[4] = {1, 1, 1, D};
    vkattn_attention_args a = {0};
    a.q = vkattn_tensor_make(f->buf, 0, VKATTN_DTYPE_F32, 4, qs);
    a.out = vkattn_tensor_make(f->obuf, 0, VKATTN_DTYPE_F32, 4, qs);
    a.k = vkattn_tensor_make(big, 0, VKATTN_DTYPE_F32, 4, ks);
    a.k.strides[2] = key_stride;
    a.v = vkattn_tensor_make(f->buf, 0, VKATTN_DTYPE_F32, 4, ks);
    FAILS(f, a, VKATTN_ERROR_UNSUPPORTED, "args->k: one head's keys spans");
    vkattn_buffer_destroy(big);
}

/* After all the failures, a good call works and sees no validation message. */
static void test_good_call_after_errors(void **state)
{
    fixture *f = *state;
    TEST_OK(f->g->ctx, vkattn_attention(f->g->ctx, &f->good));
    float w[B * TQ * TK];
    TEST_OK(f->g->ctx, vkattn_buffer_download(f->obuf, 4 * Q_ELEMS, w, sizeof w));
    /* zero q and k: uniform over the visible keys (causal, bottom-right) */
    for (int b = 0; b < B; b++)
        for (int i = 0; i < TQ; i++)
            for (int j = 0; j < TK; j++) {
                float want = j <= i + TK - TQ ? 1.0f / (float)(i + TK - TQ + 1) : 0.0f;
                float got = w[(b * TQ + i) * TK + j];
                if (!(got > want - 1e-6f && got < want + 1e-6f))
                    fail_msg("weights[%d][%d][%d] = %g, expected %g", b, i, j, (double)got,
                             (double)want);
            }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_null_arguments),
        cmocka_unit_test(test_shapes),
        cmocka_unit_test(test_dtypes),
        cmocka_unit_test(test_memory_and_strides),
        cmocka_unit_test(test_overlaps),
        cmocka_unit_test(test_head_too_large),
        cmocka_unit_test(test_good_call_after_errors),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
