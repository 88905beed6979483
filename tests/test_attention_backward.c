/* vkattn_attention_backward against vkattn_ref_attention_backward (double,
 * on the same rounded inputs): dq, dk, dv and dsinks elementwise within
 * f32 2e-4, f16 / bf16 2e-2 (max error over the largest reference value,
 * NaN fails), for every forward option the backward takes: causal both
 * ways, window, softcap, additive and boolean masks, key padding, ALiBi,
 * sinks, scale, GQA/MQA, Dk != Dv, dropout, tiles that end mid-way, and a
 * row with no visible key. The forward's out and LSE come from
 * vkattn_attention (its dropout pass included), whose out is checked
 * against the reference's too. Two runs give the same bits. Bad input:
 * test_attention_backward_errors.c. */
#include "test_attention_backward.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

static void describe(const bwd_case *c, char *buf, size_t size)
{
    snprintf(buf, size,
             "B%u Hq%u Hkv%u Tq%u Tk%u Dk%u Dv%u %s->%s causal%d%s window%u softcap%g sinks%d "
             "slopes%d max_bias%g mask%d pad%d dropout%g scale%g",
             c->B, c->Hq, c->Hkv, c->Tq, c->Tk, c->Dk, c->Dv, vkattn_dtype_name(c->dt),
             vkattn_dtype_name(c->grad_dt), c->causal, c->top_left ? "(top-left)" : "", c->window,
             (double)c->softcap, c->sinks, c->slopes, (double)c->max_bias, c->mask, c->padding,
             (double)c->dropout, (double)c->scale);
}

static void assert_same_bits(vkattn_context *ctx, vkattn_buffer *b, const void *first, size_t bytes,
                             const char *what)
{
    void *again = test_alloc(bytes);
    TEST_OK(ctx, vkattn_buffer_download(b, 0, again, bytes));
    if (memcmp(first, again, bytes) != 0)
        fail_msg("%s: a second run gave other bits", what);
    free(again);
}

static void run_case(test_gpu *g, const bwd_case *c)
{
    vkattn_context *ctx = g->ctx;
    char what[400];
    describe(c, what, sizeof what);
    bwd_data d;
    bwd_make_data(c, 31000u + c->Tq * 13u + c->Tk * 7u + c->Dk + c->mask, &d);
    bwd_buffers bb = {0};
    vkattn_attention_args a;
    vkattn_ref_attention_args r;
    bwd_forward_args(c, &d, ctx, &bb, &a, &r);
    const vkattn_dtype dt = c->dt, gd = c->grad_dt;
    float *out = test_alloc(d.no * 4), *lse = test_alloc(d.nl * 4);
    bb.q = test_buffer_of(ctx, dt, d.q, d.nq);
    bb.k = test_buffer_of(ctx, dt, d.k, d.nk);
    bb.v = test_buffer_of(ctx, dt, d.v, d.nv);
    bb.out = test_buffer_of(ctx, dt, out, d.no);
    bb.lse = test_buffer_of(ctx, VKATTN_DTYPE_F32, lse, d.nl);
    bb.dout = test_buffer_of(ctx, dt, d.dout, d.no);
    a.q = vkattn_tensor_make(bb.q, 0, dt, 4, d.qs);
    a.k = vkattn_tensor_make(bb.k, 0, dt, 4, d.ks);
    a.v = vkattn_tensor_make(bb.v, 0, dt, 4, d.vs);
    a.out = vkattn_tensor_make(bb.out, 0, dt, 4, d.os);
    a.lse = vkattn_tensor_make(bb.lse, 0, VKATTN_DTYPE_F32, 3, d.ls);
    r.q = vkattn_host_tensor_make(d.q, VKATTN_DTYPE_F32, 4, d.qs);
    r.k = vkattn_host_tensor_make(d.k, VKATTN_DTYPE_F32, 4, d.ks);
    r.v = vkattn_host_tensor_make(d.v, VKATTN_DTYPE_F32, 4, d.vs);
    r.out = vkattn_host_tensor_make(out, VKATTN_DTYPE_F32, 4, d.os);
    r.lse = vkattn_host_tensor_make(lse, VKATTN_DTYPE_F32, 3, d.ls);
    char err[512] = "";
    TEST_OK(ctx, vkattn_attention(ctx, &a));
    /* the forward (with dropout: its second pass) against the reference's */
    float *want_out = test_alloc(d.no * 4);
    r.out = vkattn_host_tensor_make(want_out, VKATTN_DTYPE_F32, 4, d.os);
    r.lse.data = NULL;
    if (vkattn_ref_attention(&r, err, sizeof err) != VKATTN_SUCCESS)
        fail_msg("reference forward failed on %s: %s", what, err);
    test_download_as(ctx, bb.out, dt, out, d.no);
    char label_out[440];
    snprintf(label_out, sizeof label_out, "out of %s", what);
    test_assert_close(out, want_out, d.no, dt == VKATTN_DTYPE_F32 ? 2e-4 : 2e-2, label_out);
    r.out = vkattn_host_tensor_make(out, VKATTN_DTYPE_F32, 4, d.os);
    free(want_out);

    /* the gradients */
    float *want[4], *got[4];
    size_t n[4] = {d.nq, d.nk, d.nv, c->Hq};
    for (int i = 0; i < 4; i++) {
        want[i] = test_alloc(n[i] * 4), got[i] = test_alloc(n[i] * 4);
        for (size_t e = 0; e < n[i]; e++)
            want[i][e] = got[i][e] = NAN;
    }
    vkattn_buffer *bg[4];
    for (int i = 0; i < 4; i++)
        bg[i] = test_buffer_of(ctx, i == 3 ? VKATTN_DTYPE_F32 : gd, got[i], n[i]);
    vkattn_attention_backward_args ba = {
        .forward = a,
        .dout = vkattn_tensor_make(bb.dout, 0, dt, 4, d.os),
        .dq = vkattn_tensor_make(bg[0], 0, gd, 4, d.qs),
        .dk = vkattn_tensor_make(bg[1], 0, gd, 4, d.ks),
        .dv = vkattn_tensor_make(bg[2], 0, gd, 4, d.vs),
    };
    vkattn_ref_attention_backward_args rb = {
        .forward = r,
        .dout = vkattn_host_tensor_make(d.dout, VKATTN_DTYPE_F32, 4, d.os),
        .dq = vkattn_host_tensor_make(want[0], VKATTN_DTYPE_F32, 4, d.qs),
        .dk = vkattn_host_tensor_make(want[1], VKATTN_DTYPE_F32, 4, d.ks),
        .dv = vkattn_host_tensor_make(want[2], VKATTN_DTYPE_F32, 4, d.vs),
    };
    if (c->sinks) {
        ba.dsinks = vkattn_tensor_make(bg[3], 0, VKATTN_DTYPE_F32, 1, d.hs);
        rb.dsinks = vkattn_host_tensor_make(want[3], VKATTN_DTYPE_F32, 1, d.hs);
    }
    if (vkattn_ref_attention_backward(&rb, err, sizeof err) != VKATTN_SUCCESS)
        fail_msg("reference backward failed on %s: %s", what, err);
    TEST_OK(ctx, vkattn_attention_backward(ctx, &ba));
    static const char *const names[4] = {"dq", "dk", "dv", "dsinks"};
    const double tol = gd == VKATTN_DTYPE_F32 && dt == VKATTN_DTYPE_F32 ? 2e-4 : 2e-2;
    char figures[160] = "";
    for (int i = 0; i < (c->sinks ? 4 : 3); i++) {
        test_download_as(ctx, bg[i], i == 3 ? VKATTN_DTYPE_F32 : gd, got[i], n[i]);
        char label[480];
        snprintf(label, sizeof label, "%s of %s", names[i], what);
        test_assert_close(got[i], want[i], n[i], tol, label);
        size_t at = strlen(figures);
        snprintf(figures + at, sizeof figures - at, " %s %.2g", names[i],
                 test_compare(got[i], want[i], n[i]).max_rel);
    }
    print_message("%s: max_rel%s\n", what, figures);
    /* deterministic: the same bits again */
    size_t gbytes = d.nq * vkattn_dtype_size(gd);
    void *first = test_alloc(gbytes);
    TEST_OK(ctx, vkattn_buffer_download(bg[0], 0, first, gbytes));
    TEST_OK(ctx, vkattn_attention_backward(ctx, &ba));
    assert_same_bits(ctx, bg[0], first, gbytes, what);
    free(first);

    TEST_DESTROY_BUFFERS(bb.q, bb.k, bb.v, bb.out, bb.lse, bb.dout, bb.mask, bb.pad, bb.sinks,
                         bb.slopes, bg[0], bg[1], bg[2], bg[3]);
    for (int i = 0; i < 4; i++)
        free(want[i]), free(got[i]);
    free(out), free(lse);
    bwd_free_data(&d);
    test_assert_no_validation_messages(ctx);
}

#define F32 VKATTN_DTYPE_F32
#define F16 VKATTN_DTYPE_F16
#define BF16 VKATTN_DTYPE_BF16

static const bwd_case cases[] = {
    /* B Hq Hkv Tq Tk Dk Dv in grads */
    {.B = 1, .Hq = 2, .Hkv = 2, .Tq = 9, .Tk = 13, .Dk = 16, .Dv = 16, .dt = F32, .grad_dt = F32},
    {.B = 2,
     .Hq = 8,
     .Hkv = 2,
     .Tq = 37,
     .Tk = 37,
     .Dk = 32,
     .Dv = 32,
     .dt = F32,
     .grad_dt = F32,
     .causal = true},
    {.B = 1,
     .Hq = 4,
     .Hkv = 1,
     .Tq = 21,
     .Tk = 45,
     .Dk = 64,
     .Dv = 64,
     .dt = F32,
     .grad_dt = F32,
     .causal = true,
     .top_left = true},
    {.B = 1,
     .Hq = 4,
     .Hkv = 2,
     .Tq = 17,
     .Tk = 40,
     .Dk = 24,
     .Dv = 40,
     .dt = F32,
     .grad_dt = F32,
     .causal = true},
    {.B = 1,
     .Hq = 2,
     .Hkv = 1,
     .Tq = 30,
     .Tk = 30,
     .Dk = 16,
     .Dv = 16,
     .dt = F32,
     .grad_dt = F32,
     .window = 7},
    {.B = 1,
     .Hq = 2,
     .Hkv = 1,
     .Tq = 30,
     .Tk = 30,
     .Dk = 16,
     .Dv = 16,
     .dt = F32,
     .grad_dt = F32,
     .window = 5,
     .causal = true,
     .softcap = 5.0f},
    {.B = 2,
     .Hq = 3,
     .Hkv = 3,
     .Tq = 11,
     .Tk = 19,
     .Dk = 8,
     .Dv = 8,
     .dt = F32,
     .grad_dt = F32,
     .mask = BWD_MASK_FLOAT,
     .padding = true,
     .scale = 0.5f},
    {.B = 1,
     .Hq = 2,
     .Hkv = 2,
     .Tq = 11,
     .Tk = 19,
     .Dk = 8,
     .Dv = 12,
     .dt = F32,
     .grad_dt = F32,
     .mask = BWD_MASK_HIDE_ROW},
    {.B = 1,
     .Hq = 2,
     .Hkv = 1,
     .Tq = 13,
     .Tk = 13,
     .Dk = 16,
     .Dv = 16,
     .dt = F32,
     .grad_dt = F32,
     .mask = BWD_MASK_ATTENDS},
    {.B = 1,
     .Hq = 2,
     .Hkv = 1,
     .Tq = 13,
     .Tk = 13,
     .Dk = 16,
     .Dv = 16,
     .dt = F32,
     .grad_dt = F32,
     .mask = BWD_MASK_BLOCKS,
     .causal = true},
    {.B = 1,
     .Hq = 4,
     .Hkv = 2,
     .Tq = 19,
     .Tk = 23,
     .Dk = 16,
     .Dv = 16,
     .dt = F32,
     .grad_dt = F32,
     .slopes = true,
     .sinks = true},
    {.B = 2,
     .Hq = 4,
     .Hkv = 4,
     .Tq = 19,
     .Tk = 19,
     .Dk = 16,
     .Dv = 16,
     .dt = F32,
     .grad_dt = F32,
     .max_bias = 8.0f,
     .causal = true,
     .sinks = true},
    {.B = 1,
     .Hq = 4,
     .Hkv = 2,
     .Tq = 33,
     .Tk = 33,
     .Dk = 32,
     .Dv = 32,
     .dt = F32,
     .grad_dt = F32,
     .causal = true,
     .dropout = 0.2f},
    {.B = 1,
     .Hq = 2,
     .Hkv = 1,
     .Tq = 20,
     .Tk = 28,
     .Dk = 16,
     .Dv = 16,
     .dt = F32,
     .grad_dt = F32,
     .dropout = 0.5f,
     .softcap = 10.0f,
     .sinks = true},
    {.B = 1,
     .Hq = 4,
     .Hkv = 2,
     .Tq = 25,
     .Tk = 25,
     .Dk = 64,
     .Dv = 64,
     .dt = F16,
     .grad_dt = F16,
     .causal = true},
    {.B = 1,
     .Hq = 4,
     .Hkv = 2,
     .Tq = 25,
     .Tk = 25,
     .Dk = 64,
     .Dv = 64,
     .dt = BF16,
     .grad_dt = BF16,
     .causal = true,
     .window = 9},
    {.B = 1, .Hq = 2, .Hkv = 2, .Tq = 16, .Tk = 24, .Dk = 32, .Dv = 32, .dt = F16, .grad_dt = F32},
    {.B = 1,
     .Hq = 2,
     .Hkv = 1,
     .Tq = 9,
     .Tk = 70,
     .Dk = 128,
     .Dv = 128,
     .dt = F32,
     .grad_dt = F32,
     .causal = true},
};

static void test_cases(void **state)
{
    test_gpu *g = *state;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        run_case(g, &cases[i]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cases),
        cmocka_unit_test(test_backward_errors),
    };
    return cmocka_run_group_tests(tests, test_gpu_setup, test_gpu_teardown);
}
