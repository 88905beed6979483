/* API abuse: every public size field at 0, 1, 2^31, 2^32, 2^63 and its
 * type's maximum, and non-finite scales. Each refused call returns a named
 * error whose message names the parameter, writes nothing (outputs hold a
 * sentinel before and after), and never crashes or trips UBSan.
 * Outside-review defects: D7 (bounds checked modulo 2^64) and D9 (NaN /
 * infinite scales) on the ops here; D1, D2 (KV cache sizes) and the layers
 * in test_api_limits_layers.c; file saves, the loader's device list and
 * tuning data at scale in test_api_limits_io.c. */
#include "test_api_limits.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

int limits_expect(const char *label, vkattn_result got, vkattn_result want, const char *needle,
                  const char *message)
{
    bool code_ok = want == ANY_ERROR ? got < 0 : got == want;
    bool text_ok = got == VKATTN_SUCCESS || !needle || strstr(message, needle);
    if (code_ok && text_ok)
        return 0;
    print_error("  %s -> %s (%s), expected %s naming \"%s\"\n", label, vkattn_result_name(got),
                message, want == ANY_ERROR ? "an error" : vkattn_result_name(want),
                needle ? needle : "");
    return 1;
}

vkattn_buffer *limits_sentinel_buffer(vkattn_context *ctx, size_t bytes)
{
    unsigned char *fill = test_alloc(bytes);
    memset(fill, SENTINEL, bytes);
    vkattn_buffer *b = test_buffer_with(ctx, fill, bytes);
    free(fill);
    return b;
}

void limits_sentinel_fill(vkattn_context *ctx, vkattn_buffer *b)
{
    size_t n = (size_t)vkattn_buffer_size(b);
    unsigned char *fill = test_alloc(n);
    memset(fill, SENTINEL, n);
    TEST_OK(ctx, vkattn_buffer_upload(b, 0, fill, n));
    free(fill);
}

int limits_sentinel_intact(vkattn_context *ctx, vkattn_buffer *b, const char *label)
{
    size_t n = (size_t)vkattn_buffer_size(b);
    unsigned char *got = test_alloc(n);
    TEST_OK(ctx, vkattn_buffer_download(b, 0, got, n));
    size_t i = 0;
    while (i < n && got[i] == SENTINEL)
        i++;
    free(got);
    if (i == n)
        return 0;
    print_error("  %s: the output buffer changed at byte %zu\n", label, i);
    return 1;
}

/* ------------------------------------------------- tensors: convert */

/* What a case changes in a tensor of an op's arguments. */
typedef enum field_kind { F_OFFSET, F_SHAPE, F_STRIDE, F_SCALE } field_kind;

typedef struct tensor_case {
    int tensor; /* index into the op's tensors; F_SCALE: unused */
    field_kind kind;
    int dim;
    uint64_t value; /* F_SCALE: 0 NaN, 1 +inf, 2 -inf */
    vkattn_result want;
    const char *needle;
} tensor_case;

static void apply(vkattn_tensor *t, float *scale, const tensor_case *c)
{
    static const float scales[] = {NAN, INFINITY, -INFINITY};
    switch (c->kind) {
    case F_OFFSET:
        t->offset = c->value;
        break;
    case F_SHAPE:
        t->shape[c->dim] = (int64_t)c->value;
        break;
    case F_STRIDE:
        t->strides[c->dim] = (int64_t)c->value;
        break;
    case F_SCALE:
        *scale = scales[c->value];
        break;
    }
}

static const char *kind_name(field_kind k)
{
    return k == F_OFFSET ? "offset" : k == F_SHAPE ? "shape" : k == F_STRIDE ? "strides" : "scale";
}

/* Runs the table on one op: `call` gets the tensors and scale changed; the
 * output buffer `out` holds the sentinel before each call and, when the call
 * is refused, after it. */
typedef vkattn_result (*op_call)(vkattn_context *ctx, vkattn_tensor *t, float scale);

static int run_tensor_cases(vkattn_context *ctx, const char *op, const char *const *names,
                            const vkattn_tensor *good, size_t count, vkattn_buffer *out,
                            op_call call, const tensor_case *cases, size_t n)
{
    int bad = 0;
    for (size_t i = 0; i < n; i++) {
        const tensor_case *c = &cases[i];
        vkattn_tensor t[8];
        memcpy(t, good, count * sizeof *t);
        float scale = 0.0f;
        apply(&t[c->tensor], &scale, c);
        char label[160];
        if (c->kind == F_SCALE)
            snprintf(label, sizeof label, "%s: args->scale = %g", op, (double)scale);
        else
            snprintf(label, sizeof label, "%s: %s.%s[%d] = %llu", op, names[c->tensor],
                     kind_name(c->kind), c->dim, (unsigned long long)c->value);
        limits_sentinel_fill(ctx, out);
        vkattn_result r = call(ctx, t, scale);
        bad += limits_expect(label, r, c->want, c->needle, vkattn_context_last_error(ctx));
        if (r != VKATTN_SUCCESS)
            bad += limits_sentinel_intact(ctx, out, label);
    }
    return bad;
}

static vkattn_result call_convert(vkattn_context *ctx, vkattn_tensor *t, float scale)
{
    vkattn_convert_args a = {t[0], t[1], scale};
    return vkattn_convert(ctx, &a);
}

#define OFF(i, v, code, needle)         \
    {                                   \
        i, F_OFFSET, 0, v, code, needle \
    }
#define SHAPE(i, d, v, code, needle)   \
    {                                  \
        i, F_SHAPE, d, v, code, needle \
    }
#define STRIDE(i, d, v, code, needle)   \
    {                                   \
        i, F_STRIDE, d, v, code, needle \
    }
#define SCALES(needle)                                                \
    {0, F_SCALE, 0, 0, BAD, needle}, {0, F_SCALE, 0, 1, BAD, needle}, \
    {                                                                 \
        0, F_SCALE, 0, 2, BAD, needle                                 \
    }

void test_convert_limits(void **state)
{
    test_gpu *g = *state;
    vkattn_context *ctx = g->ctx;
    const vkattn_result BAD = VKATTN_ERROR_INVALID_ARGUMENT, RANGE = VKATTN_ERROR_OUT_OF_RANGE,
                        SHAPE = VKATTN_ERROR_SHAPE_MISMATCH;
    static const char *const names[] = {"args->src", "args->dst"};
    const tensor_case cases[] = {
        /* D7: 2^64 - 16 + 64 bytes wrapped to 48 and passed */
        OFF(0, UINT64_MAX - 15, RANGE, "args->src"),
        OFF(0, P31, RANGE, "args->src"),
        OFF(0, P32, RANGE, "args->src"),
        OFF(0, P63, RANGE, "args->src"),
        OFF(0, UINT64_MAX, BAD, "args->src.offset"),
        OFF(1, UINT64_MAX - 15, RANGE, "args->dst"),
        OFF(1, P63, RANGE, "args->dst"),
        /* the element count (convert's count) */
        SHAPE(0, 0, 0, BAD, "args->src.shape[0] is 0"),
        SHAPE(0, 0, 1, SHAPE, "args->dst has 16"),
        SHAPE(0, 0, P31, RANGE, "args->src"),
        SHAPE(0, 0, P32, RANGE, "args->src"),
        SHAPE(0, 0, P62, RANGE, "args->src"),
        SHAPE(0, 0, I64MAX, RANGE, "args->src"),
        SHAPE(0, 0, P63, BAD, "args->src.shape[0]"), /* negative as int64 */
        SHAPE(1, 0, UINT64_MAX, BAD, "args->dst.shape[0] is -1"),
        STRIDE(0, 0, P62 - 4, RANGE, "args->src"),
        STRIDE(0, 0, I64MAX, RANGE, "args->src"),
        STRIDE(1, 0, UINT64_MAX, BAD, "args->dst.strides[0] is -1"),
        /* D9 */
        SCALES("args->scale"),
    };
    vkattn_buffer *in = test_buffer_with(ctx, NULL, 256), *out = limits_sentinel_buffer(ctx, 256);
    int64_t n = 16;
    vkattn_tensor good[] = {vkattn_tensor_make(in, 0, VKATTN_DTYPE_F32, 1, &n),
                            vkattn_tensor_make(out, 0, VKATTN_DTYPE_F32, 1, &n)};
    int bad = run_tensor_cases(ctx, "convert", names, good, 2, out, call_convert, cases,
                               sizeof cases / sizeof cases[0]);
    /* shape products past int64 (two dimensions of 2^32 each) */
    vkattn_convert_args a = {good[0], good[1], 1.0f};
    a.src.rank = 2;
    a.src.shape[0] = a.src.shape[1] = (int64_t)P32;
    a.src.strides[0] = a.src.strides[1] = 0;
    bad += limits_expect("convert: args->src.shape = {2^32, 2^32}", vkattn_convert(ctx, &a), RANGE,
                         "args->src.shape", vkattn_context_last_error(ctx));
    bad += limits_sentinel_intact(ctx, out, "convert: 2^64 elements");
    assert_int_equal(vkattn_tensor_numel(&a.src), -1);
    a.src.rank = 4;
    a.src.shape[2] = a.src.shape[3] = (int64_t)P32;
    assert_int_equal(vkattn_tensor_numel(&a.src), -1);
    int64_t huge[4] = {(int64_t)P32, (int64_t)P32, 2, 2};
    vkattn_tensor made = vkattn_tensor_make(in, 0, VKATTN_DTYPE_F32, 4, huge);
    assert_int_equal(vkattn_tensor_numel(&made), -1);
    a.src = made;
    bad += limits_expect("convert: made {2^32, 2^32, 2, 2}", vkattn_convert(ctx, &a), RANGE,
                         "args->src", vkattn_context_last_error(ctx));
    TEST_DESTROY_BUFFERS(in, out);
    if (bad)
        fail_msg("%d convert cases misbehaved", bad);
}

/* ----------------------------------------------------------- attention */

static vkattn_result call_attention(vkattn_context *ctx, vkattn_tensor *t, float scale)
{
    vkattn_attention_args a = {.q = t[0], .k = t[1], .v = t[2], .out = t[3], .scale = scale};
    return vkattn_attention(ctx, &a);
}

void test_attention_limits(void **state)
{
    test_gpu *g = *state;
    vkattn_context *ctx = g->ctx;
    const vkattn_result BAD = VKATTN_ERROR_INVALID_ARGUMENT, RANGE = VKATTN_ERROR_OUT_OF_RANGE,
                        SHAPE = VKATTN_ERROR_SHAPE_MISMATCH;
    static const char *const names[] = {"args->q", "args->k", "args->v", "args->out"};
    const tensor_case cases[] = {
        /* D7: a batch stride of 2^62 - 4 spanned 2^64 + ... bytes and passed */
        STRIDE(0, 0, P62 - 4, RANGE, "args->q"),
        STRIDE(1, 1, P62 - 4, RANGE, "args->k"),
        STRIDE(3, 2, P62 - 4, RANGE, "args->out"),
        STRIDE(0, 0, I64MAX - 3, RANGE, "args->q"),
        OFF(0, UINT64_MAX - 15, RANGE, "args->q"),
        OFF(2, P63, RANGE, "args->v"),
        OFF(3, UINT64_MAX - 15, RANGE, "args->out"),
        OFF(3, P32, RANGE, "args->out"),
        /* dimensions: batch, heads, lengths, head dim */
        SHAPE(0, 0, 0, BAD, "args->q.shape[0]"),
        SHAPE(0, 0, 3, SHAPE, "args->q.shape[0]"),
        SHAPE(0, 0, P31, ANY_ERROR, "args->q.shape[0]"),
        SHAPE(0, 0, P32, ANY_ERROR, "args->q.shape[0]"),
        SHAPE(0, 1, P31, ANY_ERROR, "args->q.shape[1]"),
        SHAPE(0, 2, P32, ANY_ERROR, "args->q.shape[2]"),
        SHAPE(1, 2, P63, ANY_ERROR, "args->k.shape[2]"),
        SHAPE(1, 2, I64MAX, ANY_ERROR, "args->k.shape[2]"),
        SHAPE(0, 3, 1, ANY_ERROR, "args->q.shape[3]"),
        SHAPE(0, 3, P32, ANY_ERROR, "args->q.shape[3]"),
        SHAPE(3, 0, UINT64_MAX, ANY_ERROR, "args->out.shape[0]"),
        /* D9 */
        SCALES("args->scale"),
    };
    int64_t shape[4] = {2, 2, 4, 8};
    vkattn_buffer *in = test_buffer_with(ctx, NULL, 3 * 512),
                  *out = limits_sentinel_buffer(ctx, 512);
    vkattn_tensor good[] = {vkattn_tensor_make(in, 0, VKATTN_DTYPE_F32, 4, shape),
                            vkattn_tensor_make(in, 512, VKATTN_DTYPE_F32, 4, shape),
                            vkattn_tensor_make(in, 1024, VKATTN_DTYPE_F32, 4, shape),
                            vkattn_tensor_make(out, 0, VKATTN_DTYPE_F32, 4, shape)};
    int bad = run_tensor_cases(ctx, "attention", names, good, 4, out, call_attention, cases,
                               sizeof cases / sizeof cases[0]);
    TEST_DESTROY_BUFFERS(in, out);
    if (bad)
        fail_msg("%d attention cases misbehaved", bad);
}

/* -------------------------------------------------------------- linear */

static vkattn_result call_linear(vkattn_context *ctx, vkattn_tensor *t, float scale)
{
    (void)scale;
    vkattn_linear_args a = {.x = t[0], .w = t[1], .y = t[2]};
    return vkattn_linear(ctx, &a);
}

void test_linear_limits(void **state)
{
    test_gpu *g = *state;
    vkattn_context *ctx = g->ctx;
    const vkattn_result BAD = VKATTN_ERROR_INVALID_ARGUMENT, RANGE = VKATTN_ERROR_OUT_OF_RANGE;
    static const char *const names[] = {"args->x", "args->w", "args->y"};
    const tensor_case cases[] = {
        OFF(0, UINT64_MAX - 15, RANGE, "args->x"),
        OFF(1, P63, RANGE, "args->w"),
        OFF(2, UINT64_MAX - 15, RANGE, "args->y"),
        STRIDE(0, 0, P62 - 4, RANGE, "args->x"),
        STRIDE(2, 0, P62 - 4, RANGE, "args->y"),
        /* M, K and N */
        SHAPE(0, 0, 0, BAD, "args->x.shape[0]"),
        SHAPE(0, 0, P31, RANGE, "args->x"),
        SHAPE(0, 0, P32, RANGE, "args->x"),
        SHAPE(0, 0, P63, ANY_ERROR, "args->x.shape[0]"),
        SHAPE(0, 1, P32, RANGE, "args->x"),
        SHAPE(1, 0, P32, RANGE, "args->w"),
        SHAPE(1, 1, I64MAX, RANGE, "args->w"),
        SHAPE(2, 1, UINT64_MAX, ANY_ERROR, "args->y.shape[1]"),
    };
    int64_t xs[2] = {4, 8}, ws[2] = {8, 8};
    vkattn_buffer *in = test_buffer_with(ctx, NULL, 512), *out = limits_sentinel_buffer(ctx, 128);
    vkattn_tensor good[] = {vkattn_tensor_make(in, 0, VKATTN_DTYPE_F32, 2, xs),
                            vkattn_tensor_make(in, 256, VKATTN_DTYPE_F32, 2, ws),
                            vkattn_tensor_make(out, 0, VKATTN_DTYPE_F32, 2, xs)};
    int bad = run_tensor_cases(ctx, "linear", names, good, 3, out, call_linear, cases,
                               sizeof cases / sizeof cases[0]);
    TEST_DESTROY_BUFFERS(in, out);
    if (bad)
        fail_msg("%d linear cases misbehaved", bad);
}
