/* vkattn/reference.h - part of vkattn.h: the CPU reference.
 * Include <vkattn.h>, which includes every part in order. */
#ifndef VKATTN_REFERENCE_H
#define VKATTN_REFERENCE_H

#ifndef VKATTN_H
#error "include <vkattn.h>, not its parts"
#endif

/* ------------------------------------------------------------ CPU reference
 *
 * Plain C implementations of every op with double accumulation and exactly
 * the semantics above. They are what the tests and `vkattn ... --check`
 * compare the GPU against, and are public so users can validate a device.
 * Single-threaded, no Vulkan. Errors: the result code, and the message in
 * `error` (may be NULL) of `error_size` bytes. Outputs are written only on
 * success.
 */

/* A tensor in host memory: like vkattn_tensor, with a pointer instead of a
 * buffer (strides in elements; all 0 means contiguous row-major). Float data
 * may be f32, f16 or bf16 (uint16_t bits); masks u8 (or float); attention's
 * k and v also ggml's blocks (a quantized dtype: shape and strides count
 * values, rows whole blocks, as vkattn_attention takes them; read as
 * vkattn_ref_dequantize reads them). Inputs are only read. */
typedef struct vkattn_host_tensor {
    void *data;
    vkattn_dtype dtype;
    uint32_t rank;
    int64_t shape[VKATTN_MAX_RANK];
    int64_t strides[VKATTN_MAX_RANK];
} vkattn_host_tensor;

/* A contiguous row-major host tensor. */
VKATTN_API vkattn_host_tensor vkattn_host_tensor_make(void *data, vkattn_dtype dtype, uint32_t rank,
                                                      const int64_t *shape);

/* Attention: see "attention semantics". Optional tensors have data NULL. */
typedef struct vkattn_ref_attention_args {
    vkattn_host_tensor q, k, v, out;
    vkattn_host_tensor mask;        /* optional */
    vkattn_host_tensor key_padding; /* optional */
    vkattn_host_tensor weights;     /* optional, f32 */
    bool causal;
    float scale;                /* 0: 1/sqrt(D) */
    vkattn_bool_mask bool_mask; /* the meaning of a u8 mask's nonzero values */
    /* Score modifiers and LSE, as in vkattn_attention_args */
    vkattn_causal_align causal_align;
    uint32_t window;
    float softcap;
    vkattn_host_tensor sinks;        /* optional, f32 [Hq] */
    vkattn_host_tensor alibi_slopes; /* optional, f32 [Hq] */
    float alibi_max_bias;
    vkattn_host_tensor lse; /* optional output, f32 [B, Hq, Tq] */
    /* optional, f32 [Hq] or [B, Hq], as in vkattn_attention_args (finite) */
    vkattn_host_tensor head_mask;
    /* packed ragged batches, as in vkattn_attention_args */
    uint32_t sequences;
    const int32_t *q_offsets, *k_offsets;
    /* dropout, as in vkattn_attention_args */
    float dropout_p;
    uint64_t dropout_seed;
} vkattn_ref_attention_args;

VKATTN_API vkattn_result vkattn_ref_attention(const vkattn_ref_attention_args *args, char *error,
                                              size_t error_size);

/* The gradients of vkattn_attention_backward, in double from the inputs
 * alone: forward.out and forward.lse are not read (may be absent; the
 * reference recomputes both), forward.weights must be absent. dout, dq,
 * dk, dv, dsinks as in vkattn_attention_backward_args (f32, f16 or bf16;
 * dsinks f32 [Hq], optional, needs forward.sinks). */
typedef struct vkattn_ref_attention_backward_args {
    vkattn_ref_attention_args forward;
    vkattn_host_tensor dout, dq, dk, dv, dsinks;
} vkattn_ref_attention_backward_args;

VKATTN_API vkattn_result vkattn_ref_attention_backward(
    const vkattn_ref_attention_backward_args *args, char *error, size_t error_size);

/* vkattn_attention_merge on host tensors (f32 or f16 outputs, f32 LSE). */
typedef struct vkattn_ref_attention_merge_args {
    vkattn_host_tensor out_a, lse_a, out_b, lse_b;
    vkattn_host_tensor out, lse; /* lse optional */
} vkattn_ref_attention_merge_args;

VKATTN_API vkattn_result vkattn_ref_attention_merge(const vkattn_ref_attention_merge_args *args,
                                                    char *error, size_t error_size);

/* RoPE (see "rotary positions"), sin and cos in double: x and out
 * [B, H, T, D] (out may be x: in place); positions int32 [B, T]
 * (optional: data NULL means position_offset + t), each in
 * [0, VKATTN_ROPE_MAX_POSITION] (others are refused by name). */
typedef struct vkattn_ref_rope_args {
    vkattn_host_tensor x, out;
    vkattn_rope_desc rope;
    vkattn_host_tensor positions; /* optional */
    uint32_t position_offset;
} vkattn_ref_rope_args;

VKATTN_API vkattn_result vkattn_ref_rope(const vkattn_ref_rope_args *args, char *error,
                                         size_t error_size);

/* Quantization to ggml's blocks (layouts: vkattn_dtype), in f32 arithmetic
 * exactly as ggml's reference quantizers (quantize_row_<type>_ref), so a
 * cache the GPU fills is compared with this bit for bit:
 *   q8_0: amax = max |x|; d = amax / 127; id = d ? 1 / d : 0;
 *         q[i] = roundf(x[i] * id) (halves away from zero)
 *   q4_0: m = the value of largest magnitude (the first on ties);
 *         d = m / -8; id = d ? 1 / d : 0;
 *         q[i] = min(15, (int)(x[i] * id + 8.5)) (truncated; no fused
 *         multiply-add)
 *   q5_0: as q4_0 with d = m / -16, q[i] = min(31, (int)(x[i] * id + 16.5))
 *   q4_1, q5_1: lo, hi = min, max of x; d = (hi - lo) / 15 (31);
 *         id = d ? 1 / d : 0; m = lo; q[i] = (int)((x[i] - lo) * id + 0.5),
 *         q4_1's at most 15
 *   iq4_nl: m as q4_0's; d0 = m / -127; each q[i] the level of T nearest
 *         x[i] / d0 (ties to the upper one); then d = sum(w q x) / sum(w
 *         q^2) with w = x^2, summed in order (0 when amax < 1e-15: the
 *         nibbles are then 0)
 * and d, m stored as f16 (vkattn_f32_to_f16: to nearest even). n values
 * from x into n / 32 blocks at `out` (vkattn_dtype_row_bytes(dtype, n)
 * bytes). Refused, with nothing written: a dtype that is not quantized, n
 * not a multiple of 32 (VKATTN_ERROR_INVALID_ARGUMENT), a NaN or infinite
 * value, and a block whose scale f16 cannot hold (|x| over 65504 * 127
 * for q8_0, 65504 * 8 for q4_0, 65504 * 16 for q5_0, 65504 * 18 for
 * iq4_nl, 65504 for q4_1 and q5_1), each naming the element. */
VKATTN_API vkattn_result vkattn_ref_quantize(vkattn_dtype dtype, const float *x, uint64_t n,
                                             void *out, char *error, size_t error_size);
VKATTN_API vkattn_result vkattn_ref_quantize_q8_0(const float *x, uint64_t n, void *out,
                                                  char *error, size_t error_size);
VKATTN_API vkattn_result vkattn_ref_quantize_q4_0(const float *x, uint64_t n, void *out,
                                                  char *error, size_t error_size);
/* The values of n / 32 blocks: d * q, d * q + m or d * T[q] in f32, as
 * the kernels read them. */
VKATTN_API vkattn_result vkattn_ref_dequantize(vkattn_dtype dtype, const void *in, uint64_t n,
                                               float *out, char *error, size_t error_size);

/* y = x W^T + b: x [M, K] or [B, T, K]; w [N, K]; b [N] (optional);
 * y [M, N] or [B, T, N]. w may be q8_0 (contiguous rows of K / 32 blocks,
 * K a multiple of 32), each value d * q in f32 as the kernels read it. */
typedef struct vkattn_ref_linear_args {
    vkattn_host_tensor x, w, b, y;
} vkattn_ref_linear_args;

VKATTN_API vkattn_result vkattn_ref_linear(const vkattn_ref_linear_args *args, char *error,
                                           size_t error_size);

/* The gradients of vkattn_ref_linear in double: dx = dy W, dw = dy^T x,
 * db = column sums of dy (each optional: data NULL; f32 outputs). x and w
 * f32, f16 or bf16 (q8_0 refused), dy f32. */
typedef struct vkattn_ref_linear_backward_args {
    vkattn_ref_linear_args forward; /* x and w; b and y not read */
    vkattn_host_tensor dy, dx, dw, db;
} vkattn_ref_linear_backward_args;

VKATTN_API vkattn_result vkattn_ref_linear_backward(const vkattn_ref_linear_backward_args *args,
                                                    char *error, size_t error_size);

/* A whole MHA layer: see "MHA layer", with the desc's QK-norm, RoPE and
 * scale. x [B, Tq, Dm]; kv [B, Tk, Dkv] (optional: data NULL means
 * self-attention); value [B, Tk, Dvin] (optional: data NULL means the
 * values come from kv, or x); y [B, Tq, Dm]; masks and weights as for attention;
 * positions int32 [B, Tq] as in vkattn_mha_forward_args (optional, RoPE
 * layers only; data NULL: 0..Tq-1). All f32. */
typedef struct vkattn_ref_mha_args {
    vkattn_host_tensor x, kv, y;
    vkattn_host_tensor mask;        /* optional */
    vkattn_host_tensor key_padding; /* optional */
    vkattn_host_tensor weights;     /* optional */
    bool causal;
    vkattn_bool_mask bool_mask;
    vkattn_host_tensor positions; /* optional */
    vkattn_causal_align causal_align;
    /* The cache the layer's steps would keep K and V in: 0 (f32) for none;
     * f16 and bf16 round K (after QK-norm and RoPE) and V to nearest even
     * (vkattn_f32_to_f16 / vkattn_f32_to_bf16), q8_0 and q4_0 through
     * vkattn_ref_quantize and back, as such a cache holds them (a cache
     * of another dtype than desc->dtype f16 or bf16 gets them rounded to
     * that first, as the layer's steps stage them; a quantized one's rows
     * padded with zeros to whole blocks, as such a cache keeps them). Other
     * values are refused. */
    vkattn_dtype kv_cache_dtype;
    /* optional, f32 [Hq] or [B, Hq]: as in vkattn_mha_forward_args */
    vkattn_host_tensor head_mask;
    vkattn_host_tensor value; /* optional */
    /* packed ragged batches, as in vkattn_mha_forward_args */
    uint32_t sequences;
    const int32_t *q_offsets, *k_offsets;
    /* dropout, as in vkattn_mha_forward_args */
    float dropout_p;
    uint64_t dropout_seed;
} vkattn_ref_mha_args;

VKATTN_API vkattn_result vkattn_ref_mha(const vkattn_mha_desc *desc,
                                        const vkattn_mha_weights *weights,
                                        const vkattn_ref_mha_args *args, char *error,
                                        size_t error_size);

/* The gradients of vkattn_ref_mha (see "MHA layer backward"), in double
 * from the inputs alone (forward.y is not read). Weights f32 (weights->dtype
 * f32), given apart (wq, wk, wv) or packed (wqkv); a desc whose weight_dtype
 * (or dtype) is f16 or bf16 differentiates through the weights rounded to
 * it, as vkattn_ref_mha multiplies by them. dy f32 [B, Tq, Dm]; outputs
 * f32, each optional (data NULL), shapes as vkattn_mha_grads': dx
 * [B, Tq, Dm], dkv and dvalue as forward.kv and forward.value; the
 * weights' gradients in `grads` (host tensors with the same names; for
 * packed weights, wq, wk and wv at consecutive rows of one array give
 * wqkv's layout). Not taken: packed sequences, a head mask,
 * kv_cache_dtype, add_bias_kv and add_zero_attn, forward.weights, and a
 * q8_0 weight_dtype. */
typedef struct vkattn_ref_mha_grads {
    vkattn_host_tensor wq, wk, wv, wo;
    vkattn_host_tensor bq, bk, bv, bo;
    vkattn_host_tensor q_norm, k_norm, sinks;
} vkattn_ref_mha_grads;

typedef struct vkattn_ref_mha_backward_args {
    vkattn_ref_mha_args forward;
    vkattn_host_tensor dy;
    vkattn_host_tensor dx, dkv, dvalue;
    vkattn_ref_mha_grads grads;
} vkattn_ref_mha_backward_args;

VKATTN_API vkattn_result vkattn_ref_mha_backward(const vkattn_mha_desc *desc,
                                                 const vkattn_mha_weights *weights,
                                                 const vkattn_ref_mha_backward_args *args,
                                                 char *error, size_t error_size);

#endif /* VKATTN_REFERENCE_H */
