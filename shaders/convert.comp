// dst = scale * src with dtype conversion (f32, f16 and bf16, either f16
// storage path). Variants: SRC_DT and DST_DT are f32 / f16 / f16p / bf16
// (tensor_io.glsl).
// Work is split in pairs of destination elements aligned to 32-bit words, so
// packed-f16 stores never race: each word has exactly one writer.
#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#include "tensor_io.glsl"

// Workgroup size: one specialization constant feeds both the declared size
// and the arithmetic that needs it.
layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WORKGROUP_SIZE = 64u;
// Destination pairs handled by one invocation.
layout(constant_id = 1) const uint PAIRS_PER_INVOCATION = 4u;

layout(push_constant) uniform Push {
    uint src_offset; // first source element, relative to the binding
    uint dst_offset; // first destination element, relative to the binding
    uint count;      // elements to convert
    float scale;
} pc;

DECLARE_RO(0, src, SRC_DT)
DECLARE_WO(1, dst, DST_DT)

void main() {
    uint dst_end = pc.dst_offset + pc.count;
    uint first_pair = pc.dst_offset >> 1;
    uint last_pair = (dst_end - 1u) >> 1;
    uint base = first_pair + linear_invocation(WORKGROUP_SIZE) * PAIRS_PER_INVOCATION;
    [[unroll]] for (uint k = 0u; k < PAIRS_PER_INVOCATION; k++) {
        uint p = base + k;
        if (p > last_pair)
            return;
        uint e = 2u * p;
        bvec2 inside = bvec2(e >= pc.dst_offset, e + 1u < dst_end);
        vec2 v = vec2(0.0);
        if (inside.x)
            v.x = src_load(pc.src_offset + (e - pc.dst_offset)) * pc.scale;
        if (inside.y)
            v.y = src_load(pc.src_offset + (e + 1u - pc.dst_offset)) * pc.scale;
        dst_store_pair(p, v, inside);
    }
}
