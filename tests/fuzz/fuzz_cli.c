/* The vkattn CLI's argument parsing (tools/cli/cli_main.c and the commands)
 * with device creation stubbed (fuzz_cli_stubs.c): the input, split at NUL
 * bytes, is the argument list after "vkattn". Runs in a private temporary
 * working directory, so relative paths the fuzzer invents (outputs,
 * --tuning, --pipeline-cache) land there; stdout and stderr are discarded
 * (fuzz_quiet) so the CLI's messages do not slow the fuzzer. Small valid
 * inputs (q.npy, x.npy, ...: the names the seeds use) are written there
 * first, so the commands get past loading to their shape checks. */
#include "fuzz_util.h"

#include "cli.h"
#include "npy/npy.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_ARGS 32
#define MAX_ARG_BYTES 256

/* name, dtype, rank, shape */
static const struct {
    const char *name;
    npy_dtype dtype;
    uint32_t rank;
    int64_t shape[4];
} inputs[] = {
    {"q.npy", NPY_F32, 4, {1, 2, 4, 8}}, {"k.npy", NPY_F32, 4, {1, 1, 4, 8}},
    {"v.npy", NPY_F32, 4, {1, 1, 4, 8}}, {"mask.npy", NPY_F32, 2, {4, 4}},
    {"pad.npy", NPY_U8, 2, {1, 4}},      {"padb.npy", NPY_BOOL, 2, {1, 4}},
    {"x.npy", NPY_F32, 3, {1, 4, 16}},   {"c.npy", NPY_F32, 3, {1, 6, 8}},
    {"w16.npy", NPY_F32, 2, {16, 16}},   {"w8.npy", NPY_F32, 2, {8, 8}},
    {"b16.npy", NPY_F32, 1, {16}},       {"b8.npy", NPY_F32, 1, {8}},
    {"h.npy", NPY_F16, 4, {1, 2, 4, 8}}, {"s.npy", NPY_F32, 0, {0}},
};

static void write_inputs(void)
{
    float data[256];
    for (int i = 0; i < 256; i++)
        data[i] = (float)((i * 37) % 17) / 16.0f - 0.5f;
    for (size_t k = 0; k < sizeof inputs / sizeof *inputs; k++) {
        char error[512];
        if (npy_write(inputs[k].name, inputs[k].dtype, inputs[k].rank, inputs[k].shape, data, error,
                      sizeof error) != 0)
            fuzz_fail("%s", error);
    }
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    fuzz_prepare_args(argc, argv, 1);
    const char *dir = fuzz_temp_dir("cli");
    if (chdir(dir) != 0)
        fuzz_fail("cannot chdir to %s", dir);
    /* what cli_main would otherwise set from the machine's drivers */
    unsetenv("VKATTN_DEVICE");
    write_inputs();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* each argument in its own exact-size allocation, so ASan catches a
     * read past any terminator */
    char *argv[MAX_ARGS + 2];
    int argc = 0;
    static char name[] = "vkattn";
    argv[argc++] = name;
    size_t at = 0;
    while (at < size && argc <= MAX_ARGS) {
        const uint8_t *end = memchr(data + at, '\0', size - at);
        size_t n = end ? (size_t)(end - (data + at)) : size - at;
        if (n > MAX_ARG_BYTES)
            break;
        char *arg = malloc(n + 1);
        if (!arg)
            fuzz_fail("out of memory");
        memcpy(arg, data + at, n);
        arg[n] = '\0';
        argv[argc++] = arg;
        at += n + 1;
    }
    argv[argc] = NULL;
    int rc = cli_main(argc, argv);
    if (rc < 0 || rc > 2)
        fuzz_fail("cli_main returned %d", rc);
    for (int i = 1; i < argc; i++)
        free(argv[i]);
    return 0;
}
