/* Writes .safetensors files for the tests (the format: an 8-byte
 * little-endian header length, a JSON header padded with spaces to 8 bytes,
 * then the tensors' bytes back to back, in the order given). */
#ifndef VKATTN_TEST_SAFETENSORS_H
#define VKATTN_TEST_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

typedef struct test_st_tensor {
    const char *name;
    const char *dtype; /* "F32", "F16", "BF16", "I64", ... */
    uint32_t rank;
    int64_t shape[4];
    const void *data;
    size_t nbytes;
} test_st_tensor;

/* Writes `n` tensors to `path`; fails the test on an I/O error. */
void test_write_safetensors(const char *path, const test_st_tensor *t, int n);
/* Writes `size` raw bytes to `path` (corrupt files). */
void test_write_bytes(const char *path, const void *bytes, size_t size);

#endif
