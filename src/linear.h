/* The projection GEMM with a head-split store epilogue (internal).
 *
 *     Y[m, n] = sum_k X[m, k] * W[n, k] + b[n]      m = b*T + t
 *
 * The N output columns are cut into up to three consecutive segments (Q, K
 * and V of a packed Wqkv projection, or one plain output). Column c of a
 * segment is head c / head_dim, dimension c % head_dim, and is stored to
 * dst[b, head, t, dim] through dst's strides: so one dispatch writes Q, K and V
 * directly in [B, H, T, D] layout (or any other layout the strides describe,
 * such as [B, T, H*D] for a plain output, or a KV cache's rows). */
#ifndef VKATTN_LINEAR_H
#define VKATTN_LINEAR_H

#include "internal.h"

#define VKATTN_LINEAR_MAX_SEGMENTS 3

typedef struct vkattn_linear_segment {
    uint32_t columns;  /* output columns of this segment: heads * head_dim */
    uint32_t head_dim; /* divides columns */
    vkattn_tensor dst; /* rank 4 [B, columns / head_dim, T, head_dim], last stride 1 */
} vkattn_linear_segment;

typedef struct vkattn_linear_segments_args {
    vkattn_tensor x; /* [B, T, K] (rank 2 [M, K] is B = 1, T = M) */
    vkattn_tensor w; /* [N, K], N = the sum of the segments' columns */
    vkattn_tensor b; /* optional (buffer NULL): [N] */
    uint32_t segment_count;
    vkattn_linear_segment segments[VKATTN_LINEAR_MAX_SEGMENTS];
} vkattn_linear_segments_args;

/* Validates and records. vkattn_cmd_linear is this with one segment. */
vkattn_result vkattn_cmd_linear_segments(vkattn_context *ctx, VkCommandBuffer cmd,
                                         const vkattn_linear_segments_args *args);

#endif
