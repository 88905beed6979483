/* Looking inside heads: the head mask (HF's head_mask) of vkattn_attention
 * (out and weights, per head and averaged, f32 / f16 / bf16, head dims that
 * are not multiples of 8), of the MHA layer's forward and of its steps over
 * a KV cache, each against the CPU reference given the same mask, on every
 * kernel policy; bad masks (named errors, nothing written). Structured
 * pruning: the pruned layer's forward (and steps) equal the unpruned one's
 * with the removed heads masked - MHA, GQA groups left even, uneven and
 * emptied, sinks and ALiBi, q8_0 weights -, the weights read back, and bad
 * head lists (named errors, the layer unchanged). Head importance: a head
 * whose Wo columns are zero scores 0 and ranks last, the others match the
 * reference's masked differences. Parameter counts against hand-computed
 * ones (d_model 768, 12 heads: 2,359,296 weights). */
#include "test_policy.h"
#include "test_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#define F32 VKATTN_DTYPE_F32
#define F16 VKATTN_DTYPE_F16
#define BF16 VKATTN_DTYPE_BF16

typedef struct mask_case {
    uint32_t B, Hq, Hkv, Tq, Tk, D, DV;
    vkattn_dtype dt;
    bool causal;
    uint32_t mask_rank; /* 1: [Hq]; 2: [B, Hq]; 3: [1, Hq] */
    uint32_t weights;   /* 0, 3 or 4 */
} mask_case;

static const mask_case cases[] = {
    {2, 4, 2, 5, 9, 16, 16, F32, true, 2, 4},
    {2, 4, 4, 6, 6, 32, 32, F16, false, 1, 3},
    {1, 6, 3, 7, 11, 5, 7, F32, true, 3, 4},
    {2, 2, 1, 4, 8, 8, 8, BF16, true, 1, 0},
};

/* Gates with a removed head (0), a kept one (1), scaled ones, a negative one. */
static float gate_value(uint32_t b, uint32_t h)
{
    static const float g[] = {1.0f, 0.0f, 0.5f, 2.0f, -1.0f, 0.25f, 1.0f};
    return g[(b * 3 + h) % 7];
}

static void run_attention_case(test_gpu *g, uint32_t policy, const void *arg)
{
    const mask_case *c = arg;
    vkattn_context *ctx = g->ctx;
    test_rng rng = test_rng_seed(4100 + c->D + c->Hq);
    const size_t nq = (size_t)c->B * c->Hq * c->Tq * c->D,
                 nk = (size_t)c->B * c->Hkv * c->Tk * c->D,
                 nv = (size_t)c->B * c->Hkv * c->Tk * c->DV,
                 no = (size_t)c->B * c->Hq * c->Tq * c->DV;
    const size_t nw = c->weights == 4   ? (size_t)c->B * c->Hq * c->Tq * c->Tk
                      : c->weights == 3 ? (size_t)c->B * c->Tq * c->Tk
                                        : 0;
    float *q = test_random_array(&rng, nq, 1.5f, c->dt),
          *k = test_random_array(&rng, nk, 1.5f, c->dt),
          *v = test_random_array(&rng, nv, 1.0f, c->dt);
    const uint32_t mrows = c->mask_rank == 2 ? c->B : 1;
    float gate[64];
    for (uint32_t b = 0; b < mrows; b++)
        for (uint32_t h = 0; h < c->Hq; h++)
            gate[b * c->Hq + h] = gate_value(b, h);
    int64_t qs[4] = {c->B, c->Hq, c->Tq, c->D}, ks[4] = {c->B, c->Hkv, c->Tk, c->D},
            vs[4] = {c->B, c->Hkv, c->Tk, c->DV}, os[4] = {c->B, c->Hq, c->Tq, c->DV};
    int64_t ws4[4] = {c->B, c->Hq, c->Tq, c->Tk}, ws3[3] = {c->B, c->Tq, c->Tk};
    int64_t gs[2] = {mrows, c->Hq};
    const uint32_t grank = c->mask_rank == 1 ? 1 : 2;
    const int64_t *gshape = grank == 1 ? gs + 1 : gs;

    float *want = malloc(no * 4), *want_w = nw ? malloc(nw * 4) : NULL;
    vkattn_ref_attention_args ra = {.causal = c->causal};
    ra.q = vkattn_host_tensor_make(q, F32, 4, qs);
    ra.k = vkattn_host_tensor_make(k, F32, 4, ks);
    ra.v = vkattn_host_tensor_make(v, F32, 4, vs);
    ra.out = vkattn_host_tensor_make(want, F32, 4, os);
    ra.head_mask = vkattn_host_tensor_make(gate, F32, grank, gshape);
    if (nw)
        ra.weights = vkattn_host_tensor_make(want_w, F32, c->weights, c->weights == 4 ? ws4 : ws3);
    char err[256];
    if (vkattn_ref_attention(&ra, err, sizeof err) != VKATTN_SUCCESS)
        fail_msg("reference: %s", err);

    vkattn_buffer *bq = test_buffer_of(ctx, c->dt, q, nq), *bk = test_buffer_of(ctx, c->dt, k, nk),
                  *bv = test_buffer_of(ctx, c->dt, v, nv),
                  *bo = test_buffer_with(ctx, NULL, no * vkattn_dtype_size(c->dt) + 64),
                  *bw = nw ? test_buffer_with(ctx, NULL, nw * 4) : NULL,
                  *bg = test_buffer_with(ctx, gate, sizeof gate);
    vkattn_attention_args a = {.causal = c->causal};
    a.q = vkattn_tensor_make(bq, 0, c->dt, 4, qs);
    a.k = vkattn_tensor_make(bk, 0, c->dt, 4, ks);
    a.v = vkattn_tensor_make(bv, 0, c->dt, 4, vs);
    a.out = vkattn_tensor_make(bo, 0, c->dt, 4, os);
    a.head_mask = vkattn_tensor_make(bg, 0, F32, grank, gshape);
    if (bw)
        a.weights = vkattn_tensor_make(bw, 0, F32, c->weights, c->weights == 4 ? ws4 : ws3);
    TEST_OK(ctx, vkattn_attention(ctx, &a));
    float *got = malloc(no * 4);
    test_download_as(ctx, bo, c->dt, got, no);
    char what[200];
    snprintf(what, sizeof what, "%s head mask B%u Hq%u Hkv%u D%u/%u %s rank %u weights %u",
             test_policies[policy].name, c->B, c->Hq, c->Hkv, c->D, c->DV, vkattn_dtype_name(c->dt),
             c->mask_rank, c->weights);
    double tol = c->dt == F32 ? TEST_TOL_F32 : c->dt == F16 ? TEST_TOL_F16 : TEST_TOL_BF16;
    test_assert_close(got, want, no, tol, what);
    /* a removed head's output is exactly 0 */
    for (uint32_t b = 0; b < c->B; b++)
        for (uint32_t h = 0; h < c->Hq; h++)
            if (gate[(c->mask_rank == 2 ? b : 0) * c->Hq + h] == 0.0f)
                for (size_t e = 0; e < (size_t)c->Tq * c->DV; e++)
                    if (got[((size_t)b * c->Hq + h) * c->Tq * c->DV + e] != 0.0f)
                        fail_msg("%s: removed head %u of row %u has output %g", what, h, b,
                                 (double)got[((size_t)b * c->Hq + h) * c->Tq * c->DV + e]);
    if (nw) {
        float *gw = malloc(nw * 4);
        test_download_as(ctx, bw, F32, gw, nw);
        snprintf(what + strlen(what), sizeof what - strlen(what), " (weights)");
        test_assert_close(gw, want_w, nw, TEST_TOL_F16, what);
        free(gw);
    }
    free(q), free(k), free(v), free(want), free(want_w), free(got);
    TEST_DESTROY_BUFFERS(bq, bk, bv, bo, bw, bg);
    test_assert_no_validation_messages(ctx);
}

static void test_attention_head_mask(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        test_for_each_policy(0, run_attention_case, &cases[i]); /* subgroup + texel */
    }
}

/* ---- the layer: forward and steps with a head mask */

typedef struct layer_fixture {
    vkattn_mha_desc desc;
    float *wqkv, *wo, *bqkv, *bo;
    vkattn_mha_weights w;
} layer_fixture;

static void layer_make(layer_fixture *f, uint32_t dm, uint32_t hq, uint32_t hkv, uint32_t dh,
                       uint64_t seed)
{
    test_rng r = test_rng_seed(seed);
    uint32_t rows = (hq + 2 * hkv) * dh;
    float amp = 1.5f / sqrtf((float)dm);
    f->desc = (vkattn_mha_desc){
        .embed_dim = dm, .num_heads = hq, .num_kv_heads = hkv, .head_dim = dh, .bias = true};
    f->wqkv = test_random_array(&r, (size_t)rows * dm, amp, F32);
    f->wo = test_random_array(&r, (size_t)dm * hq * dh, amp, F32);
    f->bqkv = test_random_array(&r, rows, 0.2f, F32);
    f->bo = test_random_array(&r, dm, 0.2f, F32);
    f->w = (vkattn_mha_weights){.wqkv = f->wqkv, .wo = f->wo, .bqkv = f->bqkv, .bo = f->bo};
}

static void layer_free(layer_fixture *f) { free(f->wqkv), free(f->wo), free(f->bqkv), free(f->bo); }

/* The reference forward of x [B, T, Dm] (causal) with head mask `gate`
 * (rank 1 [Hq] or rank 2 [B, Hq]; NULL: none). */
static void layer_reference(const layer_fixture *f, const float *x, uint32_t B, uint32_t T,
                            const float *gate, uint32_t gate_rank, float *y)
{
    int64_t xs[3] = {B, T, f->desc.embed_dim}, gs[2] = {B, f->desc.num_heads};
    vkattn_ref_mha_args ra = {.causal = true};
    ra.x = vkattn_host_tensor_make((void *)x, F32, 3, xs);
    ra.y = vkattn_host_tensor_make(y, F32, 3, xs);
    if (gate)
        ra.head_mask =
            vkattn_host_tensor_make((void *)gate, F32, gate_rank, gate_rank == 1 ? gs + 1 : gs);
    char err[256];
    if (vkattn_ref_mha(&f->desc, &f->w, &ra, err, sizeof err) != VKATTN_SUCCESS)
        fail_msg("reference: %s", err);
}

static void test_layer_head_mask(void **state)
{
    test_gpu *g = *state;
    vkattn_context *ctx = g->ctx;
    layer_fixture f;
    layer_make(&f, 32, 4, 2, 8, 4200);
    const uint32_t B = 2, T = 6, dm = 32, n = B * T * dm;
    test_rng r = test_rng_seed(4201);
    float *x = test_random_array(&r, n, 1.0f, F32);
    float gate[8] = {1.0f, 0.0f, 0.5f, 2.0f, 0.0f, 1.0f, 1.0f, -0.5f}; /* [B, Hq] */
    float *want = malloc(n * 4), *got = malloc(n * 4);
    layer_reference(&f, x, B, T, gate, 2, want);
    vkattn_mha *m = test_mha_create(ctx, &f.desc, &f.w);
    int64_t xs[3] = {B, T, dm}, gs[2] = {B, 4};
    vkattn_buffer *bx = test_buffer_of(ctx, F32, x, n), *by = test_buffer_with(ctx, NULL, n * 4),
                  *bg = test_buffer_with(ctx, gate, sizeof gate);
    vkattn_mha_forward_args a = {.x = vkattn_tensor_make(bx, 0, F32, 3, xs),
                                 .y = vkattn_tensor_make(by, 0, F32, 3, xs),
                                 .causal = true,
                                 .head_mask = vkattn_tensor_make(bg, 0, F32, 2, gs)};
    TEST_OK(ctx, vkattn_mha_forward(m, &a));
    test_download_as(ctx, by, F32, got, n);
    test_assert_close(got, want, n, TEST_TOL_F32, "layer forward with a head mask");

    /* the same through a KV cache: a prefill of 4 tokens, then 2 decode
     * steps, each with the mask */
    vkattn_kv_cache_desc cd = test_kv_desc(2, 4, 8, B, 16, 4);
    vkattn_kv_cache *cache = NULL;
    TEST_OK(ctx, vkattn_kv_cache_create(ctx, &cd, &cache));
    uint32_t seqs[2] = {0, 1};
    float *rows = malloc(n * 4), *ys = malloc(n * 4);
    const uint32_t starts[3] = {0, 4, 5}, lens[3] = {4, 1, 1};
    for (int s = 0; s < 3; s++) {
        uint32_t t0 = starts[s], tn = lens[s];
        for (uint32_t b = 0; b < B; b++)
            memcpy(rows + (size_t)b * tn * dm, x + ((size_t)b * T + t0) * dm, (size_t)tn * dm * 4);
        int64_t ss[3] = {B, tn, dm};
        test_upload_as(ctx, bx, F32, rows, (size_t)B * tn * dm);
        vkattn_mha_step_args sa = {.cache = cache,
                                   .batch = B,
                                   .sequences = seqs,
                                   .x = vkattn_tensor_make(bx, 0, F32, 3, ss),
                                   .y = vkattn_tensor_make(by, 0, F32, 3, ss),
                                   .head_mask = vkattn_tensor_make(bg, 0, F32, 2, gs)};
        TEST_OK(ctx, vkattn_mha_step(m, &sa));
        test_download_as(ctx, by, F32, rows, (size_t)B * tn * dm);
        for (uint32_t b = 0; b < B; b++)
            memcpy(ys + ((size_t)b * T + t0) * dm, rows + (size_t)b * tn * dm, (size_t)tn * dm * 4);
    }
    test_assert_close(ys, want, n, TEST_TOL_F32, "layer steps with a head mask");
    /* and a [Hq] mask (every batch row) gives the reference's too */
    layer_reference(&f, x, B, T, gate + 4, 1, want);
    int64_t hs[1] = {4};
    a.head_mask = vkattn_tensor_make(bg, 16, F32, 1, hs);
    test_upload_as(ctx, bx, F32, x, n); /* (the steps took its rows) */
    TEST_OK(ctx, vkattn_mha_forward(m, &a));
    test_download_as(ctx, by, F32, got, n);
    test_assert_close(got, want, n, TEST_TOL_F32, "layer forward with a [Hq] head mask");
    vkattn_kv_cache_destroy(cache);
    vkattn_mha_destroy(m);
    TEST_DESTROY_BUFFERS(bx, by, bg);
    free(x), free(want), free(got), free(rows), free(ys);
    layer_free(&f);
    test_assert_no_validation_messages(ctx);
}

/* Bad masks: named errors; nothing is written (out keeps its NaNs). */
static void test_head_mask_errors(void **state)
{
    test_gpu *g = *state;
    vkattn_context *ctx = g->ctx;
    int64_t qs[4] = {2, 4, 3, 8}, ks[4] = {2, 2, 5, 8};
    float nan_fill[2 * 4 * 3 * 8];
    for (size_t i = 0; i < sizeof nan_fill / sizeof nan_fill[0]; i++)
        nan_fill[i] = NAN;
    vkattn_buffer *bq = test_buffer_with(ctx, NULL, 4096), *bk = test_buffer_with(ctx, NULL, 4096),
                  *bo = test_buffer_with(ctx, nan_fill, sizeof nan_fill),
                  *bg = test_buffer_with(ctx, NULL, 256);
    vkattn_attention_args good = {.q = vkattn_tensor_make(bq, 0, F32, 4, qs),
                                  .k = vkattn_tensor_make(bk, 0, F32, 4, ks),
                                  .v = vkattn_tensor_make(bk, 0, F32, 4, ks),
                                  .out = vkattn_tensor_make(bo, 0, F32, 4, qs)};
    int64_t h4[1] = {4}, h3[1] = {3}, b3[2] = {3, 4}, r3[3] = {1, 2, 4};
    struct {
        vkattn_tensor mask;
        vkattn_result code;
        const char *says;
    } bad[] = {
        {vkattn_tensor_make(bg, 0, F32, 1, h3), VKATTN_ERROR_SHAPE_MISMATCH,
         "args->head_mask.shape[0] is 3 but there are 4 query heads"},
        {vkattn_tensor_make(bg, 0, F32, 2, b3), VKATTN_ERROR_SHAPE_MISMATCH,
         "args->head_mask.shape[0] is 3: the batch 2, or 1"},
        {vkattn_tensor_make(bg, 0, F32, 3, r3), VKATTN_ERROR_INVALID_ARGUMENT,
         "args->head_mask.rank is 3"},
        {vkattn_tensor_make(bg, 0, F16, 1, h4), VKATTN_ERROR_UNSUPPORTED_DTYPE,
         "args->head_mask.dtype is f16"},
        {vkattn_tensor_make(bo, 0, F32, 1, h4), VKATTN_ERROR_INVALID_ARGUMENT,
         "overlaps args->head_mask"},
    };
    bad[4].mask.strides[0] = 1;
    vkattn_tensor strided = vkattn_tensor_make(bg, 0, F32, 1, h4);
    strided.strides[0] = 2;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        vkattn_attention_args a = good;
        a.head_mask = bad[i].mask;
        TEST_FAILS(ctx, bad[i].code, bad[i].says, vkattn_attention(ctx, &a));
    }
    vkattn_attention_args a = good;
    a.head_mask = strided;
    TEST_FAILS(ctx, VKATTN_ERROR_INVALID_ARGUMENT,
               "args->head_mask.strides[0] is 2: the heads must be contiguous",
               vkattn_attention(ctx, &a));
    float after[sizeof nan_fill / sizeof nan_fill[0]];
    test_download_as(ctx, bo, F32, after, sizeof after / sizeof after[0]);
    for (size_t i = 0; i < sizeof after / sizeof after[0]; i++)
        if (!isnan(after[i]))
            fail_msg("out[%zu] was written (%g) by a call that failed", i, (double)after[i]);
    /* the layer names its own */
    layer_fixture f;
    layer_make(&f, 32, 4, 2, 8, 4300);
    vkattn_mha *m = test_mha_create(ctx, &f.desc, &f.w);
    int64_t xs[3] = {1, 3, 32};
    vkattn_mha_forward_args fa = {.x = vkattn_tensor_make(bq, 0, F32, 3, xs),
                                  .y = vkattn_tensor_make(bk, 0, F32, 3, xs),
                                  .head_mask = vkattn_tensor_make(bg, 0, F32, 1, h3)};
    TEST_FAILS(ctx, VKATTN_ERROR_SHAPE_MISMATCH,
               "args->head_mask.shape[0] is 3 but there are 4 query heads",
               vkattn_mha_forward(m, &fa));
    vkattn_mha_destroy(m);
    layer_free(&f);
    TEST_DESTROY_BUFFERS(bq, bk, bo, bg);
    test_assert_no_validation_messages(ctx);
}

/* ---- structured pruning */

/* y of a forward of x [1, T, Dm] (causal) through `m`, with a [Hq] head
 * mask when `gate` is given. */
static void forward(vkattn_context *ctx, vkattn_mha *m, const float *x, uint32_t T,
                    const float *gate, float *y)
{
    const vkattn_mha_desc *d = vkattn_mha_config(m);
    const uint32_t dm = d->embed_dim, n = T * dm;
    int64_t xs[3] = {1, T, dm}, hs[1] = {d->num_heads};
    vkattn_buffer *bx = test_buffer_of(ctx, d->dtype, x, n),
                  *by = test_buffer_with(ctx, NULL, n * vkattn_dtype_size(d->dtype)),
                  *bg = gate ? test_buffer_with(ctx, gate, 4ull * d->num_heads) : NULL;
    vkattn_mha_forward_args a = {.x = vkattn_tensor_make(bx, 0, d->dtype, 3, xs),
                                 .y = vkattn_tensor_make(by, 0, d->dtype, 3, xs),
                                 .causal = true};
    if (bg)
        a.head_mask = vkattn_tensor_make(bg, 0, F32, 1, hs);
    TEST_OK(ctx, vkattn_mha_forward(m, &a));
    test_download_as(ctx, by, d->dtype, y, n);
    TEST_DESTROY_BUFFERS(bx, by, bg);
}

typedef struct prune_case {
    const char *name;
    uint32_t hq, hkv, dh;
    uint32_t keep[8], count;
    uint32_t want_hkv; /* the pruned layer's KV heads */
    bool mods;         /* sinks and the standard ALiBi slopes */
    vkattn_dtype weight_dtype;
} prune_case;

static const prune_case prunes[] = {
    {"MHA, keep 3 of 4", 4, 4, 8, {0, 2, 3}, 3, 3, false, F32},
    {"GQA 4, even groups (2 + 2)", 8, 2, 8, {5, 0, 1, 4}, 4, 2, false, F32},
    {"GQA 4, uneven groups (3 + 1): KV repeated", 8, 2, 8, {0, 1, 2, 5}, 4, 4, false, F32},
    {"GQA 4, a whole group gone", 8, 2, 8, {4, 5, 6, 7}, 4, 1, false, F32},
    {"sinks + ALiBi follow their heads", 6, 3, 8, {1, 3, 4, 5}, 4, 4, true, F32},
    {"q8_0 weights", 4, 2, 32, {1, 2}, 2, 2, false, VKATTN_DTYPE_Q8_0},
};

static void run_prune(test_gpu *g, uint32_t policy, const void *arg)
{
    const prune_case *c = arg;
    vkattn_context *ctx = g->ctx;
    layer_fixture f;
    const uint32_t dm = c->weight_dtype == VKATTN_DTYPE_Q8_0 ? 64 : c->hq * c->dh, T = 7;
    layer_make(&f, dm, c->hq, c->hkv, c->dh, 4400 + c->hq * 10 + c->count);
    f.desc.weight_dtype = c->weight_dtype;
    float sinks[8];
    if (c->mods) {
        f.desc.sinks = f.desc.alibi = true;
        for (uint32_t h = 0; h < c->hq; h++)
            sinks[h] = 0.3f * (float)h - 0.5f;
        f.w.sinks = sinks;
    }
    test_rng r = test_rng_seed(4401);
    float *x = test_random_array(&r, (size_t)T * dm, 1.0f, F32);
    float *masked = malloc((size_t)T * dm * 4), *pruned = malloc((size_t)T * dm * 4);
    vkattn_mha *m = test_mha_create(ctx, &f.desc, &f.w);
    float gate[8] = {0};
    for (uint32_t i = 0; i < c->count; i++)
        gate[c->keep[i]] = 1.0f;
    forward(ctx, m, x, T, gate, masked);
    TEST_OK(ctx, vkattn_mha_prune_heads(m, c->keep, c->count));
    const vkattn_mha_desc *d = vkattn_mha_config(m);
    assert_int_equal(d->num_heads, c->count);
    assert_int_equal(d->num_kv_heads, c->want_hkv);
    assert_int_equal(d->head_dim, c->dh);
    forward(ctx, m, x, T, NULL, pruned);
    char what[160];
    snprintf(what, sizeof what, "%s %s: pruned vs masked", test_policies[policy].name, c->name);
    test_assert_close(pruned, masked, (size_t)T * dm, TEST_TOL_F32, what);

    /* steps over a cache of the pruned shape give the pruned forward */
    vkattn_kv_cache_desc cd = test_kv_desc(d->num_kv_heads, d->num_heads, d->head_dim, 1, 8, 0);
    vkattn_kv_cache *cache = NULL;
    TEST_OK(ctx, vkattn_kv_cache_create(ctx, &cd, &cache));
    int64_t xs[3] = {1, T, dm};
    vkattn_buffer *bx = test_buffer_of(ctx, F32, x, (size_t)T * dm),
                  *by = test_buffer_with(ctx, NULL, (size_t)T * dm * 4);
    uint32_t seq = 0;
    vkattn_mha_step_args sa = {.cache = cache,
                               .batch = 1,
                               .sequences = &seq,
                               .x = vkattn_tensor_make(bx, 0, F32, 3, xs),
                               .y = vkattn_tensor_make(by, 0, F32, 3, xs)};
    TEST_OK(ctx, vkattn_mha_step(m, &sa));
    float *stepped = malloc((size_t)T * dm * 4);
    test_download_as(ctx, by, F32, stepped, (size_t)T * dm);
    snprintf(what, sizeof what, "%s %s: pruned steps vs pruned forward", test_policies[policy].name,
             c->name);
    test_assert_close(stepped, pruned, (size_t)T * dm, TEST_TOL_F32, what);
    vkattn_kv_cache_destroy(cache);
    TEST_DESTROY_BUFFERS(bx, by);
    vkattn_mha_destroy(m);
    free(x), free(masked), free(pruned), free(stepped);
    layer_free(&f);
    test_assert_no_validation_messages(ctx);
}

static void test_prune_equals_masked(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof prunes / sizeof prunes[0]; i++)
        test_for_each_policy(i % 2 ? 1 : 0, run_prune, &prunes[i]);
}

/* vkattn_mha_get_weights gives back what was set (f32 exactly, the packed
 * Wqkv split into Wq, Wk, Wv), and bad head lists fail by name leaving
 * the layer as it was. */
static void test_prune_errors_and_weights(void **state)
{
    test_gpu *g = *state;
    vkattn_context *ctx = g->ctx;
    layer_fixture f;
    layer_make(&f, 32, 4, 2, 8, 4500);
    vkattn_mha *m = test_mha_create(ctx, &f.desc, &f.w);
    const size_t nq = 32 * 32, nk = 16 * 32;
    float *wq = malloc(nq * 4), *wk = malloc(nk * 4), *wv = malloc(nk * 4), *wo = malloc(nq * 4),
          *bq = malloc(32 * 4), *bk = malloc(16 * 4), *bv = malloc(16 * 4), *bo = malloc(32 * 4);
    vkattn_mha_weight_copy wc = {wq, wk, wv, wo, bq, bk, bv, bo};
    TEST_OK(ctx, vkattn_mha_get_weights(m, &wc));
    assert_memory_equal(wq, f.wqkv, nq * 4);
    assert_memory_equal(wk, f.wqkv + nq, nk * 4);
    assert_memory_equal(wv, f.wqkv + nq + nk, nk * 4);
    assert_memory_equal(wo, f.wo, nq * 4);
    assert_memory_equal(bv, f.bqkv + 48, 16 * 4);
    assert_memory_equal(bo, f.bo, 32 * 4);
    test_rng r = test_rng_seed(4501);
    float *x = test_random_array(&r, 5 * 32, 1.0f, F32), y0[5 * 32], y1[5 * 32];
    forward(ctx, m, x, 5, NULL, y0);
    const uint32_t dup[2] = {1, 1}, high[2] = {0, 4};
    TEST_FAILS(ctx, VKATTN_ERROR_INVALID_ARGUMENT, "keep is NULL",
               vkattn_mha_prune_heads(m, NULL, 2));
    TEST_FAILS(ctx, VKATTN_ERROR_INVALID_ARGUMENT, "count 0", vkattn_mha_prune_heads(m, dup, 0));
    TEST_FAILS(ctx, VKATTN_ERROR_INVALID_ARGUMENT, "keep[1] is 1, which is already kept",
               vkattn_mha_prune_heads(m, dup, 2));
    TEST_FAILS(ctx, VKATTN_ERROR_INVALID_ARGUMENT, "keep[1] is 4: the layer has heads 0..3",
               vkattn_mha_prune_heads(m, high, 2));
    assert_int_equal(vkattn_mha_config(m)->num_heads, 4);
    forward(ctx, m, x, 5, NULL, y1);
    assert_memory_equal(y0, y1, sizeof y0);
    vkattn_mha_destroy(m);
    free(wq), free(wk), free(wv), free(wo), free(bq), free(bk), free(bv), free(bo), free(x);
    layer_free(&f);
    test_assert_no_validation_messages(ctx);
}

/* ---- importance and parameter counts */

static void test_head_importance(void **state)
{
    test_gpu *g = *state;
    vkattn_context *ctx = g->ctx;
    layer_fixture f;
    const uint32_t dm = 32, hq = 4, dh = 8, B = 2, T = 5, n = B * T * dm;
    layer_make(&f, dm, hq, 2, dh, 4600);
    for (uint32_t r = 0; r < dm; r++) /* head 2 writes nothing into y */
        memset(f.wo + (size_t)r * hq * dh + 2 * dh, 0, dh * sizeof(float));
    test_rng rng = test_rng_seed(4601);
    float *x = test_random_array(&rng, n, 1.0f, F32);
    vkattn_mha *m = test_mha_create(ctx, &f.desc, &f.w);
    int64_t xs[3] = {B, T, dm};
    vkattn_buffer *bx = test_buffer_of(ctx, F32, x, n), *by = test_buffer_with(ctx, NULL, n * 4);
    vkattn_mha_forward_args a = {.x = vkattn_tensor_make(bx, 0, F32, 3, xs),
                                 .y = vkattn_tensor_make(by, 0, F32, 3, xs),
                                 .causal = true};
    float imp[4];
    TEST_OK(ctx, vkattn_mha_head_importance(m, &a, imp));
    /* the reference's: RMS of y - y with head h masked */
    float *full = malloc(n * 4), *masked = malloc(n * 4), *y = malloc(n * 4);
    layer_reference(&f, x, B, T, NULL, 0, full);
    for (uint32_t h = 0; h < hq; h++) {
        float gate[4] = {1, 1, 1, 1};
        gate[h] = 0;
        layer_reference(&f, x, B, T, gate, 1, masked);
        double ss = 0;
        for (uint32_t i = 0; i < n; i++)
            ss += ((double)full[i] - masked[i]) * ((double)full[i] - masked[i]);
        double want = sqrt(ss / n);
        if (!(fabs(imp[h] - want) <= 1e-4 * (1e-3 + want)))
            fail_msg("importance[%u] is %g, the reference's %g", h, (double)imp[h], want);
    }
    assert_true(imp[2] == 0.0f);
    for (uint32_t h = 0; h < hq; h++)
        if (h != 2 && !(imp[h] > 0.0f))
            fail_msg("importance[%u] is %g: only head 2 contributes nothing", h, (double)imp[h]);
    /* y is left unmasked */
    test_download_as(ctx, by, F32, y, n);
    test_assert_close(y, full, n, TEST_TOL_F32, "y after the importance");
    float gate_buf_host[4] = {1, 1, 1, 1};
    vkattn_buffer *bg = test_buffer_with(ctx, gate_buf_host, sizeof gate_buf_host);
    int64_t hs[1] = {4};
    a.head_mask = vkattn_tensor_make(bg, 0, F32, 1, hs);
    TEST_FAILS(ctx, VKATTN_ERROR_INVALID_ARGUMENT, "args->head_mask is given",
               vkattn_mha_head_importance(m, &a, imp));
    vkattn_mha_destroy(m);
    TEST_DESTROY_BUFFERS(bx, by, bg);
    free(x), free(full), free(masked), free(y);
    layer_free(&f);
    test_assert_no_validation_messages(ctx);
}

static void test_param_counts(void **state)
{
    (void)state;
    char err[256];
    vkattn_mha_param_counts c;
    /* BERT-base / GPT-2 small: 4 x 768^2 weights (2.36 M), 4 x 768 biases */
    vkattn_mha_desc d = {.embed_dim = 768, .num_heads = 12};
    assert_int_equal(vkattn_mha_param_count(&d, &c, err, sizeof err), VKATTN_SUCCESS);
    assert_int_equal(c.weights, 2359296);
    assert_int_equal(c.wq, 589824);
    assert_int_equal(c.biases, 0);
    assert_int_equal(c.bytes, 2359296ull * 4);
    d.bias = true;
    assert_int_equal(vkattn_mha_param_count(&d, &c, err, sizeof err), VKATTN_SUCCESS);
    assert_int_equal(c.biases, 3072);
    assert_int_equal(c.total, 2362368);
    /* torch's add_bias_kv: bias_k and bias_v of 768 more, in the layer's f16 */
    d.add_bias_kv = true;
    d.dtype = VKATTN_DTYPE_F16;
    assert_int_equal(vkattn_mha_param_count(&d, &c, err, sizeof err), VKATTN_SUCCESS);
    assert_int_equal(c.bias_k, 768);
    assert_int_equal(c.bias_v, 768);
    assert_int_equal(c.total, 2363904); /* sum(p.numel() for p in parameters()) */
    assert_int_equal(c.bytes, 2363904ull * 2);
    /* Llama 3 8B's GQA: Wk and Wv a quarter of Wq; f16 and q8_0 bytes */
    d = (vkattn_mha_desc){
        .embed_dim = 4096, .num_heads = 32, .num_kv_heads = 8, .dtype = VKATTN_DTYPE_F16};
    assert_int_equal(vkattn_mha_param_count(&d, &c, err, sizeof err), VKATTN_SUCCESS);
    assert_int_equal(c.wq, 16777216);
    assert_int_equal(c.wk, 4194304);
    assert_int_equal(c.wv, 4194304);
    assert_int_equal(c.total, 41943040);
    assert_int_equal(c.bytes, 41943040ull * 2);
    d.weight_dtype = VKATTN_DTYPE_Q8_0;
    assert_int_equal(vkattn_mha_param_count(&d, &c, err, sizeof err), VKATTN_SUCCESS);
    assert_int_equal(c.bytes, 41943040ull / 32 * 34);
    /* MLA-style heads: V's own head dim */
    d = (vkattn_mha_desc){.embed_dim = 256, .num_heads = 2, .head_dim = 192, .v_head_dim = 128};
    assert_int_equal(vkattn_mha_param_count(&d, &c, err, sizeof err), VKATTN_SUCCESS);
    assert_int_equal(c.wq, 2 * 192 * 256);
    assert_int_equal(c.wv, 2 * 128 * 256);
    assert_int_equal(c.wo, 256 * 2 * 128);
    d.num_kv_heads = 3;
    assert_int_equal(vkattn_mha_param_count(&d, &c, err, sizeof err),
                     VKATTN_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(err, "desc->num_kv_heads 3 does not divide desc->num_heads 2"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_attention_head_mask),
        cmocka_unit_test(test_layer_head_mask),
        cmocka_unit_test(test_head_mask_errors),
        cmocka_unit_test(test_prune_equals_masked),
        cmocka_unit_test(test_prune_errors_and_weights),
        cmocka_unit_test(test_head_importance),
        cmocka_unit_test(test_param_counts),
    };
    return cmocka_run_group_tests(tests, test_gpu_setup, test_gpu_teardown);
}
