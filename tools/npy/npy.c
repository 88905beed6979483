/* NumPy .npy files (see npy.h): the parts shared by npy_read.c and
 * npy_write.c. */
#include "npy_internal.h"

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Paths longer than this are shown shortened in the middle, so the reason
 * after them always fits the caller's buffer. */
#define NPY_PATH_SHOWN 200

int npy_fail(char *error, size_t error_size, const char *path, const char *fmt, ...)
{
    if (error && error_size) {
        const char *p = path ? path : "(null)";
        size_t len = strlen(p);
        int n = len <= NPY_PATH_SHOWN
                    ? snprintf(error, error_size, "%s: ", p)
                    : snprintf(error, error_size, "%.*s...%s: ", NPY_PATH_SHOWN / 2, p,
                               p + len - NPY_PATH_SHOWN / 2);
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
    case NPY_I64:
        return 8;
    case NPY_F32:
    case NPY_I32:
        return 4;
    case NPY_F16:
    case NPY_U16:
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
    case NPY_I32:
        return "int32";
    case NPY_I64:
        return "int64";
    case NPY_U16:
        return "uint16";
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
    case NPY_I32:
        return "<i4";
    case NPY_I64:
        return "<i8";
    case NPY_U16:
        return "<u2";
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
