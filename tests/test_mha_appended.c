/* torch's add_bias_kv and add_zero_attn in the MHA layer (issue 30 part 2):
 * on every kernel policy against vkattn_ref_mha (causal, masks, key
 * padding, GQA, softcap, head mask, f16); the reference itself against the
 * plain layer given one more input row that projects to the same appended
 * row (a zero row of C projects to bk and bv; without biases, to zeros);
 * weights from the caller's tensors; every refusal by name. */
#include "test_policy.h"
#include "test_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct rows_case {
    uint32_t b, tq, tk, dm, hq, hkv, dh, dv;
    bool bias_kv, zero_attn, cross, causal, padding, mask, gate;
    float softcap;
    vkattn_dtype dtype;
    uint32_t weights; /* the attention weights' rank: 3, 4, or 0 for none */
} rows_case;

typedef struct rows_layer {
    vkattn_mha_desc desc;
    float *wq, *wk, *wv, *wo, *bq, *bk, *bv, *bo, *bias_k, *bias_v;
    float *x, *c, *mask, *gate;
    uint8_t *pad;
    size_t nx, nc;
    uint32_t tk;
} rows_layer;

static void layer_make(const rows_case *k, uint64_t seed, rows_layer *l)
{
    memset(l, 0, sizeof *l);
    test_rng rng = test_rng_seed(seed);
    const vkattn_dtype dt = k->dtype;
    l->tk = k->cross ? k->tk : k->tq;
    size_t qw = (size_t)k->hq * k->dh, kw = (size_t)k->hkv * k->dh, vw = (size_t)k->hkv * k->dv,
           ow = (size_t)k->hq * k->dv;
    float amp = 1.5f / sqrtf((float)k->dm);
    l->wq = test_random_array(&rng, qw * k->dm, amp, dt);
    l->wk = test_random_array(&rng, kw * k->dm, amp, dt);
    l->wv = test_random_array(&rng, vw * k->dm, amp, dt);
    l->wo = test_random_array(&rng, k->dm * ow, amp, dt);
    l->bq = test_random_array(&rng, qw, 0.2f, dt);
    l->bk = test_random_array(&rng, kw, 0.2f, dt);
    l->bv = test_random_array(&rng, vw, 0.2f, dt);
    l->bo = test_random_array(&rng, k->dm, 0.2f, dt);
    /* large enough that the bias row takes a visible share */
    l->bias_k = test_random_array(&rng, kw, 1.5f, VKATTN_DTYPE_F32);
    l->bias_v = test_random_array(&rng, vw, 1.0f, VKATTN_DTYPE_F32);
    l->nx = (size_t)k->b * k->tq * k->dm;
    l->nc = (size_t)k->b * l->tk * k->dm;
    l->x = test_random_array(&rng, l->nx, 1.0f, dt);
    l->c = k->cross ? test_random_array(&rng, l->nc, 1.0f, dt) : NULL;
    if (k->padding) { /* batch row 1 has every key hidden: only the rows remain */
        l->pad = malloc((size_t)k->b * l->tk);
        for (size_t i = 0; i < (size_t)k->b * l->tk; i++)
            l->pad[i] = i / l->tk == 1 ? 0 : i % 4 != 1;
    }
    if (k->mask) {
        l->mask = test_random_array(&rng, (size_t)k->tq * l->tk, 1.0f, VKATTN_DTYPE_F32);
        for (size_t i = 0; i < (size_t)k->tq * l->tk; i += 5)
            l->mask[i] = -INFINITY;
    }
    if (k->gate) {
        l->gate = malloc(k->hq * 4);
        for (uint32_t h = 0; h < k->hq; h++)
            l->gate[h] = h == 1 ? 0.0f : 0.5f + 0.25f * (float)h;
    }
    l->desc = (vkattn_mha_desc){.embed_dim = k->dm,
                                .num_heads = k->hq,
                                .num_kv_heads = k->hkv,
                                .head_dim = k->dh,
                                .v_head_dim = k->dv,
                                .bias = true,
                                .dtype = dt,
                                .softcap = k->softcap,
                                .add_bias_kv = k->bias_kv,
                                .add_zero_attn = k->zero_attn};
}

static void layer_free(rows_layer *l)
{
    float *all[] = {l->wq, l->wk,     l->wv,     l->wo, l->bq, l->bk,   l->bv,
                    l->bo, l->bias_k, l->bias_v, l->x,  l->c,  l->mask, l->gate};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        free(all[i]);
    free(l->pad);
}

static vkattn_mha_weights layer_weights(const rows_layer *l)
{
    return (vkattn_mha_weights){.wq = l->wq,
                                .wk = l->wk,
                                .wv = l->wv,
                                .wo = l->wo,
                                .bq = l->bq,
                                .bk = l->bk,
                                .bv = l->bv,
                                .bo = l->bo,
                                .bias_k = l->bias_k,
                                .bias_v = l->bias_v};
}

/* Columns of the weights: the keys, then the appended rows. */
static size_t weight_count(const rows_case *k, const rows_layer *l, int64_t ws[4])
{
    int64_t cols = l->tk + (int64_t)k->bias_kv + (int64_t)k->zero_attn;
    int64_t s4[4] = {k->b, k->hq, k->tq, cols}, s3[4] = {k->b, k->tq, cols, 0};
    memcpy(ws, k->weights == 4 ? s4 : s3, sizeof s4);
    return (size_t)k->b * (k->weights == 4 ? k->hq : 1) * k->tq * (size_t)cols;
}

static float *reference_of(const rows_case *k, const rows_layer *l, float **weights)
{
    int64_t xs[3] = {k->b, k->tq, k->dm}, cs[3] = {k->b, l->tk, k->dm}, ps[2] = {k->b, l->tk},
            ms[2] = {k->tq, l->tk}, gs[1] = {k->hq};
    float *y = malloc(l->nx * 4);
    vkattn_ref_mha_args ra = {.causal = k->causal};
    ra.x = vkattn_host_tensor_make(l->x, VKATTN_DTYPE_F32, 3, xs);
    if (l->c)
        ra.kv = vkattn_host_tensor_make(l->c, VKATTN_DTYPE_F32, 3, cs);
    if (l->pad)
        ra.key_padding = vkattn_host_tensor_make(l->pad, VKATTN_DTYPE_U8, 2, ps);
    if (l->mask)
        ra.mask = vkattn_host_tensor_make(l->mask, VKATTN_DTYPE_F32, 2, ms);
    if (l->gate)
        ra.head_mask = vkattn_host_tensor_make(l->gate, VKATTN_DTYPE_F32, 1, gs);
    ra.y = vkattn_host_tensor_make(y, VKATTN_DTYPE_F32, 3, xs);
    if (weights) {
        int64_t ws[4];
        *weights = malloc(weight_count(k, l, ws) * 4);
        ra.weights = vkattn_host_tensor_make(*weights, VKATTN_DTYPE_F32, k->weights, ws);
    }
    vkattn_mha_weights w = layer_weights(l);
    char err[512];
    if (vkattn_ref_mha(&l->desc, &w, &ra, err, sizeof err) != VKATTN_SUCCESS)
        fail_msg("reference: %s", err);
    return y;
}

static void forward_and_compare(vkattn_context *ctx, vkattn_mha *layer, const rows_case *k,
                                const rows_layer *l, const char *what)
{
    const vkattn_dtype dt = k->dtype;
    float *ref_w = NULL;
    float *ref_y = reference_of(k, l, k->weights ? &ref_w : NULL);
    int64_t ws[4];
    size_t nw = k->weights ? weight_count(k, l, ws) : 0;
    int64_t xs[3] = {k->b, k->tq, k->dm}, cs[3] = {k->b, l->tk, k->dm}, ps[2] = {k->b, l->tk},
            ms[2] = {k->tq, l->tk}, gs[1] = {k->hq};
    vkattn_buffer *bx = test_buffer_of(ctx, dt, l->x, l->nx);
    vkattn_buffer *bc = l->c ? test_buffer_of(ctx, dt, l->c, l->nc) : NULL;
    vkattn_buffer *bpad = l->pad ? test_buffer_with(ctx, l->pad, (size_t)k->b * l->tk) : NULL;
    vkattn_buffer *bmask =
        l->mask ? test_buffer_with(ctx, l->mask, (size_t)k->tq * l->tk * 4) : NULL;
    vkattn_buffer *bgate = l->gate ? test_buffer_with(ctx, l->gate, k->hq * 4) : NULL;
    vkattn_buffer *by = test_buffer_with(ctx, NULL, l->nx * vkattn_dtype_size(dt));
    vkattn_buffer *bw = nw ? test_buffer_with(ctx, NULL, nw * 4) : NULL;
    vkattn_mha_forward_args fa = {.x = vkattn_tensor_make(bx, 0, dt, 3, xs),
                                  .y = vkattn_tensor_make(by, 0, dt, 3, xs),
                                  .causal = k->causal};
    if (bc)
        fa.kv = vkattn_tensor_make(bc, 0, dt, 3, cs);
    if (bpad)
        fa.key_padding = vkattn_tensor_make(bpad, 0, VKATTN_DTYPE_U8, 2, ps);
    if (bmask)
        fa.mask = vkattn_tensor_make(bmask, 0, VKATTN_DTYPE_F32, 2, ms);
    if (bgate)
        fa.head_mask = vkattn_tensor_make(bgate, 0, VKATTN_DTYPE_F32, 1, gs);
    if (bw)
        fa.weights = vkattn_tensor_make(bw, 0, VKATTN_DTYPE_F32, k->weights, ws);
    TEST_OK(ctx, vkattn_mha_forward(layer, &fa));
    float *gy = malloc(l->nx * 4);
    test_download_as(ctx, by, dt, gy, l->nx);
    double tol = dt == VKATTN_DTYPE_F16 ? TEST_TOL_F16 : TEST_TOL_F32;
    test_assert_close(gy, ref_y, l->nx, tol, what);
    if (bw) {
        float *gw = malloc(nw * 4);
        test_download_as(ctx, bw, VKATTN_DTYPE_F32, gw, nw);
        char wwhat[200];
        snprintf(wwhat, sizeof wwhat, "%s: rank-%u weights", what, k->weights);
        test_assert_close(gw, ref_w, nw, tol, wwhat);
        free(gw);
    }
    TEST_DESTROY_BUFFERS(bx, bc, bpad, bmask, bgate, by, bw);
    free(gy);
    free(ref_y);
    free(ref_w);
}

static const rows_case cases[] = {
    /* b tq tk dm hq hkv dh dv bias_kv zero cross causal pad mask gate softcap dtype */
    /* both rows, self-attention, causal: the rows are visible to query 0 too */
    {2, 6, 0, 32, 4, 2, 8, 8, true, true, false, true, false, false, false, 0, VKATTN_DTYPE_F32},
    /* the bias row alone, cross-attention, a mask, a padded-out batch row */
    {2, 5, 9, 32, 4, 4, 8, 16, true, false, true, false, true, true, false, 0, VKATTN_DTYPE_F32},
    /* the zero row alone (a sink of 0), MQA, head mask, softcap */
    {2, 7, 7, 48, 4, 1, 12, 12, false, true, true, true, true, false, true, 3, VKATTN_DTYPE_F32},
    /* both, GQA, head mask, softcap, f16, head dims of the fast kernels */
    {1, 9, 12, 64, 4, 2, 16, 16, true, true, true, false, false, true, true, 5, VKATTN_DTYPE_F16},
    /* both, element-wise head dims (Dk 6, Dv 4) */
    {2, 4, 5, 24, 4, 2, 6, 4, true, true, true, true, true, false, false, 0, VKATTN_DTYPE_F32},
};

static void test_appended_rows_match_reference(void **state)
{
    test_policy_suite *s = *state;
    for (uint32_t policy = 0; policy < TEST_POLICY_COUNT; policy++)
        for (size_t i = 0; s->gpu[policy] && i < sizeof cases / sizeof cases[0]; i++) {
            rows_case kw = cases[i];
            kw.weights = 3 + (uint32_t)((i + policy) % 2); /* averaged or per head */
            const rows_case *k = &kw;
            rows_layer l;
            layer_make(k, 500 + policy * 10 + i, &l);
            vkattn_mha_weights w = layer_weights(&l);
            vkattn_mha *layer = test_mha_create(s->gpu[policy]->ctx, &l.desc, &w);
            char what[160];
            snprintf(what, sizeof what, "mha rows%s%s Hq%u Hkv%u Dh%u Dv%u %s policy %u",
                     k->bias_kv ? " bias_kv" : "", k->zero_attn ? " zero_attn" : "", k->hq, k->hkv,
                     k->dh, k->dv, vkattn_dtype_name(k->dtype), policy);
            forward_and_compare(s->gpu[policy]->ctx, layer, k, &l, what);
            vkattn_mha_destroy(layer);
            layer_free(&l);
        }
}

/* The reference's appended row against the plain layer (no appended rows)
 * given C with one more token of zeros, which projects to bk and bv (with
 * biases: bias_k = bk, bias_v = bv) or to zeros (without: add_zero_attn),
 * the mask and key padding widened by a visible column. */
static void reference_against_extra_token(bool zero_attn)
{
    rows_case k = cases[1];
    k.bias_kv = !zero_attn;
    k.zero_attn = zero_attn;
    k.softcap = 2.0f;
    rows_layer l;
    layer_make(&k, zero_attn ? 61 : 62, &l);
    l.desc.bias = !zero_attn;
    if (!zero_attn) {
        memcpy(l.bias_k, l.bk, (size_t)k.hkv * k.dh * 4);
        memcpy(l.bias_v, l.bv, (size_t)k.hkv * k.dv * 4);
    }
    float *want = reference_of(&k, &l, NULL);

    const uint32_t tk = l.tk, tw = tk + 1;
    float *c = calloc((size_t)k.b * tw * k.dm, 4), *mask = malloc((size_t)k.tq * tw * 4);
    uint8_t *pad = malloc((size_t)k.b * tw);
    for (uint32_t b = 0; b < k.b; b++) {
        memcpy(c + (size_t)b * tw * k.dm, l.c + (size_t)b * tk * k.dm, (size_t)tk * k.dm * 4);
        memcpy(pad + (size_t)b * tw, l.pad + (size_t)b * tk, tk);
        pad[(size_t)b * tw + tk] = 1;
    }
    for (uint32_t i = 0; i < k.tq; i++) {
        memcpy(mask + (size_t)i * tw, l.mask + (size_t)i * tk, tk * 4);
        mask[(size_t)i * tw + tk] = 0.0f;
    }
    vkattn_mha_desc plain = l.desc;
    plain.add_bias_kv = plain.add_zero_attn = false;
    vkattn_mha_weights w = layer_weights(&l);
    int64_t xs[3] = {k.b, k.tq, k.dm}, cs[3] = {k.b, tw, k.dm}, ps[2] = {k.b, tw},
            ms[2] = {k.tq, tw};
    float *got = malloc(l.nx * 4);
    vkattn_ref_mha_args ra = {
        .x = vkattn_host_tensor_make(l.x, VKATTN_DTYPE_F32, 3, xs),
        .kv = vkattn_host_tensor_make(c, VKATTN_DTYPE_F32, 3, cs),
        .key_padding = vkattn_host_tensor_make(pad, VKATTN_DTYPE_U8, 2, ps),
        .mask = vkattn_host_tensor_make(mask, VKATTN_DTYPE_F32, 2, ms),
        .y = vkattn_host_tensor_make(got, VKATTN_DTYPE_F32, 3, xs),
    };
    char err[512];
    if (vkattn_ref_mha(&plain, &w, &ra, err, sizeof err) != VKATTN_SUCCESS)
        fail_msg("reference: %s", err);
    test_assert_close(got, want, l.nx, 1e-5, zero_attn ? "zero row" : "bias row");
    /* the row matters: without it the result moves */
    if (vkattn_ref_mha(
            &plain, &w,
            &(vkattn_ref_mha_args){.x = ra.x,
                                   .kv = vkattn_host_tensor_make(l.c, VKATTN_DTYPE_F32, 3,
                                                                 (int64_t[3]){k.b, tk, k.dm}),
                                   .key_padding = vkattn_host_tensor_make(l.pad, VKATTN_DTYPE_U8, 2,
                                                                          (int64_t[2]){k.b, tk}),
                                   .mask = vkattn_host_tensor_make(l.mask, VKATTN_DTYPE_F32, 2,
                                                                   (int64_t[2]){k.tq, tk}),
                                   .y = ra.y},
            err, sizeof err) != VKATTN_SUCCESS)
        fail_msg("reference: %s", err);
    double most = 0.0;
    for (size_t i = 0; i < l.nx; i++)
        most = fmax(most, fabs((double)got[i] - want[i]));
    if (most < 1e-3)
        fail_msg("the appended row moved no output by 1e-3 (%g)", most);
    free(c), free(mask), free(pad), free(want), free(got);
    layer_free(&l);
}

static void test_reference_equals_extra_token(void **state)
{
    (void)state;
    reference_against_extra_token(false);
    reference_against_extra_token(true);
}

/* bias_k and bias_v beside borrowed weight tensors (uploaded as host
 * arrays, like the sinks); vkattn_mha_get_weights and
 * vkattn_mha_param_count with them. */
static void test_weight_tensors_take_bias_rows(void **state)
{
    test_gpu *g = test_policy_suite_first(*state);
    vkattn_context *ctx = g->ctx;
    rows_case k = cases[1];
    k.cross = false; /* self-attention: one packed Wqkv */
    rows_layer l;
    layer_make(&k, 88, &l);
    size_t qw = (size_t)k.hq * k.dh, kw = (size_t)k.hkv * k.dh, vw = (size_t)k.hkv * k.dv,
           ow = (size_t)k.hq * k.dv;
    const size_t rows = qw + kw + vw;
    float *wqkv = malloc(rows * k.dm * 4), *bqkv = malloc(rows * 4);
    memcpy(wqkv, l.wq, qw * k.dm * 4);
    memcpy(wqkv + qw * k.dm, l.wk, kw * k.dm * 4);
    memcpy(wqkv + (qw + kw) * k.dm, l.wv, vw * k.dm * 4);
    memcpy(bqkv, l.bq, qw * 4);
    memcpy(bqkv + qw, l.bk, kw * 4);
    memcpy(bqkv + qw + kw, l.bv, vw * 4);
    vkattn_buffer *bw = test_buffer_of(ctx, k.dtype, wqkv, rows * k.dm),
                  *wo = test_buffer_of(ctx, k.dtype, l.wo, k.dm * ow),
                  *bb = test_buffer_of(ctx, k.dtype, bqkv, rows),
                  *bo = test_buffer_of(ctx, k.dtype, l.bo, k.dm);
    vkattn_mha *layer = NULL;
    TEST_OK(ctx, vkattn_mha_create(ctx, &l.desc, &layer));
    const int64_t sw[2] = {(int64_t)rows, k.dm}, so[2] = {k.dm, (int64_t)ow}, nb = (int64_t)rows,
                  no = k.dm;
    vkattn_mha_weight_tensors t = {
        .wqkv = vkattn_tensor_make(bw, 0, k.dtype, 2, sw),
        .wo = vkattn_tensor_make(wo, 0, k.dtype, 2, so),
        .bqkv = vkattn_tensor_make(bb, 0, k.dtype, 1, &nb),
        .bo = vkattn_tensor_make(bo, 0, k.dtype, 1, &no),
    };
    TEST_FAILS(ctx, VKATTN_ERROR_INVALID_ARGUMENT,
               "t->bias_k is NULL but the layer's desc needs it (desc.add_bias_kv)",
               vkattn_mha_set_weight_tensors(layer, &t));
    t.bias_k = l.bias_k;
    t.bias_v = l.bias_v;
    float saved = l.bias_v[3];
    l.bias_v[3] = NAN;
    TEST_FAILS(ctx, VKATTN_ERROR_INVALID_ARGUMENT, "t->bias_v[3] is nan: it must be finite",
               vkattn_mha_set_weight_tensors(layer, &t));
    l.bias_v[3] = saved;
    TEST_OK(ctx, vkattn_mha_set_weight_tensors(layer, &t));
    forward_and_compare(ctx, layer, &k, &l, "weight tensors with bias rows");
    /* the rows come back as the layer keeps them (f32 here: exactly), and
     * count among the parameters as torch's parameters() counts them */
    float *got_k = malloc(kw * 4), *got_v = malloc(vw * 4);
    TEST_OK(ctx, vkattn_mha_get_weights(
                     layer, &(vkattn_mha_weight_copy){.bias_k = got_k, .bias_v = got_v}));
    assert_memory_equal(got_k, l.bias_k, kw * 4);
    assert_memory_equal(got_v, l.bias_v, vw * 4);
    vkattn_mha_param_counts c;
    char err[256];
    assert_int_equal(vkattn_mha_param_count(&l.desc, &c, err, sizeof err), VKATTN_SUCCESS);
    assert_int_equal(c.bias_k, kw);
    assert_int_equal(c.bias_v, vw);
    assert_int_equal(c.biases, qw + 2 * kw + 2 * vw + k.dm);
    assert_int_equal(c.bytes, (c.weights + c.biases) * 4);
    vkattn_mha_destroy(layer);
    free(got_k), free(got_v);
    TEST_DESTROY_BUFFERS(bw, wo, bb, bo);
    free(wqkv), free(bqkv);
    layer_free(&l);
}

/* Prefill then decode steps over a KV cache (contiguous and paged, with
 * split-KV decode): each step's queries see the cache causally and the
 * appended rows, so the outputs equal one causal forward's. */
static void test_steps_match_causal_forward(void **state)
{
    test_policy_suite *s = *state;
    static const struct {
        bool bias_kv, zero_attn;
        uint32_t block_size, kv_splits;
    } runs[] = {{true, true, 0, 0}, {true, false, 4, 2}, {false, true, 0, 3}};
    for (uint32_t policy = 0; policy < TEST_POLICY_COUNT; policy++)
        for (size_t r = 0; s->gpu[policy] && r < sizeof runs / sizeof runs[0]; r++) {
            vkattn_context *ctx = s->gpu[policy]->ctx;
            rows_case k = cases[0];
            k.b = 1;
            k.tq = 7;
            k.bias_kv = runs[r].bias_kv;
            k.zero_attn = runs[r].zero_attn;
            k.softcap = 4.0f;
            rows_layer l;
            layer_make(&k, 900 + policy * 10 + r, &l);
            float *want = reference_of(&k, &l, NULL);
            vkattn_mha_weights w = layer_weights(&l);
            vkattn_mha *layer = test_mha_create(ctx, &l.desc, &w);
            vkattn_kv_cache_desc cd = test_kv_desc(k.hkv, k.hq, k.dh, 1, 16, runs[r].block_size);
            vkattn_kv_cache *cache = NULL;
            TEST_OK(ctx, vkattn_kv_cache_create(ctx, &cd, &cache));
            vkattn_buffer *bx = test_buffer_with(ctx, NULL, l.nx * 4),
                          *by = test_buffer_with(ctx, NULL, l.nx * 4);
            float *got = malloc(l.nx * 4);
            const uint32_t seq = 0, prefill = 4;
            for (uint32_t t0 = 0; t0 < k.tq;) {
                uint32_t n = t0 == 0 ? prefill : 1;
                int64_t shape[3] = {1, n, k.dm};
                test_upload_as(ctx, bx, k.dtype, l.x + (size_t)t0 * k.dm, (size_t)n * k.dm);
                vkattn_mha_step_args a = {.cache = cache,
                                          .batch = 1,
                                          .sequences = &seq,
                                          .x = vkattn_tensor_make(bx, 0, k.dtype, 3, shape),
                                          .y = vkattn_tensor_make(by, 0, k.dtype, 3, shape),
                                          .kv_splits = n == 1 ? runs[r].kv_splits : 0};
                TEST_OK(ctx, vkattn_mha_step(layer, &a));
                test_download_as(ctx, by, k.dtype, got + (size_t)t0 * k.dm, (size_t)n * k.dm);
                t0 += n;
            }
            char what[128];
            snprintf(what, sizeof what, "steps with rows%s%s, block %u, splits %u, policy %u",
                     k.bias_kv ? " bias_kv" : "", k.zero_attn ? " zero_attn" : "",
                     runs[r].block_size, runs[r].kv_splits, policy);
            test_assert_close(got, want, l.nx, TEST_TOL_F32, what);
            vkattn_kv_cache_destroy(cache);
            vkattn_mha_destroy(layer);
            TEST_DESTROY_BUFFERS(bx, by);
            free(got), free(want);
            layer_free(&l);
        }
}

/* Every refusal the appended rows bring, by name. */
static void test_appended_rows_errors(void **state)
{
    test_gpu *g = test_policy_suite_first(*state);
    vkattn_context *ctx = g->ctx;
    rows_case k = cases[0];
    rows_layer l;
    layer_make(&k, 7, &l);
    vkattn_mha *bad = NULL;
    static const struct {
        const char *field, *text;
    } combos[] = {
        {"sinks", "desc->add_bias_kv cannot be combined with desc->sinks"},
        {"alibi", "desc->add_bias_kv cannot be combined with desc->alibi"},
        {"rope", "desc->add_bias_kv cannot be combined with desc->rope"},
        {"qk_norm", "desc->add_bias_kv cannot be combined with desc->qk_norm"},
    };
    for (size_t i = 0; i < sizeof combos / sizeof combos[0]; i++) {
        vkattn_mha_desc d = l.desc;
        d.sinks = combos[i].field[0] == 's';
        d.alibi = combos[i].field[0] == 'a';
        d.rope.theta = combos[i].field[0] == 'r' ? 10000.0f : 0.0f;
        d.qk_norm = combos[i].field[0] == 'q';
        TEST_FAILS(ctx, VKATTN_ERROR_INVALID_ARGUMENT, combos[i].text,
                   vkattn_mha_create(ctx, &d, &bad));
    }
    vkattn_mha_desc d = l.desc;
    d.add_bias_kv = false;
    d.sinks = true;
    TEST_FAILS(ctx, VKATTN_ERROR_INVALID_ARGUMENT,
               "desc->add_zero_attn cannot be combined with desc->sinks",
               vkattn_mha_create(ctx, &d, &bad));
    d = l.desc;
    d.v_head_dim = 6;
    TEST_FAILS(ctx, VKATTN_ERROR_INVALID_ARGUMENT,
               "desc->add_bias_kv needs a v_head_dim that is a multiple of 4 (the bias row's "
               "result is merged by LSE), but desc->v_head_dim is 6",
               vkattn_mha_create(ctx, &d, &bad));

    vkattn_mha *layer = NULL;
    TEST_OK(ctx, vkattn_mha_create(ctx, &l.desc, &layer));
    vkattn_mha_weights w = layer_weights(&l);
    w.bias_v = NULL;
    TEST_FAILS(ctx, VKATTN_ERROR_INVALID_ARGUMENT,
               "weights->bias_v is NULL but desc->add_bias_kv is set: give bias_k "
               "([num_kv_heads * head_dim] = [16]) and bias_v ([16])",
               vkattn_mha_set_weights(layer, &w));
    w = layer_weights(&l);
    l.bias_k[5] = INFINITY;
    TEST_FAILS(ctx, VKATTN_ERROR_INVALID_ARGUMENT, "weights->bias_k[5] is inf: it must be finite",
               vkattn_mha_set_weights(layer, &w));
    char err[256];
    int64_t xs[3] = {k.b, k.tq, k.dm}, ws[3] = {k.b, k.tq, k.tq};
    float *y = malloc(l.nx * 4), *wt = malloc((size_t)k.b * k.tq * k.tq * 4);
    vkattn_ref_mha_args ra = {.x = vkattn_host_tensor_make(l.x, VKATTN_DTYPE_F32, 3, xs),
                              .y = vkattn_host_tensor_make(y, VKATTN_DTYPE_F32, 3, xs)};
    assert_int_equal(vkattn_ref_mha(&l.desc, &w, &ra, err, sizeof err),
                     VKATTN_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(err, "weights->bias_k[5] is inf: it must be finite"));
    l.bias_k[5] = 0.5f;
    ra.weights = vkattn_host_tensor_make(wt, VKATTN_DTYPE_F32, 3, ws);
    assert_int_equal(vkattn_ref_mha(&l.desc, &w, &ra, err, sizeof err),
                     VKATTN_ERROR_SHAPE_MISMATCH);
    assert_non_null(strstr(err, "args->weights.shape[2] is 6 but the layer's is 8 (with the 2 "
                                "appended rows of desc->add_bias_kv / add_zero_attn)"));
    TEST_OK(ctx, vkattn_mha_set_weights(layer, &w));

    vkattn_buffer *bx = test_buffer_of(ctx, k.dtype, l.x, l.nx),
                  *by = test_buffer_with(ctx, NULL, l.nx * 4),
                  *bw = test_buffer_with(ctx, NULL, (size_t)k.b * k.tq * k.tq * 4);
    vkattn_mha_forward_args fa = {.x = vkattn_tensor_make(bx, 0, k.dtype, 3, xs),
                                  .y = vkattn_tensor_make(by, 0, k.dtype, 3, xs),
                                  .weights = vkattn_tensor_make(bw, 0, VKATTN_DTYPE_F32, 3, ws)};
    TEST_FAILS(ctx, VKATTN_ERROR_SHAPE_MISMATCH,
               "args->weights.shape[2] is 6 but the layer attends to 6 keys plus 2 appended "
               "rows (desc.add_bias_kv / add_zero_attn): 8",
               vkattn_mha_forward(layer, &fa));
    const uint32_t keep[1] = {0};
    TEST_FAILS(ctx, VKATTN_ERROR_UNSUPPORTED,
               "vkattn_mha_prune_heads: a layer with desc.add_bias_kv cannot be pruned yet",
               vkattn_mha_prune_heads(layer, keep, 1));
    vkattn_mha_destroy(layer);
    TEST_DESTROY_BUFFERS(bx, by, bw);
    free(y), free(wt);
    layer_free(&l);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_appended_rows_match_reference),
        cmocka_unit_test(test_reference_equals_extra_token),
        cmocka_unit_test(test_weight_tensors_take_bias_rows),
        cmocka_unit_test(test_steps_match_causal_forward),
        cmocka_unit_test(test_appended_rows_errors),
    };
    return cmocka_run_group_tests(tests, test_policy_suite_setup, test_policy_suite_teardown);
}
