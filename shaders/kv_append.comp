// Appends one of K or V ([B, Hkv, T, D] of a step) to its pool of a KV
// cache (layout: src/ops/kvcache/kvcache.h), whose token rows hold ROW >= D
// elements (D rounded up to 8): the elements past D are written as zeros,
// so the kernels reading whole quads and octets of a row add nothing from
// them. The K and V of a step are two dispatches (their head dims may
// differ). Variant: DT = f32 / f16 / f16p / bf16 (the cache's storage),
// SRC_DT the same for K and V (a float cache of another dtype than the
// layer's: converted on the way, rounded to nearest even).
//   ELEM 0: one invocation per quad of a row; src offsets and strides in
//           quads (D a multiple of 4, rows on 4-element boundaries)
//   ELEM 1: one invocation per pair of elements of a row (the word of a
//           pair kept in 32 bits has one writer); src offsets and strides in
//           elements, read one at a time (any D, any strides)
#version 450
#extension GL_GOOGLE_include_directive : require
#include "attention_io.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WORKGROUP_SIZE = 64u;
layout(constant_id = 1) const bool ELEM = false;

layout(push_constant) uniform Push {
    uint batch, heads, tokens;
    uint units; // per pool row: quads (ELEM 0) or pairs (ELEM 1) of ROW elements
    uint dh;    // D, the source's head dim
    uint first; // src[0,0,0,0] in its binding (quads or elements)
    uint stride_b, stride_h, stride_t; // of src (quads or elements)
    uint block_size, table_width;
} pc;

layout(set = 0, binding = 0, std430) readonly buffer meta_buffer { uint meta[]; };
#ifndef SRC_DT
#define SRC_DT DT
#endif
DECLARE_IN4(1, src, SRC_DT)
DECLARE_RO(1, src_e, SRC_DT)
DECLARE_OUT4(2, pool, DT)
DECLARE_WO(2, pool_e, DT)

void main() {
    uint id = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * WORKGROUP_SIZE +
              gl_LocalInvocationID.x;
    uint u = id % pc.units;
    uint rest = id / pc.units;
    uint t = rest % pc.tokens;
    rest /= pc.tokens;
    uint h = rest % pc.heads;
    uint b = rest / pc.heads;
    if (b >= pc.batch)
        return;
    uint token = meta[b] + t; // position in the sequence
    uint block = meta[2u * pc.batch + b * pc.table_width + token / pc.block_size];
    uint row = (block * pc.heads + h) * pc.block_size + token % pc.block_size;
    uint src = pc.first + b * pc.stride_b + h * pc.stride_h + t * pc.stride_t;
    if (!ELEM) {
        vec4 x = vec4(0.0);
        if (4u * u < pc.dh)
            x = src_load4(src + u);
        pool_store4(row * pc.units + u, x);
    } else {
        vec2 x = vec2(0.0);
        if (2u * u < pc.dh)
            x.x = src_e_load(src + 2u * u);
        if (2u * u + 1u < pc.dh)
            x.y = src_e_load(src + 2u * u + 1u);
        pool_e_store_pair(row * pc.units + u, x, bvec2(true));
    }
}
