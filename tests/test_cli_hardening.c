/* The vkattn command-line tool against hostile or unusual paths and values:
 * links planted beside an output, device and FIFO outputs, outputs naming
 * the same file as another output or an input, crafted .npy headers, number
 * options out of float range, f16 overflow, FIFO inputs, long paths. Each
 * case exits non-zero with a message naming the problem, or does the one
 * right thing, and never writes where it must not. */
#include "npy/npy.h"
#include "test_cli_util.h"
#include "test_util.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef VKATTN_CLI_PATH
#error "VKATTN_CLI_PATH must name the vkattn executable"
#endif

static void write_f32_values(const char *name, uint32_t rank, const int64_t *shape, float special)
{
    int64_t n = 1;
    for (uint32_t i = 0; i < rank; i++)
        n *= shape[i];
    float *data = malloc((size_t)n * 4);
    test_rng r = test_rng_seed((uint64_t)n + name[0]);
    test_fill_uniform(&r, data, (size_t)n, -1.0f, 1.0f);
    if (special != 0)
        data[n / 2] = special;
    char err[512];
    if (npy_write(cli_path_of(name), NPY_F32, rank, shape, data, err, sizeof err) != 0)
        fail_msg("%s", err);
    free(data);
}

/* Q [1,2,4,16], K and V [1,2,4,16]. */
static void write_inputs(void)
{
    int64_t s[4] = {1, 2, 4, 16};
    write_f32_values("Q.npy", 4, s, 0);
    write_f32_values("K.npy", 4, s, 0);
    write_f32_values("V.npy", 4, s, 0);
}

static int run(const char *args, char *err, size_t size)
{
    return cli_run_with("", args, err, size);
}

static void expect_failure_saying(const char *args, const char *needle, const char *also)
{
    char err[8192];
    int code = run(args, err, sizeof err);
    if (code == 0)
        fail_msg("vkattn %s: exit 0, expected failure", args);
    if (!strstr(err, needle) || (also && !strstr(err, also)))
        fail_msg("vkattn %s: stderr does not mention \"%s\" and \"%s\":\n%s", args, needle,
                 also ? also : "", err);
}

/* "attention --q .. --k .. --v .. <extra>" into args. */
static void attention(char *args, size_t size, const char *extra)
{
    char q[512], k[512];
    snprintf(q, sizeof q, "%s", cli_path_of("Q.npy"));
    snprintf(k, sizeof k, "%s", cli_path_of("K.npy"));
    snprintf(args, size, "attention --q %s --k %s --v %s %s", q, k, cli_path_of("V.npy"), extra);
}

static void expect_valid_output(const char *p)
{
    npy_array o;
    char e[1024];
    if (npy_read(p, &o, e, sizeof e) != 0)
        fail_msg("%s", e);
    assert_int_equal(o.rank, 4);
    assert_int_equal(o.shape[3], 16);
    npy_free(&o);
}

/* D3: a link planted at the old fixed temporary name is never followed. */
static void test_planted_temporary_link(void **state)
{
    (void)state;
    write_inputs();
    char victim[512], link_path[512], args[4096], err[4096], text[64];
    snprintf(victim, sizeof victim, "%s", cli_path_of("victim.txt"));
    snprintf(link_path, sizeof link_path, "%s", cli_path_of("O.npy.tmp"));
    FILE *f = fopen(victim, "w");
    fputs("precious", f);
    fclose(f);
    unlink(link_path);
    assert_int_equal(symlink(victim, link_path), 0);
    char extra[600];
    snprintf(extra, sizeof extra, "--out %s", cli_path_of("O.npy"));
    attention(args, sizeof args, extra);
    if (run(args, err, sizeof err) != 0)
        fail_msg("vkattn %s failed:\n%s", args, err);
    cli_read_text(victim, text, sizeof text);
    assert_string_equal(text, "precious");
    struct stat st;
    assert_int_equal(lstat(cli_path_of("O.npy"), &st), 0);
    assert_true(S_ISREG(st.st_mode));
    expect_valid_output(cli_path_of("O.npy"));
}

/* D4: /dev/null and a FIFO are written as they are; a directory is refused. */
static void test_special_outputs(void **state)
{
    (void)state;
    write_inputs();
    char args[4096], err[4096];
    attention(args, sizeof args, "--out /dev/null");
    if (run(args, err, sizeof err) != 0)
        fail_msg("vkattn %s failed:\n%s", args, err);
    struct stat st;
    assert_int_equal(stat("/dev/null", &st), 0);
    assert_true(S_ISCHR(st.st_mode));

    char fifo[512], copy[512], extra[600];
    snprintf(fifo, sizeof fifo, "%s", cli_path_of("out.fifo"));
    snprintf(copy, sizeof copy, "%s", cli_path_of("fifo-copy.npy"));
    assert_int_equal(mkfifo(fifo, 0600), 0);
    pid_t child = fork();
    if (child == 0) { /* the reader: copies what comes through the FIFO */
        alarm(30);
        FILE *in = fopen(fifo, "rb"), *out = fopen(copy, "wb");
        char buf[4096];
        size_t n;
        while (in && out && (n = fread(buf, 1, sizeof buf, in)) > 0)
            fwrite(buf, 1, n, out);
        _exit(in && out && fclose(out) == 0 ? 0 : 1);
    }
    snprintf(extra, sizeof extra, "--out %s", fifo);
    attention(args, sizeof args, extra);
    int code = run(args, err, sizeof err);
    int status = 0;
    for (int i = 0; i < 50 && waitpid(child, &status, WNOHANG) == 0; i++)
        nanosleep(&(struct timespec){0, 100000000}, NULL);
    if (waitpid(child, &status, WNOHANG) == 0) {
        kill(child, SIGKILL);
        waitpid(child, &status, 0);
    }
    if (code != 0)
        fail_msg("vkattn %s failed:\n%s", args, err);
    assert_int_equal(lstat(fifo, &st), 0);
    assert_true(S_ISFIFO(st.st_mode)); /* not replaced by a file */
    expect_valid_output(copy);

    snprintf(extra, sizeof extra, "--out %s", cli_tmp);
    attention(args, sizeof args, extra);
    expect_failure_saying(args, cli_tmp, "a directory, not a file");
}

/* D6: one file named by two outputs, or by an output and an input. */
static void expect_collision(const char *args, const char *opt_a, const char *opt_b)
{
    expect_failure_saying(args, opt_a, opt_b);
    char err[8192];
    run(args, err, sizeof err);
    if (!strstr(err, "same file"))
        fail_msg("vkattn %s: no \"same file\" in:\n%s", args, err);
}

/* The attention command on the standard inputs with `extra` options. */
static void expect_attention_collision(const char *extra, const char *opt_a, const char *opt_b)
{
    char args[4096];
    attention(args, sizeof args, extra);
    expect_collision(args, opt_a, opt_b);
}

static void test_output_collisions(void **state)
{
    (void)state;
    write_inputs();
    char args[4096], extra[2048], o[512], q[512], before[8192], after[8192];
    snprintf(o, sizeof o, "%s", cli_path_of("O.npy"));
    snprintf(q, sizeof q, "%s", cli_path_of("Q.npy"));
    unlink(o);
    snprintf(extra, sizeof extra, "--out %s --weights-out %s", o, o);
    expect_attention_collision(extra, "--out", "--weights-out");
    assert_int_equal(access(o, F_OK), -1);
    snprintf(extra, sizeof extra, "--pipeline-cache %s --out %s", o, o);
    expect_attention_collision(extra, "--out", "--pipeline-cache");
    snprintf(extra, sizeof extra, "--tune --tuning %s --out %s", o, o);
    expect_attention_collision(extra, "--out", "--tuning");
    /* another spelling of a path that does not exist yet */
    snprintf(extra, sizeof extra, "--out %s --weights-out %s/./../%s/O.npy", o, cli_tmp,
             strrchr(cli_tmp, '/') + 1);
    expect_attention_collision(extra, "--out", "--weights-out");
    assert_int_equal(access(o, F_OK), -1);

    /* an output naming an input: directly, by a hard link, by a symlink */
    size_t n = cli_read_text(q, before, sizeof before);
    snprintf(extra, sizeof extra, "--out %s", q);
    expect_attention_collision(extra, "--out", "--q");
    char hard[512], soft[512];
    snprintf(hard, sizeof hard, "%s", cli_path_of("Q-hard.npy"));
    snprintf(soft, sizeof soft, "%s", cli_path_of("Q-soft.npy"));
    unlink(hard);
    unlink(soft);
    assert_int_equal(link(q, hard), 0);
    assert_int_equal(symlink(q, soft), 0);
    snprintf(extra, sizeof extra, "--out %s", hard);
    expect_attention_collision(extra, "--out", "--q");
    snprintf(extra, sizeof extra, "--out %s --weights-out %s", o, soft);
    expect_attention_collision(extra, "--weights-out", "--q");
    snprintf(extra, sizeof extra, "--out %s --pipeline-cache %s", o, hard);
    expect_attention_collision(extra, "--pipeline-cache", "--q");
    assert_int_equal(cli_read_text(q, after, sizeof after), n);
    assert_memory_equal(before, after, n);
    assert_int_equal(access(o, F_OK), -1);

    /* mha: --out naming --x */
    snprintf(args, sizeof args, "mha --x %s --heads 2 --wq %s --wk %s --wv %s --wo %s --out %s", q,
             q, q, q, q, soft);
    expect_collision(args, "--out", "--x");
}

/* D8: a dimension past 2^64 must not wrap around to a small one. */
static void test_huge_dimension(void **state)
{
    (void)state;
    write_inputs();
    char p[512];
    snprintf(p, sizeof p, "%s", cli_path_of("Huge.npy"));
    FILE *f = fopen(p, "wb");
    char dict[256];
    int len = snprintf(dict, sizeof dict,
                       "{'descr': '<f4', 'fortran_order': False, "
                       "'shape': (18446744073709551617, 2, 4, 16), }");
    int pad = 64 - (10 + len + 1) % 64;
    unsigned char pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0};
    pre[8] = (unsigned char)((len + pad + 1) & 0xff);
    pre[9] = (unsigned char)((len + pad + 1) >> 8);
    fwrite(pre, 1, 10, f);
    fwrite(dict, 1, (size_t)len, f);
    for (int i = 0; i < pad; i++)
        fputc(' ', f);
    fputc('\n', f);
    float zeros[2 * 4 * 16] = {0}; /* the data of shape (1, 2, 4, 16) */
    fwrite(zeros, sizeof zeros, 1, f);
    fclose(f);
    char args[4096], extra[600];
    snprintf(extra, sizeof extra, "--out %s", cli_path_of("O.npy"));
    snprintf(args, sizeof args, "attention --q %s --k %s --v %s %s", p, p, p, extra);
    expect_failure_saying(args, "Huge.npy", "too large");
}

/* D9: float options parsed whole and refused outside float's normal range. */
static void test_float_options(void **state)
{
    (void)state;
    write_inputs();
    const char *bad[] = {"1e39", "1e-50", "nan", "inf", "1.0x", "-1e39"};
    char args[4096], extra[800];
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(extra, sizeof extra, "--scale %s --out %s", bad[i], cli_path_of("O.npy"));
        attention(args, sizeof args, extra);
        expect_failure_saying(args, "--scale", bad[i]);
    }
}

/* D11: values f16 cannot hold, and a FIFO given as an input. */
static void test_f16_range_and_fifo_input(void **state)
{
    (void)state;
    write_inputs();
    int64_t s[4] = {1, 2, 4, 16};
    write_f32_values("Q.npy", 4, s, 1e5f);
    write_f32_values("KN.npy", 4, s, NAN);
    char args[4096], extra[800];
    snprintf(extra, sizeof extra, "--dtype f16 --out %s", cli_path_of("O.npy"));
    attention(args, sizeof args, extra);
    expect_failure_saying(args, "--q", "100000");
    expect_failure_saying(args, "65504", "f16");
    write_inputs();
    snprintf(extra, sizeof extra, "--dtype f16 --out %s --k %s", cli_path_of("O.npy"),
             cli_path_of("KN.npy"));
    attention(args, sizeof args, extra);
    expect_failure_saying(args, "--k", "NaN");

    char fifo[512], err[4096];
    snprintf(fifo, sizeof fifo, "%s", cli_path_of("in.fifo"));
    assert_int_equal(mkfifo(fifo, 0600), 0);
    snprintf(args, sizeof args, "attention --q %s --k %s --v %s --out %s", fifo, fifo, fifo,
             cli_path_of("O.npy"));
    int code = cli_run_with("timeout 20", args, err, sizeof err);
    if (code == 0 || code == 124 || !strstr(err, "not a regular file") || !strstr(err, fifo))
        fail_msg("vkattn %s: exit %d:\n%s", args, code, err);
}

/* Cosmetics: a missing value is named as such; a long path never hides the
 * reason; a library result is reported as the library's. */
static void test_messages(void **state)
{
    (void)state;
    write_inputs();
    expect_failure_saying("info --device", "--device needs a value", NULL);
    expect_failure_saying("demo --tokens", "--tokens needs a value", NULL);
    expect_failure_saying("smoke --elements", "--elements needs a value", NULL);
    expect_failure_saying("smoke --device", "--device needs a value", NULL);

    char *long_path = malloc(6000), *args = malloc(8000);
    int n = snprintf(long_path, 6000, "%s/", cli_tmp);
    while (n < 5000)
        n += snprintf(long_path + n, 6000 - (size_t)n, "%s", "dir-name-part/");
    snprintf(long_path + n, 6000 - (size_t)n, "Q.npy");
    snprintf(args, 8000, "attention --q %s --k %s --v %s --out %s", long_path, cli_path_of("K.npy"),
             cli_path_of("V.npy"), cli_path_of("O.npy"));
    expect_failure_saying(args, "--q", strerror(ENAMETOOLONG));
    free(long_path);

    /* weights [1, 512, 1024, 4096] f32: 8 GiB, past maxMemoryAllocationSize */
    int64_t q[4] = {1, 512, 1024, 8}, kv[4] = {1, 1, 4096, 8};
    write_f32_values("QL.npy", 4, q, 0);
    write_f32_values("KL.npy", 4, kv, 0);
    char kl[512];
    snprintf(kl, sizeof kl, "%s", cli_path_of("KL.npy"));
    snprintf(args, 8000, "attention --q %s --k %s --v %s --weights-out %s --per-head --out %s",
             cli_path_of("QL.npy"), kl, kl, cli_path_of("W.npy"), cli_path_of("O.npy"));
    expect_failure_saying(args, "OUT_OF_RANGE", "maxMemoryAllocationSize");
    char err[8192];
    run(args, err, sizeof err);
    if (strstr(err, "OUT_OF_DEVICE_MEMORY"))
        fail_msg("reported as out of device memory:\n%s", err);
    free(args);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_planted_temporary_link),
        cmocka_unit_test(test_special_outputs),
        cmocka_unit_test(test_output_collisions),
        cmocka_unit_test(test_huge_dimension),
        cmocka_unit_test(test_float_options),
        cmocka_unit_test(test_f16_range_and_fifo_input),
        cmocka_unit_test(test_messages),
    };
    return cmocka_run_group_tests(tests, cli_setup, cli_teardown);
}
