/* CPU reference of the MHA layer's backward (vkattn_ref_mha_backward):
 * every gradient against central finite differences of the layer's double
 * forward (the harness in test_reference_mha_backward_fd.c, the cases in
 * test_reference_mha_backward_cases.c), the forward's dropout, what the
 * outputs take, and the refusals (test_reference_mha_backward_errors.c).
 * No device. */
#include "test_reference_mha_backward.h"

#include <math.h>
#include <stdlib.h>

#define F32 VKATTN_DTYPE_F32

enum { B = 2, T = 4, DM = 8, HQ = 2, HKV = 1, DK = 4, QW = HQ * DK, KW = HKV * DK };
#define NX (B * T * DM)

/* A small self-attention layer (GQA 2/1, biases) and its inputs. */
typedef struct small {
    float wq[QW * DM], wk[KW * DM], wv[KW * DM], wo[DM * QW];
    float bq[QW], bk[KW], bv[KW], bo[DM];
    float x[NX], dy[NX], y[NX];
    vkattn_mha_desc desc;
    vkattn_mha_weights w;
    vkattn_ref_mha_args fwd;
} small;

static void small_init(small *s, uint64_t seed)
{
    memset(s, 0, sizeof *s);
    test_rng r = test_rng_seed(seed);
    test_fill_uniform(&r, s->wq, QW * DM, -0.6f, 0.6f);
    test_fill_uniform(&r, s->wk, KW * DM, -0.6f, 0.6f);
    test_fill_uniform(&r, s->wv, KW * DM, -0.6f, 0.6f);
    test_fill_uniform(&r, s->wo, DM * QW, -0.6f, 0.6f);
    test_fill_uniform(&r, s->bq, QW, -0.3f, 0.3f);
    test_fill_uniform(&r, s->bk, KW, -0.3f, 0.3f);
    test_fill_uniform(&r, s->bv, KW, -0.3f, 0.3f);
    test_fill_uniform(&r, s->bo, DM, -0.3f, 0.3f);
    test_fill_uniform(&r, s->x, NX, -1.0f, 1.0f);
    test_fill_uniform(&r, s->dy, NX, -1.0f, 1.0f);
    s->desc = (vkattn_mha_desc){
        .embed_dim = DM, .num_heads = HQ, .num_kv_heads = HKV, .head_dim = DK, .bias = true};
    s->w = (vkattn_mha_weights){.wq = s->wq,
                                .wk = s->wk,
                                .wv = s->wv,
                                .wo = s->wo,
                                .bq = s->bq,
                                .bk = s->bk,
                                .bv = s->bv,
                                .bo = s->bo};
    int64_t xs[3] = {B, T, DM};
    s->fwd.x = vkattn_host_tensor_make(s->x, F32, 3, xs);
    s->fwd.y = vkattn_host_tensor_make(s->y, F32, 3, xs);
}

static void run_forward(const small *s, const vkattn_ref_mha_args *a)
{
    char err[512] = "";
    if (vkattn_ref_mha(&s->desc, &s->w, a, err, sizeof err) != VKATTN_SUCCESS)
        fail_msg("vkattn_ref_mha: %s", err);
}

/* The forward honours dropout: y changes with p and with the seed, and is
 * the same for the same seed. */
static void test_forward_dropout(void **state)
{
    (void)state;
    static small s;
    small_init(&s, 11);
    float y0[NX], y1[NX], y2[NX];
    run_forward(&s, &s.fwd);
    memcpy(y0, s.y, sizeof y0);
    s.fwd.dropout_p = 0.4f;
    s.fwd.dropout_seed = 1234;
    run_forward(&s, &s.fwd);
    memcpy(y1, s.y, sizeof y1);
    run_forward(&s, &s.fwd);
    assert_memory_equal(y1, s.y, sizeof y1);
    s.fwd.dropout_seed = 1235;
    run_forward(&s, &s.fwd);
    memcpy(y2, s.y, sizeof y2);
    int diff01 = 0, diff12 = 0;
    for (int e = 0; e < NX; e++)
        diff01 += fabsf(y0[e] - y1[e]) > 1e-4f, diff12 += fabsf(y1[e] - y2[e]) > 1e-4f;
    if (diff01 < NX / 2 || diff12 < NX / 2)
        fail_msg("dropout changes too few outputs: p 0 vs 0.4: %d, seed 1234 vs 1235: %d of %d",
                 diff01, diff12, NX);
}

/* Packed sequences draw the mask with the sequence's index as b: two
 * packed sequences of T tokens equal the batch of two rows. */
static void test_forward_dropout_packed(void **state)
{
    (void)state;
    static small s;
    small_init(&s, 12);
    s.fwd.dropout_p = 0.3f;
    s.fwd.dropout_seed = 99;
    s.fwd.causal = true;
    run_forward(&s, &s.fwd);
    float batched[NX];
    memcpy(batched, s.y, sizeof batched);
    vkattn_ref_mha_args p = s.fwd;
    const int32_t offsets[3] = {0, T, 2 * T};
    int64_t ps[3] = {1, B * T, DM};
    p.x = vkattn_host_tensor_make(s.x, F32, 3, ps);
    p.y = vkattn_host_tensor_make(s.y, F32, 3, ps);
    p.sequences = 2;
    p.q_offsets = offsets;
    memset(s.y, 0, sizeof s.y);
    run_forward(&s, &p);
    test_assert_close(s.y, batched, NX, 1e-6, "packed vs batched with dropout");
}

/* A layer keeping f16 weights (desc.weight_dtype) differentiates through
 * the rounded weights, as its forward multiplies by them. */
static void test_weight_dtype_f16(void **state)
{
    (void)state;
    static small s, r;
    small_init(&s, 13);
    small_init(&r, 13);
    s.desc.weight_dtype = VKATTN_DTYPE_F16;
    float *rounded[8] = {r.wq, r.wk, r.wv, r.wo, r.bq, r.bk, r.bv, r.bo};
    const size_t n[8] = {QW * DM, KW * DM, KW * DM, DM * QW, QW, KW, KW, DM};
    for (int i = 0; i < 8; i++)
        test_round_to(VKATTN_DTYPE_F16, rounded[i], n[i]);
    float g[2][QW * DM + NX];
    int64_t xs[3] = {B, T, DM}, ws[2] = {QW, DM};
    for (int k = 0; k < 2; k++) {
        small *l = k ? &r : &s;
        vkattn_ref_mha_backward_args a = {.forward = l->fwd};
        a.dy = vkattn_host_tensor_make(l->dy, F32, 3, xs);
        a.dx = vkattn_host_tensor_make(g[k], F32, 3, xs);
        a.grads.wq = vkattn_host_tensor_make(g[k] + NX, F32, 2, ws);
        char err[512] = "";
        if (vkattn_ref_mha_backward(&l->desc, &l->w, &a, err, sizeof err) != VKATTN_SUCCESS)
            fail_msg("%s", err);
    }
    assert_memory_equal(g[0], g[1], sizeof g[0]);
    float f32[QW * DM + NX]; /* and the f32 layer's differ: the rounding mattered */
    small_init(&r, 13);
    vkattn_ref_mha_backward_args a = {.forward = r.fwd};
    a.dy = vkattn_host_tensor_make(r.dy, F32, 3, xs);
    a.dx = vkattn_host_tensor_make(f32, F32, 3, xs);
    a.grads.wq = vkattn_host_tensor_make(f32 + NX, F32, 2, ws);
    assert_int_equal(vkattn_ref_mha_backward(&r.desc, &r.w, &a, NULL, 0), VKATTN_SUCCESS);
    assert_memory_not_equal(g[0], f32, sizeof f32);
}

/* Outputs asked for alone, with strides (dx inside a wider buffer, dwo
 * transposed), equal those of the call asking for everything; forward.y
 * is not read (NaN there changes nothing) and not written. */
static void test_outputs(void **state)
{
    (void)state;
    static small s;
    small_init(&s, 14);
    int64_t xs[3] = {B, T, DM}, qs[2] = {QW, DM}, ks[2] = {KW, DM}, os[2] = {DM, QW};
    int64_t b1[1] = {QW}, b2[1] = {KW}, b3[1] = {DM};
    float dx[NX], wq[QW * DM], wk[KW * DM], wv[KW * DM], wo[DM * QW];
    float bq[QW], bk[KW], bv[KW], bo[DM];
    vkattn_ref_mha_backward_args a = {.forward = s.fwd};
    a.dy = vkattn_host_tensor_make(s.dy, F32, 3, xs);
    a.dx = vkattn_host_tensor_make(dx, F32, 3, xs);
    a.grads.wq = vkattn_host_tensor_make(wq, F32, 2, qs);
    a.grads.wk = vkattn_host_tensor_make(wk, F32, 2, ks);
    a.grads.wv = vkattn_host_tensor_make(wv, F32, 2, ks);
    a.grads.wo = vkattn_host_tensor_make(wo, F32, 2, os);
    a.grads.bq = vkattn_host_tensor_make(bq, F32, 1, b1);
    a.grads.bk = vkattn_host_tensor_make(bk, F32, 1, b2);
    a.grads.bv = vkattn_host_tensor_make(bv, F32, 1, b2);
    a.grads.bo = vkattn_host_tensor_make(bo, F32, 1, b3);
    char err[512] = "";
    if (vkattn_ref_mha_backward(&s.desc, &s.w, &a, err, sizeof err) != VKATTN_SUCCESS)
        fail_msg("%s", err);

    enum { PAD = 3 };
    float wide[B * T * (DM + PAD)], wot[QW * DM];
    for (size_t e = 0; e < sizeof wide / sizeof wide[0]; e++)
        wide[e] = 7.0f;
    for (int e = 0; e < NX; e++)
        s.y[e] = NAN;
    vkattn_ref_mha_backward_args p = {.forward = s.fwd};
    p.dy = a.dy;
    p.dx = vkattn_host_tensor_make(wide, F32, 3, xs);
    p.dx.strides[0] = T * (DM + PAD), p.dx.strides[1] = DM + PAD, p.dx.strides[2] = 1;
    p.grads.wo = vkattn_host_tensor_make(wot, F32, 2, os);
    p.grads.wo.strides[0] = 1, p.grads.wo.strides[1] = DM;
    if (vkattn_ref_mha_backward(&s.desc, &s.w, &p, err, sizeof err) != VKATTN_SUCCESS)
        fail_msg("%s", err);
    for (int e = 0; e < NX; e++) {
        const int row = e / DM, col = e % DM;
        assert_true(wide[row * (DM + PAD) + col] == dx[e]);
        if (col < PAD)
            assert_true(wide[row * (DM + PAD) + DM + col] == 7.0f);
    }
    for (int n = 0; n < DM; n++)
        for (int k = 0; k < QW; k++)
            assert_true(wot[k * DM + n] == wo[n * QW + k]);
    for (int e = 0; e < NX; e++)
        assert_true(isnan(s.y[e]));
    /* and the gradients are not trivially zero */
    double m = 0.0;
    for (int e = 0; e < QW; e++)
        m = fmax(m, fabs(bq[e]));
    assert_true(m > 1e-3);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_forward_dropout),
        cmocka_unit_test(test_forward_dropout_packed),
        cmocka_unit_test(test_weight_dtype_f16),
        cmocka_unit_test(test_outputs),
    };
    int failed = cmocka_run_group_tests_name("reference mha backward", tests, NULL, NULL);
    failed += mbw_run_case_tests();
    failed += mbw_run_error_tests();
    return failed;
}
