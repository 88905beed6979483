/* Attention dropout on the CPU: Philox4x32-10 against Random123's known
 * answers, the mask's keep rate and thresholds, and the reference forward
 * with dropout against the mask applied by hand (packed sequences draw
 * with the sequence's index). No device. */
#include "test_util.h"

#include <math.h>
#include <stdlib.h>

#define F32 VKATTN_DTYPE_F32

/* Random123's kat_vectors for philox4x32_10 (counter, key, expected). */
static void test_philox_known_answers(void **state)
{
    (void)state;
    static const struct {
        uint32_t ctr[4], key[2], out[4];
    } kat[] = {
        {{0, 0, 0, 0}, {0, 0}, {0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u}},
        {{0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu},
         {0xffffffffu, 0xffffffffu},
         {0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu}},
        {{0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u},
         {0xa4093822u, 0x299f31d0u},
         {0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u}},
    };
    for (size_t c = 0; c < sizeof kat / sizeof kat[0]; c++) {
        uint32_t out[4];
        vkattn_philox4x32_10(kat[c].ctr, kat[c].key, out);
        for (int w = 0; w < 4; w++)
            if (out[w] != kat[c].out[w])
                fail_msg("vector %zu word %d: got %08x, want %08x", c, w, out[w], kat[c].out[w]);
    }
}

/* vkattn_dropout_bits is word j % 4 of Philox of {j / 4, i, h, b} under
 * {seed low, seed high}: the header's definition, at corners of each field. */
static void test_bits_definition(void **state)
{
    (void)state;
    const uint64_t seeds[] = {0, 1, 0x0123456789abcdefull, UINT64_MAX};
    const uint32_t v[] = {0, 1, 2, 3, 4, 7, 1000, 65535, 0x7fffffffu, UINT32_MAX};
    const size_t nv = sizeof v / sizeof v[0];
    for (size_t s = 0; s < sizeof seeds / sizeof seeds[0]; s++)
        for (size_t n = 0; n < nv * nv; n++) {
            uint32_t b = v[n % nv], h = v[(n / 3) % nv], i = v[n / nv], j = v[(n * 7) % nv];
            uint32_t ctr[4] = {j / 4, i, h, b},
                     key[2] = {(uint32_t)seeds[s], (uint32_t)(seeds[s] >> 32)};
            uint32_t out[4];
            vkattn_philox4x32_10(ctr, key, out);
            uint32_t got = vkattn_dropout_bits(seeds[s], b, h, i, j);
            if (got != out[j % 4])
                fail_msg("seed %llx (b %u, h %u, i %u, j %u): %08x, want %08x",
                         (unsigned long long)seeds[s], b, h, i, j, got, out[j % 4]);
        }
    /* the four words of one counter are four different draws */
    uint32_t w[4];
    for (uint32_t j = 0; j < 4; j++)
        w[j] = vkattn_dropout_bits(7, 0, 0, 0, j);
    assert_true(w[0] != w[1] && w[1] != w[2] && w[2] != w[3]);
    assert_int_not_equal(vkattn_dropout_bits(7, 0, 0, 0, 4), w[0]);
}

static void test_thresholds(void **state)
{
    (void)state;
    const float below_one = nextafterf(1.0f, 0.0f); /* 1 - 2^-24 */
    const struct {
        float p;
        uint32_t want;
    } cases[] = {
        {0.0f, 0},
        {-0.0f, 0},
        {-0.5f, 0}, /* refused by the ops; 0 here */
        {0.5f, 0x80000000u},
        {0.25f, 0x40000000u},
        {0.75f, 0xc0000000u},
        {0x1p-32f, 1},
        {0x1p-33f, 0},            /* below one word: never drops */
        {1e-9f, 4},               /* 4.29... */
        {0.1f, 429496736u},       /* the float 0.1 is 13421773 * 2^-27: exactly this */
        {below_one, 0xffffff00u}, /* (1 - 2^-24) 2^32 */
        {1.0f, UINT32_MAX},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        uint32_t got = vkattn_dropout_threshold(cases[c].p);
        if (got != cases[c].want)
            fail_msg("threshold(%a): got %u, want %u", (double)cases[c].p, got, cases[c].want);
    }
}

/* 10^6 draws over all four coordinates: the kept fraction is within 3
 * standard deviations of 1 - p. */
static void test_keep_rate(void **state)
{
    (void)state;
    const float ps[] = {0.1f, 0.5f, 0.9f};
    const long n = 1000000;
    for (size_t c = 0; c < 3; c++) {
        const uint32_t t = vkattn_dropout_threshold(ps[c]);
        long kept = 0, n_done = 0;
        for (uint32_t b = 0; b < 4; b++)
            for (uint32_t h = 0; h < 5; h++)
                for (uint32_t i = 0; i < 250; i++)
                    for (uint32_t j = 0; j < 200; j++, n_done++)
                        kept += vkattn_dropout_bits(0xfeedbeef12345678ull + c, b, h, i, j) >= t;
        assert_int_equal(n_done, n);
        const double p = ps[c], rate = (double)kept / (double)n;
        const double sd = sqrt(p * (1.0 - p) / (double)n);
        print_message("p %.1f: kept %.6f, want %.6f +- %.6f (3 sd)\n", p, rate, 1.0 - p, 3.0 * sd);
        if (fabs(rate - (1.0 - p)) > 3.0 * sd)
            fail_msg("p %g: kept %.6f of %ld, want %.6f within %.6f", p, rate, n, 1.0 - p,
                     3.0 * sd);
    }
}

/* ------------------------------------------------------ reference forward */

typedef struct fwd_case {
    int64_t B, Hq, Hkv, Tq, Tk, D;
    float p;
    uint64_t seed;
    const float *sinks; /* [Hq] or NULL */
} fwd_case;

/* The forward written plainly: softmax (sink in the denominator), then each
 * probability times 1/(1-p) or 0 by the mask, into out [B, Hq, Tq, D]. */
static void by_hand(const fwd_case *c, const float *q, const float *k, const float *v, double *out,
                    long *dropped, long *kept)
{
    const double scale = 1.0 / sqrt((double)c->D);
    const uint32_t t = vkattn_dropout_threshold(c->p);
    double *e = malloc((size_t)c->Tk * sizeof *e);
    for (int64_t b = 0; b < c->B; b++)
        for (int64_t h = 0; h < c->Hq; h++)
            for (int64_t i = 0; i < c->Tq; i++) {
                const int64_t row = (b * c->Hq + h) * c->Tq + i;
                const int64_t kv = b * c->Hkv + h / (c->Hq / c->Hkv);
                double mx = c->sinks ? c->sinks[h] : -INFINITY, sum = 0.0;
                for (int64_t j = 0; j < c->Tk; j++) {
                    double s = 0.0;
                    for (int64_t d = 0; d < c->D; d++)
                        s += (double)q[row * c->D + d] * k[(kv * c->Tk + j) * c->D + d];
                    e[j] = s * scale;
                    mx = fmax(mx, e[j]);
                }
                for (int64_t j = 0; j < c->Tk; j++)
                    sum += (e[j] = exp(e[j] - mx));
                if (c->sinks)
                    sum += exp(c->sinks[h] - mx);
                for (int64_t d = 0; d < c->D; d++)
                    out[row * c->D + d] = 0.0;
                for (int64_t j = 0; j < c->Tk; j++) {
                    bool keep = vkattn_dropout_bits(c->seed, (uint32_t)b, (uint32_t)h, (uint32_t)i,
                                                    (uint32_t)j) >= t;
                    *(keep ? kept : dropped) += 1;
                    if (!keep)
                        continue;
                    for (int64_t d = 0; d < c->D; d++)
                        out[row * c->D + d] +=
                            e[j] / sum / (1.0 - (double)c->p) * v[(kv * c->Tk + j) * c->D + d];
                }
            }
    free(e);
}

static void run_forward_case(const fwd_case *c)
{
    test_rng r = test_rng_seed(11);
    const size_t nq = (size_t)(c->B * c->Hq * c->Tq * c->D),
                 nkv = (size_t)(c->B * c->Hkv * c->Tk * c->D);
    const size_t nw = (size_t)(c->B * c->Hq * c->Tq * c->Tk), nl = (size_t)(c->B * c->Hq * c->Tq);
    float *q = test_random_array(&r, nq, 1.5f, F32), *k = test_random_array(&r, nkv, 1.5f, F32);
    float *v = test_random_array(&r, nkv, 1.0f, F32);
    float *out = test_alloc(nq * 4), *out0 = test_alloc(nq * 4), *w = test_alloc(nw * 4);
    float *w0 = test_alloc(nw * 4), *lse = test_alloc(nl * 4), *lse0 = test_alloc(nl * 4);
    double *want = test_alloc(nq * sizeof *want);
    int64_t qs[4] = {c->B, c->Hq, c->Tq, c->D}, ks[4] = {c->B, c->Hkv, c->Tk, c->D};
    int64_t ws[4] = {c->B, c->Hq, c->Tq, c->Tk}, ls[3] = {c->B, c->Hq, c->Tq}, hs[1] = {c->Hq};
    vkattn_ref_attention_args a = {
        .q = vkattn_host_tensor_make(q, F32, 4, qs),
        .k = vkattn_host_tensor_make(k, F32, 4, ks),
        .v = vkattn_host_tensor_make(v, F32, 4, ks),
        .out = vkattn_host_tensor_make(out, F32, 4, qs),
        .weights = vkattn_host_tensor_make(w, F32, 4, ws),
        .lse = vkattn_host_tensor_make(lse, F32, 3, ls),
        .dropout_p = c->p,
        .dropout_seed = c->seed,
    };
    if (c->sinks)
        a.sinks = vkattn_host_tensor_make((void *)c->sinks, F32, 1, hs);
    char err[512] = "";
    if (vkattn_ref_attention(&a, err, sizeof err) != VKATTN_SUCCESS)
        fail_msg("with dropout: %s", err);
    vkattn_ref_attention_args a0 = a;
    a0.dropout_p = 0.0f;
    a0.out.data = out0, a0.weights.data = w0, a0.lse.data = lse0;
    if (vkattn_ref_attention(&a0, err, sizeof err) != VKATTN_SUCCESS)
        fail_msg("without: %s", err);
    long dropped = 0, kept = 0;
    by_hand(c, q, k, v, want, &dropped, &kept);
    assert_true(dropped > 0 && kept > 0); /* the case exercises both */
    double worst = 0.0, differs = 0.0;
    for (size_t x = 0; x < nq; x++) {
        double e = fabs(out[x] - want[x]) / (1.0 + fabs(want[x]));
        worst = fmax(worst, e);
        differs = fmax(differs, fabs((double)out[x] - out0[x]));
    }
    print_message("dropout %.2f (%ld of %ld dropped): max rel error %.3g; out moved by %.3g\n",
                  (double)c->p, dropped, dropped + kept, worst, differs);
    if (worst > 1e-6)
        fail_msg("out differs from the hand computation by %.3g", worst);
    assert_true(differs > 1e-3);
    /* the LSE and the weights are the probabilities before dropout */
    assert_memory_equal(lse, lse0, nl * 4);
    assert_memory_equal(w, w0, nw * 4);
    free(q), free(k), free(v), free(out), free(out0), free(w), free(w0), free(lse), free(lse0);
    free(want);
}

static void test_forward_against_hand(void **state)
{
    (void)state;
    const float sinks[4] = {0.5f, -1.0f, 1.5f, 0.0f};
    const fwd_case cases[] = {
        {2, 4, 2, 3, 9, 8, 0.3f, 0x0123456789abcdefull, NULL},
        {1, 4, 1, 5, 6, 4, 0.5f, 42, sinks}, /* MQA; sinks never drop */
        {2, 2, 2, 2, 17, 3, 0.1f, UINT64_MAX, NULL},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
        run_forward_case(&cases[c]);
}

/* Packed sequences draw with b = the sequence's index and i the query's
 * index within it: equal to a padded batch (keys padded out), and unlike
 * the same sequence alone (b = 0). */
static void test_packed_uses_sequence_index(void **state)
{
    (void)state;
    enum { S = 3, H = 2, D = 4, T = 6 };
    const int32_t len[S] = {4, 6, 3}, offsets[S + 1] = {0, 4, 10, 13};
    const int64_t total = 13;
    test_rng r = test_rng_seed(5);
    float *q = test_random_array(&r, H * total * D, 1.5f, F32);
    float *k = test_random_array(&r, H * total * D, 1.5f, F32);
    float *v = test_random_array(&r, H * total * D, 1.0f, F32);
    float out[H * 13 * D], qp[S * H * T * D] = {0}, kp[S * H * T * D] = {0};
    float vp[S * H * T * D] = {0}, outp[S * H * T * D];
    uint8_t pad[S * T] = {0};
    for (int s = 0; s < S; s++)
        for (int t = 0; t < len[s]; t++) {
            pad[s * T + t] = 1;
            for (int h = 0; h < H; h++)
                for (int d = 0; d < D; d++) {
                    size_t from = ((size_t)h * total + offsets[s] + t) * D + d;
                    size_t to = (((size_t)s * H + h) * T + t) * D + d;
                    qp[to] = q[from], kp[to] = k[from], vp[to] = v[from];
                }
        }
    int64_t qs[4] = {1, H, total, D}, ps4[4] = {S, H, T, D}, pads[2] = {S, T};
    vkattn_ref_attention_args packed = {
        .q = vkattn_host_tensor_make(q, F32, 4, qs),
        .k = vkattn_host_tensor_make(k, F32, 4, qs),
        .v = vkattn_host_tensor_make(v, F32, 4, qs),
        .out = vkattn_host_tensor_make(out, F32, 4, qs),
        .sequences = S,
        .q_offsets = offsets,
        .dropout_p = 0.4f,
        .dropout_seed = 99,
    };
    vkattn_ref_attention_args padded = packed;
    padded.sequences = 0, padded.q_offsets = NULL;
    padded.q = vkattn_host_tensor_make(qp, F32, 4, ps4);
    padded.k = vkattn_host_tensor_make(kp, F32, 4, ps4);
    padded.v = vkattn_host_tensor_make(vp, F32, 4, ps4);
    padded.out = vkattn_host_tensor_make(outp, F32, 4, ps4);
    padded.key_padding = vkattn_host_tensor_make(pad, VKATTN_DTYPE_U8, 2, pads);
    char err[512] = "";
    if (vkattn_ref_attention(&packed, err, sizeof err) != VKATTN_SUCCESS)
        fail_msg("packed: %s", err);
    if (vkattn_ref_attention(&padded, err, sizeof err) != VKATTN_SUCCESS)
        fail_msg("padded: %s", err);
    for (int s = 0; s < S; s++)
        for (int h = 0; h < H; h++)
            for (int t = 0; t < len[s]; t++)
                for (int d = 0; d < D; d++) {
                    float a = out[((size_t)h * total + offsets[s] + t) * D + d];
                    float b = outp[(((size_t)s * H + h) * T + t) * D + d];
                    if (fabsf(a - b) > 1e-6f * (1.0f + fabsf(b)))
                        fail_msg("sequence %d head %d query %d [%d]: packed %.9g, padded %.9g", s,
                                 h, t, d, a, b);
                }
    /* sequence 1 alone, as batch row 0, draws another mask */
    int64_t one[4] = {1, H, T, D};
    float alone[H * T * D];
    vkattn_ref_attention_args a1 = padded;
    a1.key_padding = (vkattn_host_tensor){0};
    a1.q = vkattn_host_tensor_make(qp + H * T * D, F32, 4, one);
    a1.k = vkattn_host_tensor_make(kp + H * T * D, F32, 4, one);
    a1.v = vkattn_host_tensor_make(vp + H * T * D, F32, 4, one);
    a1.out = vkattn_host_tensor_make(alone, F32, 4, one);
    if (vkattn_ref_attention(&a1, err, sizeof err) != VKATTN_SUCCESS)
        fail_msg("alone: %s", err);
    double moved = 0.0;
    for (int x = 0; x < H * T * D; x++)
        moved = fmax(moved, fabs((double)alone[x] - outp[H * T * D + x]));
    assert_true(moved > 1e-3);
    free(q), free(k), free(v);
}

/* p outside [0, 1) is refused by name, and nothing is written. */
static void test_refusals(void **state)
{
    (void)state;
    float q[8] = {0}, k[8] = {0}, v[8] = {0}, out[8] = {7, 7, 7, 7, 7, 7, 7, 7};
    int64_t s[4] = {1, 1, 2, 4};
    vkattn_ref_attention_args a = {
        .q = vkattn_host_tensor_make(q, F32, 4, s),
        .k = vkattn_host_tensor_make(k, F32, 4, s),
        .v = vkattn_host_tensor_make(v, F32, 4, s),
        .out = vkattn_host_tensor_make(out, F32, 4, s),
    };
    const float bad[] = {1.0f, 1.5f, -0.1f, NAN, INFINITY, -INFINITY};
    const char *text[] = {"dropout_p is 1:",   "dropout_p is 1.5:", "dropout_p is -0.1:",
                          "dropout_p is nan:", "dropout_p is inf:", "dropout_p is -inf:"};
    for (size_t c = 0; c < sizeof bad / sizeof bad[0]; c++) {
        char err[512] = "";
        a.dropout_p = bad[c];
        vkattn_result res = vkattn_ref_attention(&a, err, sizeof err);
        assert_int_equal(res, VKATTN_ERROR_INVALID_ARGUMENT);
        if (!strstr(err, text[c]) || !strstr(err, "args->") || !strstr(err, "[0, 1)"))
            fail_msg("p %g: message \"%s\"", (double)bad[c], err);
        for (int x = 0; x < 8; x++)
            assert_true(out[x] == 7.0f);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_philox_known_answers),
        cmocka_unit_test(test_bits_definition),
        cmocka_unit_test(test_thresholds),
        cmocka_unit_test(test_keep_rate),
        cmocka_unit_test(test_forward_against_hand),
        cmocka_unit_test(test_packed_uses_sequence_index),
        cmocka_unit_test(test_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
