/* The linear op after validation (linear.c), and its recording
 * (linear_record.c): kernel choice, tile sizes per device, and the split into
 * dispatches whose binding windows fit the device's limits. */
#ifndef VKATTN_LINEAR_PLAN_H
#define VKATTN_LINEAR_PLAN_H

#include "linear.h"

/* A validated problem: strides resolved, all sizes >= 1. Row m of x is
 * (batch m / T, row m % T). */
typedef struct vkattn_linear_problem {
    vkattn_tensor x, w, b; /* b.buffer NULL: no bias */
    uint32_t segment_count;
    /* A segment's destination; for a pool segment, the whole pool as a rank-1
     * tensor (bound whole: the rows' places are only known on the GPU). */
    vkattn_tensor dst[VKATTN_LINEAR_MAX_SEGMENTS];
    uint32_t pool_segments;        /* bit s: segment s appends to a pool */
    const vkattn_kv_cache *cache;  /* with pool segments, else NULL */
    vkattn_binding meta;           /* the step's metadata (recording only) */
    uint32_t batch;                /* rows of the metadata (= B) */
    uint64_t seg_start[VKATTN_LINEAR_MAX_SEGMENTS + 1]; /* first column; [count] = N */
    uint64_t head_dim[VKATTN_LINEAR_MAX_SEGMENTS];
    uint64_t B, T, M, N, K;
    uint64_t x_sb, x_st, w_sn; /* element strides */
} vkattn_linear_problem;

/* Records the dispatches (and barriers between them) of a validated problem.
 * Fails without recording anything when no split fits the device. */
vkattn_result vkattn_linear_record(vkattn_context *ctx, VkCommandBuffer cmd,
                                   const vkattn_linear_problem *p);

#endif
