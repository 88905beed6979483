/* The rope op's own files: checks and entry points (rope_api.c), recording
 * (rope_record.c). */
#ifndef VKA_ROPE_INTERNAL_H
#define VKA_ROPE_INTERNAL_H

#include "core/context.h"

/* A checked call: x and out rank 4 [B, H, T, D] of one dtype, last
 * dimension contiguous (out == x: in place); positions int32 [B, T]
 * contiguous, or buffer NULL for position_offset + t. */
typedef struct vka_rope_call {
    vkattn_tensor x, out, positions;
    bool in_place;
    vkattn_rope_desc rope; /* resolved (spec/rope.h) */
    uint32_t position_offset;
} vka_rope_call;

vkattn_result vka_rope_record(vkattn_context *ctx, VkCommandBuffer cmd, const vka_rope_call *c);

#endif
