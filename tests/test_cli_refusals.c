/* Issue 33's smaller gaps: NaN and inf in weights refused naming the tensor
 * and the element (npy of any float dtype, .safetensors F32/F16/BF16, a
 * packed in_proj_weight by its row in the whole tensor); --input-bf16 with a
 * file that is not uint16 refused naming it and its dtype; the library's
 * refusals told in the CLI's terms (options, files, the files' own
 * dimensions), never with its struct names, and each input's dtype message
 * listing only what it takes. Every refusal exits 1 with no output. */
#include "npy/npy.h"
#include "test_cli_util.h"
#include "test_safetensors.h"
#include "test_util.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef VKATTN_CLI_PATH
#error "VKATTN_CLI_PATH must name the vkattn executable"
#endif

enum { DM = 32, HEADS = 2, DH = 16 };

/* Runs `vkattn <args>` with %s replaced by the paths of the names after
 * it; expects exit 1, no O.npy, every `needles` entry in stderr and no
 * struct name of the library's. */
static char err[8192]; /* the last refusal's stderr */

static void expect_refusal(const char *const *needles, const char *fmt, ...)
{
    char args[8192];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(args, sizeof args, fmt, ap);
    va_end(ap);
    unlink(cli_path_of("O.npy"));
    int code = cli_run_with("", args, err, sizeof err);
    if (code != 1)
        fail_msg("vkattn %s: exit %d, expected 1:\n%s", args, code, err);
    for (int k = 0; needles[k]; k++)
        if (!strstr(err, needles[k]))
            fail_msg("vkattn %s: stderr lacks \"%s\":\n%s", args, needles[k], err);
    if (strstr(err, "args->") || strstr(err, "desc->") || strstr(err, "weights->"))
        fail_msg("vkattn %s: the library's struct names reach the user:\n%s", args, err);
    if (cli_exists(cli_path_of("O.npy")))
        fail_msg("vkattn %s: failed but wrote O.npy", args);
}

/* A copy of cli_path_of(name) (its buffers rotate). */
static const char *p(int slot, const char *name)
{
    static char buf[8][512];
    snprintf(buf[slot], sizeof buf[slot], "%s", cli_path_of(name));
    return buf[slot];
}

static int group_setup(void **state)
{
    if (cli_setup(state) != 0)
        return -1;
    int64_t x[3] = {1, 4, DM}, w[2] = {DM, DM}, b[1] = {DM}, n[1] = {DH};
    cli_write_f32("X.npy", 3, x, 1, -1, 1);
    cli_write_f32("W.npy", 2, w, 2, -0.3f, 0.3f);
    cli_write_f32("N.npy", 1, n, 3, 0.5f, 1.5f);
    float bias[DM] = {0};
    bias[3] = INFINITY;
    cli_write_npy("B_inf.npy", NPY_F32, 1, b, bias);
    npy_array a = cli_read_npy("W.npy");
    float *wf = a.data;
    wf[1 * DM + 5] = NAN;
    cli_write_npy("W_nan.npy", NPY_F32, 2, w, wf);
    uint16_t half[DM * DM] = {0};
    half[2] = 0xfc00; /* -inf in f16, element [0, 2] */
    cli_write_npy("W_f16_inf.npy", NPY_F16, 2, w, half);
    float norm[DH] = {1, 1, 1, 1, 1, 1, 1, NAN, 1, 1, 1, 1, 1, 1, 1, 1};
    cli_write_npy("N_nan.npy", NPY_F32, 1, n, norm);
    npy_free(&a);
    /* nn.MultiheadAttention's names, packed in_proj_weight [3E, E] in BF16
     * with a NaN in V's third (row 70 of the whole tensor) */
    static uint16_t packed[3 * DM * DM], out[DM * DM];
    for (int i = 0; i < 3 * DM * DM; i++)
        packed[i] = vkattn_f32_to_bf16(0.01f * (float)(i % 7));
    packed[70 * DM + 3] = 0x7fc0;
    const test_st_tensor t[2] = {
        {"in_proj_weight", "BF16", 2, {3 * DM, DM}, packed, sizeof packed},
        {"out_proj.weight", "BF16", 2, {DM, DM}, out, sizeof out},
    };
    test_write_safetensors(cli_path_of("L_nan.safetensors"), t, 2);
    /* Q, K, V laid out [B, T, H, D]: 4 query heads, 3 KV heads */
    int64_t q[4] = {1, 5, 4, DH}, kv[4] = {1, 6, 3, DH}, qh[4] = {1, 4, 5, DH};
    cli_write_f32("Qt.npy", 4, q, 4, -1, 1);
    cli_write_f32("Kt.npy", 4, kv, 5, -1, 1);
    cli_write_f32("Q.npy", 4, qh, 6, -1, 1);
    uint16_t qb[4 * 5 * DH] = {0};
    cli_write_npy("Q_f16.npy", NPY_F16, 4, qh, qb);
    cli_write_npy("Q_u16.npy", NPY_U16, 4, qh, qb);
    int64_t m[2] = {5, 5};
    static const int64_t mi[25] = {1};
    cli_write_npy("M_i64.npy", NPY_I64, 2, m, mi);
    /* float64 (numpy's default float): written by hand, npy_write has no f8 */
    static const char f8_header[] = "\x93NUMPY\x01\x00\x76\x00{'descr': '<f8', 'fortran_order': "
                                    "False, 'shape': (5, 5), }";
    char f8[128 + 25 * 8];
    memset(f8, ' ', 128);
    memcpy(f8, f8_header, sizeof f8_header - 1);
    f8[127] = '\n';
    memset(f8 + 128, 0, 25 * 8);
    test_write_bytes(cli_path_of("M_f64.npy"), f8, sizeof f8);
    return 0;
}

/* mha on X with W for every projection but `flag`'s, which gets `file`. */
static void expect_weight_refused(const char *flag, const char *file, const char *says)
{
    const char *needles[] = {flag, p(6, file), says, NULL};
    expect_refusal(needles, "mha --x %s --heads 2 --wq %s --wk %s --wv %s --wo %s %s %s --out %s",
                   p(0, "X.npy"), p(1, strcmp(flag, "--wq") ? "W.npy" : file),
                   p(2, strcmp(flag, "--wk") ? "W.npy" : file), p(3, "W.npy"),
                   p(4, strcmp(flag, "--wo") ? "W.npy" : file),
                   strcmp(flag, "--bk") == 0 || strcmp(flag, "--k-norm") == 0 ? flag : "",
                   strcmp(flag, "--bk") == 0 || strcmp(flag, "--k-norm") == 0 ? p(5, file) : "",
                   p(7, "O.npy"));
}

static void test_nonfinite_weights(void **state)
{
    (void)state;
    expect_weight_refused("--wq", "W_nan.npy", "element [1, 5] is NaN; weights and biases");
    expect_weight_refused("--bk", "B_inf.npy", "element [3] is inf");
    expect_weight_refused("--wo", "W_f16_inf.npy", "element [0, 2] is -inf");
    const char *norm[] = {"--k-norm", "N_nan.npy", "element [7] is NaN", NULL};
    expect_refusal(norm,
                   "mha --x %s --heads 2 --wq %s --wk %s --wv %s --wo %s --q-norm %s --k-norm %s "
                   "--out %s",
                   p(0, "X.npy"), p(1, "W.npy"), p(1, "W.npy"), p(1, "W.npy"), p(1, "W.npy"),
                   p(2, "N.npy"), p(3, "N_nan.npy"), p(4, "O.npy"));
    const char *st[] = {"--weights", "L_nan.safetensors",
                        "tensor \"in_proj_weight\" element [70, 3] is NaN", NULL};
    expect_refusal(st, "mha --x %s --heads 2 --weights %s --out %s", p(0, "X.npy"),
                   p(1, "L_nan.safetensors"), p(2, "O.npy"));
}

static void test_input_bf16_needs_uint16(void **state)
{
    (void)state;
    const char *f32[] = {"--q", "Q.npy", "dtype is float32; with --input-bf16", NULL};
    expect_refusal(f32, "attention --q %s --k %s --v %s --input-bf16 --out %s", p(0, "Q.npy"),
                   p(1, "Q_u16.npy"), p(2, "Q_u16.npy"), p(3, "O.npy"));
    const char *f16[] = {"--k", "Q_f16.npy", "dtype is float16; with --input-bf16", NULL};
    expect_refusal(f16, "attention --q %s --k %s --v %s --input-bf16 --out %s", p(0, "Q_u16.npy"),
                   p(1, "Q_f16.npy"), p(2, "Q_u16.npy"), p(3, "O.npy"));
    char args[4096]; /* all uint16: taken */
    snprintf(args, sizeof args, "attention --q %s --k %s --v %s --input-bf16 --out %s",
             p(0, "Q_u16.npy"), p(0, "Q_u16.npy"), p(0, "Q_u16.npy"), p(1, "O.npy"));
    cli_expect_success(args);
}

/* The library's refusals in the user's terms. */
static void test_messages_in_cli_terms(void **state)
{
    (void)state;
    /* --layout bthd: the heads are the files' dimension 2 */
    const char *bthd[] = {"dimension 2 of --k (", "Kt.npy) (num_kv_heads) 3 does not divide",
                          "dimension 2 of --q (", NULL};
    expect_refusal(bthd, "attention --q %s --k %s --v %s --layout bthd --out %s", p(0, "Qt.npy"),
                   p(1, "Kt.npy"), p(1, "Kt.npy"), p(2, "O.npy"));
    const char *layer[] = {"--layer 64,8,5: Hkv 5 does not divide H 8", NULL};
    assert_int_equal(cli_run_with("", "info --layer 64,8,5", err, sizeof err), 2);
    for (int k = 0; layer[k]; k++)
        if (!strstr(err, layer[k]) || strstr(err, "desc->"))
            fail_msg("info --layer 64,8,5:\n%s", err);
    /* each input lists the dtypes it takes, and only those */
    const char *f64[] = {"--mask", "M_f64.npy", "dtype '<f8' is not supported; a mask is float32",
                         NULL};
    expect_refusal(f64, "attention --q %s --k %s --v %s --mask %s --out %s", p(0, "Q.npy"),
                   p(0, "Q.npy"), p(0, "Q.npy"), p(1, "M_f64.npy"), p(2, "O.npy"));
    if (strstr(err, "int64"))
        fail_msg("--mask float64: lists int64, which a mask is not:\n%s", err);
    const char *i64[] = {"--mask", "M_i64.npy", "dtype is int64; a mask is float32", NULL};
    expect_refusal(i64, "attention --q %s --k %s --v %s --mask %s --out %s", p(0, "Q.npy"),
                   p(0, "Q.npy"), p(0, "Q.npy"), p(1, "M_i64.npy"), p(2, "O.npy"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_nonfinite_weights),
        cmocka_unit_test(test_input_bf16_needs_uint16),
        cmocka_unit_test(test_messages_in_cli_terms),
    };
    return cmocka_run_group_tests(tests, group_setup, cli_teardown);
}
