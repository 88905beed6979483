/* .safetensors model files for the CLI (not part of libvkattn).
 *
 * The format (huggingface/safetensors): an 8-byte little-endian header
 * length N, N bytes of a JSON object (UTF-8, may end in spaces), then the
 * data. Every key of the object but "__metadata__" names a tensor:
 *   "name": {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]}
 * with offsets relative to the start of the data, C order, little endian.
 * The header is parsed with cJSON (Debian's libcjson). Everything in it is
 * checked before any tensor is handed out: the header length against a cap
 * (ST_MAX_HEADER) and the file; every entry an object with a known dtype, a
 * shape of non-negative integers (rank <= ST_MAX_RANK), offsets with
 * begin <= end whose span is exactly numel * element size (no overflow);
 * no two tensors with one name, no overlap, no hole and no byte after the
 * last tensor (the format's rule); "__metadata__", when present, an object
 * of strings. Every error message starts with the file's path (or "<memory>")
 * and says what is wrong, naming the tensor. */
#ifndef VKATTN_SAFETENSORS_H
#define VKATTN_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#define ST_MAX_RANK 8
/* safetensors' own reader refuses headers over 100 MB; so do we. */
#define ST_MAX_HEADER (100u * 1000u * 1000u)

typedef enum st_dtype {
    ST_F64,
    ST_F32,
    ST_F16,
    ST_BF16,
    ST_I64,
    ST_I32,
    ST_I16,
    ST_I8,
    ST_U8,
    ST_BOOL,
    ST_F8_E4M3,
    ST_F8_E5M2,
    ST_DTYPE_COUNT
} st_dtype;

typedef struct st_tensor {
    const char *name; /* owned by the st_file */
    st_dtype dtype;
    uint32_t rank; /* 0 for a scalar */
    int64_t shape[ST_MAX_RANK];
    const void *data; /* into the file's data; may be unaligned */
    size_t nbytes;
} st_tensor;

typedef struct st_file {
    st_tensor *tensors; /* in the order of the header */
    uint32_t count;
    void *map; /* the mapped file (st_open), or NULL (st_parse) */
    size_t map_size;
} st_file;

/* "F32", "BF16", ...; NULL for values not in st_dtype. */
const char *st_dtype_name(st_dtype dtype);
/* Bytes per element (0 for values not in st_dtype). */
size_t st_dtype_size(st_dtype dtype);

/* Parses a whole file held in memory (`size` bytes at `bytes`, which must
 * outlive `out`: the tensors point into it). `path` only names it in
 * messages (NULL: "<memory>"). Returns 0, or -1 with the reason in `error`
 * (may be NULL) and `out` left empty. Free with st_close. */
int st_parse(const void *bytes, size_t size, const char *path, st_file *out, char *error,
             size_t error_size);
/* Maps `path` read-only and parses it; anything but a regular file is
 * refused. 0, or -1 with the reason in `error` and nothing left mapped. */
int st_open(const char *path, st_file *out, char *error, size_t error_size);
/* Frees the index, unmaps the file and zeroes `f`; NULL and empty are fine. */
void st_close(st_file *f);

/* The tensor named `name`, or NULL. */
const st_tensor *st_find(const st_file *f, const char *name);

/* Converts `count` elements of an F32, F16 or BF16 tensor's data to f32
 * (exact: both 16-bit formats widen without rounding). Returns 0, or -1
 * for another dtype. */
int st_to_f32(const st_tensor *t, float *out, size_t count);

/* Writes the `count` tensors (name, dtype, rank, shape, data, nbytes; names
 * unique, none "__metadata__", nbytes matching dtype and shape) as a
 * .safetensors file that st_open (and safetensors' own readers) read back:
 * data back to back in the order given, the header padded with spaces to a
 * multiple of 8 bytes, with `n_metadata` string pairs (metadata[2k] the key,
 * metadata[2k+1] the value) as "__metadata__" when n_metadata > 0. Written
 * whole or not at all, as npy_write writes (npy.h). 0, or -1 with the
 * reason in `error`, which starts with the path. */
int st_write(const char *path, const st_tensor *tensors, uint32_t count,
             const char *const *metadata, uint32_t n_metadata, char *error, size_t error_size);

#endif
