/* The reference backward's cases: finite differences of every modifier
 * (bwd_check_case), a row with no visible key, and 16-bit tensors against
 * the f32 computation on the same values. */
#include "test_reference_backward.h"

#include <math.h>
#include <stdlib.h>

#define F32 VKATTN_DTYPE_F32

/* Runs each case; every gradient asked for must be nonzero somewhere, so a
 * case cannot pass by computing nothing. */
static void check_cases(const bwd_case *cases, size_t n)
{
    for (size_t c = 0; c < n; c++) {
        bwd_errors e;
        bwd_check_case(&cases[c], &e);
        for (int t = 0; t < (cases[c].sinks ? 4 : 3); t++)
            if (!(e.max[t] > 1e-3))
                fail_msg("%s: gradient %d is all (near) zero: max %g", cases[c].name, t, e.max[t]);
    }
}

#define CHECK(...)                                             \
    do {                                                       \
        const bwd_case cases_[] = {__VA_ARGS__};               \
        check_cases(cases_, sizeof cases_ / sizeof cases_[0]); \
    } while (0)

static void test_mha(void **state)
{
    (void)state;
    CHECK({.name = "mha", .B = 2, .Hq = 2, .Hkv = 2, .Tq = 5, .Tk = 6, .Dk = 8, .Dv = 8},
          {.name = "mha scale 0.7",
           .B = 1,
           .Hq = 3,
           .Hkv = 3,
           .Tq = 4,
           .Tk = 4,
           .Dk = 5,
           .Dv = 5,
           .scale = 0.7f});
}

static void test_gqa_mqa(void **state)
{
    (void)state;
    CHECK({.name = "gqa 8/2", .B = 1, .Hq = 8, .Hkv = 2, .Tq = 3, .Tk = 5, .Dk = 4, .Dv = 4},
          {.name = "mqa 4/1", .B = 2, .Hq = 4, .Hkv = 1, .Tq = 3, .Tk = 4, .Dk = 4, .Dv = 4});
}

static void test_causal(void **state)
{
    (void)state;
    CHECK({.name = "causal bottom-right 4x7",
           .B = 1,
           .Hq = 2,
           .Hkv = 1,
           .Tq = 4,
           .Tk = 7,
           .Dk = 6,
           .Dv = 6,
           .causal = true},
          {.name = "causal top-left 4x7",
           .B = 1,
           .Hq = 2,
           .Hkv = 1,
           .Tq = 4,
           .Tk = 7,
           .Dk = 6,
           .Dv = 6,
           .causal = true,
           .top_left = true},
          {.name = "causal top-left 6x4",
           .B = 1,
           .Hq = 2,
           .Hkv = 2,
           .Tq = 6,
           .Tk = 4,
           .Dk = 4,
           .Dv = 4,
           .causal = true,
           .top_left = true});
}

static void test_window_softcap(void **state)
{
    (void)state;
    CHECK({.name = "window 3",
           .B = 1,
           .Hq = 2,
           .Hkv = 1,
           .Tq = 6,
           .Tk = 8,
           .Dk = 4,
           .Dv = 4,
           .window = 3},
          {.name = "causal window 2",
           .B = 1,
           .Hq = 2,
           .Hkv = 2,
           .Tq = 5,
           .Tk = 5,
           .Dk = 4,
           .Dv = 4,
           .causal = true,
           .window = 2},
          {.name = "softcap 1",
           .B = 1,
           .Hq = 2,
           .Hkv = 1,
           .Tq = 4,
           .Tk = 6,
           .Dk = 8,
           .Dv = 8,
           .softcap = 1.0f,
           .scale = 1.0f},
          {.name = "softcap 2.5 gqa",
           .B = 2,
           .Hq = 4,
           .Hkv = 2,
           .Tq = 3,
           .Tk = 5,
           .Dk = 6,
           .Dv = 6,
           .softcap = 2.5f,
           .scale = 1.0f});
}

static void test_masks(void **state)
{
    (void)state;
    CHECK({.name = "mask f32 [B,Hq,Tq,Tk]",
           .B = 2,
           .Hq = 2,
           .Hkv = 1,
           .Tq = 4,
           .Tk = 6,
           .Dk = 4,
           .Dv = 4,
           .mask = BWD_MASK_ADD_F32},
          {.name = "mask f16 [B,1,Tq,Tk]",
           .B = 2,
           .Hq = 2,
           .Hkv = 2,
           .Tq = 3,
           .Tk = 5,
           .Dk = 4,
           .Dv = 4,
           .mask = BWD_MASK_ADD_F16},
          {.name = "mask bf16 [Tq,Tk]",
           .B = 1,
           .Hq = 2,
           .Hkv = 1,
           .Tq = 4,
           .Tk = 5,
           .Dk = 4,
           .Dv = 4,
           .mask = BWD_MASK_ADD_BF16},
          {.name = "mask u8 true attends",
           .B = 2,
           .Hq = 2,
           .Hkv = 1,
           .Tq = 4,
           .Tk = 6,
           .Dk = 4,
           .Dv = 4,
           .mask = BWD_MASK_U8_ATTENDS},
          {.name = "mask u8 true blocks",
           .B = 2,
           .Hq = 2,
           .Hkv = 2,
           .Tq = 4,
           .Tk = 6,
           .Dk = 4,
           .Dv = 4,
           .mask = BWD_MASK_U8_BLOCKS},
          {.name = "key_padding",
           .B = 3,
           .Hq = 2,
           .Hkv = 1,
           .Tq = 3,
           .Tk = 6,
           .Dk = 4,
           .Dv = 4,
           .key_padding = true});
}

static void test_alibi_sinks(void **state)
{
    (void)state;
    CHECK({.name = "alibi slopes",
           .B = 1,
           .Hq = 3,
           .Hkv = 1,
           .Tq = 4,
           .Tk = 6,
           .Dk = 4,
           .Dv = 4,
           .alibi = 1},
          {.name = "alibi max_bias causal",
           .B = 1,
           .Hq = 4,
           .Hkv = 2,
           .Tq = 4,
           .Tk = 6,
           .Dk = 4,
           .Dv = 4,
           .alibi = 2,
           .causal = true},
          {.name = "sinks",
           .B = 2,
           .Hq = 3,
           .Hkv = 1,
           .Tq = 3,
           .Tk = 4,
           .Dk = 4,
           .Dv = 4,
           .sinks = true},
          {.name = "sinks gqa causal softcap",
           .B = 1,
           .Hq = 4,
           .Hkv = 2,
           .Tq = 5,
           .Tk = 5,
           .Dk = 4,
           .Dv = 4,
           .sinks = true,
           .causal = true,
           .softcap = 1.5f,
           .scale = 1.0f});
}

static void test_dims_head_mask_dropout(void **state)
{
    (void)state;
    CHECK({.name = "Dk 6 != Dv 3", .B = 1, .Hq = 2, .Hkv = 1, .Tq = 4, .Tk = 5, .Dk = 6, .Dv = 3},
          {.name = "Dk 3 != Dv 7", .B = 2, .Hq = 2, .Hkv = 2, .Tq = 3, .Tk = 4, .Dk = 3, .Dv = 7},
          {.name = "head_mask [B,Hq]",
           .B = 2,
           .Hq = 4,
           .Hkv = 2,
           .Tq = 3,
           .Tk = 4,
           .Dk = 4,
           .Dv = 4,
           .head_mask = true,
           .sinks = true},
          {.name = "dropout 0.3",
           .B = 2,
           .Hq = 2,
           .Hkv = 1,
           .Tq = 4,
           .Tk = 6,
           .Dk = 4,
           .Dv = 4,
           .dropout_p = 0.3f},
          {.name = "dropout 0.6 sinks softcap",
           .B = 1,
           .Hq = 2,
           .Hkv = 2,
           .Tq = 5,
           .Tk = 7,
           .Dk = 4,
           .Dv = 4,
           .dropout_p = 0.6f,
           .sinks = true,
           .softcap = 2.0f,
           .scale = 1.0f});
}

/* Everything at once, including rows that see no key. */
static void test_dead_rows_and_all(void **state)
{
    (void)state;
    CHECK({.name = "dead rows u8 + padding",
           .B = 3,
           .Hq = 2,
           .Hkv = 1,
           .Tq = 4,
           .Tk = 5,
           .Dk = 4,
           .Dv = 4,
           .mask = BWD_MASK_U8_ATTENDS,
           .key_padding = true,
           .dead_rows = true,
           .sinks = true},
          {.name = "dead rows f32 mask",
           .B = 1,
           .Hq = 2,
           .Hkv = 2,
           .Tq = 3,
           .Tk = 4,
           .Dk = 4,
           .Dv = 4,
           .mask = BWD_MASK_ADD_F32,
           .dead_rows = true},
          {.name = "all modifiers",
           .B = 2,
           .Hq = 4,
           .Hkv = 2,
           .Tq = 4,
           .Tk = 6,
           .Dk = 5,
           .Dv = 3,
           .causal = true,
           .window = 4,
           .softcap = 2.0f,
           .scale = 0.8f,
           .mask = BWD_MASK_U8_BLOCKS,
           .key_padding = true,
           .alibi = 1,
           .sinks = true,
           .head_mask = true,
           .dropout_p = 0.25f});
}

/* The rows with no visible key get exact zeros: dq rows of query 1 (the
 * mask's dead row, every head as the u8 [Tq, Tk] mask broadcasts), and
 * everything of the all-padding batch row. */
static void test_dead_rows_are_zero(void **state)
{
    (void)state;
    enum { B = 2, H = 2, T = 3, D = 4 };
    test_rng r = test_rng_seed(3);
    float *q = bwd_values(&r, B * H * T * D, 1.5f), *k = bwd_values(&r, B * H * T * D, 1.5f);
    float *v = bwd_values(&r, B * H * T * D, 1.0f), *dout = bwd_values(&r, B * H * T * D, 1.0f);
    float dq[B * H * T * D], dk[B * H * T * D], dv[B * H * T * D], dsinks[H], sinks[H] = {1, -1};
    uint8_t mask[T * T] = {1, 1, 1, 0, 0, 0, 1, 0, 1}, pad[B * T] = {1, 1, 1, 0, 0, 0};
    int64_t s[4] = {B, H, T, D}, ms[2] = {T, T}, ps[2] = {B, T}, hs[1] = {H};
    vkattn_ref_attention_backward_args a = {
        .forward = {.q = vkattn_host_tensor_make(q, F32, 4, s),
                    .k = vkattn_host_tensor_make(k, F32, 4, s),
                    .v = vkattn_host_tensor_make(v, F32, 4, s),
                    .mask = vkattn_host_tensor_make(mask, VKATTN_DTYPE_U8, 2, ms),
                    .key_padding = vkattn_host_tensor_make(pad, VKATTN_DTYPE_U8, 2, ps),
                    .sinks = vkattn_host_tensor_make(sinks, F32, 1, hs)},
        .dout = vkattn_host_tensor_make(dout, F32, 4, s),
        .dq = vkattn_host_tensor_make(dq, F32, 4, s),
        .dk = vkattn_host_tensor_make(dk, F32, 4, s),
        .dv = vkattn_host_tensor_make(dv, F32, 4, s),
        .dsinks = vkattn_host_tensor_make(dsinks, F32, 1, hs),
    };
    memset(dq, 0xff, sizeof dq), memset(dk, 0xff, sizeof dk), memset(dv, 0xff, sizeof dv);
    char err[512] = "";
    if (vkattn_ref_attention_backward(&a, err, sizeof err) != VKATTN_SUCCESS)
        fail_msg("%s", err);
    double live = 0.0;
    for (int x = 0; x < B * H * T * D; x++) {
        const int b = x / (H * T * D), i = x / D % T;
        assert_true(isfinite(dq[x]) && isfinite(dk[x]) && isfinite(dv[x]));
        if (b == 1 || i == 1)
            assert_true(dq[x] == 0.0f);
        if (b == 1)
            assert_true(dk[x] == 0.0f && dv[x] == 0.0f);
        else
            live = fmax(live, fabs((double)dq[x]) + fabs((double)dk[x]));
    }
    assert_true(live > 1e-3);
    assert_true(isfinite(dsinks[0]) && isfinite(dsinks[1]) && dsinks[0] != 0.0f);
    free(q), free(k), free(v), free(dout);
}

/* 16-bit inputs and outputs: the same numbers as the f32 call on the
 * rounded values, each gradient rounded once to its 16-bit dtype (so within
 * half an ulp of the f32 result; in fact bit for bit). */
static void test_16_bit(void **state)
{
    (void)state;
    enum { B = 2, Hq = 4, Hkv = 2, Tq = 3, Tk = 5, D = 8 };
    const size_t nq = B * Hq * Tq * D, nk = B * Hkv * Tk * D;
    const vkattn_dtype kinds[2][5] = {
        /* q, k, v, dout, outputs */
        {VKATTN_DTYPE_F16, VKATTN_DTYPE_F16, VKATTN_DTYPE_F16, VKATTN_DTYPE_F16, VKATTN_DTYPE_F16},
        {VKATTN_DTYPE_BF16, VKATTN_DTYPE_BF16, VKATTN_DTYPE_F16, VKATTN_DTYPE_BF16,
         VKATTN_DTYPE_BF16},
    };
    for (int c = 0; c < 2; c++) {
        test_rng r = test_rng_seed(40 + (uint64_t)c);
        float *q = test_random_array(&r, nq, 1.5f, F32), *k = test_random_array(&r, nk, 1.5f, F32);
        float *v = test_random_array(&r, nk, 1.0f, F32),
              *dout = test_random_array(&r, nq, 1.0f, F32);
        float *src[4] = {q, k, v, dout};
        size_t n[4] = {nq, nk, nk, nq};
        uint16_t *h16[4];
        for (int t = 0; t < 4; t++) {
            h16[t] = test_alloc(n[t] * 2);
            for (size_t x = 0; x < n[t]; x++) {
                bool f16 = kinds[c][t] == VKATTN_DTYPE_F16;
                h16[t][x] = f16 ? vkattn_f32_to_f16(src[t][x]) : vkattn_f32_to_bf16(src[t][x]);
                src[t][x] = f16 ? vkattn_f16_to_f32(h16[t][x]) : vkattn_bf16_to_f32(h16[t][x]);
            }
        }
        int64_t qs[4] = {B, Hq, Tq, D}, ks[4] = {B, Hkv, Tk, D};
        float g32[3][B * Hq * Tq * D];
        uint16_t g16[3][B * Hq * Tq * D];
        vkattn_ref_attention_backward_args a = {
            .forward = {.q = vkattn_host_tensor_make(q, F32, 4, qs),
                        .k = vkattn_host_tensor_make(k, F32, 4, ks),
                        .v = vkattn_host_tensor_make(v, F32, 4, ks),
                        .causal = true,
                        .softcap = 3.0f,
                        .dropout_p = 0.2f,
                        .dropout_seed = 5},
            .dout = vkattn_host_tensor_make(dout, F32, 4, qs),
            .dq = vkattn_host_tensor_make(g32[0], F32, 4, qs),
            .dk = vkattn_host_tensor_make(g32[1], F32, 4, ks),
            .dv = vkattn_host_tensor_make(g32[2], F32, 4, ks),
        };
        char err[512] = "";
        if (vkattn_ref_attention_backward(&a, err, sizeof err) != VKATTN_SUCCESS)
            fail_msg("f32: %s", err);
        vkattn_ref_attention_backward_args a16 = a;
        a16.forward.q = vkattn_host_tensor_make(h16[0], kinds[c][0], 4, qs);
        a16.forward.k = vkattn_host_tensor_make(h16[1], kinds[c][1], 4, ks);
        a16.forward.v = vkattn_host_tensor_make(h16[2], kinds[c][2], 4, ks);
        a16.dout = vkattn_host_tensor_make(h16[3], kinds[c][3], 4, qs);
        a16.dq = vkattn_host_tensor_make(g16[0], kinds[c][4], 4, qs);
        a16.dk = vkattn_host_tensor_make(g16[1], kinds[c][4], 4, ks);
        a16.dv = vkattn_host_tensor_make(g16[2], kinds[c][4], 4, ks);
        if (vkattn_ref_attention_backward(&a16, err, sizeof err) != VKATTN_SUCCESS)
            fail_msg("16-bit: %s", err);
        const bool f16 = kinds[c][4] == VKATTN_DTYPE_F16;
        const double half_ulp = f16 ? 0x1p-11 : 0x1p-8;
        double worst = 0.0;
        for (int t = 0; t < 3; t++)
            for (size_t x = 0; x < (t ? nk : nq); x++) {
                float want = g32[t][x];
                float got = f16 ? vkattn_f16_to_f32(g16[t][x]) : vkattn_bf16_to_f32(g16[t][x]);
                uint16_t rounded = f16 ? vkattn_f32_to_f16(want) : vkattn_f32_to_bf16(want);
                double rel = fabs((double)got - want) / fmax(fabs((double)want), 0x1p-14);
                worst = fmax(worst, rel);
                if (rel > half_ulp || rounded != g16[t][x])
                    fail_msg("case %d gradient %d [%zu]: %.9g, want %.9g rounded (%04x, not %04x)",
                             c, t, x, (double)got, (double)want, rounded, g16[t][x]);
            }
        print_message("%s: max relative difference to f32 %.3g (half an ulp: %.3g)\n",
                      f16 ? "f16" : "bf16 (v f16)", worst, half_ulp);
        free(q), free(k), free(v), free(dout);
        for (int t = 0; t < 4; t++)
            free(h16[t]);
    }
}

/* forward.out and forward.lse are not read: given (with garbage in them)
 * or absent, the gradients are the same, and out is not written. */
static void test_out_lse_not_read(void **state)
{
    (void)state;
    enum { B = 1, H = 2, T = 4, D = 4 };
    test_rng r = test_rng_seed(8);
    float *q = bwd_values(&r, B * H * T * D, 1.5f), *k = bwd_values(&r, B * H * T * D, 1.5f);
    float *v = bwd_values(&r, B * H * T * D, 1.0f), *dout = bwd_values(&r, B * H * T * D, 1.0f);
    float out[B * H * T * D], lse[B * H * T], g1[3][B * H * T * D], g2[3][B * H * T * D];
    for (int x = 0; x < B * H * T * D; x++)
        out[x] = NAN;
    for (int x = 0; x < B * H * T; x++)
        lse[x] = NAN;
    int64_t s[4] = {B, H, T, D}, ls[3] = {B, H, T};
    vkattn_ref_attention_backward_args a = {
        .forward = {.q = vkattn_host_tensor_make(q, F32, 4, s),
                    .k = vkattn_host_tensor_make(k, F32, 4, s),
                    .v = vkattn_host_tensor_make(v, F32, 4, s),
                    .causal = true},
        .dout = vkattn_host_tensor_make(dout, F32, 4, s),
        .dq = vkattn_host_tensor_make(g1[0], F32, 4, s),
        .dk = vkattn_host_tensor_make(g1[1], F32, 4, s),
        .dv = vkattn_host_tensor_make(g1[2], F32, 4, s),
    };
    char err[512] = "";
    if (vkattn_ref_attention_backward(&a, err, sizeof err) != VKATTN_SUCCESS)
        fail_msg("%s", err);
    a.forward.out = vkattn_host_tensor_make(out, F32, 4, s);
    a.forward.lse = vkattn_host_tensor_make(lse, F32, 3, ls);
    a.dq.data = g2[0], a.dk.data = g2[1], a.dv.data = g2[2];
    if (vkattn_ref_attention_backward(&a, err, sizeof err) != VKATTN_SUCCESS)
        fail_msg("%s", err);
    assert_memory_equal(g1, g2, sizeof g1);
    for (int x = 0; x < B * H * T * D; x++)
        assert_true(isnan(out[x]));
    free(q), free(k), free(v), free(dout);
}

int bwd_run_case_tests(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mha),
        cmocka_unit_test(test_gqa_mqa),
        cmocka_unit_test(test_causal),
        cmocka_unit_test(test_window_softcap),
        cmocka_unit_test(test_masks),
        cmocka_unit_test(test_alibi_sinks),
        cmocka_unit_test(test_dims_head_mask_dropout),
        cmocka_unit_test(test_dead_rows_and_all),
        cmocka_unit_test(test_dead_rows_are_zero),
        cmocka_unit_test(test_16_bit),
        cmocka_unit_test(test_out_lse_not_read),
    };
    return cmocka_run_group_tests_name("reference backward", tests, NULL, NULL);
}
