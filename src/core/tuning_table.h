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

/* Loads desc->tuning_path / tuning_data (if any) into a new table. */
vkattn_result vka_tuning_init(vkattn_context *ctx, const vkattn_context_desc *desc);
void vka_tuning_destroy(vkattn_context *ctx);

/* The stored configuration for `key` if there is one of encoding `version`. */
bool vka_tuning_find(const vkattn_context *ctx, const vka_tuning_key *key, uint32_t version,
                        vka_tuning_config *config);
/* Stores (or replaces) the winner for `key`, its words in encoding
 * `version` (written into the version word), with its time for the record. */
vkattn_result vka_tuning_set(vkattn_context *ctx, const vka_tuning_key *key, uint32_t version,
                                const vka_tuning_config *config, float ms);

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
