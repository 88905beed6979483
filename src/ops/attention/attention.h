/* What the attention op gives the ops above it (the KV cache's attention
 * runs the same shared-memory tiles over its pools). */
#ifndef VKA_ATTENTION_H
#define VKA_ATTENTION_H

#include "core/context.h"

/* A tile of the shared-memory kernels (attention_sm.comp,
 * kv_attention_sm.comp): TPR invocations per row (a power of two giving each
 * at most 4 output vec4s, and at least 8 so that a row's keys are spread
 * over several invocations), BR rows, BC keys (up to 4 per invocation),
 * within the device's invocation limit and shared memory. BR starts at the
 * workgroup's rows (halved with `half_rows`, at most `max_rows`), BC at 4 TPR
 * (halved with `half_keys`); `key_extra_bytes` is shared memory per key
 * besides K and V (the KV kernels keep each key's pool row). */
/* The coopmat family's tile (attention_cm.comp, kv_attention_cm.comp) for
 * head dims dk and dv, split operands (f32 q; f32 or quantized k and v)
 * and extra shared bytes per key: rows, keys and invocations per
 * workgroup, the largest of preset 0 (two matrices of each) or 1 (one)
 * that fits the device's shared memory; false when even one matrix of
 * each does not, or the family may not run. */
typedef struct vka_att_cm_dims {
    uint32_t dk, dv;
    bool q_split, kv_split;
    uint32_t key_extra_bytes;
} vka_att_cm_dims;
bool vka_att_cm_tile(const vkattn_context *ctx, const vka_att_cm_dims *d, uint32_t preset,
                     uint32_t *br, uint32_t *bc, uint32_t *wg);

typedef struct vka_att_sm_tile {
    uint32_t tpr, br, bc;
} vka_att_sm_tile;
vka_att_sm_tile vka_att_sm_tile_fit(const vkattn_context *ctx, uint32_t head_dim, uint32_t max_rows,
                                    bool half_rows, bool half_keys, uint32_t key_extra_bytes);
/* The same for q/k rows of head_dim and v/out rows of v_head_dim (TPR
 * serves the output row). */
vka_att_sm_tile vka_att_sm_tile_fit2(const vkattn_context *ctx, uint32_t head_dim,
                                     uint32_t v_head_dim, uint32_t max_rows, bool half_rows,
                                     bool half_keys, uint32_t key_extra_bytes);

/* The head mask (attention_gate.c): checks `in` (buffer NULL: none, copied
 * to `out`) as f32 [heads] or [batch or 1, heads], heads contiguous, naming
 * it `name`; records x [B, H, T, D] *= gate[b, h] in place (a barrier before
 * it: x was just written), in any storage (pairs in 32-bit words: rows of
 * whole quads). */
vkattn_result vka_att_check_head_mask(vkattn_context *ctx, const vkattn_tensor *in, uint32_t batch,
                                      uint32_t heads, const char *name, vkattn_tensor *out);
vkattn_result vka_att_record_head_gate(vkattn_context *ctx, VkCommandBuffer cmd,
                                       const vkattn_tensor *x, const vkattn_tensor *gate);

/* Records only the attention weights of `args` (args->weights required;
 * args->out is validated but not written), each exp(score - L) with L the
 * row's given log-denominator args->lse f32 [B, Hq, Tq] (natural log, as
 * the LSE output), instead of the softmax over this call's keys: the
 * weights of keys that are one part of a larger softmax (the MHA layer's
 * appended rows). A row whose L is -inf (no other key visible; the zero
 * row's sink ignored, as sinks are without a visible key) takes this
 * call's own softmax. No sinks (L holds them). (attention_api.c) */
vkattn_result vka_att_cmd_weights_given(vkattn_context *ctx, VkCommandBuffer cmd,
                                        const vkattn_attention_args *args);

#endif
