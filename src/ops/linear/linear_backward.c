/* vkattn_linear_backward: the gradients of y = x W^T + b (see vkattn/ops.h)
 * as three strided GEMMs of vka_cmd_gemm (linear_grad.c):
 *     dx = dy W (A dy, B W),  dw = dy^T x (A dy^T, B x),  db = 1^T dy. */
#include "ops/linear/linear_internal.h"

#include <string.h>

/* A checked call: every tensor as rows of a matrix. */
typedef struct rows_view {
    const vkattn_buffer *buffer;
    uint64_t offset;
    vkattn_dtype dtype;
    uint64_t rows, cols, row_stride;
} rows_view;

typedef struct bwd_call {
    rows_view x, w, dy, dx, dw, db;
    bool accumulate;
} bwd_call;

/* `t` as rows (rank 1: one row; rank 2 [M, C]; rank 3 [B, T, C] whose
 * batch stride is T row strides), last dimension contiguous. */
static vkattn_result as_rows(vkattn_context *ctx, const vkattn_tensor *in, const char *name,
                             rows_view *out)
{
    vkattn_tensor t;
    VKA_TRY(vka_tensor_resolve(ctx, in, name, &t));
    if (t.rank < 1 || t.rank > 3)
        return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT, "%s.rank is %u: it must be 1 to 3",
                        name, t.rank);
    const uint32_t last = t.rank - 1;
    if (t.strides[last] != 1 && t.shape[last] > 1)
        return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT,
                        "%s.strides[%u] is %lld: the last dimension must be contiguous", name, last,
                        (long long)t.strides[last]);
    out->buffer = t.buffer;
    out->offset = t.offset;
    out->dtype = t.dtype;
    out->cols = (uint64_t)t.shape[last];
    out->rows = 1;
    out->row_stride = out->cols;
    if (t.rank >= 2) {
        out->rows = (uint64_t)t.shape[last - 1];
        out->row_stride = (uint64_t)t.strides[last - 1];
    }
    if (t.rank == 3) {
        if (t.shape[0] > 1 && t.shape[1] > 0 &&
            (uint64_t)t.strides[0] != (uint64_t)t.shape[1] * out->row_stride)
            return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT,
                            "%s.strides[0] is %lld: the backward reads [B, T, C] as B*T rows, "
                            "so it must be shape[1] * strides[1] = %lld",
                            name, (long long)t.strides[0], (long long)(t.shape[1] * t.strides[1]));
        out->rows *= (uint64_t)t.shape[0];
    }
    if (out->rows > UINT32_MAX || out->cols > UINT32_MAX)
        return vka_fail(ctx, VKATTN_ERROR_UNSUPPORTED, "%s has %llu x %llu elements: too large",
                        name, (unsigned long long)out->rows, (unsigned long long)out->cols);
    return VKATTN_SUCCESS;
}

static vkattn_result check_dtype(vkattn_context *ctx, const rows_view *v, const char *name,
                                 bool f32_only)
{
    char b[VKA_DTYPE_TEXT];
    if (v->dtype == VKATTN_DTYPE_F32 ||
        (!f32_only && (v->dtype == VKATTN_DTYPE_F16 || v->dtype == VKATTN_DTYPE_BF16)))
        return VKATTN_SUCCESS;
    return vka_fail(ctx, VKATTN_ERROR_UNSUPPORTED_DTYPE, "%s.dtype is %s: it must be %s", name,
                    vka_dtype_text(v->dtype, b), f32_only ? "f32" : "f32, f16 or bf16");
}

/* An output of `rows` x `cols` (in `like`'s shape, whose name it gets). */
static vkattn_result check_output(vkattn_context *ctx, const vkattn_tensor *t, const char *name,
                                  const vkattn_tensor *like, const char *like_name, rows_view *out)
{
    if (!t->buffer)
        return VKATTN_SUCCESS;
    VKA_TRY(vka_tensor_check_shape_as(ctx, t, name, like, like_name));
    VKA_TRY(as_rows(ctx, t, name, out));
    VKA_TRY(check_dtype(ctx, out, name, true));
    vkattn_tensor r;
    VKA_TRY(vka_tensor_resolve(ctx, t, name, &r));
    return vka_tensor_check_output(ctx, &r, name);
}

static vkattn_result check_backward(vkattn_context *ctx, const void *in, void *out)
{
    const vkattn_linear_backward_args *a = in;
    bwd_call *c = out;
    memset(c, 0, sizeof *c);
    if (!a)
        return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT, "args is NULL");
    const vkattn_linear_args *f = &a->forward;
    static const char *const req[3] = {"args->forward.x", "args->forward.w", "args->dy"};
    const vkattn_tensor *given[3] = {&f->x, &f->w, &a->dy};
    for (int i = 0; i < 3; i++)
        if (!given[i]->buffer)
            return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT, "%s.buffer is NULL: it is required",
                            req[i]);
    if (f->x.rank != 2 && f->x.rank != 3)
        return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT,
                        "args->forward.x.rank is %u: it must be 2 [M, K] or 3 [B, T, K]",
                        f->x.rank);
    if (f->w.rank != 2)
        return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT,
                        "args->forward.w.rank is %u: it must be 2 [N, K]", f->w.rank);
    if (f->w.dtype == VKATTN_DTYPE_Q8_0)
        return vka_fail(ctx, VKATTN_ERROR_UNSUPPORTED_DTYPE,
                        "args->forward.w.dtype is q8_0: quantized weights have no backward "
                        "(they are not trained; keep f32, f16 or bf16 master weights)");
    VKA_TRY(as_rows(ctx, &f->x, "args->forward.x", &c->x));
    VKA_TRY(as_rows(ctx, &f->w, "args->forward.w", &c->w));
    VKA_TRY(check_dtype(ctx, &c->x, "args->forward.x", false));
    VKA_TRY(check_dtype(ctx, &c->w, "args->forward.w", false));
    if (c->w.cols != c->x.cols)
        return vka_fail(ctx, VKATTN_ERROR_SHAPE_MISMATCH,
                        "args->forward.w.shape[1] is %llu but args->forward.x's last dimension "
                        "(K) is %llu",
                        (unsigned long long)c->w.cols, (unsigned long long)c->x.cols);
    /* dy: x's leading shape, N columns */
    if (a->dy.rank != f->x.rank)
        return vka_fail(ctx, VKATTN_ERROR_SHAPE_MISMATCH,
                        "args->dy.rank is %u: it must be %u, as args->forward.x's", a->dy.rank,
                        f->x.rank);
    for (uint32_t d = 0; d + 1 < a->dy.rank; d++)
        if (a->dy.shape[d] != f->x.shape[d])
            return vka_fail(ctx, VKATTN_ERROR_SHAPE_MISMATCH,
                            "args->dy.shape[%u] is %lld: it must be %lld, as args->forward.x's", d,
                            (long long)a->dy.shape[d], (long long)f->x.shape[d]);
    VKA_TRY(as_rows(ctx, &a->dy, "args->dy", &c->dy));
    VKA_TRY(check_dtype(ctx, &c->dy, "args->dy", false));
    if (c->dy.cols != c->w.rows)
        return vka_fail(ctx, VKATTN_ERROR_SHAPE_MISMATCH,
                        "args->dy's last dimension is %llu: it must be args->forward.w.shape[0] "
                        "(N), %llu",
                        (unsigned long long)c->dy.cols, (unsigned long long)c->w.rows);
    VKA_TRY(check_output(ctx, &a->dx, "args->dx", &f->x, "args->forward.x", &c->dx));
    VKA_TRY(check_output(ctx, &a->dw, "args->dw", &f->w, "args->forward.w", &c->dw));
    if (a->db.buffer) {
        vkattn_tensor like = {.buffer = a->db.buffer, .rank = 1, .shape = {(int64_t)c->w.rows}};
        VKA_TRY(
            check_output(ctx, &a->db, "args->db", &like, "[N] (args->forward.w.shape[0])", &c->db));
    }
    /* no output shares a byte with an input or another output */
    const vkattn_tensor *outs[3] = {&a->dx, &a->dw, &a->db};
    static const char *const out_names[3] = {"args->dx", "args->dw", "args->db"};
    const vkattn_tensor *ins[3] = {&f->x, &f->w, &a->dy};
    for (int o = 0; o < 3; o++) {
        if (!outs[o]->buffer)
            continue;
        vkattn_tensor ro, ri;
        VKA_TRY(vka_tensor_resolve(ctx, outs[o], out_names[o], &ro));
        for (int i = 0; i < 3; i++) {
            VKA_TRY(vka_tensor_resolve(ctx, ins[i], req[i], &ri));
            VKA_TRY(vka_tensor_check_disjoint(ctx, &ro, out_names[o], &ri, req[i]));
        }
        for (int o2 = o + 1; o2 < 3; o2++)
            if (outs[o2]->buffer) {
                VKA_TRY(vka_tensor_resolve(ctx, outs[o2], out_names[o2], &ri));
                VKA_TRY(vka_tensor_check_disjoint(ctx, &ro, out_names[o], &ri, out_names[o2]));
            }
    }
    c->accumulate = a->accumulate;
    return VKATTN_SUCCESS;
}

static vka_gemm_operand operand(const rows_view *v, bool transposed)
{
    vka_gemm_operand o = {v->buffer, v->offset, v->dtype, v->row_stride, 1};
    if (transposed)
        o.s0 = 1, o.s1 = v->row_stride;
    return o;
}

static vkattn_result record_backward(vkattn_context *ctx, VkCommandBuffer cmd, const void *call)
{
    const bwd_call *c = call;
    const uint32_t m = (uint32_t)c->x.rows, n = (uint32_t)c->w.rows, k = (uint32_t)c->x.cols;
    if (c->dx.buffer) { /* [M, K] = dy [M, N] W [N, K] */
        vka_gemm_args g = {.m = m, .n = k, .k = n, .accumulate = c->accumulate};
        g.a = operand(&c->dy, false), g.b = operand(&c->w, false), g.c = operand(&c->dx, false);
        VKA_TRY(vka_cmd_gemm(ctx, cmd, &g, "vkattn_linear_backward: dx"));
    }
    if (c->dw.buffer) { /* [N, K] = dy^T [N, M] x [M, K] */
        vka_gemm_args g = {.m = n, .n = k, .k = m, .accumulate = c->accumulate};
        g.a = operand(&c->dy, true), g.b = operand(&c->x, false), g.c = operand(&c->dw, false);
        VKA_TRY(vka_cmd_gemm(ctx, cmd, &g, "vkattn_linear_backward: dw"));
    }
    if (c->db.buffer) { /* [1, N] = 1^T [1, M] dy [M, N] */
        vka_gemm_args g = {.m = 1, .n = n, .k = m, .a_ones = true, .accumulate = c->accumulate};
        g.b = operand(&c->dy, false), g.c = operand(&c->db, false);
        VKA_TRY(vka_cmd_gemm(ctx, cmd, &g, "vkattn_linear_backward: db"));
    }
    return VKATTN_SUCCESS;
}

VKA_OP_ENTRY_POINTS(linear_backward, vkattn_linear_backward_args, bwd_call, check_backward,
                    record_backward)
