/* MHA layer configuration: default resolution and checks of vkattn_mha_desc
 * and vkattn_mha_weights, without a context, shared by the CPU reference and
 * the GPU layer so both accept the same descs with the same messages. */
#ifndef VKA_MHA_CONFIG_H
#define VKA_MHA_CONFIG_H

#include "vkattn.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Copies `in` to `resolved` with every default filled in (num_kv_heads,
 * head_dim, v_head_dim, kv_dim, value_dim, dtype) and checks it: embed_dim and
 * num_heads > 0, num_kv_heads divides num_heads, head_dim and v_head_dim
 * from 1 to 576,
 * dtype f32 or f16, projection widths within uint32_t; scale (0: 1/sqrt(Dh),
 * filled in), rope (theta 0: none; else vka_rope_resolve), norm_eps (0:
 * 1e-6) and that RoPE and QK-norm have self-attention (vka_mha_packed);
 * softcap 0 or finite > 0; alibi_max_bias (with alibi: 0 means 8; without:
 * set to 0). `resolved` is written
 * only on success, `error` (may be NULL) only on failure. Codes:
 * VKATTN_ERROR_INVALID_ARGUMENT, or VKATTN_ERROR_UNSUPPORTED_DTYPE for dtype. */
vkattn_result vka_mha_resolve(const vkattn_mha_desc *in, vkattn_mha_desc *resolved, char *error,
                              size_t error_size);

/* Widths of the projections of a resolved desc: Q (Hq*Dk), K (Hkv*Dk), V
 * (Hkv*Dv) and the merged heads Wo reads (Hq*Dv). */
static inline uint32_t vka_mha_q_width(const vkattn_mha_desc *d)
{
    return d->num_heads * d->head_dim;
}
static inline uint32_t vka_mha_k_width(const vkattn_mha_desc *d)
{
    return d->num_kv_heads * d->head_dim;
}
static inline uint32_t vka_mha_v_width(const vkattn_mha_desc *d)
{
    return d->num_kv_heads * d->v_head_dim;
}
static inline uint32_t vka_mha_o_width(const vkattn_mha_desc *d)
{
    return d->num_heads * d->v_head_dim;
}

/* Whether a resolved desc projects keys and values from inputs as wide as
 * X (kv_dim == value_dim == embed_dim): self-attention can then be one
 * GEMM over a packed Wqkv, and RoPE, QK-norm and steps are possible. */
static inline bool vka_mha_packed(const vkattn_mha_desc *d)
{
    return d->kv_dim == d->embed_dim && d->value_dim == d->embed_dim;
}

/* The weights of one layer with the packed form taken apart: wq, wk, wv
 * point into wqkv when it was given (rows Hq*Dk, then Hkv*Dk, then Hkv*Dv),
 * and likewise bq, bk, bv into bqkv. Biases are NULL when desc.bias is false
 * or the bias was not given (zeros). */
typedef struct vka_mha_weight_views {
    /* elements of `dtype` (weights->dtype: f32, f16 or bf16; q8_0: the
     * weights are blocks, the biases f32) */
    const void *wq, *wk, *wv, *wo;
    const void *bq, *bk, *bv, *bo;
    vkattn_dtype dtype;
    const float *q_norm, *k_norm; /* desc.qk_norm only, else NULL */
    const float *sinks;           /* desc.sinks only, else NULL */
    const float *alibi_slopes;    /* desc.alibi with custom slopes, else NULL */
    bool packed;                  /* the projections came from weights->wqkv */
    const float *bias_k, *bias_v; /* desc.add_bias_kv only, else NULL */
} vka_mha_weight_views;

/* Checks `weights` against a desc that went through vka_mha_resolve:
 * either wq, wk and wv, or wqkv (only when vka_mha_packed), and wo;
 * when desc.bias, not both bqkv and any of bq/bk/bv; weights->dtype f32,
 * f16 or bf16. Fills `views` (may be NULL) on success. Code on failure:
 * VKATTN_ERROR_INVALID_ARGUMENT (VKATTN_ERROR_UNSUPPORTED_DTYPE for the
 * dtype). */
vkattn_result vka_mha_weights_check(const vkattn_mha_desc *resolved,
                                    const vkattn_mha_weights *weights, vka_mha_weight_views *views,
                                    char *error, size_t error_size);

#endif
