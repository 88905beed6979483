// Appends K and V [B, Hkv, T, Dh] of a step to a KV cache's block pools
// (layout: src/ops/kvcache/kvcache.h). One invocation copies four elements of K and the
// same four of V. Variant: DT = f32 / f16 / f16p (the cache's storage).
#version 450
#extension GL_GOOGLE_include_directive : require
#include "attention_io.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WORKGROUP_SIZE = 64u;

layout(push_constant) uniform Push {
    uint batch, heads, tokens, dh4; // dh4: head_dim / 4
    uint k_first, v_first;          // vec4 index of k[0,0,0,0] / v[...] in their bindings
    uint stride_b, stride_h, stride_t; // of k and v, in vec4s
    uint block_size, table_width;
} pc;

layout(set = 0, binding = 0, std430) readonly buffer meta_buffer { uint meta[]; };
DECLARE_IN4(1, k_src, DT)
DECLARE_IN4(2, v_src, DT)
DECLARE_OUT4(3, k_pool, DT)
DECLARE_OUT4(4, v_pool, DT)

void main() {
    uint id = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * WORKGROUP_SIZE +
              gl_LocalInvocationID.x;
    uint d4 = id % pc.dh4;
    uint rest = id / pc.dh4;
    uint t = rest % pc.tokens;
    rest /= pc.tokens;
    uint h = rest % pc.heads;
    uint b = rest / pc.heads;
    if (b >= pc.batch)
        return;
    uint token = meta[b] + t; // position in the sequence
    uint block = meta[2u * pc.batch + b * pc.table_width + token / pc.block_size];
    uint dst = ((block * pc.heads + h) * pc.block_size + token % pc.block_size) * pc.dh4 + d4;
    uint src = b * pc.stride_b + h * pc.stride_h + t * pc.stride_t + d4;
    k_pool_store4(dst, k_src_load4(pc.k_first + src));
    v_pool_store4(dst, v_src_load4(pc.v_first + src));
}
