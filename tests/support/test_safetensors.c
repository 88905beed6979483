#include "test_safetensors.h"
#include "test_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void test_write_bytes(const char *path, const void *bytes, size_t size)
{
    FILE *f = fopen(path, "wb");
    if (!f || (size && fwrite(bytes, 1, size, f) != size) || fclose(f) != 0)
        fail_msg("cannot write %s", path);
}

void test_write_safetensors(const char *path, const test_st_tensor *t, int n)
{
    size_t cap = 256 + (size_t)n * 256, len = 0, offset = 0, data_size = 0;
    char *json = malloc(cap);
    assert_non_null(json);
    len += (size_t)snprintf(json + len, cap - len, "{\"__metadata__\":{\"format\":\"pt\"}");
    for (int i = 0; i < n; i++) {
        len += (size_t)snprintf(json + len, cap - len, ",\"%s\":{\"dtype\":\"%s\",\"shape\":[",
                                t[i].name, t[i].dtype);
        for (uint32_t d = 0; d < t[i].rank; d++)
            len += (size_t)snprintf(json + len, cap - len, d ? ",%lld" : "%lld",
                                    (long long)t[i].shape[d]);
        len += (size_t)snprintf(json + len, cap - len, "],\"data_offsets\":[%zu,%zu]}", offset,
                                offset + t[i].nbytes);
        offset += t[i].nbytes;
    }
    data_size = offset;
    len += (size_t)snprintf(json + len, cap - len, "}");
    assert_true(len + 8 < cap);
    while (len % 8)
        json[len++] = ' ';
    size_t total = 8 + len + data_size;
    unsigned char *file = malloc(total);
    assert_non_null(file);
    for (int b = 0; b < 8; b++)
        file[b] = (unsigned char)((uint64_t)len >> (8 * b));
    memcpy(file + 8, json, len);
    offset = 8 + len;
    for (int i = 0; i < n; i++) {
        memcpy(file + offset, t[i].data, t[i].nbytes);
        offset += t[i].nbytes;
    }
    test_write_bytes(path, file, total);
    free(file);
    free(json);
}
