/* The vkattn command-line tool's input formats (test_cli.c's suite):
 * float16 and bf16-bit .npy inputs widened exactly, and the layouts. */
#include "npy/npy.h"
#include "test_cli_util.h"
#include "test_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* float16 .npy inputs are taken wherever float32 ones are, widened
 * exactly: attention (q, k, v and an additive mask) and mha (x and the
 * weights) give, bit for bit, what the same values as float32 give, with
 * --dtype f32 and f16. */
void test_float16_inputs(void **state);
void test_float16_inputs(void **state)
{
    (void)state;
    test_rng rng = test_rng_seed(404);
    const char *names[7] = {"hq", "hk", "hv", "hm", "hx", "hw", "hwo"};
    const int64_t shapes[7][4] = {{1, 2, 5, 16}, {1, 2, 7, 16}, {1, 2, 7, 16}, {5, 7},
                                  {2, 5, 32},    {32, 32},      {32, 32}};
    const uint32_t ranks[7] = {4, 4, 4, 2, 3, 2, 2};
    for (int i = 0; i < 7; i++) {
        size_t n = 1;
        for (uint32_t d = 0; d < ranks[i]; d++)
            n *= (size_t)shapes[i][d];
        uint16_t *h = malloc(n * 2);
        float *f = malloc(n * 4);
        assert_true(h && f);
        for (size_t e = 0; e < n; e++) {
            h[e] = vkattn_f32_to_f16(test_rng_uniform(&rng, -1.0f, 1.0f) * (i >= 5 ? 0.2f : 1.0f));
            f[e] = vkattn_f16_to_f32(h[e]);
        }
        char name[32];
        snprintf(name, sizeof name, "%s16.npy", names[i]);
        cli_write_npy(name, NPY_F16, ranks[i], shapes[i], h);
        snprintf(name, sizeof name, "%s32.npy", names[i]);
        cli_write_npy(name, NPY_F32, ranks[i], shapes[i], f);
        free(h);
        free(f);
    }
    const char *dt[2] = {"f32", "f16"};
    for (int d = 0; d < 2; d++)
        for (int w = 0; w < 2; w++) {
            const char *bits = w ? "32" : "16";
            char args[4096], a[64], b[64], c[64], m[64], out[32];
            snprintf(a, sizeof a, "hq%s.npy", bits), snprintf(b, sizeof b, "hk%s.npy", bits);
            snprintf(c, sizeof c, "hv%s.npy", bits), snprintf(m, sizeof m, "hm%s.npy", bits);
            snprintf(out, sizeof out, "ho%s.npy", bits);
            snprintf(args, sizeof args,
                     "attention --q %s --k %s --v %s --mask %s --dtype %s --check --out %s",
                     cli_path_of(a), cli_path_of(b), cli_path_of(c), cli_path_of(m), dt[d],
                     cli_path_of(out));
            cli_expect_success(args);
            snprintf(a, sizeof a, "hx%s.npy", bits), snprintf(b, sizeof b, "hw%s.npy", bits);
            snprintf(c, sizeof c, "hwo%s.npy", bits), snprintf(out, sizeof out, "hy%s.npy", bits);
            snprintf(args, sizeof args,
                     "mha --x %s --heads 2 --wq %s --wk %s --wv %s --wo %s --dtype %s --check "
                     "--out %s",
                     cli_path_of(a), cli_path_of(b), cli_path_of(b), cli_path_of(b), cli_path_of(c),
                     dt[d], cli_path_of(out));
            cli_expect_success(args);
            if (w == 1) {
                cli_compare_outputs("ho16.npy", "ho32.npy", 0, false,
                                    "attention: float16 vs float32 inputs");
                cli_compare_outputs("hy16.npy", "hy32.npy", 0, false,
                                    "mha: float16 vs float32 inputs");
            }
        }
}

/* --input-bf16: uint16 .npy files of bf16 bits give the same outputs, bit
 * for bit, as float32 files of the widened values (attention and mha, with
 * --dtype bf16 and f32); without the flag such a file is refused by name. */
void test_bf16_bit_inputs(void **state);
void test_bf16_bit_inputs(void **state)
{
    (void)state;
    test_rng rng = test_rng_seed(505);
    const char *names[5] = {"bq", "bk", "bv", "bx", "bw"};
    const int64_t shapes[5][3] = {{2, 5, 16}, {2, 7, 16}, {2, 7, 16}, {2, 5, 32}, {32, 32}};
    for (int i = 0; i < 5; i++) {
        size_t n = (size_t)(shapes[i][0] * shapes[i][1] * shapes[i][2]);
        uint32_t rank = i == 4 ? 2 : 3;
        int64_t shape[4] = {1, shapes[i][0], shapes[i][1], shapes[i][2]};
        const int64_t *sh = i < 3 ? shape : shapes[i];
        if (i == 4)
            n = 32 * 32;
        uint16_t *h = malloc(n * 2);
        float *f = malloc(n * 4);
        assert_true(h && f);
        for (size_t e = 0; e < n; e++) {
            h[e] = vkattn_f32_to_bf16(test_rng_uniform(&rng, -1.0f, 1.0f) * (i == 4 ? 0.2f : 1));
            f[e] = vkattn_bf16_to_f32(h[e]);
        }
        char name[32];
        snprintf(name, sizeof name, "%s_bits.npy", names[i]);
        cli_write_npy(name, NPY_U16, i < 3 ? 4 : rank, sh, h);
        snprintf(name, sizeof name, "%s_f32.npy", names[i]);
        cli_write_npy(name, NPY_F32, i < 3 ? 4 : rank, sh, f);
        free(h);
        free(f);
    }
    const char *dt[2] = {"bf16", "f32"};
    for (int d = 0; d < 2; d++)
        for (int w = 0; w < 2; w++) {
            const char *kind = w ? "f32" : "bits", *flag = w ? "" : " --input-bf16";
            char args[4096], f[5][64], out[2][32];
            for (int i = 0; i < 5; i++)
                snprintf(f[i], sizeof f[i], "%s_%s.npy", names[i], kind);
            snprintf(out[0], sizeof out[0], "bo_%s.npy", kind);
            snprintf(out[1], sizeof out[1], "by_%s.npy", kind);
            snprintf(args, sizeof args,
                     "attention --q %s --k %s --v %s%s --dtype %s --check --out %s",
                     cli_path_of(f[0]), cli_path_of(f[1]), cli_path_of(f[2]), flag, dt[d],
                     cli_path_of(out[0]));
            cli_expect_success(args);
            snprintf(args, sizeof args,
                     "mha --x %s --heads 2 --wq %s --wk %s --wv %s --wo %s%s --dtype %s --check "
                     "--out %s",
                     cli_path_of(f[3]), cli_path_of(f[4]), cli_path_of(f[4]), cli_path_of(f[4]),
                     cli_path_of(f[4]), flag, dt[d], cli_path_of(out[1]));
            cli_expect_success(args);
        }
    cli_compare_outputs("bo_bits.npy", "bo_f32.npy", 0, false, "attention: bf16 bits vs float32");
    cli_compare_outputs("by_bits.npy", "by_f32.npy", 0, false, "mha: bf16 bits vs float32");
    char args[2048], err[2048];
    snprintf(args, sizeof args, "attention --q %s --k %s --v %s --out %s",
             cli_path_of("bq_bits.npy"), cli_path_of("bk_f32.npy"), cli_path_of("bv_f32.npy"),
             cli_path_of("bo_none.npy"));
    assert_int_equal(cli_run_with("", args, err, sizeof err), 1);
    if (!strstr(err, "bq_bits.npy: dtype is uint16; inputs must be float32 or float16, or uint16 "
                     "bf16 bits with --input-bf16"))
        fail_msg("uint16 without --input-bf16: %s", err);
    assert_false(cli_exists(cli_path_of("bo_none.npy")));
}

/* Dims 1 and 2 (`swap12`) or 0 and 1 of a rank-3/4 float array swapped
 * into a new file `name`; returns nothing, fails the test on error. */
static void write_transposed(const char *from, const char *name, bool swap12)
{
    npy_array a = cli_read_npy(from);
    int64_t s[4] = {a.shape[0], a.shape[1], a.shape[2], a.rank == 4 ? a.shape[3] : 1};
    int64_t t[4] = {s[0], s[1], s[2], s[3]};
    int i0 = swap12 ? 1 : 0, i1 = swap12 ? 2 : 1;
    t[i0] = s[i1], t[i1] = s[i0];
    float *out = malloc(a.nbytes), *in = a.data;
    assert_non_null(out);
    for (int64_t a0 = 0; a0 < s[0]; a0++)
        for (int64_t a1 = 0; a1 < s[1]; a1++)
            for (int64_t a2 = 0; a2 < s[2]; a2++)
                for (int64_t a3 = 0; a3 < s[3]; a3++) {
                    int64_t idx[4] = {a0, a1, a2, a3};
                    int64_t j = idx[i0];
                    idx[i0] = idx[i1], idx[i1] = j;
                    out[((idx[0] * t[1] + idx[1]) * t[2] + idx[2]) * t[3] + idx[3]] =
                        in[((a0 * s[1] + a1) * s[2] + a2) * s[3] + a3];
                }
    cli_write_npy(name, NPY_F32, a.rank, t, out);
    free(out);
    npy_free(&a);
}

/* attention --layout bthd ([B,T,H,D] files) and mha --seq-first ([T,B,E]
 * files) read and write through strides: their outputs are the default
 * layout's transposed, bit for bit (GQA, causal, LSE, weights, RoPE;
 * self- and cross-attention, and decoding with --prefill); bad values are
 * refused by name without an output. */
void test_layouts(void **state);
void test_layouts(void **state)
{
    (void)state;
    int64_t qs[4] = {2, 4, 5, 16}, ks[4] = {2, 2, 7, 16}, xs[3] = {2, 6, 64}, cs[3] = {2, 9, 64},
            ws[2] = {64, 64};
    cli_write_f32("lq.npy", 4, qs, 71, -1, 1);
    cli_write_f32("lk.npy", 4, ks, 72, -1, 1);
    cli_write_f32("lv.npy", 4, ks, 73, -1, 1);
    cli_write_f32("lx.npy", 3, xs, 74, -1, 1);
    cli_write_f32("lc.npy", 3, cs, 75, -1, 1);
    cli_write_f32("lw.npy", 2, ws, 76, -0.2f, 0.2f);
    const char *four[3] = {"lq", "lk", "lv"};
    for (int i = 0; i < 3; i++) {
        char a[32], b[32];
        snprintf(a, sizeof a, "%s.npy", four[i]), snprintf(b, sizeof b, "%st.npy", four[i]);
        write_transposed(a, b, true);
    }
    write_transposed("lx.npy", "lxt.npy", false);
    write_transposed("lc.npy", "lct.npy", false);
    char args[4096], err[2048];
    for (int e = 0; e < 2; e++) /* causal with LSE and weights; RoPE */
        for (int t = 0; t < 2; t++) {
            const char *lq = t ? "lqt.npy" : "lq.npy", *lk = t ? "lkt.npy" : "lk.npy",
                       *lv = t ? "lvt.npy" : "lv.npy", *lo = t ? "lot.npy" : "lo.npy";
            char extra[1024];
            if (e == 0)
                snprintf(extra, sizeof extra, "--causal --lse-out %s --weights-out %s",
                         cli_path_of(t ? "lL1.npy" : "lL0.npy"),
                         cli_path_of(t ? "lW1.npy" : "lW0.npy"));
            else
                snprintf(extra, sizeof extra, "--rope-theta 10000");
            snprintf(args, sizeof args, "attention --q %s --k %s --v %s %s%s --check --out %s",
                     cli_path_of(lq), cli_path_of(lk), cli_path_of(lv), extra,
                     t ? " --layout bthd" : "", cli_path_of(lo));
            cli_expect_success(args);
            if (!t)
                continue;
            write_transposed("lo.npy", "lo_t.npy", true);
            cli_compare_outputs("lo_t.npy", "lot.npy", 0, false, "--layout bthd");
            if (e == 0) {
                cli_compare_outputs("lL0.npy", "lL1.npy", 0, false, "--layout bthd LSE");
                cli_compare_outputs("lW0.npy", "lW1.npy", 0, false, "--layout bthd weights");
            }
        }
    /* one head of 64 (q4_0 caches need head dims that are multiples of 64) */
    const char *mha_extra[3] = {"--causal", "--kv", "--causal --prefill 2 --kv-dtype q4_0"};
    for (int e = 0; e < 3; e++)
        for (int t = 0; t < 2; t++) {
            snprintf(args, sizeof args,
                     "mha --x %s --heads 1 --wq %s --wk %s --wv %s --wo %s --check --out %s %s%s%s",
                     cli_path_of(t ? "lxt.npy" : "lx.npy"), cli_path_of("lw.npy"),
                     cli_path_of("lw.npy"), cli_path_of("lw.npy"), cli_path_of("lw.npy"),
                     cli_path_of(t ? "lyt.npy" : "ly.npy"), mha_extra[e], e == 1 ? " " : "",
                     e == 1 ? cli_path_of(t ? "lct.npy" : "lc.npy") : "");
            if (t)
                strcat(args, " --seq-first");
            cli_expect_success(args);
            if (t) {
                write_transposed("ly.npy", "ly_t.npy", false);
                cli_compare_outputs("ly_t.npy", "lyt.npy", 0, false, mha_extra[e]);
            }
        }
    static const struct {
        const char *args, *says;
    } bad[] = {
        {"attention --q @lqt.npy --k @lkt.npy --v @lvt.npy --layout bhdt --out @lbad.npy",
         "--layout \"bhdt\": expected bhtd ([B,H,T,D]) or bthd ([B,T,H,D])"},
        {"attention --q @lq.npy --k @lk.npy --v @lv.npy --seq-first --out @lbad.npy",
         "--seq-first is for mha"},
    };
    for (int i = 0; i < 2; i++) {
        char buf[2048];
        size_t o = 0;
        for (const char *p = bad[i].args; *p && o + 300 < sizeof buf;) {
            if (*p == '@') {
                size_t n = strcspn(p + 1, " ");
                char name[64];
                snprintf(name, sizeof name, "%.*s", (int)n, p + 1);
                o += (size_t)snprintf(buf + o, sizeof buf - o, "%s", cli_path_of(name));
                p += 1 + n;
            } else {
                buf[o++] = *p++;
            }
        }
        buf[o] = '\0';
        assert_int_equal(cli_run_with("", buf, err, sizeof err), 2);
        if (!strstr(err, bad[i].says))
            fail_msg("%s: %s", bad[i].args, err);
        assert_false(cli_exists(cli_path_of("lbad.npy")));
    }
}

/* attention --k-dtype / --v-dtype / --quantize-kv (issue 29, part 4): K and
 * V of different float dtypes; quantized K and V quantized on load, or read
 * as uint8 raw ggml blocks, which give the same output bit for bit as the
 * same blocks made on load; other formats and layouts; what is refused. */
void test_kv_dtype_inputs(void **state);
void test_kv_dtype_inputs(void **state)
{
    (void)state;
    const int64_t qs[4] = {2, 4, 7, 64}, ks[4] = {2, 2, 19, 64}, k80[4] = {2, 2, 19, 80};
    cli_write_f32("kq.npy", 4, qs, 71, -1.0f, 1.0f);
    cli_write_f32("kk.npy", 4, ks, 72, -1.0f, 1.0f);
    cli_write_f32("kv.npy", 4, ks, 73, -1.0f, 1.0f);
    cli_write_f32("kk80.npy", 4, k80, 74, -1.0f, 1.0f);
    const int64_t qt[4] = {2, 7, 4, 64}, kt[4] = {2, 19, 2, 64}; /* --layout bthd */
    cli_write_f32("kqt.npy", 4, qt, 75, -1.0f, 1.0f);
    cli_write_f32("kkt.npy", 4, kt, 76, -1.0f, 1.0f);
    /* K as raw q8_0 blocks: uint8 [B, Hkv, Tk, 64 / 32 * 34] */
    npy_array k = cli_read_npy("kk.npy");
    size_t n = (size_t)2 * 2 * 19 * 64;
    uint8_t *blocks = malloc(n / 32 * 34);
    char err[4096], args[4096];
    assert_non_null(blocks);
    assert_int_equal(vkattn_ref_quantize(VKATTN_DTYPE_Q8_0, k.data, n, blocks, err, sizeof err),
                     VKATTN_SUCCESS);
    const int64_t bs[4] = {2, 2, 19, 68};
    cli_write_npy("kk_q8.npy", NPY_U8, 4, bs, blocks);
    free(blocks);
    npy_free(&k);
    char q[256], kk[256], v[256];
    snprintf(q, sizeof q, "%s", cli_path_of("kq.npy"));
    snprintf(kk, sizeof kk, "%s", cli_path_of("kk.npy"));
    snprintf(v, sizeof v, "%s", cli_path_of("kv.npy"));
    static const char *const runs[][2] = {
        {"--k-dtype f16 --v-dtype f32 --causal", "ko_mixed.npy"},
        {"--dtype f16 --k-dtype f32 --v-dtype bf16", "ko_mixed16.npy"},
        {"--k-dtype q8_0 --quantize-kv --causal", "ko_q8.npy"},
        {"--k-dtype q5_0 --v-dtype q5_1 --quantize-kv --weights-out kw.npy", "ko_q5.npy"},
        {"--k-dtype q4_0 --v-dtype q4_0 --quantize-kv --causal", "ko_q4.npy"},
        {"--causal", "ko_f32.npy"},
    };
    for (size_t i = 0; i < sizeof runs / sizeof runs[0]; i++) {
        snprintf(args, sizeof args, "attention --q %s --k %s --v %s %s --check --out %s", q, kk, v,
                 runs[i][0], cli_path_of(runs[i][1]));
        if (strstr(args, "kw.npy")) {
            char *at = strstr(args, "kw.npy");
            char rest[4096];
            snprintf(rest, sizeof rest, "%s", at + strlen("kw.npy"));
            snprintf(at, sizeof args - (size_t)(at - args), "%s%s", cli_path_of("kw.npy"), rest);
        }
        cli_expect_success(args);
    }
    snprintf(args, sizeof args,
             "attention --q %s --k %s --v %s --k-dtype q4_1 --v-dtype iq4_nl --quantize-kv "
             "--layout bthd --causal --check --out %s",
             cli_path_of("kqt.npy"), cli_path_of("kkt.npy"), cli_path_of("kkt.npy"),
             cli_path_of("ko_bthd.npy"));
    cli_expect_success(args);
    /* raw blocks read as they are: the same output as quantized on load */
    snprintf(args, sizeof args,
             "attention --q %s --k %s --v %s --k-dtype q8_0 --causal --check --out %s", q,
             cli_path_of("kk_q8.npy"), v, cli_path_of("ko_raw.npy"));
    cli_expect_success(args);
    cli_compare_outputs("ko_raw.npy", "ko_q8.npy", 0, false, "raw q8_0 blocks vs --quantize-kv");
    cli_compare_outputs("ko_q4.npy", "ko_f32.npy", 0, true, "q4_0 K and V vs f32");
    static const struct {
        const char *args;
        int status;
        const char *needle;
    } bad[] = {
        {"--quantize-kv", 2, "--quantize-kv quantizes K or V on load, but neither"},
        {"--k-dtype q9", 2, "--k-dtype \"q9\": expected f32, f16, bf16, q8_0"},
        {"--k-dtype q8_0", 1, "a q8_0 --k is uint8 raw blocks [B,Hkv,Tk,D/32*34]"},
        {"--v-dtype q8_0 --quantize-kv --k K80 --v K80 --q K80", 1,
         "head dim 80 does not suit --v-dtype q8_0: quantized K and V hold whole 32-value"},
        {"--k-dtype q4_0 --quantize-kv --k K80 --v K80 --q K80", 1,
         "head dim 80 does not suit --k-dtype q4_0"},
        {"--k-dtype q8_0 --quantize-kv --rope-theta 10000", 2,
         "--rope-theta rotates K on the device"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const char *kfile = strstr(bad[i].args, "--k K80") ? cli_path_of("kk80.npy") : kk;
        char extra[512];
        snprintf(extra, sizeof extra, "%s", bad[i].args);
        char *cut = strstr(extra, " --k K80");
        if (cut)
            *cut = 0;
        const char *vfile = strstr(bad[i].args, "--v K80") ? cli_path_of("kk80.npy") : v;
        const char *qfile = strstr(bad[i].args, "--q K80") ? cli_path_of("kk80.npy") : q;
        snprintf(args, sizeof args, "attention --q %s --k %s --v %s %s --out %s", qfile, kfile,
                 vfile, extra, cli_path_of("ko_bad.npy"));
        int status = cli_run_with("", args, err, sizeof err);
        if (status != bad[i].status || !strstr(err, bad[i].needle))
            fail_msg("%s: exit %d (want %d), stderr does not mention \"%s\":\n%s", bad[i].args,
                     status, bad[i].status, bad[i].needle, err);
        assert_false(cli_exists(cli_path_of("ko_bad.npy")));
    }
}

/* One refused command line: `extra` after `layer`, its capital words
 * naming files (files[k][0] -> files[k][1]); it must exit with `status`,
 * mention `needle` on stderr and write no `out`. */
typedef struct refusal {
    const char *extra;
    int status;
    const char *needle;
} refusal;

static void expect_refusals(const char *layer, const refusal *bad, size_t count,
                            const char *const files[][2], size_t file_count, const char *out)
{
    char args[4096], err[4096];
    for (size_t i = 0; i < count; i++) {
        char extra[2048] = "";
        const char *rest = bad[i].extra;
        while (*rest) {
            const char *space = strchr(rest, ' ');
            size_t len = space ? (size_t)(space - rest) : strlen(rest);
            char word[64];
            snprintf(word, sizeof word, "%.*s", (int)len, rest);
            const char *file = NULL;
            for (size_t k = 0; k < file_count && !file; k++)
                if (strcmp(word, files[k][0]) == 0)
                    file = files[k][1];
            snprintf(extra + strlen(extra), sizeof extra - strlen(extra), " %s",
                     file ? cli_path_of(file) : word);
            rest += len + (space != NULL);
        }
        snprintf(args, sizeof args, "%s%s --out %s", layer, extra, cli_path_of(out));
        int status = cli_run_with("", args, err, sizeof err);
        if (status != bad[i].status || !strstr(err, bad[i].needle))
            fail_msg("%s: exit %d (want %d), stderr does not mention \"%s\":\n%s", bad[i].extra,
                     status, bad[i].status, bad[i].needle, err);
        assert_false(cli_exists(cli_path_of(out)));
    }
}

/* mha --key K --value V (torch's key and value, kdim 24 and vdim 40):
 * checked against the reference in both layouts; --key with a value file
 * of the keys' width differs from --kv (the values are read); --key alone
 * is --kv bit for bit; each wrong combination refused without an output. */
void test_key_value_inputs(void **state);
void test_key_value_inputs(void **state)
{
    (void)state;
    const int64_t x[3] = {2, 5, 32}, k[3] = {2, 7, 24}, v[3] = {2, 7, 40}, v6[3] = {2, 6, 40},
                  wq[2] = {32, 32}, wk[2] = {16, 24}, wv[2] = {16, 40}, wo[2] = {32, 32};
    cli_write_f32("vx.npy", 3, x, 81, -1.0f, 1.0f);
    cli_write_f32("vk.npy", 3, k, 82, -1.0f, 1.0f);
    cli_write_f32("vv.npy", 3, v, 83, -1.0f, 1.0f);
    cli_write_f32("vk2.npy", 3, k, 84, -1.0f, 1.0f);
    cli_write_f32("vv6.npy", 3, v6, 85, -1.0f, 1.0f);
    cli_write_f32("vwq.npy", 2, wq, 86, -0.3f, 0.3f);
    cli_write_f32("vwk.npy", 2, wk, 87, -0.3f, 0.3f);
    cli_write_f32("vwv.npy", 2, wv, 88, -0.3f, 0.3f);
    cli_write_f32("vwk2.npy", 2, wk, 89, -0.3f, 0.3f); /* a Wv of the keys' width */
    cli_write_f32("vwo.npy", 2, wo, 90, -0.3f, 0.3f);
    write_transposed("vx.npy", "vxt.npy", false);
    write_transposed("vk.npy", "vkt.npy", false);
    write_transposed("vv.npy", "vvt.npy", false);
    char layer[2048], args[4096];
    snprintf(layer, sizeof layer, "mha --heads 4 --kv-heads 2 --wq %s --wk %s --wo %s",
             cli_path_of("vwq.npy"), cli_path_of("vwk.npy"), cli_path_of("vwo.npy"));
    snprintf(args, sizeof args,
             "%s --x %s --key %s --value %s --wv %s --weights-out %s --check "
             "--out %s",
             layer, cli_path_of("vx.npy"), cli_path_of("vk.npy"), cli_path_of("vv.npy"),
             cli_path_of("vwv.npy"), cli_path_of("vw.npy"), cli_path_of("vo.npy"));
    cli_expect_success(args);
    snprintf(args, sizeof args,
             "%s --x %s --key %s --value %s --wv %s --seq-first --check --out %s", layer,
             cli_path_of("vxt.npy"), cli_path_of("vkt.npy"), cli_path_of("vvt.npy"),
             cli_path_of("vwv.npy"), cli_path_of("vot.npy"));
    cli_expect_success(args);
    write_transposed("vot.npy", "vot_back.npy", false);
    cli_compare_outputs("vot_back.npy", "vo.npy", 0, false, "--seq-first vs batch-first");
    /* values of the keys' width: from their own file they differ from --kv's */
    const char *same_width[3][2] = {{"--kv", NULL}, {"--key", "vk2.npy"}, {"--key", NULL}};
    const char *outs[3] = {"vo_kv.npy", "vo_apart.npy", "vo_key.npy"};
    for (int i = 0; i < 3; i++) {
        char value[512] = "";
        if (same_width[i][1])
            snprintf(value, sizeof value, " --value %s", cli_path_of(same_width[i][1]));
        snprintf(args, sizeof args, "%s --x %s %s %s%s --wv %s --check --out %s", layer,
                 cli_path_of("vx.npy"), same_width[i][0], cli_path_of("vk.npy"), value,
                 cli_path_of("vwk2.npy"), cli_path_of(outs[i]));
        cli_expect_success(args);
    }
    cli_compare_outputs("vo_apart.npy", "vo_kv.npy", 0, true, "--value of its own vs --kv");
    cli_compare_outputs("vo_key.npy", "vo_kv.npy", 0, false, "--key alone vs --kv");
    static const refusal bad[] = {
        {"--kv K --key K --value V --wv WV", 2, "--key and --kv both name the keys' input"},
        {"--value V --wv WV", 2, "needs --key (the keys' input"},
        {"--kv K --value V --wv WV", 2, "--kv gives keys and values from one input"},
        {"--key K --value V --wv WV --rope-theta 10000", 2,
         "--rope-theta is for self-attention layers: it takes no --key"},
        {"--key K --value V --wv WV --causal --prefill 2", 2, "takes no --kv, --key, --value"},
        {"--key K --value V --wv WK", 1, "value_dim (--value's last dimension) is 40"},
        {"--key K --value V6 --wv WV", 1, "6 tokens, but --key"},
    };
    static const char *const files[][2] = {
        {"K", "vk.npy"}, {"V", "vv.npy"}, {"V6", "vv6.npy"}, {"WV", "vwv.npy"}, {"WK", "vwk2.npy"}};
    snprintf(args, sizeof args, "%s --x %s", layer, cli_path_of("vx.npy"));
    expect_refusals(args, bad, sizeof bad / sizeof bad[0], files, sizeof files / sizeof files[0],
                    "vo_bad.npy");
}

/* mha --bias-k/--bias-v (torch's [1,1,E] rows) and --add-zero-attn: the
 * forward (weights with Tk + 2 columns, per head too) and the --prefill
 * steps against the reference and each other; each wrong combination
 * refused without an output. */
void test_appended_rows_inputs(void **state);
void test_appended_rows_inputs(void **state)
{
    (void)state;
    const int64_t x[3] = {2, 5, 32}, w[2] = {32, 32}, kv16[3] = {1, 1, 16}, row32[3] = {1, 1, 32},
                  wkv[2] = {16, 32};
    cli_write_f32("ax.npy", 3, x, 91, -1.0f, 1.0f);
    cli_write_f32("awq.npy", 2, w, 92, -0.3f, 0.3f);
    cli_write_f32("awk.npy", 2, wkv, 93, -0.3f, 0.3f);
    cli_write_f32("awv.npy", 2, wkv, 94, -0.3f, 0.3f);
    cli_write_f32("awo.npy", 2, w, 95, -0.3f, 0.3f);
    cli_write_f32("abk.npy", 3, kv16, 96, -1.0f, 1.0f);
    cli_write_f32("abv.npy", 3, kv16, 97, -1.0f, 1.0f);
    cli_write_f32("abad.npy", 3, row32, 98, -1.0f, 1.0f);
    char layer[2048], args[4096];
    snprintf(layer, sizeof layer,
             "mha --heads 4 --kv-heads 2 --x %s --wq %s --wk %s --wv %s --wo %s",
             cli_path_of("ax.npy"), cli_path_of("awq.npy"), cli_path_of("awk.npy"),
             cli_path_of("awv.npy"), cli_path_of("awo.npy"));
    const char *rows_flags[2] = {"--bias-k", "--bias-v"};
    char rows[1024];
    snprintf(rows, sizeof rows, "%s %s %s %s --add-zero-attn", rows_flags[0],
             cli_path_of("abk.npy"), rows_flags[1], cli_path_of("abv.npy"));
    for (int per_head = 0; per_head < 2; per_head++) {
        snprintf(args, sizeof args, "%s %s --causal --weights-out %s%s --check --out %s", layer,
                 rows, cli_path_of("aw.npy"), per_head ? " --per-head" : "", cli_path_of("ao.npy"));
        cli_expect_success(args);
        npy_array weights = cli_read_npy("aw.npy");
        assert_int_equal(weights.rank, per_head ? 4 : 3);
        assert_int_equal(weights.shape[weights.rank - 1], 5 + 2); /* Tk + the two rows */
        npy_free(&weights);
    }
    snprintf(args, sizeof args, "%s %s --causal --prefill 2 --check --out %s", layer, rows,
             cli_path_of("ao_steps.npy"));
    cli_expect_success(args);
    cli_compare_outputs("ao_steps.npy", "ao.npy", 2e-5, false, "--prefill steps vs forward");
    snprintf(args, sizeof args, "%s --causal --out %s", layer, cli_path_of("ao_plain.npy"));
    cli_expect_success(args);
    cli_compare_outputs("ao_plain.npy", "ao.npy", 0, true, "the rows change the output");
    static const refusal bad[] = {
        {"--bias-k BK", 1, "--bias-k needs --bias-v too"},
        {"--bias-k BK --bias-v BAD", 1, "--bias-v "},
        {"--bias-k BK --bias-v BV --prune-heads 1", 1, "cannot be pruned yet"},
        {"--bias-k BK --bias-v BV --rope-theta 10000", 1, "cannot be combined"},
        {"--add-zero-attn --sinks BAD", 1, "--sinks"},
    };
    static const char *const files[][2] = {
        {"BK", "abk.npy"}, {"BV", "abv.npy"}, {"BAD", "abad.npy"}};
    expect_refusals(layer, bad, sizeof bad / sizeof bad[0], files, sizeof files / sizeof files[0],
                    "ao_bad.npy");
}
