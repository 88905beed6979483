/* The MHA layer reference backward's refusals: each names the parameter
 * and its value, and writes no output. */
#include "test_reference_mha_backward.h"

#include <math.h>
#include <stdlib.h>

#define F32 VKATTN_DTYPE_F32

enum { B = 2, T = 4, DM = 8, HQ = 2, HKV = 1, DK = 4, QW = HQ * DK, KW = HKV * DK };
#define NX (B * T * DM)

typedef struct fixture {
    float wq[QW * DM], wk[KW * DM], wv[KW * DM], wo[DM * QW];
    float bq[QW], bk[KW], bv[KW], bo[DM], qn[DK], kn[DK], sinks[HQ], bias_kv[KW];
    float x[NX], dy[NX], y[NX], other[NX];
    float dx[NX], gwq[QW * DM], gsinks[HQ];
    int32_t pos[B * T];
    vkattn_mha_desc desc;
    vkattn_mha_weights w;
    vkattn_ref_mha_backward_args good;
} fixture;

static fixture fx; /* (off the stack) */

/* A GQA self-attention layer with biases, QK-norm and sinks; the good
 * call asks for dx, dWq and dsinks. */
static void setup(void)
{
    memset(&fx, 0, sizeof fx);
    test_rng r = test_rng_seed(5);
    test_fill_uniform(&r, fx.wq, QW * DM, -0.5f, 0.5f);
    test_fill_uniform(&r, fx.wk, KW * DM, -0.5f, 0.5f);
    test_fill_uniform(&r, fx.wv, KW * DM, -0.5f, 0.5f);
    test_fill_uniform(&r, fx.wo, DM * QW, -0.5f, 0.5f);
    test_fill_uniform(&r, fx.x, NX, -1.0f, 1.0f);
    test_fill_uniform(&r, fx.dy, NX, -1.0f, 1.0f);
    for (int e = 0; e < DK; e++)
        fx.qn[e] = fx.kn[e] = 1.0f;
    fx.desc = (vkattn_mha_desc){.embed_dim = DM,
                                .num_heads = HQ,
                                .num_kv_heads = HKV,
                                .head_dim = DK,
                                .bias = true,
                                .qk_norm = true,
                                .sinks = true};
    fx.w = (vkattn_mha_weights){.wq = fx.wq,
                                .wk = fx.wk,
                                .wv = fx.wv,
                                .wo = fx.wo,
                                .bq = fx.bq,
                                .bk = fx.bk,
                                .bv = fx.bv,
                                .bo = fx.bo,
                                .q_norm = fx.qn,
                                .k_norm = fx.kn,
                                .sinks = fx.sinks};
    int64_t xs[3] = {B, T, DM}, ws[2] = {QW, DM}, hs[1] = {HQ};
    vkattn_ref_mha_backward_args *a = &fx.good;
    a->forward.x = vkattn_host_tensor_make(fx.x, F32, 3, xs);
    a->dy = vkattn_host_tensor_make(fx.dy, F32, 3, xs);
    a->dx = vkattn_host_tensor_make(fx.dx, F32, 3, xs);
    a->grads.wq = vkattn_host_tensor_make(fx.gwq, F32, 2, ws);
    a->grads.sinks = vkattn_host_tensor_make(fx.gsinks, F32, 1, hs);
}

static void fill_sentinel(void)
{
    for (int e = 0; e < NX; e++)
        fx.dx[e] = 7.0f;
    for (int e = 0; e < QW * DM; e++)
        fx.gwq[e] = 7.0f;
    for (int e = 0; e < HQ; e++)
        fx.gsinks[e] = 7.0f;
}

/* The outputs still hold the sentinel 7 (nothing written). */
static void assert_untouched(int line)
{
    const float *o[3] = {fx.dx, fx.gwq, fx.gsinks};
    const int n[3] = {NX, QW * DM, HQ};
    for (int t = 0; t < 3; t++)
        for (int e = 0; e < n[t]; e++)
            if (o[t][e] != 7.0f)
                fail_msg("line %d: output %d [%d] was written: %g", line, t, e, (double)o[t][e]);
}

/* A copy of the good call (desc d, weights w, args a) with `change`
 * applied: expects `code`, a message containing `needle`, nothing
 * written. */
#define REFUSED(change, code, needle)                                                             \
    do {                                                                                          \
        vkattn_ref_mha_backward_args a = fx.good;                                                 \
        vkattn_mha_desc d = fx.desc;                                                              \
        vkattn_mha_weights w = fx.w;                                                              \
        change;                                                                                   \
        fill_sentinel();                                                                          \
        char err[512] = "";                                                                       \
        vkattn_result r_ = vkattn_ref_mha_backward(&d, &w, &a, err, sizeof err);                  \
        if (r_ != (code))                                                                         \
            fail_msg("line %d: %s -> %s, expected %s (%s)", __LINE__, #change,                    \
                     vkattn_result_name(r_), vkattn_result_name(code), err);                      \
        if (!strstr(err, (needle)))                                                               \
            fail_msg("line %d: message \"%s\" does not mention \"%s\"", __LINE__, err, (needle)); \
        assert_untouched(__LINE__);                                                               \
    } while (0)

static void test_good_args_pass(void **state)
{
    (void)state;
    setup();
    fill_sentinel();
    char err[512] = "";
    if (vkattn_ref_mha_backward(&fx.desc, &fx.w, &fx.good, err, sizeof err) != VKATTN_SUCCESS)
        fail_msg("%s", err);
    assert_true(fx.dx[0] != 7.0f && fx.gwq[0] != 7.0f && fx.gsinks[0] != 7.0f);
    assert_int_equal(vkattn_ref_mha_backward(&fx.desc, &fx.w, NULL, err, sizeof err),
                     VKATTN_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(err, "args is NULL"));
}

static void test_scope_refusals(void **state)
{
    (void)state;
    setup();
    static const int32_t offsets[3] = {0, 3, 8};
    int64_t hm[1] = {HQ}, wts[4] = {B, HQ, T, T}, xs[3] = {B, T, DM};
    REFUSED((a.forward.sequences = 2, a.forward.q_offsets = offsets), VKATTN_ERROR_UNSUPPORTED,
            "args->forward.sequences is 2: packed sequences have no backward yet");
    REFUSED(a.forward.head_mask = vkattn_host_tensor_make(fx.sinks, F32, 1, hm),
            VKATTN_ERROR_UNSUPPORTED, "args->forward.head_mask is given");
    REFUSED(a.forward.kv_cache_dtype = VKATTN_DTYPE_F16, VKATTN_ERROR_UNSUPPORTED,
            "args->forward.kv_cache_dtype is f16");
    REFUSED(a.forward.weights = vkattn_host_tensor_make(fx.other, F32, 4, wts),
            VKATTN_ERROR_INVALID_ARGUMENT, "args->forward.weights is given");
    REFUSED((d.qk_norm = d.sinks = false, d.add_bias_kv = true, w.bias_k = w.bias_v = fx.bias_kv),
            VKATTN_ERROR_UNSUPPORTED, "desc->add_bias_kv is true");
    REFUSED((d.qk_norm = d.sinks = false, d.add_zero_attn = true, a.grads.sinks.data = NULL),
            VKATTN_ERROR_UNSUPPORTED, "desc->add_zero_attn is true");
    REFUSED(w.dtype = VKATTN_DTYPE_BF16, VKATTN_ERROR_UNSUPPORTED_DTYPE,
            "weights->dtype is bf16: the reference backward takes f32 weights");
    /* ... and what the forward refuses */
    REFUSED(a.forward.dropout_p = 1.0f, VKATTN_ERROR_INVALID_ARGUMENT,
            "args->forward.dropout_p is 1: it must be in [0, 1)");
    REFUSED(a.forward.dropout_p = NAN, VKATTN_ERROR_INVALID_ARGUMENT,
            "args->forward.dropout_p is nan");
    REFUSED(a.forward.x.rank = 2, VKATTN_ERROR_INVALID_ARGUMENT, "args->forward.x.rank is 2");
    REFUSED(a.forward.kv = vkattn_host_tensor_make(fx.other, F32, 3, xs),
            VKATTN_ERROR_INVALID_ARGUMENT,
            "args->forward.kv is given (cross-attention) but desc->qk_norm needs self-attention");
    REFUSED(a.forward.positions = vkattn_host_tensor_make(fx.pos, VKATTN_DTYPE_I32, 2, xs),
            VKATTN_ERROR_INVALID_ARGUMENT,
            "args->forward.positions is given but desc->rope.theta is 0");
    REFUSED((d.rope.theta = 1e4f, fx.pos[1] = -1,
             a.forward.positions = vkattn_host_tensor_make(fx.pos, VKATTN_DTYPE_I32, 2, xs)),
            VKATTN_ERROR_INVALID_ARGUMENT, "args->forward.positions[0, 1] is -1");
    fx.pos[1] = 0;
    REFUSED(a.forward.mask = vkattn_host_tensor_make(fx.other, F32, 2, xs),
            VKATTN_ERROR_SHAPE_MISMATCH, "args->forward.mask");
    REFUSED(fx.sinks[1] = NAN, VKATTN_ERROR_INVALID_ARGUMENT, "weights->sinks[1] is nan");
    fx.sinks[1] = 0.0f;
    REFUSED(w.wo = NULL, VKATTN_ERROR_INVALID_ARGUMENT, "weights->wo is NULL");
    REFUSED(d.num_kv_heads = 3, VKATTN_ERROR_INVALID_ARGUMENT, "num_kv_heads");
}

/* desc.weight_dtype q8_0 (which needs widths that are multiples of 64). */
static void test_q8_0_layer_refused(void **state)
{
    (void)state;
    enum { D = 64 };
    float *wts = test_alloc(4 * D * D * sizeof(float)), x[D], dy[D];
    memset(x, 0, sizeof x), memset(dy, 0, sizeof dy);
    vkattn_mha_desc d = {.embed_dim = D, .num_heads = 2, .weight_dtype = VKATTN_DTYPE_Q8_0};
    vkattn_mha_weights w = {
        .wq = wts, .wk = wts + D * D, .wv = wts + 2 * D * D, .wo = wts + 3 * D * D};
    int64_t xs[3] = {1, 1, D};
    vkattn_ref_mha_backward_args a = {.forward.x = vkattn_host_tensor_make(x, F32, 3, xs),
                                      .dy = vkattn_host_tensor_make(dy, F32, 3, xs)};
    char err[512] = "";
    assert_int_equal(vkattn_ref_mha_backward(&d, &w, &a, err, sizeof err),
                     VKATTN_ERROR_UNSUPPORTED_DTYPE);
    if (!strstr(err, "desc->weight_dtype is q8_0"))
        fail_msg("message: %s", err);
    free(wts);
}

static void test_output_refusals(void **state)
{
    (void)state;
    setup();
    int64_t x5[3] = {B, 5, DM}, x7[3] = {B, T, 7}, xs[3] = {B, T, DM};
    int64_t w7[2] = {7, DM}, wo5[2] = {DM, 5}, b2[2] = {1, QW}, h3[1] = {3}, dh[1] = {DK};
    REFUSED(a.dy.data = NULL, VKATTN_ERROR_INVALID_ARGUMENT, "args->dy.data is NULL");
    REFUSED(a.dy.dtype = VKATTN_DTYPE_F16, VKATTN_ERROR_UNSUPPORTED_DTYPE,
            "args->dy.dtype is f16: it must be f32");
    REFUSED(a.dy = vkattn_host_tensor_make(fx.dy, F32, 3, x5), VKATTN_ERROR_SHAPE_MISMATCH,
            "args->dy.shape[1] is 5 but args->forward.x.shape[1] is 4: dy has y's shape");
    REFUSED(a.dx = vkattn_host_tensor_make(fx.dx, F32, 3, x7), VKATTN_ERROR_SHAPE_MISMATCH,
            "args->dx.shape[2] is 7 but args->forward.x.shape[2] is 8");
    REFUSED(a.dx.strides[1] = 0, VKATTN_ERROR_INVALID_ARGUMENT, "args->dx.strides[1] is 0");
    REFUSED(a.dkv = vkattn_host_tensor_make(fx.other, F32, 3, xs), VKATTN_ERROR_INVALID_ARGUMENT,
            "args->dkv is given but args->forward.kv is not");
    REFUSED(a.dvalue = vkattn_host_tensor_make(fx.other, F32, 3, xs), VKATTN_ERROR_INVALID_ARGUMENT,
            "args->dvalue is given but args->forward.value is not");
    REFUSED(a.grads.wq = vkattn_host_tensor_make(fx.gwq, F32, 2, w7), VKATTN_ERROR_SHAPE_MISMATCH,
            "args->grads.wq.shape[0] is 7 but the layer's Wq has 8 rows (Hq*Dk)");
    REFUSED(a.grads.wo = vkattn_host_tensor_make(fx.other, F32, 2, wo5),
            VKATTN_ERROR_SHAPE_MISMATCH,
            "args->grads.wo.shape[1] is 5 but the layer's Wo has 8 columns (Hq*Dv)");
    REFUSED(a.grads.wk = vkattn_host_tensor_make(fx.other, F32, 1, wo5),
            VKATTN_ERROR_SHAPE_MISMATCH, "args->grads.wk.rank is 1 but the layer's Wk is rank 2");
    REFUSED(a.grads.bq = vkattn_host_tensor_make(fx.other, F32, 2, b2), VKATTN_ERROR_SHAPE_MISMATCH,
            "args->grads.bq.rank is 2 but the layer's bq is rank 1");
    REFUSED(a.grads.sinks = vkattn_host_tensor_make(fx.gsinks, F32, 1, h3),
            VKATTN_ERROR_SHAPE_MISMATCH,
            "args->grads.sinks.shape[0] is 3 but the layer's sinks has 2 values (Hq)");
    REFUSED((a.grads.k_norm = vkattn_host_tensor_make(fx.other, F32, 1, dh),
             a.grads.k_norm.dtype = VKATTN_DTYPE_F16),
            VKATTN_ERROR_UNSUPPORTED_DTYPE, "args->grads.k_norm.dtype is f16: gradients are f32");
    REFUSED((d.bias = false, a.grads.bo = vkattn_host_tensor_make(fx.other, F32, 1, &xs[2])),
            VKATTN_ERROR_INVALID_ARGUMENT,
            "args->grads.bo is given but desc->bias is false: the layer has no bo");
    REFUSED((d.qk_norm = false, a.grads.q_norm = vkattn_host_tensor_make(fx.other, F32, 1, dh)),
            VKATTN_ERROR_INVALID_ARGUMENT,
            "args->grads.q_norm is given but desc->qk_norm is false");
    REFUSED(d.sinks = false, VKATTN_ERROR_INVALID_ARGUMENT,
            "args->grads.sinks is given but desc->sinks is false");
    REFUSED(a.grads.wq.strides[0] = 0, VKATTN_ERROR_INVALID_ARGUMENT,
            "args->grads.wq.strides[0] is 0");
}

/* vkattn_ref_mha itself refuses a dropout_p outside [0, 1) by name. */
static void test_forward_dropout_refused(void **state)
{
    (void)state;
    setup();
    static const float bad[3] = {1.0f, -0.25f, NAN};
    static const char *const text[3] = {"args->dropout_p is 1: it must be in [0, 1)",
                                        "args->dropout_p is -0.25", "args->dropout_p is nan"};
    for (int i = 0; i < 3; i++) {
        vkattn_ref_mha_args f = fx.good.forward;
        int64_t xs[3] = {B, T, DM};
        for (int e = 0; e < NX; e++)
            fx.y[e] = 7.0f;
        f.y = vkattn_host_tensor_make(fx.y, F32, 3, xs);
        f.dropout_p = bad[i];
        char err[512] = "";
        assert_int_equal(vkattn_ref_mha(&fx.desc, &fx.w, &f, err, sizeof err),
                         VKATTN_ERROR_INVALID_ARGUMENT);
        if (!strstr(err, text[i]))
            fail_msg("message \"%s\" does not mention \"%s\"", err, text[i]);
        for (int e = 0; e < NX; e++)
            assert_true(fx.y[e] == 7.0f);
    }
}

int mbw_run_error_tests(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_good_args_pass),          cmocka_unit_test(test_scope_refusals),
        cmocka_unit_test(test_q8_0_layer_refused),      cmocka_unit_test(test_output_refusals),
        cmocka_unit_test(test_forward_dropout_refused),
    };
    return cmocka_run_group_tests_name("reference mha backward refusals", tests, NULL, NULL);
}
