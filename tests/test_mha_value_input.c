/* The MHA layer with keys and values from inputs of their own (torch's
 * forward(query, key, value) with kdim and vdim, issue 30 part 1): on every
 * kernel policy against vkattn_ref_mha; the reference itself against the
 * same layer written with one input (the two side by side, Wk and Wv padded
 * with zero columns); weights from the caller's tensors, read back, pruned;
 * every refusal by name. */
#include "test_policy.h"
#include "test_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct value_case {
    uint32_t b, tq, tk, dm, dkv, dvin, hq, hkv, dh, dv;
    bool bias, self_keys, padding, mask, weights;
    vkattn_dtype dtype;
} value_case;

/* One layer's host data: weights and inputs (f32 values of `dtype`). */
typedef struct value_layer {
    vkattn_mha_desc desc;
    float *wq, *wk, *wv, *wo, *bq, *bk, *bv, *bo;
    float *x, *key, *value, *mask;
    uint8_t *pad;
    size_t nx, nkey, nvalue;
    uint32_t tk, dkv;
} value_layer;

static void layer_make(const value_case *c, uint64_t seed, value_layer *l)
{
    memset(l, 0, sizeof *l);
    test_rng rng = test_rng_seed(seed);
    const vkattn_dtype dt = c->dtype;
    l->tk = c->self_keys ? c->tq : c->tk;
    l->dkv = c->self_keys ? c->dm : c->dkv;
    size_t qw = (size_t)c->hq * c->dh, kw = (size_t)c->hkv * c->dh, vw = (size_t)c->hkv * c->dv,
           ow = (size_t)c->hq * c->dv;
    float amp = 1.5f / sqrtf((float)c->dm);
    l->wq = test_random_array(&rng, qw * c->dm, amp, dt);
    l->wk = test_random_array(&rng, kw * l->dkv, amp, dt);
    l->wv = test_random_array(&rng, vw * c->dvin, amp, dt);
    l->wo = test_random_array(&rng, c->dm * ow, amp, dt);
    l->bq = test_random_array(&rng, qw, 0.2f, dt);
    l->bk = test_random_array(&rng, kw, 0.2f, dt);
    l->bv = test_random_array(&rng, vw, 0.2f, dt);
    l->bo = test_random_array(&rng, c->dm, 0.2f, dt);
    l->nx = (size_t)c->b * c->tq * c->dm;
    l->nkey = (size_t)c->b * l->tk * l->dkv;
    l->nvalue = (size_t)c->b * l->tk * c->dvin;
    l->x = test_random_array(&rng, l->nx, 1.0f, dt);
    l->key = c->self_keys ? NULL : test_random_array(&rng, l->nkey, 1.0f, dt);
    l->value = test_random_array(&rng, l->nvalue, 1.0f, dt);
    if (c->padding) {
        l->pad = malloc((size_t)c->b * l->tk);
        for (size_t i = 0; i < (size_t)c->b * l->tk; i++)
            l->pad[i] = i % 5 != 2;
    }
    if (c->mask) {
        l->mask = test_random_array(&rng, (size_t)c->tq * l->tk, 1.0f, VKATTN_DTYPE_F32);
        for (size_t i = 0; i < (size_t)c->tq * l->tk; i += 7)
            l->mask[i] = -INFINITY;
    }
    l->desc = (vkattn_mha_desc){.embed_dim = c->dm,
                                .num_heads = c->hq,
                                .num_kv_heads = c->hkv,
                                .head_dim = c->dh,
                                .v_head_dim = c->dv,
                                .kv_dim = l->dkv,
                                .value_dim = c->dvin,
                                .bias = c->bias,
                                .dtype = dt};
}

static void layer_free(value_layer *l)
{
    float *all[] = {l->wq, l->wk, l->wv, l->wo,  l->bq,    l->bk,
                    l->bv, l->bo, l->x,  l->key, l->value, l->mask};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        free(all[i]);
    free(l->pad);
}

static vkattn_mha_weights layer_weights(const value_layer *l)
{
    vkattn_mha_weights w = {.wq = l->wq, .wk = l->wk, .wv = l->wv, .wo = l->wo};
    if (l->desc.bias)
        w.bq = l->bq, w.bk = l->bk, w.bv = l->bv, w.bo = l->bo;
    return w;
}

/* The reference's y (and weights) for layer `l` (malloc'd). */
static float *reference_of(const value_case *c, const value_layer *l, float **weights)
{
    int64_t xs[3] = {c->b, c->tq, c->dm}, ks[3] = {c->b, l->tk, l->dkv},
            vs[3] = {c->b, l->tk, c->dvin}, ps[2] = {c->b, l->tk}, ms[2] = {c->tq, l->tk},
            ws[3] = {c->b, c->tq, l->tk};
    float *y = malloc(l->nx * 4);
    vkattn_ref_mha_args ra = {.causal = false};
    ra.x = vkattn_host_tensor_make(l->x, VKATTN_DTYPE_F32, 3, xs);
    if (l->key)
        ra.kv = vkattn_host_tensor_make(l->key, VKATTN_DTYPE_F32, 3, ks);
    ra.value = vkattn_host_tensor_make(l->value, VKATTN_DTYPE_F32, 3, vs);
    if (l->pad)
        ra.key_padding = vkattn_host_tensor_make(l->pad, VKATTN_DTYPE_U8, 2, ps);
    if (l->mask)
        ra.mask = vkattn_host_tensor_make(l->mask, VKATTN_DTYPE_F32, 2, ms);
    ra.y = vkattn_host_tensor_make(y, VKATTN_DTYPE_F32, 3, xs);
    if (weights) {
        *weights = malloc((size_t)c->b * c->tq * l->tk * 4);
        ra.weights = vkattn_host_tensor_make(*weights, VKATTN_DTYPE_F32, 3, ws);
    }
    vkattn_mha_weights w = layer_weights(l);
    char err[512];
    if (vkattn_ref_mha(&l->desc, &w, &ra, err, sizeof err) != VKATTN_SUCCESS)
        fail_msg("reference: %s", err);
    return y;
}

/* Runs layer `l` (already holding its weights) on the device and compares
 * y (and the weights) with the reference's. */
static void forward_and_compare(vkattn_context *ctx, vkattn_mha *layer, const value_case *c,
                                const value_layer *l, const char *what)
{
    const vkattn_dtype dt = c->dtype;
    float *ref_w = NULL;
    float *ref_y = reference_of(c, l, c->weights ? &ref_w : NULL);
    int64_t xs[3] = {c->b, c->tq, c->dm}, ks[3] = {c->b, l->tk, l->dkv},
            vs[3] = {c->b, l->tk, c->dvin}, ps[2] = {c->b, l->tk}, ms[2] = {c->tq, l->tk},
            ws[3] = {c->b, c->tq, l->tk};
    size_t nw = (size_t)c->b * c->tq * l->tk;
    vkattn_buffer *bx = test_buffer_of(ctx, dt, l->x, l->nx);
    vkattn_buffer *bk = l->key ? test_buffer_of(ctx, dt, l->key, l->nkey) : NULL;
    vkattn_buffer *bv = test_buffer_of(ctx, dt, l->value, l->nvalue);
    vkattn_buffer *bpad = l->pad ? test_buffer_with(ctx, l->pad, (size_t)c->b * l->tk) : NULL;
    vkattn_buffer *bmask =
        l->mask ? test_buffer_with(ctx, l->mask, (size_t)c->tq * l->tk * 4) : NULL;
    vkattn_buffer *by = test_buffer_with(ctx, NULL, l->nx * vkattn_dtype_size(dt));
    vkattn_buffer *bw = ref_w ? test_buffer_with(ctx, NULL, nw * 4) : NULL;
    vkattn_mha_forward_args fa = {.x = vkattn_tensor_make(bx, 0, dt, 3, xs),
                                  .value = vkattn_tensor_make(bv, 0, dt, 3, vs),
                                  .y = vkattn_tensor_make(by, 0, dt, 3, xs)};
    if (bk)
        fa.kv = vkattn_tensor_make(bk, 0, dt, 3, ks);
    if (bpad)
        fa.key_padding = vkattn_tensor_make(bpad, 0, VKATTN_DTYPE_U8, 2, ps);
    if (bmask)
        fa.mask = vkattn_tensor_make(bmask, 0, VKATTN_DTYPE_F32, 2, ms);
    if (bw)
        fa.weights = vkattn_tensor_make(bw, 0, VKATTN_DTYPE_F32, 3, ws);
    TEST_OK(ctx, vkattn_mha_forward(layer, &fa));
    float *gy = malloc(l->nx * 4);
    test_download_as(ctx, by, dt, gy, l->nx);
    double tol = dt == VKATTN_DTYPE_F16 ? TEST_TOL_F16 : TEST_TOL_F32;
    test_assert_close(gy, ref_y, l->nx, tol, what);
    if (bw) {
        float *gw = malloc(nw * 4);
        test_download_as(ctx, bw, VKATTN_DTYPE_F32, gw, nw);
        test_assert_close(gw, ref_w, nw, tol, what);
        free(gw);
    }
    TEST_DESTROY_BUFFERS(bx, bk, bv, bpad, bmask, by, bw);
    free(gy);
    free(ref_y);
    free(ref_w);
}

static const value_case cases[] = {
    /* b tq tk dm dkv dvin hq hkv dh dv bias self_keys padding mask weights dtype */
    /* kdim 24, vdim 40 (torch's kdim/vdim), GQA, Dk != Dv, masks, weights */
    {2, 5, 9, 32, 24, 40, 4, 2, 8, 16, true, false, true, true, true, VKATTN_DTYPE_F32},
    /* MQA, no bias, head dims the fast kernels take, f16 */
    {1, 7, 6, 64, 64, 96, 4, 1, 16, 16, false, false, false, false, false, VKATTN_DTYPE_F16},
    /* a value input of the keys' width, given apart (two GEMMs over Wk, Wv
     * back to back), and element-wise head dims */
    {1, 4, 11, 32, 48, 48, 2, 2, 12, 20, true, false, true, false, false, VKATTN_DTYPE_F32},
    /* keys from x (no kv), values from their own input of another width */
    {2, 6, 0, 32, 0, 16, 2, 1, 16, 8, true, true, false, true, false, VKATTN_DTYPE_F32},
};

static void value_case_run(test_gpu *g, uint32_t policy, const value_case *c)
{
    value_layer l;
    layer_make(c, 300 + policy + c->dvin, &l);
    vkattn_mha_weights w = layer_weights(&l);
    vkattn_mha *layer = test_mha_create(g->ctx, &l.desc, &w);
    char what[160];
    snprintf(what, sizeof what, "mha key/value apart Dm%u Dkv%u Dvin%u Hq%u Hkv%u Dh%u Dv%u %s",
             c->dm, l.dkv, c->dvin, c->hq, c->hkv, c->dh, c->dv, vkattn_dtype_name(c->dtype));
    forward_and_compare(g->ctx, layer, c, &l, what);
    vkattn_mha_destroy(layer);
    layer_free(&l);
}

static void test_key_value_apart_match_reference(void **state)
{
    test_policy_suite *s = *state;
    for (uint32_t policy = 0; policy < TEST_POLICY_COUNT; policy++)
        for (size_t i = 0; s->gpu[policy] && i < sizeof cases / sizeof cases[0]; i++)
            value_case_run(s->gpu[policy], policy, &cases[i]);
}

/* The reference with key and value apart equals the same layer with one
 * input [key | value] (kv_dim = value_dim = Dkv + Dvin) and Wk, Wv padded
 * with zero columns: the same sums, bit for bit. */
static void test_reference_equals_one_input(void **state)
{
    (void)state;
    const value_case *c = &cases[0];
    value_layer l;
    layer_make(c, 41, &l);
    const uint32_t dc = l.dkv + c->dvin, tk = l.tk;
    size_t kw = (size_t)c->hkv * c->dh, vw = (size_t)c->hkv * c->dv;
    float *both = calloc((size_t)c->b * tk * dc, 4), *wk = calloc(kw * dc, 4),
          *wv = calloc(vw * dc, 4);
    for (size_t r = 0; r < (size_t)c->b * tk; r++) {
        memcpy(both + r * dc, l.key + r * l.dkv, l.dkv * 4);
        memcpy(both + r * dc + l.dkv, l.value + r * c->dvin, c->dvin * 4);
    }
    for (size_t r = 0; r < kw; r++)
        memcpy(wk + r * dc, l.wk + r * l.dkv, l.dkv * 4);
    for (size_t r = 0; r < vw; r++)
        memcpy(wv + r * dc + l.dkv, l.wv + r * c->dvin, c->dvin * 4);
    float *want = reference_of(c, &l, NULL);
    vkattn_mha_desc d = l.desc;
    d.kv_dim = dc;
    d.value_dim = 0;
    vkattn_mha_weights w = layer_weights(&l);
    w.wk = wk;
    w.wv = wv;
    int64_t xs[3] = {c->b, c->tq, c->dm}, cs[3] = {c->b, tk, dc}, ps[2] = {c->b, tk},
            ms[2] = {c->tq, tk};
    float *got = malloc(l.nx * 4);
    vkattn_ref_mha_args ra = {
        .x = vkattn_host_tensor_make(l.x, VKATTN_DTYPE_F32, 3, xs),
        .kv = vkattn_host_tensor_make(both, VKATTN_DTYPE_F32, 3, cs),
        .key_padding = vkattn_host_tensor_make(l.pad, VKATTN_DTYPE_U8, 2, ps),
        .mask = vkattn_host_tensor_make(l.mask, VKATTN_DTYPE_F32, 2, ms),
        .y = vkattn_host_tensor_make(got, VKATTN_DTYPE_F32, 3, xs),
    };
    char err[512];
    if (vkattn_ref_mha(&d, &w, &ra, err, sizeof err) != VKATTN_SUCCESS)
        fail_msg("reference: %s", err);
    assert_memory_equal(got, want, l.nx * 4);
    /* and the values matter: the layer with the value input's columns of Wv
     * zeroed differs */
    memset(wv, 0, vw * dc * 4);
    if (vkattn_ref_mha(&d, &w, &ra, err, sizeof err) != VKATTN_SUCCESS)
        fail_msg("reference: %s", err);
    assert_true(memcmp(got, want, l.nx * 4) != 0);
    free(both), free(wk), free(wv), free(want), free(got);
    layer_free(&l);
}

/* Weights from the caller's tensors (wq, wk, wv apart), read back as set,
 * then two of four heads pruned: each time the reference's result. */
static void test_weight_tensors_read_back_and_prune(void **state)
{
    test_gpu *g = test_policy_suite_first(*state);
    vkattn_context *ctx = g->ctx;
    value_case c = cases[0];
    c.weights = false;
    value_layer l;
    layer_make(&c, 77, &l);
    size_t qw = (size_t)c.hq * c.dh, kw = (size_t)c.hkv * c.dh, vw = (size_t)c.hkv * c.dv,
           ow = (size_t)c.hq * c.dv;
    vkattn_buffer *wq = test_buffer_of(ctx, c.dtype, l.wq, qw * c.dm),
                  *wk = test_buffer_of(ctx, c.dtype, l.wk, kw * l.dkv),
                  *wv = test_buffer_of(ctx, c.dtype, l.wv, vw * c.dvin),
                  *wo = test_buffer_of(ctx, c.dtype, l.wo, c.dm * ow);
    float *b_kv = malloc((kw + vw) * 4);
    memcpy(b_kv, l.bk, kw * 4);
    memcpy(b_kv + kw, l.bv, vw * 4);
    vkattn_buffer *bq = test_buffer_of(ctx, c.dtype, l.bq, qw),
                  *bkv = test_buffer_of(ctx, c.dtype, b_kv, kw + vw),
                  *bo = test_buffer_of(ctx, c.dtype, l.bo, c.dm);
    vkattn_mha *layer = NULL;
    TEST_OK(ctx, vkattn_mha_create(ctx, &l.desc, &layer));
    const int64_t sq[2] = {(int64_t)qw, c.dm}, sk[2] = {(int64_t)kw, l.dkv},
                  sv[2] = {(int64_t)vw, c.dvin}, so[2] = {c.dm, (int64_t)ow}, nq = (int64_t)qw,
                  nkv = (int64_t)(kw + vw), no = c.dm;
    vkattn_mha_weight_tensors t = {
        .wq = vkattn_tensor_make(wq, 0, c.dtype, 2, sq),
        .wk = vkattn_tensor_make(wk, 0, c.dtype, 2, sk),
        .wv = vkattn_tensor_make(wv, 0, c.dtype, 2, sv),
        .wo = vkattn_tensor_make(wo, 0, c.dtype, 2, so),
        .bq = vkattn_tensor_make(bq, 0, c.dtype, 1, &nq),
        .bkv = vkattn_tensor_make(bkv, 0, c.dtype, 1, &nkv),
        .bo = vkattn_tensor_make(bo, 0, c.dtype, 1, &no),
    };
    vkattn_mha_weight_tensors bad = t;
    bad.wkv = t.wk;
    TEST_FAILS(ctx, VKATTN_ERROR_INVALID_ARGUMENT,
               "t->wkv is set but desc.kv_dim 24 differs from value_dim 40: give t->wk and t->wv",
               vkattn_mha_set_weight_tensors(layer, &bad));
    bad = t;
    bad.wv.buffer = NULL;
    TEST_FAILS(ctx, VKATTN_ERROR_INVALID_ARGUMENT, "t->wv.buffer is NULL",
               vkattn_mha_set_weight_tensors(layer, &bad));
    bad = t;
    bad.wv = vkattn_tensor_make(wv, 0, c.dtype, 2, (int64_t[2]){(int64_t)vw, l.dkv});
    TEST_FAILS(ctx, VKATTN_ERROR_SHAPE_MISMATCH, "t->wv is rank 2 [32, 24]: the layer needs",
               vkattn_mha_set_weight_tensors(layer, &bad));
    TEST_OK(ctx, vkattn_mha_set_weight_tensors(layer, &t));
    forward_and_compare(ctx, layer, &c, &l, "weight tensors, wk and wv apart");

    float *got_wv = malloc(vw * c.dvin * 4), *got_wk = malloc(kw * l.dkv * 4);
    vkattn_mha_weight_copy copy = {.wk = got_wk, .wv = got_wv};
    TEST_OK(ctx, vkattn_mha_get_weights(layer, &copy));
    assert_memory_equal(got_wk, l.wk, kw * l.dkv * 4);
    assert_memory_equal(got_wv, l.wv, vw * c.dvin * 4);

    /* keep query heads 1 and 3: KV head 0 goes with head 1, 1 with 3 */
    const uint32_t keep[2] = {1, 3};
    TEST_OK(ctx, vkattn_mha_prune_heads(layer, keep, 2));
    value_layer p = l;
    p.desc.num_heads = 2;
    /* heads 1 and 3 are one of each group: both KV heads stay */
    float *pq = malloc(2 * c.dh * c.dm * 4), *pbq = malloc(2 * c.dh * 4),
          *po = malloc((size_t)c.dm * 2 * c.dv * 4);
    for (uint32_t i = 0; i < 2; i++) {
        memcpy(pq + (size_t)i * c.dh * c.dm, l.wq + (size_t)keep[i] * c.dh * c.dm,
               (size_t)c.dh * c.dm * 4);
        memcpy(pbq + (size_t)i * c.dh, l.bq + (size_t)keep[i] * c.dh, c.dh * 4);
        for (uint32_t r = 0; r < c.dm; r++)
            memcpy(po + ((size_t)r * 2 + i) * c.dv, l.wo + ((size_t)r * c.hq + keep[i]) * c.dv,
                   c.dv * 4);
    }
    p.wq = pq, p.bq = pbq, p.wo = po;
    value_case pc = c;
    pc.hq = 2;
    forward_and_compare(ctx, layer, &pc, &p, "pruned to heads 1 and 3, wk and wv apart");
    vkattn_mha_destroy(layer);
    TEST_DESTROY_BUFFERS(wq, wk, wv, wo, bq, bkv, bo);
    free(pq), free(pbq), free(po), free(b_kv), free(got_wk), free(got_wv);
    layer_free(&l);
}

/* The shapes a tuner reports ("m=.. n=.. k=.." of each GEMM): `seen`. */
static void note_shape(const vkattn_tune_progress *p, void *user)
{
    char *seen = user;
    if (p->done && strcmp(p->op, "linear") == 0 && strlen(seen) + strlen(p->shape) + 2 < 1024) {
        strcat(seen, p->shape);
        strcat(seen, ";");
    }
}

/* The layer's tuner measures the V projection at the value input's width
 * (k=40) apart from the K projection's (k=24); the tuned layer still gives
 * the reference's result. */
static void test_tune_projects_values_apart(void **state)
{
    test_gpu *g = test_policy_suite_first(*state);
    value_case c = cases[0];
    c.weights = false;
    value_layer l;
    layer_make(&c, 9, &l);
    vkattn_mha_weights w = layer_weights(&l);
    vkattn_mha *layer = test_mha_create(g->ctx, &l.desc, &w);
    char seen[1024] = "";
    vkattn_mha_tune_args ta = {
        .batch = c.b, .q_len = c.tq, .kv_len = c.tk, .progress = note_shape, .progress_user = seen};
    TEST_OK(g->ctx, vkattn_mha_tune(layer, &ta));
    if (!strstr(seen, "n=16 k=24") || !strstr(seen, "n=32 k=40"))
        fail_msg("the tuner's GEMMs were %s: expected K's n=16 k=24 and V's n=32 k=40", seen);
    forward_and_compare(g->ctx, layer, &c, &l, "tuned, wk and wv apart");
    vkattn_mha_destroy(layer);
    layer_free(&l);
}

/* Every refusal that the value input brings, by name. */
static void test_value_input_errors(void **state)
{
    test_gpu *g = test_policy_suite_first(*state);
    vkattn_context *ctx = g->ctx;
    value_case c = cases[0];
    value_layer l;
    layer_make(&c, 5, &l);
    vkattn_mha_weights w = layer_weights(&l);
    vkattn_mha *layer = test_mha_create(ctx, &l.desc, &w);
    const vkattn_dtype dt = c.dtype;
    int64_t xs[3] = {c.b, c.tq, c.dm}, ks[3] = {c.b, l.tk, l.dkv}, vs[3] = {c.b, l.tk, c.dvin};
    vkattn_buffer *bx = test_buffer_of(ctx, dt, l.x, l.nx),
                  *bk = test_buffer_of(ctx, dt, l.key, l.nkey),
                  *bv = test_buffer_of(ctx, dt, l.value, l.nvalue),
                  *by = test_buffer_with(ctx, NULL, l.nx * 4);
    vkattn_mha_forward_args good = {.x = vkattn_tensor_make(bx, 0, dt, 3, xs),
                                    .kv = vkattn_tensor_make(bk, 0, dt, 3, ks),
                                    .value = vkattn_tensor_make(bv, 0, dt, 3, vs),
                                    .y = vkattn_tensor_make(by, 0, dt, 3, xs)},
                            a;
    TEST_OK(ctx, vkattn_mha_forward(layer, &good));
    TEST_FAILS_CHANGED(ctx, a, good, a.value.buffer = NULL, VKATTN_ERROR_INVALID_ARGUMENT,
                       "args->value is NULL but the layer's value_dim 40 differs from its kv_dim "
                       "24: pass the values' input [B, Tk, 40] as args->value",
                       vkattn_mha_forward(layer, &a));
    TEST_FAILS_CHANGED(ctx, a, good, a.value.shape[2] = 24, VKATTN_ERROR_SHAPE_MISMATCH,
                       "args->value.shape[2] is 24 but the layer's value_dim is 40",
                       vkattn_mha_forward(layer, &a));
    TEST_FAILS_CHANGED(ctx, a, good, a.value.shape[1] = 8, VKATTN_ERROR_SHAPE_MISMATCH,
                       "args->value.shape[1] is 8 but args->kv.shape[1] (the keys' length) is 9",
                       vkattn_mha_forward(layer, &a));
    TEST_FAILS_CHANGED(ctx, a, good, a.value.shape[0] = 1, VKATTN_ERROR_SHAPE_MISMATCH,
                       "args->value.shape[0] (batch) is 1 but args->x.shape[0] is 2",
                       vkattn_mha_forward(layer, &a));
    TEST_FAILS_CHANGED(
        ctx, a, good, a.value.dtype = VKATTN_DTYPE_F16, VKATTN_ERROR_UNSUPPORTED_DTYPE,
        "args->value.dtype is f16 but the layer's dtype is f32", vkattn_mha_forward(layer, &a));

    /* descs: packed weights, RoPE, q8_0 widths; steps */
    vkattn_mha_desc d = l.desc;
    vkattn_mha *bad = NULL;
    d.rope.theta = 10000.0f;
    d.kv_dim = d.embed_dim;
    TEST_FAILS(ctx, VKATTN_ERROR_INVALID_ARGUMENT,
               "desc->rope needs self-attention, but desc->value_dim 40 differs from "
               "desc->embed_dim 32",
               vkattn_mha_create(ctx, &d, &bad));
    d = l.desc;
    d.weight_dtype = VKATTN_DTYPE_Q8_0;
    d.kv_dim = 64;
    d.embed_dim = 64;
    d.value_dim = 96;
    TEST_FAILS(ctx, VKATTN_ERROR_INVALID_ARGUMENT,
               "needs in_features that are multiples of 64, but desc->value_dim (Wv's "
               "in_features) is 96",
               vkattn_mha_create(ctx, &d, &bad));
    vkattn_mha_weights packed = {.wqkv = l.wq, .wo = l.wo};
    TEST_FAILS(ctx, VKATTN_ERROR_INVALID_ARGUMENT,
               "weights->wqkv needs desc->kv_dim (24) == desc->value_dim (40) == "
               "desc->embed_dim (32)",
               vkattn_mha_set_weights(layer, &packed));
    vkattn_mha_desc self = l.desc;
    self.kv_dim = self.embed_dim;
    vkattn_mha *self_layer = NULL;
    TEST_OK(ctx, vkattn_mha_create(ctx, &self, &self_layer));
    vkattn_kv_cache_desc cd = test_kv_desc(c.hkv, c.hq, c.dh, 1, 16, 0);
    cd.v_head_dim = c.dv;
    vkattn_kv_cache *cache = NULL;
    TEST_OK(ctx, vkattn_kv_cache_create(ctx, &cd, &cache));
    int64_t one[3] = {1, 1, c.dm};
    vkattn_buffer *bstep = test_buffer_with(ctx, NULL, (size_t)c.dm * 4);
    const uint32_t seq = 0;
    vkattn_mha_step_args step = {.cache = cache,
                                 .batch = 1,
                                 .sequences = &seq,
                                 .x = vkattn_tensor_make(bstep, 0, dt, 3, one),
                                 .y = vkattn_tensor_make(bstep, 0, dt, 3, one)};
    TEST_FAILS(ctx, VKATTN_ERROR_INVALID_ARGUMENT,
               "steps are self-attention: the layer's value_dim 40 must equal its embed_dim 32",
               vkattn_mha_step(self_layer, &step));
    vkattn_buffer_destroy(bstep);
    vkattn_kv_cache_destroy(cache);
    vkattn_mha_destroy(self_layer);
    vkattn_mha_destroy(layer);
    TEST_DESTROY_BUFFERS(bx, bk, bv, by);
    layer_free(&l);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_key_value_apart_match_reference),
        cmocka_unit_test(test_reference_equals_one_input),
        cmocka_unit_test(test_weight_tensors_read_back_and_prune),
        cmocka_unit_test(test_tune_projects_values_apart),
        cmocka_unit_test(test_value_input_errors),
    };
    return cmocka_run_group_tests(tests, test_policy_suite_setup, test_policy_suite_teardown);
}
