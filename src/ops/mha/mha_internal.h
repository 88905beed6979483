/* The MHA layer's internals shared by its files: the layer object
 * (mha_api.c), the forward pass (mha_forward.c), the steps over a KV cache
 * (mha_step.c) and the tuner (mha_tune.c). */
#ifndef VKA_MHA_INTERNAL_H
#define VKA_MHA_INTERNAL_H

#include "ops/kvcache/kvcache.h"
#include "ops/linear/linear.h"
#include "core/buffer.h"
#include "core/context.h"
#include "core/host.h"
#include "core/record.h"
#include "core/submit.h"
#include "spec/dtype.h"
#include "spec/error_text.h"
#include "spec/mha_desc.h"
#include "spec/size_math.h"

/* Every tensor the layer places in a buffer starts on this boundary (texel
 * views need minTexelBufferOffsetAlignment, 256 bytes on SwiftShader). */
#define VKA_MHA_PLACEMENT 256u

/* Where the forward and the steps read the projection weights: the layer's
 * own buffer (vkattn_mha_set_weights) or the caller's tensors
 * (vkattn_mha_set_weight_tensors, borrowed, never destroyed). Wq's rows at
 * q/off_q, Wk's at kv/off_kv (in a self-attention layer right after Wq's:
 * one packed matrix), Wv's at v/off_v (right after Wk's unless the caller's
 * wk and wv are apart), Wo at o/off_o; biases alike (bk's and bv's values
 * always back to back at bkv/off_bkv). */
typedef struct vka_mha_weight_source {
    vkattn_buffer *q, *kv, *o, *bq, *bkv, *bo;
    uint64_t off_q, off_kv, off_o, off_bq, off_bkv, off_bo;
    vkattn_buffer *v;
    uint64_t off_v;
} vka_mha_weight_source;

struct vkattn_mha {
    vkattn_context *ctx;
    vkattn_mha_desc d; /* resolved */
    size_t esize;      /* bytes per element of d.dtype */
    /* Weights in d.weight_dtype, one buffer: Wq rows then Wk, Wv rows (one
     * matrix when kv_dim == embed_dim, else Wkv after Wq), then Wo, then
     * biases (vka_mha_bias_dtype). */
    vkattn_buffer *weights; /* created by the first vkattn_mha_set_weights */
    uint64_t weights_bytes;
    uint64_t off_wq, off_wkv, off_wo, off_bq, off_bkv, off_bo;
    vka_mha_weight_source src; /* what the recorded passes read */
    bool weights_set;
    vkattn_buffer *scratch; /* the layer's own, grown by reserve */
    /* QK-norm and RoPE (NULL without either): f32 norm weights of Q and K
     * [Dh] each, then the RoPE angle table (spec/rope.h) */
    vkattn_buffer *heads_params;
    /* Sinks and ALiBi (NULL without either): f32 sinks [Hq] at 0, slopes
     * [Hq] at off_slopes (the standard ones of alibi_max_bias until
     * weights give others) */
    vkattn_buffer *mods_params;
    uint64_t off_slopes;
    /* desc.add_bias_kv / add_zero_attn (NULL without both): f32 zeros [Hq]
     * at 0 (the zero row's sink logits), then, with add_bias_kv, bias_k
     * [Hkv*Dk] at off_bias_k and bias_v [Hkv*Dv] at off_bias_v in d.dtype */
    vkattn_buffer *extras;
    uint64_t off_bias_k, off_bias_v;
    uint64_t off_zero_row; /* zeros [max(Dk, Dv)] in d.dtype: the zero row's key and value */
};

/* Whether the layer appends rows to its keys and values (add_bias_kv,
 * add_zero_attn). */
static inline bool vka_mha_appends(const vkattn_mha_desc *d)
{
    return d->add_bias_kv || d->add_zero_attn;
}
static inline uint32_t vka_mha_appended_count(const vkattn_mha_desc *d)
{
    return (uint32_t)d->add_bias_kv + (uint32_t)d->add_zero_attn;
}

/* bias_k and bias_v (f32 host arrays, checked finite; NULL when the layer
 * has no add_bias_kv) into the layer's extras buffer, in its dtype; `prefix`
 * names them in messages. (mha_api.c) */
vkattn_result vka_mha_check_appended(vkattn_mha *m, const float *bias_k, const float *bias_v,
                                     const char *prefix);
vkattn_result vka_mha_upload_appended(vkattn_mha *m, const float *bias_k, const float *bias_v);

/* The passes' side of the appended rows (mha_appended.c). With
 * add_bias_kv, scratch for the bias row's attention [B, Hq, T, Dv] and both
 * passes' LSE f32 [B, Hq, T] (all zero offsets without it), placed at
 * *cursor. */
typedef struct vka_mha_rows_scratch {
    uint64_t o_rows, lse_main, lse_rows;
} vka_mha_rows_scratch;
void vka_mha_place_rows(const vkattn_mha *m, uint64_t batch, uint64_t tokens, uint64_t *cursor,
                        vka_mha_rows_scratch *out);
/* What the main pass over queries q [B, Hq, T, Dk] takes: the LSE it must
 * write (the merge's total afterwards) and, for add_zero_attn alone, the
 * zero row's sinks (else *sinks unchanged). */
void vka_mha_main_pass_mods(const vkattn_mha *m, const vkattn_tensor *q, vkattn_buffer *sbuf,
                            uint64_t base, const vka_mha_rows_scratch *rs, vkattn_tensor *sinks,
                            vkattn_tensor *lse);
/* After the main pass wrote `out` [B, Hq, T, Dv] and its LSE: the bias row's
 * pass (with the zero row as a sink) merged into `out` in place, the LSE
 * then the total one; nothing without add_bias_kv. The caller's barrier
 * comes before. */
vkattn_result vka_mha_record_bias_row(vkattn_mha *m, VkCommandBuffer cmd, const vkattn_tensor *q,
                                      const vkattn_tensor *out, const vkattn_tensor *head_mask,
                                      vkattn_buffer *sbuf, uint64_t base,
                                      const vka_mha_rows_scratch *rs);
/* The attention weights of a forward with appended rows, after the rows'
 * pass: `main_pass` is the main pass's call with the caller's weights
 * [.., Tk + rows] (rank 3 or 4, checked); each part's columns are
 * exp(score - total LSE). */
vkattn_result vka_mha_record_appended_weights(vkattn_mha *m, VkCommandBuffer cmd,
                                              const vkattn_attention_args *main_pass,
                                              vkattn_buffer *sbuf, uint64_t base,
                                              const vka_mha_rows_scratch *rs);

/* The layer's score modifiers as the attention ops take them: sinks and
 * ALiBi slopes as tensors over mods_params (buffer NULL when the layer has
 * none). */
void vka_mha_mods(const vkattn_mha *m, vkattn_tensor *sinks, vkattn_tensor *slopes);

/* Packed ragged batches (mha_packed.c): the checks of a forward with
 * args->sequences (after its shapes'); whether it needs the layer to write
 * the RoPE positions (restarting with every sequence), and the recording
 * of that write into the scratch at `offset` (int32 [1, sum Tq], `out`). */
vkattn_result vka_mha_check_packed(vkattn_mha *m, const vkattn_mha_forward_args *a);
bool vka_mha_packed_positions_needed(const vkattn_mha *m, const vkattn_mha_forward_args *a);
vkattn_result vka_mha_record_packed_positions(vkattn_mha *m, VkCommandBuffer cmd,
                                              const vkattn_mha_forward_args *a, vkattn_buffer *sbuf,
                                              uint64_t offset, vkattn_tensor *out);

/* The projection epilogue of a layer with QK-norm or RoPE (segments 0 = Q,
 * 1 = K); false when the layer has neither. */
bool vka_mha_heads(const vkattn_mha *m, vka_linear_positions source, const vkattn_tensor *positions,
                   vka_linear_heads *out);

/* The layer's own weights buffer as what the recorded passes read. */
void vka_mha_use_own_weights(vkattn_mha *m);

/* The storage of the layer's biases: the weights' (f32 beside q8_0). */
static inline vkattn_dtype vka_mha_bias_dtype(const vkattn_mha_desc *d)
{
    return d->weight_dtype == VKATTN_DTYPE_Q8_0 ? VKATTN_DTYPE_F32 : d->weight_dtype;
}

/* Bytes of `rows` x `cols` weights of the layer (q8_0: whole blocks;
 * saturating). */
static inline uint64_t vka_mha_weight_bytes(const vkattn_mha_desc *d, uint64_t rows, uint64_t cols)
{
    uint64_t n;
    if (!vka_mul_u64(rows, cols, &n))
        return UINT64_MAX;
    uint64_t bytes = vkattn_dtype_row_bytes(d->weight_dtype, n);
    return bytes ? bytes : UINT64_MAX;
}

/* Bytes of Wk [Hkv*Dk, Dkv] and of Wv [Hkv*Dv, Dvin] (saturating). */
static inline uint64_t vka_mha_wk_bytes(const vkattn_mha_desc *d)
{
    return vka_mha_weight_bytes(d, vka_mha_k_width(d), d->kv_dim);
}
static inline uint64_t vka_mha_wv_bytes(const vkattn_mha_desc *d)
{
    return vka_mha_weight_bytes(d, vka_mha_v_width(d), d->value_dim);
}

/* Where a layer of desc `d` keeps its weights in its own buffer (weights in
 * d->weight_dtype, biases in vka_mha_bias_dtype): Wq's rows then Wk's and
 * Wv's (one matrix when vka_mha_packed), Wo, then the biases; `bytes`
 * the total (VKA_MHA_TOO_LARGE past 2^64). (mha_api.c) */
typedef struct vka_mha_layout {
    uint64_t off_wq, off_wkv, off_wo, off_bq, off_bkv, off_bo, bytes;
} vka_mha_layout;
void vka_mha_layout_of(const vkattn_mha_desc *d, vka_mha_layout *l);

/* Reserves `bytes` at *cursor (aligned) and returns where they start. Sizes
 * past 2^64 saturate the cursor at UINT64_MAX (VKA_MHA_TOO_LARGE), which the
 * callers report. */
#define VKA_MHA_TOO_LARGE UINT64_MAX
static inline uint64_t vka_mha_place(uint64_t *cursor, uint64_t bytes)
{
    uint64_t at = *cursor, end;
    if (!vka_add_u64(at, bytes, &end) || end > UINT64_MAX - VKA_MHA_PLACEMENT)
        *cursor = VKA_MHA_TOO_LARGE;
    else
        *cursor = vka_align_up(end, VKA_MHA_PLACEMENT);
    return at;
}

/* Bytes of `n` elements of [a, b, c, d] in the layer's dtype (saturating). */
static inline uint64_t vka_mha_bytes(const vkattn_mha *m, uint64_t a, uint64_t b, uint64_t c,
                                     uint64_t d)
{
    const uint64_t f[5] = {a, b, c, d, m->esize};
    uint64_t n;
    vka_product_u64(f, 5, &n);
    return n;
}

/* Sinks and ALiBi slopes ([Hq] f32 host arrays, NULL: none) are finite;
 * `prefix` ("weights->", "t->") names them in the message. Checked before a
 * weights call changes anything. */
vkattn_result vka_mha_check_params(vkattn_mha *m, const float *sinks, const float *slopes,
                                   const char *prefix);
/* The per-head parameters of a weights call, checked already: QK-norm
 * weights (desc.qk_norm), sinks (desc.sinks) and ALiBi slopes (desc.alibi;
 * NULL: the standard ones), f32 host arrays, uploaded. */
vkattn_result vka_mha_upload_params(vkattn_mha *m, const float *q_norm, const float *k_norm,
                                    const float *sinks, const float *alibi_slopes);

/* The layer's own scratch, at least `bytes` (synchronous when it grows). */
vkattn_result vka_mha_scratch_grow(vkattn_mha *m, uint64_t bytes);
/* Picks the caller's scratch (checked: context, offset, size) or the
 * layer's (which must already hold `bytes`). */
vkattn_result vka_mha_scratch_pick(vkattn_mha *m, vkattn_buffer *caller, uint64_t offset,
                                   uint64_t bytes, vkattn_buffer **buf, uint64_t *base);
/* What a recording layer call `fn` checks first: the layer, the entry's
 * arguments (vka_check_entry with `cmd`), and that weights were set. */
vkattn_result vka_mha_check_record(vkattn_mha *m, const char *fn, VkCommandBuffer cmd,
                                   const void *args);
/* The submit-and-wait form of a layer call `fn`: check the entry, `grow` the
 * layer's own scratch when the call brings none, `record` (the vkattn_cmd_*
 * form, wrapped) into the context's command buffer, then submit and wait. */
typedef vkattn_result (*vka_mha_grow_fn)(vkattn_mha *m, const void *args);
typedef vkattn_result (*vka_mha_record_fn)(vkattn_mha *m, VkCommandBuffer cmd, const void *args);
vkattn_result vka_mha_submit(vkattn_mha *m, const char *fn, const void *args, vka_mha_grow_fn grow,
                             vka_mha_record_fn record);
/* Where the forward keeps Q, K, V [B, H, T, D] and O [B, Tq, Hq*Dv] (the
 * layer's dtype), the RoPE positions of packed sequences, the appended
 * rows' scratch and the LSE (f32 [B, Hq, Tq]; the dropout pass's and the
 * backward's) inside its scratch, from its start; `bytes` the total
 * (VKA_MHA_TOO_LARGE past 2^64). (mha_forward.c) */
typedef struct vka_mha_plan {
    uint64_t q, k, v, o, positions, lse, bytes;
    vka_mha_rows_scratch rows;
} vka_mha_plan;
vka_mha_plan vka_mha_plan_scratch(const vkattn_mha *m, uint64_t b, uint64_t tq, uint64_t tk);
/* Every check of a forward call (y skipped when !need_y and absent);
 * returns B, Tq, Tk. */
vkattn_result vka_mha_check_forward(vkattn_mha *m, const vkattn_mha_forward_args *a, bool need_y,
                                    uint32_t *b, uint32_t *tq, uint32_t *tk);
/* The forward up to O (checked call, scratch picked): the projections
 * (with QK-norm and RoPE) and attention, with the LSE into the plan's when
 * `lse` (or dropout needs it); *at the attention call it recorded. */
vkattn_result vka_mha_record_core(vkattn_mha *m, VkCommandBuffer cmd,
                                  const vkattn_mha_forward_args *a, vkattn_buffer *sbuf,
                                  uint64_t base, const vka_mha_plan *plan, bool lse,
                                  vkattn_attention_args *at);
/* The output projection: y [B, T, Dm] = o [B, T, Hq*Dv] Wo^T + bo. */
vkattn_result vka_mha_record_output(vkattn_mha *m, VkCommandBuffer cmd, const vkattn_tensor *o,
                                    const vkattn_tensor *y);
/* A KV cache the layer can step over (context, heads, head dims, dtype; a
 * self-attention layer); `name` is the argument in the messages. */
vkattn_result vka_mha_check_cache(vkattn_mha *m, const vkattn_kv_cache *c, const char *name);
#endif
