// Streaming-read probe for bench_linear (not part of the library): sums a
// uniform texel buffer (rgba32f or rgba16f view): each workgroup a
// contiguous block, its lanes on adjacent texels, 4 independent sums.
#version 450
#extension GL_EXT_control_flow_attributes : require
layout(local_size_x = 64) in;
layout(set = 0, binding = 0) uniform samplerBuffer src;
layout(set = 0, binding = 1) buffer Out { float out_[]; };
layout(push_constant) uniform Push { uint texels; uint invocations; } pc;

void main() {
    uint i = gl_GlobalInvocationID.x;
    vec4 s[4] = vec4[4](vec4(0.0), vec4(0.0), vec4(0.0), vec4(0.0));
    uint groups = pc.invocations / 64u;
    uint per = (pc.texels + groups - 1u) / groups;
    uint begin = gl_WorkGroupID.x * per, end = min(begin + per, pc.texels);
    uint step = 64u;
    uint t = begin + gl_LocalInvocationID.x;
    for (; t + 3u * step < end; t += 4u * step) {
        [[unroll]] for (uint u = 0u; u < 4u; u++)
            s[u] += texelFetch(src, int(t + u * step));
    }
    for (; t < end; t += step)
        s[0] += texelFetch(src, int(t));
    vec4 a = s[0] + s[1] + s[2] + s[3];
    out_[i] = a.x + a.y + a.z + a.w;
}
