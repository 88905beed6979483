/* vkattn/ops.h - part of vkattn.h: the ops on tensors: convert, linear, attention and the MHA layer.
 * Include <vkattn.h>, which includes every part in order. */
#ifndef VKATTN_OPS_H
#define VKATTN_OPS_H

#ifndef VKATTN_H
#error "include <vkattn.h>, not its parts"
#endif

/* ---------------------------------------------------------------- convert */

/* dst = scale * src, element-wise over contiguous tensors with the same number
 * of elements, converting between f32, f16 and bf16 (any direction, or the
 * same dtype). Rounds to nearest even when storing f16 or bf16 (as
 * vkattn_f32_to_f16 / vkattn_f32_to_bf16 do). scale 0 means 1. Tensors
 * larger than the device's binding range are processed in windows. */
typedef struct vkattn_convert_args {
    vkattn_tensor src;
    vkattn_tensor dst;
    float scale;
} vkattn_convert_args;

VKATTN_API vkattn_result vkattn_cmd_convert(vkattn_context *ctx, VkCommandBuffer cmd,
                                            const vkattn_convert_args *args);
/* Submit-and-wait form of vkattn_cmd_convert. */
VKATTN_API vkattn_result vkattn_convert(vkattn_context *ctx, const vkattn_convert_args *args);

/* ------------------------------------------------------- rotary positions
 *
 * Rotary position embeddings (RoPE) as Hugging Face transformers computes
 * them. Of each head's D dimensions the first R ("rotary dims", even, at
 * most D) are rotated by the token's position; dimensions R..D-1 pass
 * through untouched (GPT-NeoX / Phi partial rotary). For i < R/2:
 *     inv_freq[i] = theta^(-2i/R)   (then frequency scaling, below)
 *     angle[i]    = position * inv_freq[i]
 * and the pair (x, y) of frequency i becomes
 *     (x cos(angle[i]) - y sin(angle[i]),  x sin(angle[i]) + y cos(angle[i])).
 * Pairings:
 *     NEOX  x = dim i, y = dim i + R/2 ("rotate_half": HF Llama, Qwen,
 *           Mistral, Gemma, GPT-NeoX);
 *     GPTJ  x = dim 2i, y = dim 2i + 1 (interleaved: GPT-J, Meta's original
 *           Llama code, ggml's default mode).
 * Frequency scaling:
 *     NONE    as above;
 *     LINEAR  positions divided by `factor` (inv_freq[i] / factor);
 *     LLAMA3  HF's rope_type "llama3": with wavelen = 2 pi / inv_freq[i],
 *             low = original_max_positions / low_freq_factor and
 *             high = original_max_positions / high_freq_factor,
 *               wavelen < high:  inv_freq[i] unchanged;
 *               wavelen > low:   inv_freq[i] / factor;
 *               otherwise:       (1 - s) inv_freq[i] / factor + s inv_freq[i],
 *                                s = (original_max_positions / wavelen -
 *                                     low_freq_factor) /
 *                                    (high_freq_factor - low_freq_factor).
 * Frequencies and angles are computed in double on the host; the GPU
 * combines tables of cos/sin in fp32 (error a few ulp at any position),
 * so long positions lose no accuracy. Positions are integers in
 * [0, VKATTN_ROPE_MAX_POSITION]. */
#define VKATTN_ROPE_MAX_POSITION 16777215 /* 2^24 - 1 */

typedef enum vkattn_rope_style {
    VKATTN_ROPE_NEOX = 0, /* rotate_half: dim i pairs with dim i + R/2 */
    VKATTN_ROPE_GPTJ = 1, /* interleaved: dim 2i pairs with dim 2i + 1 */
} vkattn_rope_style;

typedef enum vkattn_rope_scaling {
    VKATTN_ROPE_SCALING_NONE = 0,
    VKATTN_ROPE_SCALING_LINEAR = 1,
    VKATTN_ROPE_SCALING_LLAMA3 = 2,
} vkattn_rope_scaling;

typedef struct vkattn_rope_desc {
    /* The base. 0: no rotary embedding (the layer's default); otherwise a
     * finite value > 0 (Llama 2: 10000, Llama 3: 500000). */
    float theta;
    uint32_t dims;                   /* R, even, <= head_dim; 0: head_dim */
    vkattn_rope_style style;         /* NEOX (default) or GPTJ */
    vkattn_rope_scaling scaling;     /* NONE (default), LINEAR or LLAMA3 */
    float factor;                    /* LINEAR and LLAMA3: finite, > 0 */
    float low_freq_factor;           /* LLAMA3: finite, > 0 */
    float high_freq_factor;          /* LLAMA3: finite, > low_freq_factor */
    uint32_t original_max_positions; /* LLAMA3: > 0 (Llama 3.1: 8192) */
    /* Room for other scalings (YaRN, LongRoPE) without breaking the ABI:
     * must be zero. */
    float reserved[8];
} vkattn_rope_desc;

/* RoPE on tensors you hold: x [B, H, T, D] (strides free, last one 1, so
 * [B, T, H, D] storage is shape [B, H, T, D] with strides {T*H*D, D, H*D,
 * 1}); out the same shape and dtype, or buffer NULL to rotate x in place
 * (out may also be x itself). f32, f16 or bf16 (rounded to nearest even).
 * Positions: `positions` int32
 * [B, T] (contiguous; values in [0, VKATTN_ROPE_MAX_POSITION]: the kernel
 * clamps others), or when its buffer is NULL, position_offset + t
 * (position_offset + T - 1 must not pass VKATTN_ROPE_MAX_POSITION). out
 * is x itself or shares no byte with it. The context keeps the angle table
 * of each distinct rope desc (4 * 64 * dims floats) for its life, made on
 * first use without a submission; at most 64 distinct descs per context
 * (VKATTN_ERROR_OUT_OF_RANGE past that). */
typedef struct vkattn_rope_args {
    vkattn_tensor x;
    vkattn_tensor out; /* optional (buffer NULL): in place */
    vkattn_rope_desc rope;
    vkattn_tensor positions; /* optional: int32 [B, T] */
    uint32_t position_offset;
} vkattn_rope_args;

VKATTN_API vkattn_result vkattn_cmd_rope(vkattn_context *ctx, VkCommandBuffer cmd,
                                         const vkattn_rope_args *args);
/* Submit-and-wait form. */
VKATTN_API vkattn_result vkattn_rope(vkattn_context *ctx, const vkattn_rope_args *args);

/* Where causal queries sit (see "attention semantics"). */
typedef enum vkattn_causal_align {
    VKATTN_CAUSAL_BOTTOM_RIGHT = 0, /* query i at i + Tk - Tq (the default) */
    VKATTN_CAUSAL_TOP_LEFT = 1,     /* query i at i (PyTorch SDPA's is_causal) */
} vkattn_causal_align;

/* What a boolean (u8) mask's nonzero values mean (see "attention
 * semantics"); float masks are additive and ignore it. */
typedef enum vkattn_bool_mask {
    VKATTN_BOOL_MASK_TRUE_ATTENDS = 0, /* nonzero: visible (SDPA's attn_mask; the default) */
    VKATTN_BOOL_MASK_TRUE_BLOCKS = 1,  /* nonzero: hidden (nn.MultiheadAttention's attn_mask) */
} vkattn_bool_mask;

/* ------------------------------------------------------ attention semantics
 *
 * Shapes: B batch, Hq query heads, Hkv key/value heads, Tq queries, Tk keys,
 * Dk head dimension of q and k, Dv head dimension of v and out (D where
 * they are equal).
 *     q   [B, Hq,  Tq, Dk]
 *     k   [B, Hkv, Tk, Dk]
 *     v   [B, Hkv, Tk, Dv]
 *     out [B, Hq,  Tq, Dv]
 * Strides are free, so [B, T, H, D] storage is passed as shape [B, H, T, D]
 * with strides {T*H*D, D, H*D, 1} - no copies either way. q may also be
 * rank 3, [Hq, Tq, Dk]: one query for every batch row of k and v (as
 * PyTorch's scaled_dot_product_attention broadcasts it); out is still
 * [B, Hq, Tq, Dv]. (vkattn_attention_chunk takes rank-4 tensors only.)
 * GQA: Hq % Hkv == 0 and query head h reads key/value head h / (Hq / Hkv):
 * Hkv == Hq is MHA, Hkv == 1 is MQA. K and V are never repeated.
 * Head dims (vkattn_attention and vkattn_ref_attention): Dk and Dv are each
 * any size from 1 to 576 and may differ (out's last dimension is v's;
 * DeepSeek MLA's absorbed attention is Dk 576, Dv 512, Hkv 1).
 *   - Both multiples of 8 up to 256: the fast kernels.
 *   - Multiples of 8 above 256 (either): a slower path - the subgroup
 *     kernels keep a quarter of the rows per subgroup and one key group per
 *     block, the shared-memory kernels the largest tile the device's shared
 *     memory holds (with 32 KiB, 1 row x 4 keys at Dk 576 / Dv 512), so K
 *     and V are read more often.
 *   - Either not a multiple of 8 (PyTorch's 2, 5, 15, 21, 203, ...): the
 *     slowest path - the same small tiles, storage buffers only (no texel
 *     views), rows of q, k, v and out read and written one element at a
 *     time and zero-padded to a multiple of 8 inside the kernel (the
 *     caller's tensors are never copied). An out of bf16, or of f16 on a
 *     device without 16-bit storage, is kept as pairs in 32-bit words and
 *     cannot be written per element, so a Dv that is not a multiple of 8 is
 *     VKATTN_ERROR_UNSUPPORTED there (such a Dk with Dv a multiple of 8
 *     runs).
 * vkattn_cmd_attention_merge takes out's D (Dv; a multiple of 4). The MHA
 * layer (desc.head_dim, desc.v_head_dim) and the KV cache take the same
 * head dims by the same rules.
 *
 * score(i, j) = scale * dot(q_i, k_j) + mask(i, j); scale 0 means 1/sqrt(Dk).
 * out_i = sum_j softmax_j(score(i, .)) v_j over the visible keys j.
 * Masks, all optional and combinable:
 *   causal       key j is visible to query i iff j <= i + (Tk - Tq)
 *                (bottom-right aligned, as a KV cache needs);
 *   mask         f32, f16 or bf16: additive (-inf hides a key); u8: boolean, its
 *                nonzero values visible (bool_mask TRUE_ATTENDS, the
 *                default, as SDPA's attn_mask) or hidden (TRUE_BLOCKS, as
 *                nn.MultiheadAttention's attn_mask), an element's zero the
 *                opposite. Shapes, any dimension 1 to broadcast it (read
 *                through a stride of 0, never expanded in memory):
 *                  rank 2 [Tq, Tk]            (every batch and head),
 *                  rank 3 [B*Hq, Tq, Tk]      (nn.MultiheadAttention's
 *                                              3-D attn_mask: row b*Hq + h;
 *                                              not numpy's [Hq, Tq, Tk]),
 *                  rank 4 [B, Hq, Tq, Tk],
 *                e.g. [1, Tk], [Tq, 1], [B, 1, 1, Tk] or [1, 1, Tq, Tk];
 *   key_padding  [B, Tk] u8: 1 = real token, 0 = padding (hidden).
 * A query row with no visible key (everything hidden or -inf) gives zeros in
 * out and in the weights, never NaN.
 * Attention weights (optional, f32): the softmax probabilities, rank 3
 * [B, Tq, Tk] averaged over the Hq heads, or rank 4 [B, Hq, Tq, Tk] per head.
 *
 * Score modifiers (all optional; i' is query i's aligned position: i + Tk -
 * Tq with bottom-right alignment, the default, or i with top-left):
 *   causal_align  VKATTN_CAUSAL_BOTTOM_RIGHT: causal means j <= i + Tk - Tq
 *                 (what a KV cache needs); VKATTN_CAUSAL_TOP_LEFT: j <= i
 *                 (PyTorch SDPA's is_causal). It also places queries for
 *                 the window and ALiBi, causal or not.
 *   window W      (0: none) key j is visible iff i' - j < W and, without
 *                 causal, also j - i' < W: W counts the query's own position,
 *                 as HF's and llama.cpp's sliding_window do. Key tiles wholly
 *                 outside every row's window are never loaded.
 *   softcap C     (0: none) s = C * tanh(s / C) on the scaled score, before
 *                 any additive mask or bias (Gemma 2).
 *   sinks         f32 [Hq]: a logit per query head that joins the softmax's
 *                 denominator and contributes no value (gpt-oss):
 *                 p_j = exp(s_j) / (exp(sink_h) + sum_k exp(s_k)). A row with
 *                 no visible key still gives zeros.
 *   ALiBi         slopes f32 [Hq], or alibi_max_bias B > 0 for the standard
 *                 ones: n = 2^floor(log2 Hq), m0 = 2^(-B/n), m1 = 2^(-B/(2n)),
 *                 slope_h = m0^(h+1) for h < n, else m1^(2(h-n)+1); the score
 *                 gets -slope_h * |i' - j| (BLOOM, MPT, Falcon).
 * score(i, j) = softcap(scale * dot(q_i, k_j)) + mask(i, j) + alibi(i, j).
 * LSE (optional output, f32 [B, Hq, Tq]): the natural log of the row's
 * softmax denominator in that final score domain (sinks included), -inf for
 * a row with nothing visible. Two results over disjoint key sets combine
 * with vkattn_cmd_attention_merge exactly as attending over the union would.
 *
 * Dropout (training; dropout_p in [0, 1), 0: none): after the softmax, each
 * probability p(b, h, i, j) of batch row b (the sequence, when packed),
 * query head h, query i and key j is kept and scaled by 1 / (1 - dropout_p)
 * when vkattn_dropout_bits(dropout_seed, b, h, i, j) >= vkattn_dropout_threshold(dropout_p),
 * else zeroed; out_i = sum_j p'(i, j) v_j. The mask is a pure function of
 * those five numbers, so the backward (and the reference) regenerate it
 * bit for bit, in any order, on any device. The LSE and the attention
 * weights are of the probabilities before dropout; sinks never drop.
 */

/* Philox4x32-10 (Salmon et al., SC'11; Random123's constants) of counter
 * {j / 4, i, h, b} and key {seed & 0xffffffff, seed >> 32}: word j % 4 of
 * its four outputs. */
VKATTN_API uint32_t vkattn_dropout_bits(uint64_t seed, uint32_t b, uint32_t h, uint32_t i,
                                        uint32_t j);
/* The words below which a probability drops: floor(p * 2^32) for p in
 * [0, 1) (0 for p <= 0; p >= 1 or NaN is refused by the ops by name). */
VKATTN_API uint32_t vkattn_dropout_threshold(float p);
/* Philox4x32-10 itself: ctr and key in, the four words out (ctr[0] the
 * low word). */
VKATTN_API void vkattn_philox4x32_10(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4]);

/* ------------------------------------------------------------- MHA layer
 *
 * Input X [B, Tq, Dm]; keys come from C [B, Tk, Dkv] and values from
 * C' [B, Tk, Dvin] (torch's key and value: C = X for self-attention, then
 * Tk = Tq; C' = C unless the forward is given a value input of its own,
 * which a layer with desc.value_dim != kv_dim needs). Weights use the
 * torch.nn.Linear layout [out_features, in_features], y = x W^T + b, so
 * PyTorch weights load as is (kdim and vdim: Dkv and Dvin):
 *     Wq [Hq*Dk, Dm]   Wk [Hkv*Dk, Dkv]   Wv [Hkv*Dv, Dvin]   Wo [Dm, Hq*Dv]
 *     Q = X Wq^T + bq, K = C Wk^T + bk, V = C' Wv^T + bv (split into heads:
 *     feature h*D + d of a row is head h, dimension d),
 *     O = attention(Q, K, V) merged back to [B, Tq, Hq*Dv],
 *     Y = O Wo^T + bo.
 * Dk = desc.head_dim (Dh), Dv = desc.v_head_dim (0: Dk; DeepSeek's MLA: 192
 * and 128), each 1 to 576; multiples of 8 up to 256 take the fast kernels
 * (see "attention semantics"). Over a KV cache whose head dims are not
 * multiples of 8, a step's K and V are projected to its scratch and then
 * appended (an extra pass), as for a quantized cache.
 * Modern decoder layers (self-attention only) add, in this order, to each
 * head of Q and K after the projection and its bias:
 *   QK-norm (desc.qk_norm): per-head RMSNorm with weights w_q, w_k [Dh]:
 *     y = x * rsqrt(mean over the head's Dh dims of x^2 + eps) * w
 *     (Qwen3, Gemma 3, OLMo 2);
 *   RoPE (desc.rope.theta > 0): see "rotary positions"; the forward uses
 *     positions 0..T-1 (or args->positions), a step each sequence's cache
 *     length + t. V is never rotated; KV caches hold rotated K.
 * The attention scale is desc.scale (0: 1/sqrt(Dh); Gemma:
 * query_pre_attn_scalar^-0.5). The norm and the rotation happen in the
 * projection GEMM's epilogue, where each head's row is already held: no
 * extra pass over Q or K.
 * A packed Wqkv [(Hq + Hkv)*Dk + Hkv*Dv, Dm] holds the rows of Wq, then Wk, then Wv
 * (torch's in_proj_weight); it needs Dkv == Dvin == Dm.
 */

typedef struct vkattn_mha_desc {
    uint32_t embed_dim;    /* Dm, required */
    uint32_t num_heads;    /* Hq, required */
    uint32_t num_kv_heads; /* Hkv; 0: num_heads. Must divide num_heads. */
    uint32_t head_dim;     /* Dh = Dk; 0: embed_dim / num_heads, which must divide exactly */
    uint32_t v_head_dim;   /* Dv; 0: head_dim */
    uint32_t kv_dim;       /* Dkv, the width of C; 0: embed_dim */
    bool bias;             /* the four projections have biases */
    vkattn_dtype dtype;    /* storage of weights and activations: f32 (default), f16 or bf16 */
    /* Attention scale; 0: 1/sqrt(head_dim). Finite and > 0 otherwise. */
    float scale;
    /* Rotary position embeddings of Q and K; theta 0 (default): none.
     * Needs self-attention (kv_dim == embed_dim). */
    vkattn_rope_desc rope;
    /* Per-head RMSNorm of Q and K before RoPE, with weights q_norm and
     * k_norm of vkattn_mha_weights; norm_eps 0: 1e-6. */
    bool qk_norm;
    float norm_eps;
    /* Score modifiers of the layer's attention (see "attention semantics"),
     * in the forward and the steps: sliding window (0: none), logit softcap
     * (0: none), sinks (weights->sinks [Hq]), ALiBi (weights->alibi_slopes
     * [Hq] when given, else the standard slopes of alibi_max_bias, 0: 8). */
    uint32_t window;
    float softcap;
    bool sinks;
    bool alibi;
    float alibi_max_bias;
    /* Storage of the projection weights on the device, when it differs
     * from dtype's: f16, bf16 or q8_0 (0, f32: dtype's; an f16 or bf16
     * layer cannot keep f32 weights). q8_0 is ggml's blocks of 32 along
     * in_features (see vkattn_linear), its biases f32: it needs embed_dim,
     * kv_dim and num_heads * v_head_dim multiples of 64. Weights given in
     * another dtype are converted (rounded to nearest even, or quantized as
     * vkattn_ref_quantize does) once, by vkattn_mha_set_weights. */
    vkattn_dtype weight_dtype;
    /* Dvin, the width of the value input C' (torch's vdim); 0: kv_dim.
     * When it differs from kv_dim the forward takes args->value apart from
     * args->kv; such a layer (as any whose kv_dim or value_dim is not
     * embed_dim) is cross-attention only: no RoPE, QK-norm or steps. */
    uint32_t value_dim;
    /* torch's add_bias_kv and add_zero_attn: after the projections, every
     * KV head's keys and values get one more row, bias_k and bias_v
     * (weights->bias_k [Hkv*Dk], bias_v [Hkv*Dv]: feature h*D + d is head h),
     * then, with add_zero_attn, a row of zeros (a score of 0 that adds
     * nothing to the output). The appended rows are visible to every query
     * whatever causal, the window or the caller's masks say (torch pads its
     * masks with "visible" for them); masks and key_padding keep the
     * caller's Tk columns. They are not stored as keys anywhere, neither
     * in the scratch nor in a KV cache: the forward and the steps attend to
     * the zero row as a sink of logit 0 and to the bias row in a pass of
     * its own, merged by LSE (vkattn_cmd_attention_merge), so with
     * add_bias_kv Dv must be a multiple of 4. A step's queries see them as
     * the forward's do (a prefill in steps equals the causal forward). The
     * forward's attention weights (args->weights) then have Tk + 1 or + 2
     * columns, the rows' last (bias, then zero), as torch's need_weights
     * gives. Not with sinks, ALiBi, RoPE or QK-norm (torch has none), and
     * not yet with vkattn_mha_prune_heads. */
    bool add_bias_kv;
    bool add_zero_attn;
} vkattn_mha_desc;

/* Weights on the host, torch.nn.Linear layout (see above). Give either
 * wq, wk and wv, or wqkv; wo always. Biases (when desc.bias): bq, bk, bv or
 * bqkv, and bo; NULL biases are zeros. `dtype` is the element type behind
 * the projection weights and biases (wq .. bo) of this call: f32 (the
 * default), or f16 or bf16 as they come from a checkpoint (uint16_t bits;
 * cast the pointers to const float *), converted straight to the layer's
 * weight dtype (f16 into f16 weights is copied as is), or q8_0 blocks for a
 * layer whose weight_dtype is q8_0 (copied as is; wqkv's rows are those of
 * wq, wk and wv back to back; the biases are then f32). The norm weights,
 * sinks and slopes are always f32. */
typedef struct vkattn_mha_weights {
    const float *wq, *wk, *wv; /* [Hq*Dk, Dm], [Hkv*Dk, Dkv], [Hkv*Dv, Dvin] */
    const float *wqkv;         /* [(Hq + Hkv)*Dk + Hkv*Dv, Dm] */
    const float *wo;           /* [Dm, Hq*Dv] */
    const float *bq, *bk, *bv; /* [Hq*Dk], [Hkv*Dk], [Hkv*Dv] */
    const float *bqkv;         /* [(Hq + Hkv)*Dk + Hkv*Dv] */
    const float *bo;           /* [Dm] */
    /* QK-norm weights [Dh] each, required when desc.qk_norm (else ignored) */
    const float *q_norm, *k_norm;
    /* [Hq] each: attention sinks (required when desc.sinks), ALiBi slopes
     * (optional with desc.alibi; NULL: the standard slopes) */
    const float *sinks, *alibi_slopes;
    vkattn_dtype dtype; /* of wq .. bo: f32 (0), f16 or bf16 */
    /* desc.add_bias_kv: the appended key and value rows, f32 [Hkv*Dk] and
     * [Hkv*Dv] (torch's bias_k and bias_v, [1, 1, E] there), stored in
     * the layer's dtype; required with it, else ignored */
    const float *bias_k, *bias_v;
} vkattn_mha_weights;

/* ------------------------------------------------------------------ linear */

/* y = x W^T + b (torch.nn.Linear). x [M, K] or [B, T, K]; w [N, K];
 * b [N] (optional: buffer NULL); y [M, N] or [B, T, N] (x's leading shape).
 * dtypes: x and y f32, f16 or bf16 (the same); w and b f32, f16 or bf16
 * (the same; bf16 operands are read as 32-bit words: from storage buffers,
 * or on the subgroup kernels through rgba32ui texel views, 8 a fetch),
 * or w q8_0 with b f32; accumulation is fp32.
 * q8_0 weights are ggml's layout: each row of w is K / 32 blocks of 34 bytes
 * (an f16 scale d, then 32 int8 q; value = d * q), rows back to back
 * (vkattn_dtype_row_bytes(VKATTN_DTYPE_Q8_0, N * K) bytes; vkattn_ref_quantize
 * makes them). K must be a multiple of 64, w contiguous (default strides or
 * {K, 1}) at an offset that is a multiple of the device's
 * minStorageBufferOffsetAlignment and minTexelBufferOffsetAlignment (and
 * of 16), x's strides and offset multiples of 4 elements. The GEMM kernels
 * read them from storage buffers a quad at a time; the few-row (GEMV)
 * kernels a block at a time, or, with texel inputs and K a multiple of
 * 256, 8 blocks as 17 rgba32ui texels. Values are dequantized in
 * registers: no dequantized copy exists. The last dimension of every tensor must be contiguous
 * (stride 1); other strides are free. Offsets: multiples of 16 bytes. */
typedef struct vkattn_linear_args {
    vkattn_tensor x, w, b, y;
} vkattn_linear_args;

VKATTN_API vkattn_result vkattn_cmd_linear(vkattn_context *ctx, VkCommandBuffer cmd,
                                           const vkattn_linear_args *args);
/* Submit-and-wait form. */
VKATTN_API vkattn_result vkattn_linear(vkattn_context *ctx, const vkattn_linear_args *args);

/* The gradients of y = x W^T + b from dy (y's shape), the two backward
 * GEMMs and a column sum:
 *     dx = dy W        [M, K]  (x's shape)
 *     dw = dy^T x      [N, K]  (w's shape)
 *     db = sum over rows of dy   [N]
 * forward.x, forward.w as the forward took them (f32, f16 or bf16; q8_0
 * weights are refused: they are not trained); forward.b and forward.y are
 * not read. dy f32, f16 or bf16; the outputs f32 whatever the inputs'
 * dtype (what an optimizer's master weights take), each optional (buffer
 * NULL: not computed), last dimension contiguous; with `accumulate` they
 * are added to what the outputs hold (torch's .grad +=), else overwritten.
 * Tiled, f32 accumulation, deterministic (no atomics). */
typedef struct vkattn_linear_backward_args {
    vkattn_linear_args forward;
    vkattn_tensor dy;
    vkattn_tensor dx, dw, db; /* outputs, f32 */
    bool accumulate;
} vkattn_linear_backward_args;

VKATTN_API vkattn_result vkattn_cmd_linear_backward(vkattn_context *ctx, VkCommandBuffer cmd,
                                                    const vkattn_linear_backward_args *args);
/* Submit-and-wait form. */
VKATTN_API vkattn_result vkattn_linear_backward(vkattn_context *ctx,
                                                const vkattn_linear_backward_args *args);

/* --------------------------------------------------------------- attention */

/* Attention on tensors: see "attention semantics" above for shapes, GQA and
 * masks. Tiled (FlashAttention-2): the Tq x Tk score matrix is never stored.
 * q and out share a dtype; k and v are each f32, f16 or bf16 (bf16 is read
 * and written as 32-bit words on every device, storage-buffer kernels only,
 * and the output rounds to nearest even as vkattn_f32_to_bf16 does); k and
 * v may differ (llama.cpp's f16 K with f32 V), and either may be quantized
 * (q8_0, q4_0, q4_1, q5_0, q5_1, iq4_nl: ggml's blocks of 32 values along
 * its head dim, which must be a multiple of 32; shape in values, strides
 * counting values in whole blocks - the last 1, the others multiples of 32
 * - and the offset, in bytes, a multiple of the device's
 * minStorageBufferOffsetAlignment (at least 16): a runtime's own ggml cache,
 * [B, Tk, Hkv, D] included, passes as it is). Those calls read k and v from
 * storage buffers as 32-bit words, each unpacked (or dequantized) in its
 * own dtype, never converted or copied; mask f32, f16, bf16 or u8 (boolean); key_padding u8; weights f32. The last dimension of q, k, v and out
 * must be contiguous (stride 1), their other strides multiples of 4, their
 * offsets multiples of 16 bytes - except where the head dim is not a
 * multiple of 8 (Dk for q and k, Dv for v and out): there the other strides
 * are free and the offsets multiples of the element size. out must not
 * overlap the inputs. Attention
 * weights, when asked for, come from a separate, slower kernel; without them
 * the fast path runs alone. */
typedef struct vkattn_attention_args {
    vkattn_tensor q, k, v, out;
    vkattn_tensor mask;        /* optional (buffer NULL) */
    vkattn_tensor key_padding; /* optional (buffer NULL) */
    vkattn_tensor weights;     /* optional (buffer NULL) */
    bool causal;
    float scale;                /* 0: 1/sqrt(Dk) */
    vkattn_bool_mask bool_mask; /* the meaning of a u8 mask's nonzero values */
    /* Score modifiers (see "attention semantics"); zeros: none. sinks and
     * alibi_slopes are contiguous and finite (device values are not
     * checked; the reference and the CLI refuse NaN/inf by element); lse's
     * last (query) stride is 1. A window reaching every key is none. */
    vkattn_causal_align causal_align;
    uint32_t window;
    float softcap;              /* 0 or finite > 0 */
    vkattn_tensor sinks;        /* optional: f32 [Hq] */
    vkattn_tensor alibi_slopes; /* optional: f32 [Hq], finite */
    float alibi_max_bias;       /* 0 or finite > 0; not with alibi_slopes */
    vkattn_tensor lse;          /* optional output: f32 [B, Hq, Tq] */
    /* Optional head mask (Hugging Face's head_mask): f32 [Hq] or [B, Hq]
     * (B may be 1: every batch row), heads contiguous. Head h's output of
     * batch row b is multiplied by head_mask[b, h] (0 removes the head, 1
     * keeps it, any other value scales it), and so are its attention
     * weights (per head; the averaged ones average the gated heads). Applied
     * by a small in-place pass over out after attention (out kept as pairs
     * in 32-bit words needs rows of whole quads); absent: no pass at all. */
    vkattn_tensor head_mask;
    /* Packed ragged batches (FlashAttention's varlen form). With
     * sequences > 0, q, out and lse hold that many sequences concatenated
     * along the token axis - q [1, Hq, sum Tq, Dk], out [1, Hq, sum Tq, Dv],
     * lse [1, Hq, sum Tq] - sequence i's queries at tokens
     * [q_offsets[i], q_offsets[i + 1]); k and v [1, Hkv, sum Tk, D] hold its
     * keys at [k_offsets[i], k_offsets[i + 1]) (k_offsets NULL: q_offsets,
     * self-attention). The offsets are host int32 arrays [sequences + 1],
     * starting at 0, never decreasing, ending at the token count; read only
     * during the call. Each sequence is attended exactly as one batch row of
     * the padded call: causal (its causal_align), window, softcap, sinks,
     * ALiBi and scale apply per sequence; head_mask is [Hq], [1, Hq] or
     * [sequences, Hq]. An empty sequence (no queries) is skipped; one with
     * queries but no keys is refused. mask, key_padding and weights are
     * refused (their shapes have no packed form). No padding is computed:
     * each sequence is its own pass over its own rows, recorded one after
     * the other with a barrier between them (their bindings may share the
     * aligned bytes at a boundary); strides and offsets follow the rules
     * above for every sequence's view (a sequence starting where a
     * 16-byte-aligned offset cannot is refused by name). */
    uint32_t sequences;
    const int32_t *q_offsets, *k_offsets;
    /* Dropout on the probabilities (see "attention semantics"), for
     * training: dropout_p in [0, 1) (0: none), the mask drawn from
     * dropout_seed. */
    float dropout_p;
    uint64_t dropout_seed;
} vkattn_attention_args;

VKATTN_API vkattn_result vkattn_cmd_attention(vkattn_context *ctx, VkCommandBuffer cmd,
                                              const vkattn_attention_args *args);
/* Submit-and-wait form. */
VKATTN_API vkattn_result vkattn_attention(vkattn_context *ctx, const vkattn_attention_args *args);

/* Combines two attention results over disjoint key sets of the same queries
 * into the result over their union: with m = max(lse_a, lse_b),
 *     w_a = exp(lse_a - m), w_b = exp(lse_b - m),
 *     out = (w_a out_a + w_b out_b) / (w_a + w_b),  lse = m + log(w_a + w_b);
 * a row with both lse -inf gives zeros and -inf. out_a, out_b, out
 * [B, Hq, Tq, D] (one dtype, f32, f16 or bf16; D a multiple of 4); lse_a, lse_b
 * f32 [B, Hq, Tq]; lse optional (buffer NULL). out may be exactly out_a or
 * out_b and lse exactly lse_a or lse_b (same offset and strides: merged in
 * place); any other overlap is refused. */
typedef struct vkattn_attention_merge_args {
    vkattn_tensor out_a, lse_a, out_b, lse_b;
    vkattn_tensor out, lse;
} vkattn_attention_merge_args;

VKATTN_API vkattn_result vkattn_cmd_attention_merge(vkattn_context *ctx, VkCommandBuffer cmd,
                                                    const vkattn_attention_merge_args *args);
VKATTN_API vkattn_result vkattn_attention_merge(vkattn_context *ctx,
                                                const vkattn_attention_merge_args *args);

/* ------------------------------------------------------ attention backward
 *
 * The gradients of a loss through attention, FlashAttention-2 style: from q,
 * k, v, the forward's out and lse and dout (the loss's gradient of out), with
 *     P = the forward's probabilities, recomputed tile by tile from the
 *         scores and lse (never stored), P' = P after dropout,
 *     Dr_i = dot(dout_i, out_i),
 *     dv_j = sum_i P'(i, j) dout_i,
 *     dP'(i, j) = dot(dout_i, v_j),  dS(i, j) = P(i, j) (Z(i, j) dP'(i, j) - Dr_i)
 *         with Z the dropout's keep scale (1 / (1 - p) or 0; 1 without),
 *     dq_i = scale sum_j dS(i, j) c(i, j) k_j,  dk_j = scale sum_i dS(i, j) c(i, j) q_i,
 *         c = 1 - (softcap(x) / C)^2 with softcap, else 1,
 *     dsinks_h = -sum over batch rows and queries of P(sink) Dr_i.
 * GQA and MQA: dk and dv of a key/value head sum over its group's query
 * heads. A head mask's gate multiplies dout. Masks, padding, the window
 * and ALiBi get no gradient. Deterministic: every gradient element is one
 * workgroup's sum in a fixed order, no atomics, the same bits every run. */
typedef struct vkattn_attention_backward_args {
    /* The forward call as it was made: q, k, v (f32, f16 or bf16), out and
     * lse (required: what that call wrote), masks, modifiers, head mask and
     * dropout. Its weights must be absent; packed sequences and a rank-3
     * q are not taken. */
    vkattn_attention_args forward;
    vkattn_tensor dout;       /* out's shape, out's dtype */
    vkattn_tensor dq, dk, dv; /* outputs: q's, k's and v's shapes, f32, f16 or bf16 */
    vkattn_tensor dsinks;     /* optional output, f32 [Hq]; needs forward.sinks */
} vkattn_attention_backward_args;

VKATTN_API vkattn_result vkattn_cmd_attention_backward(vkattn_context *ctx, VkCommandBuffer cmd,
                                                       const vkattn_attention_backward_args *args);
/* Submit-and-wait form. */
VKATTN_API vkattn_result vkattn_attention_backward(vkattn_context *ctx,
                                                   const vkattn_attention_backward_args *args);

/* --------------------------------------------------------------- MHA layer */

/* One attention layer with its weights on the device (see "MHA layer"). The
 * forward pass is 3-4 dispatches: the Q/K/V projection (one packed GEMM for
 * self-attention, whose epilogue writes Q, K and V head-split), attention
 * (whose store merges the heads), and the output projection. */
typedef struct vkattn_mha vkattn_mha;

VKATTN_API vkattn_result vkattn_mha_create(vkattn_context *ctx, const vkattn_mha_desc *desc,
                                           vkattn_mha **out);
VKATTN_API void vkattn_mha_destroy(vkattn_mha *mha);
/* The resolved configuration (defaults filled in). */
VKATTN_API const vkattn_mha_desc *vkattn_mha_config(const vkattn_mha *mha);
/* Uploads the weights (host f32, f16 or bf16: weights->dtype, converted to
 * the layer's dtype).
 * Synchronous; must not run while a recorded forward of this layer is pending. */
VKATTN_API vkattn_result vkattn_mha_set_weights(vkattn_mha *mha, const vkattn_mha_weights *w);

/* Weights the device already holds (for instance a checkpoint uploaded once,
 * or shared by several layers): the layer records reads from these tensors,
 * with no copy, until weights are set again; they must stay alive and
 * unchanged while anything recorded runs, and are never destroyed by the
 * layer. Each is contiguous (torch.nn.Linear's layout), of the layer's
 * desc.weight_dtype (biases: that float type, f32 beside q8_0), at an
 * offset that is a multiple of 16 bytes (q8_0: of the device's storage and
 * texel offset alignments). A self-attention layer (kv_dim == value_dim ==
 * embed_dim) takes wqkv [(Hq + Hkv)*Dk + Hkv*Dv, Dm] (and bqkv), one whose
 * kv_dim equals its value_dim wq [Hq*Dk, Dm] and wkv [Hkv*(Dk + Dv), Dkv]
 * (Wk's rows, then Wv's; bq and bkv), so every projection stays one GEMM,
 * and one whose kv_dim and value_dim differ wq, wk [Hkv*Dk, Dkv] and wv
 * [Hkv*Dv, Dvin] (bq and bkv [Hkv*(Dk + Dv)]). The per-head parameters are
 * small host arrays, uploaded as vkattn_mha_set_weights does. Setting host
 * weights again makes the layer read its own copy. */
typedef struct vkattn_mha_weight_tensors {
    vkattn_tensor wqkv;    /* self-attention */
    vkattn_tensor wq, wkv; /* not self-attention, kv_dim == value_dim */
    vkattn_tensor wk, wv;  /* kv_dim != value_dim */
    vkattn_tensor wo;      /* [Dm, Hq*Dv] */
    vkattn_tensor bqkv;    /* desc.bias, self-attention */
    vkattn_tensor bq, bkv; /* desc.bias, not self-attention */
    vkattn_tensor bo;      /* desc.bias */
    const float *q_norm, *k_norm, *sinks, *alibi_slopes; /* as in vkattn_mha_weights */
    const float *bias_k, *bias_v;                        /* as in vkattn_mha_weights */
} vkattn_mha_weight_tensors;

VKATTN_API vkattn_result vkattn_mha_set_weight_tensors(vkattn_mha *mha,
                                                       const vkattn_mha_weight_tensors *t);

/* Copies the layer's projection weights back to the host as the device
 * holds them: desc.weight_dtype (f32, f16 or bf16 values as uint16_t bits
 * for the 16-bit types, or q8_0 blocks), the biases in that float type (f32
 * beside q8_0). Shapes as vkattn_mha_weights': wq [Hq*Dk, Dm], wk
 * [Hkv*Dk, Dkv], wv [Hkv*Dv, Dvin], wo [Dm, Hq*Dv]; with desc.bias bq
 * [Hq*Dk], bk [Hkv*Dk], bv [Hkv*Dv], bo [Dm]; with desc.add_bias_kv
 * bias_k [Hkv*Dk] and bias_v [Hkv*Dv] in desc.dtype (f32, or f16/bf16 bits),
 * the type the layer keeps them in. NULL destinations are skipped
 * (vkattn_dtype_row_bytes gives the sizes). Synchronous. */
typedef struct vkattn_mha_weight_copy {
    void *wq, *wk, *wv, *wo;
    void *bq, *bk, *bv, *bo;
    void *bias_k, *bias_v; /* desc.add_bias_kv */
} vkattn_mha_weight_copy;
VKATTN_API vkattn_result vkattn_mha_get_weights(vkattn_mha *mha, const vkattn_mha_weight_copy *dst);

/* Structured pruning: keeps the `count` query heads `keep` (distinct, each
 * below Hq, in any order; they stay in ascending order) and removes the
 * others for good. Wq's rows and Wo's columns of the removed heads go (the
 * projections shrink, the layer gets faster), as do Wk's and Wv's rows of a
 * KV head whose whole group goes; the per-head sinks and ALiBi slopes follow
 * their heads. Where the kept heads leave the KV groups uneven (GQA: 2 of
 * one group, 1 of another), a KV head is kept once per g heads of its group
 * with g the greatest common divisor of the kept counts, so every group is
 * g heads again (K and V then repeat in memory). The pruned layer's output
 * equals the unpruned one's with the removed heads masked (head_mask 0 for
 * them, 1 for the others). Its desc changes (num_heads, num_kv_heads;
 * head_dim and v_head_dim stay): caches for its steps must be made anew. A
 * q8_0 layer needs Dv a multiple of 32 (Wo's blocks follow the heads) and
 * the new Hq * Dv a multiple of 64. Synchronous; the layer is unchanged when
 * it fails; its weights become its own (borrowed tensors are no longer
 * read). VKATTN_ERROR_INVALID_ARGUMENT names a bad `keep`. */
VKATTN_API vkattn_result vkattn_mha_prune_heads(vkattn_mha *mha, const uint32_t *keep,
                                                uint32_t count);

/* x [B, Tq, Dm]; kv [B, Tk, Dkv] for cross-attention (buffer NULL: self-
 * attention, C = x); value [B, Tk, Dvin] when the values come from another
 * tensor than the keys (torch's forward(query, key, value); buffer NULL:
 * C' = C, which needs desc.value_dim == kv_dim); y [B, Tq, Dm]; all in the
 * layer's dtype, last dimension contiguous. Masks and weights as for
 * vkattn_attention_args (the mask's head dimension is Hq). */
typedef struct vkattn_mha_forward_args {
    vkattn_tensor x;
    vkattn_tensor kv; /* optional */
    vkattn_tensor y;
    vkattn_tensor mask;        /* optional */
    vkattn_tensor key_padding; /* optional */
    vkattn_tensor weights;     /* optional, f32 */
    bool causal;
    vkattn_bool_mask bool_mask; /* the meaning of a u8 mask's nonzero values */
    /* Optional (buffer NULL: 0..Tq-1 for every batch row): the RoPE
     * position of every token, int32 [B, Tq] contiguous (left-padded
     * batches, packed sequences). Only for layers with desc.rope. */
    vkattn_tensor positions;
    /* With causal (and for the window and ALiBi): bottom-right (default) or
     * top-left (PyTorch's is_causal) */
    vkattn_causal_align causal_align;
    /* Scratch for the intermediate Q, K, V and O (vkattn_mha_scratch_size
     * bytes from scratch_offset, a multiple of 256). NULL: the layer's own
     * scratch, which vkattn_mha_forward grows as needed but
     * vkattn_cmd_mha_forward never reallocates (reserve it first). */
    vkattn_buffer *scratch;
    uint64_t scratch_offset;
    /* Optional head mask, f32 [Hq] or [B, Hq] (heads contiguous), as in
     * vkattn_attention_args: head h's attention output (and its weights) of
     * batch row b scaled by head_mask[b, h] before the output projection -
     * what vkattn_mha_prune_heads makes permanent. */
    vkattn_tensor head_mask;
    vkattn_tensor value; /* optional: C' [B, Tk, Dvin] */
    /* Packed ragged batches, as vkattn_attention_args takes them: with
     * sequences > 0, x and y are [1, sum Tq, Dm] (sequence i's tokens at
     * [q_offsets[i], q_offsets[i + 1])), kv and value [1, sum Tk, ...] with
     * k_offsets (NULL: q_offsets; self-attention: the same tokens). The
     * projections run over all the tokens at once; each sequence attends
     * to its own keys only (causal, the window, ALiBi and the appended rows
     * per sequence) and RoPE positions restart at 0 with every sequence
     * (args->positions, [1, sum Tq], overrides them; without it the layer
     * writes them into its scratch with vkCmdUpdateBuffer, so a wrapped
     * scratch buffer needs transfer usage). head_mask [Hq], [1, Hq] or
     * [sequences, Hq]; mask, key_padding and weights are refused. */
    uint32_t sequences;
    const int32_t *q_offsets, *k_offsets;
    /* Dropout on the attention probabilities (torch's dropout in training
     * mode), as vkattn_attention_args take it: dropout_p in [0, 1) (0:
     * none), the mask drawn from dropout_seed with batch row b and query
     * head h of the layer. */
    float dropout_p;
    uint64_t dropout_seed;
} vkattn_mha_forward_args;

/* Head importance for given inputs: importance[h] (Hq floats) is the root
 * mean square, over every element of y, of the change in the layer's output
 * when head h alone is masked (head_mask 0 for h, 1 for the others). The
 * output is linear in each head's output, so that change is exactly head
 * h's share of y (its attention output through Wo's columns): a head whose
 * Wo columns are zero scores 0; a larger score means a head that matters
 * more for these inputs (prune the smallest: vkattn_mha_prune_heads). Runs
 * Hq + 1 forwards of `args` (args->head_mask must be absent), submit and
 * wait each; y holds the unmasked output afterwards. */
VKATTN_API vkattn_result vkattn_mha_head_importance(vkattn_mha *mha,
                                                    const vkattn_mha_forward_args *args,
                                                    float *importance);

/* The parameters of a layer of `desc` (resolved as vkattn_mha_create would;
 * the layer need not exist): weights of each projection (Wq Hq*Dk*Dm, Wk
 * Hkv*Dk*Dkv, Wv Hkv*Dv*Dkv, Wo Dm*Hq*Dv) and biases (with desc.bias), the
 * totals, and the bytes desc.weight_dtype keeps them in (biases: that float
 * type, f32 beside q8_0). A packed Wqkv holds the same parameters as Wq, Wk
 * and Wv apart. With desc.add_bias_kv, torch's bias_k (Hkv*Dk) and bias_v
 * (Hkv*Dv) count among the biases (as torch's parameters() counts them),
 * their bytes in desc.dtype, which the layer keeps them in. (KV-cache bytes
 * per token: vkattn_kv_cache_memory.) The message goes to `error` on
 * failure. */
typedef struct vkattn_mha_param_counts {
    uint64_t wq, wk, wv, wo;
    uint64_t bq, bk, bv, bo;
    uint64_t weights, biases, total;
    uint64_t bytes;
    uint64_t bias_k, bias_v; /* desc.add_bias_kv; included in biases */
} vkattn_mha_param_counts;
VKATTN_API vkattn_result vkattn_mha_param_count(const vkattn_mha_desc *desc,
                                                vkattn_mha_param_counts *out, char *error,
                                                size_t error_size);

/* Bytes of scratch a forward with these sizes needs. */
VKATTN_API vkattn_result vkattn_mha_scratch_size(vkattn_mha *mha, uint32_t batch, uint32_t q_len,
                                                 uint32_t kv_len, uint64_t *bytes);
/* Makes the layer's own scratch large enough for these sizes (synchronous). */
VKATTN_API vkattn_result vkattn_mha_reserve(vkattn_mha *mha, uint32_t batch, uint32_t q_len,
                                            uint32_t kv_len);
/* Records the forward pass. Without args->scratch the layer's own scratch
 * must already be large enough (VKATTN_ERROR_OUT_OF_RANGE otherwise), and two
 * recorded forwards of one layer without caller scratch must not execute at
 * the same time. */
VKATTN_API vkattn_result vkattn_cmd_mha_forward(vkattn_mha *mha, VkCommandBuffer cmd,
                                                const vkattn_mha_forward_args *args);
/* Submit-and-wait form. */
VKATTN_API vkattn_result vkattn_mha_forward(vkattn_mha *mha, const vkattn_mha_forward_args *args);

/* ------------------------------------------------------ MHA layer backward
 *
 * The gradients of a loss through the layer, from the forward's inputs and
 * dy (the loss's gradient of y): the forward is recomputed (projections,
 * QK-norm, RoPE, attention with its LSE, into the scratch), then
 *     dO = dy Wo,  dWo = dy^T O,  dbo = column sums of dy,
 *     dQ, dK, dV: vkattn_attention_backward (dropout's mask regenerated),
 *     through RoPE (the inverse rotation) and QK-norm (RMSNorm's backward,
 *     and the norm weights' gradients summed over tokens and heads),
 *     dWq = dQ^T X, dbq = column sums of dQ, dX = dQ Wq + dK Wk + dV Wv
 *     (self-attention; with kv / value the keys' and values' shares go to
 *     dkv and dvalue), alike for Wk and Wv.
 * Every gradient is f32 whatever the layer's dtype, computed with f32
 * accumulation, deterministic (no atomics: the same bits every run), and
 * overwritten (accumulate: added to what the tensor holds). */
typedef struct vkattn_mha_grads {
    /* Optional each (buffer NULL: not computed), f32, contiguous, shapes as
     * vkattn_mha_weights' (torch names): wq [Hq*Dk, Dm], wk [Hkv*Dk, Dkv],
     * wv [Hkv*Dv, Dvin], wo [Dm, Hq*Dv]; with desc.bias bq, bk, bv, bo;
     * with desc.qk_norm q_norm and k_norm [Dh]; with desc.sinks sinks [Hq]. */
    vkattn_tensor wq, wk, wv, wo;
    vkattn_tensor bq, bk, bv, bo;
    vkattn_tensor q_norm, k_norm, sinks;
} vkattn_mha_grads;

typedef struct vkattn_mha_backward_args {
    /* The forward call as it was made (its y is not read and may be
     * absent; its weights must be absent). Its scratch, when given, must
     * hold vkattn_mha_backward_scratch_size bytes. Not taken: packed
     * sequences, a head mask, layers with add_bias_kv or add_zero_attn,
     * q8_0 weights. */
    vkattn_mha_forward_args forward;
    vkattn_tensor dy; /* y's shape, the layer's dtype */
    /* Outputs, f32, optional each: x's, kv's and value's shapes (dkv only
     * with forward.kv, dvalue only with forward.value). */
    vkattn_tensor dx, dkv, dvalue;
    vkattn_mha_grads grads;
    bool accumulate; /* add to the outputs instead of overwriting them */
} vkattn_mha_backward_args;

/* Bytes of scratch a backward with these sizes needs (more than the
 * forward's: it also holds the LSE, dO, dQ, dK, dV and their projections'
 * gradients, in f32). */
VKATTN_API vkattn_result vkattn_mha_backward_scratch_size(vkattn_mha *mha, uint32_t batch,
                                                          uint32_t q_len, uint32_t kv_len,
                                                          uint64_t *bytes);
/* Makes the layer's own scratch large enough for a backward of these sizes. */
VKATTN_API vkattn_result vkattn_mha_reserve_backward(vkattn_mha *mha, uint32_t batch,
                                                     uint32_t q_len, uint32_t kv_len);
VKATTN_API vkattn_result vkattn_cmd_mha_backward(vkattn_mha *mha, VkCommandBuffer cmd,
                                                 const vkattn_mha_backward_args *args);
/* Submit-and-wait form (grows the layer's own scratch as needed). */
VKATTN_API vkattn_result vkattn_mha_backward(vkattn_mha *mha, const vkattn_mha_backward_args *args);

#endif /* VKATTN_OPS_H */
