/* The tuning table: entries in insertion order (the file keeps that order)
 * and an open-addressing hash index over them, so loading n entries and
 * every lookup while recording are O(1) each. The text format:
 * tuning_text.c. */
#include "core/tuning_table.h"

#include "core/file_io.h"
#include "core/host.h"

#include <stdio.h>
#include <string.h>

/* Tuning files hold a line per (op, shape class): kilobytes. */
#define TUNING_MAX_BYTES ((size_t)16 << 20)

struct vka_tuning_table {
    vka_tuning_entry *entries;
    uint32_t count, capacity;
    uint32_t *slots;     /* entry index + 1; 0: empty */
    uint32_t slot_count; /* a power of two, at least twice count */
};

static uint32_t hash_key(const vka_tuning_key *key)
{
    const unsigned char *s = (const unsigned char *)key;
    uint32_t h = 2166136261u; /* FNV-1a */
    for (size_t i = 0; i < sizeof *key; i++)
        h = (h ^ s[i]) * 16777619u;
    return h;
}

/* The slot of `key`: where it is, or the empty slot where it would go. */
static uint32_t find_slot(const vka_tuning_table *t, const vka_tuning_key *key)
{
    uint32_t mask = t->slot_count - 1, i = hash_key(key) & mask;
    while (t->slots[i] && memcmp(&t->entries[t->slots[i] - 1].key, key, sizeof *key) != 0)
        i = (i + 1) & mask;
    return i;
}

static vka_tuning_entry *lookup(const vka_tuning_table *t, const vka_tuning_key *key)
{
    if (!t || !t->slot_count)
        return NULL;
    uint32_t slot = t->slots[find_slot(t, key)];
    return slot ? &t->entries[slot - 1] : NULL;
}

/* Room for one more entry: the array doubles, the index is rebuilt at half
 * load. */
static bool reserve_one(vkattn_context *ctx, vka_tuning_table *t)
{
    if (t->count == t->capacity) {
        uint32_t cap = t->capacity ? 2 * t->capacity : 32;
        vka_tuning_entry *bigger = vka_alloc(ctx, (size_t)cap * sizeof *bigger);
        if (!bigger)
            return false;
        if (t->count)
            memcpy(bigger, t->entries, t->count * sizeof *bigger);
        vka_free(ctx, t->entries);
        t->entries = bigger;
        t->capacity = cap;
    }
    if (2 * (t->count + 1) <= t->slot_count)
        return true;
    uint32_t n = t->slot_count ? 2 * t->slot_count : 64;
    uint32_t *slots = vka_alloc(ctx, (size_t)n * sizeof *slots);
    if (!slots)
        return false;
    vka_free(ctx, t->slots);
    t->slots = slots;
    t->slot_count = n;
    for (uint32_t e = 0; e < t->count; e++)
        t->slots[find_slot(t, &t->entries[e].key)] = e + 1;
    return true;
}

vkattn_result vka_tuning_store(vkattn_context *ctx, const vka_tuning_key *key,
                               const vka_tuning_config *config, float ms)
{
    vka_tuning_table *t = ctx->tuning;
    vka_tuning_entry *e = lookup(t, key);
    if (!e) {
        if (t->count == UINT32_MAX - 1 || !reserve_one(ctx, t))
            return vka_fail(ctx, VKATTN_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
        e = &t->entries[t->count];
        e->key = *key;
        t->slots[find_slot(t, key)] = ++t->count;
    }
    e->config = *config;
    e->ms = ms;
    return VKATTN_SUCCESS;
}

vkattn_result vka_tuning_store_new(vkattn_context *ctx, const vka_tuning_key *key,
                                   const vka_tuning_config *config, float ms)
{
    return lookup(ctx->tuning, key) ? VKATTN_ERROR_BAD_FORMAT
                                    : vka_tuning_store(ctx, key, config, ms);
}

bool vka_tuning_find(const vkattn_context *ctx, const vka_tuning_key *key, uint32_t version,
                     vka_tuning_config *config)
{
    const vka_tuning_entry *e = lookup(ctx->tuning, key);
    if (!e || e->config.words[VKA_TUNING_VERSION_WORD] != version)
        return false;
    if (config)
        *config = e->config;
    return true;
}

vkattn_result vka_tuning_set(vkattn_context *ctx, const vka_tuning_key *key, uint32_t version,
                             const vka_tuning_config *config, float ms)
{
    vka_tuning_config c = *config;
    c.words[VKA_TUNING_VERSION_WORD] = version;
    return vka_tuning_store(ctx, key, &c, ms);
}

const vka_tuning_entry *vka_tuning_entries(const vkattn_context *ctx, uint32_t *count)
{
    *count = ctx->tuning ? ctx->tuning->count : 0;
    return ctx->tuning ? ctx->tuning->entries : NULL;
}

vkattn_result vka_tuning_create(vkattn_context *ctx)
{
    ctx->tuning = vka_alloc(ctx, sizeof *ctx->tuning);
    return ctx->tuning ? VKATTN_SUCCESS
                       : vka_fail(ctx, VKATTN_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
}

void vka_tuning_destroy(vkattn_context *ctx)
{
    if (!ctx->tuning)
        return;
    vka_free(ctx, ctx->tuning->entries);
    vka_free(ctx, ctx->tuning->slots);
    vka_free(ctx, ctx->tuning);
    ctx->tuning = NULL;
}

/* The context's device, as tuning data names it. */
static void device_line(const vkattn_context *ctx, char *line, size_t size)
{
    VkPhysicalDeviceProperties p;
    ctx->vk.vkGetPhysicalDeviceProperties(ctx->physical_device, &p);
    vka_tuning_device_line(p.vendorID, p.deviceID, p.driverVersion, p.pipelineCacheUUID, line,
                           size);
}

vkattn_result vka_tuning_init(vkattn_context *ctx, const vkattn_context_desc *desc)
{
    VKA_TRY(vka_tuning_create(ctx));
    char device[VKA_TUNING_DEVICE_LINE];
    device_line(ctx, device, sizeof device);
    if (desc->tuning_data)
        return vka_tuning_parse(ctx, desc->tuning_data, desc->tuning_size, device, "(bytes)",
                                vka_tuning_store_new);
    if (!desc->tuning_path)
        return VKATTN_SUCCESS;
    void *text = NULL;
    size_t n = 0;
    vka_file_read got = vka_read_file(ctx, desc->tuning_path, TUNING_MAX_BYTES, &text, &n);
    if (got == VKA_FILE_MISSING) {
        vka_log(ctx, VKATTN_LOG_INFO, "tuning file \"%s\" not read; starting empty",
                desc->tuning_path);
        return VKATTN_SUCCESS;
    }
    vkattn_result r = VKATTN_SUCCESS;
    if (text)
        r = vka_tuning_parse(ctx, text, n, device, desc->tuning_path, vka_tuning_store_new);
    else
        vka_log(ctx, VKATTN_LOG_WARNING, "tuning file \"%s\" could not be read; ignored",
                desc->tuning_path);
    vka_free(ctx, text);
    return r;
}

/* The table as text, from vka_alloc (NULL: out of memory, recorded). */
static char *table_text(vkattn_context *ctx, size_t *size)
{
    char device[VKA_TUNING_DEVICE_LINE];
    device_line(ctx, device, sizeof device);
    uint32_t count = 0;
    const vka_tuning_entry *entries = vka_tuning_entries(ctx, &count);
    *size = vka_tuning_serialize(entries, count, device, NULL, 0);
    char *text = vka_alloc(ctx, *size + 1); /* snprintf writes a terminator */
    if (!text) {
        vka_fail(ctx, VKATTN_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
        return NULL;
    }
    vka_tuning_serialize(entries, count, device, text, *size + 1);
    return text;
}

vkattn_result vkattn_context_tuning_data(vkattn_context *ctx, void *data, size_t *size)
{
    if (!ctx)
        return VKATTN_ERROR_INVALID_ARGUMENT;
    if (!size)
        return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT,
                        "vkattn_context_tuning_data: size is NULL");
    size_t need = 0;
    char *text = table_text(ctx, &need);
    if (!text)
        return VKATTN_ERROR_OUT_OF_HOST_MEMORY;
    vkattn_result r = VKATTN_SUCCESS;
    if (data && *size < need)
        r = vka_fail(ctx, VKATTN_ERROR_OUT_OF_RANGE,
                     "vkattn_context_tuning_data: *size %zu is less than the %zu bytes needed",
                     *size, need);
    else if (data)
        memcpy(data, text, need);
    if (r == VKATTN_SUCCESS)
        *size = need;
    vka_free(ctx, text);
    return r;
}

vkattn_result vkattn_context_save_tuning(vkattn_context *ctx, const char *path)
{
    return vka_save_data(ctx, "vkattn_context_save_tuning", path, vkattn_context_tuning_data,
                         "tuning data");
}
