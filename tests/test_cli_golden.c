/* The golden cases through the command-line tool, as a user runs them, with
 * no flag but the case's own: every PyTorch fixture of tests/fixtures
 * (attention with masks, GQA/MQA, scale, window, softcap, sinks, ALiBi, both
 * causal alignments, LSE; nn.MultiheadAttention self and cross, masks,
 * padding, per-head weights; packed ragged sequences with their offsets; Llama 3, Qwen3, GPT-J and Gemma decoder layers
 * with RoPE, QK-norm, positions), in f32 and in f16 storage. Each run passes
 * --check (the CPU reference) and its outputs match torch's within the
 * suite's tolerances. This is the suite run on every implementation, the
 * ones whose self-test or quirks switch kernels off included
 * (tests/CMakeLists.txt). VKATTN_TEST_CLI_KERNELS, when set, is passed as
 * --kernels (lavapipe26cm: coopmat). */
#include "npy/npy.h"
#include "test_cli_util.h"
#include "test_util.h"

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef VKATTN_CLI_PATH
#error "VKATTN_CLI_PATH must name the vkattn executable"
#endif
#ifndef VKATTN_FIXTURE_DIR
#error "VKATTN_FIXTURE_DIR must point at tests/fixtures"
#endif

/* A fixture's case.txt value for `key`, or NULL. */
static const char *value_of(const char *text, const char *key, char *buf, size_t size)
{
    size_t n = strlen(key);
    for (const char *p = text; (p = strstr(p, key)); p += n)
        if ((p == text || p[-1] == '\n') && p[n] == ' ') {
            size_t len = strcspn(p + n + 1, "\n");
            snprintf(buf, size, "%.*s", (int)len, p + n + 1);
            return buf;
        }
    return NULL;
}

static bool has_file(const char *dir, const char *name)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return cli_exists(path);
}

/* Appends " <flag> <dir>/<file>" when the fixture has the file. */
static void add_file(char *args, size_t size, const char *dir, const char *flag, const char *file)
{
    if (has_file(dir, file))
        snprintf(args + strlen(args), size - strlen(args), " %s %s/%s", flag, dir, file);
}

/* Appends " <flag> <value>" when case.txt has `key` other than "0". */
static void add_value(char *args, size_t size, const char *text, const char *flag, const char *key)
{
    char v[64];
    if (value_of(text, key, v, sizeof v) && strcmp(v, "0") != 0)
        snprintf(args + strlen(args), size - strlen(args), " %s %s", flag, v);
}

static bool is(const char *text, const char *key, const char *want)
{
    char v[64];
    return value_of(text, key, v, sizeof v) && strcmp(v, want) == 0;
}

/* The attention command for a fixture. */
static void attention_args(const char *dir, const char *text, char *args, size_t size)
{
    snprintf(args, size, "attention --q %s/q.npy --k %s/k.npy --v %s/v.npy", dir, dir, dir);
    add_file(args, size, dir, "--mask", "mask.npy");
    add_file(args, size, dir, "--sinks", "sinks.npy");
    add_file(args, size, dir, "--alibi-slopes", "alibi_slopes.npy");
    add_file(args, size, dir, "--q-offsets", "q_offsets.npy");
    add_file(args, size, dir, "--k-offsets", "k_offsets.npy");
    add_value(args, size, text, "--scale", "scale");
    add_value(args, size, text, "--window", "window");
    add_value(args, size, text, "--softcap", "softcap");
    add_value(args, size, text, "--alibi-max-bias", "alibi_max_bias");
    if (is(text, "causal", "1"))
        strncat(args, is(text, "causal_align", "top_left") ? " --causal-top-left" : " --causal",
                size - strlen(args) - 1);
    if (has_file(dir, "lse.npy"))
        snprintf(args + strlen(args), size - strlen(args), " --lse-out %s", cli_path_of("LSE.npy"));
}

/* The mha command for a fixture. */
static void mha_args(const char *dir, const char *text, char *args, size_t size)
{
    char heads[16], kv_heads[16];
    value_of(text, "heads", heads, sizeof heads);
    value_of(text, "kv_heads", kv_heads, sizeof kv_heads);
    snprintf(args, size,
             "mha --x %s/x.npy --heads %s --kv-heads %s --wq %s/wq.npy --wk %s/wk.npy "
             "--wv %s/wv.npy --wo %s/wo.npy",
             dir, heads, kv_heads, dir, dir, dir, dir);
    static const char *const biases[4] = {"bq", "bk", "bv", "bo"};
    for (int k = 0; k < 4; k++) {
        char flag[8], file[16];
        snprintf(flag, sizeof flag, "--%s", biases[k]);
        snprintf(file, sizeof file, "%s.npy", biases[k]);
        add_file(args, size, dir, flag, file);
    }
    /* a value of its own: the key through --key (torch's key, value) */
    bool value = has_file(dir, "value.npy");
    add_file(args, size, dir, value ? "--key" : "--kv", "kv.npy");
    add_file(args, size, dir, "--value", "value.npy");
    add_file(args, size, dir, "--mask", "mask.npy");
    add_file(args, size, dir, "--key-padding", "key_padding.npy");
    add_file(args, size, dir, "--positions", "positions.npy");
    add_file(args, size, dir, "--q-norm", "q_norm.npy");
    add_file(args, size, dir, "--k-norm", "k_norm.npy");
    add_file(args, size, dir, "--bias-k", "bias_k.npy");
    add_file(args, size, dir, "--bias-v", "bias_v.npy");
    add_file(args, size, dir, "--seq-offsets", "seq_offsets.npy");
    add_file(args, size, dir, "--kv-offsets", "kv_offsets.npy");
    if (is(text, "add_zero_attn", "1"))
        strncat(args, " --add-zero-attn", size - strlen(args) - 1);
    add_value(args, size, text, "--scale", "scale");
    add_value(args, size, text, "--norm-eps", "norm_eps");
    add_value(args, size, text, "--rope-theta", "rope_theta");
    add_value(args, size, text, "--rope-dims", "rope_dims");
    if (value_of(text, "rope_theta", (char[64]){0}, 64))
        add_value(args, size, text, "--rope-style", "rope_style");
    char f[64], lo[64], hi[64], orig[64];
    if (is(text, "rope_scaling", "llama3") && value_of(text, "rope_factor", f, sizeof f) &&
        value_of(text, "rope_low_freq_factor", lo, sizeof lo) &&
        value_of(text, "rope_high_freq_factor", hi, sizeof hi) &&
        value_of(text, "rope_original_max_positions", orig, sizeof orig))
        snprintf(args + strlen(args), size - strlen(args), " --rope-llama3 %s,%s,%s,%s", f, lo, hi,
                 orig);
    if (is(text, "causal", "1"))
        strncat(args, " --causal", size - strlen(args) - 1);
    if (is(text, "mask_true_blocks", "1"))
        strncat(args, " --mask-true-blocks", size - strlen(args) - 1);
    if (has_file(dir, "weights.npy"))
        snprintf(args + strlen(args), size - strlen(args), " --weights-out %s%s",
                 cli_path_of("W.npy"), is(text, "per_head", "1") ? " --per-head" : "");
}

/* The output `name` (in cli_tmp) against the fixture's `file`. */
static void compare(const char *name, const char *dir, const char *file, double tol,
                    bool elementwise, const char *what)
{
    char path[1024], err[512];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    npy_array want, got = cli_read_npy(name);
    if (npy_read(path, &want, err, sizeof err) != 0)
        fail_msg("%s", err);
    if (want.nbytes != got.nbytes || want.dtype != NPY_F32)
        fail_msg("%s: %s has %zu bytes, torch's %zu", what, name, got.nbytes, want.nbytes);
    size_t n = want.nbytes / 4;
    const float *g = got.data, *w = want.data;
    if (!elementwise)
        test_assert_close(g, w, n, tol, what);
    for (size_t i = 0; elementwise && i < n; i++) /* LSE: -inf rows match -inf */
        if (!(g[i] == w[i] || fabs((double)g[i] - w[i]) <= tol * (1.0 + fabs((double)w[i]))))
            fail_msg("%s[%zu]: got %.9g, torch %.9g", what, i, g[i], w[i]);
    npy_free(&want);
    npy_free(&got);
}

/* Fixtures the CLI has no spelling for (the library and test_torch_parity
 * cover them): a window aligned top-left without causal masking (the CLI
 * aligns only with --causal-top-left, which is causal). */
static bool expressible(const char *text)
{
    return !(is(text, "causal", "0") && is(text, "causal_align", "top_left"));
}

static void run_fixture(const char *dir, const char *dtype)
{
    char text[2048], args[8192], err[8192], what[1200];
    char case_path[1024];
    snprintf(case_path, sizeof case_path, "%s/case.txt", dir);
    cli_read_text(case_path, text, sizeof text);
    if (!expressible(text))
        return;
    bool attention = is(text, "kind", "attention");
    if (attention)
        attention_args(dir, text, args, sizeof args);
    else
        mha_args(dir, text, args, sizeof args);
    snprintf(args + strlen(args), sizeof args - strlen(args), " --dtype %s --check --out %s", dtype,
             cli_path_of("O.npy"));
    const char *kernels = getenv("VKATTN_TEST_CLI_KERNELS");
    if (kernels && *kernels)
        snprintf(args + strlen(args), sizeof args - strlen(args), " --kernels %s", kernels);
    if (cli_run_with("", args, err, sizeof err) != 0)
        fail_msg("vkattn %s failed:\n%s", args, err);
    double tol = strcmp(dtype, "f16") == 0 ? TEST_TOL_F16 : TEST_TOL_F32;
    snprintf(what, sizeof what, "%s (%s): output vs torch", strrchr(dir, '/') + 1, dtype);
    compare("O.npy", dir, attention ? "out.npy" : "y.npy", tol, false, what);
    if (attention && has_file(dir, "lse.npy")) {
        snprintf(what, sizeof what, "%s (%s): LSE vs torch", strrchr(dir, '/') + 1, dtype);
        compare("LSE.npy", dir, "lse.npy", tol, true, what);
    }
    if (!attention && has_file(dir, "weights.npy")) {
        snprintf(what, sizeof what, "%s (%s): weights vs torch", strrchr(dir, '/') + 1, dtype);
        compare("W.npy", dir, "weights.npy", tol, false, what);
    }
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static void test_fixtures_through_the_cli(void **state)
{
    (void)state;
    DIR *d = opendir(VKATTN_FIXTURE_DIR);
    assert_non_null(d);
    char *names[64];
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) && n < 64)
        if (e->d_name[0] != '.')
            names[n++] = strdup(e->d_name);
    closedir(d);
    qsort(names, (size_t)n, sizeof names[0], by_name);
    assert_true(n >= 20);
    for (int i = 0; i < n; i++) {
        char dir[768];
        snprintf(dir, sizeof dir, "%s/%s", VKATTN_FIXTURE_DIR, names[i]);
        run_fixture(dir, "f32");
        run_fixture(dir, "f16");
        free(names[i]);
    }
    print_message("%d fixtures, f32 and f16, through the CLI\n", n);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fixtures_through_the_cli),
    };
    return cmocka_run_group_tests(tests, cli_setup, cli_teardown);
}
