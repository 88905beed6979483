/* Internals of the CPU reference: host tensor access, and each op split into
 * a checking "prepare" step and an infallible "run" step. The split lets
 * vkattn_ref_mha check everything and allocate all memory before it writes
 * the first output, so outputs are written only on success. */
#ifndef VKA_REFERENCE_H
#define VKA_REFERENCE_H

#include "spec/attention_shapes.h"
#include "spec/mha_desc.h"
#include "spec/score_mods.h"
#include "vkattn.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- host tensors (ref_host.c) */

/* Checks the strides of a host tensor whose rank, shape and dtype were already
 * checked, and writes it to `out` with all-zero strides made contiguous
 * row-major. Outputs may not have a zero stride in a dimension larger than 1
 * (writes would collide). `name` is the full name for messages
 * ("args->q"). Code on failure: VKATTN_ERROR_INVALID_ARGUMENT. */
vkattn_result vka_host_tensor_resolve(const vkattn_host_tensor *t, const char *name, bool output,
                                      vkattn_host_tensor *out, char *error, size_t error_size);

/* The view of a host tensor the shape checks need. */
vka_shape_view vka_host_shape_view(const vkattn_host_tensor *t);

/* Element at element offset `i` (sum of index * stride), widened to double. */
static inline double vka_host_load(const vkattn_host_tensor *t, int64_t i)
{
    switch (t->dtype) {
    case VKATTN_DTYPE_F32:
        return ((const float *)t->data)[i];
    case VKATTN_DTYPE_F16:
        return vkattn_f16_to_f32(((const uint16_t *)t->data)[i]);
    case VKATTN_DTYPE_U8:
        return ((const uint8_t *)t->data)[i];
    case VKATTN_DTYPE_I32:
        return ((const int32_t *)t->data)[i];
    case VKATTN_DTYPE_BF16:
        return vkattn_bf16_to_f32(((const uint16_t *)t->data)[i]);
    default: /* quantized: no elements of their own, refused by the checks */
        break;
    }
    return 0.0;
}

/* Stores `value` at element offset `i`, rounding to the tensor's dtype
 * (nearest even; f16 and bf16 through f32). */
static inline void vka_host_store(const vkattn_host_tensor *t, int64_t i, double value)
{
    switch (t->dtype) {
    case VKATTN_DTYPE_F32:
        ((float *)t->data)[i] = (float)value;
        break;
    case VKATTN_DTYPE_F16:
        ((uint16_t *)t->data)[i] = vkattn_f32_to_f16((float)value);
        break;
    case VKATTN_DTYPE_U8:
        ((uint8_t *)t->data)[i] = (uint8_t)value;
        break;
    case VKATTN_DTYPE_I32:
        ((int32_t *)t->data)[i] = (int32_t)value;
        break;
    case VKATTN_DTYPE_BF16:
        ((uint16_t *)t->data)[i] = vkattn_f32_to_bf16((float)value);
        break;
    default: /* quantized: refused by the checks */
        break;
    }
}

/* *out = a * b; false on size_t overflow. */
static inline bool vka_size_mul(size_t a, size_t b, size_t *out)
{
    if (a != 0 && b > SIZE_MAX / a)
        return false;
    *out = a * b;
    return true;
}

/* malloc'd scratch of `doubles` doubles for an op's run step; NULL (the
 * reason in `error`) when it cannot be had. (ref_host.c) */
double *vka_ref_scratch(size_t doubles, char *error, size_t error_size);

/* Checks a RoPE positions tensor named args->positions: int32, rank 2
 * [batch, tokens], every value in [0, VKATTN_ROPE_MAX_POSITION]; `out` gets
 * it with resolved strides. (ref_host.c) */
vkattn_result vka_host_positions_resolve(const vkattn_host_tensor *p, int64_t batch, int64_t tokens,
                                         vkattn_host_tensor *out, char *error, size_t error_size);

/* ---- rotary positions (ref_rope.c) */

/* Rotates one head's D values x[0..D) in place by RoPE at `position` (a
 * resolved desc, see spec/rope.h); angles, sin and cos in double. */
void vka_ref_rope_rotate(const vkattn_rope_desc *resolved, int64_t position, double *x);

/* ---- quantized KV rows (ref_quant.c) */

/* K or V rows as a quantized cache keeps them: every `d` consecutive values
 * of x[n] padded with zeros to whole 32-value blocks, quantized as
 * vkattn_ref_quantize does, and replaced by their dequantized values. */
vkattn_result vka_ref_quantize_rows(vkattn_dtype dtype, float *x, size_t n, uint32_t d, char *error,
                                    size_t error_size);

/* ---- attention (ref_attention.c) */

typedef struct vka_ref_attention_plan {
    /* Resolved strides; optional tensors not given have data NULL. */
    vkattn_host_tensor q, k, v, out, mask, key_padding, weights;
    vkattn_host_tensor sinks, alibi_slopes, lse;
    vkattn_host_tensor head_mask; /* f32 [Hq] or [B, Hq] */
    vka_attention_dims dims;
    vka_score_mods mods;
    bool causal;
    double scale;
    /* The mask's element strides as [B, Hq, Tq, Tk] (0 where it
     * broadcasts), and whether a u8 mask's nonzero values hide keys. */
    int64_t mask_strides[4];
    bool mask_true_blocks;
    /* Dropout: the keep scale 1 / (1 - p) in double (1 without), and the
     * number added to a batch row to make the mask's b (packed sequences:
     * the sequence's index; set after prepare, 0 from it). */
    double dropout_keep;
    int64_t dropout_batch;
    size_t scratch_doubles; /* what run needs */
} vka_ref_attention_plan;

/* Checks `args` (names in messages start with `prefix`), including that the
 * sinks and ALiBi slopes given are finite, and fills `plan`. */
vkattn_result vka_ref_attention_prepare(const vkattn_ref_attention_args *args, const char *prefix,
                                        vka_ref_attention_plan *plan, char *error,
                                        size_t error_size);
/* Computes; `scratch` holds plan->scratch_doubles doubles. Cannot fail. */
void vka_ref_attention_run(const vka_ref_attention_plan *plan, double *scratch);

/* The probabilities of query row i of head h in batch row b: qrow its Dk
 * values, kbuf the Tk x Dk keys of its KV head (dense). prob[0..Tk) gets
 * them before dropout and the head mask (0 where hidden); dcap (may be
 * NULL) the derivative of each visible score by scale * dot(q, k): 1, or
 * 1 - (capped / softcap)^2 with a softcap; *sink_prob (may be NULL) the
 * sink's share of the denominator (0 without sinks). Returns the LSE; -inf
 * when no key is visible, and then prob is all 0 (and the sink's share too:
 * such a row attends to nothing). The forward and the backward both call
 * this, so they score rows identically. */
double vka_ref_attention_probs(const vka_ref_attention_plan *plan, int64_t b, int64_t h, int64_t i,
                               const double *qrow, const double *kbuf, double *prob, double *dcap,
                               double *sink_prob);

/* The head mask's gate of (b, h): 1 without a head mask. */
double vka_ref_head_gate(const vka_ref_attention_plan *plan, int64_t b, int64_t h);

/* Z(b, h, i, j): what dropout multiplies the probability by, 1 / (1 - p)
 * (kept) or 0 (dropped); 1 without dropout. */
static inline double vka_ref_dropout_scale(const vka_ref_attention_plan *p, int64_t b, int64_t h,
                                           int64_t i, int64_t j)
{
    if (!p->mods.dropout)
        return 1.0;
    uint32_t bits = vkattn_dropout_bits(p->mods.dropout_seed, (uint32_t)(p->dropout_batch + b),
                                        (uint32_t)h, (uint32_t)i, (uint32_t)j);
    return bits >= p->mods.dropout_threshold ? p->dropout_keep : 0.0;
}

/* A quantized k or v (named `name` in messages) as f32 values (d * q as
 * the kernels read them) at the same value strides, in `*owned` for the
 * caller to free (NULL, and `t` untouched, for any other dtype).
 * (ref_attention.c) */
vkattn_result vka_ref_dequantized(vkattn_host_tensor *t, const char *name, float **owned,
                                  char *error, size_t error_size);

/* vkattn_ref_attention of packed sequences (args->sequences > 0):
 * everything checked, the whole call and every sequence, before the first
 * output is written. (ref_attention_packed.c) */
vkattn_result vka_ref_attention_packed(const vkattn_ref_attention_args *args, char *error,
                                       size_t error_size);

/* ---- attention backward (ref_attention_backward*.c) */

typedef struct vka_ref_backward_plan {
    /* The forward's plan (its out and lse cleared: never read or written). */
    vka_ref_attention_plan fwd;
    /* Resolved; dsinks.data NULL: not asked for. */
    vkattn_host_tensor dout, dq, dk, dv, dsinks;
    size_t scratch_doubles; /* what run needs */
} vka_ref_backward_plan;

/* Checks `args` (names start with "args->") and fills `plan`. */
vkattn_result vka_ref_attention_backward_prepare(const vkattn_ref_attention_backward_args *args,
                                                 vka_ref_backward_plan *plan, char *error,
                                                 size_t error_size);
/* Computes dq, dk, dv (and dsinks); `scratch` holds plan->scratch_doubles
 * doubles. Cannot fail. */
void vka_ref_attention_backward_run(const vka_ref_backward_plan *plan, double *scratch);

/* ---- the MHA layer's appended rows (ref_mha_appended.c) */

/* What vka_ref_mha_appended reads and widens: Q [B, Tq, Hq*Dk] and the
 * main pass's O [B, Tq, Hq*Dv] (gated by the head mask; rewritten in
 * place) and LSE [B, Hq, Tq], f32; the layer's bias_k and bias_v (f32 as
 * given, NULL without add_bias_kv); the resolved head mask (data NULL:
 * none). */
typedef struct vka_ref_appended_rows {
    int64_t batch, q_len;
    const float *q, *lse;
    float *o;
    const float *bias_k, *bias_v;
    const vkattn_host_tensor *head_mask;
    /* With weights (else weights->data NULL): the main pass's per-head
     * weights p_main [B, Hq, Tq, Tk] (gated), written widened into
     * `weights` (resolved, rank 3 [B, Tq, Tk + rows] averaged over the
     * heads, or rank 4 [B, Hq, Tq, Tk + rows]). */
    int64_t kv_len;
    const float *p_main;
    const vkattn_host_tensor *weights;
} vka_ref_appended_rows;

/* Widens the attention by desc's add_bias_kv and add_zero_attn rows. */
void vka_ref_mha_appended(const vkattn_mha_desc *resolved, const vka_ref_appended_rows *rows);

/* ---- linear (ref_linear.c) */

typedef struct vka_ref_linear_plan {
    vkattn_host_tensor x, w, b, y;     /* resolved; b.data NULL: no bias */
    int64_t rows_outer;                /* B (1 for rank-2 x) */
    int64_t rows_inner;                /* T (M for rank-2 x) */
    int64_t in_features, out_features; /* K, N */
    int64_t block_rows;                /* rows of w converted to double at a time */
    size_t scratch_doubles;
} vka_ref_linear_plan;

vkattn_result vka_ref_linear_prepare(const vkattn_ref_linear_args *args, const char *prefix,
                                     vka_ref_linear_plan *plan, char *error, size_t error_size);
void vka_ref_linear_run(const vka_ref_linear_plan *plan, double *scratch);

/* The layer's weights as its device keeps them (ref_mha_weights.c): where
 * desc->weight_dtype is f16, bf16 or q8_0 and the host's dtype differs, each
 * array of `wv` is converted into a new one (q8_0: quantized, biases f32),
 * listed in owned[8] for the caller to free, and `wv` points at them. */
vkattn_result vka_ref_mha_store_weights(const vkattn_mha_desc *desc, vka_mha_weight_views *wv,
                                        void *owned[8], char *error, size_t error_size);

#endif
