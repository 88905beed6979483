/* The .safetensors reader (tools/safetensors): any bytes either fail with a
 * message naming the file, leaving nothing behind, or give tensors whose
 * every byte lies inside the input's data section, whose sizes match their
 * dtype and shape, which tile that section exactly and have distinct
 * names; the floating-point ones widen to f32 (reading every byte, so the
 * sanitizers see any read out of bounds). */
#include "fuzz_util.h"

#include "safetensors/safetensors.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    return 0;
}

static void check_tensor(const st_tensor *t, const uint8_t *lo, const uint8_t *hi)
{
    size_t n = 1;
    for (uint32_t d = 0; d < t->rank; d++)
        n *= (size_t)t->shape[d];
    if (t->rank > ST_MAX_RANK || !st_dtype_name(t->dtype) || !t->name)
        fuzz_fail("tensor with rank %u, dtype %d", t->rank, (int)t->dtype);
    if (t->nbytes != n * st_dtype_size(t->dtype))
        fuzz_fail("tensor \"%s\": %zu bytes for %zu elements of %s", t->name, t->nbytes, n,
                  st_dtype_name(t->dtype));
    const uint8_t *p = t->data;
    if (p < lo || p > hi || (size_t)(hi - p) < t->nbytes)
        fuzz_fail("tensor \"%s\": data outside the data section", t->name);
    if (t->dtype != ST_F32 && t->dtype != ST_F16 && t->dtype != ST_BF16)
        return;
    float *f = malloc(n ? n * sizeof *f : 1);
    if (!f)
        fuzz_fail("out of memory");
    if (st_to_f32(t, f, n) != 0)
        fuzz_fail("st_to_f32 refused a %s tensor", st_dtype_name(t->dtype));
    free(f);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* a private copy of exactly `size` bytes: a read past it is caught */
    uint8_t *bytes = malloc(size ? size : 1);
    if (!bytes)
        fuzz_fail("out of memory");
    memcpy(bytes, data, size);
    st_file f;
    char error[512];
    memset(error, 'x', sizeof error);
    if (st_parse(bytes, size, "in.safetensors", &f, error, sizeof error) != 0) {
        if (!memchr(error, '\0', sizeof error) || strncmp(error, "in.safetensors: ", 16) != 0)
            fuzz_fail("error message not terminated or not naming the file");
        if (f.tensors || f.count)
            fuzz_fail("a failed st_parse left tensors behind");
        free(bytes);
        return 0;
    }
    uint64_t header = 0;
    for (int i = 7; i >= 0; i--)
        header = header << 8 | bytes[i];
    const uint8_t *lo = bytes + 8 + header, *hi = bytes + size;
    size_t covered = 0;
    for (uint32_t i = 0; i < f.count; i++) {
        check_tensor(&f.tensors[i], lo, hi);
        covered += f.tensors[i].nbytes;
        if (st_find(&f, f.tensors[i].name) != &f.tensors[i])
            fuzz_fail("tensor \"%s\" is not the one st_find finds", f.tensors[i].name);
    }
    if (covered != (size_t)(hi - lo))
        fuzz_fail("the tensors cover %zu of %zu data bytes", covered, (size_t)(hi - lo));
    st_close(&f);
    free(bytes);
    return 0;
}
