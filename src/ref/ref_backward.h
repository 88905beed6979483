/* Internals of the reference backward of the linear op and the MHA layer
 * (ref_linear_backward.c, ref_mha_backward*.c): dense double matrices and
 * their products, and the layer's plan, checked once and then run in
 * double from the inputs to every gradient. */
#ifndef VKA_REF_BACKWARD_H
#define VKA_REF_BACKWARD_H

#include "ref/ref.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- dense double matrices, row-major (ref_linear_backward.c) */

/* Every element of a resolved host tensor, widened, into dst in row-major
 * order of its shape. */
void vka_ref_gather_dense(const vkattn_host_tensor *t, double *dst);
/* The inverse: src (row-major in t's shape) stored into a resolved t. */
void vka_ref_scatter_dense(const vkattn_host_tensor *t, const double *src);
/* y[m, n] = a[m, k] b[n, k]^T (+ bias[n] when bias is not NULL). */
void vka_ref_gemm_nt(const double *a, const double *b, const double *bias, int64_t m, int64_t n,
                     int64_t k, double *y);
/* y[m, k] = g[m, n] b[n, k], or y += that with `accumulate`. */
void vka_ref_gemm_nn(const double *g, const double *b, int64_t m, int64_t n, int64_t k,
                     bool accumulate, double *y);
/* y[n, k] = g[m, n]^T a[m, k]. */
void vka_ref_gemm_tn(const double *g, const double *a, int64_t m, int64_t n, int64_t k, double *y);
/* y[n] = the column sums of g[m, n]. */
void vka_ref_col_sums(const double *g, int64_t m, int64_t n, double *y);

/* ---- the MHA layer's backward (ref_mha_backward*.c) */

/* The gradients of vkattn_ref_mha_grads, in its order. */
enum {
    VKA_GRAD_WQ,
    VKA_GRAD_WK,
    VKA_GRAD_WV,
    VKA_GRAD_WO,
    VKA_GRAD_BQ,
    VKA_GRAD_BK,
    VKA_GRAD_BV,
    VKA_GRAD_BO,
    VKA_GRAD_Q_NORM,
    VKA_GRAD_K_NORM,
    VKA_GRAD_SINKS,
    VKA_GRADS
};

/* A layer call, checked: what the run reads and writes. */
typedef struct vka_ref_mha_bwd_plan {
    vkattn_mha_desc desc;      /* resolved */
    vka_mha_weight_views wv;   /* as the layer keeps them: f32, f16 or bf16 */
    vka_ref_attention_plan ap; /* masks, modifiers, dims; its q, k, v, out unused */
    /* Resolved inputs: kv is x for self-attention, vin the value input
     * (kv's when there is none). */
    vkattn_host_tensor x, kv, vin;
    bool self, has_value;
    vkattn_host_tensor positions; /* resolved; data NULL: 0..T-1 */
    /* dy resolved (data NULL: the forward only), and the outputs resolved
     * (data NULL: not asked for). */
    vkattn_host_tensor dy, dx, dkv, dvalue;
    vkattn_host_tensor grads[VKA_GRADS];
} vka_ref_mha_bwd_plan;

/* Checks vkattn_ref_mha_backward's arguments (with `backward` false,
 * only the forward's: desc, weights and *fwd, named "args->"; dy and the
 * outputs are then not looked at) and fills `plan`. Weights the layer
 * keeps in another dtype (desc.weight_dtype f16 or bf16) are converted
 * into owned[8], which the caller frees after the run, as
 * vka_ref_mha_store_weights does. (ref_mha_backward.c) */
vkattn_result
vka_ref_mha_bwd_prepare(const vkattn_mha_desc *desc, const vkattn_mha_weights *weights,
                        const vkattn_ref_mha_args *fwd, const vkattn_ref_mha_backward_args *bwd,
                        vka_ref_mha_bwd_plan *plan, void *owned[8], char *error, size_t error_size);

/* Runs a plan: the forward in double (y, when not NULL, gets the layer's
 * output [B, Tq, Dm] row-major) and, with plan->dy, every gradient asked
 * for, written to its output only at the end. Fails only when memory
 * cannot be had. (ref_mha_backward_run.c) */
vkattn_result vka_ref_mha_bwd_run(const vka_ref_mha_bwd_plan *plan, double *y, char *error,
                                  size_t error_size);

/* vkattn_ref_mha's output as vkattn_ref_mha_backward recomputes it, in
 * double throughout (vkattn_ref_mha keeps Q, K, V and O in f32): y gets
 * B * Tq * Dm doubles. args->y is not read. It takes and refuses what the
 * backward does (messages name "args->"). For finite differences of the
 * layer. (ref_mha_backward.c) */
vkattn_result vka_ref_mha_forward_double(const vkattn_mha_desc *desc,
                                         const vkattn_mha_weights *weights,
                                         const vkattn_ref_mha_args *args, double *y, char *error,
                                         size_t error_size);

/* The QK-norm and RoPE of Q or K, forward and backward, and attention on
 * dense double [B, T, H*D] activations. (ref_mha_backward_heads.c) */

/* out = RoPE(QK-norm(lin)) of every head (norm: the norm weights, NULL
 * without QK-norm; no rotation without desc.rope). T tokens, H heads. */
void vka_ref_heads_forward(const vka_ref_mha_bwd_plan *p, const double *lin, int64_t T, int64_t H,
                           const float *norm, double *out);
/* grad holds dL/d out on entry and dL/d lin on return; dnorm (Dh, may be
 * NULL without QK-norm) gets the norm weights' gradient added. */
void vka_ref_heads_backward(const vka_ref_mha_bwd_plan *p, const double *lin, int64_t T, int64_t H,
                            const float *norm, double *grad, double *dnorm);

/* Doubles of scratch the two attention functions need. */
size_t vka_ref_mha_attention_scratch(const vka_ref_attention_plan *ap);
/* o [B, Tq, Hq*Dv] = attention(q [B, Tq, Hq*Dk], k [B, Tk, Hkv*Dk],
 * v [B, Tk, Hkv*Dv]) as the plan scores it (dropout included). */
void vka_ref_mha_attention_forward(const vka_ref_attention_plan *ap, const double *q,
                                   const double *k, const double *v, double *o, double *scratch);
/* dq, dk, dv (zeroed first; q's, k's, v's layouts) and dsinks [Hq]
 * (zeroed first) from dout [B, Tq, Hq*Dv]. */
void vka_ref_mha_attention_backward(const vka_ref_attention_plan *ap, const double *q,
                                    const double *k, const double *v, const double *dout,
                                    double *dq, double *dk, double *dv, double *dsinks,
                                    double *scratch);

#endif
