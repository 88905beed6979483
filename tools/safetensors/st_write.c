/* .safetensors writing (see safetensors.h): the header built with cJSON,
 * padded with spaces to a multiple of 8 bytes as safetensors' own writer
 * pads it, the tensors' bytes back to back in the order given; the file
 * written whole or not at all (npy_write_file). */
#include "npy/npy.h"
#include "st_internal.h"

#include <cJSON.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The tensor's name, dtype, shape and size, checked against each other and
 * the tensors before it. 0, or -1 after st_fail. */
static int check_tensor(const st_tensor *t, uint32_t index, const st_tensor *all, const char *path,
                        char *error, size_t error_size)
{
    if (!t->name || !*t->name || strcmp(t->name, "__metadata__") == 0)
        return st_fail(error, error_size, path, "tensor %u: name \"%s\" %s", index,
                       t->name ? t->name : "(null)",
                       t->name && *t->name ? "is reserved for the metadata" : "is empty");
    for (uint32_t k = 0; k < index; k++)
        if (strcmp(all[k].name, t->name) == 0)
            return st_fail(error, error_size, path, "tensor \"%s\": given twice (%u and %u)",
                           t->name, k, index);
    size_t size = st_dtype_size(t->dtype);
    if (!size)
        return st_fail(error, error_size, path, "tensor \"%s\": dtype %d is not an st_dtype",
                       t->name, (int)t->dtype);
    if (t->rank > ST_MAX_RANK)
        return st_fail(error, error_size, path, "tensor \"%s\": rank %u is over %d", t->name,
                       t->rank, ST_MAX_RANK);
    uint64_t numel = 1;
    for (uint32_t d = 0; d < t->rank; d++) {
        if (t->shape[d] < 0 || (t->shape[d] && numel > UINT64_MAX / (uint64_t)t->shape[d]))
            return st_fail(error, error_size, path, "tensor \"%s\": shape[%u] %lld is %s", t->name,
                           d, (long long)t->shape[d], t->shape[d] < 0 ? "negative" : "too large");
        numel *= (uint64_t)t->shape[d];
    }
    if (numel > UINT64_MAX / size || numel * size != t->nbytes)
        return st_fail(error, error_size, path,
                       "tensor \"%s\": %zu bytes given, its dtype %s and shape hold %llu", t->name,
                       t->nbytes, st_dtype_name(t->dtype), (unsigned long long)(numel * size));
    if (t->nbytes && !t->data)
        return st_fail(error, error_size, path, "tensor \"%s\": no data for %zu bytes", t->name,
                       t->nbytes);
    return 0;
}

/* One tensor's header entry. false when out of memory. */
static bool add_entry(cJSON *root, const st_tensor *t, uint64_t begin)
{
    cJSON *entry = cJSON_AddObjectToObject(root, t->name);
    cJSON *shape = entry ? cJSON_AddArrayToObject(entry, "shape") : NULL;
    cJSON *offsets = shape ? cJSON_AddArrayToObject(entry, "data_offsets") : NULL;
    if (!offsets || !cJSON_AddStringToObject(entry, "dtype", st_dtype_name(t->dtype)))
        return false;
    for (uint32_t d = 0; d < t->rank; d++)
        if (!cJSON_AddItemToArray(shape, cJSON_CreateNumber((double)t->shape[d])))
            return false;
    return cJSON_AddItemToArray(offsets, cJSON_CreateNumber((double)begin)) &&
           cJSON_AddItemToArray(offsets, cJSON_CreateNumber((double)(begin + t->nbytes)));
}

/* The header's JSON (malloc'd by cJSON), or NULL when out of memory. */
static char *header_json(const st_tensor *tensors, uint32_t count, const char *const *metadata,
                         uint32_t n_metadata)
{
    cJSON *root = cJSON_CreateObject();
    bool ok = root != NULL;
    if (ok && n_metadata) {
        cJSON *meta = cJSON_AddObjectToObject(root, "__metadata__");
        ok = meta != NULL;
        for (uint32_t k = 0; ok && k < n_metadata; k++)
            ok = cJSON_AddStringToObject(meta, metadata[2 * k], metadata[2 * k + 1]) != NULL;
    }
    uint64_t begin = 0;
    for (uint32_t k = 0; ok && k < count; k++) {
        ok = add_entry(root, &tensors[k], begin);
        begin += tensors[k].nbytes;
    }
    char *json = ok ? cJSON_PrintUnformatted(root) : NULL;
    cJSON_Delete(root);
    return json;
}

int st_write(const char *path, const st_tensor *tensors, uint32_t count,
             const char *const *metadata, uint32_t n_metadata, char *error, size_t error_size)
{
    if (!path)
        return st_fail(error, error_size, path, "no path given");
    for (uint32_t k = 0; k < count; k++)
        if (check_tensor(&tensors[k], k, tensors, path, error, error_size) != 0)
            return -1;
    for (uint32_t k = 0; k < 2 * n_metadata; k++)
        if (!metadata[k])
            return st_fail(error, error_size, path, "metadata %s %u is NULL",
                           k % 2 ? "value" : "key", k / 2);
    char *json = header_json(tensors, count, metadata, n_metadata);
    size_t len = json ? strlen(json) : 0;
    size_t padded = (len + 7) / 8 * 8;
    npy_chunk *chunks = calloc((size_t)count + 2, sizeof *chunks);
    char *header = json && chunks ? malloc(8 + padded) : NULL;
    if (!header) {
        free(chunks);
        free(json);
        return st_fail(error, error_size, path, "out of memory");
    }
    for (int b = 0; b < 8; b++)
        header[b] = (char)((uint64_t)padded >> (8 * b));
    memcpy(header + 8, json, len);
    memset(header + 8 + len, ' ', padded - len);
    free(json);
    chunks[0] = (npy_chunk){header, 8 + padded};
    for (uint32_t k = 0; k < count; k++)
        chunks[k + 1] = (npy_chunk){tensors[k].data, tensors[k].nbytes};
    char why[512] = "";
    int status = npy_write_file(path, chunks, (size_t)count + 1, why, sizeof why);
    free(header);
    free(chunks);
    if (status != 0 && error && error_size)
        snprintf(error, error_size, "%s", why); /* already "<path>: ..." */
    return status;
}
