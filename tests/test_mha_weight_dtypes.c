/* The MHA layer keeping its weights in another dtype than its activations
 * (desc.weight_dtype f16, bf16, q8_0), from host weights in f32, bf16 or
 * q8_0 blocks, against vkattn_ref_mha (which converts the weights as the
 * layer does): the forward (packed self-attention, cross-attention with
 * separate weights) and steps over a KV cache (a prompt, then one token
 * decoded), under every kernel policy; weights from device tensors
 * (vkattn_mha_set_weight_tensors) giving the same bytes as from the host;
 * and the refusals. */
#include "test_policy.h"
#include "test_util.h"

#include "vkattn/reference.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

typedef struct wd_case {
    vkattn_dtype dtype, weight_dtype, host; /* activations, weights kept, weights given */
    bool cross, bias;
} wd_case;

enum { B = 1, TQ = 5, TK = 7, DM = 128, DKV = 64, HQ = 4, HKV = 2, DH = 32 };

/* A host weight array of n values in `host` dtype (f32, bf16 or q8_0) from
 * f32 values; malloc'd. */
static void *host_array(const float *v, size_t n, vkattn_dtype host)
{
    if (host == VKATTN_DTYPE_F32) {
        float *out = test_alloc(n * 4);
        memcpy(out, v, n * 4);
        return out;
    }
    if (host == VKATTN_DTYPE_BF16) {
        uint16_t *out = test_alloc(n * 2);
        for (size_t i = 0; i < n; i++)
            out[i] = vkattn_f32_to_bf16(v[i]);
        return out;
    }
    uint8_t *out = test_alloc(vkattn_dtype_row_bytes(host, n));
    char err[256];
    if (vkattn_ref_quantize(host, v, n, out, err, sizeof err) != VKATTN_SUCCESS)
        fail_msg("%s", err);
    return out;
}

static double tol_of(vkattn_dtype dt)
{
    return dt == VKATTN_DTYPE_F32 ? TEST_TOL_F32 : TEST_TOL_F16;
}

static void run_case(vkattn_context *ctx, const wd_case *c, uint64_t seed)
{
    test_rng rng = test_rng_seed(seed);
    uint32_t dkv = c->cross ? DKV : DM, tk = c->cross ? TK : TQ;
    size_t qw = HQ * DH, kvw = HKV * DH;
    float amp = 1.5f / sqrtf((float)DM);
    /* self-attention gets one packed wqkv (rows of wq, wk, wv) */
    size_t nw[4] = {qw * DM, kvw * dkv, kvw * dkv, DM * qw}, nb[4] = {qw, kvw, kvw, DM};
    float *wf[4], *bf[4];
    void *wh[4], *bh[4];
    vkattn_dtype bias_host = c->host == VKATTN_DTYPE_Q8_0 ? VKATTN_DTYPE_F32 : c->host;
    for (int i = 0; i < 4; i++) {
        wf[i] = test_random_array(&rng, nw[i], amp, VKATTN_DTYPE_F32);
        bf[i] = test_random_array(&rng, nb[i], 0.2f, VKATTN_DTYPE_F32);
        wh[i] = host_array(wf[i], nw[i], c->host);
        bh[i] = host_array(bf[i], nb[i], bias_host);
    }
    void *wqkv = NULL;
    if (!c->cross) {
        float *all = test_alloc((qw + 2 * kvw) * DM * 4);
        memcpy(all, wf[0], nw[0] * 4);
        memcpy(all + nw[0], wf[1], nw[1] * 4);
        memcpy(all + nw[0] + nw[1], wf[2], nw[2] * 4);
        wqkv = host_array(all, (qw + 2 * kvw) * DM, c->host);
        free(all);
    }
    vkattn_mha_desc desc = {.embed_dim = DM,
                            .num_heads = HQ,
                            .num_kv_heads = HKV,
                            .head_dim = DH,
                            .kv_dim = c->cross ? DKV : 0,
                            .bias = c->bias,
                            .dtype = c->dtype,
                            .weight_dtype = c->weight_dtype};
    vkattn_mha_weights w = {.wo = wh[3], .bo = bh[3], .dtype = c->host};
    if (c->cross)
        w.wq = wh[0], w.wk = wh[1], w.wv = wh[2];
    else
        w.wqkv = wqkv;
    w.bq = bh[0], w.bk = bh[1], w.bv = bh[2];

    size_t nx = (size_t)B * TQ * DM, nkv = (size_t)B * tk * dkv;
    float *x = test_random_array(&rng, nx, 1.0f, c->dtype);
    float *kv = c->cross ? test_random_array(&rng, nkv, 1.0f, c->dtype) : NULL;
    int64_t xs[3] = {B, TQ, DM}, kvs[3] = {B, tk, dkv};
    float *ref = test_alloc(nx * 4);
    vkattn_ref_mha_args ra = {.causal = !c->cross};
    ra.x = vkattn_host_tensor_make(x, VKATTN_DTYPE_F32, 3, xs);
    if (kv)
        ra.kv = vkattn_host_tensor_make(kv, VKATTN_DTYPE_F32, 3, kvs);
    ra.y = vkattn_host_tensor_make(ref, VKATTN_DTYPE_F32, 3, xs);
    char err[512];
    if (vkattn_ref_mha(&desc, &w, &ra, err, sizeof err) != VKATTN_SUCCESS)
        fail_msg("reference: %s", err);

    char what[160];
    snprintf(what, sizeof what, "layer %s weights %s from %s %s bias %d",
             vkattn_dtype_name(c->dtype), vkattn_dtype_name(c->weight_dtype),
             vkattn_dtype_name(c->host), c->cross ? "cross" : "self causal", (int)c->bias);
    vkattn_mha *layer = test_mha_create(ctx, &desc, &w);
    size_t es = vkattn_dtype_size(c->dtype);
    vkattn_buffer *bx = test_buffer_of(ctx, c->dtype, x, nx),
                  *bkv = kv ? test_buffer_of(ctx, c->dtype, kv, nkv) : NULL,
                  *by = test_buffer_with(ctx, NULL, nx * es);
    vkattn_mha_forward_args fa = {.causal = !c->cross,
                                  .x = vkattn_tensor_make(bx, 0, c->dtype, 3, xs),
                                  .y = vkattn_tensor_make(by, 0, c->dtype, 3, xs)};
    if (bkv)
        fa.kv = vkattn_tensor_make(bkv, 0, c->dtype, 3, kvs);
    TEST_OK(ctx, vkattn_mha_forward(layer, &fa));
    float *got = test_alloc(nx * 4);
    test_download_as(ctx, by, c->dtype, got, nx);
    test_assert_close(got, ref, nx, tol_of(c->dtype), what);

    if (!c->cross) { /* steps: the prompt's first TQ - 1 tokens, then the last one */
        vkattn_kv_cache_desc cd = test_kv_desc(HKV, HQ, DH, 1, 16, 0);
        cd.dtype = c->dtype;
        vkattn_kv_cache *cache = NULL;
        TEST_OK(ctx, vkattn_kv_cache_create(ctx, &cd, &cache));
        uint32_t seq = 0;
        for (uint32_t t0 = 0, n = TQ - 1; t0 < TQ; t0 += n, n = TQ - t0) {
            int64_t shape[3] = {1, n, DM};
            vkattn_mha_step_args a = {.cache = cache,
                                      .batch = 1,
                                      .sequences = &seq,
                                      .x = vkattn_tensor_make(bx, t0 * DM * es, c->dtype, 3, shape),
                                      .y =
                                          vkattn_tensor_make(by, t0 * DM * es, c->dtype, 3, shape)};
            TEST_OK(ctx, vkattn_mha_step(layer, &a));
        }
        test_download_as(ctx, by, c->dtype, got, nx);
        char steps[200];
        snprintf(steps, sizeof steps, "%s: steps", what);
        test_assert_close(got, ref, nx, tol_of(c->dtype), steps);
        vkattn_kv_cache_destroy(cache);
    }
    TEST_DESTROY_BUFFERS(bx, bkv, by);
    vkattn_mha_destroy(layer);
    for (int i = 0; i < 4; i++)
        free(wf[i]), free(bf[i]), free(wh[i]), free(bh[i]);
    free(wqkv), free(x), free(kv), free(ref), free(got);
}

#define F32 VKATTN_DTYPE_F32
#define F16 VKATTN_DTYPE_F16
#define BF16 VKATTN_DTYPE_BF16
#define Q8 VKATTN_DTYPE_Q8_0

/* n f32 values as stored in `dt` (f32, f16, bf16, q8_0) at `at` of `bytes`
 * (advanced past them, 256-aligned). */
static void store_as(uint8_t *bytes, uint64_t *at, const float *v, size_t n, vkattn_dtype dt)
{
    if (dt == VKATTN_DTYPE_Q8_0) {
        char err[256];
        assert_int_equal(vkattn_ref_quantize(dt, v, n, bytes + *at, err, sizeof err),
                         VKATTN_SUCCESS);
    } else {
        for (size_t i = 0; i < n; i++)
            test_store(bytes + *at, dt, i, v[i]);
    }
    *at += (vkattn_dtype_row_bytes(dt, n) + 255) / 256 * 256;
}

/* The same layer twice, from host weights (vkattn_mha_set_weights) and from
 * device tensors holding the values it stores (vkattn_mha_set_weight_tensors,
 * one shared buffer, after other data): the forward and the steps give the
 * same bytes, because the same kernels read the same values. */
static void run_device_case(vkattn_context *ctx, vkattn_dtype dtype, vkattn_dtype wdt, bool cross,
                            uint64_t seed)
{
    test_rng rng = test_rng_seed(seed);
    uint32_t dkv = cross ? DKV : DM;
    size_t qw = HQ * DH, kvw = HKV * DH;
    float amp = 1.5f / sqrtf((float)DM);
    float *wqkv = test_random_array(&rng, (qw + 2 * kvw) * DM, amp, wdt == F16 ? F16 : F32);
    float *wkvx = test_random_array(&rng, 2 * kvw * dkv, amp, wdt == F16 ? F16 : F32);
    float *wo = test_random_array(&rng, DM * qw, amp, wdt == F16 ? F16 : F32);
    vkattn_dtype bdt = wdt == Q8 ? F32 : wdt;
    float *bqkv = test_random_array(&rng, qw + 2 * kvw, 0.2f, bdt),
          *bo = test_random_array(&rng, DM, 0.2f, bdt);
    vkattn_mha_desc desc = {.embed_dim = DM,
                            .num_heads = HQ,
                            .num_kv_heads = HKV,
                            .head_dim = DH,
                            .kv_dim = cross ? DKV : 0,
                            .bias = true,
                            .dtype = dtype,
                            .weight_dtype = wdt};
    vkattn_mha_weights w = {.wo = wo, .bo = bo};
    if (cross)
        w.wq = wqkv, w.wk = wkvx, w.wv = wkvx + kvw * dkv, w.bq = bqkv, w.bk = bqkv + qw,
        w.bv = bqkv + qw + kvw;
    else
        w.wqkv = wqkv, w.bqkv = bqkv;
    vkattn_mha *host = test_mha_create(ctx, &desc, &w);

    size_t cap = 1 << 20;
    uint8_t *bytes = test_alloc(cap);
    memset(bytes, 0x5A, cap);
    uint64_t at = 512, off_w, off_kv = 0, off_o, off_b, off_bkv = 0, off_bo;
    off_w = at;
    store_as(bytes, &at, wqkv, (cross ? qw : qw + 2 * kvw) * DM, wdt);
    if (cross) {
        off_kv = at;
        store_as(bytes, &at, wkvx, 2 * kvw * dkv, wdt);
    }
    off_o = at;
    store_as(bytes, &at, wo, DM * qw, wdt);
    off_b = at;
    store_as(bytes, &at, bqkv, cross ? qw : qw + 2 * kvw, bdt);
    if (cross) {
        off_bkv = at;
        store_as(bytes, &at, bqkv + qw, 2 * kvw, bdt);
    }
    off_bo = at;
    store_as(bytes, &at, bo, DM, bdt);
    assert_true(at <= cap);
    vkattn_buffer *wb = test_buffer_with(ctx, bytes, at);
    vkattn_mha_weight_tensors t = {
        .wo = vkattn_tensor_make(wb, off_o, wdt, 2, (int64_t[]){DM, (int64_t)qw}),
        .bo = vkattn_tensor_make(wb, off_bo, bdt, 1, (int64_t[]){DM})};
    if (cross) {
        t.wq = vkattn_tensor_make(wb, off_w, wdt, 2, (int64_t[]){(int64_t)qw, DM});
        t.wkv = vkattn_tensor_make(wb, off_kv, wdt, 2, (int64_t[]){(int64_t)(2 * kvw), dkv});
        t.bq = vkattn_tensor_make(wb, off_b, bdt, 1, (int64_t[]){(int64_t)qw});
        t.bkv = vkattn_tensor_make(wb, off_bkv, bdt, 1, (int64_t[]){(int64_t)(2 * kvw)});
    } else {
        t.wqkv = vkattn_tensor_make(wb, off_w, wdt, 2, (int64_t[]){(int64_t)(qw + 2 * kvw), DM});
        t.bqkv = vkattn_tensor_make(wb, off_b, bdt, 1, (int64_t[]){(int64_t)(qw + 2 * kvw)});
    }
    vkattn_mha *dev = NULL;
    TEST_OK(ctx, vkattn_mha_create(ctx, &desc, &dev));
    TEST_OK(ctx, vkattn_mha_set_weight_tensors(dev, &t));

    uint32_t tk = cross ? TK : TQ;
    size_t nx = (size_t)B * TQ * DM, nkv = (size_t)B * tk * dkv, es = vkattn_dtype_size(dtype);
    float *x = test_random_array(&rng, nx, 1.0f, dtype);
    float *kv = cross ? test_random_array(&rng, nkv, 1.0f, dtype) : NULL;
    int64_t xs[3] = {B, TQ, DM}, kvs[3] = {B, tk, dkv};
    vkattn_buffer *bx = test_buffer_of(ctx, dtype, x, nx),
                  *bkv = kv ? test_buffer_of(ctx, dtype, kv, nkv) : NULL;
    vkattn_buffer *by[2] = {test_buffer_with(ctx, NULL, nx * es),
                            test_buffer_with(ctx, NULL, nx * es)};
    uint8_t *got[2] = {test_alloc(nx * es), test_alloc(nx * es)};
    vkattn_mha *layers[2] = {host, dev};
    for (int l = 0; l < 2; l++) {
        vkattn_mha_forward_args fa = {.causal = !cross,
                                      .x = vkattn_tensor_make(bx, 0, dtype, 3, xs),
                                      .y = vkattn_tensor_make(by[l], 0, dtype, 3, xs)};
        if (bkv)
            fa.kv = vkattn_tensor_make(bkv, 0, dtype, 3, kvs);
        TEST_OK(ctx, vkattn_mha_forward(layers[l], &fa));
        TEST_OK(ctx, vkattn_buffer_download(by[l], 0, got[l], nx * es));
    }
    char what[128];
    snprintf(what, sizeof what, "device weights %s / %s %s", vkattn_dtype_name(wdt),
             vkattn_dtype_name(dtype), cross ? "cross" : "self");
    if (memcmp(got[0], got[1], nx * es) != 0)
        fail_msg("%s: the forward differs from the host-weights layer's", what);
    if (!cross) { /* a 3-token prefill step, then a decode step, on each */
        for (int l = 0; l < 2; l++) {
            vkattn_kv_cache_desc cd = test_kv_desc(HKV, HQ, DH, 1, 16, 0);
            cd.dtype = dtype;
            vkattn_kv_cache *cache = NULL;
            TEST_OK(ctx, vkattn_kv_cache_create(ctx, &cd, &cache));
            uint32_t seq = 0;
            for (uint32_t t0 = 0, n = 3; t0 < 4; t0 += n, n = 1) {
                int64_t shape[3] = {1, n, DM};
                vkattn_mha_step_args a = {
                    .cache = cache,
                    .batch = 1,
                    .sequences = &seq,
                    .x = vkattn_tensor_make(bx, t0 * DM * es, dtype, 3, shape),
                    .y = vkattn_tensor_make(by[l], t0 * DM * es, dtype, 3, shape)};
                TEST_OK(ctx, vkattn_mha_step(layers[l], &a));
            }
            TEST_OK(ctx, vkattn_buffer_download(by[l], 0, got[l], 4 * DM * es));
            vkattn_kv_cache_destroy(cache);
        }
        if (memcmp(got[0], got[1], 4 * DM * es) != 0)
            fail_msg("%s: the steps differ from the host-weights layer's", what);
    }
    vkattn_mha_destroy(host);
    vkattn_mha_destroy(dev);
    TEST_DESTROY_BUFFERS(wb, bx, bkv, by[0], by[1]);
    free(wqkv), free(wkvx), free(wo), free(bqkv), free(bo), free(bytes), free(x), free(kv);
    free(got[0]), free(got[1]);
}

static void test_weight_dtypes(void **state)
{
    test_gpu *g = *state;
    static const wd_case cases[] = {
        {F32, Q8, F32, false, true},  {F32, Q8, Q8, true, true},     {F32, Q8, BF16, false, false},
        {F16, Q8, F32, true, true},   {F16, Q8, Q8, false, true},    {BF16, Q8, BF16, false, true},
        {F32, F16, F32, false, true}, {F32, BF16, BF16, true, true}, {F16, BF16, F32, false, true},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        run_case(g->ctx, &cases[i], 900 + i);
}

static void test_device_tensors(void **state)
{
    test_gpu *g = *state;
    run_device_case(g->ctx, F32, Q8, false, 700);
    run_device_case(g->ctx, F16, Q8, true, 701);
    run_device_case(g->ctx, F32, F16, true, 702);
    run_device_case(g->ctx, BF16, BF16, false, 703);
    run_device_case(g->ctx, F32, F32, false, 704);
}

/* Refusals name the parameter and create or change nothing. */
static void test_errors(void **state)
{
    vkattn_context *ctx = ((test_gpu *)*state)->ctx;
    vkattn_mha *layer = NULL;
    vkattn_mha_desc d = {.embed_dim = 96, .num_heads = 3, .weight_dtype = Q8};
    TEST_FAILS(ctx, VKATTN_ERROR_INVALID_ARGUMENT,
               "desc->weight_dtype q8_0 needs in_features that are multiples of 64, but "
               "desc->embed_dim (Wq's in_features) is 96",
               vkattn_mha_create(ctx, &d, &layer));
    assert_null(layer);
    d = (vkattn_mha_desc){.embed_dim = 64, .num_heads = 2, .weight_dtype = VKATTN_DTYPE_Q4_0};
    TEST_FAILS(ctx, VKATTN_ERROR_UNSUPPORTED_DTYPE,
               "desc->weight_dtype q4_0 is not supported: 0 (the dtype's), f16, bf16 or q8_0",
               vkattn_mha_create(ctx, &d, &layer));
    d.weight_dtype = BF16;
    TEST_OK(ctx, vkattn_mha_create(ctx, &d, &layer));
    uint8_t blocks[64 * 64 / 32 * 34] = {0};
    float wo[64 * 64] = {0};
    vkattn_mha_weights w = {.wqkv = (const float *)blocks, .wo = wo, .dtype = Q8};
    TEST_FAILS(ctx, VKATTN_ERROR_UNSUPPORTED_DTYPE,
               "weights->dtype is q8_0 but desc->weight_dtype is bf16",
               vkattn_mha_set_weights(layer, &w));
    vkattn_mha_destroy(layer);
    d.weight_dtype = Q8;
    TEST_OK(ctx, vkattn_mha_create(ctx, &d, &layer));
    float *wqkv = calloc(3 * 64 * 64, 4);
    wqkv[4100] = NAN;
    w = (vkattn_mha_weights){.wqkv = wqkv, .wo = wo};
    TEST_FAILS(ctx, VKATTN_ERROR_INVALID_ARGUMENT,
               "weights->wqkv[4100] is nan: q8_0 weights quantize finite values",
               vkattn_mha_set_weights(layer, &w));
    free(wqkv);
    vkattn_mha_destroy(layer);

    /* device tensors: each refusal names the tensor */
    d = (vkattn_mha_desc){.embed_dim = 64, .num_heads = 2, .bias = true, .weight_dtype = Q8};
    TEST_OK(ctx, vkattn_mha_create(ctx, &d, &layer));
    vkattn_buffer *buf = test_buffer_with(ctx, NULL, 1 << 16);
    uint64_t al = vkattn_context_device_info(ctx)->min_storage_buffer_offset_alignment;
    al = al < 256 ? 256 : al;
    vkattn_mha_weight_tensors good = {
        .wqkv = vkattn_tensor_make(buf, 0, Q8, 2, (int64_t[]){192, 64}),
        .wo = vkattn_tensor_make(buf, 16 * al, Q8, 2, (int64_t[]){64, 64}),
        .bqkv = vkattn_tensor_make(buf, 32 * al, F32, 1, (int64_t[]){192}),
        .bo = vkattn_tensor_make(buf, 40 * al, F32, 1, (int64_t[]){64})};
    TEST_OK(ctx, vkattn_mha_set_weight_tensors(layer, &good));
    vkattn_mha_weight_tensors t;
#define CASE(code, needle, change) \
    TEST_FAILS_CHANGED(ctx, t, good, change, code, needle, vkattn_mha_set_weight_tensors(layer, &t))
    CASE(VKATTN_ERROR_UNSUPPORTED_DTYPE, "t->wo.dtype is bf16 but the layer keeps q8_0",
         t.wo.dtype = BF16);
    CASE(VKATTN_ERROR_UNSUPPORTED_DTYPE, "t->bo.dtype is f16 but the layer keeps f32",
         t.bo.dtype = F16);
    CASE(VKATTN_ERROR_SHAPE_MISMATCH,
         "t->wqkv is rank 2 [128, 64]: the layer needs rank 2 [192, 64]", t.wqkv.shape[0] = 128);
    CASE(VKATTN_ERROR_INVALID_ARGUMENT, "t->wq is set but the layer is self-attention",
         t.wq = t.wo);
    CASE(VKATTN_ERROR_INVALID_ARGUMENT, "t->bo.buffer is NULL: it is required", t.bo.buffer = NULL);
    CASE(VKATTN_ERROR_INVALID_ARGUMENT, "t->wo.offset 8 is not a multiple of", t.wo.offset = 8);
    CASE(VKATTN_ERROR_INVALID_ARGUMENT, "t->bqkv.offset 8 is not a multiple of 16 bytes",
         t.bqkv.offset = 8);
#undef CASE
    assert_int_equal(vkattn_mha_set_weight_tensors(layer, NULL), VKATTN_ERROR_INVALID_ARGUMENT);
    vkattn_mha_destroy(layer);
    /* a NaN sink is refused before anything changes: the layer still runs */
    d = (vkattn_mha_desc){.embed_dim = 64, .num_heads = 2, .sinks = true, .weight_dtype = Q8};
    TEST_OK(ctx, vkattn_mha_create(ctx, &d, &layer));
    float sinks[2] = {0.5f, -1.0f};
    good = (vkattn_mha_weight_tensors){.wqkv = good.wqkv, .wo = good.wo, .sinks = sinks};
    TEST_OK(ctx, vkattn_mha_set_weight_tensors(layer, &good));
    t = good;
    float bad_sinks[2] = {0.5f, NAN};
    t.sinks = bad_sinks;
    TEST_FAILS(ctx, VKATTN_ERROR_INVALID_ARGUMENT, "t->sinks[1] is nan: it must be finite",
               vkattn_mha_set_weight_tensors(layer, &t));
    int64_t xs[3] = {1, 2, 64};
    vkattn_tensor x = vkattn_tensor_make(buf, 48 * al, F32, 3, xs),
                  y = vkattn_tensor_make(buf, 50 * al, F32, 3, xs);
    TEST_OK(ctx, vkattn_mha_forward(layer, &(vkattn_mha_forward_args){.x = x, .y = y}));
    vkattn_mha_destroy(layer);
    vkattn_buffer_destroy(buf);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_weight_dtypes),
        cmocka_unit_test(test_device_tensors),
    };
    const struct CMUnitTest once[] = {
        cmocka_unit_test(test_errors),
    };
    int failed = cmocka_run_group_tests_name("mha_weight_dtypes_errors", once, test_gpu_setup,
                                             test_gpu_teardown);
    for (uint32_t p = 0; p < TEST_POLICY_COUNT; p++)
        failed +=
            test_policy_run_group("mha_weight_dtypes", p, tests, sizeof tests / sizeof tests[0]);
    return failed;
}
