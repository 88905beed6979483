/* The MHA layer's backward, shared by its two files: the scratch plan and
 * the checks (mha_backward_plan.c), the recording (mha_backward.c). */
#ifndef VKA_MHA_BACKWARD_H
#define VKA_MHA_BACKWARD_H

#include "ops/mha/mha_internal.h"

/* Where the backward keeps its tensors in the scratch, after the forward's
 * (vka_mha_plan): dO [B*Tq, Hq*Dv] in the layer's dtype (what the attention
 * backward reads beside O), then f32: dQ, dK, dV [B, H, T, D] (the
 * attention backward's), the projections' output gradients dQ' [B*Tq, qw],
 * dK' and dV' [B*Tk, kw | vw], with QK-norm the recomputed projections
 * before the norm Q' and K' and the norm weights' partial gradients
 * [rows * heads, Dk], and the sinks' gradient [Hq] (to accumulate). */
typedef struct vka_mha_bwd_plan {
    vka_mha_plan fwd;
    uint64_t d_o, dq, dk, dv, dq_lin, dk_lin, dv_lin, q_lin, k_lin, q_part, k_part, dsinks;
    uint64_t bytes;
} vka_mha_bwd_plan;
vka_mha_bwd_plan vka_mha_bwd_plan_scratch(const vkattn_mha *m, uint64_t b, uint64_t tq,
                                          uint64_t tk);

/* A [rows, cols] view of an input or output of the layer (x, kv, value,
 * dy, dx, ...): B*T rows of a rank-3 tensor whose batch stride is T rows. */
typedef struct vka_mha_rows {
    const vkattn_buffer *buffer;
    uint64_t offset;
    vkattn_dtype dtype;
    uint64_t row_stride;
} vka_mha_rows;

/* A checked backward call. */
typedef struct vka_mha_bwd_call {
    uint32_t b, tq, tk;
    vka_mha_rows x, keys, values, dy, dx, dkv, dvalue;
    /* the gradients given (buffer NULL: not computed), resolved */
    vkattn_mha_grads grads;
} vka_mha_bwd_call;

vkattn_result vka_mha_bwd_check(vkattn_mha *m, const vkattn_mha_backward_args *a,
                                vka_mha_bwd_call *c);

#endif
