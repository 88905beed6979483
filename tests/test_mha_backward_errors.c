/* vkattn_mha_backward refuses bad input by name, before anything is
 * recorded: what the backward does not take (packed sequences, a head mask,
 * the forward's weights, q8_0 and appended-row layers), dy, the inputs'
 * gradients and the weights' gradients (shapes, dtypes, what the layer
 * lacks, overlaps). */
#include "test_mha_backward.h"

#include <stdlib.h>

void test_mha_backward_errors(void **state)
{
    test_gpu *g = *state;
    vkattn_context *ctx = g->ctx;
    const mbwd_case c = {
        .b = 1, .tq = 8, .dm = 32, .hq = 2, .hkv = 2, .dh = 16, .dtype = VKATTN_DTYPE_F32};
    mbwd_data d;
    mbwd_make(&c, 91, &d);
    mbwd_device dev;
    mbwd_upload(ctx, &c, &d, &dev);
    vkattn_mha *layer = test_mha_create(ctx, &d.desc, &d.weights);
    const vkattn_mha_backward_args good = dev.bwd;
    TEST_OK(ctx, vkattn_mha_backward(layer, &good));
    vkattn_mha_backward_args x;
    const vkattn_result INV = VKATTN_ERROR_INVALID_ARGUMENT, SHP = VKATTN_ERROR_SHAPE_MISMATCH;
    const vkattn_result DT = VKATTN_ERROR_UNSUPPORTED_DTYPE, UNS = VKATTN_ERROR_UNSUPPORTED;
    const int64_t heads[1] = {c.hq}, hs[1] = {4};
#define CALL vkattn_mha_backward(layer, &x)
    TEST_FAILS(ctx, INV, "args is NULL", vkattn_mha_backward(layer, NULL));
    TEST_FAILS_CHANGED(ctx, x, good, x.dy.buffer = NULL, INV, "args->dy.buffer is NULL", CALL);
    TEST_FAILS_CHANGED(ctx, x, good, x.dy.shape[2] = 16, SHP, "args->dy.shape[2] is 16", CALL);
    TEST_FAILS_CHANGED(ctx, x, good, x.dy.dtype = VKATTN_DTYPE_F16, DT, "args->dy.dtype is f16",
                       CALL);
    TEST_FAILS_CHANGED(ctx, x, good, x.dx.dtype = VKATTN_DTYPE_F16, DT, "args->dx.dtype is f16",
                       CALL);
    TEST_FAILS_CHANGED(ctx, x, good, x.dkv = x.dx, INV, "args->dkv is given without", CALL);
    TEST_FAILS_CHANGED(ctx, x, good, x.grads.wq.shape[0] = 8, SHP, "args->grads.wq.shape[0] is 8",
                       CALL);
    TEST_FAILS_CHANGED(ctx, x, good,
                       x.grads.bq = vkattn_tensor_make(dev.y, 0, VKATTN_DTYPE_F32, 1, heads), INV,
                       "args->grads.bq is given but the layer has no biases", CALL);
    TEST_FAILS_CHANGED(ctx, x, good,
                       x.grads.sinks = vkattn_tensor_make(dev.y, 0, VKATTN_DTYPE_F32, 1, heads),
                       INV, "args->grads.sinks is given but the layer has no sinks", CALL);
    TEST_FAILS_CHANGED(ctx, x, good, x.grads.wo.shape[1] = 8, SHP, "args->grads.wo.shape[1] is 8",
                       CALL);
    TEST_FAILS_CHANGED(ctx, x, good, x.grads.wk.buffer = dev.grad[MB_WQ], INV, "args->grads.w",
                       CALL);
    TEST_FAILS_CHANGED(ctx, x, good, x.dx.buffer = dev.dy, INV, "args->dx", CALL);
    TEST_FAILS_CHANGED(ctx, x, good, x.forward.x.buffer = dev.grad[MB_WQ], INV,
                       "args->grads.wq (bytes 0..4096) overlaps args->forward.x", CALL);
    TEST_FAILS_CHANGED(ctx, x, good,
                       x.forward.head_mask = vkattn_tensor_make(dev.y, 0, VKATTN_DTYPE_F32, 1, hs),
                       UNS, "args->forward.head_mask", CALL);
    TEST_FAILS_CHANGED(ctx, x, good, x.forward.weights = x.dx, INV, "args->forward.weights", CALL);
    TEST_FAILS_CHANGED(ctx, x, good, x.forward.dropout_p = 1.0f, INV,
                       "args->dropout_p is 1: it must be in [0, 1)", CALL);
    TEST_FAILS_CHANGED(ctx, x, good, x.forward.x.shape[2] = 16, SHP, "args->x.shape[2] is 16",
                       CALL);
#undef CALL
    vkattn_mha_destroy(layer);
    /* layers the backward does not take */
    vkattn_mha_desc q8 = d.desc;
    q8.embed_dim = 64, q8.num_heads = 2, q8.num_kv_heads = 2, q8.head_dim = 32, q8.v_head_dim = 32;
    q8.kv_dim = 64, q8.value_dim = 64, q8.weight_dtype = VKATTN_DTYPE_Q8_0;
    float *w64 = test_alloc(64 * 64 * 4);
    vkattn_mha_weights wq8 = {.wq = w64, .wk = w64, .wv = w64, .wo = w64};
    vkattn_mha *lq8 = test_mha_create(ctx, &q8, &wq8);
    TEST_FAILS(ctx, UNS, "weight_dtype is q8_0", vkattn_mha_backward(lq8, &good));
    vkattn_mha_destroy(lq8);
    vkattn_mha_desc zero = d.desc;
    zero.add_zero_attn = true;
    vkattn_mha *lz = test_mha_create(ctx, &zero, &d.weights);
    TEST_FAILS(ctx, UNS, "add_bias_kv or add_zero_attn", vkattn_mha_backward(lz, &good));
    vkattn_mha_destroy(lz);
    free(w64);
    mbwd_device_free(&dev);
    mbwd_free(&d);
    test_assert_no_validation_messages(ctx);
}
