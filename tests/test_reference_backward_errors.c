/* The reference backward's refusals: each names the parameter and its
 * value, and writes no output. */
#include "test_reference_backward.h"

#include <math.h>

#define F32 VKATTN_DTYPE_F32

enum { B = 2, HQ = 4, HKV = 2, TQ = 7, TK = 5, DK = 32, DV = 32 };
#define NQ (B * HQ * TQ * DK)
#define NK (B * HKV * TK * DK)

typedef struct fixture {
    float q[NQ], k[NK], v[NK], dout[NQ], out[NQ], sinks[HQ];
    float dq[NQ], dk[NK], dv[NK], dsinks[HQ];
    uint8_t blocks[NK * 2]; /* room for quantized k or v (zeros) */
    vkattn_ref_attention_backward_args good;
} fixture;

static fixture fx; /* (big: off the stack) */

static void setup(void)
{
    memset(&fx, 0, sizeof fx);
    int64_t qs[4] = {B, HQ, TQ, DK}, ks[4] = {B, HKV, TK, DK}, hs[1] = {HQ};
    for (int x = 0; x < NQ; x++)
        fx.q[x] = fx.dout[x] = 0.01f * (float)(x % 13);
    vkattn_ref_attention_backward_args *a = &fx.good;
    a->forward.q = vkattn_host_tensor_make(fx.q, F32, 4, qs);
    a->forward.k = vkattn_host_tensor_make(fx.k, F32, 4, ks);
    a->forward.v = vkattn_host_tensor_make(fx.v, F32, 4, ks);
    a->forward.sinks = vkattn_host_tensor_make(fx.sinks, F32, 1, hs);
    a->dout = vkattn_host_tensor_make(fx.dout, F32, 4, qs);
    a->dq = vkattn_host_tensor_make(fx.dq, F32, 4, qs);
    a->dk = vkattn_host_tensor_make(fx.dk, F32, 4, ks);
    a->dv = vkattn_host_tensor_make(fx.dv, F32, 4, ks);
    a->dsinks = vkattn_host_tensor_make(fx.dsinks, F32, 1, hs);
}

/* The outputs still hold the sentinel 7 (nothing written). */
static void assert_untouched(int line)
{
    const float *o[4] = {fx.dq, fx.dk, fx.dv, fx.dsinks};
    const int n[4] = {NQ, NK, NK, HQ};
    for (int t = 0; t < 4; t++)
        for (int x = 0; x < n[t]; x++)
            if (o[t][x] != 7.0f)
                fail_msg("line %d: output %d [%d] was written: %g", line, t, x, (double)o[t][x]);
}

static void fill_sentinel(void)
{
    for (int x = 0; x < NQ; x++)
        fx.dq[x] = 7.0f;
    for (int x = 0; x < NK; x++)
        fx.dk[x] = fx.dv[x] = 7.0f;
    for (int x = 0; x < HQ; x++)
        fx.dsinks[x] = 7.0f;
}

/* Resets a copy of the good args, applies `change`, expects `code` and a
 * message containing `needle`, and no output written. */
#define REFUSED(change, code, needle)                                                             \
    do {                                                                                          \
        vkattn_ref_attention_backward_args a = fx.good;                                           \
        change;                                                                                   \
        fill_sentinel();                                                                          \
        char err[512] = "";                                                                       \
        vkattn_result r_ = vkattn_ref_attention_backward(&a, err, sizeof err);                    \
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
    assert_int_equal(vkattn_ref_attention_backward(&fx.good, err, sizeof err), VKATTN_SUCCESS);
    assert_true(fx.dq[0] != 7.0f && fx.dsinks[0] != 7.0f);
    /* forward.out given with the right shape is fine too */
    vkattn_ref_attention_backward_args a = fx.good;
    int64_t qs[4] = {B, HQ, TQ, DK};
    a.forward.out = vkattn_host_tensor_make(fx.out, F32, 4, qs);
    assert_int_equal(vkattn_ref_attention_backward(&a, err, sizeof err), VKATTN_SUCCESS);
    assert_int_equal(vkattn_ref_attention_backward(NULL, err, sizeof err),
                     VKATTN_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(err, "args is NULL"));
}

static void test_scope_refusals(void **state)
{
    (void)state;
    setup();
    static const int32_t offsets[3] = {0, 3, 7};
    int64_t ws[4] = {B, HQ, TQ, TK}, q3[3] = {HQ, TQ, DK};
    REFUSED((a.forward.sequences = 2, a.forward.q_offsets = offsets), VKATTN_ERROR_UNSUPPORTED,
            "args->forward.sequences is 2: packed sequences have no backward yet");
    REFUSED(a.forward.weights = vkattn_host_tensor_make(fx.out, F32, 4, ws),
            VKATTN_ERROR_INVALID_ARGUMENT, "args->forward.weights is given");
    REFUSED(a.forward.q = vkattn_host_tensor_make(fx.q, F32, 3, q3), VKATTN_ERROR_INVALID_ARGUMENT,
            "args->forward.q.rank is 3");
    REFUSED(a.forward.k.dtype = VKATTN_DTYPE_Q8_0; a.forward.k.data = fx.blocks;
            memset(a.forward.k.strides, 0, sizeof a.forward.k.strides),
            VKATTN_ERROR_UNSUPPORTED_DTYPE, "args->forward.k.dtype is q8_0");
    REFUSED(a.forward.v.dtype = VKATTN_DTYPE_Q4_0; a.forward.v.data = fx.blocks;
            memset(a.forward.v.strides, 0, sizeof a.forward.v.strides),
            VKATTN_ERROR_UNSUPPORTED_DTYPE, "args->forward.v.dtype is q4_0");
}

/* The forward's own checks run with "args->forward." names. */
static void test_forward_refusals(void **state)
{
    (void)state;
    setup();
    int64_t bad_k[4] = {B, 3, TK, DK}, out5[4] = {B, HQ, 5, DK};
    REFUSED(a.forward.k = vkattn_host_tensor_make(fx.k, F32, 4, bad_k), VKATTN_ERROR_SHAPE_MISMATCH,
            "args->forward.k.shape[1]");
    REFUSED(a.forward.dropout_p = 1.0f, VKATTN_ERROR_INVALID_ARGUMENT,
            "args->forward.dropout_p is 1: it must be in [0, 1)");
    REFUSED(a.forward.dropout_p = NAN, VKATTN_ERROR_INVALID_ARGUMENT,
            "args->forward.dropout_p is nan");
    REFUSED(a.forward.softcap = -1.0f, VKATTN_ERROR_INVALID_ARGUMENT,
            "args->forward.softcap is -1");
    REFUSED(a.forward.scale = INFINITY, VKATTN_ERROR_INVALID_ARGUMENT, "args->forward.scale");
    REFUSED(a.forward.out = vkattn_host_tensor_make(fx.out, F32, 4, out5),
            VKATTN_ERROR_SHAPE_MISMATCH, "args->forward.out.shape[2]");
    REFUSED(a.forward.q.data = NULL, VKATTN_ERROR_INVALID_ARGUMENT, "args->forward.q.data is NULL");
    REFUSED(fx.sinks[1] = NAN, VKATTN_ERROR_INVALID_ARGUMENT, "args->forward.sinks[1] is nan");
    fx.sinks[1] = 0.0f;
}

static void test_gradient_refusals(void **state)
{
    (void)state;
    setup();
    int64_t q5[4] = {B, HQ, 5, DK}, dv16[4] = {B, HKV, TK, 16}, k3[3] = {B * HKV, TK, DK};
    int64_t dout_dv[4] = {B, HQ, TQ, 16}, h3[1] = {3}, h2[2] = {1, HQ};
    REFUSED(a.dout.data = NULL, VKATTN_ERROR_INVALID_ARGUMENT,
            "args->dout.data is NULL: dout is required");
    REFUSED(a.dout = vkattn_host_tensor_make(fx.dout, F32, 4, dout_dv), VKATTN_ERROR_SHAPE_MISMATCH,
            "args->dout.shape[3] is 16: it must be 32, as the forward's out [B, Hq, Tq, Dv]");
    REFUSED(a.dout.dtype = VKATTN_DTYPE_U8, VKATTN_ERROR_UNSUPPORTED_DTYPE,
            "args->dout.dtype is u8: it must be f32, f16 or bf16");
    REFUSED(a.dq = vkattn_host_tensor_make(fx.dq, F32, 4, q5), VKATTN_ERROR_SHAPE_MISMATCH,
            "args->dq.shape[2] is 5: it must be 7, as args->forward.q's");
    REFUSED(a.dq.data = NULL, VKATTN_ERROR_INVALID_ARGUMENT, "args->dq.data is NULL");
    REFUSED(a.dk = vkattn_host_tensor_make(fx.dk, F32, 3, k3), VKATTN_ERROR_INVALID_ARGUMENT,
            "args->dk.rank is 3: it must be 4, as args->forward.k's");
    REFUSED(a.dv = vkattn_host_tensor_make(fx.dv, F32, 4, dv16), VKATTN_ERROR_SHAPE_MISMATCH,
            "args->dv.shape[3] is 16: it must be 32, as args->forward.v's");
    REFUSED(a.dv.dtype = VKATTN_DTYPE_I32, VKATTN_ERROR_UNSUPPORTED_DTYPE,
            "args->dv.dtype is i32: it must be f32, f16 or bf16");
    REFUSED(a.dk.strides[1] = 0, VKATTN_ERROR_INVALID_ARGUMENT, "args->dk");
    REFUSED(a.forward.sinks.data = NULL, VKATTN_ERROR_INVALID_ARGUMENT,
            "args->dsinks is given but args->forward.sinks is not");
    REFUSED(a.dsinks = vkattn_host_tensor_make(fx.dsinks, F32, 1, h3), VKATTN_ERROR_SHAPE_MISMATCH,
            "args->dsinks.shape[0] is 3: it must be 4");
    REFUSED(a.dsinks = vkattn_host_tensor_make(fx.dsinks, F32, 2, h2),
            VKATTN_ERROR_INVALID_ARGUMENT, "args->dsinks.rank is 2");
    REFUSED(a.dsinks.dtype = VKATTN_DTYPE_F16, VKATTN_ERROR_UNSUPPORTED_DTYPE,
            "args->dsinks.dtype is f16: it must be f32");
}

int bwd_run_error_tests(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_good_args_pass),
        cmocka_unit_test(test_scope_refusals),
        cmocka_unit_test(test_forward_refusals),
        cmocka_unit_test(test_gradient_refusals),
    };
    return cmocka_run_group_tests_name("reference backward refusals", tests, NULL, NULL);
}
