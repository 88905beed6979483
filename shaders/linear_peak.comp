// FMA throughput probe for bench_linear (not part of the library): 12
// independent accumulators per invocation, the loop unrolled 16x, as
// LAVAPIPE.md's "ideal kernel". FLOPs = invocations * iterations * 16 * 12 * 2.
#version 450
#extension GL_EXT_control_flow_attributes : require
layout(local_size_x = 64) in;
layout(set = 0, binding = 0) buffer Out { float out_[]; };
layout(push_constant) uniform Push { uint iterations; float seed; } pc;

void main() {
    float a[12];
    for (int i = 0; i < 12; i++)
        a[i] = pc.seed * float(i + 1) + float(gl_GlobalInvocationID.x);
    float m = 0.999, c = 0.001;
    for (uint it = 0u; it < pc.iterations; it++) {
        [[unroll]] for (int u = 0; u < 16; u++)
            [[unroll]] for (int i = 0; i < 12; i++)
                a[i] = fma(a[i], m, c);
    }
    float s = 0.0;
    for (int i = 0; i < 12; i++)
        s += a[i];
    out_[gl_GlobalInvocationID.x] = s;
}
