/* Pieces shared by npy.c (common parts, writing) and npy_read.c. */
#ifndef VKATTN_NPY_INTERNAL_H
#define VKATTN_NPY_INTERNAL_H

#include "npy.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define NPY_MAGIC "\x93NUMPY"
#define NPY_MAGIC_LEN 6
/* numpy.save aligns the data to 64 bytes and leaves room for the first
 * dimension to grow to 21 digits (numpy/lib/format.py). */
#define NPY_ALIGN 64
#define NPY_GROWTH_DIGITS 21
/* numpy refuses headers over 10000 bytes by default; allow more, but bound
 * what a hostile file can make us allocate. */
#define NPY_MAX_HEADER (1u << 20)

/* Formats "<path>: <message>" into `error` (may be NULL); returns -1. */
int npy_fail(char *error, size_t error_size, const char *path, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;
/* numpy's descr string of a dtype ("<f4"), NULL for values not in npy_dtype. */
const char *npy_dtype_descr(npy_dtype dtype);
/* Python's repr of the shape tuple: "()", "(5,)", "(2, 3)". */
void npy_shape_text(uint32_t rank, const int64_t *shape, char *buf, size_t size);
/* Bytes of an array; false when the size does not fit size_t. */
bool npy_array_bytes(uint32_t rank, const int64_t *shape, size_t esize, size_t *bytes);

#endif
