/* Attention over a KV cache (internal entry, used by vkattn_cmd_kv_attention
 * and by the MHA layer's steps).
 *
 * Two kernel families (kv_attention_sg.comp: subgroup shuffles, CPU drivers;
 * kv_attention_sm.comp: shared-memory tiles), K/V read through texel buffers
 * or storage buffers, and two paths: few queries (T <= 16) split each
 * sequence's keys across workgroups and merge the partial results in a
 * second pass (kv_attention_combine.comp); more queries (prefill) run one
 * pass, row tiles over the visible keys. */
#ifndef VKA_KV_ATTENTION_H
#define VKA_KV_ATTENTION_H

#include "ops/kvcache/kvcache.h"

/* Queries per batch row up to which the split-KV (decode) path is taken. */
#define VKA_KV_DECODE_MAX_TOKENS 16

/* q [B, Hq, T, Dh] and out [B, Hq, T, Dh] (strides free, last stride 1, rows
 * on 4-element boundaries), checked against the cache (Hq % Hkv == 0, Dh)
 * by vka_kv_attention_check. */
typedef struct vka_kv_attention_problem {
    vkattn_tensor q, out; /* resolved strides */
    uint32_t batch, num_heads, new_tokens;
    float scale;          /* resolved: 1/sqrt(Dh) when 0 was given */
    uint32_t kv_splits;   /* 0: automatic; ignored when new_tokens > 16 */
} vka_kv_attention_problem;

/* Checks q/out against the cache and the device (dtypes f32/f16 and equal,
 * Hq == the cache's num_heads and a multiple of its Hkv, Dh, layout, q/out
 * disjoint, kv_splits x T <= VKATTN_KV_MAX_SPLIT_ROWS on the decode path,
 * pools and tensors within one binding window each); `prefix` names them in
 * messages ("args->"). Records nothing. */
vkattn_result vka_kv_attention_check(vkattn_kv_cache *cache, const vkattn_tensor *q,
                                        const vkattn_tensor *out, float scale, uint32_t kv_splits,
                                        const char *prefix, vka_kv_attention_problem *p);

/* The split count vkattn_tune_kv_attention stored for this shape class, or
 * 0 when there is none (or it does not suit this step): automatic splits
 * then come from the device. (kv_attention_tune.c) */
uint32_t vka_kv_tuned_splits(const vkattn_context *ctx, const vkattn_kv_cache *c,
                                vkattn_dtype q_dtype, uint32_t batch, uint32_t new_tokens,
                                uint32_t length);

/* Push constants of kv_attention_main.glsl and kv_attention_combine.comp. */
typedef struct vka_kv_main_push {
    uint32_t q_off, q_sb, q_sh, q_st;
    uint32_t o_off, o_sb, o_sh, o_st;
    uint32_t batch, tokens, group, kv_heads;
    uint32_t block_size, table_width, splits, split_align;
    uint32_t s_heads;
    float scale_log2;
} vka_kv_main_push;

typedef struct vka_kv_combine_push {
    uint32_t o_off, o_sb, o_sh, o_st;
    uint32_t batch, heads, tokens, s_heads, splits;
} vka_kv_combine_push;

/* Everything recording needs, obtained before anything is recorded. */
typedef struct vka_kv_attention_plan {
    vka_pipeline *main;
    vka_pipeline *combine;     /* NULL with one split */
    vka_binding bindings[6];   /* meta (slot 0) is filled in at record time */
    vka_binding combine_bindings[2];
    vka_kv_main_push push;
    vka_kv_combine_push combine_push;
    uint32_t grid[3], combine_grid[2];
    uint32_t splits;
    bool subgroup, texel;         /* kernel family and K/V binding chosen */
} vka_kv_attention_plan;

/* Chooses splits, kernel and tiles and gets pipelines and bindings for a
 * checked problem and a checked step (vka_kv_step_check: its lengths give
 * the split choice). Records nothing and changes nothing, so a caller can
 * call it before vka_kv_step_record and fail cleanly. */
vkattn_result vka_kv_attention_prepare(vkattn_context *ctx, vkattn_kv_cache *cache,
                                          const vka_kv_step *step,
                                          const vka_kv_attention_problem *p,
                                          vka_kv_attention_plan *plan);

/* Records a prepared attention after the step's metadata (`meta`, from
 * vka_kv_step_record): a barrier ordering earlier compute work on the
 * cache (split scratch, pools written by appends or projections) before
 * it, the main pass and, with several splits, a barrier and the combine
 * pass. Fails only where recording a dispatch can (descriptor sets). */
vkattn_result vka_cmd_kv_attention_record(vkattn_context *ctx, VkCommandBuffer cmd,
                                             const vka_kv_attention_plan *plan,
                                             const vka_binding *meta);

/* Prepare and record in one call, for a step whose metadata was recorded
 * already: the T queries of batch row b attend to keys 0 .. length[b]-1 of
 * that sequence, query i seeing key j iff j <= i + length[b] - T. `step`
 * gives the lengths (host side, for the split choice). Includes the combine
 * pass of split-KV. Prefer prepare before vka_kv_step_record and record
 * after it: a failure here comes after the step was applied. */
vkattn_result vka_cmd_kv_attention_step(vkattn_context *ctx, VkCommandBuffer cmd,
                                           vkattn_kv_cache *cache, const vka_kv_step *step,
                                           const vka_binding *meta,
                                           const vka_kv_attention_problem *p);

#endif
