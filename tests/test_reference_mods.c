/* CPU reference: the score modifiers (sliding window, softcap, sinks, ALiBi,
 * causal alignment), the LSE output and the merge, against values computed
 * by hand and a plain implementation written here from the header's
 * formulas. The MHA layer's modifiers and every bad input are in
 * test_reference_mods_errors.c. No device. */
#include "test_reference_mods.h"

#include <math.h>
#include <stdlib.h>

double mods_alibi_formula(int64_t heads, double max_bias, int64_t h)
{
    int64_t n = 1;
    while (2 * n <= heads)
        n *= 2;
    return h < n ? exp2(-max_bias / (double)n * (double)(h + 1))
                 : exp2(-max_bias / (2.0 * (double)n) * (double)(2 * (h - n) + 1));
}

void mods_naive(const ref_dims *d, const float *q, const float *k, const float *v,
                const mods_spec *m, float *out, float *w, float *lse)
{
    const int64_t group = d->Hq / d->Hkv, Tq = d->Tq, Tk = d->Tk, D = d->D;
    double *e = test_alloc((size_t)Tk * sizeof *e);
    for (int64_t b = 0; b < d->B; b++)
        for (int64_t h = 0; h < d->Hq; h++)
            for (int64_t i = 0; i < Tq; i++) {
                const int64_t pos = m->top_left ? i : i + Tk - Tq, row = (b * d->Hq + h) * Tq + i;
                const float *qi = q + row * D;
                const int64_t kvh = b * d->Hkv + h / group;
                double den = 0.0;
                bool seen = false;
                for (int64_t j = 0; j < Tk; j++) {
                    e[j] = 0.0;
                    bool hidden = (m->causal && j > pos) || (m->pad && !m->pad[b * Tk + j]);
                    if (m->window) {
                        hidden = hidden || pos - j >= (int64_t)m->window;
                        hidden = hidden || (!m->causal && j - pos >= (int64_t)m->window);
                    }
                    if (hidden)
                        continue;
                    double s = 0.0;
                    for (int64_t c = 0; c < D; c++)
                        s += (double)qi[c] * k[(kvh * Tk + j) * D + c];
                    s *= m->scale;
                    if (m->softcap > 0.0)
                        s = m->softcap * tanh(s / m->softcap);
                    if (m->mask)
                        s += m->mask[row * Tk + j];
                    if (m->slopes)
                        s -= m->slopes[h] * fabs((double)(pos - j));
                    if (s == -INFINITY)
                        continue;
                    seen = true;
                    e[j] = exp(s);
                    den += e[j];
                }
                if (seen && m->sinks)
                    den += exp((double)m->sinks[h]);
                for (int64_t c = 0; c < D; c++) {
                    double acc = 0.0;
                    for (int64_t j = 0; j < Tk; j++)
                        acc += seen ? e[j] / den * v[(kvh * Tk + j) * D + c] : 0.0;
                    out[row * D + c] = (float)acc;
                }
                if (w)
                    for (int64_t j = 0; j < Tk; j++)
                        w[row * Tk + j] = seen ? (float)(e[j] / den) : 0.0f;
                if (lse)
                    lse[row] = seen ? (float)log(den) : -INFINITY;
            }
    free(e);
}

void mods_assert_lse(const float *got, const float *want, size_t n, double tol)
{
    for (size_t i = 0; i < n; i++) {
        bool ok = got[i] == want[i] ||
                  (isfinite(want[i]) && isfinite(got[i]) &&
                   fabs((double)got[i] - want[i]) <= tol * (1.0 + fabs((double)want[i])));
        if (!ok)
            fail_msg("lse[%zu]: got %.9g, want %.9g (tolerance %g)", i, got[i], want[i], tol);
    }
}

/* ------------------------------------------------------------ by hand */

/* One head, q = 0 so every visible key scores 0: a row's output is the
 * mean of its visible values (v_j[0] = j + 1), its weights 1/count and its
 * LSE log(count). Tk 4; Tq 4 or 2; both alignments, causal or not. */
static void test_window_by_hand(void **state)
{
    (void)state;
    const struct {
        int64_t tq;
        bool causal, top_left;
        uint32_t window;
        double mean[4];
        int count[4];
    } cases[] = {
        {4, true, false, 2, {1, 1.5, 2.5, 3.5}, {1, 2, 2, 2}},
        {4, false, false, 2, {1.5, 2, 3, 3.5}, {2, 3, 3, 2}},
        {4, true, false, 1, {1, 2, 3, 4}, {1, 1, 1, 1}},
        {4, true, false, UINT32_MAX, {1, 1.5, 2, 2.5}, {1, 2, 3, 4}},
        {2, true, false, 2, {2.5, 3.5}, {2, 2}},             /* i' = 2, 3 */
        {2, true, true, 2, {1, 1.5}, {1, 2}},                /* i' = 0, 1 */
        {2, false, true, 2, {1.5, 2}, {2, 3}},               /* top-left places the window */
        {2, false, false, 2, {3, 3.5}, {3, 2}},              /* ... as bottom-right does */
        {2, false, false, 0, {2.5, 2.5}, {4, 4}},            /* no window */
        {2, true, true, 0, {1, 1.5}, {1, 2}},                /* top-left causal alone */
        {4, false, true, 3, {2, 2.5, 2.5, 3}, {3, 4, 4, 3}}, /* Tq == Tk */
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        ref_dims d = {1, 1, 1, cases[c].tq, 4, 8};
        float q[32] = {0}, k[32], v[32], out[32], w[16], lse[4];
        for (int i = 0; i < 32; i++) {
            k[i] = (float)(i % 5) - 2.0f;
            v[i] = i % 8 == 0 ? (float)(i / 8 + 1) : 0.25f;
        }
        vkattn_ref_attention_args a;
        ref_attention_args(&a, &d, q, k, v, out);
        int64_t ws[4] = {1, 1, d.Tq, 4}, ls[3] = {1, 1, d.Tq};
        a.weights = vkattn_host_tensor_make(w, VKATTN_DTYPE_F32, 4, ws);
        a.lse = vkattn_host_tensor_make(lse, VKATTN_DTYPE_F32, 3, ls);
        a.causal = cases[c].causal;
        a.causal_align = cases[c].top_left ? VKATTN_CAUSAL_TOP_LEFT : VKATTN_CAUSAL_BOTTOM_RIGHT;
        a.window = cases[c].window;
        REF_OK(vkattn_ref_attention(&a, err, sizeof err));
        for (int64_t i = 0; i < d.Tq; i++) {
            const int n = cases[c].count[i];
            const int64_t pos = cases[c].top_left ? i : i + 4 - d.Tq;
            assert_float_equal(out[i * 8], cases[c].mean[i], 1e-6);
            assert_float_equal(out[i * 8 + 1], 0.25, 1e-7);
            assert_float_equal(lse[i], log((double)n), 1e-6);
            double total = 0.0;
            for (int64_t j = 0; j < 4; j++) {
                total += w[i * 4 + j];
                if (w[i * 4 + j] != 0.0f)
                    assert_float_equal(w[i * 4 + j], 1.0 / n, 1e-7);
                /* the key the row sits on is always visible when causal */
                if (cases[c].causal && j == pos)
                    assert_true(w[i * 4 + j] > 0.0f);
            }
            assert_float_equal(total, 1.0, 1e-6);
        }
    }
}

/* Scores 3 and -1 (scale 1) capped at 2: 2 tanh(1.5) and 2 tanh(-0.5); the
 * mask and ALiBi are added after the cap, not before. */
static void test_softcap_by_hand(void **state)
{
    (void)state;
    ref_dims d = {1, 1, 1, 1, 2, 8};
    float q[8] = {1}, k[16] = {3}, v[16] = {0}, out[8], w[2], lse[1];
    k[8] = -1.0f;
    v[0] = 1.0f, v[9] = 1.0f; /* out[0] = p0, out[1] = p1 */
    float mask[2] = {0.0f, 1.0f};
    for (int variant = 0; variant < 3; variant++) {
        vkattn_ref_attention_args a;
        ref_attention_args(&a, &d, q, k, v, out);
        int64_t ws[4] = {1, 1, 1, 2}, ls[3] = {1, 1, 1}, ms[2] = {1, 2};
        a.weights = vkattn_host_tensor_make(w, VKATTN_DTYPE_F32, 4, ws);
        a.lse = vkattn_host_tensor_make(lse, VKATTN_DTYPE_F32, 3, ls);
        a.scale = 1.0f;
        a.softcap = 2.0f;
        double s0 = 2 * tanh(1.5), s1 = 2 * tanh(-0.5);
        if (variant == 1) { /* mask after the cap: +1 on key 1 */
            a.mask = vkattn_host_tensor_make(mask, VKATTN_DTYPE_F32, 2, ms);
            s1 += 1.0;
        } else if (variant == 2) { /* ALiBi after the cap: Hq 1, B 2: slope 1/4 */
            a.alibi_max_bias = 2.0f;
            s0 -= 0.25; /* query at i' = 1, key 0 at distance 1 */
        }
        REF_OK(vkattn_ref_attention(&a, err, sizeof err));
        double den = exp(s0) + exp(s1);
        assert_float_equal(w[0], exp(s0) / den, 1e-7);
        assert_float_equal(w[1], exp(s1) / den, 1e-7);
        assert_float_equal(out[0], exp(s0) / den, 1e-7);
        assert_float_equal(out[1], exp(s1) / den, 1e-7);
        assert_float_equal(lse[0], log(den), 1e-6);
    }
    /* A large cap changes almost nothing; a small one squeezes both
     * scores to about +-C: weights near 1/2. */
    vkattn_ref_attention_args a;
    ref_attention_args(&a, &d, q, k, v, out);
    a.scale = 1.0f;
    a.softcap = 1e-3f;
    REF_OK(vkattn_ref_attention(&a, err, sizeof err));
    assert_float_equal(out[0], 0.5, 1e-3);
}

/* Scores 0 and ln 2 with sink ln 3: the denominator is 1 + 2 + 3 = 6, so
 * the weights are 1/6 and 1/3 (summing to 1/2) and the LSE is ln 6. Head 1
 * has sink -30: almost no sink. A row with no visible key stays zero. */
static void test_sinks_by_hand(void **state)
{
    (void)state;
    ref_dims d = {1, 2, 1, 3, 2, 8}; /* Tq 3 > Tk 2: row 0 sees nothing (causal) */
    float q[48] = {0}, k[16] = {0}, v[16], out[48], w[12], lse[6];
    for (int h = 0; h < 2; h++)
        for (int i = 0; i < 3; i++)
            q[(h * 3 + i) * 8] = 1.0f;
    k[8] = (float)log(2.0);
    for (int i = 0; i < 16; i++)
        v[i] = (float)(i + 1);
    float sinks[2] = {(float)log(3.0), -30.0f};
    vkattn_ref_attention_args a;
    ref_attention_args(&a, &d, q, k, v, out);
    int64_t ws[4] = {1, 2, 3, 2}, ls[3] = {1, 2, 3}, hs[1] = {2};
    a.weights = vkattn_host_tensor_make(w, VKATTN_DTYPE_F32, 4, ws);
    a.lse = vkattn_host_tensor_make(lse, VKATTN_DTYPE_F32, 3, ls);
    a.sinks = vkattn_host_tensor_make(sinks, VKATTN_DTYPE_F32, 1, hs);
    a.scale = 1.0f;
    a.causal = true;
    REF_OK(vkattn_ref_attention(&a, err, sizeof err));
    const double s1 = (float)log(2.0), sink0 = (float)log(3.0);
    for (int h = 0; h < 2; h++) {
        /* row 0 (i' = -1): nothing visible, sink or not */
        for (int e = 0; e < 8; e++)
            assert_true(out[h * 24 + e] == 0.0f);
        assert_true(w[h * 6] == 0.0f && w[h * 6 + 1] == 0.0f);
        assert_true(lse[h * 3] == -INFINITY);
        const double sink = h == 0 ? exp(sink0) : exp(-30.0);
        /* row 1 (i' = 0): key 0 only */
        double den = 1.0 + sink;
        assert_float_equal(w[h * 6 + 2], 1.0 / den, 1e-7);
        assert_true(w[h * 6 + 3] == 0.0f);
        assert_float_equal(lse[h * 3 + 1], log(den), 1e-6);
        for (int e = 0; e < 8; e++)
            assert_float_equal(out[h * 24 + 8 + e], v[e] / den, 1e-6);
        /* row 2 (i' = 1): both keys */
        den = 1.0 + exp(s1) + sink;
        assert_float_equal(w[h * 6 + 4], 1.0 / den, 1e-7);
        assert_float_equal(w[h * 6 + 5], exp(s1) / den, 1e-7);
        assert_float_equal(lse[h * 3 + 2], log(den), 1e-6);
        for (int e = 0; e < 8; e++)
            assert_float_equal(out[h * 24 + 16 + e], (v[e] + exp(s1) * v[8 + e]) / den, 1e-6);
    }
    assert_float_equal(w[4] + w[5], 0.5, 1e-7);
    assert_float_equal(lse[2], log(6.0), 1e-6);
}

/* ALiBi of Hq 2, max bias 8: slopes 1/16 and 1/256. q = 0; Tq 1, Tk 3:
 * bottom-right puts the query at 2 (biases -2m, -m, 0), top-left at 0
 * (0, -m, -2m), causal or not. */
static void test_alibi_by_hand(void **state)
{
    (void)state;
    ref_dims d = {1, 2, 1, 1, 3, 8};
    float q[16] = {0}, k[24], v[24] = {0}, out[16], lse[2];
    for (int i = 0; i < 24; i++)
        k[i] = (float)(i % 3);
    for (int j = 0; j < 3; j++)
        v[j * 8] = (float)j;
    const double slope[2] = {1.0 / 16, 1.0 / 256};
    for (int top_left = 0; top_left < 2; top_left++) {
        vkattn_ref_attention_args a;
        ref_attention_args(&a, &d, q, k, v, out);
        int64_t ls[3] = {1, 2, 1};
        a.lse = vkattn_host_tensor_make(lse, VKATTN_DTYPE_F32, 3, ls);
        a.alibi_max_bias = 8.0f;
        a.causal_align = top_left ? VKATTN_CAUSAL_TOP_LEFT : VKATTN_CAUSAL_BOTTOM_RIGHT;
        REF_OK(vkattn_ref_attention(&a, err, sizeof err));
        for (int h = 0; h < 2; h++) {
            double den = 0.0, num = 0.0;
            for (int j = 0; j < 3; j++) {
                double dist = top_left ? j : 2 - j, p = exp(-slope[h] * dist);
                den += p;
                num += p * j;
            }
            assert_float_equal(out[h * 8], num / den, 1e-7);
            assert_float_equal(lse[h], log(den), 1e-6);
        }
    }
}

/* The standard slopes for Hq 8 (2^-1 .. 2^-8) and Hq 12 (BLOOM's
 * get_alibi_slopes: 2^-1 .. 2^-8, then 2^-0.5, 2^-1.5, 2^-2.5, 2^-3.5),
 * read back from the weights: with q = 0 and only keys 0 and 8 visible to a
 * query at 8, w0 / w8 = exp(-8 slope). The same slopes given as a tensor
 * give the same result. */
#define SQRT_HALF 0.70710678118654752440

static void test_alibi_standard_slopes(void **state)
{
    (void)state;
    const double bloom12[12] = {0.5,       0.25,          0.125,         0.0625,
                                0.03125,   0.015625,      0.0078125,     0.00390625,
                                SQRT_HALF, SQRT_HALF / 2, SQRT_HALF / 4, SQRT_HALF / 8};
    const int64_t heads[2] = {8, 12};
    for (int c = 0; c < 2; c++) {
        const int64_t H = heads[c];
        ref_dims d = {1, H, 1, 1, 9, 8};
        float *q = test_alloc(ref_q_elems(&d) * 4), *k = test_alloc(ref_kv_elems(&d) * 4);
        float *v = test_alloc(ref_kv_elems(&d) * 4), *o1 = test_alloc(ref_q_elems(&d) * 4);
        float *o2 = test_alloc(ref_q_elems(&d) * 4), *w = test_alloc((size_t)(H * 9) * 4);
        float slopes[12];
        uint8_t pad[9] = {1, 0, 0, 0, 0, 0, 0, 0, 1};
        v[0] = 1.0f;
        vkattn_ref_attention_args a;
        ref_attention_args(&a, &d, q, k, v, o1);
        int64_t ws[4] = {1, H, 1, 9}, ps[2] = {1, 9};
        a.weights = vkattn_host_tensor_make(w, VKATTN_DTYPE_F32, 4, ws);
        a.key_padding = vkattn_host_tensor_make(pad, VKATTN_DTYPE_U8, 2, ps);
        a.alibi_max_bias = 8.0f;
        a.causal = true;
        REF_OK(vkattn_ref_attention(&a, err, sizeof err));
        for (int64_t h = 0; h < H; h++) {
            double want = mods_alibi_formula(H, 8.0, h);
            if (H == 8)
                assert_float_equal(want, ldexp(1.0, -(int)(h + 1)), 1e-15);
            else
                assert_float_equal(want, bloom12[h], 1e-15);
            double got = -log((double)w[h * 9] / w[h * 9 + 8]) / 8.0;
            if (fabs(got - want) > 1e-7)
                fail_msg("Hq %lld head %lld: slope %.9g, want %.9g", (long long)H, (long long)h,
                         got, want);
            slopes[h] = (float)want;
        }
        /* the tensor of the same slopes (f32) */
        int64_t hs[1] = {H};
        a.out.data = o2;
        a.alibi_max_bias = 0.0f;
        a.alibi_slopes = vkattn_host_tensor_make(slopes, VKATTN_DTYPE_F32, 1, hs);
        REF_OK(vkattn_ref_attention(&a, err, sizeof err));
        ref_assert_close(o2, o1, ref_q_elems(&d), 1e-7, "out (slopes tensor vs max bias)");
        free(q), free(k), free(v), free(o1), free(o2), free(w);
    }
}

/* ------------------------------------------------ against the plain version */

typedef struct mods_case {
    ref_dims d;
    bool causal, top_left;
    uint32_t window;
    float softcap;
    bool sinks;
    int alibi;     /* 0: none, 1: slopes tensor, 2: max bias 8 */
    int mask_rank; /* 0, 2 or 4 */
    bool pad;
    int weights_rank; /* 0, 3 or 4 */
} mods_case;

static const mods_case mods_cases[] = {
    /* each modifier alone */
    {{1, 2, 2, 6, 6, 8}, true, false, 3, 0, false, 0, 0, false, 4},
    {{2, 4, 2, 5, 9, 8}, false, false, 3, 0, false, 0, 2, false, 4},
    {{2, 3, 3, 4, 6, 8}, false, false, 0, 0.5f, false, 0, 0, false, 4},
    {{1, 4, 4, 3, 5, 8}, false, false, 0, 0, true, 0, 0, false, 4},
    {{1, 3, 3, 4, 7, 8}, false, false, 0, 0, false, 1, 0, false, 4},
    {{1, 6, 2, 5, 5, 8}, false, false, 0, 0, false, 2, 0, false, 4}, /* Hq 6: m1 slopes */
    {{1, 2, 1, 4, 7, 16}, true, true, 0, 0, false, 0, 0, false, 4},  /* top-left causal */
    /* with masks, padding, GQA/MQA, both alignments */
    {{1, 2, 1, 7, 4, 16}, false, true, 2, 0, false, 0, 0, true, 3},
    {{2, 4, 2, 5, 8, 8}, true, true, 0, 2.0f, false, 0, 4, false, 4},
    {{2, 4, 1, 4, 6, 8}, true, false, 0, 0, true, 0, 0, true, 3},
    {{1, 4, 2, 6, 3, 8}, false, true, 2, 0, false, 2, 0, false, 4},
    {{2, 8, 2, 6, 10, 16}, true, false, 4, 1.5f, true, 1, 4, true, 4},
    {{2, 4, 1, 7, 5, 8}, true, true, 3, 1.0f, true, 2, 2, true, 3},
    {{2, 12, 4, 5, 9, 8}, false, false, 5, 3.0f, true, 2, 4, true, 4},
    /* rows with nothing visible: Tq > Tk bottom-right, causal or windowed */
    {{1, 2, 2, 6, 3, 8}, true, false, 2, 0, true, 2, 0, false, 4},
    {{1, 2, 1, 6, 2, 8}, false, false, 2, 0.5f, true, 1, 2, false, 4},
};

/* The reference with `c` against mods_naive: out, weights (rank 3: the
 * naive per-head ones averaged) and LSE, 1e-6 (both are double rounded to
 * f32; they differ only in summation order). Returns how many rows had
 * nothing visible. */
static int check_case(const mods_case *c, test_rng *r)
{
    const ref_dims *d = &c->d;
    const size_t nq = ref_q_elems(d), nkv = ref_kv_elems(d), rows = nq / (size_t)d->D;
    const size_t nw = rows * (size_t)d->Tk, plane = (size_t)(d->Tq * d->Tk);
    float *q = ref_randf(r, nq), *k = ref_randf(r, nkv), *v = ref_randf(r, nkv);
    float *mask = ref_randf(r, nw), *full = test_alloc(nw * 4), *sinks = ref_randf(r, 12);
    float *out = test_alloc(nq * 4), *want = test_alloc(nq * 4), *plain = test_alloc(nq * 4);
    float *w = test_alloc(nw * 4), *want_w = test_alloc(nw * 4);
    float *lse = test_alloc(rows * 4), *want_lse = test_alloc(rows * 4);
    uint8_t *pad = test_alloc((size_t)(d->B * d->Tk));
    float slopes_f[12];
    double slopes[12];
    for (size_t i = 0; i < nw; i += 7)
        mask[i] = -INFINITY;
    for (int64_t i = 0; i < d->B * d->Tk; i++)
        pad[i] = (uint8_t)(i % 4 != 1);
    for (int64_t h = 0; h < d->Hq; h++) {
        slopes_f[h] = 0.05f + 0.1f * (float)h;
        slopes[h] = c->alibi == 1 ? slopes_f[h] : mods_alibi_formula(d->Hq, 8.0, h);
    }
    /* the naive version takes the mask at full size */
    for (size_t p = 0; p < rows / (size_t)d->Tq; p++)
        memcpy(full + p * plane, c->mask_rank == 2 ? mask : mask + p * plane, plane * 4);

    vkattn_ref_attention_args a;
    ref_attention_args(&a, d, q, k, v, plain);
    REF_OK(vkattn_ref_attention(&a, err, sizeof err));
    a.out.data = out;
    int64_t ms[4] = {d->B, d->Hq, d->Tq, d->Tk}, ls[3] = {d->B, d->Hq, d->Tq};
    int64_t ps[2] = {d->B, d->Tk}, hs[1] = {d->Hq}, w3[3] = {d->B, d->Tq, d->Tk};
    if (c->mask_rank)
        a.mask = vkattn_host_tensor_make(mask, VKATTN_DTYPE_F32, (uint32_t)c->mask_rank,
                                         c->mask_rank == 2 ? ms + 2 : ms);
    if (c->pad)
        a.key_padding = vkattn_host_tensor_make(pad, VKATTN_DTYPE_U8, 2, ps);
    if (c->weights_rank)
        a.weights = vkattn_host_tensor_make(w, VKATTN_DTYPE_F32, (uint32_t)c->weights_rank,
                                            c->weights_rank == 4 ? ms : w3);
    a.lse = vkattn_host_tensor_make(lse, VKATTN_DTYPE_F32, 3, ls);
    a.causal = c->causal;
    a.causal_align = c->top_left ? VKATTN_CAUSAL_TOP_LEFT : VKATTN_CAUSAL_BOTTOM_RIGHT;
    a.window = c->window;
    a.softcap = c->softcap;
    if (c->sinks)
        a.sinks = vkattn_host_tensor_make(sinks, VKATTN_DTYPE_F32, 1, hs);
    if (c->alibi == 1)
        a.alibi_slopes = vkattn_host_tensor_make(slopes_f, VKATTN_DTYPE_F32, 1, hs);
    a.alibi_max_bias = c->alibi == 2 ? 8.0f : 0.0f;
    REF_OK(vkattn_ref_attention(&a, err, sizeof err));

    mods_spec m = {.causal = c->causal,
                   .top_left = c->top_left,
                   .window = c->window,
                   .scale = 1.0 / sqrt((double)d->D),
                   .softcap = c->softcap,
                   .sinks = c->sinks ? sinks : NULL,
                   .slopes = c->alibi ? slopes : NULL,
                   .mask = c->mask_rank ? full : NULL,
                   .pad = c->pad ? pad : NULL};
    mods_naive(d, q, k, v, &m, want, want_w, want_lse);
    ref_assert_close(out, want, nq, 1e-6, "out");
    mods_assert_lse(lse, want_lse, rows, 1e-6);
    if (c->weights_rank == 4)
        ref_assert_close(w, want_w, nw, 1e-6, "weights");
    if (c->weights_rank == 3)
        for (int64_t b = 0; b < d->B; b++)
            for (size_t ij = 0; ij < plane; ij++) {
                double mean = 0.0;
                for (int64_t h = 0; h < d->Hq; h++)
                    mean += want_w[(size_t)(b * d->Hq + h) * plane + ij];
                float f = (float)(mean / (double)d->Hq);
                ref_assert_close(&w[(size_t)b * plane + ij], &f, 1, 1e-6, "weights (rank 3)");
            }
    /* the modifiers did something */
    double diff = 0.0;
    for (size_t i = 0; i < nq; i++)
        diff = fmax(diff, fabs((double)out[i] - plain[i]));
    assert_true(diff > 1e-3);
    int hidden = 0;
    for (size_t row = 0; row < rows; row++) {
        if (lse[row] != -INFINITY)
            continue;
        hidden++;
        for (int64_t e = 0; e < d->D; e++)
            assert_true(out[row * (size_t)d->D + (size_t)e] == 0.0f);
    }
    for (size_t i = 0; i < nq; i++)
        assert_false(isnan(out[i]));
    free(q), free(k), free(v), free(mask), free(full), free(sinks), free(out), free(want);
    free(plain), free(w), free(want_w), free(lse), free(want_lse), free(pad);
    return hidden;
}

static void test_mods_match_plain_version(void **state)
{
    (void)state;
    test_rng r = test_rng_seed(1401);
    int hidden = 0;
    for (size_t c = 0; c < sizeof mods_cases / sizeof mods_cases[0]; c++) {
        print_message("case %zu\n", c);
        hidden += check_case(&mods_cases[c], &r);
    }
    assert_true(hidden >= 6); /* the hidden-row cases had some */
}

/* ------------------------------------------------------------ merge */

/* One call over all Tk keys equals two calls over the first and last Tk/2
 * keys merged by their LSE. The halves carry the whole call's window,
 * causal rule and ALiBi as explicit per-head masks (their positions are the
 * whole's), the softcap themselves, and the sinks once (in half b, which
 * every row sees keys of: a row with no visible key ignores its sink).
 * Tolerance 1e-6 relative: each half's out and LSE are stored as f32
 * (rounded at 6e-8), and the merge adds a few roundings of its own. */
static void test_merge_halves_equal_whole(void **state)
{
    (void)state;
    test_rng r = test_rng_seed(1402);
    ref_dims d = {2, 4, 2, 5, 12, 8}, half = d;
    half.Tk = d.Tk / 2;
    const int64_t T2 = half.Tk;
    const size_t nq = ref_q_elems(&d), rows = nq / (size_t)d.D, nkv = ref_kv_elems(&d);
    float *q = ref_randf(&r, nq), *k = ref_randf(&r, nkv), *v = ref_randf(&r, nkv);
    float sinks[4] = {0.3f, -0.5f, 1.0f, 0.0f}, slopes_f[4] = {0.5f, 0.25f, 0.125f, 0.0625f};
    float *whole = test_alloc(nq * 4), *lse = test_alloc(rows * 4);
    float *oh[2], *lh[2], *kh[2], *vh[2], *mh[2];
    for (int s = 0; s < 2; s++) {
        oh[s] = test_alloc(nq * 4), lh[s] = test_alloc(rows * 4);
        kh[s] = test_alloc(nkv / 2 * 4), vh[s] = test_alloc(nkv / 2 * 4);
        mh[s] = test_alloc(rows * (size_t)T2 * 4);
        for (int64_t bg = 0; bg < d.B * d.Hkv; bg++) {
            memcpy(kh[s] + bg * T2 * d.D, k + (bg * d.Tk + s * T2) * d.D, (size_t)(T2 * d.D) * 4);
            memcpy(vh[s] + bg * T2 * d.D, v + (bg * d.Tk + s * T2) * d.D, (size_t)(T2 * d.D) * 4);
        }
        /* causal bottom-right, window 6, ALiBi of the slopes */
        for (size_t row = 0; row < rows; row++) {
            int64_t h = (int64_t)(row / (size_t)d.Tq) % d.Hq, i = (int64_t)(row % (size_t)d.Tq);
            int64_t pos = i + d.Tk - d.Tq;
            for (int64_t jl = 0; jl < T2; jl++) {
                int64_t j = jl + s * T2;
                mh[s][row * (size_t)T2 + (size_t)jl] =
                    j <= pos && pos - j < 6 ? -slopes_f[h] * (float)(pos - j) : -INFINITY;
            }
        }
    }
    int64_t ls[3] = {d.B, d.Hq, d.Tq}, hs[1] = {4}, ms[4] = {d.B, d.Hq, d.Tq, T2};
    vkattn_ref_attention_args a;
    ref_attention_args(&a, &d, q, k, v, whole);
    a.lse = vkattn_host_tensor_make(lse, VKATTN_DTYPE_F32, 3, ls);
    a.causal = true;
    a.window = 6;
    a.softcap = 0.8f;
    a.sinks = vkattn_host_tensor_make(sinks, VKATTN_DTYPE_F32, 1, hs);
    a.alibi_slopes = vkattn_host_tensor_make(slopes_f, VKATTN_DTYPE_F32, 1, hs);
    REF_OK(vkattn_ref_attention(&a, err, sizeof err));
    for (int s = 0; s < 2; s++) {
        ref_attention_args(&a, &half, q, kh[s], vh[s], oh[s]);
        a.lse = vkattn_host_tensor_make(lh[s], VKATTN_DTYPE_F32, 3, ls);
        a.mask = vkattn_host_tensor_make(mh[s], VKATTN_DTYPE_F32, 4, ms);
        a.softcap = 0.8f;
        if (s == 1)
            a.sinks = vkattn_host_tensor_make(sinks, VKATTN_DTYPE_F32, 1, hs);
        REF_OK(vkattn_ref_attention(&a, err, sizeof err));
    }
    int64_t os[4] = {d.B, d.Hq, d.Tq, d.D};
    float *merged = test_alloc(nq * 4), *merged_lse = test_alloc(rows * 4);
    vkattn_ref_attention_merge_args m = {0};
    m.out_a = vkattn_host_tensor_make(oh[0], VKATTN_DTYPE_F32, 4, os);
    m.out_b = vkattn_host_tensor_make(oh[1], VKATTN_DTYPE_F32, 4, os);
    m.lse_a = vkattn_host_tensor_make(lh[0], VKATTN_DTYPE_F32, 3, ls);
    m.lse_b = vkattn_host_tensor_make(lh[1], VKATTN_DTYPE_F32, 3, ls);
    m.out = vkattn_host_tensor_make(merged, VKATTN_DTYPE_F32, 4, os);
    m.lse = vkattn_host_tensor_make(merged_lse, VKATTN_DTYPE_F32, 3, ls);
    REF_OK(vkattn_ref_attention_merge(&m, err, sizeof err));
    ref_assert_close(merged, whole, nq, 1e-6, "merged out vs whole");
    mods_assert_lse(merged_lse, lse, rows, 1e-6);
    /* some rows see keys of only one half (the window), some of both */
    int one = 0, both = 0;
    for (size_t row = 0; row < rows; row++) {
        assert_true(lh[1][row] != -INFINITY);
        one += lh[0][row] == -INFINITY, both += lh[0][row] != -INFINITY;
    }
    assert_true(one > 0 && both > 0);

    /* In place: out is out_a, lse is lse_b (the same memory): identical. */
    m.out = m.out_a;
    m.lse = m.lse_b;
    REF_OK(vkattn_ref_attention_merge(&m, err, sizeof err));
    ref_assert_close(oh[0], merged, nq, 0.0, "merged in place (out = out_a)");
    ref_assert_close(lh[1], merged_lse, rows, 0.0, "merged in place (lse = lse_b)");
    free(q), free(k), free(v), free(whole), free(lse), free(merged), free(merged_lse);
    for (int s = 0; s < 2; s++)
        free(oh[s]), free(lh[s]), free(kh[s]), free(vh[s]), free(mh[s]);
}

/* The merge formula on chosen rows: equal LSEs average; a -inf side gives
 * exactly the other; both -inf give zeros and -inf; a large gap keeps the
 * larger; f16 outputs are the f32 merge rounded; strided (transposed)
 * inputs read right. */
static void test_merge_by_hand(void **state)
{
    (void)state;
    enum { ROWS = 5, D = 8 };
    float oa[ROWS * D], ob[ROWS * D], out[ROWS * D], lse[ROWS];
    float la[ROWS] = {1.0f, -INFINITY, -INFINITY, 2.0f, 100.0f};
    float lb[ROWS] = {1.0f, 0.5f, -INFINITY, 2.0f + (float)log(3.0), -200.0f};
    for (int i = 0; i < ROWS * D; i++)
        oa[i] = (float)(i % 7) - 3.0f, ob[i] = (float)(i % 5) * 0.5f;
    for (int e = 0; e < D; e++)
        oa[D + e] = oa[2 * D + e] = ob[2 * D + e] = 0.0f; /* empty sides are zeros */
    int64_t os[4] = {1, 1, ROWS, D}, ls[3] = {1, 1, ROWS};
    vkattn_ref_attention_merge_args m = {0};
    m.out_a = vkattn_host_tensor_make(oa, VKATTN_DTYPE_F32, 4, os);
    m.out_b = vkattn_host_tensor_make(ob, VKATTN_DTYPE_F32, 4, os);
    m.lse_a = vkattn_host_tensor_make(la, VKATTN_DTYPE_F32, 3, ls);
    m.lse_b = vkattn_host_tensor_make(lb, VKATTN_DTYPE_F32, 3, ls);
    m.out = vkattn_host_tensor_make(out, VKATTN_DTYPE_F32, 4, os);
    m.lse = vkattn_host_tensor_make(lse, VKATTN_DTYPE_F32, 3, ls);
    REF_OK(vkattn_ref_attention_merge(&m, err, sizeof err));
    const double wb3 = exp((double)lb[3] - 2.0) / (1.0 + exp((double)lb[3] - 2.0));
    for (int e = 0; e < D; e++) {
        assert_float_equal(out[e], 0.5 * ((double)oa[e] + ob[e]), 1e-7);
        assert_true(out[D + e] == ob[D + e]);
        assert_true(out[2 * D + e] == 0.0f);
        assert_float_equal(out[3 * D + e], (1 - wb3) * oa[3 * D + e] + wb3 * ob[3 * D + e], 1e-6);
        assert_true(out[4 * D + e] == oa[4 * D + e]); /* exp(-300) vanishes */
    }
    assert_float_equal(lse[0], 1.0 + log(2.0), 1e-6);
    assert_true(lse[1] == 0.5f);
    assert_true(lse[2] == -INFINITY);
    assert_float_equal(lse[3], 2.0 + log(4.0), 1e-6);
    assert_true(lse[4] == 100.0f);
    for (int i = 0; i < ROWS * D; i++)
        assert_false(isnan(out[i]));

    /* lse is optional; f16 outputs (inputs holding f16 values) are the f32
     * merge rounded; out_b read through strides ([D, ROWS] memory). */
    uint16_t ha[ROWS * D], hb[ROWS * D], hout[ROWS * D];
    float obt[ROWS * D], ref32[ROWS * D];
    for (int i = 0; i < ROWS * D; i++) {
        ha[i] = vkattn_f32_to_f16(oa[i]), hb[i] = vkattn_f32_to_f16(ob[i]);
        obt[(i % D) * ROWS + i / D] = ob[i];
    }
    m.lse.data = NULL;
    m.out.data = ref32;
    m.out_b.data = obt;
    m.out_b.strides[2] = 1, m.out_b.strides[3] = ROWS;
    REF_OK(vkattn_ref_attention_merge(&m, err, sizeof err));
    ref_assert_close(ref32, out, ROWS * D, 0.0, "merge with strided out_b");
    m.out_a = vkattn_host_tensor_make(ha, VKATTN_DTYPE_F16, 4, os);
    m.out_b = vkattn_host_tensor_make(hb, VKATTN_DTYPE_F16, 4, os);
    m.out = vkattn_host_tensor_make(hout, VKATTN_DTYPE_F16, 4, os);
    REF_OK(vkattn_ref_attention_merge(&m, err, sizeof err));
    for (int i = 0; i < ROWS * D; i++)
        assert_int_equal(hout[i], vkattn_f32_to_f16(out[i]));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_window_by_hand),
        cmocka_unit_test(test_softcap_by_hand),
        cmocka_unit_test(test_sinks_by_hand),
        cmocka_unit_test(test_alibi_by_hand),
        cmocka_unit_test(test_alibi_standard_slopes),
        cmocka_unit_test(test_mods_match_plain_version),
        cmocka_unit_test(test_merge_halves_equal_whole),
        cmocka_unit_test(test_merge_by_hand),
    };
    int failed = cmocka_run_group_tests_name("reference_score_mods", tests, NULL, NULL);
    failed += mods_run_layer_and_error_tests();
    return failed;
}
