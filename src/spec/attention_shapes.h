/* The shape and dtype rules of attention, in one place, without a context:
 * the CPU reference and the GPU op both call vka_attention_check, so the
 * two paths accept and reject exactly the same inputs with the same codes
 * and messages. */
#ifndef VKA_ATTENTION_SHAPES_H
#define VKA_ATTENTION_SHAPES_H

#include "vkattn.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* What the check needs of one tensor. `present` is false for an optional
 * tensor that was not given (mask, key_padding, weights) and for a required
 * one whose data/buffer is NULL (q, k, v, out: an error). */
typedef struct vka_shape_view {
    bool present;
    vkattn_dtype dtype;
    uint32_t rank;
    const int64_t *shape; /* `rank` entries; read only when present */
} vka_shape_view;

typedef struct vka_attention_shapes {
    vka_shape_view q, k, v, out;               /* required */
    vka_shape_view mask, key_padding, weights; /* optional */
    /* The member that holds the memory, named when a required tensor is
     * missing: "data" for host tensors, "buffer" for device tensors.
     * NULL: "data". */
    const char *handle_name;
} vka_attention_shapes;

/* The sizes of one attention call, all >= 1 when the check succeeds. */
typedef struct vka_attention_dims {
    uint32_t batch, num_heads, num_kv_heads, q_len, kv_len, head_dim;
    uint32_t v_head_dim;   /* of v and out (head_dim: of q and k) */
    vkattn_dtype q_dtype;  /* of q and out */
    vkattn_dtype kv_dtype; /* of k */
    vkattn_dtype v_dtype;  /* of v (k's or another float dtype) */
    uint32_t mask_rank;    /* 0: no mask, else 2, 3 or 4 */
    vkattn_dtype mask_dtype;
    bool key_padding;
    uint32_t weights_rank; /* 0: no weights, else 3 or 4 */
    bool q_broadcast;      /* q is [Hq, Tq, D], the same for every batch row */
} vka_attention_dims;

/* Checks the shapes and dtypes against "attention semantics" in vkattn.h.
 * `prefix` is put in front of every tensor name in messages ("args->" gives
 * "args->k.shape[1]"; NULL means ""). On success fills `dims` (may be NULL)
 * and leaves `error` alone; on failure writes the message to `error` (may be
 * NULL) and returns
 *   VKATTN_ERROR_INVALID_ARGUMENT  missing tensor, wrong rank, a dimension
 *                                  < 1 or > UINT32_MAX, head_dim (q, k) or
 *                                  v_head_dim (v, out) above
 *                                  VKA_ATTENTION_HEAD_DIM_MAX;
 *   VKATTN_ERROR_SHAPE_MISMATCH    dimensions that disagree between tensors,
 *                                  num_kv_heads not dividing num_heads;
 *   VKATTN_ERROR_UNSUPPORTED_DTYPE a dtype the tensor cannot have.
 * Strides and memory are not looked at: that is the caller's part. */
vkattn_result vka_attention_check(const vka_attention_shapes *s, const char *prefix,
                                  vka_attention_dims *dims, char *error, size_t error_size);

/* A quantized k or v (or any tensor of ggml's blocks) with resolved
 * strides, which count values: rows are whole blocks back to back, so the
 * last stride is 1 and the others multiples of 32 (whole blocks). Else
 * VKATTN_ERROR_INVALID_ARGUMENT naming `name`.strides[i]. */
vkattn_result vka_quant_strides_check(const char *name, vkattn_dtype dtype, uint32_t rank,
                                      const int64_t *shape, const int64_t *strides, char *error,
                                      size_t error_size);

/* A checked q of rank 3 [Hq, Tq, Dk] (dims->q_broadcast) as the rank-4
 * view [B, Hq, Tq, Dk] at batch stride 0, in place: its first three shape
 * and stride entries move up one; the caller sets the rank to 4. */
void vka_query_view4(const vka_attention_dims *dims, int64_t *shape, int64_t *strides);

/* A checked mask of `rank` 2, 3 or 4 as one rank-4 view [B, Hq, Tq, Tk]:
 * shape4 holds 1 where it broadcasts, else the full size, and strides4 the
 * element stride of each dimension from the mask's own `strides` (0 where
 * it broadcasts), so element (b, h, i, j) is at sum(index * strides4). */
void vka_mask_view4(const vka_attention_dims *dims, uint32_t rank, const int64_t *shape,
                    const int64_t *strides, int64_t shape4[4], int64_t strides4[4]);

/* The boolean mask convention must be one of vkattn_bool_mask's values;
 * else VKATTN_ERROR_INVALID_ARGUMENT naming `prefix`bool_mask. */
vkattn_result vka_bool_mask_check(vkattn_bool_mask value, const char *prefix, char *error,
                                  size_t error_size);

/* A head mask (HF's head_mask) `name` against a call's batch and query
 * heads: absent, or f32 of rank 1 [heads] or rank 2 [batch or 1, heads].
 * (Strides - heads contiguous on the device - are the caller's to check.) */
vkattn_result vka_head_mask_check(vka_shape_view mask, uint32_t batch, uint32_t heads,
                                  const char *name, char *error, size_t error_size);

/* The softmax scale of a call: `scale`, or 1/sqrt(head_dim) for 0. A NaN or
 * infinite scale is VKATTN_ERROR_INVALID_ARGUMENT (it would make every
 * output NaN), named `name` in the message. */
vkattn_result vka_attention_scale(float scale, uint32_t head_dim, const char *name, double *out,
                                  char *error, size_t error_size);

/* Head-dimension limits: any size from 1 to VKA_ATTENTION_HEAD_DIM_MAX for
 * vkattn_attention, the KV cache, the MHA layer and their references (Dk and
 * Dv each, and they may differ); multiples of VKA_HEAD_DIM_MULTIPLE up to
 * VKA_HEAD_DIM_FAST_MAX take the fast kernels. */
#define VKA_HEAD_DIM_MULTIPLE 8u
#define VKA_HEAD_DIM_FAST_MAX 256u
#define VKA_ATTENTION_HEAD_DIM_MAX 576u

/* A head dim rounded up to whole octets: the row length a KV cache keeps
 * (zero-padded) and the kernels compute with. */
static inline uint32_t vka_head_dim_padded(uint32_t d)
{
    return (d + VKA_HEAD_DIM_MULTIPLE - 1) / VKA_HEAD_DIM_MULTIPLE * VKA_HEAD_DIM_MULTIPLE;
}

#endif
