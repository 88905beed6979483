// Streaming-read limit kernel of vkattn-bench: sums `count` 16-byte or 8-byte
// elements (4 values each) of one binding window, 4 independent vec4 sums so
// loads are not serialised behind one add chain. Two access patterns (spec
// constant LANE_RUNS), the host keeps whichever is faster on the device:
//   0: each workgroup one contiguous block, its 64 lanes on adjacent
//      elements (coalesced: what GPUs want);
//   1: each invocation one contiguous run of its own (CPU drivers: every lane
//      streams through its own cache lines; 2-4x faster on lavapipe).
// SOURCE picks the binding, one SPIR-V module per value:
//   0 storage buffer vec4 (f32)      1 storage buffer f16vec4 (16-bit storage)
//   2 storage buffer uvec2 (f16 pairs packed in words: any device)
//   3 uniform texel buffer (rgba32f or rgba16f: the view's format decides)
#version 450
#extension GL_EXT_control_flow_attributes : require
#if SOURCE == 1
#extension GL_EXT_shader_16bit_storage : require
#endif

layout(local_size_x = 64) in;

#if SOURCE == 0
layout(std430, set = 0, binding = 0) readonly buffer Src { vec4 src[]; };
vec4 load(uint i) { return src[i]; }
#elif SOURCE == 1
layout(std430, set = 0, binding = 0) readonly buffer Src { f16vec4 src[]; };
vec4 load(uint i) { return vec4(src[i]); }
#elif SOURCE == 2
layout(std430, set = 0, binding = 0) readonly buffer Src { uvec2 src[]; };
vec4 load(uint i) {
    uvec2 w = src[i];
    return vec4(unpackHalf2x16(w.x), unpackHalf2x16(w.y));
}
#elif SOURCE == 3
#extension GL_EXT_samplerless_texture_functions : require
layout(set = 0, binding = 0) uniform textureBuffer src; // as vkattn's kernels declare theirs
vec4 load(uint i) { return texelFetch(src, int(i)); }
#else
#error "SOURCE must be 0..3"
#endif

layout(std430, set = 0, binding = 1) writeonly buffer Out { float out_[]; };
layout(push_constant) uniform Push { uint count; } pc; // elements in the window
layout(constant_id = 0) const uint LANE_RUNS = 0u;

void main() {
    uint begin, end, step;
    if (LANE_RUNS != 0u) {
        uint total = gl_NumWorkGroups.x * 64u;
        uint per = (pc.count + total - 1u) / total;
        begin = gl_GlobalInvocationID.x * per;
        end = min(begin + per, pc.count);
        step = 1u;
    } else {
        uint groups = gl_NumWorkGroups.x;
        uint per = ((pc.count + groups - 1u) / groups + 63u) & ~63u;
        begin = gl_WorkGroupID.x * per + gl_LocalInvocationID.x;
        end = min(gl_WorkGroupID.x * per + per, pc.count);
        step = 64u;
    }
    vec4 s[4] = vec4[4](vec4(0.0), vec4(0.0), vec4(0.0), vec4(0.0));
    uint t = begin;
    for (; t + 3u * step < end; t += 4u * step) {
        [[unroll]] for (uint u = 0u; u < 4u; u++)
            s[u] += load(t + u * step);
    }
    for (; t < end; t += step)
        s[0] += load(t);
    vec4 a = (s[0] + s[1]) + (s[2] + s[3]);
    out_[gl_GlobalInvocationID.x] = a.x + a.y + a.z + a.w; // keeps every load alive
}
