#include "test_cli_util.h"
#include "test_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

#ifndef VKATTN_CLI_PATH
#error "VKATTN_CLI_PATH must name the vkattn executable"
#endif

char cli_tmp[256];

const char *cli_path_of(const char *name)
{
    static char buf[8][512];
    static int next;
    char *p = buf[next++ % 8];
    snprintf(p, 512, "%s/%s", cli_tmp, name);
    return p;
}

size_t cli_read_text(const char *path, char *buf, size_t size)
{
    FILE *f = fopen(path, "rb");
    size_t n = f ? fread(buf, 1, size - 1, f) : 0;
    if (f)
        fclose(f);
    buf[n] = '\0';
    return n;
}

int cli_run_with(const char *prefix, const char *args, char *err, size_t size)
{
    size_t len = strlen(args) + 2048;
    char *cmd = malloc(len);
    if (!cmd)
        return 128;
    /* an implementation whose driver needs another C library runs the tool
     * through its loader (tools/lavapipe26.sh's DIR/run) */
    const char *through = getenv("VKATTN_TEST_RUN_PREFIX");
    snprintf(cmd, len, "%s %s %s %s > %s 2> %s", prefix, through ? through : "", VKATTN_CLI_PATH,
             args, cli_path_of("stdout.txt"), cli_path_of("stderr.txt"));
    int status = system(cmd);
    free(cmd);
    cli_read_text(cli_path_of("stderr.txt"), err, size);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

int cli_setup(void **state)
{
    (void)state;
    snprintf(cli_tmp, sizeof cli_tmp, "/tmp/vkattn-cli-XXXXXX");
    return mkdtemp(cli_tmp) ? 0 : -1;
}

int cli_teardown(void **state)
{
    (void)state;
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", cli_tmp);
    return system(cmd) == 0 ? 0 : -1;
}

void cli_expect_success(const char *args)
{
    char err[4096];
    if (cli_run_with("", args, err, sizeof err) != 0)
        fail_msg("vkattn %s failed:\n%s", args, err);
}

npy_array cli_read_npy(const char *name)
{
    npy_array a;
    char err[512];
    if (npy_read(cli_path_of(name), &a, err, sizeof err) != 0)
        fail_msg("%s", err);
    return a;
}

void cli_compare_outputs(const char *a_name, const char *b_name, double tol, bool differ,
                         const char *what)
{
    npy_array a = cli_read_npy(a_name), b = cli_read_npy(b_name);
    size_t abytes = a.nbytes, bbytes = b.nbytes;
    if (abytes != bbytes) {
        npy_free(&a);
        npy_free(&b);
        fail_msg("%s: %s has %zu bytes, %s %zu", what, a_name, abytes, b_name, bbytes);
    }
    size_t n = a.nbytes / 4;
    const float *x = a.data, *y = b.data;
    double max = 0;
    for (size_t i = 0; i < n; i++)
        max = fmax(max, fabs((double)x[i] - y[i]));
    npy_free(&a);
    npy_free(&b);
    if (differ ? max <= 1e-3 : max > tol)
        fail_msg("%s: %s and %s differ by %g", what, a_name, b_name, max);
}

bool cli_exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

void cli_write_npy(const char *name, npy_dtype dtype, uint32_t rank, const int64_t *shape,
                   const void *data)
{
    char err[512];
    if (npy_write(cli_path_of(name), dtype, rank, shape, data, err, sizeof err) != 0)
        fail_msg("%s", err);
}

void cli_write_f32(const char *name, uint32_t rank, const int64_t *shape, uint64_t seed, float lo,
                   float hi)
{
    int64_t n = 1;
    for (uint32_t i = 0; i < rank; i++)
        n *= shape[i];
    float *data = malloc((size_t)(n ? n : 1) * 4);
    test_rng r = test_rng_seed(seed);
    test_fill_uniform(&r, data, (size_t)n, lo, hi);
    cli_write_npy(name, NPY_F32, rank, shape, data);
    free(data);
}
