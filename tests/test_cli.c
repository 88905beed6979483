/* The vkattn command-line tool, run as a user would: .npy files in and out,
 * --check against the CPU reference, and every bad input exiting non-zero
 * with a message that names the problem, without writing the output file. */
#include "npy/npy.h"
#include "test_cli_util.h"
#include "test_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef VKATTN_CLI_PATH
#error "VKATTN_CLI_PATH must name the vkattn executable"
#endif

static void write_f32(const char *name, uint32_t rank, const int64_t *shape, uint64_t seed)
{
    int64_t n = 1;
    for (uint32_t i = 0; i < rank; i++)
        n *= shape[i];
    float *data = malloc((size_t)(n ? n : 1) * 4);
    test_rng r = test_rng_seed(seed);
    test_fill_uniform(&r, data, (size_t)n, -1.0f, 1.0f);
    char err[512];
    if (npy_write(cli_path_of(name), NPY_F32, rank, shape, data, err, sizeof err) != 0)
        fail_msg("%s", err);
    free(data);
}

/* Runs the tool with `args`; returns its exit status; its stderr is kept. */
static int run(const char *args, char *stderr_text, size_t size)
{
    return cli_run_with("", args, stderr_text, size);
}

/* The command fails, its stderr mentions `needle` (and `also`, unless
 * NULL), and no output file is left. */
static void expect_failure_saying(const char *args, const char *needle, const char *also)
{
    unlink(cli_path_of("O.npy"));
    char err[4096];
    int code = run(args, err, sizeof err);
    if (code == 0)
        fail_msg("vkattn %s: exit 0, expected failure", args);
    if (!strstr(err, needle) || (also && !strstr(err, also)))
        fail_msg("vkattn %s: stderr does not mention \"%s\"%s%s%s:\n%s", args, needle,
                 also ? " and \"" : "", also ? also : "", also ? "\"" : "", err);
    if (cli_exists(cli_path_of("O.npy")) || cli_exists(cli_path_of("O.npy.tmp")))
        fail_msg("vkattn %s: failed but wrote the output file", args);
}

static void expect_failure(const char *args, const char *needle)
{
    expect_failure_saying(args, needle, NULL);
}

/* Runs the tool; a non-zero exit fails the test with its stderr (kept in
 * err for further checks). */
static void expect_success(const char *args, char *err, size_t size)
{
    if (run(args, err, size) != 0)
        fail_msg("vkattn %s failed:\n%s", args, err);
}

/* expect_failure for a command given `file` for an option that takes
 * another kind of file: it is refused and left byte for byte as it was. */
static void expect_refused_unchanged(const char *args, const char *needle, const char *file)
{
    char before[4096], after[4096];
    size_t n = cli_read_text(file, before, sizeof before);
    assert_true(n > 0 && n < sizeof before - 1); /* the whole file */
    expect_failure(args, needle);
    assert_int_equal(cli_read_text(file, after, sizeof after), n);
    assert_memory_equal(before, after, n);
}

/* "attention <opts> --q .. --k .. --v .. --out .." on the standard inputs
 * (write_standard_inputs), into args. */
static void attention_on_standard_inputs(char *args, size_t size, const char *opts)
{
    snprintf(args, size, "attention %s --q %s --k %s --v %s --out %s", opts, cli_path_of("Q.npy"),
             cli_path_of("K.npy"), cli_path_of("V.npy"), cli_path_of("O.npy"));
}

/* An option naming a file the tool keeps state in (`option`, after `opts`)
 * pointed at a directory fails before any output, naming the option, and
 * leaves no temporary file beside it; pointed at a file of another kind (an
 * .npy; not one of the inputs, which test_cli_hardening covers), it is
 * refused and the file left as it was. */
static void expect_state_file_guarded(const char *opts, const char *option,
                                      const char *cannot_write, const char *not_ours)
{
    char args[2048], with[1024], named[64];
    snprintf(with, sizeof with, "%s %s %s", opts, option, cli_tmp);
    attention_on_standard_inputs(args, sizeof args, with);
    snprintf(named, sizeof named, "%s \"", option);
    expect_failure_saying(args, cannot_write, named);
    char tmp_tmp[600];
    snprintf(tmp_tmp, sizeof tmp_tmp, "%s.tmp", cli_tmp); /* nothing left beside it either */
    assert_false(cli_exists(tmp_tmp));
    char k_path[512]; /* a copy: path_of's buffers are reused */
    int64_t other[2] = {3, 5};
    write_f32("Other.npy", 2, other, 9);
    snprintf(k_path, sizeof k_path, "%s", cli_path_of("Other.npy"));
    snprintf(with, sizeof with, "%s %s %s", opts, option, k_path);
    attention_on_standard_inputs(args, sizeof args, with);
    expect_refused_unchanged(args, not_ours, k_path);
}

static void write_standard_inputs(void)
{
    int64_t q[4] = {2, 4, 5, 16}, kv[4] = {2, 2, 7, 16}, pad[2] = {2, 7}, mask[2] = {5, 7};
    write_f32("Q.npy", 4, q, 1);
    write_f32("K.npy", 4, kv, 2);
    write_f32("V.npy", 4, kv, 3);
    write_f32("M.npy", 2, mask, 4);
    uint8_t p[14] = {1, 1, 1, 1, 1, 0, 0, 1, 1, 1, 1, 1, 1, 1};
    char err[512];
    assert_int_equal(npy_write(cli_path_of("P.npy"), NPY_BOOL, 2, pad, p, err, sizeof err), 0);
}

/* The standard inputs, and no file `name`: its path (a copy, as path_of's
 * buffers are reused) in `path`. */
static void start_without(char *path, size_t size, const char *name)
{
    write_standard_inputs();
    snprintf(path, size, "%s", cli_path_of(name));
    unlink(path);
}

static void test_attention_command(void **state)
{
    (void)state;
    write_standard_inputs();
    char args[2048], err[4096];
    snprintf(
        args, sizeof args,
        "attention --validate --q %s --k %s --v %s --mask %s --key-padding %s --causal --check "
        "--weights-out %s --per-head --out %s",
        cli_path_of("Q.npy"), cli_path_of("K.npy"), cli_path_of("V.npy"), cli_path_of("M.npy"),
        cli_path_of("P.npy"), cli_path_of("W.npy"), cli_path_of("O.npy"));
    expect_success(args, err, sizeof err);
    npy_array o, w;
    char e[512];
    assert_int_equal(npy_read(cli_path_of("O.npy"), &o, e, sizeof e), 0);
    assert_int_equal(o.rank, 4);
    assert_int_equal(o.shape[1], 4);
    assert_int_equal(o.shape[3], 16);
    assert_int_equal(npy_read(cli_path_of("W.npy"), &w, e, sizeof e), 0);
    assert_int_equal(w.rank, 4);
    assert_int_equal(w.shape[3], 7);
    /* rows of probabilities sum to 1 */
    const float *pw = w.data;
    for (int64_t r = 0; r < 2 * 4 * 5; r++) {
        double s = 0;
        for (int j = 0; j < 7; j++)
            s += pw[r * 7 + j];
        assert_true(fabs(s - 1.0) < 1e-4);
    }
    npy_free(&o);
    npy_free(&w);
    /* f16 storage too */
    attention_on_standard_inputs(args, sizeof args, "--dtype f16 --check");
    expect_success(args, err, sizeof err);
}

/* --tune measures the kernel choices for the command's shape and --tuning
 * keeps them in a file that the next run starts from. */
static void test_tuning_file(void **state)
{
    (void)state;
    char tuning[512], args[2048], opts[1024], err[4096];
    start_without(tuning, sizeof tuning, "tuning.txt");
    snprintf(opts, sizeof opts, "--validate --tune --tuning %s --causal --check", tuning);
    attention_on_standard_inputs(args, sizeof args, opts);
    expect_success(args, err, sizeof err);
    char text[4096], again[4096];
    assert_true(cli_read_text(tuning, text, sizeof text) > 0);
    assert_non_null(strstr(text, "vkattn-tuning 1\ndevice "));
    assert_non_null(strstr(text, "\n2 16 ")); /* an attention entry, head dim 16 */
    /* read back - this device's entries, no complaint - and left alone without --tune */
    snprintf(opts, sizeof opts, "-v --validate --tuning %s --causal --check", tuning);
    attention_on_standard_inputs(args, sizeof args, opts);
    expect_success(args, err, sizeof err);
    if (strstr(err, "another device") || strstr(err, "not vkattn tuning data") ||
        strstr(err, "not read") || strstr(err, "could not be read"))
        fail_msg("vkattn %s did not take the tuning file:\n%s", args, err);
    cli_read_text(tuning, again, sizeof again);
    assert_string_equal(again, text);
    unlink(tuning);
    /* a path that cannot be written, a file that is not tuning data */
    expect_state_file_guarded("--tune", "--tuning", "a directory, not a vkattn tuning file",
                              "not a vkattn tuning file");
}

/* --pipeline-cache is written once the work is done, before the output
 * files; read back by the next run. */
static void test_pipeline_cache_file(void **state)
{
    (void)state;
    char cache[512], args[2048], opts[1024], err[4096];
    start_without(cache, sizeof cache, "pipelines.bin");
    for (int pass = 0; pass < 2; pass++) { /* written, then read back and rewritten */
        snprintf(opts, sizeof opts, "-v --validate --pipeline-cache %s --check", cache);
        attention_on_standard_inputs(args, sizeof args, opts);
        expect_success(args, err, sizeof err);
        assert_true(cli_exists(cache));
        assert_true(cli_exists(cli_path_of("O.npy")));
        /* the second run takes the first one's cache */
        if (pass == 1 && (strstr(err, "not read") || strstr(err, "could not be read") ||
                          strstr(err, "another device")))
            fail_msg("vkattn %s did not take the pipeline cache:\n%s", args, err);
    }
    unlink(cache);
    /* a path that cannot be written, a file that is not a pipeline cache */
    expect_state_file_guarded("", "--pipeline-cache", "a directory, not a Vulkan pipeline cache",
                              "not a Vulkan pipeline cache");
}

static void test_mha_command(void **state)
{
    (void)state;
    int64_t x[3] = {2, 6, 32}, wq[2] = {32, 32}, wkv[2] = {16, 32}, wo[2] = {32, 32}, bq[1] = {32};
    write_f32("X.npy", 3, x, 10);
    write_f32("WQ.npy", 2, wq, 11);
    write_f32("WK.npy", 2, wkv, 12);
    write_f32("WV.npy", 2, wkv, 13);
    write_f32("WO.npy", 2, wo, 14);
    write_f32("BQ.npy", 1, bq, 15);
    char args[4096], err[4096], e[512];
    snprintf(args, sizeof args,
             "mha --validate --x %s --heads 4 --kv-heads 2 --wq %s --wk %s --wv %s --wo %s --bq %s "
             "--causal --check --weights-out %s --out %s",
             cli_path_of("X.npy"), cli_path_of("WQ.npy"), cli_path_of("WK.npy"),
             cli_path_of("WV.npy"), cli_path_of("WO.npy"), cli_path_of("BQ.npy"),
             cli_path_of("W.npy"), cli_path_of("O.npy"));
    expect_success(args, err, sizeof err);
    npy_array y;
    assert_int_equal(npy_read(cli_path_of("O.npy"), &y, e, sizeof e), 0);
    assert_int_equal(y.rank, 3);
    assert_int_equal(y.shape[2], 32);
    npy_free(&y);

    /* decoding through a KV cache gives the full causal forward's rows */
    const char *common_fmt =
        "mha --x %s --heads 4 --kv-heads 2 --wq %s --wk %s --wv %s --wo %s --bq %s --causal";
    char common[2048];
    snprintf(common, sizeof common, common_fmt, cli_path_of("X.npy"), cli_path_of("WQ.npy"),
             cli_path_of("WK.npy"), cli_path_of("WV.npy"), cli_path_of("WO.npy"),
             cli_path_of("BQ.npy"));
    snprintf(args, sizeof args, "%s --out %s", common, cli_path_of("FULL.npy"));
    expect_success(args, err, sizeof err);
    const char *variants[] = {"--prefill 2", "--prefill 5 --paged-block 2",
                              "--prefill 1 --kv-splits 3", "--prefill 6"};
    npy_array full;
    assert_int_equal(npy_read(cli_path_of("FULL.npy"), &full, e, sizeof e), 0);
    for (size_t i = 0; i < sizeof variants / sizeof variants[0]; i++) {
        snprintf(args, sizeof args, "%s %s --check --validate --out %s", common, variants[i],
                 cli_path_of("O.npy"));
        expect_success(args, err, sizeof err);
        npy_array dec;
        assert_int_equal(npy_read(cli_path_of("O.npy"), &dec, e, sizeof e), 0);
        test_assert_close(dec.data, full.data, (size_t)(full.nbytes / 4), TEST_TOL_F32,
                          variants[i]);
        npy_free(&dec);
    }
    npy_free(&full);
    snprintf(
        args, sizeof args,
        "mha --x %s --heads 4 --kv-heads 2 --wq %s --wk %s --wv %s --wo %s --prefill 2 --out %s",
        cli_path_of("X.npy"), cli_path_of("WQ.npy"), cli_path_of("WK.npy"), cli_path_of("WV.npy"),
        cli_path_of("WO.npy"), cli_path_of("O.npy"));
    expect_failure(args, "--causal");
    snprintf(args, sizeof args, "%s --paged-block 4 --out %s", common, cli_path_of("O.npy"));
    expect_failure(args, "needs --prefill");
    snprintf(args, sizeof args, "%s --prefill 7 --out %s", common, cli_path_of("O.npy"));
    expect_failure(args, "only 6 tokens");
    /* --tune with --prefill tunes the steps (their projections and the
     * attention over the cache: op 3 entries) and decodes the same rows */
    char tuning[512], text[8192];
    snprintf(tuning, sizeof tuning, "%s", cli_path_of("steps-tuning.txt"));
    unlink(tuning);
    snprintf(args, sizeof args, "%s --prefill 2 --tune --tuning %s --check --validate --out %s",
             common, tuning, cli_path_of("O.npy"));
    expect_success(args, err, sizeof err);
    assert_true(cli_read_text(tuning, text, sizeof text) > 0);
    if (!strstr(text, "\n3 ") || !strstr(text, "\n1 "))
        fail_msg("the tuning file of --prefill --tune has no linear or KV-attention entry:\n%s",
                 text);
    unlink(tuning);
    npy_array tuned;
    assert_int_equal(npy_read(cli_path_of("O.npy"), &tuned, e, sizeof e), 0);
    assert_int_equal(npy_read(cli_path_of("FULL.npy"), &full, e, sizeof e), 0);
    test_assert_close(tuned.data, full.data, (size_t)(full.nbytes / 4), TEST_TOL_F32,
                      "--prefill 2 --tune");
    npy_free(&tuned);
    npy_free(&full);

    /* Dm not divisible by the heads: Dm 30, 4 heads */
    int64_t x30[3] = {1, 3, 30}, w30[2] = {30, 30};
    write_f32("X30.npy", 3, x30, 16);
    write_f32("W30.npy", 2, w30, 17);
    snprintf(args, sizeof args, "mha --x %s --heads 4 --wq %s --wk %s --wv %s --wo %s --out %s",
             cli_path_of("X30.npy"), cli_path_of("W30.npy"), cli_path_of("W30.npy"),
             cli_path_of("W30.npy"), cli_path_of("W30.npy"), cli_path_of("O.npy"));
    expect_failure(args, "--heads 4");
    /* a weight of the wrong shape names its file */
    snprintf(args, sizeof args, "mha --x %s --heads 4 --wq %s --wk %s --wv %s --wo %s --out %s",
             cli_path_of("X.npy"), cli_path_of("WQ.npy"), cli_path_of("WK.npy"),
             cli_path_of("WV.npy"), cli_path_of("WK.npy"), cli_path_of("O.npy"));
    expect_failure(args, "WK.npy");
    /* kv heads that do not divide the heads (weights shaped to match) */
    int64_t wk3[2] = {24, 32};
    write_f32("WK3.npy", 2, wk3, 18);
    snprintf(args, sizeof args,
             "mha --x %s --heads 4 --kv-heads 3 --wq %s --wk %s --wv %s --wo %s --out %s",
             cli_path_of("X.npy"), cli_path_of("WQ.npy"), cli_path_of("WK3.npy"),
             cli_path_of("WK3.npy"), cli_path_of("WO.npy"), cli_path_of("O.npy"));
    expect_failure(args, "does not divide");
}

static void test_bad_inputs(void **state)
{
    (void)state;
    write_standard_inputs();
    char args[4096], q[512], k[512], v[512], o[512];
    /* copies: path_of's buffers are reused */
    snprintf(q, sizeof q, "%s", cli_path_of("Q.npy"));
    snprintf(k, sizeof k, "%s", cli_path_of("K.npy"));
    snprintf(v, sizeof v, "%s", cli_path_of("V.npy"));
    snprintf(o, sizeof o, "%s", cli_path_of("O.npy"));
#define ATT(extra_fmt, ...)                                                                       \
    snprintf(args, sizeof args, "attention --q %s --k %s --v %s --out %s " extra_fmt, q, k, v, o, \
             __VA_ARGS__)

    /* missing file */
    snprintf(args, sizeof args, "attention --q %s/none.npy --k %s --v %s --out %s", cli_tmp, k, v,
             o);
    expect_failure(args, "none.npy");
    /* truncated file */
    char trunc[600];
    snprintf(trunc, sizeof trunc, "head -c 150 %s > %s", q, cli_path_of("T.npy"));
    assert_int_equal(system(trunc), 0);
    snprintf(args, sizeof args, "attention --q %s --k %s --v %s --out %s", cli_path_of("T.npy"), k,
             v, o);
    expect_failure(args, "T.npy");
    /* not a .npy at all */
    FILE *f = fopen(cli_path_of("J.npy"), "w");
    fputs("this is not numpy", f);
    fclose(f);
    snprintf(args, sizeof args, "attention --q %s --k %s --v %s --out %s", cli_path_of("J.npy"), k,
             v, o);
    expect_failure(args, "J.npy");
    /* float64 data */
    f = fopen(cli_path_of("D.npy"), "wb");
    const char hdr[] = "\x93NUMPY\x01\x00\x76\x00{'descr': '<f8', 'fortran_order': False, 'shape': "
                       "(1, 1, 1, 8), }";
    fwrite(hdr, 1, sizeof hdr - 1, f);
    for (size_t i = sizeof hdr - 1; i < 128 - 1; i++)
        fputc(' ', f);
    fputc('\n', f);
    double zeros[8] = {0};
    fwrite(zeros, 8, 8, f);
    fclose(f);
    snprintf(args, sizeof args, "attention --q %s --k %s --v %s --out %s", cli_path_of("D.npy"), k,
             v, o);
    expect_failure(args, "<f8");
    /* a zero-sized dimension */
    int64_t z[4] = {1, 0, 5, 16};
    write_f32("Z.npy", 4, z, 5);
    snprintf(args, sizeof args, "attention --q %s --k %s --v %s --out %s", cli_path_of("Z.npy"), k,
             v, o);
    expect_failure(args, "zero-sized");
    /* heads that do not divide: Hq 3, Hkv 2 */
    int64_t q3[4] = {2, 3, 5, 16};
    write_f32("Q3.npy", 4, q3, 6);
    snprintf(args, sizeof args, "attention --q %s --k %s --v %s --out %s", cli_path_of("Q3.npy"), k,
             v, o);
    expect_failure(args, "does not divide");
    /* head dims above 576 (580 and 584) */
    int64_t d12q[4] = {1, 2, 3, 580}, d12k[4] = {1, 2, 3, 580};
    write_f32("Q12.npy", 4, d12q, 7);
    write_f32("K12.npy", 4, d12k, 8);
    snprintf(args, sizeof args, "attention --q %s --k %s --v %s --out %s", cli_path_of("Q12.npy"),
             cli_path_of("K12.npy"), cli_path_of("K12.npy"), o);
    expect_failure(args, "580");
    int64_t d264[4] = {1, 1, 2, 584};
    write_f32("Q264.npy", 4, d264, 9);
    snprintf(args, sizeof args, "attention --q %s --k %s --v %s --out %s", cli_path_of("Q264.npy"),
             cli_path_of("Q264.npy"), cli_path_of("Q264.npy"), o);
    expect_failure(args, "584");
    /* batch mismatch */
    int64_t kb[4] = {3, 2, 7, 16};
    write_f32("KB.npy", 4, kb, 10);
    snprintf(args, sizeof args, "attention --q %s --k %s --v %s --out %s", q, cli_path_of("KB.npy"),
             v, o);
    expect_failure(args, "--k");
    /* a mask that does not broadcast */
    int64_t mbad[2] = {5, 6};
    write_f32("MB.npy", 2, mbad, 11);
    ATT("--mask %s", cli_path_of("MB.npy"));
    expect_failure(args, "--mask");
    /* key padding as float32 */
    int64_t pf[2] = {2, 7};
    write_f32("PF.npy", 2, pf, 12);
    ATT("--key-padding %s", cli_path_of("PF.npy"));
    expect_failure(args, "uint8 or bool");
    /* unknown dtype, bad scale, unknown option, missing --out */
    ATT("--dtype %s", "f8");
    expect_failure(args, "f8");
    ATT("--scale %s", "abc");
    expect_failure(args, "abc");
    ATT("--frobnicate %s", "1");
    expect_failure(args, "--frobnicate");
    snprintf(args, sizeof args, "attention --q %s --k %s --v %s", q, k, v);
    expect_failure(args, "--out");
    /* tuning options on commands that do not tune */
    expect_failure("demo --tune", "--tune: only the attention and mha commands take it");
    expect_failure("smoke --tuning t.txt", "--tuning: only the attention and mha commands take it");
#undef ATT
}

static void test_help_lists_flags(void **state)
{
    (void)state;
    char err[4096];
    char out[16384];
    assert_int_equal(run("--help", err, sizeof err), 0);
    cli_read_text(cli_path_of("stdout.txt"), out, sizeof out);
    assert_non_null(strstr(out, "attention"));
    assert_non_null(strstr(out, "mha"));
    assert_int_equal(run("mha --help", err, sizeof err), 0);
    cli_read_text(cli_path_of("stdout.txt"), out, sizeof out);
    const char *flags[] = {
        "--x",        "--kv",           "--heads",       "--kv-heads", "--wq",     "--wk",
        "--wv",       "--wo",           "--bq",          "--bo",       "--causal", "--key-padding",
        "--mask",     "--dtype",        "--weights-out", "--per-head", "--check",  "--device",
        "--validate", "--tune",         "--tuning",      "--key",      "--value",  "--bias-k",
        "--bias-v",   "--add-zero-attn"};
    for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++)
        if (!strstr(out, flags[i]))
            fail_msg("vkattn mha --help does not list %s", flags[i]);
}

/* No Vulkan driver at all: `vkattn info` says so and fails. */
static void test_info_without_any_device(void **state)
{
    (void)state;
    char cmd[1024];
    snprintf(
        cmd, sizeof cmd,
        "VK_ICD_FILENAMES=/nonexistent.json VK_DRIVER_FILES=/nonexistent.json %s info > %s 2> %s",
        VKATTN_CLI_PATH, cli_path_of("stdout.txt"), cli_path_of("stderr.txt"));
    int status = system(cmd);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 1);
    char err[2048];
    cli_read_text(cli_path_of("stderr.txt"), err, sizeof err);
    assert_non_null(strstr(err, "no Vulkan device"));
    assert_non_null(strstr(err, "mesa-vulkan-drivers"));
}

/* mha --prefill --kv-dtype: decode through a cache of any dtype under an
 * f32 layer (and bf16 layers over q4_0 and iq4_nl, f16 ones over f32 and
 * q5_0), --check
 * against the reference that rounds or quantizes K and V the same way; the
 * output differs from the f32 cache's by the rounding, more for q4_0; bad
 * values are refused without an output. */
static void test_mha_kv_dtype(void **state)
{
    (void)state;
    int64_t xs[3] = {2, 7, 128}, ws[2] = {128, 128};
    cli_write_f32("kx.npy", 3, xs, 61, -1, 1);
    const char *w[4] = {"kwq.npy", "kwk.npy", "kwv.npy", "kwo.npy"};
    for (int i = 0; i < 4; i++)
        cli_write_f32(w[i], 2, ws, 62 + (uint64_t)i, -0.1f, 0.1f);
    char base[2048], args[4096], err[2048];
    snprintf(base, sizeof base,
             "mha --x %s --heads 2 --wq %s --wk %s --wv %s --wo %s --causal --prefill 3",
             cli_path_of("kx.npy"), cli_path_of(w[0]), cli_path_of(w[1]), cli_path_of(w[2]),
             cli_path_of(w[3]));
    static const struct {
        const char *opts, *out;
    } kinds[] = {
        {"--kv-dtype f32", "ky_f32.npy"},
        {"--kv-dtype q8_0", "ky_q8.npy"},
        {"--kv-dtype q4_0", "ky_q4.npy"},
        {"--kv-dtype f16", "ky_f16.npy"},
        {"--kv-dtype bf16", "ky_bf16.npy"},
        {"--dtype bf16 --kv-dtype q4_0", "ky_bf16_q4.npy"},
        {"--dtype f16 --kv-dtype f32", "ky_f16_f32.npy"},
        {"--kv-dtype q4_1", "ky_q41.npy"},
        {"--dtype f16 --kv-dtype q5_0", "ky_f16_q50.npy"},
        {"--kv-dtype q5_1", "ky_q51.npy"},
        {"--dtype bf16 --kv-dtype iq4_nl", "ky_bf16_iq4.npy"},
    };
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
        snprintf(args, sizeof args, "%s %s --check --out %s", base, kinds[i].opts,
                 cli_path_of(kinds[i].out));
        cli_expect_success(args);
    }
    /* head dims that are not whole blocks (8 heads of 16, 3 of 40 from
     * --wq's 120 rows): rows padded to whole blocks */
    static const char *const padded[] = {"--heads 8 --kv-dtype q5_0", "--heads 8 --kv-dtype q4_1",
                                         "--heads 3 --kv-dtype q8_0 --dtype f16"};
    const int64_t w120[2] = {120, 128}, wo120[2] = {128, 120};
    cli_write_f32("kwq120.npy", 2, w120, 71, -0.1f, 0.1f);
    cli_write_f32("kwo120.npy", 2, wo120, 72, -0.1f, 0.1f);
    for (int i = 0; i < 3; i++) {
        bool h3 = strstr(padded[i], "--heads 3") != NULL;
        snprintf(args, sizeof args,
                 "mha --x %s %s --wq %s --wk %s --wv %s --wo %s --causal --prefill 3 --check "
                 "--out %s",
                 cli_path_of("kx.npy"), padded[i], cli_path_of(h3 ? "kwq120.npy" : w[0]),
                 cli_path_of(h3 ? "kwq120.npy" : w[1]), cli_path_of(h3 ? "kwq120.npy" : w[2]),
                 cli_path_of(h3 ? "kwo120.npy" : w[3]), cli_path_of("ky_pad.npy"));
        cli_expect_success(args);
    }
    cli_compare_outputs("ky_f32.npy", "ky_q8.npy", 0.05, false, "q8_0 cache vs f32 cache");
    cli_compare_outputs("ky_f32.npy", "ky_q4.npy", 1e-3, true, "q4_0 cache vs f32 cache");
    cli_compare_outputs("ky_f32.npy", "ky_f16.npy", 0.01, false, "f16 cache vs f32 cache");
    cli_compare_outputs("ky_f32.npy", "ky_bf16.npy", 0.05, false, "bf16 cache vs f32 cache");
    cli_compare_outputs("ky_f32.npy", "ky_q41.npy", 1e-3, true, "q4_1 cache vs f32 cache");
    cli_compare_outputs("ky_f32.npy", "ky_q51.npy", 1e-3, true, "q5_1 cache vs f32 cache");
    static const struct {
        const char *opts, *says;
    } bad[] = {
        {"--kv-dtype q6_k",
         "--kv-dtype \"q6_k\": expected f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1 or iq4_nl"},
    };
    for (int i = 0; i < 1; i++) {
        snprintf(args, sizeof args, "%s %s --out %s", base, bad[i].opts, cli_path_of("kbad.npy"));
        assert_int_equal(cli_run_with("", args, err, sizeof err), 2);
        if (!strstr(err, bad[i].says))
            fail_msg("%s: %s", bad[i].opts, err);
        assert_false(cli_exists(cli_path_of("kbad.npy")));
    }
    snprintf(args, sizeof args,
             "mha --x %s --heads 2 --wq %s --wk %s --wv %s --wo %s --kv-dtype q8_0 --out %s",
             cli_path_of("kx.npy"), cli_path_of(w[0]), cli_path_of(w[1]), cli_path_of(w[2]),
             cli_path_of(w[3]), cli_path_of("kbad.npy"));
    assert_int_equal(cli_run_with("", args, err, sizeof err), 2);
    assert_non_null(strstr(err, "--kv-dtype needs --prefill"));
}

/* V's head dim from --wv's rows: Dk 24 / Dv 16 and 5 / 21 (not multiples
 * of 8), forward and steps through a KV cache, --check against the
 * reference; --wv rows that do not split into the KV heads, and a --wo
 * that does not take Hq x Dv, are errors naming the file. */
static void test_mha_v_head_dim(void **state)
{
    (void)state;
    int64_t xs[3] = {1, 6, 32};
    cli_write_f32("vx.npy", 3, xs, 71, -1, 1);
    static const struct {
        int64_t dk, dv;
    } dims[2] = {{24, 16}, {5, 21}};
    char args[4096], err[2048];
    for (int i = 0; i < 2; i++) {
        int64_t wq[2] = {2 * dims[i].dk, 32}, wk[2] = {dims[i].dk, 32}, wv[2] = {dims[i].dv, 32},
                wo[2] = {32, 2 * dims[i].dv};
        cli_write_f32("vwq.npy", 2, wq, 72, -0.2f, 0.2f);
        cli_write_f32("vwk.npy", 2, wk, 73, -0.2f, 0.2f);
        cli_write_f32("vwv.npy", 2, wv, 74, -0.2f, 0.2f);
        cli_write_f32("vwo.npy", 2, wo, 75, -0.2f, 0.2f);
        const char *modes[2] = {"--causal", "--causal --prefill 2"};
        for (int m = 0; m < 2; m++) {
            snprintf(args, sizeof args,
                     "mha --x %s --heads 2 --kv-heads 1 --wq %s --wk %s --wv %s --wo %s %s "
                     "--check --validate --out %s",
                     cli_path_of("vx.npy"), cli_path_of("vwq.npy"), cli_path_of("vwk.npy"),
                     cli_path_of("vwv.npy"), cli_path_of("vwo.npy"), modes[m],
                     cli_path_of("vy.npy"));
            cli_expect_success(args);
        }
    }
    int64_t wv_bad[2] = {17, 32}, wo_bad[2] = {32, 40};
    cli_write_f32("vwv_bad.npy", 2, wv_bad, 76, -0.2f, 0.2f);
    cli_write_f32("vwo_bad.npy", 2, wo_bad, 77, -0.2f, 0.2f);
    static const struct {
        int kv_heads;
        const char *wv, *wo, *says;
    } bad[2] = {{2, "vwv_bad.npy", "vwo.npy", "17 rows do not split into 2 KV heads"},
                {1, "vwv.npy", "vwo_bad.npy", "is 40 but heads * v_head_dim is 42"}};
    for (int i = 0; i < 2; i++) {
        snprintf(args, sizeof args,
                 "mha --x %s --heads 2 --kv-heads %d --wq %s --wk %s --wv %s --wo %s --out %s",
                 cli_path_of("vx.npy"), bad[i].kv_heads, cli_path_of("vwq.npy"),
                 cli_path_of("vwk.npy"), cli_path_of(bad[i].wv), cli_path_of(bad[i].wo),
                 cli_path_of("vbad.npy"));
        assert_int_equal(cli_run_with("", args, err, sizeof err), 1);
        if (!strstr(err, bad[i].says))
            fail_msg("%s: %s", bad[i].says, err);
        assert_false(cli_exists(cli_path_of("vbad.npy")));
    }
}

/* Q [Hq, Tq, D] against K/V [B, Hkv, Tk, D]: the same queries for every
 * batch row (SDPA's broadcast), --check against the reference, and equal
 * bit for bit to Q copied into every row; rank 2 and --rope-theta are
 * refused without an output. */
static void test_broadcast_query(void **state)
{
    (void)state;
    int64_t q3[3] = {4, 5, 32}, ks[4] = {3, 2, 7, 32}, q4[4] = {3, 4, 5, 32}, q2[2] = {5, 32};
    write_f32("bq3.npy", 3, q3, 91);
    write_f32("bk.npy", 4, ks, 92);
    write_f32("bv.npy", 4, ks, 93);
    write_f32("bq2.npy", 2, q2, 94);
    float *q = malloc(sizeof(float) * 3 * 4 * 5 * 32);
    test_rng r = test_rng_seed(91);
    test_fill_uniform(&r, q, 4 * 5 * 32, -1.0f, 1.0f);
    for (int b = 1; b < 3; b++)
        memcpy(q + b * 4 * 5 * 32, q, sizeof(float) * 4 * 5 * 32);
    char err[512], args[4096];
    if (npy_write(cli_path_of("bq4.npy"), NPY_F32, 4, q4, q, err, sizeof err) != 0)
        fail_msg("%s", err);
    free(q);
    const char *kv = "--k %s --v %s --causal";
    char kvs[2048];
    snprintf(kvs, sizeof kvs, kv, cli_path_of("bk.npy"), cli_path_of("bv.npy"));
    snprintf(args, sizeof args, "attention --q %s %s --check --out %s", cli_path_of("bq3.npy"), kvs,
             cli_path_of("bo3.npy"));
    expect_success(args, err, sizeof err);
    snprintf(args, sizeof args, "attention --q %s %s --out %s", cli_path_of("bq4.npy"), kvs,
             cli_path_of("bo4.npy"));
    expect_success(args, err, sizeof err);
    cli_compare_outputs("bo3.npy", "bo4.npy", 0.0, false, "rank-3 --q vs Q copied per batch");
    snprintf(args, sizeof args, "attention --q %s %s --out %s", cli_path_of("bq2.npy"), kvs,
             cli_path_of("bbad.npy"));
    expect_failure(args, "2 dimensions; Q is [B,Hq,Tq,Dk], or [Hq,Tq,Dk]");
    snprintf(args, sizeof args, "attention --q %s %s --rope-theta 10000 --out %s",
             cli_path_of("bq3.npy"), kvs, cli_path_of("bbad.npy"));
    expect_failure(args, "does not take --rope-theta");
    assert_false(cli_exists(cli_path_of("bbad.npy")));
}

/* --tune reports progress on stderr - not a terminal here: one line per op
 * measured - and nothing with --quiet. The two runs tune separately on a
 * shared machine and may pick different tilings, which sum in another
 * order: their outputs agree within the f32 tolerance, not bit for bit. */
static void test_tune_progress_lines(void **state)
{
    (void)state;
    int64_t qs[4] = {1, 2, 6, 16};
    cli_write_f32("pq.npy", 4, qs, 81, -1, 1);
    char args[2048], err[4096];
    for (int quiet = 0; quiet < 2; quiet++) {
        snprintf(args, sizeof args, "attention --q %s --k %s --v %s --causal --tune%s --out %s",
                 cli_path_of("pq.npy"), cli_path_of("pq.npy"), cli_path_of("pq.npy"),
                 quiet ? " --quiet" : "", cli_path_of(quiet ? "po1.npy" : "po0.npy"));
        assert_int_equal(cli_run_with("", args, err, sizeof err), 0);
        const char *line = strstr(err, "vkattn: tuned attention b=1 hq=2 hkv=2 tq=6 tk=6 d=16 "
                                       "causal f32/f32: ");
        if (quiet ? strstr(err, "tuned") != NULL : !line || !strstr(line, " candidates, best "))
            fail_msg("--tune%s: stderr:\n%s", quiet ? " --quiet" : "", err);
    }
    cli_compare_outputs("po0.npy", "po1.npy", TEST_TOL_F32, false, "--quiet");
}

/* `vkattn info` says which storage types the device holds natively and
 * which the kernels emulate: f16 follows the device's 16-bit storage (text
 * and JSON agree), the others are fixed. */
static void test_info_types(void **state)
{
    (void)state;
    char err[2048], out[8192];
    assert_int_equal(cli_run_with("", "info --json", err, sizeof err), 0);
    cli_read_text(cli_path_of("stdout.txt"), out, sizeof out);
    const char *impl = getenv("VKATTN_TEST_IMPL");
    const char *want = impl && strncmp(impl, "lavapipe", 8) == 0  ? "\"f16\": \"native\""
                       : impl && strcmp(impl, "swiftshader") == 0 ? "\"f16\": \"emulated\""
                                                                  : "\"f16\": \"";
    if (!strstr(out, "\"types\": {\"f32\": \"native\", ") || !strstr(out, want) ||
        !strstr(out, "\"bf16\": \"emulated\", \"q8_0\": \"emulated\", \"q4_0\": \"emulated\", "
                     "\"q4_1\": \"emulated\", \"q5_0\": \"emulated\", \"q5_1\": \"emulated\", "
                     "\"iq4_nl\": \"emulated\"}"))
        fail_msg("info --json (%s) does not list the types as expected (%s):\n%s",
                 impl ? impl : "?", want, out);
    assert_int_equal(cli_run_with("", "info", err, sizeof err), 0);
    cli_read_text(cli_path_of("stdout.txt"), out, sizeof out);
    if (!strstr(out, "types: f32 native; f16 ") ||
        !strstr(out, "q8_0, q4_0, q4_1, q5_0, q5_1, iq4_nl emulated"))
        fail_msg("info does not list the types:\n%s", out);
}

/* test_cli_inputs.c: the input formats */
void test_float16_inputs(void **state);
void test_bf16_bit_inputs(void **state);
void test_kv_dtype_inputs(void **state);
void test_key_value_inputs(void **state);
void test_appended_rows_inputs(void **state);
void test_layouts(void **state);

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_attention_command),    cmocka_unit_test(test_broadcast_query),
        cmocka_unit_test(test_tuning_file),          cmocka_unit_test(test_pipeline_cache_file),
        cmocka_unit_test(test_mha_command),          cmocka_unit_test(test_bad_inputs),
        cmocka_unit_test(test_help_lists_flags),     cmocka_unit_test(test_info_without_any_device),
        cmocka_unit_test(test_info_types),           cmocka_unit_test(test_mha_kv_dtype),
        cmocka_unit_test(test_mha_v_head_dim),       cmocka_unit_test(test_float16_inputs),
        cmocka_unit_test(test_bf16_bit_inputs),      cmocka_unit_test(test_layouts),
        cmocka_unit_test(test_kv_dtype_inputs),      cmocka_unit_test(test_key_value_inputs),
        cmocka_unit_test(test_appended_rows_inputs), cmocka_unit_test(test_tune_progress_lines),
    };
    return cmocka_run_group_tests(tests, cli_setup, cli_teardown);
}
