/* CPU reference of the MHA layer's modern decoder options (issue 13): QK-norm,
 * RoPE (NEOX and GPTJ, partial dims, linear and Llama 3 scaling), positions
 * and the attention scale. The expectations are computed here with plain
 * loops from the formulas in vkattn/ops.h ("rotary positions", "MHA
 * layer"), not with any of the reference's own steps. */
#include "test_reference.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

enum { DM = 16, HQ = 2, HKV = 1, DH = 8, QW = HQ * DH, KVW = HKV * DH };

/* A tiny self-attention layer: Dm 16, Hq 2, Hkv 1 (GQA), Dh 8. */
typedef struct tiny {
    float wq[QW * DM], wk[KVW * DM], wv[KVW * DM], wo[DM * QW];
    float bq[QW], bk[KVW], bv[KVW], bo[DM];
    float q_norm[DH], k_norm[DH];
} tiny;

static void tiny_init(tiny *l, test_rng *r)
{
    test_fill_uniform(r, l->wq, QW * DM, -0.5f, 0.5f);
    test_fill_uniform(r, l->wk, KVW * DM, -0.5f, 0.5f);
    test_fill_uniform(r, l->wv, KVW * DM, -0.5f, 0.5f);
    test_fill_uniform(r, l->wo, DM * QW, -0.5f, 0.5f);
    test_fill_uniform(r, l->bq, QW, -0.2f, 0.2f);
    test_fill_uniform(r, l->bk, KVW, -0.2f, 0.2f);
    test_fill_uniform(r, l->bv, KVW, -0.2f, 0.2f);
    test_fill_uniform(r, l->bo, DM, -0.2f, 0.2f);
    test_fill_uniform(r, l->q_norm, DH, 0.5f, 1.5f);
    test_fill_uniform(r, l->k_norm, DH, 0.5f, 1.5f);
}

static vkattn_mha_weights tiny_weights(const tiny *l)
{
    vkattn_mha_weights w = {0};
    w.wq = l->wq, w.wk = l->wk, w.wv = l->wv, w.wo = l->wo;
    w.bq = l->bq, w.bk = l->bk, w.bv = l->bv, w.bo = l->bo;
    w.q_norm = l->q_norm, w.k_norm = l->k_norm;
    return w;
}

static vkattn_mha_desc tiny_desc(void)
{
    vkattn_mha_desc d = {
        .embed_dim = DM, .num_heads = HQ, .num_kv_heads = HKV, .head_dim = DH, .bias = true};
    return d;
}

/* ---- the layer by hand */

/* inv_freq[i] of "rotary positions", i < R/2, with the desc's scaling. */
static double hand_inv_freq(const vkattn_rope_desc *r, int R, int i)
{
    double f = 1.0 / pow((double)r->theta, (2.0 * i) / R);
    if (r->scaling == VKATTN_ROPE_SCALING_LINEAR)
        return f / r->factor;
    if (r->scaling != VKATTN_ROPE_SCALING_LLAMA3)
        return f;
    double wavelen = 2.0 * 3.14159265358979323846 / f;
    double orig = r->original_max_positions;
    if (wavelen < orig / r->high_freq_factor)
        return f;
    if (wavelen > orig / r->low_freq_factor)
        return f / r->factor;
    double s = (orig / wavelen - r->low_freq_factor) / (r->high_freq_factor - r->low_freq_factor);
    return (1.0 - s) * f / r->factor + s * f;
}

/* One head (f32 in place): RMSNorm with `w` (NULL: none), then RoPE at
 * `pos` (theta 0: none), in double, stored to f32 once. */
static void hand_head(float *x, const float *w, double eps, const vkattn_rope_desc *r, int64_t pos)
{
    double h[DH], ss = 0.0;
    for (int e = 0; e < DH; e++)
        h[e] = x[e], ss += h[e] * h[e];
    if (w)
        for (int e = 0; e < DH; e++)
            h[e] = h[e] / sqrt(ss / DH + eps) * w[e];
    if (r->theta != 0.0f) {
        int R = r->dims ? (int)r->dims : DH;
        for (int i = 0; i < R / 2; i++) {
            int a = r->style == VKATTN_ROPE_GPTJ ? 2 * i : i;
            int b = r->style == VKATTN_ROPE_GPTJ ? 2 * i + 1 : i + R / 2;
            double ang = (double)pos * hand_inv_freq(r, R, i);
            double u = h[a], v = h[b];
            h[a] = u * cos(ang) - v * sin(ang);
            h[b] = u * sin(ang) + v * cos(ang);
        }
    }
    for (int e = 0; e < DH; e++)
        x[e] = (float)h[e];
}

/* y[n] = b[n] + sum_k x[k] w[n, k], in double, stored f32. */
static void hand_linear(const float *x, const float *w, const float *b, int K, int N, float *y)
{
    for (int n = 0; n < N; n++) {
        double s = b ? b[n] : 0.0;
        for (int k = 0; k < K; k++)
            s += (double)x[k] * w[n * K + k];
        y[n] = (float)s;
    }
}

typedef struct hand_opts {
    vkattn_rope_desc rope; /* theta 0: none */
    bool qk_norm;
    double eps;
    double scale;
    const int32_t *positions; /* [B, T] or NULL: t */
    const uint8_t *pad;       /* [B, T] or NULL */
    bool causal;
} hand_opts;

/* The whole layer for x [B, T, DM] into y [B, T, DM]; Q, K, V and O are
 * rounded to f32 between the steps, as the reference documents. */
static void hand_layer(const tiny *l, const hand_opts *o, const float *x, int B, int T, float *y)
{
    enum { TMAX = 8 };
    assert_true(T <= TMAX);
    float q[TMAX][QW], k[TMAX][KVW], v[TMAX][KVW], out[TMAX][QW];
    for (int b = 0; b < B; b++) {
        for (int t = 0; t < T; t++) {
            const float *xt = x + (b * T + t) * DM;
            hand_linear(xt, l->wq, l->bq, DM, QW, q[t]);
            hand_linear(xt, l->wk, l->bk, DM, KVW, k[t]);
            hand_linear(xt, l->wv, l->bv, DM, KVW, v[t]);
            int64_t pos = o->positions ? o->positions[b * T + t] : t;
            for (int h = 0; h < HQ; h++)
                hand_head(q[t] + h * DH, o->qk_norm ? l->q_norm : NULL, o->eps, &o->rope, pos);
            for (int h = 0; h < HKV; h++)
                hand_head(k[t] + h * DH, o->qk_norm ? l->k_norm : NULL, o->eps, &o->rope, pos);
        }
        for (int h = 0; h < HQ; h++) {
            int g = h / (HQ / HKV);
            for (int i = 0; i < T; i++) {
                double s[TMAX], mx = -INFINITY, sum = 0.0;
                for (int j = 0; j < T; j++) {
                    bool hidden = (o->causal && j > i) || (o->pad && !o->pad[b * T + j]);
                    double d = 0.0;
                    for (int e = 0; e < DH; e++)
                        d += (double)q[i][h * DH + e] * k[j][g * DH + e];
                    s[j] = hidden ? -INFINITY : o->scale * d;
                    mx = s[j] > mx ? s[j] : mx;
                }
                for (int j = 0; j < T; j++)
                    sum += s[j] == -INFINITY ? 0.0 : exp(s[j] - mx);
                for (int e = 0; e < DH; e++) {
                    double acc = 0.0;
                    for (int j = 0; j < T; j++)
                        if (s[j] != -INFINITY)
                            acc += exp(s[j] - mx) / sum * v[j][g * DH + e];
                    out[i][h * DH + e] = (float)acc;
                }
            }
        }
        for (int t = 0; t < T; t++)
            hand_linear(out[t], l->wo, l->bo, QW, DM, y + (b * T + t) * DM);
    }
}

/* The reference on the same inputs. */
static vkattn_result ref_layer(const tiny *l, const vkattn_mha_desc *d, const float *x, int B,
                               int T, const int32_t *positions, const uint8_t *pad, bool causal,
                               float *y, char *error)
{
    int64_t xs[3] = {B, T, DM}, ps[2] = {B, T};
    vkattn_ref_mha_args a = {0};
    a.x = vkattn_host_tensor_make((void *)x, VKATTN_DTYPE_F32, 3, xs);
    a.y = vkattn_host_tensor_make(y, VKATTN_DTYPE_F32, 3, xs);
    if (positions)
        a.positions = vkattn_host_tensor_make((void *)positions, VKATTN_DTYPE_I32, 2, ps);
    if (pad)
        a.key_padding = vkattn_host_tensor_make((void *)pad, VKATTN_DTYPE_U8, 2, ps);
    a.causal = causal;
    vkattn_mha_weights w = tiny_weights(l);
    return vkattn_ref_mha(d, &w, &a, error, 512);
}

/* ---- tests */

/* NEOX and GPTJ, full and partial rotary dims, every scaling, QK-norm on and
 * off, explicit and default scales, given and default positions: the
 * reference equals the hand computation. */
static void test_matches_hand(void **state)
{
    (void)state;
    test_rng r = test_rng_seed(1301);
    tiny l;
    tiny_init(&l, &r);
    enum { B = 2, T = 4 };
    float x[B * T * DM], y[B * T * DM], want[B * T * DM], plain[B * T * DM];
    test_fill_uniform(&r, x, B * T * DM, -1.0f, 1.0f);
    const int32_t pos[B * T] = {0, 1, 2, 3, 7, 300, 4096, 16777215};
    /* Llama 3 at theta 10000, R 8: wavelengths 6.3, 63, 628, 6283 against
     * high 1000 / 4 = 250 and low 1000 / 1: kept, kept, blended, divided. */
    const vkattn_rope_desc llama3 = {.theta = 10000.0f,
                                     .scaling = VKATTN_ROPE_SCALING_LLAMA3,
                                     .factor = 8.0f,
                                     .low_freq_factor = 1.0f,
                                     .high_freq_factor = 4.0f,
                                     .original_max_positions = 1000};
    const struct {
        vkattn_rope_desc rope;
        bool qk_norm, causal, positions;
        float scale, eps;
    } cases[] = {
        {{.theta = 10000.0f}, true, true, false, 0.3f, 0.0f},
        {{.theta = 10000.0f, .style = VKATTN_ROPE_GPTJ}, false, true, true, 0.0f, 0.0f},
        {{.theta = 500.0f, .dims = 4}, true, false, true, 0.0f, 1e-2f},
        {{.theta = 100.0f, .dims = 2, .style = VKATTN_ROPE_GPTJ}, false, false, false, 1.7f, 0},
        {{.theta = 1e6f, .dims = 6, .scaling = VKATTN_ROPE_SCALING_LINEAR, .factor = 4.0f},
         true,
         true,
         true,
         0.0f,
         0.0f},
        {llama3, false, true, true, 0.25f, 0.0f},
        {{.theta = 0.0f}, true, true, false, 0.5f, 0.0f}, /* QK-norm alone */
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        vkattn_mha_desc d = tiny_desc();
        d.rope = cases[c].rope;
        d.qk_norm = cases[c].qk_norm;
        d.scale = cases[c].scale;
        d.norm_eps = cases[c].eps;
        const int32_t *p = cases[c].positions ? pos : NULL;
        char msg[512] = "";
        if (ref_layer(&l, &d, x, B, T, p, NULL, cases[c].causal, y, msg) != VKATTN_SUCCESS)
            fail_msg("case %zu: %s", c, msg);
        hand_opts o = {.rope = cases[c].rope,
                       .qk_norm = cases[c].qk_norm,
                       .eps = cases[c].eps ? cases[c].eps : 1e-6,
                       .scale = cases[c].scale ? cases[c].scale : 1.0 / sqrt(DH),
                       .positions = p,
                       .causal = cases[c].causal};
        hand_layer(&l, &o, x, B, T, want);
        char what[64];
        snprintf(what, sizeof what, "case %zu: y", c);
        ref_assert_close(y, want, B * T * DM, 1e-6, what);
        /* The options change the result: without them it differs. */
        vkattn_mha_desc base = tiny_desc();
        REF_OK(ref_layer(&l, &base, x, B, T, NULL, NULL, cases[c].causal, plain, err));
        double diff = 0.0;
        for (int i = 0; i < B * T * DM; i++)
            diff = fmax(diff, fabs((double)plain[i] - y[i]));
        assert_true(diff > 1e-3);
    }
}

/* Scale 0 is 1/sqrt(head_dim), bit for bit. */
static void test_scale_default_is_rsqrt_head_dim(void **state)
{
    (void)state;
    test_rng r = test_rng_seed(1302);
    tiny l;
    tiny_init(&l, &r);
    float x[3 * DM], y0[3 * DM], y1[3 * DM];
    test_fill_uniform(&r, x, 3 * DM, -1.0f, 1.0f);
    vkattn_mha_desc d = tiny_desc();
    d.rope.theta = 10000.0f;
    REF_OK(ref_layer(&l, &d, x, 1, 3, NULL, NULL, true, y0, err));
    d.scale = (float)(1.0 / sqrt((double)DH));
    REF_OK(ref_layer(&l, &d, x, 1, 3, NULL, NULL, true, y1, err));
    assert_memory_equal(y0, y1, sizeof y0);
    d.scale *= 2.0f;
    REF_OK(ref_layer(&l, &d, x, 1, 3, NULL, NULL, true, y1, err));
    assert_true(fabsf(y0[2 * DM] - y1[2 * DM]) > 1e-5f); /* token 2 sees 3 keys */
}

/* With norm weights all 1, every head of Q and K has RMS 1: for tokens v and
 * -3v with Wq == Wk and no bias, k0 = q0 and k1 = -q0 with |q0|^2 = Dh,
 * so query 0 weighs key 0 by sigmoid(2 scale Dh) whatever the magnitudes;
 * scaling Wq then changes nothing. */
static void test_qk_norm_unit_rms(void **state)
{
    (void)state;
    test_rng r = test_rng_seed(1303);
    tiny l;
    tiny_init(&l, &r);
    memcpy(l.wk, l.wq, sizeof l.wk); /* K head 0 = Q head 0 */
    for (int e = 0; e < DH; e++)
        l.q_norm[e] = l.k_norm[e] = 1.0f;
    float x[2 * DM], y[2 * DM], y2[2 * DM], w[HQ * 4];
    for (int i = 0; i < DM; i++) {
        x[i] = test_rng_uniform(&r, -1.0f, 1.0f);
        x[DM + i] = -3.0f * x[i];
    }
    vkattn_mha_desc d = tiny_desc();
    d.bias = false;
    d.qk_norm = true;
    d.norm_eps = 1e-30f; /* no visible eps */
    d.scale = 0.05f;
    int64_t xs[3] = {1, 2, DM}, ws[4] = {1, HQ, 2, 2};
    vkattn_ref_mha_args a = {0};
    a.x = vkattn_host_tensor_make(x, VKATTN_DTYPE_F32, 3, xs);
    a.y = vkattn_host_tensor_make(y, VKATTN_DTYPE_F32, 3, xs);
    a.weights = vkattn_host_tensor_make(w, VKATTN_DTYPE_F32, 4, ws);
    vkattn_mha_weights lw = tiny_weights(&l);
    REF_OK(vkattn_ref_mha(&d, &lw, &a, err, sizeof err));
    double p = 1.0 / (1.0 + exp(-2.0 * 0.05 * DH));
    /* head 0, query 0: key 0 (= q), key 1 (= -q); query 1 the other way */
    assert_float_equal(w[0], p, 1e-6);
    assert_float_equal(w[1], 1.0 - p, 1e-6);
    assert_float_equal(w[2], 1.0 - p, 1e-6);
    assert_float_equal(w[3], p, 1e-6);
    /* Without the norm the magnitudes show. */
    d.qk_norm = false;
    REF_OK(vkattn_ref_mha(&d, &lw, &a, err, sizeof err));
    assert_true(fabs(w[0] - p) > 1e-3);
    /* Scaling Wq by 7 leaves the normed layer unchanged. */
    d.qk_norm = true;
    REF_OK(vkattn_ref_mha(&d, &lw, &a, err, sizeof err));
    for (int i = 0; i < QW * DM; i++)
        l.wq[i] *= 7.0f;
    lw = tiny_weights(&l);
    a.y.data = y2;
    REF_OK(vkattn_ref_mha(&d, &lw, &a, err, sizeof err));
    ref_assert_close(y2, y, 2 * DM, 1e-6, "y with 7 Wq");
}

/* A left-padded batch row with positions 0.. from its first real token gives
 * the unpadded row's outputs. RoPE is relative, so the default positions
 * (shifted by the padding) agree too, to rounding; a gap in the positions
 * shows they are read per token. Positions 0..T-1 given equal the default. */
static void test_positions_left_padding(void **state)
{
    (void)state;
    test_rng r = test_rng_seed(1304);
    tiny l;
    tiny_init(&l, &r);
    enum { T = 5, PAD = 2, N = T - PAD };
    float x[2 * T * DM], y[2 * T * DM], alone[N * DM];
    test_fill_uniform(&r, x, 2 * T * DM, -1.0f, 1.0f);
    memcpy(x + (T + PAD) * DM, x, N * DM * sizeof(float)); /* row 1 = pad, pad, row 0[0..3) */
    int32_t pos[2 * T] = {0, 1, 2, 3, 4, 0, 0, 0, 1, 2};
    const uint8_t pad[2 * T] = {1, 1, 1, 1, 1, 0, 0, 1, 1, 1};
    vkattn_mha_desc d = tiny_desc();
    d.rope.theta = 10000.0f;
    d.qk_norm = true;
    REF_OK(ref_layer(&l, &d, x, 2, T, pos, pad, true, y, err));
    REF_OK(ref_layer(&l, &d, x, 1, N, NULL, NULL, true, alone, err));
    ref_assert_close(y + (T + PAD) * DM, alone, N * DM, 1e-6, "padded row vs alone");
    ref_assert_close(y, alone, N * DM, 1e-6, "row 0 vs alone");

    float ydef[2 * T * DM];
    REF_OK(ref_layer(&l, &d, x, 2, T, NULL, pad, true, ydef, err));
    ref_assert_close(ydef + (T + PAD) * DM, alone, N * DM, 1e-5, "shifted positions vs alone");
    pos[2 * T - 1] = 9; /* the last token 7 after the one before it, not 1 */
    REF_OK(ref_layer(&l, &d, x, 2, T, pos, pad, true, y, err));
    ref_assert_close(y + (T + PAD) * DM, alone, 2 * DM, 1e-6, "before the gap");
    assert_true(fabsf(y[(2 * T - 1) * DM] - alone[(N - 1) * DM]) > 1e-4f);

    const int32_t iota[2 * T] = {0, 1, 2, 3, 4, 0, 1, 2, 3, 4};
    REF_OK(ref_layer(&l, &d, x, 2, T, iota, pad, true, y, err));
    assert_memory_equal(y, ydef, sizeof y);
}

/* ---- errors: named, and y untouched */

#define SENTINEL 12345.0f

static void expect_untouched(const float *y, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (y[i] != SENTINEL)
            fail_msg("y[%zu] is %g: written although the call failed", i, (double)y[i]);
}

/* `d` and positions `pos` ([B, T] int32 unless the caller changes `a`)
 * against the tiny layer; returns the result and the message. */
typedef struct err_run {
    vkattn_mha_desc d;
    vkattn_mha_weights w;
    vkattn_ref_mha_args a;
    float x[2 * 3 * DM], kv[2 * 3 * DM], y[2 * 3 * DM];
    int32_t pos[2 * 3];
} err_run;

static void err_run_init(err_run *e, const tiny *l)
{
    memset(e, 0, sizeof *e);
    e->d = tiny_desc();
    e->d.rope.theta = 10000.0f;
    e->w = tiny_weights(l);
    for (int i = 0; i < 2 * 3 * DM; i++)
        e->x[i] = e->kv[i] = (float)(i % 7) * 0.1f, e->y[i] = SENTINEL;
    for (int i = 0; i < 6; i++)
        e->pos[i] = i % 3;
    int64_t xs[3] = {2, 3, DM}, ps[2] = {2, 3};
    e->a.x = vkattn_host_tensor_make(e->x, VKATTN_DTYPE_F32, 3, xs);
    e->a.y = vkattn_host_tensor_make(e->y, VKATTN_DTYPE_F32, 3, xs);
    e->a.positions = vkattn_host_tensor_make(e->pos, VKATTN_DTYPE_I32, 2, ps);
}

#define EXPECT_FAIL(e, code, needle)                                                  \
    do {                                                                              \
        REF_FAILS(code, needle, vkattn_ref_mha(&(e)->d, &(e)->w, &(e)->a, err, 512)); \
        expect_untouched((e)->y, 2 * 3 * DM);                                         \
    } while (0)

static void test_errors_named_y_untouched(void **state)
{
    (void)state;
    test_rng r = test_rng_seed(1305);
    tiny l;
    tiny_init(&l, &r);
    err_run *e = test_alloc(sizeof *e);
    const vkattn_result INVALID = VKATTN_ERROR_INVALID_ARGUMENT;

    err_run_init(e, &l); /* the baseline succeeds */
    REF_OK(vkattn_ref_mha(&e->d, &e->w, &e->a, err, sizeof err));
    assert_true(e->y[0] != SENTINEL);

    err_run_init(e, &l);
    e->d.rope.dims = 3;
    EXPECT_FAIL(e, INVALID, "desc->rope.dims is 3");
    err_run_init(e, &l);
    e->d.rope.dims = DH + 2;
    EXPECT_FAIL(e, INVALID, "desc->rope.dims is 10");
    err_run_init(e, &l);
    e->d.rope.theta = -2.0f;
    EXPECT_FAIL(e, INVALID, "desc->rope.theta is -2");
    err_run_init(e, &l);
    e->d.rope.scaling = VKATTN_ROPE_SCALING_LINEAR;
    e->d.rope.factor = NAN;
    EXPECT_FAIL(e, INVALID, "desc->rope.factor");
    err_run_init(e, &l);
    e->d.scale = -1.0f;
    EXPECT_FAIL(e, INVALID, "desc->scale is -1");
    err_run_init(e, &l);
    e->d.norm_eps = INFINITY;
    EXPECT_FAIL(e, INVALID, "desc->norm_eps");

    /* RoPE and QK-norm are for self-attention */
    err_run_init(e, &l);
    e->d.kv_dim = 8;
    EXPECT_FAIL(e, INVALID, "desc->rope needs self-attention");
    err_run_init(e, &l);
    e->d.rope.theta = 0.0f;
    e->d.qk_norm = true;
    e->d.kv_dim = 8;
    e->a.positions.data = NULL;
    EXPECT_FAIL(e, INVALID, "desc->qk_norm needs self-attention");
    err_run_init(e, &l);
    e->a.kv = e->a.x;
    e->a.kv.data = e->kv;
    EXPECT_FAIL(e, INVALID, "args->kv is given");

    /* QK-norm weights */
    err_run_init(e, &l);
    e->d.qk_norm = true;
    e->w.q_norm = NULL;
    EXPECT_FAIL(e, INVALID, "weights->q_norm is NULL");
    err_run_init(e, &l);
    e->d.qk_norm = true;
    e->w.k_norm = NULL;
    EXPECT_FAIL(e, INVALID, "weights->k_norm is NULL");

    /* positions */
    err_run_init(e, &l);
    e->d.rope.theta = 0.0f;
    EXPECT_FAIL(e, INVALID, "args->positions is given but desc->rope.theta is 0");
    err_run_init(e, &l);
    e->a.positions.dtype = VKATTN_DTYPE_F32;
    EXPECT_FAIL(e, VKATTN_ERROR_UNSUPPORTED_DTYPE, "args->positions.dtype f32");
    err_run_init(e, &l);
    e->a.positions.rank = 1;
    EXPECT_FAIL(e, INVALID, "args->positions.rank is 1");
    err_run_init(e, &l);
    e->a.positions.shape[0] = 1;
    EXPECT_FAIL(e, VKATTN_ERROR_SHAPE_MISMATCH, "args->positions.shape[0] 1");
    err_run_init(e, &l);
    e->a.positions.shape[1] = 2;
    EXPECT_FAIL(e, VKATTN_ERROR_SHAPE_MISMATCH, "args->positions.shape[1] 2");
    err_run_init(e, &l);
    e->a.positions.strides[0] = -3;
    EXPECT_FAIL(e, INVALID, "args->positions.strides[0]");
    err_run_init(e, &l);
    e->pos[2] = -1;
    EXPECT_FAIL(e, INVALID, "args->positions[0, 2] is -1");
    err_run_init(e, &l);
    e->pos[4] = VKATTN_ROPE_MAX_POSITION + 1;
    EXPECT_FAIL(e, INVALID, "args->positions[1, 1] is 16777216");
    /* the largest position is fine */
    err_run_init(e, &l);
    e->pos[4] = VKATTN_ROPE_MAX_POSITION;
    REF_OK(vkattn_ref_mha(&e->d, &e->w, &e->a, err, sizeof err));
    free(e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_matches_hand),
        cmocka_unit_test(test_scale_default_is_rsqrt_head_dim),
        cmocka_unit_test(test_qk_norm_unit_rms),
        cmocka_unit_test(test_positions_left_padding),
        cmocka_unit_test(test_errors_named_y_untouched),
    };
    return cmocka_run_group_tests_name("reference_mha_rope", tests, NULL, NULL);
}
