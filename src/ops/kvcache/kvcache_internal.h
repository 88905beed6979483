/* KV cache internals shared by the folder's own files: the kernel choice of
 * attention over the cache and its tuning key. */
#ifndef VKA_KVCACHE_INTERNAL_H
#define VKA_KVCACHE_INTERNAL_H

#include "ops/kvcache/kvcache.h"
#include "core/buffer.h"
#include "core/host.h"
#include "core/limits.h"
#include "core/record.h"
#include "core/submit.h"
#include "core/tensor.h"
#include "core/tuning_table.h"
#include "core/windows.h"
#include "spec/dtype.h"
#include "spec/error_text.h"
#include "spec/size_math.h"

/* Chooses what an attention over the cache runs for a checked problem and
 * step: kernel, texel or storage inputs, tiles and split count (a fixed
 * p->kv_splits, else the tuned count of the shape class, else the device's
 * choice). Fails when the split scratch or the grid does not fit the device.
 * (kv_attention_config.c) */
vkattn_result vka_kv_config_choose(vkattn_context *ctx, const vkattn_kv_cache *c,
                                   const vka_kv_step *step, const vka_kv_attention_problem *p,
                                   vka_kv_config *cfg);

/* The tuning key of a decode step's shape class (see kv_attention_config.c). */
void vka_kv_tuning_key(const vkattn_kv_cache *c, vkattn_dtype q_dtype, uint32_t batch,
                       uint32_t new_tokens, uint32_t length, vka_tuning_key *key);
/* Raise when what a stored split count means changes. */
#define VKA_KV_CONFIG_VERSION 1u

#endif
