/* CPU reference: attention, linear and MHA against hand-computed values, a
 * textbook implementation written here, and each other (GQA, masks, strides,
 * f16). The validation errors are in test_reference_errors.c. No device. */
#include "test_reference.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

/* Textbook attention over contiguous f32 tensors, written independently of
 * the library: additive rank-2 mask (or none), causal, GQA by h / group. */
static void naive_attention(const ref_dims *d, const float *q, const float *k, const float *v,
                            const float *mask, bool causal, double scale, float *out)
{
    int64_t group = d->Hq / d->Hkv;
    double *p = test_alloc((size_t)d->Tk * sizeof *p);
    for (int64_t b = 0; b < d->B; b++)
        for (int64_t h = 0; h < d->Hq; h++)
            for (int64_t i = 0; i < d->Tq; i++) {
                const float *qi = q + ((b * d->Hq + h) * d->Tq + i) * d->D;
                const float *kb = k + (b * d->Hkv + h / group) * d->Tk * d->D;
                const float *vb = v + (b * d->Hkv + h / group) * d->Tk * d->D;
                double mx = -INFINITY, sum = 0;
                for (int64_t j = 0; j < d->Tk; j++) {
                    double s = 0;
                    for (int64_t e = 0; e < d->D; e++)
                        s += (double)qi[e] * kb[j * d->D + e];
                    s = s * scale + (mask ? mask[i * d->Tk + j] : 0.0f);
                    if (causal && j > i + d->Tk - d->Tq)
                        s = -INFINITY;
                    p[j] = s;
                    mx = s > mx ? s : mx;
                }
                for (int64_t j = 0; j < d->Tk; j++) {
                    p[j] = mx == -INFINITY ? 0 : exp(p[j] - mx);
                    sum += p[j];
                }
                float *o = out + ((b * d->Hq + h) * d->Tq + i) * d->D;
                for (int64_t e = 0; e < d->D; e++) {
                    double acc = 0;
                    for (int64_t j = 0; j < d->Tk; j++)
                        acc += p[j] * vb[j * d->D + e];
                    o[e] = sum > 0 ? (float)(acc / sum) : 0.0f;
                }
            }
    free(p);
}

/* ------------------------------------------------------------ attention */

/* One query, two keys, D = 8, scale 1: scores 1 and 0, so the probabilities
 * are e/(e+1) and 1/(e+1). */
static void test_hand_two_keys(void **state)
{
    (void)state;
    float q[8] = {0.5f, 0.5f, 0, 0, 0, 0, 0, 0};
    float k[16] = {1, 1, 0, 0, 0, 0, 0, 0,  /* key 0: dot 1 */
                   0, 0, 3, 0, 0, 0, 0, 0}; /* key 1: dot 0 */
    float v[16] = {1, 2, 3, 4, 5, 6, 7, 8, 8, 7, 6, 5, 4, 3, 2, 1};
    float out[8], w[2];
    ref_dims d = {1, 1, 1, 1, 2, 8};
    vkattn_ref_attention_args a;
    ref_attention_args(&a, &d, q, k, v, out);
    int64_t ws[3] = {1, 1, 2};
    a.weights = vkattn_host_tensor_make(w, VKATTN_DTYPE_F32, 3, ws);
    a.scale = 1.0f;
    REF_OK(vkattn_ref_attention(&a, err, sizeof err));
    double e = exp(1.0), p0 = e / (e + 1), p1 = 1 / (e + 1);
    assert_float_equal(w[0], p0, 1e-7);
    assert_float_equal(w[1], p1, 1e-7);
    for (int i = 0; i < 8; i++)
        assert_float_equal(out[i], p0 * (i + 1) + p1 * (8 - i), 1e-6);

    /* scale 0 is 1/sqrt(8): with q = all ones, key 1 = c * ones gives score
     * 8c/sqrt(8) = ln 3 for c = ln(3) / sqrt(8), so weights 1/4 and 3/4. */
    for (int i = 0; i < 8; i++) {
        q[i] = 1.0f;
        k[i] = 0.0f;
        k[8 + i] = (float)(log(3.0) / sqrt(8.0));
    }
    a.scale = 0.0f;
    REF_OK(vkattn_ref_attention(&a, err, sizeof err));
    assert_float_equal(w[0], 0.25, 1e-6);
    assert_float_equal(w[1], 0.75, 1e-6);
    for (int i = 0; i < 8; i++)
        assert_float_equal(out[i], 0.25 * (i + 1) + 0.75 * (8 - i), 1e-5);

    /* Two queries, causal, Tq == Tk: query 0 sees only key 0 -> exactly v0. */
    float q2[16], out2[16];
    for (int i = 0; i < 16; i++)
        q2[i] = 1.0f;
    ref_dims d2 = {1, 1, 1, 2, 2, 8};
    ref_attention_args(&a, &d2, q2, k, v, out2);
    a.causal = true;
    REF_OK(vkattn_ref_attention(&a, err, sizeof err));
    for (int i = 0; i < 8; i++) {
        assert_float_equal(out2[i], v[i], 0.0);
        assert_float_equal(out2[8 + i], 0.25 * (i + 1) + 0.75 * (8 - i), 1e-5);
    }
}

/* The reference against the textbook version: GQA, causal, an additive
 * finite mask with some -inf, Tq != Tk. */
static void test_matches_naive(void **state)
{
    (void)state;
    test_rng r = test_rng_seed(11);
    const ref_dims cases[] = {{2, 4, 2, 5, 7, 16}, {1, 3, 1, 6, 4, 8}, {1, 2, 2, 3, 3, 24}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const ref_dims *d = &cases[c];
        float *q = ref_randf(&r, ref_q_elems(d)), *k = ref_randf(&r, ref_kv_elems(d));
        float *v = ref_randf(&r, ref_kv_elems(d));
        float *mask = ref_randf(&r, (size_t)(d->Tq * d->Tk));
        mask[1] = -INFINITY;
        float *out = test_alloc(ref_q_elems(d) * 4), *want = test_alloc(ref_q_elems(d) * 4);
        for (int causal = 0; causal < 2; causal++) {
            vkattn_ref_attention_args a;
            ref_attention_args(&a, d, q, k, v, out);
            int64_t ms[2] = {d->Tq, d->Tk};
            a.mask = vkattn_host_tensor_make(mask, VKATTN_DTYPE_F32, 2, ms);
            a.causal = causal;
            a.scale = 0.7f;
            REF_OK(vkattn_ref_attention(&a, err, sizeof err));
            naive_attention(d, q, k, v, mask, causal, 0.7f, want);
            ref_assert_close(out, want, ref_q_elems(d), 1e-6, "out");
        }
        free(q), free(k), free(v), free(mask), free(out), free(want);
    }
}

/* GQA/MQA read kv head h / (Hq / Hkv): the same as K and V repeated. */
static void test_gqa_equals_repeated_kv(void **state)
{
    (void)state;
    test_rng r = test_rng_seed(1);
    const int64_t kv_heads[] = {2, 1}; /* GQA, MQA */
    for (int c = 0; c < 2; c++) {
        ref_dims d = {2, 6, kv_heads[c], 5, 7, 16}, full = d;
        full.Hkv = d.Hq;
        float *q = ref_randf(&r, ref_q_elems(&d)), *k = ref_randf(&r, ref_kv_elems(&d));
        float *v = ref_randf(&r, ref_kv_elems(&d));
        float *kr = test_alloc(ref_kv_elems(&full) * 4), *vr = test_alloc(ref_kv_elems(&full) * 4);
        size_t head = (size_t)(d.Tk * d.D);
        for (int64_t b = 0; b < d.B; b++)
            for (int64_t h = 0; h < d.Hq; h++) {
                size_t src = (size_t)(b * d.Hkv + h / (d.Hq / d.Hkv)) * head;
                memcpy(kr + (size_t)(b * d.Hq + h) * head, k + src, head * 4);
                memcpy(vr + (size_t)(b * d.Hq + h) * head, v + src, head * 4);
            }
        float *o1 = test_alloc(ref_q_elems(&d) * 4), *o2 = test_alloc(ref_q_elems(&d) * 4);
        size_t nw = (size_t)(d.B * d.Hq * d.Tq * d.Tk);
        float *w1 = test_alloc(nw * 4), *w2 = test_alloc(nw * 4);
        int64_t ws[4] = {d.B, d.Hq, d.Tq, d.Tk};
        vkattn_ref_attention_args a;
        ref_attention_args(&a, &d, q, k, v, o1);
        a.weights = vkattn_host_tensor_make(w1, VKATTN_DTYPE_F32, 4, ws);
        a.causal = true;
        REF_OK(vkattn_ref_attention(&a, err, sizeof err));
        ref_attention_args(&a, &full, q, kr, vr, o2);
        a.weights = vkattn_host_tensor_make(w2, VKATTN_DTYPE_F32, 4, ws);
        a.causal = true;
        REF_OK(vkattn_ref_attention(&a, err, sizeof err));
        ref_assert_close(o1, o2, ref_q_elems(&d), 0.0, "out");
        ref_assert_close(w1, w2, nw, 0.0, "weights");
        /* Different heads of one group really differ (q differs): the
         * comparison above is not trivially satisfied by zeros. */
        assert_true(fabsf(o1[0] - o1[d.Tq * d.D]) > 1e-6f);
        free(q), free(k), free(v), free(kr), free(vr), free(o1), free(o2), free(w1), free(w2);
    }
}

/* causal == an explicit -inf mask with the bottom-right rule, Tq vs Tk in
 * every order; for Tq > Tk the first Tq - Tk rows see nothing: zeros. */
static void test_causal_equals_mask(void **state)
{
    (void)state;
    test_rng r = test_rng_seed(2);
    const int64_t lens[][2] = {{4, 4}, {3, 6}, {6, 3}, {1, 5}};
    for (int c = 0; c < 4; c++) {
        ref_dims d = {2, 2, 1, lens[c][0], lens[c][1], 8};
        float *q = ref_randf(&r, ref_q_elems(&d)), *k = ref_randf(&r, ref_kv_elems(&d));
        float *v = ref_randf(&r, ref_kv_elems(&d));
        float *mask = test_alloc((size_t)(d.Tq * d.Tk) * 4);
        for (int64_t i = 0; i < d.Tq; i++)
            for (int64_t j = 0; j < d.Tk; j++)
                mask[i * d.Tk + j] = j <= i + (d.Tk - d.Tq) ? 0.0f : -INFINITY;
        float *o1 = test_alloc(ref_q_elems(&d) * 4), *o2 = test_alloc(ref_q_elems(&d) * 4);
        size_t nw = (size_t)(d.B * d.Tq * d.Tk);
        float *w1 = test_alloc(nw * 4), *w2 = test_alloc(nw * 4);
        int64_t ws[3] = {d.B, d.Tq, d.Tk}, ms[2] = {d.Tq, d.Tk};
        vkattn_ref_attention_args a;
        ref_attention_args(&a, &d, q, k, v, o1);
        a.weights = vkattn_host_tensor_make(w1, VKATTN_DTYPE_F32, 3, ws);
        a.causal = true;
        REF_OK(vkattn_ref_attention(&a, err, sizeof err));
        ref_attention_args(&a, &d, q, k, v, o2);
        a.weights = vkattn_host_tensor_make(w2, VKATTN_DTYPE_F32, 3, ws);
        a.mask = vkattn_host_tensor_make(mask, VKATTN_DTYPE_F32, 2, ms);
        REF_OK(vkattn_ref_attention(&a, err, sizeof err));
        ref_assert_close(o1, o2, ref_q_elems(&d), 0.0, "out");
        ref_assert_close(w1, w2, nw, 0.0, "weights");
        for (int64_t b = 0; b < d.B; b++)
            for (int64_t i = 0; i < d.Tq; i++)
                for (int64_t j = 0; j < d.Tk; j++) {
                    float p = w1[(b * d.Tq + i) * d.Tk + j];
                    bool visible = j <= i + (d.Tk - d.Tq);
                    assert_true(visible ? p > 0.0f : p == 0.0f);
                }
        free(q), free(k), free(v), free(mask), free(o1), free(o2), free(w1), free(w2);
    }
}

/* key_padding == a rank-4 [B, 1, 1, Tk] -inf mask (head and query broadcast);
 * batch 1 is all padding: its rows are exactly zero. */
static void test_key_padding_equals_mask(void **state)
{
    (void)state;
    test_rng r = test_rng_seed(3);
    ref_dims d = {3, 2, 2, 4, 6, 8};
    float *q = ref_randf(&r, ref_q_elems(&d)), *k = ref_randf(&r, ref_kv_elems(&d));
    float *v = ref_randf(&r, ref_kv_elems(&d));
    uint8_t pad[18] = {1, 0, 1, 1, 0, 1, /**/ 0, 0, 0, 0, 0, 0, /**/ 1, 1, 1, 1, 1, 0};
    float mask[18];
    for (int i = 0; i < 18; i++)
        mask[i] = pad[i] ? 0.0f : -INFINITY;
    float *o1 = test_alloc(ref_q_elems(&d) * 4), *o2 = test_alloc(ref_q_elems(&d) * 4);
    int64_t ps[2] = {d.B, d.Tk};
    vkattn_ref_attention_args a;
    ref_attention_args(&a, &d, q, k, v, o1);
    a.key_padding = vkattn_host_tensor_make(pad, VKATTN_DTYPE_U8, 2, ps);
    REF_OK(vkattn_ref_attention(&a, err, sizeof err));
    /* A [B, 1, 1, Tk] mask has Tq 1 != 4: broadcast Tq by stride 0 instead. */
    int64_t ms4[4] = {d.B, 1, d.Tq, d.Tk};
    ref_attention_args(&a, &d, q, k, v, o2);
    a.mask = vkattn_host_tensor_make(mask, VKATTN_DTYPE_F32, 4, ms4);
    a.mask.strides[0] = d.Tk, a.mask.strides[1] = 0, a.mask.strides[2] = 0, a.mask.strides[3] = 1;
    REF_OK(vkattn_ref_attention(&a, err, sizeof err));
    ref_assert_close(o1, o2, ref_q_elems(&d), 0.0, "out");
    size_t per_batch = (size_t)(d.Hq * d.Tq * d.D);
    for (size_t i = 0; i < per_batch; i++)
        assert_true(o1[per_batch + i] == 0.0f && !signbit(o1[per_batch + i]));
    assert_true(fabsf(o1[0]) > 0.0f);
    free(q), free(k), free(v), free(o1), free(o2);
}

/* Rows with no visible key (mask row all -inf, Tq > Tk causal, all keys
 * padded) give exactly 0 in out and weights, in f32 and f16, never NaN. */
static void test_fully_masked_rows_are_zero(void **state)
{
    (void)state;
    test_rng r = test_rng_seed(4);
    ref_dims d = {2, 2, 1, 5, 3, 8};
    float *q = ref_randf(&r, ref_q_elems(&d)), *k = ref_randf(&r, ref_kv_elems(&d));
    float *v = ref_randf(&r, ref_kv_elems(&d));
    float mask[15];
    for (int i = 0; i < 15; i++)
        mask[i] = 0.0f;
    mask[12] = mask[13] = mask[14] = -INFINITY; /* row 4 fully hidden */
    uint8_t pad[6] = {1, 1, 1, 1, 1, 1};
    size_t nq = ref_q_elems(&d), nw = (size_t)(d.B * d.Hq * d.Tq * d.Tk);
    float *out = test_alloc(nq * 4), *w = test_alloc(nw * 4);
    uint16_t *out16 = test_alloc(nq * 2);
    int64_t ms[2] = {d.Tq, d.Tk}, ps[2] = {d.B, d.Tk}, ws[4] = {d.B, d.Hq, d.Tq, d.Tk};
    for (int pass = 0; pass < 2; pass++) {
        vkattn_ref_attention_args a;
        ref_attention_args(&a, &d, q, k, v, out);
        a.mask = vkattn_host_tensor_make(mask, VKATTN_DTYPE_F32, 2, ms);
        a.key_padding = vkattn_host_tensor_make(pad, VKATTN_DTYPE_U8, 2, ps);
        a.weights = vkattn_host_tensor_make(w, VKATTN_DTYPE_F32, 4, ws);
        a.causal = true;                          /* Tq 5 > Tk 3: rows 0 and 1 see nothing */
        pad[3] = pad[4] = pad[5] = (uint8_t)pass; /* pass 1: batch 1 has its keys */
        for (size_t i = 0; i < nq; i++)
            out[i] = NAN;
        for (size_t i = 0; i < nw; i++)
            w[i] = NAN;
        REF_OK(vkattn_ref_attention(&a, err, sizeof err));
        for (int64_t b = 0; b < d.B; b++)
            for (int64_t h = 0; h < d.Hq; h++)
                for (int64_t i = 0; i < d.Tq; i++) {
                    bool hidden = i < 2 || i == 4 || (b == 1 && pass == 0);
                    const float *o = out + ((b * d.Hq + h) * d.Tq + i) * d.D;
                    const float *wr = w + ((b * d.Hq + h) * d.Tq + i) * d.Tk;
                    double wsum = 0;
                    for (int64_t e = 0; e < d.D; e++) {
                        assert_false(isnan(o[e]));
                        if (hidden)
                            assert_true(o[e] == 0.0f);
                    }
                    for (int64_t j = 0; j < d.Tk; j++) {
                        assert_false(isnan(wr[j]));
                        wsum += wr[j];
                    }
                    assert_float_equal(wsum, hidden ? 0.0 : 1.0, 1e-6);
                }
        /* The same with f16 q and out: hidden rows are +0 halves. */
        uint16_t *q16 = test_alloc(nq * 2);
        for (size_t i = 0; i < nq; i++)
            q16[i] = vkattn_f32_to_f16(q[i]);
        a.q.data = q16, a.q.dtype = VKATTN_DTYPE_F16;
        a.out.data = out16, a.out.dtype = VKATTN_DTYPE_F16;
        REF_OK(vkattn_ref_attention(&a, err, sizeof err));
        for (int64_t b = 0; b < d.B; b++)
            for (int64_t h = 0; h < d.Hq; h++)
                for (int64_t i = 0; i < d.Tq; i++) {
                    bool hidden = i < 2 || i == 4 || (b == 1 && pass == 0);
                    for (int64_t e = 0; e < d.D; e++) {
                        uint16_t x = out16[((b * d.Hq + h) * d.Tq + i) * d.D + e];
                        assert_true((x & 0x7c00u) != 0x7c00u); /* no inf/NaN */
                        if (hidden)
                            assert_int_equal(x, 0);
                    }
                }
        free(q16);
    }
    free(q), free(k), free(v), free(out), free(w), free(out16);
}

/* [B, T, H, D] storage through strides == the contiguous computation on
 * permuted copies; out is written through strides too. */
static void test_strided_bthd(void **state)
{
    (void)state;
    test_rng r = test_rng_seed(5);
    ref_dims d = {2, 4, 2, 3, 5, 16};
    size_t nq = ref_q_elems(&d), nkv = ref_kv_elems(&d);
    float *qt = ref_randf(&r, nq), *kt = ref_randf(&r, nkv), *vt = ref_randf(&r, nkv);
    float *ot = test_alloc(nq * 4);
    float *q = test_alloc(nq * 4), *k = test_alloc(nkv * 4), *v = test_alloc(nkv * 4);
    float *o = test_alloc(nq * 4);
    /* [B,T,H,D] -> [B,H,T,D] */
    for (int64_t b = 0; b < d.B; b++)
        for (int64_t t = 0; t < d.Tk; t++)
            for (int64_t h = 0; h < d.Hq; h++)
                for (int64_t e = 0; e < d.D; e++) {
                    if (t < d.Tq)
                        q[((b * d.Hq + h) * d.Tq + t) * d.D + e] =
                            qt[((b * d.Tq + t) * d.Hq + h) * d.D + e];
                    if (h < d.Hkv) {
                        size_t dst = (size_t)(((b * d.Hkv + h) * d.Tk + t) * d.D + e);
                        size_t src = (size_t)(((b * d.Tk + t) * d.Hkv + h) * d.D + e);
                        k[dst] = kt[src];
                        v[dst] = vt[src];
                    }
                }
    vkattn_ref_attention_args a;
    ref_attention_args(&a, &d, q, k, v, o);
    a.causal = true;
    REF_OK(vkattn_ref_attention(&a, err, sizeof err));
    ref_attention_args(&a, &d, qt, kt, vt, ot);
    a.causal = true;
    const int64_t D = d.D;
    int64_t qstr[4] = {d.Tq * d.Hq * D, D, d.Hq * D, 1},
            kstr[4] = {d.Tk * d.Hkv * D, D, d.Hkv * D, 1};
    memcpy(a.q.strides, qstr, sizeof qstr);
    memcpy(a.out.strides, qstr, sizeof qstr);
    memcpy(a.k.strides, kstr, sizeof kstr);
    memcpy(a.v.strides, kstr, sizeof kstr);
    REF_OK(vkattn_ref_attention(&a, err, sizeof err));
    for (int64_t b = 0; b < d.B; b++)
        for (int64_t t = 0; t < d.Tq; t++)
            for (int64_t h = 0; h < d.Hq; h++)
                for (int64_t e = 0; e < D; e++)
                    assert_float_equal(ot[((b * d.Tq + t) * d.Hq + h) * D + e],
                                       o[((b * d.Hq + h) * d.Tq + t) * D + e], 0.0);
    free(qt), free(kt), free(vt), free(ot), free(q), free(k), free(v), free(o);
}

/* Rank-3 weights are the mean over heads of the rank-4 weights. */
static void test_weights_rank3_is_head_mean(void **state)
{
    (void)state;
    test_rng r = test_rng_seed(6);
    ref_dims d = {2, 4, 2, 3, 6, 8};
    float *q = ref_randf(&r, ref_q_elems(&d)), *k = ref_randf(&r, ref_kv_elems(&d));
    float *v = ref_randf(&r, ref_kv_elems(&d)), *out = test_alloc(ref_q_elems(&d) * 4);
    size_t n3 = (size_t)(d.B * d.Tq * d.Tk), n4 = n3 * (size_t)d.Hq;
    float *w3 = test_alloc(n3 * 4), *w4 = test_alloc(n4 * 4), *mean = test_alloc(n3 * 4);
    int64_t s3[3] = {d.B, d.Tq, d.Tk}, s4[4] = {d.B, d.Hq, d.Tq, d.Tk};
    vkattn_ref_attention_args a;
    ref_attention_args(&a, &d, q, k, v, out);
    a.weights = vkattn_host_tensor_make(w3, VKATTN_DTYPE_F32, 3, s3);
    REF_OK(vkattn_ref_attention(&a, err, sizeof err));
    a.weights = vkattn_host_tensor_make(w4, VKATTN_DTYPE_F32, 4, s4);
    REF_OK(vkattn_ref_attention(&a, err, sizeof err));
    for (int64_t b = 0; b < d.B; b++)
        for (int64_t ij = 0; ij < d.Tq * d.Tk; ij++) {
            double s = 0;
            for (int64_t h = 0; h < d.Hq; h++)
                s += w4[(b * d.Hq + h) * d.Tq * d.Tk + ij];
            mean[b * d.Tq * d.Tk + ij] = (float)(s / (double)d.Hq);
        }
    ref_assert_close(w3, mean, n3, 1e-7, "weights");
    /* Heads differ, so the mean is not any single head. */
    assert_true(fabsf(w4[0] - w4[d.Tq * d.Tk]) > 1e-6f);
    free(q), free(k), free(v), free(out), free(w3), free(w4), free(mean);
}

/* A rank-4 mask with size-1 dims == the same mask expanded to [B, Hq, Tq, Tk];
 * a rank-2 mask == [1, 1, Tq, Tk]. Finite values, so the additive part shows. */
static void test_mask_broadcast(void **state)
{
    (void)state;
    test_rng r = test_rng_seed(7);
    ref_dims d = {2, 3, 3, 4, 5, 8};
    size_t nq = ref_q_elems(&d), plane = (size_t)(d.Tq * d.Tk);
    float *q = ref_randf(&r, nq), *k = ref_randf(&r, ref_kv_elems(&d));
    float *v = ref_randf(&r, ref_kv_elems(&d));
    float *o1 = test_alloc(nq * 4), *o2 = test_alloc(nq * 4), *o0 = test_alloc(nq * 4);
    float *full = test_alloc(plane * (size_t)(d.B * d.Hq) * 4);
    const int64_t bdims[][2] = {{1, 3}, {2, 1}, {1, 1}, {0, 0}}; /* {0,0}: rank 2 */
    vkattn_ref_attention_args a;
    ref_attention_args(&a, &d, q, k, v, o0);
    REF_OK(vkattn_ref_attention(&a, err, sizeof err)); /* no mask at all */
    for (int c = 0; c < 4; c++) {
        int64_t mb = bdims[c][0] ? bdims[c][0] : 1, mh = bdims[c][1] ? bdims[c][1] : 1;
        float *m = ref_randf(&r, plane * (size_t)(mb * mh));
        m[2] = -INFINITY;
        for (int64_t b = 0; b < d.B; b++)
            for (int64_t h = 0; h < d.Hq; h++)
                memcpy(full + (size_t)(b * d.Hq + h) * plane,
                       m + (size_t)((mb == 1 ? 0 : b) * mh + (mh == 1 ? 0 : h)) * plane, plane * 4);
        ref_attention_args(&a, &d, q, k, v, o1);
        int64_t s4[4] = {mb, mh, d.Tq, d.Tk}, s2[2] = {d.Tq, d.Tk};
        a.mask = bdims[c][0] ? vkattn_host_tensor_make(m, VKATTN_DTYPE_F32, 4, s4)
                             : vkattn_host_tensor_make(m, VKATTN_DTYPE_F32, 2, s2);
        REF_OK(vkattn_ref_attention(&a, err, sizeof err));
        int64_t sf[4] = {d.B, d.Hq, d.Tq, d.Tk};
        ref_attention_args(&a, &d, q, k, v, o2);
        a.mask = vkattn_host_tensor_make(full, VKATTN_DTYPE_F32, 4, sf);
        REF_OK(vkattn_ref_attention(&a, err, sizeof err));
        ref_assert_close(o1, o2, nq, 0.0, "out");
        assert_true(fabsf(o1[0] - o0[0]) > 1e-6f); /* the mask did something */
        free(m);
    }
    free(q), free(k), free(v), free(o0), free(o1), free(o2), free(full);
}

/* f16 inputs (q, k, v, mask) == f32 inputs holding the same rounded values;
 * f16 out == the f32 out rounded to nearest even. */
static void test_f16_host_tensors(void **state)
{
    (void)state;
    test_rng r = test_rng_seed(8);
    ref_dims d = {1, 2, 1, 3, 4, 8};
    size_t nq = ref_q_elems(&d), nkv = ref_kv_elems(&d), nm = (size_t)(d.Tq * d.Tk);
    float *f[4] = {ref_randf(&r, nq), ref_randf(&r, nkv), ref_randf(&r, nkv), ref_randf(&r, nm)};
    size_t n[4] = {nq, nkv, nkv, nm};
    uint16_t *h[4];
    for (int t = 0; t < 4; t++) {
        h[t] = test_alloc(n[t] * 2);
        for (size_t i = 0; i < n[t]; i++) {
            h[t][i] = vkattn_f32_to_f16(f[t][i]);
            f[t][i] = vkattn_f16_to_f32(h[t][i]); /* the values f16 can hold */
        }
    }
    float *o32 = test_alloc(nq * 4), *o = test_alloc(nq * 4);
    uint16_t *o16 = test_alloc(nq * 2);
    int64_t ms[2] = {d.Tq, d.Tk};
    vkattn_ref_attention_args a;
    ref_attention_args(&a, &d, f[0], f[1], f[2], o32);
    a.mask = vkattn_host_tensor_make(f[3], VKATTN_DTYPE_F32, 2, ms);
    REF_OK(vkattn_ref_attention(&a, err, sizeof err));
    /* k, v and mask f16, q and out f32 */
    a.k.data = h[1], a.k.dtype = VKATTN_DTYPE_F16;
    a.v.data = h[2], a.v.dtype = VKATTN_DTYPE_F16;
    a.mask.data = h[3], a.mask.dtype = VKATTN_DTYPE_F16;
    a.out.data = o;
    REF_OK(vkattn_ref_attention(&a, err, sizeof err));
    ref_assert_close(o, o32, nq, 0.0, "out (f16 k, v, mask)");
    /* everything f16 */
    a.q.data = h[0], a.q.dtype = VKATTN_DTYPE_F16;
    a.out.data = o16, a.out.dtype = VKATTN_DTYPE_F16;
    REF_OK(vkattn_ref_attention(&a, err, sizeof err));
    for (size_t i = 0; i < nq; i++)
        assert_int_equal(o16[i], vkattn_f32_to_f16(o32[i]));
    for (int t = 0; t < 4; t++)
        free(f[t]), free(h[t]);
    free(o32), free(o), free(o16);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hand_two_keys),
        cmocka_unit_test(test_matches_naive),
        cmocka_unit_test(test_gqa_equals_repeated_kv),
        cmocka_unit_test(test_causal_equals_mask),
        cmocka_unit_test(test_key_padding_equals_mask),
        cmocka_unit_test(test_fully_masked_rows_are_zero),
        cmocka_unit_test(test_strided_bthd),
        cmocka_unit_test(test_weights_rank3_is_head_mean),
        cmocka_unit_test(test_mask_broadcast),
        cmocka_unit_test(test_f16_host_tensors),
    };
    int failed = cmocka_run_group_tests_name("reference_attention", tests, NULL, NULL);
    failed += ref_run_linear_mha_tests();
    failed += ref_run_error_tests();
    return failed;
}
