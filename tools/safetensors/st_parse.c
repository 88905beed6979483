/* .safetensors header parsing and checking (see safetensors.h). The JSON is
 * cJSON's; what it means is checked here, before a tensor is handed out. */
#include "st_internal.h"

#include <cJSON.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct {
    const char *name;
    size_t size;
} dtypes[ST_DTYPE_COUNT] = {
    [ST_F64] = {"F64", 8},   [ST_F32] = {"F32", 4},         [ST_F16] = {"F16", 2},
    [ST_BF16] = {"BF16", 2}, [ST_I64] = {"I64", 8},         [ST_I32] = {"I32", 4},
    [ST_I16] = {"I16", 2},   [ST_I8] = {"I8", 1},           [ST_U8] = {"U8", 1},
    [ST_BOOL] = {"BOOL", 1}, [ST_F8_E4M3] = {"F8_E4M3", 1}, [ST_F8_E5M2] = {"F8_E5M2", 1},
};

const char *st_dtype_name(st_dtype dtype)
{
    return (unsigned)dtype < ST_DTYPE_COUNT ? dtypes[dtype].name : NULL;
}

size_t st_dtype_size(st_dtype dtype)
{
    return (unsigned)dtype < ST_DTYPE_COUNT ? dtypes[dtype].size : 0;
}

int st_fail(char *error, size_t error_size, const char *path, const char *fmt, ...)
{
    if (!error || !error_size)
        return -1;
    int n = snprintf(error, error_size, "%s: ", path ? path : "<memory>");
    if (n >= 0 && (size_t)n < error_size) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(error + n, error_size - (size_t)n, fmt, ap);
        va_end(ap);
    }
    return -1;
}

/* What st_parse works on: the file's name for messages, where errors go,
 * and the size of the data section. */
typedef struct checker {
    const char *path;
    char *error;
    size_t error_size;
    uint64_t data_size;
} checker;

#define FAIL(c, ...) st_fail((c)->error, (c)->error_size, (c)->path, __VA_ARGS__)

/* JSON numbers are doubles: integers are exact up to 2^53, which bounds
 * every size and offset we accept (8 PiB). */
#define MAX_JSON_INTEGER 9007199254740992.0

/* A non-negative integer JSON number into *v; false otherwise. */
static bool json_uint(const cJSON *item, uint64_t *v)
{
    if (!cJSON_IsNumber(item))
        return false;
    double d = item->valuedouble;
    if (!(d >= 0 && d <= MAX_JSON_INTEGER) || d != (double)(uint64_t)d)
        return false;
    *v = (uint64_t)d;
    return true;
}

static int parse_dtype(const checker *c, const char *name, const cJSON *item, st_dtype *out)
{
    if (!cJSON_IsString(item))
        return FAIL(c, "tensor \"%s\": \"dtype\" is missing or not a string", name);
    for (int k = 0; k < ST_DTYPE_COUNT; k++)
        if (strcmp(item->valuestring, dtypes[k].name) == 0) {
            *out = (st_dtype)k;
            return 0;
        }
    return FAIL(c, "tensor \"%s\": dtype \"%.32s\" is not one the format defines", name,
                item->valuestring);
}

/* The shape, and the tensor's bytes (numel * element size) without
 * overflow. */
static int parse_shape(const checker *c, const char *name, const cJSON *item, st_tensor *t,
                       uint64_t *bytes)
{
    if (!cJSON_IsArray(item))
        return FAIL(c, "tensor \"%s\": \"shape\" is missing or not an array", name);
    int rank = cJSON_GetArraySize(item);
    if (rank > ST_MAX_RANK)
        return FAIL(c, "tensor \"%s\": %d dimensions, more than %d", name, rank, ST_MAX_RANK);
    uint64_t n = dtypes[t->dtype].size;
    int i = 0;
    for (const cJSON *d = item->child; d; d = d->next, i++) {
        uint64_t v;
        if (!json_uint(d, &v))
            return FAIL(c, "tensor \"%s\": shape[%d] is not a non-negative integer", name, i);
        if (v && n > (uint64_t)MAX_JSON_INTEGER / v)
            return FAIL(c, "tensor \"%s\": its size overflows (shape[%d] = %llu)", name, i,
                        (unsigned long long)v);
        n *= v;
        t->shape[i] = (int64_t)v;
    }
    t->rank = (uint32_t)rank;
    *bytes = n;
    return 0;
}

/* One "name": {dtype, shape, data_offsets} entry; *begin and *end are the
 * offsets into the data section. */
static int parse_tensor(const checker *c, const cJSON *entry, st_tensor *t, uint64_t *begin,
                        uint64_t *end)
{
    const char *name = entry->string;
    if (!cJSON_IsObject(entry))
        return FAIL(c, "tensor \"%s\": not an object", name);
    uint64_t bytes = 0;
    if (parse_dtype(c, name, cJSON_GetObjectItemCaseSensitive(entry, "dtype"), &t->dtype) != 0 ||
        parse_shape(c, name, cJSON_GetObjectItemCaseSensitive(entry, "shape"), t, &bytes) != 0)
        return -1;
    const cJSON *offs = cJSON_GetObjectItemCaseSensitive(entry, "data_offsets");
    if (!cJSON_IsArray(offs) || cJSON_GetArraySize(offs) != 2 || !json_uint(offs->child, begin) ||
        !json_uint(offs->child->next, end))
        return FAIL(c,
                    "tensor \"%s\": \"data_offsets\" is not [begin, end] of two non-negative "
                    "integers",
                    name);
    if (*begin > *end || *end > c->data_size)
        return FAIL(c,
                    "tensor \"%s\": data_offsets [%llu, %llu] are not inside the data section "
                    "(%llu bytes)",
                    name, (unsigned long long)*begin, (unsigned long long)*end,
                    (unsigned long long)c->data_size);
    if (*end - *begin != bytes)
        return FAIL(c,
                    "tensor \"%s\": data_offsets span %llu bytes but its dtype and shape need "
                    "%llu",
                    name, (unsigned long long)(*end - *begin), (unsigned long long)bytes);
    for (const cJSON *k = entry->child; k; k = k->next)
        if (strcmp(k->string, "dtype") && strcmp(k->string, "shape") &&
            strcmp(k->string, "data_offsets"))
            return FAIL(c, "tensor \"%s\": unknown field \"%.64s\"", name, k->string);
    return 0;
}

static int check_metadata(const checker *c, const cJSON *meta)
{
    if (!cJSON_IsObject(meta))
        return FAIL(c, "\"__metadata__\" is not an object");
    for (const cJSON *m = meta->child; m; m = m->next)
        if (!cJSON_IsString(m))
            return FAIL(c, "\"__metadata__\" entry \"%.64s\" is not a string", m->string);
    return 0;
}

/* A tensor's place in the data section, for the overlap and hole check. */
typedef struct span {
    uint64_t begin, end;
    uint32_t index;
} span;

static int by_offsets(const void *a, const void *b)
{
    const span *x = a, *y = b;
    if (x->begin != y->begin)
        return x->begin < y->begin ? -1 : 1;
    return x->end < y->end ? -1 : x->end > y->end;
}

static int by_name(const void *a, const void *b)
{
    const st_tensor *const *x = a, *const *y = b;
    return strcmp((*x)->name, (*y)->name);
}

/* The tensors tile the data section exactly, and no name repeats. */
static int check_layout(const checker *c, st_tensor *t, span *spans, uint32_t n)
{
    qsort(spans, n, sizeof *spans, by_offsets);
    uint64_t at = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (spans[i].begin < at)
            return FAIL(c, "tensor \"%s\" overlaps tensor \"%s\"", t[spans[i].index].name,
                        t[spans[i - 1].index].name);
        if (spans[i].begin > at)
            return FAIL(c, "bytes %llu to %llu of the data belong to no tensor (before \"%s\")",
                        (unsigned long long)at, (unsigned long long)spans[i].begin,
                        t[spans[i].index].name);
        at = spans[i].end;
    }
    if (at != c->data_size)
        return FAIL(c, "%llu bytes after the last tensor belong to no tensor",
                    (unsigned long long)(c->data_size - at));
    const st_tensor **names = malloc((n ? n : 1) * sizeof *names);
    if (!names)
        return FAIL(c, "out of memory");
    for (uint32_t i = 0; i < n; i++)
        names[i] = &t[i];
    qsort(names, n, sizeof *names, by_name);
    int status = 0;
    for (uint32_t i = 1; i < n && status == 0; i++)
        if (strcmp(names[i]->name, names[i - 1]->name) == 0)
            status = FAIL(c, "tensor \"%s\" is named twice", names[i]->name);
    free(names);
    return status;
}

/* Every entry of the header object into f->tensors (names copied). */
static int parse_entries(const checker *c, const cJSON *root, const uint8_t *data, st_file *f)
{
    uint32_t n = 0;
    for (const cJSON *e = root->child; e; e = e->next)
        n += strcmp(e->string, "__metadata__") != 0;
    f->tensors = calloc(n ? n : 1, sizeof *f->tensors);
    span *spans = calloc(n ? n : 1, sizeof *spans);
    if (!f->tensors || !spans) {
        free(spans);
        return FAIL(c, "out of memory for %u tensors", n);
    }
    int status = 0;
    for (const cJSON *e = root->child; e && status == 0; e = e->next) {
        if (strcmp(e->string, "__metadata__") == 0) {
            status = check_metadata(c, e);
            continue;
        }
        uint32_t i = f->count;
        st_tensor *t = &f->tensors[i];
        if (!(t->name = strdup(e->string))) {
            status = FAIL(c, "out of memory");
            break;
        }
        f->count++;
        span *s = &spans[i];
        if ((status = parse_tensor(c, e, t, &s->begin, &s->end)) == 0) {
            s->index = i;
            t->data = data + s->begin;
            t->nbytes = (size_t)(s->end - s->begin);
        }
    }
    if (status == 0)
        status = check_layout(c, f->tensors, spans, n);
    free(spans);
    return status;
}

int st_parse(const void *bytes, size_t size, const char *path, st_file *out, char *error,
             size_t error_size)
{
    *out = (st_file){0};
    checker c = {path, error, error_size, 0};
    const uint8_t *b = bytes;
    if (size < 8)
        return FAIL(&c, "%zu bytes: too short for the 8-byte header length", size);
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--)
        n = n << 8 | b[i];
    if (n > ST_MAX_HEADER)
        return FAIL(&c, "header length %llu is over the limit of %u bytes", (unsigned long long)n,
                    ST_MAX_HEADER);
    if (n > size - 8)
        return FAIL(&c, "header length %llu runs past the end of the file (%zu bytes)",
                    (unsigned long long)n, size);
    c.data_size = size - 8 - n;
    const char *json = (const char *)b + 8;
    if (n < 2 || json[0] != '{')
        return FAIL(&c, "the header is not a JSON object (it must start with '{')");
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(json, (size_t)n, &end, false);
    if (!root || !cJSON_IsObject(root)) {
        long at = end ? (long)(end - json) : -1;
        cJSON_Delete(root);
        return FAIL(&c, "the header is not valid JSON (near byte %ld of %llu)", at,
                    (unsigned long long)n);
    }
    for (const char *p = end; p < json + n; p++)
        if (*p != ' ' && *p != '\t' && *p != '\n' && *p != '\r') {
            cJSON_Delete(root);
            return FAIL(&c, "the header has something other than spaces after its JSON object");
        }
    int status = parse_entries(&c, root, b + 8 + n, out);
    cJSON_Delete(root);
    if (status != 0)
        st_free_index(out);
    return status;
}

void st_free_index(st_file *f)
{
    for (uint32_t i = 0; f->tensors && i < f->count; i++)
        free((char *)f->tensors[i].name);
    free(f->tensors);
    f->tensors = NULL;
    f->count = 0;
}

const st_tensor *st_find(const st_file *f, const char *name)
{
    for (uint32_t i = 0; f && i < f->count; i++)
        if (strcmp(f->tensors[i].name, name) == 0)
            return &f->tensors[i];
    return NULL;
}
