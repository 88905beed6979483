/* vkattn_mha_backward against vkattn_ref_mha_backward (double, on the same
 * rounded inputs and weights): dx, dkv, dvalue and every weight, bias, norm
 * and sink gradient elementwise within 2e-4 for f32 layers and 2e-2 for
 * f16 / bf16 ones (max error over the largest reference value, or over
 * 1% of the largest of all the case's gradients where that is larger:
 * K's bias has a gradient of exactly 0, which rounding makes ~1e-7; NaN
 * fails),
 * over self- and cross-attention, GQA/MQA, Dk != Dv, biases, QK-norm and
 * RoPE (both styles, a positions tensor), causal both ways, masks, key
 * padding, window, softcap, ALiBi, sinks, scale and dropout (whose forward
 * is checked against the reference's too). Two runs give the same bits;
 * accumulate adds. Bad input: test_mha_backward_errors.c. */
#include "test_mha_backward.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

static void describe(const mbwd_case *c, char *buf, size_t size)
{
    snprintf(buf, size,
             "B%u Tq%u Tk%u Dm%u Hq%u Hkv%u Dh%u Dv%u %s cross%u bias%d norm%d rope%d%s pos%d "
             "causal%d%s mask%d pad%d window%u softcap%g sinks%d alibi%d scale%g dropout%g",
             c->b, c->tq, c->tk, c->dm, c->hq, c->hkv, c->dh, c->dv, vkattn_dtype_name(c->dtype),
             c->cross, c->bias, c->qk_norm, c->rope, c->gptj ? "(gptj)" : "", c->positions,
             c->causal, c->top_left ? "(top-left)" : "", c->mask, c->padding, c->window,
             (double)c->softcap, c->sinks, c->alibi, (double)c->scale, (double)c->dropout);
}

/* max |got - want| within tol * max(max |want|, floor), everything finite;
 * returns that ratio over tol * 1 (the figure printed). */
static double assert_close_floor(const float *got, const float *want, size_t n, double tol,
                                 double floor, const char *what)
{
    double err = 0, top = 0;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(got[i]))
            fail_msg("%s: element %zu is %g", what, i, (double)got[i]);
        double e = fabs((double)got[i] - want[i]);
        err = e > err ? e : err;
        top = fabs(want[i]) > top ? fabs(want[i]) : top;
    }
    double scale = top > floor ? top : floor;
    if (!(err <= tol * scale))
        fail_msg("%s: max error %.3g over %.3g (largest reference %.3g, floor %.3g) is above %g",
                 what, err, err / scale, top, floor, tol);
    return err / scale;
}

static void run_case(test_gpu *g, const mbwd_case *c)
{
    vkattn_context *ctx = g->ctx;
    char what[400];
    describe(c, what, sizeof what);
    mbwd_data d;
    mbwd_make(c, 5100u + c->tq * 7u + c->dm + c->cross * 3u, &d);
    mbwd_device dev;
    mbwd_upload(ctx, c, &d, &dev);
    vkattn_mha *layer = test_mha_create(ctx, &d.desc, &d.weights);
    char err[512] = "";

    /* the forward (dropout's pass included) against the reference's */
    float *y = test_alloc(d.nx * 4);
    TEST_OK(ctx, vkattn_mha_forward(layer, &dev.fwd));
    test_download_as(ctx, dev.y, c->dtype, y, d.nx);
    if (vkattn_ref_mha(&d.desc, &d.weights, &d.ref.forward, err, sizeof err) != VKATTN_SUCCESS)
        fail_msg("reference forward failed on %s: %s", what, err);
    const double tol = c->dtype == VKATTN_DTYPE_F32 ? 2e-4 : 2e-2;
    char label[480];
    snprintf(label, sizeof label, "y of %s", what);
    test_assert_close(y, d.want_y, d.nx, tol, label);

    /* the gradients */
    if (vkattn_ref_mha_backward(&d.desc, &d.weights, &d.ref, err, sizeof err) != VKATTN_SUCCESS)
        fail_msg("reference backward failed on %s: %s", what, err);
    TEST_OK(ctx, vkattn_mha_backward(layer, &dev.bwd));
    char figures[400] = "";
    float *first = NULL;
    double largest = 0;
    for (int i = MB_DX; i < MB_COUNT; i++)
        for (size_t e = 0; e < d.n[i]; e++)
            largest = fabs(d.want[i][e]) > largest ? fabs(d.want[i][e]) : largest;
    for (int i = MB_DX; i < MB_COUNT; i++) {
        if (!dev.grad[i])
            continue;
        float *got = test_alloc(d.n[i] * 4);
        test_download_as(ctx, dev.grad[i], VKATTN_DTYPE_F32, got, d.n[i]);
        snprintf(label, sizeof label, "%s of %s", mbwd_names[i], what);
        double rel = assert_close_floor(got, d.want[i], d.n[i], tol, 0.01 * largest, label);
        size_t at = strlen(figures);
        snprintf(figures + at, sizeof figures - at, " %s %.2g", mbwd_names[i], rel);
        if (i == MB_WQ)
            first = got;
        else
            free(got);
    }
    print_message("%s: max_rel%s\n", what, figures);
    /* deterministic: the same bits again; accumulate: twice the gradient */
    float *again = test_alloc(d.n[MB_WQ] * 4);
    TEST_OK(ctx, vkattn_mha_backward(layer, &dev.bwd));
    test_download_as(ctx, dev.grad[MB_WQ], VKATTN_DTYPE_F32, again, d.n[MB_WQ]);
    if (memcmp(first, again, d.n[MB_WQ] * 4) != 0)
        fail_msg("%s: a second run gave other bits", what);
    dev.bwd.accumulate = true;
    TEST_OK(ctx, vkattn_mha_backward(layer, &dev.bwd));
    test_download_as(ctx, dev.grad[MB_WQ], VKATTN_DTYPE_F32, again, d.n[MB_WQ]);
    for (size_t e = 0; e < d.n[MB_WQ]; e++)
        first[e] *= 2.0f;
    snprintf(label, sizeof label, "grads.wq accumulated twice of %s", what);
    test_assert_close(again, first, d.n[MB_WQ], 1e-6, label);
    free(again), free(first), free(y);
    vkattn_mha_destroy(layer);
    mbwd_device_free(&dev);
    mbwd_free(&d);
    test_assert_no_validation_messages(ctx);
}

#define F32 VKATTN_DTYPE_F32
#define F16 VKATTN_DTYPE_F16
#define BF16 VKATTN_DTYPE_BF16

static const mbwd_case cases[] = {
    {.b = 1, .tq = 9, .dm = 32, .hq = 4, .hkv = 4, .dh = 8, .dtype = F32},
    {.b = 2,
     .tq = 19,
     .dm = 64,
     .hq = 4,
     .hkv = 2,
     .dh = 16,
     .dtype = F32,
     .bias = true,
     .causal = true},
    {.b = 1,
     .tq = 13,
     .tk = 21,
     .dm = 48,
     .dkv = 40,
     .hq = 4,
     .hkv = 1,
     .dh = 16,
     .dv = 24,
     .dtype = F32,
     .cross = 1,
     .bias = true,
     .padding = true},
    {.b = 2,
     .tq = 11,
     .tk = 17,
     .dm = 32,
     .dkv = 24,
     .dvin = 40,
     .hq = 2,
     .hkv = 2,
     .dh = 16,
     .dtype = F32,
     .cross = 2,
     .bias = true,
     .mask = true},
    {.b = 1,
     .tq = 17,
     .dm = 64,
     .hq = 4,
     .hkv = 2,
     .dh = 16,
     .dtype = F32,
     .bias = true,
     .qk_norm = true,
     .rope = true,
     .causal = true},
    {.b = 2,
     .tq = 12,
     .dm = 64,
     .hq = 2,
     .hkv = 1,
     .dh = 32,
     .dtype = F32,
     .rope = true,
     .gptj = true,
     .positions = true,
     .causal = true,
     .top_left = true},
    {.b = 1,
     .tq = 23,
     .dm = 32,
     .hq = 2,
     .hkv = 1,
     .dh = 16,
     .dtype = F32,
     .qk_norm = true,
     .window = 6,
     .softcap = 4.0f,
     .sinks = true,
     .causal = true},
    {.b = 1,
     .tq = 15,
     .dm = 32,
     .hq = 4,
     .hkv = 2,
     .dh = 8,
     .dtype = F32,
     .bias = true,
     .alibi = true,
     .scale = 0.4f,
     .causal = true},
    {.b = 2,
     .tq = 14,
     .dm = 32,
     .hq = 2,
     .hkv = 2,
     .dh = 16,
     .dtype = F32,
     .bias = true,
     .dropout = 0.3f},
    {.b = 1,
     .tq = 16,
     .dm = 64,
     .hq = 4,
     .hkv = 2,
     .dh = 16,
     .dtype = F16,
     .bias = true,
     .qk_norm = true,
     .rope = true,
     .causal = true},
    {.b = 1,
     .tq = 16,
     .dm = 64,
     .hq = 4,
     .hkv = 4,
     .dh = 16,
     .dtype = BF16,
     .bias = true,
     .causal = true,
     .sinks = true},
};

static void test_cases(void **state)
{
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        run_case(*state, &cases[i]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cases),
        cmocka_unit_test(test_mha_backward_errors),
    };
    return cmocka_run_group_tests(tests, test_gpu_setup, test_gpu_teardown);
}
