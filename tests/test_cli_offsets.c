/* vkattn attention --q-offsets / --k-offsets: packed ragged sequences
 * (FlashAttention's cu_seqlens) run as a user would. Three sequences of 5,
 * 0 and 12 queries with GQA and causal, self-attention and cross-attention
 * with keys of their own, checked by the tool (--check: packed against the
 * packed reference) and here against the reference called once per
 * sequence on the unpacked slices; int64 offsets give the same output bit
 * for bit; every wrong offsets file or combination is refused naming the
 * flag, without an output file. */
#include "npy/npy.h"
#include "test_cli_util.h"
#include "test_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef VKATTN_CLI_PATH
#error "VKATTN_CLI_PATH must name the vkattn executable"
#endif

/* GQA: 4 query heads over 2 key/value heads of 16; three sequences. */
enum { HQ = 4, HKV = 2, D = 16, S = 3 };
static const int32_t self_offsets[S + 1] = {0, 5, 5, 17}; /* 5, 0 and 12 tokens */
static const int32_t key_offsets[S + 1] = {0, 7, 10, 25}; /* 7, 3 and 15 keys */
enum { TQ = 17, TK = 25 };

static int group_setup(void **state)
{
    if (cli_setup(state) != 0)
        return -1;
    const int64_t q[4] = {1, HQ, TQ, D}, kv[4] = {1, HKV, TQ, D}, ckv[4] = {1, HKV, TK, D},
                  n[1] = {S + 1}, hm[2] = {S, HQ}, q2[4] = {2, HQ, TQ, D};
    cli_write_f32("Q.npy", 4, q, 31, -2, 2);
    cli_write_f32("K.npy", 4, kv, 32, -1, 1);
    cli_write_f32("V.npy", 4, kv, 33, -1, 1);
    cli_write_f32("CK.npy", 4, ckv, 34, -1, 1);
    cli_write_f32("CV.npy", 4, ckv, 35, -1, 1);
    cli_write_f32("HM.npy", 2, hm, 36, 0, 1);
    cli_write_f32("Q2.npy", 4, q2, 37, -1, 1);
    cli_write_npy("QO.npy", NPY_I32, 1, n, self_offsets);
    cli_write_npy("KO.npy", NPY_I32, 1, n, key_offsets);
    int64_t wide[S + 1];
    for (int i = 0; i <= S; i++)
        wide[i] = self_offsets[i];
    cli_write_npy("QO64.npy", NPY_I64, 1, n, wide);
    return 0;
}

/* Tokens [start, start + count) of a packed [1, heads, total, D] array as
 * [1, heads, count, D] (malloc'd). */
static float *slice_tokens(const float *packed, int64_t heads, int64_t total, int64_t start,
                           int64_t count)
{
    float *s = malloc((size_t)(heads * count * D) * 4 + 4);
    assert_non_null(s);
    for (int64_t h = 0; h < heads; h++)
        memcpy(s + h * count * D, packed + (h * total + start) * D, (size_t)(count * D) * 4);
    return s;
}

/* What the packed call must give, computed here: vkattn_ref_attention once
 * per sequence on its own slices (causal, bottom-right; head mask row i of
 * [S, HQ] when given), scattered into out [1, HQ, TQ, D] and lse [1, HQ, TQ]. */
static void reference_per_sequence(const char *k_name, const char *v_name, const int32_t *ko,
                                   int64_t tk_total, const float *head_mask, float *out, float *lse)
{
    npy_array q = cli_read_npy("Q.npy"), k = cli_read_npy(k_name), v = cli_read_npy(v_name);
    for (uint32_t i = 0; i < S; i++) {
        int64_t q0 = self_offsets[i], nq = self_offsets[i + 1] - q0, k0 = ko[i],
                nk = ko[i + 1] - k0;
        if (nq == 0)
            continue;
        float *qs = slice_tokens(q.data, HQ, TQ, q0, nq),
              *ks = slice_tokens(k.data, HKV, tk_total, k0, nk),
              *vs = slice_tokens(v.data, HKV, tk_total, k0, nk),
              *os = malloc((size_t)(HQ * nq * D) * 4), *ls = malloc((size_t)(HQ * nq) * 4);
        assert_true(os && ls);
        const int64_t qsh[4] = {1, HQ, nq, D}, ksh[4] = {1, HKV, nk, D}, lsh[3] = {1, HQ, nq},
                      hsh[1] = {HQ};
        vkattn_ref_attention_args ra = {
            .q = vkattn_host_tensor_make(qs, VKATTN_DTYPE_F32, 4, qsh),
            .k = vkattn_host_tensor_make(ks, VKATTN_DTYPE_F32, 4, ksh),
            .v = vkattn_host_tensor_make(vs, VKATTN_DTYPE_F32, 4, ksh),
            .out = vkattn_host_tensor_make(os, VKATTN_DTYPE_F32, 4, qsh),
            .lse = vkattn_host_tensor_make(ls, VKATTN_DTYPE_F32, 3, lsh),
            .causal = true};
        if (head_mask)
            ra.head_mask =
                vkattn_host_tensor_make((void *)(head_mask + i * HQ), VKATTN_DTYPE_F32, 1, hsh);
        char err[512];
        if (vkattn_ref_attention(&ra, err, sizeof err) != VKATTN_SUCCESS)
            fail_msg("reference of sequence %u: %s", i, err);
        for (int64_t h = 0; h < HQ; h++) {
            memcpy(out + (h * TQ + q0) * D, os + h * nq * D, (size_t)(nq * D) * 4);
            memcpy(lse + h * TQ + q0, ls + h * nq, (size_t)nq * 4);
        }
        free(qs), free(ks), free(vs), free(os), free(ls);
    }
    npy_free(&q), npy_free(&k), npy_free(&v);
}

/* The tool's .npy output `name` against `want` elementwise:
 * |got - want| <= tol (1 + |want|), -inf only where want is. */
static void expect_close(const char *name, const float *want, int64_t n, uint32_t rank,
                         const int64_t *shape, double tol)
{
    npy_array got = cli_read_npy(name);
    assert_int_equal(got.dtype, NPY_F32);
    assert_int_equal(got.rank, rank);
    for (uint32_t d = 0; d < rank; d++)
        assert_int_equal(got.shape[d], shape[d]);
    const float *g = got.data;
    for (int64_t i = 0; i < n; i++) {
        bool same_inf = isinf(want[i]) && g[i] == want[i];
        if (!same_inf && !(fabs((double)g[i] - want[i]) <= tol * (1.0 + fabs((double)want[i]))))
            fail_msg("%s: element %lld is %.8g, the per-sequence reference's %.8g", name,
                     (long long)i, (double)g[i], (double)want[i]);
    }
    npy_free(&got);
}

/* Self-attention (--q-offsets alone: K and V split by the same offsets) and
 * cross-attention (--k-offsets; with a head mask per sequence), causal,
 * GQA, an empty sequence: --check passes, and the output and LSE equal the
 * reference run once per sequence within 2e-4; int64 offsets are the
 * int32 ones. */
void test_packed_sequence_inputs(void **state);
void test_packed_sequence_inputs(void **state)
{
    (void)state;
    char args[4096];
    snprintf(args, sizeof args,
             "attention --q %s --k %s --v %s --q-offsets %s --causal --lse-out %s --check --out %s",
             cli_path_of("Q.npy"), cli_path_of("K.npy"), cli_path_of("V.npy"),
             cli_path_of("QO.npy"), cli_path_of("L_self.npy"), cli_path_of("O_self.npy"));
    cli_expect_success(args);
    static float out[HQ * TQ * D], lse[HQ * TQ];
    const int64_t os[4] = {1, HQ, TQ, D}, ls[3] = {1, HQ, TQ};
    reference_per_sequence("K.npy", "V.npy", self_offsets, TQ, NULL, out, lse);
    expect_close("O_self.npy", out, HQ * TQ * D, 4, os, 2e-4);
    expect_close("L_self.npy", lse, HQ * TQ, 3, ls, 2e-4);

    snprintf(args, sizeof args, "attention --q %s --k %s --v %s --q-offsets %s --causal --out %s",
             cli_path_of("Q.npy"), cli_path_of("K.npy"), cli_path_of("V.npy"),
             cli_path_of("QO64.npy"), cli_path_of("O_self64.npy"));
    cli_expect_success(args);
    cli_compare_outputs("O_self64.npy", "O_self.npy", 0, false, "int64 vs int32 --q-offsets");

    snprintf(args, sizeof args,
             "attention --q %s --k %s --v %s --q-offsets %s --k-offsets %s --head-mask %s "
             "--causal --lse-out %s --check --out %s",
             cli_path_of("Q.npy"), cli_path_of("CK.npy"), cli_path_of("CV.npy"),
             cli_path_of("QO.npy"), cli_path_of("KO.npy"), cli_path_of("HM.npy"),
             cli_path_of("L_cross.npy"), cli_path_of("O_cross.npy"));
    cli_expect_success(args);
    npy_array hm = cli_read_npy("HM.npy");
    reference_per_sequence("CK.npy", "CV.npy", key_offsets, TK, hm.data, out, lse);
    npy_free(&hm);
    expect_close("O_cross.npy", out, HQ * TQ * D, 4, os, 2e-4);
    expect_close("L_cross.npy", lse, HQ * TQ, 3, ls, 2e-4);
    cli_compare_outputs("O_cross.npy", "O_self.npy", 0, true, "cross- vs self-attention");
}

/* One refused command line: its options after `attention`, capital words
 * naming files of the suite (NAME -> NAME.npy); the exit status, what
 * stderr must mention (two pieces; NULL: none). */
typedef struct refusal {
    const char *options;
    int status;
    const char *needle, *needle2;
} refusal;

/* ... of `command` ("attention", "mha"). */
static void expect_refusal(const char *command, const refusal *r)
{
    char args[4096], err[4096];
    snprintf(args, sizeof args, "%s", command);
    for (const char *p = r->options; *p;) {
        size_t len = strcspn(p, " ");
        char word[64];
        snprintf(word, sizeof word, "%.*s", (int)len, p);
        bool file = word[0] >= 'A' && word[0] <= 'Z';
        if (file)
            strcat(word, ".npy");
        snprintf(args + strlen(args), sizeof args - strlen(args), " %s",
                 file ? cli_path_of(word) : word);
        p += len + (p[len] == ' ');
    }
    snprintf(args + strlen(args), sizeof args - strlen(args), " --out %s",
             cli_path_of("O_bad.npy"));
    int status = cli_run_with("", args, err, sizeof err);
    if (status != r->status || !strstr(err, r->needle) || (r->needle2 && !strstr(err, r->needle2)))
        fail_msg("%s: exit %d (want %d), stderr does not mention \"%s\"%s%s:\n%s", r->options,
                 status, r->status, r->needle, r->needle2 ? " and " : "",
                 r->needle2 ? r->needle2 : "", err);
    assert_false(cli_exists(cli_path_of("O_bad.npy")));
}

/* Offsets the library refuses (not ending at the token count, decreasing,
 * K's not ending at K's), offsets files the tool refuses (float32, a
 * value past int32, lengths that differ, one value), and what packed
 * sequences cannot take (--k-offsets alone, --mask, --key-padding,
 * --weights-out, a batch of 2, RoPE's default positions): each named, no
 * output file. */
void test_packed_sequence_refusals(void **state);
void test_packed_sequence_refusals(void **state)
{
    (void)state;
    const int64_t n[1] = {S + 1}, two[1] = {2}, pad[2] = {1, TQ}, mask[2] = {TQ, TQ};
    const int32_t short_end[S + 1] = {0, 5, 5, 16}, decreasing[S + 1] = {0, 5, 3, 17},
                                k_short[S + 1] = {0, 7, 10, 24}, one[2] = {0, 17};
    const float as_float[S + 1] = {0, 5, 5, 17};
    const int64_t huge[S + 1] = {0, 5, 5, (int64_t)1 << 40};
    const uint8_t bytes[TQ * TQ] = {1};
    cli_write_npy("SHORT.npy", NPY_I32, 1, n, short_end);
    cli_write_npy("DECREASING.npy", NPY_I32, 1, n, decreasing);
    cli_write_npy("KSHORT.npy", NPY_I32, 1, n, k_short);
    cli_write_npy("ONESEQ.npy", NPY_I32, 1, two, one);
    cli_write_npy("FLOAT.npy", NPY_F32, 1, n, as_float);
    cli_write_npy("HUGE.npy", NPY_I64, 1, n, huge);
    cli_write_npy("PAD.npy", NPY_U8, 2, pad, bytes);
    cli_write_npy("MASK.npy", NPY_U8, 2, mask, bytes);
    const int64_t one_value[1] = {1};
    cli_write_npy("SINGLE.npy", NPY_I32, 1, one_value, one);
    const char *qkv = "--q Q --k K --v V";
    static const refusal bad[] = {
        {"--q-offsets SHORT", 1, "element 3 of --q-offsets (", "is 16 but dimension 2 of --q ("},
        {"--q-offsets DECREASING", 1, "element 2 of --q-offsets (", "must not decrease"},
        {"--q-offsets QO --k-offsets KSHORT --k CK --v CV", 1, "element 3 of --k-offsets (",
         "dimension 2 of --k ("},
        {"--k-offsets KO", 2, "--k-offsets needs --q-offsets", NULL},
        {"--q-offsets QO --mask MASK", 2, "--mask cannot be combined with --q-offsets", NULL},
        {"--q-offsets QO --key-padding PAD", 2, "--key-padding cannot be combined with --q-offsets",
         NULL},
        {"--q-offsets QO --weights-out W", 2, "--weights-out cannot be combined with --q-offsets",
         NULL},
        {"--q-offsets QO --rope-theta 10000", 2,
         "--rope-theta without --positions and --k-positions cannot be combined with --q-offsets",
         NULL},
        {"--q-offsets FLOAT", 1, "--q-offsets ", "FLOAT.npy: dtype is float32; offsets are int32"},
        {"--q-offsets HUGE", 1, "HUGE.npy: element 3 is 1099511627776, past int32", NULL},
        {"--q-offsets QO --k-offsets ONESEQ --k CK --v CV", 1,
         "ONESEQ.npy: 2 offsets (1 sequences)", "as many sequences as the queries'"},
        {"--q-offsets SINGLE", 1, "SINGLE.npy: shape (1); offsets are int32", NULL},
        {"--q-offsets QO --q Q2", 1,
         "Q2.npy: shape (2, 4, 17, 16); with --q-offsets it is "
         "[1,Hq,sum Tq,Dk]",
         NULL},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        /* the files first: a later --q/--k/--v replaces them */
        char options[1024];
        snprintf(options, sizeof options, "%s %s", qkv, bad[i].options);
        refusal r = bad[i];
        r.options = options;
        expect_refusal("attention", &r);
    }
}

/* vkattn mha --seq-offsets: a GQA layer (4 query heads over 2 KV heads of
 * 8, Dm 32) on X [1, 17, 32] holding sequences of 6, 0 and 11 tokens, and a
 * cross-attention layer on X [1, 16, 32] (4, 9 and 3 tokens) over C
 * [1, 19, 12] (10, 2 and 7 keys). */
enum { DM = 32, MH = 4, MG = 2, MDH = 8, DKV = 12, MT = 17, CT = 16, CK = 19 };
static const int32_t mha_offsets[S + 1] = {0, 6, 6, 17};
static const int32_t cross_q[S + 1] = {0, 4, 13, 16}, cross_k[S + 1] = {0, 10, 12, 19};

static void write_mha_files(void)
{
    const int64_t x[3] = {1, MT, DM}, x2[3] = {2, MT, DM}, cx[3] = {1, CT, DM}, c[3] = {1, CK, DKV},
                  wq[2] = {MH * MDH, DM}, wkv[2] = {MG * MDH, DM}, cwkv[2] = {MG * MDH, DKV},
                  wo[2] = {DM, MH * MDH}, n[1] = {S + 1}, mask[2] = {MT, MT};
    cli_write_f32("MX.npy", 3, x, 41, -1, 1);
    cli_write_f32("MX2.npy", 3, x2, 42, -1, 1);
    cli_write_f32("CX.npy", 3, cx, 43, -1, 1);
    cli_write_f32("C.npy", 3, c, 44, -1, 1);
    cli_write_f32("WQ.npy", 2, wq, 45, -0.3f, 0.3f);
    cli_write_f32("WK.npy", 2, wkv, 46, -0.3f, 0.3f);
    cli_write_f32("WV.npy", 2, wkv, 47, -0.3f, 0.3f);
    cli_write_f32("WO.npy", 2, wo, 48, -0.3f, 0.3f);
    cli_write_f32("CWK.npy", 2, cwkv, 49, -0.3f, 0.3f);
    cli_write_f32("CWV.npy", 2, cwkv, 50, -0.3f, 0.3f);
    const int32_t short_end[S + 1] = {0, 6, 6, 16};
    static const uint8_t bytes[MT * MT] = {1};
    cli_write_npy("MO.npy", NPY_I32, 1, n, mha_offsets);
    cli_write_npy("MSHORT.npy", NPY_I32, 1, n, short_end);
    cli_write_npy("CQO.npy", NPY_I32, 1, n, cross_q);
    cli_write_npy("CKO.npy", NPY_I32, 1, n, cross_k);
    cli_write_npy("MMASK.npy", NPY_U8, 2, mask, bytes);
}

/* "mha" on X `x` (C `c`: cross-attention, else NULL) with `opts`. */
static void mha_command(char *args, size_t size, const char *x, const char *c, const char *opts,
                        const char *out)
{
    snprintf(args, size, "mha --x %s --heads %d --kv-heads %d --wq %s --wo %s", cli_path_of(x), MH,
             MG, cli_path_of("WQ.npy"), cli_path_of("WO.npy"));
    size_t used = strlen(args);
    if (c)
        snprintf(args + used, size - used, " --kv %s --wk %s --wv %s", cli_path_of(c),
                 cli_path_of("CWK.npy"), cli_path_of("CWV.npy"));
    else
        snprintf(args + used, size - used, " --wk %s --wv %s", cli_path_of("WK.npy"),
                 cli_path_of("WV.npy"));
    used = strlen(args);
    snprintf(args + used, size - used, " %s --out %s", opts, cli_path_of(out));
}

/* Rows [start, start + count) of a [1, total, width] .npy file as the file
 * `name` [1, count, width]. */
static void write_rows(const char *from, int64_t start, int64_t count, const char *name)
{
    npy_array a = cli_read_npy(from);
    int64_t width = a.shape[2], shape[3] = {1, count, width};
    cli_write_npy(name, NPY_F32, 3, shape, (const float *)a.data + start * width);
    npy_free(&a);
}

/* The packed run of `x` (and `c`) with `opts` and `offsets_opts` (with
 * --check) against the tool run on each sequence alone, X (and C) sliced
 * by qo (and ko) and the outputs concatenated, within 2e-4. */
static void expect_mha_packed(const char *x, const char *c, const int32_t *qo, const int32_t *ko,
                              const char *opts, const char *offsets_opts)
{
    char args[4096], packed_opts[1024];
    snprintf(packed_opts, sizeof packed_opts, "%s %s --check", opts, offsets_opts);
    mha_command(args, sizeof args, x, c, packed_opts, "MY.npy");
    cli_expect_success(args);
    int64_t total = qo[S], shape[3] = {1, total, DM};
    float *want = calloc((size_t)(total * DM) + 1, 4);
    assert_non_null(want);
    for (uint32_t i = 0; i < S; i++) {
        int64_t q0 = qo[i], nq = qo[i + 1] - q0;
        if (nq == 0)
            continue;
        write_rows(x, q0, nq, "MXi.npy");
        if (c)
            write_rows(c, ko[i], ko[i + 1] - ko[i], "Ci.npy");
        mha_command(args, sizeof args, "MXi.npy", c ? "Ci.npy" : NULL, opts, "MYi.npy");
        cli_expect_success(args);
        npy_array y = cli_read_npy("MYi.npy");
        assert_int_equal(y.shape[1], nq);
        memcpy(want + q0 * DM, y.data, (size_t)(nq * DM) * 4);
        npy_free(&y);
    }
    expect_close("MY.npy", want, total * DM, 3, shape, 2e-4);
    free(want);
}

/* vkattn mha --seq-offsets: causal self-attention (GQA, and with RoPE
 * whose positions restart per sequence) and cross-attention with
 * --kv-offsets equal the layer run on each sequence alone; what packed
 * sequences cannot take is refused, naming the flags, without output. */
void test_mha_seq_offsets(void **state);
void test_mha_seq_offsets(void **state)
{
    (void)state;
    write_mha_files();
    char offsets[1024], cross_offsets[1024];
    snprintf(offsets, sizeof offsets, "--seq-offsets %s", cli_path_of("MO.npy"));
    snprintf(cross_offsets, sizeof cross_offsets, "--seq-offsets %s --kv-offsets %s",
             cli_path_of("CQO.npy"), cli_path_of("CKO.npy"));
    expect_mha_packed("MX.npy", NULL, mha_offsets, NULL, "--causal", offsets);
    expect_mha_packed("MX.npy", NULL, mha_offsets, NULL, "--causal --rope-theta 10000", offsets);
    expect_mha_packed("CX.npy", "C.npy", cross_q, cross_k, "", cross_offsets);

    const char *layer = "--heads 4 --kv-heads 2 --wq WQ --wk WK --wv WV --wo WO";
    static const refusal bad[] = {
        {"--x MX --seq-offsets MSHORT", 1, "element 3 of --seq-offsets (", "MSHORT.npy)"},
        {"--x CX --kv C --kv-offsets CKO", 2, "--kv-offsets needs --seq-offsets", NULL},
        {"--x MX --seq-offsets MO --kv-offsets MO", 2, "--kv-offsets needs --kv", NULL},
        {"--x MX --seq-offsets MO --mask MMASK", 2, "--mask cannot be combined with --seq-offsets",
         NULL},
        {"--x MX --seq-offsets MO --causal --prefill 3", 2,
         "--prefill cannot be combined with --seq-offsets", NULL},
        {"--x MX --seq-offsets MO --head-report", 2,
         "--head-report cannot be combined with --seq-offsets", "not with --seq-offsets yet"},
        {"--x MX2 --seq-offsets MO", 1,
         "MX2.npy: shape (2, 17, 32); with --seq-offsets it is [1,sum T,Dm]", NULL},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char options[1024];
        snprintf(options, sizeof options, "%s %s", layer, bad[i].options);
        refusal r = bad[i];
        r.options = options;
        expect_refusal("mha", &r);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_packed_sequence_inputs),
        cmocka_unit_test(test_packed_sequence_refusals),
        cmocka_unit_test(test_mha_seq_offsets),
    };
    return cmocka_run_group_tests(tests, group_setup, cli_teardown);
}
