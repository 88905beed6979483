/* The .npy reader (tools/npy): any bytes either fail with a message or give
 * an array that npy_write writes and npy_read reads back identically
 * (dtype, rank, shape, data bytes). npy_read takes a path, so each input is
 * written to a file in a private temporary directory first. */
#include "fuzz_util.h"

#include "npy/npy.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char in_path[256], out_path[256];

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    const char *dir = fuzz_temp_dir("npy");
    snprintf(in_path, sizeof in_path, "%s/in.npy", dir);
    snprintf(out_path, sizeof out_path, "%s/out.npy", dir);
    return 0;
}

static void write_input(const uint8_t *data, size_t size)
{
    FILE *f = fopen(in_path, "wb");
    if (!f || (size && fwrite(data, 1, size, f) != size) || fclose(f) != 0)
        fuzz_fail("cannot write %s", in_path);
}

/* An error message is a terminated string that names the file. */
static void check_error(const char *error, size_t size, const char *path)
{
    if (!memchr(error, '\0', size))
        fuzz_fail("npy error message is not terminated");
    if (strncmp(error, path, strlen(path)) != 0)
        fuzz_fail("npy error message does not start with the path: %s", error);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    write_input(data, size);
    npy_array a, b;
    char error[512];
    memset(error, 'x', sizeof error);
    if (npy_read(in_path, &a, error, sizeof error) != 0) {
        check_error(error, sizeof error, in_path);
        if (a.data || a.nbytes || a.rank)
            fuzz_fail("a failed npy_read left the array non-empty");
        return 0;
    }
    if (!a.data || a.rank > NPY_MAX_RANK || npy_dtype_size(a.dtype) == 0)
        fuzz_fail("npy_read succeeded with data %p, rank %u, dtype %d", a.data, a.rank,
                  (int)a.dtype);
    size_t elements = 1;
    for (uint32_t i = 0; i < a.rank; i++)
        elements *= (size_t)a.shape[i];
    if (a.nbytes != elements * npy_dtype_size(a.dtype))
        fuzz_fail("npy_read: nbytes %zu for %zu elements of %zu bytes", a.nbytes, elements,
                  npy_dtype_size(a.dtype));
    if (a.dtype == NPY_BOOL)
        for (size_t i = 0; i < a.nbytes; i++)
            if (((const uint8_t *)a.data)[i] > 1)
                fuzz_fail("npy_read: bool element %zu is %u", i, ((const uint8_t *)a.data)[i]);

    if (npy_write(out_path, a.dtype, a.rank, a.shape, a.data, error, sizeof error) != 0)
        fuzz_fail("npy_write of what npy_read read failed: %s", error);
    if (npy_read(out_path, &b, error, sizeof error) != 0)
        fuzz_fail("npy_read of what npy_write wrote failed: %s", error);
    if (b.dtype != a.dtype || b.rank != a.rank ||
        memcmp(b.shape, a.shape, a.rank * sizeof *a.shape) != 0 || b.nbytes != a.nbytes ||
        memcmp(b.data, a.data, a.nbytes) != 0)
        fuzz_fail("round trip changed the array: dtype %d -> %d, rank %u -> %u, %zu -> %zu bytes",
                  (int)a.dtype, (int)b.dtype, a.rank, b.rank, a.nbytes, b.nbytes);
    npy_free(&a);
    npy_free(&b);
    if (a.data || b.data)
        fuzz_fail("npy_free left data behind");
    return 0;
}
