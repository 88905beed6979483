/* What the linear op gives the ops above it (the MHA layer): the
 * projection GEMM with a head-split store epilogue.
 *
 *     Y[m, n] = sum_k X[m, k] * W[n, k] + b[n]      m = b*T + t
 *
 * The N output columns are cut into up to three consecutive segments (Q, K
 * and V of a packed Wqkv projection, or one plain output). Column c of a
 * segment is head c / head_dim, dimension c % head_dim, and is stored to
 * dst[b, head, t, dim] through dst's strides: so one dispatch writes Q, K and V
 * directly in [B, H, T, D] layout (or any other layout the strides describe,
 * such as [B, T, H*D] for a plain output).
 *
 * A segment may instead append to a KV cache (the MHA layer's steps): row
 * m = b*T + t is token start[b] + t of batch row b's sequence, and its
 * column h*Dh + d is stored to the K (or V) pool at
 *     ((block * Hkv + h) * block_size + token % block_size) * Dh + d,
 *     block = table[b][token / block_size],
 * start[] and table[][] read on the GPU from the step's metadata (recorded by
 * vka_kv_step_record before the GEMM; see ops/kvcache/kvcache.h). */
#ifndef VKA_LINEAR_H
#define VKA_LINEAR_H

#include "ops/kvcache/kvcache.h"

#define VKA_LINEAR_MAX_SEGMENTS 3

/* Where a segment's columns go. */
typedef enum vka_linear_target {
    VKA_LINEAR_TO_DST = 0,    /* the segment's dst tensor */
    VKA_LINEAR_TO_K_POOL = 1, /* the K pool of args->cache->cache */
    VKA_LINEAR_TO_V_POOL = 2, /* the V pool of args->cache->cache */
} vka_linear_target;

typedef struct vka_linear_segment {
    uint32_t columns;  /* output columns of this segment: heads * head_dim */
    uint32_t head_dim; /* divides columns */
    /* VKA_LINEAR_TO_DST: rank 4 [B, columns / head_dim, T, head_dim], last
     * stride 1. A pool target: unused, must stay zero (buffer NULL). */
    vkattn_tensor dst;
    /* 0 (VKA_LINEAR_TO_DST): dst. A pool target needs args->cache, columns
     * = the cache's Hkv * Dh, head_dim = its Dh; each pool once at most. */
    vka_linear_target target;
} vka_linear_segment;

/* The KV cache step that pool segments append to. */
typedef struct vka_linear_cache_dst {
    vkattn_kv_cache *cache; /* its dtype must be x's */
    /* The step's metadata binding, as vka_kv_step_record returned it for
     * this batch; may be NULL for vka_linear_segments_check only. */
    const vka_binding *meta;
    uint32_t batch;      /* sequences of the step: must be x's B */
    uint32_t new_tokens; /* tokens the step appends per sequence: must be x's T */
} vka_linear_cache_dst;

/* The heads epilogue (the MHA layer's QK-norm and RoPE): for the segments
 * in `segments`, every head's row is normalised (norm: y = x * rsqrt(mean
 * of x^2 + eps) * w) and then rotated (rope_dims > 0) before it is stored.
 * The GEMM's tiles then cover whole heads: a workgroup stages its rows in
 * shared memory, reduces each head's squares there and stores rotated
 * pairs; the epilogue costs no pass of its own. Bias comes first. */
typedef enum vka_linear_positions {
    VKA_POSITIONS_ROW = 0,    /* row t of its batch row */
    VKA_POSITIONS_CACHE = 1,  /* the KV cache step's start of the sequence + t */
    VKA_POSITIONS_TENSOR = 2, /* positions[b, t] */
} vka_linear_positions;

typedef struct vka_linear_heads {
    uint32_t segments; /* bit s: segment s gets the epilogue (0 and 1 at most) */
    bool norm;
    float eps;
    uint32_t rope_dims; /* even; 0: no rotation */
    bool rope_gptj;     /* pairs (2i, 2i+1); else (i, i + rope_dims / 2) */
    vka_linear_positions position_source;
    vkattn_tensor positions; /* VKA_POSITIONS_TENSOR: int32 [B, T], contiguous */
    /* f32 parameters: the norm weights of segments 0 and 1 ([head_dim]
     * each; present even without norm), then the angle table
     * (spec/rope.h) when rope_dims > 0 */
    vkattn_buffer *params;
    uint64_t params_offset; /* bytes, a multiple of 16 */
} vka_linear_heads;

typedef struct vka_linear_segments_args {
    vkattn_tensor x; /* [B, T, K] (rank 2 [M, K] is B = 1, T = M) */
    vkattn_tensor w; /* [N, K], N = the sum of the segments' columns */
    vkattn_tensor b; /* optional (buffer NULL): [N] */
    uint32_t segment_count;
    vka_linear_segment segments[VKA_LINEAR_MAX_SEGMENTS];
    /* optional (NULL): the KV cache step of the segments that target pools */
    const vka_linear_cache_dst *cache;
    /* optional (NULL): the heads epilogue; every segment then has one head_dim */
    const vka_linear_heads *heads;
} vka_linear_segments_args;

/* The byte alignment of a q8_0 weight tensor's offset on this device (its
 * storage buffer offset alignment, at least 16): q8_0 windows start on
 * block boundaries at such offsets. */
uint64_t vka_linear_block_align(const vkattn_context *ctx);

/* Validates everything (args->cache->meta may still be NULL) and records
 * nothing: lets a caller check before it records the step's metadata. */
vkattn_result vka_linear_segments_check(vkattn_context *ctx, const vka_linear_segments_args *args);

/* Validates and records. vkattn_cmd_linear is this with one segment. */
vkattn_result vka_cmd_linear_segments(vkattn_context *ctx, VkCommandBuffer cmd,
                                      const vka_linear_segments_args *args);

/* The backward GEMMs (linear_grad.c, shaders/gemm_grad.comp):
 *     C[m, n] = sum_k A[m, k] B[k, n] (+ bias[n]) (+ C[m, n] with accumulate)
 * over operands read through free element strides, so transposes cost
 * nothing. An operand is a buffer, the byte offset of its element (0, 0),
 * its dtype (f32, f16 or bf16; C f32, or f16 / bf16 when N, C's row stride
 * and its element offset are even and s1 is 1) and the element strides of
 * its two indices (A: m, k; B: k, n; C: m, n; bias: -, n). `a_ones`: A is
 * all ones (no buffer), so C's rows are B's column sums. Each operand must
 * fit one storage binding. Records one dispatch; the caller places the
 * barriers. */
typedef struct vka_gemm_operand {
    const vkattn_buffer *buffer;
    uint64_t offset;
    vkattn_dtype dtype;
    uint64_t s0, s1;
} vka_gemm_operand;

typedef struct vka_gemm_args {
    uint32_t m, n, k;
    vka_gemm_operand a, b, c;
    vka_gemm_operand bias; /* optional: buffer NULL */
    bool a_ones;
    bool accumulate;
} vka_gemm_args;

/* `what` names the call in messages ("vkattn_linear_backward: dw"). */
vkattn_result vka_cmd_gemm(vkattn_context *ctx, VkCommandBuffer cmd, const vka_gemm_args *g,
                           const char *what);

#endif
