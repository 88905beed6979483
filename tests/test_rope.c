/* vkattn_rope against the CPU reference (vkattn_ref_rope), element by
 * element: both pairings, partial rotary, linear and Llama 3 scaling,
 * positions from a tensor and from an offset (past 32K up to the largest),
 * f32 and f16, in place and out of place, [B, H, T, D] and [B, T, H, D]
 * storage, GQA-like shapes, tensors beyond one binding; then the refusals,
 * each named and leaving the output as it was.
 * Tolerance per element: f32 |got - want| <= 1e-5 (1 + |want|) (the GPU
 * combines fp32 cos/sin tables: a few ulp); f16 1e-3 |want| + 1e-5 (both
 * round to f16, which may differ by one ulp of the result). */
#include "test_policy.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>

/* test_rope_threads.c: recording from several threads at once. */
int test_rope_threads_run(void);

enum { POS_OFFSET = 0, POS_TENSOR = 1 };

typedef struct rope_case {
    int64_t B, H, T, D;
    vkattn_dtype dtype;
    vkattn_rope_desc rope;
    int positions;            /* POS_OFFSET or POS_TENSOR */
    uint32_t position_offset; /* also the base of tensor positions (see below) */
    bool in_place, bthd;      /* bthd: [B, T, H, D] storage */
    int64_t elem_offset;      /* of x (and out) in its buffer, in elements */
    bool record;              /* vkattn_cmd_rope into the context's command buffer */
} rope_case;

static vkattn_rope_desc neox(float theta) { return (vkattn_rope_desc){.theta = theta}; }

static vkattn_rope_desc llama3(void)
{
    return (vkattn_rope_desc){.theta = 500000.0f,
                              .scaling = VKATTN_ROPE_SCALING_LLAMA3,
                              .factor = 8.0f,
                              .low_freq_factor = 1.0f,
                              .high_freq_factor = 4.0f,
                              .original_max_positions = 8192};
}

/* Strides of the case's layout, in elements. */
static void layout_strides(const rope_case *c, int64_t s[4])
{
    if (c->bthd) {
        s[0] = c->T * c->H * c->D, s[1] = c->D, s[2] = c->H * c->D, s[3] = 1;
    } else {
        s[0] = c->H * c->T * c->D, s[1] = c->T * c->D, s[2] = c->D, s[3] = 1;
    }
}

/* Positions of the case: the offset plus a spread over the whole range,
 * with the largest position and ones near a million in every batch row. */
static int32_t *make_positions(const rope_case *c, test_rng *rng)
{
    int32_t *p = test_alloc((size_t)(c->B * c->T) * sizeof *p);
    for (int64_t b = 0; b < c->B; b++)
        for (int64_t t = 0; t < c->T; t++) {
            int64_t v;
            switch (t % 4) {
            case 0:
                v = VKATTN_ROPE_MAX_POSITION - t;
                break;
            case 1:
                v = 1000000 + 37 * t + b;
                break;
            case 2:
                v = (int64_t)c->position_offset + t;
                break;
            default:
                v = test_rng_below(rng, VKATTN_ROPE_MAX_POSITION + 1u);
                break;
            }
            p[b * c->T + t] = (int32_t)v;
        }
    return p;
}

/* Element-wise comparison of two whole buffers of dtype dt as floats: the
 * tensor's elements under the tolerance, the rest (sentinels) exactly. */
static void compare(const rope_case *c, const void *got, const void *want, size_t n,
                    const char *what)
{
    for (size_t i = 0; i < n; i++) {
        float g = test_load(got, c->dtype, i), w = test_load(want, c->dtype, i);
        /* f32: a few ulps; f16 and bf16: one unit in their last place */
        double tol = c->dtype == VKATTN_DTYPE_F32    ? 1e-5 * (1.0 + fabs(w))
                     : c->dtype == VKATTN_DTYPE_BF16 ? 8e-3 * fabs(w) + 1e-5
                                                     : 1e-3 * fabs(w) + 1e-5;
        if (!(fabs((double)g - w) <= tol))
            fail_msg("%s (B %lld H %lld T %lld D %lld R %u %s%s%s): element %zu is %.8g, "
                     "expected %.8g",
                     what, (long long)c->B, (long long)c->H, (long long)c->T, (long long)c->D,
                     c->rope.dims, vkattn_dtype_name(c->dtype), c->in_place ? " in place" : "",
                     c->bthd ? " BTHD" : "", i, g, w);
    }
}

static void run_case(vkattn_context *ctx, const rope_case *c, const char *what)
{
    size_t es = vkattn_dtype_size(c->dtype);
    size_t numel = (size_t)(c->B * c->H * c->T * c->D);
    size_t n = numel + (size_t)c->elem_offset + 3; /* sentinels after too */
    test_rng rng = test_rng_seed((uint64_t)(c->B * 131 + c->H * 31 + c->T * 7 + c->D));
    uint8_t *xh = test_alloc(n * es), *oh = test_alloc(n * es), *got = test_alloc(n * es);
    for (size_t i = 0; i < n; i++) {
        test_store(xh, c->dtype, i, test_rng_uniform(&rng, -1.0f, 1.0f));
        test_store(oh, c->dtype, i, -777.0f);
    }
    int64_t shape[4] = {c->B, c->H, c->T, c->D}, strides[4];
    layout_strides(c, strides);
    int32_t *pos = c->positions == POS_TENSOR ? make_positions(c, &rng) : NULL;

    vkattn_buffer *bx = test_buffer_with(ctx, xh, n * es);
    vkattn_buffer *bo = c->in_place ? NULL : test_buffer_with(ctx, oh, n * es);
    vkattn_buffer *bp =
        pos ? test_buffer_with(ctx, pos, (uint64_t)(c->B * c->T) * sizeof *pos) : NULL;
    vkattn_rope_args a;
    memset(&a, 0, sizeof a);
    a.x = vkattn_tensor_make(bx, (uint64_t)c->elem_offset * es, c->dtype, 4, shape);
    memcpy(a.x.strides, strides, sizeof strides);
    if (!c->in_place) {
        a.out = a.x;
        a.out.buffer = bo;
    } else if (c->elem_offset % 2) {
        a.out = a.x; /* in place by naming x as out, not by leaving out empty */
    }
    a.rope = c->rope;
    a.position_offset = c->position_offset;
    if (pos) {
        int64_t pshape[2] = {c->B, c->T};
        a.positions = vkattn_tensor_make(bp, 0, VKATTN_DTYPE_I32, 2, pshape);
    }
    if (c->record) {
        VkCommandBuffer cmd;
        TEST_OK(ctx, vkattn_commands_begin(ctx, &cmd));
        TEST_OK(ctx, vkattn_cmd_rope(ctx, cmd, &a));
        TEST_OK(ctx, vkattn_commands_submit(ctx));
    } else {
        TEST_OK(ctx, vkattn_rope(ctx, &a));
    }
    TEST_OK(ctx, vkattn_buffer_download(c->in_place ? bx : bo, 0, got, n * es));

    /* the reference on host copies with the same layout */
    uint8_t *want = c->in_place ? xh : oh;
    vkattn_ref_rope_args r;
    memset(&r, 0, sizeof r);
    r.x = vkattn_host_tensor_make(xh + c->elem_offset * es, c->dtype, 4, shape);
    memcpy(r.x.strides, strides, sizeof strides);
    r.out = r.x;
    r.out.data = want + c->elem_offset * es;
    r.rope = c->rope;
    r.position_offset = c->position_offset;
    if (pos) {
        int64_t pshape[2] = {c->B, c->T};
        r.positions = vkattn_host_tensor_make(pos, VKATTN_DTYPE_I32, 2, pshape);
    }
    char err[512];
    if (vkattn_ref_rope(&r, err, sizeof err) != VKATTN_SUCCESS)
        fail_msg("reference: %s", err);
    compare(c, got, want, n, what);
    TEST_DESTROY_BUFFERS(bx, bo, bp);
    free(xh), free(oh), free(got), free(pos);
}

/* The cases every policy runs. */
static void test_styles_and_scalings(void **state)
{
    test_gpu *g = *state;
    const vkattn_dtype dts[3] = {VKATTN_DTYPE_F32, VKATTN_DTYPE_F16, VKATTN_DTYPE_BF16};
    for (int d = 0; d < 3; d++) {
        rope_case c = {.B = 2, .H = 4, .T = 9, .D = 64, .dtype = dts[d], .rope = neox(10000.0f)};
        run_case(g->ctx, &c, "NEOX");
        c.rope.style = VKATTN_ROPE_GPTJ;
        c.in_place = true;
        c.elem_offset = 3;
        run_case(g->ctx, &c, "GPTJ in place");
        c.rope = neox(10000.0f);
        c.rope.scaling = VKATTN_ROPE_SCALING_LINEAR;
        c.rope.factor = 4.0f;
        c.in_place = false;
        c.position_offset = 100;
        run_case(g->ctx, &c, "LINEAR");
        c.rope = llama3();
        c.D = 128;
        c.position_offset = 40000;
        run_case(g->ctx, &c, "LLAMA3 at 40000");
        c.rope.style = VKATTN_ROPE_GPTJ;
        c.in_place = true;
        c.record = true;
        run_case(g->ctx, &c, "LLAMA3 GPTJ in place, recorded");
    }
}

/* R < D: dims R..D-1 copied (out of place) or left alone (in place), odd
 * D included. */
static void test_partial_rotary(void **state)
{
    test_gpu *g = *state;
    const int64_t dims[][2] = {{80, 32}, {9, 6}, {96, 64}, {16, 2}};
    for (int d = 0; d < 2; d++)
        for (size_t i = 0; i < sizeof dims / sizeof dims[0]; i++)
            for (int ip = 0; ip < 2; ip++) {
                rope_case c = {.B = 2,
                               .H = 3,
                               .T = 5,
                               .D = dims[i][0],
                               .dtype = d ? VKATTN_DTYPE_F16 : VKATTN_DTYPE_F32,
                               .rope = neox(10000.0f),
                               .in_place = ip,
                               .elem_offset = i % 2,
                               .position_offset = 7};
                c.rope.dims = (uint32_t)dims[i][1];
                c.rope.style = i % 2 ? VKATTN_ROPE_GPTJ : VKATTN_ROPE_NEOX;
                run_case(g->ctx, &c, "partial rotary");
            }
}

/* Positions from a tensor: up to 16777215, around a million, past 32K. */
static void test_positions(void **state)
{
    test_gpu *g = *state;
    for (int d = 0; d < 2; d++)
        for (int bthd = 0; bthd < 2; bthd++) {
            rope_case c = {.B = 3,
                           .H = 2,
                           .T = 13,
                           .D = 128,
                           .dtype = d ? VKATTN_DTYPE_F16 : VKATTN_DTYPE_F32,
                           .rope = llama3(),
                           .positions = POS_TENSOR,
                           .position_offset = 40000,
                           .bthd = bthd,
                           .in_place = bthd};
            run_case(g->ctx, &c, "positions tensor");
            c.rope = neox(10000.0f);
            c.positions = POS_OFFSET;
            c.position_offset = VKATTN_ROPE_MAX_POSITION - 12; /* the last at the maximum */
            run_case(g->ctx, &c, "offset up to the maximum");
        }
}

/* GQA-like shapes: H 1..8, D 8..256, T 1..70, both layouts. */
static void test_shapes(void **state)
{
    test_gpu *g = *state;
    const int64_t shapes[][4] = {{1, 1, 1, 8},   {2, 8, 3, 16},  {1, 2, 70, 256}, {3, 4, 17, 128},
                                 {2, 1, 33, 96}, {1, 8, 70, 64}, {4, 3, 2, 24},   {1, 5, 41, 40}};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        rope_case c = {.B = shapes[i][0],
                       .H = shapes[i][1],
                       .T = shapes[i][2],
                       .D = shapes[i][3],
                       .dtype = i % 2 ? VKATTN_DTYPE_F16 : VKATTN_DTYPE_F32,
                       .rope = i % 3 ? neox(10000.0f) : llama3(),
                       .bthd = i % 2 == 0,
                       .in_place = i % 4 == 1,
                       .elem_offset = (int64_t)(i % 3),
                       .position_offset = (uint32_t)(i * 5000)};
        c.rope.style = i % 4 >= 2 ? VKATTN_ROPE_GPTJ : VKATTN_ROPE_NEOX;
        run_case(g->ctx, &c, "GQA-like shape");
    }
}

/* A tensor larger than one storage binding (lavapipe: 128 MiB), in place,
 * so the op cuts it into boxes. */
static void test_beyond_one_binding(void **state)
{
    test_gpu *g = *state;
    test_binding_range_at_most(g->ctx, 128u << 20);
    rope_case c = {.B = 3,
                   .H = 2,
                   .T = 6000,
                   .D = 1000,
                   .dtype = VKATTN_DTYPE_F32,
                   .rope = neox(10000.0f),
                   .in_place = true,
                   .position_offset = 5};
    c.rope.dims = 64;
    run_case(g->ctx, &c, "beyond one binding");
}

/* Refusals: each named, out left as it was. */
static void test_refusals(void **state)
{
    test_gpu *g = *state;
    vkattn_context *ctx = g->ctx;
    float host[256]; /* the tensors take the first 192 */
    for (size_t i = 0; i < 256; i++)
        host[i] = -777.0f;
    int64_t shape[4] = {2, 4, 3, 8}, pshape[2] = {2, 3}, bad_pshape[2] = {2, 4},
            odd_shape[4] = {2, 4, 2, 8};
    vkattn_buffer *bx = test_buffer_with(ctx, host, sizeof host);
    vkattn_buffer *bo = test_buffer_with(ctx, host, sizeof host);
    vkattn_buffer *bp = test_buffer_with(ctx, host, 64);
    vkattn_rope_args good, a;
    memset(&good, 0, sizeof good);
    good.x = vkattn_tensor_make(bx, 0, VKATTN_DTYPE_F32, 4, shape);
    good.out = vkattn_tensor_make(bo, 0, VKATTN_DTYPE_F32, 4, shape);
    good.rope = neox(10000.0f);
    const vkattn_result inv = VKATTN_ERROR_INVALID_ARGUMENT;
#define REFUSED(change, code, needle) \
    TEST_FAILS_CHANGED(ctx, a, good, change, code, needle, vkattn_rope(ctx, &a))
    REFUSED(a.rope.dims = 3, inv, "args->rope.dims is 3");
    REFUSED(a.rope.dims = 10, inv, "args->rope.dims is 10");
    REFUSED(a.rope.theta = 0.0f, inv, "args->rope.theta is 0");
    REFUSED(a.rope.theta = -1.0f, inv, "args->rope.theta is -1");
    REFUSED(a.rope.theta = NAN, inv, "args->rope.theta is nan");
    REFUSED((a.rope.scaling = VKATTN_ROPE_SCALING_LINEAR, a.rope.factor = NAN), inv,
            "args->rope.factor is nan");
    REFUSED((a.rope = llama3(), a.rope.high_freq_factor = 1.0f), inv, "args->rope.low_freq_factor");
    REFUSED(a.rope.reserved[7] = 2.0f, inv, "args->rope.reserved[7]");
    REFUSED(a.positions = vkattn_tensor_make(bp, 0, VKATTN_DTYPE_I32, 2, bad_pshape),
            VKATTN_ERROR_SHAPE_MISMATCH, "args->positions.shape");
    REFUSED(a.positions = vkattn_tensor_make(bp, 0, VKATTN_DTYPE_F32, 2, pshape),
            VKATTN_ERROR_UNSUPPORTED_DTYPE, "args->positions.dtype");
    REFUSED(a.positions = vkattn_tensor_make(bp, 0, VKATTN_DTYPE_I32, 1, pshape), inv,
            "args->positions.rank");
    REFUSED(a.x.dtype = VKATTN_DTYPE_I32, VKATTN_ERROR_UNSUPPORTED_DTYPE, "args->x.dtype");
    REFUSED(a.x.dtype = VKATTN_DTYPE_U8, VKATTN_ERROR_UNSUPPORTED_DTYPE, "args->x.dtype");
    REFUSED(a.out = vkattn_tensor_make(bo, 0, VKATTN_DTYPE_F32, 4, odd_shape),
            VKATTN_ERROR_SHAPE_MISMATCH, "args->out.shape[2]");
    REFUSED(a.out.dtype = VKATTN_DTYPE_F16, VKATTN_ERROR_SHAPE_MISMATCH, "args->out.dtype");
    REFUSED(a.x.rank = 3, inv, "args->x.rank");
    REFUSED(a.x.strides[3] = 2, inv, "args->x.strides[3]");
    REFUSED(a.position_offset = VKATTN_ROPE_MAX_POSITION - 1, inv, "args->position_offset");
    REFUSED((a.out.buffer = bx, a.out.offset = 8), inv, "overlaps args->x");
    TEST_FAILS(ctx, inv, "args is NULL", vkattn_rope(ctx, NULL));
    assert_int_equal(vkattn_rope(NULL, &good), inv);
    TEST_FAILS(ctx, inv, "vkattn_cmd_rope: cmd is NULL",
               vkattn_cmd_rope(ctx, VK_NULL_HANDLE, &good));
    VkCommandBuffer cmd;
    TEST_OK(ctx, vkattn_commands_begin(ctx, &cmd));
    TEST_FAILS_CHANGED(ctx, a, good, a.rope.dims = 7, inv, "args->rope.dims is 7",
                       vkattn_cmd_rope(ctx, cmd, &a));
    vkattn_commands_discard(ctx);
#undef REFUSED
    float back[256];
    TEST_OK(ctx, vkattn_buffer_download(bo, 0, back, sizeof back));
    assert_memory_equal(back, host, sizeof back);
    TEST_OK(ctx, vkattn_buffer_download(bx, 0, back, sizeof back));
    assert_memory_equal(back, host, sizeof back);
    TEST_DESTROY_BUFFERS(bx, bo, bp);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_styles_and_scalings),
        cmocka_unit_test(test_partial_rotary),
        cmocka_unit_test(test_positions),
        cmocka_unit_test(test_shapes),
        cmocka_unit_test(test_refusals),
    };
    /* the rope kernel is the same under every policy: the default and the
     * one with both flags show it does not depend on them */
    int failed = test_policy_run_group("rope", 0, tests, sizeof tests / sizeof tests[0]);
    failed += test_policy_run_group("rope", 3, tests, sizeof tests / sizeof tests[0]);
    const struct CMUnitTest large[] = {cmocka_unit_test(test_beyond_one_binding)};
    failed += test_policy_run_group("rope_large", 0, large, 1);
    failed += test_rope_threads_run();
    return failed;
}
