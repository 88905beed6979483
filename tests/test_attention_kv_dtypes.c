/* vkattn_attention with k and v each in its own dtype (issue 29, part 4):
 * the `any` kernels, which read both as 32-bit words, unpacked or
 * dequantized in their own dtypes. Every ordered pair of different float
 * dtypes and every ggml block format as k and as v (same and different
 * formats, a float on the other side), under q/out in f32, f16 and bf16,
 * with masks, attention weights (through a quantized k too), GQA, score
 * modifiers and LSE, head dims from 20 (element-wise rows) to 256, Dk !=
 * Dv, [B, Tk, Hkv, D] storage (strides of whole blocks), on every kernel
 * policy, against the CPU reference on the same bytes; the reference's
 * reading of blocks; what quantized k and v refuse. */
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
    bool causal, mask, weights, mods, bthd; /* bthd: k and v stored [B, Tk, Hkv, D] */
} kv_case;

/* x [B, Hkv, Tk, D] in the storage order (bthd or bhtd) as `dt` blocks (or
 * f32 / f16 / bf16 values), and the strides (in values) of the view. */
static void *store_kv(const float *x, vkattn_dtype dt, const kv_case *c, uint32_t d,
                      int64_t strides[4], size_t *bytes)
{
    size_t n = (size_t)c->B * c->Hkv * c->Tk * d;
    float *phys = malloc(n * 4);
    assert_non_null(phys);
    for (uint32_t b = 0; b < c->B; b++)
        for (uint32_t h = 0; h < c->Hkv; h++)
            for (uint32_t t = 0; t < c->Tk; t++) {
                size_t src = (((size_t)b * c->Hkv + h) * c->Tk + t) * d;
                size_t dst = c->bthd ? (((size_t)b * c->Tk + t) * c->Hkv + h) * d : src;
                memcpy(phys + dst, x + src, d * 4);
            }
    int64_t s_bhtd[4] = {(int64_t)c->Hkv * c->Tk * d, (int64_t)c->Tk * d, d, 1};
    int64_t s_bthd[4] = {(int64_t)c->Tk * c->Hkv * d, d, (int64_t)c->Hkv * d, 1};
    memcpy(strides, c->bthd ? s_bthd : s_bhtd, sizeof s_bhtd);
    if (!vkattn_dtype_block_size(dt) || vkattn_dtype_block_size(dt) == 1) {
        *bytes = n * vkattn_dtype_size(dt);
        void *out = malloc(*bytes);
        assert_non_null(out);
        for (size_t i = 0; i < n; i++) {
            if (dt == F32)
                ((float *)out)[i] = phys[i];
            else
                ((uint16_t *)out)[i] =
                    dt == F16 ? vkattn_f32_to_f16(phys[i]) : vkattn_f32_to_bf16(phys[i]);
        }
        free(phys);
        return out;
    }
    *bytes = (size_t)vkattn_dtype_row_bytes(dt, n);
    void *out = malloc(*bytes);
    char err[256];
    assert_non_null(out);
    if (vkattn_ref_quantize(dt, phys, n, out, err, sizeof err) != VKATTN_SUCCESS)
        fail_msg("quantize: %s", err);
    free(phys);
    return out;
}

static void run_case(test_gpu *g, uint32_t policy, const void *arg)
{
    const kv_case *c = arg;
    vkattn_context *ctx = g->ctx;
    char what[256];
    snprintf(what, sizeof what,
             "%s q %s k %s v %s B%u Hq%u Hkv%u Tq%u Tk%u Dk%u Dv%u c%d m%d w%d mods%d bthd%d",
             test_policies[policy].name, vkattn_dtype_name(c->q), vkattn_dtype_name(c->k),
             vkattn_dtype_name(c->v), c->B, c->Hq, c->Hkv, c->Tq, c->Tk, c->Dk, c->Dv, c->causal,
             c->mask, c->weights, c->mods, c->bthd);
    test_rng rng = test_rng_seed(5200u + c->Tq + 3u * c->Tk + 7u * c->k + 13u * c->v + c->Dk);
    size_t nq = (size_t)c->B * c->Hq * c->Tq * c->Dk, no = (size_t)c->B * c->Hq * c->Tq * c->Dv;
    size_t nk = (size_t)c->B * c->Hkv * c->Tk * c->Dk, nv = (size_t)c->B * c->Hkv * c->Tk * c->Dv;
    size_t nw = (size_t)c->B * c->Hq * c->Tq * c->Tk, nl = (size_t)c->B * c->Hq * c->Tq;
    size_t nm = (size_t)c->Tq * c->Tk;
    float *q = test_random_array(&rng, nq, 2.0f, c->q);
    float *k = test_random_array(&rng, nk, 2.0f, F32);
    float *v = test_random_array(&rng, nv, 1.0f, F32);
    float *mask = test_random_array(&rng, nm, 1.0f, F32);
    for (size_t i = 0; i < nm; i += 5)
        mask[i] = -INFINITY;
    int64_t ks_[4], vs_[4];
    size_t kbytes, vbytes;
    void *kb = store_kv(k, c->k, c, c->Dk, ks_, &kbytes),
         *vb = store_kv(v, c->v, c, c->Dv, vs_, &vbytes);
    float *want = malloc(no * 4), *got = malloc(no * 4), *want_w = malloc(nw * 4),
          *got_w = malloc(nw * 4), *want_l = malloc(nl * 4), *got_l = malloc(nl * 4);
    assert_true(want && got && want_w && got_w && want_l && got_l);
    int64_t qs[4] = {c->B, c->Hq, c->Tq, c->Dk}, ks[4] = {c->B, c->Hkv, c->Tk, c->Dk};
    int64_t vs[4] = {c->B, c->Hkv, c->Tk, c->Dv}, os[4] = {c->B, c->Hq, c->Tq, c->Dv};
    int64_t ws[4] = {c->B, c->Hq, c->Tq, c->Tk}, ls[3] = {c->B, c->Hq, c->Tq};
    int64_t ms[2] = {c->Tq, c->Tk};
    /* the reference reads the same bytes (blocks, halves) */
    vkattn_ref_attention_args r = {
        .q = vkattn_host_tensor_make(q, F32, 4, qs),
        .k = vkattn_host_tensor_make(kb, c->k, 4, ks),
        .v = vkattn_host_tensor_make(vb, c->v, 4, vs),
        .out = vkattn_host_tensor_make(want, F32, 4, os),
        .causal = c->causal,
    };
    memcpy(r.k.strides, ks_, sizeof ks_), memcpy(r.v.strides, vs_, sizeof vs_);
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
    vkattn_buffer *bq = test_buffer_of(ctx, c->q, q, nq);
    vkattn_buffer *bk = test_buffer_with(ctx, kb, kbytes), *bv = test_buffer_with(ctx, vb, vbytes);
    vkattn_buffer *bo = test_buffer_with(ctx, NULL, no * vkattn_dtype_size(c->q));
    vkattn_buffer *bw = c->weights ? test_buffer_with(ctx, NULL, nw * 4) : NULL;
    vkattn_buffer *bl = c->mods ? test_buffer_with(ctx, NULL, nl * 4) : NULL;
    vkattn_buffer *bm = c->mask ? test_buffer_of(ctx, F32, mask, nm) : NULL;
    vkattn_attention_args a = {
        .q = vkattn_tensor_make(bq, 0, c->q, 4, qs),
        .k = vkattn_tensor_make(bk, 0, c->k, 4, ks),
        .v = vkattn_tensor_make(bv, 0, c->v, 4, vs),
        .out = vkattn_tensor_make(bo, 0, c->q, 4, os),
        .causal = c->causal,
    };
    memcpy(a.k.strides, ks_, sizeof ks_), memcpy(a.v.strides, vs_, sizeof vs_);
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
    TEST_DESTROY_BUFFERS(bq, bk, bv, bo, bw, bl, bm);
    free(q), free(k), free(v), free(mask), free(kb), free(vb), free(want), free(got), free(want_w);
    free(got_w), free(want_l), free(got_l);
}

/* Every ordered pair of different float k and v dtypes, each under one
 * q/out dtype and shape, then the shapes that take the other paths. */
static void test_kv_pairs(void **state)
{
    (void)state;
    static const kv_case cases[] = {
        {F32, F16, F32, 2, 4, 2, 17, 40, 64, 64, true, true, false, false, false},
        {F16, F32, F16, 1, 8, 2, 33, 33, 128, 128, true, false, false, false, true},
        {BF16, F16, BF16, 1, 2, 1, 9, 30, 32, 32, false, true, true, false, false},
        {F32, BF16, F16, 2, 2, 2, 12, 19, 96, 64, false, false, true, false, false},
        {F16, BF16, F32, 1, 4, 1, 1, 70, 64, 64, true, false, false, true, false},
        {BF16, F32, BF16, 1, 4, 4, 21, 21, 256, 256, true, false, false, true, false},
        {F32, F16, F32, 1, 2, 1, 7, 13, 20, 24, false, true, true, false, true},
        {F32, F32, F16, 1, 6, 2, 64, 64, 64, 64, true, false, false, false, false},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        test_for_each_policy(0, run_case, &cases[i]);
}

#define Q8_0 VKATTN_DTYPE_Q8_0
#define Q4_0 VKATTN_DTYPE_Q4_0
#define Q4_1 VKATTN_DTYPE_Q4_1
#define Q5_0 VKATTN_DTYPE_Q5_0
#define Q5_1 VKATTN_DTYPE_Q5_1
#define IQ4_NL VKATTN_DTYPE_IQ4_NL

/* Every format as k and as v, the same and different formats, with a float
 * of the other side, head dims 32 to 256, [B, Tk, Hkv, D] storage
 * (strides of whole blocks), weights through the quantized k. */
static void test_quantized_kv(void **state)
{
    (void)state;
    static const kv_case cases[] = {
        {F32, Q8_0, Q8_0, 2, 4, 2, 17, 40, 64, 64, true, false, false, false, false},
        {F16, Q4_0, Q4_0, 1, 8, 2, 1, 75, 128, 128, true, false, false, false, true},
        {BF16, Q4_1, Q5_1, 1, 2, 1, 9, 30, 32, 32, false, false, true, false, false},
        {F32, Q5_0, F16, 2, 2, 2, 12, 19, 96, 64, false, false, false, true, true},
        {F16, IQ4_NL, Q8_0, 1, 4, 1, 33, 33, 64, 96, true, false, true, false, false},
        {F32, F32, Q4_0, 1, 4, 4, 21, 21, 256, 256, true, false, false, true, false},
        {F32, Q5_1, IQ4_NL, 1, 6, 2, 64, 64, 160, 32, true, false, false, false, true},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        test_for_each_policy(0, run_case, &cases[i]);
}

/* The reference reads blocks as vkattn_ref_dequantize's values: the same
 * result, bit for bit, as on those values in f32. */
static void test_reference_blocks(void **state)
{
    (void)state;
    enum { T = 9, D = 64 };
    test_rng rng = test_rng_seed(61);
    float *q = test_random_array(&rng, T * D, 1.0f, F32),
          *k = test_random_array(&rng, T * D, 1.0f, F32);
    float kd[T * D], o1[T * D], o2[T * D];
    uint8_t blocks[T * D / 32 * 34];
    char err[256];
    assert_int_equal(vkattn_ref_quantize(Q8_0, k, T * D, blocks, err, sizeof err), VKATTN_SUCCESS);
    assert_int_equal(vkattn_ref_dequantize(Q8_0, blocks, T * D, kd, err, sizeof err),
                     VKATTN_SUCCESS);
    int64_t s[4] = {1, 1, T, D};
    vkattn_ref_attention_args r = {.q = vkattn_host_tensor_make(q, F32, 4, s),
                                   .k = vkattn_host_tensor_make(blocks, Q8_0, 4, s),
                                   .v = vkattn_host_tensor_make(kd, F32, 4, s),
                                   .out = vkattn_host_tensor_make(o1, F32, 4, s),
                                   .causal = true};
    assert_int_equal(vkattn_ref_attention(&r, err, sizeof err), VKATTN_SUCCESS);
    r.k = vkattn_host_tensor_make(kd, F32, 4, s);
    r.out = vkattn_host_tensor_make(o2, F32, 4, s);
    assert_int_equal(vkattn_ref_attention(&r, err, sizeof err), VKATTN_SUCCESS);
    assert_memory_equal(o1, o2, sizeof o1);
    /* strides that split a block are refused by name */
    r.k = vkattn_host_tensor_make(blocks, Q8_0, 4, s);
    r.k.strides[0] = T * D, r.k.strides[1] = T * D, r.k.strides[2] = 48, r.k.strides[3] = 1;
    r.k.shape[2] = 8;
    r.q.shape[2] = r.out.shape[2] = r.v.shape[2] = 8;
    assert_int_equal(vkattn_ref_attention(&r, err, sizeof err), VKATTN_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(err, "args->k.strides[2] is 48: a q8_0 tensor's strides count values "
                                "and must be multiples of 32"));
    free(q), free(k);
}

/* What quantized k and v refuse, by name: head dims that are not whole
 * blocks (reference and device), strides that split blocks, offsets the
 * device cannot bind from, tensors past their buffer. */
static void test_quantized_errors(void **state)
{
    test_gpu *g = *state;
    vkattn_context *ctx = g->ctx;
    enum { T = 4 };
    char err[512];
    int64_t s80[4] = {1, 1, T, 80}, s64[4] = {1, 2, T, 64};
    static float q[2 * T * 80], o[2 * T * 80];
    static uint8_t blocks[2 * T * 3 * 34];
    vkattn_ref_attention_args r = {.q = vkattn_host_tensor_make(q, F32, 4, s80),
                                   .k = vkattn_host_tensor_make(blocks, Q8_0, 4, s80),
                                   .v = vkattn_host_tensor_make(q, F32, 4, s80),
                                   .out = vkattn_host_tensor_make(o, F32, 4, s80)};
    const char *d80 = "args->k.shape[3] (head_dim) 80 does not suit a q8_0 k: it must be a "
                      "multiple of 32 (whole blocks)";
    assert_int_equal(vkattn_ref_attention(&r, err, sizeof err), VKATTN_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(err, d80));
    vkattn_buffer *b = test_buffer_with(ctx, NULL, 65536);
    vkattn_attention_args good = {.q = vkattn_tensor_make(b, 0, F32, 4, s64),
                                  .k = vkattn_tensor_make(b, 8192, Q4_0, 4, s64),
                                  .v = vkattn_tensor_make(b, 16384, Q5_1, 4, s64),
                                  .out = vkattn_tensor_make(b, 32768, F32, 4, s64)},
                          a;
    TEST_OK(ctx, vkattn_attention(ctx, &good));
    TEST_FAILS_CHANGED(
        ctx, a, good, (a.k.shape[3] = 80, a.q.shape[3] = 80), VKATTN_ERROR_INVALID_ARGUMENT,
        "args->k.shape[3] (head_dim) 80 does not suit a q4_0 k", vkattn_attention(ctx, &a));
    TEST_FAILS_CHANGED(
        ctx, a, good,
        (a.v.strides[0] = 2 * T * 64, a.v.strides[1] = 48, a.v.strides[2] = 64, a.v.strides[3] = 1),
        VKATTN_ERROR_INVALID_ARGUMENT,
        "args->v.strides[1] is 48: a q5_1 tensor's strides count values and must "
        "be multiples of 32",
        vkattn_attention(ctx, &a));
    TEST_FAILS_CHANGED(ctx, a, good, a.k.offset = 8192 + 18, VKATTN_ERROR_INVALID_ARGUMENT,
                       "args->k.offset 8210 is not a multiple of", vkattn_attention(ctx, &a));
    TEST_FAILS_CHANGED(ctx, a, good, a.v.offset = 65536 - 256, VKATTN_ERROR_OUT_OF_RANGE,
                       "args->v (q5_1, 384 bytes) from offset 65280 does not fit its buffer of "
                       "65536 bytes",
                       vkattn_attention(ctx, &a));
    TEST_FAILS_CHANGED(ctx, a, good, a.q.dtype = Q8_0, VKATTN_ERROR_UNSUPPORTED_DTYPE,
                       "args->q.dtype q8_0 is not supported", vkattn_attention(ctx, &a));
    /* out over a quantized input's bytes */
    TEST_FAILS_CHANGED(ctx, a, good, a.out.offset = 8192, VKATTN_ERROR_INVALID_ARGUMENT,
                       "overlaps args->k", vkattn_attention(ctx, &a));
    TEST_DESTROY_BUFFERS(b);
}

int main(void)
{
    const struct CMUnitTest cpu[] = {
        cmocka_unit_test(test_reference_blocks),
    };
    const struct CMUnitTest gpu[] = {
        cmocka_unit_test(test_kv_pairs),
        cmocka_unit_test(test_quantized_kv),
        cmocka_unit_test(test_quantized_errors),
    };
    int failed = cmocka_run_group_tests_name("attention_kv_dtypes_host", cpu, NULL, NULL);
    return failed + cmocka_run_group_tests_name("attention_kv_dtypes", gpu, test_gpu_setup,
                                                test_gpu_teardown);
}
