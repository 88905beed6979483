/* NumPy .npy files (see npy.h): the parts shared with npy_read.c, and writing
 * (the same bytes as numpy.save, through a temporary renamed into place). */
#include "npy_internal.h"

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int npy_fail(char *error, size_t error_size, const char *path, const char *fmt, ...)
{
    if (error && error_size) {
        int n = snprintf(error, error_size, "%s: ", path ? path : "(null)");
        if (n >= 0 && (size_t)n < error_size) {
            va_list ap;
            va_start(ap, fmt);
            vsnprintf(error + n, error_size - (size_t)n, fmt, ap);
            va_end(ap);
        }
    }
    return -1;
}

size_t npy_dtype_size(npy_dtype dtype)
{
    switch (dtype) {
    case NPY_F32:
        return 4;
    case NPY_F16:
        return 2;
    case NPY_U8:
    case NPY_BOOL:
        return 1;
    }
    return 0;
}

const char *npy_dtype_name(npy_dtype dtype)
{
    switch (dtype) {
    case NPY_F32:
        return "float32";
    case NPY_F16:
        return "float16";
    case NPY_U8:
        return "uint8";
    case NPY_BOOL:
        return "bool";
    }
    return NULL;
}

const char *npy_dtype_descr(npy_dtype dtype)
{
    switch (dtype) {
    case NPY_F32:
        return "<f4";
    case NPY_F16:
        return "<f2";
    case NPY_U8:
        return "|u1";
    case NPY_BOOL:
        return "|b1";
    }
    return NULL;
}

void npy_shape_text(uint32_t rank, const int64_t *shape, char *buf, size_t size)
{
    size_t n = 0;
    buf[0] = '\0';
    n += (size_t)snprintf(buf + n, size - n, "(");
    for (uint32_t i = 0; i < rank && n < size; i++)
        n += (size_t)snprintf(buf + n, size - n, "%s%lld", i ? ", " : "", (long long)shape[i]);
    if (n < size)
        snprintf(buf + n, size - n, rank == 1 ? ",)" : ")");
}

bool npy_array_bytes(uint32_t rank, const int64_t *shape, size_t esize, size_t *bytes)
{
    size_t n = esize;
    for (uint32_t i = 0; i < rank; i++) {
        uint64_t d = (uint64_t)shape[i];
        if (d != 0 && n > SIZE_MAX / d)
            return false;
        n *= (size_t)d;
    }
    *bytes = n;
    return true;
}

/* ----------------------------------------------------------------- write */

/* The whole preamble numpy.save writes: magic, version 1.0, length, dict,
 * growth room, space padding to 64 bytes, newline. Returns its length, or 0
 * when it does not fit `size`. */
static size_t build_header(npy_dtype dtype, uint32_t rank, const int64_t *shape, char *buf,
                           size_t size)
{
    char shape_buf[256], dict[512];
    npy_shape_text(rank, shape, shape_buf, sizeof shape_buf);
    int n = snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': %s, }",
                     npy_dtype_descr(dtype), shape_buf);
    if (n < 0 || (size_t)n >= sizeof dict)
        return 0;
    size_t len = (size_t)n;
    if (rank > 0) {
        char first[24];
        size_t digits = (size_t)snprintf(first, sizeof first, "%lld", (long long)shape[0]);
        size_t growth = digits < NPY_GROWTH_DIGITS ? NPY_GROWTH_DIGITS - digits : 0;
        if (len + growth >= sizeof dict)
            return 0;
        memset(dict + len, ' ', growth);
        len += growth;
    }
    size_t hlen = len + 1; /* + '\n' */
    /* magic, 2 version bytes, 2 length bytes; numpy pads a full 64 if aligned */
    size_t pad = NPY_ALIGN - (NPY_MAGIC_LEN + 4 + hlen) % NPY_ALIGN;
    size_t total = NPY_MAGIC_LEN + 4 + hlen + pad;
    if (total > size || hlen + pad > 0xffff)
        return 0;
    memcpy(buf, NPY_MAGIC, NPY_MAGIC_LEN);
    buf[6] = 1;
    buf[7] = 0;
    buf[8] = (char)((hlen + pad) & 0xff);
    buf[9] = (char)((hlen + pad) >> 8);
    memcpy(buf + 10, dict, len);
    memset(buf + 10 + len, ' ', pad);
    buf[total - 1] = '\n';
    return total;
}

static bool write_data(FILE *f, npy_dtype dtype, const void *data, size_t nbytes)
{
    if (dtype != NPY_BOOL)
        return fwrite(data, 1, nbytes, f) == nbytes;
    /* numpy bools are exactly 0 or 1. */
    const uint8_t *src = data;
    uint8_t chunk[4096];
    for (size_t done = 0; done < nbytes;) {
        size_t n = nbytes - done < sizeof chunk ? nbytes - done : sizeof chunk;
        for (size_t i = 0; i < n; i++)
            chunk[i] = src[done + i] != 0;
        if (fwrite(chunk, 1, n, f) != n)
            return false;
        done += n;
    }
    return true;
}

int npy_write(const char *path, npy_dtype dtype, uint32_t rank, const int64_t *shape,
              const void *data, char *error, size_t error_size)
{
    if (!path)
        return npy_fail(error, error_size, path, "no path given");
    if (!npy_dtype_descr(dtype))
        return npy_fail(error, error_size, path, "dtype %d is not an npy_dtype", (int)dtype);
    if (rank > NPY_MAX_RANK)
        return npy_fail(error, error_size, path, "rank %u is over the limit of %d", rank,
                        NPY_MAX_RANK);
    if (rank > 0 && !shape)
        return npy_fail(error, error_size, path, "no shape given for rank %u", rank);
    for (uint32_t i = 0; i < rank; i++)
        if (shape[i] < 0)
            return npy_fail(error, error_size, path, "shape[%u] is %lld: dimensions must be >= 0",
                            i, (long long)shape[i]);
    size_t nbytes;
    if (!npy_array_bytes(rank, shape, npy_dtype_size(dtype), &nbytes))
        return npy_fail(error, error_size, path, "the array's size overflows");
    if (nbytes && !data)
        return npy_fail(error, error_size, path, "no data given for %zu bytes", nbytes);
    char header[1024];
    size_t header_size = build_header(dtype, rank, shape, header, sizeof header);
    if (!header_size)
        return npy_fail(error, error_size, path, "header does not fit format 1.0");

    size_t plen = strlen(path);
    char *tmp = malloc(plen + 5);
    if (!tmp)
        return npy_fail(error, error_size, path, "out of memory");
    memcpy(tmp, path, plen);
    memcpy(tmp + plen, ".tmp", 5);
    FILE *f = fopen(tmp, "wb");
    if (!f) {
        int e = errno;
        free(tmp);
        return npy_fail(error, error_size, path, "cannot create %s.tmp: %s", path, strerror(e));
    }
    bool ok = fwrite(header, 1, header_size, f) == header_size &&
              write_data(f, dtype, data, nbytes) && fflush(f) == 0 && !ferror(f);
    int e = errno;
    if (fclose(f) != 0 && ok) {
        ok = false;
        e = errno;
    }
    if (!ok) {
        remove(tmp);
        free(tmp);
        return npy_fail(error, error_size, path, "write failed: %s", strerror(e));
    }
    if (rename(tmp, path) != 0) {
        e = errno;
        remove(tmp);
        free(tmp);
        return npy_fail(error, error_size, path, "cannot rename %s.tmp into place: %s", path,
                        strerror(e));
    }
    free(tmp);
    return 0;
}
