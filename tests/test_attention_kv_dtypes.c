/* vkattn_attention with k and v of different dtypes (f32, f16, bf16 each;
 * the `any` kernels, which read both as 32-bit words in their own dtypes):
 * every pairing under q/out in f32, f16 and bf16, with masks, attention
 * weights, GQA, score modifiers and LSE, head dims from 20 (element-wise
 * rows) to 256 and different Dk / Dv, on every kernel policy, against the
 * CPU reference on the same values (each exact in its tensor's dtype; an
 * element-wise case keeps q and out f32). */
#include "test_policy.h"
#include "test_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#define F32 VKATTN_DTYPE_F32
#define F16 VKATTN_DTYPE_F16
#define BF16 VKATTN_DTYPE_BF16

typedef struct kv_case {
    vkattn_dtype q, k, v;
    uint32_t B, Hq, Hkv, Tq, Tk, Dk, Dv;
    bool causal, mask, weights, mods;
} kv_case;

static void run_case(test_gpu *g, uint32_t policy, const void *arg)
{
    const kv_case *c = arg;
    vkattn_context *ctx = g->ctx;
    char what[256];
    snprintf(what, sizeof what, "%s q %s k %s v %s B%u Hq%u Hkv%u Tq%u Tk%u Dk%u Dv%u c%d m%d w%d mods%d",
             test_policies[policy].name, vkattn_dtype_name(c->q), vkattn_dtype_name(c->k),
             vkattn_dtype_name(c->v), c->B, c->Hq, c->Hkv, c->Tq, c->Tk, c->Dk, c->Dv, c->causal,
             c->mask, c->weights, c->mods);
    test_rng rng = test_rng_seed(4100u + c->Tq + 3u * c->Tk + 7u * c->k + 13u * c->v + c->Dk);
    size_t nq = (size_t)c->B * c->Hq * c->Tq * c->Dk, no = (size_t)c->B * c->Hq * c->Tq * c->Dv;
    size_t nk = (size_t)c->B * c->Hkv * c->Tk * c->Dk, nv = (size_t)c->B * c->Hkv * c->Tk * c->Dv;
    size_t nm = (size_t)c->Tq * c->Tk, nw = (size_t)c->B * c->Hq * c->Tq * c->Tk;
    size_t nl = (size_t)c->B * c->Hq * c->Tq;
    float *q = test_random_array(&rng, nq, 2.0f, c->q);
    float *k = test_random_array(&rng, nk, 2.0f, c->k);
    float *v = test_random_array(&rng, nv, 1.0f, c->v);
    float *mask = test_random_array(&rng, nm, 1.0f, F32);
    for (size_t i = 0; i < nm; i += 5)
        mask[i] = -INFINITY;
    float *want = malloc(no * 4), *got = malloc(no * 4), *want_w = malloc(nw * 4),
          *got_w = malloc(nw * 4), *want_l = malloc(nl * 4), *got_l = malloc(nl * 4);
    assert_true(want && got && want_w && got_w && want_l && got_l);
    int64_t qs[4] = {c->B, c->Hq, c->Tq, c->Dk}, ks[4] = {c->B, c->Hkv, c->Tk, c->Dk};
    int64_t vs[4] = {c->B, c->Hkv, c->Tk, c->Dv}, os[4] = {c->B, c->Hq, c->Tq, c->Dv};
    int64_t ms[2] = {c->Tq, c->Tk}, ws[4] = {c->B, c->Hq, c->Tq, c->Tk};
    int64_t ls[3] = {c->B, c->Hq, c->Tq};
    vkattn_ref_attention_args r = {
        .q = vkattn_host_tensor_make(q, F32, 4, qs),
        .k = vkattn_host_tensor_make(k, F32, 4, ks),
        .v = vkattn_host_tensor_make(v, F32, 4, vs),
        .out = vkattn_host_tensor_make(want, F32, 4, os),
        .causal = c->causal,
    };
    if (c->mask)
        r.mask = vkattn_host_tensor_make(mask, F32, 2, ms);
    if (c->weights)
        r.weights = vkattn_host_tensor_make(want_w, F32, 4, ws);
    if (c->mods) {
        r.softcap = 5.0f, r.window = c->Tk / 2 + 1, r.alibi_max_bias = 8.0f;
        r.lse = vkattn_host_tensor_make(want_l, F32, 3, ls);
    }
    char err[512];
    if (vkattn_ref_attention(&r, err, sizeof err) != VKATTN_SUCCESS)
        fail_msg("reference: %s", err);
    vkattn_buffer *bq = test_buffer_of(ctx, c->q, q, nq), *bk = test_buffer_of(ctx, c->k, k, nk),
                  *bv = test_buffer_of(ctx, c->v, v, nv);
    vkattn_buffer *bo = test_buffer_with(ctx, NULL, no * vkattn_dtype_size(c->q));
    vkattn_buffer *bm = c->mask ? test_buffer_of(ctx, F32, mask, nm) : NULL;
    vkattn_buffer *bw = c->weights ? test_buffer_with(ctx, NULL, nw * 4) : NULL;
    vkattn_buffer *bl = c->mods ? test_buffer_with(ctx, NULL, nl * 4) : NULL;
    vkattn_attention_args a = {
        .q = vkattn_tensor_make(bq, 0, c->q, 4, qs),
        .k = vkattn_tensor_make(bk, 0, c->k, 4, ks),
        .v = vkattn_tensor_make(bv, 0, c->v, 4, vs),
        .out = vkattn_tensor_make(bo, 0, c->q, 4, os),
        .causal = c->causal,
    };
    if (bm)
        a.mask = vkattn_tensor_make(bm, 0, F32, 2, ms);
    if (bw)
        a.weights = vkattn_tensor_make(bw, 0, F32, 4, ws);
    if (bl) {
        a.softcap = r.softcap, a.window = r.window, a.alibi_max_bias = r.alibi_max_bias;
        a.lse = vkattn_tensor_make(bl, 0, F32, 3, ls);
    }
    TEST_OK(ctx, vkattn_attention(ctx, &a));
    test_download_as(ctx, bo, c->q, got, no);
    double tol = c->q == BF16 ? TEST_TOL_BF16 : c->q == F16 ? TEST_TOL_F16 : TEST_TOL_F32;
    test_assert_close(got, want, no, tol, what);
    if (bw) {
        TEST_OK(ctx, vkattn_buffer_download(bw, 0, got_w, nw * 4));
        test_assert_close(got_w, want_w, nw, TEST_TOL_F32, what);
    }
    if (bl) {
        TEST_OK(ctx, vkattn_buffer_download(bl, 0, got_l, nl * 4));
        test_assert_close(got_l, want_l, nl, c->q == F32 ? TEST_TOL_F32 : TEST_TOL_F16, what);
    }
    TEST_DESTROY_BUFFERS(bq, bk, bv, bo, bm, bw, bl);
    free(q), free(k), free(v), free(mask), free(want), free(got), free(want_w), free(got_w);
    free(want_l), free(got_l);
}

/* Every ordered pair of different k and v dtypes, each under one q/out
 * dtype and shape, then the shapes that take the other paths. */
static void test_kv_pairs(void **state)
{
    (void)state;
    static const kv_case cases[] = {
        {F32, F16, F32, 2, 4, 2, 17, 40, 64, 64, true, true, false, false},
        {F16, F32, F16, 1, 8, 2, 33, 33, 128, 128, true, false, false, false},
        {BF16, F16, BF16, 1, 2, 1, 9, 30, 32, 32, false, true, true, false},
        {F32, BF16, F16, 2, 2, 2, 12, 19, 96, 64, false, false, true, false},
        {F16, BF16, F32, 1, 4, 1, 1, 70, 64, 64, true, false, false, true},
        {BF16, F32, BF16, 1, 4, 4, 21, 21, 256, 256, true, false, false, true},
        {F32, F16, F32, 1, 2, 1, 7, 13, 20, 24, false, true, true, false},
        {F32, F32, F16, 1, 6, 2, 64, 64, 64, 64, true, false, false, false},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        test_for_each_policy(0, run_case, &cases[i]);
}

int main(void)
{
    const struct CMUnitTest gpu[] = {
        cmocka_unit_test(test_kv_pairs),
    };
    return cmocka_run_group_tests_name("attention_kv_dtypes", gpu, test_gpu_setup,
                                       test_gpu_teardown);
}
