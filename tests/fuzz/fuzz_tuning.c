/* The tuning-data parser (src/core/tuning_text.c) and table
 * (tuning_table.c): any text is parsed without a fault; the entries it
 * gives serialize to text that parses back to the same keys and configs and
 * serializes again to the very same bytes. A simple list beside the table
 * (insertion order, the last config and time of a key win) checks the
 * table's hash index. */
#include "fuzz_util.h"

#include "core/host.h"
#include "core/tuning_table.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The device the harness's context stands for; seeds use its line. */
#define FUZZ_VENDOR 0x10005u
#define FUZZ_DEVICE 0u
#define FUZZ_DRIVER 1u
static const uint8_t fuzz_uuid[VK_UUID_SIZE] = {0x6d, 0x65, 0x73, 0x61, 0x2d, 0x6c, 0x76, 0x70,
                                                0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0xff};
static char device_line[VKA_TUNING_DEVICE_LINE];

/* What store_fn saw, kept apart from the table. */
static vka_tuning_entry *model;
static uint32_t model_count, model_capacity;

static void ignore_log(void *user, vkattn_log_level level, const char *message)
{
    (void)user;
    (void)level;
    if (strlen(message) >= VKA_ERROR_MAX)
        fuzz_fail("log message is not terminated");
}

static vkattn_result store(vkattn_context *ctx, const vka_tuning_key *key,
                           const vka_tuning_config *config, float ms)
{
    uint32_t i = 0;
    while (i < model_count && memcmp(&model[i].key, key, sizeof *key) != 0)
        i++;
    if (i == model_count) {
        if (model_count == model_capacity) {
            model_capacity = model_capacity ? 2 * model_capacity : 64;
            model = realloc(model, model_capacity * sizeof *model);
            if (!model)
                fuzz_fail("out of memory");
        }
        model[model_count++].key = *key;
    }
    model[i].config = *config;
    model[i].ms = ms;
    return vka_tuning_store(ctx, key, config, ms);
}

static void context_init(vkattn_context *ctx)
{
    memset(ctx, 0, sizeof *ctx);
    ctx->allocator = vka_default_allocator;
    ctx->log = ignore_log;
    if (vka_tuning_create(ctx) != VKATTN_SUCCESS)
        fuzz_fail("vka_tuning_create failed");
}

/* Parses `text` into a fresh context's table and checks the table against
 * what store_fn saw. */
static const vka_tuning_entry *parse(vkattn_context *ctx, const char *text, size_t size,
                                     uint32_t *count)
{
    context_init(ctx);
    model_count = 0;
    if (vka_tuning_parse(ctx, text, size, device_line, "(fuzz)", store) != VKATTN_SUCCESS)
        fuzz_fail("vka_tuning_parse failed: %s", ctx->last_error);
    const vka_tuning_entry *e = vka_tuning_entries(ctx, count);
    if (*count != model_count)
        fuzz_fail("the table has %u entries, the parser stored %u keys", *count, model_count);
    for (uint32_t i = 0; i < *count; i++) {
        if (memcmp(&e[i].key, &model[i].key, sizeof e[i].key) != 0 ||
            memcmp(&e[i].config, &model[i].config, sizeof e[i].config) != 0 ||
            memcmp(&e[i].ms, &model[i].ms, sizeof e[i].ms) != 0)
            fuzz_fail("table entry %u differs from the stored one", i);
        uint32_t version = e[i].config.words[VKA_TUNING_VERSION_WORD];
        vka_tuning_config found;
        if (!vka_tuning_find(ctx, &e[i].key, version, &found) ||
            memcmp(&found, &e[i].config, sizeof found) != 0)
            fuzz_fail("vka_tuning_find does not find entry %u", i);
        if (vka_tuning_find(ctx, &e[i].key, version + 1, NULL))
            fuzz_fail("vka_tuning_find finds entry %u under another version", i);
    }
    return e;
}

static char *serialize(const vka_tuning_entry *e, uint32_t count, size_t *size)
{
    *size = vka_tuning_serialize(e, count, device_line, NULL, 0);
    char *text = malloc(*size + 1);
    if (!text)
        fuzz_fail("out of memory");
    size_t again = vka_tuning_serialize(e, count, device_line, text, *size + 1);
    if (again != *size || strlen(text) != *size)
        fuzz_fail("serialize: %zu bytes measured, %zu written, strlen %zu", *size, again,
                  strlen(text));
    return text;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    vka_tuning_device_line(FUZZ_VENDOR, FUZZ_DEVICE, FUZZ_DRIVER, fuzz_uuid, device_line,
                           sizeof device_line);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* exactly `size` bytes, no terminator: the parser must not read on */
    vkattn_context a, b;
    uint32_t na = 0, nb = 0;
    const vka_tuning_entry *ea = parse(&a, (const char *)data, size, &na);
    size_t size1 = 0, size2 = 0;
    char *text1 = serialize(ea, na, &size1);
    const vka_tuning_entry *eb = parse(&b, text1, size1, &nb);
    if (nb != na)
        fuzz_fail("%u entries serialized, %u parsed back", na, nb);
    for (uint32_t i = 0; i < na; i++)
        if (memcmp(&ea[i].key, &eb[i].key, sizeof ea[i].key) != 0 ||
            memcmp(&ea[i].config, &eb[i].config, sizeof ea[i].config) != 0)
            fuzz_fail("entry %u changed in the round trip", i);
    char *text2 = serialize(eb, nb, &size2);
    if (size1 != size2 || memcmp(text1, text2, size1) != 0)
        fuzz_fail("serializing twice gave different text:\n%s\n---\n%s", text1, text2);
    free(text1);
    free(text2);
    vka_tuning_destroy(&a);
    vka_tuning_destroy(&b);
    return 0;
}
