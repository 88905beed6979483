/* Head dims of vkattn_attention beyond "Dk == Dv": v's head dim Dv differing
 * from q's and k's Dk (out [B, Hq, Tq, Dv]), on all four kernel policies,
 * f32 and f16, causal or not, GQA/MQA, with a mask (one row fully hidden:
 * zeros), weights of rank 3 and 4, a window and softcap; head dims up to
 * 576 (DeepSeek MLA: Dk 576, Dv 512), against
 * vkattn_ref_attention; the chunk helper and the FLOP count on such a call;
 * and the errors (v/out head dims disagreeing, a head dim above the
 * maximum): named, nothing written. */
#include "test_policy.h"
#include "test_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

typedef struct hd_case {
    uint32_t B, Hq, Hkv, Tq, Tk, Dk, Dv;
    vkattn_dtype dt; /* q, k, v, out */
    bool causal;
    bool mask;   /* an additive f32 [Tq, Tk] mask, row 0 all -inf */
    int weights; /* 0, 3 or 4 */
    uint32_t window;
    float softcap;
    uint32_t skew; /* elements before q, k, v and out in their buffers (offsets) */
} hd_case;

static void describe(const hd_case *c, uint32_t policy, char *buf, size_t size)
{
    snprintf(buf, size,
             "%s B%u Hq%u Hkv%u Tq%u Tk%u Dk%u Dv%u %s causal%d mask%d weights%d window%u "
             "softcap%g skew%u",
             test_policies[policy].name, c->B, c->Hq, c->Hkv, c->Tq, c->Tk, c->Dk, c->Dv,
             vkattn_dtype_name(c->dt), c->causal, c->mask, c->weights, c->window,
             (double)c->softcap, c->skew);
}

static void fill_nan(float *x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        x[i] = NAN;
}

/* A device buffer holding `skew` zeros, then the n values of `x` (as dt). */
static vkattn_buffer *skewed_buffer(vkattn_context *ctx, vkattn_dtype dt, const float *x, size_t n,
                                    uint32_t skew)
{
    float *tmp = test_alloc((n + skew) * sizeof *tmp);
    memcpy(tmp + skew, x, n * sizeof *tmp);
    vkattn_buffer *b = test_buffer_of(ctx, dt, tmp, n + skew);
    free(tmp);
    return b;
}

/* Head dims that are not multiples of 8 with an output stored in 32-bit
 * words (f16 without 16-bit storage) are refused: a named error. */
static bool refused_here(vkattn_context *ctx, const hd_case *c)
{
    return c->Dv % 8 != 0 && c->dt == VKATTN_DTYPE_F16 &&
           !vkattn_context_device_info(ctx)->storage_16bit;
}

static void run_case(test_gpu *g, uint32_t policy, const void *arg)
{
    const hd_case *c = arg;
    vkattn_context *ctx = g->ctx;
    char what[320];
    describe(c, policy, what, sizeof what);
    test_rng rng = test_rng_seed(91u + c->Dk * 7u + c->Dv * 13u + c->Tq);
    size_t nq = (size_t)c->B * c->Hq * c->Tq * c->Dk, nk = (size_t)c->B * c->Hkv * c->Tk * c->Dk;
    size_t nv = (size_t)c->B * c->Hkv * c->Tk * c->Dv, no = (size_t)c->B * c->Hq * c->Tq * c->Dv;
    size_t nm = (size_t)c->Tq * c->Tk;
    size_t nw =
        c->weights == 3 ? (size_t)c->B * c->Tq * c->Tk : (size_t)c->B * c->Hq * c->Tq * c->Tk;
    float *q = test_random_array(&rng, nq, 2.0f, c->dt);
    float *k = test_random_array(&rng, nk, 2.0f, c->dt);
    float *v = test_random_array(&rng, nv, 1.0f, c->dt);
    float *mask = test_alloc(nm * sizeof(float));
    for (size_t e = 0; e < nm; e++)
        mask[e] =
            e < c->Tk || test_rng_below(&rng, 100) < 20 ? -INFINITY : test_rng_uniform(&rng, -2, 2);
    float *want = test_alloc(no * 4), *got = test_alloc(no * 4);
    float *want_w = test_alloc(nw * 4), *got_w = test_alloc(nw * 4);
    fill_nan(want, no), fill_nan(got, no), fill_nan(want_w, nw), fill_nan(got_w, nw);

    int64_t qs[4] = {c->B, c->Hq, c->Tq, c->Dk}, ks[4] = {c->B, c->Hkv, c->Tk, c->Dk};
    int64_t vs[4] = {c->B, c->Hkv, c->Tk, c->Dv}, os[4] = {c->B, c->Hq, c->Tq, c->Dv};
    int64_t ms[2] = {c->Tq, c->Tk}, ws[4] = {c->B, c->Hq, c->Tq, c->Tk};
    if (c->weights == 3)
        ws[1] = c->Tq, ws[2] = c->Tk;
    vkattn_ref_attention_args r = {
        .q = vkattn_host_tensor_make(q, VKATTN_DTYPE_F32, 4, qs),
        .k = vkattn_host_tensor_make(k, VKATTN_DTYPE_F32, 4, ks),
        .v = vkattn_host_tensor_make(v, VKATTN_DTYPE_F32, 4, vs),
        .out = vkattn_host_tensor_make(want, VKATTN_DTYPE_F32, 4, os),
        .causal = c->causal,
        .window = c->window,
        .softcap = c->softcap,
    };
    if (c->mask)
        r.mask = vkattn_host_tensor_make(mask, VKATTN_DTYPE_F32, 2, ms);
    if (c->weights)
        r.weights = vkattn_host_tensor_make(want_w, VKATTN_DTYPE_F32, (uint32_t)c->weights, ws);
    char err[512] = "";
    if (vkattn_ref_attention(&r, err, sizeof err) != VKATTN_SUCCESS)
        fail_msg("reference failed on %s: %s", what, err);

    const uint32_t sk = c->skew;
    const uint64_t off = (uint64_t)sk * vkattn_dtype_size(c->dt);
    vkattn_buffer *bq = skewed_buffer(ctx, c->dt, q, nq, sk);
    vkattn_buffer *bk = skewed_buffer(ctx, c->dt, k, nk, sk);
    vkattn_buffer *bv = skewed_buffer(ctx, c->dt, v, nv, sk);
    vkattn_buffer *bo = skewed_buffer(ctx, c->dt, got, no, sk);
    vkattn_buffer *bm = c->mask ? test_buffer_of(ctx, VKATTN_DTYPE_F32, mask, nm) : NULL;
    vkattn_buffer *bw = c->weights ? test_buffer_of(ctx, VKATTN_DTYPE_F32, got_w, nw) : NULL;
    vkattn_attention_args a = {
        .q = vkattn_tensor_make(bq, off, c->dt, 4, qs),
        .k = vkattn_tensor_make(bk, off, c->dt, 4, ks),
        .v = vkattn_tensor_make(bv, off, c->dt, 4, vs),
        .out = vkattn_tensor_make(bo, off, c->dt, 4, os),
        .causal = c->causal,
        .window = c->window,
        .softcap = c->softcap,
    };
    if (bm)
        a.mask = vkattn_tensor_make(bm, 0, VKATTN_DTYPE_F32, 2, ms);
    if (bw)
        a.weights = vkattn_tensor_make(bw, 0, VKATTN_DTYPE_F32, (uint32_t)c->weights, ws);
    if (refused_here(ctx, c)) {
        TEST_FAILS(ctx, VKATTN_ERROR_UNSUPPORTED, "is not a multiple of 8, which needs out",
                   vkattn_attention(ctx, &a));
        float *back = test_alloc((no + sk) * 4);
        test_download_as(ctx, bo, c->dt, back, no + sk);
        for (size_t i = sk; i < no + sk; i++)
            if (!isnan(back[i]))
                fail_msg("%s: out[%zu] was written by a refused call", what, i - sk);
        free(back);
        a.weights.buffer = NULL;
    } else {
        TEST_OK(ctx, vkattn_attention(ctx, &a));
    }

    double tol = c->dt == VKATTN_DTYPE_F16 ? TEST_TOL_F16 : TEST_TOL_F32;
    float *whole = test_alloc((no + sk) * 4);
    test_download_as(ctx, bo, c->dt, whole, no + sk);
    memcpy(got, whole + sk, no * 4);
    for (size_t i = 0; i < sk; i++)
        if (whole[i] != 0.0f)
            fail_msg("%s: element %zu before out was written", what, i);
    free(whole);
    if (refused_here(ctx, c)) {
        TEST_DESTROY_BUFFERS(bq, bk, bv, bo, bm, bw);
        free(q), free(k), free(v), free(mask), free(want), free(got), free(want_w), free(got_w);
        return;
    }
    test_assert_close(got, want, no, tol, what);
    for (size_t i = 0; i < no; i++)
        if (want[i] == 0.0f && got[i] != 0.0f)
            fail_msg("%s: out[%zu] is %g where the reference has an exact 0", what, i,
                     (double)got[i]);
    if (c->mask) /* query 0 sees nothing: zeros in every head */
        for (size_t b = 0; b < c->B; b++)
            for (size_t h = 0; h < c->Hq; h++)
                for (size_t e = 0; e < c->Dv; e++)
                    if (got[((b * c->Hq + h) * c->Tq) * c->Dv + e] != 0.0f)
                        fail_msg("%s: the fully masked row is not zero", what);
    if (bw) {
        TEST_OK(ctx, vkattn_buffer_download(bw, 0, got_w, nw * 4));
        test_assert_close(got_w, want_w, nw, tol, what);
    }
    TEST_DESTROY_BUFFERS(bq, bk, bv, bo, bm, bw);
    free(q), free(k), free(v), free(mask), free(want), free(got), free(want_w), free(got_w);
}

#define F32 VKATTN_DTYPE_F32
#define F16 VKATTN_DTYPE_F16

static void run_all(const hd_case *cases, size_t n)
{
    for (size_t i = 0; i < n; i++)
        test_for_each_policy(0, run_case, &cases[i]);
}

/* Dk != Dv, both multiples of 8 up to 256: the fast kernels. */
static void test_dk_dv_differ(void **state)
{
    (void)state;
    static const hd_case cases[] = {
        /* MQA, mask with a hidden row, weights per head */
        {2, 4, 1, 13, 29, 32, 16, F32, false, true, 4, 0, 0},
        /* f16, causal, mask, GQA */
        {2, 4, 2, 17, 33, 64, 32, F16, true, true, 0, 0, 0},
        /* window and softcap, GQA, mean weights, Dv > Dk, octet counts that
         * leave lanes idle */
        {1, 6, 3, 11, 27, 24, 40, F32, false, false, 3, 7, 20.0f},
        /* Dk 256 (largest of the fast path) with a small Dv, causal */
        {1, 2, 1, 6, 21, 256, 8, F32, true, false, 0, 0, 0},
    };
    run_all(cases, sizeof cases / sizeof cases[0]);
}

/* Head dims above 256, up to MLA's absorbed attention (Dk 576, Dv 512, one
 * KV head): the configs with fewer rows and keys per tile. */
static void test_large_head_dims(void **state)
{
    (void)state;
    static const hd_case cases[] = {
        /* MLA: MQA, causal, weights per head */
        {1, 4, 1, 9, 40, 576, 512, F32, true, false, 4, 0, 0},
        /* MLA in f16 with a mask (a hidden row) and mean weights */
        {1, 2, 1, 9, 40, 576, 512, F16, false, true, 3, 0, 0},
        /* 320, window and softcap */
        {1, 2, 2, 7, 23, 320, 320, F32, false, true, 0, 5, 15.0f},
    };
    run_all(cases, sizeof cases / sizeof cases[0]);
}

/* Head dims that are not multiples of 8 (PyTorch's own tests use 2, 5, 15,
 * 21, 203): zero-padded inside the kernels, rows read and written element by
 * element, no copies; odd offsets and strides are fine there. */
static void test_odd_head_dims(void **state)
{
    (void)state;
    static const hd_case cases[] = {
        {1, 2, 1, 7, 19, 2, 2, F32, false, true, 4, 0, 0, 1},
        {2, 2, 2, 5, 13, 5, 5, F32, true, false, 3, 0, 0, 3},
        /* window and softcap, GQA, Dk != Dv */
        {1, 4, 2, 9, 23, 15, 21, F32, false, true, 0, 6, 10.0f, 0},
        {1, 2, 1, 6, 17, 203, 203, F32, true, true, 4, 0, 0, 5},
        /* f16 (refused without 16-bit storage: out is written by element) */
        {1, 2, 1, 9, 30, 21, 21, F16, true, true, 3, 0, 0, 1},
        /* odd Dk, Dv a multiple of 8: f16 runs everywhere */
        {1, 2, 1, 7, 25, 13, 16, F16, false, false, 4, 0, 0, 0},
    };
    run_all(cases, sizeof cases / sizeof cases[0]);
}

/* vkattn_attention_chunk on a Dk != Dv call: the pieces write what the
 * whole call writes; vkattn_attention_flops counts 2 Dk + 2 Dv per pair. */
static void run_chunks(test_gpu *g, uint32_t policy, const void *arg)
{
    (void)policy, (void)arg;
    vkattn_context *ctx = g->ctx;
    enum { B = 2, HQ = 4, HKV = 2, TQ = 30, TK = 41, DK = 16, DV = 40 };
    test_rng rng = test_rng_seed(515);
    size_t nq = (size_t)B * HQ * TQ * DK, nk = (size_t)B * HKV * TK * DK;
    size_t nv = (size_t)B * HKV * TK * DV, no = (size_t)B * HQ * TQ * DV;
    float *q = test_random_array(&rng, nq, 2.0f, F32);
    float *k = test_random_array(&rng, nk, 2.0f, F32);
    float *v = test_random_array(&rng, nv, 1.0f, F32);
    float *want = test_alloc(no * 4), *got = test_alloc(no * 4);
    int64_t qs[4] = {B, HQ, TQ, DK}, ks[4] = {B, HKV, TK, DK};
    int64_t vs[4] = {B, HKV, TK, DV}, os[4] = {B, HQ, TQ, DV};
    vkattn_ref_attention_args r = {
        .q = vkattn_host_tensor_make(q, F32, 4, qs),
        .k = vkattn_host_tensor_make(k, F32, 4, ks),
        .v = vkattn_host_tensor_make(v, F32, 4, vs),
        .out = vkattn_host_tensor_make(want, F32, 4, os),
        .causal = true,
    };
    char err[512] = "";
    if (vkattn_ref_attention(&r, err, sizeof err) != VKATTN_SUCCESS)
        fail_msg("reference: %s", err);
    vkattn_buffer *bq = test_buffer_of(ctx, F32, q, nq), *bk = test_buffer_of(ctx, F32, k, nk);
    vkattn_buffer *bv = test_buffer_of(ctx, F32, v, nv), *bo = test_buffer_of(ctx, F32, got, no);
    vkattn_attention_args a = {
        .q = vkattn_tensor_make(bq, 0, F32, 4, qs),
        .k = vkattn_tensor_make(bk, 0, F32, 4, ks),
        .v = vkattn_tensor_make(bv, 0, F32, 4, vs),
        .out = vkattn_tensor_make(bo, 0, F32, 4, os),
        .causal = true,
    };
    const uint32_t cuts[] = {0, 7, 19, TQ};
    double flops = 0;
    for (size_t i = 0; i + 1 < sizeof cuts / sizeof cuts[0]; i++) {
        vkattn_attention_args piece;
        if (vkattn_attention_chunk(&a, cuts[i], cuts[i + 1], &piece, err, sizeof err) !=
            VKATTN_SUCCESS)
            fail_msg("chunk [%u, %u): %s", cuts[i], cuts[i + 1], err);
        TEST_OK(ctx, vkattn_attention(ctx, &piece));
        flops += vkattn_attention_flops(&a, cuts[i], cuts[i + 1]);
    }
    TEST_OK(ctx, vkattn_buffer_download(bo, 0, got, no * 4));
    test_assert_close(got, want, no, TEST_TOL_F32, "chunks of a Dk != Dv call");
    /* causal bottom-right: query i sees i + TK - TQ + 1 keys */
    double pairs = 0;
    for (int i = 0; i < TQ; i++)
        pairs += i + TK - TQ + 1;
    double expect = (double)B * HQ * (2.0 * DK + 2.0 * DV) * pairs;
    assert_true(fabs(flops - expect) < 0.5);
    assert_true(fabs(vkattn_attention_flops(&a, 0, TQ) - expect) < 0.5);
    TEST_DESTROY_BUFFERS(bq, bk, bv, bo);
    free(q), free(k), free(v), free(want), free(got);
}

static void test_chunks(void **state)
{
    (void)state;
    test_for_each_policy(0, run_chunks, NULL);
}

/* Bad head dims: named errors, and neither the GPU op nor the reference
 * writes anything. */
static void test_errors(void **state)
{
    (void)state;
    test_gpu *g = test_gpu_open(0);
    vkattn_context *ctx = g->ctx;
    enum { N = 4096 };
    float *host = test_alloc(N * 4), *out = test_alloc(N * 4);
    for (size_t i = 0; i < N; i++)
        host[i] = 0.5f, out[i] = 7.0f;
    vkattn_buffer *bq = test_buffer_of(ctx, F32, host, N), *bk = test_buffer_of(ctx, F32, host, N);
    vkattn_buffer *bv = test_buffer_of(ctx, F32, host, N), *bo = test_buffer_of(ctx, F32, out, N);
    int64_t qs[4] = {1, 2, 3, 16}, ks[4] = {1, 1, 5, 16};
    int64_t vs[4] = {1, 1, 5, 8}, os[4] = {1, 2, 3, 8};
    vkattn_attention_args good =
                              {
                                  .q = vkattn_tensor_make(bq, 0, F32, 4, qs),
                                  .k = vkattn_tensor_make(bk, 0, F32, 4, ks),
                                  .v = vkattn_tensor_make(bv, 0, F32, 4, vs),
                                  .out = vkattn_tensor_make(bo, 0, F32, 4, os),
                              },
                          a;
    vkattn_ref_attention_args rgood =
                                  {
                                      .q = vkattn_host_tensor_make(host, F32, 4, qs),
                                      .k = vkattn_host_tensor_make(host, F32, 4, ks),
                                      .v = vkattn_host_tensor_make(host, F32, 4, vs),
                                      .out = vkattn_host_tensor_make(out, F32, 4, os),
                                  },
                              r;
    const vkattn_result SHAPE = VKATTN_ERROR_SHAPE_MISMATCH;
    const vkattn_result INVALID = VKATTN_ERROR_INVALID_ARGUMENT;
    char err[512];
#define BOTH(code, needle, ...)                                                                \
    do {                                                                                       \
        a = good, r = rgood;                                                                   \
        __VA_ARGS__;                                                                           \
        TEST_FAILS(ctx, code, needle, vkattn_attention(ctx, &a));                              \
        err[0] = 0;                                                                            \
        if (vkattn_ref_attention(&r, err, sizeof err) != (code) || !strstr(err, needle))       \
            fail_msg("reference: \"%s\" (expected %s, \"%s\")", err, vkattn_result_name(code), \
                     needle);                                                                  \
    } while (0)
    BOTH(SHAPE, "args->out.shape[3] (v_head_dim) 16 differs from args->v.shape[3] (v_head_dim) 8",
         a.out.shape[3] = 16, r.out.shape[3] = 16);
    BOTH(SHAPE, "args->out.shape[3] (v_head_dim) 8 differs from args->v.shape[3] (v_head_dim) 24",
         a.v.shape[3] = 24, r.v.shape[3] = 24);
    BOTH(SHAPE, "args->k.shape[3] (head_dim) 8 differs from args->q.shape[3] (head_dim) 16",
         a.k.shape[3] = 8, r.k.shape[3] = 8);
    BOTH(INVALID, "args->v.shape[3] (v_head_dim) 577 is not supported: it must be from 1 to 576",
         a.v.shape[3] = a.out.shape[3] = 577, r.v.shape[3] = r.out.shape[3] = 577);
    BOTH(INVALID, "args->v.shape[3] (v_head_dim) 1032 is not supported",
         a.v.shape[3] = a.out.shape[3] = 1032, r.v.shape[3] = r.out.shape[3] = 1032);
    BOTH(INVALID, "args->q.shape[3] (head_dim) 1032 is not supported",
         a.q.shape[3] = a.k.shape[3] = 1032, r.q.shape[3] = r.k.shape[3] = 1032);
    BOTH(INVALID, "args->v.shape[3] is 0", a.v.shape[3] = a.out.shape[3] = 0,
         r.v.shape[3] = r.out.shape[3] = 0);
#undef BOTH
    /* odd head dims: element-size offsets, free strides; bf16 out (pairs
     * of words) cannot take an odd Dv */
    a = good, a.v.shape[3] = a.out.shape[3] = 5, a.out.offset = 2;
    TEST_FAILS(ctx, INVALID, "args->out.offset 2 is not a multiple of the f32 element size 4",
               vkattn_attention(ctx, &a));
    a = good, a.q.offset = 4; /* Dk 16: quads, 16-byte offsets */
    TEST_FAILS(ctx, INVALID, "args->q.offset 4 is not a multiple of 16 bytes",
               vkattn_attention(ctx, &a));
    a = good, a.v.shape[3] = a.out.shape[3] = 5;
    a.q.dtype = a.k.dtype = a.v.dtype = a.out.dtype = VKATTN_DTYPE_BF16;
    TEST_FAILS(ctx, VKATTN_ERROR_UNSUPPORTED,
               "args->v.shape[3] (v_head_dim) 5 is not a multiple of 8, which needs out",
               vkattn_attention(ctx, &a));
    /* nothing written, by either */
    float *back = test_alloc(N * 4);
    TEST_OK(ctx, vkattn_buffer_download(bo, 0, back, N * 4));
    for (size_t i = 0; i < N; i++)
        if (back[i] != 7.0f || out[i] != 7.0f)
            fail_msg("element %zu of out was written", i);
    /* the good call runs */
    a = good;
    TEST_OK(ctx, vkattn_attention(ctx, &a));
    TEST_DESTROY_BUFFERS(bq, bk, bv, bo);
    free(host), free(out), free(back);
    test_gpu_close(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dk_dv_differ),  cmocka_unit_test(test_large_head_dims),
        cmocka_unit_test(test_odd_head_dims), cmocka_unit_test(test_chunks),
        cmocka_unit_test(test_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
