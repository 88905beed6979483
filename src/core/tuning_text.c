/* The tuning data's text format (one record per line, so it can be read
 * and diffed; docs/tuning.md):
 *     vkattn-tuning 1
 *     device <vendorID> <deviceID> <driverVersion> <pipelineCacheUUID hex>
 *     <op> <7 key values> <4 config words> <ms>
 * Entries under a device line other than the context's device are skipped;
 * a malformed line, or one repeating an earlier line's key, is skipped with
 * a warning naming it. Numbers are parsed strictly
 * (decimal, in range), so any text - the parser is fuzzed - either gives
 * entries that serialize back to the same text or is skipped. */
#include "core/tuning_table.h"

#include "core/host.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The first line: VKATTN_TUNING_MAGIC and the format version. */
#define TUNING_HEADER VKATTN_TUNING_MAGIC "1"
/* Longer lines are not records of this format. */
#define LINE_MAX_BYTES 512

void vka_tuning_device_line(uint32_t vendor, uint32_t device, uint32_t driver,
                            const uint8_t uuid[VK_UUID_SIZE], char *line, size_t size)
{
    int n = snprintf(line, size, "device %u %u %u ", vendor, device, driver);
    for (unsigned i = 0; i < VK_UUID_SIZE && n > 0 && (size_t)n + 2 < size; i++)
        n += snprintf(line + n, size - (size_t)n, "%02x", uuid[i]);
}

/* One unsigned decimal of at most 32 bits at *s, then a space or the end. */
static bool parse_u32(const char **s, uint32_t *out)
{
    const char *p = *s;
    if (*p < '0' || *p > '9')
        return false;
    uint64_t v = 0;
    for (; *p >= '0' && *p <= '9'; p++) {
        v = v * 10 + (uint64_t)(*p - '0');
        if (v > UINT32_MAX)
            return false;
    }
    if (*p != ' ' && *p != '\0')
        return false;
    *out = (uint32_t)v;
    *s = *p == ' ' ? p + 1 : p;
    return true;
}

/* A record: the 12 numbers and the time, nothing else on the line. */
static bool parse_record(const char *line, vka_tuning_key *key, vka_tuning_config *cfg, float *ms)
{
    uint32_t *fields[1 + VKA_TUNING_KEY_VALUES + VKA_TUNING_CONFIG_WORDS];
    size_t n = 0;
    fields[n++] = &key->op;
    for (int i = 0; i < VKA_TUNING_KEY_VALUES; i++)
        fields[n++] = &key->values[i];
    for (int i = 0; i < VKA_TUNING_CONFIG_WORDS; i++)
        fields[n++] = &cfg->words[i];
    for (size_t i = 0; i < n; i++)
        if (!parse_u32(&line, fields[i]))
            return false;
    if (*line == '\0' || *line == ' ')
        return false;
    char *end = NULL;
    errno = 0;
    *ms = strtof(line, &end);
    return end != line && *end == '\0' && errno == 0 && isfinite(*ms);
}

vkattn_result vka_tuning_parse(vkattn_context *ctx, const char *text, size_t size,
                               const char *device_line, const char *origin,
                               vka_tuning_store_fn store)
{
    char line[LINE_MAX_BYTES];
    size_t at = 0;
    int lineno = 0;
    bool header = false, same_device = false;
    while (at < size) {
        size_t n = 0;
        bool too_long = false;
        while (at < size && text[at] != '\n') {
            if (n + 1 < sizeof line)
                line[n++] = text[at];
            else
                too_long = true;
            at++;
        }
        at++;
        line[n] = '\0';
        lineno++;
        if (!header) {
            if (too_long || strcmp(line, TUNING_HEADER) != 0) {
                vka_log(ctx, VKATTN_LOG_INFO, "tuning data %s is not vkattn tuning data; ignored",
                        origin);
                return VKATTN_SUCCESS;
            }
            header = true;
            continue;
        }
        if (!too_long && strncmp(line, "device ", 7) == 0) {
            same_device = strcmp(line, device_line) == 0;
            if (!same_device)
                vka_log(ctx, VKATTN_LOG_INFO,
                        "tuning data %s line %d is for another device or driver; its entries are "
                        "ignored",
                        origin, lineno);
            continue;
        }
        if (!same_device || !line[0])
            continue;
        vka_tuning_key key;
        vka_tuning_config cfg;
        float ms;
        if (too_long || memchr(line, '\r', n) || !parse_record(line, &key, &cfg, &ms)) {
            vka_log(ctx, VKATTN_LOG_WARNING, "tuning data %s line %d is malformed; ignored", origin,
                    lineno);
            continue;
        }
        vkattn_result r = store(ctx, &key, &cfg, ms);
        if (r == VKATTN_ERROR_BAD_FORMAT) {
            vka_log(ctx, VKATTN_LOG_WARNING,
                    "tuning data %s line %d repeats the key of an earlier line; ignored", origin,
                    lineno);
            continue;
        }
        VKA_TRY(r);
    }
    return VKATTN_SUCCESS;
}

size_t vka_tuning_serialize(const vka_tuning_entry *entries, uint32_t count,
                            const char *device_line, char *out, size_t size)
{
    size_t n = (size_t)snprintf(out, out ? size : 0, TUNING_HEADER "\n%s\n", device_line);
    for (uint32_t i = 0; i < count; i++) {
        const vka_tuning_entry *e = &entries[i];
        const uint32_t *v = e->key.values, *c = e->config.words;
        n += (size_t)snprintf(out ? out + n : NULL, out && n < size ? size - n : 0,
                              "%u %u %u %u %u %u %u %u %u %u %u %u %.4f\n", e->key.op, v[0], v[1],
                              v[2], v[3], v[4], v[5], v[6], c[0], c[1], c[2], c[3], (double)e->ms);
    }
    return n;
}
