/* The tool's score modifier options (issue 14: --window, --softcap,
 * --sinks, --alibi-slopes, --alibi-max-bias, --causal-top-left, --lse-out)
 * and mask forms (bool/uint8 or float --mask in broadcast shapes,
 * --mask-true-blocks),
 * run as a user would: every option checked against the CPU reference
 * (--check) in attention and mha, decode through the KV cache equal to the
 * full forward, --lse-out against LSE values computed here from the
 * formulas of "attention semantics", and every bad value refused by name
 * without an output file. */
#include "npy/npy.h"
#include "test_cli_util.h"
#include "test_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef VKATTN_CLI_PATH
#error "VKATTN_CLI_PATH must name the vkattn executable"
#endif

/* The layer: x [2, 6, 64], 4 query heads and 2 key/value heads of 16;
 * attention: q [2, 4, 5, 16] over k, v [2, 2, 7, 16]. */
enum { B = 2, T = 6, TC = 9, DM = 64, HEADS = 4, KV_HEADS = 2, DH = 16, TQ = 5, TK = 7 };

static int group_setup(void **state)
{
    if (cli_setup(state) != 0)
        return -1;
    int64_t x[3] = {B, T, DM}, c[3] = {B, TC, DM}, wq[2] = {HEADS * DH, DM},
            wkv[2] = {KV_HEADS * DH, DM}, wo[2] = {DM, HEADS * DH};
    cli_write_f32("X.npy", 3, x, 10, -1, 1);
    cli_write_f32("C.npy", 3, c, 17, -1, 1);
    cli_write_f32("WQ.npy", 2, wq, 11, -0.3f, 0.3f);
    cli_write_f32("WK.npy", 2, wkv, 12, -0.3f, 0.3f);
    cli_write_f32("WV.npy", 2, wkv, 13, -0.3f, 0.3f);
    cli_write_f32("WO.npy", 2, wo, 14, -0.3f, 0.3f);
    /* scores up to about +-8 (scale 1/4): a softcap of 1 changes them */
    int64_t q[4] = {B, HEADS, TQ, DH}, kv[4] = {B, KV_HEADS, TK, DH};
    cli_write_f32("Q.npy", 4, q, 20, -2, 2);
    cli_write_f32("K.npy", 4, kv, 21, -1, 1);
    cli_write_f32("V.npy", 4, kv, 22, -1, 1);
    int64_t h[1] = {HEADS};
    cli_write_npy("S.npy", NPY_F32, 1, h, (float[HEADS]){0.5f, -1.0f, 2.0f, 0.0f});
    cli_write_npy("A.npy", NPY_F32, 1, h, (float[HEADS]){0.5f, 0.25f, 1.0f, 0.0625f});
    /* key padding: sequence 1 has no token at all, so its rows see nothing */
    uint8_t pad[B * TK] = {1, 1, 0, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0};
    cli_write_npy("PAD.npy", NPY_U8, 2, (int64_t[2]){B, TK}, pad);
    /* bad per-head files */
    cli_write_npy("S3.npy", NPY_F32, 1, (int64_t[1]){3}, (float[3]){0});
    cli_write_npy("S2D.npy", NPY_F32, 2, (int64_t[2]){1, HEADS}, (float[HEADS]){0});
    cli_write_npy("SI.npy", NPY_I32, 1, h, (int32_t[HEADS]){0});
    cli_write_npy("SU.npy", NPY_U8, 1, h, (uint8_t[HEADS]){0});
    cli_write_npy("ANAN.npy", NPY_F32, 1, h, (float[HEADS]){0.5f, 0.25f, NAN, 0.1f});
    cli_write_npy("AINF.npy", NPY_F32, 1, h, (float[HEADS]){INFINITY, 0.25f, 0.5f, 0.1f});
    return 0;
}

/* "mha" on the standard layer with `opts` and --out `out`, into args. */
static void mha_args(char *args, size_t size, const char *opts, const char *out)
{
    snprintf(args, size,
             "mha --x %s --heads %d --kv-heads %d --wq %s --wk %s --wv %s --wo %s %s --out %s",
             cli_path_of("X.npy"), HEADS, KV_HEADS, cli_path_of("WQ.npy"), cli_path_of("WK.npy"),
             cli_path_of("WV.npy"), cli_path_of("WO.npy"), opts, cli_path_of(out));
}

/* "attention" on Q, K, V with `opts`, into args. */
static void attention_args(char *args, size_t size, const char *opts, const char *out)
{
    snprintf(args, size, "attention --q %s --k %s --v %s %s --out %s", cli_path_of("Q.npy"),
             cli_path_of("K.npy"), cli_path_of("V.npy"), opts, cli_path_of(out));
}

/* `opts` with every "@NAME" replaced by the path of NAME in the scratch
 * directory (names end at a space). */
static void with_paths(char *dst, size_t size, const char *opts)
{
    size_t o = 0;
    while (*opts && o + 1 < size) {
        if (*opts != '@') {
            dst[o++] = *opts++;
            continue;
        }
        char name[64];
        size_t n = 0;
        for (opts++; *opts && *opts != ' ' && n + 1 < sizeof name; opts++)
            name[n++] = *opts;
        name[n] = '\0';
        o += (size_t)snprintf(dst + o, size - o, "%s", cli_path_of(name));
    }
    dst[o < size ? o : size - 1] = '\0';
}

/* Fails, its stderr mentions `needle` and `also` (unless NULL), and leaves
 * no O.npy or L.npy behind. */
static void expect_failure(const char *args, const char *needle, const char *also)
{
    const char *out = cli_path_of("O.npy"), *lse = cli_path_of("L.npy");
    unlink(out);
    unlink(lse);
    char err[4096];
    if (cli_run_with("", args, err, sizeof err) == 0)
        fail_msg("vkattn %s: exit 0, expected failure", args);
    if (!strstr(err, needle) || (also && !strstr(err, also)))
        fail_msg("vkattn %s: stderr does not mention \"%s\"%s%s:\n%s", args, needle,
                 also ? " and " : "", also ? also : "", err);
    if (cli_exists(out) || cli_exists(lse))
        fail_msg("vkattn %s: failed but wrote an output file", args);
}

/* Every modifier alone and together, checked against the reference, in
 * f32 and f16, with the weights; each one changes the result. */
static void test_attention_mods_check(void **state)
{
    (void)state;
    static const char *const mods[] = {
        "--window 3",
        "--causal --window 2",
        "--causal --window 1",
        "--causal --window 100",
        "--causal-top-left",
        "--causal-top-left --window 2",
        "--softcap 1",
        "--causal --softcap 3",
        "--sinks @S.npy",
        "--causal --sinks @S.npy",
        "--alibi-slopes @A.npy",
        "--alibi-max-bias 8",
        "--causal-top-left --alibi-max-bias 0.5",
        "--causal --window 3 --softcap 2 --sinks @S.npy --alibi-slopes @A.npy",
        "--causal-top-left --window 2 --softcap 1 --sinks @S.npy --alibi-max-bias 8",
        "--causal --window 2 --key-padding @PAD.npy --sinks @S.npy",
    };
    char args[8192], opts[4096], raw[1024];
    attention_args(args, sizeof args, "", "PLAIN.npy");
    cli_expect_success(args);
    attention_args(args, sizeof args, "--causal", "CAUSAL.npy");
    cli_expect_success(args);
    for (size_t i = 0; i < sizeof mods / sizeof mods[0]; i++) {
        snprintf(raw, sizeof raw, "--check --validate %s", mods[i]);
        with_paths(opts, sizeof opts, raw);
        attention_args(args, sizeof args, opts, "O.npy");
        cli_expect_success(args);
        bool causal = strstr(mods[i], "--causal ") != NULL;
        if (strcmp(mods[i], "--causal --window 100") == 0) /* wider than K: no change */
            cli_compare_outputs("O.npy", "CAUSAL.npy", TEST_TOL_F32, false, mods[i]);
        else
            cli_compare_outputs("O.npy", causal ? "CAUSAL.npy" : "PLAIN.npy", 0, true, mods[i]);
        /* f16 storage, and the per-head weights */
        snprintf(raw, sizeof raw, "--check %s --dtype f16 --weights-out @W.npy --per-head",
                 mods[i]);
        with_paths(opts, sizeof opts, raw);
        attention_args(args, sizeof args, opts, "O.npy");
        cli_expect_success(args);
    }
}

/* The softcap, sinks and ALiBi of the formulas, in double: the LSE of
 * query (b, h, i), -inf when nothing is visible. */
typedef struct lse_case {
    const char *opts;
    bool causal, top_left, sinks, pad;
    uint32_t window;
    double softcap, max_bias;
    bool slopes;
} lse_case;

static double expected_lse(const lse_case *c, const npy_array *q, const npy_array *k,
                           const float *sinks, const float *slopes, const uint8_t *pad, int b,
                           int h, int i)
{
    const float *qd = q->data, *kd = k->data;
    int g = h / (HEADS / KV_HEADS);
    int pos = c->top_left ? i : i + TK - TQ;
    double slope = 0;
    if (c->slopes)
        slope = slopes[h];
    else if (c->max_bias > 0) {
        int n = 1;
        while (n * 2 <= HEADS)
            n *= 2;
        double m0 = pow(2.0, -c->max_bias / n), m1 = pow(2.0, -c->max_bias / (2.0 * n));
        slope = h < n ? pow(m0, h + 1.0) : pow(m1, 2.0 * (h - n) + 1.0);
    }
    double sum = 0, max = -INFINITY, s[TK];
    bool seen[TK] = {false};
    for (int j = 0; j < TK; j++) {
        bool visible = !(c->pad && !pad[b * TK + j]) && !((c->causal || c->top_left) && j > pos);
        if (c->window && (pos - j >= (int)c->window ||
                          (!(c->causal || c->top_left) && j - pos >= (int)c->window)))
            visible = false;
        if (!visible)
            continue;
        double dot = 0;
        for (int d = 0; d < DH; d++)
            dot += (double)qd[((b * HEADS + h) * TQ + i) * DH + d] *
                   kd[((b * KV_HEADS + g) * TK + j) * DH + d];
        s[j] = dot / sqrt((double)DH);
        if (c->softcap > 0)
            s[j] = c->softcap * tanh(s[j] / c->softcap);
        s[j] -= slope * fabs((double)(pos - j));
        seen[j] = true;
        max = fmax(max, s[j]);
    }
    if (max == -INFINITY)
        return -INFINITY;
    if (c->sinks)
        max = fmax(max, (double)sinks[h]);
    for (int j = 0; j < TK; j++)
        if (seen[j])
            sum += exp(s[j] - max);
    if (c->sinks)
        sum += exp((double)sinks[h] - max);
    return max + log(sum);
}

/* --lse-out: [B, Hq, Tq] f32, equal to the formulas (-inf where a row sees
 * nothing), in f32 and f16, checked (--check compares it too). */
static void test_attention_lse(void **state)
{
    (void)state;
    static const lse_case cases[] = {
        {""},
        {"--causal", .causal = true},
        {"--causal-top-left", .top_left = true},
        {"--window 2", .window = 2},
        {"--causal --window 3 --softcap 1", .causal = true, .window = 3, .softcap = 1},
        {"--sinks @S.npy", .sinks = true},
        {"--causal --alibi-slopes @A.npy", .causal = true, .slopes = true},
        {"--causal-top-left --alibi-max-bias 8 --sinks @S.npy", .top_left = true, .max_bias = 8,
         .sinks = true},
        {"--causal --key-padding @PAD.npy --sinks @S.npy", .causal = true, .pad = true,
         .sinks = true},
    };
    npy_array q = cli_read_npy("Q.npy"), k = cli_read_npy("K.npy"), s = cli_read_npy("S.npy"),
              a = cli_read_npy("A.npy"), p = cli_read_npy("PAD.npy");
    char args[8192], opts[4096], raw[1024];
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        for (int f16 = 0; f16 < 2; f16++) {
            snprintf(raw, sizeof raw, "--check %s %s --lse-out @L.npy", cases[c].opts,
                     f16 ? "--dtype f16" : "--validate");
            with_paths(opts, sizeof opts, raw);
            attention_args(args, sizeof args, opts, "O.npy");
            cli_expect_success(args);
            npy_array l = cli_read_npy("L.npy");
            assert_int_equal(l.dtype, NPY_F32);
            assert_int_equal(l.rank, 3);
            assert_int_equal(l.shape[0], B);
            assert_int_equal(l.shape[1], HEADS);
            assert_int_equal(l.shape[2], TQ);
            const float *got = l.data;
            double tol = f16 ? TEST_TOL_F16 : TEST_TOL_F32;
            for (int b = 0; b < B; b++)
                for (int h = 0; h < HEADS; h++)
                    for (int i = 0; i < TQ; i++) {
                        double want =
                            expected_lse(&cases[c], &q, &k, s.data, a.data, p.data, b, h, i);
                        double g = got[(b * HEADS + h) * TQ + i];
                        bool ok = isinf(want) ? isinf(g) && g < 0
                                              : fabs(g - want) / (1 + fabs(want)) <= tol;
                        if (!ok)
                            fail_msg("%s%s: lse[%d, %d, %d] is %g, expected %g", cases[c].opts,
                                     f16 ? " (f16)" : "", b, h, i, g, want);
                    }
            npy_free(&l);
        }
    }
    /* a row with nothing visible gives zeros in O */
    with_paths(opts, sizeof opts, "--causal --key-padding @PAD.npy --sinks @S.npy");
    attention_args(args, sizeof args, opts, "O.npy");
    cli_expect_success(args);
    npy_array o = cli_read_npy("O.npy");
    const float *of = o.data;
    for (int e = HEADS * TQ * DH; e < B * HEADS * TQ * DH; e++)
        if (of[e] != 0.0f)
            fail_msg("sequence 1 sees no key, but O element %d is %g", e, (double)of[e]);
    npy_free(&o);
    npy_free(&q);
    npy_free(&k);
    npy_free(&s);
    npy_free(&a);
    npy_free(&p);
}

/* mha: every modifier in the layer's forward (self- and cross-attention,
 * with the weights), checked against the reference. */
static void test_mha_mods_check(void **state)
{
    (void)state;
    static const char *const mods[] = {
        "--causal --window 3",
        "--window 2",
        "--causal-top-left --window 4",
        "--causal --softcap 1",
        "--causal --sinks @S.npy",
        "--causal --alibi-slopes @A.npy",
        "--causal --alibi-max-bias 8",
        "--causal --window 3 --softcap 2 --sinks @S.npy --alibi-max-bias 8",
        "--causal --window 2 --alibi-slopes @A.npy --weights-out @W.npy --per-head",
        "--kv @C.npy --causal-top-left --alibi-max-bias 4 --sinks @S.npy",
        "--kv @C.npy --causal --window 3 --softcap 1.5 --weights-out @W.npy",
        "--causal --window 3 --sinks @S.npy --dtype f16",
    };
    char args[8192], opts[4096], raw[1024];
    mha_args(args, sizeof args, "--causal", "CAUSAL.npy");
    cli_expect_success(args);
    for (size_t i = 0; i < sizeof mods / sizeof mods[0]; i++) {
        snprintf(raw, sizeof raw, "--check --validate %s", mods[i]);
        with_paths(opts, sizeof opts, raw);
        mha_args(args, sizeof args, opts, "O.npy");
        cli_expect_success(args);
        if (strncmp(mods[i], "--causal ", 9) == 0 && !strstr(mods[i], "f16"))
            cli_compare_outputs("O.npy", "CAUSAL.npy", 0, true, mods[i]);
    }
}

/* mha --prefill: the steps use the layer's modifiers, so decoding through
 * the cache (contiguous, paged, paged with blocks released by the window)
 * equals the full causal forward. */
static void test_mha_decode(void **state)
{
    (void)state;
    static const char *const layers[] = {
        "--causal --window 3",
        "--causal --softcap 1",
        "--causal --sinks @S.npy",
        "--causal --alibi-slopes @A.npy",
        "--causal --alibi-max-bias 8",
        "--causal --window 2 --softcap 2 --sinks @S.npy --alibi-max-bias 8",
    };
    static const char *const steps[] = {"--prefill 2", "--prefill 3 --paged-block 2",
                                        "--prefill 1 --paged-block 1 --kv-splits 2",
                                        "--prefill 6 --paged-block 4"};
    char args[8192], opts[4096], raw[4096], layer[1024];
    for (size_t l = 0; l < sizeof layers / sizeof layers[0]; l++) {
        with_paths(layer, sizeof layer, layers[l]);
        mha_args(args, sizeof args, layer, "FULL.npy");
        cli_expect_success(args);
        for (size_t s = 0; s < sizeof steps / sizeof steps[0]; s++) {
            snprintf(raw, sizeof raw, "%s %s --check --validate", layer, steps[s]);
            mha_args(args, sizeof args, raw, "O.npy");
            cli_expect_success(args);
            snprintf(opts, sizeof opts, "%s %s", layers[l], steps[s]);
            cli_compare_outputs("O.npy", "FULL.npy", TEST_TOL_F32, false, opts);
        }
    }
    /* a window shorter than the blocks and one longer than the prompt */
    mha_args(args, sizeof args, "--causal --window 1 --prefill 2 --paged-block 4 --check", "O.npy");
    cli_expect_success(args);
    mha_args(args, sizeof args, "--causal --window 64 --prefill 2 --paged-block 2 --check",
             "O.npy");
    cli_expect_success(args);
}

static void test_bad_options(void **state)
{
    (void)state;
    static const struct {
        const char *opts, *needle, *also;
    } bad[] = {
        {"--window -1", "--window \"-1\"", NULL},
        {"--window 1.5", "--window \"1.5\"", NULL},
        {"--window abc", "--window \"abc\"", NULL},
        {"--window 4294967296", "--window \"4294967296\"", NULL},
        {"--softcap 0", "--softcap \"0\"", "> 0"},
        {"--softcap -2", "--softcap \"-2\"", NULL},
        {"--softcap nan", "--softcap \"nan\"", NULL},
        {"--softcap inf", "--softcap \"inf\"", NULL},
        {"--alibi-max-bias 0", "--alibi-max-bias \"0\"", NULL},
        {"--alibi-max-bias nan", "--alibi-max-bias \"nan\"", NULL},
        {"--sinks @S3.npy", "--sinks", "S3.npy"},
        {"--sinks @S2D.npy", "--sinks", "S2D.npy"},
        {"--sinks @SI.npy", "SI.npy", "int32"},
        {"--sinks @SU.npy", "SU.npy", "uint8"},
        {"--alibi-slopes @S3.npy", "--alibi-slopes", "S3.npy"},
        {"--alibi-slopes @SI.npy", "SI.npy", "int32"},
        {"--alibi-slopes @ANAN.npy", "ANAN.npy: element 2", "NaN"},
        {"--alibi-slopes @AINF.npy", "AINF.npy: element 0", "infinite"},
        {"--alibi-slopes @A.npy --alibi-max-bias 8", "--alibi-slopes and --alibi-max-bias", NULL},
        {"--causal-top-left --causal", "--causal and --causal-top-left", NULL},
        {"--window", "--window needs a value", NULL},
    };
    char args[8192], opts[4096], raw[1024];
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        /* --window needing a value must be the last option */
        bool last = strcmp(bad[i].opts, "--window") == 0;
        snprintf(raw, sizeof raw, "--check --lse-out @L.npy %s", bad[i].opts);
        with_paths(opts, sizeof opts, raw);
        if (last)
            snprintf(args, sizeof args, "attention --q %s --k %s --v %s --out %s %s",
                     cli_path_of("Q.npy"), cli_path_of("K.npy"), cli_path_of("V.npy"),
                     cli_path_of("O.npy"), opts);
        else
            attention_args(args, sizeof args, opts, "O.npy");
        expect_failure(args, bad[i].needle, bad[i].also);
        snprintf(raw, sizeof raw, "--check %s", bad[i].opts);
        with_paths(opts, sizeof opts, raw);
        if (last)
            continue;
        mha_args(args, sizeof args, opts, "O.npy");
        expect_failure(args, bad[i].needle, bad[i].also);
    }
    /* mha: --lse-out is attention's; --causal-top-left has no meaning in
     * KV cache steps; the per-head files against --heads */
    with_paths(opts, sizeof opts, "--causal --lse-out @L.npy");
    mha_args(args, sizeof args, opts, "O.npy");
    expect_failure(args, "--lse-out", "attention only");
    mha_args(args, sizeof args, "--causal-top-left --prefill 2", "O.npy");
    expect_failure(args, "--causal-top-left with --prefill", "bottom-right");
    with_paths(opts, sizeof opts, "--causal --sinks @S3.npy");
    mha_args(args, sizeof args, opts, "O.npy");
    expect_failure(args, "S3.npy: shape (3,), expected (4,)", "--heads");
    /* --lse-out names a file other outputs or inputs use */
    with_paths(opts, sizeof opts, "--lse-out @O.npy");
    attention_args(args, sizeof args, opts, "O.npy");
    expect_failure(args, "--lse-out", "--out");
    with_paths(opts, sizeof opts, "--lse-out @Q.npy");
    attention_args(args, sizeof args, opts, "O.npy");
    expect_failure(args, "--lse-out", "--q");
    /* the LSE file cannot be written: no output is left either */
    attention_args(args, sizeof args, "--lse-out /nonexistent-vkattn-dir/L.npy", "O.npy");
    expect_failure(args, "nonexistent-vkattn-dir", NULL);
}

/* Masks as PyTorch users save them: bool [B, 1, 1, Tk] (True = attend),
 * uint8 [B*H, Tq, Tk] with --mask-true-blocks (nn.MultiheadAttention's),
 * float [1, Tk]; each --check'ed, and the boolean one bit for bit equal to
 * the same mask written out as a dense additive float32 file. */
static void test_mask_forms(void **state)
{
    (void)state;
    bool b11k[B * TK];
    uint8_t m3[B * HEADS * TQ * TK], m3_mha[B * HEADS * T * T];
    float dense[B * HEADS * TQ * TK], row[TK];
    test_rng rng = test_rng_seed(5);
    for (int i = 0; i < B * TK; i++)
        b11k[i] = i % TK == 0 || test_rng_below(&rng, 3) != 0;
    for (int i = 0; i < B * HEADS * TQ * TK; i++) {
        m3[i] = (uint8_t)(test_rng_below(&rng, 3) == 0 ? 1 + test_rng_below(&rng, 200) : 0);
        dense[i] = m3[i] ? -INFINITY : 0.0f;
    }
    for (int i = 0; i < B * HEADS * T * T; i++)
        m3_mha[i] = test_rng_below(&rng, 4) == 0 && i % T != 0;
    for (int j = 0; j < TK; j++)
        row[j] = j == 3 ? -INFINITY : test_rng_uniform(&rng, -1.0f, 1.0f);
    cli_write_npy("MB.npy", NPY_BOOL, 4, (int64_t[4]){B, 1, 1, TK}, b11k);
    cli_write_npy("M3.npy", NPY_U8, 3, (int64_t[3]){B * HEADS, TQ, TK}, m3);
    cli_write_npy("MD.npy", NPY_F32, 4, (int64_t[4]){B, HEADS, TQ, TK}, dense);
    cli_write_npy("M3T.npy", NPY_U8, 3, (int64_t[3]){B * HEADS, T, T}, m3_mha);
    cli_write_npy("MF.npy", NPY_F32, 2, (int64_t[2]){1, TK}, row);
    cli_write_npy("MI.npy", NPY_I32, 2, (int64_t[2]){1, TK}, (int32_t[TK]){0});
    cli_write_npy("MBAD.npy", NPY_BOOL, 3, (int64_t[3]){3, TQ, TK}, m3);
    char args[8192], opts[4096];
    static const char *const ok[] = {
        "--check --mask @MB.npy --weights-out @W.npy --per-head",
        "--check --causal --mask @MB.npy --dtype f16",
        "--check --mask @M3.npy --mask-true-blocks --weights-out @W.npy",
        "--check --mask @MF.npy --window 3",
        "--check --causal --mask @MB.npy --dtype bf16 --weights-out @W.npy",
        "--check --mask @MD.npy --softcap 2 --dtype bf16 --lse-out @L.npy",
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        with_paths(opts, sizeof opts, ok[i]);
        attention_args(args, sizeof args, opts, "O.npy");
        cli_expect_success(args);
    }
    with_paths(opts, sizeof opts, "--mask @M3.npy --mask-true-blocks");
    attention_args(args, sizeof args, opts, "O1.npy");
    cli_expect_success(args);
    with_paths(opts, sizeof opts, "--mask @MD.npy");
    attention_args(args, sizeof args, opts, "O2.npy");
    cli_expect_success(args);
    cli_compare_outputs("O1.npy", "O2.npy", 0, false, "boolean [B*H,Tq,Tk] vs dense float");
    with_paths(opts, sizeof opts,
               "--check --mask @M3T.npy --mask-true-blocks --weights-out @W.npy");
    mha_args(args, sizeof args, opts, "O.npy");
    cli_expect_success(args);
    with_paths(opts, sizeof opts, "--check --causal --mask @MB.npy");
    /* (the layer's keys are its own T tokens: MB's Tk is TK) */
    mha_args(args, sizeof args, opts, "O.npy");
    expect_failure(args, "--mask", "kv_len");
    /* a bf16 layer, forward and through a paged bf16 KV cache */
    mha_args(args, sizeof args, "--dtype bf16 --causal --window 4 --check", "O.npy");
    cli_expect_success(args);
    mha_args(args, sizeof args, "--dtype bf16 --causal --prefill 3 --paged-block 4 --check",
             "O.npy");
    cli_expect_success(args);
    static const struct {
        const char *opts, *needle, *also;
    } bad[] = {
        {"--mask @MF.npy --mask-true-blocks", "--mask-true-blocks is for a boolean", "MF.npy"},
        {"--mask-true-blocks", "--mask-true-blocks needs --mask", NULL},
        {"--mask @MI.npy", "MI.npy", "int32"},
        {"--mask @MBAD.npy", "(batch * num_heads) 3 is neither 1 nor 8", "MBAD.npy"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        with_paths(opts, sizeof opts, bad[i].opts);
        attention_args(args, sizeof args, opts, "O.npy");
        expect_failure(args, bad[i].needle, bad[i].also);
    }
}

static void test_help_lists_options(void **state)
{
    (void)state;
    char err[4096], out[16384];
    static const char *const commands[] = {"mha --help", "attention --help"};
    static const char *const flags[] = {"--window",       "--softcap",          "--sinks",
                                        "--alibi-slopes", "--alibi-max-bias",   "--causal-top-left",
                                        "--lse-out",      "--mask-true-blocks", NULL};
    for (int c = 0; c < 2; c++) {
        assert_int_equal(cli_run_with("", commands[c], err, sizeof err), 0);
        cli_read_text(cli_path_of("stdout.txt"), out, sizeof out);
        for (int i = 0; flags[i]; i++)
            if ((c == 1 || strcmp(flags[i], "--lse-out") != 0) && !strstr(out, flags[i]))
                fail_msg("vkattn %s does not list %s:\n%s", commands[c], flags[i], out);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_help_lists_options),   cmocka_unit_test(test_bad_options),
        cmocka_unit_test(test_attention_mods_check), cmocka_unit_test(test_attention_lse),
        cmocka_unit_test(test_mha_mods_check),       cmocka_unit_test(test_mha_decode),
        cmocka_unit_test(test_mask_forms),
    };
    return cmocka_run_group_tests(tests, group_setup, cli_teardown);
}
