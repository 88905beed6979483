/* vkattn_attention on the device against vkattn_ref_attention: a seeded grid
 * of configurations spread over the four kernel policies (subgroup or
 * shared-memory family x texel or storage inputs), covering MHA / GQA / MQA,
 * cross lengths, odd sizes, every head dimension class, both dtypes, every
 * mask kind and their combinations, fully masked rows, strided layouts and
 * the merged output, weights; plus calls larger than one binding window. */
#include "test_policy.h"
#include "test_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

enum { MASK_NONE, MASK_2D, MASK_4D, MASK_4D_B1, MASK_4D_H1, MASK_KINDS };

typedef struct att_case {
    uint32_t B, Hq, Hkv, Tq, Tk, D;
    vkattn_dtype qdt, kvdt, mdt;
    bool bthd;        /* q, k, v stored [B, T, H, D] (strided view) */
    bool merged_out;  /* out stored [B, Tq, Hq*D] (the MHA layer's layout) */
    uint32_t row_gap; /* extra elements between rows (stride padding, multiple of 4) */
    bool causal;
    int mask;
    bool padding;
    bool hide_rows; /* some mask rows all -inf, a batch of all-padding keys */
    int weights;    /* 0, 3 (mean over heads) or 4 (per head) */
    float scale;
    uint32_t policy;
} att_case;

static void describe(const att_case *c, char *buf, size_t size)
{
    snprintf(buf, size,
             "%s B%u Hq%u Hkv%u Tq%u Tk%u D%u q:%s kv:%s %s%s gap%u causal%d mask%d(%s) pad%d "
             "hide%d weights%d scale%g",
             test_policies[c->policy].name, c->B, c->Hq, c->Hkv, c->Tq, c->Tk, c->D,
             vkattn_dtype_name(c->qdt), vkattn_dtype_name(c->kvdt), c->bthd ? "BTHD" : "BHTD",
             c->merged_out ? " merged-out" : "", c->row_gap, c->causal, c->mask,
             vkattn_dtype_name(c->mdt), c->padding, c->hide_rows, c->weights, (double)c->scale);
}

/* ---- host mirrors of device tensors */

/* A tensor stored identically in a host f32 array (f16 values rounded) and
 * in a device buffer (at `offset` bytes, in its dtype). */
typedef struct mirror {
    float *host;  /* buffer-sized array of elements; index = element position */
    size_t elems; /* elements of the whole buffer */
    vkattn_dtype dtype;
    uint64_t offset_elems;
    int64_t shape[4], strides[4];
    uint32_t rank;
} mirror;

static size_t span_elems(const int64_t *shape, const int64_t *strides, uint32_t rank)
{
    size_t last = 0;
    for (uint32_t d = 0; d < rank; d++)
        last += (size_t)(shape[d] - 1) * (size_t)strides[d];
    return last + 1;
}

static void mirror_init(mirror *m, vkattn_dtype dt, uint32_t rank, const int64_t *shape,
                        const int64_t *strides, uint64_t offset_elems, float fill)
{
    memset(m, 0, sizeof *m);
    m->dtype = dt;
    m->rank = rank;
    m->offset_elems = offset_elems;
    memcpy(m->shape, shape, rank * sizeof *shape);
    memcpy(m->strides, strides, rank * sizeof *strides);
    /* odd sizes: lavapipe compiles extra shader variants for power-of-two
     * buffers (it keys them on the buffer size) */
    m->elems = ((size_t)offset_elems + span_elems(shape, strides, rank) + 64) | 1;
    m->host = malloc(m->elems * sizeof *m->host);
    assert_non_null(m->host);
    for (size_t i = 0; i < m->elems; i++)
        m->host[i] = fill;
}

static float round_to(vkattn_dtype dt, float v)
{
    return dt == VKATTN_DTYPE_F16 ? vkattn_f16_to_f32(vkattn_f32_to_f16(v)) : v;
}

/* Positions of a mirror's tensor elements in row-major index order
 * (malloc'ed; `*n` gets the element count). */
static size_t *mirror_positions(const mirror *m, size_t *n)
{
    int64_t shape[4] = {1, 1, 1, 1}, strides[4] = {0, 0, 0, 0};
    for (uint32_t d = 0; d < m->rank; d++)
        shape[4 - m->rank + d] = m->shape[d], strides[4 - m->rank + d] = m->strides[d];
    size_t count = (size_t)(shape[0] * shape[1] * shape[2] * shape[3]), k = 0;
    size_t *pos = malloc(count * sizeof *pos);
    assert_non_null(pos);
    for (int64_t a = 0; a < shape[0]; a++)
        for (int64_t b = 0; b < shape[1]; b++)
            for (int64_t c = 0; c < shape[2]; c++)
                for (int64_t d = 0; d < shape[3]; d++)
                    pos[k++] = (size_t)((int64_t)m->offset_elems + a * strides[0] + b * strides[1] +
                                        c * strides[2] + d * strides[3]);
    *n = count;
    return pos;
}

static void mirror_fill_random(mirror *m, test_rng *rng, float lo, float hi)
{
    size_t n, *pos = mirror_positions(m, &n);
    for (size_t i = 0; i < n; i++)
        m->host[pos[i]] = round_to(m->dtype, test_rng_uniform(rng, lo, hi));
    free(pos);
}

static vkattn_buffer *mirror_upload(vkattn_context *ctx, const mirror *m)
{
    size_t es = vkattn_dtype_size(m->dtype);
    uint8_t *bytes = test_alloc(m->elems * es);
    for (size_t i = 0; i < m->elems; i++)
        test_store(bytes, m->dtype, i, m->host[i]);
    vkattn_buffer *b = test_buffer_with(ctx, bytes, m->elems * es);
    free(bytes);
    return b;
}

/* Reads the whole device buffer back into `dst` (elems floats). */
static void mirror_download(vkattn_context *ctx, vkattn_buffer *b, const mirror *m, float *dst)
{
    size_t es = vkattn_dtype_size(m->dtype);
    uint8_t *bytes = test_alloc(m->elems * es);
    TEST_OK(ctx, vkattn_buffer_download(b, 0, bytes, m->elems * es));
    for (size_t i = 0; i < m->elems; i++)
        dst[i] = test_load(bytes, m->dtype, i);
    free(bytes);
}

static vkattn_tensor mirror_tensor(const mirror *m, vkattn_buffer *b)
{
    vkattn_tensor t = vkattn_tensor_make(b, m->offset_elems * vkattn_dtype_size(m->dtype), m->dtype,
                                         m->rank, m->shape);
    memcpy(t.strides, m->strides, m->rank * sizeof *m->strides);
    return t;
}

static vkattn_host_tensor mirror_host(const mirror *m)
{
    vkattn_host_tensor t =
        vkattn_host_tensor_make(m->host + m->offset_elems, VKATTN_DTYPE_F32, m->rank, m->shape);
    memcpy(t.strides, m->strides, m->rank * sizeof *m->strides);
    return t;
}

/* Gathers a mirror's tensor elements (row-major order) from a buffer-sized
 * array into a new array of *n floats. */
static float *gather(const mirror *m, const float *src, size_t *n)
{
    size_t *pos = mirror_positions(m, n);
    float *dst = malloc(*n * sizeof *dst);
    assert_non_null(dst);
    for (size_t i = 0; i < *n; i++)
        dst[i] = src[pos[i]];
    free(pos);
    return dst;
}

/* [B, H, T, D] shape with strides for BHTD or BTHD storage, rows `gap` apart. */
static void bhtd_layout(uint32_t B, uint32_t H, uint32_t T, uint32_t D, bool bthd, uint32_t gap,
                        int64_t shape[4], int64_t strides[4])
{
    shape[0] = B, shape[1] = H, shape[2] = T, shape[3] = D;
    int64_t row = D + gap;
    strides[3] = 1;
    if (bthd) {
        strides[1] = row, strides[2] = row * H, strides[0] = row * H * T;
    } else {
        strides[2] = row, strides[1] = row * T, strides[0] = row * T * H;
    }
}

/* Reference and device results over the tensor's elements: close, no NaN,
 * exact zeros where the reference has them (hidden rows and keys), and the
 * gaps between rows untouched (still the NaN sentinel). */
static void check_output(const mirror *m, const float *got_all, const float *want_all, double tol,
                         const char *what)
{
    size_t n, n2;
    float *got = gather(m, got_all, &n), *want = gather(m, want_all, &n2);
    test_assert_close(got, want, n, tol, what);
    for (size_t i = 0; i < n; i++)
        if (want[i] == 0.0f && got[i] != 0.0f)
            fail_msg("%s: element %zu is %g where the reference has an exact 0 (hidden)", what, i,
                     (double)got[i]);
    size_t *pos = mirror_positions(m, &n);
    char *inside = calloc(m->elems, 1);
    assert_non_null(inside);
    for (size_t i = 0; i < n; i++)
        inside[pos[i]] = 1;
    for (size_t i = 0; i < m->elems; i++)
        if (!inside[i] && !isnan(got_all[i]))
            fail_msg("%s: element %zu outside the tensor was overwritten (%g)", what, i,
                     (double)got_all[i]);
    free(inside), free(pos), free(got), free(want);
}

static void run_case(test_gpu *g, const att_case *c, uint64_t seed)
{
    vkattn_context *ctx = g->ctx;
    char what[256];
    describe(c, what, sizeof what);
    test_rng rng = test_rng_seed(seed);
    int64_t shape[4], strides[4];
    mirror q, k, v, out, mask, pad, w;
    const float nan = NAN;

    /* offsets: multiples of 16 bytes for q, k, v, out; free for the rest */
    bhtd_layout(c->B, c->Hq, c->Tq, c->D, c->bthd, c->row_gap, shape, strides);
    mirror_init(&q, c->qdt, 4, shape, strides, 8 * (seed % 3), 0.0f);
    mirror_fill_random(&q, &rng, -1.0f, 1.0f);
    bhtd_layout(c->B, c->Hkv, c->Tk, c->D, c->bthd, c->row_gap, shape, strides);
    mirror_init(&k, c->kvdt, 4, shape, strides, 8 * (seed % 2), 0.0f);
    mirror_fill_random(&k, &rng, -1.0f, 1.0f);
    mirror_init(&v, c->kvdt, 4, shape, strides, 16, 0.0f);
    mirror_fill_random(&v, &rng, -1.0f, 1.0f);
    if (c->merged_out) {
        int64_t row = (int64_t)c->Hq * c->D + c->row_gap;
        int64_t s[4] = {row * c->Tq, c->D, row, 1}, sh[4] = {c->B, c->Hq, c->Tq, c->D};
        mirror_init(&out, c->qdt, 4, sh, s, 8, nan);
    } else {
        bhtd_layout(c->B, c->Hq, c->Tq, c->D, false, c->row_gap, shape, strides);
        mirror_init(&out, c->qdt, 4, shape, strides, 8, nan);
    }

    vkattn_attention_args args = {0};
    vkattn_ref_attention_args ref = {0};
    vkattn_buffer *bufs[7] = {0};
    uint8_t *pad_u8 = NULL;
    bufs[0] = mirror_upload(ctx, &q);
    bufs[1] = mirror_upload(ctx, &k);
    bufs[2] = mirror_upload(ctx, &v);
    bufs[3] = mirror_upload(ctx, &out);
    args.q = mirror_tensor(&q, bufs[0]), ref.q = mirror_host(&q);
    args.k = mirror_tensor(&k, bufs[1]), ref.k = mirror_host(&k);
    args.v = mirror_tensor(&v, bufs[2]), ref.v = mirror_host(&v);
    args.out = mirror_tensor(&out, bufs[3]);
    mirror ref_out = out;
    ref_out.host = malloc(out.elems * sizeof(float));
    assert_non_null(ref_out.host);
    memcpy(ref_out.host, out.host, out.elems * sizeof(float));
    ref.out = mirror_host(&ref_out);

    if (c->mask != MASK_NONE) {
        int64_t ms[4] = {c->B, c->Hq, c->Tq, c->Tk};
        if (c->mask == MASK_4D_B1)
            ms[0] = 1;
        if (c->mask == MASK_4D_H1)
            ms[1] = 1;
        uint32_t rank = c->mask == MASK_2D ? 2 : 4;
        const int64_t *msh = rank == 2 ? ms + 2 : ms;
        int64_t mst[4];
        int64_t st = 1;
        for (uint32_t d = rank; d-- > 0;)
            mst[d] = st, st *= msh[d];
        mirror_init(&mask, c->mdt, rank, msh, mst, seed % 5, 0.0f);
        size_t n, *pos = mirror_positions(&mask, &n);
        for (size_t i = 0; i < n; i++) {
            bool row_hidden = c->hide_rows && (i / c->Tk) % 4 == 1;
            float val = test_rng_uniform(&rng, -2.0f, 2.0f);
            if (row_hidden || test_rng_below(&rng, 100) < 15)
                val = -INFINITY;
            mask.host[pos[i]] = round_to(c->mdt, val);
        }
        free(pos);
        bufs[4] = mirror_upload(ctx, &mask);
        args.mask = mirror_tensor(&mask, bufs[4]), ref.mask = mirror_host(&mask);
    }
    if (c->padding) {
        int64_t ps[2] = {c->B, c->Tk}, pst[2] = {c->Tk + 3, 1};
        mirror_init(&pad, VKATTN_DTYPE_U8, 2, ps, pst, 1 + seed % 3, 1.0f);
        size_t n, *pos = mirror_positions(&pad, &n);
        pad_u8 = calloc(pad.elems, 1);
        assert_non_null(pad_u8);
        for (size_t i = 0; i < n; i++) {
            bool hidden_batch = c->hide_rows && c->B > 1 && i / c->Tk == c->B - 1;
            pad.host[pos[i]] = hidden_batch || test_rng_below(&rng, 100) < 25 ? 0.0f : 1.0f;
        }
        for (size_t i = 0; i < pad.elems; i++)
            pad_u8[i] = (uint8_t)pad.host[i];
        free(pos);
        bufs[5] = mirror_upload(ctx, &pad);
        args.key_padding = mirror_tensor(&pad, bufs[5]);
        ref.key_padding =
            vkattn_host_tensor_make(pad_u8 + pad.offset_elems, VKATTN_DTYPE_U8, 2, ps);
        memcpy(ref.key_padding.strides, pst, sizeof pst);
    }
    mirror ref_w = {0};
    if (c->weights) {
        int64_t ws[4] = {c->B, c->Hq, c->Tq, c->Tk}, wst[4];
        if (c->weights == 3)
            ws[1] = ws[2], ws[2] = ws[3];
        int64_t st = 1;
        for (uint32_t d = (uint32_t)c->weights; d-- > 0;)
            wst[d] = st, st *= ws[d];
        mirror_init(&w, VKATTN_DTYPE_F32, (uint32_t)c->weights, ws, wst, seed % 4, nan);
        bufs[6] = mirror_upload(ctx, &w);
        args.weights = mirror_tensor(&w, bufs[6]);
        ref_w = w;
        ref_w.host = malloc(w.elems * sizeof(float));
        assert_non_null(ref_w.host);
        memcpy(ref_w.host, w.host, w.elems * sizeof(float));
        ref.weights = mirror_host(&ref_w);
    }
    args.causal = ref.causal = c->causal;
    args.scale = ref.scale = c->scale;

    char err[512] = "";
    if (vkattn_ref_attention(&ref, err, sizeof err) != VKATTN_SUCCESS)
        fail_msg("reference failed on %s: %s", what, err);
    TEST_OK(ctx, vkattn_attention(ctx, &args));

    bool f16 = c->qdt == VKATTN_DTYPE_F16 || c->kvdt == VKATTN_DTYPE_F16;
    float *got = malloc(out.elems * sizeof *got);
    assert_non_null(got);
    mirror_download(ctx, bufs[3], &out, got);
    char label[300];
    snprintf(label, sizeof label, "out of %s", what);
    check_output(&out, got, ref_out.host, f16 ? TEST_TOL_F16 : TEST_TOL_F32, label);
    free(got);
    if (c->weights) {
        got = malloc(w.elems * sizeof *got);
        assert_non_null(got);
        mirror_download(ctx, bufs[6], &w, got);
        snprintf(label, sizeof label, "weights of %s", what);
        check_output(&w, got, ref_w.host, TEST_TOL_F32, label);
        free(got), free(w.host), free(ref_w.host);
    }
    for (int i = 0; i < 7; i++)
        vkattn_buffer_destroy(bufs[i]);
    free(q.host), free(k.host), free(v.host), free(out.host), free(ref_out.host);
    if (c->mask != MASK_NONE)
        free(mask.host);
    if (c->padding)
        free(pad.host), free(pad_u8);
}

/* ---- the grid */

#define GRID_CASES 240

static att_case grid_case(uint32_t idx, test_rng *rng)
{
    static const uint32_t dims[] = {8, 16, 24, 32, 40, 64, 80, 96, 112, 128, 256};
    static const uint32_t lens[] = {1, 2, 3, 5, 8, 13, 17, 24, 33, 40};
    /* {Hq, Hkv}: MHA, GQA 2 / 4 / 8, MQA */
    static const uint32_t heads[][2] = {{1, 1}, {3, 3},  {2, 1}, {4, 2}, {4, 1}, {8, 2},
                                        {8, 1}, {16, 2}, {3, 1}, {5, 1}, {6, 3}, {2, 2}};
    const uint32_t nd = sizeof dims / sizeof dims[0], nl = sizeof lens / sizeof lens[0];
    att_case c = {0};
    /* Deterministic cycles (so every policy meets every head dim, dtype pair
     * and mask kind), randomness for the rest. */
    /* Every head dim runs on one subgroup and one shared-memory policy, and
     * the dtype pair follows (policy, head dim): few distinct pipelines, as
     * each costs lavapipe's JIT about a second. */
    c.policy = idx % 4;
    uint32_t di = (idx / 4) % nd;
    if ((di + c.policy) % 2) /* policies 0 and 2 take even indices, 1 and 3 odd */
        di = di + 1 < nd ? di + 1 : di - 1;
    c.D = dims[di];
    uint32_t dtypes = (di + c.policy / 2) % 4;
    c.qdt = dtypes & 1 ? VKATTN_DTYPE_F16 : VKATTN_DTYPE_F32;
    c.kvdt = dtypes & 2 ? VKATTN_DTYPE_F16 : VKATTN_DTYPE_F32;
    c.mask = (int)((idx / 3) % MASK_KINDS);
    c.mdt = (idx / 5) % 2 ? VKATTN_DTYPE_F16 : VKATTN_DTYPE_F32;
    c.weights = idx % 6 == 1 ? 3 : idx % 6 == 4 ? 4 : 0;
    c.causal = (idx / 12) % 2 == 1;
    const uint32_t *h = heads[test_rng_below(rng, sizeof heads / sizeof heads[0])];
    c.Hq = h[0], c.Hkv = h[1];
    c.B = 1 + test_rng_below(rng, 2);
    c.Tq = lens[test_rng_below(rng, nl)];
    c.Tk = lens[test_rng_below(rng, nl)];
    c.bthd = test_rng_below(rng, 2);
    c.merged_out = test_rng_below(rng, 2);
    c.row_gap = test_rng_below(rng, 3) == 0 ? 4 * (1 + test_rng_below(rng, 2)) : 0;
    c.padding = test_rng_below(rng, 5) < 2;
    c.hide_rows = test_rng_below(rng, 4) == 0;
    c.scale = test_rng_below(rng, 2) ? 0.0f : test_rng_uniform(rng, 0.05f, 0.5f);
    /* Keep the big head dims small elsewhere (SwiftShader is slow). */
    if (c.D >= 112) {
        c.Tq = c.Tq > 17 ? 17 : c.Tq;
        c.Tk = c.Tk > 24 ? 24 : c.Tk;
        if (c.Hq > 4)
            c.Hq = 4, c.Hkv = c.Hkv > 2 ? 2 : c.Hkv;
    }
    return c;
}

/* Rows of the case's mask, its [Tq, Tk] planes stacked (0: no mask). */
static uint32_t mask_rows(const att_case *c)
{
    switch (c->mask) {
    case MASK_2D:
        return c->Tq;
    case MASK_4D:
        return c->B * c->Hq * c->Tq;
    case MASK_4D_B1:
        return c->Hq * c->Tq;
    case MASK_4D_H1:
        return c->B * c->Tq;
    default:
        return 0;
    }
}

/* What a grid case proves, the most specific first: each case belongs to
 * exactly one of the grid tests below, which together run the whole grid. */
typedef enum grid_property {
    FULLY_MASKED_ROWS_ARE_ZERO, /* mask rows of -inf or a batch of padding only */
    MASKS_COMBINE,              /* two or three of mask, key padding, causal */
    MASK_MATCHES_REFERENCE,     /* one broadcast mask kind or key padding alone */
    CAUSAL_MATCHES_REFERENCE,
    GQA_MATCHES_REFERENCE, /* no mask: GQA and MQA */
    MHA_MATCHES_REFERENCE, /* no mask: Hq == Hkv */
} grid_property;

static grid_property grid_property_of(const att_case *c)
{
    bool mask = c->mask != MASK_NONE;
    if (c->hide_rows && ((mask && mask_rows(c) > 1) || (c->padding && c->B > 1)))
        return FULLY_MASKED_ROWS_ARE_ZERO;
    if ((int)mask + (int)c->padding + (int)c->causal >= 2)
        return MASKS_COMBINE;
    if (mask || c->padding)
        return MASK_MATCHES_REFERENCE;
    if (c->causal)
        return CAUSAL_MATCHES_REFERENCE;
    return c->Hq != c->Hkv ? GQA_MATCHES_REFERENCE : MHA_MATCHES_REFERENCE;
}

/* Runs the grid's cases that prove `which` (each on its own policy; the
 * shared-memory policies' cases on the coopmat one too, when it runs: the
 * family that takes their place on GPUs). */
static void run_grid(test_policy_suite *s, grid_property which)
{
    test_rng rng = test_rng_seed(20260611);
    uint32_t ran = 0;
    for (uint32_t i = 0; i < GRID_CASES; i++) {
        att_case c = grid_case(i, &rng);
        if (grid_property_of(&c) != which)
            continue;
        if (s->gpu[c.policy])
            run_case(s->gpu[c.policy], &c, 1000 + i), ran++;
        if (c.policy >= 2 && s->gpu[TEST_POLICY_COOPMAT]) {
            c.policy = TEST_POLICY_COOPMAT;
            run_case(s->gpu[c.policy], &c, 1000 + i), ran++;
        }
    }
    /* a run of some policies may have none of this property's cases */
    for (uint32_t p = 0; p < TEST_POLICY_COUNT; p++)
        if (!s->gpu[p])
            return;
    assert_true(ran > 0);
}

static void test_grid_mha_matches_reference(void **state)
{
    run_grid(*state, MHA_MATCHES_REFERENCE);
}
static void test_grid_gqa_matches_reference(void **state)
{
    run_grid(*state, GQA_MATCHES_REFERENCE);
}
static void test_grid_causal_matches_reference(void **state)
{
    run_grid(*state, CAUSAL_MATCHES_REFERENCE);
}
static void test_grid_mask_matches_reference(void **state)
{
    run_grid(*state, MASK_MATCHES_REFERENCE);
}
static void test_grid_masks_combine(void **state) { run_grid(*state, MASKS_COMBINE); }
static void test_grid_fully_masked_rows_are_zero(void **state)
{
    run_grid(*state, FULLY_MASKED_ROWS_ARE_ZERO);
}

/* Hand-picked corners on every policy. */
static void test_corners(void **state)
{
    test_policy_suite *s = *state;
    const att_case base = {.B = 1,
                           .Hq = 1,
                           .Hkv = 1,
                           .Tq = 1,
                           .Tk = 1,
                           .D = 8,
                           .qdt = VKATTN_DTYPE_F32,
                           .kvdt = VKATTN_DTYPE_F32,
                           .mdt = VKATTN_DTYPE_F32};
    for (uint32_t p = 0; p < TEST_POLICY_COUNT; p++) {
        if (!s->gpu[p])
            continue;
        att_case c = base;
        c.policy = p;
        run_case(s->gpu[p], &c, 1);                         /* one query, one key */
        c.Tq = 9, c.Tk = 4, c.causal = true, c.weights = 4; /* 5 rows see nothing */
        run_case(s->gpu[p], &c, 2);
        c.Tq = 3, c.Tk = 70, c.D = 256, c.Hq = 8, c.Hkv = 1, c.weights = 3; /* MQA, long keys */
        c.causal = false, c.mask = MASK_4D_H1, c.padding = true, c.hide_rows = true, c.B = 2;
        run_case(s->gpu[p], &c, 3);
        c = base, c.policy = p, c.Tq = 65, c.Tk = 65, c.causal = true, c.D = 64, c.Hq = 4;
        c.Hkv = 2, c.qdt = c.kvdt = VKATTN_DTYPE_F16, c.bthd = true, c.merged_out = true;
        run_case(s->gpu[p], &c, 4); /* several tiles and key blocks */
        if (p < 2) {                /* long enough for the subgroup family's large tiles */
            c.Tq = 20, c.Tk = 300, c.Hq = 8, c.mask = MASK_2D, c.padding = true;
            run_case(s->gpu[p], &c, 5);
        }
    }
}

/* ---- calls larger than one binding window */

/* A [B, H, T, D] tensor spread over a big buffer by explicit strides (in
 * elements; rows stay contiguous), with a compact host copy. */
typedef struct sparse {
    int64_t shape[4], strides[4];
    uint64_t offset; /* bytes */
    float *host;     /* compact row-major */
} sparse;

static size_t sparse_numel(const sparse *t)
{
    return (size_t)(t->shape[0] * t->shape[1] * t->shape[2] * t->shape[3]);
}

static uint64_t sparse_row_offset(const sparse *t, int64_t b, int64_t h, int64_t i)
{
    return t->offset + 4 * (uint64_t)(b * t->strides[0] + h * t->strides[1] + i * t->strides[2]);
}

/* Uploads (or downloads) every row of `t` between its host copy and `buf`. */
static void sparse_rows(vkattn_context *ctx, vkattn_buffer *buf, sparse *t, bool upload)
{
    int64_t d = t->shape[3];
    for (int64_t b = 0; b < t->shape[0]; b++)
        for (int64_t h = 0; h < t->shape[1]; h++)
            for (int64_t i = 0; i < t->shape[2]; i++) {
                float *row = t->host + ((b * t->shape[1] + h) * t->shape[2] + i) * d;
                uint64_t off = sparse_row_offset(t, b, h, i);
                if (upload)
                    TEST_OK(ctx, vkattn_buffer_upload(buf, off, row, (uint64_t)d * 4));
                else
                    TEST_OK(ctx, vkattn_buffer_download(buf, off, row, (uint64_t)d * 4));
            }
}

static vkattn_tensor sparse_tensor(const sparse *t, vkattn_buffer *buf)
{
    vkattn_tensor x = vkattn_tensor_make(buf, t->offset, VKATTN_DTYPE_F32, 4, t->shape);
    memcpy(x.strides, t->strides, sizeof t->strides);
    return x;
}

/* q, k, v share one big buffer (inputs may), out has its own; the optional
 * rank-2 mask and the weights are compact. */
static void run_sparse(vkattn_context *ctx, sparse *q, sparse *k, sparse *v, sparse *out,
                       bool causal, bool mask, int weights, const char *what)
{
    test_rng rng = test_rng_seed(77);
    sparse *in[3] = {q, k, v};
    uint64_t in_end = 0, out_end = 0;
    for (int t = 0; t < 3; t++) {
        in[t]->host = malloc(sparse_numel(in[t]) * 4);
        assert_non_null(in[t]->host);
        test_fill_uniform(&rng, in[t]->host, sparse_numel(in[t]), -1.0f, 1.0f);
        int64_t *sh = in[t]->shape;
        uint64_t end =
            sparse_row_offset(in[t], sh[0] - 1, sh[1] - 1, sh[2] - 1) + 4 * (uint64_t)sh[3];
        in_end = end > in_end ? end : in_end;
    }
    out->host = calloc(sparse_numel(out), 4);
    assert_non_null(out->host);
    int64_t *osh = out->shape;
    out_end = sparse_row_offset(out, osh[0] - 1, osh[1] - 1, osh[2] - 1) + 4 * (uint64_t)osh[3];
    vkattn_buffer *bin = test_buffer_with(ctx, NULL, in_end),
                  *bout = test_buffer_with(ctx, NULL, out_end);
    for (int t = 0; t < 3; t++)
        sparse_rows(ctx, bin, in[t], true);

    int64_t B = q->shape[0], Hq = q->shape[1], Tq = q->shape[2], Tk = k->shape[2];
    vkattn_attention_args a = {0};
    vkattn_ref_attention_args r = {0};
    a.q = sparse_tensor(q, bin), a.k = sparse_tensor(k, bin), a.v = sparse_tensor(v, bin);
    a.out = sparse_tensor(out, bout);
    r.q = vkattn_host_tensor_make(q->host, VKATTN_DTYPE_F32, 4, q->shape);
    r.k = vkattn_host_tensor_make(k->host, VKATTN_DTYPE_F32, 4, k->shape);
    r.v = vkattn_host_tensor_make(v->host, VKATTN_DTYPE_F32, 4, v->shape);
    float *want = calloc(sparse_numel(out), 4);
    assert_non_null(want);
    r.out = vkattn_host_tensor_make(want, VKATTN_DTYPE_F32, 4, out->shape);
    float *mhost = NULL, *wgot = NULL, *wwant = NULL;
    vkattn_buffer *bm = NULL, *bw = NULL;
    int64_t msh[2] = {Tq, Tk};
    if (mask) {
        mhost = malloc((size_t)(Tq * Tk) * 4);
        assert_non_null(mhost);
        test_fill_uniform(&rng, mhost, (size_t)(Tq * Tk), -1.0f, 1.0f);
        mhost[1] = -INFINITY;
        bm = test_buffer_with(ctx, mhost, (uint64_t)(Tq * Tk) * 4);
        a.mask = vkattn_tensor_make(bm, 0, VKATTN_DTYPE_F32, 2, msh);
        r.mask = vkattn_host_tensor_make(mhost, VKATTN_DTYPE_F32, 2, msh);
    }
    size_t wn = 0;
    if (weights) {
        int64_t wsh[4] = {B, Hq, Tq, Tk};
        if (weights == 3)
            wsh[1] = Tq, wsh[2] = Tk;
        wn = (size_t)(wsh[0] * wsh[1] * wsh[2] * (weights == 4 ? wsh[3] : 1));
        wgot = malloc(wn * 4), wwant = malloc(wn * 4);
        assert_non_null(wgot);
        assert_non_null(wwant);
        bw = test_buffer_with(ctx, NULL, wn * 4);
        a.weights = vkattn_tensor_make(bw, 0, VKATTN_DTYPE_F32, (uint32_t)weights, wsh);
        r.weights = vkattn_host_tensor_make(wwant, VKATTN_DTYPE_F32, (uint32_t)weights, wsh);
    }
    a.causal = r.causal = causal;
    char err[512] = "";
    if (vkattn_ref_attention(&r, err, sizeof err) != VKATTN_SUCCESS)
        fail_msg("reference failed on %s: %s", what, err);
    TEST_OK(ctx, vkattn_attention(ctx, &a));
    sparse_rows(ctx, bout, out, false);
    test_assert_close(out->host, want, sparse_numel(out), TEST_TOL_F32, what);
    if (weights) {
        TEST_OK(ctx, vkattn_buffer_download(bw, 0, wgot, wn * 4));
        test_assert_close(wgot, wwant, wn, TEST_TOL_F32, what);
    }
    for (int t = 0; t < 3; t++)
        free(in[t]->host);
    free(out->host), free(want), free(mhost), free(wgot), free(wwant);
    vkattn_buffer_destroy(bin), vkattn_buffer_destroy(bout);
    vkattn_buffer_destroy(bm), vkattn_buffer_destroy(bw);
}

static void contiguous(sparse *t, int64_t b, int64_t h, int64_t n, int64_t d, uint64_t offset)
{
    int64_t sh[4] = {b, h, n, d}, st[4] = {h * n * d, n * d, d, 1};
    memcpy(t->shape, sh, sizeof sh);
    memcpy(t->strides, st, sizeof st);
    t->offset = offset;
}

/* Only where the binding range is small enough to exceed cheaply
 * (lavapipe: 128 MiB); on both families, one with texel and one with storage
 * inputs, one head dim (each new pipeline costs lavapipe's JIT a second). */
static void test_larger_than_one_binding(void **state)
{
    test_policy_suite *s = *state;
    uint64_t range = test_binding_range_at_most(test_policy_suite_first(s)->ctx, 256ull << 20);
    int64_t far = (int64_t)(range / 4) + 1024; /* elements: beyond one window */
    for (uint32_t p = 0; p < TEST_POLICY_COUNT; p += 3) {
        if (!s->gpu[p])
            continue;
        vkattn_context *ctx = s->gpu[p]->ctx;
        sparse q, k, v, o;
        /* per batch: batches a window apart (GQA 2, causal, mask, weights) */
        contiguous(&q, 2, 2, 5, 16, 0), q.strides[0] = far;
        contiguous(&k, 2, 1, 7, 16, 1024), k.strides[0] = far;
        contiguous(&v, 2, 1, 7, 16, 4096), v.strides[0] = far;
        contiguous(&o, 2, 2, 5, 16, 0), o.strides[0] = far;
        run_sparse(ctx, &q, &k, &v, &o, true, true, 4, "split per batch");
        /* per query head: heads a window apart; rank-3 weights then add up
         * the heads over several dispatches */
        contiguous(&q, 1, 4, 6, 16, 0), q.strides[1] = far;
        contiguous(&k, 1, 2, 9, 16, 512), contiguous(&v, 1, 2, 9, 16, 2048);
        contiguous(&o, 1, 4, 6, 16, 0);
        run_sparse(ctx, &q, &k, &v, &o, false, false, 3, "split per head");
        /* per range of queries: rows half a window apart (causal with
         * Tq > Tk: the first rows see nothing) */
        contiguous(&q, 1, 1, 7, 16, 0), q.strides[2] = far / 2;
        contiguous(&k, 1, 1, 4, 16, 512), contiguous(&v, 1, 1, 4, 16, 4096);
        contiguous(&o, 1, 1, 7, 16, 0), o.strides[2] = far / 2, o.strides[0] = 7 * far / 2;
        run_sparse(ctx, &q, &k, &v, &o, true, true, 4, "split per query range");
    }
}

/* K and V larger than SwiftShader's texel limit (65536 texels) but fine as
 * storage buffers: the texel policy falls back, per batch or altogether. */
static void test_texel_window_fallback(void **state)
{
    test_policy_suite *s = *state;
    vkattn_context *ctx = test_policy_suite_first(s)->ctx;
    sparse q, k, v, o;
    contiguous(&k, 2, 1, 600, 256, 0), contiguous(&v, 2, 1, 600, 256, 4 * 2 * 600 * 256);
    contiguous(&q, 2, 2, 3, 256, 4 * 4 * 600 * 256);
    contiguous(&o, 2, 2, 3, 256, 0);
    run_sparse(ctx, &q, &k, &v, &o, false, true, 0, "texel fallback (per batch)");
    contiguous(&k, 1, 1, 1100, 256, 0), contiguous(&v, 1, 1, 1100, 256, 4 * 1100 * 256);
    contiguous(&q, 1, 1, 2, 256, 4 * 2 * 1100 * 256), contiguous(&o, 1, 1, 2, 256, 0);
    run_sparse(ctx, &q, &k, &v, &o, true, false, 3, "texel fallback (storage)");
}

/* A key whose score is -inf through an infinite K element (q . k with
 * q_d < 0, k_d = +inf) is hidden, as in the reference - also at head dims
 * that leave some subgroup lanes without an octet of their own (D 32 and 40
 * on 8 lanes, 40 on 4), which then read a real octet with q = 0 and must not
 * add 0 * inf = NaN to the score. Every family and binding. */
static void test_infinite_key_element(void **state)
{
    test_policy_suite *s = *state;
    static const uint32_t dims[] = {32, 40, 64};
    enum { HQ = 2, TQ = 3, TK = 6 };
    for (uint32_t p = 0; p < TEST_POLICY_COUNT; p++)
        for (size_t di = 0; s->gpu[p] && di < sizeof dims / sizeof dims[0]; di++) {
            vkattn_context *ctx = s->gpu[p]->ctx;
            const uint32_t D = dims[di];
            const size_t nq = (size_t)HQ * TQ * D, nk = (size_t)TK * D;
            float *q = malloc(nq * 4), *k = malloc(nk * 4), *v = malloc(nk * 4);
            float *want = malloc(nq * 4), *got = malloc(nq * 4);
            assert_true(q && k && v && want && got);
            test_rng rng = test_rng_seed(40 + D);
            test_fill_uniform(&rng, q, nq, -1.0f, 1.0f);
            test_fill_uniform(&rng, k, nk, -1.0f, 1.0f);
            test_fill_uniform(&rng, v, nk, -1.0f, 1.0f);
            const uint32_t d0 = D - 2; /* in the last octet, the one spare lanes read */
            for (size_t row = 0; row < (size_t)HQ * TQ; row++)
                q[row * D + d0] = -0.5f - fabsf(q[row * D + d0]);
            k[2 * D + d0] = INFINITY; /* key 2: score -inf for every row */
            int64_t qs[4] = {1, HQ, TQ, D}, ks[4] = {1, 1, TK, D};
            vkattn_buffer *bq = test_buffer_with(ctx, q, nq * 4),
                          *bk = test_buffer_with(ctx, k, nk * 4);
            vkattn_buffer *bv = test_buffer_with(ctx, v, nk * 4),
                          *bo = test_buffer_with(ctx, NULL, nq * 4);
            vkattn_attention_args a = {.q = vkattn_tensor_make(bq, 0, VKATTN_DTYPE_F32, 4, qs),
                                       .k = vkattn_tensor_make(bk, 0, VKATTN_DTYPE_F32, 4, ks),
                                       .v = vkattn_tensor_make(bv, 0, VKATTN_DTYPE_F32, 4, ks),
                                       .out = vkattn_tensor_make(bo, 0, VKATTN_DTYPE_F32, 4, qs)};
            vkattn_ref_attention_args r = {
                .q = vkattn_host_tensor_make(q, VKATTN_DTYPE_F32, 4, qs),
                .k = vkattn_host_tensor_make(k, VKATTN_DTYPE_F32, 4, ks),
                .v = vkattn_host_tensor_make(v, VKATTN_DTYPE_F32, 4, ks),
                .out = vkattn_host_tensor_make(want, VKATTN_DTYPE_F32, 4, qs)};
            assert_int_equal(vkattn_ref_attention(&r, NULL, 0), VKATTN_SUCCESS);
            TEST_OK(ctx, vkattn_attention(ctx, &a));
            TEST_OK(ctx, vkattn_buffer_download(bo, 0, got, nq * 4));
            char what[96];
            snprintf(what, sizeof what, "infinite K element, D %u, %s", D, test_policies[p].name);
            test_assert_close(got, want, nq, TEST_TOL_F32, what);
            vkattn_buffer_destroy(bq), vkattn_buffer_destroy(bk);
            vkattn_buffer_destroy(bv), vkattn_buffer_destroy(bo);
            free(q), free(k), free(v), free(want), free(got);
        }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_corners),
        cmocka_unit_test(test_grid_mha_matches_reference),
        cmocka_unit_test(test_grid_gqa_matches_reference),
        cmocka_unit_test(test_grid_causal_matches_reference),
        cmocka_unit_test(test_grid_mask_matches_reference),
        cmocka_unit_test(test_grid_masks_combine),
        cmocka_unit_test(test_grid_fully_masked_rows_are_zero),
        cmocka_unit_test(test_larger_than_one_binding),
        cmocka_unit_test(test_texel_window_fallback),
        cmocka_unit_test(test_infinite_key_element),
    };
    return cmocka_run_group_tests(tests, test_policy_suite_setup, test_policy_suite_teardown);
}
