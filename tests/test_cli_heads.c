/* The CLI's head options (issue 17): --head-mask on attention and mha
 * (forward and --prefill steps) against the CPU reference; --prune-heads
 * equal to masking those heads, checked against the reference with its
 * per-head weights; --save-weights read back by --weights giving the same
 * output; --head-report ranking a head whose output weights are zero last
 * (table and JSON); --report and info --layer against hand-computed
 * figures; every bad value refused naming it, with no output file. */
#include "npy/npy.h"
#include "test_cli_util.h"
#include "test_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef VKATTN_CLI_PATH
#error "VKATTN_CLI_PATH must name the vkattn executable"
#endif

/* x [2, 6, 64]; 4 query heads of 16 in 2 KV groups; head 2's columns of
 * WO are zero (it contributes nothing). */
enum { B = 2, T = 6, DM = 64, HEADS = 4, KV_HEADS = 2, DH = 16 };

static char layer[2048]; /* "--x .. --wo .. --heads 4 --kv-heads 2" */

static int group_setup(void **state)
{
    if (cli_setup(state) != 0)
        return -1;
    int64_t x[3] = {B, T, DM}, wq[2] = {HEADS * DH, DM}, wkv[2] = {KV_HEADS * DH, DM},
            wo[2] = {DM, HEADS * DH}, q[4] = {B, HEADS, T, DH}, kv[4] = {B, KV_HEADS, 9, DH};
    cli_write_f32("X.npy", 3, x, 1, -1, 1);
    cli_write_f32("WQ.npy", 2, wq, 2, -0.3f, 0.3f);
    cli_write_f32("WK.npy", 2, wkv, 3, -0.3f, 0.3f);
    cli_write_f32("WV.npy", 2, wkv, 4, -0.3f, 0.3f);
    cli_write_f32("WO.npy", 2, wo, 5, -0.3f, 0.3f);
    npy_array o = cli_read_npy("WO.npy");
    float *w = o.data;
    for (int r = 0; r < DM; r++)
        memset(&w[r * HEADS * DH + 2 * DH], 0, DH * sizeof *w);
    cli_write_npy("WO.npy", NPY_F32, 2, wo, w);
    npy_free(&o);
    cli_write_f32("Q.npy", 4, q, 6, -1, 1);
    cli_write_f32("K.npy", 4, kv, 7, -1, 1);
    cli_write_f32("V.npy", 4, kv, 8, -1, 1);
    /* a head mask per batch row: scales, a removed head, a negative one */
    const float hm[B * HEADS] = {1, 0.5f, 0, 2, 0, 1, 1, -1};
    const int64_t hs[2] = {B, HEADS}, h1[1] = {HEADS}, h3[2] = {B, 3};
    cli_write_npy("HM.npy", NPY_F32, 2, hs, hm);
    cli_write_npy("HM1.npy", NPY_F32, 1, h1, hm);
    cli_write_npy("HM3.npy", NPY_F32, 2, h3, hm);
    /* removing heads 1 and 3 by mask, and the pruned layer's mask (heads 0 and 2) */
    const float drop13[HEADS] = {1, 0, 1, 0}, kept02[B * 2] = {1, 0, 0, 1},
                drop13_hm[B * HEADS] = {1, 0, 0, 0, 0, 0, 1, 0};
    const int64_t k2[2] = {B, 2};
    cli_write_npy("DROP13.npy", NPY_F32, 1, h1, drop13);
    cli_write_npy("HM_KEPT.npy", NPY_F32, 2, k2, kept02);
    cli_write_npy("HM_DROP13.npy", NPY_F32, 2, hs, drop13_hm);
    snprintf(layer, sizeof layer, "--x %s --wq %s --wk %s --wv %s --wo %s --heads 4 --kv-heads 2",
             cli_path_of("X.npy"), cli_path_of("WQ.npy"), cli_path_of("WK.npy"),
             cli_path_of("WV.npy"), cli_path_of("WO.npy"));
    return 0;
}

static void run_ok(const char *fmt, const char *a, const char *b, const char *c)
{
    char args[8192];
    snprintf(args, sizeof args, fmt, a, b, c);
    cli_expect_success(args);
}

/* Fails unless `args` exits 2 (or 1) with `says` in stderr and no file `out`. */
static void expect_refused(const char *args, const char *says, const char *out, int code)
{
    char err[4096];
    int status = cli_run_with("", args, err, sizeof err);
    if (status != code || !strstr(err, says))
        fail_msg("vkattn %s\n -> exit %d, \"%s\"; expected exit %d with \"%s\"", args, status, err,
                 code, says);
    if (out && cli_exists(cli_path_of(out)))
        fail_msg("vkattn %s left %s behind", args, out);
}

/* attention --head-mask: [B,Hq] and [Hq] against the reference, with the
 * per-head weights; the gated head's output is zero. */
static void test_attention_head_mask(void **state)
{
    (void)state;
    char qkv[1024];
    snprintf(qkv, sizeof qkv, "--q %s --k %s --v %s", cli_path_of("Q.npy"), cli_path_of("K.npy"),
             cli_path_of("V.npy"));
    run_ok("attention %s --head-mask %s --causal --check --weights-out %s --per-head --out A.npy",
           qkv, cli_path_of("HM.npy"), cli_path_of("AW.npy"));
    /* the run above wrote A.npy in the working directory: use cli_tmp */
    run_ok("attention %s --head-mask %s --check --out %s", qkv, cli_path_of("HM1.npy"),
           cli_path_of("A1.npy"));
    run_ok("attention %s --check --out %s%s", qkv, cli_path_of("A0.npy"), "");
    npy_array a = cli_read_npy("A1.npy"), a0 = cli_read_npy("A0.npy");
    const float *g = a.data, *u = a0.data;
    size_t plane = T * DH;
    for (int b = 0; b < B; b++)
        for (size_t i = 0; i < plane; i++) {
            size_t h0 = (size_t)(b * HEADS + 0) * plane + i,
                   h2 = (size_t)(b * HEADS + 2) * plane + i,
                   h3 = (size_t)(b * HEADS + 3) * plane + i;
            assert_true(g[h2] == 0.0f);                 /* mask 0 */
            assert_float_equal(g[h3], 2 * u[h3], 1e-6); /* mask 2 */
            assert_float_equal(g[h0], u[h0], 0);
        }
    npy_free(&a);
    npy_free(&a0);
    remove("A.npy");
    char args[2048];
    snprintf(args, sizeof args, "attention %s --head-mask %s --out %s", qkv, cli_path_of("HM3.npy"),
             cli_path_of("BAD.npy"));
    expect_refused(args, "--head-mask", "BAD.npy", 1);
}

/* mha --head-mask in the forward and the --prefill steps, against the
 * reference; a mask of the wrong shape refused naming it. */
static void test_mha_head_mask(void **state)
{
    (void)state;
    run_ok("mha %s --head-mask %s --check --weights-out %s --out /dev/null", layer,
           cli_path_of("HM.npy"), cli_path_of("MW.npy"));
    run_ok("mha %s --head-mask %s --causal --prefill 3 --check --out %s", layer,
           cli_path_of("HM.npy"), cli_path_of("MS.npy"));
    run_ok("mha %s --head-mask %s --causal --check --out %s", layer, cli_path_of("HM.npy"),
           cli_path_of("MF.npy"));
    cli_compare_outputs("MS.npy", "MF.npy", 2e-5, false, "steps vs forward with a head mask");
    char args[4096];
    snprintf(args, sizeof args, "mha %s --head-mask %s --out %s", layer, cli_path_of("HM3.npy"),
             cli_path_of("BAD.npy"));
    expect_refused(args, "--head-mask", "BAD.npy", 1);
    snprintf(args, sizeof args, "mha %s --head-mask %s --out %s", layer, cli_path_of("WQ.npy"),
             cli_path_of("BAD.npy"));
    expect_refused(args, "a head mask is float32 [H] or [B,H]", "BAD.npy", 1);
}

/* The pruned layer's output equals the unpruned one's with those heads
 * masked; --check with per-head weights; --save-weights gives a file that
 * --weights reads back into the same output, with a kept head's mask. */
static void test_prune_heads(void **state)
{
    (void)state;
    run_ok("mha %s --causal --head-mask %s --out %s", layer, cli_path_of("DROP13.npy"),
           cli_path_of("MASKED.npy"));
    run_ok("mha %s --causal --prune-heads 3,1 --check --weights-out %s --per-head --out %s", layer,
           cli_path_of("PW.npy"), cli_path_of("PRUNED.npy"));
    cli_compare_outputs("PRUNED.npy", "MASKED.npy", 2e-6, false, "pruned vs masked");
    npy_array pw = cli_read_npy("PW.npy");
    assert_int_equal(pw.rank, 4);
    assert_int_equal(pw.shape[1], 2); /* the kept heads' weights */
    npy_free(&pw);
    /* with a head mask of the layer as given (its pruned columns unused),
     * the averaged weights, and the steps of a paged cache */
    run_ok("mha %s --causal --prune-heads 1,3 --head-mask %s --check --weights-out %s --out "
           "/dev/null",
           layer, cli_path_of("HM.npy"), cli_path_of("PWA.npy"));
    run_ok("mha %s --causal --prune-heads 1,3 --prefill 2 --paged-block 4 --check --out %s%s",
           layer, cli_path_of("PS.npy"), "");
    cli_compare_outputs("PS.npy", "PRUNED.npy", 2e-5, false, "pruned steps vs pruned forward");

    char args[8192];
    snprintf(args, sizeof args,
             "mha %s --causal --prune-heads 1,3 --head-mask %s --save-weights %s --prefix "
             "layers.0. --out %s",
             layer, cli_path_of("HM.npy"), cli_path_of("P.safetensors"), cli_path_of("P1.npy"));
    cli_expect_success(args);
    snprintf(args, sizeof args,
             "mha --x %s --heads 2 --kv-heads 2 --weights %s --prefix layers.0. --causal "
             "--head-mask %s --check --out %s",
             cli_path_of("X.npy"), cli_path_of("P.safetensors"), cli_path_of("HM_KEPT.npy"),
             cli_path_of("P2.npy"));
    cli_expect_success(args);
    cli_compare_outputs("P1.npy", "P2.npy", 0, false, "saved pruned weights read back");
    run_ok("mha %s --causal --head-mask %s --out %s", layer, cli_path_of("HM_DROP13.npy"),
           cli_path_of("P3.npy"));
    cli_compare_outputs("P1.npy", "P3.npy", 2e-6, false, "pruned and masked vs masked");
    char text[4096];
    cli_read_text(cli_path_of("P.safetensors"), text, sizeof text);
    assert_non_null(strstr(text + 8, "\"kept_heads\":\"0,2\""));
    assert_non_null(strstr(text + 8, "\"layers.0.o_proj.weight\":{\"shape\":[64,32]"));

    static const struct {
        const char *opts, *says;
        int code;
    } bad[] = {
        {"--prune-heads 0,1,2,3", "removes every head", 2},
        {"--prune-heads 4", "head 4 does not exist", 2},
        {"--prune-heads 1,1", "head 1 is given twice", 2},
        {"--prune-heads 1,", "expected head numbers", 2},
        {"--prune-heads 1 --save-weights W.npy", "expected a .safetensors path", 2},
        {"--prune-heads 1 --save-weights /nonexistent-dir/W.safetensors", "nothing was written", 1},
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        snprintf(args, sizeof args, "mha %s %s --out %s", layer, bad[k].opts,
                 cli_path_of("BAD.npy"));
        expect_refused(args, bad[k].says, "BAD.npy", bad[k].code);
    }
}

/* --head-report: head 2 (zero WO columns) ranks last with importance 0, in
 * the table and the JSON; the run's output is the plain forward's. */
static void test_head_report(void **state)
{
    (void)state;
    run_ok("mha %s --causal --head-report --head-report-json %s --check --out %s", layer,
           cli_path_of("R.json"), cli_path_of("R.npy"));
    char out[4096], json[4096];
    cli_read_text(cli_path_of("stdout.txt"), out, sizeof out);
    cli_read_text(cli_path_of("R.json"), json, sizeof json);
    if (!strstr(out, "     4      2        1              0    0.00%") ||
        !strstr(out, "--prune-heads 2"))
        fail_msg("head report:\n%s", out);
    if (!strstr(json,
                "{\"rank\": 4, \"head\": 2, \"kv_head\": 1, \"importance\": 0, \"share\": 0}"))
        fail_msg("head report JSON:\n%s", json);
    run_ok("mha %s --causal --out %s%s", layer, cli_path_of("R0.npy"), "");
    cli_compare_outputs("R.npy", "R0.npy", 0, false, "the head report's output");
    /* after pruning: the kept heads under their numbers as given */
    run_ok("mha %s --causal --prune-heads 0 --head-report-json %s --out %s", layer,
           cli_path_of("R1.json"), cli_path_of("R1.npy"));
    cli_read_text(cli_path_of("R1.json"), json, sizeof json);
    if (!strstr(json, "\"kept_heads\": 3") || strstr(json, "\"head\": 0,") ||
        !strstr(json, "{\"rank\": 3, \"head\": 2,"))
        fail_msg("pruned head report JSON:\n%s", json);
    char args[4096];
    snprintf(args, sizeof args, "mha %s --causal --head-report --head-mask %s --out %s", layer,
             cli_path_of("HM.npy"), cli_path_of("BAD.npy"));
    expect_refused(args, "takes no --head-mask", "BAD.npy", 2);
    snprintf(args, sizeof args, "mha %s --causal --head-report --prefill 2 --out %s", layer,
             cli_path_of("BAD.npy"));
    expect_refused(args, "takes no --prefill", "BAD.npy", 2);
}

/* --report and info --layer: the d_model 768 / 12-head example (2,359,296
 * weights without biases), its KV bytes per token, and GQA beside it. */
static void test_reports(void **state)
{
    (void)state;
    char out[8192];
    cli_expect_success("info --layer 768,12,12");
    cli_read_text(cli_path_of("stdout.txt"), out, sizeof out);
    /* Wq..Wo 768*768 each; MHA, GQA (3 KV heads), MQA side by side */
    static const char *const want[] = {
        "MHA (this)             GQA             MQA",
        "  Wk [Hkv*Dk, Dkv]                   589,824         147,456          49,152",
        "  total                            2,359,296       1,474,560       1,277,952",
        "  f32                              9,437,184       5,898,240       5,111,808",
        /* K and V: 2 * Hkv * 64 values per token */
        "  f16 / bf16                           3,072             768             256",
        /* q8_0: 2 * Hkv * 2 blocks of 34 bytes */
        "  q8_0                                 1,632             408             136",
        "KV cache of 4096 tokens"};
    for (size_t k = 0; k < sizeof want / sizeof want[0]; k++)
        if (!strstr(out, want[k]))
            fail_msg("info --layer 768,12,12 lacks \"%s\":\n%s", want[k], out);
    cli_expect_success("info --layer 4096,32,8,128 --context 8192 --bias");
    cli_read_text(cli_path_of("stdout.txt"), out, sizeof out);
    if (!strstr(out, "MHA      GQA (this)             MQA") ||
        !strstr(out,
                "  biases (bq, bk, bv, bo)             16,384          10,240           8,448") ||
        !strstr(out, "KV cache of 8192 tokens"))
        fail_msg("info --layer 4096,32,8,128:\n%s", out);
    /* mha --report: the layer that runs (after pruning: 2 heads, MHA) */
    run_ok("mha %s --report --context 16 --prune-heads 1,3 --out %s%s", layer,
           cli_path_of("RP.npy"), "");
    cli_read_text(cli_path_of("stdout.txt"), out, sizeof out);
    if (!strstr(out, "query heads 2, KV heads 2 (MHA), head_dim 16") ||
        !strstr(out, "  Wq [Hq*Dk, Dm]                       2,048") ||
        !strstr(out, "KV cache of 16 tokens"))
        fail_msg("mha --report:\n%s", out);
    static const struct {
        const char *args, *says;
    } bad[] = {{"info --layer 768,12", "expected Dm,H,Hkv or Dm,H,Hkv,Dh"},
               {"info --layer 768,12,", "H (heads) must be an integer"},
               {"info --layer 768,x,12", "H (heads) must be an integer"},
               {"info --layer 768,7,7", "not a multiple of H 7"},
               {"info --layer 768,12,5", "--layer 768,12,5: Hkv 5 does not divide H 12"},
               {"info --layer 768,12,12 --context 0", "--context"},
               {"info --context 5", "--context needs --layer"},
               {"info --layer 768,12,12 --json", "takes no --json"}};
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++)
        expect_refused(bad[k].args, bad[k].says, NULL, 2);
    char args[4096];
    snprintf(args, sizeof args, "mha %s --context 5 --out %s", layer, cli_path_of("BAD.npy"));
    expect_refused(args, "--context needs --report", "BAD.npy", 2);
}

/* mha --weights-png: a picture of the (pruned) layer's heads beside the
 * per-head weights, and refused with --prefill. */
static void test_mha_weights_png(void **state)
{
    (void)state;
    run_ok("mha %s --causal --prune-heads 2 --weights-png %s --check --out %s", layer,
           cli_path_of("M.png"), cli_path_of("MP.npy"));
    char png[16];
    cli_read_text(cli_path_of("M.png"), png, sizeof png);
    assert_memory_equal(png, "\x89PNG", 4);
    char args[4096];
    snprintf(args, sizeof args, "mha %s --causal --prefill 2 --weights-png %s --out %s", layer,
             cli_path_of("BAD.png"), cli_path_of("BAD.npy"));
    expect_refused(args, "--weights-png", "BAD.npy", 2);
}

/* The help texts list the new options. */
static void test_help(void **state)
{
    (void)state;
    static const struct {
        const char *command;
        const char *flags[9];
    } helps[] = {{"mha --help",
                  {"--head-mask", "--prune-heads", "--save-weights", "--head-report",
                   "--head-report-json", "--report", "--context", "--weights-png", NULL}},
                 {"attention --help", {"--head-mask", "--weights-png", NULL}},
                 {"info --help", {"--layer", "--context", "--bias", NULL}}};
    char err[512], out[16384];
    for (size_t c = 0; c < sizeof helps / sizeof helps[0]; c++) {
        assert_int_equal(cli_run_with("", helps[c].command, err, sizeof err), 0);
        cli_read_text(cli_path_of("stdout.txt"), out, sizeof out);
        for (int k = 0; helps[c].flags[k]; k++)
            if (!strstr(out, helps[c].flags[k]))
                fail_msg("vkattn %s does not list %s", helps[c].command, helps[c].flags[k]);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_attention_head_mask),
        cmocka_unit_test(test_mha_head_mask),
        cmocka_unit_test(test_prune_heads),
        cmocka_unit_test(test_head_report),
        cmocka_unit_test(test_reports),
        cmocka_unit_test(test_mha_weights_png),
        cmocka_unit_test(test_help),
    };
    return cmocka_run_group_tests(tests, group_setup, cli_teardown);
}
