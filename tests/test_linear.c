/* The linear op (y = x W^T + b) and its head-split segmented form against
 * the CPU reference, under the four kernel policies (texel or storage inputs,
 * subgroup or shared-memory kernels): odd shapes, dtypes, strides and offsets,
 * GEMV shapes, 3-segment head splits into strided [B, H, T, D] tensors,
 * tensors larger than one binding, and every validation error. Outputs are
 * checked element by element, and every byte around them must be untouched. */
#include "test_linear_util.h"
#include "test_policy.h"
#include "test_util.h"

#include "ops/linear/linear.h"

#include <stdio.h>
#include <stdlib.h>

/* ------------------------------------------------------------- helpers */

/* Expected contents of one output buffer: the elements written and their
 * reference values. Everything else must keep its initial bytes. */
typedef struct out_expect {
    vkattn_buffer *buffer;
    uint8_t *init;
    size_t bytes;
    vkattn_dtype dt;
    size_t *idx;
    float *want;
    size_t n, cap;
} out_expect;

static vkattn_buffer *out_init(out_expect *e, vkattn_context *ctx, size_t bytes, vkattn_dtype dt,
                               size_t cap)
{
    memset(e, 0, sizeof *e);
    e->bytes = bytes;
    e->dt = dt;
    e->init = test_alloc(bytes);
    for (size_t i = 0; i < bytes; i++)
        e->init[i] = (uint8_t)(0x3C ^ (i * 7)); /* finite values in both dtypes */
    e->buffer = test_buffer_with(ctx, e->init, bytes);
    e->cap = cap;
    e->idx = test_alloc(cap * sizeof *e->idx);
    e->want = test_alloc(cap * sizeof *e->want);
    return e->buffer;
}

static void out_add(out_expect *e, int64_t idx, float want)
{
    assert_true(e->n < e->cap);
    e->idx[e->n] = (size_t)idx;
    e->want[e->n++] = want;
}

static void out_check(out_expect *e, vkattn_context *ctx, const char *what)
{
    uint8_t *got = test_alloc(e->bytes);
    TEST_OK(ctx, vkattn_buffer_download(e->buffer, 0, got, e->bytes));
    linear_check_written(got, e->init, e->bytes, e->dt, e->idx, e->want, e->n, what);
    vkattn_buffer_destroy(e->buffer);
    free(e->init);
    free(e->idx);
    free(e->want);
    free(got);
}

/* ------------------------------------------------------- one linear op */

typedef struct lin_case {
    int64_t B, T, N, K;
    bool rank3, bias;
    vkattn_dtype xdt, wdt;
    int64_t xpad, wpad, ypad;       /* extra elements per row */
    int64_t xoff, woff, boff, yoff; /* element offsets */
    bool internal;                  /* through vka_cmd_linear_segments (any element offset) */
} lin_case;

/* A tensor of `rows` rows of `cols` elements, row stride cols + pad, at
 * element offset off: the buffer and the host data (values as floats). */
static vkattn_buffer *upload_rows(vkattn_context *ctx, const float *v, int64_t rows, int64_t cols,
                                  int64_t pad, int64_t off, vkattn_dtype dt)
{
    size_t es = vkattn_dtype_size(dt), n = (size_t)(off + rows * (cols + pad));
    uint8_t *bytes = test_alloc(n * es);
    for (size_t i = 0; i < n; i++)
        test_store(bytes, dt, i, 1e30f); /* padding: must never be read */
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < cols; c++)
            test_store(bytes, dt, (size_t)(off + r * (cols + pad) + c), v[r * cols + c]);
    vkattn_buffer *b = test_buffer_with(ctx, bytes, n * es);
    free(bytes);
    return b;
}

static void run_case(vkattn_context *ctx, const lin_case *c, uint64_t seed)
{
    int64_t M = c->B * c->T, N = c->N, K = c->K;
    test_rng rng = test_rng_seed(seed);
    float *x = test_random_array(&rng, (size_t)(M * K), 1.0f, c->xdt);
    float *w = test_random_array(&rng, (size_t)(N * K), 1.0f, c->wdt);
    float *b = c->bias ? test_random_array(&rng, (size_t)N, 1.0f, c->wdt) : NULL;
    float *y = test_alloc((size_t)(M * N) * sizeof *y);
    linear_reference(x, w, b, y, M, N, K);

    vkattn_buffer *bx = upload_rows(ctx, x, M, K, c->xpad, c->xoff, c->xdt);
    vkattn_buffer *bw = upload_rows(ctx, w, N, K, c->wpad, c->woff, c->wdt);
    vkattn_buffer *bb = b ? upload_rows(ctx, b, 1, N, 0, c->boff, c->wdt) : NULL;
    out_expect e;
    size_t xes = vkattn_dtype_size(c->xdt), wes = vkattn_dtype_size(c->wdt);
    vkattn_buffer *by =
        out_init(&e, ctx, (size_t)(c->yoff + M * (N + c->ypad) + 3) * xes, c->xdt, (size_t)(M * N));
    for (int64_t m = 0; m < M; m++)
        for (int64_t n = 0; n < N; n++)
            out_add(&e, c->yoff + m * (N + c->ypad) + n, y[m * N + n]);

    int64_t xs = K + c->xpad, ys = N + c->ypad;
    vkattn_tensor tx, ty;
    if (c->rank3) {
        tx = vkattn_tensor_make(bx, (uint64_t)c->xoff * xes, c->xdt, 3, (int64_t[]){c->B, c->T, K});
        memcpy(tx.strides, (int64_t[]){c->T * xs, xs, 1}, 3 * sizeof(int64_t));
        ty = vkattn_tensor_make(by, (uint64_t)c->yoff * xes, c->xdt, 3, (int64_t[]){c->B, c->T, N});
        memcpy(ty.strides, (int64_t[]){c->T * ys, ys, 1}, 3 * sizeof(int64_t));
    } else {
        tx = vkattn_tensor_make(bx, (uint64_t)c->xoff * xes, c->xdt, 2, (int64_t[]){M, K});
        tx.strides[0] = xs;
        ty = vkattn_tensor_make(by, (uint64_t)c->yoff * xes, c->xdt, 2, (int64_t[]){M, N});
        ty.strides[0] = ys;
    }
    vkattn_tensor tw =
        vkattn_tensor_make(bw, (uint64_t)c->woff * wes, c->wdt, 2, (int64_t[]){N, K});
    tw.strides[0] = K + c->wpad;
    vkattn_tensor tb = {0};
    if (bb)
        tb = vkattn_tensor_make(bb, (uint64_t)c->boff * wes, c->wdt, 1, &N);

    char what[256];
    snprintf(what, sizeof what,
             "%s %lldx%lldx%lld (B %lld) x %s w %s bias %d pads %lld/%lld/%lld "
             "offsets %lld/%lld/%lld/%lld",
             c->internal ? "segments" : "linear", (long long)M, (long long)N, (long long)K,
             (long long)c->B, vkattn_dtype_name(c->xdt), vkattn_dtype_name(c->wdt), (int)c->bias,
             (long long)c->xpad, (long long)c->wpad, (long long)c->ypad, (long long)c->xoff,
             (long long)c->woff, (long long)c->boff, (long long)c->yoff);
    if (c->internal) {
        vka_linear_segments_args a = {tx, tw, tb, 1, {{(uint32_t)N, (uint32_t)N, {0}}}};
        vkattn_tensor *d = &a.segments[0].dst;
        *d = vkattn_tensor_make(by, (uint64_t)c->yoff * xes, c->xdt, 4,
                                (int64_t[]){c->B, 1, c->T, N});
        memcpy(d->strides, (int64_t[]){c->T * ys, 1, ys, 1}, 4 * sizeof(int64_t));
        VkCommandBuffer cmd;
        TEST_OK(ctx, vkattn_commands_begin(ctx, &cmd));
        TEST_OK(ctx, vka_cmd_linear_segments(ctx, cmd, &a));
        TEST_OK(ctx, vkattn_commands_submit(ctx));
    } else {
        vkattn_linear_args a = {tx, tw, tb, ty};
        TEST_OK(ctx, vkattn_linear(ctx, &a));
    }
    out_check(&e, ctx, what);
    TEST_DESTROY_BUFFERS(bx, bw, bb);
    free(x), free(w), free(b), free(y);
}

static const vkattn_dtype dtypes[2] = {VKATTN_DTYPE_F32, VKATTN_DTYPE_F16};
/* The bf16 grid: bf16 against f32 (x and w take each), and against f16. */
static const vkattn_dtype dtypes_bf16[2] = {VKATTN_DTYPE_BF16, VKATTN_DTYPE_F32};
static const vkattn_dtype dtypes_bf16_f16[2] = {VKATTN_DTYPE_F16, VKATTN_DTYPE_BF16};

/* Case i of a seeded grid over odd shapes: every M, N and K of the lists
 * appears with every dtype pair, rank 2 and 3, bias on and off, padded rows
 * and offsets. */
static lin_case grid_case(int i, test_rng *rng, const vkattn_dtype set[2])
{
    static const int64_t Ms[] = {1, 2, 3, 5, 8, 17, 64, 130};
    static const int64_t NKs[] = {1, 3, 8, 24, 100, 257};
    lin_case c = {0};
    int64_t M = Ms[i % 8];
    c.N = NKs[(i / 8 + i) % 6];
    c.K = NKs[(i / 8 * 5 + i * 2 + 1) % 6];
    c.rank3 = i % 3 == 0 && M % 2 == 0;
    c.B = c.rank3 ? 2 : 1;
    c.T = M / c.B;
    c.bias = i % 2 == 1;
    c.xdt = set[(i / 2) % 2];
    c.wdt = set[(i / 4) % 2];
    c.xpad = (int64_t)test_rng_below(rng, 3) * 4 * (i % 4 == 1);
    c.wpad = i % 5 == 2 ? 8 : 0;
    c.ypad = i % 5 == 0 ? 3 : 0;
    c.internal = i % 6 == 5;
    int64_t step_x = 16 / (int64_t)vkattn_dtype_size(c.xdt);
    int64_t step_w = 16 / (int64_t)vkattn_dtype_size(c.wdt);
    if (c.internal) { /* any element offset */
        c.xoff = test_rng_below(rng, 5);
        c.woff = test_rng_below(rng, 5);
        c.boff = test_rng_below(rng, 5);
        c.yoff = test_rng_below(rng, 5);
    } else if (i % 4 == 3) {
        c.xoff = step_x;
        c.woff = 2 * step_w;
        c.boff = step_w;
        c.yoff = step_x;
    }
    return c;
}

/* The form a grid case drives: each case belongs to one of the grid tests
 * below, which together run the whole grid. */
typedef enum grid_form { GRID_MATRIX, GRID_BATCHED, GRID_SEGMENTS } grid_form;

static void run_grid_of(test_gpu *g, grid_form form, const vkattn_dtype set[2])
{
    test_rng rng = test_rng_seed(2024);
    for (int i = 0; i < 48; i++) {
        lin_case c = grid_case(i, &rng, set);
        grid_form f = c.internal ? GRID_SEGMENTS : c.rank3 ? GRID_BATCHED : GRID_MATRIX;
        if (f == form)
            run_case(g->ctx, &c, (uint64_t)i + 1);
    }
}

static void run_grid(test_gpu *g, grid_form form) { run_grid_of(g, form, dtypes); }

/* The whole grid with bf16 operands: on the storage policies, and on the
 * subgroup+texel one (rgba32ui views of 8 bfloat16 a texel; the shared
 * family reads bf16 from storage, the very same kernels again). */
static void test_grid_bf16(void **state)
{
    for (int form = GRID_MATRIX; form <= GRID_SEGMENTS; form++) {
        run_grid_of(*state, (grid_form)form, dtypes_bf16);
        run_grid_of(*state, (grid_form)form, dtypes_bf16_f16);
    }
}

/* x [M, K] and y [M, N] through vkattn_linear */
static void test_grid_matrix(void **state) { run_grid(*state, GRID_MATRIX); }
/* x [B, T, K] and y [B, T, N] through vkattn_linear */
static void test_grid_batched(void **state) { run_grid(*state, GRID_BATCHED); }
/* one segment through vka_cmd_linear_segments, at any element offset */
static void test_grid_segments_any_offset(void **state) { run_grid(*state, GRID_SEGMENTS); }

/* Few rows (the GEMV kernels): M = 1..9 against aligned and odd K. */
static void test_gemv(void **state)
{
    test_gpu *g = *state;
    for (int i = 0; i < 12; i++) {
        lin_case c = {.B = 1, .T = 1 + i % 9, .N = i % 2 ? 300 : 66, .K = i % 3 ? 1000 : 517};
        c.xdt = dtypes[i % 2];
        c.wdt = dtypes[(i / 2) % 2];
        c.bias = i % 4 != 0;
        c.ypad = i % 5 == 1 ? 2 : 0;
        run_case(g->ctx, &c, 100 + (uint64_t)i);
    }
}

/* ------------------------------------------------- head-split segments */

typedef struct seg_layout {
    int64_t off;        /* element offset of dst[0, 0, 0, 0] */
    int64_t strides[4]; /* [B, H, T, D] */
} seg_layout;

/* A packed projection x [B, T, Dm] -> Q [B, Hq, T, D], K and V [B, Hkv, T, D],
 * Q in one buffer, K and V interleaved in another (rows [T][2][Hkv][D]), with
 * padded, unusual strides; each checked against the reference. */
static void check_segments(vkattn_context *ctx, int64_t B, int64_t T, int64_t Dm, int64_t Hq,
                           int64_t Hkv, int64_t D, vkattn_dtype xdt, vkattn_dtype wdt, bool bias,
                           uint64_t seed)
{
    int64_t M = B * T, N = (Hq + 2 * Hkv) * D;
    test_rng rng = test_rng_seed(seed);
    float *x = test_random_array(&rng, (size_t)(M * Dm), 1.0f, xdt);
    float *w = test_random_array(&rng, (size_t)(N * Dm), 1.0f, wdt);
    float *b = bias ? test_random_array(&rng, (size_t)N, 1.0f, wdt) : NULL;
    float *y = test_alloc((size_t)(M * N) * sizeof *y);
    linear_reference(x, w, b, y, M, N, Dm);
    vkattn_buffer *bx = upload_rows(ctx, x, M, Dm, 0, 0, xdt);
    vkattn_buffer *bw = upload_rows(ctx, w, N, Dm, 0, 0, wdt);
    vkattn_buffer *bb = b ? upload_rows(ctx, b, 1, N, 0, 0, wdt) : NULL;

    /* Q as [B, T, Hq, D + 1] (a padded head), batches 5 elements apart. */
    int64_t qd = D + 1;
    seg_layout lq = {3, {T * Hq * qd + 5, qd, Hq * qd, 1}};
    /* K and V rows interleaved: [B, T, 2, Hkv, D], V one head block later. */
    int64_t kvrow = 2 * Hkv * D + 1;
    seg_layout lk = {1, {T * kvrow + 2, D, kvrow, 1}};
    seg_layout lv = lk;
    lv.off += Hkv * D;
    size_t xes = vkattn_dtype_size(xdt);
    out_expect eq, ekv;
    out_init(&eq, ctx, (size_t)(lq.off + B * lq.strides[0] + 4) * xes, xdt, (size_t)(M * Hq * D));
    out_init(&ekv, ctx, (size_t)(lv.off + B * lk.strides[0] + 4) * xes, xdt,
             (size_t)(2 * M * Hkv * D));
    const seg_layout *lay[3] = {&lq, &lk, &lv};
    int64_t heads[3] = {Hq, Hkv, Hkv}, start[3] = {0, Hq * D, (Hq + Hkv) * D};
    vka_linear_segments_args a = {0};
    a.x = vkattn_tensor_make(bx, 0, xdt, 3, (int64_t[]){B, T, Dm});
    a.w = vkattn_tensor_make(bw, 0, wdt, 2, (int64_t[]){N, Dm});
    if (bb)
        a.b = vkattn_tensor_make(bb, 0, wdt, 1, &N);
    a.segment_count = 3;
    for (int s = 0; s < 3; s++) {
        out_expect *e = s == 0 ? &eq : &ekv;
        vka_linear_segment *sg = &a.segments[s];
        sg->columns = (uint32_t)(heads[s] * D);
        sg->head_dim = (uint32_t)D;
        sg->dst = vkattn_tensor_make(e->buffer, (uint64_t)lay[s]->off * xes, xdt, 4,
                                     (int64_t[]){B, heads[s], T, D});
        memcpy(sg->dst.strides, lay[s]->strides, sizeof lay[s]->strides);
        for (int64_t bi = 0; bi < B; bi++)
            for (int64_t h = 0; h < heads[s]; h++)
                for (int64_t t = 0; t < T; t++)
                    for (int64_t d = 0; d < D; d++)
                        out_add(e,
                                lay[s]->off + bi * lay[s]->strides[0] + h * lay[s]->strides[1] +
                                    t * lay[s]->strides[2] + d,
                                y[(bi * T + t) * N + start[s] + h * D + d]);
    }
    VkCommandBuffer cmd;
    TEST_OK(ctx, vkattn_commands_begin(ctx, &cmd));
    TEST_OK(ctx, vka_cmd_linear_segments(ctx, cmd, &a));
    TEST_OK(ctx, vkattn_commands_submit(ctx));
    char what[160];
    snprintf(what, sizeof what,
             "segments B %lld T %lld Dm %lld Hq %lld Hkv %lld D %lld x %s w %s: %s", (long long)B,
             (long long)T, (long long)Dm, (long long)Hq, (long long)Hkv, (long long)D,
             vkattn_dtype_name(xdt), vkattn_dtype_name(wdt), "Q");
    out_check(&eq, ctx, what);
    what[strlen(what) - 1] = 'K';
    strcat(what, "+V");
    out_check(&ekv, ctx, what);
    TEST_DESTROY_BUFFERS(bx, bw, bb);
    free(x), free(w), free(b), free(y);
}

static void test_segments(void **state)
{
    vkattn_context *ctx = ((test_gpu *)*state)->ctx;
    check_segments(ctx, 2, 37, 64, 4, 2, 8, VKATTN_DTYPE_F32, VKATTN_DTYPE_F32, true, 1);
    check_segments(ctx, 2, 37, 64, 4, 2, 8, VKATTN_DTYPE_F16, VKATTN_DTYPE_F16, true, 2);
    check_segments(ctx, 1, 20, 48, 2, 1, 16, VKATTN_DTYPE_F32, VKATTN_DTYPE_F16, false, 3);
    check_segments(ctx, 3, 1, 40, 4, 1, 8, VKATTN_DTYPE_F16, VKATTN_DTYPE_F32, true, 4); /* GEMV */
    /* odd head_dim: packed f16 words shared by heads, rows and segments */
    check_segments(ctx, 2, 5, 13, 3, 1, 3, VKATTN_DTYPE_F16, VKATTN_DTYPE_F16, true, 5);
    check_segments(ctx, 2, 19, 12, 2, 1, 5, VKATTN_DTYPE_F16, VKATTN_DTYPE_F32, true, 6);
}

/* ---------------------------------------------- larger than one window */

/* W, x and y each larger than maxStorageBufferRange: the op splits the work
 * into dispatches whose windows fit. Only where that range is small enough
 * to exceed cheaply (lavapipe: 128 MiB). */
static void test_larger_than_one_binding(void **state)
{
    test_gpu *g = *state;
    uint64_t range = test_binding_range_at_most(g->ctx, 128u << 20);
    int64_t floats = (int64_t)(range / 4);
    lin_case big_w = {.B = 1, .T = 3, .K = 4100, .N = floats / 4100 + 7, .bias = true};
    run_case(g->ctx, &big_w, 7001);
    lin_case big_x = {.B = 1, .T = floats / 1024 + 5, .K = 1024, .N = 8};
    run_case(g->ctx, &big_x, 7002);
    lin_case big_y = {.B = 1, .T = floats / 1024 + 5, .K = 4, .N = 1024, .bias = true};
    run_case(g->ctx, &big_y, 7003);
}

/* ------------------------------------------------------------- errors */

/* Every validation failure, with its code and the parameter it names;
 * nothing is recorded (vkattn_linear discards its command buffer). */
static void test_errors(void **state)
{
    vkattn_context *ctx = ((test_gpu *)*state)->ctx;
    const vkattn_dtype F32 = VKATTN_DTYPE_F32, F16 = VKATTN_DTYPE_F16;
    vkattn_buffer *buf = test_buffer_with(ctx, NULL, 1 << 16),
                  *other = test_buffer_with(ctx, NULL, 4096);
    /* x [4, 8] at 0, w [6, 8] at 256, b [6] at 512, y [4, 6] at 1024 */
    vkattn_linear_args ok = {
        vkattn_tensor_make(buf, 0, F32, 2, (int64_t[]){4, 8}),
        vkattn_tensor_make(buf, 256, F32, 2, (int64_t[]){6, 8}),
        vkattn_tensor_make(buf, 512, F32, 1, (int64_t[]){6}),
        vkattn_tensor_make(buf, 1024, F32, 2, (int64_t[]){4, 6}),
    };
    TEST_OK(ctx, vkattn_linear(ctx, &ok));
    vkattn_linear_args a;
#define CASE(code, needle, change) \
    TEST_FAILS_CHANGED(ctx, a, ok, change, code, needle, vkattn_linear(ctx, &a))
    const vkattn_result INV = VKATTN_ERROR_INVALID_ARGUMENT, SHAPE = VKATTN_ERROR_SHAPE_MISMATCH,
                        DT = VKATTN_ERROR_UNSUPPORTED_DTYPE;
    VkCommandBuffer cmd;
    TEST_OK(ctx, vkattn_commands_begin(ctx, &cmd));
    TEST_FAILS(ctx, INV, "cmd is NULL", vkattn_cmd_linear(ctx, VK_NULL_HANDLE, &ok));
    TEST_FAILS(ctx, INV, "args is NULL", vkattn_cmd_linear(ctx, cmd, NULL));
    vkattn_commands_discard(ctx);
    assert_int_equal(vkattn_cmd_linear(NULL, cmd, &ok), INV);
    CASE(INV, "args->w.buffer is NULL", a.w.buffer = NULL);
    CASE(DT, "args->x.dtype is u8", a.x.dtype = VKATTN_DTYPE_U8);
    CASE(DT, "args->y.dtype f16 differs from args->x.dtype f32", a.y.dtype = F16);
    CASE(DT, "args->b.dtype f16 differs from args->w.dtype f32", a.b.dtype = F16);
    CASE(DT, "args->w.dtype is u8", a.w.dtype = VKATTN_DTYPE_U8);
    CASE(INV, "args->x.rank is 1", a.x.rank = 1);
    CASE(SHAPE, "args->y.rank 3 differs from args->x.rank 2",
         a.y = vkattn_tensor_make(buf, 1024, F32, 3, (int64_t[]){1, 4, 6}));
    CASE(INV, "args->w.rank is 3",
         a.w = vkattn_tensor_make(buf, 256, F32, 3, (int64_t[]){1, 6, 8}));
    CASE(INV, "args->b.rank is 2", a.b = vkattn_tensor_make(buf, 512, F32, 2, (int64_t[]){1, 6}));
    CASE(SHAPE, "args->w.shape[1] is 7",
         a.w = vkattn_tensor_make(buf, 256, F32, 2, (int64_t[]){6, 7}));
    CASE(SHAPE, "args->b.shape[0] is 5", a.b.shape[0] = 5);
    CASE(SHAPE, "args->y.shape[1] is 5 but args->w.shape[0] (N) is 6", a.y.shape[1] = 5);
    CASE(SHAPE, "args->y.shape[0] is 3",
         a.y = vkattn_tensor_make(buf, 1024, F32, 2, (int64_t[]){3, 6}));
    CASE(INV, "args->y.strides[1] is 2", (a.y.strides[0] = 12, a.y.strides[1] = 2));
    CASE(INV, "args->x.strides[1] is 0", (a.x.strides[0] = 8, a.x.strides[1] = 0));
    CASE(INV, "args->x.offset 8 is not a multiple of 16", a.x.offset = 8);
    CASE(INV, "args->y.offset 1028 is not a multiple of 16", a.y.offset = 1028);
    CASE(INV, "args->x.offset 2 is not a multiple of the f32", a.x.offset = 2);
    CASE(INV, "args->x.shape[0] is 0", a.x.shape[0] = 0);
    CASE(INV, "args->y.strides[0] is -6", a.y.strides[0] = -6);
    CASE(VKATTN_ERROR_OUT_OF_RANGE, "args->x spans bytes", a.x.offset = (1 << 16) - 64);
    CASE(INV, "args->y (bytes 0..96) overlaps args->x (bytes 0..128)", a.y.offset = 0);
    CASE(INV, "args->y (bytes 256..352) overlaps args->w", a.y.offset = 256);
    CASE(INV, "args->y (bytes 512..608) overlaps args->b", a.y.offset = 512);
    CASE(INV, "args->y.strides[0] is 0 while args->y.shape[0] is",
         (a.y.strides[0] = 0, a.y.strides[1] = 1));
    /* the same bytes in another buffer are no overlap */
    a = ok;
    a.y.buffer = other;
    a.y.offset = 0;
    TEST_OK(ctx, vkattn_linear(ctx, &a));

    /* the segmented form: x [1, 4, 8], w [12, 8], two segments of 6 */
    vka_linear_segments_args s0 = {
        vkattn_tensor_make(buf, 0, F32, 3, (int64_t[]){1, 4, 8}),
        ok.w,
        {0},
        2,
        {{6, 3, vkattn_tensor_make(buf, 1024, F32, 4, (int64_t[]){1, 2, 4, 3})},
         {6, 2, vkattn_tensor_make(buf, 2048, F32, 4, (int64_t[]){1, 3, 4, 2})}}};
    s0.w.shape[0] = 12;
    vka_linear_segments_args s;
#define SEG_CASE(code, needle, change)                                        \
    do {                                                                      \
        s = s0;                                                               \
        change;                                                               \
        TEST_OK(ctx, vkattn_commands_begin(ctx, &cmd));                       \
        TEST_FAILS(ctx, code, needle, vka_cmd_linear_segments(ctx, cmd, &s)); \
        vkattn_commands_discard(ctx);                                         \
    } while (0)
    TEST_OK(ctx, vkattn_commands_begin(ctx, &cmd));
    TEST_OK(ctx, vka_cmd_linear_segments(ctx, cmd, &s0));
    TEST_OK(ctx, vkattn_commands_submit(ctx));
    SEG_CASE(INV, "args->segment_count is 0", s.segment_count = 0);
    SEG_CASE(INV, "args->segment_count is 4", s.segment_count = 4);
    SEG_CASE(INV, "args->segments[1]: head_dim 4 must divide columns 6",
             s.segments[1].head_dim = 4);
    SEG_CASE(INV, "args->segments[0]: head_dim 0", s.segments[0].head_dim = 0);
    SEG_CASE(SHAPE, "the segments' columns add up to 6 but args->w.shape[0] (N) is 12",
             s.segment_count = 1);
    SEG_CASE(SHAPE, "args->segments[1].dst.shape[1] is 3 but the segment's heads",
             s.segments[1].head_dim = 3);
    SEG_CASE(SHAPE, "args->segments[0].dst.shape[2] is 4 but the rows per batch of args->x is 2",
             s.x = vkattn_tensor_make(buf, 0, F32, 3, (int64_t[]){1, 2, 8}));
    SEG_CASE(SHAPE, "args->segments[1].dst.shape[0] is 1 but the batch of args->x is 2",
             (s.x = vkattn_tensor_make(buf, 0, F32, 3, (int64_t[]){2, 4, 8}),
              s.segments[0].dst.shape[0] = 2));
    SEG_CASE(INV, "args->segments[1].dst.rank is 3", s.segments[1].dst.rank = 3);
    SEG_CASE(DT, "args->segments[0].dst.dtype f16 differs", s.segments[0].dst.dtype = F16);
    SEG_CASE(INV, "args->segments[1].dst.strides[3] 1 makes elements overlap",
             memcpy(s.segments[1].dst.strides, (int64_t[]){24, 1, 6, 1}, 4 * sizeof(int64_t)));
    SEG_CASE(INV, "args->segments[1].dst (bytes 0..96) overlaps args->x",
             s.segments[1].dst.offset = 0);
    vkattn_buffer_destroy(buf);
    vkattn_buffer_destroy(other);
#undef CASE
#undef SEG_CASE
}

/* -------------------------------------------------------------- groups */

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_grid_matrix),
        cmocka_unit_test(test_grid_batched),
        cmocka_unit_test(test_grid_segments_any_offset),
        cmocka_unit_test(test_gemv),
        cmocka_unit_test(test_segments),
    };
    /* Windows are chunked by the storage limits in these groups (lavapipe's
     * texel windows are 16x larger), so the big cases run there only. */
    const struct CMUnitTest storage_tests[] = {
        cmocka_unit_test(test_grid_matrix),
        cmocka_unit_test(test_grid_batched),
        cmocka_unit_test(test_grid_segments_any_offset),
        cmocka_unit_test(test_gemv),
        cmocka_unit_test(test_segments),
        cmocka_unit_test(test_grid_bf16),
        cmocka_unit_test(test_larger_than_one_binding),
    };
    const struct CMUnitTest texel_subgroup_tests[] = {
        cmocka_unit_test(test_grid_matrix),
        cmocka_unit_test(test_grid_batched),
        cmocka_unit_test(test_grid_segments_any_offset),
        cmocka_unit_test(test_gemv),
        cmocka_unit_test(test_segments),
        cmocka_unit_test(test_grid_bf16),
    };
    const struct CMUnitTest once[] = {
        cmocka_unit_test(test_errors),
    };
    int failed =
        cmocka_run_group_tests_name("linear_errors", once, test_gpu_setup, test_gpu_teardown);
    for (uint32_t p = 0; p < TEST_POLICY_COUNT; p++) {
        bool storage = test_policies[p].flags & VKATTN_CONTEXT_NO_TEXEL_BUFFERS;
        if (p == TEST_POLICY_COOPMAT) /* the grids and bf16 (windows: the storage groups') */
            failed +=
                test_policy_run_group("linear", p, texel_subgroup_tests,
                                      sizeof texel_subgroup_tests / sizeof texel_subgroup_tests[0]);
        else if (storage)
            failed += test_policy_run_group("linear", p, storage_tests,
                                            sizeof storage_tests / sizeof storage_tests[0]);
        else if (p == 0)
            failed +=
                test_policy_run_group("linear", p, texel_subgroup_tests,
                                      sizeof texel_subgroup_tests / sizeof texel_subgroup_tests[0]);
        else
            failed += test_policy_run_group("linear", p, tests, sizeof tests / sizeof tests[0]);
    }
    return failed;
}
