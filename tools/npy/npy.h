/* NumPy .npy files for the CLI and the tests (not part of libvkattn).
 *
 * Reads format versions 1.0 and 2.0, writes 1.0 (byte-identical headers to
 * numpy.save). C order and little endian only; dtypes '<f4', '<f2' (kept as
 * IEEE half bits), '|u1', '|b1' (read as bytes 0/1), '<i4' and '<i8'. Every error message
 * starts with the file's path and says what is wrong. */
#ifndef VKATTN_NPY_H
#define VKATTN_NPY_H

#include <stddef.h>
#include <stdint.h>

#define NPY_MAX_RANK 8

typedef enum npy_dtype {
    NPY_F32 = 0,  /* '<f4' */
    NPY_F16 = 1,  /* '<f2', uint16_t bits */
    NPY_U8 = 2,   /* '|u1' */
    NPY_BOOL = 3, /* '|b1', one byte 0 or 1 (nonzero bytes read as 1) */
    NPY_I32 = 4,  /* '<i4' (token positions) */
    NPY_I64 = 5,  /* '<i8' (numpy's default integer) */
    NPY_U16 = 6,  /* '<u2' (bf16 bits, as torch's .view(torch.int16) and numpy hold them) */
} npy_dtype;

typedef struct npy_array {
    npy_dtype dtype;
    uint32_t rank; /* 0 for a scalar (one element) */
    int64_t shape[NPY_MAX_RANK];
    void *data;    /* C order; never NULL after a successful read */
    size_t nbytes; /* number of elements * element size */
} npy_array;

/* Bytes per element (0 for values not in npy_dtype). */
size_t npy_dtype_size(npy_dtype dtype);
/* "float32", "float16", "uint8", "bool", "int32", "int64"; NULL for values not in npy_dtype. */
const char *npy_dtype_name(npy_dtype dtype);

/* npy_read's result for a well-formed file of a dtype it does not read
 * ('<f8', '<i2', ...): a caller can then say what it takes instead. */
enum { NPY_ERROR_DTYPE = -2 };
/* Reads `path` into `out` (zeroed first); anything but a regular file (a
 * FIFO would block, a device never end) is refused. Returns 0, or -1 (or
 * NPY_ERROR_DTYPE) with the reason in `error` (may be NULL) and `out` left
 * empty. Free with npy_free. */
int npy_read(const char *path, npy_array *out, char *error, size_t error_size);
/* Frees the data and zeroes `a`; NULL and empty arrays are fine. */
void npy_free(npy_array *a);

/* Writes a C-order array of `rank` (0..NPY_MAX_RANK) dimensions. A regular
 * or new file is written atomically: a fresh, unguessable temporary beside
 * `path` (created with O_EXCL | O_NOFOLLOW) renamed over it, so on failure
 * no partial file is left and an existing `path` is untouched; a link at
 * `path` is replaced, never written through. A character device or FIFO
 * (/dev/null, /dev/stdout) is written as it is; anything else is refused.
 * Bool data is written as 0/1. Returns 0, or -1 with the reason in `error`. */
int npy_write(const char *path, npy_dtype dtype, uint32_t rank, const int64_t *shape,
              const void *data, char *error, size_t error_size);

/* Bytes to write, one piece of a file. */
typedef struct npy_chunk {
    const void *data;
    size_t size;
} npy_chunk;
/* Writes the `count` chunks back to back as one file, the way npy_write
 * writes (atomically for a regular or new file; devices and FIFOs as they
 * are): for other formats the CLI writes (.safetensors). 0, or -1 with the
 * reason in `error`. */
int npy_write_file(const char *path, const npy_chunk *chunks, size_t count, char *error,
                   size_t error_size);

#endif
