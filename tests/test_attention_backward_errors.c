/* vkattn_attention_backward refuses bad input by name, before anything is
 * recorded, and leaves the gradients untouched: the forward's own checks
 * (named args->forward.*), what the backward does not take, and the
 * gradients' shapes, dtypes, layouts and overlaps. */
#include "test_attention_backward.h"

#include <stdlib.h>

void test_backward_errors(void **state)
{
    test_gpu *g = *state;
    vkattn_context *ctx = g->ctx;
    const bwd_case c = {.B = 1,
                        .Hq = 4,
                        .Hkv = 2,
                        .Tq = 8,
                        .Tk = 8,
                        .Dk = 16,
                        .Dv = 16,
                        .dt = VKATTN_DTYPE_F32,
                        .grad_dt = VKATTN_DTYPE_F32,
                        .sinks = true};
    bwd_data d;
    bwd_make_data(&c, 77, &d);
    bwd_buffers bb = {0};
    vkattn_attention_args a;
    vkattn_ref_attention_args r;
    bwd_forward_args(&c, &d, ctx, &bb, &a, &r);
    const vkattn_dtype f32 = VKATTN_DTYPE_F32;
    float *zeros = test_alloc(d.nq * 4);
    bb.q = test_buffer_of(ctx, f32, d.q, d.nq);
    bb.k = test_buffer_of(ctx, f32, d.k, d.nk);
    bb.v = test_buffer_of(ctx, f32, d.v, d.nv);
    bb.out = test_buffer_of(ctx, f32, zeros, d.no);
    bb.lse = test_buffer_of(ctx, f32, zeros, d.nl);
    bb.dout = test_buffer_of(ctx, f32, d.dout, d.no);
    vkattn_buffer *grads = test_buffer_of(ctx, f32, zeros, d.nq); /* dq, then dk, dv */
    vkattn_buffer *dkv = test_buffer_of(ctx, f32, zeros, d.nk + d.nv);
    vkattn_buffer *ds = test_buffer_of(ctx, f32, zeros, c.Hq);
    a.q = vkattn_tensor_make(bb.q, 0, f32, 4, d.qs);
    a.k = vkattn_tensor_make(bb.k, 0, f32, 4, d.ks);
    a.v = vkattn_tensor_make(bb.v, 0, f32, 4, d.vs);
    a.out = vkattn_tensor_make(bb.out, 0, f32, 4, d.os);
    a.lse = vkattn_tensor_make(bb.lse, 0, f32, 3, d.ls);
    TEST_OK(ctx, vkattn_attention(ctx, &a));
    const vkattn_attention_backward_args good = {
        .forward = a,
        .dout = vkattn_tensor_make(bb.dout, 0, f32, 4, d.os),
        .dq = vkattn_tensor_make(grads, 0, f32, 4, d.qs),
        .dk = vkattn_tensor_make(dkv, 0, f32, 4, d.ks),
        .dv = vkattn_tensor_make(dkv, d.nk * 4, f32, 4, d.vs),
        .dsinks = vkattn_tensor_make(ds, 0, f32, 1, d.hs),
    };
    vkattn_attention_backward_args x;
    const vkattn_result INV = VKATTN_ERROR_INVALID_ARGUMENT, SHP = VKATTN_ERROR_SHAPE_MISMATCH;
    const vkattn_result DT = VKATTN_ERROR_UNSUPPORTED_DTYPE, UNS = VKATTN_ERROR_UNSUPPORTED;
#define CALL vkattn_attention_backward(ctx, &x)
    TEST_FAILS(ctx, INV, "args is NULL", vkattn_attention_backward(ctx, NULL));
    TEST_FAILS_CHANGED(ctx, x, good, x.forward.q.shape[3] = 8, SHP, "args->forward.", CALL);
    TEST_FAILS_CHANGED(ctx, x, good, x.forward.lse.buffer = NULL, INV, "args->forward.lse", CALL);
    TEST_FAILS_CHANGED(ctx, x, good, x.forward.weights = x.dq, INV, "args->forward.weights", CALL);
    TEST_FAILS_CHANGED(ctx, x, good, x.forward.head_mask = x.dsinks, UNS, "args->forward.head_mask",
                       CALL);
    TEST_FAILS_CHANGED(ctx, x, good, x.forward.sequences = 2, UNS, "args->forward.sequences is 2",
                       CALL);
    TEST_FAILS_CHANGED(ctx, x, good, x.forward.dropout_p = 1.0f, INV,
                       "args->forward.dropout_p is 1", CALL);
    TEST_FAILS_CHANGED(ctx, x, good, x.dout.buffer = NULL, INV, "args->dout.buffer is NULL", CALL);
    TEST_FAILS_CHANGED(ctx, x, good, x.dout.shape[2] = 7, SHP, "args->dout.shape[2] is 7", CALL);
    TEST_FAILS_CHANGED(ctx, x, good, x.dout.dtype = VKATTN_DTYPE_F16, DT, "args->dout.dtype", CALL);
    TEST_FAILS_CHANGED(ctx, x, good, x.dq.shape[1] = 2, SHP, "args->dq.shape[1] is 2", CALL);
    TEST_FAILS_CHANGED(ctx, x, good, x.dk.dtype = VKATTN_DTYPE_F16, DT, "args->dk.dtype", CALL);
    TEST_FAILS_CHANGED(ctx, x, good, x.dv.dtype = VKATTN_DTYPE_U8, DT, "args->dv.dtype", CALL);
    TEST_FAILS_CHANGED(
        ctx, x, good,
        (x.dq.strides[0] = 512, x.dq.strides[1] = 16, x.dq.strides[2] = 64, x.dq.strides[3] = 1),
        INV, "args->dq.strides", CALL); /* [B, T, H, D]: not written yet */
    TEST_FAILS_CHANGED(ctx, x, good, x.dv = x.dk, INV, "args->dv", CALL);
    TEST_FAILS_CHANGED(ctx, x, good, x.dq.buffer = bb.q, INV, "args->dq", CALL);
    TEST_FAILS_CHANGED(ctx, x, good, x.forward.sinks.buffer = NULL, INV, "args->dsinks", CALL);
    TEST_FAILS_CHANGED(ctx, x, good, x.dsinks.shape[0] = 3, SHP, "args->dsinks.shape[0] is 3",
                       CALL);
    /* the forward's dropout pass */
    vkattn_attention_args fa = a;
    fa.dropout_p = 0.1f;
    fa.lse.buffer = NULL;
    TEST_FAILS(ctx, INV, "args->lse.buffer is NULL", vkattn_attention(ctx, &fa));
    fa = a, fa.dropout_p = -0.5f;
    TEST_FAILS(ctx, INV, "dropout_p is -0.5", vkattn_attention(ctx, &fa));
    fa = a, fa.dropout_p = 0.1f, fa.head_mask = good.dsinks;
    TEST_FAILS(ctx, UNS, "args->head_mask", vkattn_attention(ctx, &fa));
    /* nothing was written by the refused calls */
    float *got = test_alloc(d.nq * 4);
    test_download_as(ctx, grads, f32, got, d.nq);
    for (size_t i = 0; i < d.nq; i++)
        assert_true(got[i] == 0.0f);
    free(got);
    TEST_OK(ctx, vkattn_attention_backward(ctx, &good));
#undef CALL
    free(zeros);
    TEST_DESTROY_BUFFERS(bb.q, bb.k, bb.v, bb.out, bb.lse, bb.dout, bb.mask, bb.pad, bb.sinks,
                         bb.slopes, grads, dkv, ds);
    bwd_free_data(&d);
    test_assert_no_validation_messages(ctx);
}
