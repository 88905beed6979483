/* The tuning table: storage, lookup and the text file format.
 *
 * File format (text, one record per line, so it can be read and diffed):
 *     vkattn-tuning 1
 *     device <vendorID> <deviceID> <driverVersion> <pipelineCacheUUID hex>
 *     <op> <7 key values> <4 config words> <ms>
 * A file whose device line differs from the context's device is ignored. */
#include "core/tuning_table.h"

#include "core/file_io.h"
#include "core/host.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The first line: VKATTN_TUNING_MAGIC and the format version. */
#define TUNING_HEADER VKATTN_TUNING_MAGIC "1"

/* Tuning files hold a line per (op, shape class): kilobytes. */
#define TUNING_MAX_BYTES ((size_t)16 << 20)

typedef struct tuning_entry {
    vka_tuning_key key;
    vka_tuning_config config;
    float ms;
} tuning_entry;

struct vka_tuning_table {
    tuning_entry *entries;
    uint32_t count, capacity;
};

static void device_line(const vkattn_context *ctx, char *line, size_t size)
{
    VkPhysicalDeviceProperties p;
    ctx->vk.vkGetPhysicalDeviceProperties(ctx->physical_device, &p);
    int n = snprintf(line, size, "device %u %u %u ", p.vendorID, p.deviceID, p.driverVersion);
    for (unsigned i = 0; i < VK_UUID_SIZE && n > 0 && (size_t)n + 2 < size; i++)
        n += snprintf(line + n, size - (size_t)n, "%02x", p.pipelineCacheUUID[i]);
}

static tuning_entry *lookup(const vkattn_context *ctx, const vka_tuning_key *key)
{
    struct vka_tuning_table *t = ctx->tuning;
    for (uint32_t i = 0; t && i < t->count; i++)
        if (memcmp(&t->entries[i].key, key, sizeof *key) == 0)
            return &t->entries[i];
    return NULL;
}

bool vka_tuning_find(const vkattn_context *ctx, const vka_tuning_key *key, uint32_t version,
                        vka_tuning_config *config)
{
    const tuning_entry *e = lookup(ctx, key);
    if (!e || e->config.words[VKA_TUNING_VERSION_WORD] != version)
        return false;
    if (config)
        *config = e->config;
    return true;
}

/* Stores an entry as it is (the loader keeps entries of any version). */
static vkattn_result store(vkattn_context *ctx, const vka_tuning_key *key,
                           const vka_tuning_config *config, float ms)
{
    struct vka_tuning_table *t = ctx->tuning;
    tuning_entry *e = lookup(ctx, key);
    if (!e) {
        if (t->count == t->capacity) {
            uint32_t cap = t->capacity ? 2 * t->capacity : 32;
            tuning_entry *bigger = vka_alloc(ctx, cap * sizeof *bigger);
            if (!bigger)
                return vka_fail(ctx, VKATTN_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
            if (t->count)
                memcpy(bigger, t->entries, t->count * sizeof *bigger);
            vka_free(ctx, t->entries);
            t->entries = bigger;
            t->capacity = cap;
        }
        e = &t->entries[t->count++];
        e->key = *key;
    }
    e->config = *config;
    e->ms = ms;
    return VKATTN_SUCCESS;
}

vkattn_result vka_tuning_set(vkattn_context *ctx, const vka_tuning_key *key, uint32_t version,
                                const vka_tuning_config *config, float ms)
{
    vka_tuning_config c = *config;
    c.words[VKA_TUNING_VERSION_WORD] = version;
    return store(ctx, key, &c, ms);
}

/* Parses tuning text; entries of another device are skipped as a whole. */
static vkattn_result parse(vkattn_context *ctx, const char *text, size_t size, const char *origin)
{
    char want[160], line[512];
    device_line(ctx, want, sizeof want);
    size_t at = 0;
    int lineno = 0;
    bool header = false, same_device = false;
    while (at < size) {
        size_t n = 0;
        while (at < size && text[at] != '\n' && n + 1 < sizeof line)
            line[n++] = text[at++];
        while (at < size && text[at] != '\n')
            at++;
        at++;
        line[n] = '\0';
        lineno++;
        if (!header) {
            if (strcmp(line, TUNING_HEADER) != 0) {
                vka_log(ctx, VKATTN_LOG_INFO, "tuning data %s is not vkattn tuning data; ignored", origin);
                return VKATTN_SUCCESS;
            }
            header = true;
            continue;
        }
        if (strncmp(line, "device ", 7) == 0) {
            same_device = strcmp(line, want) == 0;
            if (!same_device)
                vka_log(ctx, VKATTN_LOG_INFO, "tuning data %s line %d is for another device or driver; "
                           "its entries are ignored", origin, lineno);
            continue;
        }
        if (!same_device || !line[0])
            continue;
        vka_tuning_key key;
        vka_tuning_config cfg;
        float ms;
        uint32_t *v = key.values, *c = cfg.words;
        if (sscanf(line, "%u %u %u %u %u %u %u %u %u %u %u %u %f", &key.op, &v[0], &v[1], &v[2], &v[3],
                   &v[4], &v[5], &v[6], &c[0], &c[1], &c[2], &c[3], &ms) != 13) {
            vka_log(ctx, VKATTN_LOG_WARNING, "tuning data %s line %d is malformed; ignored", origin, lineno);
            continue;
        }
        vkattn_result r = store(ctx, &key, &cfg, ms);
        if (r != VKATTN_SUCCESS)
            return r;
    }
    return VKATTN_SUCCESS;
}

vkattn_result vka_tuning_init(vkattn_context *ctx, const vkattn_context_desc *desc)
{
    ctx->tuning = vka_alloc(ctx, sizeof *ctx->tuning);
    if (!ctx->tuning)
        return vka_fail(ctx, VKATTN_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
    if (desc->tuning_data)
        return parse(ctx, desc->tuning_data, desc->tuning_size, "(bytes)");
    if (!desc->tuning_path)
        return VKATTN_SUCCESS;
    void *text = NULL;
    size_t n = 0;
    vka_file_read got = vka_read_file(ctx, desc->tuning_path, TUNING_MAX_BYTES, &text, &n);
    if (got == VKA_FILE_MISSING) {
        vka_log(ctx, VKATTN_LOG_INFO, "tuning file \"%s\" not read; starting empty", desc->tuning_path);
        return VKATTN_SUCCESS;
    }
    vkattn_result r = VKATTN_SUCCESS;
    if (text)
        r = parse(ctx, text, n, desc->tuning_path);
    else
        vka_log(ctx, VKATTN_LOG_WARNING, "tuning file \"%s\" could not be read; ignored", desc->tuning_path);
    vka_free(ctx, text);
    return r;
}

void vka_tuning_destroy(vkattn_context *ctx)
{
    if (!ctx->tuning)
        return;
    vka_free(ctx, ctx->tuning->entries);
    vka_free(ctx, ctx->tuning);
    ctx->tuning = NULL;
}

/* The table as text into `out` (NULL: only the size). */
static size_t serialize(const vkattn_context *ctx, char *out, size_t size)
{
    char dev[160];
    device_line(ctx, dev, sizeof dev);
    size_t n = (size_t)snprintf(out, out ? size : 0, TUNING_HEADER "\n%s\n", dev);
    const struct vka_tuning_table *t = ctx->tuning;
    for (uint32_t i = 0; i < t->count; i++) {
        const tuning_entry *e = &t->entries[i];
        const uint32_t *v = e->key.values, *c = e->config.words;
        n += (size_t)snprintf(out ? out + n : NULL, out && n < size ? size - n : 0,
                              "%u %u %u %u %u %u %u %u %u %u %u %u %.4f\n", e->key.op, v[0], v[1], v[2],
                              v[3], v[4], v[5], v[6], c[0], c[1], c[2], c[3], e->ms);
    }
    return n;
}

vkattn_result vkattn_context_tuning_data(vkattn_context *ctx, void *data, size_t *size)
{
    if (!ctx)
        return VKATTN_ERROR_INVALID_ARGUMENT;
    if (!size)
        return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT, "vkattn_context_tuning_data: size is NULL");
    size_t need = serialize(ctx, NULL, 0);
    if (!data) {
        *size = need;
        return VKATTN_SUCCESS;
    }
    if (*size < need)
        return vka_fail(ctx, VKATTN_ERROR_OUT_OF_RANGE,
                           "vkattn_context_tuning_data: *size %zu is less than the %zu bytes needed", *size, need);
    char *text = vka_alloc(ctx, need + 1); /* snprintf writes a terminator */
    if (!text)
        return vka_fail(ctx, VKATTN_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
    serialize(ctx, text, need + 1);
    memcpy(data, text, need);
    vka_free(ctx, text);
    *size = need;
    return VKATTN_SUCCESS;
}

vkattn_result vkattn_context_save_tuning(vkattn_context *ctx, const char *path)
{
    if (!ctx)
        return VKATTN_ERROR_INVALID_ARGUMENT;
    if (!path || !*path)
        return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT, "vkattn_context_save_tuning: path is empty");
    size_t size = serialize(ctx, NULL, 0);
    char *text = vka_alloc(ctx, size + 1);
    if (!text)
        return vka_fail(ctx, VKATTN_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
    serialize(ctx, text, size + 1);
    bool ok = vka_write_file(path, text, size);
    vka_free(ctx, text);
    return ok ? VKATTN_SUCCESS : vka_fail(ctx, VKATTN_ERROR_IO, "cannot write tuning data \"%s\"", path);
}
