/* Masks as PyTorch users pass them, on all four kernel policies: rank 2
 * [Tq, Tk], rank 3 [B*Hq, Tq, Tk] (nn.MultiheadAttention) and rank 4
 * [B, Hq, Tq, Tk], any dimension 1 (broadcast through stride 0), additive
 * f32/f16 or boolean u8 in both conventions, padded strides and odd
 * offsets. Each case runs vkattn_attention (and the weights kernel) on the
 * compact mask and compares with vkattn_ref_attention on the same compact
 * mask, which in turn must equal the reference on the mask expanded here
 * into a dense additive [B, Hq, Tq, Tk] array (0 / -inf for booleans). Also
 * the chunk helper and the MHA layer with broadcast and boolean masks, and
 * a rank-3 query broadcast over K/V's batch. */
#include "test_policy.h"
#include "test_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

/* Which of [B, Hq, Tq, Tk] the mask has as 1 (for rank 3, BH covers both
 * its batch and head; rank 2 has neither). */
enum { BC_B = 1, BC_H = 2, BC_Q = 4, BC_K = 8, BC_BH = BC_B | BC_H };

typedef struct mask_case {
    uint32_t B, Hq, Hkv, Tq, Tk, D;
    vkattn_dtype dt;  /* q, k, v, out */
    vkattn_dtype mdt; /* the mask's: f32, f16 or u8 */
    bool blocks;      /* u8: nonzero hides (nn.MultiheadAttention) */
    uint32_t rank;
    uint32_t bcast; /* BC_* */
    uint32_t pitch; /* extra elements after each mask row (strides) */
    uint32_t skew;  /* elements before the mask's first (offset) */
    bool causal;
    uint32_t window;
    float softcap;
    int weights;     /* 0, 3 or 4 */
    bool all_hidden; /* every mask value hides (scalar masks) */
} mask_case;

static void describe(const mask_case *c, uint32_t policy, char *buf, size_t size)
{
    snprintf(buf, size,
             "%s B%u Hq%u Hkv%u Tq%u Tk%u D%u %s mask %s%s rank%u bcast%u pitch%u skew%u "
             "causal%d window%u softcap%g weights%d",
             test_policies[policy].name, c->B, c->Hq, c->Hkv, c->Tq, c->Tk, c->D,
             vkattn_dtype_name(c->dt), vkattn_dtype_name(c->mdt), c->blocks ? "(blocks)" : "",
             c->rank, c->bcast, c->pitch, c->skew, c->causal, c->window, (double)c->softcap,
             c->weights);
}

/* The compact mask of a case: shape, strides (elements), host bytes. */
typedef struct mask_data {
    int64_t shape[4], strides[4];
    size_t elems; /* spanned by the strides, skew included */
    void *bytes;
} mask_data;

static void mask_layout(const mask_case *c, mask_data *m)
{
    int64_t b = c->bcast & BC_B ? 1 : c->B, h = c->bcast & BC_H ? 1 : c->Hq;
    int64_t q = c->bcast & BC_Q ? 1 : c->Tq, k = c->bcast & BC_K ? 1 : c->Tk;
    int64_t dims[4] = {b, h, q, k};
    if (c->rank == 3)
        dims[1] = (c->bcast & BC_BH) == BC_BH ? 1 : (int64_t)c->B * c->Hq;
    const int64_t *s = dims + (4 - c->rank);
    memcpy(m->shape, s, c->rank * sizeof *s);
    int64_t stride = 1;
    for (uint32_t d = c->rank; d-- > 0;) {
        m->strides[d] = stride;
        stride *= m->shape[d] + (d == c->rank - 1 ? c->pitch : 0);
    }
    m->elems = (size_t)stride + c->skew;
}

/* Element of the compact mask that (b, h, i, j) reads. */
static size_t mask_index(const mask_case *c, const mask_data *m, uint32_t b, uint32_t h, uint32_t i,
                         uint32_t j)
{
    int64_t idx[4] = {b, h, i, j};
    int64_t full[4];
    if (c->rank == 4)
        memcpy(full, idx, sizeof idx);
    else if (c->rank == 3)
        full[1] = (int64_t)b * c->Hq + h, full[2] = i, full[3] = j;
    else
        full[2] = i, full[3] = j;
    size_t e = c->skew;
    for (uint32_t d = 0; d < c->rank; d++) {
        int64_t x = full[4 - c->rank + d];
        e += (size_t)((m->shape[d] == 1 ? 0 : x) * m->strides[d]);
    }
    return e;
}

/* Random mask values; booleans as arbitrary nonzero bytes too. */
static void mask_fill(const mask_case *c, mask_data *m, test_rng *rng)
{
    size_t es = vkattn_dtype_size(c->mdt);
    m->bytes = calloc(m->elems, es);
    assert_non_null(m->bytes);
    for (size_t e = 0; e < m->elems; e++) {
        if (c->mdt == VKATTN_DTYPE_U8) {
            uint32_t r = test_rng_below(rng, 100);
            uint8_t v = (uint8_t)(r < 50 ? 1 : r < 75 ? 0 : 2 + test_rng_below(rng, 254));
            if (c->all_hidden)
                v = c->blocks ? 1 : 0;
            ((uint8_t *)m->bytes)[e] = v;
        } else {
            float v = test_rng_uniform(rng, -2.0f, 2.0f);
            if (c->all_hidden || test_rng_below(rng, 100) < 20)
                v = -INFINITY;
            test_store(m->bytes, c->mdt, e, v);
        }
    }
}

/* The additive value of a compact mask element. */
static float mask_value(const mask_case *c, const mask_data *m, size_t e)
{
    if (c->mdt != VKATTN_DTYPE_U8)
        return test_load(m->bytes, c->mdt, e);
    bool set = ((const uint8_t *)m->bytes)[e] != 0;
    return set != c->blocks ? 0.0f : -INFINITY;
}

static void assert_no_nan(const float *x, size_t n, const char *what)
{
    for (size_t i = 0; i < n; i++)
        if (isnan(x[i]))
            fail_msg("%s: element %zu is NaN", what, i);
}

static void fill_nan(float *x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        x[i] = NAN;
}

static void run_case(test_gpu *g, uint32_t policy, const void *arg)
{
    const mask_case *c = arg;
    vkattn_context *ctx = g->ctx;
    char what[320];
    describe(c, policy, what, sizeof what);
    test_rng rng = test_rng_seed(77u + c->Tq * 13u + c->Tk + c->bcast * 101u + c->rank);
    size_t nq = (size_t)c->B * c->Hq * c->Tq * c->D, nk = (size_t)c->B * c->Hkv * c->Tk * c->D;
    size_t nd = (size_t)c->B * c->Hq * c->Tq * c->Tk;
    size_t nw = c->weights == 3 ? (size_t)c->B * c->Tq * c->Tk : nd;
    float *q = test_random_array(&rng, nq, 2.0f, c->dt);
    float *k = test_random_array(&rng, nk, 2.0f, c->dt);
    float *v = test_random_array(&rng, nk, 1.0f, c->dt);
    mask_data m;
    mask_layout(c, &m);
    mask_fill(c, &m, &rng);
    float *dense = malloc(nd * sizeof *dense);
    float *want = malloc(nq * 4), *dense_want = malloc(nq * 4), *got = malloc(nq * 4);
    float *want_w = malloc(nw * 4), *got_w = malloc(nw * 4);
    assert_true(dense && want && dense_want && got && want_w && got_w);
    for (uint32_t b = 0; b < c->B; b++)
        for (uint32_t h = 0; h < c->Hq; h++)
            for (uint32_t i = 0; i < c->Tq; i++)
                for (uint32_t j = 0; j < c->Tk; j++)
                    dense[(((size_t)b * c->Hq + h) * c->Tq + i) * c->Tk + j] =
                        mask_value(c, &m, mask_index(c, &m, b, h, i, j));
    fill_nan(want, nq), fill_nan(dense_want, nq), fill_nan(got, nq);
    fill_nan(want_w, nw), fill_nan(got_w, nw);

    int64_t qs[4] = {c->B, c->Hq, c->Tq, c->D}, ks[4] = {c->B, c->Hkv, c->Tk, c->D};
    int64_t ds[4] = {c->B, c->Hq, c->Tq, c->Tk}, ws[4] = {c->B, c->Hq, c->Tq, c->Tk};
    if (c->weights == 3)
        ws[1] = c->Tq, ws[2] = c->Tk;
    vkattn_bool_mask conv =
        c->blocks ? VKATTN_BOOL_MASK_TRUE_BLOCKS : VKATTN_BOOL_MASK_TRUE_ATTENDS;
    size_t es = vkattn_dtype_size(c->mdt);
    vkattn_host_tensor hm = {(char *)m.bytes + c->skew * es, c->mdt, c->rank, {0}, {0}};
    memcpy(hm.shape, m.shape, sizeof m.shape), memcpy(hm.strides, m.strides, sizeof m.strides);
    vkattn_ref_attention_args r = {
        .q = vkattn_host_tensor_make(q, VKATTN_DTYPE_F32, 4, qs),
        .k = vkattn_host_tensor_make(k, VKATTN_DTYPE_F32, 4, ks),
        .v = vkattn_host_tensor_make(v, VKATTN_DTYPE_F32, 4, ks),
        .out = vkattn_host_tensor_make(want, VKATTN_DTYPE_F32, 4, qs),
        .mask = hm,
        .causal = c->causal,
        .bool_mask = conv,
        .window = c->window,
        .softcap = c->softcap,
    };
    if (c->weights)
        r.weights = vkattn_host_tensor_make(want_w, VKATTN_DTYPE_F32, (uint32_t)c->weights, ws);
    char err[512] = "";
    if (vkattn_ref_attention(&r, err, sizeof err) != VKATTN_SUCCESS)
        fail_msg("reference failed on %s: %s", what, err);
    /* the reference's broadcasting against the mask expanded by hand */
    vkattn_ref_attention_args rd = r;
    rd.mask = vkattn_host_tensor_make(dense, VKATTN_DTYPE_F32, 4, ds);
    rd.out = vkattn_host_tensor_make(dense_want, VKATTN_DTYPE_F32, 4, qs);
    rd.weights.data = NULL;
    if (vkattn_ref_attention(&rd, err, sizeof err) != VKATTN_SUCCESS)
        fail_msg("dense reference failed on %s: %s", what, err);
    test_assert_close(want, dense_want, nq, 1e-6, what);

    vkattn_buffer *bq = test_buffer_of(ctx, c->dt, q, nq);
    vkattn_buffer *bk = test_buffer_of(ctx, c->dt, k, nk);
    vkattn_buffer *bv = test_buffer_of(ctx, c->dt, v, nk);
    vkattn_buffer *bo = test_buffer_of(ctx, c->dt, got, nq);
    vkattn_buffer *bm = test_buffer_with(ctx, m.bytes, m.elems * es);
    vkattn_buffer *bw = c->weights ? test_buffer_of(ctx, VKATTN_DTYPE_F32, got_w, nw) : NULL;
    vkattn_attention_args a = {
        .q = vkattn_tensor_make(bq, 0, c->dt, 4, qs),
        .k = vkattn_tensor_make(bk, 0, c->dt, 4, ks),
        .v = vkattn_tensor_make(bv, 0, c->dt, 4, ks),
        .out = vkattn_tensor_make(bo, 0, c->dt, 4, qs),
        .mask = {bm, c->skew * es, c->mdt, c->rank, {0}, {0}},
        .causal = c->causal,
        .bool_mask = conv,
        .window = c->window,
        .softcap = c->softcap,
    };
    memcpy(a.mask.shape, m.shape, sizeof m.shape),
        memcpy(a.mask.strides, m.strides, sizeof m.strides);
    if (bw)
        a.weights = vkattn_tensor_make(bw, 0, VKATTN_DTYPE_F32, (uint32_t)c->weights, ws);
    TEST_OK(ctx, vkattn_attention(ctx, &a));

    double tol = c->dt == VKATTN_DTYPE_F16 ? TEST_TOL_F16 : TEST_TOL_F32;
    test_download_as(ctx, bo, c->dt, got, nq);
    assert_no_nan(got, nq, what);
    test_assert_close(got, want, nq, tol, what);
    for (size_t i = 0; i < nq; i++)
        if (want[i] == 0.0f && got[i] != 0.0f)
            fail_msg("%s: out[%zu] is %g where the reference has an exact 0", what, i,
                     (double)got[i]);
    if (bw) {
        TEST_OK(ctx, vkattn_buffer_download(bw, 0, got_w, nw * 4));
        assert_no_nan(got_w, nw, what);
        test_assert_close(got_w, want_w, nw, tol, what);
    }
    TEST_DESTROY_BUFFERS(bq, bk, bv, bo, bm, bw);
    free(q), free(k), free(v), free(m.bytes), free(dense);
    free(want), free(dense_want), free(got), free(want_w), free(got_w);
}

#define F32 VKATTN_DTYPE_F32
#define F16 VKATTN_DTYPE_F16
#define U8 VKATTN_DTYPE_U8

static void run_all(const mask_case *cases, size_t n)
{
    for (size_t i = 0; i < n; i++)
        test_for_each_policy(0, run_case, &cases[i]);
}

static void test_broadcast_shapes(void **state)
{
    (void)state;
    static const mask_case cases[] = {
        /* [1, Tk]: one key row for everything (SDPA's common padding form) */
        {2, 4, 2, 19, 45, 32, F32, F32, false, 2, BC_Q, 0, 0, false, 0, 0, 0, false},
        /* [Tq, 1]: whole query rows, -inf hides a row (zeros) */
        {2, 2, 2, 21, 30, 16, F32, F32, false, 2, BC_K, 0, 0, true, 0, 0, 0, false},
        /* [B, 1, 1, Tk] boolean, GQA, f16 */
        {3, 4, 2, 17, 40, 32, F16, U8, false, 4, BC_H | BC_Q, 0, 0, true, 0, 0, 0, false},
        /* [1, 1, Tq, Tk] boolean True = blocked, weights per head */
        {2, 2, 1, 13, 29, 16, F32, U8, true, 4, BC_B | BC_H, 0, 0, true, 0, 0, 4, false},
        /* [1, Hq, 1, Tk] f16 with a window and softcap */
        {2, 4, 4, 33, 50, 32, F32, F16, false, 4, BC_B | BC_Q, 0, 0, true, 9, 30.0f, 0, false},
        /* [B, Hq, Tq, 1] */
        {2, 3, 1, 9, 26, 8, F32, F32, false, 4, BC_K, 0, 0, false, 0, 0, 3, false},
        /* full [B, Hq, Tq, Tk] boolean over several key tiles */
        {2, 2, 2, 70, 130, 64, F32, U8, false, 4, 0, 0, 0, true, 0, 0, 0, false},
    };
    run_all(cases, sizeof cases / sizeof cases[0]);
}

static void test_rank3_and_strides(void **state)
{
    (void)state;
    static const mask_case cases[] = {
        /* nn.MultiheadAttention's [B*Hq, Tq, Tk], True = blocked, MQA,
         * weights averaged over heads */
        {2, 4, 1, 15, 23, 32, F32, U8, true, 3, 0, 0, 0, false, 0, 0, 3, false},
        /* [1, Tq, Tk] float with padded rows and an offset */
        {2, 2, 2, 18, 37, 16, F32, F32, false, 3, BC_BH, 5, 3, true, 0, 0, 0, false},
        /* [B*Hq, 1, Tk] f16 with padded rows, odd offset, f16 q/k/v */
        {2, 2, 1, 11, 35, 16, F16, F16, false, 3, BC_Q, 3, 1, false, 0, 0, 0, false},
        /* u8 at an odd byte offset with padded rows */
        {1, 4, 2, 27, 41, 32, F32, U8, false, 4, BC_B, 7, 5, false, 0, 0, 4, false},
    };
    run_all(cases, sizeof cases / sizeof cases[0]);
}

static void test_scalar_masks(void **state)
{
    (void)state;
    static const mask_case cases[] = {
        /* [1, 1] True = blocked, value 1: every key hidden -> zeros */
        {1, 2, 2, 5, 9, 8, F32, U8, true, 2, BC_Q | BC_K, 0, 0, false, 0, 0, 4, true},
        /* [1, 1, 1, 1] -inf: zeros, causal */
        {2, 2, 1, 6, 6, 8, F32, F32, false, 4, BC_B | BC_H | BC_Q | BC_K, 0, 0, true, 0, 0, 0,
         true},
        /* [1, 1, 1, 1] True = attends with a random value */
        {2, 2, 2, 7, 12, 16, F32, U8, false, 4, BC_B | BC_H | BC_Q | BC_K, 0, 0, false, 0, 0, 0,
         false},
    };
    run_all(cases, sizeof cases / sizeof cases[0]);
}

/* vkattn_attention_chunk narrows a broadcast mask only where it is not 1:
 * pieces of a causal call with a [B, 1, 1, Tk] boolean mask and a [Tq, 1]
 * float one write what the whole call writes. */
static void run_chunks(test_gpu *g, uint32_t policy, const void *arg)
{
    (void)policy;
    const int *rank_two = arg;
    vkattn_context *ctx = g->ctx;
    enum { B = 2, H = 2, TQ = 40, TK = 56, D = 16 };
    test_rng rng = test_rng_seed(4242u + (uint64_t)*rank_two);
    size_t nq = (size_t)B * H * TQ * D, nk = (size_t)B * H * TK * D;
    float *q = test_random_array(&rng, nq, 2.0f, VKATTN_DTYPE_F32);
    float *k = test_random_array(&rng, nk, 2.0f, VKATTN_DTYPE_F32);
    float *v = test_random_array(&rng, nk, 1.0f, VKATTN_DTYPE_F32);
    float *want = malloc(nq * 4), *got = malloc(nq * 4);
    float fmask[TQ];
    uint8_t bmask[B * TK];
    assert_true(want && got);
    for (int i = 0; i < TQ; i++)
        fmask[i] = i % 7 == 3 ? -INFINITY : test_rng_uniform(&rng, -1.0f, 1.0f);
    for (int i = 0; i < B * TK; i++)
        bmask[i] = test_rng_below(&rng, 4) != 0;
    int64_t qs[4] = {B, H, TQ, D}, ks[4] = {B, H, TK, D};
    int64_t bs[4] = {B, 1, 1, TK}, fs[2] = {TQ, 1};
    vkattn_ref_attention_args r = {
        .q = vkattn_host_tensor_make(q, VKATTN_DTYPE_F32, 4, qs),
        .k = vkattn_host_tensor_make(k, VKATTN_DTYPE_F32, 4, ks),
        .v = vkattn_host_tensor_make(v, VKATTN_DTYPE_F32, 4, ks),
        .out = vkattn_host_tensor_make(want, VKATTN_DTYPE_F32, 4, qs),
        .causal = true,
    };
    r.mask = *rank_two ? vkattn_host_tensor_make(fmask, VKATTN_DTYPE_F32, 2, fs)
                       : vkattn_host_tensor_make(bmask, VKATTN_DTYPE_U8, 4, bs);
    char err[512] = "";
    if (vkattn_ref_attention(&r, err, sizeof err) != VKATTN_SUCCESS)
        fail_msg("reference: %s", err);
    vkattn_buffer *bq = test_buffer_of(ctx, VKATTN_DTYPE_F32, q, nq);
    vkattn_buffer *bk = test_buffer_of(ctx, VKATTN_DTYPE_F32, k, nk);
    vkattn_buffer *bv = test_buffer_of(ctx, VKATTN_DTYPE_F32, v, nk);
    vkattn_buffer *bo = test_buffer_with(ctx, NULL, nq * 4);
    vkattn_buffer *bm = *rank_two ? test_buffer_with(ctx, fmask, sizeof fmask)
                                  : test_buffer_with(ctx, bmask, sizeof bmask);
    vkattn_attention_args a = {
        .q = vkattn_tensor_make(bq, 0, VKATTN_DTYPE_F32, 4, qs),
        .k = vkattn_tensor_make(bk, 0, VKATTN_DTYPE_F32, 4, ks),
        .v = vkattn_tensor_make(bv, 0, VKATTN_DTYPE_F32, 4, ks),
        .out = vkattn_tensor_make(bo, 0, VKATTN_DTYPE_F32, 4, qs),
        .causal = true,
    };
    a.mask = *rank_two ? vkattn_tensor_make(bm, 0, VKATTN_DTYPE_F32, 2, fs)
                       : vkattn_tensor_make(bm, 0, VKATTN_DTYPE_U8, 4, bs);
    const uint32_t cuts[] = {0, 9, 23, TQ};
    for (size_t i = 0; i + 1 < sizeof cuts / sizeof cuts[0]; i++) {
        vkattn_attention_args piece;
        if (vkattn_attention_chunk(&a, cuts[i], cuts[i + 1], &piece, err, sizeof err) !=
            VKATTN_SUCCESS)
            fail_msg("chunk [%u, %u): %s", cuts[i], cuts[i + 1], err);
        TEST_OK(ctx, vkattn_attention(ctx, &piece));
    }
    TEST_OK(ctx, vkattn_buffer_download(bo, 0, got, nq * 4));
    assert_no_nan(got, nq, "chunks");
    test_assert_close(got, want, nq, TEST_TOL_F32,
                      *rank_two ? "chunks [Tq, 1]" : "chunks [B,1,1,Tk]");
    TEST_DESTROY_BUFFERS(bq, bk, bv, bo, bm);
    free(q), free(k), free(v), free(want), free(got);
}

static void test_chunks_keep_broadcasts(void **state)
{
    (void)state;
    static const int forms[2] = {0, 1};
    for (int i = 0; i < 2; i++)
        test_for_each_policy(0, run_chunks, &forms[i]);
}

/* q of rank 3 [Hq, Tq, D] against K/V [B, Hkv, Tk, D] (SDPA's broadcast):
 * equals q copied to every batch row, on the GPU and in the reference
 * (which must agree bit for bit with its own expanded call); GQA, causal, a
 * key padding mask, f32 and f16, head dims 64 and 20 (f32: element path) or
 * 40 (f16). */
static void run_broadcast_query(test_gpu *g, uint32_t policy, const void *arg)
{
    const vkattn_dtype dt = *(const vkattn_dtype *)arg;
    vkattn_context *ctx = g->ctx;
    /* (f16 at a head dim that is not a multiple of 8 needs 16-bit storage) */
    const uint32_t dims[2] = {dt == VKATTN_DTYPE_F32 ? 20 : 40, 64};
    for (int di = 0; di < 2; di++) {
        const uint32_t d = dims[di];
        enum { B = 3, HQ = 4, HKV = 2, TQ = 9, TK = 13 };
        test_rng rng = test_rng_seed(515u + d + policy);
        size_t n1 = (size_t)HQ * TQ * d, nq = B * n1, nk = (size_t)B * HKV * TK * d;
        float *q = test_random_array(&rng, n1, 2.0f, dt), *qb = malloc(nq * 4);
        float *k = test_random_array(&rng, nk, 2.0f, dt),
              *v = test_random_array(&rng, nk, 1.0f, dt);
        float *want = malloc(nq * 4), *want3 = malloc(nq * 4), *got = malloc(nq * 4);
        assert_true(qb && want && want3 && got);
        for (int b = 0; b < B; b++)
            memcpy(qb + b * n1, q, n1 * 4);
        uint8_t pad[B * TK];
        for (int i = 0; i < B * TK; i++)
            pad[i] = i % 5 != 2;
        const int64_t q3[3] = {HQ, TQ, d}, q4[4] = {B, HQ, TQ, d}, ks[4] = {B, HKV, TK, d},
                      ps[2] = {B, TK};
        vkattn_ref_attention_args r = {
            .q = vkattn_host_tensor_make(qb, VKATTN_DTYPE_F32, 4, q4),
            .k = vkattn_host_tensor_make(k, VKATTN_DTYPE_F32, 4, ks),
            .v = vkattn_host_tensor_make(v, VKATTN_DTYPE_F32, 4, ks),
            .out = vkattn_host_tensor_make(want, VKATTN_DTYPE_F32, 4, q4),
            .key_padding = vkattn_host_tensor_make(pad, VKATTN_DTYPE_U8, 2, ps),
            .causal = true,
        };
        char err[512] = "";
        if (vkattn_ref_attention(&r, err, sizeof err) != VKATTN_SUCCESS)
            fail_msg("reference: %s", err);
        r.q = vkattn_host_tensor_make(q, VKATTN_DTYPE_F32, 3, q3);
        r.out = vkattn_host_tensor_make(want3, VKATTN_DTYPE_F32, 4, q4);
        if (vkattn_ref_attention(&r, err, sizeof err) != VKATTN_SUCCESS)
            fail_msg("reference, rank-3 q: %s", err);
        assert_memory_equal(want3, want, nq * 4);
        vkattn_buffer *bq = test_buffer_of(ctx, dt, q, n1), *bk = test_buffer_of(ctx, dt, k, nk);
        vkattn_buffer *bv = test_buffer_of(ctx, dt, v, nk);
        vkattn_buffer *bo = test_buffer_with(ctx, NULL, nq * vkattn_dtype_size(dt));
        vkattn_buffer *bp = test_buffer_with(ctx, pad, sizeof pad);
        vkattn_attention_args a = {
            .q = vkattn_tensor_make(bq, 0, dt, 3, q3),
            .k = vkattn_tensor_make(bk, 0, dt, 4, ks),
            .v = vkattn_tensor_make(bv, 0, dt, 4, ks),
            .out = vkattn_tensor_make(bo, 0, dt, 4, q4),
            .key_padding = vkattn_tensor_make(bp, 0, VKATTN_DTYPE_U8, 2, ps),
            .causal = true,
        };
        TEST_OK(ctx, vkattn_attention(ctx, &a));
        test_download_as(ctx, bo, dt, got, nq);
        char what[96];
        snprintf(what, sizeof what, "rank-3 q %s d%u (%s)", vkattn_dtype_name(dt), d,
                 test_policies[policy].name);
        assert_no_nan(got, nq, what);
        test_assert_close(got, want, nq, dt == VKATTN_DTYPE_F32 ? TEST_TOL_F32 : TEST_TOL_F16,
                          what);
        /* out must still be [B, Hq, Tq, Dv] */
        a.out = vkattn_tensor_make(bo, 0, dt, 3, q3);
        TEST_FAILS(ctx, VKATTN_ERROR_INVALID_ARGUMENT, "args->out.rank is 3",
                   vkattn_attention(ctx, &a));
        TEST_DESTROY_BUFFERS(bq, bk, bv, bo, bp);
        free(q), free(qb), free(k), free(v), free(want), free(want3), free(got);
    }
}

static void test_broadcast_query(void **state)
{
    (void)state;
    static const vkattn_dtype dts[2] = {VKATTN_DTYPE_F32, VKATTN_DTYPE_F16};
    for (int i = 0; i < 2; i++)
        test_for_each_policy(0, run_broadcast_query, &dts[i]);
}

/* The MHA layer's forward takes the same masks: nn.MultiheadAttention's
 * [B*Hq, Tq, Tk] boolean attn_mask (True = blocked) and a [B, 1, 1, Tk]
 * SDPA-style one, against vkattn_ref_mha. */
static void run_mha(test_gpu *g, uint32_t policy, const void *arg)
{
    (void)policy;
    const int *form = arg;
    vkattn_context *ctx = g->ctx;
    enum { B = 2, T = 14, DM = 32, H = 4 };
    vkattn_mha_desc desc = {.embed_dim = DM, .num_heads = H, .num_kv_heads = 2, .bias = true};
    test_rng rng = test_rng_seed(99u + (uint64_t)*form);
    float *wq = test_random_array(&rng, DM * DM, 0.3f, VKATTN_DTYPE_F32);
    float *wk = test_random_array(&rng, DM * DM / 2, 0.3f, VKATTN_DTYPE_F32);
    float *wv = test_random_array(&rng, DM * DM / 2, 0.3f, VKATTN_DTYPE_F32);
    float *wo = test_random_array(&rng, DM * DM, 0.3f, VKATTN_DTYPE_F32);
    float *bq = test_random_array(&rng, DM, 0.1f, VKATTN_DTYPE_F32);
    float *bo = test_random_array(&rng, DM, 0.1f, VKATTN_DTYPE_F32);
    float *x = test_random_array(&rng, B * T * DM, 1.0f, VKATTN_DTYPE_F32);
    vkattn_mha_weights w = {.wq = wq, .wk = wk, .wv = wv, .wo = wo, .bq = bq, .bo = bo};
    vkattn_mha *layer = test_mha_create(ctx, &desc, &w);
    uint8_t mask[B * H * T * T];
    for (size_t i = 0; i < sizeof mask; i++)
        mask[i] = test_rng_below(&rng, 3) == 0;
    int64_t ms3[3] = {B * H, T, T}, ms4[4] = {B, 1, 1, T}, xs[3] = {B, T, DM};
    float *want = malloc(B * T * DM * 4), *got = malloc(B * T * DM * 4);
    assert_true(want && got);
    vkattn_ref_mha_args r = {
        .x = vkattn_host_tensor_make(x, VKATTN_DTYPE_F32, 3, xs),
        .y = vkattn_host_tensor_make(want, VKATTN_DTYPE_F32, 3, xs),
        .bool_mask = *form == 3 ? VKATTN_BOOL_MASK_TRUE_BLOCKS : VKATTN_BOOL_MASK_TRUE_ATTENDS,
    };
    r.mask = *form == 3 ? vkattn_host_tensor_make(mask, VKATTN_DTYPE_U8, 3, ms3)
                        : vkattn_host_tensor_make(mask, VKATTN_DTYPE_U8, 4, ms4);
    char err[512] = "";
    if (vkattn_ref_mha(&desc, &w, &r, err, sizeof err) != VKATTN_SUCCESS)
        fail_msg("reference: %s", err);
    vkattn_buffer *bx = test_buffer_of(ctx, VKATTN_DTYPE_F32, x, B * T * DM);
    vkattn_buffer *by = test_buffer_with(ctx, NULL, B * T * DM * 4);
    vkattn_buffer *bm = test_buffer_with(ctx, mask, sizeof mask);
    vkattn_mha_forward_args f = {
        .x = vkattn_tensor_make(bx, 0, VKATTN_DTYPE_F32, 3, xs),
        .y = vkattn_tensor_make(by, 0, VKATTN_DTYPE_F32, 3, xs),
        .bool_mask = r.bool_mask,
    };
    f.mask = *form == 3 ? vkattn_tensor_make(bm, 0, VKATTN_DTYPE_U8, 3, ms3)
                        : vkattn_tensor_make(bm, 0, VKATTN_DTYPE_U8, 4, ms4);
    TEST_OK(ctx, vkattn_mha_forward(layer, &f));
    TEST_OK(ctx, vkattn_buffer_download(by, 0, got, B * T * DM * 4));
    assert_no_nan(got, B * T * DM, "mha");
    test_assert_close(got, want, B * T * DM, TEST_TOL_F32,
                      *form == 3 ? "mha [B*Hq,T,T]" : "mha [B,1,1,T]");
    vkattn_mha_destroy(layer);
    TEST_DESTROY_BUFFERS(bx, by, bm);
    free(wq), free(wk), free(wv), free(wo), free(bq), free(bo), free(x), free(want), free(got);
}

static void test_mha_masks(void **state)
{
    (void)state;
    static const int forms[2] = {3, 4};
    for (int i = 0; i < 2; i++)
        test_for_each_policy(TEST_POLICY_STORAGE_SHARED, run_mha, &forms[i]);
}

/* Shapes that do not broadcast and conventions that do not exist are
 * refused by name, nothing written. */
static void run_bad_masks(test_gpu *g, uint32_t policy, const void *arg)
{
    (void)policy, (void)arg;
    vkattn_context *ctx = g->ctx;
    enum { B = 2, H = 2, TQ = 3, TK = 5, D = 8 };
    int64_t qs[4] = {B, H, TQ, D}, ks[4] = {B, H, TK, D};
    vkattn_buffer *buf = test_buffer_with(ctx, NULL, 16384);
    float sentinel[B * H * TQ * D];
    for (size_t i = 0; i < sizeof sentinel / 4; i++)
        sentinel[i] = 7.0f;
    TEST_OK(ctx, vkattn_buffer_upload(buf, 8192, sentinel, sizeof sentinel));
    int64_t m3[3] = {B * H, TQ, TK};
    vkattn_attention_args good = {
        .q = vkattn_tensor_make(buf, 0, VKATTN_DTYPE_F32, 4, qs),
        .k = vkattn_tensor_make(buf, 0, VKATTN_DTYPE_F32, 4, ks),
        .v = vkattn_tensor_make(buf, 0, VKATTN_DTYPE_F32, 4, ks),
        .out = vkattn_tensor_make(buf, 8192, VKATTN_DTYPE_F32, 4, qs),
        .mask = vkattn_tensor_make(buf, 4096, VKATTN_DTYPE_U8, 3, m3),
    };
    vkattn_attention_args a;
    TEST_OK(ctx, vkattn_attention(ctx, &good));
    TEST_OK(ctx, vkattn_buffer_upload(buf, 8192, sentinel, sizeof sentinel));
    TEST_FAILS_CHANGED(ctx, a, good, a.mask.shape[0] = 3, VKATTN_ERROR_SHAPE_MISMATCH,
                       "args->mask.shape[0] (batch * num_heads) 3 is neither 1 nor 4",
                       vkattn_attention(ctx, &a));
    TEST_FAILS_CHANGED(ctx, a, good, a.mask.shape[0] = 2, VKATTN_ERROR_SHAPE_MISMATCH,
                       "args->mask.shape[0] (batch * num_heads) 2", vkattn_attention(ctx, &a));
    TEST_FAILS_CHANGED(ctx, a, good, a.mask.shape[1] = 2, VKATTN_ERROR_SHAPE_MISMATCH,
                       "args->mask.shape[1] (q_len) 2 is neither 1 nor", vkattn_attention(ctx, &a));
    TEST_FAILS_CHANGED(ctx, a, good, a.mask.shape[2] = 4, VKATTN_ERROR_SHAPE_MISMATCH,
                       "args->mask.shape[2] (kv_len) 4 is neither 1 nor",
                       vkattn_attention(ctx, &a));
    TEST_FAILS_CHANGED(ctx, a, good, a.bool_mask = (vkattn_bool_mask)2,
                       VKATTN_ERROR_INVALID_ARGUMENT, "args->bool_mask is 2",
                       vkattn_attention(ctx, &a));
    TEST_FAILS_CHANGED(ctx, a, good, a.mask.dtype = VKATTN_DTYPE_I32,
                       VKATTN_ERROR_UNSUPPORTED_DTYPE, "args->mask.dtype i32",
                       vkattn_attention(ctx, &a));
    float after[B * H * TQ * D];
    TEST_OK(ctx, vkattn_buffer_download(buf, 8192, after, sizeof after));
    assert_memory_equal(after, sentinel, sizeof after);
    TEST_DESTROY_BUFFERS(buf);
}

static void test_bad_masks(void **state)
{
    (void)state;
    test_for_each_policy(TEST_POLICY_STORAGE_SHARED, run_bad_masks, NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_broadcast_shapes), cmocka_unit_test(test_rank3_and_strides),
        cmocka_unit_test(test_scalar_masks),     cmocka_unit_test(test_chunks_keep_broadcasts),
        cmocka_unit_test(test_mha_masks),        cmocka_unit_test(test_bad_masks),
        cmocka_unit_test(test_broadcast_query),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
