/* Tuning data: which kernel configuration won, per (device, op, shape class).
 *
 * Ops choose a configuration by their own heuristic unless the context's
 * table has an entry for the op and the call's shape class; the tuners
 * (vkattn_<op>_tune) fill entries by
 * timing the op's candidates on the device. The table is saved to and loaded from a file or
 * bytes (desc.tuning_path / tuning_data) together with the device's
 * identity, so data from another device or driver is ignored.
 *
 * An op owns the meaning of its key values (its shape class) and of the
 * config words; the table only stores and compares them. */
#ifndef VKA_TUNING_H
#define VKA_TUNING_H

#include "core/context.h"

/* Ops with tunable kernels. Values are stored in files: never renumber. */
enum {
    VKA_TUNE_LINEAR = 1,
    VKA_TUNE_ATTENTION = 2,
    VKA_TUNE_KV_ATTENTION = 3,
};

#define VKA_TUNING_KEY_VALUES 7
#define VKA_TUNING_CONFIG_WORDS 4
/* The last config word holds the version of the op's encoding, which the
 * table writes and checks: an op raises its version when the meaning of its
 * words changes (a preset added, removed or reordered), and entries of
 * another version - files written before - are then simply not found. */
#define VKA_TUNING_VERSION_WORD (VKA_TUNING_CONFIG_WORDS - 1)

typedef struct vka_tuning_key {
    uint32_t op;
    uint32_t values[VKA_TUNING_KEY_VALUES]; /* the op's shape class; unused: 0 */
} vka_tuning_key;

typedef struct vka_tuning_config {
    uint32_t words[VKA_TUNING_CONFIG_WORDS]; /* the op's encoding, then its version */
} vka_tuning_config;

typedef struct vka_tuning_entry {
    vka_tuning_key key;
    vka_tuning_config config;
    float ms; /* the winner's median time, for the record */
} vka_tuning_entry;

/* A new, empty table for the context (vka_tuning_init without data). */
vkattn_result vka_tuning_create(vkattn_context *ctx);
/* A new table with desc->tuning_path / tuning_data (if any) loaded. */
vkattn_result vka_tuning_init(vkattn_context *ctx, const vkattn_context_desc *desc);
void vka_tuning_destroy(vkattn_context *ctx);

/* The stored configuration for `key` if there is one of encoding `version`. */
bool vka_tuning_find(const vkattn_context *ctx, const vka_tuning_key *key, uint32_t version,
                     vka_tuning_config *config);
/* Stores (or replaces) the winner for `key`, its words in encoding
 * `version` (written into the version word), with its time for the record. */
vkattn_result vka_tuning_set(vkattn_context *ctx, const vka_tuning_key *key, uint32_t version,
                             const vka_tuning_config *config, float ms);
/* Stores an entry as it is, version word included (the loader keeps entries
 * of any version, so saving never drops them). */
vkattn_result vka_tuning_store(vkattn_context *ctx, const vka_tuning_key *key,
                               const vka_tuning_config *config, float ms);
/* vka_tuning_store for a key not stored yet; VKATTN_ERROR_BAD_FORMAT
 * (nothing recorded) for a repeat, so a file's first line for a key wins. */
vkattn_result vka_tuning_store_new(vkattn_context *ctx, const vka_tuning_key *key,
                                   const vka_tuning_config *config, float ms);
/* The entries, in the order they were first stored. */
const vka_tuning_entry *vka_tuning_entries(const vkattn_context *ctx, uint32_t *count);

/* ---- the text format (tuning_text.c) */

/* Bytes a device line takes, terminator included. */
#define VKA_TUNING_DEVICE_LINE 160
/* "device <vendor> <device> <driver> <uuid hex>": whose entries follow. */
void vka_tuning_device_line(uint32_t vendor, uint32_t device, uint32_t driver,
                            const uint8_t uuid[VK_UUID_SIZE], char *line, size_t size);
/* Where parsed entries go (vka_tuning_store_new for the context's table);
 * VKATTN_ERROR_BAD_FORMAT refuses a repeated key: the parser warns and goes
 * on. */
typedef vkattn_result (*vka_tuning_store_fn)(vkattn_context *ctx, const vka_tuning_key *key,
                                             const vka_tuning_config *config, float ms);
/* Hands the entries of tuning text under `device_line` to `store`; text that
 * is not tuning data, other devices' entries and malformed lines are skipped
 * (logged with `origin`). Fails only when `store` does. */
vkattn_result vka_tuning_parse(vkattn_context *ctx, const char *text, size_t size,
                               const char *device_line, const char *origin,
                               vka_tuning_store_fn store);
/* `count` entries as text under `device_line` into `out` (NULL: only the
 * size); returns the length without the terminator. */
size_t vka_tuning_serialize(const vka_tuning_entry *entries, uint32_t count,
                            const char *device_line, char *out, size_t size);

/* Buckets sizes into a few shape classes: the index of the first bound
 * `n` does not exceed (bounds ascending), or `count` when it exceeds all. */
static inline uint32_t vka_tuning_bucket(uint64_t n, const uint32_t *bounds, uint32_t count)
{
    for (uint32_t i = 0; i < count; i++)
        if (n <= bounds[i])
            return i;
    return count;
}

#endif
