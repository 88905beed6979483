/* Packed ragged batches (vkattn_attention_args.sequences, FlashAttention's
 * varlen form) against vkattn_ref_attention, on all four kernel policies:
 * self- and cross-attention offsets, empty sequences, GQA, causal both
 * ways, the score modifiers, LSE, per-sequence head masks, f16, odd head
 * dims and torch's [total, H, D] layout; the reference's packed call equals
 * the padded call (key padding) row for row; bad offsets and what a packed
 * call cannot take are refused by name with nothing written. */
#include "test_policy.h"
#include "test_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#define MAX_SEQ 8

typedef struct varlen_case {
    uint32_t S;           /* sequences */
    uint32_t tq[MAX_SEQ]; /* queries per sequence */
    uint32_t tk[MAX_SEQ]; /* keys per sequence; all 0: tq (self-attention) */
    uint32_t Hq, Hkv, D;
    vkattn_dtype dt;
    bool causal, top_left;
    uint32_t window;
    float softcap;
    bool sinks, slopes, lse;
    int head_mask;    /* 0 none, 1 [Hq], 2 [S, Hq] */
    bool token_major; /* [1, H, T, D] viewed over torch's [T, H, D] memory */
} varlen_case;

/* The case's offsets and token counts. */
typedef struct packing {
    int32_t qo[MAX_SEQ + 1], ko[MAX_SEQ + 1];
    bool self;
    uint32_t tq_max, tk_max;
} packing;

static packing pack(const varlen_case *c)
{
    packing p = {.self = true};
    for (uint32_t i = 0; i < c->S; i++)
        if (c->tk[i])
            p.self = false;
    for (uint32_t i = 0; i < c->S; i++) {
        uint32_t tk = p.self ? c->tq[i] : c->tk[i];
        p.qo[i + 1] = p.qo[i] + (int32_t)c->tq[i];
        p.ko[i + 1] = p.ko[i] + (int32_t)tk;
        p.tq_max = c->tq[i] > p.tq_max ? c->tq[i] : p.tq_max;
        p.tk_max = tk > p.tk_max ? tk : p.tk_max;
    }
    return p;
}

static void describe(const varlen_case *c, const char *policy, char *buf, size_t size)
{
    int n = snprintf(buf, size, "%s S%u Hq%u Hkv%u D%u %s tq", policy, c->S, c->Hq, c->Hkv, c->D,
                     vkattn_dtype_name(c->dt));
    for (uint32_t i = 0; i < c->S && n > 0 && (size_t)n < size; i++)
        n += snprintf(buf + n, size - (size_t)n, " %u/%u", c->tq[i], c->tk[i]);
    if (n > 0 && (size_t)n < size)
        snprintf(buf + n, size - (size_t)n,
                 " causal%d%s window%u softcap%g sinks%d slopes%d lse%d head_mask%d token_major%d",
                 c->causal, c->top_left ? "(top-left)" : "", c->window, (double)c->softcap,
                 c->sinks, c->slopes, c->lse, c->head_mask, c->token_major);
}

/* A packed [1, H, T, D] tensor's shape and element strides: contiguous, or
 * (token_major) over memory laid out [T, H, D]. */
static void packed_layout(uint32_t H, int64_t T, uint32_t D, bool token_major, int64_t shape[4],
                          int64_t strides[4])
{
    shape[0] = 1, shape[1] = H, shape[2] = T, shape[3] = D;
    if (token_major) {
        strides[0] = T * H * D, strides[1] = D, strides[2] = (int64_t)H * D, strides[3] = 1;
    } else {
        strides[0] = (int64_t)H * T * D, strides[1] = T * D, strides[2] = D, strides[3] = 1;
    }
}

static vkattn_host_tensor host_view(void *data, const int64_t *shape, const int64_t *strides,
                                    uint32_t rank)
{
    vkattn_host_tensor t = vkattn_host_tensor_make(data, VKATTN_DTYPE_F32, rank, shape);
    memcpy(t.strides, strides, rank * sizeof strides[0]);
    return t;
}

static vkattn_tensor device_view(vkattn_buffer *b, vkattn_dtype dt, const int64_t *shape,
                                 const int64_t *strides, uint32_t rank)
{
    vkattn_tensor t = vkattn_tensor_make(b, 0, dt, rank, shape);
    memcpy(t.strides, strides, rank * sizeof strides[0]);
    return t;
}

static void fill_nan(float *x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        x[i] = NAN;
}

static void run_case(test_gpu *g, uint32_t policy, const void *arg)
{
    const varlen_case *c = arg;
    vkattn_context *ctx = g->ctx;
    char what[400];
    describe(c, test_policies[policy].name, what, sizeof what);
    packing pk = pack(c);
    const int64_t TQ = pk.qo[c->S], TK = pk.ko[c->S];
    const size_t nq = (size_t)c->Hq * TQ * c->D, nk = (size_t)c->Hkv * TK * c->D;
    const size_t nl = (size_t)c->Hq * TQ;
    test_rng rng = test_rng_seed(77u + (uint32_t)TQ * 3u + (uint32_t)TK);
    float *q = test_random_array(&rng, nq, 2.0f, c->dt);
    float *k = test_random_array(&rng, nk, 2.0f, c->dt);
    float *v = test_random_array(&rng, nk, 1.0f, c->dt);
    float *want = malloc(nq * 4), *got = malloc(nq * 4);
    float *want_lse = malloc(nl * 4), *got_lse = malloc(nl * 4);
    float sinks[16], slopes[16], gate[MAX_SEQ * 16];
    assert_true(want && got && want_lse && got_lse && c->Hq <= 16);
    for (uint32_t h = 0; h < c->Hq; h++) {
        sinks[h] = test_rng_uniform(&rng, -2.0f, 3.0f);
        slopes[h] = test_rng_uniform(&rng, 0.0f, 0.5f);
    }
    for (uint32_t i = 0; i < c->S * c->Hq; i++)
        gate[i] = i % 5 == 3 ? 0.0f : test_rng_uniform(&rng, 0.25f, 1.5f);
    fill_nan(want, nq), fill_nan(got, nq), fill_nan(want_lse, nl), fill_nan(got_lse, nl);

    int64_t qs[4], qst[4], ks[4], kst[4], ls[3] = {1, c->Hq, TQ}, hs1[1] = {c->Hq};
    int64_t hs2[2] = {c->S, c->Hq};
    packed_layout(c->Hq, TQ, c->D, c->token_major, qs, qst);
    packed_layout(c->Hkv, TK, c->D, c->token_major, ks, kst);
    vkattn_ref_attention_args r = {
        .q = host_view(q, qs, qst, 4),
        .k = host_view(k, ks, kst, 4),
        .v = host_view(v, ks, kst, 4),
        .out = host_view(want, qs, qst, 4),
        .causal = c->causal,
        .causal_align = c->top_left ? VKATTN_CAUSAL_TOP_LEFT : VKATTN_CAUSAL_BOTTOM_RIGHT,
        .window = c->window,
        .softcap = c->softcap,
        .sequences = c->S,
        .q_offsets = pk.qo,
        .k_offsets = pk.self ? NULL : pk.ko,
    };
    vkattn_buffer *bq = test_buffer_of(ctx, c->dt, q, nq), *bk = test_buffer_of(ctx, c->dt, k, nk);
    vkattn_buffer *bv = test_buffer_of(ctx, c->dt, v, nk),
                  *bo = test_buffer_of(ctx, c->dt, got, nq);
    vkattn_buffer *bs = NULL, *ba = NULL, *bl = NULL, *bg = NULL;
    vkattn_attention_args a = {
        .q = device_view(bq, c->dt, qs, qst, 4),
        .k = device_view(bk, c->dt, ks, kst, 4),
        .v = device_view(bv, c->dt, ks, kst, 4),
        .out = device_view(bo, c->dt, qs, qst, 4),
        .causal = c->causal,
        .causal_align = r.causal_align,
        .window = c->window,
        .softcap = c->softcap,
        .sequences = c->S,
        .q_offsets = pk.qo,
        .k_offsets = r.k_offsets,
    };
    if (c->sinks) {
        bs = test_buffer_of(ctx, VKATTN_DTYPE_F32, sinks, c->Hq);
        a.sinks = vkattn_tensor_make(bs, 0, VKATTN_DTYPE_F32, 1, hs1);
        r.sinks = vkattn_host_tensor_make(sinks, VKATTN_DTYPE_F32, 1, hs1);
    }
    if (c->slopes) {
        ba = test_buffer_of(ctx, VKATTN_DTYPE_F32, slopes, c->Hq);
        a.alibi_slopes = vkattn_tensor_make(ba, 0, VKATTN_DTYPE_F32, 1, hs1);
        r.alibi_slopes = vkattn_host_tensor_make(slopes, VKATTN_DTYPE_F32, 1, hs1);
    }
    if (c->lse) {
        bl = test_buffer_of(ctx, VKATTN_DTYPE_F32, got_lse, nl);
        a.lse = vkattn_tensor_make(bl, 0, VKATTN_DTYPE_F32, 3, ls);
        r.lse = vkattn_host_tensor_make(want_lse, VKATTN_DTYPE_F32, 3, ls);
    }
    if (c->head_mask) {
        const int64_t *hs = c->head_mask == 1 ? hs1 : hs2;
        uint32_t rank = c->head_mask == 1 ? 1 : 2;
        bg = test_buffer_of(ctx, VKATTN_DTYPE_F32, gate, c->S * c->Hq);
        a.head_mask = vkattn_tensor_make(bg, 0, VKATTN_DTYPE_F32, rank, hs);
        r.head_mask = vkattn_host_tensor_make(gate, VKATTN_DTYPE_F32, rank, hs);
    }
    char err[512] = "";
    if (vkattn_ref_attention(&r, err, sizeof err) != VKATTN_SUCCESS)
        fail_msg("reference failed on %s: %s", what, err);
    TEST_OK(ctx, vkattn_attention(ctx, &a));

    double tol = c->dt == VKATTN_DTYPE_F16 ? TEST_TOL_F16 : TEST_TOL_F32;
    test_download_as(ctx, bo, c->dt, got, nq);
    for (size_t i = 0; i < nq; i++)
        if (isnan(got[i]) || isnan(want[i]))
            fail_msg("%s: out[%zu] is %g, the reference's %g", what, i, (double)got[i],
                     (double)want[i]);
    test_assert_close(got, want, nq, tol, what);
    if (c->lse) {
        TEST_OK(ctx, vkattn_buffer_download(bl, 0, got_lse, nl * 4));
        test_assert_lse_close(got_lse, want_lse, nl, tol, what);
    }
    TEST_DESTROY_BUFFERS(bq, bk, bv, bo, bs, ba, bl, bg);
    free(q), free(k), free(v), free(want), free(got), free(want_lse), free(got_lse);
}

static void run_all(const varlen_case *cases, size_t n)
{
    for (size_t i = 0; i < n; i++)
        test_for_each_policy(0, run_case, &cases[i]);
}

#define F32 VKATTN_DTYPE_F32
#define F16 VKATTN_DTYPE_F16

static void test_packed_self_attention(void **state)
{
    (void)state;
    static const varlen_case cases[] = {
        /* ragged prompts, one empty, one of a single token; GQA */
        {.S = 5, .tq = {9, 0, 33, 1, 17}, .Hq = 4, .Hkv = 2, .D = 32, .dt = F32, .causal = true},
        {.S = 3, .tq = {40, 7, 25}, .Hq = 2, .Hkv = 1, .D = 64, .dt = F16, .causal = true},
        /* not causal, MQA, odd head dim, torch's token-major layout */
        {.S = 4, .tq = {3, 19, 6, 11}, .Hq = 3, .Hkv = 1, .D = 12, .dt = F32},
        {.S = 3,
         .tq = {21, 4, 13},
         .Hq = 4,
         .Hkv = 2,
         .D = 32,
         .dt = F32,
         .causal = true,
         .token_major = true},
        /* the modifiers per sequence, with LSE and a head mask per sequence */
        {.S = 4,
         .tq = {12, 30, 1, 8},
         .Hq = 4,
         .Hkv = 2,
         .D = 16,
         .dt = F32,
         .causal = true,
         .window = 6,
         .softcap = 5.0f,
         .sinks = true,
         .slopes = true,
         .lse = true,
         .head_mask = 2},
        {.S = 2, .tq = {14, 5}, .Hq = 2, .Hkv = 2, .D = 8, .dt = F16, .lse = true, .head_mask = 1},
    };
    run_all(cases, sizeof cases / sizeof cases[0]);
}

static void test_packed_cross_attention(void **state)
{
    (void)state;
    static const varlen_case cases[] = {
        /* queries and keys of their own lengths (chunked prefill: Tq <= Tk) */
        {.S = 4,
         .tq = {4, 9, 1, 6},
         .tk = {20, 9, 31, 7},
         .Hq = 4,
         .Hkv = 1,
         .D = 32,
         .dt = F32,
         .causal = true,
         .lse = true},
        /* top-left alignment, Tq > Tk in one sequence (rows that see
         * nothing), a sequence with keys but no queries */
        {.S = 3,
         .tq = {10, 0, 5},
         .tk = {4, 6, 12},
         .Hq = 2,
         .Hkv = 2,
         .D = 16,
         .dt = F32,
         .causal = true,
         .top_left = true,
         .lse = true},
        {.S = 2,
         .tq = {7, 16},
         .tk = {30, 3},
         .Hq = 2,
         .Hkv = 1,
         .D = 24,
         .dt = F16,
         .window = 4,
         .sinks = true},
    };
    run_all(cases, sizeof cases / sizeof cases[0]);
}

/* The reference's packed call equals its padded call (each sequence a batch
 * row padded to the longest, padded keys hidden by key_padding) on every
 * real row: what "results equal to the padded call" means. */
static void test_reference_packed_equals_padded(void **state)
{
    (void)state;
    const uint32_t S = 4, tq[4] = {6, 17, 1, 11}, Hq = 4, Hkv = 2, D = 16;
    uint32_t T = 0, total = 0;
    int32_t offsets[5] = {0};
    for (uint32_t i = 0; i < S; i++) {
        offsets[i + 1] = offsets[i] + (int32_t)tq[i];
        T = tq[i] > T ? tq[i] : T;
    }
    total = (uint32_t)offsets[S];
    test_rng rng = test_rng_seed(5);
    const size_t nq = (size_t)Hq * total * D, nk = (size_t)Hkv * total * D;
    float *q = test_random_array(&rng, nq, 2.0f, F32), *k = test_random_array(&rng, nk, 2.0f, F32);
    float *v = test_random_array(&rng, nk, 1.0f, F32);
    float *out = test_alloc(nq * 4), *lse = test_alloc((size_t)Hq * total * 4);
    const size_t pq = (size_t)S * Hq * T * D, pk = (size_t)S * Hkv * T * D;
    float *qp = test_alloc(pq * 4), *kp = test_alloc(pk * 4), *vp = test_alloc(pk * 4);
    float *outp = test_alloc(pq * 4), *lsep = test_alloc((size_t)S * Hq * T * 4);
    uint8_t *pad = test_alloc((size_t)S * T);
    for (uint32_t s = 0; s < S; s++) {
        for (uint32_t t = 0; t < tq[s]; t++) {
            pad[s * T + t] = 1;
            for (uint32_t h = 0; h < Hq; h++)
                memcpy(qp + (((size_t)s * Hq + h) * T + t) * D,
                       q + ((size_t)h * total + offsets[s] + t) * D, D * 4);
            for (uint32_t h = 0; h < Hkv; h++) {
                memcpy(kp + (((size_t)s * Hkv + h) * T + t) * D,
                       k + ((size_t)h * total + offsets[s] + t) * D, D * 4);
                memcpy(vp + (((size_t)s * Hkv + h) * T + t) * D,
                       v + ((size_t)h * total + offsets[s] + t) * D, D * 4);
            }
        }
    }
    float sinks[4] = {0.5f, -1.0f, 2.0f, 0.0f}, slopes[4] = {0.1f, 0.3f, 0.05f, 0.2f};
    int64_t hs[1] = {Hq};
    int64_t qs[4] = {1, Hq, total, D}, ks[4] = {1, Hkv, total, D}, ls[3] = {1, Hq, total};
    int64_t qps[4] = {S, Hq, T, D}, kps[4] = {S, Hkv, T, D}, lps[3] = {S, Hq, T}, ps[2] = {S, T};
    vkattn_ref_attention_args packed = {
        .q = vkattn_host_tensor_make(q, F32, 4, qs),
        .k = vkattn_host_tensor_make(k, F32, 4, ks),
        .v = vkattn_host_tensor_make(v, F32, 4, ks),
        .out = vkattn_host_tensor_make(out, F32, 4, qs),
        .lse = vkattn_host_tensor_make(lse, F32, 3, ls),
        .sinks = vkattn_host_tensor_make(sinks, F32, 1, hs),
        .alibi_slopes = vkattn_host_tensor_make(slopes, F32, 1, hs),
        .causal = true,
        .window = 5,
        .softcap = 4.0f,
        .sequences = S,
        .q_offsets = offsets,
    };
    vkattn_ref_attention_args padded = packed;
    padded.sequences = 0, padded.q_offsets = NULL;
    padded.q = vkattn_host_tensor_make(qp, F32, 4, qps);
    padded.k = vkattn_host_tensor_make(kp, F32, 4, kps);
    padded.v = vkattn_host_tensor_make(vp, F32, 4, kps);
    padded.out = vkattn_host_tensor_make(outp, F32, 4, qps);
    padded.lse = vkattn_host_tensor_make(lsep, F32, 3, lps);
    padded.key_padding = vkattn_host_tensor_make(pad, VKATTN_DTYPE_U8, 2, ps);
    char err[512] = "";
    if (vkattn_ref_attention(&packed, err, sizeof err) != VKATTN_SUCCESS)
        fail_msg("packed: %s", err);
    if (vkattn_ref_attention(&padded, err, sizeof err) != VKATTN_SUCCESS)
        fail_msg("padded: %s", err);
    for (uint32_t s = 0; s < S; s++)
        for (uint32_t h = 0; h < Hq; h++)
            for (uint32_t t = 0; t < tq[s]; t++) {
                const float *a = out + ((size_t)h * total + offsets[s] + t) * D;
                const float *b = outp + (((size_t)s * Hq + h) * T + t) * D;
                for (uint32_t d = 0; d < D; d++)
                    if (fabsf(a[d] - b[d]) > 1e-6f)
                        fail_msg("sequence %u head %u token %u: packed %g, padded %g", s, h, t,
                                 (double)a[d], (double)b[d]);
                float la = lse[(size_t)h * total + offsets[s] + t];
                float lb = lsep[((size_t)s * Hq + h) * T + t];
                if (fabsf(la - lb) > 1e-5f)
                    fail_msg("sequence %u head %u token %u: lse %g vs %g", s, h, t, (double)la,
                             (double)lb);
            }
    free(q), free(k), free(v), free(out), free(lse), free(qp), free(kp), free(vp), free(outp);
    free(lsep), free(pad);
}

/* Refusals, the same on the device and in the reference; nothing written. */
static void test_packed_refusals(void **state)
{
    test_gpu *g = *state;
    vkattn_context *ctx = g->ctx;
    const uint32_t Hq = 2, D = 16, T = 12;
    int32_t offsets[4] = {0, 5, 5, 12};
    float *x = test_alloc((size_t)Hq * T * D * 4), *want = test_alloc((size_t)Hq * T * D * 4);
    float *keep = test_alloc((size_t)Hq * T * D * 4);
    fill_nan(keep, (size_t)Hq * T * D);
    int64_t s4[4] = {1, Hq, T, D}, s4b[4] = {2, Hq, T / 2, D}, ps[2] = {1, T};
    int64_t hm[2] = {2, Hq};
    float gate[6] = {1, 1, 1, 1, 1, 1};
    uint8_t pad[12] = {1};
    vkattn_buffer *b = test_buffer_of(ctx, F32, x, (size_t)Hq * T * D);
    vkattn_buffer *bo = test_buffer_of(ctx, F32, keep, (size_t)Hq * T * D);
    vkattn_buffer *bp = test_buffer_with(ctx, pad, sizeof pad);
    vkattn_buffer *bg = test_buffer_of(ctx, F32, gate, 6);
    vkattn_attention_args good =
                              {
                                  .q = vkattn_tensor_make(b, 0, F32, 4, s4),
                                  .k = vkattn_tensor_make(b, 0, F32, 4, s4),
                                  .v = vkattn_tensor_make(b, 0, F32, 4, s4),
                                  .out = vkattn_tensor_make(bo, 0, F32, 4, s4),
                                  .causal = true,
                                  .sequences = 3,
                                  .q_offsets = offsets,
                              },
                          a;
    TEST_OK(ctx, vkattn_attention(ctx, &good));
    TEST_OK(ctx, vkattn_buffer_upload(bo, 0, keep, (uint64_t)Hq * T * D * 4));
    int32_t bad_start[4] = {1, 5, 5, 12}, bad_order[4] = {0, 6, 5, 12}, bad_end[4] = {0, 5, 5, 11};
    int32_t no_keys[4] = {0, 5, 12, 12};
    const vkattn_result INVALID = VKATTN_ERROR_INVALID_ARGUMENT;
    TEST_FAILS_CHANGED(ctx, a, good, a.q_offsets = NULL, INVALID, "args->q_offsets is NULL",
                       vkattn_attention(ctx, &a));
    TEST_FAILS_CHANGED(ctx, a, good, a.q_offsets = bad_start, INVALID, "args->q_offsets[0] is 1",
                       vkattn_attention(ctx, &a));
    TEST_FAILS_CHANGED(ctx, a, good, a.q_offsets = bad_order, INVALID,
                       "args->q_offsets[2] is 5, less than args->q_offsets[1] (6)",
                       vkattn_attention(ctx, &a));
    TEST_FAILS_CHANGED(ctx, a, good, a.q_offsets = bad_end, INVALID,
                       "args->q_offsets[3] (the end of the last sequence) is 11 but "
                       "args->q.shape[2] (sum Tq) is 12",
                       vkattn_attention(ctx, &a));
    TEST_FAILS_CHANGED(ctx, a, good, a.k_offsets = no_keys, INVALID,
                       "sequence 2 has 7 queries but no keys", vkattn_attention(ctx, &a));
    int32_t q_only[4] = {0, 5, 9, 12}, k_none[4] = {0, 5, 5, 12};
    TEST_FAILS_CHANGED(ctx, a, good, (a.q_offsets = q_only, a.k_offsets = k_none), INVALID,
                       "sequence 1 has 4 queries but no keys (args->k_offsets[1] = "
                       "args->k_offsets[2] = 5)",
                       vkattn_attention(ctx, &a));
    TEST_FAILS_CHANGED(
        ctx, a, good, a.key_padding = vkattn_tensor_make(bp, 0, VKATTN_DTYPE_U8, 2, ps),
        VKATTN_ERROR_UNSUPPORTED, "args->key_padding is given with", vkattn_attention(ctx, &a));
    TEST_FAILS_CHANGED(ctx, a, good,
                       (a.q = vkattn_tensor_make(b, 0, F32, 4, s4b), a.k = a.v = a.q,
                        a.out = vkattn_tensor_make(bo, 0, F32, 4, s4b)),
                       VKATTN_ERROR_SHAPE_MISMATCH, "[1, Hq, sum Tq, Dk]",
                       vkattn_attention(ctx, &a));
    hm[0] = 2; /* neither 1 nor the 3 sequences */
    TEST_FAILS_CHANGED(ctx, a, good, a.head_mask = vkattn_tensor_make(bg, 0, F32, 2, hm),
                       VKATTN_ERROR_SHAPE_MISMATCH, "args->head_mask", vkattn_attention(ctx, &a));
    float *after = test_alloc((size_t)Hq * T * D * 4);
    TEST_OK(ctx, vkattn_buffer_download(bo, 0, after, (uint64_t)Hq * T * D * 4));
    for (size_t i = 0; i < (size_t)Hq * T * D; i++)
        if (!isnan(after[i]))
            fail_msg("a refused call wrote out[%zu] (%g)", i, (double)after[i]);

    /* the reference refuses the same, with the same words */
    vkattn_ref_attention_args r = {
        .q = vkattn_host_tensor_make(x, F32, 4, s4),
        .k = vkattn_host_tensor_make(x, F32, 4, s4),
        .v = vkattn_host_tensor_make(x, F32, 4, s4),
        .out = vkattn_host_tensor_make(want, F32, 4, s4),
        .sequences = 3,
        .q_offsets = bad_order,
    };
    char err[512] = "";
    assert_int_equal(vkattn_ref_attention(&r, err, sizeof err), INVALID);
    if (!strstr(err, "args->q_offsets[2] is 5, less than args->q_offsets[1] (6)"))
        fail_msg("reference: %s", err);
    r.q_offsets = q_only, r.k_offsets = k_none;
    assert_int_equal(vkattn_ref_attention(&r, err, sizeof err), INVALID);
    if (!strstr(err, "sequence 1 has 4 queries but no keys"))
        fail_msg("reference: %s", err);
    TEST_DESTROY_BUFFERS(b, bo, bp, bg);
    free(x), free(want), free(keep), free(after);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_packed_self_attention),
        cmocka_unit_test(test_packed_cross_attention),
        cmocka_unit_test(test_reference_packed_equals_padded),
        cmocka_unit_test_setup_teardown(test_packed_refusals, test_gpu_setup, test_gpu_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
