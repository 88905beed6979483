/* The tool's rotary-position, QK-norm and scale options (issue 13), run as
 * a user would: every option checked against the CPU reference (--check),
 * decode through the KV cache equal to the full forward, positions files in
 * int32 and int64, and every bad value refused by name without output. */
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

/* The layer: x [2, 6, 64], 4 query heads and 2 key/value heads of 16. */
enum { B = 2, T = 6, DM = 64, HEADS = 4, KV_HEADS = 2, DH = 16 };

/* Positions [rows, cols]: first + 3t (+ 1000 * row), as int32 and int64 files:
 * spaced 3 apart, so the output differs from the default 0..T-1 (a uniform
 * shift would not change it: RoPE scores depend on distances only). */
static void write_positions(const char *name32, const char *name64, int64_t rows, int64_t cols,
                            int64_t first)
{
    int32_t p32[64];
    int64_t p64[64], shape[2] = {rows, cols};
    assert_true(rows * cols <= 64);
    for (int64_t i = 0; i < rows * cols; i++)
        p32[i] = (int32_t)(p64[i] = first + 3 * (i % cols) + 1000 * (i / cols));
    cli_write_npy(name32, NPY_I32, 2, shape, p32);
    if (name64)
        cli_write_npy(name64, NPY_I64, 2, shape, p64);
}

static int group_setup(void **state)
{
    if (cli_setup(state) != 0)
        return -1;
    int64_t x[3] = {B, T, DM}, wq[2] = {HEADS * DH, DM}, wkv[2] = {KV_HEADS * DH, DM},
            wo[2] = {DM, HEADS * DH}, norm[1] = {DH};
    cli_write_f32("X.npy", 3, x, 10, -1, 1);
    cli_write_f32("WQ.npy", 2, wq, 11, -0.3f, 0.3f);
    cli_write_f32("WK.npy", 2, wkv, 12, -0.3f, 0.3f);
    cli_write_f32("WV.npy", 2, wkv, 13, -0.3f, 0.3f);
    cli_write_f32("WO.npy", 2, wo, 14, -0.3f, 0.3f);
    cli_write_f32("QN.npy", 1, norm, 15, 0.5f, 1.5f);
    cli_write_f32("KN.npy", 1, norm, 16, 0.5f, 1.5f);
    int64_t q[4] = {2, 4, 5, 16}, kv[4] = {2, 2, 7, 16};
    cli_write_f32("Q.npy", 4, q, 20, -1, 1);
    cli_write_f32("K.npy", 4, kv, 21, -1, 1);
    cli_write_f32("V.npy", 4, kv, 22, -1, 1);
    write_positions("P32.npy", "P64.npy", B, T, 5000);
    write_positions("PMAX.npy", NULL, B, T, 16777215 - 1000 * (B - 1) - 3 * (T - 1));
    int32_t p0[B * T], qp[10], kp[14];
    for (int i = 0; i < B * T; i++)
        p0[i] = i % T;
    cli_write_npy("P0.npy", NPY_I32, 2, (int64_t[2]){B, T}, p0);
    /* attention: Q bottom-right aligned with K, rows at 2..6 of K's 0..6 */
    for (int i = 0; i < 10; i++)
        qp[i] = 2 + i % 5;
    for (int i = 0; i < 14; i++)
        kp[i] = i % 7;
    cli_write_npy("QP.npy", NPY_I32, 2, (int64_t[2]){2, 5}, qp);
    cli_write_npy("KP.npy", NPY_I32, 2, (int64_t[2]){2, 7}, kp);
    write_positions("QP2.npy", "QP2_64.npy", 2, 5, 300);
    write_positions("KP2.npy", NULL, 2, 7, 290);
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

/* Fails, its stderr mentions `needle` and `also` (unless NULL), and leaves
 * no output file. */
static void expect_failure(const char *args, const char *needle, const char *also)
{
    const char *out = cli_path_of("O.npy");
    unlink(out);
    char err[4096];
    if (cli_run_with("", args, err, sizeof err) == 0)
        fail_msg("vkattn %s: exit 0, expected failure", args);
    if (!strstr(err, needle) || (also && !strstr(err, also)))
        fail_msg("vkattn %s: stderr does not mention \"%s\"%s%s:\n%s", args, needle,
                 also ? " and " : "", also ? also : "", err);
    if (cli_exists(out))
        fail_msg("vkattn %s: failed but wrote the output file", args);
}

static void test_mha_options_check(void **state)
{
    (void)state;
    char qk[1024];
    snprintf(qk, sizeof qk, "--q-norm %s --k-norm %s", cli_path_of("QN.npy"),
             cli_path_of("KN.npy"));
    static const char *const rope[] = {
        "--rope-theta 10000",
        "--rope-theta 10000 --rope-style gptj",
        "--rope-theta 10000 --rope-style neox --rope-dims 8",
        "--rope-theta 10000 --rope-style gptj --rope-dims 4",
        "--rope-theta 500000 --rope-llama3 8,1,4,8192",
        "--rope-theta 10000 --rope-linear 4",
        "--scale 0.3",
        "--rope-theta 500000 --rope-llama3 8,1,4,8192 --scale 0.125",
    };
    char args[8192], opts[4096];
    for (size_t i = 0; i < sizeof rope / sizeof rope[0]; i++) {
        snprintf(opts, sizeof opts, "--causal --check --validate %s", rope[i]);
        mha_args(args, sizeof args, opts, "O.npy");
        cli_expect_success(args);
    }
    /* QK-norm, alone and with RoPE, eps and --positions */
    snprintf(opts, sizeof opts, "--causal --check --validate %s", qk);
    mha_args(args, sizeof args, opts, "O.npy");
    cli_expect_success(args);
    snprintf(opts, sizeof opts, "--check --norm-eps 1e-2 --rope-theta 1000000 %s --positions %s",
             qk, cli_path_of("P64.npy"));
    mha_args(args, sizeof args, opts, "O.npy");
    cli_expect_success(args);

    /* positions: int32 and int64 files give the same result; 0..T-1 is the
     * default; far positions (up to the maximum) pass the check too */
    const char *files[] = {"P32.npy", "P64.npy", "P0.npy", "PMAX.npy"};
    const char *outs[] = {"O32.npy", "O64.npy", "O0.npy", "OMAX.npy"};
    for (int k = 0; k < 4; k++) {
        snprintf(opts, sizeof opts,
                 "--causal --check --validate --rope-theta 500000 --rope-llama3 8,1,4,8192 "
                 "--positions %s",
                 cli_path_of(files[k]));
        mha_args(args, sizeof args, opts, outs[k]);
        cli_expect_success(args);
    }
    mha_args(args, sizeof args, "--causal --rope-theta 500000 --rope-llama3 8,1,4,8192",
             "ODEF.npy");
    cli_expect_success(args);
    cli_compare_outputs("O32.npy", "O64.npy", 0, false, "int32 and int64 positions");
    cli_compare_outputs("O0.npy", "ODEF.npy", 0, false, "positions 0..T-1 and the default");
    cli_compare_outputs("O32.npy", "ODEF.npy", 0, true, "positions 5000.. and the default");
}

/* Decoding through the KV cache (contiguous and paged) equals the full
 * causal forward, with every option at once. */
static void test_mha_decode(void **state)
{
    (void)state;
    char layer[2048], args[8192], opts[4096];
    snprintf(layer, sizeof layer,
             "--causal --rope-theta 500000 --rope-llama3 8,1,4,8192 --rope-dims 12 "
             "--q-norm %s --k-norm %s --norm-eps 1e-5 --scale 0.2",
             cli_path_of("QN.npy"), cli_path_of("KN.npy"));
    mha_args(args, sizeof args, layer, "FULL.npy");
    cli_expect_success(args);
    static const char *const steps[] = {"--prefill 2", "--prefill 1", "--prefill 3 --paged-block 2",
                                        "--prefill 6 --paged-block 4",
                                        "--prefill 4 --paged-block 1 --kv-splits 2"};
    for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++) {
        snprintf(opts, sizeof opts, "%s %s --check --validate", layer, steps[i]);
        mha_args(args, sizeof args, opts, "O.npy");
        cli_expect_success(args);
        cli_compare_outputs("O.npy", "FULL.npy", TEST_TOL_F32, false, steps[i]);
    }
    /* and gptj style, no scaling, the other way round */
    mha_args(args, sizeof args, "--causal --rope-theta 10000 --rope-style gptj --prefill 3 --check",
             "O.npy");
    cli_expect_success(args);
}

static void test_attention_rope(void **state)
{
    (void)state;
    char args[8192], opts[4096];
    static const char *const rope[] = {
        "--causal --rope-theta 10000",
        "--rope-theta 10000 --rope-style gptj --rope-dims 8",
        "--causal --rope-theta 500000 --rope-llama3 8,1,4,8192 --scale 0.5",
        "--rope-theta 10000 --rope-linear 2 --dtype f16",
    };
    for (size_t i = 0; i < sizeof rope / sizeof rope[0]; i++) {
        snprintf(opts, sizeof opts, "--check --validate %s", rope[i]);
        attention_args(args, sizeof args, opts, "O.npy");
        cli_expect_success(args);
    }
    /* Q bottom-right aligned with K by default (QP.npy, KP.npy) */
    attention_args(args, sizeof args, "--causal --rope-theta 10000", "ODEF.npy");
    cli_expect_success(args);
    snprintf(opts, sizeof opts, "--causal --rope-theta 10000 --positions %s --k-positions %s",
             cli_path_of("QP.npy"), cli_path_of("KP.npy"));
    attention_args(args, sizeof args, opts, "OPOS.npy");
    cli_expect_success(args);
    cli_compare_outputs("OPOS.npy", "ODEF.npy", 0, false, "explicit bottom-right positions");
    /* other positions: checked, and a different result */
    snprintf(opts, sizeof opts, "--check --validate --rope-theta 10000 --positions %s",
             cli_path_of("QP2_64.npy"));
    attention_args(args, sizeof args, opts, "OQ.npy");
    cli_expect_success(args);
    cli_compare_outputs("OQ.npy", "ODEF.npy", 0, true, "other Q positions");
    snprintf(opts, sizeof opts,
             "--check --validate --rope-theta 10000 --positions %s --k-positions %s",
             cli_path_of("QP2.npy"), cli_path_of("KP2.npy"));
    attention_args(args, sizeof args, opts, "O.npy");
    cli_expect_success(args);
    snprintf(opts, sizeof opts, "--check --rope-theta 10000 --k-positions %s",
             cli_path_of("KP2.npy"));
    attention_args(args, sizeof args, opts, "O.npy");
    cli_expect_success(args);
}

static void test_bad_options(void **state)
{
    (void)state;
    char args[8192], opts[4096];
    static const struct {
        const char *opts, *needle, *also;
    } bad[] = {
        {"--rope-theta 10000 --rope-dims 7", "--rope-dims \"7\"", "even"},
        {"--rope-theta 10000 --rope-dims 18", "--rope-dims 18", "head dim 16"},
        {"--rope-theta 10000 --rope-dims 0", "--rope-dims \"0\"", NULL},
        {"--rope-theta 0", "--rope-theta \"0\"", "> 1"},
        {"--rope-theta -1", "--rope-theta \"-1\"", NULL},
        {"--rope-theta nan", "--rope-theta \"nan\"", NULL},
        {"--rope-theta inf", "--rope-theta \"inf\"", NULL},
        {"--rope-theta 1", "--rope-theta \"1\"", NULL},
        {"--rope-theta 10000x", "--rope-theta \"10000x\"", NULL},
        {"--rope-theta 10000 --rope-llama3 8,1,4", "--rope-llama3 \"8,1,4\"", "four values"},
        {"--rope-theta 10000 --rope-llama3 8,1,4,8192,1", "--rope-llama3", "four values"},
        {"--rope-theta 10000 --rope-llama3 nan,1,4,8192", "--rope-llama3 \"nan\"", NULL},
        {"--rope-theta 10000 --rope-llama3 8,1,nan,8192", "--rope-llama3 \"nan\"", NULL},
        {"--rope-theta 10000 --rope-llama3 8,4,1,8192", "--rope-llama3", "above LOW"},
        {"--rope-theta 10000 --rope-llama3 0.5,1,4,8192", "--rope-llama3 \"0.5\"", ">= 1"},
        {"--rope-theta 10000 --rope-llama3 8,1,4,0", "--rope-llama3 \"0\"", NULL},
        {"--rope-theta 10000 --rope-llama3 8,1,4,8192 --rope-linear 2", "--rope-linear",
         "only one scaling"},
        {"--rope-theta 10000 --rope-linear 0.5", "--rope-linear \"0.5\"", NULL},
        {"--rope-theta 10000 --rope-style rotate", "--rope-style \"rotate\"", "neox or gptj"},
        {"--rope-dims 8", "--rope-dims needs --rope-theta", NULL},
        {"--rope-style gptj", "--rope-style needs --rope-theta", NULL},
        {"--rope-llama3 8,1,4,8192", "--rope-llama3 needs --rope-theta", NULL},
        {"--scale 0", "--scale \"0\"", "> 0"},
        {"--scale -0.5", "--scale \"-0.5\"", NULL},
        {"--scale nan", "--scale \"nan\"", NULL},
        {"--norm-eps 0", "--norm-eps \"0\"", NULL},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(opts, sizeof opts, "--causal --check %s", bad[i].opts);
        mha_args(args, sizeof args, opts, "O.npy");
        expect_failure(args, bad[i].needle, bad[i].also);
    }
    /* the same --rope-* checks in attention, --rope-dims against --q's D */
    attention_args(args, sizeof args, "--rope-theta 10000 --rope-dims 24", "O.npy");
    expect_failure(args, "--rope-dims 24", "last dimension of --q");
    attention_args(args, sizeof args, "--rope-theta nan", "O.npy");
    expect_failure(args, "--rope-theta \"nan\"", NULL);
    attention_args(args, sizeof args, "--rope-linear 2", "O.npy");
    expect_failure(args, "--rope-linear needs --rope-theta", NULL);

    /* positions files: shape, dtype, values; --positions without RoPE or
     * with --prefill */
    int64_t s3[1] = {B * T}, s2t[2] = {B, T};
    write_positions("PSHAPE.npy", NULL, 2, 3, 0);
    cli_write_npy("PRANK.npy", NPY_I32, 1, s3, (int32_t[B * T]){0});
    cli_write_f32("PF.npy", 2, s2t, 3, 0, 5);
    int64_t neg[B * T] = {0, 1, 2, 3, 4, 5, 0, 1, -1, 3, 4, 5}, big[B * T] = {0};
    big[7] = 16777216;
    cli_write_npy("PNEG.npy", NPY_I64, 2, s2t, neg);
    cli_write_npy("PBIG.npy", NPY_I64, 2, s2t, big);
    int32_t neg32[B * T] = {0, -7};
    cli_write_npy("PNEG32.npy", NPY_I32, 2, s2t, neg32);
    static const struct {
        const char *file, *extra, *needle, *also;
    } pos[] = {
        {"PSHAPE.npy", "", "shape (2, 3), expected (2, 6)", "PSHAPE.npy"},
        {"PRANK.npy", "", "PRANK.npy", "expected 2"},
        {"PF.npy", "", "PF.npy", "dtype is float32"},
        {"PNEG.npy", "", "PNEG.npy: element 8 (batch 1, token 2) is -1", "16777215"},
        {"PBIG.npy", "", "PBIG.npy: element 7 (batch 1, token 1) is 16777216", NULL},
        {"PNEG32.npy", "", "PNEG32.npy: element 1", "is -7"},
        {"P32.npy", "--prefill 2", "--positions with --prefill", "cache length"},
    };
    for (size_t i = 0; i < sizeof pos / sizeof pos[0]; i++) {
        snprintf(opts, sizeof opts, "--causal --check --rope-theta 10000 %s --positions %s",
                 pos[i].extra, cli_path_of(pos[i].file));
        mha_args(args, sizeof args, opts, "O.npy");
        expect_failure(args, pos[i].needle, pos[i].also);
    }
    snprintf(opts, sizeof opts, "--causal --positions %s", cli_path_of("P32.npy"));
    mha_args(args, sizeof args, opts, "O.npy");
    expect_failure(args, "--positions needs --rope-theta", NULL);
    snprintf(opts, sizeof opts, "--rope-theta 10000 --k-positions %s", cli_path_of("PSHAPE.npy"));
    attention_args(args, sizeof args, opts, "O.npy");
    expect_failure(args, "--k-positions", "expected (2, 7)");
    snprintf(opts, sizeof opts, "--k-positions %s", cli_path_of("KP.npy"));
    attention_args(args, sizeof args, opts, "O.npy");
    expect_failure(args, "--k-positions needs --rope-theta", NULL);
    /* Q longer than K: its default positions would be negative */
    snprintf(args, sizeof args, "attention --q %s --k %s --v %s --rope-theta 10000 --out %s",
             cli_path_of("K.npy"), cli_path_of("Q.npy"), cli_path_of("Q.npy"),
             cli_path_of("O.npy"));
    expect_failure(args, "--positions", "below 0");

    /* QK-norm weights: shape, dtype, pairing; layer options need self-attention */
    int64_t n8[1] = {8}, n2[2] = {1, DH};
    cli_write_f32("QN8.npy", 1, n8, 4, 0.5f, 1.5f);
    cli_write_f32("QN2.npy", 2, n2, 5, 0.5f, 1.5f);
    cli_write_npy("QNI.npy", NPY_I32, 1, (int64_t[1]){DH}, (int32_t[DH]){0});
    static const struct {
        const char *qn, *kn, *needle, *also;
    } norms[] = {
        {"QN8.npy", "KN.npy", "QN8.npy", "head_dim"},
        {"QN.npy", "QN8.npy", "--k-norm", "QN8.npy"},
        {"QN2.npy", "KN.npy", "QN2.npy", "expected 1"},
        {"QNI.npy", "KN.npy", "QNI.npy", "float32"},
        {"QN.npy", NULL, "--q-norm needs --k-norm", NULL},
        {NULL, "KN.npy", "--k-norm needs --q-norm", NULL},
    };
    for (size_t i = 0; i < sizeof norms / sizeof norms[0]; i++) {
        int n = snprintf(opts, sizeof opts, "--causal --check");
        if (norms[i].qn)
            n += snprintf(opts + n, sizeof opts - n, " --q-norm %s", cli_path_of(norms[i].qn));
        if (norms[i].kn)
            snprintf(opts + n, sizeof opts - n, " --k-norm %s", cli_path_of(norms[i].kn));
        mha_args(args, sizeof args, opts, "O.npy");
        expect_failure(args, norms[i].needle, norms[i].also);
    }
    mha_args(args, sizeof args, "--causal --norm-eps 1e-5", "O.npy");
    expect_failure(args, "--norm-eps needs --q-norm", NULL);
    snprintf(opts, sizeof opts, "--kv %s --rope-theta 10000", cli_path_of("X.npy"));
    mha_args(args, sizeof args, opts, "O.npy");
    expect_failure(args, "--rope-theta", "self-attention");
}

static void test_help_lists_options(void **state)
{
    (void)state;
    char err[4096], out[16384];
    static const char *const commands[] = {"mha --help", "attention --help"};
    static const char *const flags[][12] = {
        {"--rope-theta", "--rope-dims", "--rope-style", "--rope-linear", "--rope-llama3",
         "--positions", "--q-norm", "--k-norm", "--norm-eps", "--scale", "--prefill", NULL},
        {"--rope-theta", "--rope-dims", "--rope-style", "--rope-linear", "--rope-llama3",
         "--positions", "--k-positions", "--scale", NULL},
    };
    for (int c = 0; c < 2; c++) {
        assert_int_equal(cli_run_with("", commands[c], err, sizeof err), 0);
        cli_read_text(cli_path_of("stdout.txt"), out, sizeof out);
        for (int i = 0; flags[c][i]; i++)
            if (!strstr(out, flags[c][i]))
                fail_msg("vkattn %s does not list %s:\n%s", commands[c], flags[c][i], out);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_help_lists_options), cmocka_unit_test(test_bad_options),
        cmocka_unit_test(test_mha_options_check),  cmocka_unit_test(test_mha_decode),
        cmocka_unit_test(test_attention_rope),
    };
    return cmocka_run_group_tests(tests, group_setup, cli_teardown);
}
