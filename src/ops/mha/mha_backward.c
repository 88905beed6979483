/* vkattn_mha_backward: the layer's gradients (see "MHA layer backward" in
 * vkattn/ops.h). The forward is recomputed up to O with its LSE
 * (vka_mha_record_core), then
 *   output projection: dO = dy Wo, dWo = dy^T O, dbo = 1^T dy (gemm_grad)
 *   attention:         vkattn_cmd_attention_backward -> dQ, dK, dV (f32)
 *   heads:             mha_heads_bwd.comp undoes RoPE and QK-norm and merges
 *                      the heads into dQ' [B*Tq, qw], dK', dV' (f32)
 *   projections:       dW = dQ'^T X, db = 1^T dQ', dX = dQ' Wq + ... (gemm_grad)
 * with a barrier wherever a pass reads what the one before wrote. Checks:
 * mha_backward_plan.c. */
#include "ops/mha/mha_backward.h"
#include "ops/linear/linear.h"
#include "core/windows.h"
#include "vka_spirv.h"

#include <string.h>

/* Push constants of mha_heads_bwd.comp (76 bytes). */
typedef struct heads_push {
    uint32_t d, h, t;
    uint32_t g_off, g_sb, g_sh, g_st;
    uint32_t x_off, x_sr;
    uint32_t o_off, o_sr, col0;
    uint32_t p_off;
    uint32_t norm_off, table_off;
    uint32_t pos_off;
    uint32_t rope_dims;
    uint32_t flags;
    float eps;
} heads_push;
_Static_assert(sizeof(heads_push) == 76, "heads_push mirrors mha_heads_bwd.comp");

enum { HEADS_NORM = 1, HEADS_ROPE = 2, HEADS_GPTJ = 4, HEADS_POSITIONS = 8 };
#define HEADS_WG 64u

#define STO VKA_BINDING_STORAGE
static const vka_kernel heads_kernel = {
    .name = "mha_heads_bwd",
    .spirv = &vka_spirv_mha_heads_bwd,
    .binding_count = 6,
    .bindings = {STO, STO, STO, STO, STO, STO},
    .push_size = sizeof(heads_push),
};

/* One recording: the layer, the checked call and where things are. */
typedef struct bwd_job {
    vkattn_mha *m;
    const vkattn_mha_backward_args *a;
    vka_mha_bwd_call c;
    vka_mha_bwd_plan p;
    vkattn_buffer *sbuf;
    uint64_t base;
} bwd_job;

static vka_gemm_operand scratch_f32(const bwd_job *j, uint64_t at, uint64_t s0, uint64_t s1)
{
    return (vka_gemm_operand){j->sbuf, j->base + at, VKATTN_DTYPE_F32, s0, s1};
}

/* Rows r of an input or output (transposed: its columns as rows). */
static vka_gemm_operand rows_op(const vka_mha_rows *r, bool transposed)
{
    vka_gemm_operand o = {r->buffer, r->offset, r->dtype, r->row_stride, 1};
    if (transposed)
        o.s0 = 1, o.s1 = r->row_stride;
    return o;
}

/* A weight matrix of `cols` inputs per row, as B (k = its row, n = its
 * column: dX = dQ' W) or transposed (k = its column, n = its row: X W^T). */
static vka_gemm_operand weight_op(const vkattn_mha *m, const vkattn_buffer *buf, uint64_t off,
                                  uint64_t cols, bool transposed)
{
    vka_gemm_operand o = {buf, off, m->d.weight_dtype, cols, 1};
    if (transposed)
        o.s0 = 1, o.s1 = cols;
    return o;
}

static vka_gemm_operand grad_op(const vkattn_tensor *t, uint64_t cols)
{
    return (vka_gemm_operand){t->buffer, t->offset, VKATTN_DTYPE_F32, cols, 1};
}

/* C (+)= A B into a given gradient (skipped when absent). */
static vkattn_result gemm(bwd_job *j, VkCommandBuffer cmd, uint32_t m, uint32_t n, uint32_t k,
                          vka_gemm_operand a, bool ones, vka_gemm_operand b, vka_gemm_operand c,
                          bool accumulate, const char *what)
{
    if (!c.buffer)
        return VKATTN_SUCCESS;
    vka_gemm_args g = {.m = m, .n = n, .k = k, .a = a, .b = b, .c = c};
    g.a_ones = ones;
    g.accumulate = accumulate;
    return vka_cmd_gemm(j->m->ctx, cmd, &g, what);
}

/* The output projection's gradients and dO (the layer's dtype). */
static vkattn_result record_output(bwd_job *j, VkCommandBuffer cmd)
{
    const vkattn_mha *m = j->m;
    const vkattn_mha_desc *d = &m->d;
    const vka_mha_bwd_call *c = &j->c;
    const uint32_t rows = c->b * c->tq, dm = d->embed_dim, ow = vka_mha_o_width(d);
    const bool acc = j->a->accumulate;
    vka_gemm_operand wo = weight_op(m, m->src.o, m->src.off_o, ow, false);
    vka_gemm_operand d_o = {j->sbuf, j->base + j->p.d_o, d->dtype, ow, 1};
    VKA_TRY(gemm(j, cmd, rows, ow, dm, rows_op(&c->dy, false), false, wo, d_o, false,
                 "vkattn_mha_backward: dO"));
    vka_gemm_operand o = {j->sbuf, j->base + j->p.fwd.o, d->dtype, ow, 1};
    VKA_TRY(gemm(j, cmd, dm, ow, rows, rows_op(&c->dy, true), false, o, grad_op(&c->grads.wo, ow),
                 acc, "vkattn_mha_backward: grads.wo"));
    return gemm(j, cmd, 1, dm, rows, (vka_gemm_operand){0}, true, rows_op(&c->dy, false),
                grad_op(&c->grads.bo, dm), acc, "vkattn_mha_backward: grads.bo");
}

static vkattn_result record_attention(bwd_job *j, VkCommandBuffer cmd,
                                      const vkattn_attention_args *at)
{
    const vkattn_mha_desc *d = &j->m->d;
    const vka_mha_bwd_call *c = &j->c;
    const int64_t b = c->b, hq = d->num_heads, hkv = d->num_kv_heads, tq = c->tq, tk = c->tk;
    const int64_t dk = d->head_dim, dv = d->v_head_dim;
    vkattn_attention_backward_args ba;
    memset(&ba, 0, sizeof ba);
    ba.forward = *at;
    ba.forward.weights = (vkattn_tensor){0};
    /* dO [B*Tq, Hq*Dv] as out's [B, Hq, Tq, Dv] */
    ba.dout = at->out;
    ba.dout.offset = j->base + j->p.d_o;
    const int64_t qs[4] = {b, hq, tq, dk}, ks[4] = {b, hkv, tk, dk}, vs[4] = {b, hkv, tk, dv};
    ba.dq = vkattn_tensor_make(j->sbuf, j->base + j->p.dq, VKATTN_DTYPE_F32, 4, qs);
    ba.dk = vkattn_tensor_make(j->sbuf, j->base + j->p.dk, VKATTN_DTYPE_F32, 4, ks);
    ba.dv = vkattn_tensor_make(j->sbuf, j->base + j->p.dv, VKATTN_DTYPE_F32, 4, vs);
    const vkattn_tensor *ds = &c->grads.sinks;
    const bool sinks_via_scratch = ds->buffer && j->a->accumulate;
    if (sinks_via_scratch) {
        const int64_t hs[1] = {hq};
        ba.dsinks = vkattn_tensor_make(j->sbuf, j->base + j->p.dsinks, VKATTN_DTYPE_F32, 1, hs);
    } else {
        ba.dsinks = *ds;
    }
    VKA_TRY(vkattn_cmd_attention_backward(j->m->ctx, cmd, &ba));
    if (!sinks_via_scratch)
        return VKATTN_SUCCESS;
    vka_cmd_compute_barrier(j->m->ctx, cmd);
    return gemm(j, cmd, 1, (uint32_t)hq, 1, (vka_gemm_operand){0}, true,
                scratch_f32(j, j->p.dsinks, (uint64_t)hq, 1), grad_op(ds, (uint64_t)hq), true,
                "vkattn_mha_backward: grads.sinks");
}

/* Binds f32 scratch [at, at + bytes) (or the dummy when bytes is 0). */
static vkattn_result bind_scratch(bwd_job *j, uint64_t at, uint64_t bytes, vka_binding *bind,
                                  uint32_t *first)
{
    *first = 0;
    if (!bytes)
        return vka_bind_dummy(j->m->ctx, VK_FORMAT_UNDEFINED, bind);
    return vka_bind_window(j->m->ctx, j->sbuf, j->base + at, bytes, 4, bind, first);
}

/* One segment through mha_heads_bwd.comp: g [B, H, T, D] f32 at g_at ->
 * the merged rows at out_at (width columns); with `epilogue` (Q, K) the
 * layer's RoPE and QK-norm undone (x_at: the recomputed projection, part_at
 * the norm partials, norm_off the segment's norm weights). */
static vkattn_result record_heads(bwd_job *j, VkCommandBuffer cmd, uint64_t g_at, uint32_t heads,
                                  uint32_t t, uint32_t dim, uint64_t out_at, uint32_t width,
                                  bool epilogue, uint64_t x_at, uint64_t part_at, uint32_t norm_off)
{
    vkattn_mha *m = j->m;
    vkattn_context *ctx = m->ctx;
    const vkattn_mha_desc *d = &m->d;
    const uint64_t rows = (uint64_t)j->c.b * t, g_bytes = rows * heads * dim * 4ull;
    const bool norm = epilogue && d->qk_norm, rope = epilogue && d->rope.theta != 0.0f;
    heads_push p;
    memset(&p, 0, sizeof p);
    p.d = dim, p.h = heads, p.t = t;
    p.g_sb = heads * t * dim, p.g_sh = t * dim, p.g_st = dim;
    p.x_sr = width, p.o_sr = width;
    p.eps = d->norm_eps;
    vka_binding bind[6];
    VKA_TRY(bind_scratch(j, g_at, g_bytes, &bind[0], &p.g_off));
    VKA_TRY(bind_scratch(j, x_at, norm ? rows * width * 4ull : 0, &bind[1], &p.x_off));
    VKA_TRY(bind_scratch(j, out_at, rows * width * 4ull, &bind[4], &p.o_off));
    /* (without the norm the partials' binding is the output's: never the
     * context's dummy, which other dispatches read) */
    if (norm)
        VKA_TRY(bind_scratch(j, part_at, g_bytes, &bind[5], &p.p_off));
    else
        bind[5] = bind[4];
    if (norm || rope) {
        VKA_TRY(vka_bind_window(ctx, m->heads_params, 0, vkattn_buffer_size(m->heads_params), 4,
                                &bind[2], &p.norm_off));
        p.table_off = p.norm_off + 2 * d->head_dim;
        p.norm_off += norm_off;
    } else {
        VKA_TRY(vka_bind_dummy(ctx, VK_FORMAT_UNDEFINED, &bind[2]));
    }
    const vkattn_tensor *pos = &j->a->forward.positions;
    if (rope && pos->buffer) {
        VKA_TRY(
            vka_bind_window(ctx, pos->buffer, pos->offset, rows * 4ull, 4, &bind[3], &p.pos_off));
        p.flags |= HEADS_POSITIONS;
    } else {
        VKA_TRY(vka_bind_dummy(ctx, VK_FORMAT_UNDEFINED, &bind[3]));
    }
    if (norm)
        p.flags |= HEADS_NORM;
    if (rope) {
        p.flags |= HEADS_ROPE;
        p.rope_dims = d->rope.dims;
        if (d->rope.style == VKATTN_ROPE_GPTJ)
            p.flags |= HEADS_GPTJ;
    }
    const uint32_t *max = ctx->info.max_workgroup_count;
    if (t > max[0] || heads > max[1] || j->c.b > max[2])
        return vka_fail(ctx, VKATTN_ERROR_UNSUPPORTED,
                        "vkattn_mha_backward: %u tokens x %u heads x %u batch rows exceed the "
                        "device's maxComputeWorkGroupCount",
                        t, heads, j->c.b);
    const uint32_t spec[1] = {HEADS_WG};
    vka_pipeline *pipe;
    VKA_TRY(vka_pipeline_get(ctx, &heads_kernel, spec, 1, &pipe));
    return vka_cmd_dispatch(ctx, cmd, pipe, bind, &p, t, heads, j->c.b);
}

/* Q' = X Wq^T + bq and K' = C Wk^T + bk in f32, before the norm. */
static vkattn_result record_projections_before_norm(bwd_job *j, VkCommandBuffer cmd)
{
    const vkattn_mha *m = j->m;
    const vkattn_mha_desc *d = &m->d;
    const vka_mha_bwd_call *c = &j->c;
    const uint32_t qw = vka_mha_q_width(d), kw = vka_mha_k_width(d);
    const vkattn_dtype bd = d->weight_dtype;
    vka_gemm_args g = {.m = c->b * c->tq, .n = qw, .k = d->embed_dim};
    g.a = rows_op(&c->x, false);
    g.b = weight_op(m, m->src.q, m->src.off_q, d->embed_dim, true);
    g.c = scratch_f32(j, j->p.q_lin, qw, 1);
    if (d->bias)
        g.bias = (vka_gemm_operand){m->src.bq, m->src.off_bq, bd, 0, 1};
    VKA_TRY(vka_cmd_gemm(m->ctx, cmd, &g, "vkattn_mha_backward: Q before the norm"));
    g.m = c->b * c->tk, g.n = kw, g.k = d->kv_dim;
    g.a = rows_op(&c->keys, false);
    g.b = weight_op(m, m->src.kv, m->src.off_kv, d->kv_dim, true);
    g.c = scratch_f32(j, j->p.k_lin, kw, 1);
    if (d->bias)
        g.bias = (vka_gemm_operand){m->src.bkv, m->src.off_bkv, bd, 0, 1};
    return vka_cmd_gemm(m->ctx, cmd, &g, "vkattn_mha_backward: K before the norm");
}

/* The projections' gradients: weights and biases, and the inputs' shares. */
static vkattn_result record_projections(bwd_job *j, VkCommandBuffer cmd)
{
    vkattn_mha *m = j->m;
    vkattn_context *ctx = m->ctx;
    const vkattn_mha_desc *d = &m->d;
    const vka_mha_bwd_call *c = &j->c;
    const vkattn_mha_grads *gr = &c->grads;
    const bool acc = j->a->accumulate;
    const uint32_t rq = c->b * c->tq, rk = c->b * c->tk;
    const uint32_t qw = vka_mha_q_width(d), kw = vka_mha_k_width(d), vw = vka_mha_v_width(d);
    const uint32_t dm = d->embed_dim, dkv = d->kv_dim, dvin = d->value_dim, dh = d->head_dim;
    const vka_gemm_operand none = {0};
    vka_gemm_operand dq = scratch_f32(j, j->p.dq_lin, qw, 1),
                     dqt = scratch_f32(j, j->p.dq_lin, 1, qw);
    vka_gemm_operand dk = scratch_f32(j, j->p.dk_lin, kw, 1),
                     dkt = scratch_f32(j, j->p.dk_lin, 1, kw);
    vka_gemm_operand dv = scratch_f32(j, j->p.dv_lin, vw, 1),
                     dvt = scratch_f32(j, j->p.dv_lin, 1, vw);
    VKA_TRY(gemm(j, cmd, qw, dm, rq, dqt, false, rows_op(&c->x, false), grad_op(&gr->wq, dm), acc,
                 "vkattn_mha_backward: grads.wq"));
    VKA_TRY(gemm(j, cmd, kw, dkv, rk, dkt, false, rows_op(&c->keys, false), grad_op(&gr->wk, dkv),
                 acc, "vkattn_mha_backward: grads.wk"));
    VKA_TRY(gemm(j, cmd, vw, dvin, rk, dvt, false, rows_op(&c->values, false),
                 grad_op(&gr->wv, dvin), acc, "vkattn_mha_backward: grads.wv"));
    VKA_TRY(gemm(j, cmd, 1, qw, rq, none, true, dq, grad_op(&gr->bq, qw), acc,
                 "vkattn_mha_backward: grads.bq"));
    VKA_TRY(gemm(j, cmd, 1, kw, rk, none, true, dk, grad_op(&gr->bk, kw), acc,
                 "vkattn_mha_backward: grads.bk"));
    VKA_TRY(gemm(j, cmd, 1, vw, rk, none, true, dv, grad_op(&gr->bv, vw), acc,
                 "vkattn_mha_backward: grads.bv"));
    if (d->qk_norm) {
        VKA_TRY(gemm(j, cmd, 1, dh, rq * d->num_heads, none, true,
                     scratch_f32(j, j->p.q_part, dh, 1), grad_op(&gr->q_norm, dh), acc,
                     "vkattn_mha_backward: grads.q_norm"));
        VKA_TRY(gemm(j, cmd, 1, dh, rk * d->num_kv_heads, none, true,
                     scratch_f32(j, j->p.k_part, dh, 1), grad_op(&gr->k_norm, dh), acc,
                     "vkattn_mha_backward: grads.k_norm"));
    }
    /* the inputs' shares: dX = dQ' Wq (+ dK' Wk + dV' Wv), one after the
     * other into the same rows */
    const vka_mha_weight_source *s = &m->src;
    vka_gemm_operand wq = weight_op(m, s->q, s->off_q, dm, false);
    vka_gemm_operand wk = weight_op(m, s->kv, s->off_kv, dkv, false);
    vka_gemm_operand wv = weight_op(m, s->v, s->off_v, dvin, false);
    /* keys from kv (else x), values from value (else the keys' input) */
    const vkattn_mha_forward_args *f = &j->a->forward;
    const vka_mha_rows *kdst = f->kv.buffer ? &c->dkv : &c->dx;
    const vka_mha_rows *vdst = f->value.buffer ? &c->dvalue : kdst;
    VKA_TRY(gemm(j, cmd, rq, dm, qw, dq, false, wq, rows_op(&c->dx, false), acc,
                 "vkattn_mha_backward: dx"));
    const bool k_after_q = kdst == &c->dx, v_after_k = vdst == kdst, v_after_q = vdst == &c->dx;
    if (k_after_q && kdst->buffer)
        vka_cmd_compute_barrier(ctx, cmd);
    VKA_TRY(gemm(j, cmd, rk, dkv, kw, dk, false, wk, rows_op(kdst, false), acc || k_after_q,
                 "vkattn_mha_backward: the keys' share"));
    if ((v_after_k || v_after_q) && vdst->buffer)
        vka_cmd_compute_barrier(ctx, cmd);
    return gemm(j, cmd, rk, dvin, vw, dv, false, wv, rows_op(vdst, false),
                acc || v_after_k || v_after_q, "vkattn_mha_backward: the values' share");
}

static vkattn_result record_backward(vkattn_mha *m, VkCommandBuffer cmd, const void *args)
{
    VKA_TRY(vka_mha_check_record(m, "vkattn_cmd_mha_backward", cmd, args));
    bwd_job j;
    memset(&j, 0, sizeof j);
    j.m = m;
    j.a = args;
    VKA_TRY(vka_mha_bwd_check(m, j.a, &j.c));
    j.p = vka_mha_bwd_plan_scratch(m, j.c.b, j.c.tq, j.c.tk);
    VKA_TRY(vka_mha_scratch_pick(m, j.a->forward.scratch, j.a->forward.scratch_offset, j.p.bytes,
                                 &j.sbuf, &j.base));
    vkattn_context *ctx = m->ctx;
    const vkattn_mha_desc *d = &m->d;
    vkattn_attention_args at;
    VKA_TRY(vka_mha_record_core(m, cmd, &j.a->forward, j.sbuf, j.base, &j.p.fwd, true, &at));
    VKA_TRY(record_output(&j, cmd));
    vka_cmd_compute_barrier(ctx, cmd);
    VKA_TRY(record_attention(&j, cmd, &at));
    if (d->qk_norm)
        VKA_TRY(record_projections_before_norm(&j, cmd));
    vka_cmd_compute_barrier(ctx, cmd);
    const uint32_t qw = vka_mha_q_width(d), kw = vka_mha_k_width(d), vw = vka_mha_v_width(d);
    VKA_TRY(record_heads(&j, cmd, j.p.dq, d->num_heads, j.c.tq, d->head_dim, j.p.dq_lin, qw, true,
                         j.p.q_lin, j.p.q_part, 0));
    VKA_TRY(record_heads(&j, cmd, j.p.dk, d->num_kv_heads, j.c.tk, d->head_dim, j.p.dk_lin, kw,
                         true, j.p.k_lin, j.p.k_part, d->head_dim));
    VKA_TRY(record_heads(&j, cmd, j.p.dv, d->num_kv_heads, j.c.tk, d->v_head_dim, j.p.dv_lin, vw,
                         false, 0, 0, 0));
    vka_cmd_compute_barrier(ctx, cmd);
    VKA_TRY(record_projections(&j, cmd));
    vka_cmd_compute_barrier(ctx, cmd);
    return VKATTN_SUCCESS;
}

vkattn_result vkattn_cmd_mha_backward(vkattn_mha *m, VkCommandBuffer cmd,
                                      const vkattn_mha_backward_args *a)
{
    return record_backward(m, cmd, a);
}

static vkattn_result grow_backward(vkattn_mha *m, const void *args)
{
    const vkattn_mha_backward_args *a = args;
    if (a->forward.scratch)
        return VKATTN_SUCCESS;
    vka_mha_bwd_call c;
    VKA_TRY(vka_mha_bwd_check(m, a, &c));
    return vkattn_mha_reserve_backward(m, c.b, c.tq, c.tk);
}

vkattn_result vkattn_mha_backward(vkattn_mha *m, const vkattn_mha_backward_args *a)
{
    return vka_mha_submit(m, "vkattn_mha_backward", a, grow_backward, record_backward);
}
