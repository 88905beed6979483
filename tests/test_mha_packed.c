/* The MHA layer over packed ragged batches (vkattn_mha_forward_args
 * .sequences): on every kernel policy against vkattn_ref_mha's packed call
 * (self-attention GQA with biases, RoPE + QK-norm with positions restarting
 * per sequence, cross-attention with key offsets of their own, torch's
 * appended rows, f16, a head mask per sequence, an empty sequence); the
 * reference's packed call against its padded call (row for row); the
 * refusals by name with y untouched. */
#include "test_policy.h"
#include "test_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_SEQ 6

typedef struct packed_case {
    uint32_t S, tq[MAX_SEQ], tk[MAX_SEQ]; /* tk all 0: self-attention */
    uint32_t dm, hq, hkv, dh;
    vkattn_dtype dtype;
    bool causal, rope, qk_norm, appended, gate;
} packed_case;

typedef struct packed_layer {
    vkattn_mha_desc desc;
    vkattn_mha_weights w;
    float *arrays[12];
    float *x, *c, *gate;
    int32_t qo[MAX_SEQ + 1], ko[MAX_SEQ + 1];
    bool cross;
    size_t nx, nc;
} packed_layer;

static float *keep(packed_layer *l, float *a)
{
    for (size_t i = 0; i < sizeof l->arrays / sizeof l->arrays[0]; i++)
        if (!l->arrays[i])
            return l->arrays[i] = a;
    fail_msg("too many arrays");
    return NULL;
}

static void layer_make(const packed_case *k, packed_layer *l)
{
    memset(l, 0, sizeof *l);
    test_rng rng = test_rng_seed(31u + k->S * 7u + k->dm);
    const vkattn_dtype dt = k->dtype;
    for (uint32_t i = 0; i < k->S; i++)
        l->cross = l->cross || k->tk[i];
    for (uint32_t i = 0; i < k->S; i++) {
        l->qo[i + 1] = l->qo[i] + (int32_t)k->tq[i];
        l->ko[i + 1] = l->ko[i] + (int32_t)(l->cross ? k->tk[i] : k->tq[i]);
    }
    const size_t qw = (size_t)k->hq * k->dh, kw = (size_t)k->hkv * k->dh;
    const float amp = 1.5f / sqrtf((float)k->dm);
    l->w.wq = keep(l, test_random_array(&rng, qw * k->dm, amp, dt));
    l->w.wk = keep(l, test_random_array(&rng, kw * k->dm, amp, dt));
    l->w.wv = keep(l, test_random_array(&rng, kw * k->dm, amp, dt));
    l->w.wo = keep(l, test_random_array(&rng, k->dm * qw, amp, dt));
    l->w.bq = keep(l, test_random_array(&rng, qw, 0.2f, dt));
    l->w.bk = keep(l, test_random_array(&rng, kw, 0.2f, dt));
    l->w.bv = keep(l, test_random_array(&rng, kw, 0.2f, dt));
    l->w.bo = keep(l, test_random_array(&rng, k->dm, 0.2f, dt));
    if (k->qk_norm) {
        float *qn = keep(l, test_random_array(&rng, k->dh, 0.3f, VKATTN_DTYPE_F32));
        float *kn = keep(l, test_random_array(&rng, k->dh, 0.3f, VKATTN_DTYPE_F32));
        for (uint32_t i = 0; i < k->dh; i++)
            qn[i] += 1.0f, kn[i] += 1.0f;
        l->w.q_norm = qn, l->w.k_norm = kn;
    }
    if (k->appended) {
        l->w.bias_k = keep(l, test_random_array(&rng, kw, 1.5f, VKATTN_DTYPE_F32));
        l->w.bias_v = keep(l, test_random_array(&rng, kw, 1.0f, VKATTN_DTYPE_F32));
    }
    l->nx = (size_t)l->qo[k->S] * k->dm;
    l->nc = (size_t)l->ko[k->S] * k->dm;
    l->x = keep(l, test_random_array(&rng, l->nx, 1.0f, dt));
    l->c = l->cross ? keep(l, test_random_array(&rng, l->nc, 1.0f, dt)) : NULL;
    if (k->gate) {
        l->gate = keep(l, test_alloc((size_t)k->S * k->hq * 4));
        for (uint32_t i = 0; i < k->S * k->hq; i++)
            l->gate[i] = i % 3 == 1 ? 0.0f : 0.5f + 0.125f * (float)(i % 5);
    }
    l->desc = (vkattn_mha_desc){.embed_dim = k->dm,
                                .num_heads = k->hq,
                                .num_kv_heads = k->hkv,
                                .head_dim = k->dh,
                                .bias = true,
                                .dtype = dt,
                                .qk_norm = k->qk_norm,
                                .add_bias_kv = k->appended,
                                .add_zero_attn = k->appended};
    if (k->rope)
        l->desc.rope.theta = 10000.0f;
}

static void layer_free(packed_layer *l)
{
    for (size_t i = 0; i < sizeof l->arrays / sizeof l->arrays[0]; i++)
        free(l->arrays[i]);
}

static void describe(const packed_case *k, const char *policy, char *buf, size_t size)
{
    int n = snprintf(buf, size, "%s S%u Dm%u Hq%u Hkv%u Dh%u %s tq/tk", policy, k->S, k->dm, k->hq,
                     k->hkv, k->dh, vkattn_dtype_name(k->dtype));
    for (uint32_t i = 0; i < k->S && n > 0 && (size_t)n < size; i++)
        n += snprintf(buf + n, size - (size_t)n, " %u/%u", k->tq[i], k->tk[i]);
    if (n > 0 && (size_t)n < size)
        snprintf(buf + n, size - (size_t)n, " causal%d rope%d qk_norm%d appended%d gate%d",
                 k->causal, k->rope, k->qk_norm, k->appended, k->gate);
}

/* The reference's packed call: y [1, sum Tq, Dm]. */
static float *reference_of(const packed_case *k, const packed_layer *l)
{
    int64_t xs[3] = {1, l->qo[k->S], k->dm}, cs[3] = {1, l->ko[k->S], k->dm};
    int64_t gs[2] = {k->S, k->hq};
    float *y = test_alloc(l->nx * 4);
    vkattn_ref_mha_args ra = {.causal = k->causal,
                              .sequences = k->S,
                              .q_offsets = l->qo,
                              .k_offsets = l->cross ? l->ko : NULL};
    ra.x = vkattn_host_tensor_make(l->x, VKATTN_DTYPE_F32, 3, xs);
    ra.y = vkattn_host_tensor_make(y, VKATTN_DTYPE_F32, 3, xs);
    if (l->c)
        ra.kv = vkattn_host_tensor_make(l->c, VKATTN_DTYPE_F32, 3, cs);
    if (l->gate)
        ra.head_mask = vkattn_host_tensor_make(l->gate, VKATTN_DTYPE_F32, 2, gs);
    char err[512];
    if (vkattn_ref_mha(&l->desc, &l->w, &ra, err, sizeof err) != VKATTN_SUCCESS)
        fail_msg("reference: %s", err);
    return y;
}

static void run_case(test_gpu *g, uint32_t policy, const void *arg)
{
    const packed_case *k = arg;
    vkattn_context *ctx = g->ctx;
    char what[320];
    describe(k, test_policies[policy].name, what, sizeof what);
    packed_layer l;
    layer_make(k, &l);
    float *want = reference_of(k, &l), *got = test_alloc(l.nx * 4);
    vkattn_mha *m = test_mha_create(ctx, &l.desc, &l.w);
    int64_t xs[3] = {1, l.qo[k->S], k->dm}, cs[3] = {1, l.ko[k->S], k->dm};
    int64_t gs[2] = {k->S, k->hq};
    vkattn_buffer *bx = test_buffer_of(ctx, k->dtype, l.x, l.nx);
    vkattn_buffer *by = test_buffer_of(ctx, k->dtype, got, l.nx);
    vkattn_buffer *bc = l.c ? test_buffer_of(ctx, k->dtype, l.c, l.nc) : NULL;
    vkattn_buffer *bg = l.gate ? test_buffer_of(ctx, VKATTN_DTYPE_F32, l.gate, k->S * k->hq) : NULL;
    vkattn_mha_forward_args fa = {.x = vkattn_tensor_make(bx, 0, k->dtype, 3, xs),
                                  .y = vkattn_tensor_make(by, 0, k->dtype, 3, xs),
                                  .causal = k->causal,
                                  .sequences = k->S,
                                  .q_offsets = l.qo,
                                  .k_offsets = l.cross ? l.ko : NULL};
    if (bc)
        fa.kv = vkattn_tensor_make(bc, 0, k->dtype, 3, cs);
    if (bg)
        fa.head_mask = vkattn_tensor_make(bg, 0, VKATTN_DTYPE_F32, 2, gs);
    TEST_OK(ctx, vkattn_mha_forward(m, &fa));
    test_download_as(ctx, by, k->dtype, got, l.nx);
    for (size_t i = 0; i < l.nx; i++)
        if (isnan(got[i]))
            fail_msg("%s: y[%zu] is NaN", what, i);
    test_assert_close(got, want, l.nx, k->dtype == VKATTN_DTYPE_F16 ? TEST_TOL_F16 : TEST_TOL_F32,
                      what);
    vkattn_mha_destroy(m);
    TEST_DESTROY_BUFFERS(bx, by, bc, bg);
    free(want), free(got);
    layer_free(&l);
}

static void run_all(const packed_case *cases, size_t n)
{
    for (size_t i = 0; i < n; i++)
        test_for_each_policy(0, run_case, &cases[i]);
}

#define F32 VKATTN_DTYPE_F32
#define F16 VKATTN_DTYPE_F16

static void test_packed_layers(void **state)
{
    (void)state;
    static const packed_case cases[] = {
        /* GQA self-attention with biases, an empty sequence */
        {.S = 4,
         .tq = {7, 0, 19, 3},
         .dm = 64,
         .hq = 4,
         .hkv = 2,
         .dh = 16,
         .dtype = F32,
         .causal = true},
        /* RoPE + QK-norm: positions restart with every sequence (RoPE's
         * scores depend on position differences only, so a restart shows
         * in rounding alone; the write of the positions into the scratch
         * runs under synchronization validation here) */
        {.S = 3,
         .tq = {11, 4, 16},
         .dm = 64,
         .hq = 4,
         .hkv = 1,
         .dh = 16,
         .dtype = F32,
         .causal = true,
         .rope = true,
         .qk_norm = true},
        /* cross-attention, keys of their own lengths; a head mask per sequence */
        {.S = 3,
         .tq = {5, 9, 2},
         .tk = {12, 3, 20},
         .dm = 32,
         .hq = 2,
         .hkv = 2,
         .dh = 16,
         .dtype = F32,
         .gate = true},
        /* torch's appended rows (bias row, zero row) per sequence */
        {.S = 3,
         .tq = {6, 13, 1},
         .dm = 32,
         .hq = 4,
         .hkv = 4,
         .dh = 8,
         .dtype = F32,
         .causal = true,
         .appended = true},
        {.S = 2,
         .tq = {21, 8},
         .dm = 64,
         .hq = 4,
         .hkv = 2,
         .dh = 16,
         .dtype = F16,
         .causal = true,
         .rope = true},
    };
    run_all(cases, sizeof cases / sizeof cases[0]);
}

/* The reference's packed call equals its padded call (B = S rows padded
 * to the longest, the padding keys hidden, positions 0.. per row) on every
 * real token, RoPE and QK-norm included. */
static void test_reference_packed_equals_padded(void **state)
{
    (void)state;
    const packed_case k = {.S = 3,
                           .tq = {5, 12, 1},
                           .dm = 32,
                           .hq = 4,
                           .hkv = 2,
                           .dh = 8,
                           .dtype = F32,
                           .causal = true,
                           .rope = true,
                           .qk_norm = true};
    packed_layer l;
    layer_make(&k, &l);
    float *packed = reference_of(&k, &l);
    const uint32_t T = 12, S = k.S, dm = k.dm;
    float *xp = test_alloc((size_t)S * T * dm * 4), *yp = test_alloc((size_t)S * T * dm * 4);
    uint8_t *pad = test_alloc((size_t)S * T);
    for (uint32_t s = 0; s < S; s++)
        for (uint32_t t = 0; t < k.tq[s]; t++) {
            pad[s * T + t] = 1;
            memcpy(xp + ((size_t)s * T + t) * dm, l.x + ((size_t)l.qo[s] + t) * dm, dm * 4);
        }
    int64_t xs[3] = {S, T, dm}, ps[2] = {S, T};
    vkattn_ref_mha_args ra = {.causal = true};
    ra.x = vkattn_host_tensor_make(xp, F32, 3, xs);
    ra.y = vkattn_host_tensor_make(yp, F32, 3, xs);
    ra.key_padding = vkattn_host_tensor_make(pad, VKATTN_DTYPE_U8, 2, ps);
    char err[512];
    if (vkattn_ref_mha(&l.desc, &l.w, &ra, err, sizeof err) != VKATTN_SUCCESS)
        fail_msg("padded: %s", err);
    for (uint32_t s = 0; s < S; s++)
        for (uint32_t t = 0; t < k.tq[s]; t++)
            for (uint32_t j = 0; j < dm; j++) {
                float a = packed[((size_t)l.qo[s] + t) * dm + j],
                      b = yp[((size_t)s * T + t) * dm + j];
                if (fabsf(a - b) > 1e-5f)
                    fail_msg("sequence %u token %u [%u]: packed %g, padded %g", s, t, j, (double)a,
                             (double)b);
            }
    free(packed), free(xp), free(yp), free(pad);
    layer_free(&l);
}

static void test_packed_refusals(void **state)
{
    test_gpu *g = *state;
    vkattn_context *ctx = g->ctx;
    const packed_case k = {.S = 3,
                           .tq = {4, 0, 6},
                           .dm = 32,
                           .hq = 2,
                           .hkv = 2,
                           .dh = 16,
                           .dtype = F32,
                           .causal = true};
    packed_layer l;
    layer_make(&k, &l);
    vkattn_mha *m = test_mha_create(ctx, &l.desc, &l.w);
    const size_t n = l.nx;
    float *nan_y = test_alloc(n * 4), *after = test_alloc(n * 4);
    for (size_t i = 0; i < n; i++)
        nan_y[i] = NAN;
    int64_t xs[3] = {1, 10, 32}, x2[3] = {2, 5, 32}, ms[2] = {10, 10}, gs[2] = {2, 2};
    float mask[100] = {0}, gate[4] = {1, 1, 1, 1};
    vkattn_buffer *bx = test_buffer_of(ctx, F32, l.x, n), *by = test_buffer_of(ctx, F32, nan_y, n);
    vkattn_buffer *bm = test_buffer_of(ctx, F32, mask, 100),
                  *bg = test_buffer_of(ctx, F32, gate, 4);
    vkattn_mha_forward_args good = {.x = vkattn_tensor_make(bx, 0, F32, 3, xs),
                                    .y = vkattn_tensor_make(by, 0, F32, 3, xs),
                                    .causal = true,
                                    .sequences = 3,
                                    .q_offsets = l.qo},
                            a;
    int32_t short_end[4] = {0, 4, 4, 9}, other_keys[4] = {0, 5, 5, 10};
    TEST_FAILS_CHANGED(
        ctx, a, good,
        (a.x = vkattn_tensor_make(bx, 0, F32, 3, x2), a.y = vkattn_tensor_make(by, 0, F32, 3, x2)),
        VKATTN_ERROR_SHAPE_MISMATCH, "args->x.shape[0] is 2: packed sequences",
        vkattn_mha_forward(m, &a));
    TEST_FAILS_CHANGED(ctx, a, good, a.q_offsets = short_end, VKATTN_ERROR_INVALID_ARGUMENT,
                       "args->q_offsets[3] (the end of the last sequence) is 9 but "
                       "args->x.shape[1] (sum Tq) is 10",
                       vkattn_mha_forward(m, &a));
    TEST_FAILS_CHANGED(ctx, a, good, a.k_offsets = other_keys, VKATTN_ERROR_INVALID_ARGUMENT,
                       "args->k_offsets[1] is 5 but args->q_offsets[1] is 4",
                       vkattn_mha_forward(m, &a));
    TEST_FAILS_CHANGED(ctx, a, good, a.mask = vkattn_tensor_make(bm, 0, F32, 2, ms),
                       VKATTN_ERROR_UNSUPPORTED, "args->mask is given with args->sequences > 0",
                       vkattn_mha_forward(m, &a));
    TEST_FAILS_CHANGED(ctx, a, good, a.head_mask = vkattn_tensor_make(bg, 0, F32, 2, gs),
                       VKATTN_ERROR_SHAPE_MISMATCH, "args->head_mask", vkattn_mha_forward(m, &a));
    TEST_OK(ctx, vkattn_buffer_download(by, 0, after, n * 4));
    for (size_t i = 0; i < n; i++)
        if (!isnan(after[i]))
            fail_msg("a refused forward wrote y[%zu] (%g)", i, (double)after[i]);
    /* the reference refuses the same */
    vkattn_ref_mha_args ra = {.causal = true, .sequences = 3, .q_offsets = short_end};
    ra.x = vkattn_host_tensor_make(l.x, F32, 3, xs);
    ra.y = vkattn_host_tensor_make(after, F32, 3, xs);
    char err[512] = "";
    assert_int_equal(vkattn_ref_mha(&l.desc, &l.w, &ra, err, sizeof err),
                     VKATTN_ERROR_INVALID_ARGUMENT);
    if (!strstr(err, "args->x.shape[1] (sum Tq) is 10"))
        fail_msg("reference: %s", err);
    vkattn_mha_destroy(m);
    TEST_DESTROY_BUFFERS(bx, by, bm, bg);
    free(nan_y), free(after);
    layer_free(&l);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_packed_layers),
        cmocka_unit_test(test_reference_packed_equals_padded),
        cmocka_unit_test_setup_teardown(test_packed_refusals, test_gpu_setup, test_gpu_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
